// PCA, CPU backend and CLI (spec edges.md §3.9 "E5", §5.2): the rank-1 oracle, the covariance
// against a naive long-double computation, the eigen-decomposition, the sign rule, pixels with
// non-finite bands, the fixed point of float input, bit-identical results across thread counts
// and layouts, bad inputs, and `cubekit pca`.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "cubekit/linalg.hpp"
#include "linalg/pca_internal.hpp"
#include "pca_test_helpers.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

namespace fs = std::filesystem;
using pca_test::correlated_cube;
using pca_test::kTypes;
using pca_test::models_identical;
using testing::cpu_context;
using testing::cubes_identical;

std::string describe(const Cube& c) { return c.shape().describe(); }

// ---- naive references ---------------------------------------------------------------------------

// Two-pass covariance in long double over the pixels whose bands are all finite.
std::vector<long double> naive_covariance(const Cube& c, std::int64_t& used) {
    const int B = c.bands();
    std::vector<std::pair<int, int>> pixels;
    for (int y = 0; y < c.height(); ++y)
        for (int x = 0; x < c.width(); ++x) {
            bool ok = true;
            for (int b = 0; b < B; ++b) ok = ok && std::isfinite(c.value(x, y, b));
            if (ok) pixels.emplace_back(x, y);
        }
    used = std::int64_t(pixels.size());
    std::vector<long double> mean(std::size_t(B), 0), cov(std::size_t(B) * B, 0);
    for (auto [x, y] : pixels)
        for (int b = 0; b < B; ++b) mean[std::size_t(b)] += c.value(x, y, b);
    for (auto& m : mean) m /= (long double)used;
    for (auto [x, y] : pixels)
        for (int i = 0; i < B; ++i)
            for (int j = 0; j < B; ++j)
                cov[std::size_t(i) * B + std::size_t(j)] +=
                    (c.value(x, y, i) - mean[std::size_t(i)]) * (c.value(x, y, j) - mean[std::size_t(j)]);
    for (auto& v : cov) v = used > 1 ? v / (long double)(used - 1) : 0;
    return cov;
}

double max_abs_value(const Cube& c) {
    double m = 0;
    for (int b = 0; b < c.bands(); ++b)
        for (int y = 0; y < c.height(); ++y)
            for (int x = 0; x < c.width(); ++x)
                if (std::isfinite(c.value(x, y, b))) m = std::max(m, std::fabs(c.value(x, y, b)));
    return m;
}

// Min-max quantisation of edges.md §3.1: floor((v − min)·255/(max − min) + 0.5) in f64.
std::vector<int> quantise(const Cube& scores, int band) {
    double lo = INFINITY, hi = -INFINITY;
    for (int y = 0; y < scores.height(); ++y)
        for (int x = 0; x < scores.width(); ++x) lo = std::min(lo, scores.value(x, y, band)), hi = std::max(hi, scores.value(x, y, band));
    std::vector<int> q;
    for (int y = 0; y < scores.height(); ++y)
        for (int x = 0; x < scores.width(); ++x) {
            const double t = (scores.value(x, y, band) - lo) * 255.0;
            q.push_back(hi > lo ? int(std::floor(t / (hi - lo) + 0.5)) : 0);
        }
    return q;
}

// Base image for the rank-1 oracle: every level 0..255 present, in a shuffled order.
Cube base_u8(int w, int h, std::uint64_t seed) {
    std::vector<int> v(std::size_t(w) * h);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = int(i % 256);
    std::shuffle(v.begin(), v.end(), std::mt19937_64(seed));
    Cube base(w, h, 1, DType::U8);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) base.at<std::uint8_t>(x, y, 0) = std::uint8_t(v[std::size_t(y) * w + x]);
    return base;
}

// ---- §5.2 rank-1 oracle ---------------------------------------------------------------------------

// v_b = a_b·base + c_b with a_b > 0: covariance = var(base)·a aᵀ, one non-zero eigenvalue, PC1 = a/|a|,
// and PC1's scores an increasing affine image of base, so that min-max quantising them gives base.
TEST(PcaRankOne, QuantisedFirstComponentIsTheBaseImage) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    for (DType t : {DType::U16, DType::I32, DType::F32, DType::F64}) {
        for (int B : {1, 2, 7, 40}) {
            SCOPED_TRACE(std::string(dtype_name(t)) + " B=" + std::to_string(B));
            const Cube base = base_u8(37, 29, seed + B);
            std::vector<double> a(static_cast<std::size_t>(B)), c(static_cast<std::size_t>(B));
            for (int b = 0; b < B; ++b) {
                a[std::size_t(b)] = dtype_is_float(t) ? 0.25 + std::uniform_real_distribution<double>(0, 3)(rng) : double(1 + rng() % 50);
                c[std::size_t(b)] = dtype_is_float(t) ? std::uniform_real_distribution<double>(-100, 100)(rng) : double(rng() % 1000);
                if (t == DType::F32) a[std::size_t(b)] = float(a[std::size_t(b)]), c[std::size_t(b)] = float(c[std::size_t(b)]);
            }
            Cube cube(base.width(), base.height(), B, t, Layout::BIP);
            for (int y = 0; y < base.height(); ++y)
                for (int x = 0; x < base.width(); ++x)
                    for (int b = 0; b < B; ++b) cube.set_value(x, y, b, a[std::size_t(b)] * base.value(x, y, 0) + c[std::size_t(b)]);
            const PcaResult r = pca(cpu_context(), cube, {.components = B});
            const PcaModel& m = r.model;
            ASSERT_EQ(m.samples, std::int64_t(base.width()) * base.height());
            // Eigenvalues: λ1 = |a|²·var(base), the rest 0 up to rounding.
            double a2 = 0;
            for (double v : a) a2 += v * v;
            double mean_base = 0, var_base = 0;
            const double n = double(m.samples);
            for (int y = 0; y < base.height(); ++y)
                for (int x = 0; x < base.width(); ++x) mean_base += base.value(x, y, 0) / n;
            for (int y = 0; y < base.height(); ++y)
                for (int x = 0; x < base.width(); ++x) var_base += std::pow(base.value(x, y, 0) - mean_base, 2) / (n - 1);
            // f32 samples are a·base + c rounded to f32: rank 1 up to ~1e-7 relative.
            const double rel = t == DType::F32 ? 1e-6 : 1e-9;
            EXPECT_NEAR(m.eigenvalues[0], a2 * var_base, rel * a2 * var_base);
            for (int j = 1; j < B; ++j) EXPECT_LE(std::fabs(m.eigenvalues[std::size_t(j)]), 1e-12 * m.eigenvalues[0]) << "j=" << j;
            EXPECT_NEAR(m.explained_variance_ratio[0], 1.0, 1e-12);
            // PC1 = a/|a| (positive entries: the sign rule keeps the sum ≥ 0).
            for (int b = 0; b < B; ++b) EXPECT_NEAR(m.components[std::size_t(b)], a[std::size_t(b)] / std::sqrt(a2), rel);
            // Scores: equal base ⇒ identical bits; larger base ⇒ larger score; affine with slope |a|.
            std::vector<double> by_level(256, NAN);
            for (int y = 0; y < base.height(); ++y)
                for (int x = 0; x < base.width(); ++x) {
                    const int level = base.at<std::uint8_t>(x, y, 0);
                    const double s = r.scores.value(x, y, 0);
                    if (std::isnan(by_level[std::size_t(level)])) by_level[std::size_t(level)] = s;
                    ASSERT_EQ(std::memcmp(&by_level[std::size_t(level)], &s, sizeof s), 0) << "level " << level;
                    EXPECT_NEAR(s, std::sqrt(a2) * (level - mean_base), rel * std::sqrt(a2) * 255) << "level " << level;
                }
            for (int l = 1; l < 256; ++l) ASSERT_LT(by_level[std::size_t(l - 1)], by_level[std::size_t(l)]) << "level " << l;
            const std::vector<int> q = quantise(r.scores, 0);
            for (int y = 0; y < base.height(); ++y)
                for (int x = 0; x < base.width(); ++x)
                    ASSERT_EQ(q[std::size_t(y) * base.width() + x], base.at<std::uint8_t>(x, y, 0)) << "pixel " << x << "," << y;
        }
    }
}

// ---- covariance and eigen-decomposition --------------------------------------------------------------

// The covariance from exact sums against a naive long-double two-pass computation. Integer input:
// only the final roundings differ (1e-13 relative). Float input adds the fixed point's resolution:
// |q − x·2^e| ≤ 1/2 with 2^−e ≤ 2·max|x|·2^(⌈log2 P⌉−62), so |ΔC_ij| ≤ 4·max|x|·2^−e.
TEST(PcaCovariance, MatchesNaiveLongDouble) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (DType t : kTypes)
        for (int B : {1, 3, 17}) {
            const Cube cube = correlated_cube(23, 19, B, t, seed + B);
            SCOPED_TRACE(describe(cube));
            const PcaModel m = pca_fit(cpu_context(), cube, {.components = B});
            std::int64_t used = 0;
            const std::vector<long double> ref = naive_covariance(cube, used);
            ASSERT_EQ(m.samples, used);
            const double mx = max_abs_value(cube);
            const int e = detail::pca_fixed_point_exponent(mx, used);
            const double fixed_err = dtype_is_float(t) ? 4 * mx * std::ldexp(1.0, -e) : 0.0;
            for (int i = 0; i < B; ++i)
                for (int j = 0; j < B; ++j) {
                    const double r = double(ref[std::size_t(i) * B + std::size_t(j)]);
                    const double scale = std::sqrt(double(ref[std::size_t(i) * B + std::size_t(i)] * ref[std::size_t(j) * B + std::size_t(j)]));
                    EXPECT_NEAR(m.covariance[std::size_t(i) * B + std::size_t(j)], r, 1e-13 * scale + fixed_err) << i << "," << j;
                }
        }
}

// C·v = λ·v, orthonormal eigenvectors, eigenvalues descending, ratios summing to 1, the sign rule.
TEST(PcaEigen, DecompositionOfRandomCubesOfEveryType) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (DType t : kTypes)
        for (int B : {1, 2, 5, 24}) {
            const Cube cube = B == 24 ? testing::random_cube(31, 17, B, t, seed, 0, 100) : correlated_cube(31, 17, B, t, seed + B);
            SCOPED_TRACE(describe(cube));
            const PcaModel m = pca_fit(cpu_context(), cube, {.components = B});
            ASSERT_EQ(m.num_components(), B);
            ASSERT_EQ(m.eigenvalues.size(), std::size_t(B));
            const double lmax = std::max(std::fabs(m.eigenvalues.front()), std::fabs(m.eigenvalues.back()));
            double ratio_sum = 0;
            for (int j = 0; j < B; ++j) {
                const double* v = &m.components[std::size_t(j) * B];
                if (j > 0) {
                    EXPECT_GE(m.eigenvalues[std::size_t(j - 1)], m.eigenvalues[std::size_t(j)]);
                }
                EXPECT_GE(m.eigenvalues[std::size_t(j)], -1e-12 * lmax);  // C is positive semi-definite
                for (int i = 0; i < B; ++i) {
                    double cv = 0;
                    for (int b = 0; b < B; ++b) cv += m.covariance[std::size_t(i) * B + std::size_t(b)] * v[b];
                    EXPECT_NEAR(cv, m.eigenvalues[std::size_t(j)] * v[i], 1e-11 * lmax) << "row " << i << " of C·v_" << j;
                }
                for (int k = 0; k <= j; ++k) {
                    double dot = 0;
                    for (int b = 0; b < B; ++b) dot += v[b] * m.components[std::size_t(k) * B + std::size_t(b)];
                    EXPECT_NEAR(dot, j == k ? 1.0 : 0.0, 1e-12) << "v_" << j << "·v_" << k;
                }
                double sum = 0, l1 = 0;
                int largest = 0;
                for (int b = 0; b < B; ++b) {
                    sum += v[b], l1 += std::fabs(v[b]);
                    if (std::fabs(v[b]) > std::fabs(v[largest])) largest = b;
                }
                if (std::fabs(sum) > 1e-12 * l1) EXPECT_GT(sum, 0) << "sign of v_" << j;
                else EXPECT_GT(v[largest], 0) << "sign of v_" << j << " (zero sum)";
                ratio_sum += m.explained_variance_ratio[std::size_t(j)];
            }
            EXPECT_NEAR(ratio_sum, 1.0, 1e-12);
        }
}

// A few components of many bands (the PCA fusions' case): only the kept eigenvectors are computed,
// by bisection and inverse iteration, including on data with many ties and tightly clustered or
// repeated eigenvalues (where the MRRR subset solver failed).
TEST(PcaEigen, FewComponentsOfManyBands) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (DType t : kTypes)
        for (int pattern = 0; pattern < 4; ++pattern) {
            double lo = 0, hi = 0;
            pca_test::type_range(t, lo, hi);
            const Cube cube = pattern == 0   ? correlated_cube(47, 15, 200, t, seed)
                              : pattern == 1 ? testing::random_levels_cube(47, 15, 200, t, seed, 3)
                              : pattern == 2 ? testing::random_cube(12, 10, 200, t, seed, 0, 50)  // P < B: rank-deficient
                                             : testing::random_cube(47, 15, 200, t, seed + 1, lo, hi);  // the type's range
            SCOPED_TRACE(describe(cube) + " pattern " + std::to_string(pattern));
            for (int k : {1, 3, 7, 200}) {
                const PcaModel m = pca_fit(cpu_context(), cube, {.components = k});
                ASSERT_EQ(m.eigenvalues.size(), 200u);
                const double lmax = std::fabs(m.eigenvalues.front());
                for (int j = 0; j < k; ++j) {
                    const double* v = &m.components[std::size_t(j) * 200];
                    double norm = 0;
                    for (int b = 0; b < 200; ++b) norm += v[b] * v[b];
                    EXPECT_NEAR(norm, 1.0, 1e-12);
                    for (int i = 0; i < 200; i += 7) {
                        double cv = 0;
                        for (int b = 0; b < 200; ++b) cv += m.covariance[std::size_t(i) * 200 + std::size_t(b)] * v[b];
                        ASSERT_NEAR(cv, m.eigenvalues[std::size_t(j)] * v[i], 1e-10 * lmax) << "row " << i << " of C·v_" << j;
                    }
                }
            }
        }
}

// Samples at the type's extremes (covariances near the top of f64's range for floats): a step of the
// short eigen path (dstebz) fails there, and the full dsyevr must take over.
TEST(PcaEigen, ExtremeValuesFallBackToTheFullSolver) {
    for (DType t : kTypes) {
        const Cube c = pca_test::extreme_cube(t, testing::test_seed());
        SCOPED_TRACE(describe(c));
        const PcaModel m = pca_fit(cpu_context(), c, {.components = 3});
        const double lmax = std::fabs(m.eigenvalues.front());
        for (int j = 0; j < 3; ++j)
            for (int i = 0; i < 6; ++i) {
                double cv = 0;
                for (int b = 0; b < 6; ++b) cv += m.covariance[std::size_t(i) * 6 + std::size_t(b)] * m.components[std::size_t(j) * 6 + std::size_t(b)];
                EXPECT_NEAR(cv, m.eigenvalues[std::size_t(j)] * m.components[std::size_t(j) * 6 + std::size_t(i)], 1e-10 * lmax);
            }
    }
}

// Sign rule: a negative sum is flipped; a zero sum makes the largest entry (the first on ties) positive.
TEST(PcaSignRule, NegativeSumAndZeroSumCases) {
    const Cube base = base_u8(16, 16, 3);
    auto two_band = [&](double a0, double a1) {
        Cube c(16, 16, 2, DType::F64);
        for (int y = 0; y < 16; ++y)
            for (int x = 0; x < 16; ++x) c.set_value(x, y, 0, a0 * base.value(x, y, 0)), c.set_value(x, y, 1, a1 * base.value(x, y, 0));
        return pca_fit(cpu_context(), c, {.components = 1});
    };
    // (1, −2)/√5 has sum < 0: flipped to (−1, 2)/√5.
    PcaModel m = two_band(1, -2);
    EXPECT_NEAR(m.components[0], -1 / std::sqrt(5.0), 1e-12);
    EXPECT_NEAR(m.components[1], 2 / std::sqrt(5.0), 1e-12);
    // (−3, 1)/√10: sum < 0, flipped to (3, −1)/√10 (the sum wins over the largest entry's sign).
    m = two_band(-3, 1);
    EXPECT_NEAR(m.components[0], 3 / std::sqrt(10.0), 1e-12);
    EXPECT_NEAR(m.components[1], -1 / std::sqrt(10.0), 1e-12);
    // (1, −1)/√2: zero sum; the largest magnitude (the first when LAPACK returns equal ones) positive.
    m = two_band(1, -1);
    EXPECT_NEAR(std::fabs(m.components[0]), 1 / std::sqrt(2.0), 1e-12);
    EXPECT_NEAR(m.components[0] + m.components[1], 0.0, 1e-12);
    const int largest = std::fabs(m.components[1]) > std::fabs(m.components[0]) ? 1 : 0;
    EXPECT_GT(m.components[std::size_t(largest)], 0);
    // Three bands (2, −1, −1): zero sum, the largest is band 0.
    Cube c3(16, 16, 3, DType::I32);
    for (int y = 0; y < 16; ++y)
        for (int x = 0; x < 16; ++x)
            for (int b = 0; b < 3; ++b) c3.set_value(x, y, b, (b == 0 ? 2 : -1) * base.value(x, y, 0));
    m = pca_fit(cpu_context(), c3, {.components = 1});
    EXPECT_NEAR(m.components[0], 2 / std::sqrt(6.0), 1e-12);
    EXPECT_NEAR(m.components[1], -1 / std::sqrt(6.0), 1e-12);
    // One band: v = (1).
    m = pca_fit(cpu_context(), testing::random_cube(9, 4, 1, DType::I16, 5, -900, 40), {.components = 1});
    EXPECT_EQ(m.components, std::vector<double>{1.0});
}

// ---- pixels, fixed point, degenerate cubes ------------------------------------------------------------

// A pixel with a NaN or ±Inf band is left out: the model equals (bit for bit) the model of the
// cube of the other pixels, and its scores are NaN (the host's quiet NaN).
TEST(PcaPixels, NonFinitePixelsAreExcluded) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (DType t : {DType::F32, DType::F64}) {
        Cube cube = correlated_cube(21, 13, 6, t, seed);
        std::mt19937_64 rng(seed);
        const double bad[] = {NAN, INFINITY, -INFINITY};
        std::vector<bool> excluded(std::size_t(21 * 13), false);
        for (int n = 0; n < 40; ++n) {
            const int p = int(rng() % (21 * 13)), b = int(rng() % 6);
            cube.set_value(p % 21, p / 21, b, bad[rng() % 3]);
            excluded[std::size_t(p)] = true;
        }
        const int kept = int(std::count(excluded.begin(), excluded.end(), false));
        Cube compact(kept, 1, 6, t);
        for (int p = 0, i = 0; p < 21 * 13; ++p)
            if (!excluded[std::size_t(p)]) {
                for (int b = 0; b < 6; ++b) compact.set_value(i, 0, b, cube.value(p % 21, p / 21, b));
                ++i;
            }
        const PcaResult r = pca(cpu_context(), cube, {.components = 4});
        const PcaResult rc = pca(cpu_context(), compact, {.components = 4});
        EXPECT_EQ(r.model.samples, kept);
        EXPECT_TRUE(models_identical(rc.model, r.model));
        const double qnan = std::numeric_limits<double>::quiet_NaN();
        for (int p = 0, i = 0; p < 21 * 13; ++p)
            for (int j = 0; j < 4; ++j) {
                const double s = r.scores.value(p % 21, p / 21, j);
                const double e = excluded[std::size_t(p)] ? qnan : rc.scores.value(i, 0, j);
                ASSERT_EQ(std::memcmp(&s, &e, sizeof s), 0) << "pixel " << p << " component " << j;
                if (j == 3 && !excluded[std::size_t(p)]) ++i;
            }
    }
    Cube all_nan(3, 2, 2, DType::F32);
    all_nan.set_value(0, 0, 0, NAN);
    for (int p = 0; p < 6; ++p) all_nan.set_value(p % 3, p / 3, 1, NAN);
    EXPECT_THROW(pca_fit(cpu_context(), all_nan, {.components = 1}), InvalidInput);
}

TEST(PcaFixedPoint, ExponentAndExactScaling) {
    EXPECT_EQ(detail::pca_fixed_point_exponent(255, 1000), 62 - 8 - 10);
    EXPECT_EQ(detail::pca_fixed_point_exponent(256, 1024), 62 - 8 - 10);
    EXPECT_EQ(detail::pca_fixed_point_exponent(1.0, 1), 62);
    EXPECT_EQ(detail::pca_fixed_point_exponent(0.3, 3), 62 - (-1) - 2);
    EXPECT_EQ(detail::pca_fixed_point_exponent(0.0, 100), 0);
    EXPECT_EQ(detail::pca_fixed_point_exponent(1e300, 1 << 20), 62 - 997 - 20);
    EXPECT_EQ(detail::pca_fixed_point_exponent(1e-300, 4), 1000);  // clamped: 2^e stays a normal double
    // Scaling float input by a power of two moves e and leaves q unchanged: mean ×2 and covariance
    // ×4 exactly; f32 and f64 cubes of the same values give the same model.
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube c32 = correlated_cube(27, 11, 5, DType::F32, seed);
    const Cube c64 = c32.to_dtype(DType::F64);
    Cube c2 = c64.clone();
    for (int b = 0; b < 5; ++b)
        for (int y = 0; y < 11; ++y)
            for (int x = 0; x < 27; ++x) c2.set_value(x, y, b, 2 * c64.value(x, y, b));
    const PcaModel m32 = pca_fit(cpu_context(), c32, {.components = 5});
    const PcaModel m64 = pca_fit(cpu_context(), c64, {.components = 5});
    const PcaModel m2 = pca_fit(cpu_context(), c2, {.components = 5});
    EXPECT_TRUE(models_identical(m32, m64));
    for (std::size_t i = 0; i < m64.mean.size(); ++i) EXPECT_EQ(m2.mean[i], 2 * m64.mean[i]);
    for (std::size_t i = 0; i < m64.covariance.size(); ++i) EXPECT_EQ(m2.covariance[i], 4 * m64.covariance[i]);
    // Integer-valued float input agrees with the integer cube up to the final roundings.
    const Cube ci = correlated_cube(27, 11, 5, DType::I16, seed);
    const PcaModel mi = pca_fit(cpu_context(), ci, {.components = 5});
    const PcaModel mf = pca_fit(cpu_context(), ci.to_dtype(DType::F32), {.components = 5});
    for (std::size_t i = 0; i < mi.covariance.size(); ++i)
        EXPECT_NEAR(mf.covariance[i], mi.covariance[i], 1e-13 * std::fabs(mi.eigenvalues[0]));
    // Values whose squares overflow f64 cannot have a covariance.
    Cube huge(4, 4, 2, DType::F64);
    for (int p = 0; p < 16; ++p) huge.set_value(p % 4, p / 4, 0, (p % 2 ? 1 : -1) * 1e300), huge.set_value(p % 4, p / 4, 1, p);
    EXPECT_THROW(pca_fit(cpu_context(), huge, {.components = 1}), InvalidInput);
}

TEST(PcaPixels, OnePixelAndConstantCubes) {
    const Cube one = testing::random_cube(1, 1, 4, DType::F32, 3, -5, 5);
    const PcaResult r = pca(cpu_context(), one, {.components = 2});
    EXPECT_EQ(r.model.samples, 1);
    EXPECT_EQ(r.model.covariance, std::vector<double>(16, 0.0));
    EXPECT_EQ(r.model.eigenvalues, std::vector<double>(4, 0.0));
    EXPECT_EQ(r.model.explained_variance_ratio, std::vector<double>(2, 0.0));
    for (int b = 0; b < 4; ++b) EXPECT_EQ(r.model.mean[std::size_t(b)], one.value(0, 0, b));
    EXPECT_EQ(r.scores.value(0, 0, 0), 0.0);
    Cube constant(7, 5, 3, DType::U8);
    for (int b = 0; b < 3; ++b)
        for (int p = 0; p < 35; ++p) constant.set_value(p % 7, p / 7, b, 10 * b + 3);
    const PcaResult rc = pca(cpu_context(), constant, {.components = 3});
    EXPECT_EQ(rc.model.eigenvalues, std::vector<double>(3, 0.0));
    for (int j = 0; j < 3; ++j)
        for (int p = 0; p < 35; ++p) EXPECT_EQ(rc.scores.value(p % 7, p / 7, j), 0.0);
}

// ---- determinism ------------------------------------------------------------------------------------

// Integer sums do not depend on how the pixels are split: any thread count and any layout give
// the same bits.
TEST(PcaDeterminism, ThreadCountsAndLayoutsGiveIdenticalResults) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Context one({.backend = Backend::Cpu, .threads = 1});
    const Context two({.backend = Backend::Cpu, .threads = 2});
    const Context three({.backend = Backend::Cpu, .threads = 3});
    for (DType t : kTypes) {
        const Cube bsq = correlated_cube(67, 45, 9, t, seed);  // 3015 pixels: 12 blocks of 256, one partial
        SCOPED_TRACE(describe(bsq));
        const PcaResult ref = pca(one, bsq, {.components = 4});
        for (const Context* ctx : {&two, &three}) {
            const PcaResult r = pca(*ctx, bsq, {.components = 4});
            EXPECT_TRUE(models_identical(ref.model, r.model)) << ctx->threads() << " threads";
            EXPECT_TRUE(cubes_identical(ref.scores, r.scores)) << ctx->threads() << " threads";
        }
        for (Layout l : {Layout::BIL, Layout::BIP}) {
            const Cube other = bsq.to_layout(l);
            const PcaResult r = pca(three, other, {.components = 4});
            EXPECT_TRUE(models_identical(ref.model, r.model)) << layout_name(l);
            EXPECT_TRUE(cubes_identical(ref.scores, r.scores)) << layout_name(l);
            EXPECT_TRUE(cubes_identical(ref.scores, pca_transform(two, other, pca_fit(one, other, {.components = 4}))));
        }
        EXPECT_EQ(ref.scores.bands(), 4);
        EXPECT_EQ(ref.scores.dtype(), DType::F64);
        EXPECT_EQ(ref.scores.layout(), Layout::BSQ);
    }
}

// The scores follow the recipe: bands in order, one rounding per operation.
TEST(PcaTransform, ScoresFollowTheRecipe) {
    const Cube cube = correlated_cube(13, 8, 6, DType::I16, 77, Layout::BIP);
    const PcaModel m = pca_fit(cpu_context(), cube, {.components = 3});
    const Cube s = pca_transform(cpu_context(), cube, m);
    ASSERT_EQ(s.metadata().band_names, (std::vector<std::string>{"PC1", "PC2", "PC3"}));
    for (int y = 0; y < 8; ++y)
        for (int x = 0; x < 13; ++x)
            for (int j = 0; j < 3; ++j) {
                volatile double acc = 0;  // volatile: one rounding per operation, as the recipe says
                for (int b = 0; b < 6; ++b) {
                    volatile double d = cube.value(x, y, b) - m.mean[std::size_t(b)];
                    volatile double t = d * m.components[std::size_t(j) * 6 + std::size_t(b)];
                    acc = acc + t;
                }
                ASSERT_EQ(s.value(x, y, j), acc) << x << "," << y << " PC" << j + 1;
            }
}

// ---- bad inputs ---------------------------------------------------------------------------------------

TEST(PcaBadInput, ComponentsShapesAndModels) {
    const Cube cube = testing::random_cube(5, 4, 3, DType::U8, 1, 0, 255);
    for (int k : {0, -1, 4}) {
        try {
            pca_fit(cpu_context(), cube, {.components = k});
            ADD_FAILURE() << "components = " << k << " accepted";
        } catch (const InvalidInput& e) {
            EXPECT_NE(std::string(e.what()).find("components = " + std::to_string(k)), std::string::npos) << e.what();
        }
        EXPECT_THROW(pca(cpu_context(), cube, {.components = k}), InvalidInput);
    }
    EXPECT_THROW(pca_fit(cpu_context(), Cube(0, 4, 3, DType::U8), {.components = 1}), InvalidInput);
    EXPECT_THROW(pca_fit(cpu_context(), Cube(4, 4, 0, DType::U8), {.components = 1}), InvalidInput);
    const PcaModel m = pca_fit(cpu_context(), cube, {.components = 2});
    try {
        pca_transform(cpu_context(), testing::random_cube(5, 4, 4, DType::U8, 1, 0, 255), m);
        ADD_FAILURE() << "band mismatch accepted";
    } catch (const InvalidInput& e) {
        EXPECT_NE(std::string(e.what()).find("fitted on 3"), std::string::npos) << e.what();
    }
    PcaModel broken = m;
    broken.components.pop_back();
    EXPECT_THROW(pca_transform(cpu_context(), cube, broken), InvalidInput);
    broken = m;
    broken.mean.clear();
    EXPECT_THROW(pca_transform(cpu_context(), cube, broken), InvalidInput);
    EXPECT_THROW(pca_transform(cpu_context(), cube, PcaModel{}), InvalidInput);
}

// ---- CLI -------------------------------------------------------------------------------------------

/// Single-quotes for the shell (run_cli passes its argument string to /bin/sh as is).
using cubekit::testing::q;

nlohmann::json read_json(const fs::path& p) {
    std::ifstream in(p);
    return nlohmann::json::parse(in);
}

TEST(PcaCli, RoundTripNpyAndSidecar) {
    const fs::path dir = testing::temp_dir("pca_cli");
    const Cube cube = correlated_cube(19, 14, 5, DType::I16, 11, Layout::BIP);
    write_cube(cube, dir / "in.npy");
    const auto r = testing::run_cli("pca " + q(dir / "in.npy") + " " + q(dir / "pcs.npy") +
                                    " --components 2 --backend cpu --json --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const PcaResult lib = pca(cpu_context(), cube, {.components = 2});
    const Cube out = read_cube(dir / "pcs.npy");
    ASSERT_EQ(out.width(), 19);
    ASSERT_EQ(out.height(), 14);
    ASSERT_EQ(out.bands(), 2);
    ASSERT_EQ(out.dtype(), DType::F64);
    EXPECT_TRUE(cubes_identical(lib.scores.to_layout(Layout::BIP), out));
    const nlohmann::json model = read_json(dir / "pcs.pca.json");
    for (const char* key : {"bands", "samples", "mean", "eigenvalues", "explained_variance_ratio", "components"})
        EXPECT_TRUE(model.contains(key)) << key;
    EXPECT_EQ(model["bands"], 5);
    EXPECT_EQ(model["samples"], 19 * 14);
    EXPECT_EQ(model["mean"].get<std::vector<double>>(), lib.model.mean);  // 17 digits: exact round trip
    EXPECT_EQ(model["eigenvalues"].get<std::vector<double>>(), lib.model.eigenvalues);
    EXPECT_EQ(model["explained_variance_ratio"].get<std::vector<double>>(), lib.model.explained_variance_ratio);
    ASSERT_EQ(model["components"].size(), 2u);
    EXPECT_EQ(model["components"][1].get<std::vector<double>>(),
              std::vector<double>(lib.model.components.begin() + 5, lib.model.components.end()));
    const nlohmann::json summary = nlohmann::json::parse(r.out);
    EXPECT_EQ(summary["command"], "pca");
    EXPECT_EQ(summary["explained_variance_ratio"].get<std::vector<double>>(), lib.model.explained_variance_ratio);
    EXPECT_EQ(summary["outputs"].size(), 2u);
}

TEST(PcaCli, EnviOutputModelOutAndClamp) {
    const fs::path dir = testing::temp_dir("pca_cli_envi");
    const Cube cube = correlated_cube(9, 7, 3, DType::F32, 12);
    write_cube(cube, dir / "in.npy");
    const auto r = testing::run_cli("pca " + q(dir / "in.npy") + " " + q(dir / "pcs.hdr") + " -k 10 --model-out " +
                                    q(dir / "m.json") + " --backend cpu");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("exceeds the 3 bands; using 3"), std::string::npos) << r.err;
    EXPECT_TRUE(fs::exists(dir / "pcs.img"));
    EXPECT_FALSE(fs::exists(dir / "pcs.pca.json"));
    const Cube out = read_cube(dir / "pcs.img");
    EXPECT_EQ(out.bands(), 3);
    EXPECT_TRUE(cubes_identical(pca(cpu_context(), read_cube(dir / "in.npy"), {.components = 3}).scores,
                                out.to_layout(Layout::BSQ)));
    EXPECT_EQ(read_json(dir / "m.json")["components"].size(), 3u);
    const auto help = testing::run_cli("pca --help");
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_NE(help.out.find("Examples:"), std::string::npos);
}

TEST(PcaCli, BadInvocationsLeaveNothing) {
    const fs::path dir = testing::temp_dir("pca_cli_bad");
    write_cube(correlated_cube(6, 5, 3, DType::U8, 13), dir / "in.npy");
    struct Case { std::string args; int code; std::string says; };
    const Case cases[] = {
        {"pca " + q(dir / "in.npy") + " " + q(dir / "o.npy") + " --components 0", 2, "--components"},
        {"pca " + q(dir / "in.npy") + " " + q(dir / "o.png"), 2, "o.png"},
        {"pca " + q(dir / "in.npy") + " " + q(dir / "o.jpg"), 2, "o.jpg"},
        {"pca " + q(dir / "gone.npy") + " " + q(dir / "o.npy"), 3, "gone.npy"},
        {"pca " + q(dir / "in.npy") + " " + q(dir / "o.npy") + " --model-out " + q(dir / "o.npy"), 2, "same file"},
        {"pca " + q(dir / "in.npy") + " " + q(dir / "o.npy") + " --bands 7", 2, "--bands"},
        {"pca " + q(dir / "in.npy") + " " + q(dir / "o.npy") + " --model-out " + q(dir / "nodir" / "m.json"), 3, "m.json"},
    };
    for (const Case& c : cases) {
        const auto r = testing::run_cli(c.args);
        EXPECT_EQ(r.exit_code, c.code) << c.args << "\n" << r.err;
        EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
        std::vector<std::string> left;
        for (const auto& e : fs::directory_iterator(dir))
            if (e.path().filename() != "in.npy") left.push_back(e.path().filename().string());
        EXPECT_TRUE(left.empty()) << c.args << " left " << left.front();
    }
}

}  // namespace
}  // namespace cubekit
