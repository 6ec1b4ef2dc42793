// RCMG CPU reference against the spec's oracles (gradient-watershed.md, A5). Runs in CI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cubekit/gradient.hpp"
#include "cubekit/io.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using testing::cubes_close;
using testing::cubes_identical;
using testing::random_cube;
using testing::test_seed;

struct Offset { int dy, dx; };
const std::vector<Offset> kCross = {{-1, 0}, {0, -1}, {0, 0}, {0, 1}, {1, 0}};
const std::vector<Offset> kSquare = {{-1, -1}, {-1, 0}, {-1, 1}, {0, -1}, {0, 0}, {0, 1}, {1, -1}, {1, 0}, {1, 1}};

// Independent brute force (oracle 10): the full distance matrix of each window, then r times
// "remove the furthest pair" scanning i < j in order, then the maximum of what remains.
Cube brute_force(const Cube& cube, int connectivity, int reject) {
    const auto& win = connectivity == 4 ? kCross : kSquare;
    const int n = int(win.size()), W = cube.width(), H = cube.height();
    Cube out(W, H, 1, DType::F64);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            std::vector<std::vector<double>> dist(n, std::vector<double>(n, 0.0));
            for (int i = 0; i < n; ++i)
                for (int j = i + 1; j < n; ++j) {
                    const int yi = std::clamp(y + win[i].dy, 0, H - 1), xi = std::clamp(x + win[i].dx, 0, W - 1);
                    const int yj = std::clamp(y + win[j].dy, 0, H - 1), xj = std::clamp(x + win[j].dx, 0, W - 1);
                    double d = 0;
                    for (int b = 0; b < cube.bands(); ++b) {
                        const double diff = cube.value(xi, yi, b) - cube.value(xj, yj, b);
                        d = d + diff * diff;
                    }
                    dist[i][j] = d;
                }
            std::vector<bool> alive(n, true);
            double result = 0;
            for (int t = 0; t <= reject; ++t) {
                int bi = -1, bj = -1;
                for (int i = 0; i < n; ++i)
                    for (int j = i + 1; j < n; ++j)
                        if (alive[i] && alive[j] && (bi < 0 || dist[i][j] > dist[bi][bj])) bi = i, bj = j;
                if (t == reject) result = dist[bi][bj];
                alive[bi] = alive[bj] = false;
            }
            out.at<double>(x, y, 0) = std::sqrt(result);
        }
    return out;
}

Cube run(const Cube& cube, int connectivity, int reject, Precision precision = Precision::F64,
         DType out_type = DType::F64) {
    return rcmg(cpu_context(), cube, {.connectivity = connectivity, .reject = reject, .precision = precision, .out_type = out_type});
}

TEST(Rcmg, ConstantCubeIsZero) {  // oracle 1
    Cube cube(13, 7, 4, DType::F32);
    for (int b = 0; b < 4; ++b)
        for (int y = 0; y < 7; ++y)
            for (int x = 0; x < 13; ++x) cube.set_value(x, y, b, 3.25 * (b + 1));
    for (int c : {4, 8})
        for (int r = 0; r <= (c == 4 ? 1 : 3); ++r) {
            const Cube g = run(cube, c, r);
            for (int y = 0; y < 7; ++y)
                for (int x = 0; x < 13; ++x) ASSERT_EQ(g.value(x, y, 0), 0.0) << "c=" << c << " r=" << r;
        }
}

TEST(Rcmg, ScalarClosedForm) {  // oracle 2: RCMG_r = x_(n−r) − x_(r+1) of the replicated window
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube cube = random_cube(17, 11, 1, DType::F64, seed, -50, 50);
    for (int c : {4, 8}) {
        const auto& win = c == 4 ? kCross : kSquare;
        const int n = int(win.size());
        for (int r = 0; r <= (n - 2) / 2; ++r) {
            const Cube g = run(cube, c, r);
            for (int y = 0; y < 11; ++y)
                for (int x = 0; x < 17; ++x) {
                    std::vector<double> v;
                    for (const Offset& o : win)
                        v.push_back(cube.value(std::clamp(x + o.dx, 0, 16), std::clamp(y + o.dy, 0, 10), 0));
                    std::sort(v.begin(), v.end());
                    ASSERT_DOUBLE_EQ(g.value(x, y, 0), v[n - 1 - r] - v[r]) << "c=" << c << " r=" << r << " at " << x << "," << y;
                }
        }
    }
}

TEST(Rcmg, IdenticalBandsScaleBySqrtB) {  // oracle 3
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube s = random_cube(19, 13, 1, DType::F64, seed, 0, 10);
    const int B = 7;
    Cube cube(19, 13, B, DType::F64);
    for (int b = 0; b < B; ++b)
        for (int y = 0; y < 13; ++y)
            for (int x = 0; x < 19; ++x) cube.set_value(x, y, b, s.value(x, y, 0));
    for (int c : {4, 8}) {
        const Cube g1 = run(s, c, 1), gB = run(cube, c, 1);
        Cube scaled(19, 13, 1, DType::F64);
        for (int y = 0; y < 13; ++y)
            for (int x = 0; x < 19; ++x) scaled.set_value(x, y, 0, std::sqrt(double(B)) * g1.value(x, y, 0));
        EXPECT_TRUE(cubes_close(scaled, gB, 1e-12, 1e-12)) << "connectivity " << c;
    }
}

Cube two_colour(int W, int H, const std::vector<double>& a, const std::vector<double>& b, auto is_b) {
    Cube cube(W, H, int(a.size()), DType::F64);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x)
            for (std::size_t k = 0; k < a.size(); ++k) cube.set_value(x, y, int(k), is_b(x, y) ? b[k] : a[k]);
    return cube;
}

const std::vector<double> kA = {1, 2, 3}, kB = {4, 6, 3};  // D = ||a − b|| = 5

TEST(Rcmg, VerticalStep) {  // oracle 4
    const int W = 12, H = 9, c0 = 6;
    const Cube cube = two_colour(W, H, kA, kB, [&](int x, int) { return x >= c0; });
    auto expect_columns = [&](const Cube& g, std::vector<int> edge_cols, const char* what) {
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                const bool edge = std::find(edge_cols.begin(), edge_cols.end(), x) != edge_cols.end();
                ASSERT_EQ(g.value(x, y, 0), edge ? 5.0 : 0.0) << what << " at " << x << "," << y;
            }
    };
    expect_columns(run(cube, 8, 0), {c0 - 1, c0}, "8-conn r=0");
    expect_columns(run(cube, 8, 1), {c0 - 1, c0}, "8-conn r=1");
    expect_columns(run(cube, 4, 0), {c0 - 1, c0}, "4-conn r=0");
    expect_columns(run(cube, 4, 1), {}, "4-conn r=1 is blind to axis-aligned steps");
}

TEST(Rcmg, DiagonalStep) {  // oracle 4, diagonal
    const int W = 12, H = 12, c0 = 11;
    const Cube cube = two_colour(W, H, kA, kB, [&](int x, int y) { return x + y >= c0; });
    for (int c : {4, 8}) {
        const Cube g = run(cube, c, 1);
        // Interior only: at the two image corners the diagonal meets the border, and the
        // replicated window there holds a single odd vector, which r = 1 rejects.
        for (int y = 1; y < H - 1; ++y)
            for (int x = 1; x < W - 1; ++x) {
                const bool edge = x + y == c0 - 1 || x + y == c0;
                ASSERT_EQ(g.value(x, y, 0), edge ? 5.0 : 0.0) << "c=" << c << " at " << x << "," << y;
            }
    }
}

TEST(Rcmg, ImpulseIsRejected) {  // oracle 5
    const int W = 9, H = 8, px = 4, py = 3;
    const Cube cube = two_colour(W, H, kA, kB, [&](int x, int y) { return x == px && y == py; });
    for (int c : {4, 8}) {
        const Cube g1 = run(cube, c, 1), g0 = run(cube, c, 0);
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                ASSERT_EQ(g1.value(x, y, 0), 0.0) << "r=1 c=" << c;
                const int ax = std::abs(x - px), ay = std::abs(y - py);
                const bool covered = c == 8 ? (ax <= 1 && ay <= 1) : (ax + ay <= 1);
                ASSERT_EQ(g0.value(x, y, 0), covered ? 5.0 : 0.0) << "r=0 c=" << c << " at " << x << "," << y;
            }
    }
}

TEST(Rcmg, OnePixelLine) {  // oracle 6
    const int W = 11, H = 7, lx = 5;
    const Cube cube = two_colour(W, H, kA, kB, [&](int x, int) { return x == lx; });
    const Cube g8 = run(cube, 8, 1), g4 = run(cube, 4, 1);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            ASSERT_EQ(g8.value(x, y, 0), std::abs(x - lx) <= 1 ? 5.0 : 0.0) << "8-conn at " << x << "," << y;
            ASSERT_EQ(g4.value(x, y, 0), x == lx ? 5.0 : 0.0) << "4-conn at " << x << "," << y;
        }
}

TEST(Rcmg, TieRuleIsLexicographic) {  // oracle 7
    // 4-connectivity, 3 bands, a 3×3 image; the centre pixel's cross (vertex order of A3):
    //   v0 (up) = (10,0,0)  v1 (left) = (0,0,0)  v2 (centre) = (5,3,0)  v3 (right) = (6,8,0)  v4 (down) = (6,2,1)
    // Squared distances: D01 = 100, D13 = 100 (the two maximal pairs, sharing v1), D03 = 80,
    // D02 = 34, D04 = 21, D12 = 34, D14 = 41, D23 = 26, D24 = 3, D34 = 37.
    // Lexicographic rule: reject (0,1) → {v2, v3, v4}: max(D23, D24, D34) = 37 → sqrt(37).
    // Rejecting (1,3) instead would leave {v0, v2, v4}: max = D02 = 34 → sqrt(34).
    const double cross[5][3] = {{10, 0, 0}, {0, 0, 0}, {5, 3, 0}, {6, 8, 0}, {6, 2, 1}};
    const int pos[5][2] = {{1, 0}, {0, 1}, {1, 1}, {2, 1}, {1, 2}};  // (x, y) of v0..v4
    Cube cube(3, 3, 3, DType::F64);
    for (int b = 0; b < 3; ++b)
        for (int y = 0; y < 3; ++y)
            for (int x = 0; x < 3; ++x) cube.set_value(x, y, b, 1000.0 + b);  // corners: far, not in the cross
    for (int v = 0; v < 5; ++v)
        for (int b = 0; b < 3; ++b) cube.set_value(pos[v][0], pos[v][1], b, cross[v][b]);
    EXPECT_EQ(run(cube, 4, 1).value(1, 1, 0), std::sqrt(37.0));
}

TEST(Rcmg, BruteForceAgreesOnRandomData) {  // oracle 10
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (DType t : {DType::F64, DType::I16, DType::U8}) {
        const Cube cube = random_cube(23, 17, 5, t, seed, t == DType::U8 ? 0 : -100, 100);
        for (int c : {4, 8})
            for (int r = 0; r <= (c == 4 ? 1 : 3); ++r)
                EXPECT_TRUE(cubes_identical(brute_force(cube, c, r), run(cube, c, r)))
                    << dtype_name(t) << " c=" << c << " r=" << r;
    }
    // Integer data with many ties exercise the lexicographic rule.
    const Cube ties = testing::random_levels_cube(29, 13, 2, DType::U8, seed, 3);
    for (int c : {4, 8})
        for (int r = 0; r <= (c == 4 ? 1 : 3); ++r)
            EXPECT_TRUE(cubes_identical(brute_force(ties, c, r), run(ties, c, r))) << "ties c=" << c << " r=" << r;
}

TEST(Rcmg, MonotoneInR) {  // oracle 9
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube cube = random_cube(21, 14, 4, DType::F32, seed, -1, 1);
    for (int c : {4, 8}) {
        const int rmax = c == 4 ? 1 : 3;
        for (int r = 1; r <= rmax; ++r) {
            const Cube a = run(cube, c, r), b = run(cube, c, r - 1);
            for (int y = 0; y < 14; ++y)
                for (int x = 0; x < 21; ++x) ASSERT_LE(a.value(x, y, 0), b.value(x, y, 0));
        }
    }
}

Cube transform(const Cube& c, int kind) {  // 0 flip x, 1 flip y, 2 transpose, 3 rotate 90°
    const int W = c.width(), H = c.height();
    const bool swap = kind >= 2;
    Cube out(swap ? H : W, swap ? W : H, c.bands(), c.dtype());
    for (int b = 0; b < c.bands(); ++b)
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                int nx = x, ny = y;
                if (kind == 0) nx = W - 1 - x;
                if (kind == 1) ny = H - 1 - y;
                if (kind == 2) nx = y, ny = x;
                if (kind == 3) nx = H - 1 - y, ny = x;
                out.set_value(nx, ny, b, c.value(x, y, b));
            }
    return out;
}

TEST(Rcmg, Invariances) {  // oracle 8
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube cube = random_cube(15, 10, 6, DType::F64, seed, -3, 3);
    for (int c : {4, 8}) {
        const Cube g = run(cube, c, 1);
        for (int kind = 0; kind < 4; ++kind)
            EXPECT_TRUE(cubes_identical(transform(g, kind), run(transform(cube, kind), c, 1))) << "transform " << kind;
    }
    // Band permutation and a constant offset: exact on integer-valued data.
    const Cube ints = random_cube(15, 10, 6, DType::I32, seed + 1, -1000, 1000);
    Cube permuted = ints.select_bands({5, 3, 1, 0, 2, 4});
    Cube shifted(15, 10, 6, DType::I32);
    for (int b = 0; b < 6; ++b)
        for (int y = 0; y < 10; ++y)
            for (int x = 0; x < 15; ++x) shifted.set_value(x, y, b, ints.value(x, y, b) + 100 * b - 7);
    for (int c : {4, 8}) {
        const Cube g = run(ints, c, 1);
        EXPECT_TRUE(cubes_identical(g, run(permuted, c, 1)));
        EXPECT_TRUE(cubes_identical(g, run(shifted, c, 1)));
    }
    // Scaling by α: |α|·RCMG, within rounding.
    Cube scaled(15, 10, 6, DType::F64);
    for (int b = 0; b < 6; ++b)
        for (int y = 0; y < 10; ++y)
            for (int x = 0; x < 15; ++x) scaled.set_value(x, y, b, -2.5 * cube.value(x, y, b));
    const Cube g = run(cube, 8, 1);
    Cube expected(15, 10, 1, DType::F64);
    for (int y = 0; y < 10; ++y)
        for (int x = 0; x < 15; ++x) expected.set_value(x, y, 0, 2.5 * g.value(x, y, 0));
    EXPECT_TRUE(cubes_close(expected, run(scaled, 8, 1), 1e-6));
}

TEST(Rcmg, LayoutsGiveTheSameResult) {
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube cube = random_cube(9, 7, 5, DType::U16, seed, 0, 65535);
    const Cube g = run(cube, 8, 1);
    for (Layout l : {Layout::BIL, Layout::BIP}) EXPECT_TRUE(cubes_identical(g, run(cube.to_layout(l), 8, 1)));
}

TEST(Rcmg, F32AccumulationWithinTolerance) {
    // Tolerance 1e-5 relative (spec A3): f32 sums round at every band; near-ties may flip the
    // rejected pair, so the fraction of pixels beyond the tolerance is reported and must be small.
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube cube = random_cube(40, 30, 20, DType::F32, seed, 0, 1);
    const Cube g64 = run(cube, 8, 1, Precision::F64, DType::F32);
    const Cube g32 = run(cube, 8, 1, Precision::F32, DType::F32);
    int beyond = 0;
    for (int y = 0; y < 30; ++y)
        for (int x = 0; x < 40; ++x) {
            const double e = g64.value(x, y, 0), a = g32.value(x, y, 0);
            if (std::abs(a - e) > 1e-5 * std::abs(e)) ++beyond;
        }
    RecordProperty("f32_pixels_beyond_1e-5", beyond);
    EXPECT_LE(beyond, 12) << beyond << " of 1200 pixels beyond 1e-5 relative";
}

TEST(Rcmg, NaNPropagatesToItsWindows) {
    Cube cube = random_cube(7, 7, 3, DType::F32, 42, 0, 1);
    cube.at<float>(3, 3, 1) = std::numeric_limits<float>::quiet_NaN();
    const Cube g = run(cube, 8, 1, Precision::F64, DType::F32);
    for (int y = 0; y < 7; ++y)
        for (int x = 0; x < 7; ++x) {
            const bool inside = std::abs(x - 3) <= 1 && std::abs(y - 3) <= 1;
            EXPECT_EQ(std::isnan(g.value(x, y, 0)), inside) << x << "," << y;
        }
}

TEST(Rcmg, SquaredAndOutputTypes) {
    const Cube cube = random_cube(6, 5, 3, DType::I16, 7, -500, 500);
    const Cube g = rcmg(cpu_context(), cube, {.out_type = DType::F64});
    const Cube sq = rcmg(cpu_context(), cube, {.out_type = DType::F64, .squared = true});
    const Cube f = rcmg(cpu_context(), cube, {});
    ASSERT_EQ(f.dtype(), DType::F32);
    for (int y = 0; y < 5; ++y)
        for (int x = 0; x < 6; ++x) {
            EXPECT_EQ(g.value(x, y, 0), std::sqrt(sq.value(x, y, 0)));
            EXPECT_EQ(f.value(x, y, 0), double(float(g.value(x, y, 0))));
        }
}

TEST(Rcmg, SlimShapes) {  // 1×1, 1×N, N×1: replicated borders, compared with the brute force
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (auto [w, h] : {std::pair{1, 1}, {1, 9}, {9, 1}, {2, 2}}) {
        const Cube cube = random_cube(w, h, 3, DType::F64, seed, 0, 1);
        for (int c : {4, 8}) EXPECT_TRUE(cubes_identical(brute_force(cube, c, 1), run(cube, c, 1))) << w << "x" << h;
    }
}

TEST(Rcmg, RejectsBadArguments) {
    const Cube cube(4, 4, 2, DType::F32);
    auto expect_invalid = [&](const Cube& c, RcmgOptions o, const std::string& needle) {
        try {
            rcmg(cpu_context(), c, o);
            ADD_FAILURE() << "no exception; expected one naming " << needle;
        } catch (const InvalidInput& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    expect_invalid(cube, {.connectivity = 6}, "connectivity = 6");
    expect_invalid(cube, {.connectivity = 4, .reject = 2}, "reject = 2");
    expect_invalid(cube, {.connectivity = 8, .reject = 4}, "reject = 4");
    expect_invalid(cube, {.reject = -1}, "reject = -1");
    expect_invalid(cube, {.precision = Precision::F32, .out_type = DType::F64}, "out_type = f64");
    expect_invalid(cube, {.out_type = DType::U8}, "out_type = u8");
    expect_invalid(Cube(0, 4, 2, DType::F32), {}, "0x4x2");
    expect_invalid(Cube(4, 4, 0, DType::F32), {}, "4x4x0");
}

TEST(Rcmg, EmbeddedSamsonScene) {
    const Cube scene = read_cube(testing::source_path("data/samson/samson_1.img"));
    ASSERT_EQ(scene.width(), 95);
    ASSERT_EQ(scene.bands(), 156);
    const Cube g = rcmg(cpu_context(), scene);
    double mx = 0;
    for (int y = 0; y < 95; ++y)
        for (int x = 0; x < 95; ++x) {
            const double v = g.value(x, y, 0);
            ASSERT_TRUE(std::isfinite(v) && v >= 0);
            mx = std::max(mx, v);
        }
    EXPECT_GT(mx, 0);
    // Spot check one interior pixel against the brute force on a crop around it.
    const Cube crop = scene.crop(40, 40, 5, 5);
    EXPECT_EQ(g.value(42, 42, 0), double(float(brute_force(crop, 8, 1).value(2, 2, 0))));
}

}  // namespace
}  // namespace cubekit
