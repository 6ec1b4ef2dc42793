#pragma once
// RCMG device code shared by the CUDA backend (cuda.cu) and the variant probe
// (bench/probes/rcmg_pairs_variants.cu): the window, the robust maximum, the band-tile staging and
// the shared-pairs kernel, whose tile shape, bands per barrier and prefetch depth are a PairsConfig.
// Internal linkage (anonymous namespace): each includer gets its own kernels.
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

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

// ---- Exact squares ------------------------------------------------------------------------------
// Spec A-3 adds diff·diff to the sum unfused: round(d + round(diff²)). When diff² is exact in Acc
// (round(diff²) = diff²), fma(diff, diff, d) = round(d + diff²) is the same number with one
// operation fewer. It is when both samples are integers of magnitude ≤ kExactBound: |diff| ≤ 2^25
// (f64: diff² < 2^52) or 2^11 (f32: diff² < 2^24), and the difference itself is exact.
template <typename Acc> inline constexpr double kExactBound = std::is_same_v<Acc, double> ? 16777216.0 : 1024.0;

// True when every sample of type T is such an integer (8-bit always; 16-bit with f64 sums).
template <typename T, typename Acc>
inline constexpr bool kSquaresAlwaysExact =
    std::is_integral_v<T> && (sizeof(T) == 1 || (sizeof(T) == 2 && std::is_same_v<Acc, double>));

template <typename Acc, typename T>
__device__ __forceinline__ bool exact_sample(T v) {
    if constexpr (std::is_integral_v<T>) {
        return static_cast<long long>(v) >= -static_cast<long long>(kExactBound<Acc>) &&
               static_cast<long long>(v) <= static_cast<long long>(kExactBound<Acc>);
    } else {
        return v == trunc(v) && fabs(v) <= T(kExactBound<Acc>);  // false for NaN and ±inf
    }
}

// Where each thread's loads of a TW×TH band tile whose top-left is image (x0, y0) come from,
// clamped to the image (spec A-2). Bands are staged through registers (kLoads per thread and band)
// so that later bands are in flight while the current one is used.
template <typename T, int TW, int TH, int Threads>
struct TilePlan {
    static constexpr int kLoads = (TW * TH + Threads - 1) / Threads;
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
    __device__ void load(T (&reg)[kLoads], const T* __restrict__ plane) const {
#pragma unroll
        for (int k = 0; k < kLoads; ++k)
            if (offset[k] >= 0) reg[k] = __ldg(plane + offset[k]);
    }
    template <typename Acc>
    __device__ bool all_exact(const T (&reg)[kLoads]) const {
        bool ok = true;
#pragma unroll
        for (int k = 0; k < kLoads; ++k)
            if (offset[k] >= 0) ok &= exact_sample<Acc>(reg[k]);
        return ok;
    }
    template <typename Acc>
    __device__ void store(const T (&reg)[kLoads], Acc* tile, int tid) const {
#pragma unroll
        for (int k = 0; k < kLoads; ++k)
            if (offset[k] >= 0) tile[tid + k * Threads] = Acc(reg[k]);
    }
};

// ---- shared-pairs: each distinct neighbour distance once ---------------------------------------

// Shape of the shared-pairs kernel: (32 / Cols) × ThreadsY threads; thread (tx, ty) owns region
// columns Cols·tx .. Cols·tx + Cols − 1 and rows Rows·ty .. Rows·ty + Rows − 1; the region is the
// 30 × (ThreadsY·Rows − 2) output tile plus a one-pixel apron. Group bands are staged per barrier,
// Ahead groups are in flight in registers. Cols = 2 reads its band-tile rows as pairs (16-byte
// shared loads): 5.5 loads a pixel and band instead of 9 for Rows = 2, Cols = 1.
template <int Rows, int Cols, int ThreadsY, int Group, int Ahead, int MinBlocks>
struct PairsConfig {
    static_assert(Cols == 1 || Cols == 2, "one or two columns a thread");
    static constexpr int kRows = Rows, kCols = Cols, kThreadsY = ThreadsY, kGroup = Group, kAhead = Ahead;
    static constexpr int kMinBlocks = MinBlocks;
    static constexpr int kThreadsX = 32 / Cols;  // a warp spans whole region rows: band rows are read coalesced
    static constexpr int kThreads = kThreadsX * ThreadsY;
    static constexpr int kRegionW = 32, kRegionH = ThreadsY * Rows;
    static constexpr int kOutX = kRegionW - 2, kOutY = kRegionH - 2;
    static constexpr int kPadX = 2;  // band tile: region + 2 columns each side + 2 rows below, so
    static constexpr int kBandW = kRegionW + 2 * kPadX;  // every thread computes every offset unconditionally
    static constexpr int kBandH = kRegionH + 2;

    template <int N, typename Acc>
    static constexpr std::size_t smem_bytes() {
        const std::size_t bands = 2 * std::size_t(Group) * kBandW * kBandH * sizeof(Acc);
        const std::size_t dist = std::size_t(Win<N>::num_offsets) * kRegionW * kRegionH * sizeof(Acc);
        return bands > dist ? bands : dist;
    }
};

template <typename Acc> struct Pair;
template <> struct Pair<double> { using type = double2; };
template <> struct Pair<float> { using type = float2; };

// Row values cols c0 .. c0 + Count − 1 of a band tile into v (Count even: as 16- or 8-byte pairs;
// c0 even and rows an even number of elements apart keep each pair aligned).
template <int Count, int Cols, typename Acc>
__device__ __forceinline__ void read_row(Acc* v, const Acc* row, int c0) {
    if constexpr (Cols == 2 && Count % 2 == 0) {
        using P = typename Pair<Acc>::type;
#pragma unroll
        for (int c = 0; c < Count; c += 2) {
            const P pair = *reinterpret_cast<const P*>(row + c0 + c);
            v[c] = pair.x;
            v[c + 1] = pair.y;
        }
    } else {
#pragma unroll
        for (int c = 0; c < Count; ++c) v[c] = row[c0 + c];
    }
}

// E_d(q) += (x_q − x_{q+d})² for a thread's region pixels q (rows ry .., columns cx ..) and every
// offset d, from band tile t. Reads rows ry .. ry + R + 1, columns cx − 2 .. cx + CX + 1 (row ry
// needs only columns cx .. cx + CX + 1: offsets there point right or down).
template <int N, int R, int CX, int BandW, bool Fused, typename Acc>
__device__ __forceinline__ void add_band_terms(Acc (&E)[R][CX][Win<N>::num_offsets], const Acc* t, int ry, int cx) {
    Acc v[R + 2][CX + 4];
    read_row<CX + 2, CX>(&v[0][2], t + ry * BandW, cx);
#pragma unroll
    for (int r = 1; r < R + 2; ++r) read_row<CX + 4, CX>(v[r], t + (ry + r) * BandW, cx - 2);
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int q = 0; q < CX; ++q)
#pragma unroll
            for (int o = 0; o < Win<N>::num_offsets; ++o) {
                const Acc diff = v[r][2 + q] - v[r + Win<N>::ody(o)][2 + q + Win<N>::odx(o)];
                if constexpr (Fused) E[r][q][o] = fma(diff, diff, E[r][q][o]);
                else E[r][q][o] = E[r][q][o] + diff * diff;
            }
}

// Per band, each thread adds (x_q − x_{q+d})² to E_d(q) for its region pixels q and every
// offset d (registers). After the band loop the E_d are stored in shared memory (aliasing the band
// tiles) and each output pixel gathers its n(n−1)/2 pair distances from them. Same value, order
// and rounding as the CPU: D_ij at p is E_{pos_j−pos_i}(p + pos_i), a sum of the same squares in
// the same band order. DRAM: the cube once (apron re-reads hit L2) + the output. Work: 12 (6)
// offsets per region pixel per band, 3 FP64 operations each (no FMA: spec A-3).
template <typename T, typename Acc, typename Out, int N, typename C>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks)
rcmg_shared_pairs_kernel(const T* __restrict__ cube, Out* __restrict__ out, Geometry g, int reject, bool squared) {
    constexpr int NO = Win<N>::num_offsets, P = N * (N - 1) / 2;
    constexpr int R = C::kRows, CX = C::kCols, G = C::kGroup, A = C::kAhead, kBandTile = C::kBandW * C::kBandH;
    using Plan = TilePlan<T, C::kBandW, C::kBandH, C::kThreads>;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    Acc* smem = reinterpret_cast<Acc*>(smem_raw);
    const int W = g.width, H = g.height, B = g.bands;
    const int tid = threadIdx.y * C::kThreadsX + threadIdx.x;
    const int ox = blockIdx.x * C::kOutX, oy = blockIdx.y * C::kOutY;  // first output pixel of the tile
    Plan plan;
    plan.init(tid, ox - 1 - C::kPadX, oy - 1, W, H, g.row_stride);
    const std::int64_t plane = g.band_stride;
    const int groups = (B + G - 1) / G;

    Acc E[R][CX][NO];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int q = 0; q < CX; ++q)
#pragma unroll
            for (int o = 0; o < NO; ++o) E[r][q][o] = Acc(0);

    T reg[A][G][Plan::kLoads];
    auto load_group = [&](T (&stage)[G][Plan::kLoads], int group) {
#pragma unroll
        for (int i = 0; i < G; ++i)
            if (group * G + i < B) plan.load(stage[i], cube + std::int64_t(group * G + i) * plane);
    };
#pragma unroll
    for (int s = 0; s < A; ++s)
        if (s < groups) load_group(reg[s], s);

    // Region columns cx .. cx + CX − 1, rows ry .. ry + R − 1 (band-tile coordinates: + kPadX).
    const int cx = threadIdx.x * CX + C::kPadX;
    const int ry = threadIdx.y * R;
    for (int g0 = 0; g0 < groups; g0 += A) {
#pragma unroll
        for (int s = 0; s < A; ++s) {  // unrolled so that reg[s] is a register, not local memory
            const int group = g0 + s;
            if (group >= groups) break;  // the same for every thread of the block
            Acc* tiles = smem + (group & 1) * G * kBandTile;
#pragma unroll
            for (int i = 0; i < G; ++i)
                if (group * G + i < B) plan.store(reg[s][i], tiles + i * kBandTile, tid);
            // One barrier a group; it also tells whether every staged sample is an exact integer.
            bool exact = true;
            if constexpr (kSquaresAlwaysExact<T, Acc>) {
                __syncthreads();
            } else {
                bool mine = true;
#pragma unroll
                for (int i = 0; i < G; ++i)
                    if (group * G + i < B) mine &= plan.template all_exact<Acc>(reg[s][i]);
                exact = __syncthreads_and(mine) != 0;
            }
            if (group + A < groups) load_group(reg[s], group + A);
#pragma unroll
            for (int i = 0; i < G; ++i) {
                if (group * G + i >= B) break;
                const Acc* t = tiles + i * kBandTile;
                // The same code twice, chosen for the whole block: fused only where exact.
                if (exact) add_band_terms<N, R, CX, C::kBandW, true>(E, t, ry, cx);
                else add_band_terms<N, R, CX, C::kBandW, false>(E, t, ry, cx);
            }
            // A tile buffer is rewritten two groups later, after the next barrier: one barrier a group.
        }
    }
    __syncthreads();  // the band tiles are dead; their memory now holds E
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int q = 0; q < CX; ++q)
#pragma unroll
            for (int o = 0; o < NO; ++o)
                smem[(o * C::kRegionH + ry + r) * C::kRegionW + threadIdx.x * CX + q] = E[r][q][o];
    __syncthreads();

    for (int k = tid; k < C::kOutX * C::kOutY; k += C::kThreads) {
        const int lx = k % C::kOutX, ly = k / C::kOutX;  // output pixel within the tile
        const int x = ox + lx, y = oy + ly;
        if (x >= W || y >= H) continue;
        Acc D[P];
        int p = 0;
#pragma unroll
        for (int i = 0; i < N; ++i)
#pragma unroll
            for (int j = i + 1; j < N; ++j, ++p) {
                const int o = offset_index<N>(i, j);
                D[p] = smem[(o * C::kRegionH + ly + 1 + Win<N>::dy(i)) * C::kRegionW + lx + 1 + Win<N>::dx(i)];
            }
        out[std::int64_t(y) * g.out_row_stride + x] = finish<Acc, Out>(robust_max<N>(D, reject), squared);
    }
}

}  // namespace
}  // namespace cubekit::detail
