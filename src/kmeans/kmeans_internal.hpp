#pragma once
// Pieces shared by the k-means backends: the per-run plan derived from the data, the host-side
// steps that touch only k-sized or sample-sized arrays (so both backends run the very same code),
// and the backend entry points. kmeans.cpp validates and dispatches.
#include <cstdint>
#include <string>
#include <vector>

#include "cubekit/kmeans.hpp"
#include "kmeans/kmeans_math.hpp"

namespace cubekit::detail {

/// Numbers of a run that depend on the data, computed identically by both backends.
struct KmeansPlan {
    int k = 0;
    int m = 0;
    std::int64_t pixels = 0;   ///< W·H
    std::int64_t valid = 0;    ///< N
    bool float_input = false;
    int e = 0;                 ///< exponent of the fixed-point sums (0 for integer input)
    int e_d = 0;               ///< exponent of the exact distances (k-means++ weights, restart choice)
    double scale = 1;          ///< 2^e
    double scale_d = 1;        ///< 2^e_d
    double tol_abs = 0;        ///< tol · mean band variance
    std::vector<double> lo, hi;  ///< per-band min and max over the valid pixels
};

/// Per-band statistics both backends gather in their first pass.
struct KmeansStats {
    std::int64_t valid = 0;
    std::vector<double> lo, hi;  ///< per-band min/max over valid pixels (+∞/−∞ when none)
};

/// Sets valid, lo, hi, e and e_d from the first pass (max_abs includes explicit centroids).
KmeansPlan make_plan(const KmeansOptions& options, int m, std::int64_t pixels, bool float_input,
                     const KmeansStats& stats);
/// tol_abs from the exact per-band Σq (int64) and Σq² (int128) of the second pass.
void set_tolerance(KmeansPlan& plan, double tol, const std::vector<std::int64_t>& sum_q,
                   const std::vector<km::i128>& sum_q2);

/// The init sample keeps valid pixel i (its index among valid pixels) when its stream-0 draw is
/// below init_sample / N. Returns false when every valid pixel is in the sample.
bool sampling_active(const KmeansOptions& options, std::int64_t valid);
inline bool in_sample(std::uint64_t seed, std::int64_t valid_index, double rate) {
    return km::uniform01(km::draw53(seed, 0, std::uint64_t(valid_index))) < rate;
}
inline double sample_rate(const KmeansOptions& options, std::int64_t valid) {
    return double(options.init_sample) / double(valid);
}

/// k-means++ trials per centre: 2 + ⌊ln k⌋.
int kmeanspp_trials(int k);

/// Random init: k distinct positions of a sample of size n (Floyd's algorithm on stream 3).
std::vector<std::int64_t> floyd_positions(std::uint64_t seed, std::int64_t n, int k);

/// Box-diagonal init: c_j = lo + j·(hi − lo)/(k − 1); k = 1 gives the middle.
std::vector<double> box_diagonal(const KmeansPlan& plan);

/// Relocation choice (§3.7): of the candidates (pixel index, distance) keep the `wanted` ones with
/// the largest distance (ties: lower index), dropping zero distances.
struct FarPixel {
    std::int64_t index;
    double distance;
};
std::vector<FarPixel> farthest(std::vector<FarPixel> candidates, std::size_t wanted);

/// New order of the clusters: decreasing count, ties by lower old index (§3.8).
std::vector<int> count_order(const std::vector<std::uint64_t>& counts);

/// Fills the result's sorted centroids, counts, palette, k_effective and warnings from the
/// unsorted centroids/counts of the winning run; returns old → new label map.
std::vector<int> sort_result(KmeansResult& result, const std::vector<double>& centroids,
                             const std::vector<std::uint64_t>& counts, DType dtype, bool legacy);

/// Round half away from zero and clamp to the element type's range (float types: unchanged).
double palette_value(double centroid, DType dtype);

/// The valid pixels (raster indices; mask and NaN excluded) and the plan, from the BIP image.
KmeansPlan prepare_kmeans(const Cube& bip, const KmeansOptions& options, int threads, std::vector<std::int64_t>& valid);
/// Raster indices of the init sample (all valid pixels when sampling is off or the sample < k).
std::vector<std::int64_t> init_sample_pixels(const std::vector<std::int64_t>& valid, const KmeansOptions& options,
                                             std::uint64_t seed, int threads);
/// Initial centroids (k × m) of Explicit, BoxDiagonal and Random (from `sample`); empty for k-means++.
std::vector<double> simple_init(const Cube& bip, const KmeansPlan& plan, const KmeansOptions& options,
                                const std::vector<std::int64_t>& sample, std::uint64_t seed);

// Backends: `image` is BIP; they fill the whole result (labels, quantized, runs).
void kmeans_cpu(const Context& ctx, const Cube& image, const KmeansOptions& options, KmeansResult& result);
void kmeans_cuda(const Context& ctx, const Cube& image, const KmeansOptions& options, KmeansResult& result);
/// Benchmarks: the CUDA engine on an image already on the device (`d_bip`, the BIP samples of
/// `bip`), with host-clock phase times (each phase ends in a synchronisation); with keep_on_device
/// the labels and the quantized image are not downloaded.
struct KmeansCudaTimes {
    bool keep_on_device = false;
    double init_ms = 0, lloyd_ms = 0, final_ms = 0, total_ms = 0;
};
void kmeans_cuda_resident(const Context& ctx, const Cube& bip, const DeviceBuffer& d_bip, const KmeansOptions& options,
                          KmeansResult& result, KmeansCudaTimes& times);
/// Whether the CUDA backend keeps centroids and sums in shared memory for this k and m.
bool kmeans_cuda_fits_shared(int k, int m, DType dtype);

}  // namespace cubekit::detail
