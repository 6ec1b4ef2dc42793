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
/// Throws InvalidInput naming the field and value (spec §3.12): k < 1 or k > N valid pixels,
/// zero bands, explicit centroids not k×m, mask size ≠ W×H, max_iter < 0, tol < 0 or not finite,
/// n_init < 1, init_sample < 0, legacy with anything but u8 input with 3 bands, no valid pixel.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/io.hpp"
#include "cubekit/options.hpp"
#include "cubekit/tiles.hpp"

namespace cubekit {

/// Initialisation (spec §3.4). KmeansPlusPlus: greedy k-means++ (2 + ⌊ln k⌋ trials per centre) on a
/// seeded subsample; Random: k distinct sample pixels; BoxDiagonal: evenly spaced on the diagonal of
/// the per-band min/max box (Spectral Python's default); Explicit: KmeansOptions::init_centroids.
enum class KmeansInit { KmeansPlusPlus, Random, BoxDiagonal, Explicit };
template <>
struct EnumNames<KmeansInit> {
    static constexpr EnumName<KmeansInit> names[] = {{KmeansInit::KmeansPlusPlus, "kmeans++"},
                                                     {KmeansInit::Random, "random"},
                                                     {KmeansInit::BoxDiagonal, "box-diagonal"},
                                                     {KmeansInit::Explicit, "explicit"}};
    static constexpr EnumName<KmeansInit> aliases[] = {{KmeansInit::KmeansPlusPlus, "k-means++"}};
};
inline std::string_view kmeans_init_name(KmeansInit init) { return enum_name(init); }
/// Kept for callers of the former parser; `what` defaults to the field's name.
inline KmeansInit parse_kmeans_init(std::string_view name, std::string_view what = "init") {
    return parse_enum<KmeansInit>(name, what);
}

/// What happens to a cluster that received no pixel (spec §3.7). Relocate: it takes the pixel
/// farthest from its centroid; Keep: it keeps its centroid; LegacyZero: it becomes the zero vector.
enum class EmptyPolicy { Relocate, Keep, LegacyZero };
template <>
struct EnumNames<EmptyPolicy> {
    static constexpr EnumName<EmptyPolicy> names[] = {
        {EmptyPolicy::Relocate, "relocate"}, {EmptyPolicy::Keep, "keep"}, {EmptyPolicy::LegacyZero, "legacy-zero"}};
};
inline std::string_view empty_policy_name(EmptyPolicy p) { return enum_name(p); }
/// Kept for callers of the former parser; `what` defaults to the field's name.
inline EmptyPolicy parse_empty_policy(std::string_view name, std::string_view what = "empty") {
    return parse_enum<EmptyPolicy>(name, what);
}

/// The spec's default k for classifying spectra (kmeans.md §2.2 item 9: 16 for quantization, 10 for
/// classification); KmeansOptions::k holds the quantization default.
inline constexpr int kClusterDefaultK = 10;

/// Options of kmeans(); defaults are the spec's (§2.2) with k = 16 (quantize).
struct KmeansOptions {
    /// Number of clusters, 1 ≤ k ≤ valid pixels.
    int k = 16;
    /// How the first k centroids are chosen.
    KmeansInit init = KmeansInit::KmeansPlusPlus;
    /// Key of the Philox4x32-10 generator; restart r uses seed + r.
    std::uint64_t seed = 0;
    /// k-means++/random work on a Bernoulli subsample of about this many valid pixels; 0 = all.
    std::int64_t init_sample = 1 << 20;
    /// Lloyd iterations at most; 0 with Explicit init = apply the given palette (final pass only).
    int max_iter = 100;
    /// Stop when Σ_j ||c'_j − c_j||² ≤ tol · mean band variance; 0 = only when no centroid moved.
    double tol = 1e-4;
    /// What happens to a cluster left without pixels.
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

/// The declarations of KmeansOptions' fields (options.hpp). init_centroids and mask are data, and
/// history and paint switches of the caller: no flags.
template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, KmeansOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.k, Field{.name = "k", .doc = "number of clusters, 1 <= k <= number of valid pixels", .min = 1,
                     .short_flag = "-k"});
    visit(o.init, Field{.name = "init",
                        .doc = "initial centroids: kmeans++ (greedy, seeded), random (k distinct pixels), box-diagonal "
                               "(evenly spaced on the per-band min-max diagonal) or explicit (init_centroids)"});
    visit(o.seed, Field{.name = "seed", .doc = "64-bit seed of the random draws; restart r uses seed + r"});
    visit(o.max_iter, Field{.name = "max_iter", .doc = "Lloyd iterations at most", .min = 0});
    visit(o.tol, Field{.name = "tol",
                       .doc = "stop when the centroids move less than tol x mean band variance (sum of squared "
                              "shifts); 0 = only when they stop moving",
                       .min = 0});
    visit(o.n_init, Field{.name = "n_init",
                          .doc = "independent restarts (seeds seed, seed+1, ...); the lowest inertia wins", .min = 1});
    visit(o.init_sample, Field{.name = "init_sample",
                               .doc = "kmeans++/random initialisation works on a seeded sample of about this many "
                                      "pixels (0 = all)",
                               .min = 0});
    visit(o.empty, Field{.name = "empty",
                         .doc = "a cluster left without pixels: relocate (takes the farthest pixel), keep (keeps its "
                                "centroid) or legacy-zero (becomes the zero vector)"});
    visit(o.legacy, Field{.name = "legacy",
                          .doc = "reproduce the 2018 seed program's integer arithmetic (8-bit RGB input, with init "
                                 "explicit): truncated centroids, empty -> black, no convergence test, no final "
                                 "re-assignment, no sorting"});
    visit(o.init_centroids, Field{.name = "init_centroids", .doc = "explicit initial centroids, k x bands", .flag = false});
    visit(o.mask, Field{.name = "mask", .doc = "W x H, 0 = pixel excluded", .flag = false});
    visit(o.history, Field{.name = "history", .doc = "record the inertia after each assignment step", .flag = false});
    visit(o.paint, Field{.name = "paint", .doc = "compute the quantized image", .flag = false});
}

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
    /// Empty after kmeans_into(), which writes the labels into the caller's view instead.
    std::vector<std::int32_t> labels;
    /// k × m cluster means, sorted by decreasing count (ties: lower index before the sort).
    std::vector<double> centroids;
    /// Pixels per cluster (sorted like the centroids).
    std::vector<std::uint64_t> counts;
    /// Centroids rounded half away from zero and clamped to the input type (float input: equal).
    std::vector<double> palette;
    /// W × H × m, the input's type, BIP: palette[labels[p]], excluded pixels copied unchanged.
    /// Empty when options.paint is false, and after kmeans_into() (which paints into the
    /// caller's `quantized` view when one is given).
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

/// k-means of the pixel vectors of `image` on the context's backend: host or device memory, any
/// element type, layout or window (a Cube or DeviceCube converts to its view). Returns the labels
/// and the painted image (options.paint) on the host with the small results. The CPU reads the
/// samples where they are (any strides, no copy); CUDA reads a dense BIP image on the context's
/// device where it is and otherwise uploads or reorders it once. Throws InvalidInput as the header
/// says (the message names the field).
///
///     cubekit::KmeansResult r = cubekit::kmeans(ctx, photo.view().window(0, 0, 64, 64), {.k = 4});
KmeansResult kmeans(const Context& ctx, const CubeView& image, const KmeansOptions& options = {});

/// k-means with the per-pixel outputs written into the caller's views in the context's memory:
/// device memory for a CUDA context (the device-resident call: CuPy/PyTorch arrays, a poisoned
/// test buffer, a pipeline stage), host memory for a CPU context. `labels`: W×H×1 i32, any
/// strides (−1 for excluded pixels). `quantized`: empty (nothing painted; options.paint is not
/// read), or W×H×m of the image's type, any strides. `image` may be anywhere; on a CUDA context a
/// dense BIP image on its device (an H×W×m C-contiguous array) is read where it is, and the whole
/// run stays on the device: the first pass, k-means++, Lloyd's iterations and the final pass; only
/// k- and m-sized numbers come to the host. Returns the small results (centroids, counts,
/// palette, inertia, iterations, restarts, warnings) with `labels` and `quantized` left empty.
/// Queued on the context's stream: call ctx.synchronize() before reading the outputs from the
/// host. Throws InvalidInput naming `labels` or `quantized` when one is in the wrong memory or
/// has the wrong shape or type, and as kmeans() does.
///
///     auto d_img = cubekit::CubeView::device(ptr, 0, W, H, 3, cubekit::DType::U8,
///                                            cubekit::dense_strides(W, H, 3, cubekit::Layout::BIP));
///     cubekit::DeviceCube d_labels(gpu, {W, H, 1, cubekit::DType::I32});
///     cubekit::KmeansResult r = cubekit::kmeans_into(gpu, d_img, d_labels, {.k = 16});
///     gpu.synchronize();   // r.centroids, r.counts on the host; the labels on the device
KmeansResult kmeans_into(const Context& ctx, const CubeView& image, const MutableCubeView& labels,
                         const KmeansOptions& options = {}, const MutableCubeView& quantized = {});

/// Paints every valid pixel with its nearest palette entry (k × m, row-major): the final pass
/// only (Explicit init, max_iter = 0). `image` is any view, as for kmeans(). Returns labels,
/// counts and the quantized image.
///
///     cubekit::KmeansResult r = cubekit::apply_palette(ctx, frame, previous.centroids);
KmeansResult apply_palette(const Context& ctx, const CubeView& image, const std::vector<double>& palette,
                           const std::vector<std::uint8_t>& mask = {});

/// What kmeans_tiled returns.
struct KmeansTiled {
    /// The small results, as kmeans_into returns them (labels and quantized image in the caller's views).
    KmeansResult result;
    /// The tiles (the same in every pass); peak_bytes covers every pass.
    TiledRun run;
    /// Reads of the input: 2 for the first pass, per restart one per Lloyd iteration (two when a
    /// cluster empties and is relocated) plus the sample's gathering and, with restarts, a final
    /// pass; then the labels, and the painting when `quantized` is given.
    int passes = 0;
};

/// k-means in tiles (tiles.hpp), for a scene larger than a memory budget: every pass of the engine
/// (first pass, sample, Lloyd iterations, final pass) runs over the scene's tiles with the scene's plan
/// and merges exactly, so `labels`, `quantized` and every field of the result equal kmeans_into's bit
/// for bit, except the f64 inertia and history (summed per tile, within 1e-12 relative). labels: host
/// memory, W×H×1 i32, any strides; quantized: empty or W×H×m of the input's type. The input is a host
/// view or a file read by windows; a CUDA context streams the tiles through its devices (tiles.devices),
/// with the inertia within 1e-9 of the CPU's. Every Lloyd iteration reads the scene again: for a scene
/// that fits the device, kmeans_into (one upload) is faster.
///
///     cubekit::Cube labels(W, H, 1, cubekit::DType::I32);
///     auto t = cubekit::kmeans_tiled(cpu, cubekit::CubeFile("flight.hdr"), labels.mutable_view(),
///                                    {.k = 10}, {.memory_limit = 256 << 20});   // t.result.centroids
KmeansTiled kmeans_tiled(const Context& ctx, const CubeView& image, const MutableCubeView& labels,
                         const KmeansOptions& options = {}, const TileOptions& tiles = {},
                         const MutableCubeView& quantized = {});
KmeansTiled kmeans_tiled(const Context& ctx, const CubeFile& file, const MutableCubeView& labels,
                         const KmeansOptions& options = {}, const TileOptions& tiles = {},
                         const MutableCubeView& quantized = {});

/// k-means over pieces of a scene that the caller computes where it likes (cubekit.dask.kmeans runs
/// them on Dask workers): the engine's control flow runs in a thread of its own and, at each pass over
/// the pixels, hands out a request (opaque bytes) and waits for every piece's part (kmeans_piece's
/// answer, in any order). The pieces must form a grid (pieces that start on one row have one height)
/// and cover the scene once. Every merge is exact: the result equals kmeans()'s bit for bit but for the
/// f64 inertia and history (per piece, then the pieces in order; within 1e-12 relative, 1e-9 with
/// pieces on a GPU). The pieces run on any backend (kmeans_piece's context); the driver runs on
/// `ctx`, a CPU context, which must outlive this object; destroying it before the run is done
/// abandons the run.
///
///     cubekit::KmeansPieces run(cpu, W, H, B, cubekit::DType::U16, {.k = 8});
///     while (auto request = run.next()) {
///         std::vector<std::string> parts;
///         for (const Piece& p : pieces) parts.push_back(cubekit::kmeans_piece(cpu, p.view, p.x0, p.y0, {}, *request));
///         run.feed(std::move(parts));
///     }
///     cubekit::KmeansResult r = run.result();   // then each piece's labels: kmeans_piece_labels(..., run.labelling(), ...)
class KmeansPieces {
public:
    KmeansPieces(const Context& ctx, int width, int height, int bands, DType dtype, const KmeansOptions& options);
    ~KmeansPieces();
    KmeansPieces(const KmeansPieces&) = delete;
    KmeansPieces& operator=(const KmeansPieces&) = delete;
    /// The next pass's request, or nothing when the run is done. Rethrows what the run threw.
    std::optional<std::string> next();
    /// Every piece's part of the pass next() returned.
    void feed(std::vector<std::string> parts);
    /// The small results (labels empty), once next() returned nothing.
    KmeansResult result();
    /// The request kmeans_piece_labels takes, once next() returned nothing.
    std::string labelling() const;

private:
    struct State;
    std::unique_ptr<State> state_;
};

/// A piece's part of a KmeansPieces pass: `piece` is the scene's window at (x0, y0) (host memory, any
/// strides; or device memory with a CUDA context, e.g. a CuPy chunk), `mask` its W×H cut of the
/// scene's mask (empty: every pixel). A CUDA context computes the part on its device: the same part.
std::string kmeans_piece(const Context& ctx, const CubeView& piece, int x0, int y0, const std::vector<std::uint8_t>& mask,
                         const std::string& request);
/// A piece's labels (W×H×1 i32, any strides; −1 excluded), sorted as the result's: host memory, or
/// either memory with a CUDA context.
void kmeans_piece_labels(const Context& ctx, const CubeView& piece, int x0, int y0, const std::vector<std::uint8_t>& mask,
                         const std::string& labelling, const MutableCubeView& labels);

/// Throws InvalidInput when the options do not suit this image shape (checks that need the
/// data, such as k > valid pixels, are done by kmeans()).
void check_kmeans_arguments(const CubeShape& shape, const KmeansOptions& options);

/// "cpu", "cuda-shared" (centroids and block sums in shared memory) or "cuda-tiled" (k × m too
/// large for shared memory: centroids read through the cache, sums with global atomics).
std::string_view kmeans_implementation(const Context& ctx, const CubeShape& shape, const KmeansOptions& options);

}  // namespace cubekit
