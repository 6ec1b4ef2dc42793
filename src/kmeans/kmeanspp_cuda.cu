// CUDA greedy k-means++ (spec kmeans.md §3.4) and the relocation's ranking (§3.7). Every choice
// is made on the device from the CPU reference's exact integers: the weights D_i (int128), their
// prefix sums, the thresholds ⌊u·φ⌋, the candidates and the trial sums φ_l. Each step is one pass
// over the sample (the trials' block sums, with the previous step's centre folded into D on the
// way: spec §4.2) and one single-block kernel (the choice, then the candidates: one warp per
// trial finds its threshold's position through superblock sums, block sums and the block's D). The steps of all k centres are queued without a host round trip; a device flag
// ends them early when φ = 0, and the host reads the t ≤ k chosen centres once at the end.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>

#include "kmeans/cuda_internal.hpp"
#include "kmeans/device.cuh"

namespace cubekit::detail {
namespace {

// Device-side state of a k-means++ run.
struct KppState {
    int stop;   // φ was 0: the sample holds only `steps` distinct vectors; later steps skip
    int steps;  // centres chosen so far
};

constexpr int kWarps = kBlock / 32;
constexpr int kMaxTrials = 32;  // 2 + ⌊ln k⌋ trials: k < e^30
constexpr int kSuper = 32;      // blocks per superblock: a warp scans a superblock's block sums

// The pixel of sample position s.
template <typename T>
__device__ const T* sample_pixel(const T* x, const std::int64_t* sample, std::int64_t s, int m) {
    return x + (sample ? sample[s] : s) * m;
}

// The first centre: its fixed-point values (exponent e_d) as candidate 0, and its sample position.
template <typename T>
__global__ void kpp_start(const T* x, const std::int64_t* sample, int m, std::int64_t first, double scale_d,
                          std::int64_t* qcand, std::int64_t* chosen) {
    const T* c = sample_pixel(x, sample, first, m);
    for (int b = 0; b < m; ++b) qcand[b] = km::to_fixed_scaled(double(c[b]), scale_d);
    chosen[0] = first;
}

// The exact distances (km::exact_distance) of x to `count` ≤ 4 centres q[0..count − 1]: each
// band's fixed-point value is computed once for all of them.
template <typename T>
__device__ void exact_distances4(const T* x, const std::int64_t* const (&q)[4], int count, int m, double scale_d,
                                 i128 (&d)[4]) {
#pragma unroll
    for (int c = 0; c < 4; ++c) d[c] = 0;
    if (count == 0) return;
    for (int b = 0; b < m; ++b) {
        const i128 qx = km::to_fixed_scaled(double(x[b]), scale_d);
#pragma unroll
        for (int c = 0; c < 4; ++c)
            if (c < count) {
                const i128 diff = qx - i128(q[c][b]);
                d[c] += diff * diff;
            }
    }
}

// One pass over the sample per step (spec §4.2: the step's trials and the previous step's update
// fused). First pass: D_i = d(x_i, candidate 0). Later: D_i ← min(D_i, d(x_i, pending)) (the
// centre chosen last, not yet folded in; nullptr: none), then for every trial l the block's sum
// S[l·blocks + b] = Σ_{i ∈ block b} min(D_i, d(x_i, candidate l)), also added to its superblock's
// (kSuper blocks) sum in `super` (u64 pairs, zero before the pass). Everything exact (int128).
template <typename T>
__global__ void __launch_bounds__(kBlock) kpp_pass(const T* x, const std::int64_t* sample, std::int64_t n, int m,
                                                   double scale_d, bool first, const std::int64_t* pending,
                                                   const std::int64_t* qcand, int trials, i128* dist, i128* sums,
                                                   u64* super, int blocks, const KppState* state) {
    if (state->stop) return;
    __shared__ i128 s_part[kMaxTrials][kWarps];
    const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const bool ok = i < n;
    const T* xi = ok ? sample_pixel(x, sample, i, m) : nullptr;
    const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    // The pass's centres: [pending,] candidates 0..count − 1, measured 4 at a time (each band's
    // fixed-point value computed once per 4 centres); the pending one comes first, so D is folded
    // before the trials' minima.
    const int count = first ? 1 : trials;
    const int lead = !first && pending ? 1 : 0;
    const int centres = lead + count;
    i128 d = ok && !first ? dist[i] : 0;
    for (int g = 0; g < centres; g += 4) {
        const std::int64_t* q[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) q[c] = g + c < lead ? pending : qcand + std::size_t(max(g + c - lead, 0)) * m;
        i128 e[4];
        exact_distances4(xi, q, ok ? min(4, centres - g) : 0, m, scale_d, e);
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            if (g + c >= centres) break;
            if (g + c < lead) {  // the pending centre
                if (ok && e[c] < d) dist[i] = d = e[c];
                continue;
            }
            i128 v = first || e[c] < d ? e[c] : d;
            if (first && ok) dist[i] = d = v;
            v = warp_sum_i128(ok ? v : 0);
            if (lane == 0) s_part[g + c - lead][warp] = v;
        }
    }
    __syncthreads();
    if (threadIdx.x < count) {
        i128 total = 0;
        for (int w = 0; w < kWarps; ++w) total += s_part[threadIdx.x][w];
        sums[std::size_t(threadIdx.x) * blocks + blockIdx.x] = total;
        const std::size_t supers = div_up(blocks, kSuper);
        if (total != 0) atomic_add_i128(super + 2 * (threadIdx.x * supers + blockIdx.x / kSuper), total);
    }
}

// The first of `count` values (rows of 128-bit sums, or u64 pairs when `pairs`) whose inclusive
// prefix sum, started at `before`, exceeds thr: a warp scans them 32 at a time. Returns its index
// (count − 1 if none) and sets `before` to the prefix sum before it.
__device__ int first_above(const void* values, bool pairs, int count, i128 thr, i128& before) {
    const int lane = threadIdx.x & 31;
    for (int c = 0; c < count; c += 32) {
        const int at = c + lane;
        i128 v = 0;
        if (at < count)
            v = pairs ? read_i128(static_cast<const u64*>(values) + 2 * at) : static_cast<const i128*>(values)[at];
        const i128 incl = before + warp_inclusive_scan_i128(v);
        const unsigned over = __ballot_sync(0xffffffffu, at < count && incl > thr);
        if (over) {
            const int f = __ffs(over) - 1;
            before = shfl_i128(incl - v, f);
            return c + f;
        }
        before = shfl_i128(incl, 31);
    }
    return count - 1;
}

// Trial l's candidate is the first sample position whose inclusive prefix sum of D exceeds thr
// (spec §3.4). One warp finds its block through the superblock sums, then the block sums (`super`
// and `sums`: the chosen row); returns the block and sets `before` to the prefix sum before it.
__device__ int find_block(const u64* super, const i128* sums, int blocks, i128 thr, i128& before) {
    before = 0;
    const int sb = first_above(super, true, int(div_up(blocks, kSuper)), thr, before);
    const int first_block = sb * kSuper;
    return first_block + first_above(sums + first_block, false, min(kSuper, blocks - first_block), thr, before);
}

// Step t's choices, in one block. choose (t ≥ 2): the previous step's trial sums (rows of S)
// give φ_l; the least (lowest l on ties) is centre t − 1, whose values become `pending` (folded
// into D by the next pass). t = 1: row 0 holds the first pass's D. Then, unless `last` (t = k):
// φ = the chosen row's total (0: stop), and for each trial l (one warp each) the threshold ⌊u_l·φ⌋
// (stream 2, counter t·trials + l) and its candidate. The superblock sums are cleared at the end.
template <typename T>
__global__ void __launch_bounds__(kBlock) kpp_step(const i128* sums, u64* super, int blocks, int prev_trials, bool choose,
                                                   bool last, const i128* dist, std::int64_t n, std::uint64_t seed, int t,
                                                   int trials, const T* x, const std::int64_t* sample, int m,
                                                   double scale_d, std::int64_t* cand, std::int64_t* qcand,
                                                   std::int64_t* pending, std::int64_t* chosen, KppState* state) {
    if (state->stop) return;
    __shared__ i128 s_phi[kMaxTrials];
    __shared__ int s_best;
    const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    const int supers = int(div_up(blocks, kSuper));
    for (int l = warp; l < prev_trials; l += kWarps) {
        i128 v = 0;
        for (int b = lane; b < supers; b += 32) v += read_i128(super + 2 * (std::size_t(l) * supers + b));
        v = warp_sum_i128(v);
        if (lane == 0) s_phi[l] = v;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int best = 0;
        if (choose) {
            for (int l = 1; l < prev_trials; ++l)
                if (s_phi[l] < s_phi[best]) best = l;
            chosen[t - 1] = cand[best];
            state->steps = t;
        }
        s_best = best;
    }
    __syncthreads();
    const int best = s_best;
    if (choose)
        for (int b = threadIdx.x; b < m; b += blockDim.x) pending[b] = qcand[std::size_t(best) * m + b];
    const i128 phi = s_phi[best];
    if (last) return;
    if (phi == 0) {  // only t distinct vectors in the sample: the rest stay unset
        if (threadIdx.x == 0) state->stop = 1;
        return;
    }
    __syncthreads();  // `pending` is visible to the block; qcand's rows may be overwritten
    // Trials in groups of kWarps, one warp each: the warp finds its block; the whole block folds
    // the pending centre into the D of every group trial's block (one position per thread); then
    // each warp scans its block's D in shared memory for the position.
    __shared__ i128 s_d[kWarps][kBlock];
    __shared__ i128 s_before[kWarps];
    __shared__ int s_block[kWarps];
    const u64* super_row = super + 2 * std::size_t(best) * supers;
    const i128* sums_row = sums + std::size_t(best) * blocks;
    for (int group = 0; group < trials; group += kWarps) {
        const int l = group + warp;
        const bool mine = l < trials;
        i128 thr = 0;
        if (mine) {
            thr = km::scaled_threshold(km::draw53(seed, 2, std::uint64_t(t) * trials + l), phi);
            i128 before;
            const int b = find_block(super_row, sums_row, blocks, thr, before);
            if (lane == 0) {
                s_block[warp] = b;
                s_before[warp] = before;
            }
        }
        __syncthreads();
        for (int w = 0; w < kWarps && group + w < trials; ++w) {
            const std::int64_t at = std::int64_t(s_block[w]) * kBlock + threadIdx.x;
            i128 d = 0;
            if (at < n) {
                d = dist[at];
                if (choose) {
                    const i128 p = km::exact_distance(sample_pixel(x, sample, at, m), pending, m, scale_d);
                    if (p < d) d = p;
                }
            }
            s_d[w][threadIdx.x] = d;
        }
        __syncthreads();
        if (mine) {
            const std::int64_t start = std::int64_t(s_block[warp]) * kBlock;
            const int len = int(min(std::int64_t(kBlock), n - start));
            i128 before = s_before[warp];
            int at = len - 1;
            for (int c = 0; c < len; c += 32) {
                const i128 incl = before + warp_inclusive_scan_i128(s_d[warp][c + lane]);
                const unsigned over = __ballot_sync(0xffffffffu, c + lane < len && incl > thr);
                if (over) {
                    at = c + __ffs(over) - 1;
                    break;
                }
                before = shfl_i128(incl, 31);
            }
            const std::int64_t s = start + at;
            if (lane == 0) cand[l] = s;
            const T* c = sample_pixel(x, sample, s, m);
            for (int b = lane; b < m; b += 32) qcand[std::size_t(l) * m + b] = km::to_fixed_scaled(double(c[b]), scale_d);
        }
        __syncthreads();  // s_d is refilled by the next group
    }
    __syncthreads();  // the superblock sums are read: cleared for the next pass
    for (std::size_t i = threadIdx.x; i < 2 * std::size_t(trials) * supers; i += blockDim.x) super[i] = 0;
}

template <typename T>
std::vector<double> kmeanspp_typed(const Context& ctx, const CubeView& image, const DeviceSample& sample,
                                   const KmeansPlan& plan, std::uint64_t seed) {
    const T* x = reinterpret_cast<const T*>(image.data());
    const std::int64_t n = sample.size;
    const int m = plan.m, k = plan.k, trials = kmeanspp_trials(k);
    if (trials > kMaxTrials) throw InvalidInput("kmeans: k = " + std::to_string(k) + " is too large for k-means++");
    const auto blocks = int(div_up(n, kBlock));
    const std::size_t M = std::size_t(m), L = std::size_t(trials);
    DeviceBuffer dist(ctx, std::size_t(n) * sizeof(i128)), sums(ctx, L * std::size_t(blocks) * sizeof(i128));
    DeviceBuffer super(ctx, L * std::size_t(div_up(blocks, kSuper)) * 2 * 8), pending(ctx, M * 8), qcand(ctx, L * M * 8);
    DeviceBuffer cand(ctx, L * 8), chosen(ctx, std::size_t(k) * 8), state(ctx, sizeof(KppState));
    const KppState start{0, 1};
    state.upload(ctx, &start, sizeof start);
    super.fill_bytes(ctx, 0);
    const cudaStream_t stream = stream_of(ctx);
    auto* st = typed<KppState>(state);
    auto pass = [&](bool first, bool with_pending) {
        kpp_pass<T><<<blocks, kBlock, 0, stream>>>(x, sample.raster, n, m, plan.scale_d, first,
                                                   with_pending ? typed<const std::int64_t>(pending) : nullptr,
                                                   typed<const std::int64_t>(qcand), trials, typed<i128>(dist),
                                                   typed<i128>(sums), typed<u64>(super), blocks, st);
        CUBEKIT_CHECK_LAUNCH(ctx, "kmeans++ kpp_pass", dim3(blocks), dim3(kBlock));
    };
    auto step = [&](int t, bool last) {
        const bool choose = t >= 2;
        kpp_step<T><<<1, kBlock, 0, stream>>>(typed<const i128>(sums), typed<u64>(super), blocks, choose ? trials : 1,
                                              choose, last, typed<const i128>(dist), n, seed, t, trials, x, sample.raster,
                                              m, plan.scale_d, typed<std::int64_t>(cand),
                                              typed<std::int64_t>(qcand), typed<std::int64_t>(pending),
                                              typed<std::int64_t>(chosen), st);
        CUBEKIT_CHECK_LAUNCH(ctx, "kmeans++ kpp_step", dim3(1), dim3(kBlock));
    };
    const auto first = std::int64_t(km::scaled_index(km::draw53(seed, 1, 0), std::uint64_t(n)));
    kpp_start<T><<<1, 1, 0, stream>>>(x, sample.raster, m, first, plan.scale_d, typed<std::int64_t>(qcand),
                                      typed<std::int64_t>(chosen));
    CUBEKIT_CHECK_LAUNCH(ctx, "kmeans++ kpp_start", dim3(1), dim3(1));
    if (k > 1) {
        pass(/*first=*/true, false);
        for (int t = 1; t < k; ++t) {
            ctx.check_cancelled("kmeans++");
            step(t, /*last=*/false);
            pass(/*first=*/false, /*with_pending=*/t >= 2);
        }
        step(k, /*last=*/true);
    }
    KppState end{};
    state.download(ctx, &end, sizeof end);
    return gather_pixels_cuda(ctx, image, sample.raster, typed<const std::int64_t>(chosen), end.steps);
}

// iota: v[i] = i.
__global__ void index_sequence(std::int64_t n, std::int64_t* v) {
    const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) v[i] = i;
}

// CUB's radix sort is stable: descending distances, equal ones in increasing index (§3.7's order).
template <typename D>
std::vector<FarPixel> farthest_typed(const Context& ctx, const D* distance, std::int64_t n, std::size_t wanted) {
    const cudaStream_t stream = stream_of(ctx);
    DeviceBuffer keys(ctx, std::size_t(n) * sizeof(D)), index(ctx, std::size_t(n) * 8), order(ctx, std::size_t(n) * 8);
    const auto blocks = unsigned(div_up(n, kBlock));
    index_sequence<<<blocks, kBlock, 0, stream>>>(n, typed<std::int64_t>(index));
    CUBEKIT_CHECK_LAUNCH(ctx, "kmeans index_sequence", dim3(blocks), dim3(kBlock));
    std::size_t temp_bytes = 0;
    CUBEKIT_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(nullptr, temp_bytes, distance, typed<D>(keys),
                                                                 typed<const std::int64_t>(index),
                                                                 typed<std::int64_t>(order), n, 0, int(sizeof(D) * 8), stream));
    DeviceBuffer temp(ctx, std::max<std::size_t>(temp_bytes, 1));
    CUBEKIT_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(temp.data(), temp_bytes, distance, typed<D>(keys),
                                                                 typed<const std::int64_t>(index),
                                                                 typed<std::int64_t>(order), n, 0, int(sizeof(D) * 8), stream));
    wanted = std::min(wanted, std::size_t(n));
    std::vector<D> top(wanted);
    std::vector<std::int64_t> at(wanted);
    keys.download(ctx, top.data(), wanted * sizeof(D));
    order.download(ctx, at.data(), wanted * 8);
    std::vector<FarPixel> candidates(wanted);
    for (std::size_t e = 0; e < wanted; ++e) candidates[e] = FarPixel{at[e], double(top[e])};
    return farthest(std::move(candidates), wanted);
}

}  // namespace

std::vector<double> kmeanspp_cuda(const Context& ctx, const CubeView& image, const DeviceSample& sample,
                                  const KmeansPlan& plan, std::uint64_t seed) {
    return visit_dtype(image.dtype(), [&](auto tag) {
        return kmeanspp_typed<decltype(tag)>(ctx, image, sample, plan, seed);
    });
}

std::vector<double> kmeanspp_sample_init_cuda(const Context& ctx, const CubeView& sample, const KmeansPlan& plan,
                                              std::uint64_t seed) {
    const CubeInLayout on_device(ctx, sample, Layout::BIP, Memory::Device);
    DeviceSample every;  // the sample is already drawn: every pixel of it, in order
    every.size = std::int64_t(sample.num_pixels());
    const std::vector<double> chosen = kmeanspp_cuda(ctx, on_device.view(), every, plan, seed);
    std::vector<double> c(std::size_t(plan.k) * std::size_t(plan.m), INFINITY);  // unset centres stay +∞
    std::copy(chosen.begin(), chosen.end(), c.begin());
    return c;
}

std::vector<FarPixel> farthest_cuda(const Context& ctx, const void* d_distance, DType type, std::int64_t n,
                                    std::size_t wanted) {
    if (n == 0 || wanted == 0) return {};
    if (type == DType::F64) return farthest_typed(ctx, static_cast<const double*>(d_distance), n, wanted);
    return farthest_typed(ctx, static_cast<const float*>(d_distance), n, wanted);
}

}  // namespace cubekit::detail
