#pragma once
/// Neural-network target detection in hyperspectral cubes (spec detect.md).
///
/// A. Pixel level: an RBF network (detect_models.hpp) scores every pixel's spectrum,
///    y(p) = Σ_i w_i exp(−γ_i d_i(p)) + bias, γ_i = 1/(2σ_i²), d_i = Σ_b (gain_b(x_b − offset_b) − u_ib)².
///    mask = [y > θ]; 8-connected objects numbered in raster order of their first pixel; a table of
///    objects (box, area, centroid, peak and mean score).
///
///     cubekit::RbfnModel m = cubekit::read_rbfn_model("castaway.json");
///     cubekit::PixelResult r = cubekit::detect_pixels(ctx, cube, m);
///     // r.score (W×H×1 f32), r.mask (u8), r.labels (i32), r.objects[i].x0 ...
///
/// Precision (spec §0.3): f32. Every sample is converted to f32 as it is read (any element type,
/// BIP, BSQ or any strides; no conversion copy), the parameters are the model's values rounded to
/// f32 (γ computed in f64, then rounded), bands added in increasing order, neurons in order, then
/// the bias. The CPU reference uses libm expf; CUDA may differ by the spec's tolerance
/// 1e-5·(1 + m/64)·(|bias| + Σ|w_i|) (summation order in the mappings, exp rounding).
/// A pixel with a non-finite band scores NaN and is never detected (so does one whose distance to a
/// centre overflows f32, beyond ~1.8e19 in the sensor's units: the rule is "a non-finite d_i").
/// On the GPU the check costs nothing per sample: d_i is non-finite iff a band is or d_i overflowed.
///
/// B. Multi-resolution (quad-tree): per 8×8-block f64 sums of x and x² per band (row-major pixel
///    order inside a block), merged into a pyramid (children TL, TR, BL, BR), per-window σ_c =
///    sqrt(max(0, (S2 − S1·S1/n)/n)), ANN-1 "target inside?" and ANN-2 "right scale?" in f64,
///    descended from the whole image down to min_window (spec §B.3). CPU and CUDA give identical
///    window lists. Non-finite samples are skipped per band and counted (n is per band; a window
///    with n = 0 in some band is rejected: its feature is undefined).
///
///     cubekit::MultiresResult r = cubekit::detect_multires(ctx, cube, cubekit::read_multires_model("m.json"));
///     for (const cubekit::Window& w : r.detections) ...   // sorted by (y0, x0)
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/detect_models.hpp"
#include "cubekit/io.hpp"
#include "cubekit/tiles.hpp"
#include "cubekit/options.hpp"

namespace cubekit {

/// How the CUDA backend maps the RBF network onto threads (the CPU ignores it).
/// Fused: one thread per pixel, all k distances in registers, the cube read once (the fast one).
/// Neuron: the seed's mapping, one thread per (pixel, neuron), the pixel re-read k times.
/// Synapse: the seed's mapping, threads along the bands of one pixel and a shared-memory tree per neuron.
enum class RbfnMapping { Fused, Neuron, Synapse };
template <>
struct EnumNames<RbfnMapping> {
    static constexpr EnumName<RbfnMapping> names[] = {
        {RbfnMapping::Fused, "fused"}, {RbfnMapping::Neuron, "neuron"}, {RbfnMapping::Synapse, "synapse"}};
};

/// Options of detect_pixels(). Defaults: spec §A.2.
struct PixelOptions {
    /// θ: detected ⇔ score > θ; NaN (the default) = the model's threshold.
    double threshold = std::numeric_limits<double>::quiet_NaN();
    RbfnMapping mapping = RbfnMapping::Fused;
    /// Pixels per kernel launch (the seed's experiment); 0 = the whole image in one launch.
    std::int64_t chunk_pixels = 0;
    /// Neighbourhood of the objects: 8 or 4.
    int connectivity = 8;
    /// Objects of fewer pixels are removed from the mask and the table (1 = keep all).
    std::int64_t min_area = 1;
    /// Make the mask, the labels and the object table (false: the score map only).
    bool objects = true;
};

template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, PixelOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.threshold, Field{.name = "threshold", .doc = "decision threshold theta: detected if score > theta (default: the model's)",
                             .automatic = std::numeric_limits<double>::quiet_NaN()});
    visit(o.mapping, Field{.name = "mapping", .doc = "CUDA mapping: fused (fast), neuron or synapse (the seed's)"});
    visit(o.chunk_pixels, Field{.name = "chunk_pixels", .doc = "pixels per CUDA launch, 0 = all (the seed's experiment)", .min = 0});
    visit(o.connectivity, Field{.name = "connectivity", .doc = "object neighbourhood: 8 or 4", .one_of = {4, 8}});
    visit(o.min_area, Field{.name = "min_area", .doc = "objects of fewer pixels are dropped", .min = 1});
    visit(o.objects, Field{.name = "objects", .doc = "", .negation = "score map only: no mask, labels or objects"});
}

/// One detected object (spec §A.2). Box inclusive-exclusive: [x0, x0+width) × [y0, y0+height).
struct DetectedObject {
    int label = 0;  ///< 1..n, raster order of the first pixel
    std::int64_t area = 0;
    int x0 = 0, y0 = 0, width = 0, height = 0;
    double centroid_x = 0, centroid_y = 0;  ///< mean pixel coordinates
    double peak_score = 0;                  ///< its largest score (the first pixel in raster order on ties)
    int peak_x = 0, peak_y = 0;
    double mean_score = 0;
};

struct PixelResult {
    Cube score;   ///< W×H×1 f32 BSQ (one per model: detect_pixels_many)
    Cube mask;    ///< W×H×1 u8, 1 = score > θ and in an object of ≥ min_area (empty without objects)
    Cube labels;  ///< W×H×1 i32, 0 = none (empty without objects)
    std::vector<DetectedObject> objects;
    double threshold = 0;            ///< θ used
    std::int64_t non_finite = 0;     ///< pixels scored NaN (a non-finite band or distance)
    std::int64_t detected = 0;       ///< pixels in the final mask
};

/// Scores, mask, labels and objects of one model. Throws InvalidInput naming the field: the model's
/// bands ≠ the cube's, an empty cube, bad options.
PixelResult detect_pixels(const Context& ctx, const CubeView& cube, const RbfnModel& model, const PixelOptions& options = {});

/// Several models in one pass over the cube (one read, one score map each; same band count).
std::vector<PixelResult> detect_pixels_many(const Context& ctx, const CubeView& cube, std::span<const RbfnModel> models,
                                            const PixelOptions& options = {});

/// The score maps only, into caller outputs in the context's memory (device memory for a CUDA
/// context: the device-resident call): scores[j] is W×H×1 f32 for models[j]. Nothing of the cube
/// is copied when the backend reads it where it is (CUDA: a BIP or BSQ cube or window on the
/// context's device; CPU: any host view). Queued on the context's stream.
void rbfn_scores_into(const Context& ctx, const CubeView& cube, std::span<const RbfnModel> models,
                      std::span<const MutableCubeView> scores, const PixelOptions& options = {});

/// detect_pixels_many in tiles (tiles.hpp) of a host cube or of a file read by windows: within the
/// budgets of `tiles` and over its devices, streamed on CUDA. A score depends on its own pixel only
/// (no halo), so the scores are bit-identical to detect_pixels_many's on the same backend; the mask,
/// labels and objects come from the whole score map. `run` (optional) receives what the tiling did.
///
///     cubekit::CubeFile f("flight_line.hdr");
///     auto r = cubekit::detect_pixels_tiled(gpu, f, std::span(&model, 1), {}, {.devices = {0, 1}});
std::vector<PixelResult> detect_pixels_tiled(const Context& ctx, const CubeView& cube, std::span<const RbfnModel> models,
                                             const PixelOptions& options = {}, const TileOptions& tiles = {},
                                             TiledRun* run = nullptr);
std::vector<PixelResult> detect_pixels_tiled(const Context& ctx, const CubeFile& file, std::span<const RbfnModel> models,
                                             const PixelOptions& options = {}, const TileOptions& tiles = {},
                                             TiledRun* run = nullptr);

/// The mask [score > θ], labels and objects of a score map (host or device; CPU or CUDA labelling,
/// identical results). Fills mask, labels, objects, detected of `result`.
void objects_from_scores(const Context& ctx, const CubeView& score, double threshold, const PixelOptions& options,
                         PixelResult& result);

/// "cpu", "cuda-fused", "cuda-neuron" or "cuda-synapse".
std::string_view rbfn_implementation(const Context& ctx, const PixelOptions& options);

/// One window of the multi-resolution search: [x0, x0+width) × [y0, y0+height), clipped to the image.
struct Window {
    int x0 = 0, y0 = 0, width = 0, height = 0;
    int level = 0;     ///< l: nominal side = block·2^l
    double y1 = 0;     ///< ANN-1 output (denormalised)
    double y2 = 0;     ///< ANN-2 output (NaN when ANN-2 was not evaluated)
    bool at_min_scale = false;  ///< emitted because it could not be split further
    /// Trace only: what happened to it.
    enum class Outcome : std::uint8_t { Rejected, Accepted, Split, Forced, Dropped } outcome = Outcome::Accepted;
};

/// Options of detect_multires(). Defaults: spec §B.2.
struct MultiresOptions {
    /// Emit ANN-1-positive, ANN-2-negative windows at the minimum size (flagged at_min_scale).
    bool keep_min_level = true;
    /// Return every evaluated window with its outcome.
    bool trace = false;
};

template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, MultiresOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.keep_min_level, Field{.name = "keep_min_level", .doc = "",
                                  .negation = "drop target windows that reach the minimum size without ANN-2 saying 'right scale'"});
    visit(o.trace, Field{.name = "trace", .doc = "also return every evaluated window and what happened to it"});
}

struct MultiresLevelCount {
    int level = 0;
    std::int64_t evaluated = 0, positive = 0, accepted = 0, split = 0;
};

struct MultiresResult {
    std::vector<Window> detections;  ///< sorted by (y0, x0); pairwise disjoint
    std::vector<Window> trace;       ///< with options.trace: every evaluated window, sorted by (level desc, y0, x0)
    std::vector<MultiresLevelCount> levels;  ///< coarsest first
    std::int64_t skipped_samples = 0;        ///< non-finite samples left out of the sums
    int block = 8, min_window = 8, top_level = 0;
};

/// The quad-tree search of spec §B.3. Throws InvalidInput naming the field: model inputs ≠ bands,
/// block/min_window not powers of two or min_window not block·2^l, an empty cube.
MultiresResult detect_multires(const Context& ctx, const CubeView& cube, const MultiresModel& model,
                               const MultiresOptions& options = {});

/// detect_multires in tiles (tiles.hpp) of a host cube or of a file read by windows, within the budgets
/// of `tiles` and over its devices. Level 0 of the pyramid (every block's finite-sample count and
/// f64 sums, per band) is computed tile by tile; the tiles are cut at multiples of the block (a
/// requested or chosen tile size is rounded down to one, at least one block), so every block lies in
/// one tile and its sums are the whole call's. The levels above and the descent then run once on the
/// assembled level 0 (⌈W/b⌉·⌈H/b⌉·bands·20 bytes) on the context's backend, so the result equals
/// detect_multires' on the same backend. `run` (optional) receives what the tiling did.
///
///     cubekit::CubeFile f("flight_line.hdr");
///     auto r = cubekit::detect_multires_tiled(gpu, f, model, {}, {.device_memory_limit = 1 << 30});
MultiresResult detect_multires_tiled(const Context& ctx, const CubeView& cube, const MultiresModel& model,
                                     const MultiresOptions& options = {}, const TileOptions& tiles = {}, TiledRun* run = nullptr);
MultiresResult detect_multires_tiled(const Context& ctx, const CubeFile& file, const MultiresModel& model,
                                     const MultiresOptions& options = {}, const TileOptions& tiles = {}, TiledRun* run = nullptr);

/// Level 0 of the multi-resolution pyramid (spec §B.3 steps 1–2): per block of block × block pixels
/// (the last ones clipped) and band, the finite-sample count and the f64 sums Σx, Σx² (pixels in
/// row-major order inside a block), node-major ([node][band], nodes row-major over gx × gy).
/// Pieces of a scene cut at multiples of the block (tiles, Dask chunks) have the scene's sums for
/// their blocks, so their sums side by side are the scene's.
struct BlockSums {
    int gx = 0, gy = 0, bands = 0, block = 8;
    std::vector<std::int32_t> n;
    std::vector<double> s1, s2;
    std::int64_t skipped = 0;  ///< non-finite samples left out
};

/// The block sums of a cube on the context's backend (CPU and CUDA sums are bit-identical). Throws
/// InvalidInput for an empty cube or a block that is not a power of two.
BlockSums multires_block_sums(const Context& ctx, const CubeView& cube, int block);

/// detect_multires of a width × height scene from its block sums (sums.block must be the model's,
/// sums.gx × sums.gy the scene's grid): the same result as detect_multires on the scene, on the same
/// backend. Throws InvalidInput naming what does not match.
///
///     auto sums = cubekit::multires_block_sums(ctx, piece, 8);   // per piece, then placed side by side
///     auto r = cubekit::detect_multires_from_sums(ctx, scene_sums, W, H, model);
MultiresResult detect_multires_from_sums(const Context& ctx, BlockSums sums, int width, int height, const MultiresModel& model,
                                         const MultiresOptions& options = {});

/// The window feature σ (m values, spec §B.3 step 3) of every node of the quad-tree at `level`
/// (row-major over the level's grid), from the same pyramid detection uses; training and tests use it.
/// `counts` gets each node's per-band finite-sample counts (nodes×m) when not null.
std::vector<double> window_features(const Context& ctx, const CubeView& cube, int block, int level,
                                    std::vector<std::int64_t>* counts = nullptr);

/// "cpu" or "cuda".
std::string_view multires_implementation(const Context& ctx);

/// Number of levels above level 0: L = ⌈log2(max(⌈W/b⌉, ⌈H/b⌉))⌉.
int multires_top_level(int width, int height, int block);

}  // namespace cubekit
