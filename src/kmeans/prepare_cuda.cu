// The CUDA first pass of k-means and the device selections it feeds (spec kmeans.md §3.3–3.4):
// valid pixels (mask, NaN) by ordered stream compaction, per-band min/max and the exact moments
// Σq, Σq² that set the fixed point and the tolerance, the init sample, and gathers of a few
// pixels' values. Only m-sized statistics come to the host, where make_plan and set_tolerance
// (kmeans.cpp) run for both backends; min/max and integer sums are order-free, so the plan is
// the CPU's (prepare.cpp) bit for bit.
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <type_traits>
#include <cstring>

#include "kmeans/cuda_internal.hpp"
#include "kmeans/device.cuh"

namespace cubekit::detail {
namespace {

constexpr int kWalkBlocksPerSm = 4;  // blocks per SM of the band walks (one-time passes)
constexpr int kSharedBands = 1024;   // bands whose statistics a block pre-reduces in shared memory

// Band walk over a dense BIP image: thread t of the first S = ⌊threads/m⌋·m threads reads
// samples t, t + S, t + 2S, ...: always band t % m, of pixels t/m + i·(S/m). Consecutive threads
// read consecutive samples (coalesced whatever m is), and each keeps one band's statistics in
// registers. The host launches at least m threads.
struct BandWalk {
    std::int64_t first, step;
    int band;
    bool active;
};
__device__ BandWalk band_walk(int m) {
    const std::int64_t threads = std::int64_t(gridDim.x) * blockDim.x;
    const std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const std::int64_t s = threads / m * m;
    return {t / m, s / m, int(t % m), t < s};
}

inline dim3 walk_grid(const Context& ctx, int m) {
    const std::int64_t threads = std::max<std::int64_t>(std::int64_t(sm_count(ctx)) * kWalkBlocksPerSm * kBlock, m);
    return dim3(unsigned(div_up(threads, kBlock)));
}

// A double as an unsigned key in the same order (NaN excluded; −0 below +0), so that min and max
// are exact integer atomics.
__device__ u64 order_key(double v) {
    const auto u = u64(__double_as_longlong(v));
    return u >> 63 ? ~u : u | (1ull << 63);
}
inline double from_order_key(u64 key) {
    const u64 u = key >> 63 ? key & ~(1ull << 63) : ~key;
    double v;
    std::memcpy(&v, &u, sizeof v);
    return v;
}

// ---- first-pass kernels --------------------------------------------------------------------

// A pixel with a NaN band is excluded: its flag drops to 0 (every thread that finds a NaN in it
// stores the same 0). Float input only.
template <typename T>
__global__ void mark_nan(const T* x, std::int64_t pixels, int m, std::uint8_t* flags) {
    const BandWalk w = band_walk(m);
    if (!w.active) return;
    for (std::int64_t p = w.first; p < pixels; p += w.step)
        if (isnan(x[p * m + w.band])) flags[p] = 0;
}

// Per-band min and max (as order keys) over the valid pixels. With m ≤ kSharedBands a block
// pre-reduces in shared memory and flushes once per band.
template <typename T>
__global__ void __launch_bounds__(kBlock) band_min_max(const T* x, std::int64_t pixels, int m,
                                                       const std::uint8_t* flags, u64* lo, u64* hi) {
    extern __shared__ u64 s_keys[];  // [lo: m][hi: m]
    const bool shared = m <= kSharedBands;
    if (shared)
        for (int b = threadIdx.x; b < m; b += blockDim.x) {
            s_keys[b] = ~0ull;
            s_keys[m + b] = 0;
        }
    __syncthreads();
    const BandWalk w = band_walk(m);
    u64 klo = ~0ull, khi = 0;  // no key takes either value (they would be NaN)
    if (w.active)
        for (std::int64_t p = w.first; p < pixels; p += w.step)
            if (!flags || flags[p]) {
                const u64 key = order_key(double(x[p * m + w.band]));
                klo = key < klo ? key : klo;
                khi = key > khi ? key : khi;
            }
    if (w.active && khi != 0) {
        atomicMin((shared ? s_keys : lo) + w.band, klo);
        atomicMax((shared ? s_keys + m : hi) + w.band, khi);
    }
    if (!shared) return;
    __syncthreads();
    for (int b = threadIdx.x; b < m; b += blockDim.x) {
        if (s_keys[m + b] == 0) continue;  // no valid pixel of this band reached the block
        atomicMin(lo + b, s_keys[b]);
        atomicMax(hi + b, s_keys[m + b]);
    }
}

// Exact per-band Σq (mod 2^64, as the CPU's int64) and Σq² (int128) over the valid pixels, with
// q = km::sum_value (the run's fixed point).
template <typename T>
__global__ void __launch_bounds__(kBlock) band_moments(const T* x, std::int64_t pixels, int m,
                                                       const std::uint8_t* flags, double scale, u64* sum_q,
                                                       u64* sum_q2) {
    extern __shared__ u64 s_sums[];  // [Σq: m][Σq²: 2m]
    const bool shared = m <= kSharedBands;
    if (shared)
        for (int i = threadIdx.x; i < 3 * m; i += blockDim.x) s_sums[i] = 0;
    __syncthreads();
    const BandWalk w = band_walk(m);
    u64 s1 = 0;
    i128 s2 = 0;
    if (w.active)
        for (std::int64_t p = w.first; p < pixels; p += w.step)
            if (!flags || flags[p]) {
                const std::int64_t q = km::sum_value(x[p * m + w.band], scale);
                s1 += u64(q);
                s2 += i128(q) * i128(q);
            }
    if (w.active && (s1 != 0 || s2 != 0)) {
        atomicAdd((shared ? s_sums : sum_q) + w.band, s1);
        atomic_add_i128((shared ? s_sums + m : sum_q2) + 2 * w.band, s2);
    }
    if (!shared) return;
    __syncthreads();
    for (int b = threadIdx.x; b < m; b += blockDim.x) {
        if (s_sums[b] != 0) atomicAdd(sum_q + b, s_sums[b]);
        const i128 v = read_i128(s_sums + m + 2 * b);
        if (v != 0) atomic_add_i128(sum_q2 + 2 * b, v);
    }
}

// ---- ordered stream compaction -------------------------------------------------------------

// Pass 1: block b counts the flagged items of [b·kBlock, (b+1)·kBlock).
__global__ void __launch_bounds__(kBlock) count_flagged(const std::uint8_t* flags, std::int64_t n,
                                                        std::int64_t* counts) {
    const std::int64_t i = std::int64_t(blockIdx.x) * kBlock + threadIdx.x;
    const int count = __syncthreads_count(i < n && flags[i] != 0);
    if (threadIdx.x == 0) counts[blockIdx.x] = count;
}

// Pass 3 (after an inclusive scan of the counts into `ends`): flagged item i goes to
// ends[b − 1] + (flagged items before it in its block b), so the output keeps the input order;
// it holds src[i] (or i).
__global__ void __launch_bounds__(kBlock) scatter_flagged(const std::uint8_t* flags, std::int64_t n,
                                                          const std::int64_t* ends, const std::int64_t* src,
                                                          std::int64_t* out) {
    using Scan = cub::BlockScan<int, kBlock>;
    __shared__ typename Scan::TempStorage temp;
    const std::int64_t i = std::int64_t(blockIdx.x) * kBlock + threadIdx.x;
    const int flagged = i < n && flags[i] != 0;
    int rank = 0;
    Scan(temp).ExclusiveSum(flagged, rank);
    if (flagged) out[(blockIdx.x ? ends[blockIdx.x - 1] : 0) + rank] = src ? src[i] : i;
}

// The flagged items of flags[0, n) in order, as src[i] (or i), into `out`; returns their count
// (the one number that comes to the host). With skip_if_all, nothing is written when every item
// is flagged.
std::int64_t compact(const Context& ctx, const std::uint8_t* flags, std::int64_t n, const std::int64_t* src,
                     DeviceBuffer& out, bool skip_if_all) {
    if (n == 0) return 0;
    const cudaStream_t stream = stream_of(ctx);
    const std::int64_t blocks = div_up(n, kBlock);
    DeviceBuffer counts(ctx, std::size_t(blocks) * 8), ends(ctx, std::size_t(blocks) * 8);
    count_flagged<<<unsigned(blocks), kBlock, 0, stream>>>(flags, n, typed<std::int64_t>(counts));
    CUBEKIT_CHECK_LAUNCH(ctx, "kmeans count_flagged", dim3(unsigned(blocks)), dim3(kBlock));
    std::size_t temp_bytes = 0;
    CUBEKIT_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, temp_bytes, typed<const std::int64_t>(counts),
                                                     typed<std::int64_t>(ends), blocks, stream));
    DeviceBuffer temp(ctx, std::max<std::size_t>(temp_bytes, 1));
    CUBEKIT_CUDA_CHECK(cub::DeviceScan::InclusiveSum(temp.data(), temp_bytes, typed<const std::int64_t>(counts),
                                                     typed<std::int64_t>(ends), blocks, stream));
    std::int64_t total = 0;
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(&total, typed<const std::int64_t>(ends) + blocks - 1, sizeof total,
                                       cudaMemcpyDeviceToHost, stream));
    ctx.synchronize();
    if (total == n && skip_if_all) return total;
    out = DeviceBuffer(ctx, std::size_t(std::max<std::int64_t>(total, 1)) * 8);
    scatter_flagged<<<unsigned(blocks), kBlock, 0, stream>>>(flags, n, typed<const std::int64_t>(ends), src,
                                                             typed<std::int64_t>(out));
    CUBEKIT_CHECK_LAUNCH(ctx, "kmeans scatter_flagged", dim3(unsigned(blocks)), dim3(kBlock));
    return total;
}

// ---- first pass (host side) ----------------------------------------------------------------

// Valid set: flags from the mask (or all 1), NaN pixels dropped, then compaction; flags and index
// are dropped when every pixel is valid.
template <typename T>
void find_valid(const Context& ctx, const T* x, std::int64_t pixels, int m, const KmeansOptions& o,
                DeviceValidSet& valid) {
    valid.valid = pixels;
    if (o.mask.empty() && !std::is_floating_point_v<T>) return;  // integer data, no mask: all valid
    valid.flags = DeviceBuffer(ctx, std::size_t(pixels));
    if (o.mask.empty()) valid.flags.fill_bytes(ctx, 1);
    else valid.flags.upload(ctx, o.mask.data(), std::size_t(pixels));
    if constexpr (std::is_floating_point_v<T>) {
        const dim3 grid = walk_grid(ctx, m);
        mark_nan<T><<<grid, kBlock, 0, stream_of(ctx)>>>(x, pixels, m, typed<std::uint8_t>(valid.flags));
        CUBEKIT_CHECK_LAUNCH(ctx, "kmeans mark_nan", grid, dim3(kBlock));
    }
    valid.valid = compact(ctx, typed<const std::uint8_t>(valid.flags), pixels, nullptr, valid.index, true);
    if (valid.valid == pixels) valid.flags = DeviceBuffer();
}

template <typename T>
KmeansStats band_extremes(const Context& ctx, const T* x, std::int64_t pixels, int m, const DeviceValidSet& valid) {
    const std::size_t M = std::size_t(m);
    DeviceBuffer keys(ctx, 2 * M * 8);  // lo keys, then hi keys
    keys.fill_bytes(ctx, 0xFF);
    CUBEKIT_CUDA_CHECK(cudaMemsetAsync(typed<u64>(keys) + M, 0, M * 8, stream_of(ctx)));
    const dim3 grid = walk_grid(ctx, m);
    const std::size_t shared = m <= kSharedBands ? 2 * M * 8 : 0;
    band_min_max<T><<<grid, kBlock, shared, stream_of(ctx)>>>(
        x, pixels, m, valid.flags.empty() ? nullptr : typed<const std::uint8_t>(valid.flags), typed<u64>(keys),
        typed<u64>(keys) + M);
    CUBEKIT_CHECK_LAUNCH(ctx, "kmeans band_min_max", grid, dim3(kBlock));
    std::vector<u64> h(2 * M);
    keys.download(ctx, h.data(), h.size() * 8);
    KmeansStats stats;
    stats.valid = valid.valid;
    for (std::size_t b = 0; b < M; ++b) {
        stats.lo.push_back(from_order_key(h[b]));
        stats.hi.push_back(from_order_key(h[M + b]));
    }
    return stats;
}

template <typename T>
BandMoments exact_moments(const Context& ctx, const T* x, std::int64_t pixels, int m, const DeviceValidSet& valid,
                          double scale) {
    const std::size_t M = std::size_t(m);
    DeviceBuffer sums(ctx, 3 * M * 8);  // Σq, then Σq² as (low, high) word pairs
    sums.fill_bytes(ctx, 0);
    const dim3 grid = walk_grid(ctx, m);
    const std::size_t shared = m <= kSharedBands ? 3 * M * 8 : 0;
    band_moments<T><<<grid, kBlock, shared, stream_of(ctx)>>>(
        x, pixels, m, valid.flags.empty() ? nullptr : typed<const std::uint8_t>(valid.flags), scale,
        typed<u64>(sums), typed<u64>(sums) + M);
    CUBEKIT_CHECK_LAUNCH(ctx, "kmeans band_moments", grid, dim3(kBlock));
    std::vector<u64> h(3 * M);
    sums.download(ctx, h.data(), h.size() * 8);
    BandMoments out;
    for (std::size_t b = 0; b < M; ++b) {
        out.sum_q.push_back(std::int64_t(h[b]));
        out.sum_q2.push_back(read_i128(&h[M + 2 * b]));
    }
    return out;
}

// ---- init sample and gathers ---------------------------------------------------------------

// Valid pixel i is in the init sample when its stream-0 draw is below the rate (km::in_sample).
__global__ void draw_sample(std::int64_t n, std::uint64_t seed, double rate, std::uint8_t* flags) {
    const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) flags[i] = km::in_sample(seed, i, rate);
}

// A tile's valid pixel i (raster index[i], or i) is in the sample when its scene rank is: rank =
// first_rank[row] + (i − row_start[row]), the row's first valid rank and first valid index.
__global__ void draw_tile_sample(std::int64_t n, const std::int64_t* index, int width, const std::int64_t* first_rank,
                                 const std::int64_t* row_start, std::uint64_t seed, double rate, bool all,
                                 std::uint8_t* flags) {
    const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const std::int64_t row = (index ? index[i] : i) / width;
    flags[i] = all || km::in_sample(seed, first_rank[row] + (i - row_start[row]), rate);
}

// out[j·m + b] = sample b of the pixel at sample position positions[j]: one thread per value.
template <typename T, typename O>
__global__ void gather_pixels(const T* x, int m, const std::int64_t* raster, const std::int64_t* positions,
                              std::int64_t count, O* out) {
    const std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= count * m) return;
    const std::int64_t s = positions[t / m];
    out[t] = O(x[(raster ? raster[s] : s) * m + t % m]);
}

// Queues gather_pixels of `image` (dense BIP on the device) into `out`: count × m values of O, or of
// the image's own type when O is void.
template <typename O>
void queue_gather(const Context& ctx, const CubeView& image, const std::int64_t* d_raster, const std::int64_t* d_positions,
                  std::int64_t count, void* out) {
    const int m = image.bands();
    const auto blocks = unsigned(div_up(count * m, kBlock));
    visit_dtype(image.dtype(), [&](auto tag) {
        using T = decltype(tag);
        using To = std::conditional_t<std::is_void_v<O>, T, O>;
        gather_pixels<T, To><<<blocks, kBlock, 0, stream_of(ctx)>>>(reinterpret_cast<const T*>(image.data()), m, d_raster,
                                                                    d_positions, count, static_cast<To*>(out));
    });
    CUBEKIT_CHECK_LAUNCH(ctx, "kmeans gather_pixels", dim3(blocks), dim3(kBlock));
}

}  // namespace

KmeansPlan prepare_kmeans_cuda(const Context& ctx, const CubeView& image, const KmeansOptions& options,
                               DeviceValidSet& valid) {
    return visit_dtype(image.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* x = reinterpret_cast<const T*>(image.data());
        const int m = image.bands();
        const auto pixels = std::int64_t(image.num_pixels());
        valid = DeviceValidSet();
        find_valid(ctx, x, pixels, m, options, valid);
        KmeansPlan plan = make_plan(options, m, pixels, std::is_floating_point_v<T>,
                                    band_extremes(ctx, x, pixels, m, valid));
        const BandMoments moments = exact_moments(ctx, x, pixels, m, valid, plan.scale);
        set_tolerance(plan, options.tol, moments.sum_q, moments.sum_q2);
        return plan;
    });
}

DeviceValidSet valid_set_cuda(const Context& ctx, const CubeView& image, const std::vector<std::uint8_t>& mask) {
    KmeansOptions o;
    o.mask = mask;
    DeviceValidSet valid;
    visit_dtype(image.dtype(), [&](auto tag) {
        using T = decltype(tag);
        find_valid(ctx, reinterpret_cast<const T*>(image.data()), std::int64_t(image.num_pixels()), image.bands(), o, valid);
    });
    return valid;
}

KmeansStats band_range_cuda(const Context& ctx, const CubeView& image, const DeviceValidSet& valid) {
    return visit_dtype(image.dtype(), [&](auto tag) {
        using T = decltype(tag);
        return band_extremes(ctx, reinterpret_cast<const T*>(image.data()), std::int64_t(image.num_pixels()),
                             image.bands(), valid);
    });
}

BandMoments band_moments_cuda(const Context& ctx, const CubeView& image, const DeviceValidSet& valid, double scale) {
    return visit_dtype(image.dtype(), [&](auto tag) {
        using T = decltype(tag);
        return exact_moments(ctx, reinterpret_cast<const T*>(image.data()), std::int64_t(image.num_pixels()),
                             image.bands(), valid, scale);
    });
}

std::vector<std::int64_t> row_valid_cuda(const Context& ctx, const DeviceValidSet& valid, int width, int height) {
    std::vector<std::int64_t> rows(static_cast<std::size_t>(height), width);
    if (valid.flags.empty()) return rows;  // every pixel valid
    std::vector<std::uint8_t> flags(std::size_t(width) * std::size_t(height));
    valid.flags.download(ctx, flags.data(), flags.size());
    for (int y = 0; y < height; ++y)
        rows[std::size_t(y)] = std::count(flags.begin() + std::ptrdiff_t(y) * width,
                                          flags.begin() + std::ptrdiff_t(y + 1) * width, std::uint8_t(1));
    return rows;
}

TilePixels sample_cuda(const Context& ctx, const CubeView& image, const DeviceValidSet& valid, std::uint64_t seed,
                       double rate, bool all, const std::vector<std::int64_t>& first_rank,
                       const std::vector<std::int64_t>& row_start) {
    const std::int64_t n = valid.valid;
    TilePixels out;
    if (n == 0) return out;
    const auto width = image.width();
    DeviceBuffer d_first(ctx, first_rank.size() * 8), d_start(ctx, row_start.size() * 8), flags(ctx, std::size_t(n));
    d_first.upload(ctx, first_rank.data(), first_rank.size() * 8);
    d_start.upload(ctx, row_start.data(), row_start.size() * 8);
    const auto blocks = unsigned(div_up(n, kBlock));
    draw_tile_sample<<<blocks, kBlock, 0, stream_of(ctx)>>>(
        n, valid.index.empty() ? nullptr : typed<const std::int64_t>(valid.index), width, typed<const std::int64_t>(d_first),
        typed<const std::int64_t>(d_start), seed, rate, all, typed<std::uint8_t>(flags));
    CUBEKIT_CHECK_LAUNCH(ctx, "kmeans draw_tile_sample", dim3(blocks), dim3(kBlock));
    DeviceBuffer positions;
    const std::int64_t count = compact(ctx, typed<const std::uint8_t>(flags), n, nullptr, positions, false);
    if (count == 0) return out;
    const std::int64_t* raster = valid.index.empty() ? nullptr : typed<const std::int64_t>(valid.index);
    // The values in the image's type (an init sample can be the whole tile).
    out.dtype = image.dtype();
    out.values.resize(std::size_t(count) * std::size_t(image.bands()) * dtype_size(image.dtype()));
    DeviceBuffer values(ctx, out.values.size());
    queue_gather<void>(ctx, image, raster, typed<const std::int64_t>(positions), count, values.data());
    values.download(ctx, out.values.data(), out.values.size());
    std::vector<std::int64_t> pos(static_cast<std::size_t>(count));
    positions.download(ctx, pos.data(), pos.size() * 8);
    for (const std::int64_t i : pos) {  // valid index i → its row (the last row starting at or before it) → rank
        const auto r = std::size_t(std::upper_bound(row_start.begin(), row_start.end(), i) - row_start.begin() - 1);
        out.keys.push_back(FarPixel{first_rank[r] + (i - row_start[r]), 0});
    }
    return out;
}

DeviceSample init_sample_cuda(const Context& ctx, const DeviceValidSet& valid, const KmeansOptions& options,
                              std::uint64_t seed) {
    DeviceSample sample;
    sample.raster = valid.index.empty() ? nullptr : typed<const std::int64_t>(valid.index);
    sample.size = valid.valid;
    const std::int64_t n = valid.valid;
    if (!sampling_active(options, n)) return sample;
    DeviceBuffer flags(ctx, std::size_t(n));
    const auto blocks = unsigned(div_up(n, kBlock));
    draw_sample<<<blocks, kBlock, 0, stream_of(ctx)>>>(n, seed, sample_rate(options, n), typed<std::uint8_t>(flags));
    CUBEKIT_CHECK_LAUNCH(ctx, "kmeans draw_sample", dim3(blocks), dim3(kBlock));
    DeviceBuffer drawn;
    const std::int64_t size = compact(ctx, typed<const std::uint8_t>(flags), n, sample.raster, drawn, false);
    if (size < options.k) return sample;  // an unlucky tiny sample: every valid pixel (as on the CPU)
    sample.owned = std::move(drawn);
    sample.raster = typed<const std::int64_t>(sample.owned);
    sample.size = size;
    return sample;
}

std::vector<double> gather_pixels_cuda(const Context& ctx, const CubeView& image, const std::int64_t* d_raster,
                                       const std::int64_t* d_positions, std::int64_t count) {
    const int m = image.bands();
    if (count == 0) return {};
    DeviceBuffer out(ctx, std::size_t(count) * std::size_t(m) * sizeof(double));
    queue_gather<double>(ctx, image, d_raster, d_positions, count, out.data());
    std::vector<double> values(std::size_t(count) * std::size_t(m));
    out.download(ctx, values.data(), values.size() * sizeof(double));
    return values;
}

std::vector<double> gather_pixels_cuda(const Context& ctx, const CubeView& image, const std::int64_t* d_raster,
                                       const std::vector<std::int64_t>& positions) {
    if (positions.empty()) return {};
    DeviceBuffer d_positions(ctx, positions.size() * sizeof(std::int64_t));
    d_positions.upload(ctx, positions.data(), positions.size() * sizeof(std::int64_t));
    return gather_pixels_cuda(ctx, image, d_raster, typed<const std::int64_t>(d_positions),
                              std::int64_t(positions.size()));
}

}  // namespace cubekit::detail
