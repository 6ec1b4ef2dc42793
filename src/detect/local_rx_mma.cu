// Local RX on the f64 tensor cores (classical_internal.hpp: local_rx_mma), for K + 1 ≤ 208 bands.
// One block of 12 warps per pixel, the K×K window scatter matrix held in registers as 16×8 tiles
// of its lower triangle (detect/dmma.cuh: exact f64 products, f64 accumulation; m16n8k8 for S,
// m16n8k4 for the trailing updates):
//   (1) the window mean per band, in the CPU's order (row-major positions, the inner window skipped);
//   (2) S = Σ_t y_t y_tᵀ, y = x − mean, the window positions staged 16 at a time (cp.async of the raw
//       BIP spectra, then a centred copy; the inner window's positions stay as zero rows);
//   (3) the pixel's y appended as row K (the bordered matrix), and a blocked LDLᵀ of S over panels of
//       8 columns: the panel's 8×8 diagonal block factored by 8 lanes (shuffles), the rows below it
//       solved one per thread, the trailing tiles updated on the tensor cores (A −= (L·D) Lᵀ). Row K's solved
//       values give u = L⁻¹y, so q = Σ_j u_j²/D_j = yᵀS⁻¹y, and the score is (n − ddof)·q = yᵀC⁻¹y.
// A pivot that is not positive and finite makes the pixel NaN and counts it as singular, the CPU's
// rule for its Cholesky (the pivots are the same in exact arithmetic). Rounding differs from the
// CPU's right-looking Cholesky (another summation order): the test bound is 1e-6 of the scale.
// Cost per pixel (K = 205, 21×21 windows): 441·182 tiles·128 = 1.0e7 multiply-adds for S, ~1.6e6 for
// the factorization; 1e4 pixels ≈ 2.4e11 flops ≈ 3.6 ms at the DMMA peak.
#include <cuda_runtime.h>
#include <math_constants.h>

#include "core/cuda_check.hpp"
#include "detect/classical_internal.hpp"
#include "detect/dmma.cuh"

namespace cubekit::detail {
namespace {

constexpr int kWarps = 12, kThreads = kWarps * 32;  // kThreads > K: a thread per band when staging
constexpr int kSlots = 16;      // tiles per warp: 12·16 = 192 ≥ M(M + 1) for M ≤ 13
constexpr int kMaxM = 13;       // 16-row tiles: K + 1 ≤ 208
constexpr int kStage = 16;      // window positions per staging round
constexpr int kPanelStride = 12;  // doubles per panel row: conflict-free fragment reads

struct Geom {
    int W, H, K, inner, outer;
    int M, tiles, per_warp, stride;  // stride: doubles per staged position (16M + 8)
    int npos, n;                      // outer², outer² − inner²
    double div;                       // n − ddof
};

// Tiles of the lower triangle in row-major order: row mt holds n-tiles 0 … 2mt + 1. The table
// (tile τ → mt | nt << 8, shared memory) is read inside the loops: per-slot indices kept in registers
// across the loops would not fit beside the accumulators.
__device__ void fill_tiles(int* tab, int tiles) {
    for (int tau = threadIdx.x; tau < tiles; tau += kThreads) {
        int mt = 0;
        while ((mt + 1) * (mt + 2) <= tau) ++mt;
        tab[tau] = mt | (tau - mt * (mt + 1)) << 8;
    }
}
#define CK_TILE(q) const int tile_v = tab[tau0 + (q)], mt = tile_v & 255, nt = tile_v >> 8

__device__ __forceinline__ void cp_async8(double* smem, const double* gmem) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

// Window position t of pixel (px, py) as a pixel index, or −1 inside the inner window / past the end.
__device__ int window_position(const Geom& g, int px, int py, int t) {
    if (t >= g.npos) return -1;
    const int ox = window_start(px, g.outer, g.W), oy = window_start(py, g.outer, g.H);
    const int ix = window_start(px, g.inner, g.W), iy = window_start(py, g.inner, g.H);
    const int yy = oy + t / g.outer, xx = ox + t % g.outer;
    const bool in = xx >= ix && xx < ix + g.inner && yy >= iy && yy < iy + g.inner;
    return in ? -1 : yy * g.W + xx;
}

// Issue the cp.async copies of staging round `round` (raw[s·K + b] = x[pos][b]): thread b copies band
// b (K < kThreads), so that it alone reads back what it copied (no barrier between copy and use).
__device__ void stage_issue(const double* xb, const Geom& g, const int* pos, int round, double* raw) {
    const int b = threadIdx.x;
    if (b < g.K)
        for (int s = 0; s < kStage; ++s) {
            const int t = round * kStage + s;
            const int o = t < g.npos ? pos[t] : -1;
            if (o >= 0) cp_async8(raw + s * g.K + b, xb + (long long)o * g.K + b);
        }
    cp_async_commit();
}

// The centred copy of this thread's staged elements (after their cp.async completed).
__device__ void stage_centre(const Geom& g, const int* pos, int round, const double* raw, const double* mean, double* Ys) {
    const int b = threadIdx.x;
    if (b >= g.K) return;
    const double m = mean[b];
    for (int s = 0; s < kStage; ++s) {
        const int t = round * kStage + s;
        const int o = t < g.npos ? pos[t] : -1;
        Ys[s * g.stride + b] = o >= 0 ? raw[s * g.K + b] - m : 0.0;
    }
}

struct Shared {
    double *mean, *Ys, *raw, *P, *L, *Wn;
    int *pos, *tab;
};

__device__ Shared carve(double* sm, const Geom& g) {
    Shared s;
    const int rows = 16 * g.M;
    s.mean = sm;
    s.Ys = s.mean + rows;
    s.raw = s.Ys + 2 * kStage * g.stride;
    s.P = s.raw + kStage * g.K;
    s.L = s.P + rows * kPanelStride;
    s.Wn = s.L + rows * kPanelStride;
    s.pos = reinterpret_cast<int*>(s.Wn + rows * kPanelStride);
    s.tab = s.pos + g.npos;
    return s;
}

// (2): S over the window into acc (this warp's tiles: tab[tau0 …], count of them).
__device__ void window_scatter(const double* xb, const Geom& g, const Shared& s, const int* tab, int tau0, int count,
                               double (&acc)[kSlots][4]) {
    const int lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
    const int rounds = (g.npos + kStage - 1) / kStage;
    stage_issue(xb, g, s.pos, 0, s.raw);
    cp_async_wait_all();
    stage_centre(g, s.pos, 0, s.raw, s.mean, s.Ys);
    if (rounds > 1) stage_issue(xb, g, s.pos, 1, s.raw);
    __syncthreads();
    for (int r = 0; r < rounds; ++r) {
        const double* Y = s.Ys + (r & 1) * kStage * g.stride;
#pragma unroll
        for (int ks = 0; ks < kStage; ks += 8) {
            const double* row = Y + (ks + tq) * g.stride;  // positions ks + t; + 4·stride: ks + t + 4
            int cur = -1;
            double a[4] = {};
#pragma unroll
            for (int q = 0; q < kSlots; ++q) {
                if (q < count) {
                    CK_TILE(q);
                    if (mt != cur) {
                        const double* r0 = row + 16 * mt + gq;
                        a[0] = r0[0], a[1] = r0[8], a[2] = r0[4 * g.stride], a[3] = r0[4 * g.stride + 8], cur = mt;
                    }
                    const double b[2] = {row[8 * nt + gq], row[4 * g.stride + 8 * nt + gq]};
                    mma16x8x8(acc[q], a, b);
                }
            }
        }
        if (r + 1 < rounds) {
            cp_async_wait_all();
            stage_centre(g, s.pos, r + 1, s.raw, s.mean, s.Ys + ((r + 1) & 1) * kStage * g.stride);
            if (r + 2 < rounds) stage_issue(xb, g, s.pos, r + 2, s.raw);
        }
        __syncthreads();
    }
}

// LDLᵀ of the panel's diagonal block (rows/columns c0 … c0 + 7 of P; columns at or past np are
// padding and get D = 1, L = 0) by lanes 0 … 7 of one warp, lane i holding row i in registers and
// the pivot's column broadcast by shuffles (fully unrolled: constant register indices). Writes L·D
// (strictly lower) into LdD and 1/D into invD. Returns (in every lane) whether every pivot was
// positive and finite. Called by a whole warp.
__device__ bool factor_block(const double* P, int c0, int np, double (*LdD)[8], double* invD) {
    const int i = threadIdx.x % 32;
    double a[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) a[k] = i < np && k <= i ? P[(c0 + i) * kPanelStride + k] : 0.0;
    bool ok = true;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        double d = __shfl_sync(0xffffffffu, a[j], j);
        if (j >= np) d = 1.0;
        ok = ok && d > 0 && isfinite(d);
        const double inv = __drcp_rn(d), w = a[j];  // w = L(i, j)·D_j
        const double l = w * inv;
        if (i < 8) LdD[i][j] = i > j ? w : 0.0;
        if (i == j) invD[j] = inv;
#pragma unroll
        for (int k = j + 1; k < 8; ++k) {
            const double wk = __shfl_sync(0xffffffffu, a[j], k);  // L(k, j)·D_j
            if (i > j && k <= i) a[k] = fma(-l, wk, a[k]);
        }
    }
    return ok;
}

// (3): the blocked LDLᵀ on the register tiles; returns q = Σ u_j²/D_j (NaN at a failed pivot).
__device__ double bordered_ldlt(const Geom& g, const Shared& s, const int* tab, int tau0, int count, double (&acc)[kSlots][4]) {
    __shared__ double s_invD[8], s_LdD[8][8], s_q;
    __shared__ int s_fail;
    const int lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
    const int rows = 16 * g.M, panels = (g.K + 7) / 8;
    if (threadIdx.x == 0) s_q = 0, s_fail = 0;
    for (int nk = 0; nk < panels; ++nk) {
        const int c0 = 8 * nk, np = min(8, g.K - c0);
        // (a) the panel's raw values: tiles (mt, nk)
        {
#pragma unroll
            for (int q = 0; q < kSlots; ++q) {
                if (q >= count) continue;
                CK_TILE(q);
                if (nt == nk) {
                    double* p0 = s.P + (16 * mt + gq) * kPanelStride + 2 * tq;
                    double* p1 = p0 + 8 * kPanelStride;
                    p0[0] = acc[q][0], p0[1] = acc[q][1], p1[0] = acc[q][2], p1[1] = acc[q][3];
                }
            }
        }
        __syncthreads();
        // (b) the diagonal block, one thread; L·D of its rows for the solves below
        if (threadIdx.x < 32) {
            const bool ok = factor_block(s.P, c0, np, s_LdD, s_invD);
            if (threadIdx.x == 0 && !ok) s_fail = 1;
        }
        __syncthreads();
        if (s_fail) return CUDART_NAN;
        // (c) the rows below the block, one per thread: L(r, j) = (P(r, j) − Σ_l L(r, l)·D_l·L(j, l)) / D_j
        for (int r = c0 + np + int(threadIdx.x); r < rows; r += kThreads) {
            double* Lr = s.L + r * kPanelStride;  // this row's L, read back: registers are short
            double u2 = 0;
#pragma unroll 1
            for (int j = 0; j < 8; ++j) {
                double a = j < np ? s.P[r * kPanelStride + j] : 0.0;
#pragma unroll 1
                for (int m = 0; m < j; ++m) a = fma(-Lr[m], s_LdD[j][m], a);
                const double l = a * s_invD[j];
                u2 = fma(a, l, u2);  // u_j²/D_j for row K
                Lr[j] = l;
                s.Wn[r * kPanelStride + j] = -a;  // −L(r, j)·D_j
            }
            if (r == g.K) s_q += u2;
        }
        __syncthreads();
        // (d) the trailing tiles (nt > nk): A −= (L·D) Lᵀ over the panel's 8 columns
        {
            int cur = -1;
            double a[2][2] = {};
#pragma unroll
            for (int q = 0; q < kSlots; ++q) {
                if (q >= count) continue;
                CK_TILE(q);
                if (nt > nk) {
                    if (mt != cur) {
                        const double* w0 = s.Wn + (16 * mt + gq) * kPanelStride + tq;
                        a[0][0] = w0[0], a[0][1] = w0[8 * kPanelStride], a[1][0] = w0[4], a[1][1] = w0[8 * kPanelStride + 4];
                        cur = mt;
                    }
                    const double* l0 = s.L + (8 * nt + gq) * kPanelStride + tq;
                    mma16x8x4(acc[q], a[0][0], a[0][1], l0[0]);
                    mma16x8x4(acc[q], a[1][0], a[1][1], l0[4]);
                }
            }
        }
        // (a) of the next panel writes P, read in (c) above: the barrier after (c) orders them; (c) of
        // the next panel writes L and Wn after two more barriers.
    }
    __syncthreads();
    return s_q;
}

__global__ void __launch_bounds__(kThreads, 1) local_rx_mma_kernel(const double* xb, Geom g, OutView out,
                                                                   unsigned long long* singular) {
    extern __shared__ double sm[];
    const Shared s = carve(sm, g);
    __shared__ int s_bad;
    const long long p = blockIdx.x;
    const int px = int(p % g.W), py = int(p / g.W);
    if (threadIdx.x == 0) s_bad = 0;
    for (int t = threadIdx.x; t < g.npos; t += kThreads) s.pos[t] = window_position(g, px, py, t);
    fill_tiles(s.tab, g.tiles);
    for (int e = threadIdx.x; e < 2 * kStage * g.stride; e += kThreads) s.Ys[e] = 0.0;
    for (int e = threadIdx.x; e < 2 * 16 * g.M * kPanelStride; e += kThreads) s.L[e] = 0.0;  // L and Wn
    __syncthreads();
    // (1) the mean, and whether the pixel itself is finite. The CPU's order; 16 loads in flight per
    // thread (one at a time, each add waited for its L2 round trip).
    for (int b = threadIdx.x; b < 16 * g.M; b += kThreads) {
        double sum = 0;
        if (b < g.K) {
            for (int t0 = 0; t0 < g.npos; t0 += 16) {
                double v[16];
#pragma unroll
                for (int i = 0; i < 16; ++i) {
                    const int o = t0 + i < g.npos ? s.pos[t0 + i] : -1;
                    v[i] = xb[(long long)(o >= 0 ? o : 0) * g.K + b];
                }
#pragma unroll
                for (int i = 0; i < 16; ++i)
                    if (t0 + i < g.npos && s.pos[t0 + i] >= 0) sum = sum + v[i];
            }
            if (!isfinite(xb[p * g.K + b])) s_bad = 1;
        }
        s.mean[b] = b < g.K ? sum / double(g.n) : 0.0;
    }
    __syncthreads();
    if (s_bad) {
        if (threadIdx.x == 0) out.put(p, CUDART_NAN);
        return;
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
    const int tau0 = warp * g.per_warp, count = max(0, min(g.per_warp, g.tiles - tau0));
    double acc[kSlots][4] = {};
    window_scatter(xb, g, s, s.tab, tau0, count, acc);
    // Row K of the bordered matrix: y = x_p − mean (its columns < K; the scatter left it zero).
    {
        const int* tab = s.tab;
        const int mK = g.K / 16, rK = g.K % 16;
#pragma unroll
        for (int q = 0; q < kSlots; ++q) {
            if (q >= count) continue;
            CK_TILE(q);
            if (mt == mK && gq == rK % 8)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int c = 8 * nt + 2 * tq + h;
                    const double y = c < g.K ? xb[p * g.K + c] - s.mean[c] : 0.0;
                    if (rK < 8) acc[q][h] = y;  // constant register indices: acc stays in registers
                    else acc[q][2 + h] = y;
                }
        }
    }
    const double q = bordered_ldlt(g, s, s.tab, tau0, count, acc);
    if (threadIdx.x == 0) {
        out.put(p, isnan(q) ? CUDART_NAN : q * g.div);
        if (isnan(q)) atomicAdd(singular, 1ull);
    }
}

}  // namespace

bool local_rx_mma(const Context& ctx, const double* xb, int W, int H, int K, LocalWindows win, int ddof,
                  const OutView& out, unsigned long long* singular) {
    const int M = (K + 1 + 15) / 16;
    if (M > kMaxM || K < 1) return false;
    Geom g{W, H, K, win.inner, win.outer, M, M * (M + 1), 0, 16 * M + 8, win.outer * win.outer,
           win.outer * win.outer - win.inner * win.inner, double(win.outer * win.outer - win.inner * win.inner - ddof)};
    g.per_warp = (g.tiles + kWarps - 1) / kWarps;
    const int rows = 16 * M;
    const std::size_t bytes = sizeof(double) * (std::size_t(rows) + 2u * kStage * g.stride + std::size_t(kStage) * K +
                                                3u * rows * kPanelStride) +
                              sizeof(int) * std::size_t(g.npos + g.tiles);
    int device = 0, optin = 0, major = 0;
    CUBEKIT_CUDA_CHECK(cudaGetDevice(&device));
    CUBEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    CUBEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    if (major < 9 || bytes + 2048 > std::size_t(optin)) return false;  // the m16n8 f64 shapes are sm_90's
    CUBEKIT_CUDA_CHECK(cudaFuncSetAttribute(local_rx_mma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
    const long long P = (long long)W * H;
    if (P > 0x7fffffffll) return false;  // one block per pixel: gridDim.x ≤ 2³¹ − 1
    const dim3 grid{unsigned(P)};
    local_rx_mma_kernel<<<grid, kThreads, bytes, stream_of(ctx)>>>(xb, g, out, singular);
    CUBEKIT_CHECK_LAUNCH(ctx, "local_rx_mma_kernel", grid, dim3(kThreads));
    return true;
}

}  // namespace cubekit::detail
