// The watershed in tiles (watershed.hpp, tiles.hpp): the scene-wide labels of spec §B3, exactly,
// from tiles that each see their core and a 1-pixel halo.
//
// 1. Plateau distances (phase 1) cross tile borders. Every tile runs the automaton on its window with
//    the ring cells (the halo and the core's border) seeded by the last distances the tiles around
//    reported for them; the tiles then compare what they computed for their halo with what the tile
//    holding each halo cell reported. A tile whose halo came out larger than its owner's value is
//    run again (the owner knows a shorter way out of the plateau); when no tile is, every core holds
//    its exact distances: all values are upper bounds (seeds only ever lower them to lengths of real
//    paths), each tile is a fixed point of the rule, and the tiles agree on the cells they share —
//    so the scene is at the rule's fixed point, which is unique. Float reliefs, with small
//    plateaus, usually agree after the first pass.
// 2. Each tile's last run labelled its core with classes: where its descents end inside the window,
//    a minimum's part in the core or a halo cell. The classes are joined scene-wide (union-find): a
//    halo cell's class is the class its owner gave that cell, and a halo minimum cell joined to a
//    root in this window is that root's class. Each joined set holds one minimum; its label is the
//    rank of the minimum's first pixel, the smallest scene index of the set's minimum parts.
// 3. The local class numbers, already in the caller's labels, are renumbered in place.
// The exchange and the join (exchange.cpp) are shared with cubekit.dask.watershed.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/tiled_local.hpp"
#include "cubekit/error.hpp"
#include "cubekit/watershed.hpp"
#include "watershed/watershed_internal.hpp"

namespace cubekit {
namespace {

// Scratch per window pixel: the CPU piece's distances, arrows, roots, descents and class numbers;
// the CUDA piece's distances, parents, roots, class flags and ranks (and the scan's temporary).
constexpr std::size_t kHostBytes = 40, kDeviceBytes = 28;

// Tiles of a regular grid (plan_tiles' row-major order) by their corner.
struct Plan {
    int tile_width = 0, tile_height = 0, tiles_x = 0;
    std::size_t index(const Tile& t) const { return std::size_t(t.y0 / tile_height) * std::size_t(tiles_x) + std::size_t(t.x0 / tile_width); }
};

void check_request(const detail::TileSource& s, const WatershedOptions& o, const WatershedInputs& in) {
    const auto refuse = [](const std::string& why) { throw InvalidInput("watershed_tiled: " + why); };
    if (s.bands != 1) refuse("the relief has " + std::to_string(s.bands) + " bands; tiles take one band (no volume)");
    if (o.volume) refuse("volume = true; tiles cut 2-D reliefs only");
    if (o.connectivity != 4 && o.connectivity != 8)
        refuse("connectivity = " + std::to_string(o.connectivity) + "; expected 4 or 8");
    if (o.levels > 0) refuse("levels = " + std::to_string(o.levels) + " is not available in tiles yet (quantise the relief first)");
    if (o.h_min > 0) refuse("h_min needs the whole relief (a reconstruction across the scene); run it whole");
    if (o.min_area > 1) refuse("min_area needs the whole relief (regions merged across the scene); run it whole");
    if (in.markers) refuse("markers need the whole relief (an imposition across the scene); run it whole");
    if (in.mask) {
        const CubeView& m = *in.mask;
        if (m.width() != s.width || m.height() != s.height || m.bands() != 1 || m.dtype() != DType::U8)
            refuse("the mask is " + m.describe() + "; expected u8 " + std::to_string(s.width) + "x" + std::to_string(s.height) + "x1");
        if (m.on_device()) refuse("the mask is on a device; the tiled path takes host inputs");
    }
}

// One tile on the worker's backend: the dense window (relief and mask), its piece, its labels.
WatershedPiece compute_piece(const Context& c, const detail::TileFrame& frame, const std::vector<std::uint32_t>& seeds,
                             const CubeView& window, const CubeView* mask_window, int connectivity,
                             const MutableCubeView& labels) {
    const Memory memory = c.is_cuda() ? Memory::Device : Memory::Host;
    const CubeInLayout relief(c, window, Layout::BSQ, memory);
    std::optional<CubeInLayout> inside;
    if (mask_window) inside.emplace(c, *mask_window, Layout::BSQ, memory);
    const auto* in = inside ? reinterpret_cast<const std::uint8_t*>(inside->view().data()) : nullptr;
    auto* out = reinterpret_cast<std::int32_t*>(labels.data());
    if (c.is_cuda())
        return detail::watershed_piece_cuda(c, frame, seeds, relief.view().data(), window.dtype(), in, connectivity, out);
    return visit_dtype(window.dtype(), [&](auto tag) {
        using T = decltype(tag);
        return detail::watershed_piece_cpu<T>(frame, seeds, reinterpret_cast<const T*>(relief.view().data()), in,
                                              connectivity, out);
    });
}

WatershedTiled run_tiled(const Context& ctx, const detail::TileSource& s, const MutableCubeView& labels,
                         const WatershedOptions& options, const WatershedInputs& inputs, TileOptions tiles) {
    constexpr const char* kWhere = "watershed_tiled";
    check_request(s, options, inputs);
    detail::LocalTileKernel k;
    k.halo = 1;
    k.out_dtype = DType::I32;
    k.device_work_bytes_per_pixel = kDeviceBytes + (inputs.mask ? 1 : 0);
    k.host_work_bytes_per_pixel = kHostBytes + (inputs.mask ? 1 : 0);
    const auto [tw, th] = detail::local_tile_size(ctx, s, k, tiles, kWhere);
    tiles.tile_width = tw, tiles.tile_height = std::max(1, std::min<int>(th, int(INT_MAX / tw / 2)));
    const Plan plan{tw, tiles.tile_height, (s.width + tw - 1) / tw};
    const std::vector<Tile> layout = plan_tiles(s.width, s.height, tw, plan.tile_height, 1);
    ctx.log(std::string(kWhere) + ": " + std::string(ctx.backend_name()) + ", " + std::to_string(s.width) + "x" +
            std::to_string(s.height) + ", " + std::to_string(layout.size()) + " tiles of " + std::to_string(tw) + "x" +
            std::to_string(plan.tile_height) + ", connectivity " + std::to_string(options.connectivity));

    const auto t_start = std::chrono::steady_clock::now();
    WatershedExchange exchange(s.width, s.height, layout);
    std::vector<std::optional<WatershedPiece>> pieces(layout.size());
    std::vector<std::vector<std::uint32_t>> seeds(layout.size());
    std::vector<char> dirty(layout.size(), 1);
    WatershedTiled result;
    k.run_tile = [&](const Context& c, const Tile& t, const CubeView& in, const MutableCubeView& out) {
        const std::size_t i = plan.index(t);  // each worker writes its own tiles' slots
        const detail::TileFrame& f = exchange.frame(i);
        std::optional<CubeView> mask;
        if (inputs.mask) mask = inputs.mask->window(f.x0, f.y0, f.width, f.height);
        pieces[i] = compute_piece(c, f, seeds[i], in, mask ? &*mask : nullptr, options.connectivity, out);
    };
    k.wanted = [&](const Tile& t) { return dirty[plan.index(t)] != 0; };
    // A shortest way out of a plateau crosses tile borders at most once per pixel, and each round carries
    // the exact distances across at least one more crossing: more rounds than pixels is a fault (a tile
    // reporting values it did not compute made the rounds endless once, 2026-11-28), not slow progress.
    const std::int64_t max_rounds = std::int64_t(s.width) * s.height + 1;
    for (std::vector<std::size_t> run = exchange.dirty(); !run.empty(); run = exchange.dirty()) {
        if (result.rounds >= max_rounds)
            throw std::logic_error(std::string(kWhere) + ": the tiles did not agree after " + std::to_string(result.rounds) +
                                   " rounds (at most one per pixel is possible): a fault, please report it");
        if (++result.rounds > 1)
            ctx.log(std::string(kWhere) + ": plateau distances cross tile borders; round " + std::to_string(result.rounds) +
                    " runs " + std::to_string(run.size()) + " tile(s) again");
        std::fill(dirty.begin(), dirty.end(), 0);
        for (std::size_t i : run) dirty[i] = 1, seeds[i] = exchange.seeds(i);
        detail::merge_peak(result.run, detail::run_local_tiles(ctx, s, labels, k, tiles, kWhere));
        for (std::size_t i : run) exchange.report(i, std::move(*pieces[i]));
    }
    result.run.tiles = layout.size();
    result.run.tile_width = tw, result.run.tile_height = plan.tile_height;
    result.run.peak_bytes += exchange.bytes();

    // The tiles' class numbers, in the caller's labels, renumbered in place (row by row: a few tall
    // tiles would leave most threads idle).
    const auto t_join = std::chrono::steady_clock::now();
    const WatershedExchange::Join join = exchange.join();
    result.regions = join.regions;
    const auto t_relabel = std::chrono::steady_clock::now();
    const auto out = labels.typed<std::int32_t>();
#pragma omp parallel for schedule(static) num_threads(ctx.threads())
    for (int y = 0; y < s.height; ++y)
        for (int tx = 0; tx < plan.tiles_x; ++tx) {
            const std::size_t i = std::size_t(y / plan.tile_height) * std::size_t(plan.tiles_x) + std::size_t(tx);
            const Tile& t = layout[i];
            const std::int32_t* table = join.tables[i].data();
            for (int x = t.x0; x < t.x0 + t.width; ++x) {
                std::int32_t& v = out(x, y, 0);
                if (v > 0) v = table[v - 1];
            }
        }
    const auto ms = [](auto a, auto b) { return std::to_string(std::chrono::duration<double, std::milli>(b - a).count()); };
    ctx.log(std::string(kWhere) + ": tiles " + ms(t_start, t_join) + " ms (" + std::to_string(result.rounds) + " round(s)), join " +
            ms(t_join, t_relabel) + " ms (" + std::to_string(join.regions) + " regions), relabel " +
            ms(t_relabel, std::chrono::steady_clock::now()) + " ms");
    return result;
}

}  // namespace

WatershedPiece watershed_piece(const Context& ctx, const Tile& tile, int scene_width, const CubeView& window,
                               const CubeView* mask_window, const std::vector<std::uint32_t>& seeds, int connectivity,
                               const MutableCubeView& labels) {
    const auto refuse = [](const std::string& why) { throw InvalidInput("watershed_piece: " + why); };
    if (connectivity != 4 && connectivity != 8) refuse("connectivity = " + std::to_string(connectivity) + "; expected 4 or 8");
    if (window.width() != tile.read_width || window.height() != tile.read_height || window.bands() != 1)
        refuse("the window is " + window.describe() + "; expected " + std::to_string(tile.read_width) + "x" +
               std::to_string(tile.read_height) + "x1 (the core with a 1-pixel halo)");
    if (mask_window && (mask_window->width() != window.width() || mask_window->height() != window.height() ||
                        mask_window->bands() != 1 || mask_window->dtype() != DType::U8))
        refuse("the mask window is " + mask_window->describe() + "; expected u8 of the window's size");
    if (labels.width() != window.width() || labels.height() != window.height() || labels.dtype() != DType::I32 ||
        !labels.is_dense(Layout::BSQ) || labels.on_device() != ctx.is_cuda())
        refuse("the labels are " + labels.describe() + "; expected dense i32 of the window's size in the context's memory");
    const detail::TileFrame frame = detail::TileFrame::of(scene_width, tile.x0, tile.y0, tile.width, tile.height, tile.read_x0,
                                                          tile.read_y0, tile.read_width, tile.read_height);
    if (seeds.size() != frame.ring.size())
        refuse(std::to_string(seeds.size()) + " seeds; the tile's ring has " + std::to_string(frame.ring.size()) + " cells");
    return compute_piece(ctx, frame, seeds, window, mask_window, connectivity, labels);
}

WatershedTiled watershed_tiled(const Context& ctx, const CubeView& height, const MutableCubeView& labels,
                               const WatershedOptions& options, const WatershedInputs& inputs, const TileOptions& tiles) {
    return run_tiled(ctx, detail::tile_source(height), labels, options, inputs, tiles);
}

WatershedTiled watershed_tiled(const Context& ctx, const CubeFile& height, const MutableCubeView& labels,
                               const WatershedOptions& options, const WatershedInputs& inputs, const TileOptions& tiles) {
    return run_tiled(ctx, detail::tile_source(height), labels, options, inputs, tiles);
}

}  // namespace cubekit
