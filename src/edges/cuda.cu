// The entropy edge detector on CUDA (spec edges.md §3, §4.3): the pipeline of edges_internal.hpp
// over device kernels, one launch per stage for all images, nothing back to the host but the
// thresholds (a few bytes per band) and the outputs asked for.
#include <cuda_runtime.h>

#include <cstring>
#include <limits>
#include <vector>

#include "core/cuda_check.hpp"
#include "core/cuda_helpers.cuh"
#include "cubekit/linalg.hpp"
#include "edges/edges_internal.hpp"
#include "edges/rule_bits.cuh"
#include "labels/labels_internal.hpp"
#include "linalg/pca_internal.hpp"

namespace cubekit::detail {

namespace {

using edges::Output;
using edges::Thr;

// ---- E1: per-band (or global) finite min/max, then the map --------------------------------------

// Doubles as order-preserving unsigned keys, so that min/max are single 64-bit atomics.
__device__ __forceinline__ unsigned long long order_key(double d) {
    const auto u = static_cast<unsigned long long>(__double_as_longlong(d));
    return (u >> 63) ? ~u : (u | 0x8000000000000000ull);
}
__device__ __forceinline__ double from_order_key(unsigned long long k) {
    const unsigned long long u = (k >> 63) ? (k & 0x7fffffffffffffffull) : ~k;
    return __longlong_as_double(static_cast<long long>(u));
}

struct RangeKeys {
    unsigned long long lo, hi;
};

// The host's side of the keys (the scene's ranges of a tiled run): none = {~0, 0}.
unsigned long long order_key_host(double d) {
    unsigned long long u;
    std::memcpy(&u, &d, sizeof u);
    return (u >> 63) ? ~u : (u | 0x8000000000000000ull);
}
double from_order_key_host(unsigned long long k) {
    const unsigned long long u = (k >> 63) ? (k & 0x7fffffffffffffffull) : ~k;
    double d;
    std::memcpy(&d, &u, sizeof d);
    return d;
}

__global__ void init_ranges(RangeKeys* r, int n) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < n) r[b] = {~0ull, 0ull};
}

template <typename T>
__global__ void band_ranges(const T* __restrict__ cube, std::size_t plane, RangeKeys* ranges) {
    const int b = blockIdx.y;
    const T* v = cube + std::size_t(b) * plane;
    unsigned long long lo = ~0ull, hi = 0ull;
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < plane; i += std::size_t(gridDim.x) * blockDim.x) {
        const double x = double(v[i]);
        if (!isfinite(x)) continue;
        const unsigned long long k = order_key(x);
        lo = k < lo ? k : lo;
        hi = k > hi ? k : hi;
    }
    for (int o = 16; o > 0; o >>= 1) {
        const unsigned long long l2 = __shfl_xor_sync(0xffffffffu, lo, o), h2 = __shfl_xor_sync(0xffffffffu, hi, o);
        lo = l2 < lo ? l2 : lo;
        hi = h2 > hi ? h2 : hi;
    }
    if ((threadIdx.x & 31) == 0) {
        if (lo != ~0ull) atomicMin(&ranges[b].lo, lo);
        if (hi != 0ull) atomicMax(&ranges[b].hi, hi);
    }
}

/// Global mode: every band takes the min and max over all bands.
__global__ void combine_ranges(RangeKeys* r, int n) {
    RangeKeys all{~0ull, 0ull};
    for (int b = 0; b < n; ++b) {
        all.lo = r[b].lo < all.lo ? r[b].lo : all.lo;
        all.hi = r[b].hi > all.hi ? r[b].hi : all.hi;
    }
    for (int b = 0; b < n; ++b) r[b] = all;
}

template <typename T>
__global__ void quantize_planes(const T* __restrict__ cube, std::size_t plane, std::size_t total,
                                const RangeKeys* __restrict__ ranges, std::uint8_t* __restrict__ out) {
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < total; i += std::size_t(gridDim.x) * blockDim.x) {
        const RangeKeys r = ranges[i / plane];
        // No finite value in the band: lo key untouched, the band maps to 0.
        const double lo = r.lo == ~0ull ? 0.0 : from_order_key(r.lo);
        const double hi = r.lo == ~0ull ? 0.0 : from_order_key(r.hi);
        out[i] = edges::quantize_value(double(cube[i]), lo, hi);
    }
}

// ---- E2: histograms, thresholds ------------------------------------------------------------------

constexpr int kHistThreads = 256;
constexpr int kHistWarps = kHistThreads / 32;

/// grid (blocks per image, n images): per-warp shared histograms, merged into hist[b][256].
__global__ void __launch_bounds__(kHistThreads) histograms(const std::uint8_t* __restrict__ images, std::size_t plane,
                                                            std::uint32_t* __restrict__ hist) {
    __shared__ std::uint32_t h[kHistWarps][256];
    for (int i = threadIdx.x; i < kHistWarps * 256; i += blockDim.x) (&h[0][0])[i] = 0;
    __syncthreads();
    const int b = blockIdx.y;
    const std::uint8_t* v = images + std::size_t(b) * plane;
    std::uint32_t* mine = h[threadIdx.x / 32];
    // Bytes before the first 16-byte boundary and after the last one go one by one; the middle as uint4.
    const std::size_t head = std::min<std::size_t>(plane, (16 - (reinterpret_cast<std::uintptr_t>(v) & 15)) & 15);
    const std::size_t vec = (plane - head) / 16;
    const std::size_t tail_start = head + vec * 16;
    const std::size_t tid = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x, stride = std::size_t(gridDim.x) * blockDim.x;
    if (tid < head) atomicAdd(&mine[v[tid]], 1u);
    if (tid < plane - tail_start) atomicAdd(&mine[v[tail_start + tid]], 1u);
    const uint4* v4 = reinterpret_cast<const uint4*>(v + head);
    for (std::size_t i = tid; i < vec; i += stride) {
        const uint4 w = v4[i];
        const unsigned words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int k = 0; k < 4; ++k)
#pragma unroll
            for (int s = 0; s < 32; s += 8) atomicAdd(&mine[(words[k] >> s) & 0xffu], 1u);
    }
    __syncthreads();
    for (int g = threadIdx.x; g < 256; g += blockDim.x) {
        std::uint32_t sum = 0;
        for (int w = 0; w < kHistWarps; ++w) sum += h[w][g];
        if (sum != 0) atomicAdd(&hist[std::size_t(b) * 256 + g], sum);
    }
}

// ---- The threshold search: one warp per image ------------------------------------------------------
// The same arithmetic as the CPU's serial search (edges_math.hpp): the per-level terms and every
// split's objective are computed by the lanes in parallel, the class sums by one lane in the CPU's
// order, so the objectives and hence the thresholds are identical.

constexpr int kThresholdWarps = 2;

struct WarpScratch {
    std::uint32_t counts[256];
    std::uint64_t n_a[256];
    double term[256], s_a[256], h[256];
    std::uint8_t levels[256];
};

struct WarpSearch {
    WarpScratch* w;
    int lane;
    __device__ int operator()(const std::uint32_t* c, int m, edges::Objective k, double q) const {
        for (int i = lane; i < m; i += 32) w->term[i] = edges::class_term(c[i], k, q);
        __syncwarp();
        if (lane == 0) {  // the class sums, in the CPU's order
            double s_b = 0.0;
            for (int t = m - 2; t >= 0; --t) {
                s_b = s_b + w->term[t + 1];
                w->h[t] = s_b;
            }
            double s_a = 0.0;
            std::uint64_t n_a = 0;
            for (int t = 0; t <= m - 2; ++t) {
                s_a = s_a + w->term[t];
                n_a += c[t];
                w->s_a[t] = s_a;
                w->n_a[t] = n_a;
            }
        }
        __syncwarp();
        const std::uint64_t total = w->n_a[m - 2] + c[m - 1];
        double best = -INFINITY;
        for (int t = lane; t <= m - 2; t += 32) {
            const double v = edges::split_value(k, q, double(w->n_a[t]), double(total - w->n_a[t]), w->s_a[t], w->h[t]);
            w->h[t] = v;
            best = v > best ? v : best;
        }
        for (int o = 16; o > 0; o >>= 1) {
            const double other = __shfl_xor_sync(0xffffffffu, best, o);
            best = other > best ? other : best;
        }
        __syncwarp();
        const double floor_v = edges::tie_floor(best);
        for (int base = 0; base <= m - 2; base += 32) {  // the lowest tied split
            const int t = base + lane;
            const unsigned tied = __ballot_sync(0xffffffffu, t <= m - 2 && w->h[t] >= floor_v);
            if (tied) return base + __ffs(tied) - 1;
        }
        return 0;
    }
};

__global__ void __launch_bounds__(32 * kThresholdWarps) thresholds_kernel(const std::uint32_t* __restrict__ hist, int n, double q,
                                                                         Thr* __restrict__ out) {
    __shared__ WarpScratch scratch[kThresholdWarps];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int b = blockIdx.x * kThresholdWarps + warp;
    if (b >= n) return;  // whole warps leave together
    WarpScratch* w = &scratch[warp];
    // Compaction (spec §3.2): lane l owns levels 8l..8l+7; an exclusive scan of the occupied counts
    // gives each lane its first position.
    const std::uint32_t* h = hist + std::size_t(b) * 256;
    int mine = 0;
    for (int g = 8 * lane; g < 8 * lane + 8; ++g) mine += h[g] != 0;
    int before = mine;
    for (int o = 1; o < 32; o <<= 1) {
        const int v = __shfl_up_sync(0xffffffffu, before, o);
        if (lane >= o) before += v;
    }
    const int total = __shfl_sync(0xffffffffu, before, 31);
    int pos = before - mine;
    for (int g = 8 * lane; g < 8 * lane + 8; ++g)
        if (h[g] != 0) {
            w->counts[pos] = h[g];
            w->levels[pos] = std::uint8_t(g);
            ++pos;
        }
    __syncwarp();
    const Thr t = edges::thresholds_from_compacted(w->counts, w->levels, total, q, WarpSearch{w, lane});
    if (lane == 0) out[b] = t;
}

__global__ void threshold_mean_kernel(const Thr* __restrict__ t, int n, Thr* out) { *out = edges::threshold_mean(t, n); }

__global__ void band_mean_kernel(const std::uint8_t* __restrict__ images, std::size_t plane, int n, std::uint8_t* __restrict__ out) {
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < plane; i += std::size_t(gridDim.x) * blockDim.x) {
        std::uint64_t sum = 0;
        for (int b = 0; b < n; ++b) sum += images[std::size_t(b) * plane + i];
        out[i] = std::uint8_t(edges::rounded_mean(sum, std::uint32_t(n)));
    }
}

__global__ void binary_kernel(const std::uint8_t* __restrict__ images, std::size_t plane, std::size_t total,
                              const Thr* __restrict__ t, std::uint8_t* __restrict__ out) {
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < total; i += std::size_t(gridDim.x) * blockDim.x)
        out[i] = edges::binarize(images[i], t[i / plane]);
}

/// Per pixel: how many of the n planes hold a nonzero value (maps) or f = 1 (images with thresholds).
__global__ void vote_kernel(const std::uint8_t* __restrict__ planes, std::size_t plane, int n, const Thr* __restrict__ t,
                            int needed, std::uint16_t* __restrict__ count, std::uint8_t* __restrict__ out) {
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < plane; i += std::size_t(gridDim.x) * blockDim.x) {
        int votes = 0;
        for (int b = 0; b < n; ++b) {
            const std::uint8_t v = planes[std::size_t(b) * plane + i];
            votes += t ? edges::binarize(v, t[b]) : (v != 0);
        }
        count[i] = std::uint16_t(votes);
        out[i] = std::uint8_t(votes >= needed);
    }
}

// ---- The backend -----------------------------------------------------------------------------------

/// n dense planes on the device: owned, a caller's dense output, or (read-only) a u8 input itself.
struct Planes {
    DeviceBuffer owned;
    std::uint8_t* ptr = nullptr;
    const std::uint8_t* input = nullptr;
    const std::uint8_t* data() const { return input ? input : ptr; }
};


struct CudaOps {
    const Context& ctx;
    const CubeView& source;  // the input: dense BSQ on ctx's device
    const EdgeOutputs& outputs;
    int W = 0, H = 0;
    int grid_cap = 1;  // blocks of the grid-stride kernels: 16 per SM
    // Every threshold of the run lives in one device array, downloaded once by finish().
    DeviceBuffer thr_store;
    std::size_t thr_used = 0, thr_capacity = 0;
    struct Pending {
        std::size_t offset;
        int n;
        std::vector<EdgeThresholds>* dest;
    };
    std::vector<Pending> pending;

    const EdgeSceneStats* given = nullptr;  // a tile of a scene: the scene's ranges and thresholds

    CudaOps(const Context& c, const CubeView& cube, const EdgeOutputs& o, const EdgeSceneStats* scene = nullptr)
        : ctx(c), source(cube), outputs(o), W(cube.width()), H(cube.height()), grid_cap(16 * sm_count(c)), given(scene),
          thr_capacity(2 * std::size_t(cube.bands()) + 3) {  // bands, components ≤ bands, 3 single ones
        thr_store = DeviceBuffer(ctx, thr_capacity * sizeof(Thr));
    }

    std::size_t plane() const { return std::size_t(W) * std::size_t(H); }
    cudaStream_t stream() const { return stream_of(ctx); }
    dim3 grid_for(std::size_t n, int threads) const {
        const std::size_t blocks = std::min<std::size_t>((n + threads - 1) / threads, std::size_t(grid_cap));
        return dim3(unsigned(std::max<std::size_t>(blocks, 1)));
    }
    CubeView dense_view(const std::uint8_t* p, int n, DType t = DType::U8) const {
        return CubeView::device(p, ctx.device(), W, H, n, t, dense_strides(W, H, n, Layout::BSQ));
    }

    Planes alloc(std::size_t bytes) {
        Planes p;
        p.owned = DeviceBuffer(ctx, std::max<std::size_t>(bytes, 1));
        p.ptr = static_cast<std::uint8_t*>(p.owned.data());
        return p;
    }
    Planes output(Output which, int n) {
        const MutableCubeView& v = edges::view_of(outputs, which);
        if (v.data() && v.is_dense(Layout::BSQ)) return Planes{DeviceBuffer(), reinterpret_cast<std::uint8_t*>(v.data()), nullptr};
        return alloc(plane() * std::size_t(n) * (which == Output::VoteCount ? sizeof(std::uint16_t) : 1));
    }
    bool wants(Output which) const { return edges::view_of(outputs, which).data() != nullptr; }
    void deliver(Planes& p, Output which) {
        const MutableCubeView& v = edges::view_of(outputs, which);
        if (!v.data() || reinterpret_cast<std::uint8_t*>(v.data()) == p.ptr) return;
        copy_cube(ctx, dense_view(p.ptr, v.bands(), v.dtype()), v);
    }

    /// n thresholds in the store.
    Planes thr_slots(int n) {
        if (thr_used + std::size_t(n) > thr_capacity) throw DeviceError("edges: threshold store overflow (internal)");
        Planes t{DeviceBuffer(), static_cast<std::uint8_t*>(thr_store.data()) + thr_used * sizeof(Thr), nullptr};
        thr_used += std::size_t(n);
        return t;
    }
    void to_host(const Planes& t, int n, std::vector<EdgeThresholds>& dest) {
        pending.push_back({std::size_t(t.data() - static_cast<const std::uint8_t*>(thr_store.data())) / sizeof(Thr), n, &dest});
    }
    void finish() {
        std::vector<Thr> h(thr_used);
        if (thr_used > 0) thr_store.download(ctx, h.data(), thr_used * sizeof(Thr));  // waits for the whole run
        else ctx.synchronize();
        for (const Pending& p : pending) *p.dest = edges::to_public(h.data() + p.offset, p.n);
    }

    /// Each band's finite range of n planes of any type at `data`, as keys (device).
    DeviceBuffer ranges_of(const void* data, DType type, int n, Quantize mode) {
        DeviceBuffer ranges(ctx, sizeof(RangeKeys) * std::size_t(n));
        init_ranges<<<(n + 127) / 128, 128, 0, stream()>>>(static_cast<RangeKeys*>(ranges.data()), n);
        CUBEKIT_CHECK_LAUNCH(ctx, "init_ranges", dim3((n + 127) / 128), dim3(128));
        visit_dtype(type, [&](auto tag) {
            using T = decltype(tag);
            const dim3 grid(unsigned(std::min<std::size_t>((plane() + 255) / 256, 64)), unsigned(n));
            band_ranges<T><<<grid, 256, 0, stream()>>>(static_cast<const T*>(data), plane(), static_cast<RangeKeys*>(ranges.data()));
            CUBEKIT_CHECK_LAUNCH(ctx, "band_ranges", grid, dim3(256));
        });
        if (mode == Quantize::Global) {
            combine_ranges<<<1, 1, 0, stream()>>>(static_cast<RangeKeys*>(ranges.data()), n);
            CUBEKIT_CHECK_LAUNCH(ctx, "combine_ranges", dim3(1), dim3(1));
        }
        return ranges;
    }
    /// The scene's ranges (given) as keys on the device.
    DeviceBuffer given_ranges(int n) {
        std::vector<RangeKeys> keys(static_cast<std::size_t>(n));
        for (std::size_t b = 0; b < keys.size(); ++b)
            keys[b] = given->lo[b] <= given->hi[b] ? RangeKeys{order_key_host(given->lo[b]), order_key_host(given->hi[b])}
                                                   : RangeKeys{~0ull, 0ull};
        DeviceBuffer ranges(ctx, sizeof(RangeKeys) * keys.size());
        ranges.upload(ctx, keys.data(), ranges.size());
        return ranges;
    }

    /// E1 of n planes of any type at `data` into the u8 planes at `out` (with the scene's ranges when given).
    void quantize_into(const void* data, DType type, int n, Quantize mode, std::uint8_t* out) {
        const DeviceBuffer ranges = given ? given_ranges(n) : ranges_of(data, type, n, mode);
        visit_dtype(type, [&](auto tag) {
            using T = decltype(tag);
            const T* in = static_cast<const T*>(data);
            const std::size_t total = plane() * std::size_t(n);
            quantize_planes<T><<<grid_for(total, 256), 256, 0, stream()>>>(in, plane(), total,
                                                                           static_cast<const RangeKeys*>(ranges.data()), out);
            CUBEKIT_CHECK_LAUNCH(ctx, "quantize_planes", grid_for(total, 256), dim3(256));
        });
    }
    Planes quantize_device(const void* data, DType type, int n, Quantize mode) {
        Planes out = alloc(plane() * std::size_t(n));
        quantize_into(data, type, n, mode, out.ptr);
        return out;
    }
    Planes quantize(Quantize mode) {
        if (source.dtype() == DType::U8) return Planes{DeviceBuffer(), nullptr, reinterpret_cast<const std::uint8_t*>(source.data())};
        return quantize_device(source.data(), source.dtype(), source.bands(), mode);
    }

    Planes pca_images(int k, std::vector<double>& ratios) {
        const PcaModel model = pca_fit_device(ctx, source, k);
        ratios = model.explained_variance_ratio;
        DeviceBuffer scores(ctx, sizeof(double) * plane() * std::size_t(k));
        pca_transform_device(ctx, source, model, static_cast<double*>(scores.data()));
        return quantize_device(scores.data(), DType::F64, k, Quantize::PerBand);
    }

    /// n × 256 counts of the n images (device).
    DeviceBuffer histograms_of(const Planes& images, int n) {
        DeviceBuffer hist(ctx, sizeof(std::uint32_t) * 256 * std::size_t(n));
        CUBEKIT_CUDA_CHECK(cudaMemsetAsync(hist.data(), 0, hist.size(), stream()));
        const unsigned per_image = unsigned(std::clamp<std::size_t>(plane() / (kHistThreads * 64), 1, 64));
        const dim3 grid(per_image, unsigned(n));
        histograms<<<grid, kHistThreads, 0, stream()>>>(images.data(), plane(), static_cast<std::uint32_t*>(hist.data()));
        CUBEKIT_CHECK_LAUNCH(ctx, "histograms", grid, dim3(kHistThreads));
        return hist;
    }
    Planes thresholds_of(const std::vector<EdgeThresholds>& given_thr) {
        const std::vector<Thr> h = edges::from_public(given_thr);
        Planes t = thr_slots(int(h.size()));
        // Pageable source: the call returns once the bytes are staged, so `h` may go.
        CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(t.ptr, h.data(), h.size() * sizeof(Thr), cudaMemcpyHostToDevice, stream()));
        return t;
    }
    Planes thresholds(const Planes& images, int n, double q) {
        const DeviceBuffer hist = histograms_of(images, n);
        Planes t = thr_slots(n);
        const dim3 tgrid((n + kThresholdWarps - 1) / kThresholdWarps), tblock(32 * kThresholdWarps);
        thresholds_kernel<<<tgrid, tblock, 0, stream()>>>(static_cast<const std::uint32_t*>(hist.data()), n, q,
                                                          reinterpret_cast<Thr*>(t.ptr));
        CUBEKIT_CHECK_LAUNCH(ctx, "thresholds", tgrid, tblock);
        return t;
    }
    Planes threshold_mean(const Planes& t, int n) {
        Planes m = thr_slots(1);
        threshold_mean_kernel<<<1, 1, 0, stream()>>>(reinterpret_cast<const Thr*>(t.data()), n, reinterpret_cast<Thr*>(m.ptr));
        CUBEKIT_CHECK_LAUNCH(ctx, "threshold_mean", dim3(1), dim3(1));
        return m;
    }

    Planes band_mean(const Planes& images, int n) {
        Planes m = alloc(plane());
        band_mean_kernel<<<grid_for(plane(), 256), 256, 0, stream()>>>(images.data(), plane(), n, m.ptr);
        CUBEKIT_CHECK_LAUNCH(ctx, "band_mean", grid_for(plane(), 256), dim3(256));
        return m;
    }
    void binary_maps(const Planes& images, const Planes& t, int n, Planes& f) {
        const std::size_t total = plane() * std::size_t(n);
        binary_kernel<<<grid_for(total, 256), 256, 0, stream()>>>(images.data(), plane(), total,
                                                                  reinterpret_cast<const Thr*>(t.data()), f.ptr);
        CUBEKIT_CHECK_LAUNCH(ctx, "binary", grid_for(total, 256), dim3(256));
    }
    void edge_maps(const Planes& images, const Planes& t, int n, Planes& e) {
        using edges::kBitOut, edges::kBitWarps;
        const int tiles_x = (W + kBitOut - 1) / kBitOut, tiles = tiles_x * ((H + kBitOut - 1) / kBitOut);
        const dim3 grid(unsigned((tiles + kBitWarps - 1) / kBitWarps), unsigned(n)), block(32 * kBitWarps);
        edges::edge_maps_bits_kernel<<<grid, block, 0, stream()>>>(images.data(), W, H, tiles_x, tiles,
                                                           reinterpret_cast<const Thr*>(t.data()), e.ptr);
        CUBEKIT_CHECK_LAUNCH(ctx, "edge_maps", grid, block);
    }
    void edges_of_binary(const Planes& f, Planes& e) {
        // f ∈ {0,1} with T1 = T2 = 0, T3 = 1 binarises to itself.
        static const Thr identity{0, 0, 1, 0, 0, 0};
        Planes t = thr_slots(1);
        CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(t.ptr, &identity, sizeof(Thr), cudaMemcpyHostToDevice, stream()));
        edge_maps(f, t, 1, e);
    }
    void edge_vote(const Planes& images, const Planes& t, int n, int needed, Planes& count, Planes& out) {
        // Groups of kVoteGroup images per warp in parallel (exact byte counts), then one sum per pixel.
        using edges::kBitOut, edges::kBitWarps, edges::kVoteGroup;
        const int tiles_x = (W + kBitOut - 1) / kBitOut, tiles = tiles_x * ((H + kBitOut - 1) / kBitOut);
        const int groups = (n + kVoteGroup - 1) / kVoteGroup;
        Planes partial = alloc(plane() * std::size_t(groups));
        const dim3 grid(unsigned((tiles + kBitWarps - 1) / kBitWarps), unsigned(groups)), block(32 * kBitWarps);
        edges::edge_vote_group_kernel<<<grid, block, 0, stream()>>>(images.data(), W, H, n, tiles_x, tiles,
                                                                   reinterpret_cast<const Thr*>(t.data()), partial.ptr);
        CUBEKIT_CHECK_LAUNCH(ctx, "edge_vote_group", grid, block);
        edges::edge_vote_sum_kernel<<<grid_for(plane(), 256), 256, 0, stream()>>>(
            partial.ptr, plane(), groups, needed, reinterpret_cast<std::uint16_t*>(count.ptr), out.ptr);
        CUBEKIT_CHECK_LAUNCH(ctx, "edge_vote_sum", grid_for(plane(), 256), dim3(256));
    }
    void vote_planes(const Planes& planes, const Thr* t, int n, int needed, Planes& count, Planes& out) {
        vote_kernel<<<grid_for(plane(), 256), 256, 0, stream()>>>(planes.data(), plane(), n, t, needed,
                                                                  reinterpret_cast<std::uint16_t*>(count.ptr), out.ptr);
        CUBEKIT_CHECK_LAUNCH(ctx, "vote", grid_for(plane(), 256), dim3(256));
    }
    void vote(const Planes& maps, int n, int needed, Planes& count, Planes& out) {
        vote_planes(maps, nullptr, n, needed, count, out);
    }
    void binary_vote(const Planes& images, const Planes& t, int n, int needed, Planes& count, Planes& out) {
        vote_planes(images, reinterpret_cast<const Thr*>(t.data()), n, needed, count, out);
    }

    void remove_small(Planes& maps, int n, std::int64_t min_size, int connectivity) {
        remove_small_components_device(ctx, maps.ptr, W, H, n, min_size, connectivity);
    }
};

}  // namespace

EntropyEdgeSummary entropy_edges_cuda(const Context& ctx, const CubeView& cube, const EdgeOutputs& outputs,
                                      const EntropyEdgeOptions& options, const EdgeSceneStats* given) {
    CudaOps ops(ctx, cube, outputs, given);
    return edges::run_pipeline(ops, cube.bands(), options);
}

void band_ranges_cuda(const Context& ctx, const CubeView& cube, std::vector<double>& lo, std::vector<double>& hi) {
    const EdgeOutputs none;
    CudaOps ops(ctx, cube, none);
    const int n = cube.bands();
    const DeviceBuffer ranges = ops.ranges_of(cube.data(), cube.dtype(), n, Quantize::PerBand);
    std::vector<RangeKeys> keys(static_cast<std::size_t>(n));
    ranges.download(ctx, keys.data(), ranges.size());
    lo.clear(), hi.clear();
    for (const RangeKeys& k : keys) {
        const bool none = k.lo == ~0ull;  // no finite sample
        lo.push_back(none ? std::numeric_limits<double>::infinity() : from_order_key_host(k.lo));
        hi.push_back(none ? -std::numeric_limits<double>::infinity() : from_order_key_host(k.hi));
    }
}

std::vector<std::uint32_t> tile_histograms_cuda(const Context& ctx, const CubeView& cube, const EdgeSceneStats& scene,
                                                bool with_mean) {
    const EdgeOutputs none;
    CudaOps ops(ctx, cube, none, &scene);
    const int B = cube.bands();
    const Planes images = ops.quantize(Quantize::PerBand);  // the scene's ranges
    std::vector<std::uint32_t> hist(std::size_t(B + (with_mean ? 1 : 0)) * 256);
    const DeviceBuffer h = ops.histograms_of(images, B);
    if (with_mean) {
        const Planes mean = ops.band_mean(images, B);
        const DeviceBuffer m = ops.histograms_of(mean, 1);
        m.download(ctx, hist.data() + std::size_t(B) * 256, m.size());  // stream order: after h's kernels
    }
    h.download(ctx, hist.data(), h.size());
    return hist;
}

std::vector<EdgeThresholds> band_thresholds_cuda(const Context& ctx, const CubeView& cube, double q, Quantize mode) {
    const EdgeOutputs none;
    CudaOps ops(ctx, cube, none);
    return edges::run_thresholds(ops, cube.bands(), q, mode);
}

void quantize_cuda(const Context& ctx, const CubeView& cube, const MutableCubeView& out, Quantize mode) {
    if (cube.dtype() == DType::U8) {  // used as it is (spec §3.1)
        copy_cube(ctx, cube, out);
        return;
    }
    const EdgeOutputs none;
    CudaOps ops(ctx, cube, none);
    if (out.is_dense(Layout::BSQ)) {
        ops.quantize_into(cube.data(), cube.dtype(), cube.bands(), mode, reinterpret_cast<std::uint8_t*>(out.data()));
        return;
    }
    const Planes q = ops.quantize_device(cube.data(), cube.dtype(), cube.bands(), mode);
    copy_cube(ctx, ops.dense_view(q.data(), cube.bands()), out);
}

}  // namespace cubekit::detail
