#pragma once
// Device helpers shared by the CUDA k-means translation units (cuda.cu, prepare_cuda.cu,
// kmeanspp_cuda.cu): the block size, exact 128-bit atomics, a fixed-order block sum, the pixel
// accessor of a pass and typed pointers into buffers.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.hpp"
#include "cubekit/buffer.hpp"
#include "kmeans/kmeans_math.hpp"

namespace cubekit::detail {
namespace {

using km::i128;
using u64 = unsigned long long;

constexpr int kBlock = 256;

template <typename X>
X* typed(DeviceBuffer& b) { return static_cast<X*>(b.data()); }
template <typename X>
const X* typed(const DeviceBuffer& b) { return static_cast<const X*>(b.data()); }

std::int64_t div_up(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

int sm_count(const Context& ctx) {
    int sms = 0;
    CUBEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx.device()));
    return sms;
}

// v added to the 128-bit integer held as two u64 words (low first), exactly: each addition's
// carry out of the low word goes into the high word once, so the pair is the exact sum mod 2^128.
// Works on global and shared memory.
__device__ void atomic_add_i128(u64* acc, i128 v) {
    const u64 lo = u64(v), hi = u64(km::u128(v) >> 64);
    const u64 old = atomicAdd(acc, lo);
    atomicAdd(acc + 1, hi + (old + lo < old ? 1ull : 0ull));
}

__host__ __device__ inline i128 read_i128(const u64* two) {
    return i128((km::u128(two[1]) << 64) | km::u128(two[0]));
}

// Sum of a block's values in a fixed tree order (deterministic for a fixed grid). blockDim.x is
// kBlock; every thread of the block must call it.
__device__ double block_sum(double v, double* scratch) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
        __syncthreads();
    }
    const double total = scratch[0];
    __syncthreads();
    return total;
}

// Pixel i of a pass over a dense BIP image: raster index idx[i] when some pixels are excluded,
// else i itself.
template <typename T>
struct Pixels {
    const T* x;
    const std::int64_t* idx;
    int m;
    __device__ const T* operator()(std::int64_t i) const { return x + (idx ? idx[i] : i) * m; }
    __device__ std::int64_t raster(std::int64_t i) const { return idx ? idx[i] : i; }
};

}  // namespace
}  // namespace cubekit::detail
