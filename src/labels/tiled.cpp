// Connected components in tiles (labels.hpp, tiles.hpp): every tile labelled on its own by the tiled
// runner (no halo), the tiles' summaries merged (labels/merge.cpp), then
// - labels: the tiles' local labels, already in the caller's output, renumbered in place on the host;
// - removal: each tile labelled again and cleaned with its components' scene-wide sizes (the same
//   tiles: the first pass's tile size is forced on the second).
#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/tiled_local.hpp"
#include "cubekit/error.hpp"
#include "cubekit/labels.hpp"
#include "labels/labels_internal.hpp"

namespace cubekit {

namespace {

// Device scratch of the CUDA labelling per pixel and band (labels/cuda_forest.cuh: ~28 bytes of
// forest, up to 16 per root for the statistics' sort) and the host scratch of the CPU one.
constexpr std::size_t kDeviceLabelBytes = 44, kHostLabelBytes = 8;

void check_source(const char* function, const detail::TileSource& s, int connectivity, bool u8_only) {
    detail::check_label_geometry(function, 1, 1, s.bands, connectivity);
    if (s.width < 1 || s.height < 1 || s.bands < 1)
        throw InvalidInput(std::string(function) + ": the scene is " + std::to_string(s.width) + "x" +
                           std::to_string(s.height) + "x" + std::to_string(s.bands) +
                           "; width, height and bands must be at least 1");
    if (u8_only ? s.dtype != DType::U8 : dtype_is_float(s.dtype))
        throw InvalidInput(std::string(function) + ": the element type is " + std::string(dtype_name(s.dtype)) +
                           (u8_only ? "; expected u8" : "; expected an integer type (u8, u16, i16, u32, i32)"));
}

// The tile options with the tile size forced to what the runner would choose for `kernel`, capped so
// that a tile's band fits the labelling's 32-bit pixel index.
TileOptions fixed_tiles(const Context& ctx, const detail::TileSource& s, const detail::LocalTileKernel& kernel,
                        TileOptions options, const char* where) {
    auto [tw, th] = detail::local_tile_size(ctx, s, kernel, options, where);
    if (std::int64_t(tw) * th > std::int64_t(INT_MAX)) th = std::max(1, int(INT_MAX / tw));
    options.tile_width = tw, options.tile_height = th;
    return options;
}

detail::LocalTileKernel labelling_kernel(const detail::TileSource& s, DType out_dtype, int out_bands) {
    detail::LocalTileKernel k;
    k.out_dtype = out_dtype;
    k.out_bands = out_bands;
    const std::size_t reorder = s.layout != Layout::BSQ ? std::size_t(s.bands) * dtype_size(s.dtype) : 0;
    k.device_work_bytes_per_pixel = reorder + std::size_t(s.bands) * kDeviceLabelBytes;
    k.host_work_bytes_per_pixel = std::size_t(s.bands) * kHostLabelBytes;
    return k;
}

// The tiles' summaries, gathered from the workers.
struct Pieces {
    std::mutex mutex;
    std::vector<LabelPiece> all;
    void add(LabelPiece p) {
        const std::lock_guard lock(mutex);
        all.push_back(std::move(p));
    }
};

// Renumbers the local labels of every tile in `labels` (host) with the merge's tables.
void relabel_in_place(const Context& ctx, const std::vector<LabelPiece>& pieces, const LabelMerge& m,
                      const MutableCubeView& labels) {
    const auto out = labels.typed<std::int32_t>();
    const std::int64_t n = std::int64_t(pieces.size());
    const int bands = labels.bands();
    // Every (tile, band) is its own work item: a few tall tiles would leave most threads idle.
#pragma omp parallel for collapse(2) schedule(dynamic) num_threads(ctx.threads())
    for (std::int64_t i = 0; i < n; ++i)
        for (int b = 0; b < bands; ++b) {
            const LabelPiece& p = pieces[std::size_t(i)];
            const std::vector<std::int32_t>& table = m.relabel[std::size_t(i)][std::size_t(b)];
            for (int y = p.y0; y < p.y0 + p.height; ++y)
                for (int x = p.x0; x < p.x0 + p.width; ++x) {
                    std::int32_t& v = out(x, y, b);
                    v = table[std::size_t(v)];
                }
        }
}

ComponentsTiled label_source(const Context& ctx, const detail::TileSource& s, const MutableCubeView& labels,
                             int connectivity, const TileOptions& options) {
    constexpr const char* kWhere = "label_components_tiled";
    check_source(kWhere, s, connectivity, false);
    ctx.log(std::string(kWhere) + ": " + std::string(ctx.backend_name()) + ", " + std::to_string(s.width) + "x" +
            std::to_string(s.height) + "x" + std::to_string(s.bands) + ", connectivity " + std::to_string(connectivity));
    detail::LocalTileKernel k = labelling_kernel(s, DType::I32, s.bands);
    Pieces pieces;
    k.run_tile = [&](const Context& c, const Tile& t, const CubeView& in, const MutableCubeView& out) {
        pieces.add(label_piece(c, in, t.x0, t.y0, out, connectivity));
    };
    ComponentsTiled result;
    result.run = detail::run_local_tiles(ctx, s, labels, k, fixed_tiles(ctx, s, k, options, kWhere), kWhere);
    LabelMerge m = merge_label_pieces(pieces.all, s.width, s.height, connectivity);
    relabel_in_place(ctx, pieces.all, m, labels);
    result.per_band = std::move(m.per_band);
    return result;
}

// Per band, whether each local label of a tile is kept (its component has ≥ min_size pixels in the
// scene), concatenated, with each band's offset.
std::pair<std::vector<std::uint8_t>, std::vector<std::int64_t>> keep_tables(const LabelMerge& m, std::size_t piece,
                                                                            std::int64_t min_size) {
    std::vector<std::uint8_t> keep;
    std::vector<std::int64_t> offset;
    for (std::size_t b = 0; b < m.relabel[piece].size(); ++b) {
        offset.push_back(std::int64_t(keep.size()));
        for (std::int32_t global : m.relabel[piece][b])
            keep.push_back(global != 0 && m.per_band[b][std::size_t(global) - 1].size >= min_size);
    }
    return {std::move(keep), std::move(offset)};
}

void apply_keep_cpu(const CubeView& mask, const CubeView& labels, const std::vector<std::uint8_t>& keep,
                    const std::vector<std::int64_t>& offset, const MutableCubeView& out) {
    const auto m = mask.typed<std::uint8_t>();
    const auto l = labels.typed<std::int32_t>();
    const auto o = out.typed<std::uint8_t>();
    for (int b = 0; b < mask.bands(); ++b)
        for (int y = 0; y < mask.height(); ++y)
            for (int x = 0; x < mask.width(); ++x)
                o(x, y, b) = keep[std::size_t(offset[std::size_t(b)] + l(x, y, b))] ? m(x, y, b) : std::uint8_t(0);
}

// A tile's local labels in a scratch cube of the context's memory.
template <class Body>
void with_local_labels(const Context& c, const CubeView& in, Body&& body) {
    const CubeShape shape{in.width(), in.height(), in.bands(), DType::I32, Layout::BSQ};
    if (c.is_cuda()) {
        DeviceCube labels(c, shape);
        body(labels.mutable_view());
    } else {
        Cube labels(shape.width, shape.height, shape.bands, shape.dtype, shape.layout);
        body(labels.mutable_view());
    }
}

TiledRun removal_source(const Context& ctx, const detail::TileSource& s, const MutableCubeView& out,
                        std::int64_t min_size, int connectivity, const TileOptions& options) {
    constexpr const char* kWhere = "remove_small_components_tiled";
    check_source(kWhere, s, connectivity, true);
    detail::LocalTileKernel clean = labelling_kernel(s, DType::U8, s.bands);
    const std::size_t label_bytes = std::size_t(s.bands) * sizeof(std::int32_t);
    clean.device_work_bytes_per_pixel += label_bytes;
    clean.host_work_bytes_per_pixel += label_bytes;
    if (min_size <= 1) {  // every component has at least one pixel: a copy
        clean.run = [](const Context& c, const CubeView& in, const MutableCubeView& o) { copy_cube(c, in, o); };
        return detail::run_local_tiles(ctx, s, out, clean, options, kWhere);
    }
    ctx.log(std::string(kWhere) + ": " + std::string(ctx.backend_name()) + ", min size " + std::to_string(min_size) +
            ", connectivity " + std::to_string(connectivity));
    const TileOptions tiles = fixed_tiles(ctx, s, clean, options, kWhere);  // both passes, the same tiles

    // Pass 1: every tile's components and edges.
    detail::LocalTileKernel count = clean;
    count.out_bands = 0;
    Pieces pieces;
    count.run_tile = [&](const Context& c, const Tile& t, const CubeView& in, const MutableCubeView&) {
        with_local_labels(c, in, [&](const MutableCubeView& l) { pieces.add(label_piece(c, in, t.x0, t.y0, l, connectivity)); });
    };
    TiledRun run = detail::run_local_tiles(ctx, s, MutableCubeView{}, count, tiles, kWhere);
    const LabelMerge m = merge_label_pieces(pieces.all, s.width, s.height, connectivity);
    std::map<std::pair<int, int>, std::size_t> index;  // a tile's corner → its piece
    for (std::size_t i = 0; i < pieces.all.size(); ++i) index[{pieces.all[i].x0, pieces.all[i].y0}] = i;

    // Pass 2: each tile labelled again (the same local labels) and cleaned.
    clean.run_tile = [&](const Context& c, const Tile& t, const CubeView& in, const MutableCubeView& o) {
        // Named, not a structured binding: clang 16 cannot capture those with OpenMP on.
        const auto tables = keep_tables(m, index.at({t.x0, t.y0}), min_size);
        const std::vector<std::uint8_t>& keep = tables.first;
        const std::vector<std::int64_t>& offset = tables.second;
        with_local_labels(c, in, [&](const MutableCubeView& l) {
            label_components_into(c, in, l, connectivity);
            if (c.is_cuda()) detail::apply_keep_cuda(c, in, l, keep, offset, o);
            else apply_keep_cpu(in, l, keep, offset, o);
        });
    };
    TiledRun second = detail::run_local_tiles(ctx, s, out, clean, tiles, kWhere);
    detail::merge_peak(second, run);  // the tiles of one pass (the same in both), the peaks of both
    return second;
}

}  // namespace

ComponentsTiled label_components_tiled(const Context& ctx, const CubeView& image, const MutableCubeView& labels,
                                       int connectivity, const TileOptions& tiles) {
    return label_source(ctx, detail::tile_source(image), labels, connectivity, tiles);
}

ComponentsTiled label_components_tiled(const Context& ctx, const CubeFile& file, const MutableCubeView& labels,
                                       int connectivity, const TileOptions& tiles) {
    return label_source(ctx, detail::tile_source(file), labels, connectivity, tiles);
}

TiledRun remove_small_components_tiled(const Context& ctx, const CubeView& mask, const MutableCubeView& out,
                                       std::int64_t min_size, int connectivity, const TileOptions& tiles) {
    return removal_source(ctx, detail::tile_source(mask), out, min_size, connectivity, tiles);
}

TiledRun remove_small_components_tiled(const Context& ctx, const CubeFile& mask, const MutableCubeView& out,
                                       std::int64_t min_size, int connectivity, const TileOptions& tiles) {
    return removal_source(ctx, detail::tile_source(mask), out, min_size, connectivity, tiles);
}

}  // namespace cubekit
