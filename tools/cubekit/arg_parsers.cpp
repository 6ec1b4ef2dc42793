// Parsers of the CLI's small argument syntaxes (arg_parsers.hpp).
#include "arg_parsers.hpp"

#include <charconv>
#include <string_view>

#include "cubekit/error.hpp"

namespace cubekit::cli {

namespace {
// A whole non-negative decimal integer that fits an int.
bool whole(std::string_view s, int& v) {
    if (s.empty() || s.front() < '0' || s.front() > '9') return false;  // from_chars would take a '-'
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && end == s.data() + s.size();
}
}  // namespace

std::pair<int, int> parse_width_height(const std::string& text, const std::string& flag, const std::string& example) {
    const std::size_t x = text.find('x');
    int w = 0, h = 0;
    if (x == std::string::npos || !whole(std::string_view(text).substr(0, x), w) ||
        !whole(std::string_view(text).substr(x + 1), h) || w <= 0 || h <= 0)
        throw InvalidInput(flag + " = '" + text + "': expected WIDTHxHEIGHT, two positive integers, e.g. " + example);
    return {w, h};
}

std::array<int, 4> parse_crop(const std::string& text, const std::string& flag) {
    std::array<int, 4> v{};
    std::string_view rest = text;
    for (std::size_t i = 0; i < 4; ++i) {
        const std::size_t comma = i < 3 ? rest.find(',') : rest.size();
        if (comma == std::string_view::npos || !whole(rest.substr(0, comma), v[i]))
            throw InvalidInput(flag + " = '" + text + "': expected X,Y,W,H (four integers, e.g. 10,20,64,64)");
        rest = i < 3 ? rest.substr(comma + 1) : std::string_view{};
    }
    if (v[2] <= 0 || v[3] <= 0) throw InvalidInput(flag + " = '" + text + "': the width and height must be positive");
    return v;
}

}  // namespace cubekit::cli
