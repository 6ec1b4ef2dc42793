// Labelling a scene piece by piece (labels.hpp, "Tiles and pieces"): each piece's summary (statistics
// and edge pixels), and the merge of a grid of pieces into the scene's labels, exactly those of
// label_components: pieces' components joined across borders by a union-find over the edge pixels,
// then numbered by the raster order of their first pixels.
#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "cubekit/error.hpp"
#include "cubekit/labels.hpp"

namespace cubekit {

namespace {

constexpr const char* kMerge = "merge_label_pieces";

// The edge pixels of every band of `v`, as int64: top row, bottom row, left column, right column.
std::vector<std::vector<std::int64_t>> edge_samples(const Context& ctx, const CubeView& v) {
    const int w = v.width(), h = v.height(), bands = v.bands();
    const std::array<std::array<int, 4>, 4> lines{{{0, 0, w, 1}, {0, h - 1, w, 1}, {0, 0, 1, h}, {w - 1, 0, 1, h}}};
    auto out = std::vector<std::vector<std::int64_t>>(std::size_t(bands));
    for (auto& band : out) band.reserve(2 * std::size_t(w) + 2 * std::size_t(h));
    for (const auto& l : lines) {
        const int lw = l[2], lh = l[3];  // not a structured binding: clang 16 cannot capture those with OpenMP on
        Cube line(lw, lh, bands, v.dtype(), Layout::BSQ);
        copy_cube(ctx, v.window(l[0], l[1], lw, lh), line.mutable_view());
        visit_dtype(v.dtype(), [&](auto tag) {
            using T = decltype(tag);
            const auto t = line.view().typed<T>();
            for (int b = 0; b < bands; ++b)
                for (int j = 0; j < lw * lh; ++j) out[std::size_t(b)].push_back(std::int64_t(t(j % lw, j / lw, b)));
        });
    }
    return out;
}

// The pieces as a grid: cell (row, column) → piece index, checked to cover the scene exactly.
struct Grid {
    std::vector<int> xs, ys;  // the columns' and rows' first pixels
    std::vector<int> cell;    // row-major
    int at(int row, int col) const { return cell[std::size_t(row) * xs.size() + std::size_t(col)]; }
};

[[noreturn]] void not_a_grid(const LabelPiece& p, const std::string& why) {
    throw InvalidInput(std::string(kMerge) + ": the piece at (" + std::to_string(p.x0) + ", " + std::to_string(p.y0) +
                       ") of " + std::to_string(p.width) + "x" + std::to_string(p.height) + " " + why +
                       "; the pieces must tile the scene as a grid (rows of equal height, columns of equal width)");
}

Grid make_grid(const std::vector<LabelPiece>& pieces, int width, int height) {
    Grid g;
    for (const LabelPiece& p : pieces) g.xs.push_back(p.x0), g.ys.push_back(p.y0);
    for (auto* v : {&g.xs, &g.ys}) {
        std::sort(v->begin(), v->end());
        v->erase(std::unique(v->begin(), v->end()), v->end());
    }
    g.cell.assign(g.xs.size() * g.ys.size(), -1);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        const LabelPiece& p = pieces[i];
        const auto col = std::size_t(std::lower_bound(g.xs.begin(), g.xs.end(), p.x0) - g.xs.begin());
        const auto row = std::size_t(std::lower_bound(g.ys.begin(), g.ys.end(), p.y0) - g.ys.begin());
        const int x1 = col + 1 < g.xs.size() ? g.xs[col + 1] : width, y1 = row + 1 < g.ys.size() ? g.ys[row + 1] : height;
        if (p.x0 < 0 || p.y0 < 0 || p.width != x1 - p.x0 || p.height != y1 - p.y0 || p.width < 1 || p.height < 1)
            not_a_grid(p, "does not fit its grid cell of the " + std::to_string(width) + "x" + std::to_string(height) + " scene");
        int& c = g.cell[row * g.xs.size() + col];
        if (c >= 0) not_a_grid(p, "is given twice");
        c = int(i);
    }
    if (g.xs.empty() || g.xs[0] != 0 || g.ys[0] != 0 || std::count(g.cell.begin(), g.cell.end(), -1) > 0)
        throw InvalidInput(std::string(kMerge) + ": the pieces leave part of the " + std::to_string(width) + "x" +
                           std::to_string(height) + " scene uncovered");
    return g;
}

void check_piece(const LabelPiece& p, std::size_t bands) {
    if (p.per_band.size() != bands || p.edge_labels.size() != bands || p.edge_values.size() != bands)
        not_a_grid(p, "has " + std::to_string(p.per_band.size()) + " band(s), the first piece " + std::to_string(bands));
    const std::size_t edge = 2 * std::size_t(p.width) + 2 * std::size_t(p.height);
    for (std::size_t b = 0; b < bands; ++b) {
        if (p.edge_labels[b].size() != edge || p.edge_values[b].size() != edge)
            not_a_grid(p, "has edges of " + std::to_string(p.edge_labels[b].size()) + " pixels, not " + std::to_string(edge));
        for (std::int32_t l : p.edge_labels[b])
            if (l < 0 || std::size_t(l) > p.per_band[b].size())
                not_a_grid(p, "has an edge label " + std::to_string(l) + " beyond its " +
                                  std::to_string(p.per_band[b].size()) + " components");
    }
}

// Union-find over every (piece, band, local label); the smaller index becomes the root.
class Forest {
public:
    explicit Forest(std::size_t n) : parent_(n) {
        for (std::size_t i = 0; i < n; ++i) parent_[i] = std::int64_t(i);
    }
    std::int64_t find(std::int64_t i) {
        while (parent_[std::size_t(i)] != i) i = parent_[std::size_t(i)] = parent_[std::size_t(parent_[std::size_t(i)])];
        return i;
    }
    void unite(std::int64_t a, std::int64_t b) {
        a = find(a), b = find(b);
        if (a != b) parent_[std::size_t(std::max(a, b))] = std::min(a, b);
    }

private:
    std::vector<std::int64_t> parent_;
};

// The edges of one piece and band: labels and samples, indexed as LabelPiece documents.
struct Edge {
    const std::vector<std::int32_t>& label;
    const std::vector<std::int64_t>& value;
    std::size_t w, h;
    std::size_t top(std::size_t x) const { return x; }
    std::size_t bottom(std::size_t x) const { return w + x; }
    std::size_t left(std::size_t y) const { return 2 * w + y; }
    std::size_t right(std::size_t y) const { return 2 * w + h + y; }
};

struct Joiner {
    Forest& forest;
    const std::vector<std::vector<std::int64_t>>& first;  // [piece][band]: node of local label 0
    void join(int pa, int b, const Edge& a, std::size_t ia, int pb, const Edge& e, std::size_t ib) {
        const std::int32_t la = a.label[ia], lb = e.label[ib];
        if (la == 0 || lb == 0 || a.value[ia] != e.value[ib]) return;
        forest.unite(first[std::size_t(pa)][std::size_t(b)] + la, first[std::size_t(pb)][std::size_t(b)] + lb);
    }
};

// Joins piece `a` with its right, lower and (8-connectivity) diagonal neighbours in band b.
void join_neighbours(const Grid& g, const std::vector<LabelPiece>& pieces, Joiner& j, int row, int col, int b,
                     bool eight) {
    const auto edge = [&](int i) {
        const LabelPiece& p = pieces[std::size_t(i)];
        return Edge{p.edge_labels[std::size_t(b)], p.edge_values[std::size_t(b)], std::size_t(p.width), std::size_t(p.height)};
    };
    const int rows = int(g.ys.size()), cols = int(g.xs.size()), a = g.at(row, col);
    const Edge ea = edge(a);
    if (col + 1 < cols) {  // right: A's last column against R's first
        const int r = g.at(row, col + 1);
        const Edge er = edge(r);
        for (std::size_t y = 0; y < ea.h; ++y)
            for (int d = eight ? -1 : 0; d <= (eight ? 1 : 0); ++d)
                if (std::int64_t(y) + d >= 0 && y + std::size_t(d + 1) <= ea.h) j.join(a, b, ea, ea.right(y), r, er, er.left(y + d));
    }
    if (row + 1 < rows) {  // below: A's last row against D's first
        const int d_ = g.at(row + 1, col);
        const Edge ed = edge(d_);
        for (std::size_t x = 0; x < ea.w; ++x)
            for (int d = eight ? -1 : 0; d <= (eight ? 1 : 0); ++d)
                if (std::int64_t(x) + d >= 0 && x + std::size_t(d + 1) <= ea.w) j.join(a, b, ea, ea.bottom(x), d_, ed, ed.top(x + d));
    }
    if (!eight || row + 1 >= rows) return;
    if (col + 1 < cols) {  // A's bottom-right pixel touches the lower-right piece's top-left one
        const int p = g.at(row + 1, col + 1);
        const Edge e = edge(p);
        j.join(a, b, ea, ea.bottom(ea.w - 1), p, e, e.top(0));
    }
    if (col > 0) {  // A's bottom-left pixel touches the lower-left piece's top-right one
        const int p = g.at(row + 1, col - 1);
        const Edge e = edge(p);
        j.join(a, b, ea, ea.bottom(0), p, e, e.top(e.w - 1));
    }
}

}  // namespace

LabelPiece label_piece(const Context& ctx, const CubeView& piece, int x0, int y0, const MutableCubeView& labels,
                       int connectivity) {
    LabelPiece p{.x0 = x0, .y0 = y0, .width = piece.width(), .height = piece.height()};
    p.per_band = label_components_into(ctx, piece, labels, connectivity);  // validates; labels queued before the copies
    p.edge_values = edge_samples(ctx, piece);
    for (auto& band : edge_samples(ctx, labels)) p.edge_labels.emplace_back(band.begin(), band.end());
    return p;
}

LabelMerge merge_label_pieces(const std::vector<LabelPiece>& pieces, int width, int height, int connectivity) {
    if (connectivity != 4 && connectivity != 8)
        throw InvalidInput(std::string(kMerge) + ": connectivity = " + std::to_string(connectivity) + "; expected 4 or 8");
    if (pieces.empty()) throw InvalidInput(std::string(kMerge) + ": no pieces");
    const std::size_t bands = pieces[0].per_band.size();
    for (const LabelPiece& p : pieces) check_piece(p, bands);
    const Grid g = make_grid(pieces, width, height);

    // Nodes: piece i, band b, local label l → first[i][b] + l (label 0 has a node, never joined).
    std::vector<std::vector<std::int64_t>> first(pieces.size(), std::vector<std::int64_t>(bands));
    std::int64_t nodes = 0;
    for (std::size_t i = 0; i < pieces.size(); ++i)
        for (std::size_t b = 0; b < bands; ++b) first[i][b] = nodes, nodes += std::int64_t(pieces[i].per_band[b].size()) + 1;
    Forest forest{std::size_t(nodes)};
    Joiner joiner{forest, first};
    for (int row = 0; row < int(g.ys.size()); ++row)
        for (int col = 0; col < int(g.xs.size()); ++col)
            for (int b = 0; b < int(bands); ++b) join_neighbours(g, pieces, joiner, row, col, b, connectivity == 8);

    // A component's first pixel in raster order: the least (top row, piece column, local label) over
    // its parts; a piece numbers its parts in its own raster order, so this is the scene's order.
    using Key = std::tuple<int, int, std::int32_t>;
    std::vector<Key> key(std::size_t(nodes), Key{INT_MAX, INT_MAX, INT32_MAX});
    for (std::size_t i = 0; i < pieces.size(); ++i)
        for (std::size_t b = 0; b < bands; ++b)
            for (std::size_t l = 1; l <= pieces[i].per_band[b].size(); ++l) {
                const std::int64_t root = forest.find(first[i][b] + std::int64_t(l));
                const Key k{pieces[i].y0 + pieces[i].per_band[b][l - 1].y0, pieces[i].x0, std::int32_t(l)};
                key[std::size_t(root)] = std::min(key[std::size_t(root)], k);
            }
    LabelMerge m;
    m.per_band.resize(bands);
    std::vector<std::int32_t> label(std::size_t(nodes), 0);  // of each root
    for (std::size_t b = 0; b < bands; ++b) {
        std::vector<std::pair<Key, std::int64_t>> roots;
        for (std::size_t i = 0; i < pieces.size(); ++i)
            for (std::size_t l = 1; l <= pieces[i].per_band[b].size(); ++l) {
                const std::int64_t n = first[i][b] + std::int64_t(l);
                if (forest.find(n) == n) roots.emplace_back(key[std::size_t(n)], n);
            }
        if (roots.size() > std::size_t(INT32_MAX))
            throw InvalidInput(std::string(kMerge) + ": band " + std::to_string(b) + " has " + std::to_string(roots.size()) +
                               " components, more than int32 labels can number");
        std::sort(roots.begin(), roots.end());
        for (std::size_t r = 0; r < roots.size(); ++r) label[std::size_t(roots[r].second)] = std::int32_t(r + 1);
        m.per_band[b].assign(roots.size(), ComponentInfo{.size = 0, .x0 = INT_MAX, .y0 = INT_MAX, .x1 = -1, .y1 = -1});
    }
    m.relabel.resize(pieces.size());
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        const LabelPiece& p = pieces[i];
        m.relabel[i].resize(bands);
        for (std::size_t b = 0; b < bands; ++b) {
            auto& table = m.relabel[i][b];
            table.assign(p.per_band[b].size() + 1, 0);
            for (std::size_t l = 1; l < table.size(); ++l) {
                const std::int32_t global = label[std::size_t(forest.find(first[i][b] + std::int64_t(l)))];
                table[l] = global;
                const ComponentInfo& c = p.per_band[b][l - 1];
                ComponentInfo& s = m.per_band[b][std::size_t(global) - 1];
                s.size += c.size;
                s.x0 = std::min(s.x0, p.x0 + c.x0), s.y0 = std::min(s.y0, p.y0 + c.y0);
                s.x1 = std::max(s.x1, p.x0 + c.x1), s.y1 = std::max(s.y1, p.y0 + c.y1);
            }
        }
    }
    return m;
}

}  // namespace cubekit
