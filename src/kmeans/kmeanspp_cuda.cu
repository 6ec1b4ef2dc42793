// CUDA greedy k-means++ (spec kmeans.md §3.4) and the relocation's ranking (§3.7). Every choice
// is made on the device from the CPU reference's exact integers: the weights D_i (int128), their
// prefix sums, the thresholds ⌊u·φ⌋, the candidates and the trial sums φ_l. The steps of all k
// centres are queued without a host round trip; a device flag ends them early when φ = 0, and the
// host reads the t ≤ k chosen centres once at the end.
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

// The first centre: its fixed-point values (exponent e_d) and its sample position.
template <typename T>
__global__ void kpp_start(const T* x, const std::int64_t* sample, int m, std::int64_t first, double scale_d,
                          std::int64_t* qc, std::int64_t* chosen) {
    const T* c = x + (sample ? sample[first] : first) * m;
    for (int b = 0; b < m; ++b) qc[b] = km::to_fixed_scaled(double(c[b]), scale_d);
    chosen[0] = first;
}

// D_i ← min(D_i, d(x_i, c)) over the sample (exact int128; `first`: D_i = d(x_i, c)), and each
// block's sum of D: block b covers sample positions [b·kBlock, (b+1)·kBlock).
template <typename T>
__global__ void __launch_bounds__(kBlock) kpp_distance(const T* x, const std::int64_t* sample, std::int64_t n, int m,
                                                       const std::int64_t* qc, double scale_d, bool first, i128* dist,
                                                       i128* block_sums, const KppState* state) {
    if (state->stop) return;
    __shared__ i128 s[kBlock];
    const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    i128 v = 0;
    if (i < n) {
        const i128 d = km::exact_distance(x + (sample ? sample[i] : i) * m, qc, m, scale_d);
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

// One block: the inclusive prefix sums P of the block sums (each thread scans a contiguous
// segment), φ = P[last]; then thread l < trials draws u_l (stream 2, counter t·trials + l) and
// finds its candidate, the first sample position whose inclusive prefix of D exceeds ⌊u_l·φ⌋:
// the block by binary search on P, the position by walking D within it. Writes the candidates'
// positions and fixed-point values. φ = 0 sets state->stop.
template <typename T>
__global__ void __launch_bounds__(kBlock) kpp_candidates(const i128* block_sums, int blocks, const i128* dist,
                                                         std::int64_t n, std::uint64_t seed, int t, int trials,
                                                         const T* x, const std::int64_t* sample, int m, double scale_d,
                                                         i128* prefix, std::int64_t* cand, std::int64_t* qcand,
                                                         KppState* state) {
    if (state->stop) return;
    __shared__ i128 s_start[kBlock];
    __shared__ i128 s_phi;
    const int per = (blocks + kBlock - 1) / kBlock;
    const int begin = min(blocks, int(threadIdx.x) * per), end = min(blocks, begin + per);
    i128 run = 0;
    for (int b = begin; b < end; ++b) run += block_sums[b];
    s_start[threadIdx.x] = run;
    __syncthreads();
    if (threadIdx.x == 0) {
        i128 total = 0;
        for (int i = 0; i < kBlock; ++i) {
            const i128 segment = s_start[i];
            s_start[i] = total;
            total += segment;
        }
        s_phi = total;
    }
    __syncthreads();
    run = s_start[threadIdx.x];
    for (int b = begin; b < end; ++b) prefix[b] = run += block_sums[b];
    __syncthreads();  // the prefix sums are visible to the whole block
    const i128 phi = s_phi;
    if (phi == 0) {  // only t distinct vectors in the sample: the rest stay unset
        if (threadIdx.x == 0) state->stop = 1;
        return;
    }
    const int l = threadIdx.x;
    if (l >= trials) return;
    const i128 thr = km::scaled_threshold(km::draw53(seed, 2, std::uint64_t(t) * trials + l), phi);
    int lo = 0, hi = blocks;  // upper bound: the first block with P > thr (one exists: thr < φ)
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (prefix[mid] > thr) hi = mid;
        else lo = mid + 1;
    }
    const int b = min(lo, blocks - 1);
    const std::int64_t start = std::int64_t(b) * kBlock;
    const std::int64_t len = min(std::int64_t(kBlock), n - start);
    i128 p = b == 0 ? 0 : prefix[b - 1];
    std::int64_t at = 0;
    while (at + 1 < len && (p += dist[start + at]) <= thr) ++at;
    const std::int64_t s = start + at;
    cand[l] = s;
    const T* c = x + (sample ? sample[s] : s) * m;
    for (int bb = 0; bb < m; ++bb) qcand[std::size_t(l) * m + bb] = km::to_fixed_scaled(double(c[bb]), scale_d);
}

// φ_l = Σ_i min(D_i, d(x_i, candidate l)) for every trial l in one pass (exact, into u64 pairs).
template <typename T>
__global__ void __launch_bounds__(kBlock) kpp_trials(const T* x, const std::int64_t* sample, std::int64_t n, int m,
                                                     const std::int64_t* qcand, int trials, double scale_d,
                                                     const i128* dist, u64* phi, const KppState* state) {
    if (state->stop) return;
    __shared__ i128 s[kBlock];
    const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    for (int l = 0; l < trials; ++l) {
        i128 v = 0;
        if (i < n) {
            const i128 d = km::exact_distance(x + (sample ? sample[i] : i) * m, qcand + std::size_t(l) * m, m, scale_d);
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

// Centre t: the candidate of least φ_l (lowest l on ties); its values become the next distance
// pass's centre, and φ is cleared for the next step. One thread.
__global__ void kpp_choose(u64* phi, int trials, const std::int64_t* cand, const std::int64_t* qcand, int m,
                           std::int64_t* qc, std::int64_t* chosen, int t, KppState* state) {
    if (state->stop) return;
    int best = 0;
    for (int l = 1; l < trials; ++l)
        if (read_i128(phi + 2 * l) < read_i128(phi + 2 * best)) best = l;
    chosen[t] = cand[best];
    for (int b = 0; b < m; ++b) qc[b] = qcand[std::size_t(best) * m + b];
    for (int l = 0; l < 2 * trials; ++l) phi[l] = 0;
    state->steps = t + 1;
}

template <typename T>
std::vector<double> kmeanspp_typed(const Context& ctx, const CubeView& image, const DeviceSample& sample,
                                   const KmeansPlan& plan, std::uint64_t seed) {
    const T* x = reinterpret_cast<const T*>(image.data());
    const std::int64_t n = sample.size;
    const int m = plan.m, k = plan.k, trials = kmeanspp_trials(k);
    const auto blocks = int(div_up(n, kBlock));
    const std::size_t M = std::size_t(m);
    DeviceBuffer dist(ctx, std::size_t(n) * sizeof(i128)), block_sums(ctx, std::size_t(blocks) * sizeof(i128));
    DeviceBuffer prefix(ctx, std::size_t(blocks) * sizeof(i128)), qc(ctx, M * 8), qcand(ctx, std::size_t(trials) * M * 8);
    DeviceBuffer cand(ctx, std::size_t(trials) * 8), phi(ctx, std::size_t(trials) * 2 * 8), chosen(ctx, std::size_t(k) * 8);
    DeviceBuffer state(ctx, sizeof(KppState));
    const KppState start{0, 1};
    state.upload(ctx, &start, sizeof start);
    phi.fill_bytes(ctx, 0);
    const cudaStream_t stream = stream_of(ctx);
    auto* st = typed<KppState>(state);
    auto distance_pass = [&](bool first) {
        kpp_distance<T><<<blocks, kBlock, 0, stream>>>(x, sample.raster, n, m, typed<const std::int64_t>(qc), plan.scale_d,
                                                       first, typed<i128>(dist), typed<i128>(block_sums), st);
        CUBEKIT_CHECK_LAUNCH(ctx, "kmeans++ kpp_distance", dim3(blocks), dim3(kBlock));
    };
    const auto first = std::int64_t(km::scaled_index(km::draw53(seed, 1, 0), std::uint64_t(n)));
    kpp_start<T><<<1, 1, 0, stream>>>(x, sample.raster, m, first, plan.scale_d, typed<std::int64_t>(qc),
                                      typed<std::int64_t>(chosen));
    CUBEKIT_CHECK_LAUNCH(ctx, "kmeans++ kpp_start", dim3(1), dim3(1));
    distance_pass(true);
    for (int t = 1; t < k; ++t) {
        ctx.check_cancelled("kmeans++");
        kpp_candidates<T><<<1, kBlock, 0, stream>>>(typed<const i128>(block_sums), blocks, typed<const i128>(dist), n, seed, t,
                                                    trials, x, sample.raster, m, plan.scale_d, typed<i128>(prefix),
                                                    typed<std::int64_t>(cand), typed<std::int64_t>(qcand), st);
        CUBEKIT_CHECK_LAUNCH(ctx, "kmeans++ kpp_candidates", dim3(1), dim3(kBlock));
        kpp_trials<T><<<blocks, kBlock, 0, stream>>>(x, sample.raster, n, m, typed<const std::int64_t>(qcand), trials,
                                                     plan.scale_d, typed<const i128>(dist), typed<u64>(phi), st);
        CUBEKIT_CHECK_LAUNCH(ctx, "kmeans++ kpp_trials", dim3(blocks), dim3(kBlock));
        kpp_choose<<<1, 1, 0, stream>>>(typed<u64>(phi), trials, typed<const std::int64_t>(cand),
                                        typed<const std::int64_t>(qcand), m, typed<std::int64_t>(qc),
                                        typed<std::int64_t>(chosen), t, st);
        CUBEKIT_CHECK_LAUNCH(ctx, "kmeans++ kpp_choose", dim3(1), dim3(1));
        distance_pass(false);
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

std::vector<FarPixel> farthest_cuda(const Context& ctx, const void* d_distance, DType type, std::int64_t n,
                                    std::size_t wanted) {
    if (n == 0 || wanted == 0) return {};
    if (type == DType::F64) return farthest_typed(ctx, static_cast<const double*>(d_distance), n, wanted);
    return farthest_typed(ctx, static_cast<const float*>(d_distance), n, wanted);
}

}  // namespace cubekit::detail
