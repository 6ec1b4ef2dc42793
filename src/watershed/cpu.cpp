// The watershed automaton of spec gradient-watershed.md §B3 on the CPU: the reference the CUDA
// backend is checked against. Each iterated rule of the spec is computed by the sequential
// algorithm that reaches the same (unique) fixed point:
//   Phase 1 (plateau distance): breadth-first search from the lower-border pixels, inside each
//           flat zone — the geodesic distance the min-plus rule converges to;
//   Phase 2 (arrows): the spec's rule, one pass;
//   Phase 3 (minimum labels): union-find whose root is the smallest raster index;
//   Phase 4 (descent): each pixel follows its arrows to a minimum (memoised);
//   Phase 5: minima ranked by their first pixel.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <numeric>
#include <queue>
#include <vector>

#include "watershed/watershed_internal.hpp"

namespace cubekit::detail {
namespace {

constexpr std::uint32_t infinite = std::numeric_limits<std::uint32_t>::max();

// Calls f(q) for each in-grid neighbour q of p, in the spec's order.
template <class F>
void for_neighbours(const Grid& g, const std::vector<Step>& steps, std::int64_t p, F&& f) {
    const std::int64_t W = g.width, H = g.height;
    const int x = int(p % W), y = int((p / W) % H), z = int(p / (W * H));
    for (const Step& s : steps) {
        const int qx = x + s.dx, qy = y + s.dy, qz = z + s.dz;
        if (qx < 0 || qy < 0 || qz < 0 || qx >= g.width || qy >= g.height || qz >= g.depth) continue;
        const std::int64_t q = (std::int64_t(qz) * H + qy) * W + qx;
        if (g.in(q)) f(q);
    }
}

// Phase 1: d(p) = 0 on lower borders, the geodesic distance to one inside a flat zone, ∞ on minima.
// `seeds` (value, cell): known upper bounds of d at some cells (a tile's ring, from its neighbours):
// the search then runs in Dijkstra order, merging the seeds into the breadth-first queue by value.
template <class T>
std::vector<std::uint32_t> plateau_distance(const Grid& g, const T* h, const std::vector<Step>& steps,
                                            std::vector<std::pair<std::uint32_t, std::int64_t>> seeds = {}) {
    const std::int64_t n = g.size();
    std::vector<std::uint32_t> d(std::size_t(n), infinite);
    std::vector<std::int64_t> queue;
    for (std::int64_t p = 0; p < n; ++p) {
        if (!g.in(p)) continue;
        bool lower = false;
        for_neighbours(g, steps, p, [&](std::int64_t q) { lower = lower || h[q] < h[p]; });
        if (lower) {
            d[std::size_t(p)] = 0;
            queue.push_back(p);
        }
    }
    std::erase_if(seeds, [&](const auto& s) { return !g.in(s.second) || s.first >= d[std::size_t(s.second)]; });
    for (const auto& s : seeds) d[std::size_t(s.second)] = std::min(d[std::size_t(s.second)], s.first);
    std::sort(seeds.begin(), seeds.end());
    std::size_t head = 0, next_seed = 0;
    while (true) {  // unit steps inside flat zones, cells taken in increasing d
        std::int64_t p;
        if (head < queue.size() &&
            (next_seed == seeds.size() || d[std::size_t(queue[head])] <= seeds[next_seed].first)) {
            p = queue[head++];
        } else if (next_seed < seeds.size()) {
            const auto [value, cell] = seeds[next_seed++];
            if (d[std::size_t(cell)] != value) continue;  // lowered since, or a duplicate: taken already
            p = cell;
        } else {
            break;
        }
        const std::uint32_t next = d[std::size_t(p)] + 1;
        for_neighbours(g, steps, p, [&](std::int64_t q) {
            if (h[q] == h[p] && d[std::size_t(q)] > next) {
                d[std::size_t(q)] = next;
                queue.push_back(q);
            }
        });
    }
    return d;
}

// Phase 2: π(p) as a raster index (p itself on minima).
template <class T>
std::vector<std::int64_t> arrows(const Grid& g, const T* h, const std::vector<Step>& steps,
                                 const std::vector<std::uint32_t>& d) {
    const std::int64_t n = g.size();
    std::vector<std::int64_t> parent(std::size_t(n), -1);
    for (std::int64_t p = 0; p < n; ++p) {
        if (!g.in(p)) continue;
        const std::uint32_t dp = d[std::size_t(p)];
        std::int64_t best = p;
        if (dp == 0) {  // steepest descent: the lowest neighbour, the first in order on ties
            for_neighbours(g, steps, p, [&](std::int64_t q) {
                if (h[q] < h[best]) best = q;
            });
        } else if (dp != infinite) {  // towards the nearest lower border
            for_neighbours(g, steps, p, [&](std::int64_t q) {
                if (best == p && h[q] == h[p] && d[std::size_t(q)] == dp - 1) best = q;
            });
        }
        parent[std::size_t(p)] = best;
    }
    return parent;
}

std::int64_t find_root(std::vector<std::int64_t>& root, std::int64_t p) {
    while (root[std::size_t(p)] != p) {
        root[std::size_t(p)] = root[std::size_t(root[std::size_t(p)])];  // path halving
        p = root[std::size_t(p)];
    }
    return p;
}

// Phase 3: every minimum pixel's root = the smallest raster index of its minimum (adjacent minimum
// pixels have equal heights, so adjacency alone joins them).
std::vector<std::int64_t> minimum_roots(const Grid& g, const std::vector<Step>& steps,
                                        const std::vector<std::uint32_t>& d) {
    const std::int64_t n = g.size();
    std::vector<std::int64_t> root(static_cast<std::size_t>(n));
    std::iota(root.begin(), root.end(), std::int64_t(0));
    for (std::int64_t p = 0; p < n; ++p) {
        if (!g.in(p) || d[std::size_t(p)] != infinite) continue;
        for_neighbours(g, steps, p, [&](std::int64_t q) {
            if (d[std::size_t(q)] != infinite) return;
            const std::int64_t a = find_root(root, p), b = find_root(root, q);
            if (a != b) root[std::size_t(std::max(a, b))] = std::min(a, b);
        });
    }
    for (std::int64_t p = 0; p < n; ++p)
        if (g.in(p) && d[std::size_t(p)] == infinite) root[std::size_t(p)] = find_root(root, p);
    return root;
}

}  // namespace

// Phases 1 and 2 alone, for tests/watershed_test.cpp (which checks them against the spec's
// definitions).
template <class T>
std::vector<std::uint32_t> watershed_distance_cpu(const Grid& g, const T* h, const std::vector<Step>& steps) {
    return plateau_distance(g, h, steps);
}

template <class T>
std::vector<std::int64_t> watershed_arrows_cpu(const Grid& g, const T* h, const std::vector<Step>& steps) {
    return arrows(g, h, steps, plateau_distance(g, h, steps));
}

template <class T>
std::int64_t watershed_cpu(const Context& ctx, const Grid& g, const T* h, const std::vector<Step>& steps,
                           const std::int32_t* minimum_labels, std::int32_t* labels) {
    const std::int64_t n = g.size();
    const std::vector<std::uint32_t> d = plateau_distance(g, h, steps);
    ctx.check_cancelled("watershed");
    std::vector<std::int64_t> parent = arrows(g, h, steps, d);
    const std::vector<std::int64_t> root = minimum_roots(g, steps, d);
    // Phase 5 first, on the minima: rank by first pixel, or the marker's label.
    std::int64_t regions = 0;
    for (std::int64_t p = 0; p < n; ++p) {
        labels[p] = 0;
        if (!g.in(p) || d[std::size_t(p)] != infinite) continue;
        // With markers the only minima are the seeds (> 0) and the flat zones no seed reaches (a
        // mask component without one), whose marker values (0 or negative: no seed) must give 0.
        if (minimum_labels) labels[p] = std::max(minimum_labels[p], std::int32_t(0));
        else if (root[std::size_t(p)] == p) labels[p] = std::int32_t(++regions);
        else labels[p] = labels[root[std::size_t(p)]];  // the root precedes p in raster order
    }
    ctx.check_cancelled("watershed");
    // Phase 4: follow the arrows down to a labelled pixel, then label the path (memoised).
    std::vector<char> done(std::size_t(n), 0);
    std::vector<std::int64_t> path;
    for (std::int64_t p = 0; p < n; ++p)
        if (g.in(p) && d[std::size_t(p)] == infinite) done[std::size_t(p)] = 1;
    for (std::int64_t p = 0; p < n; ++p) {
        if (!g.in(p) || done[std::size_t(p)]) continue;
        path.clear();
        std::int64_t q = p;
        while (!done[std::size_t(q)]) {
            path.push_back(q);
            q = parent[std::size_t(q)];
        }
        for (std::int64_t r : path) {
            labels[r] = labels[q];
            done[std::size_t(r)] = 1;
        }
    }
    return minimum_labels ? 0 : regions;
}

TileFrame TileFrame::of(int scene_width, int x0, int y0, int width, int height, int read_x0, int read_y0,
                        int read_width, int read_height) {
    TileFrame f{scene_width, read_x0, read_y0, read_width, read_height, x0 - read_x0, y0 - read_y0, width, height, {}};
    for (int y = 0; y < read_height; ++y)
        for (int x = 0; x < read_width; ++x) {
            const int cx = x - f.core_x0, cy = y - f.core_y0;
            const bool interior = cx > 0 && cy > 0 && cx < width - 1 && cy < height - 1;
            if (!interior) f.ring.push_back(y * read_width + x);
        }
    return f;
}

// One tile (watershed_internal.hpp): the automaton on the window, with the ring's distances seeded;
// descents stop at halo cells (their arrows would need cells outside the window), minima are joined
// over the whole window, and every inside cell is labelled with the class where its descent ends.
template <class T>
WatershedPiece watershed_piece_cpu(const TileFrame& f, const std::vector<std::uint32_t>& seeds, const T* h,
                                   const std::uint8_t* inside, int connectivity, std::int32_t* labels) {
    const Grid g{f.width, f.height, 1, inside};
    const std::vector<Step> steps = watershed_steps(connectivity);
    const std::int64_t n = g.size();
    if constexpr (std::is_floating_point_v<T>)
        for (std::int64_t p = 0; p < n; ++p)
            if (std::isnan(h[p]) && g.in(p) && f.in_core(p)) throw_nan_in_tile(f, p);
    std::vector<std::pair<std::uint32_t, std::int64_t>> seed_list;
    for (std::size_t i = 0; i < f.ring.size(); ++i)
        if (seeds[i] != infinite) seed_list.emplace_back(seeds[i], f.ring[i]);
    const std::vector<std::uint32_t> d = plateau_distance(g, h, steps, std::move(seed_list));
    std::vector<std::int64_t> parent = arrows(g, h, steps, d);
    for (std::int64_t p = 0; p < n; ++p)
        if (g.in(p) && !f.in_core(p)) parent[std::size_t(p)] = p;
    const std::vector<std::int64_t> root = minimum_roots(g, steps, d);
    // The cell each descent ends at: a halo cell that is no minimum, else its minimum's root.
    const auto end_of = [&](std::int64_t t) { return d[std::size_t(t)] == infinite ? root[std::size_t(t)] : t; };
    WatershedPiece piece;
    std::vector<std::int32_t> number(std::size_t(n), -1);
    for (std::int64_t p = 0; p < n; ++p) {
        if (!g.in(p) || (f.in_core(p) && !(d[std::size_t(p)] == infinite && root[std::size_t(p)] == p))) continue;
        number[std::size_t(p)] = std::int32_t(piece.class_cells.size());
        piece.class_cells.push_back(f.scene_index(p));
    }
    for (std::int64_t cell : piece.class_cells) {
        piece.class_joined.push_back(number[std::size_t(end_of(f.window_cell(cell)))]);
    }
    std::vector<std::int64_t> ends(std::size_t(n), -1), path;  // memoised descents
    for (std::int64_t p = 0; p < n; ++p) {
        if (!g.in(p)) {
            labels[p] = 0;
            continue;
        }
        path.clear();
        std::int64_t q = p;
        while (ends[std::size_t(q)] < 0 && parent[std::size_t(q)] != q) {
            path.push_back(q);
            q = parent[std::size_t(q)];
        }
        const std::int64_t end = ends[std::size_t(q)] >= 0 ? ends[std::size_t(q)] : end_of(q);
        ends[std::size_t(q)] = end;
        for (std::int64_t r : path) ends[std::size_t(r)] = end;
        labels[p] = number[std::size_t(end)] + 1;
    }
    for (std::int32_t cell : f.ring) {
        // A halo cell without a neighbour of its height in the window cannot change the core (distances
        // spread, arrows to plateau cells point and minima join only between equal heights): reported
        // as 0, so its owner's value never makes this tile run again (float reliefs: most of the halo).
        bool seen = f.in_core(cell);
        for_neighbours(g, steps, cell, [&](std::int64_t q) { seen = seen || h[q] == h[cell]; });
        piece.ring_d.push_back(seen ? d[std::size_t(cell)] : 0);
        piece.ring_labels.push_back(labels[cell]);
    }
    return piece;
}

template <class K>
void reconstruct_by_erosion_cpu(const Grid& g, const std::vector<Step>& steps, const K* floor, K* marker) {
    // Dijkstra on the minimax path: pixels leave the queue in increasing order of their final
    // value; a neighbour can drop to max(floor(q), r(p)).
    using Item = std::pair<K, std::int64_t>;
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue;
    const std::int64_t n = g.size();
    for (std::int64_t p = 0; p < n; ++p)
        if (g.in(p)) queue.emplace(marker[p], p);
    while (!queue.empty()) {
        const K value = queue.top().first;  // not a structured binding: clang 14 cannot capture one
        const std::int64_t p = queue.top().second;
        queue.pop();
        if (value != marker[p]) continue;  // a stale entry
        for_neighbours(g, steps, p, [&](std::int64_t q) {
            const K candidate = std::max(floor[q], value);
            if (candidate < marker[q]) {
                marker[q] = candidate;
                queue.emplace(candidate, q);
            }
        });
    }
}

template <class T>
void relief_range_cpu(const Grid& g, const T* h, double& lo, double& hi) {
    lo = std::numeric_limits<double>::infinity();
    hi = -lo;
    for (std::int64_t p = 0; p < g.size(); ++p) {
        if (!g.in(p)) continue;
        lo = std::min(lo, double(h[p]));
        hi = std::max(hi, double(h[p]));
    }
}

#define CUBEKIT_WATERSHED_CPU(T)                                                                            \
    template std::int64_t watershed_cpu<T>(const Context&, const Grid&, const T*, const std::vector<Step>&, \
                                           const std::int32_t*, std::int32_t*);                             \
    template void relief_range_cpu<T>(const Grid&, const T*, double&, double&);                             \
    template std::vector<std::uint32_t> watershed_distance_cpu<T>(const Grid&, const T*, const std::vector<Step>&); \
    template std::vector<std::int64_t> watershed_arrows_cpu<T>(const Grid&, const T*, const std::vector<Step>&); \
    template WatershedPiece watershed_piece_cpu<T>(const TileFrame&, const std::vector<std::uint32_t>&, const T*, \
                                                   const std::uint8_t*, int, std::int32_t*);
CUBEKIT_WATERSHED_CPU(std::uint8_t)
CUBEKIT_WATERSHED_CPU(std::uint16_t)
CUBEKIT_WATERSHED_CPU(std::int16_t)
CUBEKIT_WATERSHED_CPU(std::uint32_t)
CUBEKIT_WATERSHED_CPU(std::int32_t)
CUBEKIT_WATERSHED_CPU(float)
CUBEKIT_WATERSHED_CPU(double)
CUBEKIT_WATERSHED_CPU(std::uint64_t)
#undef CUBEKIT_WATERSHED_CPU
template void reconstruct_by_erosion_cpu<double>(const Grid&, const std::vector<Step>&, const double*, double*);
template void reconstruct_by_erosion_cpu<std::uint64_t>(const Grid&, const std::vector<Step>&, const std::uint64_t*,
                                                        std::uint64_t*);

}  // namespace cubekit::detail
