// E6 baselines: CUDA backend against the CPU reference (spec edges.md §5.3). Built everywhere; every
// test skips (and says so) where no CUDA device exists. The GPU side is the device-resident call,
// baseline_edges_into, on the cube uploaded to the device (or a window or strided view of a device
// cube), writing into a device output poisoned with 0xFF, so an unwritten pixel fails.
//
// The spec lets the maps differ only at pixels whose value lies within 1e-5 relative of a threshold.
// Such pixels are found with the CPU itself: a pixel is near a threshold when the CPU's map of its
// band changes there between explicit thresholds T·(1 − 1e-5) and T·(1 + 1e-5), T being the band's
// threshold (for canny both hysteresis thresholds move, so a chain hanging on a near-threshold
// pixel counts as near as a whole). Differences there are counted and reported with RecordProperty;
// any other difference fails, and so does any threshold that differs by more than 1e-12 relative.
// Both backends run the same operations in the same order with order-independent or fixed-order
// reductions, so the count is expected to be 0 everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <numbers>
#include <string>
#include <vector>

#include "cubekit/buffer.hpp"
#include "cubekit/edge_baselines.hpp"
#include "cubekit/io.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;

constexpr double kNearRel = 1e-5;
constexpr double kThresholdRel = 1e-12;

const BaselineMethod kAll[] = {BaselineMethod::Sobel, BaselineMethod::Prewitt, BaselineMethod::Roberts,
                               BaselineMethod::LoG, BaselineMethod::Canny};

struct Tally {
    long pixels = 0;  ///< pixels compared
    long near = 0;    ///< differing pixels within 1e-5 of a threshold (allowed)
    long other = 0;   ///< any other differing pixel (a failure)
    void add(const Tally& t) { pixels += t.pixels, near += t.near, other += t.other; }
};

std::string describe(const Cube& c, const BaselineOptions& o) {
    return c.shape().describe() + " " + std::string(baseline_name(o.method)) + " sigma " + std::to_string(o.sigma) +
           " threshold " + std::to_string(o.threshold) + " low_ratio " + std::to_string(o.low_ratio) +
           (o.thinning ? "" : " nothinning");
}

/// The GPU's baseline_edges_into on `view` (device or host) into a poisoned W×H×B u8 BSQ device cube.
BaselineResult gpu_into(const Context& gpu, const CubeView& view, const BaselineOptions& o) {
    DeviceCube d_edges(gpu, {view.width(), view.height(), view.bands(), DType::U8, Layout::BSQ});
    d_edges.buffer().fill_bytes(gpu, 0xFF);
    BaselineResult r;
    r.thresholds = baseline_edges_into(gpu, view, d_edges, o);
    r.edges = d_edges.download(gpu);
    return r;
}

/// The CPU on `cube` against the GPU on `view`, a view of the same samples (by default the cube
/// uploaded); EXPECT failures name the first bad pixel.
Tally compare_view(const Context& gpu, const Cube& cube, const CubeView& view, const BaselineOptions& o) {
    SCOPED_TRACE(describe(cube, o) + " against the GPU on " + view.describe());
    Tally t;
    const BaselineResult cpu = baseline_edges_with_thresholds(cpu_context(), cube, o);
    const BaselineResult dev = gpu_into(gpu, view, o);
    EXPECT_EQ(dev.edges.shape().describe(), cpu.edges.shape().describe());
    if (dev.edges.shape().describe() != cpu.edges.shape().describe()) return t;
    const std::size_t N = cpu.edges.shape().num_pixels();
    const std::uint8_t* c = cpu.edges.data<std::uint8_t>();
    const std::uint8_t* d = dev.edges.data<std::uint8_t>();
    t.pixels = long(cpu.edges.num_elements());
    bool reported = false;
    for (int b = 0; b < cube.bands(); ++b) {
        const BaselineThreshold tc = cpu.thresholds[std::size_t(b)], td = dev.thresholds[std::size_t(b)];
        EXPECT_NEAR(td.high, tc.high, kThresholdRel * std::abs(tc.high)) << "band " << b;
        EXPECT_NEAR(td.low, tc.low, kThresholdRel * std::abs(tc.low)) << "band " << b;
        const std::uint8_t* cb = c + std::size_t(b) * N;
        const std::uint8_t* db = d + std::size_t(b) * N;
        bool differs = false;
        for (std::size_t i = 0; i < N; ++i) {
            EXPECT_LE(db[i], 1) << "band " << b << " pixel " << i << " not written (0xFF poison) or not 0/1";
            if (db[i] > 1) return t;
            differs |= cb[i] != db[i];
        }
        if (!differs) continue;
        // Bracket the band's threshold and see which pixels the CPU itself flips.
        const Cube band = cube.select_bands({b});
        BaselineOptions lo = o, hi = o;
        lo.threshold = tc.high * (1 - kNearRel);
        hi.threshold = tc.high * (1 + kNearRel);
        if (o.method == BaselineMethod::Canny) hi.threshold = std::min(hi.threshold, std::nextafter(1.0, 0.0));
        const Cube lo_map = baseline_edges(cpu_context(), band, lo);
        const Cube hi_map = baseline_edges(cpu_context(), band, hi);
        for (std::size_t i = 0; i < N; ++i) {
            if (cb[i] == db[i]) continue;
            if (lo_map.data<std::uint8_t>()[i] != hi_map.data<std::uint8_t>()[i]) {
                ++t.near;
            } else {
                ++t.other;
                if (!reported) {
                    reported = true;
                    ADD_FAILURE() << "band " << b << " pixel (" << i % std::size_t(cube.width()) << ", "
                                  << i / std::size_t(cube.width()) << "): cpu " << int(cb[i]) << ", gpu " << int(db[i])
                                  << ", not near threshold " << tc.high;
                }
            }
        }
    }
    return t;
}

Tally compare(const Context& gpu, const Cube& cube, const BaselineOptions& o) {
    const DeviceCube d_cube = DeviceCube::upload(gpu, cube);
    return compare_view(gpu, cube, d_cube.view(), o);
}

/// The option sets every input runs through: defaults, then variants per method.
std::vector<BaselineOptions> option_sets(BaselineMethod m, bool variants) {
    std::vector<BaselineOptions> v;
    BaselineOptions o;
    o.method = m;
    v.push_back(o);
    if (!variants) return v;
    switch (m) {
        case BaselineMethod::Sobel:
        case BaselineMethod::Prewitt:
        case BaselineMethod::Roberts: {
            BaselineOptions n = o;
            n.thinning = false;
            v.push_back(n);
            BaselineOptions t = o;
            t.threshold = 0.05;
            v.push_back(t);
            break;
        }
        case BaselineMethod::LoG: {
            BaselineOptions s = o;
            s.sigma = 1.0;
            v.push_back(s);
            s.sigma = 3.3;
            v.push_back(s);
            BaselineOptions t = o;
            t.threshold = 0.001;
            v.push_back(t);
            break;
        }
        case BaselineMethod::Canny: {
            BaselineOptions s = o;
            s.sigma = 1.0;
            v.push_back(s);
            s.sigma = 2.5;
            s.low_ratio = 0.2;
            v.push_back(s);
            BaselineOptions t = o;
            t.threshold = 0.15;
            v.push_back(t);
            break;
        }
    }
    return v;
}

void report(const Tally& t) {
    ::testing::Test::RecordProperty("pixels_compared", std::to_string(t.pixels));
    ::testing::Test::RecordProperty("near_threshold_differences", std::to_string(t.near));
    ::testing::Test::RecordProperty("other_differences", std::to_string(t.other));
    std::cerr << "  compared " << t.pixels << " pixels: " << t.near << " near-threshold differences, " << t.other
              << " others\n";
}

TEST(BaselineGpu, RandomCubesMatchCpu) {
    REQUIRE_GPU();
    struct Shape { int w, h, b; };
    const Shape shapes[] = {{1, 1, 1},   {1, 17, 3},  {17, 1, 3},  {2, 2, 2},    {3, 3, 1},
                            {31, 9, 2},  {61, 37, 5}, {33, 30, 1}, {129, 67, 4}, {257, 130, 2}};
    Tally total;
    for (const Shape& s : shapes)
        for (int kind = 0; kind < 3; ++kind) {
            const std::uint64_t seed = testing::test_seed();
            SCOPED_TRACE("seed " + std::to_string(seed) + " kind " + std::to_string(kind));
            // kind 0: u8 noise; 1: four levels (ties everywhere: equal magnitudes, flat runs);
            // 2: f32 through E1.
            const Cube cube = kind == 0   ? testing::random_cube(s.w, s.h, s.b, DType::U8, seed, 0, 255)
                              : kind == 1 ? testing::random_levels_cube(s.w, s.h, s.b, DType::U8, seed, 4)
                                          : testing::random_cube(s.w, s.h, s.b, DType::F32, seed, -1e3, 1e3);
            for (BaselineMethod m : kAll)
                for (const BaselineOptions& o : option_sets(m, kind == 0)) total.add(compare(gpu, cube, o));
        }
    report(total);
    EXPECT_EQ(total.other, 0);
}

// Smooth shapes: blurred discs and ramps give long, connected canny chains and many exact ties.
TEST(BaselineGpu, SyntheticShapesMatchCpu) {
    REQUIRE_GPU();
    Cube cube(300, 220, 3, DType::U8);
    for (int y = 0; y < 220; ++y)
        for (int x = 0; x < 300; ++x) {
            const double r = std::hypot(x - 150.0, y - 110.0);
            cube.set_value(x, y, 0, r < 80 ? 200 : 40);                       // a disc
            cube.set_value(x, y, 1, std::floor(x * 255.0 / 299));             // a ramp
            cube.set_value(x, y, 2, 128 + 100 * std::sin(x / 9.0) * std::cos(y / 13.0));  // waves
        }
    Tally total;
    for (BaselineMethod m : kAll)
        for (const BaselineOptions& o : option_sets(m, true)) total.add(compare(gpu, cube, o));
    report(total);
    EXPECT_EQ(total.other, 0);
}

// Hysteresis across many tiles: a bright spiral whose intensity fades along its length, so only its
// start is strong and the edge must grow along thousands of pixels through 32×32 tiles.
TEST(BaselineGpu, CannyHysteresisFollowsALongSpiral) {
    REQUIRE_GPU();
    const int W = 400, H = 400;
    Cube cube(W, H, 1, DType::U8);
    const double turns = 14, steps = 60000;
    for (int i = 0; i < int(steps); ++i) {
        const double t = i / steps, angle = turns * 2 * std::numbers::pi * t, radius = 5 + 185 * t;
        const int x = int(std::lround(200 + radius * std::cos(angle))), y = int(std::lround(200 + radius * std::sin(angle)));
        cube.set_value(x, y, 0, 255 - 200 * t);
    }
    BaselineOptions o;
    o.method = BaselineMethod::Canny;
    const BaselineResult cpu = baseline_edges_with_thresholds(cpu_context(), cube, o);
    long edges = 0;
    for (std::size_t i = 0; i < cpu.edges.num_elements(); ++i) edges += cpu.edges.data<std::uint8_t>()[i];
    RecordProperty("spiral_edge_pixels", std::to_string(edges));
    EXPECT_GT(edges, 3000);
    Tally total = compare(gpu, cube, o);
    o.low_ratio = 0.05;  // longer weak chains
    total.add(compare(gpu, cube, o));
    report(total);
    EXPECT_EQ(total.other, 0);
}

// Grid limits: more than 65535 bands (grid z strides) and more than 65535·8 rows (grid y strides).
TEST(BaselineGpu, GridStridesOverBandsAndRows) {
    REQUIRE_GPU();
    Tally total;
    const Cube many = testing::random_cube(4, 3, 66000, DType::U8, testing::test_seed(), 0, 255);
    const Cube tall = testing::random_cube(3, 530000, 1, DType::U8, testing::test_seed(), 0, 255);
    for (BaselineMethod m : kAll) {
        BaselineOptions o;
        o.method = m;
        total.add(compare(gpu, many, o));
        total.add(compare(gpu, tall, o));
    }
    report(total);
    EXPECT_EQ(total.other, 0);
}

// Small device chunks (CUBEKIT_BASELINE_CHUNK_BYTES): bands run in several chunks, same maps.
TEST(BaselineGpu, ChunkedBandsMatchCpu) {
    REQUIRE_GPU();
    const Cube cube = testing::random_cube(50, 40, 9, DType::U8, testing::test_seed(), 0, 255);
    Tally total;
    for (const char* bytes : {"20000", "100000"}) {
        ::setenv("CUBEKIT_BASELINE_CHUNK_BYTES", bytes, 1);
        for (BaselineMethod m : kAll) {
            BaselineOptions o;
            o.method = m;
            total.add(compare(gpu, cube, o));
        }
    }
    ::unsetenv("CUBEKIT_BASELINE_CHUNK_BYTES");
    report(total);
    EXPECT_EQ(total.other, 0);
}

TEST(BaselineGpu, GrayPhotosMatchCpu) {
    REQUIRE_GPU();
    const char* names[] = {"brick", "camera", "cell", "coins", "grass", "gravel", "text"};
    Tally total;
    int found = 0;
    for (const char* name : names) {
        const auto path = testing::shared_data_path(std::string("gray/") + name + ".png");
        if (!path) continue;
        ++found;
        SCOPED_TRACE(path->string());
        const Cube img = read_cube(*path);
        for (BaselineMethod m : kAll)
            for (const BaselineOptions& o : option_sets(m, true)) total.add(compare(gpu, img, o));
    }
    if (found == 0) GTEST_SKIP() << "no grayscale photos under shared/data/gray";
    RecordProperty("photos", std::to_string(found));
    report(total);
    EXPECT_EQ(total.other, 0);
}

// A few bands (first, middle, last and two more) of every hyperspectral scene at hand.
TEST(BaselineGpu, HyperspectralBandsMatchCpu) {
    REQUIRE_GPU();
    struct Scene { std::string path, var; };
    const std::vector<Scene> scenes = {{"envi/samson/samson_1.img", ""},
                                       {"envi/jasper_ridge/jasperRidge2_R198.img", ""},
                                       {"target_detection/Sandiego.mat", "data"},
                                       {"anomaly_abu/abu-airport-1.mat", "data"},
                                       {"anomaly_abu/abu-beach-2.mat", "data"},
                                       {"anomaly_abu/hydice.mat", "data"}};
    std::vector<std::pair<std::filesystem::path, std::string>> found = {{testing::source_path("data/samson/samson_1.img"), ""}};
    for (const Scene& s : scenes)
        if (auto p = testing::shared_data_path(s.path)) found.push_back({*p, s.var});
    Tally total;
    for (const auto& [path, var] : found) {
        SCOPED_TRACE(path.string());
        const Cube scene = read_cube(path, {.var = var});
        const int B = scene.bands();
        std::vector<int> bands = {0, B / 4, B / 2, (3 * B) / 4, B - 1};
        const Cube some = scene.select_bands(bands);
        for (BaselineMethod m : kAll) {
            BaselineOptions o;
            o.method = m;
            total.add(compare(gpu, some, o));
        }
    }
    RecordProperty("scenes", std::to_string(found.size()));
    report(total);
    EXPECT_EQ(total.other, 0);
}

// ---- Views and outputs of the device-resident call ---------------------------------------------------

// A window of a device cube is read where it is: the CPU's maps of the cropped cube.
TEST(BaselineGpu, WindowOfADeviceCubeMatchesCpu) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    Tally total;
    for (DType t : {DType::U8, DType::F32}) {
        const Cube whole = testing::random_cube(90, 70, 3, t, seed, 0, 255);
        const DeviceCube d_whole = DeviceCube::upload(gpu, whole);
        for (const auto& [x, y, w, h] : {std::array{5, 7, 61, 43}, std::array{0, 69, 90, 1}, std::array{89, 0, 1, 70}}) {
            const Cube crop = whole.crop(x, y, w, h);
            for (BaselineMethod m : kAll)
                for (const BaselineOptions& o : option_sets(m, false))
                    total.add(compare_view(gpu, crop, d_whole.view().window(x, y, w, h), o));
        }
    }
    report(total);
    EXPECT_EQ(total.other, 0);
}

// A BIP device cube (x stride = bands) and one band of it are read where they are.
TEST(BaselineGpu, BipDeviceCubeAndOneOfItsBandsMatchCpu) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    Tally total;
    for (DType t : {DType::U8, DType::I16, DType::F64}) {
        const Cube bsq = testing::random_cube(67, 41, 4, t, seed, 0, 200);
        const DeviceCube d_bip = DeviceCube::upload(gpu, bsq.to_layout(Layout::BIP));
        for (BaselineMethod m : kAll) {
            BaselineOptions o;
            o.method = m;
            total.add(compare_view(gpu, bsq, d_bip.view(), o));
            total.add(compare_view(gpu, bsq.select_bands({2}), d_bip.view().band_range(2, 1), o));
        }
    }
    report(total);
    EXPECT_EQ(total.other, 0);
}

// Outputs that are not dense BSQ (a BIP cube, a window of a larger poisoned cube) get the same
// maps; the rest of the larger cube stays poisoned. The host call equals the device-resident one.
TEST(BaselineGpu, StridedOutputsAndTheHostCallGiveTheSameMaps) {
    REQUIRE_GPU();
    const Cube cube = testing::random_cube(58, 45, 3, DType::F32, testing::test_seed(), -5.0, 5.0);
    const DeviceCube d_cube = DeviceCube::upload(gpu, cube);
    for (BaselineMethod m : kAll) {
        BaselineOptions o;
        o.method = m;
        SCOPED_TRACE(describe(cube, o));
        const BaselineResult want = gpu_into(gpu, d_cube, o);
        const BaselineResult host = baseline_edges_with_thresholds(gpu, cube, o);
        EXPECT_TRUE(testing::cubes_identical(want.edges, host.edges)) << "host call";
        DeviceCube bip(gpu, {58, 45, 3, DType::U8, Layout::BIP});
        bip.buffer().fill_bytes(gpu, 0xFF);
        const std::vector<BaselineThreshold> t = baseline_edges_into(gpu, d_cube, bip, o);
        EXPECT_TRUE(testing::cubes_identical(want.edges, bip.download(gpu).to_layout(Layout::BSQ))) << "BIP output";
        DeviceCube big(gpu, {64, 50, 3, DType::U8, Layout::BSQ});
        big.buffer().fill_bytes(gpu, 0xFF);
        baseline_edges_into(gpu, d_cube, big.mutable_view().window(4, 3, 58, 45), o);
        const Cube all = big.download(gpu);
        EXPECT_TRUE(testing::cubes_identical(want.edges, all.crop(4, 3, 58, 45))) << "window output";
        long outside_written = 0;
        for (int b = 0; b < 3; ++b)
            for (int y = 0; y < 50; ++y)
                for (int x = 0; x < 64; ++x)
                    if (!(x >= 4 && x < 62 && y >= 3 && y < 48)) outside_written += all.at<std::uint8_t>(x, y, b) != 0xFF;
        EXPECT_EQ(outside_written, 0) << "pixels outside the output window were written";
        for (std::size_t b = 0; b < want.thresholds.size(); ++b) {
            EXPECT_EQ(t[b].high, want.thresholds[b].high);
            EXPECT_EQ(host.thresholds[b].high, want.thresholds[b].high);
        }
    }
}

// A device cube makes no host copy: no host buffer is allocated by the device-resident call.
TEST(BaselineGpu, DeviceInputMakesNoHostCopy) {
    REQUIRE_GPU();
    const Cube cube = testing::random_cube(300, 200, 6, DType::F32, testing::test_seed(), 0.0, 1.0);
    const DeviceCube d_cube = DeviceCube::upload(gpu, cube);
    DeviceCube d_edges(gpu, {300, 200, 6, DType::U8, Layout::BSQ});
    for (BaselineMethod m : kAll) {
        BaselineOptions o;
        o.method = m;
        const MemoryCounters before = memory_counters();
        baseline_edges_into(gpu, d_cube.view().window(1, 1, 298, 198), d_edges.mutable_view().window(1, 1, 298, 198), o);
        const MemoryCounters after = memory_counters();
        EXPECT_EQ(after.host_allocations, before.host_allocations) << baseline_name(m);
        EXPECT_EQ(after.pinned_allocations, before.pinned_allocations) << baseline_name(m);
    }
}

// In groups of whole bands on the device (forced groups of 2 bands, a device budget, the context's
// device and every visible one): the whole device call's edges and thresholds bit for bit.
TEST(BaselineGpu, InGroupsOfBandsEqualWholeOnTheDevice) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube cube = testing::random_cube(97, 61, 7, DType::F32, seed, -1e3, 1e3, Layout::BIP);
    std::vector<int> every(std::size_t(Context::cuda_device_count()));
    for (std::size_t d = 0; d < every.size(); ++d) every[d] = int(d);
    for (BaselineMethod m : kAll) {
        SCOPED_TRACE(std::string(baseline_name(m)));
        const BaselineResult whole = baseline_edges_with_thresholds(gpu, cube, BaselineOptions{.method = m});
        for (const TileOptions& t : {TileOptions{.tile_width = 1, .tile_height = 2},
                                     TileOptions{.device_memory_limit = std::size_t(97) * 61 * 60, .devices = every, .lanes = 1}}) {
            TiledRun run;
            const BaselineResult g = baseline_edges_tiled(gpu, cube, BaselineOptions{.method = m}, t, &run);
            EXPECT_GT(run.tiles, 1u);
            EXPECT_TRUE(testing::cubes_identical(whole.edges, g.edges));
            for (std::size_t b = 0; b < whole.thresholds.size(); ++b) {
                EXPECT_EQ(whole.thresholds[b].high, g.thresholds[b].high);
                EXPECT_EQ(whole.thresholds[b].low, g.thresholds[b].low);
            }
        }
    }
}

}  // namespace
}  // namespace cubekit
