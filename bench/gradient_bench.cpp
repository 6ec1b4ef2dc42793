// RCMG benchmark (spec gradient-watershed.md A4; issue: foundation). Times the CUDA kernels from
// the cube resident on the device in its stored type to the gradient on the device: median of
// kRuns CUDA-event timings after kWarmup runs. The cube is the embedded Samson scene tiled
// (mirrored at the seams) to the Pavia University size, 610×340×103, and to 4× that (1220×680).
//
// Floor: the cube must be read once and the gradient written once: bytes / 3.0 TB/s (the H100's
// measured copy bandwidth). Compute (f64, no FMA): 3 FP64 operations per distinct neighbour pair,
// 12 (8-conn) or 6 (4-conn) per pixel per band, at 64 FP64 ops/clk/SM.
//
// Usage: gradient_bench [--out FILE.md] [--write-cube FILE.npy] [--cpu]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "cubekit/gradient.hpp"
#include "cubekit/io.hpp"
#include "bench_common.hpp"

#ifdef CUBEKIT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

using namespace cubekit;
using cubekit::bench::tile_scene;

namespace {

constexpr int kWarmup = 5;
constexpr int kRuns = 30;
constexpr double kCopyBandwidth = 3.0e12;  // bytes/s, H100 device-to-device copy (read + write)

struct Case {
    const char* name;
    int connectivity;
    Precision precision;
    RcmgPartition partition;
};

}  // namespace

int main(int argc, char** argv) {
    std::string out_path, cube_path;
    bool run_cpu = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!std::strcmp(argv[i], "--write-cube") && i + 1 < argc) cube_path = argv[++i];
        else if (!std::strcmp(argv[i], "--cpu")) run_cpu = true;
        else {
            std::fprintf(stderr, "usage: gradient_bench [--out FILE.md] [--write-cube FILE.npy] [--cpu]\n");
            return 2;
        }
    }
    const Cube scene = read_cube(std::string(CUBEKIT_SOURCE_DIR) + "/data/samson/samson_1.img");
    const Cube pavia_f32 = tile_scene(scene, 610, 340, 103, DType::F32);
    if (!cube_path.empty()) write_cube(pavia_f32.to_layout(Layout::BIP), cube_path);  // (H, W, B) for the peers

    std::vector<std::string> lines;
    auto emit = [&](const std::string& line) {
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
        lines.push_back(line);
    };
#ifdef CUBEKIT_HAVE_CUDA
    if (Context::cuda_device_count() == 0) {
        std::fprintf(stderr, "gradient_bench: no CUDA device\n");
        return 4;
    }
    const Context gpu({.backend = Backend::Cuda});
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, gpu.device());
    emit("# RCMG benchmark on " + gpu.device_name());
    emit("");
    emit("Cube: the embedded Samson scene (95×95×156 i16) mirror-tiled to the stated size, first 103 bands, stored as the "
         "stated type, BSQ, resident on the device. Time: median of " + std::to_string(kRuns) + " CUDA-event runs after " +
         std::to_string(kWarmup) + " warm-ups, cube on device → gradient (f32) on device. Floor: (cube bytes + output "
         "bytes) / 3.0 TB/s.");
    emit("");
    emit("| size | type | conn | precision | kernel | MB moved | floor ms | median ms | min ms | % of floor | GB/s |");
    emit("|---|---|---|---|---|---|---|---|---|---|---|");
    const Case cases[] = {
        {"default", 8, Precision::F64, RcmgPartition::Auto},       {"seed", 4, Precision::F32, RcmgPartition::Auto},
        {"", 4, Precision::F64, RcmgPartition::Auto},              {"", 8, Precision::F32, RcmgPartition::Auto},
        {"", 8, Precision::F64, RcmgPartition::Spectral},          {"", 4, Precision::F32, RcmgPartition::Spectral},
        {"", 8, Precision::F64, RcmgPartition::Spatial},           {"", 4, Precision::F32, RcmgPartition::Spatial},
    };
    struct Size { int w, h; };
    for (Size size : {Size{610, 340}, Size{1220, 680}}) {
        for (int data = 0; data < 3; ++data) {
            // The tiled scene is integer-valued (Samson's counts): the shared-pairs kernel fuses its
            // squares there (exact). data 2 scales it by 0.37 and shifts it by 0.013 (fractional: unfused).
            const DType dtype = data == 1 ? DType::I16 : DType::F32;
            const bool fractional = data == 2;
            Cube host = tile_scene(scene, size.w, size.h, 103, dtype);
            if (fractional)
                for (std::size_t i = 0; i < host.num_elements(); ++i) host.data<float>()[i] = host.data<float>()[i] * 0.37f + 0.013f;
            const DeviceCube d_cube = DeviceCube::upload(gpu, host);
            DeviceCube d_out(gpu, CubeShape{size.w, size.h, 1, DType::F32, Layout::BSQ});
            for (const Case& c : cases) {
                if ((dtype == DType::I16 || fractional) && c.partition != RcmgPartition::Auto) continue;
                if (size.w > 610 && c.partition == RcmgPartition::Spatial) continue;
                const RcmgOptions options{.connectivity = c.connectivity, .reject = 1, .precision = c.precision, .partition = c.partition};
                cudaStream_t stream = static_cast<cudaStream_t>(gpu.cuda_stream());
                cudaEvent_t start, stop;
                cudaEventCreate(&start);
                cudaEventCreate(&stop);
                for (int i = 0; i < kWarmup; ++i) rcmg_into(gpu, d_cube, d_out, options);
                std::vector<float> ms;
                for (int i = 0; i < kRuns; ++i) {
                    cudaEventRecord(start, stream);
                    rcmg_into(gpu, d_cube, d_out, options);
                    cudaEventRecord(stop, stream);
                    cudaEventSynchronize(stop);
                    float t = 0;
                    cudaEventElapsedTime(&t, start, stop);
                    ms.push_back(t);
                }
                cudaEventDestroy(start);
                cudaEventDestroy(stop);
                gpu.synchronize();
                std::sort(ms.begin(), ms.end());
                const double median = ms[ms.size() / 2], best = ms.front();
                const double bytes = double(host.num_bytes()) + double(size.w) * size.h * 4.0;
                const double floor_ms = bytes / kCopyBandwidth * 1e3;
                char line[512];
                std::snprintf(line, sizeof line, "| %dx%dx103 | %s%s | %d | %s | %s%s | %.1f | %.4f | %.4f | %.4f | %.0f%% | %.0f |",
                              size.w, size.h, std::string(dtype_name(dtype)).c_str(), fractional ? " fractional" : "", c.connectivity,
                              std::string(precision_name(c.precision)).c_str(),
                              std::string(rcmg_implementation(gpu, options)).c_str(), *c.name ? (std::string(" (") + c.name + ")").c_str() : "",
                              bytes / 1e6, floor_ms, median, best, 100.0 * floor_ms / median, bytes / (median * 1e-3) / 1e9);
                emit(line);
            }
        }
    }
#else
    emit("gradient_bench: built without CUDA; GPU rows skipped");
#endif
    if (run_cpu) {
        const Context cpu({.backend = Backend::Cpu});
        for (int c : {8, 4}) {
            const auto t0 = std::chrono::steady_clock::now();
            const Cube g = rcmg(cpu, pavia_f32, {.connectivity = c, .precision = c == 8 ? Precision::F64 : Precision::F32});
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            char line[256];
            std::snprintf(line, sizeof line, "cpu reference (%s, %d threads): 610x340x103 f32 %d-conn %s: %.1f ms (one run)",
                          cpu.device_name().c_str(), cpu.threads(), c, c == 8 ? "f64" : "f32", ms);
            emit(line);
        }
    }
    if (!out_path.empty()) {
        std::ofstream f(out_path);
        for (const std::string& l : lines) f << l << "\n";
    }
    return 0;
}
