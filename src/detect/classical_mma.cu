// Classical detectors, CUDA fast path (detect_classical.hpp): global statistics and global scoring
// straight from the caller's cube (any element type, BSQ on the device; no f64 copy), the products
// on the f64 tensor cores (mma.sync m8n8k4 DMMA: exact f64 products, f64 accumulation). cuBLAS
// is not used: libcublasLt alone is 540 MB and the GPU pack is capped at ~45 MB (no static cuBLAS
// in this toolkit either).
//
// Statistics (fit): (1) valid_kernel: a byte per pixel (mask ≠ 0 and every kept band finite) and
// the count N (exact, integer); (2) band_sum_kernel: per band and pixel slice a f64 sum in a fixed
// order, the slices added on the host in order (Neumaier) → μ; (3) cov_mma_kernel: Σ_p y yᵀ with
// y = x − μ (f64; 0 for invalid pixels) over 64×64 band tiles of the lower triangle (m16n8k8, the
// next step's samples loaded during this step's products), the pixels split over blocks (split-K),
// each block's partial tile written out; (4) cov_reduce_kernel adds
// the partials in split order (deterministic). Cost: the 10 64×64 tiles of a K = 200 triangle
// (padded to 256): 10·4096·N = 4.3e10 multiply-adds = 8.6e10 flops → 1.3 ms at the H100's 67
// TFLOP/s DMMA peak (0.63 ms for the unpadded triangle); reads: the cube once for (1), once for
// (2), 5 tile-rows for (3) (the pair index runs fastest so L2 serves most of them).
// Error: ~1e-14 of ‖Σ‖ against the CPU's exact integer sums (CPU emulation on real scenes), scores
// within ~4e-9 of the scale (the header's "Precision").
//
// Scoring: where W's row blocks fit in shared memory, whiten_mma.cu (W resident, one block per SM,
// m16n8k4); else whiten_mma_kernel here computes Z = W·Y (W: r×K, Y = x − μ for a 128-pixel tile) in 64-row
// × 128-pixel block tiles, 16 bands per step, 8 warps of 32×32 (16 DMMA per k-step), and fuses the
// norm: each block writes Σ_rows z² of its 64 rows for its pixels (partial[row block][pixel]);
// finish_kernel adds the row blocks in order and applies the detector (l = a·y, n = y·y from the
// cube, as the CPU does, in the scoring precision). 2·N·r·K flops: r = K = 200, N = 1024²:
// 8.4e10 (1.07e11 with the row padding to 256) → floor 1.25 ms (1.6 ms padded) at 67 TFLOP/s.
// f32 whitening rounds W and x − μ to f32 (the CPU's operands) and accumulates in f64 on the
// same tensor cores: on Hopper f32 FMA has the same 67 TFLOP/s as DMMA, so f32 buys no time here
// (3×TF32 would; not done).
#include <cuda_runtime.h>
#include <math_constants.h>

#include <algorithm>
#include <cmath>

#include "core/cuda_check.hpp"
#include "cubekit/error.hpp"
#include "core/device_vector.hpp"
#include "detect/classical_internal.hpp"
#include "detect/dmma.cuh"

namespace cubekit::detail {
namespace {

// D = A·B + D for one 8×8×4 f64 tile: lane (g = lane/4, t = lane%4) holds A[g][t], B[t][g] and
// D[g][2t], D[g][2t+1] (PTX ISA, mma.m8n8k4 .f64 fragments).
__device__ __forceinline__ void dmma(double (&d)[2], double a, double b) {
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
                 : "+d"(d[0]), "+d"(d[1])
                 : "d"(a), "d"(b));
}

// Pixel p of a view as an element offset (band 0).
template <typename T>
__device__ __forceinline__ long long pixel_offset(const StridedView<const T>& v, long long p) {
    const long long y = p / v.width, x = p - y * v.width;
    return x * v.strides.x + y * v.strides.y;
}

// ---- statistics ---------------------------------------------------------------------------------------------

constexpr int kThreads = 256;

template <typename T>
__global__ void valid_kernel(StridedView<const T> v, const int* kept, int K, const unsigned char* mask, long long P,
                             unsigned char* valid, unsigned long long* count) {
    __shared__ unsigned int s_count;
    if (threadIdx.x == 0) s_count = 0;
    __syncthreads();
    unsigned int mine = 0;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < P; p += (long long)gridDim.x * blockDim.x) {
        bool ok = mask == nullptr || mask[p] != 0;
        const long long o = pixel_offset(v, p);
        for (int k = 0; k < K && ok; ++k) ok = isfinite(double(v.data[o + (long long)kept[k] * v.strides.b]));
        valid[p] = ok;
        mine += ok;
    }
    atomicAdd(&s_count, mine);
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(count, (unsigned long long)s_count);
}

// partial[k·slices + s] = Σ of band k over the valid pixels of slice s (threads strided, then a tree).
template <typename T>
__global__ void band_sum_kernel(StridedView<const T> v, const int* kept, const unsigned char* valid, long long P,
                                int slices, double* partial) {
    __shared__ double s_sum[kThreads];
    const int k = blockIdx.y, s = blockIdx.x;
    const long long per = (P + slices - 1) / slices, p0 = s * per, p1 = min(P, p0 + per);
    const long long bo = (long long)kept[k] * v.strides.b;
    double sum = 0;
    for (long long p = p0 + threadIdx.x; p < p1; p += blockDim.x)
        if (valid[p]) sum += double(v.data[pixel_offset(v, p) + bo]);
    s_sum[threadIdx.x] = sum;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h /= 2) {
        if (int(threadIdx.x) < h) s_sum[threadIdx.x] += s_sum[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[(long long)k * slices + s] = s_sum[0];
}

// Covariance tiles: block (pair, split) computes C[i0+·][j0+·] (64×64, j0 ≤ i0) over its pixel
// range, 32 pixels a step; 4 warps of 32×32 (2×2). As/Bs: bands × pixels, row stride 36 (the
// fragment loads hit each bank pair twice per 256 B: two wavefronts, the minimum).
constexpr int kCovTile = 64, kCovStep = 32, kCovStride = kCovStep + 4, kCovThreads = 128;

template <typename T>
__global__ void __launch_bounds__(kCovThreads) cov_mma_kernel(StridedView<const T> v, const int* kept, int K,
                                                              const double* mean, const unsigned char* valid, long long P,
                                                              long long per_split, double* partial) {
    __shared__ double As[kCovTile][kCovStride], Bs[kCovTile][kCovStride];
    int ti = 0;
    while ((ti + 1) * (ti + 2) / 2 <= int(blockIdx.x)) ++ti;
    const int tj = blockIdx.x - ti * (ti + 1) / 2, i0 = ti * kCovTile, j0 = tj * kCovTile;
    const long long p_begin = blockIdx.y * per_split, p_end = min(P, p_begin + per_split);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int wi = (warp / 2) * 32, wj = (warp % 2) * 32;
    double acc[2][4][4] = {};
    // Loader: thread → pixel column c = tid % 32, band rows r = tid / 32 + 4·e (e < 16). The next step's
    // samples are loaded before this step's products and used after them (no stall on their latency).
    const int c = threadIdx.x % kCovStep, r0 = threadIdx.x / kCovStep;
    T raw_a[kCovTile / 4], raw_b[kCovTile / 4];
    bool use = false;
    const auto fetch = [&](long long p0) {
        const long long p = p0 + c;
        use = p < p_end && valid[p];
        const long long o = use ? pixel_offset(v, p) : 0;
#pragma unroll
        for (int e = 0; e < kCovTile / 4; ++e) {
            const int r = r0 + 4 * e, bi = i0 + r, bj = j0 + r;
            raw_a[e] = use && bi < K ? v.data[o + (long long)kept[bi] * v.strides.b] : T(0);
            raw_b[e] = use && bj < K ? v.data[o + (long long)kept[bj] * v.strides.b] : T(0);
        }
    };
    fetch(p_begin);
    for (long long p0 = p_begin; p0 < p_end; p0 += kCovStep) {
        __syncthreads();
#pragma unroll
        for (int e = 0; e < kCovTile / 4; ++e) {
            const int r = r0 + 4 * e, bi = i0 + r, bj = j0 + r;
            As[r][c] = use && bi < K ? double(raw_a[e]) - mean[bi] : 0.0;
            Bs[r][c] = use && bj < K ? double(raw_b[e]) - mean[bj] : 0.0;
        }
        __syncthreads();
        if (p0 + kCovStep < p_end) fetch(p0 + kCovStep);
#pragma unroll
        for (int ks = 0; ks < kCovStep; ks += 8) {  // m16n8k8 (sm_90): 2 × 4 tiles of 16×8 per warp
            double a[2][4], b[4][2];
#pragma unroll
            for (int m = 0; m < 2; ++m) {
                const double* r = &As[wi + 16 * m + g][ks + t];
                a[m][0] = r[0], a[m][1] = r[8 * kCovStride], a[m][2] = r[4], a[m][3] = r[8 * kCovStride + 4];
            }
#pragma unroll
            for (int n = 0; n < 4; ++n) b[n][0] = Bs[wj + 8 * n + g][ks + t], b[n][1] = Bs[wj + 8 * n + g][ks + t + 4];
#pragma unroll
            for (int m = 0; m < 2; ++m)
#pragma unroll
                for (int n = 0; n < 4; ++n) mma16x8x8(acc[m][n], a[m], b[n]);
        }
    }
    double* out = partial + ((long long)blockIdx.y * gridDim.x + blockIdx.x) * kCovTile * kCovTile;
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int n = 0; n < 4; ++n)
#pragma unroll
            for (int h = 0; h < 4; ++h)
                out[(wi + 16 * m + g + 8 * (h / 2)) * kCovTile + wj + 8 * n + 2 * t + h % 2] = acc[m][n][h];
}

// C[i][j] = C[j][i] = Σ_split partial (in split order), i, j < K.
__global__ void cov_reduce_kernel(const double* partial, int pairs, int splits, int K, double* C) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    const int pair = blockIdx.y;
    if (e >= kCovTile * kCovTile) return;
    int ti = 0;
    while ((ti + 1) * (ti + 2) / 2 <= pair) ++ti;
    const int tj = pair - ti * (ti + 1) / 2;
    const int i = ti * kCovTile + e / kCovTile, j = tj * kCovTile + e % kCovTile;
    if (i >= K || j >= K || j > i) return;
    double s = 0;
    for (int sp = 0; sp < splits; ++sp) s += partial[((long long)sp * pairs + pair) * kCovTile * kCovTile + e];
    C[(long long)i * K + j] = s;
    C[(long long)j * K + i] = s;
}

// ---- scoring --------------------------------------------------------------------------------------------------

constexpr int kRowTile = 64, kPixTile = 128, kBandStep = 16;

// partial[rb·P + p] = Σ_{r in row block rb} (Σ_b W[r][b]·y_b(p))², y_b = x − μ (f32: both rounded
// to f32 first; NaN for a pixel with a non-finite kept band). Wt: K_pad × R_pad, band-major,
// zero-padded (K_pad a multiple of 16, R_pad of 64). Block: 1D index = tile·row_blocks + rb.
template <typename T>
__global__ void __launch_bounds__(kThreads) whiten_mma_kernel(StridedView<const T> v, const int* kept, int K,
                                                              const double* mean, const double* Wt, int R_pad, int rows,
                                                              int row_blocks, long long P, bool f32, double* partial) {
    __shared__ double Ws[kBandStep][kRowTile + 8];
    __shared__ double Ys[kBandStep][kPixTile + 8];
    const int rb = blockIdx.x % row_blocks;
    const long long pbase = (long long)(blockIdx.x / row_blocks) * kPixTile;
    const int r0 = rb * kRowTile;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int wr = (warp / 4) * 32, wc = (warp % 4) * 32;
    // Loaders. Y: pixel j = tid % 128, band rows tid / 128 + 2e (e < 8). W: row m = tid % 64, bands tid / 64 + 4e.
    const int yj = threadIdx.x % kPixTile, yk = threadIdx.x / kPixTile;
    const int wm = threadIdx.x % kRowTile, wk = threadIdx.x / kRowTile;
    const long long py = pbase + yj;
    const bool pix = py < P;
    const long long off = pix ? pixel_offset(v, py) : 0;
    double yreg[8], wreg[4];
    bool bad = false;
    const auto fetch = [&](int k0) {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int b = k0 + yk + 2 * e;
            double y = 0;
            if (pix && b < K) {
                const double x = double(v.data[off + (long long)kept[b] * v.strides.b]);
                bad = bad || !isfinite(x);
                y = f32 ? double(float(x - mean[b])) : x - mean[b];
            }
            yreg[e] = y;
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) wreg[e] = Wt[(long long)(k0 + wk + 4 * e) * R_pad + r0 + wm];
    };
    const bool live = r0 + wr < rows;  // a warp whose 32 rows are all padding computes nothing
    double acc[4][4][2] = {};
    fetch(0);
    for (int k0 = 0; k0 < K; k0 += kBandStep) {
        __syncthreads();
#pragma unroll
        for (int e = 0; e < 8; ++e) Ys[yk + 2 * e][yj] = yreg[e];
#pragma unroll
        for (int e = 0; e < 4; ++e) Ws[wk + 4 * e][wm] = wreg[e];
        __syncthreads();
        if (k0 + kBandStep < K) fetch(k0 + kBandStep);
        if (live) {
#pragma unroll
            for (int ks = 0; ks < kBandStep; ks += 4) {
                double a[4], b[4];
#pragma unroll
                for (int m = 0; m < 4; ++m) a[m] = Ws[ks + t][wr + 8 * m + g], b[m] = Ys[ks + t][wc + 8 * m + g];
#pragma unroll
                for (int m = 0; m < 4; ++m)
#pragma unroll
                    for (int n = 0; n < 4; ++n) dmma(acc[m][n], a[m], b[n]);
            }
        }
    }
    // Σ z² over this warp's 32 rows for each of its pixels, then over the two warp rows.
    double s[4][2];
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            double q = 0;
#pragma unroll
            for (int m = 0; m < 4; ++m) q += acc[m][n][h] * acc[m][n][h];
            q += __shfl_xor_sync(0xffffffffu, q, 4);
            q += __shfl_xor_sync(0xffffffffu, q, 8);
            q += __shfl_xor_sync(0xffffffffu, q, 16);
            s[n][h] = q;
        }
    __syncthreads();
    double* red = &Ys[0][0];  // 2 × 128 sums
    __shared__ int s_bad[kPixTile];
    if (threadIdx.x < kPixTile) s_bad[threadIdx.x] = 0;
    __syncthreads();
    if (bad) s_bad[yj] = 1;
    if (g == 0)
#pragma unroll
        for (int n = 0; n < 4; ++n)
#pragma unroll
            for (int h = 0; h < 2; ++h) red[(warp / 4) * kPixTile + wc + 8 * n + 2 * t + h] = s[n][h];
    __syncthreads();
    if (threadIdx.x < kPixTile && pbase + threadIdx.x < P) {
        const double q = red[threadIdx.x] + red[kPixTile + threadIdx.x];
        partial[(long long)rb * P + pbase + threadIdx.x] = s_bad[threadIdx.x] ? CUDART_NAN : q;
    }
}


// One thread per pixel: q from the row-block partials (in order), l = a·y and n = y·y from the cube
// in the scoring type A (the CPU's order and precision), the detector's formula; NaN for a pixel
// with a non-finite kept band.
template <typename T, typename A>
__global__ void finish_kernel(StridedView<const T> v, const int* kept, int K, const double* mean, const double* a,
                              const double* partial, int row_blocks, long long P, int mode, OutView out) {
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= P) return;
    const long long o = pixel_offset(v, p);
    A l = 0, n = 0;
    bool finite = true;
    if (mode != int(ScoreMode::Quadratic) || row_blocks == 0)
        for (int b = 0; b < K; ++b) {
            const double x = double(v.data[o + (long long)kept[b] * v.strides.b]);
            finite = finite && isfinite(x);
            const A y = A(x - mean[b]);
            l = l + A(a[b]) * y;
            if (mode == int(ScoreMode::Cosine)) n = n + y * y;
        }
    double q = 0;
    for (int rb = 0; rb < row_blocks; ++rb) q += partial[(long long)rb * P + p];
    if (isnan(q)) finite = false;
    double s = CUDART_NAN;
    if (finite) {
        if (mode == int(ScoreMode::Quadratic)) s = q;
        else if (mode == int(ScoreMode::Linear)) s = double(l);
        else if (mode == int(ScoreMode::Ace)) {
            const double r = double(l) * double(l) / q;
            s = isnan(r) ? 0.0 : fmin(fmax(r, 0.0), 1.0);
        } else s = n > 0 ? double(l) / sqrt(double(n)) : 0.0;
    }
    out.put(p, s);
}

OutView out_view(const MutableCubeView& out) {
    if (!out.on_device()) throw InvalidInput("detect: out must be in device memory for a CUDA context");
    return {out.data(), out.dtype() == DType::F64, out.width(), out.strides().x, out.strides().y};
}

unsigned grid_for(long long n, int threads) { return unsigned(std::min<long long>((n + threads - 1) / threads, 1ll << 30)); }

}  // namespace

DeviceMoments moments_device(const Context& ctx, const CubeView& cube, const std::vector<int>& kept,
                             const std::vector<std::uint8_t>& mask) {
    const cudaStream_t stream = stream_of(ctx);
    const int K = int(kept.size());
    const long long P = (long long)cube.num_pixels();
    DeviceMoments m;
    m.mean.assign(std::size_t(K), 0.0);
    m.scatter.assign(std::size_t(K) * std::size_t(K), 0.0);
    if (K == 0 || P == 0) return m;
    int device = 0, major = 0;
    CUBEKIT_CUDA_CHECK(cudaGetDevice(&device));
    CUBEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    if (major < 9) throw DeviceError("detect: the CUDA statistics need an sm_90 (Hopper) GPU; use the CPU backend");
    const DeviceBuffer d_kept = upload_vector(ctx, kept), d_mask = upload_vector(ctx, mask);
    DeviceBuffer d_valid(ctx, std::size_t(P)), d_count(ctx, 8);
    CUBEKIT_CUDA_CHECK(cudaMemsetAsync(d_count.data(), 0, 8, stream));
    const int slices = int(std::min<long long>(256, (P + 4095) / 4096));
    DeviceBuffer d_sums(ctx, std::size_t(K) * std::size_t(slices) * sizeof(double));
    const int nt = (K + kCovTile - 1) / kCovTile, pairs = nt * (nt + 1) / 2;
    // Splits: about 4 waves of 132 SMs' worth of blocks, each at least 4096 pixels.
    const long long want = std::max<long long>(1, 528 / pairs);
    const long long per_split = std::max<long long>(4096, ((P + want - 1) / want + kCovStep - 1) / kCovStep * kCovStep);
    const int splits = int((P + per_split - 1) / per_split);
    DeviceBuffer d_partial(ctx, std::size_t(splits) * pairs * kCovTile * kCovTile * sizeof(double));
    DeviceBuffer d_C(ctx, std::size_t(K) * K * sizeof(double)), d_mean(ctx, std::size_t(K) * sizeof(double));
    const auto* kp = static_cast<const int*>(d_kept.data());
    auto* valid = static_cast<unsigned char*>(d_valid.data());
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const auto v = cube.typed<T>();
        const dim3 vg(std::min(grid_for(P, kThreads), 132u * 16u));
        valid_kernel<T><<<vg, kThreads, 0, stream>>>(v, kp, K, mask.empty() ? nullptr : static_cast<const unsigned char*>(d_mask.data()),
                                                     P, valid, static_cast<unsigned long long*>(d_count.data()));
        CUBEKIT_CHECK_LAUNCH(ctx, "valid_kernel", vg, dim3(kThreads));
        const dim3 sg{unsigned(slices), unsigned(K)};
        band_sum_kernel<T><<<sg, kThreads, 0, stream>>>(v, kp, valid, P, slices, static_cast<double*>(d_sums.data()));
        CUBEKIT_CHECK_LAUNCH(ctx, "band_sum_kernel", sg, dim3(kThreads));
    });
    unsigned long long count = 0;
    d_count.download(ctx, &count, 8);
    m.samples = std::int64_t(count);
    if (count == 0) return m;
    std::vector<double> sums(std::size_t(K) * std::size_t(slices));
    d_sums.download(ctx, sums.data(), sums.size() * sizeof(double));
    for (int k = 0; k < K; ++k) {  // Neumaier's compensated sum of the slices, in order
        double s = 0, c = 0;
        for (int i = 0; i < slices; ++i) {
            const double x = sums[std::size_t(k) * std::size_t(slices) + std::size_t(i)], u = s + x;
            c += std::fabs(s) >= std::fabs(x) ? (s - u) + x : (x - u) + s;
            s = u;
        }
        m.mean[std::size_t(k)] = (s + c) / double(count);
    }
    d_mean.upload(ctx, m.mean.data(), std::size_t(K) * sizeof(double));
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const dim3 cg{unsigned(pairs), unsigned(splits)};
        cov_mma_kernel<T><<<cg, kCovThreads, 0, stream>>>(cube.typed<T>(), kp, K, static_cast<const double*>(d_mean.data()),
                                                         valid, P, per_split, static_cast<double*>(d_partial.data()));
        CUBEKIT_CHECK_LAUNCH(ctx, "cov_mma_kernel", cg, dim3(kCovThreads));
    });
    const dim3 rg(unsigned(kCovTile * kCovTile / kThreads), unsigned(pairs));
    cov_reduce_kernel<<<rg, kThreads, 0, stream>>>(static_cast<const double*>(d_partial.data()), pairs, splits, K,
                                                   static_cast<double*>(d_C.data()));
    CUBEKIT_CHECK_LAUNCH(ctx, "cov_reduce_kernel", rg, dim3(kThreads));
    d_C.download(ctx, m.scatter.data(), m.scatter.size() * sizeof(double));
    return m;
}

void score_direct_device(const Context& ctx, const CubeView& cube, const std::vector<int>& kept, const ScorePlan& plan,
                         const MutableCubeView& out) {
    const cudaStream_t stream = stream_of(ctx);
    const int K = plan.bands;
    const long long P = (long long)cube.num_pixels();
    if (P == 0) return;
    const OutView o = out_view(out);
    const bool gemm = (plan.mode == ScoreMode::Quadratic || plan.mode == ScoreMode::Ace) && plan.rows > 0;
    // W resident in shared memory (whiten_mma.cu) where its row blocks fit; else the streamed kernel here.
    const int resident_blocks = gemm ? whiten_row_blocks(ctx, K, plan.rows) : 0;
    const bool streamed = gemm && resident_blocks == 0;
    const int K_pad = (K + kBandStep - 1) / kBandStep * kBandStep;
    const int R_pad = streamed ? (plan.rows + kRowTile - 1) / kRowTile * kRowTile : 0;
    const int row_blocks = streamed ? R_pad / kRowTile : resident_blocks;
    // Wt: band-major, zero-padded; f32 whitening: the CPU's operands, W rounded to f32.
    std::vector<double> Wt(std::size_t(K_pad) * std::size_t(R_pad), 0.0);
    for (int r = 0; r < (streamed ? plan.rows : 0); ++r)
        for (int b = 0; b < K; ++b) {
            const double w = plan.W[std::size_t(r) * std::size_t(K) + std::size_t(b)];
            Wt[std::size_t(b) * std::size_t(R_pad) + std::size_t(r)] = plan.f32 ? double(float(w)) : w;
        }
    const DeviceBuffer d_kept = upload_vector(ctx, kept), d_mean = upload_vector(ctx, plan.mean), d_a = upload_vector(ctx, plan.a),
                       d_W = upload_vector(ctx, Wt);
    DeviceBuffer d_partial(ctx, std::max<std::size_t>(8, std::size_t(row_blocks) * std::size_t(P) * sizeof(double)));
    keep_pool_memory(ctx, d_partial.size() + (64u << 20));
    const auto* kp = static_cast<const int*>(d_kept.data());
    const auto* mp = static_cast<const double*>(d_mean.data());
    auto* part = static_cast<double*>(d_partial.data());
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const auto v = cube.typed<T>();
        if (gemm && !streamed) whiten_resident(ctx, cube, kp, mp, plan.W, plan.rows, plan.f32, part);
        if (streamed) {
            const long long tiles = (P + kPixTile - 1) / kPixTile;
            if (tiles * row_blocks > (1ll << 31) - 1) throw InvalidInput("detect: the cube has too many pixels for one call");
            const dim3 grid(unsigned(tiles * row_blocks));
            whiten_mma_kernel<T><<<grid, kThreads, 0, stream>>>(v, kp, K, mp, static_cast<const double*>(d_W.data()), R_pad,
                                                                plan.rows, row_blocks, P, plan.f32, part);
            CUBEKIT_CHECK_LAUNCH(ctx, "whiten_mma_kernel", grid, dim3(kThreads));
        }
        const dim3 fg(grid_for(P, kThreads));
        const auto* ap = static_cast<const double*>(d_a.data());
        if (plan.f32)
            finish_kernel<T, float><<<fg, kThreads, 0, stream>>>(v, kp, K, mp, ap, part, row_blocks, P, int(plan.mode), o);
        else
            finish_kernel<T, double><<<fg, kThreads, 0, stream>>>(v, kp, K, mp, ap, part, row_blocks, P, int(plan.mode), o);
        CUBEKIT_CHECK_LAUNCH(ctx, "finish_kernel", fg, dim3(kThreads));
    });
    ctx.synchronize();  // the plan's buffers are freed on return
}

}  // namespace cubekit::detail
