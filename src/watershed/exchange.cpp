// The exchange of plateau distances between the tiles of a tiled watershed, and the join of their
// classes into scene-wide labels (watershed_internal.hpp; the reasoning is at the top of tiled.cpp).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <numeric>
#include <optional>
#include <queue>
#include <stdexcept>
#include <string>
#include <vector>

#include "cubekit/error.hpp"
#include "watershed/watershed_internal.hpp"

namespace cubekit {
using detail::TileFrame;

namespace {
constexpr std::uint32_t kInfinite = UINT32_MAX;

// Union-find over the tiles' classes; a root keeps the smallest scene index of its set's minimum parts.
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
}  // namespace

// Values on the cells of the cores' borders, scene-wide: whole rows where a core starts or ends, and
// whole columns likewise (a cell on such a row is kept there, the others in their column).
template <class V>
class BorderLines {
public:
    BorderLines(int width, int height, const std::vector<TileFrame>& frames, V fill)
        : width_(width), row_slot_(std::size_t(height), -1), col_slot_(std::size_t(width), -1) {
        int rows = 0, cols = 0;
        const auto mark = [](std::vector<int>& slot, int at, int& count) {
            if (slot[std::size_t(at)] < 0) slot[std::size_t(at)] = count++;
        };
        for (const TileFrame& f : frames) {
            mark(row_slot_, f.y0 + f.core_y0, rows), mark(row_slot_, f.y0 + f.core_y0 + f.core_height - 1, rows);
            mark(col_slot_, f.x0 + f.core_x0, cols), mark(col_slot_, f.x0 + f.core_x0 + f.core_width - 1, cols);
        }
        rows_.assign(std::size_t(rows) * std::size_t(width), fill);
        cols_.assign(std::size_t(cols) * std::size_t(height), fill);
    }
    V& at(std::int64_t cell) {
        const std::int64_t x = cell % width_, y = cell / width_;
        const int r = row_slot_[std::size_t(y)];
        if (r >= 0) return rows_[std::size_t(r) * std::size_t(width_) + std::size_t(x)];
        return cols_[std::size_t(col_slot_[std::size_t(x)]) * row_slot_.size() + std::size_t(y)];
    }
    std::size_t bytes() const { return (rows_.size() + cols_.size()) * sizeof(V); }

private:
    int width_;
    std::vector<int> row_slot_, col_slot_;
    std::vector<V> rows_, cols_;
};

struct WatershedExchange::Impl {
    int width_, height_;
    std::vector<Tile> tiles_;
    std::vector<TileFrame> frames_;
    std::vector<std::optional<WatershedPiece>> pieces_;
    std::optional<BorderLines<std::uint32_t>> distances_;
};

WatershedExchange::WatershedExchange(int width, int height, const std::vector<Tile>& tiles)
    : impl_(std::make_shared<Impl>()) {
    Impl& m = *impl_;
    m.width_ = width, m.height_ = height, m.tiles_ = tiles;
    for (const Tile& t : tiles) {
        if (t.width < 1 || t.height < 1 || t.x0 < 0 || t.y0 < 0 || t.x0 + t.width > width || t.y0 + t.height > height ||
            t.read_x0 != std::max(0, t.x0 - 1) || t.read_y0 != std::max(0, t.y0 - 1) ||
            t.read_x0 + t.read_width != std::min(width, t.x0 + t.width + 1) ||
            t.read_y0 + t.read_height != std::min(height, t.y0 + t.height + 1))
            throw InvalidInput("watershed: a tile (core " + std::to_string(t.x0) + "," + std::to_string(t.y0) + " " +
                               std::to_string(t.width) + "x" + std::to_string(t.height) +
                               ") is not inside the scene or its window is not the core with a 1-pixel halo");
        m.frames_.push_back(TileFrame::of(width, t.x0, t.y0, t.width, t.height, t.read_x0, t.read_y0, t.read_width,
                                          t.read_height));
    }
    m.pieces_.resize(tiles.size());
    m.distances_.emplace(width, height, m.frames_, kInfinite);
}

std::size_t WatershedExchange::size() const { return impl_->tiles_.size(); }
const Tile& WatershedExchange::tile(std::size_t i) const { return impl_->tiles_.at(i); }
const TileFrame& WatershedExchange::frame(std::size_t i) const { return impl_->frames_.at(i); }

std::vector<std::uint32_t> WatershedExchange::seeds(std::size_t tile) const {
    Impl& m = *impl_;
    const TileFrame& f = m.frames_.at(tile);
    std::vector<std::uint32_t> s;
    s.reserve(f.ring.size());
    for (std::int32_t cell : f.ring) s.push_back(m.distances_->at(f.scene_index(cell)));
    return s;
}

void WatershedExchange::report(std::size_t tile, WatershedPiece piece) {
    Impl& m = *impl_;
    const TileFrame& f = m.frames_.at(tile);
    bool fits = piece.ring_d.size() == f.ring.size() && piece.ring_labels.size() == f.ring.size() &&
                piece.class_joined.size() == piece.class_cells.size();
    for (std::size_t c = 0; fits && c < piece.class_cells.size(); ++c)
        fits = piece.class_joined[c] >= 0 && std::size_t(piece.class_joined[c]) < piece.class_cells.size() &&
               piece.class_cells[c] >= 0 && piece.class_cells[c] < std::int64_t(m.width_) * m.height_;
    for (std::size_t r = 0; fits && r < f.ring.size(); ++r)
        fits = piece.ring_labels[r] >= 0 && std::size_t(piece.ring_labels[r]) <= piece.class_cells.size();
    if (!fits) throw InvalidInput("watershed: tile " + std::to_string(tile) + "'s report does not fit its ring and classes");
    for (std::size_t r = 0; r < f.ring.size(); ++r)
        if (f.in_core(f.ring[r])) m.distances_->at(f.scene_index(f.ring[r])) = piece.ring_d[r];
    m.pieces_[tile] = std::move(piece);
}

std::vector<std::size_t> WatershedExchange::dirty() const {
    Impl& m = *impl_;
    const auto& frames_ = m.frames_;
    const auto& pieces_ = m.pieces_;
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < frames_.size(); ++i) {
        const TileFrame& f = frames_[i];
        bool again = !pieces_[i].has_value();
        for (std::size_t r = 0; r < f.ring.size() && !again; ++r)
            again = !f.in_core(f.ring[r]) && pieces_[i]->ring_d[r] > m.distances_->at(f.scene_index(f.ring[r]));
        if (again) out.push_back(i);
    }
    return out;
}

WatershedExchange::Join WatershedExchange::join() const {
    if (!dirty().empty()) throw InvalidInput("watershed: join() before the tiles' plateau distances agree (dirty() is not empty)");
    const Impl& m = *impl_;
    const auto& frames_ = m.frames_;
    const auto& pieces_ = m.pieces_;
    const int width_ = m.width_, height_ = m.height_;
    std::vector<std::int64_t> offset(frames_.size() + 1, 0);
    for (std::size_t i = 0; i < frames_.size(); ++i) offset[i + 1] = offset[i] + std::int64_t(pieces_[i]->class_cells.size());
    // The class each core-border cell got from its tile, as a node of the sets (−1: outside the mask).
    BorderLines<std::int64_t> owners(width_, height_, frames_, -1);
    for (std::size_t i = 0; i < frames_.size(); ++i) {
        const TileFrame& f = frames_[i];
        for (std::size_t r = 0; r < f.ring.size(); ++r)
            if (f.in_core(f.ring[r]) && pieces_[i]->ring_labels[r] > 0)
                owners.at(f.scene_index(f.ring[r])) = offset[i] + pieces_[i]->ring_labels[r] - 1;
    }
    ClassSets sets(std::size_t(offset.back()));
    for (std::size_t i = 0; i < frames_.size(); ++i) {
        const TileFrame& f = frames_[i];
        const WatershedPiece& p = *pieces_[i];
        for (std::size_t c = 0; c < p.class_cells.size(); ++c) {
            const std::int64_t cell = p.class_cells[c], node = offset[i] + std::int64_t(c);
            if (f.in_core(f.window_cell(cell))) {  // a minimum's part: its root is the part's first pixel
                std::int64_t& key = sets.key[std::size_t(sets.find(node))];
                key = std::min(key, cell);
                continue;
            }
            sets.unite(node, offset[i] + p.class_joined[c]);  // a halo minimum cell joined in this window
            const std::int64_t theirs = owners.at(cell);      // the class its own tile gave it
            if (theirs < 0) throw std::logic_error("watershed: a halo cell's owner gave it no class");
            sets.unite(node, theirs);
        }
    }
    // Rank the sets by their first pixel. Each set's first pixel is a minimum part's cell in some tile, and
    // each tile lists its classes in raster order, so the tiles' lists of first pixels are sorted: a k-way
    // merge ranks them (a sort of every key took most of the join: 291 k regions, bench/results).
    std::vector<std::vector<std::int64_t>> firsts(frames_.size());  // per tile: the sets whose first pixel it holds
    std::int64_t sets_count = 0;
    for (std::size_t i = 0; i < frames_.size(); ++i) {
        const TileFrame& f = frames_[i];
        for (std::int64_t n = offset[i]; n < offset[i + 1]; ++n) {
            const std::int64_t root = sets.find(n), cell = pieces_[i]->class_cells[std::size_t(n - offset[i])];
            if (f.in_core(f.window_cell(cell)) && sets.key[std::size_t(root)] == cell) firsts[i].push_back(root);  // halo cells: their owner's
            sets_count += root == n;
        }
    }
    using Head = std::pair<std::int64_t, std::size_t>;  // (first pixel, tile)
    std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads;
    std::vector<std::size_t> next(frames_.size(), 0);
    for (std::size_t i = 0; i < frames_.size(); ++i)
        if (!firsts[i].empty()) heads.emplace(sets.key[std::size_t(firsts[i][0])], i);
    std::vector<std::int32_t> label(std::size_t(offset.back()), 0);
    std::int64_t ranked = 0;
    while (!heads.empty()) {
        const std::size_t i = heads.top().second;
        heads.pop();
        if (ranked == INT_MAX) throw std::length_error("watershed: more than 2^31 - 1 regions");
        label[std::size_t(firsts[i][next[i]])] = std::int32_t(++ranked);
        if (++next[i] < firsts[i].size()) heads.emplace(sets.key[std::size_t(firsts[i][next[i]])], i);
    }
    if (ranked != sets_count) throw std::logic_error("watershed: a region without a minimum");
    Join out;
    out.regions = ranked;
    for (std::size_t i = 0; i < frames_.size(); ++i) {
        std::vector<std::int32_t>& t = out.tables.emplace_back();
        for (std::int64_t n = offset[i]; n < offset[i + 1]; ++n) t.push_back(label[std::size_t(sets.find(n))]);
    }
    return out;
}

std::size_t WatershedExchange::bytes() const { return impl_->distances_->bytes(); }

}  // namespace cubekit
