// The streamed tiled path on CUDA (issue 17): tiled RCMG on one or several devices equals the CPU
// reference on the whole scene bit for bit (RCMG's CUDA kernels are bit-identical to the CPU, see
// gradient_gpu_test.cpp), for any tile size, lane count and device list. Skips without a device.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cubekit/buffer.hpp"
#include "cubekit/detect.hpp"
#include "cubekit/detect_classical.hpp"
#include "cubekit/gradient.hpp"
#include "cubekit/io.hpp"
#include "cubekit/tiles.hpp"
#include "detect_testing.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using testing::cubes_identical;

Cube poisoned(int w, int h, DType type) {
    Cube out(w, h, 1, type);
    std::memset(out.bytes(), 0xFF, out.num_bytes());
    return out;
}

std::vector<int> all_devices() {
    std::vector<int> d;
    for (int i = 0; i < Context::cuda_device_count(); ++i) d.push_back(i);
    return d;
}

TEST(TilesGpu, RcmgStreamedEqualsCpuWhole) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    struct Case { int w, h, b; DType type; Layout layout; };
    for (const Case& c : {Case{301, 211, 17, DType::F32, Layout::BSQ}, Case{97, 64, 9, DType::U16, Layout::BIP},
                          Case{50, 33, 4, DType::F64, Layout::BIL}}) {
        const Cube cube = testing::random_cube(c.w, c.h, c.b, c.type, seed, 0, 1000, c.layout);
        const Cube whole = rcmg(cpu_context(), cube);
        struct Run { int tw, th, lanes; std::vector<int> devices; };
        const std::vector<Run> runs = {{c.w, 16, 2, {}}, {37, 23, 1, {}}, {5, 5, 3, {}}, {1, 1, 2, {}},
                                       {c.w, 7, 2, all_devices()}, {19, 11, 2, {gpu.device(), gpu.device()}}};
        for (const Run& r : runs) {
            SCOPED_TRACE(::testing::Message() << c.w << "x" << c.h << "x" << c.b << " tiles " << r.tw << "x" << r.th
                                              << " lanes " << r.lanes << " devices " << r.devices.size());
            if (r.tw == 1 && c.w > 100) continue;  // 1x1 tiles: the smaller cases cover them
            Cube out = poisoned(c.w, c.h, DType::F32);
            const TiledRun run = rcmg_tiled(gpu, cube, out.mutable_view(), {},
                                            {.devices = r.devices, .lanes = r.lanes, .tile_width = r.tw, .tile_height = r.th});
            EXPECT_GT(run.tiles, 1u);
            ASSERT_TRUE(cubes_identical(whole, out));
        }
    }
}

// Every visible device takes tiles, and the result equals one device's (on a 1-GPU machine the
// list is that device twice: two sets of workers on it).
TEST(TilesGpu, SeveralDevicesEqualOne) {
    REQUIRE_GPU();
    const Cube cube = testing::random_cube(640, 480, 12, DType::F32, testing::test_seed(), -1, 1);
    Cube one = poisoned(640, 480, DType::F32), many = poisoned(640, 480, DType::F32);
    rcmg_tiled(gpu, cube, one.mutable_view(), {}, {.tile_height = 40});
    std::vector<int> devices = all_devices();
    if (devices.size() == 1) devices.push_back(devices[0]);
    const TiledRun run = rcmg_tiled(gpu, cube, many.mutable_view(), {}, {.devices = devices, .tile_height = 20});
    std::cout << "[          ] " << Context::cuda_device_count() << " device(s) visible; " << run.tiles
              << " tiles over devices";
    for (int d : run.devices) std::cout << " " << d;
    std::cout << "\n";
    EXPECT_EQ(run.devices.size(), devices.size());
    EXPECT_TRUE(cubes_identical(one, many));
}

// Page-locked caller memory (a PinnedBuffer, as CuPy's or PyTorch's pinned arrays are) is moved by
// the copy engines in place: a window of a larger pinned cube in every nesting, and a pinned output
// window with its own row pitch, give the CPU whole-scene result, on one device and on all.
TEST(TilesGpu, PageLockedInputAndOutputMovedInPlace) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    for (Layout layout : {Layout::BSQ, Layout::BIL, Layout::BIP}) {
        SCOPED_TRACE(::testing::Message() << "layout " << int(layout));
        const int W = 203, H = 151, B = 7, x0 = 9, y0 = 5, w = 180, h = 130;
        const Cube big = testing::random_cube(W, H, B, DType::U16, seed, 0, 4000, layout);
        PinnedBuffer pinned_in(big.num_bytes());
        std::memcpy(pinned_in.data(), big.bytes(), big.num_bytes());
        const CubeView in = CubeView::host(pinned_in.data(), W, H, B, DType::U16, big.view().strides()).window(x0, y0, w, h);
        const Cube whole = rcmg(cpu_context(), in);
        const int out_pitch = w + 13;  // an output window of a wider pinned image
        PinnedBuffer pinned_out(std::size_t(out_pitch) * h * sizeof(float));
        const MutableCubeView out = MutableCubeView::host(pinned_out.data(), out_pitch, h, 1, DType::F32,
                                                          dense_strides(out_pitch, h, 1, Layout::BSQ)).window(2, 0, w, h);
        for (const std::vector<int>& devices : {std::vector<int>{}, all_devices()}) {
            std::memset(pinned_out.data(), 0xFF, pinned_out.size());
            const TiledRun run = rcmg_tiled(gpu, in, out, {}, {.devices = devices, .tile_width = 64, .tile_height = 17});
            EXPECT_TRUE(run.direct_input);
            EXPECT_TRUE(run.direct_output);
            EXPECT_GT(run.tiles, 4u);
            EXPECT_TRUE(cubes_identical(whole, Cube::from_view(out, Layout::BSQ)));
        }
        // A pageable output beside a pinned input: staged on the way out only.
        Cube pageable = poisoned(w, h, DType::F32);
        const TiledRun run = rcmg_tiled(gpu, in, pageable.mutable_view(), {}, {.tile_height = 31});
        EXPECT_TRUE(run.direct_input);
        EXPECT_FALSE(run.direct_output);
        EXPECT_TRUE(cubes_identical(whole, pageable));
    }
}

// A device budget forces tiles that fit it; the real scene (embedded Samson, i16 BSQ) as well.
TEST(TilesGpu, DeviceBudgetAndRealScene) {
    REQUIRE_GPU();
    const Cube scene = read_cube(testing::source_path("data/samson/samson_1.img"));
    for (int conn : {4, 8}) {
        const RcmgOptions options{.connectivity = conn};
        const Cube whole = rcmg(cpu_context(), scene, options);
        Cube out = poisoned(scene.width(), scene.height(), DType::F32);
        const TiledRun run = rcmg_tiled(gpu, scene, out.mutable_view(), options, {.device_memory_limit = 64 << 10});
        EXPECT_GT(run.tiles, 4u);
        EXPECT_LE(run.device_peak_bytes, std::size_t(64) << 10);
        EXPECT_TRUE(cubes_identical(whole, out));
    }
    Cube out = poisoned(scene.width(), scene.height(), DType::F32);
    EXPECT_THROW(rcmg_tiled(gpu, scene, out.mutable_view(), {}, {.device_memory_limit = 1000}), InvalidInput);
}

// The RBF detector streamed in tiles over every device gives the whole-scene CUDA scores bit for bit
// (a score depends on its own pixel only), from memory and from a file read by windows.
TEST(TilesGpu, DetectPixelsTiledEqualsWholeGpu) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const Cube cube = testing::random_cube(211, 97, 16, DType::F32, seed, 0, 1, Layout::BSQ);
    const std::vector<RbfnModel> models = {testing::random_rbfn(16, 4, seed + 1), testing::random_rbfn(16, 9, seed + 2)};
    const std::vector<PixelResult> whole = detect_pixels_many(gpu, cube, models);
    const auto dir = testing::temp_dir("tiles_gpu_detect");
    write_cube(cube.to_layout(Layout::BIL), dir / "c.hdr", {.envi_keep_layout = true});
    const CubeFile file(dir / "c.hdr");
    std::vector<int> devices = all_devices();
    if (devices.size() == 1) devices.push_back(devices[0]);
    for (const TileOptions& t : {TileOptions{.tile_width = 50, .tile_height = 13}, TileOptions{.devices = devices, .tile_height = 7},
                                 TileOptions{.device_memory_limit = 256 << 10}}) {
        const std::vector<PixelResult> tiled = detect_pixels_tiled(gpu, cube, models, {}, t);
        const std::vector<PixelResult> from_file = detect_pixels_tiled(gpu, file, models, {}, t);
        for (std::size_t j = 0; j < models.size(); ++j) {
            ASSERT_TRUE(cubes_identical(whole[j].score, tiled[j].score));
            ASSERT_TRUE(cubes_identical(whole[j].score, from_file[j].score));
            EXPECT_EQ(whole[j].objects.size(), tiled[j].objects.size());
        }
    }
}

// The classical detectors' apply step streamed in tiles equals the whole-scene CUDA apply bit for bit.
TEST(TilesGpu, ApplyDetectorTiledEqualsWholeGpu) {
    REQUIRE_GPU();
    const Cube cube = testing::random_cube(173, 89, 24, DType::I16, testing::test_seed(), -500, 3000, Layout::BIP);
    std::vector<double> target(24);
    for (int b = 0; b < 24; ++b) target[std::size_t(b)] = cube.value(5, 7, b);
    std::vector<int> devices = all_devices();
    if (devices.size() == 1) devices.push_back(devices[0]);
    for (Detector d : {Detector::Rx, Detector::Mf, Detector::Ace, Detector::Cem, Detector::Sam})
        for (DType t : {DType::F64, DType::F32}) {
            ClassicalOptions o;
            o.detector = d;
            o.out_type = t;
            const BackgroundStats stats = fit_background(cpu_context(), cube, o);
            const std::vector<double> tg = d == Detector::Rx ? std::vector<double>{} : target;
            const Cube whole = apply_detector(gpu, cube, stats, o, tg);
            for (const TileOptions& tiles : {TileOptions{.tile_width = 40, .tile_height = 9}, TileOptions{.devices = devices, .tile_height = 6}}) {
                SCOPED_TRACE(::testing::Message() << enum_name(d) << " " << dtype_name(t) << " devices " << tiles.devices.size());
                Cube out = poisoned(173, 89, t);
                apply_detector_tiled(gpu, cube, stats, o, tg, out.mutable_view(), tiles);
                ASSERT_TRUE(cubes_identical(whole, out));
            }
        }
}

// Local RX in tiles over every device equals the whole-scene CUDA local RX bit for bit.
TEST(TilesGpu, LocalRxTiledEqualsWholeGpu) {
    REQUIRE_GPU();
    const Cube cube = testing::random_cube(47, 38, 12, DType::F32, testing::test_seed(), 0, 100, Layout::BSQ);
    ClassicalOptions o;
    o.window = {3, 11};
    const Cube whole = local_rx(gpu, cube, o);
    std::vector<int> devices = all_devices();
    if (devices.size() == 1) devices.push_back(devices[0]);
    for (const TileOptions& tiles : {TileOptions{.tile_width = 9, .tile_height = 7}, TileOptions{.devices = devices, .tile_height = 5}}) {
        Cube out = poisoned(47, 38, DType::F64);
        local_rx_tiled(gpu, cube, o, out.mutable_view(), tiles);
        ASSERT_TRUE(cubes_identical(whole, out));
    }
    // From a file read by windows, under a host budget: the same scores.
    const auto dir = testing::temp_dir("tiles_gpu_local_rx");
    write_cube(cube, dir / "c.npy");
    Cube from_file = poisoned(47, 38, DType::F64);
    LocalRxReport report;
    local_rx_tiled(gpu, CubeFile(dir / "c.npy"), o, from_file.mutable_view(), {.memory_limit = 256 << 10, .devices = devices},
                   &report);
    EXPECT_TRUE(cubes_identical(whole, from_file));
}

// The statistics fitted from a file on a CUDA context (exact integer sums, strip by strip) equal the
// CPU reference's whole fit bit for bit, and the scores streamed from the file equal the whole apply.
TEST(TilesGpu, StatisticsAndScoresFromAFileOnTheDevice) {
    REQUIRE_GPU();
    const Cube cube = testing::random_cube(91, 57, 16, DType::I16, testing::test_seed(), -500, 3000, Layout::BIL);
    const auto dir = testing::temp_dir("tiles_gpu_file_fit");
    write_cube(cube, dir / "c.hdr");
    const ClassicalOptions o{.ddof = 1};
    const BackgroundStats want = fit_background(cpu_context(), cube, o);
    const BackgroundStats got = fit_background(gpu, CubeFile(dir / "c.hdr"), o, nullptr, 16 * 91 * 16 * 10);
    EXPECT_EQ(got.kept, want.kept);
    EXPECT_EQ(got.mean, want.mean);
    EXPECT_EQ(got.covariance, want.covariance);
    EXPECT_EQ(got.eigenvectors, want.eigenvectors);
    const Cube whole = apply_detector(gpu, cube, got, o);
    Cube out = poisoned(91, 57, DType::F64);
    apply_detector_tiled(gpu, CubeFile(dir / "c.hdr"), got, o, {}, out.mutable_view(), {.memory_limit = 64 << 10});
    EXPECT_TRUE(cubes_identical(whole, out));
}

}  // namespace
}  // namespace cubekit
