// Entropy edge detector, fusion strategies and noise removal (spec edges.md §3.7, §3.8, §5.1 item 6–7,
// §5.2 cube consistency and PCA): every fusion recomposed in the test from the per-band outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cubekit/edges.hpp"
#include "cubekit/labels.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;

EntropyEdgeResult run(const Cube& c, EdgeFusion f, EntropyEdgeOptions o = {}) {
    o.fusion = f;
    return entropy_edges(cpu_context(), c, o);
}
std::uint8_t px(const Cube& c, std::size_t i, int b = 0) { return c.data<std::uint8_t>()[std::size_t(b) * c.shape().num_pixels() + i]; }

/// The 3×3 rule written again, straight from §3.6: edge iff ≤ 6 of the 9 window values equal the centre.
Cube rule_3x3(const Cube& f) {
    const int W = f.width(), H = f.height();
    Cube e(W, H, 1, DType::U8);
    for (int y = 1; y + 1 < H; ++y)
        for (int x = 1; x + 1 < W; ++x) {
            int same = 0;
            for (int dy = -1; dy <= 1; ++dy)
                for (int dx = -1; dx <= 1; ++dx) same += f.at<std::uint8_t>(x + dx, y + dy, 0) == f.at<std::uint8_t>(x, y, 0);
            e.at<std::uint8_t>(x, y, 0) = same <= 6;
        }
    return e;
}
/// Vote over the bands of a 0/1 cube: 100·count > x·K (x an integer percentage here).
Cube vote(const Cube& maps, int x, Cube* count = nullptr) {
    Cube out(maps.width(), maps.height(), 1, DType::U8), n(maps.width(), maps.height(), 1, DType::U16);
    for (std::size_t i = 0; i < maps.shape().num_pixels(); ++i) {
        int c = 0;
        for (int b = 0; b < maps.bands(); ++b) c += px(maps, i, b) != 0;
        n.data<std::uint16_t>()[i] = std::uint16_t(c);
        out.data<std::uint8_t>()[i] = 100 * c > x * maps.bands();
    }
    if (count) *count = std::move(n);
    return out;
}
Cube band_mean(const Cube& u8) {
    const int B = u8.bands();
    Cube m(u8.width(), u8.height(), 1, DType::U8);
    for (std::size_t i = 0; i < u8.shape().num_pixels(); ++i) {
        int s = 0;
        for (int b = 0; b < B; ++b) s += px(u8, i, b);
        m.data<std::uint8_t>()[i] = std::uint8_t((s + B / 2) / B);
    }
    return m;
}

Cube test_cube(std::uint64_t seed) { return testing::random_levels_cube(41, 33, 6, DType::U8, seed, 12); }

TEST(EdgesFusion, EdgeVoteIsTheVoteOfThePerBandMaps) {
    const Cube c = test_cube(testing::test_seed());
    const EntropyEdgeResult per_band = run(c, EdgeFusion::None);
    for (int x : {0, 15, 50, 99}) {
        EntropyEdgeOptions o;
        o.vote_percent = x;
        o.keep_band_edges = x == 50;
        const EntropyEdgeResult r = run(c, EdgeFusion::EdgeVote, o);
        Cube count;
        EXPECT_TRUE(testing::cubes_identical(vote(per_band.edges, x, &count), r.edges)) << "x = " << x;
        EXPECT_TRUE(testing::cubes_identical(count, r.vote_count));
        EXPECT_EQ(r.band_thresholds, per_band.band_thresholds);
        if (o.keep_band_edges) {
            EXPECT_TRUE(testing::cubes_identical(per_band.edges, r.band_edges));
        }
    }
}

TEST(EdgesFusion, BinaryVoteAppliesTheRuleToTheVotedBinaryImage) {
    const Cube c = test_cube(testing::test_seed());
    EntropyEdgeOptions keep;
    keep.keep_binary = true;
    const EntropyEdgeResult per_band = run(c, EdgeFusion::None, keep);
    EntropyEdgeOptions o;
    o.vote_percent = 40;
    o.keep_binary = true;
    const EntropyEdgeResult r = run(c, EdgeFusion::BinaryVote, o);
    Cube count;
    const Cube F = vote(per_band.binary, 40, &count);
    EXPECT_TRUE(testing::cubes_identical(F, r.binary));
    EXPECT_TRUE(testing::cubes_identical(count, r.vote_count));
    EXPECT_TRUE(testing::cubes_identical(rule_3x3(F), r.edges));
}

TEST(EdgesFusion, BandMeanAndThresholdMean) {
    const Cube c = test_cube(testing::test_seed());
    const Cube m = band_mean(c);
    const EntropyEdgeResult single = run(m, EdgeFusion::None);
    const EntropyEdgeResult r = run(c, EdgeFusion::BandMean);
    EXPECT_TRUE(testing::cubes_identical(single.edges, r.edges));
    ASSERT_EQ(r.derived_thresholds.size(), 1u);
    EXPECT_EQ(r.derived_thresholds[0].name, "band_mean");
    EXPECT_EQ(r.derived_thresholds[0].thresholds, single.band_thresholds);

    const EntropyEdgeResult t = run(c, EdgeFusion::ThresholdMean);
    int s1 = 0, s2 = 0, s3 = 0;
    for (const EdgeThresholds& b : t.band_thresholds) s1 += b.t1, s2 += b.t2, s3 += b.t3;
    const int B = c.bands(), T1 = (s1 + B / 2) / B, T2 = (s2 + B / 2) / B, T3 = (s3 + B / 2) / B;
    ASSERT_EQ(t.derived_thresholds.size(), 2u);
    EXPECT_EQ(t.derived_thresholds[1].name, "threshold_mean");
    EXPECT_EQ(t.derived_thresholds[1].thresholds[0].t1, T1);
    EXPECT_EQ(t.derived_thresholds[1].thresholds[0].t2, T2);
    EXPECT_EQ(t.derived_thresholds[1].thresholds[0].t3, T3);
    Cube f(c.width(), c.height(), 1, DType::U8);
    for (std::size_t i = 0; i < m.num_elements(); ++i) {
        const int v = px(m, i);
        f.data<std::uint8_t>()[i] = (T2 <= v && v < T1) || v >= T3;
    }
    EXPECT_TRUE(testing::cubes_identical(rule_3x3(f), t.edges));
}

TEST(EdgesFusion, IdenticalBandsGiveTheSingleBandMap) {
    const Cube one = testing::random_levels_cube(29, 23, 1, DType::U8, testing::test_seed(), 20);
    const Cube many = one.select_bands({0, 0, 0, 0, 0});
    const Cube want = run(one, EdgeFusion::None).edges;
    for (EdgeFusion f : {EdgeFusion::BandMean, EdgeFusion::EdgeVote, EdgeFusion::BinaryVote, EdgeFusion::ThresholdMean})
        EXPECT_TRUE(testing::cubes_identical(want, run(many, f).edges)) << fusion_name(f);
}

TEST(EdgesFusion, PcaOfARankOneCubeRecoversTheBaseImage) {
    // v_b = a_b·base + c_b with a_b > 0 and base spanning 0..255: the quantised PC1 is base exactly.
    const int W = 37, H = 31;
    Cube base = testing::random_levels_cube(W, H, 1, DType::U8, testing::test_seed(), 30);
    base.data<std::uint8_t>()[0] = 0;
    base.data<std::uint8_t>()[1] = 255;
    const double a[] = {1.0, 2.0, 0.5, 3.0}, off[] = {10.0, -4.0, 100.0, 7.0};
    Cube c(W, H, 4, DType::F64);
    for (int b = 0; b < 4; ++b)
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) c.at<double>(x, y, b) = a[b] * base.at<std::uint8_t>(x, y, 0) + off[b];
    const Cube want = run(base, EdgeFusion::None).edges;
    EntropyEdgeOptions o;
    o.pca_components = 1;
    for (EdgeFusion f : {EdgeFusion::PcaMean, EdgeFusion::PcaEdgeVote, EdgeFusion::PcaBinaryVote}) {
        const EntropyEdgeResult r = run(c, f, o);
        EXPECT_EQ(r.pca_components_used, 1);
        EXPECT_TRUE(testing::cubes_identical(want, r.edges)) << fusion_name(f);
    }
    o.pca_components = 9;  // clamped to B
    const EntropyEdgeResult r = run(c, EdgeFusion::PcaEdgeVote, o);
    EXPECT_EQ(r.pca_components_used, 4);
    ASSERT_EQ(r.derived_thresholds.size(), 1u);
    EXPECT_EQ(r.derived_thresholds[0].thresholds.size(), 4u);
    EXPECT_EQ(r.explained_variance_ratio.size(), 4u);
    EXPECT_EQ(r.band_thresholds.size(), 4u);
}

TEST(EdgesNoise, FilterAppliesToTheOutputMaps) {
    const Cube c = test_cube(testing::test_seed());
    const EntropyEdgeResult raw = run(c, EdgeFusion::None), raw_vote = run(c, EdgeFusion::EdgeVote);
    for (int conn : {4, 8})
        for (int L : {0, 1, 3, 8, 30}) {
            EntropyEdgeOptions o;
            o.min_component = L;
            o.connectivity = conn;
            EXPECT_TRUE(testing::cubes_identical(remove_small_components(cpu_context(), raw.edges, L, conn),
                                                 run(c, EdgeFusion::None, o).edges))
                << "none, L = " << L << ", " << conn;
            EXPECT_TRUE(testing::cubes_identical(remove_small_components(cpu_context(), raw_vote.edges, L, conn),
                                                 run(c, EdgeFusion::EdgeVote, o).edges))
                << "vote, L = " << L;
            o.filter_each_band = true;
            const Cube voted = vote(remove_small_components(cpu_context(), raw.edges, L, conn), 15);
            EXPECT_TRUE(testing::cubes_identical(remove_small_components(cpu_context(), voted, L, conn),
                                                 run(c, EdgeFusion::EdgeVote, o).edges))
                << "filter each band, L = " << L;
        }
}

TEST(EdgesNoise, FilterIsMonotoneAndASubset) {
    const Cube c = testing::random_levels_cube(64, 48, 2, DType::U8, testing::test_seed(), 40);
    Cube previous = run(c, EdgeFusion::None).edges;
    for (int L : {2, 3, 5, 9, 17}) {
        EntropyEdgeOptions o;
        o.min_component = L;
        const Cube e = run(c, EdgeFusion::None, o).edges;
        for (std::size_t i = 0; i < e.num_elements(); ++i) ASSERT_LE(e.data<std::uint8_t>()[i], previous.data<std::uint8_t>()[i]);
        EXPECT_TRUE(testing::cubes_identical(e, remove_small_components(cpu_context(), e, L, 8))) << "idempotent, L = " << L;
        previous = e.clone();
    }
}

TEST(EdgesFusion, LayoutsAndTypesGiveTheSameResult) {
    const Cube c = testing::random_cube(23, 19, 4, DType::I16, testing::test_seed(), -3000, 3000);
    for (EdgeFusion f : {EdgeFusion::None, EdgeFusion::EdgeVote, EdgeFusion::PcaBinaryVote}) {
        const EntropyEdgeResult a = run(c, f), b = run(c.to_layout(Layout::BIP), f), d = run(c.to_layout(Layout::BIL), f);
        EXPECT_TRUE(testing::cubes_identical(a.edges, b.edges)) << fusion_name(f);
        EXPECT_TRUE(testing::cubes_identical(a.edges, d.edges)) << fusion_name(f);
    }
}

}  // namespace
}  // namespace cubekit
