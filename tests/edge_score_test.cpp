// The §6 edge-map metrics (spec edges.md): Pratt's figure of merit and precision/recall/F with a pixel
// tolerance, on hand-made maps, by hand, on empty maps and against brute force. Runs in CI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "cubekit/edge_baselines.hpp"
#include "cubekit/error.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

// ---- helpers ----------------------------------------------------------------------------------

Cube map_of(int W, int H, const std::vector<std::pair<int, int>>& on) {
    Cube c(W, H, 1, DType::U8);
    for (auto [x, y] : on) c.at<std::uint8_t>(x, y, 0) = 1;
    return c;
}

Cube vertical_line(int W, int H, int x) {
    std::vector<std::pair<int, int>> on;
    for (int y = 0; y < H; ++y) on.push_back({x, y});
    return map_of(W, H, on);
}

TEST(BaselineScore, PerfectMatchScoresOne) {
    const Cube m = vertical_line(10, 8, 4);
    const EdgeScore s = score_edges(m, m, 0.0);
    EXPECT_EQ(s.fom, 1.0);
    EXPECT_EQ(s.precision, 1.0);
    EXPECT_EQ(s.recall, 1.0);
    EXPECT_EQ(s.f, 1.0);
    EXPECT_EQ(s.predicted, 8);
    EXPECT_EQ(s.reference, 8);
}

TEST(BaselineScore, ShiftedLineAndTolerance) {
    const Cube ref = vertical_line(10, 8, 4), pred = vertical_line(10, 8, 5);
    const EdgeScore strict = score_edges(pred, ref, 0.0);
    EXPECT_EQ(strict.precision, 0.0);
    EXPECT_EQ(strict.recall, 0.0);
    EXPECT_EQ(strict.f, 0.0);
    EXPECT_DOUBLE_EQ(strict.fom, 0.9);  // every d = 1: 1/(1 + 1/9)
    const EdgeScore loose = score_edges(pred, ref, 1.0);
    EXPECT_EQ(loose.precision, 1.0);
    EXPECT_EQ(loose.recall, 1.0);
    EXPECT_EQ(loose.f, 1.0);
    EXPECT_DOUBLE_EQ(loose.fom, 0.9);
}

// ref = {(0,0)}, pred = {(0,0), (3,4)}: d = 0 and 5. FOM = (1 + 1/(1 + 25/9)) / 2 = (1 + 9/34)/2 =
// 43/68. Tolerance 1: P = 1/2, R = 1, F = 2/3.
TEST(BaselineScore, FomByHand) {
    const EdgeScore s = score_edges(map_of(6, 6, {{0, 0}, {3, 4}}), map_of(6, 6, {{0, 0}}), 1.0);
    EXPECT_DOUBLE_EQ(s.fom, 43.0 / 68.0);
    EXPECT_DOUBLE_EQ(s.precision, 0.5);
    EXPECT_DOUBLE_EQ(s.recall, 1.0);
    EXPECT_DOUBLE_EQ(s.f, 2.0 / 3.0);
    // N_I > N_D: the divisor is max(N_I, N_D).
    const EdgeScore t = score_edges(map_of(6, 6, {{0, 0}}), map_of(6, 6, {{0, 0}, {5, 5}, {5, 0}}), 0.0);
    EXPECT_DOUBLE_EQ(t.fom, 1.0 / 3.0);
    EXPECT_DOUBLE_EQ(t.recall, 1.0 / 3.0);
    // The diagonal neighbour is at sqrt(2): inside tolerance 1.5, outside 1.4.
    const Cube a = map_of(5, 5, {{2, 2}}), b = map_of(5, 5, {{3, 3}});
    EXPECT_EQ(score_edges(a, b, 1.5).f, 1.0);
    EXPECT_EQ(score_edges(a, b, 1.4).f, 0.0);
    EXPECT_EQ(score_edges(a, b, std::sqrt(2.0)).f, 1.0);
}

TEST(BaselineScore, EmptyMaps) {
    const Cube empty(7, 5, 1, DType::U8), some = map_of(7, 5, {{1, 1}});
    const EdgeScore both = score_edges(empty, empty);
    EXPECT_EQ(both.fom, 1.0);
    EXPECT_EQ(both.f, 1.0);
    EXPECT_EQ(both.precision, 1.0);
    EXPECT_EQ(both.recall, 1.0);
    for (const EdgeScore& s : {score_edges(empty, some), score_edges(some, empty)}) {
        EXPECT_EQ(s.fom, 0.0);
        EXPECT_EQ(s.precision, 0.0);
        EXPECT_EQ(s.recall, 0.0);
        EXPECT_EQ(s.f, 0.0);
    }
    EXPECT_EQ(score_edges(empty, some).reference, 1);
    EXPECT_EQ(score_edges(empty, some).predicted, 0);
}

// The exact distance transform against brute force, through the scores.
TEST(BaselineScore, MatchesBruteForceOnRandomMaps) {
    for (int trial = 0; trial < 6; ++trial) {
        const std::uint64_t seed = testing::test_seed();
        SCOPED_TRACE("seed " + std::to_string(seed));
        std::mt19937_64 rng(seed);
        // Trials 1 and 2 are a single row and a single column.
        const int W = trial == 2 ? 1 : 5 + int(rng() % 40), H = trial == 1 ? 1 : 5 + int(rng() % 40);
        const double density = trial == 0 ? 0.003 : trial < 3 ? 0.2 : 0.02 * (trial + 1);
        std::bernoulli_distribution on(density);
        std::vector<std::pair<int, int>> p, r;
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                if (on(rng)) p.push_back({x, y});
                if (on(rng)) r.push_back({x, y});
            }
        if (p.empty()) p.push_back({0, H - 1});
        if (r.empty()) r.push_back({W - 1, 0});
        const auto d2 = [](std::pair<int, int> a, const std::vector<std::pair<int, int>>& set) {
            long best = -1;
            for (auto b : set) {
                const long d = long(a.first - b.first) * (a.first - b.first) + long(a.second - b.second) * (a.second - b.second);
                if (best < 0 || d < best) best = d;
            }
            return double(best);
        };
        for (double tol : {0.0, 1.0, 2.5, 7.0}) {
            double fom = 0;
            int tp_p = 0, tp_r = 0;
            for (auto a : p) fom += 1 / (1 + d2(a, r) / 9), tp_p += d2(a, r) <= tol * tol;
            for (auto a : r) tp_r += d2(a, p) <= tol * tol;
            const EdgeScore s = score_edges(map_of(W, H, p), map_of(W, H, r), tol);
            EXPECT_NEAR(s.fom, fom / double(std::max(p.size(), r.size())), 1e-12);
            EXPECT_DOUBLE_EQ(s.precision, double(tp_p) / double(p.size()));
            EXPECT_DOUBLE_EQ(s.recall, double(tp_r) / double(r.size()));
        }
    }
}

TEST(BaselineScore, AnyTypeNonzeroIsEdgeAndBadInputs) {
    Cube f(4, 3, 1, DType::F32);
    f.at<float>(1, 1, 0) = -0.5f;        // nonzero: an edge
    f.at<float>(2, 2, 0) = std::nanf("");  // NaN: not an edge
    const EdgeScore s = score_edges(f, map_of(4, 3, {{1, 1}}), 0.0);
    EXPECT_EQ(s.predicted, 1);
    EXPECT_EQ(s.f, 1.0);
    EXPECT_THROW(score_edges(map_of(4, 3, {}), map_of(3, 4, {})), InvalidInput);
    EXPECT_THROW(score_edges(Cube(4, 3, 2, DType::U8), Cube(4, 3, 2, DType::U8)), InvalidInput);
    EXPECT_THROW(score_edges(map_of(4, 3, {}), map_of(4, 3, {}), -1.0), InvalidInput);
    EXPECT_THROW(score_edges(map_of(4, 3, {}), map_of(4, 3, {}), std::nan("")), InvalidInput);
    EXPECT_THROW(score_edges(Cube(0, 0, 1, DType::U8), Cube(0, 0, 1, DType::U8)), InvalidInput);
}


}  // namespace
}  // namespace cubekit
