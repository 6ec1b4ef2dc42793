// The entropy edge detector in tiles (issue 17) on the CPU backend: tiled == whole bit for bit (map and
// thresholds) over element types, layouts, non-finite samples, fusions, E1 modes, E3 and tile sizes
// down to one pixel; the budget; a file read by windows; the refusals; the CLI.
// (The CUDA streamed path: tiles_gpu_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "cubekit/edges.hpp"
#include "cubekit/io.hpp"
#include "edges_tiles_testing.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using testing::cubes_identical;
using testing::edge_test_cube;
using testing::expect_same_summary;
using testing::poisoned_map;

TEST(EdgesTiles, TiledEqualsWholeOnTheCpu) {
    const Context& cpu = cpu_context();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    struct Case { int w, h, b; DType type; Layout layout; };
    const std::vector<Case> cases = {{23, 17, 5, DType::U8, Layout::BSQ}, {19, 14, 4, DType::U16, Layout::BIP},
                                     {21, 9, 3, DType::F32, Layout::BIL}, {11, 13, 6, DType::F64, Layout::BSQ},
                                     {17, 12, 1, DType::I16, Layout::BSQ}};
    const std::vector<EdgeFusion> fusions = {EdgeFusion::Auto, EdgeFusion::None, EdgeFusion::BandMean,
                                             EdgeFusion::BinaryVote, EdgeFusion::ThresholdMean};
    int compared = 0;
    for (const Case& c : cases) {
        const Cube cube = edge_test_cube(c.w, c.h, c.b, c.type, c.layout, seed);
        for (EdgeFusion fusion : fusions)
            for (Quantize mode : {Quantize::PerBand, Quantize::Global})
                for (std::int64_t min_component : {0, 4}) {
                    const EntropyEdgeOptions o{.min_component = min_component, .connectivity = min_component ? 4 : 8,
                                               .quantize = mode, .fusion = fusion, .vote_percent = 30};
                    const EntropyEdgeResult whole = entropy_edges(cpu, cube, o);
                    for (auto [tw, th] : std::vector<std::pair<int, int>>{{1, 1}, {2, 3}, {5, 2}, {c.w, 1}, {7, 7}}) {
                        SCOPED_TRACE(::testing::Message() << c.w << "x" << c.h << "x" << c.b << " " << dtype_name(c.type)
                                                          << " fusion " << fusion_name(fusion) << " " << quantize_name(mode)
                                                          << " L " << min_component << " tiles " << tw << "x" << th);
                        Cube out = poisoned_map(c.w, c.h, whole.edges.bands());
                        const EntropyEdgeTiled t = entropy_edges_tiled(cpu, cube, out.mutable_view(), o,
                                                                       {.tile_width = tw, .tile_height = th});
                        EXPECT_GT(t.run.tiles, 1u);
                        EXPECT_EQ(t.passes, c.type == DType::U8 ? 2 : 3);
                        ASSERT_TRUE(cubes_identical(whole.edges, out));
                        expect_same_summary(whole, t.summary);
                        ++compared;
                    }
                }
    }
    EXPECT_EQ(compared, 5 * 5 * 2 * 2 * 5);
}

// The embedded real scene under a memory budget: several tiles, the peak within the budget, the map
// of the default vote with small components removed equal to the whole call; the output may be a
// window of a larger cube. A file read by windows gives the same.
TEST(EdgesTiles, RealSceneUnderABudgetAndFromAFile) {
    const Context& cpu = cpu_context();
    const auto path = testing::source_path("data/samson/samson_1.img");
    const Cube scene = read_cube(path);
    const EntropyEdgeOptions o{.min_component = 5};
    const EntropyEdgeResult whole = entropy_edges(cpu, scene, o);
    std::int64_t set = 0;
    for (std::size_t i = 0; i < whole.edges.num_elements(); ++i) set += whole.edges.data<std::uint8_t>()[i];
    ASSERT_GT(set, 100);  // a map with edges, not a blank one
    Cube big(scene.width() + 4, scene.height() + 3, 1, DType::U8);
    std::memset(big.bytes(), 7, big.num_bytes());
    const MutableCubeView out = big.mutable_view().window(2, 1, scene.width(), scene.height());
    const EntropyEdgeTiled t = entropy_edges_tiled(cpu, scene, out, o, {.memory_limit = 16 << 10});
    EXPECT_GT(t.run.tiles, 8u);
    EXPECT_LE(t.run.peak_bytes, std::size_t(16) << 10);
    EXPECT_TRUE(cubes_identical(whole.edges, Cube::from_view(out, Layout::BSQ)));
    EXPECT_EQ(big.value(0, 0, 0), 7.0);  // outside the window: untouched
    expect_same_summary(whole, t.summary);

    const auto dir = testing::temp_dir("edges_tiles_file");
    write_cube(scene, dir / "s.hdr", {.envi_keep_layout = false, .envi_layout = Layout::BIP});
    Cube from_file = poisoned_map(scene.width(), scene.height(), 1);
    const EntropyEdgeTiled f = entropy_edges_tiled(cpu, CubeFile(dir / "s.hdr"), from_file.mutable_view(), o,
                                                   {.memory_limit = 64 << 10});
    EXPECT_GT(f.run.tiles, 1u);
    EXPECT_TRUE(cubes_identical(whole.edges, from_file));
    expect_same_summary(whole, f.summary);
}

TEST(EdgesTiles, RefusesWhatTheTilesDoNotMake) {
    const Context& cpu = cpu_context();
    const Cube cube = edge_test_cube(12, 10, 4, DType::F32, Layout::BSQ, 5);
    Cube out = poisoned_map(12, 10, 1);
    for (EdgeFusion f : {EdgeFusion::PcaMean, EdgeFusion::PcaEdgeVote, EdgeFusion::PcaBinaryVote}) {
        try {
            entropy_edges_tiled(cpu, cube, out.mutable_view(), {.fusion = f}, {.tile_width = 4});
            ADD_FAILURE() << "accepted " << fusion_name(f);
        } catch (const InvalidInput& e) {
            EXPECT_NE(std::string(e.what()).find("principal components"), std::string::npos) << e.what();
        }
    }
    EXPECT_THROW(entropy_edges_tiled(cpu, cube, out.mutable_view(), {.min_component = 3, .filter_each_band = true}, {}),
                 InvalidInput);
    EXPECT_TRUE(entropy_edges_tiled_refusal({.filter_each_band = true}, 4).empty());  // nothing to filter: fine
    Cube wrong(12, 10, 4, DType::U8);  // the vote makes one map
    EXPECT_THROW(entropy_edges_tiled(cpu, cube, wrong.mutable_view(), {}, {}), InvalidInput);
    EXPECT_THROW(entropy_edges_tiled(cpu, cube, out.mutable_view(), {.q = -1}, {}), InvalidInput);
    EXPECT_THROW(entropy_edges_tiled(cpu, cube, out.mutable_view(), {}, {.memory_limit = 10}), InvalidInput);
}

// The CLI's tiled path writes the same map and thresholds file as the whole-scene run and reports
// its tiles and passes; options the tiles do not make are refused when tiles are asked for (exit 2).
TEST(EdgesTilesCli, MemoryLimitWritesTheSameMap) {
    const auto dir = testing::temp_dir("edges_tiles_cli");
    const std::string in = testing::q(testing::source_path("data/samson/samson_1.img"));
    const std::string common = " --min-component 4 --backend cpu --quiet";
    const auto whole = testing::run_cli("edges " + in + " " + testing::q(dir / "whole.npy") + " --thresholds-out " +
                                        testing::q(dir / "whole.json") + common);
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    const auto tiled = testing::run_cli("edges " + in + " " + testing::q(dir / "tiled.npy") + " --thresholds-out " +
                                        testing::q(dir / "tiled.json") + common + " --memory-limit 32K --json");
    ASSERT_EQ(tiled.exit_code, 0) << tiled.err;
    const auto j = nlohmann::json::parse(tiled.out);
    EXPECT_GT(j["tiled"]["tiles"].get<int>(), 4);
    EXPECT_EQ(j["tiled"]["passes"].get<int>(), 3);
    EXPECT_LE(j["tiled"]["peak_bytes"].get<std::size_t>(), 32768u);
    EXPECT_TRUE(j["input"]["windowed"].get<bool>());  // ENVI: read by windows, never whole
    EXPECT_EQ(j["outputs"][1]["path"], (dir / "tiled.npy").string());
    EXPECT_TRUE(j["outputs"][1].value("streamed", false));  // the map was written tile by tile
    EXPECT_EQ(testing::read_text(dir / "whole.npy"), testing::read_text(dir / "tiled.npy"));  // the same bytes
    EXPECT_EQ(nlohmann::json::parse(testing::read_text(dir / "whole.json")),
              nlohmann::json::parse(testing::read_text(dir / "tiled.json")));

    const auto pca = testing::run_cli("edges " + in + " " + testing::q(dir / "pca.png") + " --fusion pca --tile-size 8x8" + common);
    EXPECT_EQ(pca.exit_code, 2);
    EXPECT_TRUE(testing::names_token(pca.err, "--tile-size")) << pca.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "pca.png"));
    const auto votes = testing::run_cli("edges " + in + " " + testing::q(dir / "v.png") + " --vote-count-out " +
                                        testing::q(dir / "c.npy") + " --memory-limit 1M" + common);
    EXPECT_EQ(votes.exit_code, 2);
    EXPECT_TRUE(testing::names_token(votes.err, "--vote-count-out")) << votes.err;
}

}  // namespace
}  // namespace cubekit
