#pragma once
// Inputs the labels tests share (CPU and GPU): random binary masks and small-alphabet label images.
#include <cstdint>
#include <random>
#include <vector>

#include "cubekit/cube.hpp"

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

}  // namespace cubekit::labels_test
