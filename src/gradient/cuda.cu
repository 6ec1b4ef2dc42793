// RCMG, CUDA backend (spec/gradient-watershed.md, A3–A4; seed 004, CA–WSHED–GPU, Figure 5.2).
// Three mappings of the same arithmetic:
//   spectral      the seed's: one thread per output pixel, loop over bands, a band tile with its
//                 one-pixel apron in shared memory, all n(n−1)/2 pair sums in registers.
//   shared-pairs  (auto) like spectral, but each distinct neighbour-pair distance is computed once
//                 per tile: D_ij at p = E_d(p + pos_i) with d = pos_j − pos_i, E_d(q) = Σ_b (x_q − x_{q+d})²,
//                 12 offsets for 8-connectivity (6 for 4) instead of 36 (10) pairs per pixel.
//   spatial       the seed's: one warp per pixel, lanes over bands, a warp tree reduction per pair.
// The first two add (x_i − x_j)² band by band in order 0..B−1, exactly as the CPU reference does
// (built with --fmad=false), so they are bit-identical to it. Spatial sums in a different order.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "core/cuda_check.hpp"
#include "core/cuda_helpers.cuh"
#include "gradient/rcmg_internal.hpp"

namespace cubekit::detail {
namespace {

// ---- Window, pairs and offsets (compile time) -------------------------------------------------

// Vertex k of the window at (dy, dx), raster order (spec A3), and the distinct pair offsets
// pos_j − pos_i (i < j), each once: 6 for the cross, 12 for the square. Functions rather than
// arrays so that device code folds them to constants in unrolled loops.
template <int N> struct Win {
    __host__ __device__ static constexpr int dy(int k) { return N == 9 ? k / 3 - 1 : (k == 0 ? -1 : (k == 4 ? 1 : 0)); }
    __host__ __device__ static constexpr int dx(int k) { return N == 9 ? k % 3 - 1 : (k == 1 ? -1 : (k == 3 ? 1 : 0)); }
    static constexpr int num_offsets = N == 9 ? 12 : 6;
    __host__ __device__ static constexpr int ody(int o) {
        return N == 9 ? (o < 2 ? 0 : (o < 7 ? 1 : 2)) : (o < 2 ? 0 : (o < 5 ? 1 : 2));
    }
    __host__ __device__ static constexpr int odx(int o) {
        return N == 9 ? (o < 2 ? o + 1 : (o < 7 ? o - 4 : o - 9)) : (o < 2 ? o + 1 : (o < 5 ? o - 3 : 0));
    }
};

template <int N>
__host__ __device__ constexpr int offset_index(int i, int j) {
    const int dy = Win<N>::dy(j) - Win<N>::dy(i), dx = Win<N>::dx(j) - Win<N>::dx(i);
    for (int o = 0; o < Win<N>::num_offsets; ++o)
        if (Win<N>::ody(o) == dy && Win<N>::odx(o) == dx) return o;
    return -1;
}

template <typename T> __device__ __forceinline__ bool is_nan(T v) { return v != v; }

// r rounds of "reject the lexicographically first maximal pair", then the maximum of the rest
// (spec A3). Fully unrolled over pairs so D stays in registers; a vertex bitmask tracks A_t.
template <int N, typename Acc>
__device__ __forceinline__ Acc robust_max(const Acc (&D)[N * (N - 1) / 2], int reject) {
    constexpr int P = N * (N - 1) / 2;
    bool nan = false;
#pragma unroll
    for (int p = 0; p < P; ++p) nan |= is_nan(D[p]);
    if (nan) return Acc(NAN);
    unsigned active = (1u << N) - 1;
    Acc best = Acc(0);
    for (int t = 0; t <= reject; ++t) {
        bool found = false;
        unsigned best_mask = 0;
        int p = 0;
#pragma unroll
        for (int i = 0; i < N; ++i)
#pragma unroll
            for (int j = i + 1; j < N; ++j, ++p) {
                const unsigned mask = (1u << i) | (1u << j);
                if ((active & mask) == mask && (!found || D[p] > best)) {
                    best = D[p];
                    best_mask = mask;
                    found = true;
                }
            }
        active &= ~best_mask;
    }
    return best;
}

template <typename Acc, typename Out>
__device__ __forceinline__ Out finish(Acc m, bool squared) {
    const double g = squared ? double(m) : sqrt(double(m));  // sqrt once, in f64 (A3)
    return Out(g);
}

// D[p] += (v_i − v_j)² for every pair p = (i, j), i < j, in lexicographic order. Nested,
// fully unrolled loops keep every index a compile-time constant (registers, no local memory).
template <int N, typename Acc>
__device__ __forceinline__ void add_pair_terms(Acc (&D)[N * (N - 1) / 2], const Acc (&v)[N]) {
    int p = 0;
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
        for (int j = i + 1; j < N; ++j, ++p) {
            const Acc diff = v[i] - v[j];
            D[p] = D[p] + diff * diff;
        }
}

__device__ __forceinline__ int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Sizes and pitches (elements) of a BSQ input that may be a window of a larger cube: rows of a
// band are row_stride apart (int: in-plane offsets stay 32-bit, checked by the launcher), bands
// band_stride apart; output rows out_row_stride apart.
struct Geometry {
    int width, height, bands;
    int row_stride;
    std::int64_t band_stride;
    std::int64_t out_row_stride;
};

// A band tile of TW×TH samples whose top-left is image (x0, y0), clamped to the image, staged
// through registers (kLoads per thread) so that band b+1 is in flight while band b is used.
template <typename T, int TW, int TH, int Threads>
struct TileLoader {
    static constexpr int kLoads = (TW * TH + Threads - 1) / Threads;
    T reg[kLoads];
    int offset[kLoads];  // in-plane element offset of each load (−1 = past the tile)

    __device__ void init(int tid, int x0, int y0, int W, int H, int row_stride) {
#pragma unroll
        for (int k = 0; k < kLoads; ++k) {
            const int e = tid + k * Threads;
            offset[k] = -1;
            if (e < TW * TH) {
                const int gx = clampi(x0 + e % TW, 0, W - 1), gy = clampi(y0 + e / TW, 0, H - 1);
                offset[k] = gy * row_stride + gx;
            }
        }
    }
    __device__ void load(const T* __restrict__ plane) {
#pragma unroll
        for (int k = 0; k < kLoads; ++k)
            if (offset[k] >= 0) reg[k] = __ldg(plane + offset[k]);
    }
    template <typename Acc>
    __device__ void store(Acc* tile, int tid) const {
#pragma unroll
        for (int k = 0; k < kLoads; ++k)
            if (offset[k] >= 0) tile[tid + k * Threads] = Acc(reg[k]);
    }
};

// ---- spectral: the seed's mapping, pairs in registers ----------------------------------------
constexpr int kSpecX = 32;  // a warp spans a tile row: band rows are read coalesced
constexpr int kSpecY = 8;

// One thread per output pixel of a kSpecX×kSpecY tile; per band the block stages the tile and its
// apron ((kSpecX+2)×(kSpecY+2), double-buffered) and each thread adds the band's term to its
// n(n−1)/2 pair sums. DRAM: the cube once (apron re-reads hit L2) + the output.
template <typename T, typename Acc, typename Out, int N>
__global__ void __launch_bounds__(kSpecX * kSpecY)
rcmg_spectral_kernel(const T* __restrict__ cube, Out* __restrict__ out, Geometry g, int reject, bool squared) {
    constexpr int TW = kSpecX + 2, TH = kSpecY + 2, P = N * (N - 1) / 2;
    __shared__ Acc tile[2][TW * TH];
    const int W = g.width, H = g.height, B = g.bands;
    const int tid = threadIdx.y * kSpecX + threadIdx.x;
    const int x0 = blockIdx.x * kSpecX, y0 = blockIdx.y * kSpecY;
    TileLoader<T, TW, TH, kSpecX * kSpecY> loader;
    loader.init(tid, x0 - 1, y0 - 1, W, H, g.row_stride);
    const std::int64_t plane = g.band_stride;

    Acc D[P];
#pragma unroll
    for (int p = 0; p < P; ++p) D[p] = Acc(0);
    loader.load(cube);
    for (int b = 0; b < B; ++b) {
        Acc* t = tile[b & 1];
        loader.store(t, tid);
        __syncthreads();
        if (b + 1 < B) loader.load(cube + std::int64_t(b + 1) * plane);
        Acc v[N];
#pragma unroll
        for (int k = 0; k < N; ++k) v[k] = t[(threadIdx.y + 1 + Win<N>::dy(k)) * TW + threadIdx.x + 1 + Win<N>::dx(k)];
        add_pair_terms<N>(D, v);
        // The other buffer is rewritten only after the next barrier, so one barrier per band suffices.
    }
    const int x = x0 + threadIdx.x, y = y0 + threadIdx.y;
    if (x < W && y < H) out[std::int64_t(y) * g.out_row_stride + x] = finish<Acc, Out>(robust_max<N>(D, reject), squared);
}

// ---- shared-pairs (auto): each distinct neighbour distance once --------------------------------
constexpr int kPairsX = 32;             // threads per row; the extended region is 32 columns
constexpr int kPairsY = 8;              // thread rows
constexpr int kPairsRows = 2;           // region rows per thread (consecutive): 16 region rows
constexpr int kRegionW = kPairsX;       // region = output tile + one-pixel apron
constexpr int kRegionH = kPairsY * kPairsRows;
constexpr int kOutX = kRegionW - 2;     // 30×14 output pixels per block
constexpr int kOutY = kRegionH - 2;
constexpr int kPadX = 2;                // band tile: region + 2 columns each side + 2 rows below, so
constexpr int kBandW = kRegionW + 2 * kPadX;  // every thread computes every offset unconditionally
constexpr int kBandH = kRegionH + 2;

template <int N, typename Acc>
constexpr std::size_t pairs_smem_bytes() {
    const std::size_t band = 2 * std::size_t(kBandW) * kBandH * sizeof(Acc);
    const std::size_t dist = std::size_t(Win<N>::num_offsets) * kRegionW * kRegionH * sizeof(Acc);
    return band > dist ? band : dist;
}

// Thread (tx, ty) owns region column tx, rows kPairsRows·ty + k. Per band it adds
// (x_q − x_{q+d})² to E_d(q) for its region pixels q and every offset d (registers). After the
// band loop the E_d are stored in shared memory (aliasing the band tiles) and each output pixel
// gathers its n(n−1)/2 pair distances from them. Same value, order and rounding as the CPU:
// D_ij at p is E_{pos_j−pos_i}(p + pos_i), a sum of the same squares in the same band order.
// DRAM: the cube once (apron re-reads hit L2) + the output. Work: 12 (6) offsets per region
// pixel per band, 1.22× the output pixels; per thread and band 20 LDS.64 and 72 FP64 operations
// (8-conn, f64), so shared-memory bandwidth and the FP64 pipe bound it, not DRAM.
// Measured 2026-11-22, H100, Pavia-sized 610×340×103 f32 (bench/results/2026-11-22-h100.md):
// 8-conn f64 0.18 ms (floor 0.029), 4-conn f32 0.073 ms.
template <typename T, typename Acc, typename Out, int N>
__global__ void __launch_bounds__(kPairsX * kPairsY)
rcmg_shared_pairs_kernel(const T* __restrict__ cube, Out* __restrict__ out, Geometry g, int reject, bool squared) {
    constexpr int NO = Win<N>::num_offsets, P = N * (N - 1) / 2;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    Acc* smem = reinterpret_cast<Acc*>(smem_raw);
    const int W = g.width, H = g.height, B = g.bands;
    const int tid = threadIdx.y * kPairsX + threadIdx.x;
    const int ox = blockIdx.x * kOutX, oy = blockIdx.y * kOutY;  // first output pixel of the tile
    TileLoader<T, kBandW, kBandH, kPairsX * kPairsY> loader;
    loader.init(tid, ox - 1 - kPadX, oy - 1, W, H, g.row_stride);
    const std::int64_t plane = g.band_stride;

    Acc E[kPairsRows][NO];
#pragma unroll
    for (int r = 0; r < kPairsRows; ++r)
#pragma unroll
        for (int o = 0; o < NO; ++o) E[r][o] = Acc(0);

    const int cx = threadIdx.x + kPadX;           // band-tile column of the owned region column
    const int ry = threadIdx.y * kPairsRows;      // first owned region row (= band-tile row)
    loader.load(cube);
    for (int b = 0; b < B; ++b) {
        Acc* t = smem + (b & 1) * (kBandW * kBandH);
        loader.store(t, tid);
        __syncthreads();
        if (b + 1 < B) loader.load(cube + std::int64_t(b + 1) * plane);
        // Rows ry .. ry + kPairsRows + 1 and columns cx−2 .. cx+2 of the band tile.
        Acc v[kPairsRows + 2][5];
#pragma unroll
        for (int r = 0; r < kPairsRows + 2; ++r)
#pragma unroll
            for (int c = 0; c < 5; ++c) v[r][c] = t[(ry + r) * kBandW + cx - 2 + c];
#pragma unroll
        for (int r = 0; r < kPairsRows; ++r)
#pragma unroll
            for (int o = 0; o < NO; ++o) {
                const Acc diff = v[r][2] - v[r + Win<N>::ody(o)][2 + Win<N>::odx(o)];
                E[r][o] = E[r][o] + diff * diff;
            }
    }
    __syncthreads();  // the band tiles are dead; their memory now holds E
#pragma unroll
    for (int r = 0; r < kPairsRows; ++r)
#pragma unroll
        for (int o = 0; o < NO; ++o) smem[(o * kRegionH + ry + r) * kRegionW + threadIdx.x] = E[r][o];
    __syncthreads();

    for (int k = tid; k < kOutX * kOutY; k += kPairsX * kPairsY) {
        const int lx = k % kOutX, ly = k / kOutX;   // output pixel within the tile
        const int x = ox + lx, y = oy + ly;
        if (x >= W || y >= H) continue;
        Acc D[P];
        int p = 0;
#pragma unroll
        for (int i = 0; i < N; ++i)
#pragma unroll
            for (int j = i + 1; j < N; ++j, ++p) {
                const int o = offset_index<N>(i, j);
                D[p] = smem[(o * kRegionH + ly + 1 + Win<N>::dy(i)) * kRegionW + lx + 1 + Win<N>::dx(i)];
            }
        out[std::int64_t(y) * g.out_row_stride + x] = finish<Acc, Out>(robust_max<N>(D, reject), squared);
    }
}

// ---- spatial: the seed's band-parallel mapping -----------------------------------------------
constexpr int kSpatialPixels = 4;  // warps per block, one output pixel each

// Warp w of the block computes pixel blockIdx.x·4 + w; lane l adds the terms of bands l, l+32, …
// to its n(n−1)/2 partial sums, then a butterfly (shfl_xor) tree adds the 32 partials. Reads are
// strided by a plane (uncoalesced), as in the seed; kept for comparison, not chosen by auto.
template <typename T, typename Acc, typename Out, int N>
__global__ void __launch_bounds__(32 * kSpatialPixels)
rcmg_spatial_kernel(const T* __restrict__ cube, Out* __restrict__ out, Geometry g, int reject, bool squared) {
    constexpr int P = N * (N - 1) / 2;
    const int W = g.width, H = g.height, B = g.bands;
    const long long pixel = (long long)blockIdx.x * kSpatialPixels + threadIdx.y;
    if (pixel >= (long long)W * H) return;  // whole warp leaves together
    const int x = int(pixel % W), y = int(pixel / W);
    const std::int64_t plane = g.band_stride;
    int offs[N];
#pragma unroll
    for (int k = 0; k < N; ++k) offs[k] = clampi(y + Win<N>::dy(k), 0, H - 1) * g.row_stride + clampi(x + Win<N>::dx(k), 0, W - 1);
    Acc D[P];
#pragma unroll
    for (int p = 0; p < P; ++p) D[p] = Acc(0);
    for (int b = threadIdx.x; b < B; b += 32) {
        const T* band = cube + std::int64_t(b) * plane;
        Acc v[N];
#pragma unroll
        for (int k = 0; k < N; ++k) v[k] = Acc(__ldg(band + offs[k]));
        add_pair_terms<N>(D, v);
    }
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
        for (int s = 16; s >= 1; s /= 2) D[p] = D[p] + __shfl_xor_sync(0xffffffffu, D[p], s);
    if (threadIdx.x == 0) out[std::int64_t(y) * g.out_row_stride + x] = finish<Acc, Out>(robust_max<N>(D, reject), squared);
}

// ---- launchers --------------------------------------------------------------------------------
template <typename T, typename Acc, typename Out, int N>
void launch(const Context& ctx, const T* cube, Out* out, const Geometry& g, const RcmgOptions& options) {
    const cudaStream_t stream = stream_of(ctx);
    const int W = g.width, H = g.height;
    switch (options.partition) {
        case RcmgPartition::Spectral: {
            const dim3 block(kSpecX, kSpecY), grid(div_up(W, kSpecX), div_up(H, kSpecY));
            rcmg_spectral_kernel<T, Acc, Out, N><<<grid, block, 0, stream>>>(cube, out, g, options.reject, options.squared);
            CUBEKIT_CHECK_LAUNCH(ctx, "rcmg_spectral_kernel", grid, block);
            break;
        }
        case RcmgPartition::Spatial: {
            const long long pixels = (long long)W * H;
            const dim3 block(32, kSpatialPixels), grid(unsigned((pixels + kSpatialPixels - 1) / kSpatialPixels));
            rcmg_spatial_kernel<T, Acc, Out, N><<<grid, block, 0, stream>>>(cube, out, g, options.reject, options.squared);
            CUBEKIT_CHECK_LAUNCH(ctx, "rcmg_spatial_kernel", grid, block);
            break;
        }
        case RcmgPartition::Auto: {
            constexpr std::size_t smem = pairs_smem_bytes<N, Acc>();
            static_assert(smem <= 48 * 1024, "shared-pairs tile must fit the default 48 KB");
            const dim3 block(kPairsX, kPairsY), grid(div_up(W, kOutX), div_up(H, kOutY));
            rcmg_shared_pairs_kernel<T, Acc, Out, N><<<grid, block, smem, stream>>>(cube, out, g, options.reject, options.squared);
            CUBEKIT_CHECK_LAUNCH(ctx, "rcmg_shared_pairs_kernel", grid, block);
            break;
        }
    }
}

template <typename T, typename Acc, typename Out>
void launch_connectivity(const Context& ctx, const CubeView& cube, const MutableCubeView& out, const RcmgOptions& options) {
    const Geometry g{cube.width(), cube.height(), cube.bands(), int(cube.height() > 1 ? cube.strides().y : cube.width()),
                     cube.strides().b, out.height() > 1 ? out.strides().y : out.width()};
    const T* d_cube = cube.typed<T>().data;
    Out* d_out = out.typed<Out>().data;
    if (options.connectivity == 4) launch<T, Acc, Out, 5>(ctx, d_cube, d_out, g, options);
    else launch<T, Acc, Out, 9>(ctx, d_cube, d_out, g, options);
}

}  // namespace

bool rcmg_cuda_accepts(const CubeView& cube) {
    // Rows contiguous, bands after rows (a BSQ cube or a window of one), in-plane offsets < 2^31.
    return cube.is_pitched(Layout::BSQ) &&
           std::int64_t(cube.height()) * (cube.height() > 1 ? cube.strides().y : cube.width()) < std::int64_t(INT32_MAX);
}

void rcmg_cuda(const Context& ctx, const CubeView& cube, const MutableCubeView& out, const RcmgOptions& options) {
    if (cube.num_pixels() > std::size_t(INT32_MAX))
        throw InvalidInput("rcmg: " + cube.describe() + " has more than 2^31 pixels per band; tile it");
    CUBEKIT_CUDA_CHECK(cudaSetDevice(ctx.device()));
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if (options.precision == Precision::F64) {
            if (options.out_type == DType::F64) launch_connectivity<T, double, double>(ctx, cube, out, options);
            else launch_connectivity<T, double, float>(ctx, cube, out, options);
        } else {
            launch_connectivity<T, float, float>(ctx, cube, out, options);
        }
    });
}

}  // namespace cubekit::detail
