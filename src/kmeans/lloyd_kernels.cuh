#pragma once
// Kernels of the CUDA k-means Lloyd engine (spec kmeans.md §3.5–3.8, §4.2), included by cuda.cu:
// the fused assign + accumulate pass, the one-block update, the relocation's distances, the
// final labelling pass and the relabel + paint pass. Pixels come from a dense BIP image on the
// device (Pixels, device.cuh); the labels and the painted image go to the caller's views.
#include "cubekit/view.hpp"
#include "kmeans/device.cuh"

namespace cubekit::detail {
namespace {

constexpr std::size_t kSharedLimit = 160 * 1024;  // dynamic shared memory we allow one block
constexpr int kShiftShared = 4096;                 // clusters whose shifts the update keeps in shared memory

// Where label p (raster order) goes in the caller's W×H×1 view: p itself for dense labels, else
// through the strides (a division per pixel, in the final passes only).
struct LabelsOut {
    std::int32_t* data = nullptr;
    int width = 1;
    std::int64_t sx = 1, sy = 0;
    __device__ std::int32_t& operator[](std::int64_t p) const {
        if (sx == 1 && sy == width) return data[p];
        return data[(p % width) * sx + (p / width) * sy];
    }
};

// Where sample b of pixel p goes in the caller's W×H×m painted image: p·m + b for dense BIP,
// else through the strides.
template <typename T>
struct PaintOut {
    T* data = nullptr;
    int width = 1, m = 1;
    Strides s;
    __device__ T& operator()(std::int64_t p, int b) const {
        if (s.b == 1 && s.x == m && s.y == std::int64_t(width) * m) return data[p * m + b];
        return data[(p % width) * s.x + (p / width) * s.y + std::int64_t(b) * s.b];
    }
};

// Device-side loop state, read by the host once per batch.
struct Status {
    int done;        // converged, or max_iter reached
    int converged;
    int stalled;     // an iteration left a cluster empty under `relocate`: the host relocates
    int iterations;  // iterations completed
    int rescan;      // bounded passes: the next pass scans every pixel and counts from zero
    int relocated;   // bounded passes: set by the host after a relocation (the labels it moved)
};

// 64-bit add into two 32-bit shared words: the low word's carry goes into the high word exactly
// once, so the pair holds the exact sum modulo 2^64 (two's complement: signed sums too).
__device__ void shared_add64(unsigned* pair, std::int64_t v) {
    const auto u = u64(v);
    const auto lo = unsigned(u), hi = unsigned(u >> 32);
    const unsigned old = atomicAdd(pair, lo);
    atomicAdd(pair + 1, hi + (old + lo < old ? 1u : 0u));
}

// Byte offset of the centroids in the assign kernel's shared memory (after 2·k·m sum words and
// k counters, 16-byte aligned).
__host__ __device__ constexpr std::size_t shared_centroid_offset(int k, int m) {
    return (std::size_t(k) * m * 8 + std::size_t(k) * 4 + 15) / 16 * 16;
}

// Many-band pixels, k ≤ kStagedK: a warp stages its 32 spectra through shared memory in chunks
// of `width` bands (row loads are coalesced; one thread walking its own spectrum is not), and
// each lane keeps its k running distances in registers. Each distance still adds bands 0..m−1 in
// order with one FMA each: the arithmetic of km::sq_distance, so labels are unchanged.
constexpr int kStagedK = 16;
template <typename D>
struct StagedTile {
    static constexpr int width = sizeof(D) == 4 ? 32 : 16;  // 8 warps × 32 rows fit 48 KB
};

template <typename T, typename D>
__device__ __forceinline__ int nearest_staged(const Pixels<T>& px, std::int64_t first, std::int64_t n, int m,
                                              const D* cent, int k, D (*tile)[StagedTile<D>::width + 1], D& best) {
    constexpr int W = StagedTile<D>::width;
    const int lane = threadIdx.x & 31;
    D d[kStagedK];
#pragma unroll
    for (int j = 0; j < kStagedK; ++j) d[j] = 0;
    for (int b0 = 0; b0 < m; b0 += W) {
        const int cb = min(W, m - b0);
        if (lane < cb)
            for (int r = 0; r < 32; ++r) tile[r][lane] = first + r < n ? D(px(first + r)[b0 + lane]) : D(0);
        __syncwarp();
        for (int bb = 0; bb < cb; ++bb) {
            const D xv = tile[lane][bb];
#pragma unroll
            for (int j = 0; j < kStagedK; ++j)
                if (j < k) {
                    const D diff = xv - cent[std::size_t(j) * m + b0 + bb];
                    if constexpr (sizeof(D) == 4) d[j] = km::fma32(diff, diff, d[j]);
                    else d[j] = km::fma64(diff, diff, d[j]);
                }
        }
        __syncwarp();
    }
    best = d[0];
    int label = 0;
#pragma unroll
    for (int j = 1; j < kStagedK; ++j)
        if (j < k && d[j] < best) {
            best = d[j];
            label = j;
        }
    return label;
}

template <typename T>
constexpr bool kSmallInt = std::is_integral_v<T> && sizeof(T) <= 2;  // a warp's sum fits 32 bits

// A block's share of the exact sums and counts of a pass (§3.5): in shared memory (Shared: sums as
// 32-bit word pairs, counts as 32-bit words, flushed once per block), else global 64-bit atomics.
template <typename T, bool Shared>
struct PassSums {
    unsigned* words;    // Shared: 2·k·m words, then k counters
    unsigned* counts;
    u64* sums_g;
    u64* counts_g;
    int m;
    double scale;
    bool split;         // 64-bit values reduced through 32-bit parts (see below)

    __device__ void add_sum(std::size_t at, std::int64_t v) const {
        if constexpr (Shared) shared_add64(words + 2 * at, v);
        else atomicAdd(&sums_g[at], u64(v));
    }

    // Lanes with the same key add sign·(their values value(b), b < m) and sign·1 to its count
    // once, through the group's leader; key < 0 adds nothing. Every lane of the warp calls it.
    // (Measured on the H100: faster than one full-warp reduction per distinct label.)
    template <typename Value>
    __device__ __forceinline__ void add(int key, int sign, Value value) const {
        const unsigned group = __match_any_sync(0xffffffffu, key);
        if (key < 0) return;
        const bool leader = (threadIdx.x & 31) == __ffs(group) - 1;
        for (int b = 0; b < m; ++b) {
            const T v = value(b);
            if constexpr (kSmallInt<T>) {
                const auto s = int(__reduce_add_sync(group, unsigned(sign * int(v))));
                if (leader) add_sum(std::size_t(key) * m + b, std::int64_t(s));
            } else if (split) {
                // A 64-bit q split as hi·2^32 + b1·2^16 + b0: the group's sums of the 16-bit
                // parts fit 32 bits, and so does Σ hi because |q| ≤ 2^(62 − ⌈log2 N⌉) with
                // N ≥ 64 (the host's condition), so the recombined sum is exact.
                const std::int64_t q = sign * km::sum_value(v, scale);
                const auto lo = unsigned(u64(q));
                const auto s0 = __reduce_add_sync(group, lo & 0xFFFFu);
                const auto s1 = __reduce_add_sync(group, lo >> 16);
                const auto sh = int(__reduce_add_sync(group, unsigned(int(q >> 32))));
                if (leader)
                    add_sum(std::size_t(key) * m + b,
                            std::int64_t(sh) * 4294967296LL + std::int64_t(s1) * 65536 + std::int64_t(s0));
            } else {
                add_sum(std::size_t(key) * m + b, sign * km::sum_value(v, scale));
            }
        }
        if (leader) {
            const int c = sign * __popc(group);
            if constexpr (Shared) atomicAdd(&counts[key], unsigned(c));
            else atomicAdd(&counts_g[key], u64(std::int64_t(c)));
        }
    }

    // add() for one item standing for w pixels (the colour path, colour_kernels.cuh): w·value(b)
    // and w. An integer value(b) < 2^8 with w < 2^31 gives w·value(b) < 2^39, reduced through
    // its 16-bit parts (the group's sums fit 32 bits); a group's Σw ≤ n < 2^31.
    template <typename Value>
    __device__ __forceinline__ void add_weighted(int key, unsigned w, Value value) const {
        const unsigned group = __match_any_sync(0xffffffffu, key);
        if (key < 0) return;
        const bool leader = (threadIdx.x & 31) == __ffs(group) - 1;
        for (int b = 0; b < m; ++b) {
            const u64 v = u64(w) * u64(value(b));
            const auto lo = unsigned(v);
            const auto s0 = __reduce_add_sync(group, lo & 0xFFFFu);
            const auto s1 = __reduce_add_sync(group, lo >> 16);
            const auto sh = __reduce_add_sync(group, unsigned(v >> 32));
            if (leader)
                add_sum(std::size_t(key) * m + b,
                        std::int64_t(sh) * 4294967296LL + std::int64_t(s1) * 65536 + std::int64_t(s0));
        }
        const unsigned total = __reduce_add_sync(group, w);
        if (leader) {
            if constexpr (Shared) atomicAdd(&counts[key], total);
            else atomicAdd(&counts_g[key], u64(total));
        }
    }

    // Shared: the block's words added to the global sums (after a barrier). Net counts may be
    // negative (bounded passes remove pixels): a count word is sign-extended.
    __device__ void flush(int k) const {
        if constexpr (Shared) {
            for (int t = threadIdx.x; t < k * m; t += blockDim.x) {
                const u64 v = (u64(words[2 * t + 1]) << 32) | words[2 * t];
                if (v != 0) atomicAdd(&sums_g[t], v);
            }
            for (int t = threadIdx.x; t < k; t += blockDim.x)
                if (counts[t] != 0) atomicAdd(&counts_g[t], u64(std::int64_t(int(counts[t]))));
        }
    }
};

// A pass's view of its centroids and sums, set up by pass_setup.
template <typename T, typename D, bool Shared>
struct PassSetup {
    const D* cent;  // in shared memory (Shared), else the global ones
    PassSums<T, Shared> sums;
};

// The shared part of a pass's setup: sum words and counters zeroed, the centroids copied in
// (Shared); the centroids the pass reads and its sums.
template <typename T, typename D, bool Shared>
__device__ PassSetup<T, D, Shared> pass_setup(unsigned char* smem, const D* cent_g, int k, int m, u64* sums_g,
                                              u64* counts_g, double scale, bool split) {
    auto* words = reinterpret_cast<unsigned*>(smem);
    const PassSums<T, Shared> sums{words, words + 2 * std::size_t(k) * m, sums_g, counts_g, m, scale, split};
    if constexpr (Shared) {
        D* s_cent = reinterpret_cast<D*>(smem + shared_centroid_offset(k, m));
        for (int t = threadIdx.x; t < k * m; t += blockDim.x) {
            words[2 * t] = words[2 * t + 1] = 0;
            s_cent[t] = cent_g[t];
        }
        for (int t = threadIdx.x; t < k; t += blockDim.x) words[2 * std::size_t(k) * m + t] = 0;
        __syncthreads();
        return {s_cent, sums};
    }
    return {cent_g, sums};
}

// One Lloyd pass (§3.5): nearest centroid, exact sums and counts, f64 inertia partial per block.
// Shared: centroids and the block's sums live in shared memory and are flushed once per block;
// otherwise centroids are read through the cache and sums go to global atomics.
// M > 0: the band count known at compile time (pixel kept in registers).
template <typename T, typename D, int M, bool Shared>
__global__ void __launch_bounds__(kBlock) assign_accumulate(Pixels<T> px, std::int64_t n, int m_rt, int k,
                                                            const D* __restrict__ cent_g, u64* sums_g, u64* counts_g,
                                                            double* inertia_partial, double scale, bool split_sums,
                                                            const Status* status) {
    if (status->done || status->stalled) return;
    const int m = M > 0 ? M : m_rt;
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ double scratch[kBlock];
    const auto [cent, sums] = pass_setup<T, D, Shared>(smem, cent_g, k, m, sums_g, counts_g, scale, split_sums);
    double acc = 0;
    // Every lane of a warp takes the same trip count: the warp intrinsics see all lanes. (Four
    // pixels per thread sharing each centroid load were measured on the H100: no gain, the kernel
    // is issue-bound.)
    constexpr int MR = M > 0 ? M : 1;
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    for (std::int64_t base = std::int64_t(blockIdx.x) * blockDim.x; base < n; base += stride) {
        const std::int64_t i = base + threadIdx.x;
        const bool ok = i < n;
        const T* x = ok ? px(i) : nullptr;
        int label = -1;
        D best = 0;
        T xr[MR];
        if constexpr (M > 0) {
            D xd[M];  // converted once: D(x) is what every distance term would compute
#pragma unroll
            for (int b = 0; b < M; ++b) {
                xr[b] = ok ? x[b] : T(0);
                xd[b] = D(xr[b]);
            }
            if (ok) label = km::nearest(xd, cent, k, M, best);
        } else if (k <= kStagedK) {
            // Many bands: the warp's spectra go through shared memory in coalesced band chunks.
            __shared__ D tile[kBlock / 32][32][StagedTile<D>::width + 1];
            const int l = nearest_staged(px, base + (threadIdx.x & ~31), n, m, cent, k, tile[threadIdx.x / 32], best);
            if (ok) label = l;
        } else if (ok) {
            label = km::nearest(x, cent, k, m, best);
        }
        if (ok) acc += double(best);
        sums.add(label, 1, [&](int b) {
            if constexpr (M > 0) return xr[b];
            else return x[b];
        });
    }
    const double total = block_sum(acc, scratch);
    if (threadIdx.x == 0) inertia_partial[blockIdx.x] = total;
    sums.flush(k);  // block_sum's barriers have completed the shared sums
}

// The update (§3.6–3.7) in one block: inertia of the pass, new centroids, shift, stop test.
// Bounded passes (drift ≠ nullptr): the sums persist, and *drift (Δ) grows by the largest
// centroid move, rounded up; when a move is not finite or the host relocated, the next pass
// rescans: the sums are cleared and Δ restarts at 0.
template <typename D>
__global__ void update_centroids(D* cent, D* prev, u64* sums, u64* counts, const double* inertia_partial,
                                 int partials, int k, int m, int e, bool zero_empty, bool legacy, bool allow_empty,
                                 double tol_abs, int max_iter, double* history, double* shift_scratch, double* drift,
                                 Status* status) {
    if (status->done || status->stalled) return;
    __shared__ int any_empty, clear_sums;
    __shared__ double scratch[kBlock];
    // The pass's inertia: strided partial sums, then a fixed tree (same order every run).
    double part = 0;
    for (int p = threadIdx.x; p < partials; p += blockDim.x) part += inertia_partial[p];
    const double inertia = block_sum(part, scratch);
    if (threadIdx.x == 0) {
        any_empty = 0;
        if (history) history[status->iterations] = inertia;
    }
    __syncthreads();
    if (!allow_empty) {
        for (int j = threadIdx.x; j < k; j += blockDim.x)
            if (counts[j] == 0) any_empty = 1;
        __syncthreads();
        if (any_empty) {
            if (threadIdx.x == 0) status->stalled = 1;
            return;
        }
    }
    // Per-cluster shifts in shared memory when they fit (the serial sum below reads them).
    extern __shared__ double s_shift[];
    double* shifts = k <= kShiftShared ? s_shift : shift_scratch;
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
        for (int b = 0; b < m; ++b) prev[std::size_t(j) * m + b] = cent[std::size_t(j) * m + b];
        shifts[j] = km::update_cluster(reinterpret_cast<const std::int64_t*>(sums) + std::size_t(j) * m,
                                              std::int64_t(counts[j]), cent + std::size_t(j) * m, m, e, zero_empty, legacy);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double shift = 0, largest = 0;
        for (int j = 0; j < k; ++j) {
            shift += shifts[j];  // cluster order, as the CPU: it decides convergence
            largest = fmax(largest, shifts[j]);
        }
        clear_sums = 1;
        if (drift) {
            // √ and the sums round to nearest: 2^-40 more covers them (Δ must not be low).
            const double next = (*drift + sqrt(largest) * (1.0 + 0x1p-40)) * (1.0 + 0x1p-50);
            const bool rescan = status->relocated || !(next < INFINITY);
            *drift = rescan ? 0.0 : next;
            status->rescan = rescan;
            status->relocated = 0;
            clear_sums = rescan;
        }
        status->iterations += 1;
        if (!legacy && shift <= tol_abs) {
            status->converged = 1;
            status->done = 1;
        } else if (status->iterations >= max_iter) {
            status->done = 1;
        }
    }
    __syncthreads();
    if (clear_sums) {
        for (int t = threadIdx.x; t < k * m; t += blockDim.x) sums[t] = 0;
        for (int j = threadIdx.x; j < k; j += blockDim.x) counts[j] = 0;
    }
}

// Distance of every pixel to its nearest centroid (the relocation's D_i, §3.7).
template <typename T, typename D>
__global__ void nearest_distance(Pixels<T> px, std::int64_t n, int k, const D* cent, D* out) {
    const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    D d;
    km::nearest(px(i), cent, k, px.m, d);
    out[i] = d;
}

// Final pass (§3.8): labels (pre-sort numbering), counts, f64 inertia against `paint`, and the
// exact fixed-point inertia that chooses between restarts.
// M > 0: band count known at compile time. shared_counts: k counters fit in shared memory.
template <typename T, typename D, int M>
__global__ void __launch_bounds__(kBlock) final_assign(Pixels<T> px, std::int64_t n, int k, const D* assign,
                                                       const D* paint, const std::int64_t* qpaint, double scale_d,
                                                       LabelsOut labels, u64* counts, double* inertia_partial,
                                                       u64* exact, bool shared_counts) {
    __shared__ double scratch[kBlock];
    extern __shared__ __align__(16) unsigned char smem[];
    auto* s_counts = reinterpret_cast<unsigned*>(smem);  // k counters; a block counts < 2^32 pixels
    if (shared_counts)
        for (int t = threadIdx.x; t < k; t += blockDim.x) s_counts[t] = 0;
    __syncthreads();
    const int m = M > 0 ? M : px.m;
    double acc = 0;
    i128 ex = 0;
    // Every lane of a warp takes the same trip count (nearest_staged is a warp operation).
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    for (std::int64_t base = std::int64_t(blockIdx.x) * blockDim.x; base < n; base += stride) {
        const std::int64_t i = base + threadIdx.x;
        const bool ok = i < n;
        const T* x = ok ? px(i) : nullptr;
        D d = 0;
        int j = 0;
        if constexpr (M > 0) {
            if (!ok) continue;
            D xd[M];
#pragma unroll
            for (int b = 0; b < M; ++b) xd[b] = D(x[b]);
            j = km::nearest(xd, assign, k, M, d);
        } else if (k <= kStagedK) {
            // Many bands: the warp's spectra staged through shared memory, as in the Lloyd pass
            // (one thread walking its own spectrum reads 32 rows at once; measured on the H100,
            // 2026-11-27: 0.43 ms for 610×340×103, k = 9).
            __shared__ D tile[kBlock / 32][32][StagedTile<D>::width + 1];
            j = nearest_staged(px, base + (threadIdx.x & ~31), n, m, assign, k, tile[threadIdx.x / 32], d);
            if (!ok) continue;
        } else {
            if (!ok) continue;
            j = km::nearest(x, assign, k, m, d);
        }
        if (assign != paint) d = km::sq_distance(x, paint + std::size_t(j) * m, m);
        acc += double(d);
        if (shared_counts) atomicAdd(&s_counts[j], 1u);
        else atomicAdd(&counts[j], 1ull);
        if (labels.data) labels[px.raster(i)] = j;
        if (qpaint) ex += km::exact_distance(x, qpaint + std::size_t(j) * m, m, scale_d);
    }
    const double total = block_sum(acc, scratch);  // (its barrier also completes the shared counts)
    if (threadIdx.x == 0) inertia_partial[blockIdx.x] = total;
    if (shared_counts)
        for (int t = threadIdx.x; t < k; t += blockDim.x)
            if (s_counts[t] != 0) atomicAdd(&counts[t], u64(s_counts[t]));
    if (qpaint && ex != 0) atomic_add_i128(exact, ex);
}

// Renumbers labels after the sort (excluded pixels, flags[p] = 0, get −1) and, with
// paint_samples, paints the quantized image: palette entries, excluded pixels their own samples.
// One thread per pixel.
template <typename T>
__global__ void relabel_paint(LabelsOut labels, std::int64_t pixels, const std::uint8_t* flags, const int* new_label,
                              const T* palette, const T* x, int m, PaintOut<T> quantized, bool paint_samples) {
    const std::int64_t p = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (p >= pixels) return;
    const bool valid = !flags || flags[p];
    const int r = valid ? new_label[labels[p]] : -1;
    labels[p] = r;
    if (!quantized.data || !paint_samples) return;
    const T* from = r >= 0 ? palette + std::size_t(r) * m : x + p * m;
    for (int b = 0; b < m; ++b) quantized(p, b) = from[b];
}

// The painting of relabel_paint for many bands, after it: one thread per sample, so that a warp
// writes consecutive samples (a thread per pixel writes 32 spectra' worth of rows at once:
// measured on the H100, 2026-11-27, 0.6 ms for 610×340×103).
template <typename T>
__global__ void paint_samples(LabelsOut labels, std::int64_t pixels, int m, const T* palette, const T* x,
                              PaintOut<T> quantized) {
    const std::int64_t e = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= pixels * m) return;
    const std::int64_t p = e / m;
    const int b = int(e - p * m);
    const int r = labels[p];
    quantized(p, b) = r >= 0 ? palette[std::size_t(r) * m + b] : x[e];
}

}  // namespace
}  // namespace cubekit::detail
