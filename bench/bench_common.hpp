#pragma once
// Helpers the benchmarks share.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cubekit/cube.hpp"

#ifdef CUBEKIT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace cubekit::bench {

// The arguments of a benchmark that takes only `--out FILE.md`: false (usage printed) on anything else.
inline bool parse_out_flag(int argc, char** argv, const char* name, std::string& out_path) {
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--out") && i + 1 < argc) {
            out_path = argv[++i];
        } else {
            std::fprintf(stderr, "usage: %s [--out FILE.md]\n", name);
            return false;
        }
    }
    return true;
}

/// Median wall time (ms, host clock) of `runs` calls of work(); the caller warms up first if it wants.
inline double wall_median_ms(const std::function<void()>& work, int runs) {
    std::vector<double> ms;
    for (int r = 0; r < runs; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        work();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// Mirror-tiles `scene` (its first `bands` bands) to width × height: the seams are reflected so the
// tiled cube has no artificial steps.
inline Cube tile_scene(const Cube& scene, int width, int height, int bands, DType dtype) {
    Cube out(width, height, bands, dtype, Layout::BSQ);
    auto mirror = [](int v, int n) {
        const int period = 2 * n, m = v % period;
        return m < n ? m : period - 1 - m;
    };
    for (int b = 0; b < bands; ++b)
        for (int y = 0; y < height; ++y)
            for (int x = 0; x < width; ++x)
                out.set_value(x, y, b, scene.value(mirror(x, scene.width()), mirror(y, scene.height()), b));
    return out;
}

#ifdef CUBEKIT_HAVE_CUDA
/// Median of `runs` CUDA-event timings (ms) of work() on `stream` after `warmup` untimed runs; the
/// fastest goes to `best`.
inline double event_median_ms(cudaStream_t stream, int warmup, int runs, const std::function<void()>& work, float& best) {
    std::vector<float> ms;
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    for (int r = 0; r < warmup + runs; ++r) {
        cudaEventRecord(start, stream);
        work();
        cudaEventRecord(stop, stream);
        cudaEventSynchronize(stop);
        float t = 0;
        cudaEventElapsedTime(&t, start, stop);
        if (r >= warmup) ms.push_back(t);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    std::sort(ms.begin(), ms.end());
    best = ms.front();
    return double(ms[ms.size() / 2]);
}
#endif

}  // namespace cubekit::bench
