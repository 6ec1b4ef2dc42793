#pragma once
/// k-means (Lloyd) on the pixel vectors of an image or cube: colour quantization of RGB/grey
/// images and unsupervised classification of m-band spectra (spec: kmeans.md).
///
///     cubekit::KmeansResult r = cubekit::kmeans(ctx, photo, {.k = 16, .seed = 7});
///     // r.labels[y*W + x] ∈ 0..15 (−1 excluded), r.centroids (k×m, sorted by decreasing count),
///     // r.palette (rounded to the input type), r.quantized (the image painted with the palette)
///
/// One engine for every element type and band count. Distances are f32 (f64 for f64 input) with
/// an explicit FMA per band in band order; sums are exact 64-bit integers (fixed point for float
/// input), so the CPU and CUDA backends give bit-identical labels, counts, centroids, palette,
/// quantized image and iteration counts from the same seed. The inertia differs between backends
/// by at most 1e-9 relative (f64 sums in different orders).
///
/// Throws InvalidInput naming the parameter and value (spec §3.12): k < 1 or k > N valid pixels,
/// zero bands, explicit centroids not k×m, mask size ≠ W×H, max_iter < 0, tol < 0 or not finite,
/// n_init < 1, init_sample < 0, legacy with anything but u8 input with 3 bands, no valid pixel.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"

namespace cubekit {

/// Initialisation (spec §3.4). KmeansPlusPlus: greedy k-means++ (2 + ⌊ln k⌋ trials per centre) on a
/// seeded subsample; Random: k distinct sample pixels; BoxDiagonal: evenly spaced on the diagonal of
/// the per-band min/max box (Spectral Python's default); Explicit: KmeansOptions::init_centroids.
enum class KmeansInit { KmeansPlusPlus, Random, BoxDiagonal, Explicit };
std::string_view kmeans_init_name(KmeansInit init);  ///< "kmeans++", "random", "box-diagonal", "explicit"
KmeansInit parse_kmeans_init(std::string_view name, std::string_view what = "--init");

/// What happens to a cluster that received no pixel (spec §3.7). Relocate: it takes the pixel
/// farthest from its centroid; Keep: it keeps its centroid; LegacyZero: it becomes the zero vector.
enum class EmptyPolicy { Relocate, Keep, LegacyZero };
std::string_view empty_policy_name(EmptyPolicy p);  ///< "relocate", "keep", "legacy-zero"
EmptyPolicy parse_empty_policy(std::string_view name, std::string_view what = "--empty");

/// Options of kmeans(); defaults are the spec's (§2.2) with k = 16 (quantize).
struct KmeansOptions {
    int k = 16;
    KmeansInit init = KmeansInit::KmeansPlusPlus;
    /// Key of the Philox4x32-10 generator; restart r uses seed + r.
    std::uint64_t seed = 0;
    /// k-means++/random work on a Bernoulli subsample of about this many valid pixels; 0 = all.
    std::int64_t init_sample = 1 << 20;
    /// Lloyd iterations at most; 0 with Explicit init = apply the given palette (final pass only).
    int max_iter = 100;
    /// Stop when Σ_j ||c'_j − c_j||² ≤ tol · mean band variance; 0 = only when no centroid moved.
    double tol = 1e-4;
    EmptyPolicy empty = EmptyPolicy::Relocate;
    /// Independent restarts; the lowest (exact fixed-point) inertia wins, ties the lowest r.
    int n_init = 1;
    /// Reproduce the seed program's integer arithmetic (8-bit RGB input, the seed's 24-bit BMP):
    /// truncated integer centroids, empty → black, no convergence test, no final re-assignment,
    /// no sorting. Any init works; the regression against the seed uses Explicit (the seed's own
    /// rand()-based init is not reproduced).
    bool legacy = false;
    /// Explicit initial centroids, k × m row-major (cluster-major).
    std::vector<double> init_centroids;
    /// Optional W×H mask in raster order; 0 excludes a pixel. Empty = every pixel (NaN pixels are
    /// always excluded).
    std::vector<std::uint8_t> mask;
    /// Record the inertia after each assignment step in KmeansRun::history.
    bool history = true;
    /// Compute the quantized image (false saves memory when only labels are wanted).
    bool paint = true;
};

/// One restart's outcome.
struct KmeansRun {
    std::uint64_t seed = 0;
    /// Σ over valid pixels of the squared distance to this run's final centroids (f64).
    double inertia = 0;
    int iterations = 0;
    bool converged = false;
    int k_effective = 0;
    /// Inertia after each assignment step (one entry per iteration), if requested.
    std::vector<double> history;
};

struct KmeansResult {
    int k = 0;
    int bands = 0;
    int width = 0;
    int height = 0;
    std::int64_t valid_pixels = 0;
    /// Type of the input; centroids are f32 values (f64 for f64 input), held here as doubles.
    DType dtype = DType::U8;
    DType centroid_type = DType::F32;
    /// Cluster of each pixel in raster order after the final sort; −1 for excluded pixels.
    std::vector<std::int32_t> labels;
    /// k × m cluster means, sorted by decreasing count (ties: lower index before the sort).
    std::vector<double> centroids;
    /// Pixels per cluster (sorted like the centroids).
    std::vector<std::uint64_t> counts;
    /// Centroids rounded half away from zero and clamped to the input type (float input: equal).
    std::vector<double> palette;
    /// W × H × m, the input's type, BIP: palette[labels[p]], excluded pixels copied unchanged.
    Cube quantized;
    /// The winning run's numbers (also under restarts[winner]).
    double inertia = 0;
    int iterations = 0;
    bool converged = false;
    int k_effective = 0;
    std::vector<double> history;
    int winner = 0;
    std::vector<KmeansRun> restarts;
    /// Human-readable warnings (e.g. fewer distinct vectors than k).
    std::vector<std::string> warnings;
};

/// k-means of the pixel vectors of `image` (any type and layout; converted to BIP once).
KmeansResult kmeans(const Context& ctx, const Cube& image, const KmeansOptions& options = {});

/// Paints every valid pixel with its nearest palette entry (k × m, row-major): the final pass
/// only (Explicit init, max_iter = 0). Returns labels, counts and the quantized image.
KmeansResult apply_palette(const Context& ctx, const Cube& image, const std::vector<double>& palette,
                           const std::vector<std::uint8_t>& mask = {});

/// Throws InvalidInput when the options do not suit this image shape (checks that need the
/// data, such as k > valid pixels, are done by kmeans()).
void check_kmeans_arguments(const CubeShape& shape, const KmeansOptions& options);

/// "cpu", "cuda-shared" (centroids and block sums in shared memory) or "cuda-tiled" (k × m too
/// large for shared memory: centroids read through the cache, sums with global atomics).
std::string_view kmeans_implementation(const Context& ctx, const CubeShape& shape, const KmeansOptions& options);

}  // namespace cubekit
