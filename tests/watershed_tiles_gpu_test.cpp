// The watershed streamed in tiles on CUDA (issue 17): each tile's automaton on the device, the
// plateau distances exchanged and the classes joined on the host, give the CPU whole-scene labels and
// R exactly, over six reliefs, both connectivities, tile sizes, lane counts and device lists, with a
// mask, and on a real scene's RCMG under a device budget and from a file. Skips without a device.
#include <gtest/gtest.h>

#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include "cubekit/buffer.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "watershed_tiles_testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using testing::cubes_identical;
using testing::poisoned_watershed_labels;

struct WatershedTileRun {
    int tw, th, lanes;
    bool all_devices;
};
// Each tile costs the device a dozen launches and three read-backs: the tiny tiles run on a small
// scene (SmallTilesAndSanitizers), the large scene takes tiles of a few hundred pixels and more.
const std::vector<WatershedTileRun> kWatershedRuns = {{131, 9, 2, false}, {40, 17, 1, false}, {9, 6, 3, false}, {131, 4, 2, true}};

// Leaves random bytes in the device's memory pool, where the tiled call's buffers come from: a
// kernel that reads a cell it never wrote then sees noise, not the zeros of a fresh pool (outside
// cells of the ring read that way made the tiles disagree forever, 2026-11-28; only after other
// tests had used the pool).
void leave_noise_in_the_pool(const Context& gpu) {
    static const std::vector<std::uint8_t> noise = [] {
        std::vector<std::uint8_t> v(std::size_t(8) << 20);
        std::mt19937_64 rng(5);
        for (auto& b : v) b = std::uint8_t(rng());
        return v;
    }();
    DeviceBuffer junk(gpu, noise.size());
    junk.upload(gpu, noise.data(), noise.size());
}

// The tiled labels on the device against the CPU's whole call; returns what the tiled call did.
WatershedTiled expect_tiled_equals_whole(const Context& gpu, const Cube& relief, const WatershedOptions& o,
                                         const WatershedInputs& inputs, const TileOptions& tiles) {
    const WatershedResult whole = watershed(cpu_context(), relief, o, inputs);
    Cube out = poisoned_watershed_labels(relief.width(), relief.height());
    leave_noise_in_the_pool(gpu);
    const WatershedTiled t = watershed_tiled(gpu, relief, out.mutable_view(), o, inputs, tiles);
    EXPECT_TRUE(cubes_identical(whole.labels, out));
    EXPECT_EQ(whole.regions, t.regions);
    return t;
}

// The seed on stdout at once: a run that never ends (seen once, bench/results 2026-11-27) names it.
std::uint64_t announced_seed() {
    const std::uint64_t seed = testing::test_seed();
    std::cout << "[ seed ] " << seed << std::endl;
    return seed;
}

TEST(WatershedTilesGpu, StreamedEqualsCpuWhole) {
    REQUIRE_GPU();
    const std::uint64_t seed = announced_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const Cube mask = testing::watershed_test_mask(131, 47, seed);
    const CubeView mask_view = mask.view();
    int several_rounds = 0;
    for (const auto& [name, relief] : testing::watershed_test_reliefs(131, 47, seed))
        for (int connectivity : {4, 8})
            for (bool masked : {false, true}) {
                WatershedOptions o;
                o.connectivity = connectivity;
                const WatershedInputs inputs{.mask = masked ? &mask_view : nullptr};
                for (const WatershedTileRun& r : kWatershedRuns) {
                    SCOPED_TRACE(::testing::Message() << name << " conn " << connectivity << " mask " << masked << " tiles "
                                                      << r.tw << "x" << r.th << " lanes " << r.lanes << " all " << r.all_devices);
                    const WatershedTiled t = expect_tiled_equals_whole(
                        gpu, relief, o, inputs,
                        {.devices = r.all_devices ? testing::devices_twice_or_all() : std::vector<int>{}, .lanes = r.lanes,
                         .tile_width = r.tw, .tile_height = r.th});
                    EXPECT_GT(t.run.tiles, 1u);
                    several_rounds += t.rounds > 1;
                    if (::testing::Test::HasFailure()) return;
                }
            }
    EXPECT_GT(several_rounds, 10);
}

// Small, for the sanitizer runs (scripts/gpu-check): a few tiles, several rounds, both
// connectivities, with and without a mask (initcheck sees a read of a cell outside it never written).
TEST(WatershedTilesGpu, SmallForSanitizers) {
    REQUIRE_GPU();
    const Cube mask = testing::watershed_test_mask(23, 17, 11);
    const CubeView mask_view = mask.view();
    for (const auto& [name, relief] : testing::watershed_test_reliefs(23, 17, 11))
        for (int connectivity : {4, 8})
            for (bool masked : {false, true}) {
                SCOPED_TRACE(::testing::Message() << name << " conn " << connectivity << " mask " << masked);
                WatershedOptions o;
                o.connectivity = connectivity;
                expect_tiled_equals_whole(gpu, relief, o, {.mask = masked ? &mask_view : nullptr},
                                          {.lanes = 2, .tile_width = 6, .tile_height = 5});
            }
}

// The racecheck run's share (racecheck tracks every shared-memory access: minutes for the case above):
// the six reliefs, 8-connectivity, no mask.
TEST(WatershedTilesGpu, SmallForRacecheck) {
    REQUIRE_GPU();
    for (const auto& [name, relief] : testing::watershed_test_reliefs(23, 17, 11)) {
        SCOPED_TRACE(name);
        expect_tiled_equals_whole(gpu, relief, {}, {}, {.lanes = 2, .tile_width = 6, .tile_height = 5});
    }
}

// Tiles of one to six pixels on a small scene: plateaus crossing many tiles, many rounds.
TEST(WatershedTilesGpu, TinyTilesEqualCpuWhole) {
    REQUIRE_GPU();
    const std::uint64_t seed = announced_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    int several_rounds = 0;
    for (const auto& [name, relief] : testing::watershed_test_reliefs(23, 17, seed))
        for (auto [tw, th] : {std::pair{1, 1}, std::pair{2, 3}}) {
            SCOPED_TRACE(::testing::Message() << name << " tiles " << tw << "x" << th);
            several_rounds += expect_tiled_equals_whole(gpu, relief, {}, {}, {.lanes = 2, .tile_width = tw, .tile_height = th}).rounds > 1;
        }
    EXPECT_GT(several_rounds, 3);
}

TEST(WatershedTilesGpu, RealGradientUnderADeviceBudgetAndFromAFile) {
    REQUIRE_GPU();
    const Cube gradient = testing::samson_gradient(cpu_context());
    const std::filesystem::path dir = testing::temp_dir("watershed_tiles_gpu");
    write_cube(gradient, dir / "gradient.hdr");
    for (int connectivity : {4, 8}) {
        WatershedOptions o;
        o.connectivity = connectivity;
        const WatershedResult whole = watershed(cpu_context(), gradient, o);
        Cube out = poisoned_watershed_labels(gradient.width(), gradient.height());
        const WatershedTiled t = watershed_tiled(gpu, gradient, out.mutable_view(), o, {}, {.device_memory_limit = 256 << 10});
        EXPECT_GT(t.run.tiles, 1u);
        ASSERT_TRUE(cubes_identical(whole.labels, out));
        EXPECT_EQ(whole.regions, t.regions);
        Cube from_file = poisoned_watershed_labels(gradient.width(), gradient.height());
        watershed_tiled(gpu, CubeFile(dir / "gradient.hdr"), from_file.mutable_view(), o, {}, {.tile_width = 40, .tile_height = 30});
        ASSERT_TRUE(cubes_identical(whole.labels, from_file));
    }
    Cube nan = testing::random_cube(50, 40, 1, DType::F32, 3, 0.0, 1.0);
    nan.set_value(33, 21, 0, std::numeric_limits<double>::quiet_NaN());
    Cube out(50, 40, 1, DType::I32);
    try {
        watershed_tiled(gpu, nan, out.mutable_view(), {}, {}, {.tile_width = 16, .tile_height = 16});
        ADD_FAILURE() << "NaN accepted";
    } catch (const InvalidInput& e) {
        EXPECT_NE(std::string(e.what()).find("x 33, y 21"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace cubekit
