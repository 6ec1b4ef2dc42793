#pragma once
// Helpers shared by the k-means GPU tests (kmeans_gpu_test.cpp, kmeans_into_gpu_test.cpp): a
// description of a case, the comparison of a CPU and a GPU result field by field, and the
// whole-result comparison of both backends.
//
// Exactness (§3.4–3.5): the Philox draws, the f32 FMA distances in band order, the lowest-index
// tie rule and the exact 64-bit integer (fixed-point) sums are the same on both backends, so
// labels, counts, centroids, palette, quantized image, iteration counts, convergence flags,
// k_effective and the restart winner must be identical; only the reported inertia (an f64 sum
// in a different order) may differ, by at most 1e-9 relative.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kmeans_test_helpers.hpp"

namespace cubekit::kmeans_test {

inline constexpr double kInertiaRelTol = 1e-9;

inline std::string describe(const Cube& c, const KmeansOptions& o) {
    std::string s = std::to_string(c.width()) + "x" + std::to_string(c.height()) + "x" + std::to_string(c.bands()) + " " +
                    std::string(dtype_name(c.dtype())) + " k=" + std::to_string(o.k) + " init=" + std::string(kmeans_init_name(o.init)) +
                    " empty=" + std::string(empty_policy_name(o.empty)) + " seed=" + std::to_string(o.seed) +
                    " init_sample=" + std::to_string(o.init_sample) + " max_iter=" + std::to_string(o.max_iter) +
                    " tol=" + std::to_string(o.tol) + " n_init=" + std::to_string(o.n_init);
    if (o.legacy) s += " legacy";
    if (!o.mask.empty()) s += " masked";
    return s;
}

inline bool same_double(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }
inline bool close(double a, double b) { return std::abs(a - b) <= kInertiaRelTol * std::max(std::abs(a), std::abs(b)); }

// Every output of two results; stops at the first differing field (per-pixel fields report
// the count and the first difference).
inline ::testing::AssertionResult same_result(const KmeansResult& c, const KmeansResult& g) {
    auto fail = [] { return ::testing::AssertionFailure(); };
    if (c.k != g.k || c.bands != g.bands || c.width != g.width || c.height != g.height)
        return fail() << "dimensions differ: cpu k=" << c.k << " m=" << c.bands << ", gpu k=" << g.k << " m=" << g.bands;
    if (c.valid_pixels != g.valid_pixels) return fail() << "valid_pixels cpu " << c.valid_pixels << " gpu " << g.valid_pixels;
    if (c.dtype != g.dtype || c.centroid_type != g.centroid_type) return fail() << "types differ";
    if (c.iterations != g.iterations) return fail() << "iterations cpu " << c.iterations << " gpu " << g.iterations;
    if (c.converged != g.converged) return fail() << "converged cpu " << c.converged << " gpu " << g.converged;
    if (c.k_effective != g.k_effective) return fail() << "k_effective cpu " << c.k_effective << " gpu " << g.k_effective;
    if (c.winner != g.winner) return fail() << "winner cpu " << c.winner << " gpu " << g.winner;
    if (c.labels.size() != g.labels.size()) return fail() << "label counts " << c.labels.size() << " vs " << g.labels.size();
    std::size_t nl = 0, first = 0;
    for (std::size_t p = 0; p < c.labels.size(); ++p)
        if (c.labels[p] != g.labels[p] && nl++ == 0) first = p;
    if (nl) return fail() << nl << " of " << c.labels.size() << " labels differ; first pixel " << first << ": cpu " << c.labels[first] << " gpu " << g.labels[first];
    if (c.counts != g.counts) {
        std::size_t j = 0;
        while (j < c.counts.size() && j < g.counts.size() && c.counts[j] == g.counts[j]) ++j;
        return fail() << "counts differ at cluster " << j;
    }
    if (c.centroids.size() != g.centroids.size() || c.palette.size() != g.palette.size()) return fail() << "centroid/palette sizes differ";
    for (std::size_t i = 0; i < c.centroids.size(); ++i)
        if (!same_double(c.centroids[i], g.centroids[i]))
            return fail() << "centroid element " << i << " (cluster " << i / std::max(1, c.bands) << "): cpu " << c.centroids[i] << " gpu " << g.centroids[i]
                          << " (diff " << c.centroids[i] - g.centroids[i] << ")";
    for (std::size_t i = 0; i < c.palette.size(); ++i)
        if (!same_double(c.palette[i], g.palette[i])) return fail() << "palette element " << i << ": cpu " << c.palette[i] << " gpu " << g.palette[i];
    if (c.quantized.empty() != g.quantized.empty()) return fail() << "one quantized image is empty";
    if (!c.quantized.empty())
        if (auto r = cubes_identical(c.quantized, g.quantized); !r) return fail() << "quantized: " << r.message();
    if (!close(c.inertia, g.inertia)) return fail() << "inertia cpu " << c.inertia << " gpu " << g.inertia;
    if (c.history.size() != g.history.size()) return fail() << "history length cpu " << c.history.size() << " gpu " << g.history.size();
    for (std::size_t i = 0; i < c.history.size(); ++i)
        if (!close(c.history[i], g.history[i])) return fail() << "history[" << i << "] cpu " << c.history[i] << " gpu " << g.history[i];
    if (c.restarts.size() != g.restarts.size()) return fail() << "restart counts differ";
    for (std::size_t r = 0; r < c.restarts.size(); ++r) {
        const KmeansRun &a = c.restarts[r], &b = g.restarts[r];
        if (a.seed != b.seed || a.iterations != b.iterations || a.converged != b.converged || a.k_effective != b.k_effective ||
            !close(a.inertia, b.inertia) || a.history.size() != b.history.size())
            return fail() << "restart " << r << " differs: cpu inertia " << a.inertia << " it " << a.iterations << ", gpu inertia " << b.inertia
                          << " it " << b.iterations;
    }
    if (c.warnings.size() != g.warnings.size()) return fail() << "warning counts cpu " << c.warnings.size() << " gpu " << g.warnings.size();
    return ::testing::AssertionSuccess();
}

// Runs both backends and compares; returns the CPU result for extra checks.
inline KmeansResult compare(const Context& gpu, const Cube& img, const KmeansOptions& o, const std::string& note = "") {
    SCOPED_TRACE(describe(img, o) + (note.empty() ? "" : " (" + note + ")"));
    KmeansResult c = kmeans(cpu_context(), img, o);
    const KmeansResult g = kmeans(gpu, img, o);
    EXPECT_TRUE(same_result(c, g));
    // A light sanity check that the CPU side is itself a valid result.
    std::uint64_t total = 0;
    for (std::uint64_t n : c.counts) total += n;
    EXPECT_EQ(total, std::uint64_t(c.valid_pixels));
    return c;
}

/// A W×H×m BIP image of type t (values 0..250) with about one pixel in 6 masked out, holding an
/// outlier in every band (had they been included they would dominate the centroids), and, for
/// float types, a NaN band in about one other pixel in 9.
struct MaskedImage {
    Cube image;
    std::vector<std::uint8_t> mask;
};
inline MaskedImage masked_image(int W, int H, int m, DType t, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    MaskedImage s{testing::random_cube(W, H, m, t, seed, 0, 250, Layout::BIP), std::vector<std::uint8_t>(std::size_t(W) * H, 1)};
    for (std::size_t p = 0; p < s.mask.size(); ++p) {
        const int x = int(p % W), y = int(p / W);
        if (rng() % 6 == 0) {
            s.mask[p] = 0;
            for (int b = 0; b < m; ++b) s.image.set_value(x, y, b, dtype_is_float(t) ? 5e4 : 2e9);
        } else if (dtype_is_float(t) && rng() % 9 == 0) {
            s.image.set_value(x, y, int(rng() % m), NAN);
        }
    }
    return s;
}

}  // namespace cubekit::kmeans_test
