// Connected components streamed in tiles on CUDA (issue 17): each tile labelled on the device, the
// tiles merged on the host, give the CPU whole-scene labels, statistics and cleaned masks exactly,
// for element types, layouts, both connectivities, tile sizes, lane counts and device lists, on random
// images and on a real scene's mask, from memory and from a file. Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "cubekit/io.hpp"
#include "labels_tiles_testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using testing::cubes_identical;
using testing::label_test_image;
using testing::poisoned_labels;
using testing::same_stats;

struct TileRun {
    int tw, th, lanes;
    bool all_devices;
};
const std::vector<TileRun> kRuns = {{157, 8, 2, false}, {31, 17, 1, false}, {6, 5, 3, false}, {157, 3, 2, true}};

TEST(LabelsTilesGpu, StreamedEqualsCpuWhole) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const DType types[] = {DType::U8, DType::U16, DType::I16, DType::U32, DType::I32};
    const Layout layouts[] = {Layout::BSQ, Layout::BIP, Layout::BIL};
    for (int i = 0; i < 5; ++i) {
        const int bands = 1 + i % 3, values = i % 2 ? 3 : 1;
        const Cube image = label_test_image(157, 61, bands, types[i], layouts[i % 3], 40 + 5 * i, values, seed + std::uint64_t(i));
        for (int connectivity : {4, 8}) {
            const Components whole = label_components(cpu_context(), image, connectivity);
            for (const TileRun& r : kRuns) {
                SCOPED_TRACE(::testing::Message() << dtype_name(types[i]) << " conn " << connectivity << " tiles " << r.tw
                                                  << "x" << r.th << " lanes " << r.lanes << " all devices " << r.all_devices);
                Cube out = poisoned_labels(157, 61, bands);
                const ComponentsTiled t = label_components_tiled(
                    gpu, image, out.mutable_view(), connectivity,
                    {.devices = r.all_devices ? testing::devices_twice_or_all() : std::vector<int>{}, .lanes = r.lanes, .tile_width = r.tw,
                     .tile_height = r.th});
                EXPECT_GT(t.run.tiles, 1u);
                ASSERT_TRUE(cubes_identical(whole.labels, out));
                ASSERT_TRUE(same_stats(whole.per_band, t.per_band));
            }
        }
    }
}

TEST(LabelsTilesGpu, RemovalStreamedEqualsCpuWhole) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    for (int values : {1, 3}) {
        const Cube mask = label_test_image(157, 61, 2, DType::U8, values == 1 ? Layout::BSQ : Layout::BIP, 45, values, seed);
        for (int connectivity : {4, 8})
            for (std::int64_t min_size : {0, 3, 30}) {
                const Cube whole = remove_small_components(cpu_context(), mask, min_size, connectivity);
                for (const TileRun& r : kRuns) {
                    SCOPED_TRACE(::testing::Message() << values << " values, conn " << connectivity << " min " << min_size
                                                      << " tiles " << r.tw << "x" << r.th << " lanes " << r.lanes);
                    Cube out(157, 61, 2, DType::U8);
                    remove_small_components_tiled(gpu, mask, out.mutable_view(), min_size, connectivity,
                                                  {.devices = r.all_devices ? testing::devices_twice_or_all() : std::vector<int>{},
                                                   .lanes = r.lanes, .tile_width = r.tw, .tile_height = r.th});
                    ASSERT_TRUE(cubes_identical(whole, out));
                }
            }
    }
}

// A real scene: band 40 of Samson above its median, labelled under a device budget and from a file.
TEST(LabelsTilesGpu, RealSceneMaskUnderABudgetAndFromAFile) {
    REQUIRE_GPU();
    const Cube scene = read_cube(testing::source_path("data/samson/samson_1.img"));
    std::vector<double> band;
    for (int y = 0; y < scene.height(); ++y)
        for (int x = 0; x < scene.width(); ++x) band.push_back(scene.value(x, y, 40));
    std::vector<double> sorted = band;
    std::nth_element(sorted.begin(), sorted.begin() + std::ptrdiff_t(sorted.size() / 2), sorted.end());
    const double median = sorted[sorted.size() / 2];
    Cube mask(scene.width(), scene.height(), 1, DType::U8);
    for (int y = 0; y < scene.height(); ++y)
        for (int x = 0; x < scene.width(); ++x) mask.set_value(x, y, 0, scene.value(x, y, 40) > median ? 1 : 0);
    const Components whole = label_components(cpu_context(), mask, 8);
    ASSERT_GT(whole.per_band[0].size(), 10u);
    Cube out = poisoned_labels(mask.width(), mask.height(), 1);
    const ComponentsTiled t = label_components_tiled(gpu, mask, out.mutable_view(), 8, {.device_memory_limit = 64 << 10});
    EXPECT_GT(t.run.tiles, 2u);
    EXPECT_LE(t.run.device_peak_bytes, std::size_t(64) << 10);
    EXPECT_TRUE(cubes_identical(whole.labels, out));
    EXPECT_TRUE(same_stats(whole.per_band, t.per_band));

    const auto dir = testing::temp_dir("labels_tiles_gpu_file");
    write_cube(mask, dir / "mask.hdr");
    Cube cleaned(mask.width(), mask.height(), 1, DType::U8);
    remove_small_components_tiled(gpu, CubeFile(dir / "mask.hdr"), cleaned.mutable_view(), 5, 8, {.tile_height = 9});
    EXPECT_TRUE(cubes_identical(remove_small_components(cpu_context(), mask, 5, 8), cleaned));
}

}  // namespace
}  // namespace cubekit
