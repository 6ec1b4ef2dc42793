// The majority vote inside regions on the GPU (spec gradient-watershed.md part C step 4, Decision
// C-1): integer counters per (region, class) with atomics, so the result is the CPU reference's
// whatever the order. Regions are indexed by their label (dense up to the largest), classes through a
// table of the values present; one read-back of the two largest labels, one of the statistics.
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstdint>

#include "classify/classify_cuda.hpp"
#include "core/cuda_check.hpp"
#include "cubekit/buffer.hpp"

namespace cubekit::detail {
namespace {

constexpr int kBlock = 256;
unsigned blocks_for(std::int64_t n) { return unsigned((n + kBlock - 1) / kBlock); }

// largest[0], [1]: the largest region and class labels; largest[2]: the smallest of both.
__global__ void largest_labels(const std::int32_t* regions, const std::int32_t* classes, std::int64_t n, int* largest) {
    int r = 0, c = 0, low = 0;
    for (std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; p < n; p += std::int64_t(gridDim.x) * blockDim.x) {
        r = max(r, regions[p]);
        c = max(c, classes[p]);
        low = min(low, min(regions[p], classes[p]));
    }
    atomicMax(&largest[0], r);
    atomicMax(&largest[1], c);
    atomicMin(&largest[2], low);
}

__global__ void mark_classes(const std::int32_t* classes, std::int64_t n, int* present) {
    const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (p < n && classes[p] > 0) present[classes[p]] = 1;
}

// counts[r·K + k]: voters of class index k in region r; size[r]: every pixel of region r.
__global__ void count_votes(const std::int32_t* regions, const std::int32_t* classes, std::int64_t n, const int* index,
                            int K, unsigned* counts, unsigned* size) {
    const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (p >= n || regions[p] == 0) return;
    const int r = regions[p];
    atomicAdd(&size[r], 1u);
    if (classes[p] > 0) atomicAdd(&counts[std::int64_t(r) * K + index[classes[p]]], 1u);
}

// winner[r]: the class c* that relabels region r, or 0 (kept); stats: regions, relabelled, ties,
// no voters, below τ.
__global__ void decide(const unsigned* counts, const unsigned* size, int regions, int K, const int* class_of, double tau,
                       std::int32_t* winner, unsigned long long* stats) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r > regions || size[r] == 0) return;
    unsigned best = 0;
    int arg = -1;
    bool tie = false;
    for (int k = 0; k < K; ++k) {
        const unsigned c = counts[std::int64_t(r) * K + k];
        if (c > best) best = c, arg = k, tie = false;
        else if (c == best && c > 0) tie = true;
    }
    int outcome;
    if (arg < 0) outcome = 3;
    else if (tie) outcome = 2;
    else if (double(best) / double(size[r]) < tau) outcome = 4;
    else outcome = 1;
    winner[r] = outcome == 1 ? class_of[arg] : 0;
    atomicAdd(&stats[0], 1ull);
    atomicAdd(&stats[outcome], 1ull);
}

__global__ void apply_votes(const std::int32_t* regions, const std::int32_t* classes, std::int64_t n,
                            const std::int32_t* winner, std::int32_t* out, unsigned long long* changed) {
    const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (p >= n) return;
    const std::int32_t w = regions[p] > 0 ? winner[regions[p]] : 0;
    const std::int32_t c = w > 0 ? w : classes[p];
    out[p] = c;
    if (c != classes[p]) atomicAdd(changed, 1ull);
}

__global__ void class_values(const int* present, const int* index, int largest, int* class_of) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v <= largest && present[v]) class_of[index[v]] = v;
}

}  // namespace

std::optional<VoteStats> region_vote_cuda(const Context& ctx, const std::int32_t* regions, const std::int32_t* classes,
                                          std::int64_t n, double tau, std::int32_t* out) {
    cudaStream_t stream = stream_of(ctx);
    DeviceBuffer largest(ctx, 3 * sizeof(int));
    largest.fill_bytes(ctx, 0);
    const unsigned reduce_blocks = std::min(blocks_for(n), 1024u);
    largest_labels<<<reduce_blocks, kBlock, 0, stream>>>(regions, classes, n, static_cast<int*>(largest.data()));
    CUBEKIT_CHECK_LAUNCH(ctx, "largest_labels", dim3(reduce_blocks), dim3(kBlock));
    int top[3] = {0, 0, 0};
    largest.download(ctx, top, sizeof top);
    const std::int64_t R = std::int64_t(top[0]) + 1, C = std::int64_t(top[1]) + 1;
    if (top[2] < 0 || C > (1 << 20) || R > 4 * n + 1) return std::nullopt;  // negative or sparse labels: the CPU
    DeviceBuffer present(ctx, std::size_t(C) * sizeof(int)), index(ctx, std::size_t(C) * sizeof(int));
    present.fill_bytes(ctx, 0);
    mark_classes<<<blocks_for(n), kBlock, 0, stream>>>(classes, n, static_cast<int*>(present.data()));
    CUBEKIT_CHECK_LAUNCH(ctx, "mark_classes", dim3(blocks_for(n)), dim3(kBlock));
    std::size_t temp_bytes = 0;
    CUBEKIT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, static_cast<int*>(present.data()),
                                                     static_cast<int*>(index.data()), int(C), stream));
    DeviceBuffer temp(ctx, std::max<std::size_t>(temp_bytes, 1));
    CUBEKIT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.data(), temp_bytes, static_cast<int*>(present.data()),
                                                     static_cast<int*>(index.data()), int(C), stream));
    int K = 0, last_present = 0;
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(&K, static_cast<int*>(index.data()) + (C - 1), sizeof(int), cudaMemcpyDeviceToHost, stream));
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(&last_present, static_cast<int*>(present.data()) + (C - 1), sizeof(int),
                                       cudaMemcpyDeviceToHost, stream));
    CUBEKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
    K = std::max(1, K + last_present);
    if (double(R) * K * 4 > 2e9) return std::nullopt;
    DeviceBuffer class_of(ctx, std::size_t(K) * sizeof(int)), counts(ctx, std::size_t(R * K) * 4), size(ctx, std::size_t(R) * 4),
        winner(ctx, std::size_t(R) * 4), stats(ctx, 6 * sizeof(unsigned long long));
    counts.fill_bytes(ctx, 0);
    size.fill_bytes(ctx, 0);
    stats.fill_bytes(ctx, 0);
    class_values<<<blocks_for(C), kBlock, 0, stream>>>(static_cast<const int*>(present.data()), static_cast<const int*>(index.data()),
                                                       int(C - 1), static_cast<int*>(class_of.data()));
    CUBEKIT_CHECK_LAUNCH(ctx, "class_values", dim3(blocks_for(C)), dim3(kBlock));
    count_votes<<<blocks_for(n), kBlock, 0, stream>>>(regions, classes, n, static_cast<const int*>(index.data()), K,
                                                      static_cast<unsigned*>(counts.data()), static_cast<unsigned*>(size.data()));
    CUBEKIT_CHECK_LAUNCH(ctx, "count_votes", dim3(blocks_for(n)), dim3(kBlock));
    auto* s = static_cast<unsigned long long*>(stats.data());
    decide<<<blocks_for(R), kBlock, 0, stream>>>(static_cast<const unsigned*>(counts.data()), static_cast<const unsigned*>(size.data()),
                                                 int(R - 1), K, static_cast<const int*>(class_of.data()), tau,
                                                 static_cast<std::int32_t*>(winner.data()), s);
    CUBEKIT_CHECK_LAUNCH(ctx, "decide", dim3(blocks_for(R)), dim3(kBlock));
    apply_votes<<<blocks_for(n), kBlock, 0, stream>>>(regions, classes, n, static_cast<const std::int32_t*>(winner.data()), out, s + 5);
    CUBEKIT_CHECK_LAUNCH(ctx, "apply_votes", dim3(blocks_for(n)), dim3(kBlock));
    unsigned long long h[6] = {};
    stats.download(ctx, h, sizeof h);
    VoteStats v;
    v.regions = std::int64_t(h[0]);
    v.relabelled = std::int64_t(h[1]);
    v.ties = std::int64_t(h[2]);
    v.no_voters = std::int64_t(h[3]);
    v.below_tau = std::int64_t(h[4]);
    v.changed_pixels = std::int64_t(h[5]);
    return v;
}

}  // namespace cubekit::detail
