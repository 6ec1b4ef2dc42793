#pragma once
// Helpers shared by the k-means CPU tests (kmeans_test.cpp, kmeans_init_test.cpp,
// kmeans_inputs_test.cpp): per-type data ranges, the valid-pixel set, the spec's f32 FMA distance
// (§3.5), palette rounding (§3.8), and the spec-level invariants every non-legacy result must meet.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cubekit/kmeans.hpp"
#include "testing.hpp"

namespace cubekit::kmeans_test {

using testing::cpu_context;
using testing::cubes_identical;
using testing::test_seed;

inline constexpr DType kTypes[] = {DType::U8, DType::U16, DType::I16, DType::U32, DType::I32, DType::F32, DType::F64};

inline std::string str(DType t) { return std::string(dtype_name(t)); }

inline double type_lo(DType t) {
    return visit_dtype(t, [](auto tag) { return double(std::numeric_limits<decltype(tag)>::lowest()); });
}
inline double type_hi(DType t) {
    return visit_dtype(t, [](auto tag) { return double(std::numeric_limits<decltype(tag)>::max()); });
}
// A sampling range for random data of each type (wide, signed where the type is).
inline std::pair<double, double> data_range(DType t) {
    switch (t) {
        case DType::U8: return {0, 255};
        case DType::U16: return {0, 65535};
        case DType::I16: return {-32768, 32767};
        case DType::U32: return {0, 4294967295.0};
        case DType::I32: return {-2147483648.0, 2147483647.0};
        case DType::F32: return {-1000, 1000};
        case DType::F64: return {-1, 1};
    }
    return {0, 1};
}

inline KmeansResult run(const Cube& image, const KmeansOptions& o) { return kmeans(cpu_context(), image, o); }

// ---- Independent helpers ------------------------------------------------------------------------

// Valid pixels (mask ≠ 0, no NaN band) in raster order.
struct ValidSet {
    int m = 0;
    std::vector<double> x;             // N × m
    std::vector<std::int64_t> raster;  // raster index of each valid pixel
    std::vector<char> valid;           // per raster pixel
    std::int64_t size() const { return std::int64_t(raster.size()); }
    const double* px(std::int64_t i) const { return x.data() + i * m; }
};

inline ValidSet valid_set(const Cube& img, const std::vector<std::uint8_t>& mask = {}) {
    ValidSet s;
    s.m = img.bands();
    s.valid.assign(std::size_t(img.width()) * img.height(), 0);
    std::vector<double> v(s.m);
    for (int y = 0; y < img.height(); ++y)
        for (int x = 0; x < img.width(); ++x) {
            const std::int64_t p = std::int64_t(y) * img.width() + x;
            bool ok = mask.empty() || mask[p] != 0;
            for (int b = 0; b < s.m; ++b) {
                v[b] = img.value(x, y, b);
                if (std::isnan(v[b])) ok = false;
            }
            if (!ok) continue;
            s.valid[p] = 1;
            s.raster.push_back(p);
            s.x.insert(s.x.end(), v.begin(), v.end());
        }
    return s;
}

// Spec §3.5 distance: f32 (f64 for f64 input), bands in order, one explicit FMA per band.
inline double spec_distance(const double* x, const double* c, int m, bool f64) {
    if (f64) {
        double d = 0;
        for (int b = 0; b < m; ++b) {
            const double diff = x[b] - c[b];
            d = std::fma(diff, diff, d);
        }
        return d;
    }
    float d = 0;
    for (int b = 0; b < m; ++b) {
        const float diff = float(x[b]) - float(c[b]);
        d = std::fma(diff, diff, d);
    }
    return d;
}

// Nearest of the listed centroids with the spec distance, lowest index on ties.
inline int nearest(const double* x, const std::vector<double>& c, int k, int m, bool f64) {
    int best = 0;
    double bd = spec_distance(x, c.data(), m, f64);
    for (int j = 1; j < k; ++j) {
        const double d = spec_distance(x, c.data() + std::size_t(j) * m, m, f64);
        if (d < bd) bd = d, best = j;
    }
    return best;
}

// Palette entry of a centroid (§3.8): round half away from zero, clamp to the type (integers).
// An integer palette holds +0 for a centroid in (−0.5, 0): −0 is not a value of an integer image.
inline double palette_value(double c, DType t) {
    if (dtype_is_float(t)) return c;
    const double v = std::clamp(std::round(c), type_lo(t), type_hi(t));
    return v == 0 ? 0.0 : v;
}
// Kept out of line: inlined into BoxDiagonalInitIsEvenlySpaced's band loop, GCC 12.2 at -O3 (SLP
// vectorizer; -fno-tree-slp-vectorize avoids it) dropped the f32 rounding of two of the 3 bands.
[[gnu::noinline]] inline double as_centroid(double v, DType input) { return input == DType::F64 ? v : double(float(v)); }

inline std::vector<double> centroid(const KmeansResult& r, int j) {
    return std::vector<double>(r.centroids.begin() + std::size_t(j) * r.bands, r.centroids.begin() + std::size_t(j + 1) * r.bands);
}
inline bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b)); }
inline bool same_sample_bytes(const Cube& a, const Cube& b, int x, int y, int band) {
    const std::size_t es = dtype_size(a.dtype());
    return std::memcmp(a.bytes() + a.shape().offset(x, y, band) * es, b.bytes() + b.shape().offset(x, y, band) * es, es) == 0;
}

// W×H×m cube (BIP) from raster-ordered pixel vectors.
inline Cube from_pixels(int W, int H, int m, DType t, const std::vector<double>& px, Layout layout = Layout::BIP) {
    Cube c(W, H, m, t, layout);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x)
            for (int b = 0; b < m; ++b) c.set_value(x, y, b, px[(std::size_t(y) * W + x) * m + b]);
    return c;
}

// The spec-level invariants of any non-legacy result (§2.3, §3.8): shapes, label range, counts
// equal the label histogram and are sorted, k_effective, palette rounding, quantized image,
// nearest-centroid labels (spec distance), inertia recomputed, history non-increasing, restarts.
inline void check_invariants(const Cube& img, const KmeansOptions& o, const KmeansResult& r) {
#define INV(cond, what)                                          \
    do {                                                         \
        if (!(cond)) {                                           \
            ADD_FAILURE() << "invariant " #cond ": " << what;    \
            return;                                              \
        }                                                        \
    } while (0)
    const int W = img.width(), H = img.height(), m = img.bands(), k = o.k;
    const DType t = img.dtype();
    const bool f64 = t == DType::F64;
    const ValidSet s = valid_set(img, o.mask);
    const std::int64_t N = s.size();
    INV(r.k == k && r.bands == m && r.width == W && r.height == H, "result dimensions");
    INV(r.valid_pixels == N, r.valid_pixels << " vs " << N);
    INV(r.dtype == t, dtype_name(r.dtype));
    INV(r.centroid_type == (f64 ? DType::F64 : DType::F32), dtype_name(r.centroid_type));
    INV(r.labels.size() == std::size_t(W) * H, r.labels.size());
    INV(r.centroids.size() == std::size_t(k) * m && r.palette.size() == std::size_t(k) * m && r.counts.size() == std::size_t(k),
        "sizes " << r.centroids.size() << " " << r.palette.size() << " " << r.counts.size());
    std::vector<std::uint64_t> hist(k, 0);
    for (std::size_t p = 0; p < r.labels.size(); ++p) {
        if (!s.valid[p]) {
            INV(r.labels[p] == -1, "excluded pixel " << p << " has label " << r.labels[p]);
            continue;
        }
        INV(r.labels[p] >= 0 && r.labels[p] < k, "pixel " << p << " label " << r.labels[p]);
        ++hist[r.labels[p]];
    }
    std::uint64_t total = 0;
    int nonempty = 0;
    for (int j = 0; j < k; ++j) {
        INV(hist[j] == r.counts[j], "cluster " << j << ": " << hist[j] << " labels but count " << r.counts[j]);
        INV(j == 0 || r.counts[j - 1] >= r.counts[j], "counts not sorted at " << j);
        total += r.counts[j];
        nonempty += r.counts[j] > 0;
    }
    INV(total == std::uint64_t(N), total);
    INV(r.k_effective == nonempty, r.k_effective << " vs " << nonempty);
    for (int j = 0; j < k; ++j) {
        if (r.counts[j] == 0 && !std::isfinite(r.centroids[std::size_t(j) * m])) continue;  // unset cluster
        for (int b = 0; b < m; ++b) {
            const double c = r.centroids[std::size_t(j) * m + b];
            INV(std::isfinite(c), "centroid " << j << " band " << b << " = " << c);
            INV(same_bits(c, as_centroid(c, t)), "centroid " << j << " not representable in its type: " << c);
            INV(same_bits(r.palette[std::size_t(j) * m + b], palette_value(c, t)),
                "palette " << j << "," << b << " = " << r.palette[std::size_t(j) * m + b] << " for centroid " << c);
        }
    }
    if (o.paint) {
        INV(r.quantized.width() == W && r.quantized.height() == H && r.quantized.bands() == m && r.quantized.dtype() == t,
            r.quantized.shape().describe());
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                const std::size_t p = std::size_t(y) * W + x;
                for (int b = 0; b < m; ++b) {
                    if (!s.valid[p]) {
                        INV(same_sample_bytes(img, r.quantized, x, y, b), "excluded pixel (" << x << "," << y << ") not copied");
                    } else {
                        const double want = r.palette[std::size_t(r.labels[p]) * m + b];
                        INV(same_bits(r.quantized.value(x, y, b), want),
                            "quantized (" << x << "," << y << "," << b << ") = " << r.quantized.value(x, y, b) << ", palette " << want);
                    }
                }
            }
    }
    // Final pass: every label is a nearest centroid (spec distance) among the non-empty clusters,
    // and the inertia is Σ of those distances.
    double J = 0;
    for (std::int64_t i = 0; i < N; ++i) {
        const int l = r.labels[s.raster[i]];
        const double dl = spec_distance(s.px(i), r.centroids.data() + std::size_t(l) * m, m, f64);
        for (int j = 0; j < k; ++j)
            if (r.counts[j] > 0) {
                const double dj = spec_distance(s.px(i), r.centroids.data() + std::size_t(j) * m, m, f64);
                INV(dj >= dl, "pixel " << s.raster[i] << " labelled " << l << " (d=" << dl << ") but cluster " << j << " has d=" << dj);
            }
        J += dl;
    }
    INV(std::abs(r.inertia - J) <= 1e-9 * J, "inertia " << r.inertia << " recomputed " << J);
    INV(r.iterations >= 0 && r.iterations <= o.max_iter, r.iterations);
    if (!r.converged) INV(r.iterations == o.max_iter, "not converged after " << r.iterations << " of " << o.max_iter);
    if (o.history) {
        INV(r.history.size() == std::size_t(r.iterations), r.history.size() << " history entries, " << r.iterations << " iterations");
        for (std::size_t i = 1; i < r.history.size(); ++i)
            INV(r.history[i] <= r.history[i - 1] * (1 + 1e-6), "history rises at " << i << ": " << r.history[i - 1] << " -> " << r.history[i]);
    } else {
        INV(r.history.empty(), r.history.size());
    }
    INV(r.restarts.size() == std::size_t(o.n_init), r.restarts.size());
    INV(r.winner >= 0 && r.winner < o.n_init, r.winner);
    const KmeansRun& w = r.restarts[r.winner];
    INV(same_bits(w.inertia, r.inertia) && w.iterations == r.iterations && w.converged == r.converged && w.k_effective == r.k_effective,
        "restarts[winner] differs from the result");
    if (o.history) INV(w.history == r.history, "restarts[winner].history");
    for (int i = 0; i < o.n_init; ++i) INV(r.restarts[i].seed == o.seed + std::uint64_t(i), "restart " << i << " seed " << r.restarts[i].seed);
#undef INV
}

// Centroid values as a sorted list of vectors (order-free comparisons).
inline std::vector<std::vector<double>> centroid_set(const KmeansResult& r, bool nonempty_only = true) {
    std::vector<std::vector<double>> v;
    for (int j = 0; j < r.k; ++j)
        if (!nonempty_only || r.counts[j] > 0) v.push_back(centroid(r, j));
    std::sort(v.begin(), v.end());
    return v;
}

inline void expect_identical_results(const KmeansResult& a, const KmeansResult& b, const std::string& what) {
    SCOPED_TRACE(what);
    EXPECT_EQ(a.labels, b.labels);
    EXPECT_EQ(a.counts, b.counts);
    ASSERT_EQ(a.centroids.size(), b.centroids.size());
    for (std::size_t i = 0; i < a.centroids.size(); ++i) ASSERT_TRUE(same_bits(a.centroids[i], b.centroids[i])) << "centroid element " << i;
    for (std::size_t i = 0; i < a.palette.size(); ++i) ASSERT_TRUE(same_bits(a.palette[i], b.palette[i])) << "palette element " << i;
    EXPECT_TRUE(cubes_identical(a.quantized, b.quantized));
    EXPECT_TRUE(same_bits(a.inertia, b.inertia)) << a.inertia << " vs " << b.inertia;
    EXPECT_EQ(a.iterations, b.iterations);
    EXPECT_EQ(a.converged, b.converged);
    EXPECT_EQ(a.k_effective, b.k_effective);
    EXPECT_EQ(a.history, b.history);
    EXPECT_EQ(a.winner, b.winner);
    ASSERT_EQ(a.restarts.size(), b.restarts.size());
    for (std::size_t r = 0; r < a.restarts.size(); ++r) {
        EXPECT_TRUE(same_bits(a.restarts[r].inertia, b.restarts[r].inertia)) << "restart " << r;
        EXPECT_EQ(a.restarts[r].iterations, b.restarts[r].iterations) << "restart " << r;
    }
}

}  // namespace cubekit::kmeans_test
