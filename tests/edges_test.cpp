// Entropy edge detector, per band (spec edges.md §5.1, §5.2): closed forms, the worked histogram,
// an independent naive threshold search, invariances, E1 quantisation, bad options.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "cubekit/edges.hpp"
#include "cubekit/error.hpp"
#include "edges/edges_internal.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;

Cube gray_fn(int W, int H, auto f) {
    Cube c(W, H, 1, DType::U8);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) c.at<std::uint8_t>(x, y, 0) = std::uint8_t(f(x, y));
    return c;
}
Cube edges_of(const Cube& c, EntropyEdgeOptions o = {}) { return entropy_edges(cpu_context(), c, o).edges; }
std::vector<std::uint32_t> histogram_of(const Cube& c, int band = 0) {
    std::vector<std::uint32_t> h(256, 0);
    const std::size_t P = c.shape().num_pixels();
    for (std::size_t i = 0; i < P; ++i) ++h[c.data<std::uint8_t>()[std::size_t(band) * P + i]];
    return h;
}
/// Expected edge map from a predicate on (x, y).
Cube expected_map(int W, int H, auto is_edge) {
    Cube e(W, H, 1, DType::U8);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) e.at<std::uint8_t>(x, y, 0) = std::uint8_t(is_edge(x, y) ? 1 : 0);
    return e;
}

// ---- An independent naive threshold search, straight from the spec's definitions --------------
int naive_argmax(const std::vector<double>& v) {
    const double best = *std::max_element(v.begin(), v.end());
    for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] >= best - 1e-12 * std::max(1.0, std::fabs(best))) return int(i);
    return 0;
}
double class_entropy(const std::vector<double>& c, std::size_t from, std::size_t to) {  // [from, to)
    double total = 0, h = 0;
    for (std::size_t i = from; i < to; ++i) total += c[i];
    for (std::size_t i = from; i < to; ++i) h -= (c[i] / total) * std::log2(c[i] / total);
    return h;
}
double class_tsallis(const std::vector<double>& c, std::size_t from, std::size_t to, double q) {
    double total = 0, s = 0;
    for (std::size_t i = from; i < to; ++i) total += c[i];
    for (std::size_t i = from; i < to; ++i) s += std::pow(c[i] / total, q);
    return (1 - s) / (q - 1);
}
/// Pseudo-additive Tsallis split of c[from, to): the position (relative to from) of the split.
int naive_tsallis_split(const std::vector<double>& c, std::size_t from, std::size_t to, double q) {
    if (to - from < 2) return 0;
    std::vector<double> v;
    for (std::size_t s = from; s + 1 < to; ++s) {
        const double a = class_tsallis(c, from, s + 1, q), b = class_tsallis(c, s + 1, to, q);
        v.push_back(a + b + (1 - q) * a * b);
    }
    return naive_argmax(v);
}
EdgeThresholds naive_thresholds(const std::vector<std::uint32_t>& hist, double q) {
    std::vector<double> c;
    std::vector<int> level;
    for (int g = 0; g < 256; ++g)
        if (hist[std::size_t(g)]) c.push_back(hist[std::size_t(g)]), level.push_back(g);
    EdgeThresholds t;
    t.levels = int(c.size());
    if (c.size() == 1) {
        t.t1 = t.t2 = t.t3 = level[0];
        t.constant = true;
        return t;
    }
    std::vector<double> h;
    for (std::size_t s = 0; s + 1 < c.size(); ++s) h.push_back(class_entropy(c, 0, s + 1) + class_entropy(c, s + 1, c.size()));
    t.loc = naive_argmax(h);
    t.t1 = level[std::size_t(t.loc)];
    t.t2 = level[std::size_t(naive_tsallis_split(c, 0, std::size_t(t.loc) + 1, q))];
    t.t3 = level[std::size_t(t.loc) + 1 + std::size_t(naive_tsallis_split(c, std::size_t(t.loc) + 1, c.size(), q))];
    return t;
}

// ---- Oracle 3: the worked histogram --------------------------------------------------------------
std::vector<std::uint32_t> worked_histogram() {
    std::vector<std::uint32_t> h(256, 0);
    h[10] = 4, h[20] = 2, h[30] = 1, h[100] = 3, h[120] = 5, h[200] = 2, h[220] = 3;
    return h;
}

TEST(EdgesThresholds, WorkedHistogramShannon) {
    const auto h = worked_histogram();
    const std::vector<double> H = shannon_curve(h.data());
    const double expected[] = {2.430037, 3.074264, 3.300807, 3.331915, 3.120206, 2.418961};
    ASSERT_EQ(H.size(), 6u);
    for (int t = 0; t < 6; ++t) EXPECT_NEAR(H[std::size_t(t)], expected[t], 5e-7) << "t = " << t;
}

TEST(EdgesThresholds, WorkedHistogramTsallisAndThresholds) {
    const auto h = worked_histogram();
    const std::vector<double> low = tsallis_curve({4, 2, 1, 3}, 0.5), high = tsallis_curve({5, 2, 3}, 0.5);
    const double e_low[] = {0.692705, 0.904030, 0.668416}, e_high[] = {0.407052, 0.379677};
    ASSERT_EQ(low.size(), 3u);
    ASSERT_EQ(high.size(), 2u);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(low[std::size_t(i)], e_low[i], 5e-7);
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(high[std::size_t(i)], e_high[i], 5e-7);
    const EdgeThresholds t = entropy_thresholds(h.data());
    EXPECT_EQ(t.t1, 100);
    EXPECT_EQ(t.loc, 3);
    EXPECT_EQ(t.t2, 20);
    EXPECT_EQ(t.t3, 120);
    EXPECT_EQ(t.levels, 7);
    EXPECT_FALSE(t.constant);
    // Binarisation of each level (the off-by-one of §3.5: level 20 lands in C1).
    const detail::edges::Thr k{100, 20, 120, 0, 7, 3};
    const int levels[] = {10, 20, 30, 100, 120, 200, 220}, f[] = {0, 1, 1, 0, 1, 1, 1};
    for (int i = 0; i < 7; ++i) EXPECT_EQ(detail::edges::binarize(std::uint8_t(levels[i]), k), f[i]) << levels[i];
}

TEST(EdgesThresholds, MatchNaiveSearchOnRandomHistograms) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    for (int trial = 0; trial < 400; ++trial) {
        std::vector<std::uint32_t> h(256, 0);
        const int occupied = 1 + int(rng() % 256);
        for (int i = 0; i < occupied; ++i) h[rng() % 256] += 1 + std::uint32_t(rng() % (trial % 3 == 0 ? 5 : 100000));
        for (double q : {0.5, 0.3, 2.0}) {
            const EdgeThresholds got = entropy_thresholds(h.data(), q), want = naive_thresholds(h, q);
            ASSERT_EQ(got, want) << "trial " << trial << " q " << q << ": got " << got.t1 << "," << got.t2 << ","
                                 << got.t3 << " want " << want.t1 << "," << want.t2 << "," << want.t3;
        }
    }
}

TEST(EdgesThresholds, QOneIsShannonAndJFormMatchesPseudoAdditive) {
    std::mt19937_64 rng(testing::test_seed());
    for (int trial = 0; trial < 300; ++trial) {
        std::vector<std::uint64_t> c(2 + rng() % 60);
        for (auto& x : c) x = 1 + rng() % 1000;
        std::vector<double> cd(c.begin(), c.end());
        // q = 0.5: J = ab − 1 has the pseudo-additive argmax.
        EXPECT_EQ(naive_argmax(tsallis_curve(c, 0.5)), naive_tsallis_split(cd, 0, cd.size(), 0.5)) << trial;
        // q = 1: the Shannon split.
        std::vector<double> h;
        for (std::size_t s = 0; s + 1 < cd.size(); ++s) h.push_back(class_entropy(cd, 0, s + 1) + class_entropy(cd, s + 1, cd.size()));
        EXPECT_EQ(naive_argmax(tsallis_curve(c, 1.0)), naive_argmax(h)) << trial;
    }
}

TEST(EdgesThresholds, DegenerateHistograms) {
    std::vector<std::uint32_t> h(256, 0);
    h[77] = 9;
    EdgeThresholds t = entropy_thresholds(h.data());
    EXPECT_TRUE(t.constant);
    EXPECT_EQ(t.t1, 77);
    EXPECT_EQ(t.t2, 77);
    EXPECT_EQ(t.t3, 77);
    h[200] = 9;  // two levels: T1 = T2 = a, T3 = b
    t = entropy_thresholds(h.data());
    EXPECT_EQ(t.t1, 77);
    EXPECT_EQ(t.t2, 77);
    EXPECT_EQ(t.t3, 200);
    EXPECT_EQ(t.loc, 0);
    std::vector<std::uint32_t> empty(256, 0);
    EXPECT_THROW(entropy_thresholds(empty.data()), InvalidInput);
}

// ---- Closed-form images (oracles 1, 2, 4, 5) ---------------------------------------------------------
TEST(EdgesImages, ConstantBandHasNoEdges) {
    const Cube c = gray_fn(9, 7, [](int, int) { return 131; });
    const EntropyEdgeResult r = entropy_edges(cpu_context(), c);
    ASSERT_EQ(r.band_thresholds.size(), 1u);
    EXPECT_TRUE(r.band_thresholds[0].constant);
    EXPECT_EQ(r.band_thresholds[0].t1, 131);
    EXPECT_TRUE(testing::cubes_identical(expected_map(9, 7, [](int, int) { return false; }), r.edges));
}

TEST(EdgesImages, VerticalAndDiagonalSteps) {
    for (int k : {1, 3, 5, 9}) {
        const int W = 10, H = 6;
        const Cube c = gray_fn(W, H, [&](int x, int) { return x < k ? 40 : 90; });
        const Cube want = expected_map(W, H, [&](int x, int y) {
            return (x == k - 1 || x == k) && x >= 1 && x <= W - 2 && y >= 1 && y <= H - 2;
        });
        EXPECT_TRUE(testing::cubes_identical(want, edges_of(c))) << "k = " << k;
    }
    const int W = 12, H = 9, s = 10;
    const Cube d = gray_fn(W, H, [&](int x, int y) { return x + y >= s ? 250 : 3; });
    const Cube want = expected_map(W, H, [&](int x, int y) {
        return (x + y == s - 1 || x + y == s) && x >= 1 && x <= W - 2 && y >= 1 && y <= H - 2;
    });
    EXPECT_TRUE(testing::cubes_identical(want, edges_of(d)));
}

TEST(EdgesImages, EightByEightEndToEnd) {
    const Cube c = gray_fn(8, 8, [](int x, int y) {
        if ((y == 3 || y == 4) && (x == 5 || x == 6)) return 120;
        return x < 4 ? 50 : 200;
    });
    EntropyEdgeOptions o;
    o.keep_binary = true;
    const EntropyEdgeResult r = entropy_edges(cpu_context(), c, o);
    EXPECT_EQ(r.band_thresholds[0].t1, 50);
    EXPECT_EQ(r.band_thresholds[0].t2, 50);
    EXPECT_EQ(r.band_thresholds[0].t3, 120);
    EXPECT_TRUE(testing::cubes_identical(expected_map(8, 8, [](int x, int) { return x >= 4; }), r.binary));
    EXPECT_TRUE(testing::cubes_identical(
        expected_map(8, 8, [](int x, int y) { return (x == 3 || x == 4) && y >= 1 && y <= 6; }), r.edges));
}

TEST(EdgesImages, IsolatedPixelLineAndCheckerboard) {
    const int W = 11, H = 9;
    const Cube dot = gray_fn(W, H, [](int x, int y) { return x == 5 && y == 4 ? 255 : 0; });
    EXPECT_TRUE(testing::cubes_identical(expected_map(W, H, [](int x, int y) { return x == 5 && y == 4; }), edges_of(dot)));
    const Cube line = gray_fn(W, H, [](int x, int) { return x == 5 ? 10 : 60; });
    EXPECT_TRUE(testing::cubes_identical(
        expected_map(W, H, [](int x, int y) { return x >= 4 && x <= 6 && y >= 1 && y <= H - 2; }), edges_of(line)));
    const Cube checker = gray_fn(W, H, [](int x, int y) { return (x + y) % 2 ? 7 : 8; });
    EXPECT_TRUE(testing::cubes_identical(
        expected_map(W, H, [](int x, int y) { return x >= 1 && x <= W - 2 && y >= 1 && y <= H - 2; }), edges_of(checker)));
}

TEST(EdgesImages, SmallerThanThreeByThreeGivesNoEdges) {
    for (auto [W, H] : {std::pair{1, 1}, {2, 5}, {5, 2}, {1, 9}, {2, 2}}) {
        const Cube c = testing::random_cube(W, H, 2, DType::U8, 5, 0, 255);
        const Cube e = edges_of(c, {.fusion = EdgeFusion::None});
        EXPECT_EQ(e.bands(), 2);
        for (std::size_t i = 0; i < e.num_elements(); ++i) ASSERT_EQ(e.data<std::uint8_t>()[i], 0) << W << "x" << H;
    }
}

// ---- Invariances (§5.2) ------------------------------------------------------------------------------
TEST(EdgesInvariance, StrictlyIncreasingGreyMapsAndPermutations) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    for (int trial = 0; trial < 20; ++trial) {
        const int levels = 2 + int(rng() % 60);
        const Cube c = testing::random_levels_cube(37, 29, 1, DType::U8, rng(), levels);
        // A random strictly increasing map of the occupied levels onto a random subset of 0..255.
        std::vector<int> lut(256, 0);
        std::vector<int> occupied;
        const auto h = histogram_of(c);
        for (int g = 0; g < 256; ++g)
            if (h[std::size_t(g)]) occupied.push_back(g);
        std::vector<int> pool(256);
        std::iota(pool.begin(), pool.end(), 0);
        std::shuffle(pool.begin(), pool.end(), rng);
        pool.resize(occupied.size());
        std::sort(pool.begin(), pool.end());
        for (std::size_t i = 0; i < occupied.size(); ++i) lut[std::size_t(occupied[i])] = pool[i];
        Cube mapped = c.clone();
        for (std::size_t i = 0; i < mapped.num_elements(); ++i)
            mapped.data<std::uint8_t>()[i] = std::uint8_t(lut[c.data<std::uint8_t>()[i]]);
        const EntropyEdgeResult a = entropy_edges(cpu_context(), c), b = entropy_edges(cpu_context(), mapped);
        EXPECT_TRUE(testing::cubes_identical(a.edges, b.edges)) << "trial " << trial;
        EXPECT_EQ(lut[std::size_t(a.band_thresholds[0].t1)], b.band_thresholds[0].t1);
        EXPECT_EQ(lut[std::size_t(a.band_thresholds[0].t2)], b.band_thresholds[0].t2);
        EXPECT_EQ(lut[std::size_t(a.band_thresholds[0].t3)], b.band_thresholds[0].t3);
        // Permuting pixels leaves the thresholds unchanged.
        Cube perm = c.clone();
        std::shuffle(perm.data<std::uint8_t>(), perm.data<std::uint8_t>() + perm.num_elements(), rng);
        EXPECT_EQ(entropy_edges(cpu_context(), perm).band_thresholds[0], a.band_thresholds[0]);
    }
}

Cube transformed(const Cube& c, int kind) {  // 0 transpose, 1 flip x, 2 flip y, 3 rot90
    const int W = c.width(), H = c.height();
    const bool swap = kind == 0 || kind == 3;
    Cube out(swap ? H : W, swap ? W : H, c.bands(), c.dtype());
    for (int b = 0; b < c.bands(); ++b)
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                const std::uint8_t v = c.at<std::uint8_t>(x, y, b);
                switch (kind) {
                    case 0: out.at<std::uint8_t>(y, x, b) = v; break;
                    case 1: out.at<std::uint8_t>(W - 1 - x, y, b) = v; break;
                    case 2: out.at<std::uint8_t>(x, H - 1 - y, b) = v; break;
                    default: out.at<std::uint8_t>(H - 1 - y, x, b) = v; break;
                }
            }
    return out;
}

TEST(EdgesInvariance, Geometry) {
    const Cube c = testing::random_levels_cube(23, 17, 3, DType::U8, testing::test_seed(), 9);
    const Cube e = edges_of(c);
    for (int kind = 0; kind < 4; ++kind)
        EXPECT_TRUE(testing::cubes_identical(transformed(e, kind), edges_of(transformed(c, kind)))) << "kind " << kind;
}

TEST(EdgesInvariance, BandsAreIndependent) {
    const Cube c = testing::random_cube(31, 19, 5, DType::U16, testing::test_seed(), 0, 4000);
    const EntropyEdgeOptions per_band{.fusion = EdgeFusion::None};
    const EntropyEdgeResult all = entropy_edges(cpu_context(), c, per_band);
    for (int b = 0; b < 5; ++b) {
        const EntropyEdgeResult one = entropy_edges(cpu_context(), c.select_bands({b}));
        EXPECT_EQ(one.band_thresholds[0], all.band_thresholds[std::size_t(b)]);
        EXPECT_TRUE(testing::cubes_identical(one.edges, all.edges.select_bands({b}))) << "band " << b;
    }
    const EntropyEdgeResult reordered = entropy_edges(cpu_context(), c.select_bands({4, 2, 0}), per_band);
    EXPECT_TRUE(testing::cubes_identical(all.edges.select_bands({4, 2, 0}), reordered.edges));
}

// ---- E1 -----------------------------------------------------------------------------------------------
TEST(EdgesQuantize, MinMaxRoundHalfUpConstantAndNonFinite) {
    Cube c(4, 1, 3, DType::F64);
    const double v0[] = {-1.0, 0.0, 1.0, 3.0}, v2[] = {NAN, 2.0, INFINITY, 6.0};
    for (int x = 0; x < 4; ++x) {
        c.at<double>(x, 0, 0) = v0[x];
        c.at<double>(x, 0, 1) = 5.5;
        c.at<double>(x, 0, 2) = v2[x];
    }
    const Cube q = quantize_to_u8(cpu_context(), c);
    const int want0[] = {0, 64, 128, 255};  // (v+1)·255/4 + 0.5: 0, 64.25, 128, 255.5
    for (int x = 0; x < 4; ++x) EXPECT_EQ(q.at<std::uint8_t>(x, 0, 0), want0[x]) << x;
    for (int x = 0; x < 4; ++x) EXPECT_EQ(q.at<std::uint8_t>(x, 0, 1), 0);
    const int want2[] = {0, 0, 0, 255};
    for (int x = 0; x < 4; ++x) EXPECT_EQ(q.at<std::uint8_t>(x, 0, 2), want2[x]) << x;
    const Cube g = quantize_to_u8(cpu_context(), c, Quantize::Global);  // range −1..6 over the cube
    EXPECT_EQ(g.at<std::uint8_t>(1, 0, 0), std::uint8_t(std::floor(1.0 * 255 / 7 + 0.5)));
    EXPECT_EQ(g.at<std::uint8_t>(0, 0, 1), std::uint8_t(std::floor(6.5 * 255 / 7 + 0.5)));
    // u8 passes through unchanged, whatever the layout.
    const Cube u = testing::random_cube(5, 4, 3, DType::U8, 11, 0, 255, Layout::BIP);
    EXPECT_TRUE(testing::cubes_identical(u.to_layout(Layout::BSQ), quantize_to_u8(cpu_context(), u)));
}

TEST(EdgesOptions, BadOptionsNameTheParameter) {
    const Cube c = testing::random_cube(8, 8, 2, DType::U8, 3, 0, 255);
    auto message = [&](EntropyEdgeOptions o) {
        try {
            entropy_edges(cpu_context(), c, o);
        } catch (const InvalidInput& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(message({.q = 0}).find("q ="), std::string::npos);
    EXPECT_NE(message({.min_component = -1}).find("min_component"), std::string::npos);
    EXPECT_NE(message({.connectivity = 6}).find("connectivity"), std::string::npos);
    EXPECT_NE(message({.vote_percent = 100}).find("vote_percent"), std::string::npos);
    EXPECT_NE(message({.vote_percent = -1}).find("vote_percent"), std::string::npos);
    EXPECT_NE(message({.pca_components = 0}).find("pca_components"), std::string::npos);
    EXPECT_THROW(parse_fusion("votes"), InvalidInput);
    EXPECT_EQ(parse_fusion("pca-vote-binary"), EdgeFusion::PcaBinaryVote);
    EXPECT_THROW(entropy_edges(cpu_context(), Cube()), InvalidInput);
}

TEST(EdgesVote, ExactRule) {
    EXPECT_EQ(detail::votes_needed(50, 4), 3);
    EXPECT_EQ(detail::votes_needed(0, 7), 1);      // union
    EXPECT_EQ(detail::votes_needed(99.9, 999), 999);  // intersection for K < 1000
    EXPECT_EQ(detail::votes_needed(35, 3), 2);
    EXPECT_EQ(detail::votes_needed(66, 3), 2);
    EXPECT_EQ(detail::votes_needed(15, 102), 16);  // 15.3 → 16
    EXPECT_EQ(detail::votes_needed(25, 4), 2);     // 100·1 > 100 is false: exactly 1 of 4 is not "more than 25 %"
    EXPECT_EQ(detail::votes_needed(0.1, 1000), 2);  // 0.1 is slightly above 1/10 in binary: 0.1·1000/100 > 1
}

}  // namespace
}  // namespace cubekit
