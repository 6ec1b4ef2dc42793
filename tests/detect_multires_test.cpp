// Multi-resolution detection, CPU reference: the oracles of spec detect.md §B.6.
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "cubekit/detect.hpp"
#include "cubekit/io.hpp"
#include "detect/detect_internal.hpp"
#include "detect_testing.hpp"
#include "multires_testing.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;

std::int64_t evaluations(const MultiresResult& r) {
    std::int64_t n = 0;
    for (const MultiresLevelCount& c : r.levels) n += c.evaluated;
    return n;
}

void expect_box(const Window& w, int x0, int y0, int width, int height) {
    EXPECT_EQ(w.x0, x0);
    EXPECT_EQ(w.y0, y0);
    EXPECT_EQ(w.width, width);
    EXPECT_EQ(w.height, height);
}

TEST(DetectMultires, OneTargetOneBox) {
    // 128×128, a 16×16 target at [48, 64)²: root split, (0,0,64) split, (32,32,32) emitted; 1 + 4 + 4 evaluations.
    const Cube cube = testing::square_target(128, 128, 3, 48, 48, 64, 64);
    const MultiresResult r = detect_multires(cpu_context(), cube, testing::step_multires(3));
    ASSERT_EQ(r.detections.size(), 1u);
    expect_box(r.detections[0], 32, 32, 32, 32);
    EXPECT_FALSE(r.detections[0].at_min_scale);
    EXPECT_EQ(evaluations(r), 9);
}

TEST(DetectMultires, TargetStraddlingTheCentreGivesFourBoxes) {
    const Cube cube = testing::square_target(128, 128, 2, 56, 56, 72, 72);
    const MultiresResult r = detect_multires(cpu_context(), cube, testing::step_multires(2), {.trace = true});
    ASSERT_EQ(r.detections.size(), 4u);
    expect_box(r.detections[0], 48, 48, 16, 16);
    expect_box(r.detections[1], 64, 48, 16, 16);
    expect_box(r.detections[2], 48, 64, 16, 16);
    expect_box(r.detections[3], 64, 64, 16, 16);
    EXPECT_EQ(evaluations(r), 37);
    EXPECT_EQ(r.trace.size(), 37u);
}

TEST(DetectMultires, SmallTargetForcedAtTheMinimumScale) {
    // 64×64, a 2×2 target at [10, 12)²: σ 0.0312, 0.0624, 0.124, 0.242 ⇒ one forced 8×8 box; 13 evaluations.
    const Cube cube = testing::square_target(64, 64, 1, 10, 10, 12, 12);
    MultiresResult r = detect_multires(cpu_context(), cube, testing::step_multires(1));
    ASSERT_EQ(r.detections.size(), 1u);
    expect_box(r.detections[0], 8, 8, 8, 8);
    EXPECT_TRUE(r.detections[0].at_min_scale);
    EXPECT_EQ(evaluations(r), 13);
    r = detect_multires(cpu_context(), cube, testing::step_multires(1), {.keep_min_level = false});
    EXPECT_TRUE(r.detections.empty());
}

TEST(DetectMultires, NonSquareImageSplitsInTwoFirst) {
    // 1024×256: the root (level 7, 1024 nominal) has children 512×256 at x = 0 and 512; a 64×64 target in
    // the right half at [704, 768) × [96, 160). Levels: 1024 → 512 → 256 → 128 → 64 (f = 1/4 in the 128 window
    // at (640, 0)? no: the target spans y 96..160, across the 128-row boundary), worked out below.
    const Cube cube = testing::square_target(1024, 256, 1, 704, 96, 768, 160);
    const MultiresResult r = detect_multires(cpu_context(), cube, testing::step_multires(1), {.trace = true});
    EXPECT_EQ(r.top_level, 7);
    // Root: f = 4096/262144 → σ = 0.1237 > 0.01, < 0.4 ⇒ split into the two 512×256 halves.
    ASSERT_GE(r.trace.size(), 3u);
    expect_box(r.trace[1], 0, 0, 512, 256);
    expect_box(r.trace[2], 512, 0, 512, 256);
    EXPECT_EQ(r.trace[1].outcome, Window::Outcome::Rejected);
    EXPECT_EQ(r.trace[2].outcome, Window::Outcome::Split);
    // 256-windows: (512, 0) holds it with f = 4096/65536 ⇒ σ 0.242 split; 128-windows (640, 0) and (640, 128)
    // each hold 64×32 = 2048 px: f = 1/8 ⇒ σ 0.331 split; 64-windows (704, 64) and (704, 128) hold 64×32:
    // f = 1/2 ⇒ σ 0.5 ⇒ emitted.
    ASSERT_EQ(r.detections.size(), 2u);
    expect_box(r.detections[0], 704, 64, 64, 64);
    expect_box(r.detections[1], 704, 128, 64, 64);
}

TEST(DetectMultires, ConstantCubeGivesOneOfTheThreeClosedForms) {
    Cube cube(40, 24, 2, DType::F64, Layout::BSQ);
    for (std::size_t i = 0; i < cube.num_elements(); ++i) cube.data<double>()[i] = 0.75;
    // σ = 0 everywhere: ANN-1 "σ_1 > 0.01" negative ⇒ nothing.
    EXPECT_TRUE(detect_multires(cpu_context(), cube, testing::step_multires(2)).detections.empty());
    // ANN-1 "σ_1 > −1" positive, ANN-2 "σ_1 > −1" positive ⇒ the root alone.
    MultiresResult r = detect_multires(cpu_context(), cube, testing::step_multires(2, -1, -1));
    ASSERT_EQ(r.detections.size(), 1u);
    expect_box(r.detections[0], 0, 0, 40, 24);
    // ANN-1 positive, ANN-2 negative ⇒ the full tiling by 8×8 windows, all at_min_scale.
    r = detect_multires(cpu_context(), cube, testing::step_multires(2, -1, 0.5));
    ASSERT_EQ(r.detections.size(), 15u);  // 5 × 3 blocks
    for (const Window& w : r.detections) EXPECT_TRUE(w.at_min_scale);
}

TEST(DetectMultires, PyramidFeaturesMatchDirectStandardDeviations) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(seed);
    // Integer-valued samples: every sum is exact in f64, so the pyramid equals a direct sum bit for bit.
    const Cube cube = testing::random_cube(37, 29, 4, DType::U16, seed, 0, 4095, Layout::BIP);
    for (int level = 0; level <= 3; ++level) {
        std::vector<std::int64_t> counts;
        const std::vector<double> f = window_features(cpu_context(), cube, 8, level, &counts);
        const int side = 8 << level, gx = (37 + side - 1) / side, gy = (29 + side - 1) / side;
        ASSERT_EQ(f.size(), std::size_t(gx) * gy * 4);
        for (int j = 0; j < gy; ++j)
            for (int i = 0; i < gx; ++i)
                for (int c = 0; c < 4; ++c) {
                    double s1 = 0, s2 = 0, n = 0;
                    for (int y = j * side; y < std::min(29, (j + 1) * side); ++y)
                        for (int x = i * side; x < std::min(37, (i + 1) * side); ++x) {
                            const double v = cube.at<std::uint16_t>(x, y, c);
                            s1 += v;
                            s2 += v * v;
                            n += 1;
                        }
                    const double expected = std::sqrt(std::max(0.0, (s2 - s1 * s1 / n) / n));
                    ASSERT_EQ(f[(std::size_t(j) * gx + i) * 4 + c], expected) << level << " " << i << " " << j << " " << c;
                }
    }
}

TEST(DetectMultires, StepFillLawAndShiftInvariance) {
    // A 16×16 window with a 4×16 stripe of 1s: f = 1/4, σ = sqrt(f(1−f)) exactly up to sqrt rounding.
    Cube cube = testing::square_target(16, 16, 1, 0, 0, 4, 16);
    std::vector<double> f = window_features(cpu_context(), cube, 8, 1);
    EXPECT_NEAR(f[0], std::sqrt(0.25 * 0.75), 1e-15);
    for (std::size_t i = 0; i < cube.num_elements(); ++i) cube.data<float>()[i] += 100.0f;
    const std::vector<double> g = window_features(cpu_context(), cube, 8, 1);
    EXPECT_NEAR(g[0], f[0], 1e-12 * f[0]);
}

TEST(DetectMultires, NonFiniteSamplesAreSkippedAndCounted) {
    Cube cube = testing::square_target(16, 16, 2, 0, 0, 4, 16);
    cube.at<float>(9, 9, 1) = std::nanf("");
    const MultiresResult r = detect_multires(cpu_context(), cube, testing::step_multires(2));
    EXPECT_EQ(r.skipped_samples, 1);
    std::vector<std::int64_t> counts;
    window_features(cpu_context(), cube, 8, 0, &counts);
    EXPECT_EQ(counts[3 * 2 + 1], 63);  // block (1, 1), band 1
    EXPECT_EQ(counts[3 * 2 + 0], 64);
}

TEST(DetectMultires, InvariantsOnRandomNetworks) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(seed);
    const Cube cube = testing::random_cube(77, 50, 5, DType::F32, seed, 0, 1, Layout::BSQ);
    MultiresModel m = testing::step_multires(5, 0.2, 0.29);
    const MultiresResult r = detect_multires(cpu_context(), cube, m, {.trace = true});
    // Disjoint windows; each ANN-1 positive and ANN-2 positive or at_min_scale.
    for (std::size_t a = 0; a < r.detections.size(); ++a) {
        const Window& w = r.detections[a];
        EXPECT_GT(w.y1, 0.5);
        EXPECT_TRUE(w.y2 > 0.5 || w.at_min_scale);
        for (std::size_t b = a + 1; b < r.detections.size(); ++b) {
            const Window& v = r.detections[b];
            const bool overlap = w.x0 < v.x0 + v.width && v.x0 < w.x0 + w.width && w.y0 < v.y0 + v.height && v.y0 < w.y0 + w.height;
            EXPECT_FALSE(overlap);
        }
    }
    // Evaluations at level l−1 = the existing children of level l's splits.
    for (std::size_t i = 1; i < r.levels.size(); ++i) {
        std::int64_t children = 0;
        for (const Window& w : r.trace)
            if (w.level == r.levels[i - 1].level && w.outcome == Window::Outcome::Split)
                children += (w.width > (m.block << (w.level - 1)) ? 2 : 1) * (w.height > (m.block << (w.level - 1)) ? 2 : 1);
        EXPECT_EQ(r.levels[i].evaluated, children);
    }
}

// In tiles (tile sizes rounded down to whole blocks, one block at least), from memory and from a file
// read by windows under a host budget: the whole call's windows, counts and outputs bit for bit.
TEST(DetectMultires, TiledEqualsWhole) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(seed);
    Cube cube = testing::random_cube(83, 61, 6, DType::F32, seed, 0, 1, Layout::BIP);
    cube.at<float>(9, 50, 2) = std::nanf("");
    cube.at<float>(80, 3, 0) = INFINITY;
    const auto dir = testing::temp_dir("multires_tiles");
    write_cube(cube, dir / "c.npy");
    const CubeFile file(dir / "c.npy");
    // σ of uniform samples is ~0.2887: the root splits, smaller windows go either way.
    MultiresModel m = testing::step_multires(6, 0.2, 0.295);
    for (int min_window : {8, 16}) {
        m.min_window = min_window;
        const MultiresResult whole = detect_multires(cpu_context(), cube, m, {.trace = true});
        ASSERT_GT(whole.trace.size(), 5u) << "too few windows evaluated to tell";
        EXPECT_EQ(whole.skipped_samples, 2);
        for (auto [tw, th] : std::vector<std::pair<int, int>>{{1, 1}, {13, 7}, {16, 40}, {83, 24}}) {
            SCOPED_TRACE(::testing::Message() << "tiles " << tw << "x" << th << " min_window " << min_window);
            TiledRun run;
            testing::expect_same_search(whole, detect_multires_tiled(cpu_context(), cube, m, {.trace = true},
                                                          {.tile_width = tw, .tile_height = th}, &run));
            EXPECT_GT(run.tiles, 1u);
            EXPECT_EQ(run.tile_width % 8, 0);
            EXPECT_EQ(run.tile_height % 8, 0);
            testing::expect_same_search(whole, detect_multires_tiled(cpu_context(), file, m, {.trace = true},
                                                          {.tile_width = tw, .tile_height = th}));
        }
        TiledRun budget;
        testing::expect_same_search(whole, detect_multires_tiled(cpu_context(), file, m, {.trace = true}, {.memory_limit = 24 << 10}, &budget));
        EXPECT_GT(budget.tiles, 1u);
        EXPECT_LE(budget.peak_bytes, std::size_t(24 << 10));
    }
    EXPECT_THROW(detect_multires_tiled(cpu_context(), cube, testing::step_multires(5), {}, {.tile_width = 8, .tile_height = 8}),
                 InvalidInput);
}

// The block sums of pieces cut at block edges, side by side, are the scene's; the search from them
// is the whole call's; sums that do not fit the scene or model are refused.
TEST(DetectMultires, BlockSumsOfPiecesAreTheScenes) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(seed);
    Cube cube = testing::random_cube(45, 30, 3, DType::F32, seed, 0, 1, Layout::BIP);
    cube.at<float>(20, 20, 1) = std::nanf("");
    const BlockSums whole = multires_block_sums(cpu_context(), cube, 8);
    ASSERT_EQ(whole.gx, 6);
    ASSERT_EQ(whole.gy, 4);
    EXPECT_EQ(whole.skipped, 1);
    std::int64_t skipped = 0;
    for (auto [x0, y0, w, h] : std::vector<std::array<int, 4>>{{0, 0, 16, 8}, {16, 0, 29, 8}, {0, 8, 16, 22}, {16, 8, 29, 22}}) {
        const BlockSums part = multires_block_sums(cpu_context(), cube.view().window(x0, y0, w, h), 8);
        skipped += part.skipped;
        for (int j = 0; j < part.gy; ++j)
            for (int i = 0; i < part.gx; ++i)
                for (int c = 0; c < 3; ++c) {
                    const std::size_t a = (std::size_t(j) * part.gx + i) * 3 + c;
                    const std::size_t z = (std::size_t(y0 / 8 + j) * whole.gx + (x0 / 8 + i)) * 3 + c;
                    ASSERT_EQ(part.n[a], whole.n[z]);
                    ASSERT_EQ(part.s1[a], whole.s1[z]);
                    ASSERT_EQ(part.s2[a], whole.s2[z]);
                }
    }
    EXPECT_EQ(skipped, whole.skipped);
    const MultiresModel m = testing::step_multires(3, 0.2, 0.295);
    testing::expect_same_search(detect_multires(cpu_context(), cube, m, {.trace = true}),
                     detect_multires_from_sums(cpu_context(), whole, 45, 30, m, {.trace = true}));
    EXPECT_THROW(detect_multires_from_sums(cpu_context(), whole, 45, 33, m), InvalidInput);  // a 6×4 grid is not 45×33's
    MultiresModel m16 = m;
    m16.block = 16;
    m16.min_window = 16;
    EXPECT_THROW(detect_multires_from_sums(cpu_context(), whole, 45, 30, m16), InvalidInput);
    EXPECT_THROW(multires_block_sums(cpu_context(), cube, 6), InvalidInput);
}

TEST(DetectMultires, BadInputs) {
    const Cube cube = testing::square_target(16, 16, 2, 0, 0, 4, 4);
    MultiresModel m = testing::step_multires(3);
    EXPECT_THROW(detect_multires(cpu_context(), cube, m), InvalidInput);
    m = testing::step_multires(2);
    m.min_window = 12;
    EXPECT_THROW(detect_multires(cpu_context(), cube, m), InvalidInput);
    m = testing::step_multires(2);
    m.ann2.in_max[0] = -2;
    EXPECT_THROW(detect_multires(cpu_context(), cube, m), InvalidInput);
}

}  // namespace
}  // namespace cubekit
