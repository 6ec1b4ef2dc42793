// The watershed in tiles (issue 17) on the CPU backend: labels and R equal watershed()'s exactly over
// six reliefs (ties, distinct floats, plateaus crossing many tiles, a constant scene, cones, terraces),
// both connectivities and tile sizes down to one pixel; a mask; window views; the embedded scene's
// RCMG read by windows from a file under a memory budget; refusals. (CUDA: watershed_tiles_gpu_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "watershed_tiles_testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using testing::cubes_identical;
using testing::poisoned_watershed_labels;

const std::vector<std::pair<int, int>> kWatershedTileSizes = {{1, 1}, {2, 3}, {5, 1}, {1, 4}, {7, 5}, {13, 2}, {4, 22}, {29, 9}};

TEST(WatershedTiles, TiledEqualsWholeOnTheCpu) {
    const Context& cpu = cpu_context();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    int compared = 0, several_rounds = 0;
    for (const auto& [name, relief] : testing::watershed_test_reliefs(29, 23, seed))
        for (int connectivity : {4, 8}) {
            WatershedOptions o;
            o.connectivity = connectivity;
            const WatershedResult whole = watershed(cpu, relief, o);
            for (auto [tw, th] : kWatershedTileSizes) {
                SCOPED_TRACE(::testing::Message() << name << " conn " << connectivity << " tiles " << tw << "x" << th);
                Cube out = poisoned_watershed_labels(29, 23);
                const WatershedTiled t = watershed_tiled(cpu, relief, out.mutable_view(), o, {}, {.tile_width = tw, .tile_height = th});
                EXPECT_GT(t.run.tiles, 1u);
                ASSERT_TRUE(cubes_identical(whole.labels, out));
                ASSERT_EQ(whole.regions, t.regions);
                several_rounds += t.rounds > 1;
                ++compared;
            }
        }
    EXPECT_EQ(compared, 6 * 2 * int(kWatershedTileSizes.size()));
    EXPECT_GT(several_rounds, 10);  // the plateau exchange was exercised
}

TEST(WatershedTiles, MaskWindowViewsAndStridedOutput) {
    const Context& cpu = cpu_context();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const Cube mask = testing::watershed_test_mask(40, 30, seed);
    for (const auto& [name, big] : testing::watershed_test_reliefs(44, 33, seed + 7)) {
        const CubeView relief = big.view().window(3, 2, 40, 30);  // a window: strided rows
        for (int connectivity : {4, 8}) {
            SCOPED_TRACE(::testing::Message() << name << " conn " << connectivity);
            WatershedOptions o;
            o.connectivity = connectivity;
            const CubeView mask_view = mask.view();
            const WatershedInputs inputs{.markers = nullptr, .mask = &mask_view};
            const WatershedResult whole = watershed(cpu, relief, o, inputs);
            Cube wide = poisoned_watershed_labels(47, 31);  // the labels into a window of a wider cube
            const MutableCubeView out = wide.mutable_view().window(5, 1, 40, 30);
            const WatershedTiled t = watershed_tiled(cpu, relief, out, o, inputs, {.tile_width = 6, .tile_height = 4});
            Cube got(40, 30, 1, DType::I32);
            copy_cube(cpu, out, got.mutable_view());
            ASSERT_TRUE(cubes_identical(whole.labels, got));
            EXPECT_EQ(whole.regions, t.regions);
            EXPECT_EQ(wide.at<std::int32_t>(0, 0, 0), std::int32_t(0xABABABAB));  // nothing outside the window
        }
    }
}

TEST(WatershedTiles, RealGradientFromAFileUnderAMemoryBudget) {
    const Context& cpu = cpu_context();
    const Cube gradient = testing::samson_gradient(cpu);
    const std::filesystem::path dir = testing::temp_dir("watershed_tiles_file");
    write_cube(gradient, dir / "gradient.hdr");
    for (int connectivity : {4, 8}) {
        WatershedOptions o;
        o.connectivity = connectivity;
        const WatershedResult whole = watershed(cpu, gradient, o);
        EXPECT_GT(whole.regions, 20);
        Cube out = poisoned_watershed_labels(gradient.width(), gradient.height());
        const WatershedTiled t = watershed_tiled(cpu, CubeFile(dir / "gradient.hdr"), out.mutable_view(), o, {},
                                                 {.memory_limit = 64 << 10});
        EXPECT_GT(t.run.tiles, 4u);
        EXPECT_LE(t.run.peak_bytes, std::size_t(64 << 10) + std::size_t(gradient.width() + gradient.height()) * 64);
        ASSERT_TRUE(cubes_identical(whole.labels, out));
        EXPECT_EQ(whole.regions, t.regions);
    }
}

// The region table from a cube file read a strip of rows at a time equals the whole call's bit for bit
// (f64 sums of float spectra in raster order), for strips of 1, 2, 3 rows and all rows, every layout.
TEST(WatershedTiles, RegionTableFromAFileInStripsEqualsTheWholeTable) {
    const Context& cpu = cpu_context();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const auto dir = testing::temp_dir("region-strips");
    const int W = 31, H = 17, B = 6;
    const Cube relief = testing::random_levels_cube(W, H, 1, DType::U8, seed, 5);
    const WatershedResult ws = watershed(cpu, relief, {});
    ASSERT_GT(ws.regions, 3);
    const Cube gradient = testing::random_cube(W, H, 1, DType::F32, seed + 1, -3, 7);
    const CubeView gradient_view = gradient.view();
    for (const Layout layout : {Layout::BSQ, Layout::BIL, Layout::BIP}) {
        // Values 12 orders of magnitude apart: their f64 sums need more than 53 bits and round, so the
        // order of the additions shows in the last bits (strips taken out of order fail this test).
        Cube cube = testing::random_cube(W, H, B, DType::F32, seed + 2, -1, 1, layout);
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x)
                for (int b = 0; b < B; ++b) cube.at<float>(x, y, b) *= (x * 7 + y * 3 + b) % 3 == 0 ? 1e12f : 1.0f;
        const std::string name = std::string("c_") + std::string(layout_name(layout)) + ".hdr";
        WriteOptions keep;
        write_cube(cube, dir / name, keep);
        const CubeFile file(dir / name);
        const CubeView cube_view = cube.view();
        const std::vector<RegionStats> whole = region_statistics(cpu, ws.labels, &cube_view, &gradient_view);
        const std::size_t row_bytes = std::size_t(W) * B * 4;
        for (const std::size_t limit : {row_bytes, 2 * row_bytes + 5, 3 * row_bytes, std::size_t(0)}) {
            SCOPED_TRACE(::testing::Message() << layout_name(layout) << " strip budget " << limit);
            const std::vector<RegionStats> strips = region_statistics(cpu, ws.labels, file, &gradient_view, limit);
            ASSERT_EQ(strips.size(), whole.size());
            for (std::size_t r = 0; r < whole.size(); ++r) {
                EXPECT_EQ(strips[r].label, whole[r].label);
                EXPECT_EQ(strips[r].area, whole[r].area);
                EXPECT_EQ(std::vector<int>({strips[r].x0, strips[r].y0, strips[r].x1, strips[r].y1}),
                          std::vector<int>({whole[r].x0, whole[r].y0, whole[r].x1, whole[r].y1}));
                EXPECT_EQ(strips[r].centroid_x, whole[r].centroid_x);
                EXPECT_EQ(strips[r].mean_gradient, whole[r].mean_gradient);
                ASSERT_EQ(strips[r].mean_spectrum, whole[r].mean_spectrum);  // bit for bit
            }
        }
        EXPECT_THROW(region_statistics(cpu, ws.labels, file, nullptr, row_bytes - 1), InvalidInput);  // no row fits
    }
    const Cube other = testing::random_cube(W + 1, H, 2, DType::F32, seed, 0, 1);
    write_cube(other, dir / "other.npy");
    EXPECT_THROW(region_statistics(cpu, ws.labels, CubeFile(dir / "other.npy")), InvalidInput);  // another size
}

TEST(WatershedTiles, RefusesWhatNeedsTheWholeReliefAndBadInputs) {
    const Context& cpu = cpu_context();
    const Cube relief = testing::random_levels_cube(12, 9, 1, DType::U8, 5, 8);
    Cube out(12, 9, 1, DType::I32);
    const auto refused = [&](const WatershedOptions& o, const WatershedInputs& in, const std::string& needle,
                             const CubeView* r = nullptr) {
        try {
            watershed_tiled(cpu, r ? *r : relief.view(), out.mutable_view(), o, in, {.tile_width = 4, .tile_height = 4});
            ADD_FAILURE() << "accepted; expected a refusal naming " << needle;
        } catch (const InvalidInput& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    WatershedOptions o;
    o.levels = 16;
    refused(o, {}, "levels");
    o = {};
    o.h_min = 2;
    refused(o, {}, "h_min");
    o = {};
    o.min_area = 5;
    refused(o, {}, "min_area");
    o = {};
    o.connectivity = 6;
    refused(o, {}, "connectivity");
    const Cube markers(12, 9, 1, DType::I32);
    const CubeView mv = markers.view();
    refused({}, {.markers = &mv}, "markers");
    const Cube small_mask(11, 9, 1, DType::U8);
    const CubeView sm = small_mask.view();
    refused({}, {.mask = &sm}, "mask");
    const Cube two_bands = testing::random_levels_cube(12, 9, 2, DType::U8, 5, 8);
    const CubeView tb = two_bands.view();
    refused({}, {}, "bands", &tb);
    Cube nan = testing::random_cube(12, 9, 1, DType::F32, 3, 0.0, 1.0);
    nan.set_value(7, 5, 0, std::numeric_limits<double>::quiet_NaN());
    const CubeView nv = nan.view();
    refused({}, {}, "x 7, y 5", &nv);
}

}  // namespace
}  // namespace cubekit
