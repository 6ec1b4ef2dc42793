#pragma once
// Shared by the CPU and GPU tests of the tiled labelling (labels_tiles_test.cpp, labels_tiles_gpu_test.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "cubekit/labels.hpp"
#include "testing.hpp"

namespace cubekit::testing {

// Foreground at `percent` of the pixels with values 1..values (1: a binary mask), plus a snake along
// every third row and a diagonal staircase, which cross many tile borders (one long component each).
inline Cube label_test_image(int w, int h, int bands, DType type, Layout layout, int percent, int values,
                             std::uint64_t seed) {
    Cube c(w, h, bands, type, layout);
    std::mt19937_64 rng(seed);
    for (int b = 0; b < bands; ++b)
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
                const bool on = int(rng() % 100) < percent;
                c.set_value(x, y, b, on ? double(1 + rng() % std::uint64_t(values)) : 0.0);
            }
    for (int b = 0; b < bands; ++b) {
        for (int y = 1; y < h; y += 3)
            for (int x = 0; x < w; ++x) c.set_value(x, y, b, double(values));
        for (int i = 0; i < std::min(w, h); ++i) c.set_value(i, i, b, double(values));
    }
    return c;
}

inline Cube poisoned_labels(int w, int h, int bands) {
    Cube out(w, h, bands, DType::I32);
    std::memset(out.bytes(), 0xAB, out.num_bytes());
    return out;
}

inline ::testing::AssertionResult same_stats(const ComponentStats& expected, const ComponentStats& actual) {
    if (expected.size() != actual.size()) return ::testing::AssertionFailure() << "bands differ";
    for (std::size_t b = 0; b < expected.size(); ++b) {
        if (expected[b].size() != actual[b].size())
            return ::testing::AssertionFailure() << "band " << b << ": " << expected[b].size() << " vs "
                                                 << actual[b].size() << " components";
        for (std::size_t i = 0; i < expected[b].size(); ++i) {
            const ComponentInfo &e = expected[b][i], &a = actual[b][i];
            if (e.size != a.size || e.x0 != a.x0 || e.y0 != a.y0 || e.x1 != a.x1 || e.y1 != a.y1)
                return ::testing::AssertionFailure() << "band " << b << " label " << i + 1 << " differs";
        }
    }
    return ::testing::AssertionSuccess();
}

}  // namespace cubekit::testing
