#pragma once
// Comparisons of multi-resolution search results shared by the CPU, GPU and tiled tests.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cubekit/detect.hpp"

namespace cubekit::testing {

/// y1 or y2 within `tolerance` (0: bit for bit); NaN (not evaluated) only against NaN.
inline void expect_same_output(double a, double b, double tolerance) {
    if (std::isnan(a)) EXPECT_TRUE(std::isnan(b));
    else EXPECT_NEAR(a, b, tolerance);
}

/// The same windows field by field, y1 and y2 within `tolerance`.
inline void expect_same_windows(const std::vector<Window>& a, const std::vector<Window>& b, double tolerance = 0) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].x0, b[i].x0);
        EXPECT_EQ(a[i].y0, b[i].y0);
        EXPECT_EQ(a[i].width, b[i].width);
        EXPECT_EQ(a[i].height, b[i].height);
        EXPECT_EQ(a[i].level, b[i].level);
        EXPECT_EQ(a[i].at_min_scale, b[i].at_min_scale);
        EXPECT_EQ(a[i].outcome, b[i].outcome);
        expect_same_output(a[i].y1, b[i].y1, tolerance);
        expect_same_output(a[i].y2, b[i].y2, tolerance);
    }
}

/// Detections, trace, per-level counts and skipped samples; y1 and y2 within `tolerance` (0 on one
/// backend; 1e-12 between CUDA's tanh and glibc's).
inline void expect_same_search(const MultiresResult& a, const MultiresResult& b, double tolerance = 0) {
    expect_same_windows(a.detections, b.detections, tolerance);
    expect_same_windows(a.trace, b.trace, tolerance);
    ASSERT_EQ(a.levels.size(), b.levels.size());
    for (std::size_t i = 0; i < a.levels.size(); ++i) {
        EXPECT_EQ(a.levels[i].level, b.levels[i].level);
        EXPECT_EQ(a.levels[i].evaluated, b.levels[i].evaluated);
        EXPECT_EQ(a.levels[i].positive, b.levels[i].positive);
        EXPECT_EQ(a.levels[i].accepted, b.levels[i].accepted);
        EXPECT_EQ(a.levels[i].split, b.levels[i].split);
    }
    EXPECT_EQ(a.skipped_samples, b.skipped_samples);
    EXPECT_EQ(a.top_level, b.top_level);
}

}  // namespace cubekit::testing
