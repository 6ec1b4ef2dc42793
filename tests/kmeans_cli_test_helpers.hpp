#pragma once
// Helpers shared by kmeans_cli_test.cpp and kmeans_cli_bad_input_test.cpp: shell quoting, folder
// listings, whole-token search in messages, and random RGB PNG fixtures.
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>

#include "cubekit/io.hpp"
#include "testing.hpp"

namespace cubekit::kmeans_cli_test {

namespace fs = std::filesystem;

inline std::string q(const fs::path& p) {
    std::string s = "'";
    for (char c : p.string()) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return s + "'";
}

inline std::string listing(const fs::path& dir) {
    std::set<std::string> names;
    for (const auto& e : fs::recursive_directory_iterator(dir)) names.insert(fs::relative(e.path(), dir).string());
    std::string s;
    for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
    return "{" + s + "}";
}

/// `needle` occurs in `text` as a whole token (no alphanumeric character glued to an alphanumeric edge).
inline bool names(const std::string& text, const std::string& needle) {
    const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
    for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
        const std::size_t end = at + needle.size();
        if ((at == 0 || !word(needle.front()) || !word(text[at - 1])) &&
            (end == text.size() || !word(needle.back()) || !word(text[end])))
            return true;
    }
    return false;
}

/// A random 8-bit RGB image of `levels` grey levels per channel, written as PNG.
inline fs::path rgb_png(const fs::path& dir, int w, int h, std::uint64_t seed, int levels = 256, int bands = 3) {
    Cube c = cubekit::testing::random_levels_cube(w, h, bands, DType::U8, seed, levels, Layout::BIP);
    const fs::path p = dir / "in.png";
    write_cube(c, p);
    return p;
}

}  // namespace cubekit::kmeans_cli_test
