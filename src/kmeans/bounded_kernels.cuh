#pragma once
// The bounded Lloyd pass (spec kmeans.md §4.2, "exact pruning with Hamerly bounds"), included by
// cuda.cu after lloyd_kernels.cuh. Each valid pixel keeps its label a and a lower bound L on its
// distance to every other centroid; a pass computes the exact distance d̃_a (the §3.5 arithmetic,
// as every pass must for the inertia) and skips the other k − 1 distances when d̃_a < L²·(1 − ε):
// then no other distance can come out below d̃_a in f32/f64, so the label is the one the full scan
// (and the CPU) would give. Otherwise the pixel is scanned in full and its bound renewed. Sums and
// counts persist across passes: a pixel that changes cluster moves its values from the old sums to
// the new (exact integers, so the sums equal a full recount). A rescan pass (the first, after a
// relocation, or when a drift is not finite) scans every pixel and counts from zero.
//
// Why the test is safe: each computed distance is within a factor (1 ± ε) of the true one,
// ε = (m + 3)·u (m FMAs and one subtraction per term, u the unit roundoff), plus a subnormal
// slack τ. L bounds the true distances from below: set from the scan's second-best d̃₂ as
// sqrt(d̃₂ / (1 + ε)) rounded down, then lowered after each update by the largest centroid move
// (triangle inequality). The bound is stored as l' = L + Δ (Δ: the sum of the largest moves, a
// double on the device), so a pass that skips a pixel writes nothing.
#include "kmeans/lloyd_kernels.cuh"

namespace cubekit::detail {
namespace {

// The pruning constants of a run: relative error bound ε of a computed squared distance and the
// subnormal slack τ (spec §3.5 arithmetic, m bands, element type D of the distances).
struct BoundSlack {
    double eps;
    double tau;
};

// Nearest centroid (lowest index on ties, as km::nearest) and the least distance to any other.
template <typename X, typename D>
__device__ int nearest_two(X x, const D* cent, int k, int m, D& best, D& second) {
    best = km::sq_distance(x, cent, m);
    second = D(INFINITY);
    int label = 0;
    for (int j = 1; j < k; ++j) {
        const D d = km::sq_distance(x, cent + std::size_t(j) * m, m);
        if (d < best) {
            second = best;
            best = d;
            label = j;
        } else if (d < second) {
            second = d;
        }
    }
    return label;
}

// The stored bound l' for a scanned pixel: a lower bound of the true distances to the other
// centroids, from the computed second-best distance, plus the current drift Δ; rounded down.
template <typename D>
__device__ float stored_bound(D second, double drift, const BoundSlack& slack) {
    const double low = sqrt(fmax(double(second) - slack.tau, 0.0) / (1.0 + slack.eps)) * (1.0 - 0x1p-50);
    return __double2float_rd((low + drift) * (1.0 - 0x1p-50));
}

// Whether the label cannot change: d̃_a below L²·(1 − ε) − τ, L = l' − Δ.
template <typename D>
__device__ bool label_holds(D da, float stored, double drift, const BoundSlack& slack) {
    const double low = (double(stored) - drift) * (1.0 - 0x1p-50) - drift * 0x1p-50;
    if (!(low > 0)) return false;
    return double(da) < low * low * (1.0 - slack.eps) - slack.tau;
}

// One bounded pass (see the file comment) over m-band spectra read in place (cuda.cu launches it
// for m > 3 only). assigned/bound: per valid pixel. drift: Δ.
template <typename T, typename D, bool Shared>
__global__ void __launch_bounds__(kBlock) bounded_assign(Pixels<T> px, std::int64_t n, int m, int k,
                                                         const D* __restrict__ cent_g, u64* sums_g, u64* counts_g,
                                                         double* inertia_partial, double scale, bool split_sums,
                                                         std::int32_t* assigned, float* bound, const double* drift_p,
                                                         BoundSlack slack, const Status* status) {
    if (status->done || status->stalled) return;
    const bool rescan = status->rescan != 0;
    const double drift = *drift_p;
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ double scratch[kBlock];
    const auto [cent, sums] = pass_setup<T, D, Shared>(smem, cent_g, k, m, sums_g, counts_g, scale, split_sums);
    double acc = 0;
    // One pixel scanned in full: its label, bound and inertia, and its values moved between the
    // sums (all of them counted in a rescan). Every lane of the warp calls it; j < 0 adds nothing.
    auto scan_pixel = [&](std::int64_t j) {
        const bool on = j >= 0;
        const T* x = on ? px(j) : nullptr;
        int old = -1, label = -1;
        if (on) {
            D best, second;
            label = nearest_two(x, cent, k, m, best, second);
            if (!rescan) old = assigned[j];
            if (label != old) assigned[j] = label;
            bound[j] = stored_bound(second, drift, slack);
            acc += double(best);
        }
        const bool moved = on && !rescan && label != old;
        auto value = [&](int b) { return x[b]; };
        sums.add(on && (rescan || moved) ? label : -1, 1, value);
        sums.add(moved ? old : -1, -1, value);
    };
    // A pixel whose label cannot change costs one distance. The others queue per warp and are
    // scanned 32 at a time, so a warp never idles most of its lanes through a k-distance scan.
    __shared__ std::int64_t queue[kBlock / 32][64];
    std::int64_t* q = queue[threadIdx.x / 32];
    const int lane = threadIdx.x & 31;
    const unsigned lanes_below = (1u << lane) - 1;
    int queued = 0;  // the same in every lane of the warp
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    for (std::int64_t base = std::int64_t(blockIdx.x) * blockDim.x; base < n; base += stride) {
        const std::int64_t i = base + threadIdx.x;
        const bool ok = i < n;
        if (rescan) {
            scan_pixel(ok ? i : -1);
            continue;
        }
        bool need = false;
        if (ok) {
            const D da = km::sq_distance(px(i), cent + std::size_t(assigned[i]) * m, m);
            need = !label_holds(da, bound[i], drift, slack);
            if (!need) acc += double(da);
        }
        const unsigned mask = __ballot_sync(0xffffffffu, need);
        if (need) q[queued + __popc(mask & lanes_below)] = i;
        queued += __popc(mask);
        __syncwarp();
        if (queued >= 32) {
            queued -= 32;
            const std::int64_t j = q[queued + lane];
            __syncwarp();  // read before the next pushes overwrite
            scan_pixel(j);
        }
    }
    if (!rescan) scan_pixel(lane < queued ? q[lane] : -1);
    const double total = block_sum(acc, scratch);
    if (threadIdx.x == 0) inertia_partial[blockIdx.x] = total;
    sums.flush(k);
}

}  // namespace
}  // namespace cubekit::detail
