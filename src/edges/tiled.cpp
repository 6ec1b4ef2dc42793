// The entropy edge detector in tiles (tiles.hpp, edges.hpp): two statistics passes over the scene's
// tiles (E1 ranges of a non-u8 scene; then the 256-bin histograms of the quantised bands, exact
// counts merged over tiles, and the scene's E2 thresholds from them), then the maps in tiles with a
// 1-pixel halo (the 3×3 rule), each tile's window run through the whole-scene pipeline with the
// scene's ranges and thresholds: every core equals the whole-scene map. E3 (small components) runs
// last on the output map, itself in tiles (remove_small_components_tiled: the components joined
// across tile borders), so no step holds more than a tile of labelling scratch.
#include <algorithm>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/outputs.hpp"
#include "core/tiled_local.hpp"
#include "cubekit/edges.hpp"
#include "cubekit/error.hpp"
#include "edges/edges_internal.hpp"
#include "labels/labels_internal.hpp"

namespace cubekit {

namespace {

constexpr const char* kWhere = "edges";

void check_piece(const CubeView& piece, const EdgeSceneStats& scene, const char* who) {
    if (piece.empty()) throw InvalidInput(std::string(who) + ": the piece is empty");
    const std::size_t B = std::size_t(piece.bands());
    if (piece.dtype() != DType::U8 && (scene.lo.size() != B || scene.hi.size() != B))
        throw InvalidInput(std::string(who) + ": scene.lo and scene.hi hold " + std::to_string(scene.lo.size()) + " and " +
                           std::to_string(scene.hi.size()) + " ranges; the piece has " + std::to_string(B) +
                           " bands of " + std::string(dtype_name(piece.dtype())) + " (each needs its scene range)");
}

// Device bytes per pixel of a window beyond the staged input and the output: a BSQ copy of a scene
// in another nesting, the quantised bands (non-u8), and the pipeline's single planes (vote count,
// band mean, a fused map before it is delivered).
std::size_t work_bytes(const detail::TileSource& s, bool maps) {
    std::size_t b = 0;
    if (s.layout != Layout::BSQ) b += std::size_t(s.bands) * dtype_size(s.dtype);
    if (s.dtype != DType::U8) b += std::size_t(s.bands);
    return b + (maps ? 8 : 1);
}

// Host bytes per pixel of a window the CPU pipeline allocates: the quantised bands (non-u8) and its
// single planes (the vote count, a band mean; the fused map of a tile).
std::size_t host_work_bytes(const detail::TileSource& s, bool maps) {
    return (s.dtype != DType::U8 ? std::size_t(s.bands) : 0) + (maps ? 4 : 1);
}

// Pass 1: each band's finite range over the scene (Global: over the cube, in every band).
void gather_ranges(const Context& ctx, const detail::TileSource& src, Quantize mode, const TileOptions& tiles,
                   EdgeSceneStats& scene, TiledRun& peak) {
    const std::size_t B = std::size_t(src.bands);
    scene.lo.assign(B, std::numeric_limits<double>::infinity());
    scene.hi.assign(B, -std::numeric_limits<double>::infinity());
    const auto per_tile = [](const Context& c, const CubeView& window) {
        std::pair<std::vector<double>, std::vector<double>> r;
        entropy_piece_ranges(c, window, r.first, r.second);
        return r;
    };
    const auto merge = [&](const std::pair<std::vector<double>, std::vector<double>>& r) {  // min and max: any order
        for (std::size_t b = 0; b < B; ++b)
            scene.lo[b] = std::min(scene.lo[b], r.first[b]), scene.hi[b] = std::max(scene.hi[b], r.second[b]);
    };
    detail::merge_peak(peak, detail::run_statistics_pass(ctx, src, tiles, kWhere, work_bytes(src, false),
                                                         host_work_bytes(src, false), per_tile, merge));
    if (mode == Quantize::Global) {
        const double lo = *std::min_element(scene.lo.begin(), scene.lo.end());
        const double hi = *std::max_element(scene.hi.begin(), scene.hi.end());
        std::fill(scene.lo.begin(), scene.lo.end(), lo);
        std::fill(scene.hi.begin(), scene.hi.end(), hi);
    }
}

// Pass 2: the histograms of the quantised bands (and of their band mean), then the thresholds.
void gather_thresholds(const Context& ctx, const detail::TileSource& src, const EntropyEdgeOptions& o,
                       const TileOptions& tiles, EdgeSceneStats& scene, TiledRun& peak) {
    const bool with_mean = o.fusion == EdgeFusion::BandMean || o.fusion == EdgeFusion::ThresholdMean;
    const std::size_t images = std::size_t(src.bands) + (with_mean ? 1 : 0);
    std::vector<std::uint64_t> total(images * 256, 0);
    const auto per_tile = [&](const Context& c, const CubeView& window) {
        return entropy_piece_histograms(c, window, scene, with_mean);
    };
    const auto merge = [&](const std::vector<std::uint32_t>& h) {  // integer sums: any order
        for (std::size_t i = 0; i < total.size(); ++i) total[i] += h[i];
    };
    detail::merge_peak(peak, detail::run_statistics_pass(ctx, src, tiles, kWhere, work_bytes(src, false),
                                                         host_work_bytes(src, false), per_tile, merge));
    entropy_scene_thresholds(scene, total, o.q, with_mean);
}

EntropyEdgeTiled edges_source(const Context& ctx, const detail::TileSource& src, const MutableCubeView& edges,
                              const EntropyEdgeOptions& options, const TileOptions& tiles) {
    const CubeShape shape{src.width, src.height, src.bands, src.dtype, src.layout};
    detail::check_edge_options(shape, options);
    EntropyEdgeOptions o = options;
    o.fusion = resolved_fusion(options.fusion, src.bands);
    if (const std::string why = entropy_edges_tiled_refusal(o, src.bands); !why.empty())
        throw InvalidInput(std::string(kWhere) + ": " + why);
    const int out_bands = entropy_edges_bands(src.bands, o).edges;
    ctx.log("edges tiled: " + std::string(ctx.backend_name()) + ", fusion " + std::string(fusion_name(o.fusion)) + ", " +
            shape.describe());

    EntropyEdgeTiled result;
    EdgeSceneStats scene;
    if (src.dtype != DType::U8) gather_ranges(ctx, src, o.quantize, tiles, scene, result.run);
    gather_thresholds(ctx, src, o, tiles, scene, result.run);
    result.passes = src.dtype != DType::U8 ? 3 : 2;

    // Pass 3: the maps, each window through the pipeline with the scene's statistics; E3 afterwards.
    EntropyEdgeOptions per_tile = o;
    per_tile.min_component = 0;
    per_tile.filter_each_band = false;
    std::optional<EntropyEdgeSummary> summary;  // the same for every tile: the scene's thresholds
    std::mutex mutex;
    detail::LocalTileKernel k;
    k.halo = 1;  // the 3x3 rule
    k.out_dtype = DType::U8;
    k.out_bands = out_bands;
    k.device_work_bytes_per_pixel = work_bytes(src, true);
    k.host_work_bytes_per_pixel = host_work_bytes(src, true);
    k.run = [&](const Context& c, const CubeView& window, const MutableCubeView& out) {
        EntropyEdgeSummary s = entropy_edges_piece(c, window, out, per_tile, scene);
        const std::lock_guard lock(mutex);
        if (!summary) summary = std::move(s);
    };
    const TiledRun maps = detail::run_local_tiles(ctx, src, edges, k, tiles, kWhere);
    detail::merge_peak(result.run, maps);
    result.run.tiles = maps.tiles, result.run.tile_width = maps.tile_width, result.run.tile_height = maps.tile_height;
    result.run.devices = maps.devices;
    result.run.direct_input = maps.direct_input, result.run.direct_output = maps.direct_output;
    // E3 on the output map, in tiles as well (labelled on the context's backend, joined across tile
    // borders): the map is 0/1, where the removal's equal-value rule is the detector's binary rule.
    if (o.min_component > 1)
        detail::merge_peak(result.run, remove_small_components_tiled(ctx, CubeView(edges), edges, o.min_component,
                                                                     o.connectivity, tiles));
    if (summary) result.summary = std::move(*summary);
    return result;
}

}  // namespace

void entropy_piece_ranges(const Context& ctx, const CubeView& piece, std::vector<double>& lo, std::vector<double>& hi) {
    if (piece.empty()) throw InvalidInput("entropy_piece_ranges: the piece is empty");
    detail::on_backend(ctx, piece, [&](const CubeView& in) {
        if (ctx.is_cuda()) detail::band_ranges_cuda(ctx, in, lo, hi);
        else detail::band_ranges_cpu(ctx, in, lo, hi);
        return 0;
    });
}

std::vector<std::uint32_t> entropy_piece_histograms(const Context& ctx, const CubeView& piece, const EdgeSceneStats& scene,
                                                    bool with_mean) {
    check_piece(piece, scene, "entropy_piece_histograms");
    return detail::on_backend(ctx, piece, [&](const CubeView& in) {
        return ctx.is_cuda() ? detail::tile_histograms_cuda(ctx, in, scene, with_mean)
                             : detail::tile_histograms_cpu(ctx, in, scene, with_mean);
    });
}

void entropy_scene_thresholds(EdgeSceneStats& scene, const std::vector<std::uint64_t>& histograms, double q, bool with_mean) {
    const std::size_t images = histograms.size() / 256;
    if (histograms.size() % 256 != 0 || images < (with_mean ? 2u : 1u))
        throw InvalidInput("entropy_scene_thresholds: " + std::to_string(histograms.size()) +
                           " counts; expected 256 per band" + (with_mean ? " and 256 for the band mean" : ""));
    if (!(q > 0)) throw InvalidInput("entropy_scene_thresholds: q = " + std::to_string(q) + "; expected q > 0");
    const auto thresholds = [&](std::size_t image) {
        std::uint32_t h[256];
        std::uint64_t total = 0;
        for (std::size_t g = 0; g < 256; ++g) {
            const std::uint64_t c = histograms[image * 256 + g];
            if (c > std::numeric_limits<std::uint32_t>::max())
                throw InvalidInput("entropy_scene_thresholds: a grey level holds " + std::to_string(c) +
                                   " pixels of one band, beyond the 2^32 - 1 the threshold search counts");
            h[g] = std::uint32_t(c), total += c;
        }
        if (total == 0) throw InvalidInput("entropy_scene_thresholds: the histogram of image " + std::to_string(image) + " is empty");
        return detail::edges::to_public(detail::edges::thresholds_from_histogram(h, q));
    };
    const std::size_t bands = images - (with_mean ? 1 : 0);
    scene.band.clear();
    for (std::size_t b = 0; b < bands; ++b) scene.band.push_back(thresholds(b));
    if (with_mean) scene.mean = thresholds(bands);
}

EntropyEdgeSummary entropy_edges_piece(const Context& ctx, const CubeView& piece, const MutableCubeView& edges,
                                       const EntropyEdgeOptions& options, const EdgeSceneStats& scene) {
    constexpr const char* who = "entropy_edges_piece";
    check_piece(piece, scene, who);
    detail::check_edge_options(shape_of(piece), options);
    EntropyEdgeOptions o = options;
    o.fusion = resolved_fusion(options.fusion, piece.bands());
    if (fusion_uses_pca(o.fusion)) throw InvalidInput(std::string(who) + ": " + entropy_edges_tiled_refusal(o, piece.bands()));
    if (o.min_component > 1)
        throw InvalidInput(std::string(who) + ": min_component = " + std::to_string(o.min_component) +
                           ": removing small components needs the whole map; remove them from the assembled map "
                           "(remove_small_components) or use entropy_edges_tiled");
    if (scene.band.size() != std::size_t(piece.bands()))
        throw InvalidInput(std::string(who) + ": scene.band holds " + std::to_string(scene.band.size()) +
                           " thresholds; the piece has " + std::to_string(piece.bands()) + " bands");
    const std::string out_who = std::string(who) + ": edges is";
    if (!edges.data()) throw InvalidInput(out_who + " an empty view");
    detail::check_output_memory(ctx, edges, out_who);
    detail::check_output_shape(edges, piece.width(), piece.height(), entropy_edges_bands(piece.bands(), o).edges, DType::U8, out_who);
    const detail::EdgeOutputs outputs{edges, {}};
    return detail::on_backend(ctx, piece, [&](const CubeView& in) {
        return ctx.is_cuda() ? detail::entropy_edges_cuda(ctx, in, outputs, o, &scene)
                             : detail::entropy_edges_cpu(ctx, in, outputs, o, &scene);
    });
}

std::string entropy_edges_tiled_refusal(const EntropyEdgeOptions& options, int bands) {
    const EdgeFusion f = resolved_fusion(options.fusion, bands);
    if (fusion_uses_pca(f))
        return "the PCA fusions (" + std::string(fusion_name(f)) +
               ") need the scene's principal components, which the tiled path does not compute; use the fusion mean, "
               "vote-edges, vote-binary or threshold-mean, or run the scene whole";
    if (options.filter_each_band && options.min_component > 1 && fusion_is_vote(f))
        return "filter_each_band removes small components from every band's whole map before the vote, which the "
               "tiled path does not hold; leave it off (the fused map is still filtered) or run the scene whole";
    return "";
}

EntropyEdgeTiled entropy_edges_tiled(const Context& ctx, const CubeView& cube, const MutableCubeView& edges,
                                     const EntropyEdgeOptions& options, const TileOptions& tiles) {
    return edges_source(ctx, detail::tile_source(cube), edges, options, tiles);
}

EntropyEdgeTiled entropy_edges_tiled(const Context& ctx, const CubeFile& file, const MutableCubeView& edges,
                                     const EntropyEdgeOptions& options, const TileOptions& tiles) {
    return edges_source(ctx, detail::tile_source(file), edges, options, tiles);
}

#ifndef CUBEKIT_HAVE_CUDA
namespace detail {
void band_ranges_cuda(const Context&, const CubeView&, std::vector<double>&, std::vector<double>&) {
    throw DeviceError("edges: this cubekit was built without CUDA");
}
std::vector<std::uint32_t> tile_histograms_cuda(const Context&, const CubeView&, const EdgeSceneStats&, bool) {
    throw DeviceError("edges: this cubekit was built without CUDA");
}
}  // namespace detail
#endif

}  // namespace cubekit
