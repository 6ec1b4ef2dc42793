// Shapes of the RCMG shared-pairs kernel side by side (issue 19 item 3: the default, 8-conn with
// f64 sums, on 610×340×103 f32 takes 0.18 ms against a target of 0.1). Each PairsConfig below
// (rows per thread, thread rows, bands per barrier, groups in flight, min blocks per SM) runs on
// the same device-resident cube; its output is compared bit for bit with the CPU reference and
// its median time, registers and resident blocks per SM are printed. Built with the benchmarks
// (rcmg_pairs_variants); usage: rcmg_pairs_variants [--runs N] [--warmup N] [--small (610×340 only)]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "bench_common.hpp"
#include "cubekit/gradient.hpp"
#include "cubekit/io.hpp"
#include "gradient/rcmg_kernels.cuh"

using namespace cubekit;
using cubekit::detail::Geometry;
using cubekit::detail::PairsConfig;

namespace probe {

#define PROBE_CHECK(x)                                                                      \
    do {                                                                                    \
        cudaError_t e_ = (x);                                                               \
        if (e_ != cudaSuccess) {                                                            \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            std::exit(4);                                                                   \
        }                                                                                   \
    } while (0)

int warmup = 5;

struct Result {
    double median_ms = 0, min_ms = 0;
    int registers = 0, blocks_per_sm = 0, grid = 0;
    long long differing = 0;
};

template <typename T, int N, typename Acc, typename C>
Result run_variant(const T* d_cube, float* d_out, const Geometry& g, const std::vector<float>& reference, int runs) {
    auto kernel = cubekit::detail::rcmg_shared_pairs_kernel<T, Acc, float, N, C>;
    constexpr std::size_t smem = C::template smem_bytes<N, Acc>();
    if (smem > 48 * 1024) PROBE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    Result r;
    cudaFuncAttributes attr{};
    PROBE_CHECK(cudaFuncGetAttributes(&attr, kernel));
    r.registers = attr.numRegs;
    PROBE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r.blocks_per_sm, kernel, C::kThreads, smem));
    const dim3 block(C::kThreadsX, C::kThreadsY);
    const dim3 grid(unsigned((g.width + C::kOutX - 1) / C::kOutX), unsigned((g.height + C::kOutY - 1) / C::kOutY));
    r.grid = int(grid.x * grid.y);
    cudaEvent_t start, stop;
    PROBE_CHECK(cudaEventCreate(&start));
    PROBE_CHECK(cudaEventCreate(&stop));
    std::vector<float> ms;
    PROBE_CHECK(cudaMemset(d_out, 0xff, std::size_t(g.width) * g.height * sizeof(float)));  // NaN: nothing stale passes
    for (int i = 0; i < warmup + runs; ++i) {
        PROBE_CHECK(cudaEventRecord(start));
        kernel<<<grid, block, smem>>>(d_cube, d_out, g, 1, false);
        PROBE_CHECK(cudaGetLastError());
        PROBE_CHECK(cudaEventRecord(stop));
        PROBE_CHECK(cudaEventSynchronize(stop));
        float t = 0;
        PROBE_CHECK(cudaEventElapsedTime(&t, start, stop));
        if (i >= warmup) ms.push_back(t);
    }
    PROBE_CHECK(cudaEventDestroy(start));
    PROBE_CHECK(cudaEventDestroy(stop));
    std::sort(ms.begin(), ms.end());
    r.median_ms = ms[ms.size() / 2];
    r.min_ms = ms.front();
    std::vector<float> got(reference.size());
    PROBE_CHECK(cudaMemcpy(got.data(), d_out, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < got.size(); ++i)
        if (std::memcmp(&got[i], &reference[i], sizeof(float)) != 0) ++r.differing;
    return r;
}

template <int Rows, int Cols, int ThreadsY, int Group, int Ahead, int MinBlocks>
struct Variant {
    using C = PairsConfig<Rows, Cols, ThreadsY, Group, Ahead, MinBlocks>;
    static std::string name() {
        char s[128];
        std::snprintf(s, sizeof s, "rows %d, cols %d, thread rows %d, bands/barrier %d, ahead %d, min blocks %d", Rows, Cols,
                      ThreadsY, Group, Ahead, MinBlocks);
        return s;
    }
};

template <typename T, int N, typename Acc, typename... V>
int run_all(const Cube& host, const char* data, int runs) {
    const Context cpu({.backend = Backend::Cpu});
    const Precision precision = std::is_same_v<Acc, double> ? Precision::F64 : Precision::F32;
    const Cube ref = rcmg(cpu, host, {.connectivity = N == 9 ? 8 : 4, .reject = 1, .precision = precision});
    std::vector<float> reference(ref.data<float>(), ref.data<float>() + std::size_t(host.width()) * host.height());
    T* d_cube = nullptr;
    float* d_out = nullptr;
    PROBE_CHECK(cudaMalloc(&d_cube, host.num_bytes()));
    PROBE_CHECK(cudaMalloc(&d_out, reference.size() * sizeof(float)));
    PROBE_CHECK(cudaMemcpy(d_cube, host.data<T>(), host.num_bytes(), cudaMemcpyHostToDevice));
    const Geometry g{host.width(), host.height(), host.bands(), host.width(), std::int64_t(host.width()) * host.height(),
                     host.width()};
    int failures = 0;
    auto one = [&](auto variant) {
        using Var = decltype(variant);
        const Result r = run_variant<T, N, Acc, typename Var::C>(d_cube, d_out, g, reference, runs);
        std::printf("| %dx%dx%d %s %s | %d-conn %s | %s | %d | %d | %d | %.4f | %.4f | %lld |\n", host.width(), host.height(),
                    host.bands(), std::string(dtype_name(host.dtype())).c_str(), data, N == 9 ? 8 : 4,
                    std::is_same_v<Acc, double> ? "f64" : "f32", Var::name().c_str(), r.registers, r.blocks_per_sm,
                    r.grid, r.median_ms, r.min_ms, r.differing);
        std::fflush(stdout);
        failures += r.differing != 0;
    };
    (one(V{}), ...);
    PROBE_CHECK(cudaFree(d_cube));
    PROBE_CHECK(cudaFree(d_out));
    return failures;
}

}  // namespace probe

using namespace probe;

int main(int argc, char** argv) {
    int runs = 30;
    bool small_only = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
        else if (!std::strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = std::max(0, std::atoi(argv[++i]));
        else if (!std::strcmp(argv[i], "--small")) small_only = true;
        else {
            std::fprintf(stderr, "usage: rcmg_pairs_variants [--runs N] [--warmup N] [--small]\n");
            return 2;
        }
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::fprintf(stderr, "rcmg_pairs_variants: no CUDA device\n");
        return 4;
    }
    cudaDeviceProp prop{};
    PROBE_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("# RCMG shared-pairs shapes, r = 1, on %s (%d SMs)\n\n", prop.name, prop.multiProcessorCount);
    std::printf("| cube | window, sums | shape | registers | blocks/SM | blocks | median ms | min ms | pixels differing from CPU |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|\n");
    const Cube scene = read_cube(std::string(CUBEKIT_SOURCE_DIR) + "/data/samson/samson_1.img");
    int failures = 0;
    for (auto [w, h] : {std::pair{610, 340}, std::pair{1220, 680}}) {
        if (small_only && w > 610) break;
        // The tiled scene is integer-valued (Samson's i16 counts); "fractional" scales it by 0.37 and
        // shifts it by 0.013, so that no tile takes the fused path.
        const Cube f32 = bench::tile_scene(scene, w, h, 103, DType::F32);
        Cube frac = f32.clone();
        for (std::size_t i = 0; i < frac.num_elements(); ++i) frac.data<float>()[i] = frac.data<float>()[i] * 0.37f + 0.013f;
        const Cube i16 = bench::tile_scene(scene, w, h, 103, DType::I16);
        using Old = Variant<2, 1, 8, 1, 1, 1>;
        using Rows4 = Variant<4, 1, 8, 1, 1, 2>;
        failures += run_all<float, 9, double, Old, Rows4, Variant<2, 2, 8, 1, 2, 1>, Variant<4, 1, 4, 1, 2, 1>>(f32, "integer-valued", runs);
        failures += run_all<float, 9, double, Old, Rows4, Variant<2, 2, 8, 1, 2, 1>, Variant<4, 1, 4, 1, 2, 1>>(frac, "fractional", runs);
        failures += run_all<std::int16_t, 9, double, Old, Rows4, Variant<2, 2, 8, 1, 2, 1>>(i16, "", runs);
        failures += run_all<float, 5, float, Old, Rows4, Variant<2, 2, 8, 1, 2, 1>>(f32, "integer-valued", runs);
        failures += run_all<float, 5, float, Old, Rows4, Variant<2, 2, 8, 1, 2, 1>>(frac, "fractional", runs);
        failures += run_all<float, 5, double, Old, Rows4>(frac, "fractional", runs);
        failures += run_all<float, 9, float, Old, Rows4>(frac, "fractional", runs);
    }
    std::printf("\n%s\n", failures ? "FAILED: some shape differs from the CPU reference" : "every shape equals the CPU reference bit for bit");
    return failures ? 1 : 0;
}
