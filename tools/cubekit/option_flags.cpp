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

std::string with_flag_names(const CLI::App& app, std::string message) {
    const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; };
    for (const CLI::Option* option : app.get_options()) {
        const std::vector<std::string>& longs = option->get_lnames();
        const std::vector<std::string>& shorts = option->get_snames();
        if (longs.empty() && shorts.empty()) continue;  // positionals
        std::string field = longs.empty() ? shorts.front() : longs.front();
        const std::string flag = (longs.empty() ? "-" : "--") + field;
        if (option->get_type_size() == 0 && field.starts_with("no-")) field = field.substr(3);  // --no-X ↔ X
        for (char& c : field)
            if (c == '-') c = '_';
        const std::string needle = field + " = ";
        for (std::size_t at = message.find(needle); at != std::string::npos; at = message.find(needle, at)) {
            if (at > 0 && word(message[at - 1])) {
                at += needle.size();
                continue;
            }
            message.replace(at, field.size(), flag);
            at += flag.size() + 3;
        }
    }
    return message;
}

}  // namespace cubekit::cli
