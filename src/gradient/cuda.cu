// RCMG, CUDA backend (spec/gradient-watershed.md, A3–A4; seed 004, CA–WSHED–GPU, Figure 5.2).
// Three mappings of the same arithmetic:
//   spectral      the seed's: one thread per output pixel, loop over bands, a band tile with its
//                 one-pixel apron in shared memory, all n(n−1)/2 pair sums in registers.
//   shared-pairs  (auto) like spectral, but each distinct neighbour-pair distance is computed once
//                 per tile: D_ij at p = E_d(p + pos_i) with d = pos_j − pos_i, E_d(q) = Σ_b (x_q − x_{q+d})²,
//                 12 offsets for 8-connectivity (6 for 4) instead of 36 (10) pairs per pixel.
//   spatial       the seed's: one warp per pixel, lanes over bands, a warp tree reduction per pair.
// The first two add (x_i − x_j)² band by band in order 0..B−1, exactly as the CPU reference does
// (built with --fmad=false), so they are bit-identical to it; shared-pairs fuses the square and the
// add into one FMA only for band tiles where the square is exact (integers, rcmg_kernels.cuh), the
// same number. Spatial sums in a different order.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/cuda_check.hpp"
#include "core/cuda_helpers.cuh"
#include "gradient/rcmg_internal.hpp"
#include "gradient/rcmg_kernels.cuh"

namespace cubekit::detail {
namespace {

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
    using Plan = TilePlan<T, TW, TH, kSpecX * kSpecY>;
    Plan plan;
    plan.init(tid, x0 - 1, y0 - 1, W, H, g.row_stride);
    T next[Plan::kLoads];
    const std::int64_t plane = g.band_stride;

    Acc D[P];
#pragma unroll
    for (int p = 0; p < P; ++p) D[p] = Acc(0);
    plan.load(next, cube);
    for (int b = 0; b < B; ++b) {
        Acc* t = tile[b & 1];
        plan.store(next, t, tid);
        __syncthreads();
        if (b + 1 < B) plan.load(next, cube + std::int64_t(b + 1) * plane);
        Acc v[N];
#pragma unroll
        for (int k = 0; k < N; ++k) v[k] = t[(threadIdx.y + 1 + Win<N>::dy(k)) * TW + threadIdx.x + 1 + Win<N>::dx(k)];
        add_pair_terms<N>(D, v);
        // The other buffer is rewritten only after the next barrier, so one barrier per band suffices.
    }
    const int x = x0 + threadIdx.x, y = y0 + threadIdx.y;
    if (x < W && y < H) out[std::int64_t(y) * g.out_row_stride + x] = finish<Acc, Out>(robust_max<N>(D, reject), squared);
}

// ---- shared-pairs (auto): rcmg_kernels.cuh ----------------------------------------------------
// The shapes auto runs, measured side by side by bench/probes/rcmg_pairs_variants.cu
// (bench/results/2026-11-28-h100.md, "RCMG shapes"). f64 sums: 4 rows a thread, 8 thread rows (a
// 32×32 region, 30×30 outputs: 1.14 region pixels an output instead of 1.22), registers capped for
// two blocks an SM; 0.78× the time of the 2-row shape for 8-conn, 0.67× for 4-conn. f32 sums keep
// 2 rows a thread (more blocks an SM; 4 rows was 1.05–1.12× slower).
template <typename Acc>
using PairsDefault = std::conditional_t<std::is_same_v<Acc, double>, PairsConfig<4, 1, 8, 1, 1, 2>, PairsConfig<2, 1, 8, 1, 1, 1>>;

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
            using C = PairsDefault<Acc>;
            constexpr std::size_t smem = C::template smem_bytes<N, Acc>();
            auto kernel = rcmg_shared_pairs_kernel<T, Acc, Out, N, C>;
            if constexpr (smem > 48 * 1024)  // above the default: opt in (per device, so on every call)
                CUBEKIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
            const dim3 block(C::kThreadsX, C::kThreadsY), grid(div_up(W, C::kOutX), div_up(H, C::kOutY));
            kernel<<<grid, block, smem, stream>>>(cube, out, g, options.reject, options.squared);
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
