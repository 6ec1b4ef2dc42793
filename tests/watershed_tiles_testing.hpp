#pragma once
// Shared by the CPU and GPU tests of the tiled watershed (watershed_tiles_test.cpp,
// watershed_tiles_gpu_test.cpp): reliefs whose plateaus, descents and minima cross tile borders.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cubekit/gradient.hpp"
#include "cubekit/io.hpp"
#include "cubekit/watershed.hpp"
#include "testing.hpp"

namespace cubekit::testing {

/// The reliefs: random u8 heights 0..7 (many ties, plateaus everywhere), distinct f32, a staircase of
/// wide steps with noise in one corner (plateaus spanning many tiles: several rounds), a constant
/// relief (one minimum covering the scene), two cones in i16, and u16 terraces.
inline std::vector<std::pair<std::string, Cube>> watershed_test_reliefs(int w, int h, std::uint64_t seed) {
    std::vector<std::pair<std::string, Cube>> r;
    r.emplace_back("u8 0..7", random_levels_cube(w, h, 1, DType::U8, seed, 8));
    r.emplace_back("f32", random_cube(w, h, 1, DType::F32, seed + 1, -5.0, 5.0));
    Cube stairs(w, h, 1, DType::U16);
    std::mt19937_64 rng(seed + 2);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            stairs.set_value(x, y, 0, double(x / 9 + (x < 4 && y < 4 ? rng() % 3 : 0)));
    r.emplace_back("staircase", std::move(stairs));
    Cube flat(w, h, 1, DType::F64);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) flat.set_value(x, y, 0, 2.5);
    r.emplace_back("constant", std::move(flat));
    Cube cones(w, h, 1, DType::I16);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            const int a = (x - 3) * (x - 3) + (y - 4) * (y - 4), b = (x - w + 5) * (x - w + 5) + (y - h + 3) * (y - h + 3);
            cones.set_value(x, y, 0, double(std::min(a, b) / 4 - 100));
        }
    r.emplace_back("cones", std::move(cones));
    Cube terraces(w, h, 1, DType::U32);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) terraces.set_value(x, y, 0, double(((x + 2 * y) / 7) % 4 + (rng() % 11 == 0)));
    r.emplace_back("terraces", std::move(terraces));
    return r;
}

/// A mask with a wall and holes: outside pixels split plateaus and end descents.
inline Cube watershed_test_mask(int w, int h, std::uint64_t seed) {
    Cube m(w, h, 1, DType::U8);
    std::mt19937_64 rng(seed);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) m.set_value(x, y, 0, (x == w / 2 && y > 2) || rng() % 9 == 0 ? 0.0 : 1.0);
    return m;
}

inline Cube poisoned_watershed_labels(int w, int h) {
    Cube out(w, h, 1, DType::I32);
    std::memset(out.bytes(), 0xAB, out.num_bytes());
    return out;
}

/// The RCMG of the embedded Samson scene (95×95), a real relief.
inline Cube samson_gradient(const Context& ctx) {
    const Cube scene = read_cube(source_path("data/samson/samson_1.img"));
    return rcmg(ctx, scene);
}

}  // namespace cubekit::testing
