#pragma once
// What the labels tests share (CPU and GPU): random binary masks, small-alphabet label images, and
// the comparison of two labellings.
#include <cstdint>
#include <random>
#include <vector>

#include "cubekit/cube.hpp"
#include "cubekit/labels.hpp"
#include "testing.hpp"

namespace cubekit::labels_test {

/// W×H×B u8 mask: each pixel `on` with probability `density`, else 0.
inline Cube random_binary(int W, int H, int B, double density, std::uint64_t seed, std::uint8_t on = 1) {
    Cube c(W, H, B, DType::U8);
    std::mt19937_64 rng(seed);
    std::bernoulli_distribution fg(density);
    std::uint8_t* p = c.data<std::uint8_t>();
    for (std::size_t i = 0; i < c.num_elements(); ++i) p[i] = fg(rng) ? on : 0;
    return c;
}

/// A label image: values drawn from a few levels (0 included), negative ones for signed types.
inline Cube random_label_image(int W, int H, int B, DType t, std::uint64_t seed) {
    const bool is_signed = t == DType::I16 || t == DType::I32;
    const std::vector<double> levels = is_signed ? std::vector<double>{0, -3, 5, 1000, 0} : std::vector<double>{0, 1, 2, 200, 0};
    Cube c(W, H, B, t);
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::size_t> pick(0, levels.size() - 1);
    for (int b = 0; b < B; ++b)
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) c.set_value(x, y, b, levels[pick(rng)]);
    return c;
}

/// Labels and per-band statistics equal, reporting the first difference.
inline ::testing::AssertionResult same_components(const Components& expected, const Components& actual) {
    if (auto r = testing::cubes_identical(expected.labels, actual.labels); !r) return r << " (labels)";
    if (expected.per_band.size() != actual.per_band.size())
        return ::testing::AssertionFailure() << actual.per_band.size() << " bands, expected " << expected.per_band.size();
    for (std::size_t b = 0; b < expected.per_band.size(); ++b) {
        const auto& e = expected.per_band[b];
        const auto& a = actual.per_band[b];
        if (e.size() != a.size())
            return ::testing::AssertionFailure() << "band " << b << ": " << a.size() << " components, expected " << e.size();
        for (std::size_t i = 0; i < e.size(); ++i)
            if (e[i].size != a[i].size || e[i].x0 != a[i].x0 || e[i].y0 != a[i].y0 || e[i].x1 != a[i].x1 || e[i].y1 != a[i].y1)
                return ::testing::AssertionFailure()
                       << "band " << b << " label " << i + 1 << ": size " << a[i].size << " box (" << a[i].x0 << ","
                       << a[i].y0 << ")-(" << a[i].x1 << "," << a[i].y1 << "), expected size " << e[i].size << " box ("
                       << e[i].x0 << "," << e[i].y0 << ")-(" << e[i].x1 << "," << e[i].y1 << ")";
    }
    return ::testing::AssertionSuccess();
}

}  // namespace cubekit::labels_test
