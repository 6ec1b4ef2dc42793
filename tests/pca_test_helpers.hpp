#pragma once
// Helpers shared by the PCA tests (pca_test.cpp, pca_gpu_test.cpp): test cubes with a known
// structure and a bitwise comparison of two models.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cubekit/linalg.hpp"

namespace cubekit::pca_test {

inline const DType kTypes[] = {DType::U8, DType::U16, DType::I16, DType::U32, DType::I32, DType::F32, DType::F64};

/// The sample range used for random cubes of `t` (wide, to exercise the bounds of the sums).
inline void type_range(DType t, double& lo, double& hi) {
    switch (t) {
        case DType::U8: lo = 0, hi = 255; return;
        case DType::U16: lo = 0, hi = 65535; return;
        case DType::I16: lo = -32768, hi = 32767; return;
        case DType::U32: lo = 0, hi = 4294967295.0; return;
        case DType::I32: lo = -2147483648.0, hi = 2147483647.0; return;
        case DType::F32: lo = -3.5e3, hi = 7.25e3; return;
        case DType::F64: lo = -1.5e6, hi = 2.5e5; return;
    }
}

/// A cube with a few latent factors (so the eigenvalues are well separated): x_b = offset_b +
/// Σ_f M_bf z_f + noise, spread over the type's range (set_value rounds and saturates).
inline Cube correlated_cube(int width, int height, int bands, DType dtype, std::uint64_t seed,
                            Layout layout = Layout::BSQ) {
    constexpr int kFactors = 3;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    double lo = 0, hi = 0;
    type_range(dtype, lo, hi);
    const double mid = 0.5 * (lo + hi), half = 0.5 * (hi - lo);
    std::vector<double> M(std::size_t(bands) * kFactors);
    for (double& m : M) m = u(rng) / kFactors;
    std::vector<double> z(kFactors);
    Cube cube(width, height, bands, dtype, layout);
    for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x) {
            for (double& f : z) f = u(rng);
            for (int b = 0; b < bands; ++b) {
                double v = 0.05 * u(rng);  // noise
                for (int f = 0; f < kFactors; ++f) v += M[std::size_t(b) * kFactors + std::size_t(f)] * z[std::size_t(f)] * (1.0 - 0.3 * f);
                cube.set_value(x, y, b, mid + 0.9 * half * v);
            }
        }
    return cube;
}

/// Every sample at one of the type's extremes (floats: near the largest finite values): the largest
/// products and sums the bounds of the exact sums allow.
inline Cube extreme_cube(DType t, std::uint64_t seed) {
    double lo = 0, hi = 0;
    type_range(t, lo, hi);
    if (t == DType::F32) lo = -3e38, hi = 1e19;
    if (t == DType::F64) lo = -1e150, hi = 1e150;
    Cube c(157, 33, 6, t);
    std::mt19937_64 rng(seed);
    for (int b = 0; b < 6; ++b)
        for (int y = 0; y < 33; ++y)
            for (int x = 0; x < 157; ++x) c.set_value(x, y, b, (rng() & 1) ? hi : lo);
    return c;
}

inline bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

/// Every field of two models bit for bit; names the first field that differs.
inline ::testing::AssertionResult models_identical(const PcaModel& e, const PcaModel& a) {
    if (e.bands != a.bands || e.samples != a.samples)
        return ::testing::AssertionFailure() << "bands/samples differ: " << e.bands << "/" << e.samples << " vs "
                                             << a.bands << "/" << a.samples;
    const std::pair<const char*, std::pair<const std::vector<double>*, const std::vector<double>*>> fields[] = {
        {"mean", {&e.mean, &a.mean}},
        {"covariance", {&e.covariance, &a.covariance}},
        {"eigenvalues", {&e.eigenvalues, &a.eigenvalues}},
        {"components", {&e.components, &a.components}},
        {"explained_variance_ratio", {&e.explained_variance_ratio, &a.explained_variance_ratio}}};
    for (const auto& [name, pair] : fields) {
        const auto& x = *pair.first;
        const auto& y = *pair.second;
        if (same_bits(x, y)) continue;
        if (x.size() != y.size())
            return ::testing::AssertionFailure() << name << ": sizes " << x.size() << " vs " << y.size();
        for (std::size_t i = 0; i < x.size(); ++i)
            if (std::memcmp(&x[i], &y[i], sizeof(double)) != 0)
                return ::testing::AssertionFailure() << name << "[" << i << "] differs: " << x[i] << " vs " << y[i]
                                                     << " (delta " << (y[i] - x[i]) << ")";
    }
    return ::testing::AssertionSuccess();
}

}  // namespace cubekit::pca_test
