// Multi-resolution detection: CUDA against the CPU reference (spec detect.md §B.6). Skips without a
// device. Window lists and flags must be identical (f64 sums in the same order, no contraction);
// y1 and y2 within 1e-12 (CUDA's tanh and glibc's may differ in the last ulp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "cubekit/detect.hpp"
#include "cubekit/io.hpp"
#include "detect_testing.hpp"
#include "multires_testing.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;

// CPU against CUDA: y1 and y2 within 1e-12 (CUDA's tanh and glibc's may differ in the last ulp).
void expect_same(const MultiresResult& cpu, const MultiresResult& gpu) { testing::expect_same_search(cpu, gpu, 1e-12); }

// A model whose windows split about half the time on uniform samples in [0, scale] (σ ≈ 0.2887·scale).
MultiresModel splitting_model(int bands, double scale) {
    MultiresModel m = testing::step_multires(bands, 0.2 * scale, 0.2887 * scale);
    m.ann1.W1[0] = 1000 / scale;
    m.ann2.W1[0] = 1000 / scale;
    m.ann1.b1[0] = -1000 * 0.2;
    m.ann2.b1[0] = -1000 * 0.2887;
    return m;
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
        const MultiresModel m = splitting_model(9, scale);
        for (bool keep : {true, false}) {
            const MultiresResult cpu = detect_multires(cpu_context(), cube, m, {.keep_min_level = keep, .trace = true});
            const MultiresResult g = detect_multires(gpu, DeviceCube::upload(gpu, cube), m, {.keep_min_level = keep, .trace = true});
            expect_same(cpu, g);
        }
    }
}

// The 4-band vector sums (bands a multiple of 4, aligned pixels), their scalar fallback for a
// misaligned band window, trees of one node, odd grids and coarser minimum windows: the descent
// that evaluates every node and keeps those whose ancestors all split must list the CPU's windows.
TEST(DetectMultiresGpu, VectorSumsTinyTreesAndCoarseMinimaMatchTheCpu) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(seed);
    struct Shape {
        int w, h, b;
    };
    for (DType t : {DType::F32, DType::U16, DType::U8})
        for (Shape s : {Shape{203, 77, 8}, Shape{1, 1, 4}, Shape{9, 17, 12}, Shape{130, 64, 4}}) {
            const double scale = t == DType::F32 ? 1 : t == DType::U16 ? 4000 : 255;
            const Cube cube = testing::random_cube(s.w, s.h, s.b, t, seed + s.w, 0, scale, Layout::BIP);
            const DeviceCube d = DeviceCube::upload(gpu, cube);
            for (int min_window : {8, 16, 32})
                for (bool keep : {true, false}) {
                    SCOPED_TRACE(std::to_string(s.w) + "x" + std::to_string(s.h) + "x" + std::to_string(s.b) + " " +
                                 std::string(dtype_name(t)) + " min_window " + std::to_string(min_window));
                    MultiresModel m = splitting_model(s.b, scale);
                    m.min_window = min_window;
                    const MultiresOptions o{.keep_min_level = keep, .trace = true};
                    expect_same(detect_multires(cpu_context(), cube, m, o), detect_multires(gpu, d, m, o));
                }
        }
    // Band windows of a 12-band BIP cube: starting at band 1 the pixels' runs are not 16-byte
    // aligned (scalar sums), at band 4 they are (vector sums).
    const Cube cube = testing::random_cube(150, 90, 12, DType::F32, seed, 0, 1, Layout::BIP);
    const DeviceCube d = DeviceCube::upload(gpu, cube);
    for (int first : {1, 4}) {
        SCOPED_TRACE("bands from " + std::to_string(first));
        const MultiresModel m = splitting_model(8, 1);
        const MultiresOptions o{.trace = true};
        const CubeView host = cube.view().band_range(first, 8), device = d.view().band_range(first, 8);
        expect_same(detect_multires(cpu_context(), host, m, o), detect_multires(gpu, device, m, o));
        for (int level = 0; level <= 2; ++level) {  // the sums themselves, whatever the windows
            std::vector<std::int64_t> nc, ng;
            const std::vector<double> c = window_features(cpu_context(), host, 8, level, &nc);
            const std::vector<double> g = window_features(gpu, device, 8, level, &ng);
            EXPECT_EQ(nc, ng);
            ASSERT_EQ(c, g) << "level " << level;
        }
    }
}

// A dense random network (every weight nonzero), normalised over [0, 0.6] and read on a logsig
// output, so the hidden chains run over every band.
MlpModel dense_net(int bands, int hidden, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> u(-1, 1);
    MlpModel n;
    n.inputs = bands;
    n.hidden = hidden;
    for (int e = 0; e < hidden * bands; ++e) n.W1.push_back(u(rng));
    for (int i = 0; i < hidden; ++i) {
        n.b1.push_back(u(rng));
        n.w2.push_back(u(rng));
    }
    n.b2 = u(rng);
    n.output_act = Activation::Logsig;
    n.in_min.assign(std::size_t(bands), 0.0);
    n.in_max.assign(std::size_t(bands), 0.6);
    return n;
}

// A threshold near the q-quantile of the windows' y (NaN left out): midway between two outputs at
// least 1e-9 apart, so that no window's y lies within the backends' 1e-12 of it (CUDA's tanh and
// exp may differ from glibc's in the last ulp).
double threshold_near(const std::vector<Window>& windows, double Window::*y, double q) {
    std::vector<double> v;
    for (const Window& w : windows)
        if (!std::isnan(w.*y)) v.push_back(w.*y);
    std::sort(v.begin(), v.end());
    for (std::size_t k = std::size_t(q * double(v.size() - 1)); k + 1 < v.size(); ++k)
        if (v[k + 1] - v[k] > 1e-9) return (v[k] + v[k + 1]) / 2;
    return v.empty() ? 0 : v.back() + 1;
}

// Dense networks of 7 neurons (4 nodes share a warp) and 40 (one node, lanes over the neurons):
// first with thresholds that split every window, so every node of every level is evaluated and
// traced; then with thresholds at quantiles of those outputs, for a mix of outcomes.
TEST(DetectMultiresGpu, DenseNetworksOverTheWholeTreeMatchTheCpu) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    const Cube cube = testing::random_cube(181, 93, 20, DType::F32, seed, 0, 1, Layout::BIP);
    const DeviceCube d = DeviceCube::upload(gpu, cube);
    for (int hidden : {7, 40}) {
        SCOPED_TRACE("hidden " + std::to_string(hidden));
        MultiresModel m;
        m.ann1 = dense_net(20, hidden, rng);
        m.ann2 = dense_net(20, hidden == 7 ? 3 : hidden, rng);
        m.ann1.threshold = -1e300;
        m.ann2.threshold = 1e300;
        const MultiresOptions o{.trace = true};
        const MultiresResult all = detect_multires(cpu_context(), cube, m, o);
        std::size_t nodes = 0;
        for (int l = 0; l <= multires_top_level(181, 93, 8); ++l) nodes += std::size_t((181 + (8 << l) - 1) / (8 << l)) * ((93 + (8 << l) - 1) / (8 << l));
        EXPECT_EQ(all.trace.size(), nodes);
        expect_same(all, detect_multires(gpu, d, m, o));
        m.ann1.threshold = threshold_near(all.trace, &Window::y1, 0.3);
        m.ann2.threshold = threshold_near(all.trace, &Window::y2, 0.8);
        const MultiresResult mixed = detect_multires(cpu_context(), cube, m, o);
        expect_same(mixed, detect_multires(gpu, d, m, o));
        std::cout << "hidden " << hidden << ": " << mixed.trace.size() << " evaluated, " << mixed.detections.size()
                  << " windows\n";
    }
}

// In tiles on the device (block sums tile by tile on the workers' streams, then the device descent
// from the assembled level 0), from memory and from a file under a device budget: the whole device
// call's windows and outputs bit for bit.
TEST(DetectMultiresGpu, TiledEqualsWholeOnTheDevice) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(seed);
    Cube cube = testing::random_cube(203, 77, 8, DType::F32, seed, 0, 1, Layout::BIP);
    cube.at<float>(100, 40, 3) = std::nanf("");
    const auto dir = testing::temp_dir("multires_tiles_gpu");
    write_cube(cube, dir / "c.npy");
    const CubeFile file(dir / "c.npy");
    const MultiresModel m = testing::step_multires(8, 0.2, 0.295);
    const MultiresOptions o{.trace = true};
    const MultiresResult whole = detect_multires(gpu, cube, m, o);
    ASSERT_GT(whole.trace.size(), 5u);
    for (auto [tw, th] : std::vector<std::pair<int, int>>{{8, 8}, {40, 24}, {203, 16}}) {
        SCOPED_TRACE(::testing::Message() << "tiles " << tw << "x" << th);
        TiledRun run;
        const MultiresResult t = detect_multires_tiled(gpu, cube, m, o, {.tile_width = tw, .tile_height = th}, &run);
        EXPECT_GT(run.tiles, 1u);
        testing::expect_same_search(whole, t);
    }
    TiledRun run;
    const MultiresResult f = detect_multires_tiled(gpu, file, m, o, {.device_memory_limit = 64 << 10}, &run);
    EXPECT_GT(run.tiles, 1u);
    testing::expect_same_search(whole, f);
    expect_same(detect_multires(cpu_context(), cube, m, o), f);
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
