// RBF pixel detection: CUDA against the CPU reference (spec detect.md §A.6). Skips without a device.
//
// Tolerance: |y_gpu − y_cpu| ≤ 1e-5·(1 + m/64)·(|th| + Σ|w_i|) (the spec's): the fused and neuron
// mappings add the same f32 terms in the same order as the CPU, but CUDA's expf and glibc's may
// differ by an ulp or two; the synapse mapping sums the bands in a tree. Fused and neuron must be
// bit-identical to each other, BIP and BSQ bit-identical, and every chunk size bit-identical.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <numeric>

#include "cubekit/detect.hpp"
#include "cubekit/io.hpp"
#include "detect_testing.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;

double tolerance(const RbfnModel& m) {
    double s = std::abs(m.bias);
    for (double w : m.weights) s += std::abs(w);
    return 1e-5 * (1 + m.bands / 64.0) * s;
}

// Scores through rbfn_scores_into with a poisoned (0xFF = NaN) device output.
Cube gpu_scores(const Context& gpu, const CubeView& d_cube, const RbfnModel& m, const PixelOptions& o = {}) {
    DeviceCube out(gpu, CubeShape{d_cube.width(), d_cube.height(), 1, DType::F32, Layout::BSQ});
    out.buffer().fill_bytes(gpu, 0xFF);
    const MutableCubeView v = out.mutable_view();
    rbfn_scores_into(gpu, d_cube, std::span<const RbfnModel>(&m, 1), std::span<const MutableCubeView>(&v, 1), o);
    return out.download(gpu);
}

::testing::AssertionResult within(const Cube& cpu, const Cube& gpu, double tol) {
    std::size_t bad = 0;
    double worst = 0;
    for (std::size_t p = 0; p < cpu.num_elements(); ++p) {
        const float a = cpu.data<float>()[p], b = gpu.data<float>()[p];
        if (std::isnan(a) || std::isnan(b)) {
            bad += std::isnan(a) != std::isnan(b);
            continue;
        }
        worst = std::max(worst, double(std::abs(a - b)));
        bad += std::abs(a - b) > tol;
    }
    if (bad == 0) return ::testing::AssertionSuccess() << "worst " << worst;
    return ::testing::AssertionFailure() << bad << " scores differ by more than " << tol << " (worst " << worst << ")";
}

TEST(DetectPixelGpu, MappingsLayoutsTypesAndSizesAgreeWithTheCpu) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(seed);
    struct Case {
        int w, h, bands, hidden;
        DType dtype;
    };
    const Case cases[] = {{1, 1, 64, 4, DType::F32},  {97, 31, 64, 4, DType::F32}, {13, 7, 1, 1, DType::U8},
                          {29, 3, 300, 3, DType::U16}, {61, 17, 40, 17, DType::I16}, {37, 11, 64, 64, DType::F64},
                          {33, 9, 7, 33, DType::I32},  {64, 64, 33, 5, DType::U32},
                          // f32 BIP of 128 bands: four 32-band chunks a pixel, 8 neurons.
                          {45, 13, 128, 7, DType::F32}};
    for (const Case& c : cases) {
        SCOPED_TRACE(std::to_string(c.w) + "x" + std::to_string(c.h) + "x" + std::to_string(c.bands) + " k=" + std::to_string(c.hidden) +
                     " " + std::string(dtype_name(c.dtype)));
        const double hi = c.dtype == DType::U8 ? 255 : 1000;
        const double lo = c.dtype == DType::I16 || c.dtype == DType::F64 || c.dtype == DType::F32 ? -hi : 0;
        const Cube bip = testing::random_cube(c.w, c.h, c.bands, c.dtype, seed, lo, hi, Layout::BIP);
        const RbfnModel m = testing::random_rbfn(c.bands, c.hidden, seed + 7, lo, hi);
        const Cube cpu = detect_pixels(cpu_context(), bip, m, {.objects = false}).score;
        const DeviceCube d_bip = DeviceCube::upload(gpu, bip), d_bsq = DeviceCube::upload(gpu, bip.to_layout(Layout::BSQ));
        const Cube fused = gpu_scores(gpu, d_bip, m);
        EXPECT_TRUE(within(cpu, fused, tolerance(m)));
        EXPECT_TRUE(testing::cubes_identical(fused, gpu_scores(gpu, d_bsq, m)));
        EXPECT_TRUE(testing::cubes_identical(fused, gpu_scores(gpu, d_bip, m, {.mapping = RbfnMapping::Neuron})));
        EXPECT_TRUE(within(cpu, gpu_scores(gpu, d_bsq, m, {.mapping = RbfnMapping::Synapse}), tolerance(m)));
        for (std::int64_t chunk : {1, 16, 1000})
            EXPECT_TRUE(testing::cubes_identical(fused, gpu_scores(gpu, d_bip, m, {.chunk_pixels = chunk})));
        // A window of the device cube, read where it is.
        if (c.w > 4 && c.h > 2) {
            const Cube win_cpu = detect_pixels(cpu_context(), bip.view().window(2, 1, c.w - 4, c.h - 2), m, {.objects = false}).score;
            EXPECT_TRUE(within(win_cpu, gpu_scores(gpu, d_bip.view().window(2, 1, c.w - 4, c.h - 2), m), tolerance(m)));
        }
    }
}

TEST(DetectPixelGpu, SeveralModelsAndTransformsInOnePass) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(seed);
    const Cube cube = testing::random_cube(70, 40, 24, DType::F32, seed, 0, 1, Layout::BIP);
    std::vector<RbfnModel> models{testing::random_rbfn(24, 4, seed), testing::random_rbfn(24, 40, seed + 1),
                                  testing::random_rbfn(24, 2, seed + 2)};
    models[1].input_gain.assign(24, 1.5);
    models[1].input_offset.assign(24, 0.25);
    const std::vector<PixelResult> cpu = detect_pixels_many(cpu_context(), cube, models);
    const std::vector<PixelResult> gpu_r = detect_pixels_many(gpu, cube, models);
    for (std::size_t j = 0; j < models.size(); ++j) {
        EXPECT_TRUE(within(cpu[j].score, gpu_r[j].score, tolerance(models[j]))) << "model " << j;
        const PixelResult one = detect_pixels(gpu, cube, models[j]);
        EXPECT_TRUE(testing::cubes_identical(one.score, gpu_r[j].score)) << "model " << j;
    }
}

TEST(DetectPixelGpu, NonFinitePixelsAndObjectsOnRealData) {
    REQUIRE_GPU();
    const auto path = testing::shared_data_path("target_detection/Sandiego.mat");
    if (!path) GTEST_SKIP() << "../shared/data/target_detection/Sandiego.mat is absent";
    Cube cube = read_cube(*path, {.var = "data"}).to_dtype(DType::F32);
    const Cube map = read_cube(*path, {.var = "map"});
    // A one-neuron model centred on the mean target spectrum (what a user would build by hand).
    RbfnModel m;
    m.bands = cube.bands();
    m.hidden = 1;
    m.centres.assign(std::size_t(cube.bands()), 0.0);
    int n = 0;
    for (int y = 0; y < cube.height(); ++y)
        for (int x = 0; x < cube.width(); ++x)
            if (map.value(x, y, 0) != 0) {
                ++n;
                for (int b = 0; b < cube.bands(); ++b) m.centres[std::size_t(b)] += cube.value(x, y, b);
            }
    for (double& c : m.centres) c /= n;
    m.sigma = {2000};
    m.weights = {1};
    m.threshold = 0.5;
    cube.at<float>(3, 4, 100) = std::nanf("");
    const PixelResult cpu = detect_pixels(cpu_context(), cube, m);
    for (Layout l : {Layout::BIP, Layout::BSQ}) {
        const DeviceCube d = DeviceCube::upload(gpu, cube.to_layout(l));
        const PixelResult g = detect_pixels(gpu, d, m);
        EXPECT_TRUE(within(cpu.score, g.score, tolerance(m)));
        EXPECT_TRUE(std::isnan(g.score.at<float>(3, 4, 0)));
        std::size_t near = 0;
        for (std::size_t p = 0; p < cpu.score.num_elements(); ++p)
            near += std::abs(cpu.score.data<float>()[p] - 0.5f) <= tolerance(m);
        std::cout << "pixels within tol of the threshold: " << near << "; objects " << cpu.objects.size() << "\n";
        if (near == 0) {
            EXPECT_TRUE(testing::cubes_identical(cpu.labels, g.labels));
            ASSERT_EQ(cpu.objects.size(), g.objects.size());
            for (std::size_t i = 0; i < cpu.objects.size(); ++i) {
                EXPECT_EQ(cpu.objects[i].area, g.objects[i].area);
                EXPECT_EQ(cpu.objects[i].x0, g.objects[i].x0);
                EXPECT_EQ(cpu.objects[i].peak_x, g.objects[i].peak_x);
            }
        }
        EXPECT_GT(cpu.objects.size(), 0u);
    }
}

}  // namespace
}  // namespace cubekit
