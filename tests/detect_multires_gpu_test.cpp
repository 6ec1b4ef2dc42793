// Multi-resolution detection: CUDA against the CPU reference (spec detect.md §B.6). Skips without a
// device. Window lists and flags must be identical (f64 sums in the same order, no contraction);
// y1 and y2 within 1e-12 (CUDA's tanh and glibc's may differ in the last ulp).
#include <gtest/gtest.h>

#include <cmath>

#include "cubekit/detect.hpp"
#include "cubekit/io.hpp"
#include "detect_testing.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;

void expect_same_windows(const std::vector<Window>& a, const std::vector<Window>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].x0, b[i].x0);
        EXPECT_EQ(a[i].y0, b[i].y0);
        EXPECT_EQ(a[i].width, b[i].width);
        EXPECT_EQ(a[i].height, b[i].height);
        EXPECT_EQ(a[i].level, b[i].level);
        EXPECT_EQ(a[i].at_min_scale, b[i].at_min_scale);
        EXPECT_EQ(a[i].outcome, b[i].outcome);
        EXPECT_NEAR(a[i].y1, b[i].y1, 1e-12);
        if (std::isnan(a[i].y2)) EXPECT_TRUE(std::isnan(b[i].y2));
        else EXPECT_NEAR(a[i].y2, b[i].y2, 1e-12);
    }
}

void expect_same(const MultiresResult& cpu, const MultiresResult& gpu) {
    expect_same_windows(cpu.detections, gpu.detections);
    expect_same_windows(cpu.trace, gpu.trace);
    ASSERT_EQ(cpu.levels.size(), gpu.levels.size());
    for (std::size_t i = 0; i < cpu.levels.size(); ++i) {
        EXPECT_EQ(cpu.levels[i].evaluated, gpu.levels[i].evaluated);
        EXPECT_EQ(cpu.levels[i].positive, gpu.levels[i].positive);
        EXPECT_EQ(cpu.levels[i].accepted, gpu.levels[i].accepted);
        EXPECT_EQ(cpu.levels[i].split, gpu.levels[i].split);
    }
    EXPECT_EQ(cpu.skipped_samples, gpu.skipped_samples);
}

TEST(DetectMultiresGpu, HandSetCasesMatchTheCpu) {
    REQUIRE_GPU();
    const Cube cases[] = {testing::square_target(128, 128, 3, 48, 48, 64, 64), testing::square_target(128, 128, 2, 56, 56, 72, 72),
                          testing::square_target(64, 64, 1, 10, 10, 12, 12), testing::square_target(1024, 256, 1, 704, 96, 768, 160)};
    for (const Cube& c : cases)
        for (Layout l : {Layout::BIP, Layout::BSQ}) {
            const Cube in = c.to_layout(l);
            const MultiresModel m = testing::step_multires(c.bands());
            const MultiresResult cpu = detect_multires(cpu_context(), in, m, {.trace = true});
            const DeviceCube d = DeviceCube::upload(gpu, in);
            expect_same(cpu, detect_multires(gpu, d, m, {.trace = true}));
            expect_same(cpu, detect_multires(gpu, in, m, {.trace = true}));  // host input, uploaded once
        }
}

TEST(DetectMultiresGpu, RandomNetworksOnRandomCubes) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(seed);
    for (DType t : {DType::F32, DType::U16, DType::F64}) {
        const Cube cube = testing::random_cube(203, 77, 9, t, seed, 0, t == DType::U16 ? 4000 : 1, Layout::BIP);
        const double scale = t == DType::U16 ? 4000 : 1;
        MultiresModel m = testing::step_multires(9, 0.2 * scale, 0.2887 * scale);
        m.ann1.W1[0] = 1000 / scale;
        m.ann2.W1[0] = 1000 / scale;
        m.ann1.b1[0] = -1000 * 0.2;
        m.ann2.b1[0] = -1000 * 0.2887;
        for (bool keep : {true, false}) {
            const MultiresResult cpu = detect_multires(cpu_context(), cube, m, {.keep_min_level = keep, .trace = true});
            const MultiresResult g = detect_multires(gpu, DeviceCube::upload(gpu, cube), m, {.keep_min_level = keep, .trace = true});
            expect_same(cpu, g);
        }
    }
}

TEST(DetectMultiresGpu, FeaturesBitIdenticalOnRealData) {
    REQUIRE_GPU();
    const auto path = testing::shared_data_path("target_detection/HYDICE.mat");
    if (!path) GTEST_SKIP() << "../shared/data/target_detection/HYDICE.mat is absent";
    Cube cube = read_cube(*path, {.var = "data"}).to_dtype(DType::F32);
    cube.at<float>(5, 6, 7) = std::nanf("");
    for (int level = 0; level <= 3; ++level) {
        std::vector<std::int64_t> nc, ng;
        const std::vector<double> c = window_features(cpu_context(), cube, 8, level, &nc);
        const std::vector<double> g = window_features(gpu, DeviceCube::upload(gpu, cube.to_layout(Layout::BIP)), 8, level, &ng);
        ASSERT_EQ(c.size(), g.size());
        EXPECT_EQ(nc, ng);
        for (std::size_t i = 0; i < c.size(); ++i)
            if (!(std::isnan(c[i]) && std::isnan(g[i]))) ASSERT_EQ(c[i], g[i]) << "level " << level << " value " << i;
    }
    // A network that reacts to the scene's contrast: the same windows on both backends.
    MultiresModel m = testing::step_multires(cube.bands(), 20, 60);
    const MultiresResult cpu = detect_multires(cpu_context(), cube, m, {.trace = true});
    expect_same(cpu, detect_multires(gpu, cube, m, {.trace = true}));
    std::cout << "HYDICE: " << cpu.detections.size() << " windows, " << cpu.trace.size() << " evaluated\n";
}

}  // namespace
}  // namespace cubekit
