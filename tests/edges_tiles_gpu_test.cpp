// The entropy edge detector streamed in tiles on CUDA (issue 17): the statistics passes (ranges,
// histograms) and the map pass on one or several devices give the CPU whole-scene map and thresholds
// bit for bit (the CUDA detector is bit-identical to the CPU, edges_gpu_test.cpp), for any tile size,
// lane count, device list, layout, page-locked or pageable memory, and from a file. Skips without a device.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cubekit/buffer.hpp"
#include "cubekit/edges.hpp"
#include "cubekit/io.hpp"
#include "edges_tiles_testing.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using testing::cubes_identical;
using testing::devices_twice_or_all;
using testing::edge_test_cube;
using testing::expect_same_summary;
using testing::poisoned_map;

TEST(EdgesTilesGpu, StreamedEqualsCpuWhole) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    struct Case { int w, h, b; DType type; Layout layout; };
    const std::vector<Case> cases = {{301, 211, 17, DType::U8, Layout::BSQ}, {97, 64, 9, DType::U16, Layout::BIP},
                                     {50, 33, 4, DType::F32, Layout::BIL}, {41, 29, 6, DType::F64, Layout::BSQ}};
    struct Run { int tw, th, lanes; std::vector<int> devices; };
    for (const Case& c : cases) {
        const Cube cube = edge_test_cube(c.w, c.h, c.b, c.type, c.layout, seed);
        const std::vector<Run> runs = {{c.w, 16, 2, {}}, {37, 23, 1, {}}, {5, 5, 3, {}}, {c.w, 7, 2, devices_twice_or_all()}};
        for (EdgeFusion fusion : {EdgeFusion::Auto, EdgeFusion::None, EdgeFusion::BandMean, EdgeFusion::BinaryVote,
                                  EdgeFusion::ThresholdMean})
            for (std::int64_t min_component : {0, 5}) {
                const EntropyEdgeOptions o{.min_component = min_component,
                                           .quantize = fusion == EdgeFusion::BandMean ? Quantize::Global : Quantize::PerBand,
                                           .fusion = fusion, .vote_percent = 30};
                const EntropyEdgeResult whole = entropy_edges(cpu_context(), cube, o);
                for (const Run& r : runs) {
                    if (r.tw == 5 && c.w > 100) continue;  // 5x5 tiles: the smaller cases cover them
                    SCOPED_TRACE(::testing::Message() << c.w << "x" << c.h << "x" << c.b << " " << dtype_name(c.type)
                                                      << " fusion " << fusion_name(fusion) << " L " << min_component
                                                      << " tiles " << r.tw << "x" << r.th << " lanes " << r.lanes
                                                      << " devices " << r.devices.size());
                    Cube out = poisoned_map(c.w, c.h, whole.edges.bands());
                    const EntropyEdgeTiled t = entropy_edges_tiled(
                        gpu, cube, out.mutable_view(), o,
                        {.devices = r.devices, .lanes = r.lanes, .tile_width = r.tw, .tile_height = r.th});
                    EXPECT_GT(t.run.tiles, 1u);
                    ASSERT_TRUE(cubes_identical(whole.edges, out));
                    expect_same_summary(whole, t.summary);
                }
            }
    }
}

// A device budget forces tiles that fit it (the real scene, embedded Samson); page-locked input is
// moved in place; a file is read by windows.
TEST(EdgesTilesGpu, DeviceBudgetPinnedInputAndFile) {
    REQUIRE_GPU();
    const auto path = testing::source_path("data/samson/samson_1.img");
    const Cube scene = read_cube(path);
    const EntropyEdgeOptions o{.min_component = 5};
    const EntropyEdgeResult whole = entropy_edges(cpu_context(), scene, o);
    Cube out = poisoned_map(scene.width(), scene.height(), 1);
    const EntropyEdgeTiled t = entropy_edges_tiled(gpu, scene, out.mutable_view(), o, {.device_memory_limit = 256 << 10});
    EXPECT_GT(t.run.tiles, 2u);
    EXPECT_LE(t.run.device_peak_bytes, std::size_t(256) << 10);
    EXPECT_TRUE(cubes_identical(whole.edges, out));
    expect_same_summary(whole, t.summary);

    PinnedBuffer pinned(scene.num_bytes());
    std::memcpy(pinned.data(), scene.bytes(), scene.num_bytes());
    const CubeView in = CubeView::host(pinned.data(), scene.width(), scene.height(), scene.bands(), scene.dtype(),
                                       scene.view().strides());
    Cube from_pinned = poisoned_map(scene.width(), scene.height(), 1);
    const EntropyEdgeTiled p = entropy_edges_tiled(gpu, in, from_pinned.mutable_view(), o,
                                                   {.devices = devices_twice_or_all(), .tile_height = 11});
    EXPECT_TRUE(p.run.direct_input);
    EXPECT_TRUE(cubes_identical(whole.edges, from_pinned));

    Cube from_file = poisoned_map(scene.width(), scene.height(), 1);
    const EntropyEdgeTiled f = entropy_edges_tiled(gpu, CubeFile(path), from_file.mutable_view(), o, {.tile_height = 9});
    EXPECT_EQ(f.passes, 3);
    EXPECT_TRUE(cubes_identical(whole.edges, from_file));
    expect_same_summary(whole, f.summary);
    EXPECT_THROW(entropy_edges_tiled(gpu, scene, out.mutable_view(), o, {.device_memory_limit = 1000}), InvalidInput);
}

}  // namespace
}  // namespace cubekit
