// k-means CPU engine against the spec's test oracles (kmeans.md §5). Runs in CI.
//
// Every expectation is computed here independently of the engine: nearest centroids with the
// spec's f32 FMA distance (§3.5) and in double, cluster means from exact integer sums (the §3.5
// fixed point for float input), and hand-computed relocations (§3.7). Clusters are sorted by
// decreasing count (§3.8), so most comparisons go through the centroid *values* rather than the
// cluster indices. Shared helpers: kmeans_test_helpers.hpp; initialisation and determinism
// (oracle 2): kmeans_init_test.cpp; legacy mode (oracle 10) and inputs: kmeans_inputs_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kmeans_test_helpers.hpp"

namespace cubekit {
namespace {

using namespace kmeans_test;

// ---- Independent helpers of the oracles below -------------------------------------------------------

// The same distance in long double, without the f32 rounding (an independent second opinion).
long double exact_distance(const double* x, const double* c, int m) {
    long double d = 0;
    for (int b = 0; b < m; ++b) {
        const long double diff = (long double)x[b] - (long double)c[b];
        d += diff * diff;
    }
    return d;
}

int ceil_log2(double v) {  // ⌈log2 v⌉ for v > 0
    int e = 0;
    const double f = std::frexp(v, &e);
    return f == 0.5 ? e - 1 : e;
}
int ceil_log2(std::int64_t n) {
    int c = 0;
    while ((std::int64_t(1) << c) < n) ++c;
    return c;
}
// The fixed-point exponent of §3.5: e = 62 − ⌈log2 max|x|⌉ − ⌈log2 N⌉ (0 for integers / all zero).
int fixed_exponent(const ValidSet& s, DType t) {
    if (!dtype_is_float(t)) return 0;
    double mx = 0;
    for (double v : s.x) mx = std::max(mx, std::abs(v));
    if (mx == 0) return 0;
    return 62 - ceil_log2(mx) - ceil_log2(s.size());
}
// Mean of the listed valid pixels as the engine must store it (§3.5): exact integer sums,
// c = (S / 2^e) / n in f64, then f32 unless the input is f64.
std::vector<double> spec_mean(const ValidSet& s, const std::vector<std::int64_t>& members, DType t, int e) {
    std::vector<double> c(s.m);
    for (int b = 0; b < s.m; ++b) {
        __int128 S = 0;
        for (std::int64_t i : members) {
            const double v = s.px(i)[b];
            S += dtype_is_float(t) ? (__int128)std::llrint(std::ldexp(v, e)) : (__int128)(std::int64_t)v;
        }
        c[b] = as_centroid((double(S) / std::ldexp(1.0, e)) / double(members.size()), t);
    }
    return c;
}

std::string vec_str(const std::vector<double>& v) {
    std::ostringstream s;
    s.precision(17);
    s << "(";
    for (std::size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
    return s.str() + ")";
}

// k distinct random RGB u8 colours.
std::vector<std::vector<double>> distinct_colours(int k, int m, std::mt19937_64& rng, double lo = 0, double hi = 255, bool integer = true) {
    std::set<std::vector<double>> seen;
    std::vector<std::vector<double>> out;
    std::uniform_real_distribution<double> d(lo, hi);
    while (int(out.size()) < k) {
        std::vector<double> c(m);
        for (double& v : c) v = integer ? std::round(d(rng)) : double(float(d(rng)));
        if (seen.insert(c).second) out.push_back(c);
    }
    return out;
}

// Raster pixel list with colour j repeated counts[j] times, shuffled.
std::vector<double> shuffled_pixels(const std::vector<std::vector<double>>& colours, const std::vector<int>& counts, std::mt19937_64& rng) {
    std::vector<int> which;
    for (std::size_t j = 0; j < colours.size(); ++j) which.insert(which.end(), counts[j], int(j));
    std::shuffle(which.begin(), which.end(), rng);
    std::vector<double> px;
    for (int j : which) px.insert(px.end(), colours[j].begin(), colours[j].end());
    return px;
}

// ---- Oracle 3: exactly k colours --------------------------------------------------------------

TEST(Kmeans, ExactlyKColoursAreRecoveredInOneIteration) {
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    struct Case { int k, m; DType t; };
    for (const Case& c : {Case{2, 3, DType::U8}, Case{5, 3, DType::U8}, Case{12, 3, DType::U8}, Case{16, 3, DType::U8},
                          Case{7, 4, DType::F32}, Case{9, 1, DType::U16}, Case{6, 3, DType::I32}}) {
        const int W = 60, H = 50, N = W * H;
        const bool integer = !dtype_is_float(c.t);
        // f32: non-integer values; i32: |x| ≤ 2^24 so that every colour is exact in f32 (the
        // palette of larger i32 values is the f32-rounded centroid, not the colour).
        const auto [lo, hi] = c.t == DType::F32   ? std::pair<double, double>{-100, 100}
                              : c.t == DType::I32 ? std::pair<double, double>{-16777216, 16777216}
                                                  : data_range(c.t);
        const auto colours = distinct_colours(c.k, c.m, rng, lo, hi, integer);
        // Varied proportions: at least one pixel each, the rest drawn with weights (j+1)^2.
        std::vector<int> counts(c.k, 1);
        std::vector<double> weights(c.k);
        for (int j = 0; j < c.k; ++j) weights[j] = double(j + 1) * (j + 1);
        std::discrete_distribution<int> pick(weights.begin(), weights.end());
        for (int i = c.k; i < N; ++i) ++counts[pick(rng)];
        const Cube img = from_pixels(W, H, c.m, c.t, shuffled_pixels(colours, counts, rng));
        for (double tol : {1e-4, 0.0}) {
            SCOPED_TRACE("k=" + std::to_string(c.k) + " m=" + std::to_string(c.m) + " " + str(c.t) + " tol=" + std::to_string(tol));
            const KmeansOptions o{.k = c.k, .seed = rng(), .init_sample = 0, .tol = tol};
            const KmeansResult r = run(img, o);
            ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, r));
            std::vector<std::vector<double>> want = colours;
            for (auto& v : want)
                for (double& x : v) x = as_centroid(x, c.t);
            std::sort(want.begin(), want.end());
            EXPECT_EQ(centroid_set(r, false), want) << "palette must be exactly the image's colours";
            std::vector<std::uint64_t> want_counts(counts.begin(), counts.end());
            std::sort(want_counts.rbegin(), want_counts.rend());
            EXPECT_EQ(r.counts, want_counts);
            EXPECT_EQ(r.inertia, 0.0);
            EXPECT_TRUE(cubes_identical(img, r.quantized));
            EXPECT_TRUE(r.converged);
            EXPECT_EQ(r.iterations, 1) << "init sample = whole image: k-means++ finds every colour";
            EXPECT_EQ(r.k_effective, c.k);
            EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
        }
    }
}

TEST(Kmeans, RareColourMissedBySampleIsRelocated) {
    // 20 000 pixels, five common colours and one single rare pixel; init_sample = 1000 keeps each
    // pixel with probability 0.05, so most seeds miss the rare colour: k-means++ stops at 5
    // centres, the 6th is unset, relocation gives it the rare pixel in iteration 1 → converged
    // after at most 2 iterations (§5 oracle 3).
    const std::uint64_t dseed = test_seed();
    SCOPED_TRACE("data seed " + std::to_string(dseed));
    std::mt19937_64 rng(dseed);
    const int W = 200, H = 100;
    const auto colours = distinct_colours(6, 3, rng);
    const std::vector<int> counts = {4000, 4000, 4000, 4000, 3999, 1};
    const Cube img = from_pixels(W, H, 3, DType::U8, shuffled_pixels(colours, counts, rng));
    std::vector<std::vector<double>> want = colours;
    std::sort(want.begin(), want.end());
    int two = 0;
    for (std::uint64_t seed = 0; seed < 8; ++seed) {
        SCOPED_TRACE("kmeans seed " + std::to_string(seed));
        const KmeansOptions o{.k = 6, .seed = seed, .init_sample = 1000};
        const KmeansResult r = run(img, o);
        ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, r));
        EXPECT_EQ(centroid_set(r, false), want);
        EXPECT_EQ(r.counts, (std::vector<std::uint64_t>{4000, 4000, 4000, 4000, 3999, 1}));
        EXPECT_EQ(r.inertia, 0.0);
        EXPECT_TRUE(cubes_identical(img, r.quantized));
        EXPECT_TRUE(r.converged);
        EXPECT_LE(r.iterations, 2);
        two += r.iterations == 2;
    }
    EXPECT_GE(two, 1) << "no seed missed the rare pixel: is the init sample (init_sample = 1000 of 20000) active?";
}

// ---- Oracle 4: k = 1 ------------------------------------------------------------------------

TEST(Kmeans, SingleClusterIsTheExactMean) {
    for (DType t : kTypes) {
        const std::uint64_t seed = test_seed();
        SCOPED_TRACE(str(t) + " seed " + std::to_string(seed));
        const auto [lo, hi] = data_range(t);
        const Cube img = testing::random_cube(37, 23, 3, t, seed, lo, hi);
        const KmeansOptions o{.k = 1, .seed = seed};
        const KmeansResult r = run(img, o);
        ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, r));
        const ValidSet s = valid_set(img);
        std::vector<std::int64_t> all(s.size());
        std::iota(all.begin(), all.end(), 0);
        const std::vector<double> want = spec_mean(s, all, t, fixed_exponent(s, t));
        for (int b = 0; b < 3; ++b) EXPECT_TRUE(same_bits(r.centroids[b], want[b])) << "band " << b << ": " << r.centroids[b] << " vs " << want[b];
        // inertia = N · Σ_b Var_b (population variance), within 1e-6 relative (f32 distances)
        long double nvar = 0;
        for (int b = 0; b < 3; ++b) {
            long double mean = 0;
            for (std::int64_t i = 0; i < s.size(); ++i) mean += s.px(i)[b];
            mean /= s.size();
            for (std::int64_t i = 0; i < s.size(); ++i) nvar += (s.px(i)[b] - mean) * (s.px(i)[b] - mean);
        }
        EXPECT_NEAR(r.inertia, double(nvar), 1e-6 * double(nvar));
        EXPECT_EQ(r.counts[0], std::uint64_t(s.size()));
        EXPECT_EQ(r.k_effective, 1);
    }
}

// ---- Oracle 5: fewer distinct colours than k -----------------------------------------------------

TEST(Kmeans, FewerDistinctColoursThanK) {
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const std::vector<std::vector<double>> colours = {{200, 30, 40}, {10, 220, 90}};
    const std::vector<int> counts = {420, 180};
    const Cube img = from_pixels(30, 20, 3, DType::U8, shuffled_pixels(colours, counts, rng));
    for (KmeansInit init : {KmeansInit::KmeansPlusPlus, KmeansInit::Random, KmeansInit::BoxDiagonal})
        for (EmptyPolicy e : {EmptyPolicy::Relocate, EmptyPolicy::Keep, EmptyPolicy::LegacyZero})
            for (std::int64_t sample : {std::int64_t(0), std::int64_t(1) << 20}) {
                // legacy-zero can legitimately get stuck with one blended cluster when the init
                // holds duplicates (random: all five picks of one colour, p ≈ 0.17; box-diagonal:
                // every pixel is nearest the middle point): only k-means++ is deterministic here.
                if (e == EmptyPolicy::LegacyZero && init != KmeansInit::KmeansPlusPlus) continue;
                SCOPED_TRACE(std::string(kmeans_init_name(init)) + " " + std::string(empty_policy_name(e)) + " sample " + std::to_string(sample));
                const KmeansOptions o{.k = 5, .init = init, .seed = rng(), .init_sample = sample, .empty = e};
                KmeansResult r;
                ASSERT_NO_THROW(r = run(img, o));
                ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, r));
                EXPECT_EQ(r.k_effective, 2);
                EXPECT_EQ(r.counts, (std::vector<std::uint64_t>{420, 180, 0, 0, 0}));
                EXPECT_EQ(centroid(r, 0), colours[0]);
                EXPECT_EQ(centroid(r, 1), colours[1]);
                EXPECT_EQ(r.inertia, 0.0);
                EXPECT_TRUE(cubes_identical(img, r.quantized));
                if (e == EmptyPolicy::Relocate) {
                    EXPECT_FALSE(r.warnings.empty()) << "k_effective < k must be warned about";
                }
            }
}

// ---- Oracle 6: constant image ----------------------------------------------------------------

TEST(Kmeans, ConstantImageHasOneCluster) {
    struct Case { DType t; std::vector<double> value; };
    const std::vector<Case> cases = {{DType::U8, {17, 200, 3}},
                                     {DType::F32, {-3.75, 1e-3}},
                                     {DType::U16, {65535}},
                                     {DType::I16, {-32768, 0, 32767}},
                                     // f32(4294967295) = 2^32: the palette must clamp back to 4294967295.
                                     // (Other u32/i32 values must be f32-exact here: centroids are f32,
                                     // so e.g. 123456789 is painted as 123456792.)
                                     {DType::U32, {4294967295.0, 0, 123456792}},
                                     {DType::I32, {-2147483648.0, 2147483647.0}},
                                     // dyadic: exact in the §3.5 fixed point (one global exponent)
                                     {DType::F64, {0.125, -1000.5, 5}}};
    const int W = 17, H = 11, N = W * H;
    for (const Case& c : cases) {
        const int m = int(c.value.size());
        std::vector<double> px;
        for (int i = 0; i < N; ++i) px.insert(px.end(), c.value.begin(), c.value.end());
        const Cube img = from_pixels(W, H, m, c.t, px);
        for (KmeansInit init : {KmeansInit::KmeansPlusPlus, KmeansInit::Random, KmeansInit::BoxDiagonal})
            for (int k : {1, 2, 5, N}) {
                SCOPED_TRACE(str(c.t) + " " + std::string(kmeans_init_name(init)) + " k=" + std::to_string(k));
                const KmeansOptions o{.k = k, .init = init, .seed = std::uint64_t(k)};
                const KmeansResult r = run(img, o);
                ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, r));
                EXPECT_EQ(r.k_effective, 1);
                EXPECT_EQ(r.counts[0], std::uint64_t(N));
                for (int b = 0; b < m; ++b) EXPECT_TRUE(same_bits(r.centroids[b], as_centroid(c.value[b], c.t))) << "band " << b << ": " << r.centroids[b];
                EXPECT_EQ(r.inertia, 0.0);
                EXPECT_TRUE(cubes_identical(img, r.quantized));
                EXPECT_TRUE(r.converged);
                if (k > 1) {
                    EXPECT_FALSE(r.warnings.empty()) << "k_effective = 1 < k must be warned about";
                }
            }
    }
}

// ---- Oracle 7: Lloyd invariants at exact convergence ------------------------------------------------

TEST(Kmeans, ExactConvergenceGivesMeansAndNearestLabels) {
    struct Case { int W, H, m, k; DType t; };
    for (const Case& c : {Case{61, 43, 3, 7, DType::U8}, Case{40, 31, 4, 9, DType::I16}, Case{33, 29, 5, 6, DType::F32},
                          Case{27, 25, 3, 5, DType::F64}, Case{50, 20, 1, 4, DType::U16}}) {
        const std::uint64_t seed = test_seed();
        SCOPED_TRACE(str(c.t) + " m=" + std::to_string(c.m) + " k=" + std::to_string(c.k) + " seed " + std::to_string(seed));
        const auto [lo, hi] = data_range(c.t);
        const Cube img = testing::random_cube(c.W, c.H, c.m, c.t, seed, lo, hi);
        const KmeansOptions o{.k = c.k, .seed = seed, .max_iter = 1000, .tol = 0};
        const KmeansResult r = run(img, o);
        ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, r));
        ASSERT_TRUE(r.converged) << r.iterations << " iterations";
        const ValidSet s = valid_set(img);
        const int e = fixed_exponent(s, c.t);
        const bool f64 = c.t == DType::F64;
        std::vector<std::vector<std::int64_t>> members(c.k);
        for (std::int64_t i = 0; i < s.size(); ++i) members[r.labels[s.raster[i]]].push_back(i);
        for (int j = 0; j < c.k; ++j) {
            if (members[j].empty()) continue;
            const std::vector<double> want = spec_mean(s, members[j], c.t, e);
            for (int b = 0; b < c.m; ++b)
                EXPECT_TRUE(same_bits(r.centroids[std::size_t(j) * c.m + b], want[b]))
                    << "cluster " << j << " band " << b << ": centroid " << r.centroids[std::size_t(j) * c.m + b] << ", mean " << want[b];
        }
        // Nearest in the spec's f32 FMA order (exact), and in long double up to f32 rounding.
        int ties = 0;
        for (std::int64_t i = 0; i < s.size(); ++i) {
            const int l = r.labels[s.raster[i]];
            const double dl = spec_distance(s.px(i), r.centroids.data() + std::size_t(l) * c.m, c.m, f64);
            const long double el = exact_distance(s.px(i), r.centroids.data() + std::size_t(l) * c.m, c.m);
            for (int j = 0; j < c.k; ++j) {
                if (j == l || r.counts[j] == 0) continue;
                const double dj = spec_distance(s.px(i), r.centroids.data() + std::size_t(j) * c.m, c.m, f64);
                const long double ej = exact_distance(s.px(i), r.centroids.data() + std::size_t(j) * c.m, c.m);
                ASSERT_GE(dj, dl) << "pixel " << s.raster[i] << " labelled " << l << " but " << j << " is nearer";
                ties += dj == dl;
                ASSERT_GE(double(ej), double(el) * (1 - 1e-5) - 1e-30) << "pixel " << s.raster[i] << " in long double";
            }
        }
        RecordProperty("ties_" + str(c.t), ties);
    }
}

TEST(Kmeans, HistoryNeverIncreases) {
    for (EmptyPolicy e : {EmptyPolicy::Relocate, EmptyPolicy::Keep, EmptyPolicy::LegacyZero})
        for (DType t : {DType::U8, DType::F32}) {
            const std::uint64_t seed = test_seed();
            SCOPED_TRACE(str(t) + " " + std::string(empty_policy_name(e)) + " seed " + std::to_string(seed));
            const Cube img = testing::random_cube(71, 53, 3, t, seed, 0, 255);
            const KmeansOptions o{.k = 20, .init = KmeansInit::Random, .seed = seed, .max_iter = 60, .tol = 0, .empty = e};
            const KmeansResult r = run(img, o);
            ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, r));  // includes the history check
            EXPECT_GE(r.history.size(), 2u);
        }
}

// ---- Oracle 8: well-separated blobs -------------------------------------------------------------

TEST(Kmeans, GaussianBlobsAreRecovered) {
    struct Case { int k; DType t; };
    for (const Case& c : {Case{5, DType::U8}, Case{8, DType::F32}}) {
        const std::uint64_t seed = test_seed();
        SCOPED_TRACE(str(c.t) + " k=" + std::to_string(c.k) + " seed " + std::to_string(seed));
        std::mt19937_64 rng(seed);
        std::uniform_real_distribution<double> u(25, 230);
        std::vector<std::vector<double>> centres;
        while (int(centres.size()) < c.k) {
            std::vector<double> v = {u(rng), u(rng), u(rng)};
            bool far = true;
            for (const auto& w : centres) far = far && std::sqrt(exact_distance(v.data(), w.data(), 3)) >= 60;
            if (far) centres.push_back(v);
        }
        const int per = 10000, N = per * c.k, W = 250, H = N / W;
        std::normal_distribution<double> g(0, 3);
        std::vector<int> blob(N);
        for (int i = 0; i < N; ++i) blob[i] = i / per;
        std::shuffle(blob.begin(), blob.end(), rng);
        Cube img(W, H, 3, c.t, Layout::BIP);
        for (int i = 0; i < N; ++i)
            for (int b = 0; b < 3; ++b) img.set_value(i % W, i / W, b, centres[blob[i]][b] + g(rng));  // u8: rounded, clamped
        const KmeansOptions o{.k = c.k, .seed = seed};
        const KmeansResult r = run(img, o);
        ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, r));
        EXPECT_TRUE(r.converged);
        const ValidSet s = valid_set(img);
        std::vector<int> label_of_blob(c.k, -1);
        std::vector<std::vector<std::int64_t>> members(c.k);
        for (int i = 0; i < N; ++i) {
            const int l = r.labels[i];
            if (label_of_blob[blob[i]] < 0) label_of_blob[blob[i]] = l;
            ASSERT_EQ(l, label_of_blob[blob[i]]) << "blob " << blob[i] << " split (pixel " << i << ")";
            members[blob[i]].push_back(i);
        }
        EXPECT_EQ(std::set<int>(label_of_blob.begin(), label_of_blob.end()).size(), std::size_t(c.k)) << "two blobs merged";
        const int e = fixed_exponent(s, c.t);
        for (int j = 0; j < c.k; ++j) {
            const std::vector<double> got = centroid(r, label_of_blob[j]);
            const std::vector<double> mean = spec_mean(s, members[j], c.t, e);
            EXPECT_EQ(got, mean) << "blob " << j << ": centroid " << vec_str(got) << ", blob mean " << vec_str(mean);
            EXPECT_EQ(r.counts[label_of_blob[j]], std::uint64_t(per));
            for (int b = 0; b < 3; ++b) EXPECT_NEAR(got[b], centres[j][b], 0.5) << "blob " << j << " band " << b;
        }
    }
}

// ---- Oracle 9: relocation of empty clusters -------------------------------------------------------

TEST(Kmeans, EmptyClusterIsRelocatedToTheFarthestPixel) {
    // Two groups and one outlier; c0 = c1 = (10,10,10), c2 = (200,50,50). Iteration 1: the first
    // group goes to c0 (tie → lowest index), the second group and the outlier (d = 42 900 to c2,
    // 65 400 to c0) to c2; c1 is empty and takes the farthest pixel: the outlier (120,240,30),
    // which leaves c2, so c2 = (600,150,150)/3 = (200,50,50). Final pass, sorted by count:
    // [(10,10,10) ×3, (200,50,50) ×3, (120,240,30) ×1].
    const std::vector<double> px = {10, 10, 10, 12, 10, 10, 8, 10, 10, 200, 50, 50, 202, 50, 50, 198, 50, 50, 120, 240, 30};
    const Cube img = from_pixels(7, 1, 3, DType::U8, px);
    for (int max_iter : {1, 100}) {
        SCOPED_TRACE("max_iter " + std::to_string(max_iter));
        const KmeansOptions o{.k = 3, .init = KmeansInit::Explicit, .max_iter = max_iter, .tol = 0,
                              .init_centroids = {10, 10, 10, 10, 10, 10, 200, 50, 50}};
        const KmeansResult r = run(img, o);
        ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, r));
        EXPECT_EQ(r.centroids, (std::vector<double>{10, 10, 10, 200, 50, 50, 120, 240, 30}));
        EXPECT_EQ(r.counts, (std::vector<std::uint64_t>{3, 3, 1}));
        EXPECT_EQ(r.labels, (std::vector<std::int32_t>{0, 0, 0, 1, 1, 1, 2}));
        EXPECT_EQ(r.k_effective, 3);
        if (max_iter == 100) {
            EXPECT_TRUE(r.converged);
            EXPECT_EQ(r.iterations, 2);
        }
    }
}

TEST(Kmeans, RelocationTiesAndOtherPolicies) {
    // m = 1, pixels [80, 20, 50, 50, 50, 49, 51], explicit c = [50, 50, 50], max_iter = 1.
    // Iteration 1: every pixel → c0 (ties → lowest index); c0 = 350/7 = 50; c1, c2 empty.
    //  relocate: D = 900 for both 80 (raster 0) and 20 (raster 1): the tie goes to the lower raster
    //            index, so c1 = 80, c2 = 20; c0 = 250/5 = 50 → sorted [50 ×5, 80 ×1, 20 ×1].
    //  keep:     c1 = c2 = 50 → everything stays in c0 → [50 ×7, 50 ×0, 50 ×0].
    //  legacy-zero: c1 = c2 = 0 → final pass: 20 is nearer 0 (400) than 50 (900): → c1
    //            → [50 ×6, 0 ×1, 0 ×0].
    const Cube img = from_pixels(7, 1, 1, DType::U8, {80, 20, 50, 50, 50, 49, 51});
    struct Case { EmptyPolicy e; std::vector<double> c; std::vector<std::uint64_t> n; std::vector<std::int32_t> labels; };
    for (const Case& c : {Case{EmptyPolicy::Relocate, {50, 80, 20}, {5, 1, 1}, {1, 2, 0, 0, 0, 0, 0}},
                          Case{EmptyPolicy::Keep, {50, 50, 50}, {7, 0, 0}, {0, 0, 0, 0, 0, 0, 0}},
                          Case{EmptyPolicy::LegacyZero, {50, 0, 0}, {6, 1, 0}, {0, 1, 0, 0, 0, 0, 0}}}) {
        SCOPED_TRACE(std::string(empty_policy_name(c.e)));
        const KmeansOptions o{.k = 3, .init = KmeansInit::Explicit, .max_iter = 1, .tol = 0, .empty = c.e, .init_centroids = {50, 50, 50}};
        const KmeansResult r = run(img, o);
        ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, r));
        EXPECT_EQ(r.centroids, c.c);
        EXPECT_EQ(r.counts, c.n);
        EXPECT_EQ(r.labels, c.labels);
        EXPECT_EQ(r.iterations, 1);
    }
}


// ---- Oracle 11: convergence, and max_iter = 0 = nearest-palette mapping ----------------------------

TEST(Kmeans, ZeroToleranceStopsWhenCentroidsRepeat) {
    for (DType t : {DType::U8, DType::F32}) {
        const std::uint64_t seed = test_seed();
        SCOPED_TRACE(str(t) + " seed " + std::to_string(seed));
        const Cube img = testing::random_cube(83, 41, 3, t, seed, 0, 255);
        const KmeansOptions base{.k = 11, .seed = seed, .max_iter = 1000, .tol = 0};
        const KmeansResult full = run(img, base);
        ASSERT_TRUE(full.converged);
        const int it = full.iterations;
        ASSERT_GE(it, 2);
        for (int mi : {it, it + 1, it + 5}) {
            KmeansOptions o = base;
            o.max_iter = mi;
            expect_identical_results(full, run(img, o), "max_iter = " + std::to_string(mi));
        }
        // One iteration earlier: the centroids were still moving (by definition of `it`), but the
        // final centroids c(it−1) equal c(it), so the same palette, reported as not converged.
        KmeansOptions o = base;
        o.max_iter = it - 1;
        const KmeansResult early = run(img, o);
        ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, early));
        EXPECT_FALSE(early.converged);
        EXPECT_EQ(early.iterations, it - 1);
        EXPECT_EQ(early.centroids, full.centroids);
        EXPECT_EQ(early.labels, full.labels);
        // Two earlier: the centroids moved in iteration it−1, so they differ from the final ones.
        if (it >= 3) {
            o.max_iter = it - 2;
            const KmeansResult earlier = run(img, o);
            EXPECT_FALSE(earlier.converged);
            EXPECT_NE(earlier.centroids, full.centroids) << "iteration " << it - 1 << " moved no centroid, yet convergence was reported only at " << it;
        }
    }
}

TEST(Kmeans, MaxIterZeroIsNearestPaletteMapping) {
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    for (DType t : kTypes) {
        const int W = 47, H = 31, m = 3, k = 9;
        const auto [lo, hi] = data_range(t);
        const Cube img = testing::random_cube(W, H, m, t, rng(), lo, hi);
        // A palette of arbitrary doubles inside the data range (not f32-representable in general).
        std::vector<double> palette;
        std::uniform_real_distribution<double> u(lo, hi);
        for (int i = 0; i < k * m; ++i) palette.push_back(u(rng));
        SCOPED_TRACE(str(t));
        const KmeansOptions o{.k = k, .init = KmeansInit::Explicit, .max_iter = 0, .init_centroids = palette};
        const KmeansResult r = run(img, o);
        ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, r));
        EXPECT_EQ(r.iterations, 0);
        // Brute force: nearest of the given palette (rounded to the centroid type), lowest index on ties.
        std::vector<double> c(palette.size());
        for (std::size_t i = 0; i < c.size(); ++i) c[i] = as_centroid(palette[i], t);
        const ValidSet s = valid_set(img);
        for (std::int64_t i = 0; i < s.size(); ++i) {
            const int want = nearest(s.px(i), c, k, m, t == DType::F64);
            const std::vector<double> wc(c.begin() + want * m, c.begin() + (want + 1) * m);
            ASSERT_EQ(centroid(r, r.labels[s.raster[i]]), wc) << "pixel " << s.raster[i];
        }
        // apply_palette is the same final pass.
        const KmeansResult a = apply_palette(cpu_context(), img, palette);
        EXPECT_TRUE(cubes_identical(r.quantized, a.quantized));
        ASSERT_EQ(a.labels.size(), r.labels.size());
        for (std::size_t p = 0; p < r.labels.size(); ++p)
            ASSERT_EQ(centroid(a, a.labels[p]), centroid(r, r.labels[p])) << "pixel " << p;
        EXPECT_EQ(a.labels, r.labels) << "apply_palette and kmeans(max_iter = 0) number clusters differently";
        EXPECT_EQ(a.counts, r.counts);
    }
}

TEST(Kmeans, NearestPaletteTieGoesToLowerPaletteIndex) {
    // Palette P0 = (0,0,0), P1 = (10,0,0), P2 = (100,100,100). (5,0,0) is at 25 from both P0 and
    // P1: it goes to P0. P1 gets more pixels than P0, so after the count sort P1 comes first;
    // the tie must still have been broken by the original palette index.
    std::vector<double> px;
    for (int i = 0; i < 3; ++i) px.insert(px.end(), {5, 0, 0});
    for (int i = 0; i < 5; ++i) px.insert(px.end(), {10, 1, 0});
    px.insert(px.end(), {90, 90, 90});
    const Cube img = from_pixels(9, 1, 3, DType::U8, px);
    const std::vector<double> palette = {0, 0, 0, 10, 0, 0, 100, 100, 100};
    const KmeansOptions o{.k = 3, .init = KmeansInit::Explicit, .max_iter = 0, .init_centroids = palette};
    const KmeansResult results[2] = {run(img, o), apply_palette(cpu_context(), img, palette)};
    for (const KmeansResult& r : results) {
        EXPECT_EQ(r.counts, (std::vector<std::uint64_t>{5, 3, 1}));
        for (int p = 0; p < 3; ++p) EXPECT_EQ(centroid(r, r.labels[p]), (std::vector<double>{0, 0, 0})) << "pixel " << p;
        for (int p = 3; p < 8; ++p) EXPECT_EQ(centroid(r, r.labels[p]), (std::vector<double>{10, 0, 0})) << "pixel " << p;
        EXPECT_EQ(centroid(r, r.labels[8]), (std::vector<double>{100, 100, 100}));
    }
}

// ---- Oracle 12: permutation ----------------------------------------------------------------------

TEST(Kmeans, PermutingPixelsPermutesLabels) {
    for (DType t : {DType::U8, DType::F32, DType::I16}) {
        const std::uint64_t seed = test_seed();
        SCOPED_TRACE(str(t) + " seed " + std::to_string(seed));
        std::mt19937_64 rng(seed);
        const int W = 53, H = 37, N = W * H, m = 3, k = 8;
        const auto [lo, hi] = data_range(t);
        const Cube img = testing::random_cube(W, H, m, t, seed, lo, hi, Layout::BIP);
        const ValidSet s = valid_set(img);
        // Initial centroids: k distinct pixels.
        std::vector<double> init;
        std::set<std::vector<double>> used;
        while (int(used.size()) < k) {
            const int i = int(rng() % N);
            std::vector<double> v(s.px(i), s.px(i) + m);
            if (used.insert(v).second) init.insert(init.end(), v.begin(), v.end());
        }
        std::vector<int> perm(N);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        std::vector<double> px;
        for (int i = 0; i < N; ++i) px.insert(px.end(), s.px(perm[i]), s.px(perm[i]) + m);
        const Cube shuffled = from_pixels(W, H, m, t, px);
        const KmeansOptions o{.k = k, .init = KmeansInit::Explicit, .max_iter = 50, .init_centroids = init};
        const KmeansResult a = run(img, o), b = run(shuffled, o);
        ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, a));
        ASSERT_NO_FATAL_FAILURE(check_invariants(shuffled, o, b));
        EXPECT_EQ(a.counts, b.counts);
        ASSERT_EQ(a.centroids.size(), b.centroids.size());
        for (std::size_t i = 0; i < a.centroids.size(); ++i) EXPECT_TRUE(same_bits(a.centroids[i], b.centroids[i])) << i;
        for (int i = 0; i < N; ++i) ASSERT_EQ(b.labels[i], a.labels[perm[i]]) << "pixel " << i;
        EXPECT_EQ(a.iterations, b.iterations);
        EXPECT_EQ(a.converged, b.converged);
        EXPECT_NEAR(a.inertia, b.inertia, 1e-9 * a.inertia);
    }
}

}  // namespace
}  // namespace cubekit
