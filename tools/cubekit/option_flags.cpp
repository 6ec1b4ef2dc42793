#include "option_flags.hpp"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <stdexcept>

namespace cubekit::cli {

CLI::Option* BoundFlags::operator[](std::string_view field) const {
    for (const auto& [name, option] : options_)
        if (name == field) return option;
    throw std::out_of_range("no flag for the field " + std::string(field));
}

namespace detail {

namespace {

std::string kebab(std::string_view name) {
    std::string s(name);
    for (char& c : s)
        if (c == '_') c = '-';
    return s;
}

// Help lines longer than this are broken at a space; CLI11 indents the continuation lines.
constexpr std::size_t kHelpWidth = 96;

std::string wrapped(const std::string& text) {
    std::string out;
    std::size_t line_start = 0, last_space = std::string::npos;
    for (std::size_t i = 0; i < text.size(); ++i) {
        out += text[i];
        if (text[i] == ' ') last_space = out.size() - 1;
        if (out.size() - line_start > kHelpWidth && last_space != std::string::npos && last_space > line_start) {
            out[last_space] = '\n';
            line_start = last_space + 1;
            last_space = std::string::npos;
        }
    }
    return out;
}

}  // namespace

std::string flag_names(const Field& field) {
    if (!field.negation.empty()) return "--no-" + kebab(field.name);
    const std::string long_name = "--" + kebab(field.name);
    if (field.short_flag.empty()) return long_name;
    // A one-letter field is spelt as its short flag alone (-k), as POSIX options are.
    if (field.name.size() == 1) return std::string(field.short_flag);
    return long_name + "," + std::string(field.short_flag);
}

std::string flag_spelling(const Field& field) {
    const std::string names = flag_names(field);
    return names.substr(0, names.find(','));
}

CLI::Option* add_value_flag(CLI::App& app, FlagSpec spec) {
    const std::string flag = spec.names.substr(0, spec.names.find(','));
    CLI::Option* option = app.add_option_function<std::string>(
        spec.names, [assign = std::move(spec.assign), flag](const std::string& text) { assign(flag, text); },
        wrapped(spec.help));
    option->type_name(spec.type_label);
    if (!spec.default_text.empty()) option->default_str(spec.default_text);
    return option;
}

CLI::Option* add_switch(CLI::App& app, const std::string& names, const std::string& help, std::function<void()> on) {
    return app.add_flag_callback(names, std::move(on), wrapped(help));
}

void refuse(const std::string& flag, const std::string& shown, const std::string& expected) {
    throw CLI::ValidationError(flag + " = " + shown + "; expected " + expected);
}

bool parse_integer(const std::string& text, long long& out) {
    const char* end = text.data() + text.size();
    const auto r = std::from_chars(text.data() + (text.starts_with('+') ? 1 : 0), end, out);
    return r.ec == std::errc() && r.ptr == end && !text.empty();
}

bool parse_unsigned(const std::string& text, unsigned long long& out) {
    // from_chars would refuse "-1" too, but CLI11's own conversion wraps it to 2^64 - 1; say why.
    if (text.starts_with('-')) return false;
    const char* end = text.data() + text.size();
    const auto r = std::from_chars(text.data() + (text.starts_with('+') ? 1 : 0), end, out);
    return r.ec == std::errc() && r.ptr == end && !text.empty();
}

bool parse_real(const std::string& text, double& out) {
    if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return false;
    char* end = nullptr;
    out = std::strtod(text.c_str(), &end);  // accepts nan and inf, which the range check then names
    return end == text.c_str() + text.size();
}

bool parse_reals(const std::string& text, std::vector<double>& out) {
    out.clear();
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = text.find(',', start);
        double v = 0;
        if (!parse_real(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start), v))
            return false;
        out.push_back(v);
        if (comma == std::string::npos) return true;
        start = comma + 1;
    }
}

}  // namespace detail

namespace {

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

// `needle` (a field and what follows it) at `at` names the field: it starts a name, and a value
// given ends there ("device 7", not "device 70").
bool names_field(const std::string& message, std::size_t at, const std::string& needle, bool value_tail) {
    const char before = at > 0 ? message[at - 1] : ' ';
    const std::size_t end = at + needle.size();
    if (name_char(before) || before == '/' || before == '.') return false;
    return !value_tail || end == message.size() || !name_char(message[end]);
}

}  // namespace

std::string spell_flags(std::string message, const std::vector<FlagName>& names) {
    for (const FlagName& n : names) {
        std::vector<std::string> tails = {" = ", ": "};
        if (!n.given.empty()) tails.push_back(" " + n.given);
        for (std::size_t t = 0; t < tails.size(); ++t) {
            const std::string needle = n.field + tails[t];
            for (std::size_t at = message.find(needle); at != std::string::npos; at = message.find(needle, at)) {
                if (!names_field(message, at, needle, t == 2)) {
                    at += needle.size();
                    continue;
                }
                message.replace(at, n.field.size(), n.flag);
                at += n.flag.size() + tails[t].size();
            }
        }
    }
    return message;
}

std::string with_flag_names(const CLI::App& app, std::string message) {
    std::vector<FlagName> names;
    for (const CLI::Option* option : app.get_options()) {
        const std::vector<std::string>& longs = option->get_lnames();
        const std::vector<std::string>& shorts = option->get_snames();
        if (longs.empty() && shorts.empty()) continue;  // positionals
        std::string field = longs.empty() ? shorts.front() : longs.front();
        const std::string flag = (longs.empty() ? "-" : "--") + field;
        const bool is_switch = option->get_type_size() == 0;
        if (is_switch && field.starts_with("no-")) field = field.substr(3);  // --no-X ↔ X
        for (char& c : field)
            if (c == '-') c = '_';
        const std::string given = is_switch || option->count() == 0 ? "" : option->results().back();
        names.push_back({std::move(field), flag, given});
    }
    return spell_flags(std::move(message), names);
}

}  // namespace cubekit::cli
