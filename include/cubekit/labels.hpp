#pragma once
/// Connected-component labelling of every band of a cube, and small-component removal
/// (spec edges.md §3.7 "E3", §4.3; used by the edge detector, watershed and target detection).
///
/// Nonzero pixels are foreground. Two neighbouring foreground pixels belong to the same component
/// iff they hold the same value, so both a binary mask and a label image work. Neighbours: the
/// 4 edge-sharing pixels (connectivity 4) or all 8 (connectivity 8). Bands are independent.
///
///     Components c = cubekit::label_components(ctx, mask);          // 8-connectivity
///     int first = c.labels.at<std::int32_t>(x, y, b);               // 0 = background
///     std::int64_t n = c.per_band[b][first - 1].size;
///     Cube clean = cubekit::remove_small_components(ctx, edges, 5); // components of < 5 pixels → 0
///
/// Inputs are views (a Cube or DeviceCube converts to one): host or device memory (device memory
/// needs a CUDA context), any layout, a window or any strides. The CPU reads them where they are;
/// CUDA reads a dense BSQ cube on the context's device where it is (the removal also a window of
/// one), and otherwise uploads or reorders it once.
/// Both backends give identical results (labels, statistics, cleaned maps). Throws InvalidInput
/// naming the parameter: float element types, connectivity not 4/8, an empty cube, a band of
/// more than 2^31 − 1 pixels; remove_small_components also wants a u8 mask.
#include <cstdint>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/io.hpp"
#include "cubekit/tiles.hpp"

namespace cubekit {

/// Size and bounding box of one component; the box is inclusive ([x0, x1] × [y0, y1]).
struct ComponentInfo {
    std::int64_t size = 0;
    int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

/// Statistics of every band's components: per_band[b][label − 1].
using ComponentStats = std::vector<std::vector<ComponentInfo>>;

struct Components {
    /// W×H×B, DType::I32, BSQ; 0 = background. In each band the components are numbered
    /// 1..n in raster order (row by row, left to right) of each component's first pixel.
    Cube labels;
    /// per_band[b][label − 1]: the component's size and bounding box.
    ComponentStats per_band;
};

/// Labels the components of every band. image: u8, u16, i16, u32 or i32, any layout, host or
/// device. Returns host labels (a thin wrapper over label_components_into).
Components label_components(const Context& ctx, const CubeView& image, int connectivity = 8);

/// Labels into a caller's W×H×B i32 view in the context's memory (device memory for a CUDA
/// context, host memory for a CPU one; any strides) and returns every band's statistics. Nothing
/// of the image is copied when the backend reads it where it is (CUDA: a dense BSQ cube on the
/// context's device; CPU: any host view), and a dense BSQ output is written in place (others
/// through one copy). Returns once the statistics are on the host; the labels are queued on the
/// context's stream (ctx.synchronize() before reading them from the host).
///
///     cubekit::DeviceCube d_labels(gpu, {W, H, B, cubekit::DType::I32});
///     cubekit::ComponentStats stats = cubekit::label_components_into(gpu, d_mask, d_labels, 8);
ComponentStats label_components_into(const Context& ctx, const CubeView& image, const MutableCubeView& labels,
                                     int connectivity = 8);

/// Zeroes every pixel of a component (per band, equal-value rule above) of fewer than min_size
/// pixels; other pixels keep their value. mask: u8, nonzero = foreground, any layout, host or
/// device. min_size ≤ 1 is the identity (a copy). Returns u8, same shape, BSQ, on the host.
Cube remove_small_components(const Context& ctx, const CubeView& mask, std::int64_t min_size, int connectivity = 8);

/// remove_small_components into a caller's W×H×B u8 view in the context's memory (any strides).
/// `out` may be `mask` itself (the same memory and strides: cleaned in place); otherwise the two
/// must not overlap. Queued on the context's stream (a CUDA context reads back one 8-byte flag:
/// whether the mask holds one foreground value, which allows the faster binary rule).
///
///     cubekit::remove_small_components_into(gpu, d_edges, d_edges, 5);   // in place, on the device
void remove_small_components_into(const Context& ctx, const CubeView& mask, const MutableCubeView& out,
                                  std::int64_t min_size, int connectivity = 8);

// ---- Tiles (tiles.hpp) and pieces ------------------------------------------------------------
// A scene cut into a grid of tiles (or Dask chunks) is labelled piece by piece; the pieces' components
// that touch across a border (equal values, the connectivity's neighbours) are joined by a union-find
// over the border pixels only, and numbered in the scene's raster order: key (top row, piece column,
// local label) orders first pixels exactly as a raster scan, because a piece numbers its components
// in its own raster order. So the labels and statistics equal label_components' exactly, for any
// tile size, with memory for the borders only (no halo; the labels are renumbered in place).

/// What a tiled labelling did: every band's statistics (label_components') and the run.
struct ComponentsTiled {
    ComponentStats per_band;
    TiledRun run;
};

/// Labels a scene in tiles into `labels`: host W×H×B i32, any strides. Bands may have more than
/// 2^31 − 1 pixels here (a tile may not); a band of more than 2^31 − 1 components throws.
///
///     cubekit::Cube labels(W, H, B, cubekit::DType::I32);
///     auto c = cubekit::label_components_tiled(gpu, mask, labels.mutable_view(), 8, {.devices = {0, 1}});
ComponentsTiled label_components_tiled(const Context& ctx, const CubeView& image, const MutableCubeView& labels,
                                       int connectivity = 8, const TileOptions& tiles = {});
/// The same reading the scene by windows from a file (a scene that is not in memory).
ComponentsTiled label_components_tiled(const Context& ctx, const CubeFile& file, const MutableCubeView& labels,
                                       int connectivity = 8, const TileOptions& tiles = {});

/// remove_small_components in tiles: a labelling pass finds every component's size in the scene, then
/// each tile is labelled again and cleaned (the same tiles). out: host u8, any strides; it may be the
/// mask itself (cleaned in place). The mask is read twice; the run counts the tiles of one pass.
TiledRun remove_small_components_tiled(const Context& ctx, const CubeView& mask, const MutableCubeView& out,
                                       std::int64_t min_size, int connectivity = 8, const TileOptions& tiles = {});
TiledRun remove_small_components_tiled(const Context& ctx, const CubeFile& mask, const MutableCubeView& out,
                                       std::int64_t min_size, int connectivity = 8, const TileOptions& tiles = {});

/// One piece of a scene, labelled on its own: where it lies, its components' statistics (local labels,
/// local coordinates) and, per band, the labels and samples of its edge pixels in the order top row,
/// bottom row (width each), left column, right column (height each).
struct LabelPiece {
    int x0 = 0, y0 = 0, width = 0, height = 0;
    ComponentStats per_band;
    std::vector<std::vector<std::int32_t>> edge_labels;
    std::vector<std::vector<std::int64_t>> edge_values;
};

/// Labels one piece (the piece at x0, y0 of the scene) into `labels` (label_components_into's rules)
/// and returns its summary for merge_label_pieces.
LabelPiece label_piece(const Context& ctx, const CubeView& piece, int x0, int y0, const MutableCubeView& labels,
                       int connectivity = 8);

/// The pieces joined: the scene's statistics, and per piece and band the table local label → scene
/// label (relabel[i][b][0] = 0).
struct LabelMerge {
    ComponentStats per_band;
    std::vector<std::vector<std::vector<std::int32_t>>> relabel;
};

/// Joins pieces that tile a width × height scene as a grid (rows of equal height, columns of equal
/// width, like Dask chunks or plan_tiles), each labelled with the same connectivity. Throws
/// InvalidInput when they do not form such a grid or disagree on the bands.
///
///     std::vector<cubekit::LabelPiece> pieces;   // label_piece on every chunk
///     cubekit::LabelMerge m = cubekit::merge_label_pieces(pieces, W, H, 8);
///     // scene label of chunk i's pixel: m.relabel[i][b][local label]
LabelMerge merge_label_pieces(const std::vector<LabelPiece>& pieces, int width, int height, int connectivity = 8);

}  // namespace cubekit
