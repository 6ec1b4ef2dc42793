// Classical detectors, CUDA backend (detect_classical.hpp). Same arithmetic, same order as the CPU
// (classical_cpu.cpp), compiled with --fmad=false: scores match the CPU's to rounding (global RX:
// bit for bit where the GEMM adds bands in order, as here).
//
// Global scoring: Z = W·Y over pixel chunks by a shared-memory tiled GEMM (64 rows × 64 pixels per
// block, 4×4 outputs per thread, bands in chunks of 16 added in order), then one thread per pixel:
// q = Σ_i z_i², l = a·y, the detector's formula. Cost: 2·N·r·K flops (N = 1024², r = K = 200:
// 8.4e10, ≈ 1.25 ms at the H100's 67 TFLOP/s of f64 tensor cores or f32 FMA). This GEMM runs on the
// f64 FMA pipes without contraction (a separate multiply and add), so ≈ 4× that floor; cuBLAS
// (cublasDgemm/cublasSgemm, needs CUDA::cublas linked) is the path to the floor — see the report.
// Local RX: one block per pixel: window mean, centred covariance with 4×4 register tiles over the
// lower triangle (pixels staged in shared memory, row-major order), right-looking Cholesky in a
// global workspace and a column-oriented forward solve. Cost per pixel n·K²/2 + K³/6 multiply-adds
// (n = 416, K = 205: 8.7e6 + 1.4e6; 1e4 pixels ≈ 1e11 mul+add ≈ 6 ms at f64 FMA-pipe peak).
#include <cuda_runtime.h>
#include <math_constants.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/cuda_check.hpp"
#include "cubekit/error.hpp"
#include "detect/classical_internal.hpp"

namespace cubekit::detail {
namespace {

constexpr int kThreads = 256;

// The row r of the lower-triangle pair index e = r(r+1)/2 + c, c ≤ r.
__device__ __forceinline__ int triangle_row(int e) {
    int r = int((sqrt(8.0 * double(e) + 1.0) - 1.0) / 2.0);
    while (r * (r + 1) / 2 > e) --r;
    while ((r + 1) * (r + 2) / 2 <= e) ++r;
    return r;
}

template <typename T>
DeviceBuffer upload_vector(const Context& ctx, const std::vector<T>& v) {
    DeviceBuffer b(ctx, std::max<std::size_t>(1, v.size()) * sizeof(T));
    if (!v.empty()) b.upload(ctx, v.data(), v.size() * sizeof(T));
    return b;
}

// ---- band screening ------------------------------------------------------------------------------------

template <typename T>
__global__ void band_summary_kernel(StridedView<const T> v, long long* nonfinite, double* lo, double* hi) {
    __shared__ long long s_bad[kThreads];
    __shared__ double s_lo[kThreads], s_hi[kThreads];
    const int b = blockIdx.x;
    long long bad = 0;
    double mn = CUDART_INF, mx = -CUDART_INF;
    const long long n = (long long)v.width * v.height;
    for (long long p = threadIdx.x; p < n; p += blockDim.x) {
        const double d = double(v(int(p % v.width), int(p / v.width), b));
        if (!isfinite(d)) { ++bad; continue; }
        mn = fmin(mn, d);
        mx = fmax(mx, d);
    }
    s_bad[threadIdx.x] = bad, s_lo[threadIdx.x] = mn, s_hi[threadIdx.x] = mx;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (int(threadIdx.x) < s) {
            s_bad[threadIdx.x] += s_bad[threadIdx.x + s];
            s_lo[threadIdx.x] = fmin(s_lo[threadIdx.x], s_lo[threadIdx.x + s]);
            s_hi[threadIdx.x] = fmax(s_hi[threadIdx.x], s_hi[threadIdx.x + s]);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) nonfinite[b] = s_bad[0], lo[b] = s_lo[0], hi[b] = s_hi[0];
}

// ---- gather the kept bands as dense BSQ f64 ------------------------------------------------------------

template <typename T>
__global__ void gather_kernel(StridedView<const T> v, const int* kept, int K, const unsigned char* mask, double* out) {
    const long long n = (long long)v.width * v.height;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * K) return;
    const int k = int(i / n);
    const long long p = i % n;
    const bool use = mask == nullptr || mask[p] != 0;
    out[i] = use ? double(v(int(p % v.width), int(p / v.width), kept[k])) : CUDART_NAN;
}

// ---- global scoring -----------------------------------------------------------------------------------------

constexpr int kTile = 64, kChunk = 16;

// Z[r][p] = Σ_b T(W[r][b])·T(x[b][p0+p] − mean[b]) for a chunk of `np` pixels, bands in order.
template <typename T>
__global__ void whiten_gemm(const double* x, long long plane, long long p0, int np, int K, const double* mean,
                            const double* W, int rows, T* Z) {
    __shared__ T Ys[kChunk][kTile];
    __shared__ T Ws[kChunk][kTile];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int pbase = blockIdx.x * kTile, rbase = blockIdx.y * kTile;
    T acc[4][4] = {};
    for (int b0 = 0; b0 < K; b0 += kChunk) {
        for (int e = threadIdx.x; e < kChunk * kTile; e += kThreads) {
            const int k = e / kTile, pl = e % kTile, b = b0 + k, p = pbase + pl;
            Ys[k][pl] = (b < K && p < np) ? T(x[(long long)b * plane + p0 + p] - mean[b]) : T(0);
            const int rl = e / kChunk, kk = e % kChunk, r = rbase + rl, bb = b0 + kk;
            Ws[kk][rl] = (bb < K && r < rows) ? T(W[(long long)r * K + bb]) : T(0);
        }
        __syncthreads();
        for (int k = 0; k < kChunk; ++k) {
            T w[4], y[4];
            for (int i = 0; i < 4; ++i) w[i] = Ws[k][ty + 16 * i], y[i] = Ys[k][tx + 16 * i];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] = acc[i][j] + w[i] * y[j];
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            const int r = rbase + ty + 16 * i, p = pbase + tx + 16 * j;
            if (r < rows && p < np) Z[(long long)r * np + p] = acc[i][j];
        }
}

struct OutView {
    void* data;
    bool f64;
    int width;
    long long sx, sy;
    __device__ void put(long long p, double v) const {
        const long long o = (p % width) * sx + (p / width) * sy;
        if (f64) static_cast<double*>(data)[o] = v;
        else static_cast<float*>(data)[o] = float(v);
    }
};

template <typename T>
__global__ void finish_kernel(const double* x, long long plane, long long p0, int np, int K, const double* mean,
                              const double* a, const T* Z, int rows, int mode, OutView out) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= np) return;
    T l = 0, n = 0, q = 0;
    bool finite = true;
    for (int b = 0; b < K; ++b) {
        const double v = x[(long long)b * plane + p0 + p];
        finite = finite && isfinite(v);
        const T y = T(v - mean[b]);
        if (mode != int(ScoreMode::Quadratic)) l = l + T(a[b]) * y;
        if (mode == int(ScoreMode::Cosine)) n = n + y * y;
    }
    if (mode == int(ScoreMode::Quadratic) || mode == int(ScoreMode::Ace))
        for (int i = 0; i < rows; ++i) {
            const T z = Z[(long long)i * np + p];
            q = q + z * z;
        }
    double s = CUDART_NAN;
    if (finite) {
        if (mode == int(ScoreMode::Quadratic)) s = double(q);
        else if (mode == int(ScoreMode::Linear)) s = double(l);
        else if (mode == int(ScoreMode::Ace)) {
            const double v = double(l) * double(l) / double(q);
            s = isnan(v) ? 0.0 : fmin(fmax(v, 0.0), 1.0);
        } else s = n > 0 ? double(l) / sqrt(double(n)) : 0.0;
    }
    out.put(p0 + p, s);
}

template <typename T>
void score_typed(const Context& ctx, const CubeView& x, const ScorePlan& plan, const OutView& out) {
    const cudaStream_t stream = stream_of(ctx);
    const long long P = (long long)x.num_pixels();
    const int K = plan.bands;
    const DeviceBuffer d_mean = upload_vector(ctx, plan.mean), d_W = upload_vector(ctx, plan.W),
                       d_a = upload_vector(ctx, plan.a);
    const bool gemm = plan.mode == ScoreMode::Quadratic || plan.mode == ScoreMode::Ace;
    const int rows = gemm ? plan.rows : 0;
    const long long budget = 256ll << 20;
    long long chunk = rows > 0 ? std::max<long long>(kTile, budget / ((long long)rows * sizeof(T)) / kTile * kTile) : P;
    chunk = std::min(chunk, P);
    DeviceBuffer d_Z(ctx, std::max<std::size_t>(1, std::size_t(rows) * std::size_t(chunk) * sizeof(T)));
    const double* xd = reinterpret_cast<const double*>(x.data());
    for (long long p0 = 0; p0 < P; p0 += chunk) {
        const int np = int(std::min(chunk, P - p0));
        if (rows > 0) {
            const dim3 grid((np + kTile - 1) / kTile, (rows + kTile - 1) / kTile);
            whiten_gemm<T><<<grid, kThreads, 0, stream>>>(xd, P, p0, np, K, static_cast<const double*>(d_mean.data()),
                                                          static_cast<const double*>(d_W.data()), rows,
                                                          static_cast<T*>(d_Z.data()));
            CUBEKIT_CHECK_LAUNCH(ctx, "whiten_gemm", grid, dim3(kThreads));
        }
        const dim3 grid((np + kThreads - 1) / kThreads);
        finish_kernel<T><<<grid, kThreads, 0, stream>>>(xd, P, p0, np, K, static_cast<const double*>(d_mean.data()),
                                                        static_cast<const double*>(d_a.data()),
                                                        static_cast<const T*>(d_Z.data()), rows, int(plan.mode), out);
        CUBEKIT_CHECK_LAUNCH(ctx, "finish_kernel", grid, dim3(kThreads));
    }
    ctx.synchronize();  // the plan's buffers are freed on return
}

// ---- local RX ------------------------------------------------------------------------------------------------

constexpr int kStage = 8;  // window positions staged per round

struct LocalGeom {
    int W, H, K, inner, outer;
    long long plane;
};

// Mean (ws_mean[pix·K + b]) and lower-triangle covariance (ws_A[pix·K² + i·K + j], i ≥ j) of the
// window of pixel p0 + blockIdx.x, positions in row-major order, the inner window skipped.
__global__ void local_stats_kernel(const double* x, LocalGeom g, long long p0, int ddof, double* ws_mean, double* ws_A) {
    extern __shared__ double smem[];
    double* mean = smem;             // K
    double* Ys = smem + g.K;         // kStage × K
    __shared__ int s_pos[kStage];
    const long long p = p0 + blockIdx.x;
    const int px = int(p % g.W), py = int(p / g.W);
    const int ox = window_start(px, g.outer, g.W), oy = window_start(py, g.outer, g.H);
    const int ix = window_start(px, g.inner, g.W), iy = window_start(py, g.inner, g.H);
    const int npos = g.outer * g.outer, n = npos - g.inner * g.inner;
    const auto position = [&](int t) -> int {  // plane offset of window position t, or −1 inside the inner window
        const int yy = oy + t / g.outer, xx = ox + t % g.outer;
        const bool in = xx >= ix && xx < ix + g.inner && yy >= iy && yy < iy + g.inner;
        return in ? -1 : yy * g.W + xx;
    };
    for (int b = threadIdx.x; b < g.K; b += blockDim.x) {
        double s = 0;
        for (int t = 0; t < npos; ++t) {
            const int o = position(t);
            if (o >= 0) s = s + x[(long long)b * g.plane + o];
        }
        mean[b] = s / double(n);
        ws_mean[(long long)blockIdx.x * g.K + b] = mean[b];
    }
    __syncthreads();
    const int nt = (g.K + 3) / 4, ntiles = nt * (nt + 1) / 2;
    const double div = double(n - ddof);
    double* A = ws_A + (long long)blockIdx.x * g.K * g.K;
    for (int round = 0; round * (int)blockDim.x < ntiles; ++round) {
        const int tile = round * blockDim.x + threadIdx.x;
        const int ti = triangle_row(tile);  // tile → (ti, tj), tj ≤ ti
        const int tj = tile - ti * (ti + 1) / 2;
        double acc[4][4] = {};
        for (int t0 = 0; t0 < npos; t0 += kStage) {
            __syncthreads();
            if (threadIdx.x < kStage) s_pos[threadIdx.x] = t0 + int(threadIdx.x) < npos ? position(t0 + threadIdx.x) : -1;
            __syncthreads();
            for (int e = threadIdx.x; e < kStage * g.K; e += blockDim.x) {
                const int s = e / g.K, b = e % g.K;
                Ys[e] = s_pos[s] >= 0 ? x[(long long)b * g.plane + s_pos[s]] - mean[b] : 0.0;
            }
            __syncthreads();
            if (tile < ntiles)
                for (int s = 0; s < kStage; ++s) {
                    if (s_pos[s] < 0) continue;
                    const double* y = Ys + s * g.K;
                    for (int i = 0; i < 4; ++i) {
                        const int bi = ti * 4 + i;
                        if (bi >= g.K) break;
                        for (int j = 0; j < 4; ++j) {
                            const int bj = tj * 4 + j;
                            if (bj < g.K && bj <= bi) acc[i][j] = acc[i][j] + y[bi] * y[bj];
                        }
                    }
                }
        }
        if (tile < ntiles)
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) {
                    const int bi = ti * 4 + i, bj = tj * 4 + j;
                    if (bi < g.K && bj <= bi) A[(long long)bi * g.K + bj] = acc[i][j] / div;
                }
    }
}

// Right-looking Cholesky of the pixel's A, forward solve of L z = x − mean by columns, score Σ z².
__global__ void local_solve_kernel(const double* x, LocalGeom g, long long p0, double* ws_mean, double* ws_A,
                                   OutView out, unsigned long long* singular) {
    extern __shared__ double y[];  // K
    __shared__ int s_state;        // 0 ok, 1 pixel not finite, 2 not positive definite
    __shared__ double s_d;
    const long long p = p0 + blockIdx.x;
    const int K = g.K;
    double* A = ws_A + (long long)blockIdx.x * K * K;
    if (threadIdx.x == 0) s_state = 0;
    __syncthreads();
    for (int b = threadIdx.x; b < K; b += blockDim.x) {
        const double v = x[(long long)b * g.plane + p];
        if (!isfinite(v)) s_state = 1;
        y[b] = v - ws_mean[(long long)blockIdx.x * K + b];
    }
    __syncthreads();
    for (int k = 0; k < K && s_state == 0; ++k) {
        if (threadIdx.x == 0) {
            const double pivot = A[(long long)k * K + k];
            if (!(pivot > 0) || !isfinite(pivot)) s_state = 2;
            else s_d = sqrt(pivot), A[(long long)k * K + k] = s_d;
        }
        __syncthreads();
        if (s_state != 0) break;
        for (int i = k + 1 + threadIdx.x; i < K; i += blockDim.x) A[(long long)i * K + k] = A[(long long)i * K + k] / s_d;
        __syncthreads();
        const int m = K - k - 1;
        for (int e = threadIdx.x; e < m * (m + 1) / 2; e += blockDim.x) {
            const int r = triangle_row(e);
            const int i = k + 1 + r, j = k + 1 + (e - r * (r + 1) / 2);
            A[(long long)i * K + j] = A[(long long)i * K + j] - A[(long long)i * K + k] * A[(long long)j * K + k];
        }
        __syncthreads();
    }
    if (s_state != 0) {
        if (threadIdx.x == 0) {
            out.put(p, CUDART_NAN);
            if (s_state == 2) atomicAdd(singular, 1ull);
        }
        return;
    }
    double q = 0;
    for (int k = 0; k < K; ++k) {
        const double z = y[k] / A[(long long)k * K + k];
        q = q + z * z;
        __syncthreads();
        for (int i = k + 1 + threadIdx.x; i < K; i += blockDim.x) y[i] = y[i] - A[(long long)i * K + k] * z;
        __syncthreads();
    }
    if (threadIdx.x == 0) out.put(p, q);
}

OutView out_view(const MutableCubeView& out) {
    if (!out.on_device()) throw InvalidInput("detect: out must be in device memory for a CUDA context");
    return {out.data(), out.dtype() == DType::F64, out.width(), out.strides().x, out.strides().y};
}

}  // namespace

BandSummary band_summary_device(const Context& ctx, const CubeView& cube) {
    const int B = cube.bands();
    DeviceBuffer d_bad(ctx, B * sizeof(long long)), d_lo(ctx, B * sizeof(double)), d_hi(ctx, B * sizeof(double));
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        band_summary_kernel<T><<<B, kThreads, 0, stream_of(ctx)>>>(cube.typed<T>(), static_cast<long long*>(d_bad.data()),
                                                                  static_cast<double*>(d_lo.data()),
                                                                  static_cast<double*>(d_hi.data()));
        CUBEKIT_CHECK_LAUNCH(ctx, "band_summary_kernel", dim3(B), dim3(kThreads));
    });
    BandSummary s{std::vector<std::int64_t>(std::size_t(B)), std::vector<double>(std::size_t(B)),
                  std::vector<double>(std::size_t(B))};
    d_bad.download(ctx, s.nonfinite.data(), B * sizeof(long long));
    d_lo.download(ctx, s.min.data(), B * sizeof(double));
    d_hi.download(ctx, s.max.data(), B * sizeof(double));
    return s;
}

DeviceCube gather_f64_device(const Context& ctx, const CubeView& cube, const std::vector<int>& kept,
                             const std::vector<std::uint8_t>& mask) {
    const int K = int(kept.size());
    DeviceCube out(ctx, CubeShape{cube.width(), cube.height(), K, DType::F64, Layout::BSQ});
    const DeviceBuffer d_kept = upload_vector(ctx, kept), d_mask = upload_vector(ctx, mask);
    const long long total = (long long)cube.num_pixels() * K;
    const dim3 grid(unsigned((total + kThreads - 1) / kThreads));
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        gather_kernel<T><<<grid, kThreads, 0, stream_of(ctx)>>>(
            cube.typed<T>(), static_cast<const int*>(d_kept.data()), K,
            mask.empty() ? nullptr : static_cast<const unsigned char*>(d_mask.data()), static_cast<double*>(out.data()));
        CUBEKIT_CHECK_LAUNCH(ctx, "gather_kernel", grid, dim3(kThreads));
    });
    ctx.synchronize();
    return out;
}

void score_device(const Context& ctx, const CubeView& x, const ScorePlan& plan, const MutableCubeView& out) {
    if (x.num_pixels() == 0) return;
    if (plan.f32) score_typed<float>(ctx, x, plan, out_view(out));
    else score_typed<double>(ctx, x, plan, out_view(out));
}

std::int64_t local_rx_device(const Context& ctx, const CubeView& x, LocalWindows win, int ddof,
                             const MutableCubeView& out) {
    const LocalGeom g{x.width(), x.height(), x.bands(), win.inner, win.outer, (long long)x.num_pixels()};
    const long long P = g.plane, KK = (long long)g.K * g.K;
    const long long batch = std::min<long long>(P, std::max<long long>(1, (512ll << 20) / (KK * 8)));
    const std::size_t stats_smem = std::size_t(g.K) * (1 + kStage) * sizeof(double);
    if (stats_smem > 48 * 1024) {
        CUBEKIT_CUDA_CHECK(cudaFuncSetAttribute(local_stats_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(stats_smem)));
    }
    DeviceBuffer d_A(ctx, std::size_t(batch * KK) * 8), d_mean(ctx, std::size_t(batch * g.K) * 8), d_count(ctx, 8);
    CUBEKIT_CUDA_CHECK(cudaMemsetAsync(d_count.data(), 0, 8, stream_of(ctx)));
    const OutView o = out_view(out);
    const double* xd = reinterpret_cast<const double*>(x.data());
    for (long long p0 = 0; p0 < P; p0 += batch) {
        const dim3 grid(unsigned(std::min(batch, P - p0)));
        local_stats_kernel<<<grid, kThreads, stats_smem, stream_of(ctx)>>>(xd, g, p0, ddof, static_cast<double*>(d_mean.data()),
                                                                           static_cast<double*>(d_A.data()));
        CUBEKIT_CHECK_LAUNCH(ctx, "local_stats_kernel", grid, dim3(kThreads));
        local_solve_kernel<<<grid, kThreads, std::size_t(g.K) * sizeof(double), stream_of(ctx)>>>(
            xd, g, p0, static_cast<double*>(d_mean.data()), static_cast<double*>(d_A.data()), o,
            static_cast<unsigned long long*>(d_count.data()));
        CUBEKIT_CHECK_LAUNCH(ctx, "local_solve_kernel", grid, dim3(kThreads));
    }
    unsigned long long singular = 0;
    d_count.download(ctx, &singular, 8);
    return std::int64_t(singular);
}

}  // namespace cubekit::detail
