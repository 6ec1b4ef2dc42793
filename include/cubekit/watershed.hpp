#pragma once
/// Cellular-automaton watershed (spec gradient-watershed.md part B): the order-independent
/// steepest-descent watershed of Decision B-2, with markers (minima imposition), a mask, `levels`
/// quantisation, h-minima, 2-D and 3-D.
///
///     cubekit::WatershedResult w = cubekit::watershed(ctx, gradient);          // 8-connectivity
///     int region = w.labels.at<std::int32_t>(x, y, 0);                         // 1..w.regions
///     cubekit::WatershedOptions o; o.connectivity = 4; o.levels = 64;
///     w = cubekit::watershed(ctx, gradient, o, {.markers = &seeds, .mask = &inside});
///
/// Every pixel gets a label (no watershed-line pixels, Decision B-4); the labels are those of the
/// spec's automaton, which does not depend on the update order, so the CPU reference, the CUDA
/// schedules and every tile size give identical labels.
///
/// The relief (`height`): u8, u16, i16, u32, i32, f32 or f64, one band (W×H×1), or a volume
/// (options.volume: the bands are z-slices, W×H×D). Heights are compared exactly in their type
/// (-0.0 == +0.0); NaN inside the mask is refused (InvalidInput naming the first NaN pixel; outside
/// the mask it is no data and allowed); `levels` needs a finite range (no ±inf).
///
/// Neighbours (spec §B3, in this order): 4-conn (−1,0), (0,−1), (0,+1), (+1,0); 8-conn the 3×3
/// square without the centre, row by row, as (dy, dx); volumes 6 or 26, in lexicographic
/// (dz, dy, dx) order.
///
/// Markers (minima imposition, Soille): `markers` is an integer image of the relief's shape,
/// > 0 = a seed with that label. The relief is replaced by its reconstruction by erosion from the
/// markers, computed on an order-preserving integer key of the heights (marker pixels 0, others
/// key + 1), so the marker pixels are the only regional minima; each region then takes its
/// marker's label (values kept, not renumbered). Pixels that no marker reaches (a mask component
/// without a seed) get 0.
///
/// Mask: a u8 image of the relief's shape, nonzero = inside. Pixels outside get label 0 and are
/// not part of the relief (they are nobody's neighbour).
///
/// Small regions (options.min_area = A ≥ 2; 0 and 1 = off): after the automaton, regions of fewer
/// than A pixels are merged into a neighbour. Two regions are adjacent when a pixel of one is a
/// neighbour of a pixel of the other (the watershed's connectivity; label 0, outside the mask, is
/// nobody's neighbour); their pass is the lowest max(h(p), h(q)) over such pixel pairs, with h the
/// relief the automaton compared (after `levels` and h-minima; exact, in its type). Repeatedly, the
/// region of smallest area below A (ties: the smallest label) is merged into the neighbour across
/// its lowest pass (ties: the smallest neighbour label); the union keeps the neighbour's label, its
/// area is the sum and its pass to every other region the lower of the two. A region with no
/// neighbour left (alone in its mask component) stays, however small. The survivors are then
/// renumbered 1..R' in the raster order of their first pixel, and R = R'. Each region stays
/// connected. With markers, min_area is refused (the marker labels are the caller's). The merge
/// runs on the host (a CUDA context downloads the labels and the relief, and uploads the result).
/// Example, 1×11, 4-connectivity, A = 4:
///
///     h       0 1 2 3 6 1 4 3 2 1 0      automaton: regions 1 (x 0..3), 2 (x 4..6), 3 (x 7..10)
///     passes  1–2: max(3, 6) = 6;  2–3: max(4, 3) = 4
///     →       1 1 1 1 2 2 2 2 2 2 2      region 2 (3 pixels) joins region 3 across the pass 4; R = 2
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/gradient.hpp"
#include "cubekit/io.hpp"
#include "cubekit/options.hpp"
#include "cubekit/tiles.hpp"

namespace cubekit {

/// How the CUDA backend iterates the automaton (the labels are the same for every schedule).
enum class WatershedSchedule {
    Auto,          ///< block-asynchronous
    Synchronous,   ///< one global update per round (the reference schedule on the GPU)
    BlockAsync,    ///< each block relaxes its tile in shared memory until stable, then a global round
};
template <>
struct EnumNames<WatershedSchedule> {
    static constexpr EnumName<WatershedSchedule> names[] = {{WatershedSchedule::Auto, "auto"},
                                                            {WatershedSchedule::Synchronous, "sync"},
                                                            {WatershedSchedule::BlockAsync, "block-async"}};
};

struct WatershedOptions {
    /// 4 or 8 (2-D); 6 or 26 with volume.
    int connectivity = 8;
    /// Quantise the heights first to 0..levels−1 (spec B2: round((h − min)/(max − min)·(levels − 1)),
    /// f64, half away from zero); 0 = off.
    std::int64_t levels = 0;
    /// h-minima: minima of depth ≤ h_min are filled (reconstruction by erosion of h + h_min over h,
    /// in f64; Soille's HMIN) before the watershed; 0 = off.
    double h_min = 0;
    /// Merge regions of fewer than min_area pixels into the neighbour across their lowest pass
    /// (see "Small regions" above); 0 or 1 = off. Not with markers.
    std::int64_t min_area = 0;
    /// The bands are z-slices of a volume (3-D neighbours); false: one band, 2-D.
    bool volume = false;
    /// CUDA only: how the automaton is iterated.
    WatershedSchedule schedule = WatershedSchedule::Auto;
};

template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, WatershedOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.connectivity, Field{.name = "connectivity", .doc = "neighbours: 4 or 8 (2-D), 6 or 26 (volume)",
                                .one_of = {4, 6, 8, 26}});
    visit(o.levels, Field{.name = "levels", .doc = "quantise the heights to 0..levels-1 first (0 = off)", .min = 0});
    visit(o.h_min, Field{.name = "h_min", .doc = "fill minima of depth <= H first (h-minima; 0 = off)", .min = 0.0});
    visit(o.min_area, Field{.name = "min_area",
                            .doc = "merge regions below A pixels into the neighbour across their lowest pass (0 = off)",
                            .min = 0});
    visit(o.volume, Field{.name = "volume", .doc = "the bands are z-slices of a 3-D volume (6/26 neighbours)"});
    visit(o.schedule, Field{.name = "schedule", .doc = "CUDA iteration: auto, sync or block-async (same labels)"});
}

/// Optional secondary inputs, of the relief's shape (W×H×1, or W×H×D for a volume), any layout,
/// host or device.
struct WatershedInputs {
    const CubeView* markers = nullptr;  ///< integer type, > 0 = seed label (≤ 2^31 − 1)
    const CubeView* mask = nullptr;     ///< u8, nonzero = inside
};

struct WatershedResult {
    Cube labels;               ///< W×H×D i32, BSQ: 1..regions (marker labels with markers), 0 outside the mask
    std::int64_t regions = 0;  ///< regional minima R (with markers: the distinct marker labels > 0 inside the mask;
                               ///< with min_area: the regions R' left after the merge)
};

/// The watershed of `height` (a thin wrapper over watershed_into). Throws InvalidInput naming the
/// field or input: bad options, NaN heights, shapes that differ, a float marker image.
WatershedResult watershed(const Context& ctx, const CubeView& height, const WatershedOptions& options = {},
                          const WatershedInputs& inputs = {});

/// The labels into a caller's W×H×D i32 view in the context's memory (device memory for a CUDA
/// context: the device-resident call; any strides). Returns R. Nothing of the relief is copied when
/// the backend reads it where it is (a dense BSQ relief on the context's device; any host view on
/// the CPU). The labels are queued on the context's stream when the call returns.
std::int64_t watershed_into(const Context& ctx, const CubeView& height, const MutableCubeView& labels,
                            const WatershedOptions& options = {}, const WatershedInputs& inputs = {});

// ---- Tiles (issue 17): a relief larger than a memory budget, or dealt to several GPUs -------------

/// What a tiled watershed did.
struct WatershedTiled {
    std::int64_t regions = 0;
    /// Passes over the tiles: a plateau that crosses tile borders may need its tiles run again until
    /// the plateau distances they report agree (1 when every plateau stays inside its tile's window).
    int rounds = 0;
    TiledRun run;  ///< tiles, sizes, peaks of one pass (tiles.hpp)
};

/// The watershed of a 2-D relief (W×H×1) in tiles into `labels` (host W×H×1 i32, any strides):
/// exactly watershed()'s labels and R, for any tile size (tiles.hpp's options; 1-pixel halo). Each
/// tile runs the automaton on its window; the plateau distances are exchanged across tile borders
/// until they agree, then the tiles' labels are joined scene-wide and renumbered in place (memory for
/// the tiles' borders and one entry per region part). Options: connectivity and a mask (host u8);
/// levels, h_min, min_area, markers and volumes need the whole relief and are refused (InvalidInput).
///
///     cubekit::Cube labels(W, H, 1, cubekit::DType::I32);
///     auto w = cubekit::watershed_tiled(gpu, gradient, labels.mutable_view(), {}, {},
///                                       {.device_memory_limit = 256 << 20, .devices = {0, 1}});
WatershedTiled watershed_tiled(const Context& ctx, const CubeView& height, const MutableCubeView& labels,
                               const WatershedOptions& options = {}, const WatershedInputs& inputs = {},
                               const TileOptions& tiles = {});
/// The same reading the relief by windows from a file (a scene that is not in memory).
WatershedTiled watershed_tiled(const Context& ctx, const CubeFile& height, const MutableCubeView& labels,
                               const WatershedOptions& options = {}, const WatershedInputs& inputs = {},
                               const TileOptions& tiles = {});

// ---- The piece API behind watershed_tiled and cubekit.dask.watershed ------------------------------

namespace detail {
struct TileFrame;
}

/// One tile's run (watershed_piece) beside its labels. The tile's window is its core plus a 1-pixel
/// halo (clipped to the scene); its "ring" is the window's cells outside the core's interior (the halo
/// and the core's own border), in window raster order. The labels are the tile's class numbers 1..C
/// (0 outside the mask): the cells where descents inside the window end, in window raster order — a
/// halo cell (its label is decided by the tile whose core holds it) or the first cell of a minimum's
/// part inside the core.
struct WatershedPiece {
    std::vector<std::uint32_t> ring_d;      ///< the plateau distance of each ring cell (UINT32_MAX = ∞)
    std::vector<std::int32_t> ring_labels;  ///< the class number (label) of each ring cell
    std::vector<std::int64_t> class_cells;  ///< each class's cell, as a scene raster index
    std::vector<std::int32_t> class_joined; ///< the class (0-based) of each class's cell's root in this window:
                                            ///< itself, unless a halo minimum cell joined to another root
};

/// Runs one tile: `window` is the relief over tile.read_* (the core ± 1 pixel, clipped; host or
/// device as the context reads it), `mask_window` the mask over the same window or null, `seeds`
/// the plateau distances the exchange hands this tile (WatershedExchange::seeds), `labels` a
/// window-sized i32 view in the context's memory that receives the class numbers.
WatershedPiece watershed_piece(const Context& ctx, const Tile& tile, int scene_width, const CubeView& window,
                               const CubeView* mask_window, const std::vector<std::uint32_t>& seeds, int connectivity,
                               const MutableCubeView& labels);

/// The plateau-distance exchange and the scene-wide join of a tiled watershed over any grid of
/// tiles (halo 1). Run each tile in dirty() with seeds(tile) and report() it; repeat until dirty() is
/// empty; then join() gives each tile's table from class number to scene label (label = table[c − 1])
/// and R. Not thread-safe.
class WatershedExchange {
public:
    WatershedExchange(int width, int height, const std::vector<Tile>& tiles);
    std::size_t size() const;
    const Tile& tile(std::size_t i) const;
    const detail::TileFrame& frame(std::size_t i) const;
    /// The seeds of a tile's next run (one per ring cell; UINT32_MAX = none known).
    std::vector<std::uint32_t> seeds(std::size_t i) const;
    /// A tile's run: its core border's distances become the scene's. Throws InvalidInput when the
    /// piece does not fit the tile's ring.
    void report(std::size_t i, WatershedPiece piece);
    /// The tiles to run (again): never reported, or a halo cell above its owner's value.
    std::vector<std::size_t> dirty() const;
    struct Join {
        std::vector<std::vector<std::int32_t>> tables;  ///< per tile: class c (1-based) → table[c − 1], 1..regions
        std::int64_t regions = 0;
    };
    Join join() const;
    /// Host memory held for the tiles' borders.
    std::size_t bytes() const;

private:
    struct Impl;
    std::shared_ptr<Impl> impl_;
};

/// Display aid (spec B2): u8, 1 where a forward neighbour (right or lower; with 8-connectivity any
/// of (0,+1), (+1,−1), (+1,0), (+1,+1); volumes: any forward neighbour) has a different label.
/// W×H×D like `labels` (i32); host output.
Cube watershed_boundary(const Context& ctx, const CubeView& labels, int connectivity = 8, bool volume = false);

/// The relief after `levels` quantisation (u32, W×H×D) — what the automaton compares when
/// options.levels > 0. Exposed for tests and for users who want to see it.
Cube quantize_levels(const Context& ctx, const CubeView& height, std::int64_t levels);

// ---- Segmentation chain (issue 16 item 2): RCMG → watershed, on the device with no host copy ----

struct SegmentResult {
    Cube gradient;             ///< W×H×1 f32 (or f64): the RCMG relief
    Cube labels;               ///< W×H×1 i32 watershed labels 1..regions
    std::int64_t regions = 0;
};

/// RCMG of `cube` then the watershed of that gradient. On a CUDA context the gradient stays on the
/// device between the two (one download of each result at the end).
SegmentResult segment(const Context& ctx, const CubeView& cube, const RcmgOptions& rcmg_options = {},
                      const WatershedOptions& watershed_options = {}, const WatershedInputs& inputs = {});

/// Per-region statistics of a label image (labels 1..R; 0 is skipped).
struct RegionStats {
    std::int32_t label = 0;
    std::int64_t area = 0;
    int x0 = 0, y0 = 0, x1 = 0, y1 = 0;        ///< inclusive box
    double centroid_x = 0, centroid_y = 0;
    std::vector<double> mean_spectrum;         ///< per band of `cube` (empty without a cube)
    double mean_gradient = 0;                  ///< NaN without a gradient
};

/// One entry per label present (ascending). labels: W×H×1 i32; cube (optional, W×H×B) and gradient
/// (optional, W×H×1) of the same size; host or device views.
std::vector<RegionStats> region_statistics(const Context& ctx, const CubeView& labels, const CubeView* cube = nullptr,
                                           const CubeView* gradient = nullptr);
/// The same with the cube read from a file a strip of whole rows at a time (CubeFile::read_window), so
/// that a cube larger than memory gets its table (issue 17): the same numbers bit for bit, since the
/// f64 sums run in raster order, strip after strip. `memory_limit` bounds the strip (0 = 256 MiB);
/// InvalidInput when it holds no row, or when the file's size is not the labels'. Reports progress
/// (rows done) and honours cancellation through ctx.
///
///     cubekit::CubeFile f("flight.hdr");
///     auto table = cubekit::region_statistics(cpu, labels, f, &gradient, 512 << 20);
std::vector<RegionStats> region_statistics(const Context& ctx, const CubeView& labels, const CubeFile& cube,
                                           const CubeView* gradient = nullptr, std::size_t memory_limit = 0);

}  // namespace cubekit
