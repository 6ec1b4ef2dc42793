// E6 baseline detectors, CPU reference (spec edges.md §3.10, §5). Runs in CI. Closed forms (steps,
// an isolated pixel, flat images), hand-computed automatic thresholds, symmetries, monotonicity in
// the threshold, bad inputs, and the two subcommands. The metrics are in edge_score_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cubekit/edge_baselines.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "edges/baselines_internal.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using testing::cubes_identical;

const BaselineMethod kAll[] = {BaselineMethod::Sobel, BaselineMethod::Prewitt, BaselineMethod::Roberts,
                               BaselineMethod::LoG, BaselineMethod::Canny};

BaselineOptions with(BaselineMethod m, double threshold = -1) {
    BaselineOptions o;
    o.method = m;
    o.threshold = threshold;
    return o;
}

Cube u8_image(int W, int H, const std::function<int(int, int)>& f) {
    Cube c(W, H, 1, DType::U8);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) c.at<std::uint8_t>(x, y, 0) = std::uint8_t(f(x, y));
    return c;
}

Cube vertical_step(int W, int H, int k, int a = 50, int b = 200) {
    return u8_image(W, H, [=](int x, int) { return x < k ? a : b; });
}

Cube transpose(const Cube& c) {
    Cube t(c.height(), c.width(), c.bands(), c.dtype());
    for (int b = 0; b < c.bands(); ++b)
        for (int y = 0; y < c.height(); ++y)
            for (int x = 0; x < c.width(); ++x) t.set_value(y, x, b, c.value(x, y, b));
    return t;
}

std::vector<std::pair<int, int>> edge_pixels(const Cube& e, int band = 0) {
    std::vector<std::pair<int, int>> v;
    for (int y = 0; y < e.height(); ++y)
        for (int x = 0; x < e.width(); ++x)
            if (e.at<std::uint8_t>(x, y, band)) v.push_back({x, y});
    return v;
}

int count_edges(const Cube& e) {
    int n = 0;
    const std::uint8_t* p = e.data<std::uint8_t>();
    for (std::size_t i = 0; i < e.num_elements(); ++i) n += p[i];
    return n;
}

// ---- closed forms ------------------------------------------------------------------------------

// Sobel/Prewitt: m = gx² + gy² is (4·150)² (sobel) in columns k−1 and k, 0 elsewhere; the thinning
// keeps column k (left ≤, right <), on every row since borders are replicated.
TEST(BaselineEdges, VerticalStepSobelPrewittFindColumnK) {
    const int W = 20, H = 12, k = 9;
    for (BaselineMethod m : {BaselineMethod::Sobel, BaselineMethod::Prewitt}) {
        SCOPED_TRACE(std::string(baseline_name(m)));
        const BaselineResult r = baseline_edges_with_thresholds(cpu_context(), vertical_step(W, H, k), with(m));
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) EXPECT_EQ(r.edges.at<std::uint8_t>(x, y, 0), x == k ? 1 : 0) << x << "," << y;
        // Threshold: sqrt(4 · mean(m)) on MATLAB's scale (levels/255, masks /8 or /6).
        const double g = m == BaselineMethod::Sobel ? 600.0 : 450.0, s = m == BaselineMethod::Sobel ? 8.0 : 6.0;
        const double expected = std::sqrt(4.0 * 2.0 * H * g * g / (W * H)) / (255.0 * s);
        EXPECT_NEAR(r.thresholds[0].high, expected, 1e-12 * expected);
    }
}

// Roberts: gx = v(x,y) − v(x+1,y+1) and gy = v(x+1,y) − v(x,y+1) are ±150 only in column k−1; the
// diagonal thinning keeps all of it. Threshold sqrt(6·mean(m)) / (255·2).
TEST(BaselineEdges, VerticalStepRobertsFindsColumnKMinus1) {
    const int W = 20, H = 12, k = 9;
    const BaselineResult r = baseline_edges_with_thresholds(cpu_context(), vertical_step(W, H, k), with(BaselineMethod::Roberts));
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) EXPECT_EQ(r.edges.at<std::uint8_t>(x, y, 0), x == k - 1 ? 1 : 0) << x << "," << y;
    const double expected = std::sqrt(6.0 * H * 45000.0 / (W * H)) / 510.0;
    EXPECT_NEAR(r.thresholds[0].high, expected, 1e-12 * expected);
}

// LoG: the response is positive on the dark side and negative on the bright side; the edge is the
// negative point, column k, interior rows only.
TEST(BaselineEdges, VerticalStepLogFindsColumnK) {
    const int W = 40, H = 12, k = 19;
    const Cube e = baseline_edges(cpu_context(), vertical_step(W, H, k), with(BaselineMethod::LoG));
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x)
            EXPECT_EQ(e.at<std::uint8_t>(x, y, 0), x == k && y > 0 && y < H - 1 ? 1 : 0) << x << "," << y;
}

// Canny: one or both of the columns beside the step (their magnitudes are equal up to f32
// rounding), on every interior row, nothing else; the same for a step in the other direction.
TEST(BaselineEdges, VerticalStepCannyHugsTheStep) {
    const int W = 64, H = 16, k = 32;
    for (bool rising : {true, false}) {
        const Cube step = rising ? vertical_step(W, H, k) : vertical_step(W, H, k, 200, 50);
        const Cube e = baseline_edges(cpu_context(), step, with(BaselineMethod::Canny));
        for (int y = 0; y < H; ++y) {
            int on_row = 0;
            for (int x = 0; x < W; ++x) {
                const bool edge = e.at<std::uint8_t>(x, y, 0) != 0;
                if (edge) {
                    EXPECT_TRUE((x == k - 1 || x == k) && y > 0 && y < H - 1) << x << "," << y;
                }
                on_row += edge;
            }
            if (y > 0 && y < H - 1) {
                EXPECT_GE(on_row, 1) << "row " << y;
            }
        }
    }
}

TEST(BaselineEdges, HorizontalStepIsTheTransposedCase) {
    const Cube step = transpose(vertical_step(20, 12, 9));
    const Cube e = baseline_edges(cpu_context(), step, with(BaselineMethod::Sobel));
    for (int y = 0; y < 20; ++y)
        for (int x = 0; x < 12; ++x) EXPECT_EQ(e.at<std::uint8_t>(x, y, 0), y == 9 ? 1 : 0);
}

TEST(BaselineEdges, FlatImagesHaveNoEdges) {
    for (int v : {77, 255, 0})
        for (BaselineMethod m : kAll) {
            const BaselineResult r = baseline_edges_with_thresholds(cpu_context(), u8_image(23, 17, [=](int, int) { return v; }), with(m));
            EXPECT_EQ(count_edges(r.edges), 0) << baseline_name(m) << " level " << v;
        }
}

// Independent LoG oracle for one bright pixel: b(p) = kernel(centre − p) exactly (one nonzero
// tap), the kernel built here from fspecial's recipe.
std::vector<double> fspecial_log(double sigma, int& R) {
    const int n = int(std::ceil(sigma * 3)) * 2 + 1;
    R = (n - 1) / 2;
    std::vector<double> h(std::size_t(n * n)), r2(h.size());
    double mx = 0;
    for (int y = -R; y <= R; ++y)
        for (int x = -R; x <= R; ++x) {
            const std::size_t i = std::size_t((y + R) * n + x + R);
            r2[i] = x * x + y * y;
            h[i] = std::exp(-r2[i] / (2 * sigma * sigma));
            mx = std::max(mx, h[i]);
        }
    double s = 0;
    for (double& v : h) {
        if (v < DBL_EPSILON * mx) v = 0;
        s += v;
    }
    for (double& v : h) v /= s;
    double s1 = 0;
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = h[i] * (r2[i] - 2 * sigma * sigma) / std::pow(sigma, 4), s1 += h[i];
    for (double& v : h) v -= s1 / double(h.size());
    return h;
}

TEST(BaselineEdges, IsolatedPixelLogRing) {
    const int W = 31, H = 31, c = 15;
    const Cube img = u8_image(W, H, [=](int x, int y) { return x == c && y == c ? 255 : 0; });
    const BaselineResult r = baseline_edges_with_thresholds(cpu_context(), img, with(BaselineMethod::LoG));
    int R = 0;
    const std::vector<double> k = fspecial_log(2.0, R);
    ASSERT_EQ(R, 6);
    const auto b = [&](int x, int y) -> double {
        const int dx = c - x, dy = c - y;
        return std::abs(dx) > R || std::abs(dy) > R ? 0.0 : k[std::size_t((dy + R) * (2 * R + 1) + dx + R)];
    };
    double abs_sum = 0;
    for (double v : k) abs_sum += std::abs(v);
    const double thresh = 0.75 * abs_sum / (W * H);
    EXPECT_NEAR(r.thresholds[0].high, thresh, 1e-6 * thresh);  // kernel rounded to f32 in the library
    int expected_count = 0;
    for (int y = 1; y < H - 1; ++y)
        for (int x = 1; x < W - 1; ++x) {
            const double v = b(x, y);
            bool edge = false;
            if (v < 0)
                for (auto [nx, ny] : {std::pair{x + 1, y}, {x - 1, y}, {x, y + 1}, {x, y - 1}})
                    edge |= b(nx, ny) > 0 && b(nx, ny) - v > thresh;
            expected_count += edge;
            EXPECT_EQ(r.edges.at<std::uint8_t>(x, y, 0), edge ? 1 : 0) << x << "," << y;
        }
    EXPECT_GT(expected_count, 0);
    EXPECT_EQ(r.edges.at<std::uint8_t>(c, c, 0), 0);  // the centre's neighbours are negative too
    // The ring has the square's symmetries.
    EXPECT_TRUE(cubes_identical(r.edges, transpose(r.edges)));
    for (auto [x, y] : edge_pixels(r.edges)) {
        EXPECT_EQ(r.edges.at<std::uint8_t>(W - 1 - x, y, 0), 1);
        EXPECT_LE(std::max(std::abs(x - c), std::abs(y - c)), R);
    }
}

// ---- hand-computed automatic thresholds ----------------------------------------------------------

// 3×3, centre 255, replicated borders. Sobel m: corners 2·255², edge-centres 510², centre 0;
// Σm = 4·130050 + 4·260100 = 1560600; cutoff 4·Σm/9 = 693600 on the integer scale, i.e. MATLAB's
// thresh = sqrt(693600)/2040 = 1/sqrt(6); every m is below it. With thresh 0.2 the cutoff is
// 0.04·2040² = 166464: the four edge-centres pass and survive the thinning, the corners do not.
TEST(BaselineEdges, SobelThresholdsByHand) {
    const Cube img = u8_image(3, 3, [](int x, int y) { return x == 1 && y == 1 ? 255 : 0; });
    const BaselineResult automatic = baseline_edges_with_thresholds(cpu_context(), img, with(BaselineMethod::Sobel));
    EXPECT_NEAR(automatic.thresholds[0].high, 1 / std::sqrt(6.0), 1e-12);
    EXPECT_EQ(count_edges(automatic.edges), 0);
    const BaselineResult given = baseline_edges_with_thresholds(cpu_context(), img, with(BaselineMethod::Sobel, 0.2));
    EXPECT_EQ(given.thresholds[0].high, 0.2);
    const std::vector<std::pair<int, int>> plus = {{1, 0}, {0, 1}, {2, 1}, {1, 2}};
    EXPECT_EQ(edge_pixels(given.edges), plus);
    BaselineOptions no_thin = with(BaselineMethod::Sobel, 0.2);
    no_thin.thinning = false;
    EXPECT_EQ(edge_pixels(baseline_edges(cpu_context(), img, no_thin)), plus);
    // Just above 510/2040 = 0.25 nothing passes; just below, the four again.
    EXPECT_EQ(count_edges(baseline_edges(cpu_context(), img, with(BaselineMethod::Sobel, 0.25))), 0);
    EXPECT_EQ(count_edges(baseline_edges(cpu_context(), img, with(BaselineMethod::Sobel, 0.2499))), 4);
}

// MATLAB: find(cumsum(counts) > 0.7·m·n, 1, 'first') / 64, low = 0.4·high.
TEST(BaselineEdges, CannyHistogramRuleByHand) {
    unsigned long long counts[detail::kCannyBins] = {};
    counts[0] = 60, counts[1] = 10, counts[2] = 30;  // N = 100: cumsum 60, 70 (not > 70), 100
    EXPECT_EQ(detail::canny_auto_high(counts, 10, 10), 3.0 / 64);
    counts[1] = 11, counts[2] = 29;
    EXPECT_EQ(detail::canny_auto_high(counts, 10, 10), 2.0 / 64);
    // imhist(·, 64) of [0, 1] data: bin = floor(63·v + 0.5).
    EXPECT_EQ(detail::canny_bin(0.0f), 0);
    EXPECT_EQ(detail::canny_bin(std::nextafter(0.5f / 63, 0.0f)), 0);
    EXPECT_EQ(detail::canny_bin(1.0f / 63), 1);
    EXPECT_EQ(detail::canny_bin(1.0f), 63);
    // A black image: every magnitude 0, all in bin 0, high = 1/64, no edges. (Another flat level may
    // leave a uniform f32 residue of the derivative filter, normalised to 1: high = 1, no edges.)
    const BaselineResult r = baseline_edges_with_thresholds(cpu_context(), u8_image(9, 9, [](int, int) { return 0; }),
                                                            with(BaselineMethod::Canny));
    EXPECT_EQ(r.thresholds[0].high, 1.0 / 64);
    EXPECT_EQ(r.thresholds[0].low, 0.4 / 64);
}

TEST(BaselineEdges, KernelsFollowMatlab) {
    const detail::BaselinePlan log = detail::make_baseline_plan(with(BaselineMethod::LoG));
    EXPECT_EQ(log.radius, 6);  // fsize = 2·ceil(3·2) + 1 = 13
    ASSERT_EQ(log.log_kernel.size(), 169u);
    double s = 0;
    for (float v : log.log_kernel) s += v;
    EXPECT_NEAR(s, 0.0, 1e-7);
    EXPECT_LT(log.log_kernel[6 * 13 + 6], 0.0f);  // negative centre
    const detail::BaselinePlan canny = detail::make_baseline_plan(with(BaselineMethod::Canny));
    EXPECT_EQ(canny.radius, 6);  // ceil(4·sqrt 2)
    EXPECT_DOUBLE_EQ(canny.sigma, std::sqrt(2.0));
    double g = 0, pos = 0, neg = 0;
    for (int i = 0; i < 13; ++i) {
        g += canny.gauss[std::size_t(i)];
        (canny.dgauss[std::size_t(i)] > 0 ? pos : neg) += canny.dgauss[std::size_t(i)];
        EXPECT_FLOAT_EQ(canny.gauss[std::size_t(i)], canny.gauss[std::size_t(12 - i)]);
        EXPECT_FLOAT_EQ(canny.dgauss[std::size_t(i)], -canny.dgauss[std::size_t(12 - i)]);
    }
    EXPECT_NEAR(g, 1.0, 1e-6);
    EXPECT_NEAR(pos, 1.0, 1e-6);
    EXPECT_NEAR(neg, -1.0, 1e-6);
    EXPECT_GT(canny.dgauss[0], 0.0f);  // gradient() of the rising left half
    BaselineOptions o = with(BaselineMethod::LoG);
    o.sigma = 1;
    EXPECT_EQ(detail::make_baseline_plan(o).radius, 3);
}

// ---- symmetries, monotonicity, bands ---------------------------------------------------------------

// sobel/prewitt: exact integers and mirror-image rules (left ≤ / right > ↔ up ≤ / down >);
// canny: gx(Aᵀ) = gy(A)ᵀ bit for bit (same filters in the same order). roberts is not symmetric:
// its anti-diagonal test compares (x+1, y−1) with ≤ and (x−1, y+1) with >, which transposition
// swaps; log adds its 169 taps in raster order, which transposition changes (f32 rounding).
TEST(BaselineEdges, TransposeGivesTheTransposedMap) {
    for (int trial = 0; trial < 3; ++trial) {
        const std::uint64_t seed = testing::test_seed();
        SCOPED_TRACE("seed " + std::to_string(seed));
        const Cube img = trial == 2 ? testing::random_levels_cube(41, 29, 2, DType::U8, seed, 4)
                                    : testing::random_cube(41, 29, 2, DType::U8, seed, 0, 255);
        for (BaselineMethod m : {BaselineMethod::Sobel, BaselineMethod::Prewitt, BaselineMethod::Canny}) {
            const Cube a = baseline_edges(cpu_context(), img, with(m));
            const Cube b = baseline_edges(cpu_context(), transpose(img), with(m));
            EXPECT_TRUE(cubes_identical(transpose(a), b)) << baseline_name(m);
        }
    }
}

TEST(BaselineEdges, HigherThresholdGivesASubset) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube img = testing::random_cube(48, 40, 1, DType::U8, seed, 0, 255);
    for (BaselineMethod m : kAll) {
        const BaselineResult automatic = baseline_edges_with_thresholds(cpu_context(), img, with(m));
        const double t = automatic.thresholds[0].high;
        const Cube lo = baseline_edges(cpu_context(), img, with(m, 0.8 * t));
        const Cube hi = baseline_edges(cpu_context(), img, with(m, std::min(1.2 * t, 0.999)));
        int in_hi = 0, not_in_lo = 0;
        for (std::size_t i = 0; i < lo.num_elements(); ++i) {
            in_hi += hi.data<std::uint8_t>()[i];
            not_in_lo += hi.data<std::uint8_t>()[i] && !lo.data<std::uint8_t>()[i];
        }
        EXPECT_EQ(not_in_lo, 0) << baseline_name(m);
        EXPECT_GE(count_edges(lo), in_hi) << baseline_name(m);
        EXPECT_GT(count_edges(lo), 0) << baseline_name(m);
    }
}

TEST(BaselineEdges, BandsAreIndependentAndQuantisedByE1) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube cube = testing::random_cube(37, 26, 3, DType::U8, seed, 0, 255);
    // A band spanning 0..255 under an increasing affine map quantises back to the same levels.
    Cube stretched(37, 26, 3, DType::F32);
    for (int b = 0; b < 3; ++b)
        for (int y = 0; y < 26; ++y)
            for (int x = 0; x < 37; ++x) {
                const double v = (x == 0 && y == 0) ? 0 : (x == 1 && y == 0) ? 255 : cube.value(x, y, b);
                stretched.set_value(x, y, b, 0.25 * v - 3.0);
            }
    Cube levels = cube.clone();
    for (int b = 0; b < 3; ++b) levels.at<std::uint8_t>(0, 0, b) = 0, levels.at<std::uint8_t>(1, 0, b) = 255;
    for (BaselineMethod m : kAll) {
        SCOPED_TRACE(std::string(baseline_name(m)));
        const BaselineResult all = baseline_edges_with_thresholds(cpu_context(), levels, with(m));
        EXPECT_TRUE(cubes_identical(all.edges, baseline_edges(cpu_context(), stretched, with(m))));
        for (int b = 0; b < 3; ++b) {
            const BaselineResult one = baseline_edges_with_thresholds(cpu_context(), levels.select_bands({b}), with(m));
            EXPECT_TRUE(cubes_identical(one.edges, all.edges.select_bands({b})));
            EXPECT_EQ(one.thresholds[0].high, all.thresholds[std::size_t(b)].high);
        }
        // Any layout in, the same maps out.
        EXPECT_TRUE(cubes_identical(all.edges, baseline_edges(cpu_context(), levels.to_layout(Layout::BIP), with(m))));
    }
}

// In groups of whole bands (forced sizes and a host budget), from BSQ and BIP cubes: the whole call's
// edges and thresholds bit for bit; a budget below one band is refused.
TEST(BaselineEdges, InGroupsOfBandsEqualWhole) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    Cube cube = testing::random_cube(41, 29, 7, DType::F32, seed, 0, 1);
    for (int b = 0; b < 7; ++b)
        for (int y = 8; y < 20; ++y)
            for (int x = 10; x < 30; ++x) cube.at<float>(x, y, b) += 1.0f + 0.1f * float(b);
    for (BaselineMethod m : kAll) {
        SCOPED_TRACE(std::string(baseline_name(m)));
        const BaselineResult whole = baseline_edges_with_thresholds(cpu_context(), cube, with(m));
        std::int64_t edges = 0;
        for (std::size_t i = 0; i < whole.edges.num_elements(); ++i) edges += whole.edges.data<std::uint8_t>()[i];
        EXPECT_GT(edges, 0);
        for (const TileOptions& t : {TileOptions{.tile_width = 1, .tile_height = 2}, TileOptions{.tile_width = 1, .tile_height = 7},
                                     TileOptions{.memory_limit = 64 << 10}}) {
            for (Layout l : {Layout::BSQ, Layout::BIP}) {
                TiledRun run;
                const BaselineResult g = baseline_edges_tiled(cpu_context(), cube.to_layout(l), with(m), t, &run);
                EXPECT_TRUE(cubes_identical(whole.edges, g.edges));
                ASSERT_EQ(g.thresholds.size(), whole.thresholds.size());
                for (std::size_t b = 0; b < g.thresholds.size(); ++b) {
                    EXPECT_EQ(g.thresholds[b].high, whole.thresholds[b].high);
                    EXPECT_EQ(g.thresholds[b].low, whole.thresholds[b].low);
                }
                if (t.tile_height == 2) {
                    EXPECT_EQ(run.tiles, 4u);
                }
                if (t.memory_limit) {
                    EXPECT_LE(run.peak_bytes, t.memory_limit);
                }
            }
        }
    }
    EXPECT_THROW(baseline_edges_tiled(cpu_context(), cube, {}, {.memory_limit = 4 << 10}), InvalidInput);
    // From files read a group of bands at a time (BSQ: runs of bands; BIP: blocks of rows).
    const auto dir = testing::temp_dir("baselines_groups");
    const BaselineResult whole = baseline_edges_with_thresholds(cpu_context(), cube, with(BaselineMethod::Canny));
    for (Layout l : {Layout::BSQ, Layout::BIP}) {
        const auto path = dir / (std::string(layout_name(l)) + ".hdr");
        write_cube(cube.to_layout(l), path, {.envi_keep_layout = true});
        const BaselineResult g = baseline_edges_tiled(cpu_context(), CubeFile(path), with(BaselineMethod::Canny),
                                                      {.tile_width = 1, .tile_height = 3});
        EXPECT_TRUE(cubes_identical(whole.edges, g.edges));
        for (std::size_t b = 0; b < g.thresholds.size(); ++b) EXPECT_EQ(g.thresholds[b].high, whole.thresholds[b].high);
    }
}

TEST(BaselineEdges, TinyImagesAndThreadCounts) {
    for (auto [w, h] : {std::pair{1, 1}, {1, 9}, {9, 1}, {2, 2}, {3, 3}, {2, 7}})
        for (BaselineMethod m : kAll) {
            const Cube img = testing::random_cube(w, h, 2, DType::U8, 7, 0, 255);
            const Cube e = baseline_edges(cpu_context(), img, with(m));
            ASSERT_EQ(e.width(), w);
            ASSERT_EQ(e.bands(), 2);
            if ((m == BaselineMethod::LoG || m == BaselineMethod::Canny) && (w < 3 || h < 3)) {
                EXPECT_EQ(count_edges(e), 0);  // no interior pixels
            }
        }
    const Cube img = testing::random_cube(64, 50, 2, DType::U8, 11, 0, 255);
    const Context one({.backend = Backend::Cpu, .threads = 1});
    for (BaselineMethod m : kAll)
        EXPECT_TRUE(cubes_identical(baseline_edges(cpu_context(), img, with(m)), baseline_edges(one, img, with(m))));
}

TEST(BaselineEdges, BadOptionsAreRefused) {
    const Cube img = u8_image(8, 8, [](int x, int) { return x * 20; });
    const auto refuses = [&](BaselineOptions o) { EXPECT_THROW(baseline_edges(cpu_context(), img, o), InvalidInput); };
    BaselineOptions o = with(BaselineMethod::Sobel);
    o.sigma = 1;
    refuses(o);  // sigma for a mask method
    o = with(BaselineMethod::Canny);
    o.sigma = -1;
    refuses(o);
    o.sigma = kMaxBaselineSigma * 2;
    refuses(o);
    o.sigma = std::nan("");
    refuses(o);
    refuses(with(BaselineMethod::Canny, 1.0));  // canny's high threshold must be < 1
    refuses(with(BaselineMethod::LoG, std::nan("")));
    refuses(with(BaselineMethod::LoG, INFINITY));
    o = with(BaselineMethod::Canny);
    o.low_ratio = 1.5;
    refuses(o);
    EXPECT_THROW(baseline_edges(cpu_context(), Cube(0, 4, 1, DType::U8), {}), InvalidInput);
    EXPECT_THROW(parse_baseline("sobel5"), InvalidInput);
    EXPECT_EQ(parse_baseline("log"), BaselineMethod::LoG);
    for (BaselineMethod m : kAll) EXPECT_EQ(parse_baseline(baseline_name(m)), m);
    EXPECT_NO_THROW(baseline_edges(cpu_context(), img, with(BaselineMethod::Canny, 0.0)));
}

// ---- the subcommands ------------------------------------------------------------------------------

namespace fs = std::filesystem;

using cubekit::testing::q;

TEST(BaselineCli, PngAndNpyOutputsMatchTheLibrary) {
    const fs::path dir = testing::temp_dir("baseline_cli_outputs");
    const Cube gray = testing::random_cube(64, 48, 1, DType::U8, 3, 0, 255);
    write_cube(gray, dir / "in.png");
    auto r = testing::run_cli("edges-baseline " + q(dir / "in.png") + " " + q(dir / "sobel.png") +
                              " --method sobel --json --quiet --backend cpu");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    const BaselineResult lib = baseline_edges_with_thresholds(cpu_context(), gray, with(BaselineMethod::Sobel));
    EXPECT_EQ(j["command"], "edges-baseline");
    EXPECT_EQ(j["parameters"]["method"], "sobel");
    EXPECT_EQ(j["bands"][0]["threshold"].get<double>(), lib.thresholds[0].high);
    const Cube png = read_cube(dir / "sobel.png");
    ASSERT_EQ(png.bands(), 1);
    for (int y = 0; y < 48; ++y)
        for (int x = 0; x < 64; ++x) ASSERT_EQ(png.value(x, y, 0), 255.0 * lib.edges.at<std::uint8_t>(x, y, 0));

    const Cube cube = testing::random_cube(40, 30, 3, DType::I16, 4, -500, 900);
    write_cube(cube, dir / "in.npy");
    r = testing::run_cli("edges-baseline " + q(dir / "in.npy") + " " + q(dir / "canny.npy") + " --quiet --backend cpu");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const Cube expected = baseline_edges(cpu_context(), cube, with(BaselineMethod::Canny));
    const Cube npy = read_cube(dir / "canny.npy");
    ASSERT_EQ(npy.bands(), 3);
    EXPECT_TRUE(cubes_identical(expected, npy.to_layout(Layout::BSQ)));
    // One band of a cube to PNG, with options.
    r = testing::run_cli("edges-baseline " + q(dir / "in.npy") + " " + q(dir / "b1.png") +
                         " --bands 1 --method log --sigma 1.5 --threshold 0.002 --quiet --backend cpu");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    BaselineOptions o = with(BaselineMethod::LoG, 0.002);
    o.sigma = 1.5;
    const Cube b1 = baseline_edges(cpu_context(), cube.select_bands({1}), o);
    const Cube b1png = read_cube(dir / "b1.png");
    for (int y = 0; y < 30; ++y)
        for (int x = 0; x < 40; ++x) ASSERT_EQ(b1png.value(x, y, 0), 255.0 * b1.at<std::uint8_t>(x, y, 0));
}

TEST(BaselineCli, RefusalsLeaveNothingBehind) {
    const fs::path dir = testing::temp_dir("baseline_cli_refusals");
    write_cube(testing::random_cube(20, 10, 3, DType::U8, 5, 0, 255), dir / "rgb.png");
    write_cube(testing::random_cube(20, 10, 1, DType::U8, 6, 0, 255), dir / "g.png");
    struct Case { std::string args, needle; int code; };
    const std::vector<Case> cases = {
        {q(dir / "rgb.png") + " " + q(dir / "o.png"), "--bands", 2},
        {q(dir / "g.png") + " " + q(dir / "o.png") + " --method sobol", "--method", 2},
        {q(dir / "g.png") + " " + q(dir / "o.jpg"), "o.jpg", 2},
        {q(dir / "g.png") + " " + q(dir / "o.hdr"), ".npy", 2},
        {q(dir / "g.png") + " " + q(dir / "o.png") + " --method sobel --sigma 2", "sigma", 2},
        {q(dir / "g.png") + " " + q(dir / "o.png") + " --threshold -1", "--threshold", 2},
        {q(dir / "g.png") + " " + q(dir / "o.png") + " --threshold 1.5", "< 1", 2},
        {q(dir / "g.png") + " " + q(dir / "o.png") + " --low-ratio 2", "ratio", 2},
        {q(dir / "missing.png") + " " + q(dir / "o.png"), "missing.png", 3},
    };
    for (const Case& c : cases) {
        const auto r = testing::run_cli("edges-baseline " + c.args + " --quiet --backend cpu");
        EXPECT_EQ(r.exit_code, c.code) << c.args << "\n" << r.err;
        EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
        for (const char* out : {"o.png", "o.jpg", "o.hdr", "o.img"}) EXPECT_FALSE(fs::exists(dir / out)) << c.args;
    }
    for (const char* sub : {"edges-baseline", "edges-score"}) {
        const auto r = testing::run_cli(std::string(sub) + " --help");
        EXPECT_EQ(r.exit_code, 0);
        EXPECT_NE(r.out.find("Example"), std::string::npos) << sub;
    }
}

TEST(BaselineCli, ScorePrintsTheFourScoresFirst) {
    const fs::path dir = testing::temp_dir("baseline_cli_score");
    Cube ref(12, 9, 1, DType::U8), pred_png(12, 9, 1, DType::U8);  // edges at (0,0) and (3,4) against (0,0)
    ref.at<std::uint8_t>(0, 0, 0) = 1;
    pred_png.at<std::uint8_t>(0, 0, 0) = 255;
    pred_png.at<std::uint8_t>(3, 4, 0) = 255;
    write_cube(pred_png, dir / "pred.png");
    write_cube(ref, dir / "ref.npy");
    const auto r = testing::run_cli("edges-score " + q(dir / "pred.png") + " " + q(dir / "ref.npy") + " --tolerance 1");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::size_t f = r.out.find("\"fom\""), p = r.out.find("\"precision\""), rc = r.out.find("\"recall\""),
                      ff = r.out.find("\"f\"");
    ASSERT_NE(ff, std::string::npos) << r.out;
    EXPECT_TRUE(f < p && p < rc && rc < ff) << r.out;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    const EdgeScore s = score_edges(pred_png, ref, 1.0);  // nonzero = edge
    EXPECT_EQ(j["fom"].get<double>(), s.fom);
    EXPECT_EQ(j["precision"].get<double>(), 0.5);
    EXPECT_EQ(j["recall"].get<double>(), 1.0);
    EXPECT_EQ(j["f"].get<double>(), s.f);
    EXPECT_EQ(j["predicted"].get<int>(), 2);
    EXPECT_EQ(j["reference"].get<int>(), 1);

    write_cube(Cube(11, 9, 1, DType::U8), dir / "small.png");
    auto bad = testing::run_cli("edges-score " + q(dir / "pred.png") + " " + q(dir / "small.png"));
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("pred.png"), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find("small.png"), std::string::npos) << bad.err;
    write_cube(testing::random_cube(12, 9, 3, DType::U8, 1, 0, 255), dir / "rgb.png");
    bad = testing::run_cli("edges-score " + q(dir / "rgb.png") + " " + q(dir / "ref.npy"));
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("3 bands"), std::string::npos) << bad.err;
    bad = testing::run_cli("edges-score " + q(dir / "pred.png") + " " + q(dir / "ref.npy") + " --tolerance -2");
    EXPECT_EQ(bad.exit_code, 2);
    bad = testing::run_cli("edges-score " + q(dir / "nope.png") + " " + q(dir / "ref.npy"));
    EXPECT_EQ(bad.exit_code, 3);
}

}  // namespace
}  // namespace cubekit
