#pragma once
// Keywords ↔ option structs, through the declarations next to each Options struct
// (cubekit/options.hpp): a keyword is a field's name, its default the struct's, its check the
// field's. Nothing here names a field of any family.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <set>
#include <string>

#include "cubekit/error.hpp"
#include "cubekit/options.hpp"

namespace cubekit::python {

namespace py = pybind11;

/// One keyword's value into a field. None leaves the default (or picks Field::automatic).
template <FieldValueType T>
void assign_field(T& value, py::handle v, const Field& field, std::string_view function) {
    const std::string what = std::string(function) + ": " + std::string(field.name);
    if (v.is_none()) {
        if constexpr (std::is_arithmetic_v<T> && !std::same_as<T, bool>)
            if (field.automatic) value = T(*field.automatic);
        return;
    }
    if constexpr (std::same_as<T, std::string>) {
        if (!py::isinstance<py::str>(v)) throw InvalidInput(what + " = " + std::string(py::repr(v)) + "; expected a str");
        value = v.cast<std::string>();
    } else if constexpr (is_optional_enum<T>::value) {
        typename T::value_type e{};
        assign_field(e, v, field, function);
        value = e;
    } else if constexpr (NamedEnum<T>) {
        if (!py::isinstance<py::str>(v) && !py::hasattr(v, "kind"))  // a NumPy dtype also names an element type
            throw InvalidInput(what + " = " + std::string(py::repr(v)) + "; expected " + expected_text<T>(field));
        value = parse_enum<T>(std::string(py::str(v)), std::string(function) + ": " + std::string(field.name));
    } else if constexpr (std::same_as<T, bool>) {
        if (!py::isinstance<py::bool_>(v) && !(py::hasattr(v, "dtype") && py::str(v.attr("dtype")).cast<std::string>() == "bool"))
            throw InvalidInput(what + " = " + std::string(py::repr(v)) + "; expected True or False");
        value = v.cast<bool>();
    } else if constexpr (is_field_array<T>::value) {
        const py::sequence s = py::reinterpret_borrow<py::sequence>(v);
        if (!py::isinstance<py::sequence>(v) || py::len(s) != value.size())
            throw InvalidInput(what + " = " + std::string(py::repr(v)) + "; expected " + std::to_string(value.size()) +
                               " numbers");
        for (std::size_t i = 0; i < value.size(); ++i) value[i] = s[i].template cast<double>();
    } else if constexpr (std::same_as<T, double>) {
        if (py::isinstance<py::bool_>(v) || !py::hasattr(v, "__float__"))
            throw InvalidInput(what + " = " + std::string(py::repr(v)) + "; expected a number");
        value = v.cast<double>();
    } else {  // integers: an int, or a float with no fraction (NumPy scalars included)
        if (py::isinstance<py::bool_>(v) || !(py::hasattr(v, "__index__") || py::hasattr(v, "__float__")))
            throw InvalidInput(what + " = " + std::string(py::repr(v)) + "; expected an integer");
        if (!py::hasattr(v, "__index__")) {
            const double d = v.cast<double>();
            if (!std::isfinite(d) || d != std::floor(d))
                throw InvalidInput(what + " = " + std::string(py::repr(v)) + "; expected an integer");
        }
        const py::object i = py::reinterpret_steal<py::object>(PyNumber_Long(v.ptr()));
        if (!i) throw py::error_already_set();
        value = i.cast<T>();
    }
}

/// The options of `function` from keywords: each key must be a flag field of O (TypeError
/// otherwise, like Python's own for an unknown keyword); the fields are checked.
template <DeclaredOptions O>
O options_from(const py::dict& keywords, const char* function, O options = {}) {
    std::set<std::string> used;
    visit_flags(options, [&](auto& value, const Field& field) {
        const py::str key(std::string(field.name));
        if (!keywords.contains(key)) return;
        assign_field(value, keywords[key], field, function);
        used.insert(std::string(field.name));
    });
    for (const auto& item : keywords) {
        const std::string key = py::str(item.first);
        if (!used.count(key)) {
            std::string known;
            visit_flags(options, [&](auto&, const Field& f) { known += (known.empty() ? "" : ", ") + std::string(f.name); });
            throw py::type_error(std::string(function) + "() got an unexpected keyword argument '" + key +
                                 "'; its options are " + known);
        }
    }
    check_fields(options, function);
    return options;
}

/// A reported field value as a Python object.
inline py::object to_python(const FieldValue& v) {
    return std::visit([](const auto& x) -> py::object { return py::cast(x); }, v);
}

/// {name: value} of every flag field (the CLI's JSON "parameters").
template <DeclaredOptions O>
py::dict parameters(const O& options) {
    py::dict out;
    for (const NamedValue& p : field_values(options)) out[py::str(std::string(p.name))] = to_python(p.value);
    return out;
}

/// The names an enum field accepts, as a list.
template <NamedEnum E>
py::list choice_list(const Field& field) {
    py::list c;
    for (std::string_view n : field_choices<E>(field)) c.append(std::string(n));
    return c;
}

/// The declarations of O for the Python layer's signatures and docstrings: a list of
/// (name, default, doc, choices or None) in declaration order.
template <DeclaredOptions O>
py::list declarations() {
    py::list out;
    const O defaults{};
    visit_flags(defaults, [&](const auto& value, const Field& field) {
        using T = std::remove_cvref_t<decltype(value)>;
        py::object def = to_python(field_value(value, field));
        if constexpr (std::is_arithmetic_v<T> && !std::same_as<T, bool>)
            if (field.automatic && double(value) == *field.automatic) def = py::none();  // "auto" is None in Python
        py::object choices = py::none();
        if constexpr (NamedEnum<T>) {
            choices = choice_list<T>(field);
        } else if constexpr (is_optional_enum<T>::value) {
            choices = choice_list<typename T::value_type>(field);
        } else {
            const std::string e = expected_text<T>(field);
            if (!e.empty()) choices = py::str(e);
        }
        out.append(py::make_tuple(std::string(field.name), def, std::string(field.doc), choices));
    });
    return out;
}

}  // namespace cubekit::python
