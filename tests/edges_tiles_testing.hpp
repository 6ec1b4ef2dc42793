#pragma once
// Shared by the CPU and GPU tests of the tiled entropy edges (edges_tiles_test.cpp, edges_tiles_gpu_test.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "cubekit/edges.hpp"
#include "testing.hpp"

namespace cubekit::testing {

inline Cube poisoned_map(int w, int h, int bands) {
    Cube out(w, h, bands, DType::U8);
    std::memset(out.bytes(), 0xAB, out.num_bytes());
    return out;
}

// Random samples from a few levels in blobs (edges that are not everywhere), with NaN and ±Inf in
// float cubes (excluded from E1's ranges; quantised to 0).
inline Cube edge_test_cube(int w, int h, int b, DType type, Layout layout, std::uint64_t seed) {
    Cube c = testing::random_levels_cube(w, h, b, type, seed, 9, layout);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            if ((x / 4 + y / 3) % 3 == 0)
                for (int k = 0; k < b; ++k) c.set_value(x, y, k, c.value(x, y, k) * 3 + 7);
    if (type == DType::F32 || type == DType::F64) {
        c.set_value(1, 2, 0, std::numeric_limits<double>::quiet_NaN());
        c.set_value(w - 1, h - 1, b - 1, std::numeric_limits<double>::infinity());
        c.set_value(w / 2, 0, 0, -std::numeric_limits<double>::infinity());
    }
    return c;
}

inline void expect_same_summary(const EntropyEdgeSummary& whole, const EntropyEdgeSummary& tiled) {
    EXPECT_EQ(whole.band_thresholds, tiled.band_thresholds);
    ASSERT_EQ(whole.derived_thresholds.size(), tiled.derived_thresholds.size());
    for (std::size_t i = 0; i < whole.derived_thresholds.size(); ++i) {
        EXPECT_EQ(whole.derived_thresholds[i].name, tiled.derived_thresholds[i].name);
        EXPECT_EQ(whole.derived_thresholds[i].thresholds, tiled.derived_thresholds[i].thresholds);
    }
    EXPECT_EQ(whole.votes_needed, tiled.votes_needed);
}

}  // namespace cubekit::testing
