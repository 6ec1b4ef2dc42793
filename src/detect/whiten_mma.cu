// Global scoring's whitening GEMM with W resident in shared memory (classical_internal.hpp:
// whiten_row_blocks, whiten_resident). classical_mma.cu's whiten_mma_kernel re-reads its 64-row
// slice of W from L2 for every 128-pixel tile (W: r×K f64, 333 KB for K = r = 200; 6 GB of L2
// traffic for a 1024² scene) and ran at 18 % of the m8n8k4 DMMA rate. Here:
// - W's rows are split into row blocks of at most 8 tiles of 16 rows (2 for r = 200: 112 + 96 rows)
//   that fit in shared memory (K = 200: 112 × 212 doubles = 190 KB); one persistent block per SM keeps
//   its row block for the whole scene and walks the 128-pixel tiles, so W is read once per SM;
// - the products on the sm_90 m16n8k8 DMMA shape (the full 67 TFLOP/s; m8n8k4 runs at half, and k8
//   issues half the instructions of k4: one block per SM leaves two warps per scheduler);
// - the pixel tiles stream through a double-buffered shared copy, 16 bands at a time, loaded one chunk
//   ahead into registers (any element type, any strides: y = x − μ, rounded to f32 in f32 mode);
// - each warp owns 16 pixels × all the block's rows and writes Σ_rows z² per pixel into
//   partial[rb·P + p]; finish_kernel adds the row blocks in order, as before.
// Floor (K = r = 200, N = 1024²): 2·N·r·K = 8.4e10 flops → 1.25 ms; with the row and band padding
// (224 × 208) 1.46 ms.
#include <cuda_runtime.h>
#include <math_constants.h>

#include <algorithm>

#include "core/cuda_check.hpp"
#include "core/device_vector.hpp"
#include "cubekit/error.hpp"
#include "detect/classical_internal.hpp"
#include "detect/dmma.cuh"

namespace cubekit::detail {
namespace {

constexpr int kThreads = 256;
constexpr int kPix = 128;          // pixels per tile: 8 warps × 2 n-tiles of 8
constexpr int kChunk = 16;         // bands per staged chunk
constexpr int kMaxTiles = 7;       // 16-row tiles per row block (accumulators: 7 × 2 × 4 doubles)
constexpr int kYStride = kPix + 8;  // ≡ 8 (mod 16) doubles: conflict-free B fragments

struct Layout {
    int K, K_pad, rows, m_tiles;  // rows of W; 16-row tiles in all
    int per_block, blocks;        // tiles per row block, row blocks
    int w_stride;                 // K_pad + 4 ≡ 4 (mod 16): conflict-free A fragments
    std::size_t smem() const {  // W, the Y double buffer, μ and the kept bands' sample offsets
        return sizeof(double) * (std::size_t(16 * per_block) * std::size_t(w_stride) + 2u * kChunk * kYStride) +
               std::size_t(K_pad) * (sizeof(double) + sizeof(long long));
    }
};

template <typename T>
__device__ __forceinline__ long long pixel_offset(const StridedView<const T>& v, long long p) {
    const long long y = p / v.width, x = p - y * v.width;
    return x * v.strides.x + y * v.strides.y;
}

// Grid: one block per SM (a multiple of the row blocks); block b keeps row block b % blocks.
// W: rows × K_pad row-major (zero-padded) in global memory.
template <typename T>
__global__ void __launch_bounds__(kThreads, 1) whiten_resident_kernel(StridedView<const T> v, const int* kept,
                                                                      const double* mean, const double* W, Layout L,
                                                                      long long P, bool f32, double* partial) {
    extern __shared__ double sm[];
    double* Ws = sm;
    double* Ys = sm + 16 * L.per_block * L.w_stride;
    double* s_mean = Ys + 2 * kChunk * kYStride;
    long long* s_off = reinterpret_cast<long long*>(s_mean + L.K_pad);
    __shared__ int s_bad[kPix];
    for (int b = threadIdx.x; b < L.K; b += kThreads) s_mean[b] = mean[b], s_off[b] = (long long)kept[b] * v.strides.b;
    const int rb = blockIdx.x % L.blocks, r0 = rb * 16 * L.per_block;
    const int tiles_here = min(L.per_block, L.m_tiles - rb * L.per_block);
    for (int e = threadIdx.x; e < 16 * L.per_block * L.K_pad; e += kThreads) {
        const int r = e / L.K_pad, k = e - r * L.K_pad;
        Ws[r * L.w_stride + k] = r0 + r < L.rows ? W[(long long)(r0 + r) * L.K_pad + k] : 0.0;
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    // Loader: pixel j = tid % 128, bands tid / 128 + 2e (e < 8) of the chunk.
    const int yj = threadIdx.x % kPix, yk = threadIdx.x / kPix;
    const long long n_tiles = (P + kPix - 1) / kPix;
    const int chunks = L.K_pad / kChunk;
    const long long stride_tiles = gridDim.x / L.blocks;
    long long tile = blockIdx.x / L.blocks;
    if (tile >= n_tiles) return;
    // The next chunk's raw samples are only loaded here; their use (the finiteness check, y = x − μ)
    // waits until store(), after the chunk's products: a use right after the loads would stall the warp
    // for the memory latency before its tensor-core work.
    T yraw[8];
    unsigned live = 0;  // bit e: element e is a sample (pixel < P, band < K)
    bool bad = false;
    long long off = 0;
    bool pix = false;
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
        for (int e = 0; e < 8; ++e) {
            const int b = c * kChunk + yk + 2 * e;
            yraw[e] = T(0);
            if (pix && b < L.K) {
                yraw[e] = v.data[off + s_off[b]];
                live |= 1u << e;
            }
        }
    };
    const auto store = [&](int buf) {
        if (chunk == 0) bad = false;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int b = chunk * kChunk + yk + 2 * e;
            double y = 0;
            if (live >> e & 1u) {
                const double x = double(yraw[e]);
                bad = bad || !isfinite(x);
                y = f32 ? double(float(x - s_mean[b])) : x - s_mean[b];
            }
            Ys[buf * kChunk * kYStride + (yk + 2 * e) * kYStride + yj] = y;
        }
    };
    double acc[kMaxTiles][2][4] = {};
    __syncthreads();  // s_mean, s_off
    fetch(tile, 0);
    store(0);
    if (threadIdx.x < kPix) s_bad[threadIdx.x] = 0;
    __syncthreads();
    for (int c = 0, step = 0;; ++step) {
        // The next chunk (of this tile or the next one) into registers while this one computes.
        const bool last_chunk = c + 1 == chunks;
        const long long next_tile = last_chunk ? tile + stride_tiles : tile;
        const int next_c = last_chunk ? 0 : c + 1;
        const bool more = next_tile < n_tiles;
        const bool bad_done = bad;  // this tile's flag (its last chunk was stored), before store() starts the next tile's
        if (more) fetch(next_tile, next_c);
        const double* Y = Ys + (step & 1) * kChunk * kYStride;
        // Two k8 steps per chunk; the next row tile's A fragment is loaded while this one's products issue.
#pragma unroll
        for (int ks = 0; ks < kChunk; ks += 8) {
            const double* wrow = Ws + (c * kChunk + ks + t);
            const double* yrow = Y + (ks + t) * kYStride + warp * 16 + g;
            const double b0[2] = {yrow[0], yrow[4 * kYStride]}, b1[2] = {yrow[8], yrow[4 * kYStride + 8]};
            const auto load_a = [&](int m, double (&a)[4]) {
                const double* w0 = wrow + (16 * m + g) * L.w_stride;
                a[0] = w0[0], a[1] = w0[8 * L.w_stride], a[2] = w0[4], a[3] = w0[8 * L.w_stride + 4];
            };
            double a[2][4];
            load_a(0, a[0]);
#pragma unroll
            for (int m = 0; m < kMaxTiles; ++m)
                if (m < tiles_here) {
                    if (m + 1 < kMaxTiles && m + 1 < tiles_here) load_a(m + 1, a[(m + 1) & 1]);
                    mma16x8x8(acc[m][0], a[m & 1], b0);
                    mma16x8x8(acc[m][1], a[m & 1], b1);
                }
        }
        if (last_chunk) {
            // Σ z² over this block's rows for the warp's 16 pixels; lanes g = 0 hold pixels 2t, 2t + 1.
            if (bad_done) s_bad[yj] = 1;
            double s[2][2];
#pragma unroll
            for (int n = 0; n < 2; ++n)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    double q = 0;
#pragma unroll
                    for (int m = 0; m < kMaxTiles; ++m) {
                        q = fma(acc[m][n][h], acc[m][n][h], q);
                        q = fma(acc[m][n][2 + h], acc[m][n][2 + h], q);
                        acc[m][n][h] = acc[m][n][2 + h] = 0;
                    }
                    q += __shfl_xor_sync(0xffffffffu, q, 4);
                    q += __shfl_xor_sync(0xffffffffu, q, 8);
                    q += __shfl_xor_sync(0xffffffffu, q, 16);
                    s[n][h] = q;
                }
            __syncthreads();  // s_bad complete
            if (g == 0)
#pragma unroll
                for (int n = 0; n < 2; ++n)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const int j = warp * 16 + 8 * n + 2 * t + h;  // = yj of a loader thread
                        const long long p = tile * kPix + j;
                        if (p < P) partial[(long long)rb * P + p] = s_bad[j] ? CUDART_NAN : s[n][h];
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

Layout layout_for(const Context& ctx, int K, int rows) {
    Layout L{};
    L.K = K;
    L.K_pad = (K + kChunk - 1) / kChunk * kChunk;
    L.rows = rows;
    L.m_tiles = (rows + 15) / 16;
    L.w_stride = L.K_pad + 4;
    int device = 0, optin = 0, major = 0;
    CUBEKIT_CUDA_CHECK(cudaGetDevice(&device));
    CUBEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    CUBEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    (void)ctx;
    if (major < 9) return L;  // blocks = 0: the m16n8 f64 shapes are sm_90's; the streamed kernel scores
    for (L.per_block = std::min(kMaxTiles, L.m_tiles); L.per_block > 0; --L.per_block)
        if (L.smem() + 1024 + kPix * sizeof(int) <= std::size_t(optin)) break;
    L.blocks = L.per_block > 0 ? (L.m_tiles + L.per_block - 1) / L.per_block : 0;
    // More than 4 row blocks re-read the cube too often to pay: the streamed kernel does better.
    if (L.per_block == 0 || L.blocks > 4) L.blocks = 0;
    else L.per_block = (L.m_tiles + L.blocks - 1) / L.blocks;  // balance the row blocks
    return L;
}

}  // namespace

int whiten_row_blocks(const Context& ctx, int K, int rows) {
    if (K < 1 || rows < 1) return 0;
    return layout_for(ctx, K, rows).blocks;
}

void whiten_resident(const Context& ctx, const CubeView& cube, const int* kept, const double* mean,
                     const std::vector<double>& W, int rows, bool f32, double* partial) {
    const int K = int(W.size() / std::size_t(rows));
    const Layout L = layout_for(ctx, K, rows);
    if (L.blocks == 0) throw InvalidInput("detect: internal: whiten_resident called where it does not apply");
    // W row-major, zero-padded to K_pad columns; f32 whitening: rounded to f32 (the CPU's operands).
    std::vector<double> Wp(std::size_t(rows) * std::size_t(L.K_pad), 0.0);
    for (int r = 0; r < rows; ++r)
        for (int b = 0; b < K; ++b) {
            const double w = W[std::size_t(r) * std::size_t(K) + std::size_t(b)];
            Wp[std::size_t(r) * std::size_t(L.K_pad) + std::size_t(b)] = f32 ? double(float(w)) : w;
        }
    const DeviceBuffer d_W = upload_vector(ctx, Wp);
    int device = 0, sms = 0;
    CUBEKIT_CUDA_CHECK(cudaGetDevice(&device));
    CUBEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const long long P = (long long)cube.num_pixels();
    const long long n_tiles = (P + kPix - 1) / kPix;
    const long long per_row_block = std::max(1ll, std::min<long long>(sms / L.blocks, n_tiles));
    const dim3 grid(unsigned(per_row_block * L.blocks));
    const std::size_t smem = L.smem();
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        CUBEKIT_CUDA_CHECK(cudaFuncSetAttribute(whiten_resident_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        whiten_resident_kernel<T><<<grid, kThreads, smem, stream_of(ctx)>>>(cube.typed<T>(), kept, mean,
                                                                           static_cast<const double*>(d_W.data()), L, P,
                                                                           f32, partial);
        CUBEKIT_CHECK_LAUNCH(ctx, "whiten_resident_kernel", grid, dim3(kThreads));
    });
    ctx.synchronize();  // d_W is freed on return
}

}  // namespace cubekit::detail
