// Classical detectors: CUDA backend against the CPU reference (issue 15: GPU scores equal the CPU's
// f64 reference within 1e-6 relative for f64 statistics). Every test skips, saying so, where no
// CUDA device exists; scripts/gpu-check runs them on the H100.
//
// Exactness: the statistics come from the PCA family's exact integer sums (identical on both
// backends) and one host eigensolve, and the kernels add in the CPU's order without contraction,
// so f64 scores are expected bit-identical; the test allows 1e-6 relative to the score scale (the
// contract) and reports the worst difference. f32 whitening: 1e-5 of the scale.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <random>

#include "cubekit/detect_classical.hpp"
#include "cubekit/io.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;

// Largest |a − e| over max |e| (NaN must match NaN: counted as infinite error otherwise).
double scaled_error(const Cube& expected, const Cube& actual) {
    double scale = 0, worst = 0;
    for (int y = 0; y < expected.height(); ++y)
        for (int x = 0; x < expected.width(); ++x) scale = std::max(scale, std::fabs(expected.value(x, y, 0)));
    for (int y = 0; y < expected.height(); ++y)
        for (int x = 0; x < expected.width(); ++x) {
            const double e = expected.value(x, y, 0), a = actual.value(x, y, 0);
            if (std::isnan(e) != std::isnan(a)) return INFINITY;
            if (!std::isnan(e)) worst = std::max(worst, std::fabs(a - e));
        }
    return scale > 0 ? worst / scale : worst;
}

Cube correlated(int W, int H, int B, std::uint64_t seed, DType t) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> g(0, 1);
    Cube c(W, H, B, DType::F64, Layout::BIP);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const double common = g(rng);
            for (int b = 0; b < B; ++b) c.at<double>(x, y, b) = 500 + 100 * common + 20 * g(rng) + 3 * b;
        }
    return c.to_dtype(t);
}

// GPU through apply_detector_into with a poisoned device output, so an unwritten pixel shows.
Cube gpu_apply(const Context& gpu, const Cube& cube, const BackgroundStats& s, const ClassicalOptions& o,
               const std::vector<double>& t) {
    const DeviceCube d_cube = DeviceCube::upload(gpu, cube);
    DeviceCube d_out(gpu, CubeShape{cube.width(), cube.height(), 1, o.out_type, Layout::BSQ});
    d_out.buffer().fill_bytes(gpu, 0xFF);
    apply_detector_into(gpu, d_cube, s, o, t, d_out);
    return d_out.download(gpu);
}

void compare_all(const Context& gpu, const Cube& cube, const std::string& what) {
    std::vector<double> t(std::size_t(cube.bands()));
    for (int b = 0; b < cube.bands(); ++b) t[std::size_t(b)] = cube.value(cube.width() / 2, cube.height() / 3, b);
    const BackgroundStats cs = fit_background(cpu_context(), cube), gs = fit_background(gpu, cube);
    ASSERT_EQ(cs.kept, gs.kept) << what;
    ASSERT_EQ(cs.mean, gs.mean) << what << ": the exact sums differ";
    ASSERT_EQ(cs.covariance, gs.covariance) << what << ": the exact sums differ";
    for (Detector d : {Detector::Rx, Detector::Mf, Detector::Ace, Detector::Cem, Detector::Sam})
        for (Precision p : {Precision::F64, Precision::F32}) {
            const ClassicalOptions o{.detector = d, .precision = p};
            const Cube want = apply_detector(cpu_context(), cube, cs, o, t);
            const double err = scaled_error(want, gpu_apply(gpu, cube, gs, o, t));
            std::cout << what << " " << enum_name(d) << " " << enum_name(p) << ": max error " << err << " of the scale\n";
            EXPECT_LE(err, p == Precision::F64 ? 1e-6 : 1e-5) << what << " " << enum_name(d);
        }
}

TEST(ClassicalGpu, GlobalDetectorsMatchCpuOnRandomData) {
    REQUIRE_GPU();
    const struct { int w, h, b; DType t; } shapes[] = {
        {1, 1, 1, DType::F32}, {7, 5, 3, DType::U16}, {61, 37, 17, DType::F32}, {130, 65, 64, DType::I16},
        {97, 101, 200, DType::F32}};
    for (const auto& s : shapes) {
        Cube c = correlated(s.w, s.h, s.b, 7 + s.b, s.t);
        if (s.w * s.h == 1) continue;  // one pixel: no covariance to invert (checked on the CPU side)
        compare_all(gpu, c, std::to_string(s.w) + "x" + std::to_string(s.h) + "x" + std::to_string(s.b));
    }
}

TEST(ClassicalGpu, ScreeningOnDeviceViews) {
    REQUIRE_GPU();
    Cube c = correlated(33, 21, 8, 3, DType::F32);
    for (int y = 0; y < 21; ++y)
        for (int x = 0; x < 33; ++x) c.at<float>(x, y, 2) = 0, c.at<float>(x, y, 5) = 4;
    c.at<float>(3, 3, 6) = NAN;
    const DeviceCube d = DeviceCube::upload(gpu, c);
    const BackgroundStats g = screen_bands(gpu, d), h = screen_bands(cpu_context(), c);
    EXPECT_EQ(g.kept, h.kept);
    EXPECT_EQ(g.kept, (std::vector<int>{0, 1, 3, 4, 7}));
    EXPECT_EQ(scaled_error(detect_classical(cpu_context(), c).score, detect_classical(gpu, d).score), 0.0);
}

TEST(ClassicalGpu, LocalRxMatchesCpu) {
    REQUIRE_GPU();
    // 240 bands: the matrix no longer fits shared memory and lives in a global workspace.
    for (const auto& [w, h, b, inner, outer] :
         {std::array{19, 23, 5, 3, 7}, std::array{40, 31, 30, 5, 11}, std::array{20, 18, 240, 3, 17}}) {
        const Cube c = correlated(w, h, b, 99, DType::F32);
        const ClassicalOptions o{.window = {double(inner), double(outer)}};
        LocalRxReport rc, rg;
        const Cube want = local_rx(cpu_context(), c, o, &rc);
        const Cube got = local_rx(gpu, c, o, &rg);
        EXPECT_EQ(rc.singular, rg.singular);
        const double err = scaled_error(want, got);
        std::cout << "local rx " << w << "x" << h << "x" << b << ": max error " << err << "\n";
        EXPECT_LE(err, 1e-6);
    }
}

TEST(ClassicalGpu, RealScenesMatchCpu) {
    REQUIRE_GPU();
    int seen = 0;
    for (const char* name : {"anomaly_abu/abu-airport-2.mat", "anomaly_abu/abu-beach-3.mat", "target_detection/Sandiego.mat",
                             "target_detection/HYDICE.mat"}) {
        const auto path = testing::shared_data_path(name);
        if (!path) continue;
        ++seen;
        const Cube c = read_cube(*path, {.var = "data"});
        compare_all(gpu, c, name);
        if (std::string(name).find("airport") != std::string::npos) {  // the local windows of the issue: (5, 21)
            const ClassicalOptions o{.window = {5, 21}};
            const Cube crop = c.crop(0, 0, 40, 40);
            const double err = scaled_error(local_rx(cpu_context(), crop, o), local_rx(gpu, crop, o));
            std::cout << name << " local rx (5,21) on 40x40: max error " << err << "\n";
            EXPECT_LE(err, 1e-6);
        }
    }
    if (seen == 0) GTEST_SKIP() << "no scene of ../shared/data/anomaly_abu or target_detection";
}

// Not a check: the timings quoted in the report (run with --gtest_also_run_disabled_tests).
TEST(ClassicalGpu, DISABLED_Timings) {
    REQUIRE_GPU();
    const auto ms = [&](auto&& f) {
        f();  // warm-up
        gpu.synchronize();
        const auto t0 = std::chrono::steady_clock::now();
        f();
        gpu.synchronize();
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };
    const DeviceCube big = DeviceCube::upload(gpu, correlated(1024, 1024, 200, 1, DType::F32).to_layout(Layout::BSQ));
    DeviceCube out(gpu, CubeShape{1024, 1024, 1, DType::F64, Layout::BSQ});
    BackgroundStats s;
    std::cout << "global RX 1024x1024x200 f32: fit " << ms([&] { s = fit_background(gpu, big); }) << " ms";
    std::cout << ", apply f64 " << ms([&] { apply_detector_into(gpu, big, s, {}, {}, out); }) << " ms";
    std::cout << ", apply sam (gather + one dot) "
              << ms([&] { apply_detector_into(gpu, big, s, {.detector = Detector::Sam}, std::vector<double>(200, 1.0), out); })
              << " ms, screening " << ms([&] { screen_bands(gpu, big); }) << " ms";
    std::cout << ", apply f32 whitening "
              << ms([&] { apply_detector_into(gpu, big, s, {.precision = Precision::F32}, {}, out); }) << " ms\n";
    const DeviceCube small = DeviceCube::upload(gpu, correlated(100, 100, 205, 2, DType::F32).to_layout(Layout::BSQ));
    DeviceCube out2(gpu, CubeShape{100, 100, 1, DType::F64, Layout::BSQ});
    std::cout << "local RX 100x100x205 (5,21): "
              << ms([&] { local_rx_into(gpu, small, {.window = {5, 21}}, out2); }) << " ms\n";
}

}  // namespace
}  // namespace cubekit
