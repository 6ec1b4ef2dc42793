#pragma once
// Helpers shared by io_test.cpp and io_files_test.cpp: raw file access, folder listings, expected
// exceptions, and non-zero sample cubes of every element type.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

#include "cubekit/io.hpp"
#include "testing.hpp"

namespace cubekit::io_test {

namespace fs = std::filesystem;

inline constexpr DType kAllTypes[] = {DType::U8, DType::U16, DType::I16, DType::U32, DType::I32, DType::F32, DType::F64};
inline constexpr Layout kAllLayouts[] = {Layout::BSQ, Layout::BIL, Layout::BIP};

inline void put(const fs::path& p, std::string_view bytes) {
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    ASSERT_TRUE(out.good()) << p;
}

inline std::string get(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

inline std::set<std::string> listing(const fs::path& dir) {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
    return names;
}

inline bool has_temporaries(const fs::path& dir) {
    for (const std::string& n : listing(dir))
        if (n.find(".tmp-") != std::string::npos) return true;
    return false;
}

/// Runs f, expects exception E, returns its message ("" and a test failure otherwise).
template <typename E, typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    } catch (const std::exception& e) {
        ADD_FAILURE() << "wrong exception type: " << e.what();
        return {};
    }
    ADD_FAILURE() << "no exception";
    return {};
}

/// Random samples that are never all zero and span the type (negatives for signed types).
inline Cube sample_cube(int w, int h, int b, DType t, Layout l, std::uint64_t seed) {
    using cubekit::testing::random_cube;
    switch (t) {
        case DType::U8: return random_cube(w, h, b, t, seed, 1, 255, l);
        case DType::U16: return random_cube(w, h, b, t, seed, 1, 65535, l);
        case DType::I16: return random_cube(w, h, b, t, seed, -32768, 32767, l);
        case DType::U32: return random_cube(w, h, b, t, seed, 1, 4e9, l);
        case DType::I32: return random_cube(w, h, b, t, seed, -2e9, 2e9, l);
        default: return random_cube(w, h, b, t, seed, -1e6, 1e6, l);
    }
}

}  // namespace cubekit::io_test
