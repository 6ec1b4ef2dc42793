// PCA: CUDA backend against the CPU reference (spec edges.md §5.3 "PCA paths"). Built everywhere;
// every test skips (and says so) where no CUDA device exists. scripts/gpu-check runs them on the H100.
//
// Exactness (§3.9): both backends produce the same integer sums (order-free), the model comes from
// one host routine, and the scores are f64 without contraction in band order, so the model (mean,
// covariance, eigenvalues, components, explained variance) and the scores must be identical bit
// for bit, for every element type, layout and shape.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "cubekit/linalg.hpp"
#include "edges_views_test_helpers.hpp"
#include "linalg/pca_internal.hpp"
#include "pca_test_helpers.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using pca_test::correlated_cube;
using pca_test::kTypes;
using pca_test::models_identical;
using testing::cpu_context;
using testing::cubes_identical;

// The device-resident path the edge detector uses: upload BSQ, pca_fit_device, and the scores
// through pca_transform_device into an output poisoned with 0xFF bytes (so an unwritten sample shows).
PcaResult gpu_device_path(const Context& gpu, const Cube& cube, int components) {
    const DeviceCube d_cube = DeviceCube::upload(gpu, cube.to_layout(Layout::BSQ));
    PcaResult r;
    r.model = detail::pca_fit_device(gpu, d_cube, components);
    const int k = r.model.num_components();
    DeviceCube d_out(gpu, CubeShape{cube.width(), cube.height(), k, DType::F64, Layout::BSQ});
    d_out.buffer().fill_bytes(gpu, 0xFF);
    detail::pca_transform_device(gpu, d_cube, r.model, static_cast<double*>(d_out.data()));
    r.scores = d_out.download(gpu);
    return r;
}

// The public device-resident calls on a device cube `d_cube`: pca_into (fit + scores), then
// pca_fit and pca_transform_into again, every output poisoned first.
PcaResult gpu_public_into(const Context& gpu, const CubeView& d_cube, int components, PcaModel& refit) {
    const CubeShape shape{d_cube.width(), d_cube.height(), components, DType::F64, Layout::BSQ};
    DeviceCube d_scores = edges_views::poisoned(gpu, shape), d_again = edges_views::poisoned(gpu, shape);
    PcaResult r;
    r.model = pca_into(gpu, d_cube, d_scores, {.components = components});
    refit = pca_fit(gpu, d_cube, {.components = components});
    pca_transform_into(gpu, d_cube, refit, d_again);
    r.scores = d_scores.download(gpu);
    EXPECT_TRUE(cubes_identical(r.scores, d_again.download(gpu))) << "pca_transform_into";
    return r;
}

// CPU (pca) against the GPU paths (pca on a CUDA context, the internal device path, the public
// device-resident calls).
void expect_identical(const Context& gpu, const Cube& cube, int components, const std::string& what) {
    SCOPED_TRACE(what + " " + cube.shape().describe() + " k=" + std::to_string(components));
    const PcaResult cpu = pca(cpu_context(), cube, {.components = components});
    const PcaResult g = pca(gpu, cube, {.components = components});
    EXPECT_TRUE(models_identical(cpu.model, g.model)) << "pca()";
    EXPECT_TRUE(cubes_identical(cpu.scores, g.scores)) << "pca()";
    const PcaResult d = gpu_device_path(gpu, cube, components);
    EXPECT_TRUE(models_identical(cpu.model, d.model)) << "device path";
    EXPECT_TRUE(cubes_identical(cpu.scores, d.scores)) << "device path";
    const DeviceCube d_cube = DeviceCube::from_view(gpu, cube, Layout::BSQ);
    PcaModel refit;
    const PcaResult p = gpu_public_into(gpu, d_cube, components, refit);
    EXPECT_TRUE(models_identical(cpu.model, p.model)) << "pca_into";
    EXPECT_TRUE(models_identical(cpu.model, refit)) << "pca_fit of a device cube";
    EXPECT_TRUE(cubes_identical(cpu.scores, p.scores)) << "pca_into";
}

struct Shape { int w, h, b; };
// 1 pixel; 1, 2, 31, 32, 33 (tile edges with the indicator band) and 200 bands; pixel counts that
// are odd, not multiples of 4 (u8 words, unaligned band planes) or of the 256-pixel chunks.
const Shape kShapes[] = {{1, 1, 1},  {1, 1, 4},   {1, 17, 2},  {17, 1, 3},   {3, 5, 1},   {31, 9, 2},
                         {61, 37, 5}, {33, 30, 31}, {29, 23, 32}, {21, 19, 33}, {47, 15, 200}, {113, 127, 12},
                         {255, 3, 7}, {1001, 67, 3}};

TEST(PcaGpu, RandomCubesOfEveryTypeMatchCpuBitForBit) {
    REQUIRE_GPU();
    for (const Shape& s : kShapes)
        for (DType t : kTypes) {
            const std::uint64_t seed = testing::test_seed();
            const int k = std::min(s.b, 3);
            const std::string tag = std::string(dtype_name(t)) + " seed " + std::to_string(seed);
            expect_identical(gpu, correlated_cube(s.w, s.h, s.b, t, seed), k, "correlated " + tag);
            // The whole range of the type (bounds of the sums), and many ties.
            double lo = 0, hi = 0;
            pca_test::type_range(t, lo, hi);
            expect_identical(gpu, testing::random_cube(s.w, s.h, s.b, t, seed + 1, lo, hi), s.b, "full-range " + tag);
            expect_identical(gpu, testing::random_levels_cube(s.w, s.h, s.b, t, seed + 2, 3), k, "levels " + tag);
        }
}

TEST(PcaGpu, ExtremeValuesMatchCpuBitForBit) {
    REQUIRE_GPU();
    // Every sample at the type's extremes: the largest products and sums the bounds allow.
    for (DType t : kTypes) {
        const Cube c = pca_test::extreme_cube(t, testing::test_seed());
        expect_identical(gpu, c, 3, "extremes " + std::string(dtype_name(t)));
    }
}

TEST(PcaGpu, NonFinitePixelsAndLayouts) {
    REQUIRE_GPU();
    for (DType t : {DType::F32, DType::F64}) {
        const std::uint64_t seed = testing::test_seed();
        Cube c = correlated_cube(73, 41, 9, t, seed);
        std::mt19937_64 rng(seed);
        const double bad[] = {NAN, INFINITY, -INFINITY};
        for (int n = 0; n < 300; ++n) c.set_value(int(rng() % 73), int(rng() % 41), int(rng() % 9), bad[rng() % 3]);
        for (Layout l : {Layout::BSQ, Layout::BIL, Layout::BIP})
            expect_identical(gpu, c.to_layout(l), 4, "non-finite " + std::string(layout_name(l)) + " seed " + std::to_string(seed));
        // Every pixel invalid: the same error on both backends.
        Cube dead(5, 4, 2, t);
        for (int p = 0; p < 20; ++p) dead.set_value(p % 5, p / 5, p % 2, NAN);
        EXPECT_THROW(pca_fit(gpu, dead, {.components = 1}), InvalidInput);
    }
    for (Layout l : {Layout::BIL, Layout::BIP})
        expect_identical(gpu, correlated_cube(40, 30, 7, DType::U8, 3, l), 7, "u8 " + std::string(layout_name(l)));
}

// The u8 partials are u32 (__dp4a), bounded by slices of at most 65536 pixels: a cube large enough
// that the slices reach that limit.
TEST(PcaGpu, LargeU8CubeAtTheSliceLimit) {
    REQUIRE_GPU();
    Cube c(6000, 6000, 2, DType::U8);
    std::uint8_t* v = c.data<std::uint8_t>();
    for (std::size_t i = 0; i < c.num_elements(); ++i) v[i] = std::uint8_t(255 - (i * 2654435761u >> 13) % 7);  // near 255
    expect_identical(gpu, c, 2, "u8 near 255");
}

TEST(PcaGpu, BadArguments) {
    REQUIRE_GPU();
    const Cube cube = testing::random_cube(8, 6, 4, DType::U16, 1, 0, 1000);
    EXPECT_THROW(pca_fit(gpu, cube, {.components = 5}), InvalidInput);
    const DeviceCube bip = DeviceCube::upload(gpu, cube.to_layout(Layout::BIP));
    EXPECT_THROW(detail::pca_fit_device(gpu, bip, 2), InvalidInput);
    const DeviceCube bsq = DeviceCube::upload(gpu, cube);
    EXPECT_THROW(detail::pca_fit_device(gpu, bsq, 0), InvalidInput);
    const PcaModel m = pca_fit(cpu_context(), testing::random_cube(8, 6, 3, DType::U16, 1, 0, 1000), {.components = 2});
    DeviceBuffer out(gpu, 2 * 48 * sizeof(double));
    EXPECT_THROW(detail::pca_transform_device(gpu, bsq, m, static_cast<double*>(out.data())), InvalidInput);
    EXPECT_THROW(detail::pca_fit_device(cpu_context(), bsq, 2), InvalidInput);
}

// Every hyperspectral cube of the shared data, plus the embedded scene.
TEST(PcaGpu, RealScenesMatchCpuBitForBit) {
    REQUIRE_GPU();
    const auto scenes = testing::hyperspectral_scenes();
    for (const testing::SceneFile& s : scenes) {
        const Cube scene = read_cube(s.path, {.var = s.var});
        expect_identical(gpu, scene, std::min(scene.bands(), 10), s.path.string());
    }
    RecordProperty("scenes_compared", int(scenes.size()));
}

// Pavia Centre's size (1096×715×102 u8): identical to the CPU, and the device times (informative;
// targets on an H100: fit ≲ 1 ms for the device sums, transform with k = 3 ≲ 0.2 ms).
TEST(PcaGpu, PaviaSizedU8CubeTimings) {
    REQUIRE_GPU();
    const Cube cube = correlated_cube(1096, 715, 102, DType::U8, 21);
    const DeviceCube d_cube = DeviceCube::upload(gpu, cube);
    DeviceBuffer d_out(gpu, std::size_t(3) * cube.shape().num_pixels() * sizeof(double));
    PcaModel model;
    double fit_ms = 1e30, transform_ms = 1e30;
    for (int rep = 0; rep < 5; ++rep) {  // the first run includes one-time costs
        auto t0 = std::chrono::steady_clock::now();
        model = detail::pca_fit_device(gpu, d_cube, 3);
        fit_ms = std::min(fit_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        t0 = std::chrono::steady_clock::now();
        detail::pca_transform_device(gpu, d_cube, model, static_cast<double*>(d_out.data()));
        gpu.synchronize();
        transform_ms = std::min(transform_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::cerr << "pca 1096x715x102 u8 on " << gpu.device_name() << ": fit " << fit_ms
              << " ms (device sums + host eigensolve), transform k=3 " << transform_ms << " ms\n";
    RecordProperty("fit_ms", std::to_string(fit_ms));
    RecordProperty("transform_ms", std::to_string(transform_ms));
    const PcaResult cpu = pca(cpu_context(), cube, {.components = 3});
    EXPECT_TRUE(models_identical(cpu.model, model));
    Cube scores(cube.width(), cube.height(), 3, DType::F64);
    d_out.download(gpu, scores.bytes(), scores.num_bytes());
    EXPECT_TRUE(cubes_identical(cpu.scores, scores));
}

// A window of a device BSQ cube and a device BIP cube (each reordered once on the device), scores
// into a window of a larger device cube and into a band range of a BIP device cube (written
// through one device copy): the CPU's model and scores of the owned cube, bit for bit.
TEST(PcaGpu, DeviceWindowBipCubeAndStridedScores) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (DType t : {DType::U8, DType::I32, DType::F32}) {
        SCOPED_TRACE(std::string(dtype_name(t)));
        const Cube owned = correlated_cube(53, 29, 6, t, seed);
        const PcaResult expected = pca(cpu_context(), owned, {.components = 3});
        double lo = 0, hi = 0;
        pca_test::type_range(t, lo, hi);
        const edges_views::DeviceWindow window = edges_views::device_window(gpu, owned, Layout::BSQ, seed, lo, hi);
        const DeviceCube bip = DeviceCube::from_view(gpu, owned, Layout::BIP);
        for (const CubeView& in : {window.view, bip.view()}) {
            PcaModel refit;
            const PcaResult r = gpu_public_into(gpu, in, 3, refit);
            EXPECT_TRUE(models_identical(expected.model, r.model));
            EXPECT_TRUE(models_identical(expected.model, refit));
            EXPECT_TRUE(cubes_identical(expected.scores, r.scores));
            EXPECT_TRUE(cubes_identical(expected.scores, pca_transform(gpu, in, expected.model)));
        }
        DeviceCube big = edges_views::poisoned(gpu, {60, 33, 3, DType::F64, Layout::BSQ});
        pca_transform_into(gpu, window.view, expected.model, big.mutable_view().window(2, 1, 53, 29));
        const Cube big_host = big.download(gpu);
        EXPECT_TRUE(cubes_identical(expected.scores, Cube::from_view(big_host.view().window(2, 1, 53, 29), Layout::BSQ)));
        EXPECT_TRUE(std::isnan(big_host.at<double>(0, 0, 0)));  // outside the window: untouched
        DeviceCube bip_scores = edges_views::poisoned(gpu, {53, 29, 4, DType::F64, Layout::BIP});
        (void)pca_into(gpu, bip, bip_scores.mutable_view().band_range(1, 3), {.components = 3});
        const Cube bip_host = bip_scores.download(gpu);
        EXPECT_TRUE(cubes_identical(expected.scores, Cube::from_view(bip_host.view().band_range(1, 3), Layout::BSQ)));
    }
    Cube host_scores(53, 29, 3, DType::F64);
    const DeviceCube d = DeviceCube::upload(gpu, correlated_cube(53, 29, 6, DType::U8, seed));
    EXPECT_THROW(pca_into(gpu, d, host_scores, {.components = 3}), InvalidInput);  // host output, CUDA context
}

}  // namespace
}  // namespace cubekit
