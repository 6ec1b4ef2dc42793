// CUDA k-means (spec kmeans.md §4.2). The host prepares the plan and the init sample with the
// very code the CPU reference uses (prepare.cpp); the device runs every pass over the pixels:
// the k-means++ weight passes, one fused assign+accumulate pass per Lloyd iteration with the
// update as a one-block kernel (iterations are enqueued in batches and skip themselves once the
// device-side status says converged: the host reads a 16-byte status per batch, not per
// iteration), the final labelling pass and the paint pass. Sums are exact int64, so labels,
// counts, centroids and iterations equal the CPU's bit for bit.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/cuda_check.hpp"
#include "cubekit/error.hpp"
#include "kmeans/kmeans_internal.hpp"

namespace cubekit::detail {
namespace {

using km::i128;
using u64 = unsigned long long;

constexpr int kBlock = 256;
constexpr std::size_t kSharedLimit = 160 * 1024;  // dynamic shared memory we allow one block

// Device-side loop state, read by the host once per batch.
struct Status {
    int done;        // converged, or max_iter reached
    int converged;
    int stalled;     // an iteration left a cluster empty under `relocate`: the host relocates
    int iterations;  // iterations completed
};

__device__ void atomic_add_i128(u64* acc, i128 v) {
    const u64 lo = u64(v), hi = u64(km::u128(v) >> 64);
    const u64 old = atomicAdd(acc, lo);
    atomicAdd(acc + 1, hi + (old + lo < old ? 1ull : 0ull));  // carry of the low word, exactly once
}

i128 read_i128(const u64* two) { return i128((km::u128(two[1]) << 64) | km::u128(two[0])); }

// Pixel i of a pass: raster index idx[i] when some pixels are excluded, else i itself.
template <typename T>
struct Pixels {
    const T* x;
    const std::int64_t* idx;
    int m;
    __device__ const T* operator()(std::int64_t i) const { return x + (idx ? idx[i] : i) * m; }
    __device__ std::int64_t raster(std::int64_t i) const { return idx ? idx[i] : i; }
};

// Sum of a block's values in a fixed tree order (deterministic for a fixed grid).
__device__ double block_sum(double v, double* scratch) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
        __syncthreads();
    }
    const double total = scratch[0];
    __syncthreads();
    return total;
}

template <typename T>
constexpr bool kSmallInt = std::is_integral_v<T> && sizeof(T) <= 2;  // a warp's sum fits 32 bits

// One Lloyd pass (§3.5): nearest centroid, exact sums and counts, f64 inertia partial per block.
// Shared: centroids and the block's sums live in shared memory and are flushed once per block;
// otherwise centroids are read through the cache and sums go to global atomics.
// M > 0: the band count known at compile time (pixel kept in registers).
template <typename T, typename D, int M, bool Shared>
__global__ void __launch_bounds__(kBlock) assign_accumulate(Pixels<T> px, std::int64_t n, int m_rt, int k,
                                                            const D* __restrict__ cent_g, u64* sums_g, u64* counts_g,
                                                            double* inertia_partial, double scale, const Status* status) {
    if (status && status->done) return;
    const int m = M > 0 ? M : m_rt;
    extern __shared__ __align__(16) unsigned char smem[];
    const D* cent = cent_g;
    u64* sums = sums_g;
    u64* counts = counts_g;
    __shared__ double scratch[kBlock];
    if constexpr (Shared) {
        u64* s_sums = reinterpret_cast<u64*>(smem);
        u64* s_counts = s_sums + std::size_t(k) * m;
        D* s_cent = reinterpret_cast<D*>(s_counts + k);
        for (int t = threadIdx.x; t < k * m; t += blockDim.x) {
            s_sums[t] = 0;
            s_cent[t] = cent_g[t];
        }
        for (int t = threadIdx.x; t < k; t += blockDim.x) s_counts[t] = 0;
        __syncthreads();
        cent = s_cent;
        sums = s_sums;
        counts = s_counts;
    }
    const int lane = threadIdx.x & 31;
    double acc = 0;
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    // Every lane of a warp takes the same trip count, so the warp-wide intrinsics see all lanes.
    for (std::int64_t base = std::int64_t(blockIdx.x) * blockDim.x; base < n; base += stride) {
        const std::int64_t i = base + threadIdx.x;
        const bool ok = i < n;
        int label = -1;
        const T* x = nullptr;
        T xr[M > 0 ? M : 1];
        if (ok) {
            x = px(i);
            D d;
            if constexpr (M > 0) {
#pragma unroll
                for (int b = 0; b < M; ++b) xr[b] = x[b];
                label = km::nearest(xr, cent, k, M, d);
            } else {
                label = km::nearest(x, cent, k, m, d);
            }
            acc += double(d);
        }
        // Lanes with the same label add their values once, through the group's leader.
        const unsigned group = __match_any_sync(0xffffffffu, label);
        if (!ok) continue;
        const bool leader = lane == __ffs(group) - 1;
        for (int b = 0; b < m; ++b) {
            T v;
            if constexpr (M > 0) v = xr[b];
            else v = x[b];
            if constexpr (kSmallInt<T>) {
                const auto s = int(__reduce_add_sync(group, unsigned(int(v))));
                if (leader) atomicAdd(&sums[std::size_t(label) * m + b], u64(std::int64_t(s)));
            } else {
                atomicAdd(&sums[std::size_t(label) * m + b], u64(km::sum_value(v, scale)));
            }
        }
        if (leader) atomicAdd(&counts[label], u64(__popc(group)));
    }
    const double total = block_sum(acc, scratch);
    if (threadIdx.x == 0) inertia_partial[blockIdx.x] = total;
    if constexpr (Shared) {
        for (int t = threadIdx.x; t < k * m; t += blockDim.x)
            if (sums[t] != 0) atomicAdd(&sums_g[t], sums[t]);
        for (int t = threadIdx.x; t < k; t += blockDim.x)
            if (counts[t] != 0) atomicAdd(&counts_g[t], counts[t]);
    }
}

// The update (§3.6–3.7) in one block: inertia of the pass, new centroids, shift, stop test.
template <typename D>
__global__ void update_centroids(D* cent, D* prev, u64* sums, u64* counts, const double* inertia_partial,
                                 int partials, int k, int m, int e, bool zero_empty, bool legacy, bool allow_empty,
                                 double tol_abs, int max_iter, double* history, double* shift_scratch, Status* status) {
    if (status->done) return;
    __shared__ int any_empty;
    if (threadIdx.x == 0) {
        any_empty = 0;
        double inertia = 0;
        for (int p = 0; p < partials; ++p) inertia += inertia_partial[p];
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
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
        for (int b = 0; b < m; ++b) prev[std::size_t(j) * m + b] = cent[std::size_t(j) * m + b];
        shift_scratch[j] = km::update_cluster(reinterpret_cast<const std::int64_t*>(sums) + std::size_t(j) * m,
                                              std::int64_t(counts[j]), cent + std::size_t(j) * m, m, e, zero_empty, legacy);
        for (int b = 0; b < m; ++b) sums[std::size_t(j) * m + b] = 0;
        counts[j] = 0;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double shift = 0;
        for (int j = 0; j < k; ++j) shift += shift_scratch[j];  // cluster order, as the CPU
        status->iterations += 1;
        if (!legacy && shift <= tol_abs) {
            status->converged = 1;
            status->done = 1;
        } else if (status->iterations >= max_iter) {
            status->done = 1;
        }
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
template <typename T, typename D>
__global__ void __launch_bounds__(kBlock) final_assign(Pixels<T> px, std::int64_t n, int k, const D* assign,
                                                       const D* paint, const std::int64_t* qpaint, double scale_d,
                                                       std::int32_t* labels, u64* counts, double* inertia_partial,
                                                       u64* exact) {
    __shared__ double scratch[kBlock];
    const int m = px.m;
    double acc = 0;
    i128 ex = 0;
    for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x) {
        const T* x = px(i);
        D d;
        const int j = km::nearest(x, assign, k, m, d);
        if (assign != paint) d = km::sq_distance(x, paint + std::size_t(j) * m, m);
        acc += double(d);
        atomicAdd(&counts[j], 1ull);
        if (labels) labels[px.raster(i)] = j;
        if (qpaint) ex += km::exact_distance(x, qpaint + std::size_t(j) * m, m, scale_d);
    }
    const double total = block_sum(acc, scratch);
    if (threadIdx.x == 0) inertia_partial[blockIdx.x] = total;
    if (qpaint && ex != 0) atomic_add_i128(exact, ex);
}

// Renumbers labels after the sort and paints the quantized image (excluded pixels untouched).
template <typename T>
__global__ void relabel_paint(std::int32_t* labels, std::int64_t pixels, const int* new_label, const T* palette,
                              int m, T* quantized) {
    const std::int64_t p = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (p >= pixels) return;
    const std::int32_t l = labels[p];
    if (l < 0) return;
    const int r = new_label[l];
    labels[p] = r;
    if (quantized)
        for (int b = 0; b < m; ++b) quantized[p * m + b] = palette[std::size_t(r) * m + b];
}

// k-means++ (§3.4): D_i ← min(D_i, d(x_i, c)) over the sample (exact int128), and each block's
// sum of D (block b covers sample positions [b·kBlock, (b+1)·kBlock)).
template <typename T>
__global__ void __launch_bounds__(kBlock) kpp_distance(const T* x, const std::int64_t* sample, std::int64_t n, int m,
                                                       const std::int64_t* qc, double scale_d, bool first, i128* dist,
                                                       i128* block_sums) {
    __shared__ i128 s[kBlock];
    const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    i128 v = 0;
    if (i < n) {
        const i128 d = km::exact_distance(x + sample[i] * m, qc, m, scale_d);
        v = first ? d : (d < dist[i] ? d : dist[i]);
        dist[i] = v;
    }
    s[threadIdx.x] = v;
    __syncthreads();
    for (int st = blockDim.x / 2; st > 0; st /= 2) {
        if (threadIdx.x < st) s[threadIdx.x] += s[threadIdx.x + st];
        __syncthreads();
    }
    if (threadIdx.x == 0) block_sums[blockIdx.x] = s[0];
}

// φ_l = Σ_i min(D_i, d(x_i, candidate l)) for every trial l in one pass.
template <typename T>
__global__ void __launch_bounds__(kBlock) kpp_trials(const T* x, const std::int64_t* sample, std::int64_t n, int m,
                                                     const std::int64_t* qcand, int trials, double scale_d,
                                                     const i128* dist, u64* phi) {
    __shared__ i128 s[kBlock];
    const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    for (int l = 0; l < trials; ++l) {
        i128 v = 0;
        if (i < n) {
            const i128 d = km::exact_distance(x + sample[i] * m, qcand + std::size_t(l) * m, m, scale_d);
            v = d < dist[i] ? d : dist[i];
        }
        s[threadIdx.x] = v;
        __syncthreads();
        for (int st = blockDim.x / 2; st > 0; st /= 2) {
            if (threadIdx.x < st) s[threadIdx.x] += s[threadIdx.x + st];
            __syncthreads();
        }
        if (threadIdx.x == 0 && s[0] != 0) atomic_add_i128(phi + 2 * l, s[0]);
        __syncthreads();
    }
}

}  // namespace
}  // namespace cubekit::detail

#include "kmeans/cuda_engine.inl"
