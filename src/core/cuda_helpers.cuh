#pragma once
// Small CUDA helpers that several families' kernels share: grid arithmetic, the device's
// multiprocessor count, exact 128-bit atomic sums and a fixed-order block sum.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.hpp"
#include "cubekit/context.hpp"

namespace cubekit::detail {

/// ⌈a / b⌉ for a ≥ 0, b > 0.
constexpr long long div_up(long long a, long long b) { return (a + b - 1) / b; }

/// Multiprocessors of the context's device (at least 1).
inline int sm_count(const Context& ctx) {
    int sms = 0;
    CUBEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx.device()));
    return sms > 0 ? sms : 1;
}

/// v added to the 128-bit integer held as two unsigned 64-bit words (low first), exactly: each
/// addition's carry out of the low word goes into the high word once, so the pair holds the exact
/// sum modulo 2^128 (two's complement: signed sums too). Global or shared memory.
__device__ inline void atomic_add_i128(unsigned long long* acc, __int128 v) {
    using u64 = unsigned long long;
    const u64 lo = u64(v), hi = u64((unsigned __int128)(v) >> 64);
    const u64 old = atomicAdd(acc, lo);
    atomicAdd(acc + 1, hi + (old + lo < old ? 1ull : 0ull));
}

/// The 128-bit integer held as two words (low first).
__host__ __device__ inline __int128 read_i128(const unsigned long long* two) {
    return __int128(((unsigned __int128)(two[1]) << 64) | (unsigned __int128)(two[0]));
}

/// A 128-bit integer moved down (shfl_down) or up (shfl_up) the warp by `delta` lanes, or read
/// from lane `src_lane` (shfl), as two 64-bit shuffles; every lane of the warp calls it.
__device__ inline __int128 shfl_down_i128(__int128 v, int delta) {
    using u64 = unsigned long long;
    const u64 lo = __shfl_down_sync(0xffffffffu, u64(v), delta);
    const u64 hi = __shfl_down_sync(0xffffffffu, u64((unsigned __int128)(v) >> 64), delta);
    return __int128(((unsigned __int128)(hi) << 64) | lo);
}
__device__ inline __int128 shfl_i128(__int128 v, int src_lane) {
    using u64 = unsigned long long;
    const u64 lo = __shfl_sync(0xffffffffu, u64(v), src_lane);
    const u64 hi = __shfl_sync(0xffffffffu, u64((unsigned __int128)(v) >> 64), src_lane);
    return __int128(((unsigned __int128)(hi) << 64) | lo);
}
__device__ inline __int128 shfl_up_i128(__int128 v, int delta) {
    using u64 = unsigned long long;
    const u64 lo = __shfl_up_sync(0xffffffffu, u64(v), delta);
    const u64 hi = __shfl_up_sync(0xffffffffu, u64((unsigned __int128)(v) >> 64), delta);
    return __int128(((unsigned __int128)(hi) << 64) | lo);
}

/// The warp's exact sum of 128-bit integers, in every lane (a butterfly; integers, so the order
/// does not matter).
__device__ inline __int128 warp_sum_i128(__int128 v) {
    using u64 = unsigned long long;
    for (int d = 16; d > 0; d /= 2) {
        const u64 lo = __shfl_xor_sync(0xffffffffu, u64(v), d);
        const u64 hi = __shfl_xor_sync(0xffffffffu, u64((unsigned __int128)(v) >> 64), d);
        v += __int128(((unsigned __int128)(hi) << 64) | lo);
    }
    return v;
}

/// The warp's inclusive prefix sums of 128-bit integers (lane i: the sum of lanes 0..i).
__device__ inline __int128 warp_inclusive_scan_i128(__int128 v) {
    const int lane = threadIdx.x & 31;
    for (int d = 1; d < 32; d *= 2) {
        const __int128 other = shfl_up_i128(v, d);
        if (lane >= d) v += other;
    }
    return v;
}

/// Sum of a block's values in a fixed tree order (deterministic for a fixed grid); `scratch` holds
/// blockDim.x doubles, blockDim.x is a power of two, and every thread of the block calls it.
__device__ inline double block_sum(double v, double* scratch) {
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

}  // namespace cubekit::detail
