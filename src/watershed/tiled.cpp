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
#include <algorithm>
#include <climits>
#include <cstdint>
#include <mutex>
#include <numeric>
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

constexpr std::uint32_t kInfinite = UINT32_MAX;
// Scratch per window pixel: the CPU piece's distances, arrows, roots, descents and class numbers;
// the CUDA piece's distances, parents, roots, class flags and ranks (and the scan's temporary).
constexpr std::size_t kHostBytes = 40, kDeviceBytes = 28;

// The plateau distances of the cells on the cores' borders, scene-wide: the rows and columns where
// cores meet (a cell on a row slot is stored there, others in their column's slot).
class Frames {
public:
    Frames(int width, int height, int tile_width, int tile_height)
        : row_slot_(std::size_t(height), -1), col_slot_(std::size_t(width), -1) {
        rows_.assign(std::size_t(mark(row_slot_, tile_height)), std::vector<std::uint32_t>(std::size_t(width), kInfinite));
        cols_.assign(std::size_t(mark(col_slot_, tile_width)), std::vector<std::uint32_t>(std::size_t(height), kInfinite));
    }
    std::uint32_t& at(std::int64_t cell, int width) {
        const int x = int(cell % width), y = int(cell / width);
        const int r = row_slot_[std::size_t(y)];
        return r >= 0 ? rows_[std::size_t(r)][std::size_t(x)] : cols_[std::size_t(col_slot_[std::size_t(x)])][std::size_t(y)];
    }
    std::size_t bytes() const {
        return (rows_.size() * col_slot_.size() + cols_.size() * row_slot_.size()) * sizeof(std::uint32_t);
    }

private:
    // Slots for the first and last line of each tile along one axis.
    static int mark(std::vector<int>& slot, int step) {
        int k = 0;
        const int size = int(slot.size());
        for (int a = 0; a < size; a += step) {
            slot[std::size_t(a)] = k++;
            const int b = std::min(size, a + step) - 1;
            if (slot[std::size_t(b)] < 0) slot[std::size_t(b)] = k++;
        }
        return k;
    }
    std::vector<int> row_slot_, col_slot_;
    std::vector<std::vector<std::uint32_t>> rows_, cols_;
};

// Union-find over the tiles' classes; a root keeps the smallest minimum-part index of its set.
struct ClassSets {
    std::vector<std::int64_t> parent, key;
    explicit ClassSets(std::size_t n) : parent(n), key(n, INT64_MAX) { std::iota(parent.begin(), parent.end(), 0); }
    std::int64_t find(std::int64_t a) {
        while (parent[std::size_t(a)] != a) {
            parent[std::size_t(a)] = parent[std::size_t(parent[std::size_t(a)])];
            a = parent[std::size_t(a)];
        }
        return a;
    }
    void unite(std::int64_t a, std::int64_t b) {
        a = find(a), b = find(b);
        if (a == b) return;
        parent[std::size_t(b)] = a;
        key[std::size_t(a)] = std::min(key[std::size_t(a)], key[std::size_t(b)]);
    }
};

struct Plan {
    int width = 0, height = 0, tile_width = 0, tile_height = 0, tiles_x = 0;
    std::size_t tile_of(std::int64_t cell) const {
        return std::size_t((cell / width) / tile_height) * std::size_t(tiles_x) + std::size_t((cell % width) / tile_width);
    }
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
detail::WatershedPiece compute_piece(const Context& c, const detail::TileFrame& frame, const std::vector<std::uint32_t>& seeds,
                                     const CubeView& window, const CubeView* mask, int connectivity,
                                     const MutableCubeView& labels) {
    const Memory memory = c.is_cuda() ? Memory::Device : Memory::Host;
    const CubeInLayout relief(c, window, Layout::BSQ, memory);
    std::optional<CubeInLayout> inside;
    if (mask) inside.emplace(c, mask->window(frame.x0, frame.y0, frame.width, frame.height), Layout::BSQ, memory);
    const auto* in = inside ? reinterpret_cast<const std::uint8_t*>(inside->view().data()) : nullptr;
    auto* out = reinterpret_cast<std::int32_t*>(labels.data());
    if (c.is_cuda())
        return detail::watershed_piece_cuda(c, frame, seeds, relief.view().data(), window.dtype(), in, connectivity, out);
    return visit_dtype(window.dtype(), [&](auto tag) {
        using T = decltype(tag);
        return detail::watershed_piece_cpu<T>(frame, seeds, reinterpret_cast<const T*>(relief.view().data()), in, connectivity, out);
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
    const Plan plan{s.width, s.height, tw, tiles.tile_height, (s.width + tw - 1) / tw};
    const std::vector<Tile> layout = plan_tiles(s.width, s.height, tw, plan.tile_height, 1);
    ctx.log(std::string(kWhere) + ": " + std::string(ctx.backend_name()) + ", " + std::to_string(s.width) + "x" +
            std::to_string(s.height) + ", " + std::to_string(layout.size()) + " tiles of " + std::to_string(tw) + "x" +
            std::to_string(plan.tile_height) + ", connectivity " + std::to_string(options.connectivity));

    std::vector<detail::TileFrame> frames_of;
    for (const Tile& t : layout)
        frames_of.push_back(detail::TileFrame::of(s.width, t.x0, t.y0, t.width, t.height, t.read_x0, t.read_y0,
                                                  t.read_width, t.read_height));
    Frames frames(s.width, s.height, tw, plan.tile_height);
    std::vector<detail::WatershedPiece> pieces(layout.size());
    std::vector<std::vector<std::uint32_t>> seeds(layout.size());
    std::vector<char> dirty(layout.size(), 1);
    WatershedTiled result;
    std::mutex mutex;
    k.run_tile = [&](const Context& c, const Tile& t, const CubeView& in, const MutableCubeView& out) {
        const std::size_t i = plan.index(t);
        detail::WatershedPiece piece = compute_piece(c, frames_of[i], seeds[i], in, inputs.mask, options.connectivity, out);
        const std::lock_guard lock(mutex);
        pieces[i] = std::move(piece);
    };
    k.wanted = [&](const Tile& t) { return dirty[plan.index(t)] != 0; };
    while (true) {
        ++result.rounds;
        for (std::size_t i = 0; i < layout.size(); ++i) {
            if (!dirty[i]) continue;
            seeds[i].clear();
            for (std::int32_t cell : frames_of[i].ring) seeds[i].push_back(frames.at(frames_of[i].scene_index(cell), s.width));
        }
        detail::merge_peak(result.run, detail::run_local_tiles(ctx, s, labels, k, tiles, kWhere));
        for (std::size_t i = 0; i < layout.size(); ++i) {  // the cores' borders of the tiles just run
            if (!dirty[i]) continue;
            const detail::TileFrame& f = frames_of[i];
            for (std::size_t r = 0; r < f.ring.size(); ++r)
                if (f.in_core(f.ring[r])) frames.at(f.scene_index(f.ring[r]), s.width) = pieces[i].ring_d[r];
        }
        bool any = false;
        for (std::size_t i = 0; i < layout.size(); ++i) {  // halos that came out above their owner's value
            const detail::TileFrame& f = frames_of[i];
            dirty[i] = 0;
            for (std::size_t r = 0; r < f.ring.size() && !dirty[i]; ++r)
                if (!f.in_core(f.ring[r]) && pieces[i].ring_d[r] > frames.at(f.scene_index(f.ring[r]), s.width))
                    dirty[i] = 1;
            any = any || dirty[i];
        }
        if (!any) break;
        ctx.log(std::string(kWhere) + ": plateau distances cross tile borders; round " + std::to_string(result.rounds + 1));
    }
    result.run.tiles = layout.size();
    result.run.tile_width = tw, result.run.tile_height = plan.tile_height;
    result.run.peak_bytes += frames.bytes();

    // Join the classes scene-wide.
    std::vector<std::int64_t> offset(layout.size() + 1, 0);
    for (std::size_t i = 0; i < layout.size(); ++i) offset[i + 1] = offset[i] + std::int64_t(pieces[i].class_cells.size());
    ClassSets sets(std::size_t(offset.back()));
    const auto out = labels.typed<std::int32_t>();
    for (std::size_t i = 0; i < layout.size(); ++i) {
        const detail::WatershedPiece& p = pieces[i];
        for (std::size_t c = 0; c < p.class_cells.size(); ++c) {
            const std::int64_t cell = p.class_cells[c], node = offset[i] + std::int64_t(c);
            const int x = int(cell % s.width), y = int(cell / s.width);
            const Tile& t = layout[i];
            if (x >= t.x0 && y >= t.y0 && x < t.x0 + t.width && y < t.y0 + t.height) {
                sets.key[std::size_t(sets.find(node))] = std::min(sets.key[std::size_t(sets.find(node))], cell);
                continue;
            }
            sets.unite(node, offset[i] + p.class_joined[c]);
            const std::size_t owner = plan.tile_of(cell);
            const std::int32_t theirs = out(x, y, 0);
            if (theirs < 1 || std::size_t(theirs) > pieces[owner].class_cells.size())
                throw std::logic_error(std::string(kWhere) + ": a halo cell's owner gave it no class");
            sets.unite(node, offset[owner] + theirs - 1);
        }
    }
    // Rank the sets by their minimum's first pixel.
    std::vector<std::pair<std::int64_t, std::int64_t>> firsts;  // (first pixel, set)
    for (std::int64_t n = 0; n < offset.back(); ++n)
        if (sets.find(n) == n) {
            if (sets.key[std::size_t(n)] == INT64_MAX) throw std::logic_error(std::string(kWhere) + ": a region without a minimum");
            firsts.emplace_back(sets.key[std::size_t(n)], n);
        }
    std::sort(firsts.begin(), firsts.end());
    result.regions = std::int64_t(firsts.size());
    if (result.regions > INT_MAX) throw InvalidInput(std::string(kWhere) + ": more than 2^31 - 1 regions");
    std::vector<std::int32_t> label_of(std::size_t(offset.back()), 0);  // every class's final label
    for (std::size_t r = 0; r < firsts.size(); ++r) label_of[std::size_t(firsts[r].second)] = std::int32_t(r + 1);
    for (std::int64_t n = 0; n < offset.back(); ++n) label_of[std::size_t(n)] = label_of[std::size_t(sets.find(n))];
    const std::int64_t n_tiles = std::int64_t(layout.size());
#pragma omp parallel for schedule(dynamic) num_threads(ctx.threads())
    for (std::int64_t i = 0; i < n_tiles; ++i) {
        const Tile& t = layout[std::size_t(i)];
        const std::int32_t* table = label_of.data() + offset[std::size_t(i)];
        for (int y = t.y0; y < t.y0 + t.height; ++y)
            for (int x = t.x0; x < t.x0 + t.width; ++x) {
                std::int32_t& v = out(x, y, 0);
                if (v > 0) v = table[std::size_t(v - 1)];
            }
    }
    return result;
}

}  // namespace

WatershedTiled watershed_tiled(const Context& ctx, const CubeView& height, const MutableCubeView& labels,
                               const WatershedOptions& options, const WatershedInputs& inputs, const TileOptions& tiles) {
    return run_tiled(ctx, detail::tile_source(height), labels, options, inputs, tiles);
}

WatershedTiled watershed_tiled(const Context& ctx, const CubeFile& height, const MutableCubeView& labels,
                               const WatershedOptions& options, const WatershedInputs& inputs, const TileOptions& tiles) {
    return run_tiled(ctx, detail::tile_source(height), labels, options, inputs, tiles);
}

}  // namespace cubekit
