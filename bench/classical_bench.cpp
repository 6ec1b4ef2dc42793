// Classical detectors benchmark (issue 15 item 8; detect_classical.hpp). Global RX & co. on a
// deterministic random 1024×1024×200 f32 cube (BSQ, on the device; pixel = 500 + 100·c + 20·u_b +
// 3b with c, u_b uniform in [-1, 1): a strongly correlated background); local RX (5, 21) on
// abu-airport-2.mat (100×100×205; $CUBEKIT_SHARED_DATA or ../shared/data) or a random cube of that
// shape. CUDA-event timings (the calls synchronise: a row is the host call's whole time), median
// and minimum of kRuns after kWarmup.
//
// Floors (H100 SXM: 67 TFLOP/s f64 tensor cores and f32 FMA, 3.0 TB/s taken for HBM3):
//   screening: one read of the cube, 839 MB → 0.28 ms.
//   fit: N·K² multiply-adds for the scatter matrix (the lower triangle only: N·K(K+1)/2 → 0.63 ms);
//        the host eigensolve (LAPACK dsyevr, 200×200: ~10–15 ms on the host) has no GPU floor here.
//   apply (RX, f64 or f32 whitening): z = W(x − μ), 2·N·r·K = 8.4e10 flops → 1.25 ms.
//   detect_classical: screening + fit + apply.
//   local RX: per pixel the window's scatter matrix, n·K(K+1) flops (n = 21² − 5² = 416 positions), and its
//        factorization, K³/3 multiply-adds, on the f64 tensor cores (67 TFLOP/s): 1e4 pixels, K = 205 → 3.5 ms.
//
// Usage: classical_bench [--out FILE.md]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "cubekit/detect_classical.hpp"
#include "cubekit/io.hpp"
#include "bench_common.hpp"

#ifdef CUBEKIT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

using namespace cubekit;

namespace {

constexpr int kWarmup = 3;
constexpr int kRuns = 20;

std::uint64_t splitmix(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
float uniform(std::uint64_t key) { return float(double(splitmix(key) >> 11) * 0x1.0p-53 * 2.0 - 1.0); }

Cube random_cube(int W, int H, int B, std::uint64_t seed) {
    Cube c(W, H, B, DType::F32, Layout::BSQ);
    float* d = c.data<float>();
    const std::int64_t plane = std::int64_t(W) * H;
#pragma omp parallel for
    for (std::int64_t p = 0; p < plane; ++p) {
        const float common = uniform(seed * 0x100000000ull + std::uint64_t(p));
        for (int b = 0; b < B; ++b)
            d[std::int64_t(b) * plane + p] =
                500 + 100 * common + 20 * uniform((seed + 1) * 0x1000000000000ull + std::uint64_t(p) * 4096 + b) + 3.0f * b;
    }
    return c;
}

std::string lines;
void emit(const std::string& s) {
    std::printf("%s\n", s.c_str());
    lines += s + "\n";
}

}  // namespace

int main(int argc, char** argv) {
    std::string out_path;
    if (!bench::parse_out_flag(argc, argv, "classical_bench", out_path)) return 2;
#ifndef CUBEKIT_HAVE_CUDA
    std::fprintf(stderr, "classical_bench: built without CUDA\n");
    return 0;
#else
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::fprintf(stderr, "classical_bench: no CUDA device\n");
        return 0;
    }
    try {
        const Context gpu({.backend = Backend::Cuda});
        const cudaStream_t stream = static_cast<cudaStream_t>(gpu.cuda_stream());
        const auto events_ms = [&](const std::function<void()>& work, float& best) {
            for (int i = 0; i < kWarmup; ++i) work();
            gpu.synchronize();
            cudaEvent_t start, stop;
            if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess)
                throw DeviceError("classical_bench: cudaEventCreate failed");
            std::vector<float> t(kRuns);
            for (float& v : t) {
                cudaEventRecord(start, stream);
                work();
                cudaEventRecord(stop, stream);
                if (cudaEventSynchronize(stop) != cudaSuccess) throw DeviceError("classical_bench: cudaEventSynchronize failed");
                cudaEventElapsedTime(&v, start, stop);
            }
            cudaEventDestroy(start);
            cudaEventDestroy(stop);
            std::sort(t.begin(), t.end());
            best = t.front();
            return double(t[t.size() / 2]);
        };
        emit("## Classical detectors (classical_bench)");
        emit("");
        emit("| workload (GPU, cube on the device) | floor ms | median ms | min ms | median / floor |");
        emit("|---|---|---|---|---|");
        // Floors are computed in seconds below; the table shows ms.
        const auto row = [&](const std::string& name, double floor_s, const std::function<void()>& work) {
            const double floor = floor_s * 1e3;
            float best = 0;
            const double median = events_ms(work, best);
            char line[512];
            std::snprintf(line, sizeof line, "| %s | %.3f | %.3f | %.3f | %.2f× |", name.c_str(), floor, median, double(best),
                          median / floor);
            emit(line);
        };

        const int W = 1024, H = 1024, B = 200;
        const DeviceCube cube = DeviceCube::upload(gpu, random_cube(W, H, B, 1));
        DeviceCube out(gpu, CubeShape{W, H, 1, DType::F64, Layout::BSQ});
        const double N = double(W) * H, flops = 67e12, bw = 3.0e12;
        const double screen_floor = N * B * 4 / bw, fit_floor = N * B * (B + 1) / flops,
                     apply_floor = 2 * N * B * B / flops;
        BackgroundStats stats = fit_background(gpu, cube);
        std::vector<double> target(static_cast<std::size_t>(B));
        for (int b = 0; b < B; ++b) target[std::size_t(b)] = 600 + 3.0 * b;
        row("screening 1024²×200 f32", screen_floor, [&] { screen_bands(gpu, cube); });
        row("fit (screening, moments, host eigensolve)", screen_floor + fit_floor, [&] { stats = fit_background(gpu, cube); });
        row("apply RX f64", apply_floor, [&] { apply_detector_into(gpu, cube, stats, {}, {}, out); });
        row("apply RX f32 whitening", apply_floor,
            [&] { apply_detector_into(gpu, cube, stats, {.precision = Precision::F32}, {}, out); });
        row("apply ACE f64", apply_floor,
            [&] { apply_detector_into(gpu, cube, stats, {.detector = Detector::Ace}, target, out); });
        row("apply MF f64 (one dot per pixel)", screen_floor,
            [&] { apply_detector_into(gpu, cube, stats, {.detector = Detector::Mf}, target, out); });
        row("detect_classical RX (whole call, scores downloaded)", screen_floor + fit_floor + apply_floor,
            [&] { detect_classical(gpu, cube, {}); });

        // Local RX (5, 21) on 100×100×205.
        Cube local;
        std::string what = "random";
        const char* env = std::getenv("CUBEKIT_SHARED_DATA");
        const std::filesystem::path shared = env ? std::filesystem::path(env) : std::filesystem::path(CUBEKIT_SOURCE_DIR) / "../shared/data";
        const auto airport = shared / "anomaly_abu/abu-airport-2.mat";
        if (std::filesystem::exists(airport)) {
            local = read_cube(airport, {.var = "data"}).to_dtype(DType::F32).to_layout(Layout::BSQ);
            what = "abu-airport-2";
        } else {
            local = random_cube(100, 100, 205, 2);
        }
        const DeviceCube d_local = DeviceCube::upload(gpu, local);
        DeviceCube local_out(gpu, CubeShape{local.width(), local.height(), 1, DType::F64, Layout::BSQ});
        const double K = local.bands(), P = double(local.width()) * local.height();
        row("local RX (5,21) " + std::to_string(local.width()) + "×" + std::to_string(local.height()) + "×" +
                std::to_string(local.bands()) + " " + what,
            P * (416.0 * K * (K + 1) + 2 * K * K * K / 3) / flops,
            [&] { local_rx_into(gpu, d_local, {.window = {5, 21}}, local_out); });
    } catch (const std::exception& e) {
        std::fprintf(stderr, "classical_bench: %s\n", e.what());
        return 1;
    }
    if (!out_path.empty()) {
        FILE* f = std::fopen(out_path.c_str(), "a");
        if (!f) {
            std::fprintf(stderr, "classical_bench: cannot write %s\n", out_path.c_str());
            return 1;
        }
        std::fputs(lines.c_str(), f);
        std::fclose(f);
    }
    return 0;
#endif
}
