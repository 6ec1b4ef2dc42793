// RBF network scores, CUDA backend (spec detect.md §A.5).
//
// fused    one thread per pixel, all k distance accumulators of a pass in registers (passes of up
//          to 32 neurons; k ≤ 32 reads the cube once). BSQ-like input (x stride 1): lane p reads
//          band b of pixel p, coalesced. BIP-like input (band stride 1): a block stages 128 pixels
//          × 32 bands into shared memory, one warp reading 32 consecutive bands of one pixel (one
//          128-byte line for f32), stored transposed with a stride of 129 so both the stores and
//          the thread-per-pixel reads are free of bank conflicts. Never a layout-conversion pass.
// neuron   the seed's mapping: one thread per (pixel, neuron), the pixel's spectrum re-read k times.
// synapse  the seed's mapping: T = min(256, next_pow2(m)) threads per pixel, each covering bands
//          b ≡ t (mod T); a shared-memory tree (sequential addressing) per neuron.
// The network parameters are read from global memory with every lane of a warp at the same
// address (a broadcast through L1), which also lifts the seed's constant-memory cap.
//
// Arithmetic (detect_internal.hpp RbfnGroup): f32, bands in order, products added in neuron order
// from 0, then the bias; expf. fused and neuron give bit-identical scores (same operations in the
// same order); synapse sums the bands in a tree (within the spec's tolerance of the others).
// The cube moves once: N·m·sizeof(T) bytes, + 4 bytes per pixel and model written.
#include <cuda_runtime.h>
#include <math_constants.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/cuda_backend.hpp"
#include "core/cuda_check.hpp"
#include "cubekit/buffer.hpp"
#include "cubekit/error.hpp"
#include "detect/detect_internal.hpp"

namespace cubekit::detail {
namespace {

constexpr int kPassNeurons = 32;  // accumulators per thread and pass
constexpr int kTilePixels = 128;  // fused BIP: pixels per block
constexpr int kTileBands = 32;    // fused BIP: bands staged per step
constexpr int kMappingThreads = 256;

struct DeviceGroup {
    const float* centres;  // neurons × bands
    const float* centres_t;  // bands × padded: the fused kernels load 4 neurons' centres at once
    int padded;              // neurons rounded up to a multiple of 4 (the extra centres are 0)
    const float* gamma;
    const float* weight;
    const float* offset;   // bands (transform only)
    const float* gain;
    const float* bias;     // per model
    const int* first;      // models + 1
    float* const* out;     // per model: W×H dense score map
    int bands, neurons, models;
    bool transform;
};

struct Pixels {
    std::int64_t begin, end;  // flattened pixel range of this launch
    int width;
};

// One neuron's term of the output: w·expf(−d·γ), or NaN when d is not finite (a NaN or Inf band,
// or a distance beyond f32): the pixel then scores NaN (detect_internal.hpp, the CPU's rule).
__device__ __forceinline__ float neuron_term(const DeviceGroup& g, int n, float d) {
    return isfinite(d) ? __fmul_rn(g.weight[n], expf(-__fmul_rn(d, g.gamma[n]))) : CUDART_NAN_F;
}

__device__ __forceinline__ float transformed_any(const DeviceGroup& g, float v, int b) {
    return g.transform ? __fmul_rn(g.gain[b], __fsub_rn(v, g.offset[b])) : v;
}

template <bool Transform>
__device__ __forceinline__ float transformed(const DeviceGroup& g, float v, int b) {
    if constexpr (Transform) return __fmul_rn(g.gain[b], __fsub_rn(v, g.offset[b]));
    else return v;
}

// The scores of the models whose neurons meet [k0, k0 + kn), from this pass's distances d. A model
// continued from the previous pass resumes from the partial sum stored in its output.
template <int K>
__device__ __forceinline__ void finish_pass(const DeviceGroup& g, const float (&d)[K], int k0, int kn, std::int64_t p) {
    for (int j = 0; j < g.models; ++j) {
        const int lo = g.first[j], hi = g.first[j + 1];
        if (hi <= k0 || lo >= k0 + kn) continue;
        float acc = lo >= k0 ? 0.0f : g.out[j][p];
#pragma unroll
        for (int i = 0; i < K; ++i) {
            const int n = k0 + i;
            if (i < kn && n >= lo && n < hi) acc = __fadd_rn(acc, neuron_term(g, n, d[i]));
        }
        g.out[j][p] = hi <= k0 + kn ? __fadd_rn(acc, g.bias[j]) : acc;
    }
}

// c points at band b's centres of this pass (K floats, 16-byte aligned, in shared memory).
template <int K>
__device__ __forceinline__ void accumulate(float (&d)[K], float x, const float* c) {
#pragma unroll
    for (int i = 0; i < K; i += 4) {
        // Neurons past the pass or the model are zero-padded: computed, never used (finish_pass).
        const float4 u = *reinterpret_cast<const float4*>(c + i);
        const float e0 = __fsub_rn(x, u.x), e1 = __fsub_rn(x, u.y), e2 = __fsub_rn(x, u.z), e3 = __fsub_rn(x, u.w);
        d[i] = __fadd_rn(d[i], __fmul_rn(e0, e0));
        d[i + 1] = __fadd_rn(d[i + 1], __fmul_rn(e1, e1));
        d[i + 2] = __fadd_rn(d[i + 2], __fmul_rn(e2, e2));
        d[i + 3] = __fadd_rn(d[i + 3], __fmul_rn(e3, e3));
    }
}

// The pass's centres, band-major with K per band (zeros past the neurons), into shared memory.
template <int K>
__device__ __forceinline__ void stage_centres(const DeviceGroup& g, int k0, float* cs) {
    for (int e = threadIdx.x; e < g.bands * K; e += blockDim.x) {
        const int b = e / K, i = e % K;
        cs[e] = k0 + i < g.padded ? g.centres_t[std::int64_t(b) * g.padded + k0 + i] : 0.0f;
    }
    __syncthreads();
}

constexpr int kBandBatch = 8;  // samples a thread loads before using them: loads in flight per thread

// BSQ-like (x stride 1): thread per pixel, bands in the outer loop; the pass's centres in shared
// memory. Full batches of 8 bands run unguarded, the tail after them.
template <typename T, int K, bool Transform>
__global__ void __launch_bounds__(256, 6) fused_rows_kernel(StridedView<const T> v, DeviceGroup g, Pixels px, int k0, int kn) {
    extern __shared__ float4 centres_shared[];
    float* cs = reinterpret_cast<float*>(centres_shared);
    stage_centres<K>(g, k0, cs);
    const std::int64_t p = px.begin + std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (p >= px.end) return;
    const int x = int(p % px.width), y = int(p / px.width);
    const T* src = v.data + v.offset(x, y, 0);
    const std::int64_t sb = v.strides.b;
    float d[K];
#pragma unroll
    for (int i = 0; i < K; ++i) d[i] = 0.0f;
    const int full = g.bands / kBandBatch * kBandBatch;
    int b0 = 0;
    for (; b0 < full; b0 += kBandBatch) {
        float xs[kBandBatch];
#pragma unroll
        for (int j = 0; j < kBandBatch; ++j) xs[j] = float(src[(b0 + j) * sb]);
#pragma unroll
        for (int j = 0; j < kBandBatch; ++j) accumulate(d, transformed<Transform>(g, xs[j], b0 + j), cs + (b0 + j) * K);
    }
    for (; b0 < g.bands; ++b0) accumulate(d, transformed<Transform>(g, float(src[b0 * sb]), b0), cs + b0 * K);
    finish_pass(g, d, k0, kn, p);
}

// BIP-like (band stride 1): 128 pixels × 32 bands staged through shared memory per step.
template <typename T, int K, bool Transform>
__global__ void __launch_bounds__(kTilePixels, 12) fused_pixels_kernel(StridedView<const T> v, DeviceGroup g, Pixels px, int k0, int kn) {
    __shared__ float tile[kTileBands][kTilePixels + 1];
    __shared__ std::int64_t base[kTilePixels];
    extern __shared__ float4 centres_shared[];
    float* cs = reinterpret_cast<float*>(centres_shared);
    stage_centres<K>(g, k0, cs);
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const std::int64_t first = px.begin + std::int64_t(blockIdx.x) * kTilePixels;
    const std::int64_t p = first + t;
    if (p < px.end) base[t] = v.offset(int(p % px.width), int(p / px.width), 0);
    const int in_tile = px.end - first < kTilePixels ? int(px.end - first) : kTilePixels;
    float d[K];
#pragma unroll
    for (int i = 0; i < K; ++i) d[i] = 0.0f;
    for (int b0 = 0; b0 < g.bands; b0 += kTileBands) {
        const int nb = min(kTileBands, g.bands - b0);
        __syncthreads();
        // Every load of a batch is issued before its stores: v.data is a generic pointer the compiler
        // cannot tell apart from `tile`, so interleaved loads and stores would run one at a time.
        // Batches of 8 (8 lines in flight per warp, few registers).
        constexpr int kWarps = kTilePixels / 32, kLoads = kTilePixels / kWarps, kBatch = 8;  // 32 pixels per warp
#pragma unroll
        for (int j0 = 0; j0 < kLoads; j0 += kBatch) {
            float x[kBatch];
#pragma unroll
            for (int j = 0; j < kBatch; ++j) {
                const int q = warp + (j0 + j) * kWarps;
                x[j] = lane < nb && q < in_tile ? float(v.data[base[q] + b0 + lane]) : 0.0f;
            }
#pragma unroll
            for (int j = 0; j < kBatch; ++j) {
                const int q = warp + (j0 + j) * kWarps;
                if (lane < nb && q < in_tile) tile[lane][q] = transformed<Transform>(g, x[j], b0 + lane);
            }
        }
        __syncthreads();
        if (p < px.end)
            for (int bb = 0; bb < nb; ++bb) accumulate(d, tile[bb][t], cs + (b0 + bb) * K);
    }
    if (p < px.end) finish_pass(g, d, k0, kn, p);
}

// BIP f32 with 16-byte aligned spectra (bands a multiple of 4): thread per pixel, the warp's 32
// spectra moved through a warp-private shared tile 32 bands at a time. The loads are coalesced: each
// float4 load instruction reads 4 pixels' 128-byte runs of the chunk (8 lanes per run), so a warp
// touches 4 lines per instruction; the spectra read by the pixel's own thread (the previous kernel)
// touched 32 lines per instruction and held DRAM at 73 % of its rate (BIP 0.122 ms against BSQ's
// 0.107). The tile's row stride of 33 floats keeps both the stores and the pixel-wise reads free of
// bank conflicts. No block barrier: each warp owns its tile (__syncwarp).
constexpr int kQuadChunk = 32;  // bands per tile

template <int K, bool Transform>
__global__ void __launch_bounds__(256, 4) fused_quads_kernel(StridedView<const float> v, DeviceGroup g, Pixels px, int k0, int kn) {
    __shared__ float tiles[256 / 32][32][kQuadChunk + 1];
    extern __shared__ float4 centres_shared[];
    float* cs = reinterpret_cast<float*>(centres_shared);
    stage_centres<K>(g, k0, cs);
    const int lane = threadIdx.x % 32;
    float(*tile)[kQuadChunk + 1] = tiles[threadIdx.x / 32];
    const std::int64_t warp_first = px.begin + std::int64_t(blockIdx.x) * blockDim.x + (threadIdx.x & ~31);
    if (warp_first >= px.end) return;
    const std::int64_t p = warp_first + lane;
    // Load i of a chunk: lane l reads quad l % 8 of pixel 4i + l / 8 of the warp.
    const float4* src[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const std::int64_t q = warp_first + 4 * i + lane / 8;
        src[i] = q < px.end ? reinterpret_cast<const float4*>(v.data + v.offset(int(q % px.width), int(q / px.width), 0)) : nullptr;
    }
    float d[K];
#pragma unroll
    for (int i = 0; i < K; ++i) d[i] = 0.0f;
    const int quads = g.bands / 4;
    // The next chunk's loads are issued before this chunk's distances, so they are in flight while
    // the warp computes (BIP 1024²×64: 0.122–0.127 → 0.120–0.123 ms on one H100, 2026-11-28).
    float4 xs[8];
    auto load_chunk = [&](int c0) {
        const int quad = c0 + lane % 8;
#pragma unroll
        for (int i = 0; i < 8; ++i) xs[i] = src[i] && quad < quads ? __ldg(src[i] + quad) : make_float4(0, 0, 0, 0);
    };
    load_chunk(0);
    for (int c0 = 0; c0 < quads; c0 += kQuadChunk / 4) {
        __syncwarp();  // the previous chunk's reads are done
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            float* row = tile[4 * i + lane / 8] + 4 * (lane % 8);
            row[0] = xs[i].x, row[1] = xs[i].y, row[2] = xs[i].z, row[3] = xs[i].w;
        }
        __syncwarp();
        if (c0 + kQuadChunk / 4 < quads) load_chunk(c0 + kQuadChunk / 4);
        const int nb = min(kQuadChunk, g.bands - 4 * c0);
        if (p < px.end)
            for (int j = 0; j < nb; ++j) {
                const int b = 4 * c0 + j;
                accumulate(d, transformed<Transform>(g, tile[lane][j], b), cs + b * K);
            }
    }
    if (p < px.end) finish_pass(g, d, k0, kn, p);
}

// The seed's neuron mapping: T = min(k, 256) threads per pixel, thread t owning neurons t, t+T, ...
template <typename T>
__global__ void __launch_bounds__(kMappingThreads) neuron_kernel(StridedView<const T> v, DeviceGroup g, Pixels px, int per_pixel) {
    extern __shared__ float prod[];  // slots × neurons
    const int t = threadIdx.x % per_pixel, q = threadIdx.x / per_pixel, slots = kMappingThreads / per_pixel;
    const std::int64_t p = px.begin + std::int64_t(blockIdx.x) * slots + q;
    const bool live = q < slots && p < px.end;
    if (live) {
        const T* src = v.data + v.offset(int(p % px.width), int(p / px.width), 0);
        for (int n = t; n < g.neurons; n += per_pixel) {
            float dist = 0.0f;
            for (int b = 0; b < g.bands; ++b) {
                const float diff = __fsub_rn(transformed_any(g, float(src[std::int64_t(b) * v.strides.b]), b),
                                             g.centres[std::int64_t(n) * g.bands + b]);
                dist = __fadd_rn(dist, __fmul_rn(diff, diff));
            }
            prod[q * g.neurons + n] = neuron_term(g, n, dist);
        }
    }
    __syncthreads();
    if (!live || t != 0) return;
    for (int j = 0; j < g.models; ++j) {
        float acc = 0.0f;
        for (int n = g.first[j]; n < g.first[j + 1]; ++n) acc = __fadd_rn(acc, prod[q * g.neurons + n]);
        g.out[j][p] = __fadd_rn(acc, g.bias[j]);
    }
}

// The seed's synapse mapping: T threads per pixel (a power of two), a tree reduction per neuron.
template <typename T>
__global__ void __launch_bounds__(kMappingThreads) synapse_kernel(StridedView<const T> v, DeviceGroup g, Pixels px, int per_pixel) {
    extern __shared__ float shared[];
    const int slots = kMappingThreads / per_pixel;
    float* xs = shared;                                // slots × bands
    float* red = xs + slots * g.bands;                 // slots × per_pixel
    float* h = red + slots * per_pixel;                // slots × neurons
    const int t = threadIdx.x % per_pixel, q = threadIdx.x / per_pixel;
    const std::int64_t p = px.begin + std::int64_t(blockIdx.x) * slots + q;
    const bool live = p < px.end;
    if (live) {
        const T* src = v.data + v.offset(int(p % px.width), int(p / px.width), 0);
        for (int b = t; b < g.bands; b += per_pixel) xs[q * g.bands + b] = transformed_any(g, float(src[std::int64_t(b) * v.strides.b]), b);
    }
    for (int n = 0; n < g.neurons; ++n) {
        float part = 0.0f;
        if (live)
            for (int b = t; b < g.bands; b += per_pixel) {
                const float diff = __fsub_rn(xs[q * g.bands + b], g.centres[std::int64_t(n) * g.bands + b]);
                part = __fadd_rn(part, __fmul_rn(diff, diff));
            }
        red[q * per_pixel + t] = part;
        __syncthreads();
        for (int s = per_pixel / 2; s > 0; s >>= 1) {
            if (t < s) red[q * per_pixel + t] = __fadd_rn(red[q * per_pixel + t], red[q * per_pixel + t + s]);
            __syncthreads();
        }
        if (t == 0) h[q * g.neurons + n] = neuron_term(g, n, red[q * per_pixel]);
        __syncthreads();
    }
    if (!live || t != 0) return;
    for (int j = 0; j < g.models; ++j) {
        float acc = 0.0f;
        for (int n = g.first[j]; n < g.first[j + 1]; ++n) acc = __fadd_rn(acc, h[q * g.neurons + n]);
        g.out[j][p] = __fadd_rn(acc, g.bias[j]);
    }
}

// The group's parameters in one device buffer.
struct Uploaded {
    DeviceBuffer buffer;
    DeviceGroup group{};
};

Uploaded upload_group(const Context& ctx, const RbfnGroup& g, std::span<float* const> scores) {
    std::vector<std::byte> host;
    auto put = [&host](const void* data, std::size_t bytes) {
        const std::size_t at = (host.size() + 15) / 16 * 16;
        host.resize(at + bytes);
        if (bytes) std::memcpy(host.data() + at, data, bytes);
        return at;
    };
    const int padded = (g.neurons() + 3) / 4 * 4;
    std::vector<float> transposed(std::size_t(padded) * g.bands, 0.0f);
    for (int n = 0; n < g.neurons(); ++n)
        for (int b = 0; b < g.bands; ++b) transposed[std::size_t(b) * padded + n] = g.centres[std::size_t(n) * g.bands + b];
    const std::size_t centres_t = put(transposed.data(), transposed.size() * 4);
    const std::size_t centres = put(g.centres.data(), g.centres.size() * 4), gamma = put(g.gamma.data(), g.gamma.size() * 4),
                      weight = put(g.weight.data(), g.weight.size() * 4), offset = put(g.offset.data(), g.offset.size() * 4),
                      gain = put(g.gain.data(), g.gain.size() * 4), bias = put(g.bias.data(), g.bias.size() * 4),
                      first = put(g.first.data(), g.first.size() * 4), out = put(scores.data(), scores.size() * sizeof(float*));
    keep_pool_memory(ctx, host.size());  // mapped across calls, not again after each synchronisation
    Uploaded u{DeviceBuffer(ctx, host.size()), {}};
    // Pageable → device without waiting: the runtime stages the source before returning (the CUDA
    // API's documented behaviour for asynchronous copies from pageable memory), so the launches
    // follow at once instead of after a host round trip.
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(u.buffer.data(), host.data(), host.size(), cudaMemcpyHostToDevice, stream_of(ctx)));
    const std::byte* d = static_cast<const std::byte*>(u.buffer.data());
    u.group = {reinterpret_cast<const float*>(d + centres), reinterpret_cast<const float*>(d + centres_t), padded,
               reinterpret_cast<const float*>(d + gamma),
               reinterpret_cast<const float*>(d + weight),  reinterpret_cast<const float*>(d + offset),
               reinterpret_cast<const float*>(d + gain),    reinterpret_cast<const float*>(d + bias),
               reinterpret_cast<const int*>(d + first),     reinterpret_cast<float* const*>(d + out),
               g.bands, g.neurons(), g.models(), g.transform};
    return u;
}

template <typename T, int K, bool Transform>
void launch_fused(const Context& ctx, const StridedView<const T>& v, const DeviceGroup& g, Pixels px, int k0, int kn, bool bip) {
    const cudaStream_t stream = stream_of(ctx);
    const std::int64_t n = px.end - px.begin;
    const std::size_t smem = std::size_t(g.bands) * K * sizeof(float);  // the pass's centres
    if constexpr (std::is_same_v<T, float>) {
        const Strides& st = v.strides;
        const bool quads = bip && g.bands % 4 == 0 && reinterpret_cast<std::uintptr_t>(v.data) % 16 == 0 && st.x % 4 == 0 &&
                           st.y % 4 == 0;
        if (quads) {
            const dim3 grid(unsigned((n + 255) / 256)), block(256);
            if (smem > 48 * 1024) CUBEKIT_CUDA_CHECK(cudaFuncSetAttribute(fused_quads_kernel<K, Transform>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
            fused_quads_kernel<K, Transform><<<grid, block, smem, stream>>>(v, g, px, k0, kn);
            CUBEKIT_CHECK_LAUNCH(ctx, "fused_quads_kernel", grid, block);
            return;
        }
    }
    if (bip) {
        const dim3 grid(unsigned((n + kTilePixels - 1) / kTilePixels)), block(kTilePixels);
        if (smem > 32 * 1024) CUBEKIT_CUDA_CHECK(cudaFuncSetAttribute(fused_pixels_kernel<T, K, Transform>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        fused_pixels_kernel<T, K, Transform><<<grid, block, smem, stream>>>(v, g, px, k0, kn);
        CUBEKIT_CHECK_LAUNCH(ctx, "fused_pixels_kernel", grid, block);
    } else {
        const dim3 grid(unsigned((n + 255) / 256)), block(256);
        if (smem > 48 * 1024) CUBEKIT_CUDA_CHECK(cudaFuncSetAttribute(fused_rows_kernel<T, K, Transform>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        fused_rows_kernel<T, K, Transform><<<grid, block, smem, stream>>>(v, g, px, k0, kn);
        CUBEKIT_CHECK_LAUNCH(ctx, "fused_rows_kernel", grid, block);
    }
}

template <typename T>
void run_fused(const Context& ctx, const StridedView<const T>& v, const DeviceGroup& g, Pixels px, bool bip) {
    // A pass's centres (bands × pass floats) live in shared memory: at most 96 KB of them.
    int pass = kPassNeurons;
    while (pass > 4 && std::size_t(g.bands) * pass * sizeof(float) > 96 * 1024) pass /= 2;
    if (std::size_t(g.bands) * pass * sizeof(float) > 96 * 1024)
        throw InvalidInput("detect rbfn: " + std::to_string(g.bands) + " bands; the CUDA backend takes at most 6144");
    for (int k0 = 0; k0 < g.neurons; k0 += pass) {
        const int kn = std::min(pass, g.neurons - k0);
        auto launch = [&](auto transform) {
            constexpr bool Transform = decltype(transform)::value;
            if (kn <= 4) launch_fused<T, 4, Transform>(ctx, v, g, px, k0, kn, bip);
            else if (kn <= 8) launch_fused<T, 8, Transform>(ctx, v, g, px, k0, kn, bip);
            else if (kn <= 16) launch_fused<T, 16, Transform>(ctx, v, g, px, k0, kn, bip);
            else launch_fused<T, 32, Transform>(ctx, v, g, px, k0, kn, bip);
        };
        if (g.transform) launch(std::true_type{});
        else launch(std::false_type{});
    }
}

int next_pow2(int v) {
    int p = 1;
    while (p < v) p <<= 1;
    return p;
}

template <typename T>
void run_mapping(const Context& ctx, const StridedView<const T>& v, const DeviceGroup& g, Pixels px, RbfnMapping mapping) {
    const cudaStream_t stream = stream_of(ctx);
    const std::int64_t n = px.end - px.begin;
    const int per_pixel = mapping == RbfnMapping::Neuron ? std::min(g.neurons, kMappingThreads)
                                                         : std::min(kMappingThreads, next_pow2(g.bands));
    const int slots = kMappingThreads / per_pixel;
    const dim3 grid(unsigned((n + slots - 1) / slots)), block(kMappingThreads);
    if (mapping == RbfnMapping::Neuron) {
        const std::size_t smem = std::size_t(slots) * g.neurons * sizeof(float);
        if (smem > 48 * 1024) CUBEKIT_CUDA_CHECK(cudaFuncSetAttribute(neuron_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        neuron_kernel<T><<<grid, block, smem, stream>>>(v, g, px, per_pixel);
        CUBEKIT_CHECK_LAUNCH(ctx, "neuron_kernel", grid, block);
    } else {
        const std::size_t smem = std::size_t(slots) * (g.bands + per_pixel + g.neurons) * sizeof(float);
        if (smem > 48 * 1024) CUBEKIT_CUDA_CHECK(cudaFuncSetAttribute(synapse_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        synapse_kernel<T><<<grid, block, smem, stream>>>(v, g, px, per_pixel);
        CUBEKIT_CHECK_LAUNCH(ctx, "synapse_kernel", grid, block);
    }
}

}  // namespace

bool rbfn_cuda_accepts(const CubeView& cube) {
    const Strides& s = cube.strides();
    const bool bsq_like = (s.x == 1 || cube.width() == 1) && s.y >= 0 && s.b >= 0;
    const bool bip_like = (s.b == 1 || cube.bands() == 1) && s.x >= 0 && s.y >= 0;
    return bsq_like || bip_like;
}

void rbfn_scores_cuda(const Context& ctx, const CubeView& cube, const RbfnGroup& group, std::span<float* const> scores,
                      const PixelOptions& options) {
    const Uploaded params = upload_group(ctx, group, scores);
    const std::int64_t pixels = std::int64_t(cube.width()) * cube.height();
    const std::int64_t chunk = options.chunk_pixels > 0 ? options.chunk_pixels : pixels;
    // BIP-like input goes through the staged kernel unless it is also BSQ-like (one band).
    const bool bip = cube.strides().b == 1 && cube.bands() > 1;
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const StridedView<const T> v = cube.typed<T>();
        for (std::int64_t p0 = 0; p0 < pixels; p0 += chunk) {
            const Pixels px{p0, std::min(pixels, p0 + chunk), cube.width()};
            if (options.mapping == RbfnMapping::Fused) run_fused(ctx, v, params.group, px, bip);
            else run_mapping(ctx, v, params.group, px, options.mapping);
        }
    });
    // The parameter buffer is freed stream-ordered (cudaFreeAsync) after the launches.
}

}  // namespace cubekit::detail
