// Global scoring's whitening GEMM for an upper-trapezoidal W (classical.cpp: R of W's QR) that fits
// whole in shared memory: up to 13 row tiles of 16 (K ≤ 208). whiten_mma.cu's kernel, which splits W
// into row blocks kept by separate SMs, stalled on its accumulators' chains once the triangle left
// few row tiles active in a band chunk (ncu: 45 % of the cycles waiting on a fixed-latency
// dependency, two warps per scheduler). Here:
// - W's triangle, packed (row tile m keeps bands 16m … K_pad, 193 KB for K = 200), is read into shared
//   memory once per persistent block (one per SM), which walks 64-pixel tiles: the cube is read once;
// - warp w computes 32 pixels (4 n-tiles: four independent products per W fragment) for the row
//   tiles of its row group w / 2, dealt in snake order (0 1 2 3 3 2 1 0 0 1 …) so that the groups'
//   triangle work is nearly equal (K = 200: 24, 23, 22, 22 tile-chunks);
// - tile m's products start at chunk m (W is zero before it): 91 of 169 tile-chunks for K = 200;
// - the products on the sm_90 m16n8k8 DMMA shape; samples loaded one chunk ahead into registers (any
//   element type and strides; y = x − μ, rounded to f32 in f32 mode);
// - each row group's Σ z² lands in shared memory and the 4 groups are added in order: one partial
//   per pixel (whiten_row_blocks() = 1), finished by classical_mma.cu's finish_kernel.
// Floor (K = r = 200, N = 1024²): 91 tile-chunks × 16 × 16 × 2 flops per pixel = 4.9e10 → 0.73 ms.
#include <cuda_runtime.h>
#include <math_constants.h>

#include <algorithm>

#include "core/cuda_check.hpp"
#include "core/device_vector.hpp"
#include "detect/classical_internal.hpp"
#include "detect/dmma.cuh"

namespace cubekit::detail {
namespace {

constexpr int kThreads = 256;
constexpr int kPix = 64;            // pixels per tile: 2 halves of 4 n-tiles
constexpr int kChunk = 16;          // bands per staged chunk = rows per tile
constexpr int kGroups = 4;          // row groups, two warps (the pixel halves) each
constexpr int kSlots = 4;           // row tiles per group
constexpr int kMaxTiles = kGroups * kSlots;
constexpr int kYStride = kPix + 8;  // ≡ 8 (mod 16) doubles: conflict-free B fragments

// Row tile m of the packed W: its stride (bands 16m … K_pad, + 4 ≡ 4 (mod 16): conflict-free A
// fragments) and where it starts.
__host__ __device__ __forceinline__ int tile_stride(int K_pad, int m) { return K_pad - 16 * m + 4; }
__host__ __device__ __forceinline__ long long tile_offset(int K_pad, int m) {
    return 16ll * m * (K_pad + 4) - 128ll * m * (m - 1);
}
// Slot i of row group g in snake order.
__host__ __device__ __forceinline__ int slot_tile(int i, int g) { return i % 2 == 0 ? 4 * i + g : 4 * i + 3 - g; }

std::size_t smem_bytes(int K_pad, int m_tiles) {
    return sizeof(double) * (std::size_t(tile_offset(K_pad, m_tiles)) + 2u * kChunk * kYStride) +
           std::size_t(K_pad) * (sizeof(double) + sizeof(long long));
}

template <typename T>
__device__ __forceinline__ long long pixel_offset(const StridedView<const T>& v, long long p) {
    const long long y = p / v.width, x = p - y * v.width;
    return x * v.strides.x + y * v.strides.y;
}

// W: rows × K_pad row-major, zero-padded, upper trapezoidal; partial[p] = Σ_r (W_r · y_p)².
template <typename T>
__global__ void __launch_bounds__(kThreads, 1) whiten_tri_kernel(StridedView<const T> v, const int* kept, const double* mean,
                                                                 const double* W, int K, int K_pad, int rows, int m_tiles,
                                                                 long long P, bool f32, double* partial) {
    extern __shared__ double sm[];
    double* Ws = sm;
    double* Ys = sm + tile_offset(K_pad, m_tiles);
    double* s_mean = Ys + 2 * kChunk * kYStride;
    long long* s_off = reinterpret_cast<long long*>(s_mean + K_pad);
    __shared__ double s_q[kGroups][kPix];
    __shared__ int s_bad[kPix];
    for (int b = threadIdx.x; b < K; b += kThreads) s_mean[b] = mean[b], s_off[b] = (long long)kept[b] * v.strides.b;
    for (int m = 0; m < m_tiles; ++m) {
        const int ws = tile_stride(K_pad, m), width = K_pad - 16 * m;
        double* dst = Ws + tile_offset(K_pad, m);
        for (int e = threadIdx.x; e < 16 * width; e += kThreads) {
            const int r = e / width, k = e - r * width;
            dst[r * ws + k] = 16 * m + r < rows ? W[(long long)(16 * m + r) * K_pad + 16 * m + k] : 0.0;
        }
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int half = warp % 2, group = warp / 2;
    // This warp's slots, fixed for the kernel: the lane's A-fragment element (row g, band t) of tile
    // m at Ws[w_off + band], 8 rows further at + w_rows8; w_first = m (its first nonzero chunk), or
    // past every chunk for a slot beyond the tiles.
    int w_off[kSlots], w_rows8[kSlots], w_first[kSlots];
#pragma unroll
    for (int i = 0; i < kSlots; ++i) {
        const int m = slot_tile(i, group), ws = tile_stride(K_pad, m);
        w_first[i] = m < m_tiles ? m : 1 << 30;
        w_off[i] = int(tile_offset(K_pad, m)) + g * ws + t - 16 * m;
        w_rows8[i] = 8 * ws;
    }
    // Loader: pixel j = tid % 64, bands tid / 64 + 4e (e < 4) of the chunk.
    const int yj = threadIdx.x % kPix, yk = threadIdx.x / kPix;
    const long long n_tiles = (P + kPix - 1) / kPix;
    const int chunks = K_pad / kChunk;
    long long tile = blockIdx.x;
    if (tile >= n_tiles) return;
    T yraw[4];
    unsigned live = 0;
    bool bad = false, pix = false;
    long long off = 0;
    int chunk = 0;
    const auto fetch = [&](long long tl, int c) {
        if (c == 0) {
            const long long p = tl * kPix + yj;
            pix = p < P;
            off = pix ? pixel_offset(v, p) : 0;
        }
        chunk = c;
        live = 0;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int b = c * kChunk + yk + 4 * e;
            yraw[e] = T(0);
            if (pix && b < K) {
                yraw[e] = v.data[off + s_off[b]];
                live |= 1u << e;
            }
        }
    };
    const auto store = [&](int buf) {
        if (chunk == 0) bad = false;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int b = chunk * kChunk + yk + 4 * e;
            double y = 0;
            if (live >> e & 1u) {
                const double x = double(yraw[e]);
                bad = bad || !isfinite(x);
                y = f32 ? double(float(x - s_mean[b])) : x - s_mean[b];
            }
            Ys[buf * kChunk * kYStride + (yk + 4 * e) * kYStride + yj] = y;
        }
    };
    double acc[kSlots][4][4] = {};
    __syncthreads();  // s_mean, s_off
    fetch(tile, 0);
    store(0);
    if (threadIdx.x < kPix) s_bad[threadIdx.x] = 0;
    __syncthreads();
    for (int c = 0, step = 0;; ++step) {
        const bool last_chunk = c + 1 == chunks;
        const long long next_tile = last_chunk ? tile + gridDim.x : tile;
        const int next_c = last_chunk ? 0 : c + 1;
        const bool more = next_tile < n_tiles;
        const bool bad_done = bad;
        if (more) fetch(next_tile, next_c);
        const double* Y = Ys + (step & 1) * kChunk * kYStride;
        int n_active = 0;
#pragma unroll
        for (int i = 0; i < kSlots; ++i) n_active += w_first[i] <= c ? 1 : 0;
#pragma unroll
        for (int ks = 0; ks < kChunk; ks += 8) {
            const double* yrow = Y + (ks + t) * kYStride + 32 * half + g;
            double b[4][2];
#pragma unroll
            for (int n = 0; n < 4; ++n) b[n][0] = yrow[8 * n], b[n][1] = yrow[4 * kYStride + 8 * n];
            // The slots whose tile is nonzero in this chunk (tile ≤ c) lead: slots ascend.
            const auto load_a = [&](int i, double (&a)[4]) {
                const double* w0 = Ws + (w_off[i] + c * kChunk + ks);
                a[0] = w0[0], a[1] = w0[w_rows8[i]], a[2] = w0[4], a[3] = w0[w_rows8[i] + 4];
            };
            double a[2][4];
            if (n_active > 0) load_a(0, a[0]);
#pragma unroll
            for (int i = 0; i < kSlots; ++i)
                if (i < n_active) {
                    if (i + 1 < kSlots && i + 1 < n_active) load_a(i + 1, a[(i + 1) & 1]);
#pragma unroll
                    for (int n = 0; n < 4; ++n) mma16x8x8(acc[i][n], a[i & 1], b[n]);
                }
        }
        if (last_chunk) {
            // Σ z² over this group's rows for the warp's 32 pixels; lanes g = 0 hold pixels 8n + 2t + h.
            if (bad_done) s_bad[yj] = 1;
#pragma unroll
            for (int n = 0; n < 4; ++n)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    double q = 0;
#pragma unroll
                    for (int i = 0; i < kSlots; ++i) {
                        q = fma(acc[i][n][h], acc[i][n][h], q);
                        q = fma(acc[i][n][2 + h], acc[i][n][2 + h], q);
                        acc[i][n][h] = acc[i][n][2 + h] = 0;
                    }
                    q += __shfl_xor_sync(0xffffffffu, q, 4);
                    q += __shfl_xor_sync(0xffffffffu, q, 8);
                    q += __shfl_xor_sync(0xffffffffu, q, 16);
                    if (g == 0) s_q[group][32 * half + 8 * n + 2 * t + h] = q;
                }
            __syncthreads();  // s_q, s_bad complete
            if (threadIdx.x < kPix) {
                const long long p = tile * kPix + threadIdx.x;
                double q = 0;
#pragma unroll
                for (int gr = 0; gr < kGroups; ++gr) q += s_q[gr][threadIdx.x];
                if (p < P) partial[p] = s_bad[threadIdx.x] ? CUDART_NAN : q;
            }
        }
        if (!more) break;
        store((step + 1) & 1);
        __syncthreads();
        if (last_chunk && threadIdx.x < kPix) s_bad[threadIdx.x] = 0;  // read above, before the barrier
        if (last_chunk) __syncthreads();
        tile = next_tile;
        c = next_c;
    }
}

}  // namespace

bool whiten_tri_fits(int K, int rows) {
    const int K_pad = (K + kChunk - 1) / kChunk * kChunk, m_tiles = (rows + 15) / 16;
    if (K < 1 || rows < 1 || m_tiles > kMaxTiles) return false;
    int device = 0, optin = 0, major = 0;
    CUBEKIT_CUDA_CHECK(cudaGetDevice(&device));
    CUBEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    CUBEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    // Static shared memory: s_q and s_bad (2.3 KB), + 1 KB the runtime reserves per block.
    return major >= 9 && smem_bytes(K_pad, m_tiles) + 4096 <= std::size_t(optin);
}

void whiten_tri(const Context& ctx, const CubeView& cube, const int* kept, const double* mean, const std::vector<double>& W,
                int rows, bool f32, double* partial) {
    const int K = int(W.size() / std::size_t(rows));
    const int K_pad = (K + kChunk - 1) / kChunk * kChunk, m_tiles = (rows + 15) / 16;
    std::vector<double> Wp(std::size_t(rows) * std::size_t(K_pad), 0.0);
    for (int r = 0; r < rows; ++r)
        for (int b = 0; b < K; ++b) {
            const double w = W[std::size_t(r) * std::size_t(K) + std::size_t(b)];
            Wp[std::size_t(r) * std::size_t(K_pad) + std::size_t(b)] = f32 ? double(float(w)) : w;
        }
    const DeviceBuffer d_W = upload_vector(ctx, Wp);
    int device = 0, sms = 0;
    CUBEKIT_CUDA_CHECK(cudaGetDevice(&device));
    CUBEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const long long P = (long long)cube.num_pixels();
    const long long n_tiles = (P + kPix - 1) / kPix;
    const dim3 grid(unsigned(std::max(1ll, std::min<long long>(sms, n_tiles))));
    const std::size_t smem = smem_bytes(K_pad, m_tiles);
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        CUBEKIT_CUDA_CHECK(cudaFuncSetAttribute(whiten_tri_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        whiten_tri_kernel<T><<<grid, kThreads, smem, stream_of(ctx)>>>(cube.typed<T>(), kept, mean,
                                                                      static_cast<const double*>(d_W.data()), K, K_pad,
                                                                      rows, m_tiles, P, f32, partial);
        CUBEKIT_CHECK_LAUNCH(ctx, "whiten_tri_kernel", grid, dim3(kThreads));
    });
    ctx.synchronize();  // d_W is freed on return
}

}  // namespace cubekit::detail
