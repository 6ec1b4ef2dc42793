// What the first device allocations of a process cost (issue 19 item 6: a CLI k-means step takes
// 32–49 ms for ~5 ms of device work). A k-means-sized set of stream-ordered allocations (the 4K
// photo: image 25 MB, labels 33 MB, painted 25 MB, k-means++ weights 16 MB, small scratch), each
// written once, timed on a fresh context, then again after freeing them (pool kept), then with
// plain cudaMalloc. Standalone:
//   nvcc -arch=sm_90 -O2 -o pool_growth bench/probes/pool_growth.cu && ./pool_growth [one|malloc]
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <string>
#include <vector>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

static double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int main(int argc, char** argv) {
    const std::vector<std::size_t> sizes = {24883200, 33177600, 24883200, 16777216, 1 << 20, 4096, 4096, 65536};
    // "one": the pool first grown by one allocation of the set's total, then the set.
    const bool one = argc > 1 && std::string(argv[1]) == "one";
    auto t0 = std::chrono::steady_clock::now();
    CK(cudaFree(nullptr));
    std::printf("context: %.1f ms\n", ms_since(t0));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    cudaMemPool_t pool;
    CK(cudaDeviceGetMemPool(&pool, 0));
    std::uint64_t keep = UINT64_MAX;
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    if (one) {
        std::size_t total = 0;
        for (std::size_t b : sizes) total += b;
        void* big;
        t0 = std::chrono::steady_clock::now();
        CK(cudaMallocAsync(&big, total, s));
        CK(cudaFreeAsync(big, s));
        CK(cudaStreamSynchronize(s));
        std::printf("one allocation of %.1f MB first: %.2f ms\n", total / 1e6, ms_since(t0));
    }
    // "malloc": cudaMalloc first, on the fresh context (the pool rounds skipped).
    const bool malloc_first = argc > 1 && std::string(argv[1]) == "malloc";
    for (int round = 0; round < (malloc_first ? 0 : 3); ++round) {
        std::vector<void*> p(sizes.size());
        t0 = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < sizes.size(); ++i) CK(cudaMallocAsync(&p[i], sizes[i], s));
        const double alloc = ms_since(t0);
        for (std::size_t i = 0; i < sizes.size(); ++i) CK(cudaMemsetAsync(p[i], 1, sizes[i], s));
        CK(cudaStreamSynchronize(s));
        const double touched = ms_since(t0);
        for (void* q : p) CK(cudaFreeAsync(q, s));
        CK(cudaStreamSynchronize(s));
        std::printf("pool round %d: allocations %.2f ms, + first writes %.2f ms\n", round, alloc, touched);
    }
    for (int round = 0; round < 2; ++round) {
        std::vector<void*> p(sizes.size());
        t0 = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < sizes.size(); ++i) CK(cudaMalloc(&p[i], sizes[i]));
        const double alloc = ms_since(t0);
        for (std::size_t i = 0; i < sizes.size(); ++i) CK(cudaMemsetAsync(p[i], 1, sizes[i], s));
        CK(cudaStreamSynchronize(s));
        const double touched = ms_since(t0);
        for (void* q : p) CK(cudaFree(q));
        std::printf("cudaMalloc round %d: allocations %.2f ms, + first writes %.2f ms\n", round, alloc, touched);
    }
    // Host side of the same call: pageable copies of the photo in and the labels out.
    std::vector<unsigned char> host(33177600, 7);
    void* d;
    CK(cudaMalloc(&d, host.size()));
    for (int round = 0; round < 2; ++round) {
        t0 = std::chrono::steady_clock::now();
        CK(cudaMemcpy(d, host.data(), 24883200, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(host.data(), d, 33177600, cudaMemcpyDeviceToHost));
        std::printf("pageable copies round %d (25 MB in, 33 MB out): %.2f ms\n", round, ms_since(t0));
    }
    return 0;
}
