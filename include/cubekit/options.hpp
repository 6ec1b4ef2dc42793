#pragma once
/// Options declared once. Next to each enum stands one name table, and next to each Options struct
/// one declaration per field: its name, a one-line doc, the values or range it accepts. The default
/// is the struct's own (RcmgOptions{}), never restated. The CLI binds its flags from these
/// declarations (flag = the field name in kebab case), prints --help and writes the JSON
/// "parameters" from them; the Python module reads the same declarations for its keywords,
/// docstrings and checks; the library checks its options with them.
///
/// An enum's names, in its header:
///
///     template <> struct EnumNames<Precision> {
///         static constexpr EnumName<Precision> names[] = {{Precision::F32, "f32"}, {Precision::F64, "f64"}};
///     };
///     enum_name(Precision::F64) == "f64";
///     parse_enum<Precision>("f16", "precision");   // throws InvalidInput("precision = 'f16': expected f32 or f64")
///
/// An Options struct's fields, right after it:
///
///     template <class O, class V>
///         requires std::same_as<std::remove_const_t<O>, RcmgOptions>
///     void visit_fields(O& o, V&& visit) {
///         visit(o.connectivity, Field{.name = "connectivity", .doc = "window: 8 (3x3 square) or 4 (cross)",
///                                     .one_of = {4, 8}});
///         visit(o.reject, Field{.name = "reject", .doc = "pairs rejected, r", .min = 0});
///     }
///
///     check_fields(options, "rcmg");                  // "rcmg: reject = -1; expected >= 0"
///     for (const NamedValue& p : field_values(options)) ...   // ("connectivity", 8), ("reject", 1), ...
///
/// A front end walks the same declarations: the CLI (tools/cubekit/option_flags.hpp) adds
/// --kebab-name per flag field with the doc as help, value_text(O{} field) as the default shown
/// and field_choices / the range as its check; a Python binding makes each flag field a keyword of
/// the same name, its doc a docstring line, O{} the default, and calls check_fields (the library
/// does too), so the three never restate a default or a range.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "cubekit/error.hpp"

namespace cubekit {

// ---- enum names ------------------------------------------------------------------------------------

/// One spelling of an enumerator.
template <class E>
struct EnumName {
    E value;
    std::string_view name;
};

/// Specialised next to each enum E with
///     static constexpr EnumName<E> names[] = {...};     // one per enumerator, in display order: the
///                                                       // names --help lists and enum_name returns
/// and optionally
///     static constexpr EnumName<E> aliases[] = {...};   // further spellings parse_enum accepts
///     static constexpr bool case_insensitive = true;    // parse_enum ignores ASCII case and blanks
template <class E>
struct EnumNames;

/// An enum with a name table.
template <class E>
concept NamedEnum = std::is_enum_v<E> && requires { std::size(EnumNames<E>::names); };

/// The name of `value` ("?" for a value outside the table).
template <NamedEnum E>
constexpr std::string_view enum_name(E value) {
    for (const EnumName<E>& n : EnumNames<E>::names)
        if (n.value == value) return n.name;
    return "?";
}

/// The names, in display order (aliases not included).
template <NamedEnum E>
std::vector<std::string_view> enum_choices() {
    std::vector<std::string_view> out;
    for (const EnumName<E>& n : EnumNames<E>::names) out.push_back(n.name);
    return out;
}

/// "a", "a or b", "a, b or c".
inline std::string join_choices(const std::vector<std::string>& items) {
    std::string s;
    for (std::size_t i = 0; i < items.size(); ++i) s += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
    return s;
}

/// The value `text` names, or nullopt. With `aliases` false only the names of enum_choices count.
template <NamedEnum E>
std::optional<E> find_enum(std::string_view text, bool aliases = true) {
    std::string key(text);
    if constexpr (requires { EnumNames<E>::case_insensitive; }) {
        const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
        while (!key.empty() && blank(key.back())) key.pop_back();
        key.erase(key.begin(), std::find_if_not(key.begin(), key.end(), blank));
        for (char& c : key)
            if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    }
    for (const EnumName<E>& n : EnumNames<E>::names)
        if (n.name == key) return n.value;
    if constexpr (requires { std::size(EnumNames<E>::aliases); })
        if (aliases)
            for (const EnumName<E>& n : EnumNames<E>::aliases)
                if (n.name == key) return n.value;
    return std::nullopt;
}

/// "a, b or c": the names of E, for messages.
template <NamedEnum E>
std::string enum_choices_text() {
    std::vector<std::string> names;
    for (std::string_view n : enum_choices<E>()) names.emplace_back(n);
    return join_choices(names);
}

/// The value `text` names (a name or an alias). Throws InvalidInput
/// "<what> = '<text>': expected a, b or c".
template <NamedEnum E>
E parse_enum(std::string_view text, std::string_view what) {
    if (const std::optional<E> v = find_enum<E>(text)) return *v;
    throw InvalidInput(std::string(what) + " = '" + std::string(text) + "': expected " + enum_choices_text<E>());
}

// ---- field declarations ----------------------------------------------------------------------------

/// Up to 8 allowed numeric values of a field (connectivity: {4, 8}); empty = no such restriction.
struct OneOf {
    std::array<double, 8> values{};
    int count = 0;
    constexpr OneOf() = default;
    constexpr OneOf(std::initializer_list<double> list) {
        for (double v : list) values[std::size_t(count++)] = v;
    }
    constexpr bool empty() const { return count == 0; }
    constexpr bool contains(double v) const {
        for (int i = 0; i < count; ++i)
            if (values[std::size_t(i)] == v) return true;
        return false;
    }
};

/// The enumerators an enum field accepts when its type has more (RcmgOptions::out_type: f32, f64).
template <class... E>
    requires(std::is_enum_v<E> && ...)
constexpr OneOf enum_values(E... values) {
    return OneOf{double(std::underlying_type_t<E>(values))...};
}

/// The declaration of one option field.
struct Field {
    /// The field's name, snake_case: the Python keyword, and the CLI flag in kebab case
    /// (max_iter ↔ --max-iter; a one-letter name with a short_flag is that short flag alone).
    std::string_view name;
    /// One line: what the field does and the accepted values, for --help and docstrings.
    std::string_view doc;
    /// Inclusive bounds unless the matching *_exclusive is set; unset = unbounded.
    std::optional<double> min = std::nullopt;
    std::optional<double> max = std::nullopt;
    bool min_exclusive = false;
    bool max_exclusive = false;
    /// The only values allowed, if any (enum fields: enum_values(...)).
    OneOf one_of = {};
    /// A value that means "chosen automatically" (shown as "auto", exempt from the range; a front end
    /// offers it by leaving the option out, e.g. BaselineOptions::threshold = -1).
    std::optional<double> automatic = std::nullopt;
    /// Booleans that default to true: the CLI offers only the negation, --no-<name>, with this help
    /// (e.g. symmetry: "do not use the 8-fold symmetry of a square pixel set").
    std::string_view negation = {};
    /// An extra short CLI spelling, e.g. "-k".
    std::string_view short_flag = {};
    /// Enum fields: the CLI also accepts the enum's aliases (convert's --out-type float32), as
    /// keywords always do.
    bool aliases = false;
    /// False for fields that are no CLI flag or keyword of their own (data such as a mask or
    /// explicit centroids; switches a front end sets itself).
    bool flag = true;
};

/// True when `v` is the field's automatic value (NaN matches a NaN automatic value: "the model's").
inline bool is_automatic(double v, const Field& field) {
    return field.automatic && (v == *field.automatic || (std::isnan(v) && std::isnan(*field.automatic)));
}

/// Field value types the declarations support as flags and keywords: numbers, booleans, enums,
/// fixed arrays of reals, text (a MATLAB variable name; "" = none given) and optional enums
/// (unset = the input's, e.g. the layout convert writes).
template <class T>
concept FieldScalar = std::same_as<T, bool> || std::same_as<T, int> || std::same_as<T, std::int64_t> ||
                      std::same_as<T, std::uint64_t> || std::same_as<T, double> || NamedEnum<T>;
template <class T>
struct is_field_array : std::false_type {};
template <std::size_t N>
struct is_field_array<std::array<double, N>> : std::true_type {};
template <class T>
struct is_optional_enum : std::false_type {};
template <NamedEnum E>
struct is_optional_enum<std::optional<E>> : std::true_type {};
template <class T>
concept FieldValueType =
    FieldScalar<T> || is_field_array<T>::value || std::same_as<T, std::string> || is_optional_enum<T>::value;

/// The names an enum field accepts, in display order (Field::one_of applied).
template <NamedEnum E>
std::vector<std::string_view> field_choices(const Field& field) {
    std::vector<std::string_view> out;
    for (const EnumName<E>& n : EnumNames<E>::names)
        if (field.one_of.empty() || field.one_of.contains(double(std::underlying_type_t<E>(n.value))))
            out.push_back(n.name);
    return out;
}

/// Options types with declared fields.
template <class O>
concept DeclaredOptions = requires(O& o) { visit_fields(o, [](auto&, const Field&) {}); };

/// Calls visit(value, field) for every declared field of `options` that is a flag (Field::flag).
template <DeclaredOptions O, class V>
void visit_flags(O& options, V&& visit) {
    visit_fields(options, [&](auto& value, const Field& field) {
        using T = std::remove_const_t<std::remove_reference_t<decltype(value)>>;
        if constexpr (FieldValueType<T>)
            if (field.flag) visit(value, field);
    });
}

// ---- values as text ----------------------------------------------------------------------------------

/// Shortest text that reads back as the same double ("0.0001", "15", "nan").
inline std::string number_text(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general);  // 0.0001, not 1e-04
    return std::string(buf, r.ptr);
}

/// A field value as users type it: 8, 0.0001, f64, true, 31.5,31.5; "auto" for Field::automatic;
/// "" for an unset optional enum.
template <FieldValueType T>
std::string value_text(const T& value, const Field& field = {}) {
    if constexpr (std::same_as<T, std::string>) {
        return value;
    } else if constexpr (is_optional_enum<T>::value) {
        return value ? std::string(enum_name(*value)) : std::string();
    } else if constexpr (NamedEnum<T>) {
        return std::string(enum_name(value));
    } else if constexpr (std::same_as<T, bool>) {
        return value ? "true" : "false";
    } else if constexpr (is_field_array<T>::value) {
        std::string s;
        for (double v : value) s += (s.empty() ? "" : ",") + number_text(v);
        return s;
    } else {
        if (is_automatic(double(value), field)) return "auto";
        if constexpr (std::same_as<T, double>) return number_text(value);
        else return std::to_string(value);
    }
}

/// What a field accepts, for messages: "4 or 8", ">= 0", "0 <= vote_percent < 100", "f32 or f64".
template <FieldValueType T>
std::string expected_text(const Field& field) {
    if constexpr (std::same_as<T, std::string>) {
        return {};
    } else if constexpr (is_optional_enum<T>::value) {
        return expected_text<typename T::value_type>(field);
    } else if constexpr (NamedEnum<T>) {
        std::vector<std::string> names;
        for (std::string_view n : field_choices<T>(field)) names.emplace_back(n);
        return join_choices(names);
    } else {
        std::string range;
        if (!field.one_of.empty()) {
            std::vector<std::string> items;
            for (int i = 0; i < field.one_of.count; ++i) items.push_back(number_text(field.one_of.values[std::size_t(i)]));
            range = join_choices(items);
        } else if (field.min && field.max) {
            range = number_text(*field.min) + (field.min_exclusive ? " < " : " <= ") + std::string(field.name) +
                    (field.max_exclusive ? " < " : " <= ") + number_text(*field.max);
        } else if (field.min) {
            range = (field.min_exclusive ? "> " : ">= ") + number_text(*field.min);
        } else if (field.max) {
            range = (field.max_exclusive ? "< " : "<= ") + number_text(*field.max);
        }
        return range;
    }
}

/// Empty when `value` satisfies the declaration, else what is expected (see expected_text; doubles
/// must also be finite). The automatic value is accepted when `allow_automatic`.
template <FieldValueType T>
std::string field_violation(const T& value, const Field& field, bool allow_automatic = true) {
    if constexpr (std::same_as<T, std::string>) {
        return {};
    } else if constexpr (is_optional_enum<T>::value) {
        return value ? field_violation(*value, field) : std::string();
    } else if constexpr (NamedEnum<T>) {
        const bool known = enum_name(value) != "?" &&
                           (field.one_of.empty() || field.one_of.contains(double(std::underlying_type_t<T>(value))));
        return known ? std::string() : expected_text<T>(field);
    } else if constexpr (std::same_as<T, bool> || is_field_array<T>::value) {
        if constexpr (is_field_array<T>::value)
            for (double v : value)
                if (!std::isfinite(v)) return "finite numbers";
        return {};
    } else {
        const double v = double(value);
        if (allow_automatic && is_automatic(v, field)) return {};
        const bool finite = std::isfinite(v);
        const bool ok = finite && (field.one_of.empty() || field.one_of.contains(v)) &&
                        (!field.min || (field.min_exclusive ? v > *field.min : v >= *field.min)) &&
                        (!field.max || (field.max_exclusive ? v < *field.max : v <= *field.max));
        if (ok) return {};
        const std::string range = expected_text<T>(field);
        if (!finite) return range.empty() ? "a finite number" : "a finite number " + range;
        return range;
    }
}

/// Throws InvalidInput "<function>: <name> = <value>; expected <what>" unless `value` satisfies `field`.
template <FieldValueType T>
void check_field(const T& value, const Field& field, std::string_view function) {
    const std::string expected = field_violation(value, field);
    if (!expected.empty())
        throw InvalidInput(std::string(function) + ": " + std::string(field.name) + " = " + value_text(value) +
                           "; expected " + expected);
}

/// Checks every declared field of `options` (check_field); the family's check function adds the
/// rules that join several fields or need the input.
template <DeclaredOptions O>
void check_fields(const O& options, std::string_view function) {
    visit_fields(options, [&](const auto& value, const Field& field) {
        using T = std::remove_const_t<std::remove_reference_t<decltype(value)>>;
        if constexpr (FieldValueType<T>) check_field(value, field, function);
    });
}

// ---- values for JSON and keywords --------------------------------------------------------------------

/// A field value as a front end reports it: bool, integer, real, text (enum names, "auto"), reals,
/// or null (an unset optional enum).
using FieldValue = std::variant<bool, std::int64_t, std::uint64_t, double, std::string, std::vector<double>, std::nullptr_t>;

/// One field's name and value.
struct NamedValue {
    std::string_view name;
    FieldValue value;
};

/// The value of one field as reported (Field::automatic → "auto", enums → their names, an unset
/// optional enum → null).
template <FieldValueType T>
FieldValue field_value(const T& value, const Field& field) {
    if constexpr (std::same_as<T, std::string>) {
        return value;
    } else if constexpr (is_optional_enum<T>::value) {
        if (!value) return nullptr;
        return std::string(enum_name(*value));
    } else if constexpr (NamedEnum<T>) {
        return std::string(enum_name(value));
    } else if constexpr (std::same_as<T, bool>) {
        return value;
    } else if constexpr (is_field_array<T>::value) {
        return std::vector<double>(value.begin(), value.end());
    } else {
        if (is_automatic(double(value), field)) return std::string("auto");
        if constexpr (std::same_as<T, double>) return value;
        else if constexpr (std::same_as<T, std::uint64_t>) return value;
        else return std::int64_t(value);
    }
}

/// Name and value of every flag field of `options`, in declaration order (the JSON "parameters").
template <DeclaredOptions O>
std::vector<NamedValue> field_values(const O& options) {
    std::vector<NamedValue> out;
    visit_flags(options, [&](const auto& value, const Field& field) { out.push_back({field.name, field_value(value, field)}); });
    return out;
}

}  // namespace cubekit
