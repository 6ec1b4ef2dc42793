#pragma once
// Pieces shared by the k-means backends: the per-run plan derived from the data, the host-side
// steps that touch only k-sized or sample-sized arrays (so both backends run the very same code),
// and the backend entry points. kmeans.cpp validates and dispatches.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
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

/// Whether the init sample is a subsample (init_sample > 0 and fewer than the N valid pixels);
/// valid pixel i is then in it when km::in_sample(seed, i, sample_rate(...)).
bool sampling_active(const KmeansOptions& options, std::int64_t valid);
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

/// Relocation of one pixel (§3.7): it leaves the cluster of its nearest centroid among `c` (the
/// old centroids) and becomes the whole of empty cluster `to`: sum q(x), count 1. `x` is a
/// pointer or a km::Spectrum (x[b] is sample b; doubles carry every element type exactly).
template <typename X, typename D>
void relocate_pixel(X x, const std::vector<D>& c, int k, int m, int to, double scale, std::vector<std::int64_t>& sums,
                    std::vector<std::int64_t>& counts) {
    D d;
    const int from = km::nearest(x, c.data(), k, m, d);
    --counts[std::size_t(from)];
    counts[std::size_t(to)] = 1;
    for (int b = 0; b < m; ++b) {
        const std::int64_t q = km::sum_value(x[b], scale);
        sums[std::size_t(from) * m + b] -= q;
        sums[std::size_t(to) * m + b] = q;
    }
}

/// New order of the clusters: decreasing count, ties by lower old index (§3.8).
std::vector<int> count_order(const std::vector<std::uint64_t>& counts);

/// Fills the result's sorted centroids, counts, palette, k_effective and warnings from the
/// unsorted centroids/counts of the winning run; returns old → new label map.
std::vector<int> sort_result(KmeansResult& result, const std::vector<double>& centroids,
                             const std::vector<std::uint64_t>& counts, DType dtype, bool legacy);

/// Calls f(T{}, D{}) with T the input's element type and D its distance and centroid type: f64
/// for f64 input, else f32 (spec §3.5).
template <typename F>
void visit_kmeans_types(DType dtype, F&& f) {
    visit_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        f(T{}, std::conditional_t<std::is_same_v<T, double>, double, float>{});
    });
}

/// A restart's final statistics (its final pass without labels): counts, f64 inertia and the exact
/// fixed-point inertia that chooses between restarts.
struct RestartStats {
    std::vector<std::uint64_t> counts;
    double inertia = 0;
    km::i128 exact = 0;
};

/// The restart loop both backends run (spec §2.2 n_init): restart r starts from seed + r with
/// init(seed) → centroids, then lloyd(c, prev, run); with several restarts each one's
/// stats(c, prev) choose the winner (lowest exact inertia, ties the lowest r), with one the
/// labelling pass gives its numbers later. Fills result.restarts and result.winner; returns the
/// winner's final and previous centroids.
template <typename D, typename Init, typename Lloyd, typename Stats>
std::pair<std::vector<D>, std::vector<D>> run_restarts(const Context& ctx, const KmeansOptions& options,
                                                       KmeansResult& result, Init&& init, Lloyd&& lloyd, Stats&& stats) {
    std::vector<D> best, best_prev;
    km::i128 best_exact = 0;
    for (int r = 0; r < options.n_init; ++r) {
        ctx.check_cancelled("kmeans");
        KmeansRun run;
        run.seed = options.seed + std::uint64_t(r);
        std::vector<D> c = init(run.seed);
        std::vector<D> prev = c;
        lloyd(c, prev, run);
        if (options.n_init > 1) {
            const RestartStats f = stats(c, prev);
            run.inertia = f.inertia;
            run.k_effective = int(std::count_if(f.counts.begin(), f.counts.end(), [](std::uint64_t n) { return n > 0; }));
            if (result.restarts.empty() || f.exact < best_exact) {
                best_exact = f.exact;
                best = c;
                best_prev = prev;
                result.winner = int(result.restarts.size());
            }
        } else {
            best = c;
            best_prev = prev;
        }
        result.restarts.push_back(std::move(run));
        ctx.progress(std::size_t(r + 1), std::size_t(options.n_init));
    }
    return {std::move(best), std::move(best_prev)};
}

/// Lloyd's iterations (§3.3, 3.5–3.7) as the host-driven engines run them (the CPU reference and the
/// pieces of tiled_driver.hpp): assign(c, sums, counts) is one pass (nearest centroid, exact sums and
/// counts; returns the f64 inertia), relocate(c, sums, counts) fills the empty clusters.
template <typename D, typename Assign, typename Relocate>
void lloyd_loop(const Context& ctx, const KmeansOptions& o, const KmeansPlan& plan, std::vector<D>& c,
                std::vector<D>& prev, KmeansRun& run, Assign&& assign, Relocate&& relocate) {
    const int k = plan.k, m = plan.m;
    std::vector<std::int64_t> sums(std::size_t(k) * std::size_t(m)), counts(static_cast<std::size_t>(k));
    const bool zero_empty = o.legacy || o.empty == EmptyPolicy::LegacyZero;
    for (int it = 1; it <= o.max_iter; ++it) {
        ctx.check_cancelled("kmeans");
        const double inertia = assign(c, sums, counts);
        if (o.history) run.history.push_back(inertia);
        if (!o.legacy && o.empty == EmptyPolicy::Relocate) relocate(c, sums, counts);
        prev = c;
        double shift = 0;
        for (int j = 0; j < k; ++j)
            shift += km::update_cluster(sums.data() + std::size_t(j) * m, counts[std::size_t(j)],
                                        c.data() + std::size_t(j) * m, m, plan.e, zero_empty, o.legacy);
        run.iterations = it;
        if (!o.legacy && shift <= plan.tol_abs) {
            run.converged = true;
            break;
        }
    }
}

/// The winner's numbers from the final labelling pass (its counts of the unsorted clusters, its
/// f64 inertia) and the sort (§3.8): fills inertia, iterations, converged, history, the sorted
/// centroids, counts, palette and k_effective; returns old → new label map.
template <typename D>
std::vector<int> finish_result(KmeansResult& result, const std::vector<D>& centroids,
                               const std::vector<std::uint64_t>& counts, double inertia, DType dtype, bool legacy) {
    KmeansRun& win = result.restarts[std::size_t(result.winner)];
    win.inertia = result.inertia = inertia;
    result.iterations = win.iterations;
    result.converged = win.converged;
    result.history = win.history;
    const std::vector<int> new_label =
        sort_result(result, std::vector<double>(centroids.begin(), centroids.end()), counts, dtype, legacy);
    win.k_effective = result.k_effective;
    return new_label;
}

/// Round half away from zero and clamp to the element type's range (float types: unchanged).
double palette_value(double centroid, DType dtype);

/// Raster indices of the valid pixels of a host view (mask ≠ 0, no NaN band); `mask` is W×H or empty.
std::vector<std::int64_t> valid_pixels(const Context& ctx, const CubeView& image, const std::vector<std::uint8_t>& mask);
/// Per-band min and max over these pixels (order-free, so tiles merge them exactly).
KmeansStats band_range(const Context& ctx, const CubeView& image, const std::vector<std::int64_t>& valid);
/// The exact per-band Σq (int64) and Σq² (int128) of the tolerance, q the fixed-point value (scale 2^e).
struct BandMoments {
    std::vector<std::int64_t> sum_q;
    std::vector<km::i128> sum_q2;
    void add(const std::vector<std::int64_t>& q, const std::vector<km::i128>& q2);
};
BandMoments band_moments(const Context& ctx, const CubeView& image, const std::vector<std::int64_t>& valid,
                         double scale);

/// CPU first pass: the valid pixels (raster indices; mask and NaN excluded) and the plan, read
/// from a host view of any strides.
KmeansPlan prepare_kmeans(const Context& ctx, const CubeView& image, const KmeansOptions& options,
                          std::vector<std::int64_t>& valid);
/// Raster indices of the init sample (all valid pixels when sampling is off or the sample < k).
std::vector<std::int64_t> init_sample_pixels(const std::vector<std::int64_t>& valid, const KmeansOptions& options,
                                             std::uint64_t seed, int threads);
/// The values (k × m, row-major, as doubles: exact for every element type) of the pixels at these
/// positions of the init sample.
using SampleValues = std::function<std::vector<double>(const std::vector<std::int64_t>& positions)>;
/// Initial centroids (k × m) of Explicit, BoxDiagonal and Random (positions drawn in a sample of
/// `sample_size` pixels, read through `values`); empty for k-means++.
std::vector<double> simple_init(const KmeansPlan& plan, const KmeansOptions& options, std::int64_t sample_size,
                                std::uint64_t seed, const SampleValues& values);

// Backends. They fill the small outputs of the result (centroids, counts, palette, runs...) and
// write the labels (W×H×1 i32, −1 excluded) and, when `quantized` is not empty, the painted
// image (W×H×m, the input's type) into the caller's views, of any strides.
/// CPU reference: `image`, `labels` and `quantized` are host views of any strides.
void kmeans_cpu(const Context& ctx, const CubeView& image, const MutableCubeView& labels,
                const MutableCubeView& quantized, const KmeansOptions& options, KmeansResult& result);
/// CUDA: `image` is dense BIP on the context's device; `labels` and `quantized` are device views
/// there. Queued on the context's stream (the labels and the painted image may still be in flight
/// on return).
void kmeans_cuda(const Context& ctx, const CubeView& image, const MutableCubeView& labels,
                 const MutableCubeView& quantized, const KmeansOptions& options, KmeansResult& result);

// ---- Tiles (tiled.cpp): the engine's passes over one tile of a scene, with the scene's plan ----

/// What one Lloyd pass over a tile adds up.
struct TileSums {
    std::vector<std::int64_t> sums, counts;
    double inertia = 0;
};
/// Pixels of a tile with their m values each, in the scene's element type (an init sample can be the
/// whole scene: as doubles it took 4× the bytes and most of the pass). keys[i].index: the pixel's
/// valid rank in the scene (init sample) or its raster index in the scene (relocation).
struct TilePixels {
    std::vector<FarPixel> keys;
    DType dtype = DType::F64;
    std::vector<std::byte> values;  ///< m values of `dtype` per key
    /// The values as doubles (exact for every element type).
    std::vector<double> doubles() const;
    /// Sets the values from doubles holding `type`'s values exactly.
    void set_doubles(const std::vector<double>& v, DType type);
    /// Appends other's keys and values (of the same type).
    void append(const TilePixels& other);
};

/// One tile (its core, no halo) of a scene run in tiles: the whole-scene engine's passes over the
/// tile's valid pixels. Centroids are k × m, as doubles holding the run's f32 (or f64) values exactly.
class KmeansTile {
public:
    virtual ~KmeansTile() = default;
    /// Valid pixels in each row of the tile.
    virtual std::vector<std::int64_t> row_valid() const = 0;
    virtual KmeansStats range() const = 0;
    virtual BandMoments moments() const = 0;
    /// The tile's pixels of the init sample (every valid pixel when `all`), keyed by valid rank: the
    /// tile's first valid pixel of row r has rank first_rank[r].
    virtual TilePixels sample(std::uint64_t seed, double rate, bool all, const std::vector<std::int64_t>& first_rank) const = 0;
    virtual TileSums assign(const std::vector<double>& c) const = 0;
    /// The tile's `wanted` farthest pixels from their nearest centroid (§3.7), keyed by scene raster index.
    virtual TilePixels farthest(const std::vector<double>& c, std::size_t wanted) const = 0;
    /// The final pass: counts and f64 inertia (`assign` labels, `paint` measures), with the exact
    /// inertia when `labels` is empty, else the tile's labels (−1 excluded) written into `labels`.
    virtual RestartStats final_pass(const std::vector<double>& assign, const std::vector<double>& paint,
                                    const MutableCubeView& labels) const = 0;
    /// Renumbers `labels` (the tile's, from final_pass) after the sort and paints `quantized` (W×H×m of
    /// the input's type, the tile's) with the palette, excluded pixels with their own samples.
    virtual void relabel_paint(const MutableCubeView& labels, const std::vector<int>& new_label,
                               const std::vector<double>& palette, const MutableCubeView& quantized) const = 0;
};
/// The CPU tile: `window` is the tile's core in host memory, (x0, y0) its corner in a scene
/// `scene_width` wide, `options` the scene's with the mask cut to the tile.
std::unique_ptr<KmeansTile> kmeans_tile_cpu(const Context& ctx, const CubeView& window, int x0, int y0, int scene_width,
                                            const KmeansOptions& options, const KmeansPlan& plan);
/// The CUDA tile: `window` is the tile's core on the context's device (any layout: reordered to BIP).
std::unique_ptr<KmeansTile> kmeans_tile_cuda(const Context& ctx, const CubeView& window, int x0, int y0, int scene_width,
                                             const KmeansOptions& options, const KmeansPlan& plan);
/// The initial centroids (k × m, +∞ for those k-means++ leaves unset) that the CPU engine draws from
/// the scene's init sample, gathered into `sample` (n × 1 × m, in rank order) with the scene's plan.
std::vector<double> kmeans_sample_init_cpu(const Context& ctx, const CubeView& sample, const KmeansOptions& options,
                                           const KmeansPlan& plan, std::uint64_t seed);
/// As kmeans_sample_init_cpu, k-means++ on the context's device (the sample is uploaded): the same
/// centroids, bit for bit. (In tiles on the H100, the CPU engine's k-means++ over a 902,500-pixel
/// sample of 156 bands took about 1.6 s of a 4.2 s GPU run: bench/results, 2026-11-27.)
std::vector<double> kmeanspp_sample_init_cuda(const Context& ctx, const CubeView& sample, const KmeansPlan& plan,
                                              std::uint64_t seed);

/// What the CUDA first pass leaves on the device.
struct DeviceValidSet {
    std::int64_t valid = 0;  ///< N
    DeviceBuffer flags;      ///< u8 per pixel, 0 = excluded; empty when every pixel is valid
    DeviceBuffer index;      ///< i64 raster index of each valid pixel, in raster order; empty when all are valid
};
/// The CUDA first pass (valid pixels, per-band min/max, exact moments) of a dense BIP image on the
/// context's device; only m-sized statistics come to the host, where make_plan and set_tolerance
/// run as for the CPU. Gives the plan prepare_kmeans gives.
KmeansPlan prepare_kmeans_cuda(const Context& ctx, const CubeView& image, const KmeansOptions& options,
                               DeviceValidSet& valid);
/// Whether the CUDA backend keeps centroids and sums in shared memory for this k and m.
bool kmeans_cuda_fits_shared(int k, int m, DType dtype);

}  // namespace cubekit::detail
