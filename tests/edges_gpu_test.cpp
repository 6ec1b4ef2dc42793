// Entropy edge detector: CUDA against the CPU reference (spec edges.md §5.3). Everything the
// detector outputs is integer (quantised bytes, thresholds, binary images, edge maps, vote counts,
// fused and filtered maps; the PCA fusions use exact sums, one shared host eigensolve and an f64
// projection without contraction), so every comparison is exact. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "cubekit/buffer.hpp"
#include "cubekit/edges.hpp"
#include "cubekit/io.hpp"
#include "edges_views_test_helpers.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using testing::cubes_identical;

constexpr EdgeFusion kAllFusions[] = {EdgeFusion::None,          EdgeFusion::BandMean,    EdgeFusion::PcaMean,
                                      EdgeFusion::EdgeVote,      EdgeFusion::BinaryVote,  EdgeFusion::ThresholdMean,
                                      EdgeFusion::PcaEdgeVote,   EdgeFusion::PcaBinaryVote};

/// Compares every output of one run on both backends.
void expect_same_run(const Context& gpu, const Cube& cube, EntropyEdgeOptions o, const std::string& what) {
    SCOPED_TRACE(what + ", fusion " + std::string(fusion_name(o.fusion)));
    o.keep_binary = true;
    o.keep_band_edges = true;
    const EntropyEdgeResult c = entropy_edges(cpu_context(), cube, o), g = entropy_edges(gpu, cube, o);
    EXPECT_EQ(c.band_thresholds, g.band_thresholds);
    ASSERT_EQ(c.derived_thresholds.size(), g.derived_thresholds.size());
    for (std::size_t i = 0; i < c.derived_thresholds.size(); ++i) {
        EXPECT_EQ(c.derived_thresholds[i].name, g.derived_thresholds[i].name);
        EXPECT_EQ(c.derived_thresholds[i].thresholds, g.derived_thresholds[i].thresholds) << c.derived_thresholds[i].name;
    }
    EXPECT_TRUE(cubes_identical(c.edges, g.edges)) << "edges";
    EXPECT_TRUE(cubes_identical(c.binary, g.binary)) << "binary";
    EXPECT_TRUE(cubes_identical(c.band_edges, g.band_edges)) << "band edges";
    EXPECT_TRUE(cubes_identical(c.vote_count, g.vote_count)) << "vote count";
    EXPECT_EQ(c.votes_needed, g.votes_needed);
    EXPECT_EQ(c.pca_components_used, g.pca_components_used);
    EXPECT_EQ(c.explained_variance_ratio, g.explained_variance_ratio);
}

TEST(EdgesGpu, QuantisationIsBitExactForEveryType) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (DType t : {DType::U8, DType::U16, DType::I16, DType::U32, DType::I32, DType::F32, DType::F64}) {
        Cube c = testing::random_cube(67, 45, 5, t, seed, -1e4, 1e4);
        if (t == DType::F32 || t == DType::F64) {  // non-finite values are excluded and map to 0
            c.set_value(3, 4, 1, NAN);
            c.set_value(5, 6, 2, INFINITY);
        }
        for (Quantize q : {Quantize::PerBand, Quantize::Global})
            EXPECT_TRUE(cubes_identical(quantize_to_u8(cpu_context(), c, q), quantize_to_u8(gpu, c, q)))
                << dtype_name(t) << " " << quantize_name(q);
    }
}

TEST(EdgesGpu, EveryFusionOnRandomCubes) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    struct Case {
        int W, H, B;
        DType t;
        int levels;  // 0: uniform random values
    };
    const Case cases[] = {{64, 48, 7, DType::U8, 0},     {131, 77, 12, DType::U8, 9},  {33, 257, 3, DType::U16, 0},
                          {200, 3, 4, DType::I16, 0},    {3, 150, 5, DType::F32, 0},   {97, 61, 20, DType::F64, 0},
                          {45, 45, 2, DType::U8, 2},     {1, 1, 3, DType::U8, 0},      {2, 40, 3, DType::U8, 0},
                          {517, 263, 6, DType::U8, 30},
                          // Vote counts above 255 (the device counts in bit slices, 9 of them here).
                          {70, 40, 300, DType::U8, 0}};
    for (const Case& k : cases) {
        const Cube c = k.levels ? testing::random_levels_cube(k.W, k.H, k.B, k.t, seed, k.levels)
                                : testing::random_cube(k.W, k.H, k.B, k.t, seed, 0, k.t == DType::U8 ? 255 : 5000);
        const std::string what = c.shape().describe();
        for (EdgeFusion f : kAllFusions) {
            EntropyEdgeOptions o;
            o.fusion = f;
            expect_same_run(gpu, c, o, what);
            o.min_component = 4;
            o.filter_each_band = true;
            o.vote_percent = 40;
            o.pca_components = 2;
            expect_same_run(gpu, c, o, what + " L=4 x=40");
        }
    }
}

// Every fusion on one small cube of two types: the set the sanitizers run (every kernel of the detector).
TEST(EdgesGpu, EveryFusionOnASmallCube) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    for (DType t : {DType::U8, DType::F32}) {
        const Cube c = testing::random_levels_cube(45, 37, 5, t, seed, 17);
        for (EdgeFusion f : kAllFusions) {
            EntropyEdgeOptions o;
            o.fusion = f;
            o.min_component = 3;
            o.filter_each_band = true;
            expect_same_run(gpu, c, o, c.shape().describe());
        }
    }
}

TEST(EdgesGpu, OptionsQConnectivityAndQuantize) {
    REQUIRE_GPU();
    const Cube c = testing::random_levels_cube(150, 110, 6, DType::U16, testing::test_seed(), 40);
    for (double q : {0.5, 1.0, 0.25, 2.0})
        for (int conn : {4, 8}) {
            EntropyEdgeOptions o;
            o.q = q;
            o.connectivity = conn;
            o.min_component = 6;
            o.quantize = conn == 4 ? Quantize::Global : Quantize::PerBand;
            expect_same_run(gpu, c, o, "q " + std::to_string(q) + " conn " + std::to_string(conn));
        }
}

TEST(EdgesGpu, ClosedFormsOnTheDevice) {
    REQUIRE_GPU();
    // The 8×8 end-to-end oracle (spec §5.1 item 4) straight on the device.
    Cube c(8, 8, 1, DType::U8);
    for (int y = 0; y < 8; ++y)
        for (int x = 0; x < 8; ++x) c.at<std::uint8_t>(x, y, 0) = ((y == 3 || y == 4) && (x == 5 || x == 6)) ? 120 : x < 4 ? 50 : 200;
    const EntropyEdgeResult r = entropy_edges(gpu, c);
    EXPECT_EQ(r.band_thresholds[0].t1, 50);
    EXPECT_EQ(r.band_thresholds[0].t3, 120);
    for (int y = 0; y < 8; ++y)
        for (int x = 0; x < 8; ++x)
            EXPECT_EQ(r.edges.at<std::uint8_t>(x, y, 0), (x == 3 || x == 4) && y >= 1 && y <= 6 ? 1 : 0) << x << "," << y;
}

TEST(EdgesGpu, RealHyperspectralScenes) {
    REQUIRE_GPU();
    const auto scenes = testing::hyperspectral_scenes();
    for (const testing::SceneFile& s : scenes) {
        const Cube scene = read_cube(s.path, {.var = s.var});
        for (EdgeFusion f : kAllFusions) {
            EntropyEdgeOptions o;
            o.fusion = f;
            o.min_component = 5;
            expect_same_run(gpu, scene, o, s.path.filename().string());
        }
    }
    RecordProperty("scenes_compared", int(scenes.size()));
}

TEST(EdgesGpu, RealPhotos) {
    REQUIRE_GPU();
    int compared = 0;
    for (const std::string folder : {"gray", "rgb"})
        for (const auto& p : testing::shared_photos(folder)) {
            const Cube img = read_cube(p);
            for (EdgeFusion f : {EdgeFusion::None, EdgeFusion::EdgeVote, EdgeFusion::BinaryVote, EdgeFusion::PcaMean}) {
                EntropyEdgeOptions o;
                o.fusion = f;
                o.min_component = 8;
                expect_same_run(gpu, img, o, p.filename().string());
            }
            ++compared;
        }
    RecordProperty("photos_compared", compared);
    if (compared == 0) std::cerr << "note: no shared photos (see shared/data/README.md)\n";
}

// ---- The device-resident call (issue 12): entropy_edges_into with poisoned device outputs ---------

// Every output of entropy_edges_into on the device, each poisoned (0xFF) before the call.
struct DeviceRun {
    EntropyEdgeSummary summary;
    Cube edges, band_edges, binary, vote_count;
};
DeviceRun device_run(const Context& gpu, const CubeView& d_cube, const EntropyEdgeOptions& o) {
    const int W = d_cube.width(), H = d_cube.height();
    const EntropyEdgeBands n = entropy_edges_bands(d_cube.bands(), o);
    DeviceCube edges = edges_views::poisoned(gpu, {W, H, n.edges, DType::U8, Layout::BSQ});
    DeviceCube band_edges, binary, count;
    EntropyEdgeExtras extras;
    if (n.band_edges) extras.band_edges = band_edges = edges_views::poisoned(gpu, {W, H, n.band_edges, DType::U8, Layout::BSQ});
    if (n.binary) extras.binary = binary = edges_views::poisoned(gpu, {W, H, n.binary, DType::U8, Layout::BSQ});
    if (n.vote_count) extras.vote_count = count = edges_views::poisoned(gpu, {W, H, 1, DType::U16, Layout::BSQ});
    DeviceRun r;
    r.summary = entropy_edges_into(gpu, d_cube, edges, o, extras);
    r.edges = edges.download(gpu);
    if (n.band_edges) r.band_edges = band_edges.download(gpu);
    if (n.binary) r.binary = binary.download(gpu);
    if (n.vote_count) r.vote_count = count.download(gpu);
    return r;
}

// The CPU reference with every output kept.
EntropyEdgeResult cpu_run(const Cube& cube, EntropyEdgeOptions o) {
    o.keep_band_edges = true;
    o.keep_binary = true;
    return entropy_edges(cpu_context(), cube, o);
}

void expect_same(const EntropyEdgeResult& c, const DeviceRun& g) {
    EXPECT_EQ(c.band_thresholds, g.summary.band_thresholds);
    ASSERT_EQ(c.derived_thresholds.size(), g.summary.derived_thresholds.size());
    for (std::size_t i = 0; i < c.derived_thresholds.size(); ++i)
        EXPECT_EQ(c.derived_thresholds[i].thresholds, g.summary.derived_thresholds[i].thresholds) << c.derived_thresholds[i].name;
    EXPECT_TRUE(cubes_identical(c.edges, g.edges)) << "edges";
    EXPECT_TRUE(cubes_identical(c.band_edges, g.band_edges)) << "band edges";
    EXPECT_TRUE(cubes_identical(c.binary, g.binary)) << "binary";
    EXPECT_TRUE(cubes_identical(c.vote_count, g.vote_count)) << "vote count";
    EXPECT_EQ(c.votes_needed, g.summary.votes_needed);
    EXPECT_EQ(c.pca_components_used, g.summary.pca_components_used);
    EXPECT_EQ(c.explained_variance_ratio, g.summary.explained_variance_ratio);
}

TEST(EdgesGpu, IntoPoisonedDeviceOutputsOnAwkwardShapes) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    struct Shape { int w, h, b; };
    const Shape shapes[] = {{1, 1, 1}, {1, 17, 3}, {17, 1, 3}, {2, 3, 2}, {31, 9, 2}, {61, 37, 5}, {113, 67, 7}};
    for (const Shape& s : shapes)
        for (DType t : {DType::U8, DType::U16, DType::F32}) {
            const Cube cube = testing::random_levels_cube(s.w, s.h, s.b, t, seed, 11);
            const DeviceCube d_cube = DeviceCube::upload(gpu, cube);
            for (EdgeFusion f : kAllFusions) {
                SCOPED_TRACE(cube.shape().describe() + " " + std::string(fusion_name(f)));
                EntropyEdgeOptions o;
                o.fusion = f;
                o.min_component = 3;
                o.pca_components = 2;
                o.filter_each_band = f == EdgeFusion::EdgeVote;
                expect_same(cpu_run(cube, o), device_run(gpu, d_cube, o));
            }
        }
}

// A window of a device BSQ cube (its margins hold other values) and a device BIP cube (strided:
// reordered once on the device) give the owned cube's CPU results; so do outputs that are one
// band of a BIP device cube (written through one device copy).
TEST(EdgesGpu, DeviceWindowBipCubeAndStridedOutputs) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (DType t : {DType::U8, DType::I16, DType::F64}) {
        const Cube owned = testing::random_levels_cube(45, 38, 6, t, seed, 13);
        const edges_views::DeviceWindow window = edges_views::device_window(gpu, owned, Layout::BSQ, seed, 0, 200);
        const DeviceCube bip = DeviceCube::from_view(gpu, owned, Layout::BIP);
        for (EdgeFusion f : kAllFusions) {
            SCOPED_TRACE(std::string(dtype_name(t)) + " " + std::string(fusion_name(f)));
            EntropyEdgeOptions o;
            o.fusion = f;
            o.min_component = 4;
            const EntropyEdgeResult expected = cpu_run(owned, o);
            expect_same(expected, device_run(gpu, window.view, o));
            expect_same(expected, device_run(gpu, bip, o));
            const EntropyEdgeBands n = entropy_edges_bands(6, o);
            DeviceCube strided = edges_views::poisoned(gpu, {45, 38, n.edges + 1, DType::U8, Layout::BIP});
            (void)entropy_edges_into(gpu, window.view, strided.mutable_view().band_range(1, n.edges), o);
            const Cube got = strided.download(gpu);
            EXPECT_TRUE(cubes_identical(expected.edges, Cube::from_view(got.view().band_range(1, n.edges), Layout::BSQ)));
        }
        EXPECT_EQ(entropy_band_thresholds(gpu, window.view), entropy_band_thresholds(cpu_context(), owned));
        EXPECT_EQ(entropy_band_thresholds(gpu, bip, {.q = 2.0}), entropy_band_thresholds(cpu_context(), owned, {.q = 2.0}));
        for (Quantize q : {Quantize::PerBand, Quantize::Global}) {
            const Cube expected = quantize_to_u8(cpu_context(), owned, q);
            for (const CubeView& in : {window.view, bip.view()}) {
                DeviceCube out = edges_views::poisoned(gpu, {45, 38, 6, DType::U8, Layout::BSQ});
                quantize_to_u8_into(gpu, in, out, q);
                EXPECT_TRUE(cubes_identical(expected, out.download(gpu)));
            }
            DeviceCube bip_out = edges_views::poisoned(gpu, {45, 38, 6, DType::U8, Layout::BIP});
            quantize_to_u8_into(gpu, window.view, bip_out, q);
            EXPECT_TRUE(cubes_identical(expected, bip_out.download(gpu).to_layout(Layout::BSQ)));
        }
    }
}

// A dense BSQ u8 device cube is its own E1: the per-band detector into a dense output allocates
// nothing of the cube's size on the device (only histograms and thresholds).
TEST(EdgesGpu, DenseU8DeviceCubeIsReadInPlace) {
    REQUIRE_GPU();
    const Cube cube = testing::random_levels_cube(211, 97, 9, DType::U8, testing::test_seed(), 20);
    const DeviceCube d_cube = DeviceCube::upload(gpu, cube);
    DeviceCube maps = edges_views::poisoned(gpu, {211, 97, 9, DType::U8, Layout::BSQ});
    const EntropyEdgeOptions none{.fusion = EdgeFusion::None};
    const MemoryCounters before = memory_counters();
    const EntropyEdgeSummary s = entropy_edges_into(gpu, d_cube, maps, none);
    EXPECT_LT(memory_counters().device_bytes - before.device_bytes, cube.num_bytes() / 4);
    EXPECT_EQ(memory_counters().host_allocations, before.host_allocations);
    const EntropyEdgeResult c = entropy_edges(cpu_context(), cube, none);
    EXPECT_EQ(c.band_thresholds, s.band_thresholds);
    EXPECT_TRUE(cubes_identical(c.edges, maps.download(gpu)));
    Cube host_out(211, 97, 9, DType::U8);
    EXPECT_THROW(entropy_edges_into(gpu, d_cube, host_out, none), InvalidInput);  // host output, CUDA context
}

}  // namespace
}  // namespace cubekit
