#pragma once
// The CLI side of the option declarations (cubekit/options.hpp): one flag per declared field
// (--kebab-case of the field name, the doc as help, the default from the Options object, choices
// and ranges checked as the value is parsed), the JSON "parameters" of a run, and the spelling of
// library messages in flags ("max_iter = -1" → "--max-iter = -1", "device 7" → "--device 7").
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "cubekit/options.hpp"

namespace cubekit::cli {

/// The flags bound to one Options object, by field name.
class BoundFlags {
public:
    void add(std::string_view field, CLI::Option* option) { options_.emplace_back(std::string(field), option); }
    /// The flag of `field`; throws std::out_of_range for a field without one.
    CLI::Option* operator[](std::string_view field) const;
    /// True when the user typed the flag of `field`.
    bool given(std::string_view field) const { return (*this)[field]->count() > 0; }

private:
    std::vector<std::pair<std::string, CLI::Option*>> options_;
};

namespace detail {

/// What add_field_flag needs of one field, type erased.
struct FlagSpec {
    std::string names;         ///< CLI11 names, e.g. "--components,-k"
    std::string help;          ///< the doc
    std::string type_label;    ///< "INT", "TEXT:{f32,f64}", "INT:{4,8}", ...
    std::string default_text;  ///< "8", "0.0001", "auto"; "" = none shown
    /// Parses the typed text, checks it and stores it; throws CLI::ValidationError naming the flag.
    std::function<void(const std::string& flag, const std::string& text)> assign;
};

/// "--max-iter", "-k", "--no-symmetry", "--components,-k" for a declared field.
std::string flag_names(const Field& field);
/// The spelling messages use: the first long name, else the short one ("--max-iter", "-k").
std::string flag_spelling(const Field& field);
/// Adds an option taking one value.
CLI::Option* add_value_flag(CLI::App& app, FlagSpec spec);
/// Adds a switch (no value) that calls `on` when given.
CLI::Option* add_switch(CLI::App& app, const std::string& names, const std::string& help, std::function<void()> on);
/// Throws CLI::ValidationError "<flag> = <shown>; expected <expected>" (a ParseError: exit 2).
[[noreturn]] void refuse(const std::string& flag, const std::string& shown, const std::string& expected);
/// Numbers as typed: an integer (no sign for unsigned), a real, or CX,CY; false when malformed.
bool parse_integer(const std::string& text, long long& out);
bool parse_unsigned(const std::string& text, unsigned long long& out);
bool parse_real(const std::string& text, double& out);
bool parse_reals(const std::string& text, std::vector<double>& out);

/// The typed value of a field, checked against its declaration (the automatic value cannot be
/// typed: leaving the flag out means it).
template <FieldValueType T>
T parse_field(const std::string& flag, const std::string& text, const Field& declared) {
    Field field = declared;
    field.name = flag;  // two-sided ranges read "0 <= --vote-percent < 100"
    T value{};
    if constexpr (std::same_as<T, std::string>) {
        return text;
    } else if constexpr (is_optional_enum<T>::value) {
        return parse_field<typename T::value_type>(flag, text, declared);
    } else if constexpr (NamedEnum<T>) {
        // The names; with Field::aliases the aliases too. A table that ignores case does so here too.
        const std::optional<T> found = find_enum<T>(text, field.aliases);
        if (found) value = *found;
        if (!found || !field_violation(value, field, false).empty())
            refuse(flag, "'" + text + "'", expected_text<T>(field));
        return value;
    } else if constexpr (std::same_as<T, bool>) {
        static_assert(!std::same_as<T, bool>, "booleans are switches");
    } else if constexpr (is_field_array<T>::value) {
        std::vector<double> v;
        if (!parse_reals(text, v) || v.size() != value.size())
            refuse(flag, "'" + text + "'", std::to_string(value.size()) + " numbers separated by commas, e.g. 31.5,31.5");
        std::copy(v.begin(), v.end(), value.begin());
    } else if constexpr (std::same_as<T, double>) {
        if (!parse_real(text, value)) refuse(flag, "'" + text + "'", "a number");
    } else if constexpr (std::same_as<T, std::uint64_t>) {
        unsigned long long v = 0;
        if (!parse_unsigned(text, v)) refuse(flag, text, "an integer from 0 to 2^64 - 1");
        value = v;
    } else {
        long long v = 0;
        if (!parse_integer(text, v) || v < (long long)std::numeric_limits<T>::min() ||
            v > (long long)std::numeric_limits<T>::max())
            refuse(flag, "'" + text + "'", "an integer");
        value = T(v);
    }
    if (const std::string expected = field_violation(value, field, false); !expected.empty())
        refuse(flag, value_text(value), expected);
    return value;
}

/// The label CLI11 shows after the flag: "INT", "UINT", "FLOAT", "TEXT:{a,b}", "INT:{4,8}", "X,Y".
template <FieldValueType T>
std::string type_label(const Field& field) {
    std::string label;
    if constexpr (std::same_as<T, std::string>) {
        return "TEXT";
    } else if constexpr (is_optional_enum<T>::value) {
        return type_label<typename T::value_type>(field);
    } else if constexpr (NamedEnum<T>) {
        for (std::string_view n : field_choices<T>(field)) label += (label.empty() ? "" : ",") + std::string(n);
        return "TEXT:{" + label + "}";
    } else if constexpr (is_field_array<T>::value) {
        return "X,Y";
    } else {
        label = std::same_as<T, double> ? "FLOAT" : std::same_as<T, std::uint64_t> ? "UINT" : "INT";
        if (!field.one_of.empty()) {
            std::string values;
            for (int i = 0; i < field.one_of.count; ++i)
                values += (i ? "," : "") + number_text(field.one_of.values[std::size_t(i)]);
            return label + ":{" + values + "}";
        }
        if (field.min && field.max && !field.min_exclusive && !field.max_exclusive)
            return label + ":" + label + " in [" + number_text(*field.min) + " - " + number_text(*field.max) + "]";
        return label;
    }
}

}  // namespace detail

/// Adds one flag per declared flag field of `options` to `app`: --kebab-case-name (or --no-name for
/// a declared negation, and the declared short flag), the doc as help, the current value of
/// `options` as the default shown, enum choices and declared ranges checked while parsing. Parsing
/// writes into `options`, which must outlive the parse.
template <DeclaredOptions O>
BoundFlags bind_flags(CLI::App& app, O& options) {
    BoundFlags bound;
    visit_flags(options, [&](auto& value, const Field& field) {
        using T = std::remove_reference_t<decltype(value)>;
        CLI::Option* option = nullptr;
        if constexpr (std::same_as<T, bool>) {
            const bool to = field.negation.empty();
            option = detail::add_switch(app, detail::flag_names(field),
                                        std::string(field.negation.empty() ? field.doc : field.negation),
                                        [&value, to] { value = to; });
        } else {
            option = detail::add_value_flag(
                app, {.names = detail::flag_names(field),
                      .help = std::string(field.doc),
                      .type_label = detail::type_label<T>(field),
                      .default_text = value_text(value, field),
                      .assign = [&value, field](const std::string& flag, const std::string& text) {
                          value = detail::parse_field<T>(flag, text, field);
                      }});
        }
        bound.add(field.name, option);
    });
    return bound;
}

/// The JSON of field_values(options): {"connectivity": 8, "precision": "f64", ...}.
template <DeclaredOptions O>
nlohmann::json parameters_json(const O& options) {
    nlohmann::json j = nlohmann::json::object();
    for (const NamedValue& p : field_values(options))
        std::visit([&](const auto& v) { j[std::string(p.name)] = v; }, p.value);
    return j;
}

/// A field as library messages name it, the flag that spells it, and the value it was given as the
/// user typed it ("" for none, and for switches).
struct FlagName {
    std::string field;  ///< "max_iter"
    std::string flag;   ///< "--max-iter"
    std::string given;  ///< "7"
};

/// `message` with the fields of `names` spelt as their flags: library messages name fields, the
/// CLI's user typed flags. A field counts where a library message names one, in one of three ways:
///     "kmeans: max_iter = -1; expected >= 0"  → "kmeans: --max-iter = -1; expected >= 0"
///     "bands: band 999 is out of range"       → "--bands: band 999 is out of range"
///     "context: device 7 is not available"    → "context: --device 7 is not available" (the value given)
/// A name inside a longer name or after '/' or '.' (a path) is left alone.
std::string spell_flags(std::string message, const std::vector<FlagName>& names);

/// spell_flags with the flags of `app` (--no-X spells the field X) and the values typed for them.
std::string with_flag_names(const CLI::App& app, std::string message);

/// spell_flags with the flags bind_flags makes from `options`, whose values are those given.
template <DeclaredOptions O>
std::string with_flag_names(const O& options, std::string message) {
    std::vector<FlagName> names;
    visit_flags(options, [&](const auto& value, const Field& field) {
        using T = std::remove_cvref_t<decltype(value)>;
        std::string given;
        if constexpr (!std::same_as<T, bool>) given = value_text(value, field);
        names.push_back({std::string(field.name), detail::flag_spelling(field), std::move(given)});
    });
    return spell_flags(std::move(message), names);
}

}  // namespace cubekit::cli
