// Watershed, CPU reference (spec gradient-watershed.md part B) against the oracles of §B5 and the
// hand-computed cases of issue 16 (markers, mask, levels, h-minima, volumes, boundary, errors).
//
// The oracles are written here, independently of src/watershed:
//  - literal_watershed() runs the spec's automaton as written: Phase 1 and 3 as iterated rules
//    (sweeps until nothing changes), Phase 2 from its definitions, Phase 4 as the iterated
//    ℓ(p) ← ℓ(π(p)), Phase 5 as a rank; literal_levels/_hmin/_impose compute the optional reliefs
//    the same way (reconstruction by erosion iterated to stability, in f64, order-isomorphic to
//    the library's integer keys). Every case of watershed_testing.hpp up to 70 000 pixels must
//    give the library's labels exactly;
//  - regional_minima() finds flat zones by breadth-first search and keeps those with no lower
//    neighbour (oracle 5); components() counts the connected pieces of every label (oracle 6);
//    the arrows are rebuilt from the spec's Phase-2 definitions (oracle 7).
// Phase 1 and 2 of the library are also checked directly (watershed_distance_cpu and
// watershed_arrows_cpu, cpu.cpp).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cubekit/error.hpp"
#include "cubekit/watershed.hpp"
#include "testing.hpp"
#include "watershed/watershed_internal.hpp"
#include "watershed_testing.hpp"

namespace cubekit::detail {
// Phases 1 and 2 of the CPU reference alone (defined in src/watershed/cpu.cpp; to move into
// watershed_internal.hpp): d(p) (UINT32_MAX = ∞) and π(p) as a raster index (−1 outside).
template <class T>
std::vector<std::uint32_t> watershed_distance_cpu(const Grid& grid, const T* h, const std::vector<Step>& steps);
template <class T>
std::vector<std::int64_t> watershed_arrows_cpu(const Grid& grid, const T* h, const std::vector<Step>& steps);
}  // namespace cubekit::detail

namespace cubekit {
namespace {

using namespace watershed_testing;
using testing::cpu_context;

constexpr std::uint32_t kInf = std::numeric_limits<std::uint32_t>::max();
constexpr double kPosInf = std::numeric_limits<double>::infinity();

// ---- The oracle's view of a relief ------------------------------------------------------------

struct Relief {
    int W = 0, H = 0, D = 0;
    std::vector<double> h;     // exact for every element type
    std::vector<char> inside;  // 1 = part of the relief
    std::int64_t size() const { return std::int64_t(W) * H * D; }
    std::int64_t index(int x, int y, int z) const { return (std::int64_t(z) * H + y) * W + x; }
};

Relief relief_of(const Cube& height, const Cube* mask = nullptr) {
    Relief r;
    r.W = height.width();
    r.H = height.height();
    r.D = height.bands();
    r.h.resize(std::size_t(r.size()));
    r.inside.assign(std::size_t(r.size()), 1);
    for (int z = 0; z < r.D; ++z)
        for (int y = 0; y < r.H; ++y)
            for (int x = 0; x < r.W; ++x) {
                r.h[std::size_t(r.index(x, y, z))] = height.value(x, y, z);
                if (mask) r.inside[std::size_t(r.index(x, y, z))] = mask->value(x, y, z) != 0;
            }
    return r;
}

// The neighbour offsets (dz, dy, dx) in the spec's order (§B3 and the header: 6/26 lexicographic).
std::vector<std::array<int, 3>> offsets(int connectivity) {
    if (connectivity == 4) return {{0, -1, 0}, {0, 0, -1}, {0, 0, 1}, {0, 1, 0}};
    if (connectivity == 8) return {{0, -1, -1}, {0, -1, 0}, {0, -1, 1}, {0, 0, -1}, {0, 0, 1}, {0, 1, -1}, {0, 1, 0}, {0, 1, 1}};
    if (connectivity == 6) return {{-1, 0, 0}, {0, -1, 0}, {0, 0, -1}, {0, 0, 1}, {0, 1, 0}, {1, 0, 0}};
    std::vector<std::array<int, 3>> o;
    for (int dz = -1; dz <= 1; ++dz)
        for (int dy = -1; dy <= 1; ++dy)
            for (int dx = -1; dx <= 1; ++dx)
                if (dz || dy || dx) o.push_back({dz, dy, dx});
    return o;
}

// In-grid, inside neighbours of an inside pixel, in the spec's order (computed on the fly).
struct Adjacency {
    const Relief* r = nullptr;
    std::vector<std::array<int, 3>> off;
    template <class F>
    void each(std::int64_t p, F&& f) const {
        if (!r->inside[std::size_t(p)]) return;
        const std::int64_t plane = std::int64_t(r->W) * r->H;
        const int x = int(p % r->W), y = int((p / r->W) % r->H), z = int(p / plane);
        for (const auto& o : off) {
            const int qz = z + o[0], qy = y + o[1], qx = x + o[2];
            if (qx < 0 || qy < 0 || qz < 0 || qx >= r->W || qy >= r->H || qz >= r->D) continue;
            const std::int64_t q = r->index(qx, qy, qz);
            if (r->inside[std::size_t(q)]) f(q);
        }
    }
};

Adjacency adjacency(const Relief& r, int connectivity) { return {&r, offsets(connectivity)}; }

// Sweeps `rule(p)` (returns true when p changed) over the inside pixels, alternating forward and
// backward raster order, until a sweep changes nothing.
void iterate(const Relief& r, const std::function<bool(std::int64_t)>& rule) {
    bool changed = true;
    for (int sweep = 0; changed; ++sweep) {
        changed = false;
        for (std::int64_t i = 0; i < r.size(); ++i) {
            const std::int64_t p = sweep % 2 == 0 ? i : r.size() - 1 - i;
            if (r.inside[std::size_t(p)] && rule(p)) changed = true;
        }
    }
}

struct Automaton {
    std::vector<std::uint32_t> d;
    std::vector<std::int64_t> parent;  // −1 outside
    std::vector<std::int32_t> labels;  // 0 outside
    std::int64_t regions = 0;
};

// Spec §B3, literally. `seeds` (markers, > 0 = seed): the minima keep the seed's label (0 for a
// minimum without one), no renumbering.
Automaton literal_watershed(const Relief& r, int connectivity, const std::vector<std::int32_t>* seeds = nullptr) {
    const Adjacency a = adjacency(r, connectivity);
    const std::size_t n = std::size_t(r.size());
    const auto& h = r.h;
    Automaton m;
    m.d.assign(n, kInf);
    // Phase 1: init, then d(p) ← min(d(p), 1 + min{d(q) : h(q) = h(p)}).
    for (std::size_t p = 0; p < n; ++p)
        if (r.inside[p]) a.each(std::int64_t(p), [&](std::int64_t q) {
                if (h[std::size_t(q)] < h[p]) m.d[p] = 0;
            });
    iterate(r, [&](std::int64_t p) {
        std::uint32_t best = m.d[std::size_t(p)];
        a.each(p, [&](std::int64_t q) {
            if (h[std::size_t(q)] == h[std::size_t(p)] && m.d[std::size_t(q)] != kInf) best = std::min(best, m.d[std::size_t(q)] + 1);
        });
        if (best >= m.d[std::size_t(p)]) return false;
        m.d[std::size_t(p)] = best;
        return true;
    });
    // Phase 2.
    m.parent.assign(n, -1);
    for (std::size_t p = 0; p < n; ++p) {
        if (!r.inside[p]) continue;
        std::int64_t pi = std::int64_t(p);
        if (m.d[p] == 0) {
            std::int64_t lowest = -1;
            a.each(std::int64_t(p), [&](std::int64_t q) {
                if (lowest < 0 || h[std::size_t(q)] < h[std::size_t(lowest)]) lowest = q;
            });
            pi = lowest;
        } else if (m.d[p] != kInf) {
            std::int64_t first = -1;
            a.each(std::int64_t(p), [&](std::int64_t q) {
                if (first < 0 && h[std::size_t(q)] == h[p] && m.d[std::size_t(q)] == m.d[p] - 1) first = q;
            });
            pi = first;
        }
        m.parent[p] = pi;
    }
    // Phase 3.
    m.labels.assign(n, 0);
    for (std::size_t p = 0; p < n; ++p)
        if (r.inside[p] && m.d[p] == kInf)
            m.labels[p] = seeds ? std::max((*seeds)[p], std::int32_t(0)) : std::int32_t(p + 1);
    if (!seeds)
        iterate(r, [&](std::int64_t p) {
            if (m.d[std::size_t(p)] != kInf) return false;
            std::int32_t best = m.labels[std::size_t(p)];
            a.each(p, [&](std::int64_t q) {
                if (m.d[std::size_t(q)] == kInf) best = std::min(best, m.labels[std::size_t(q)]);
            });
            if (best >= m.labels[std::size_t(p)]) return false;
            m.labels[std::size_t(p)] = best;
            return true;
        });
    // Phase 4.
    iterate(r, [&](std::int64_t p) {
        if (m.d[std::size_t(p)] == kInf) return false;
        const std::int32_t l = m.labels[std::size_t(m.parent[std::size_t(p)])];
        if (l == 0 || l == m.labels[std::size_t(p)]) return false;
        m.labels[std::size_t(p)] = l;
        return true;
    });
    // Phase 5.
    if (!seeds) {
        std::map<std::int32_t, std::int32_t> rank;
        for (std::size_t p = 0; p < n; ++p)
            if (r.inside[p] && m.d[p] == kInf) rank[m.labels[p]] = 0;
        std::int32_t next = 0;
        for (auto& [label, k] : rank) k = ++next;
        for (std::size_t p = 0; p < n; ++p)
            if (r.inside[p]) m.labels[p] = rank.at(m.labels[p]);
        m.regions = next;
    }
    return m;
}

// Reconstruction by erosion of `start` over the floor r.h: r(p) ← max(h(p), min(r(p), min_q r(q))),
// iterated; `fixed` pixels keep their start value.
std::vector<double> reconstruct(const Relief& r, const Adjacency& a, std::vector<double> value, const std::vector<char>* fixed = nullptr) {
    iterate(r, [&](std::int64_t p) {
        if (fixed && (*fixed)[std::size_t(p)]) return false;
        double m = value[std::size_t(p)];
        a.each(p, [&](std::int64_t q) { m = std::min(m, value[std::size_t(q)]); });
        m = std::max(m, r.h[std::size_t(p)]);
        if (!(m < value[std::size_t(p)])) return false;
        value[std::size_t(p)] = m;
        return true;
    });
    return value;
}

// levels (spec B2): round((h − min)/(max − min)·(levels − 1)), f64, half away from zero; min and
// max over the inside.
Relief literal_levels(Relief r, std::int64_t levels) {
    double lo = kPosInf, hi = -kPosInf;
    for (std::size_t p = 0; p < r.h.size(); ++p)
        if (r.inside[p]) lo = std::min(lo, r.h[p]), hi = std::max(hi, r.h[p]);
    for (std::size_t p = 0; p < r.h.size(); ++p) {
        if (!r.inside[p]) continue;
        r.h[p] = hi > lo ? std::round((r.h[p] - lo) / (hi - lo) * double(levels - 1)) : 0.0;
    }
    return r;
}

Relief literal_hmin(Relief r, int connectivity, double depth) {
    const Adjacency a = adjacency(r, connectivity);
    std::vector<double> raised(r.h.size());
    for (std::size_t p = 0; p < r.h.size(); ++p) raised[p] = r.h[p] + depth;
    r.h = reconstruct(r, a, raised);
    return r;
}

// Minima imposition, order-isomorphic to the library's keys: seeds −∞, the others the minimax
// height of a path from a seed (+∞ where no path leads: a mask component without a seed).
Relief literal_impose(Relief r, int connectivity, const std::vector<std::int32_t>& seeds) {
    const Adjacency a = adjacency(r, connectivity);
    std::vector<double> start(r.h.size(), kPosInf);
    std::vector<char> fixed(r.h.size(), 0);
    for (std::size_t p = 0; p < r.h.size(); ++p)
        if (seeds[p] > 0) start[p] = -kPosInf, fixed[p] = 1;
    r.h = reconstruct(r, a, start, &fixed);
    return r;
}

std::vector<std::int32_t> seeds_of(const Cube& markers) {
    std::vector<std::int32_t> s;
    for (int z = 0; z < markers.bands(); ++z)
        for (int y = 0; y < markers.height(); ++y)
            for (int x = 0; x < markers.width(); ++x) {
                const double v = markers.value(x, y, z);
                s.push_back(v > 0 ? std::int32_t(v) : 0);
            }
    return s;
}

// The relief the automaton compares for a case: levels → h-minima → imposition.
Relief final_relief(const Case& c) {
    Relief r = relief_of(c.height, c.mask ? &*c.mask : nullptr);
    if (c.options.levels > 0) r = literal_levels(std::move(r), c.options.levels);
    if (c.options.h_min > 0) r = literal_hmin(std::move(r), c.options.connectivity, c.options.h_min);
    if (c.markers) r = literal_impose(std::move(r), c.options.connectivity, seeds_of(*c.markers));
    return r;
}

// ---- Independent checks -----------------------------------------------------------------------

// Oracle 5: flat zones (breadth-first search over equal heights) with no lower neighbour.
struct Minima {
    std::vector<std::int64_t> zone;    // flat-zone id per inside pixel, −1 outside
    std::vector<char> zone_is_minimum;
    std::int64_t count = 0;
};

Minima regional_minima(const Relief& r, int connectivity) {
    const Adjacency a = adjacency(r, connectivity);
    Minima m;
    m.zone.assign(r.h.size(), -1);
    std::vector<std::int64_t> queue;
    for (std::int64_t s = 0; s < r.size(); ++s) {
        if (!r.inside[std::size_t(s)] || m.zone[std::size_t(s)] >= 0) continue;
        const std::int64_t id = std::int64_t(m.zone_is_minimum.size());
        bool minimum = true;
        queue.assign(1, s);
        m.zone[std::size_t(s)] = id;
        for (std::size_t head = 0; head < queue.size(); ++head) {
            const std::int64_t p = queue[head];
            a.each(p, [&](std::int64_t q) {
                if (r.h[std::size_t(q)] < r.h[std::size_t(p)]) minimum = false;
                if (r.h[std::size_t(q)] == r.h[std::size_t(p)] && m.zone[std::size_t(q)] < 0) {
                    m.zone[std::size_t(q)] = id;
                    queue.push_back(q);
                }
            });
        }
        m.zone_is_minimum.push_back(minimum);
        m.count += minimum;
    }
    return m;
}

// Oracle 6: the connected pieces (in `connectivity`) of every label's pixel set; a component id per
// pixel (−1 outside) and, per component, its label.
struct Pieces {
    std::vector<std::int64_t> id;
    std::vector<std::int32_t> label;
};

Pieces components(const Relief& r, const std::vector<std::int32_t>& labels, int connectivity) {
    const Adjacency a = adjacency(r, connectivity);
    Pieces c;
    c.id.assign(labels.size(), -1);
    std::vector<std::int64_t> queue;
    for (std::int64_t s = 0; s < r.size(); ++s) {
        if (!r.inside[std::size_t(s)] || c.id[std::size_t(s)] >= 0) continue;
        const std::int64_t id = std::int64_t(c.label.size());
        c.label.push_back(labels[std::size_t(s)]);
        queue.assign(1, s);
        c.id[std::size_t(s)] = id;
        for (std::size_t head = 0; head < queue.size(); ++head)
            a.each(queue[head], [&](std::int64_t q) {
                if (labels[std::size_t(q)] == labels[std::size_t(s)] && c.id[std::size_t(q)] < 0) {
                    c.id[std::size_t(q)] = id;
                    queue.push_back(q);
                }
            });
    }
    return c;
}

std::vector<std::int32_t> labels_of(const Cube& labels) {
    const std::int32_t* l = labels.data<std::int32_t>();
    return std::vector<std::int32_t>(l, l + labels.num_elements());
}

std::string where(const Relief& r, std::int64_t p) {
    return "(x " + std::to_string(p % r.W) + ", y " + std::to_string((p / r.W) % r.H) + ", z " + std::to_string(p / (std::int64_t(r.W) * r.H)) + ")";
}

// Every oracle that applies to a case: 0 outside the mask; without markers labels 1..R, R = the
// regional minima found independently, each minimum in one region of its own, ranked by its first
// pixel, every region connected; with markers the seeds keep their labels, every piece of a region
// holds a seed of its label, 0 exactly on the mask components without a seed, R = the seed labels;
// ℓ(p) = ℓ(π(p)) with π from the spec; and, up to `literal_limit` pixels, the literal automaton's labels.
void check_case(const Case& c, std::int64_t literal_limit = 70000) {
    SCOPED_TRACE(c.name);
    const WatershedResult w = watershed(cpu_context(), c.height, c.options, c.inputs());
    ASSERT_EQ(w.labels.dtype(), DType::I32);
    ASSERT_EQ(w.labels.layout(), Layout::BSQ);
    ASSERT_EQ(w.labels.width(), c.height.width());
    ASSERT_EQ(w.labels.height(), c.height.height());
    ASSERT_EQ(w.labels.bands(), c.height.bands());
    const std::vector<std::int32_t> got = labels_of(w.labels);
    const Relief r = final_relief(c);
    const int conn = c.options.connectivity;

    std::size_t outside_nonzero = 0;
    for (std::size_t p = 0; p < got.size(); ++p) outside_nonzero += !r.inside[p] && got[p] != 0;
    EXPECT_EQ(outside_nonzero, 0u) << "pixels outside the mask with a label";

    const Pieces pieces = components(r, got, conn);
    if (!c.markers) {
        const Minima minima = regional_minima(r, conn);
        EXPECT_EQ(w.regions, minima.count) << "R against the regional minima counted independently (oracle 5)";
        // Each minimum zone: one label; distinct zones, distinct labels; labels ranked by first pixel.
        std::map<std::int64_t, std::int32_t> zone_label;
        std::int32_t expected_next = 1;
        std::size_t bad = 0;
        for (std::int64_t p = 0; p < r.size() && bad < 5; ++p) {
            if (!r.inside[std::size_t(p)]) continue;
            const std::int32_t l = got[std::size_t(p)];
            if (l < 1 || l > w.regions) {
                ADD_FAILURE() << "label " << l << " at " << where(r, p) << " outside 1.." << w.regions;
                ++bad;
                continue;
            }
            const std::int64_t z = minima.zone[std::size_t(p)];
            if (!minima.zone_is_minimum[std::size_t(z)]) continue;
            auto [it, fresh] = zone_label.emplace(z, l);
            if (fresh) {
                if (l != expected_next) {
                    ADD_FAILURE() << "minimum first met at " << where(r, p) << " has label " << l << ", expected " << expected_next << " (raster rank)";
                    ++bad;
                }
                ++expected_next;
            } else if (it->second != l) {
                ADD_FAILURE() << "one regional minimum holds labels " << it->second << " and " << l << " at " << where(r, p);
                ++bad;
            }
        }
        // Oracle 6: one piece per label.
        std::map<std::int32_t, int> piece_count;
        for (std::int32_t l : pieces.label) ++piece_count[l];
        for (const auto& [l, k] : piece_count) EXPECT_EQ(k, 1) << "region " << l << " is in " << k << " pieces (oracle 6)";
        EXPECT_EQ(std::int64_t(piece_count.size()), w.regions) << "labels used";
    } else {
        const std::vector<std::int32_t> seeds = seeds_of(*c.markers);
        std::set<std::int32_t> seed_labels;
        std::vector<char> piece_has_seed(pieces.label.size(), 0);
        std::size_t bad = 0;
        for (std::size_t p = 0; p < got.size(); ++p) {
            if (!r.inside[p] || seeds[p] <= 0) continue;
            seed_labels.insert(seeds[p]);
            if (got[p] != seeds[p] && bad++ < 5) {
                ADD_FAILURE() << "seed " << seeds[p] << " at " << where(r, std::int64_t(p)) << " labelled " << got[p];
            }
            piece_has_seed[std::size_t(pieces.id[p])] = 1;
        }
        EXPECT_EQ(w.regions, std::int64_t(seed_labels.size())) << "R with markers = the seed labels inside";
        // Mask components (all labels equal) without a seed must be 0, the others nonzero.
        std::vector<std::int32_t> ones(got.size(), 1);
        const Pieces mask_parts = components(r, ones, conn);
        std::vector<char> part_seeded(mask_parts.label.size(), 0);
        for (std::size_t p = 0; p < got.size(); ++p)
            if (r.inside[p] && seeds[p] > 0) part_seeded[std::size_t(mask_parts.id[p])] = 1;
        for (std::size_t p = 0; p < got.size() && bad < 10; ++p) {
            if (!r.inside[p]) continue;
            const bool seeded = part_seeded[std::size_t(mask_parts.id[p])];
            if (seeded != (got[p] != 0)) {
                ADD_FAILURE() << "label " << got[p] << " at " << where(r, std::int64_t(p)) << (seeded ? " in a seeded component" : " in a component without a seed");
                ++bad;
            } else if (got[p] != 0 && !seed_labels.count(got[p])) {
                ADD_FAILURE() << "label " << got[p] << " is no seed's label";
                ++bad;
            }
        }
        for (std::size_t k = 0; k < pieces.label.size(); ++k)
            if (pieces.label[k] != 0 && !piece_has_seed[k]) {
                ADD_FAILURE() << "a piece of region " << pieces.label[k] << " holds no seed of its label";
                break;
            }
    }
    // Oracle 7, on the final relief: ℓ(p) = ℓ(π(p)) with π rebuilt from the spec (the literal run).
    if (r.size() <= literal_limit) {
        const std::vector<std::int32_t> seeds = c.markers ? seeds_of(*c.markers) : std::vector<std::int32_t>{};
        const Automaton m = literal_watershed(r, conn, c.markers ? &seeds : nullptr);
        std::size_t arrow_bad = 0, label_bad = 0;
        std::int64_t first_bad = -1;
        for (std::size_t p = 0; p < got.size(); ++p) {
            if (!r.inside[p]) continue;
            arrow_bad += got[p] != got[std::size_t(m.parent[p])];
            if (got[p] != m.labels[p]) {
                if (first_bad < 0) first_bad = std::int64_t(p);
                ++label_bad;
            }
        }
        EXPECT_EQ(arrow_bad, 0u) << "pixels whose label differs from their arrow's (oracle 7)";
        EXPECT_EQ(label_bad, 0u) << "labels differ from the literal automaton's, first at "
                                 << (first_bad >= 0 ? where(r, first_bad) + ": " + std::to_string(got[std::size_t(first_bad)]) + " vs " +
                                                          std::to_string(m.labels[std::size_t(first_bad)])
                                                    : std::string());
        if (!c.markers) {
            EXPECT_EQ(w.regions, m.regions);
        }
    }
}

void check_cases(const std::vector<Case>& cases) {
    for (const Case& c : cases) {
        check_case(c);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

// Library's Phase 1/2 on a dense relief.
template <class T>
std::pair<std::vector<std::uint32_t>, std::vector<std::int64_t>> library_phases(const Cube& height, int connectivity) {
    const detail::Grid g{height.width(), height.height(), height.bands(), nullptr};
    const auto steps = detail::watershed_steps(connectivity);
    const T* h = height.data<T>();
    return {detail::watershed_distance_cpu<T>(g, h, steps), detail::watershed_arrows_cpu<T>(g, h, steps)};
}

std::pair<std::vector<std::uint32_t>, std::vector<std::int64_t>> library_phases(const Cube& height, int connectivity) {
    return visit_dtype(height.dtype(), [&](auto tag) { return library_phases<decltype(tag)>(height, connectivity); });
}

const std::vector<DType> kAllTypes = {DType::U8, DType::U16, DType::I16, DType::U32, DType::I32, DType::F32, DType::F64};

WatershedOptions with_connectivity(int connectivity) {
    WatershedOptions o;
    o.connectivity = connectivity;
    o.volume = connectivity == 6 || connectivity == 26;
    return o;
}

std::vector<std::int32_t> ints(const std::vector<std::int32_t>& v) { return v; }

// ---- Oracles 1–8 (spec §B5) ------------------------------------------------------------------

TEST(WatershedOracle, ConstantImageIsOneRegion) {  // oracle 1
    for (Size s : image_sizes())
        for (DType t : kAllTypes)
            for (int conn : {4, 8}) {
                SCOPED_TRACE(size_text(s) + " " + std::string(dtype_name(t)) + " c" + std::to_string(conn));
                const WatershedResult w = watershed(cpu_context(), constant(s, t, 5), with_connectivity(conn));
                EXPECT_EQ(w.regions, 1);
                EXPECT_EQ(labels_of(w.labels), std::vector<std::int32_t>(std::size_t(s.w) * s.h, 1));
            }
}

TEST(WatershedOracle, RampIsOneRegionWithItsMinimumInColumnZero) {  // oracle 2
    for (Size s : {Size{1, 1}, Size{37, 1}, Size{2, 9}, Size{23, 17}, Size{64, 3}})
        for (DType t : kAllTypes)
            for (int conn : {4, 8}) {
                SCOPED_TRACE(size_text(s) + " " + std::string(dtype_name(t)) + " c" + std::to_string(conn));
                const Cube h = ramp(s, t);
                const WatershedResult w = watershed(cpu_context(), h, with_connectivity(conn));
                EXPECT_EQ(w.regions, 1);
                EXPECT_EQ(labels_of(w.labels), std::vector<std::int32_t>(std::size_t(s.w) * s.h, 1));
                const auto [d, parent] = library_phases(h, conn);
                for (int y = 0; y < s.h; ++y)
                    for (int x = 0; x < s.w; ++x) {
                        const std::size_t p = std::size_t(y) * s.w + x;
                        ASSERT_EQ(d[p], x == 0 ? kInf : 0u) << "x " << x << " y " << y;
                        if (x > 0) {
                            ASSERT_EQ(parent[p] % s.w, x - 1) << "steepest descent goes left";
                        }
                    }
            }
}

TEST(WatershedOracle, StaircaseHasTheStatedPlateauDistances) {  // oracle 3
    for (Size s : {Size{23, 5}, Size{4, 3}, Size{41, 1}, Size{1, 6}, Size{100, 33}})
        for (DType t : kAllTypes)
            for (int conn : {4, 8}) {
                SCOPED_TRACE(size_text(s) + " " + std::string(dtype_name(t)) + " c" + std::to_string(conn));
                const Cube h = staircase(s, 4, t);
                const WatershedResult w = watershed(cpu_context(), h, with_connectivity(conn));
                EXPECT_EQ(w.regions, 1);
                EXPECT_EQ(labels_of(w.labels), std::vector<std::int32_t>(std::size_t(s.w) * s.h, 1));
                const auto [d, parent] = library_phases(h, conn);
                const Automaton m = literal_watershed(relief_of(h), conn);
                for (int y = 0; y < s.h; ++y)
                    for (int x = 0; x < s.w; ++x) {
                        const std::size_t p = std::size_t(y) * s.w + x;
                        const std::uint32_t expected = x < 4 ? kInf : std::uint32_t(x % 4);
                        ASSERT_EQ(m.d[p], expected) << "the oracle's own Phase 1 at x " << x << " y " << y;
                        ASSERT_EQ(d[p], expected) << "x " << x << " y " << y;
                    }
            }
}

TEST(WatershedOracle, TwoConesFollowTheDiskRuleAndRasterNumbering) {  // oracle 4
    for (const Case& c : cone_cases()) {
        SCOPED_TRACE(c.name);
        const WatershedResult w = watershed(cpu_context(), c.height, c.options);
        ASSERT_EQ(w.regions, 2);
        // The centres are the two zeros of the relief; the first in raster order gets label 1.
        std::vector<Point> centre;
        for (int y = 0; y < c.height.height(); ++y)
            for (int x = 0; x < c.height.width(); ++x)
                if (c.height.value(x, y, 0) == 0) centre.push_back({x, y});
        ASSERT_EQ(centre.size(), 2u);
        const double radius = std::sqrt(double(squared_distance(centre[0].x, centre[0].y, 0, centre[1]))) / 2 - 2;
        std::size_t checked = 0;
        for (int k = 0; k < 2; ++k) {
            EXPECT_EQ(w.labels.at<std::int32_t>(centre[k].x, centre[k].y, 0), k + 1) << "centre " << k;
            for (int y = 0; y < c.height.height(); ++y)
                for (int x = 0; x < c.height.width(); ++x)
                    if (double(squared_distance(x, y, 0, centre[k])) <= radius * radius) {
                        ++checked;
                        ASSERT_EQ(w.labels.at<std::int32_t>(x, y, 0), k + 1) << "x " << x << " y " << y << " lies within " << radius << " of centre " << k;
                    }
        }
        EXPECT_GT(checked, 2u);
        check_case(c);
    }
}

TEST(WatershedOracle, RegionCountMinimaConnectivityArrowsOnRandomTies) {  // oracles 5, 6, 7 (u8 0..7)
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    check_cases(tie_cases(seed));
}

TEST(WatershedOracle, RegionCountMinimaConnectivityArrowsOnDistinctF32) {  // oracles 5, 6, 7 (no ties)
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    check_cases(distinct_cases(seed));
}

TEST(WatershedOracle, RegionCountMinimaConnectivityArrowsInEveryType) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    check_cases(type_cases(seed));
}

TEST(WatershedOracle, RegionCountMinimaConnectivityArrowsOnPlateaus) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    check_cases(plateau_cases(seed, false));
}

TEST(WatershedOracle, LibraryPhasesOneAndTwoFollowTheSpec) {  // oracle 7, on the library's own arrows
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::vector<Case> cases = tie_cases(seed);
    for (Case& c : type_cases(seed + 1000)) cases.push_back(std::move(c));
    for (Case& c : plateau_cases(seed + 2000, false)) cases.push_back(std::move(c));
    for (Case& c : volume_cases(seed + 3000))
        if (!c.markers && !c.mask && c.options.levels == 0) cases.push_back(std::move(c));
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        const auto [d, parent] = library_phases(c.height, c.options.connectivity);
        const Relief r = relief_of(c.height);
        const Automaton m = literal_watershed(r, c.options.connectivity);
        ASSERT_EQ(d, m.d) << "Phase 1 distances";
        ASSERT_EQ(parent, m.parent) << "Phase 2 arrows";
        const WatershedResult w = watershed(cpu_context(), c.height, c.options);
        const std::vector<std::int32_t> l = labels_of(w.labels);
        for (std::size_t p = 0; p < l.size(); ++p) ASSERT_EQ(l[p], l[std::size_t(parent[p])]) << "ℓ(p) = ℓ(π(p)) at " << where(r, std::int64_t(p));
    }
}

TEST(WatershedOracle, StrictlyIncreasingTransformsGiveIdenticalLabels) {  // oracle 8
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::vector<Case> cases = tie_cases(seed);
    for (Case& c : distinct_cases(seed + 500)) cases.push_back(std::move(c));
    for (Case& c : type_cases(seed + 900)) cases.push_back(std::move(c));
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        const WatershedResult w = watershed(cpu_context(), c.height, c.options);
        const Cube h = c.height.to_dtype(DType::F64);
        double lo = kPosInf;
        for (std::size_t p = 0; p < h.num_elements(); ++p) lo = std::min(lo, h.data<double>()[p]);
        Cube affine = h.clone(), squared = h.clone();
        for (std::size_t p = 0; p < h.num_elements(); ++p) {
            const double v = h.data<double>()[p];
            // Exact for the integer reliefs; for f32 heights (spaced ≥ 1e-6 apart) rounding in f64
            // keeps them strictly ordered.
            affine.data<double>()[p] = 3 * v + 7;
            squared.data<double>()[p] = (v - lo) * (v - lo);  // h − min ≥ 0, then h²
        }
        EXPECT_TRUE(testing::cubes_identical(w.labels, watershed(cpu_context(), affine, c.options).labels)) << "3h + 7";
        EXPECT_TRUE(testing::cubes_identical(w.labels, watershed(cpu_context(), squared, c.options).labels)) << "(h - min)^2";
        if (c.height.dtype() == DType::U8) {  // 3h + 7 in the integer types too
            for (DType t : {DType::U16, DType::I16, DType::U32, DType::I32}) {
                EXPECT_TRUE(testing::cubes_identical(w.labels, watershed(cpu_context(), affine.to_dtype(t), c.options).labels))
                    << "3h + 7 in " << dtype_name(t);
            }
        }
    }
}

TEST(WatershedOracle, SameIntegerValuesGiveTheSameLabelsInEveryType) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Case& c : tie_cases(seed)) {
        SCOPED_TRACE(c.name);
        const WatershedResult w = watershed(cpu_context(), c.height, c.options);
        for (DType t : kAllTypes) {
            const WatershedResult v = watershed(cpu_context(), c.height.to_dtype(t), c.options);
            EXPECT_EQ(v.regions, w.regions) << dtype_name(t);
            EXPECT_TRUE(testing::cubes_identical(w.labels, v.labels)) << dtype_name(t);
        }
        // Shifted into negative values, and with −0.0 for +0.0 and ±∞ at the ends (floats).
        Cube shifted = c.height.to_dtype(DType::F64);
        for (std::size_t p = 0; p < shifted.num_elements(); ++p) {
            double& v = shifted.data<double>()[p];
            v = v == 4 ? (p % 2 ? -0.0 : 0.0) : v == 0 ? -kPosInf : v == 7 ? kPosInf : v - 4;
        }
        EXPECT_TRUE(testing::cubes_identical(w.labels, watershed(cpu_context(), shifted, c.options).labels)) << "f64 with -0.0, ±inf";
        EXPECT_TRUE(testing::cubes_identical(w.labels, watershed(cpu_context(), shifted.to_dtype(DType::F32), c.options).labels))
            << "f32 with -0.0, ±inf";
    }
}

TEST(WatershedOracle, PlateauBetweenTwoMinimaSplitsAtItsMiddle) {
    // 1×7: minima at both ends, plateau of 5 between: x 1..2 go left, x 4..5 go right, and the
    // middle x = 3 (d = 2, both neighbours d = 1) takes the first neighbour in order, (0, −1): left.
    for (int conn : {4, 8}) {
        const WatershedResult w = watershed(cpu_context(), row_cube({0, 5, 5, 5, 5, 5, 0}, DType::U8), with_connectivity(conn));
        EXPECT_EQ(w.regions, 2);
        EXPECT_EQ(labels_of(w.labels), ints({1, 1, 1, 1, 2, 2, 2})) << "c" << conn;
        // Even length: no tie. 1×8 with a plateau of 6: 3 go left, 3 go right.
        EXPECT_EQ(labels_of(watershed(cpu_context(), row_cube({1, 5, 5, 5, 5, 5, 5, 0}), with_connectivity(conn)).labels),
                  ints({1, 1, 1, 1, 2, 2, 2, 2}));
    }
    // Column (N×1 is W = 1): the first neighbour in order is (−1, 0), up.
    Cube col(1, 7, 1, DType::U8);
    const std::vector<int> v = {0, 5, 5, 5, 5, 5, 0};
    for (int y = 0; y < 7; ++y) col.at<std::uint8_t>(0, y, 0) = std::uint8_t(v[std::size_t(y)]);
    EXPECT_EQ(labels_of(watershed(cpu_context(), col, with_connectivity(4)).labels), ints({1, 1, 1, 1, 2, 2, 2}));
    // Steepest descent: the lowest neighbour wins, not the first lower one. Centre of
    //   5 4 9
    //   3 9 9        8-conn neighbours in order: 5, 4, 9, 3, 9, 9, 1, 9 → (+1, 0), the 1
    //   9 1 9        (raster index 7); 4-conn: 4, 3, 9, 1 → the same.
    const Cube h = image_cube({{5, 4, 9}, {3, 9, 9}, {9, 1, 9}}, DType::U8);
    const auto [d, parent] = library_phases(h, 8);
    EXPECT_EQ(parent[4], 7) << "the centre's arrow points at the lowest neighbour (0 + 1·3 + 1 = index 7)";
    const auto [d4, parent4] = library_phases(h, 4);
    EXPECT_EQ(parent4[4], 7) << "4-conn: neighbours 4, 3, 9, 1 → the 1 below";
    // Ties between equally low neighbours go to the first in order.
    const Cube t = image_cube({{9, 2, 9}, {2, 9, 2}, {9, 2, 9}}, DType::U8);
    EXPECT_EQ(library_phases(t, 4).second[4], 1) << "(−1, 0) first";
    const Cube t8 = image_cube({{9, 9, 2}, {9, 9, 9}, {2, 9, 2}}, DType::U8);
    EXPECT_EQ(library_phases(t8, 8).second[4], 2) << "(−1, +1) before (+1, −1) and (+1, +1)";
}

TEST(WatershedHand, CasesHaveTheirHandComputedAnswers) {  // shared with the GPU test
    for (const HandCase& h : hand_cases()) {
        SCOPED_TRACE(h.c.name);
        const WatershedResult w = watershed(cpu_context(), h.c.height, h.c.options, h.c.inputs());
        EXPECT_EQ(w.regions, h.regions);
        EXPECT_EQ(labels_of(w.labels), h.labels);
        check_case(h.c);
    }
}

// ---- Markers ----------------------------------------------------------------------------------

TEST(WatershedMarkers, TwoMarkersOnAValleyKeepTheirLabels) {
    // h = |x − 5| on 1×11 has one minimum (x = 5); seeds 7 at x = 1 and 42 at x = 9. Imposition:
    // seeds lowest, x = 2..8 filled to the level of h(2) = h(8) = 3 (the pass out of each seed),
    // x = 0 and 10 stay 5. The plateau x = 2..8 drains to both seeds; its middle (x = 5, d = 3)
    // takes its first neighbour in order (left): x 0..5 → 7, x 6..10 → 42.
    const std::vector<double> valley = {5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5};
    for (DType relief_type : {DType::U8, DType::I16, DType::F32, DType::F64})
        for (DType marker_type : {DType::U8, DType::U16, DType::I16, DType::U32, DType::I32})
            for (int conn : {4, 8}) {
                SCOPED_TRACE(std::string(dtype_name(relief_type)) + " markers " + std::string(dtype_name(marker_type)) + " c" + std::to_string(conn));
                const Cube markers = row_cube({0, 7, 0, 0, 0, 0, 0, 0, 0, 42, 0}, marker_type);
                const CubeView mv = markers.view();
                const WatershedResult w = watershed(cpu_context(), row_cube(valley, relief_type), with_connectivity(conn), {.markers = &mv});
                EXPECT_EQ(w.regions, 2);
                EXPECT_EQ(labels_of(w.labels), ints({7, 7, 7, 7, 7, 7, 42, 42, 42, 42, 42}));
            }
    // Without markers: one region.
    EXPECT_EQ(watershed(cpu_context(), row_cube(valley)).regions, 1);
}

TEST(WatershedMarkers, TouchingMarkersKeepTheirLabels) {
    // A constant row, seeds 5 at x = 2 and 9 at x = 3 (touching): each side drains to its seed.
    const Cube markers = row_cube({0, 0, 5, 9, 0, 0}, DType::I32);
    const CubeView mv = markers.view();
    for (int conn : {4, 8}) {
        const WatershedResult w = watershed(cpu_context(), row_cube({3, 3, 3, 3, 3, 3}), with_connectivity(conn), {.markers = &mv});
        EXPECT_EQ(w.regions, 2);
        EXPECT_EQ(labels_of(w.labels), ints({5, 5, 5, 9, 9, 9}));
    }
    // 2-D: a 2×2 seed block of four labels on a constant 6×6; each quadrant drains to its corner.
    Cube m(6, 6, 1, DType::U16);
    m.at<std::uint16_t>(2, 2, 0) = 11;
    m.at<std::uint16_t>(3, 2, 0) = 22;
    m.at<std::uint16_t>(2, 3, 0) = 33;
    m.at<std::uint16_t>(3, 3, 0) = 44;
    const CubeView m2 = m.view();
    const WatershedResult w = watershed(cpu_context(), constant({6, 6}, DType::U8, 0), with_connectivity(4), {.markers = &m2});
    EXPECT_EQ(w.regions, 4);
    for (int y = 0; y < 6; ++y)
        for (int x = 0; x < 6; ++x) {
            // 4-conn: a pixel's distance to the seed block is |dx| + |dy| to its nearest seed pixel
            // and the first neighbour in order (up, left, right, down) on the shortest path wins.
            // Quadrants are exact where no tie arises: x ≤ 2, y ≤ 2 → 11, etc.
            const bool left = x <= 2, top = y <= 2;
            const int expected = top ? (left ? 11 : 22) : (left ? 33 : 44);
            EXPECT_EQ(w.labels.at<std::int32_t>(x, y, 0), expected) << "x " << x << " y " << y;
        }
}

TEST(WatershedMarkers, MarkersAtTheConeCentresRelabelTheUnmarkedRegions) {
    // Seeds on the two minima of the cones: the imposed relief orders the pixels as the cones do,
    // so the regions are the unmarked ones with labels 42 (first centre) and 7 (second).
    for (const Case& c : cone_cases()) {
        SCOPED_TRACE(c.name);
        const WatershedResult plain = watershed(cpu_context(), c.height, c.options);
        Cube markers(c.height.width(), c.height.height(), 1, DType::I32);
        int k = 0;
        for (int y = 0; y < c.height.height(); ++y)
            for (int x = 0; x < c.height.width(); ++x)
                if (c.height.value(x, y, 0) == 0) markers.at<std::int32_t>(x, y, 0) = k++ == 0 ? 42 : 7;
        const CubeView mv = markers.view();
        const WatershedResult w = watershed(cpu_context(), c.height, c.options, {.markers = &mv});
        EXPECT_EQ(w.regions, 2);
        const std::vector<std::int32_t> a = labels_of(plain.labels), b = labels_of(w.labels);
        std::size_t bad = 0;
        for (std::size_t p = 0; p < a.size(); ++p) bad += b[p] != (a[p] == 1 ? 42 : 7);
        EXPECT_EQ(bad, 0u);
    }
}

TEST(WatershedMarkers, MaskComponentWithoutAMarkerGetsZero) {
    // 9×5 relief, column x = 4 masked out: the left component holds seed 13, the right none.
    const Cube h = ties({9, 5}, 77);
    Cube mask = constant({9, 5}, DType::U8, 1), markers(9, 5, 1, DType::I32);
    for (int y = 0; y < 5; ++y) mask.at<std::uint8_t>(4, y, 0) = 0;
    markers.at<std::int32_t>(1, 2, 0) = 13;
    const CubeView mv = markers.view(), kv = mask.view();
    for (int conn : {4, 8}) {
        const WatershedResult w = watershed(cpu_context(), h, with_connectivity(conn), {.markers = &mv, .mask = &kv});
        EXPECT_EQ(w.regions, 1);
        for (int y = 0; y < 5; ++y)
            for (int x = 0; x < 9; ++x) EXPECT_EQ(w.labels.at<std::int32_t>(x, y, 0), x < 4 ? 13 : 0) << "x " << x << " y " << y;
    }
    // A seed outside the mask seeds nothing.
    markers.at<std::int32_t>(4, 0, 0) = 99;
    const WatershedResult w = watershed(cpu_context(), h, with_connectivity(8), {.markers = &mv, .mask = &kv});
    EXPECT_EQ(w.regions, 1);
    EXPECT_EQ(w.labels.at<std::int32_t>(4, 0, 0), 0);
    EXPECT_EQ(w.labels.at<std::int32_t>(5, 0, 0), 0);
}

TEST(WatershedMarkers, NegativeMarkerValuesAreNoSeeds) {
    // i16 markers: −3 and −1 are "no seed" (> 0 = seed). In the right component (no positive seed)
    // every label must be 0, never the negative marker value.
    const Cube h = ties({9, 5}, 78);
    Cube mask = constant({9, 5}, DType::U8, 1), markers = constant({9, 5}, DType::I16, -3);
    for (int y = 0; y < 5; ++y) mask.at<std::uint8_t>(4, y, 0) = 0;
    markers.at<std::int16_t>(0, 0, 0) = 6;
    const CubeView mv = markers.view(), kv = mask.view();
    const WatershedResult w = watershed(cpu_context(), h, with_connectivity(8), {.markers = &mv, .mask = &kv});
    EXPECT_EQ(w.regions, 1);
    for (int y = 0; y < 5; ++y)
        for (int x = 0; x < 9; ++x) EXPECT_EQ(w.labels.at<std::int32_t>(x, y, 0), x < 4 ? 6 : 0) << "x " << x << " y " << y;
    // Without a mask and without any positive seed: everything 0, R = 0.
    const Cube none = constant({5, 4}, DType::I32, -1);
    const CubeView nv = none.view();
    const WatershedResult z = watershed(cpu_context(), ties({5, 4}, 79), {}, {.markers = &nv});
    EXPECT_EQ(z.regions, 0);
    EXPECT_EQ(labels_of(z.labels), std::vector<std::int32_t>(20, 0));
}

TEST(WatershedMarkers, EveryIntegerMarkerTypeGivesTheSameLabels) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Size s{45, 38};
    const Cube h = smooth(s, seed, DType::U16, 300);
    const Cube m = random_markers(s, seed + 1, 12, true, DType::U8);  // labels ≤ 255 fit every type
    const CubeView base = m.view();
    const WatershedResult ref = watershed(cpu_context(), h, {}, {.markers = &base});
    for (DType t : {DType::U16, DType::I16, DType::U32, DType::I32}) {
        const Cube mt = m.to_dtype(t);
        const CubeView v = mt.view();
        const WatershedResult w = watershed(cpu_context(), h, {}, {.markers = &v});
        EXPECT_EQ(w.regions, ref.regions) << dtype_name(t);
        EXPECT_TRUE(testing::cubes_identical(ref.labels, w.labels)) << dtype_name(t);
    }
}

TEST(WatershedMarkers, RandomCasesMatchTheLiteralImposition) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    check_cases(marker_cases(seed));
}

// ---- Mask -------------------------------------------------------------------------------------

TEST(WatershedMask, AWallOfMaskedPixelsSplitsAPlateau) {
    Cube mask = constant({9, 7}, DType::U8, 1);
    for (int y = 0; y < 7; ++y) mask.at<std::uint8_t>(4, y, 0) = 0;
    const CubeView kv = mask.view();
    for (int conn : {4, 8}) {
        const WatershedResult w = watershed(cpu_context(), constant({9, 7}, DType::F32, 2), with_connectivity(conn), {.mask = &kv});
        EXPECT_EQ(w.regions, 2);
        for (int y = 0; y < 7; ++y)
            for (int x = 0; x < 9; ++x) EXPECT_EQ(w.labels.at<std::int32_t>(x, y, 0), x < 4 ? 1 : x == 4 ? 0 : 2) << "x " << x << " y " << y;
    }
    // A diagonal wall: 4-connectivity cannot cross it, 8-connectivity can (between the wall's
    // diagonal steps), so the two halves stay one plateau with 8.
    Cube diagonal = constant({6, 6}, DType::U8, 1);
    for (int k = 0; k < 6; ++k) diagonal.at<std::uint8_t>(k, k, 0) = 0;
    const CubeView dv = diagonal.view();
    EXPECT_EQ(watershed(cpu_context(), constant({6, 6}, DType::U8, 3), with_connectivity(4), {.mask = &dv}).regions, 2);
    EXPECT_EQ(watershed(cpu_context(), constant({6, 6}, DType::U8, 3), with_connectivity(8), {.mask = &dv}).regions, 1);
}

TEST(WatershedMask, OutsidePixelsAreNobodysNeighbour) {
    // 1×5 h = 5 5 0 5 5 with x = 2 outside: each side is a flat zone without a lower neighbour.
    const Cube mask = row_cube({1, 1, 0, 1, 1}, DType::U8);
    const CubeView kv = mask.view();
    for (int conn : {4, 8}) {
        const WatershedResult w = watershed(cpu_context(), row_cube({5, 5, 0, 5, 5}), with_connectivity(conn), {.mask = &kv});
        EXPECT_EQ(w.regions, 2);
        EXPECT_EQ(labels_of(w.labels), ints({1, 1, 0, 2, 2}));
        EXPECT_EQ(watershed(cpu_context(), row_cube({5, 5, 0, 5, 5}), with_connectivity(conn)).regions, 1) << "without the mask";
    }
    // Any nonzero mask value is inside.
    const Cube mask2 = row_cube({255, 7, 0, 1, 128}, DType::U8);
    const CubeView k2 = mask2.view();
    EXPECT_EQ(labels_of(watershed(cpu_context(), row_cube({5, 5, 0, 5, 5}), {}, {.mask = &k2}).labels), ints({1, 1, 0, 2, 2}));
}

TEST(WatershedMask, LevelsRangeIsTakenOverTheInside) {
    // Inside 0 2 1 2 0 (levels 3 keeps it: range 0..2), outside 1000: three minima. Were the range
    // taken over all pixels, every inside height would quantise to 0: one region.
    const Cube h = row_cube({0, 2, 1, 2, 0, 1000});
    const Cube mask = row_cube({1, 1, 1, 1, 1, 0}, DType::U8);
    const CubeView kv = mask.view();
    WatershedOptions o;
    o.levels = 3;
    const WatershedResult w = watershed(cpu_context(), h, o, {.mask = &kv});
    EXPECT_EQ(w.regions, 3);
    EXPECT_EQ(labels_of(w.labels), ints({1, 1, 2, 3, 3, 0}));
}

TEST(WatershedMask, RandomCasesMatchTheLiteralAutomaton) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    check_cases(mask_cases(seed));
}

// ---- levels and h-minima ----------------------------------------------------------------------

std::vector<std::uint32_t> quantized(const Cube& h, std::int64_t levels) {
    const Cube q = quantize_levels(cpu_context(), h, levels);
    EXPECT_EQ(q.dtype(), DType::U32);
    return std::vector<std::uint32_t>(q.data<std::uint32_t>(), q.data<std::uint32_t>() + q.num_elements());
}

TEST(WatershedLevels, QuantizeLevelsHandChecked) {
    using V = std::vector<std::uint32_t>;
    // (h − 0)/4·2: 0, 0.5 → 1 (half away from zero), 2.
    EXPECT_EQ(quantized(row_cube({0, 1, 4}), 3), V({0, 1, 2}));
    // 3/4·2 = 1.5 → 2; 5/8·4 = 2.5 → 3; 1/8·4 = 0.5 → 1; 3/8·4 = 1.5 → 2.
    EXPECT_EQ(quantized(row_cube({0, 3, 4}), 3), V({0, 2, 2}));
    EXPECT_EQ(quantized(row_cube({0, 1, 3, 5, 8}), 5), V({0, 1, 2, 3, 4}));
    EXPECT_EQ(quantized(row_cube({8, 5, 3, 1, 0}, DType::F32), 5), V({4, 3, 2, 1, 0}));
    // Negative heights: the offset is the minimum. (−3 + 4)/4·2 = 0.5 → 1.
    EXPECT_EQ(quantized(row_cube({-4, -3, 0}, DType::I16), 3), V({0, 1, 2}));
    EXPECT_EQ(quantized(row_cube({-4, -3, 0}, DType::I32), 3), V({0, 1, 2}));
    // A constant relief: all 0.
    EXPECT_EQ(quantized(row_cube({7, 7, 7}, DType::U8), 10), V({0, 0, 0}));
    // u8 0..255 with 256 levels: the identity; with 2 levels: 127/255 < 0.5 → 0, 128 → 1.
    Cube all(256, 1, 1, DType::U8);
    V identity(256), two(256);
    for (int x = 0; x < 256; ++x) all.at<std::uint8_t>(x, 0, 0) = std::uint8_t(x), identity[std::size_t(x)] = std::uint32_t(x), two[std::size_t(x)] = x >= 128;
    EXPECT_EQ(quantized(all, 256), identity);
    EXPECT_EQ(quantized(all, 2), two);
    // f64 with fractional steps: (h − 0.5)/2·10: 0.25·10 = 2.5 → 3, 0.75·10 = 7.5 → 8.
    EXPECT_EQ(quantized(row_cube({0.5, 1.0, 1.5, 2.0, 2.5}), 11), V({0, 3, 5, 8, 10}));
    // A volume (bands are z-slices): the range is over all of it.
    Cube vol(2, 1, 2, DType::U16);
    vol.at<std::uint16_t>(0, 0, 0) = 0;
    vol.at<std::uint16_t>(1, 0, 0) = 10;
    vol.at<std::uint16_t>(0, 0, 1) = 5;
    vol.at<std::uint16_t>(1, 0, 1) = 40;
    EXPECT_EQ(quantized(vol, 5), V({0, 1, 1, 4}));  // 10/40·4 = 1, 5/40·4 = 0.5 → 1
    // Large level counts: u32 output up to levels − 1 = 2^32 − 1.
    EXPECT_EQ(quantized(row_cube({0, 1}), std::int64_t(1) << 32), V({0, 4294967295u}));
}

TEST(WatershedLevels, LevelsMergeNearbyMinima) {
    // 1×7 h = 0 3 1 10 20 30 40: two minima (x 0 and x 2). levels 3 → round(h/40·2) =
    // 0 0 0 1 1 2 2: one flat minimum, one region. levels 41 keeps the order: two regions.
    const Cube h = row_cube({0, 3, 1, 10, 20, 30, 40});
    for (int conn : {4, 8}) {
        WatershedOptions o = with_connectivity(conn);
        EXPECT_EQ(watershed(cpu_context(), h, o).regions, 2);
        o.levels = 3;
        const WatershedResult w = watershed(cpu_context(), h, o);
        EXPECT_EQ(w.regions, 1);
        EXPECT_EQ(labels_of(w.labels), std::vector<std::int32_t>(7, 1));
        o.levels = 41;
        EXPECT_EQ(labels_of(watershed(cpu_context(), h, o).labels), ints({1, 1, 2, 2, 2, 2, 2}));
    }
}

TEST(WatershedLevels, WatershedWithLevelsIsTheWatershedOfTheQuantizedRelief) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (Case& c : filter_cases(seed)) {
        if (c.options.levels == 0 || c.options.h_min > 0 || c.markers || c.mask) continue;
        SCOPED_TRACE(c.name);
        const Cube q = quantize_levels(cpu_context(), c.height, c.options.levels);
        const WatershedResult a = watershed(cpu_context(), c.height, c.options);
        const WatershedResult b = watershed(cpu_context(), q, with_connectivity(c.options.connectivity));
        EXPECT_EQ(a.regions, b.regions);
        EXPECT_TRUE(testing::cubes_identical(a.labels, b.labels));
    }
}

TEST(WatershedHMin, ShallowMinimumMergesDeepOneStays) {
    // 1×5 h = 5 0 5 3 5: minima at x 1 (depth 5) and x 3 (depth 2, to its walls of 5).
    const Cube h = row_cube({5, 0, 5, 3, 5});
    for (DType t : {DType::U8, DType::I16, DType::U32, DType::F32, DType::F64})
        for (int conn : {4, 8}) {
            SCOPED_TRACE(std::string(dtype_name(t)) + " c" + std::to_string(conn));
            const Cube ht = h.to_dtype(t);
            WatershedOptions o = with_connectivity(conn);
            EXPECT_EQ(watershed(cpu_context(), ht, o).regions, 2);
            o.h_min = 1.5;  // < 2: both stay
            EXPECT_EQ(labels_of(watershed(cpu_context(), ht, o).labels), ints({1, 1, 1, 2, 2}));
            o.h_min = 3;  // 2 < 3 ≤ 5: the shallow one merges into the deep one's region
            WatershedResult w = watershed(cpu_context(), ht, o);
            EXPECT_EQ(w.regions, 1);
            EXPECT_EQ(labels_of(w.labels), ints({1, 1, 1, 1, 1}));
            // Depth exactly h: filled as well (Soille's h-minima transform suppresses the minima
            // of dynamic ≤ h: the reconstruction of h + 2 brings x 3 up to its pass, 5).
            o.h_min = 2;
            EXPECT_EQ(watershed(cpu_context(), ht, o).regions, 1);
            o.h_min = 6;  // deeper than every minimum: the global minimum stays (one region)
            EXPECT_EQ(watershed(cpu_context(), ht, o).regions, 1);
        }
}

TEST(WatershedHMin, ABasinWithAShallowPitIn2D) {
    // A bowl (squared distance to (10, 10) on 21×21, f32) with two pits: (16, 10) set to 24.5,
    // 0.5 below its lowest neighbour (15, 10) = 25, and (3, 3) lowered by 30 to 68, 4 below its
    // lowest 8-neighbour (4, 4) = 72 (17 below its lowest 4-neighbour, 85): h_min 1 fills the
    // first only, h_min 31 both.
    Cube h = cones({21, 21}, {10, 10}, {10, 10}, DType::F32);
    h.at<float>(16, 10, 0) = 24.5f;
    h.at<float>(3, 3, 0) = 68.0f;
    for (int conn : {4, 8}) {
        WatershedOptions o = with_connectivity(conn);
        EXPECT_EQ(watershed(cpu_context(), h, o).regions, 3);
        o.h_min = 1;
        EXPECT_EQ(watershed(cpu_context(), h, o).regions, 2);
        o.h_min = 31;
        EXPECT_EQ(watershed(cpu_context(), h, o).regions, 1);
    }
}

TEST(WatershedHMin, RandomCasesMatchTheLiteralReconstruction) {  // levels and h-minima, with markers and masks
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    check_cases(filter_cases(seed));
}

// ---- Volumes ------------------------------------------------------------------------------------

TEST(WatershedVolume, TwoConesVolumeIsTwoRegionsByTheBallRule) {
    const Size s{40, 30, 20};
    const Point c1{8, 6, 4}, c2{30, 22, 15};
    for (DType t : {DType::I32, DType::F32})
        for (int conn : {6, 26}) {
            SCOPED_TRACE(std::string(dtype_name(t)) + " c" + std::to_string(conn));
            const WatershedResult w = watershed(cpu_context(), cones(s, c1, c2, t), with_connectivity(conn));
            ASSERT_EQ(w.regions, 2);
            const double radius = std::sqrt(double(squared_distance(c1.x, c1.y, c1.z, c2))) / 2 - 2;
            for (int z = 0; z < s.d; ++z)
                for (int y = 0; y < s.h; ++y)
                    for (int x = 0; x < s.w; ++x) {
                        if (double(squared_distance(x, y, z, c1)) <= radius * radius) {
                            ASSERT_EQ(w.labels.at<std::int32_t>(x, y, z), 1);
                        }
                        if (double(squared_distance(x, y, z, c2)) <= radius * radius) {
                            ASSERT_EQ(w.labels.at<std::int32_t>(x, y, z), 2);
                        }
                    }
        }
}

TEST(WatershedVolume, IdenticalSlicesGiveThe2DLabelsInEverySlice) {
    // They must: the z-neighbours of a pixel have its own height, so they are never lower (Phase 1
    // lower borders and d are the 2-D ones, a flat zone's distance is not shortened by leaving the
    // slice), never the strictly lowest (Phase 2's steepest arrow picks the 2-D column; with 26 the
    // z − 1 copy of that column comes first in order but holds the same label), never at d − 1,
    // and each minimum spans all slices with its first pixel in slice 0 (same ranks).
    // So 6 ↔ 4 and 26 ↔ 8.
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (Size s : {Size{33, 31}, Size{1, 20}, Size{20, 1}, Size{64, 48}})
        for (int depth : {1, 2, 5}) {
            const Cube plane = ties(s, seed + std::uint64_t(s.w) * 7 + depth);
            Cube vol(s.w, s.h, depth, DType::U8);
            for (int z = 0; z < depth; ++z)
                for (int y = 0; y < s.h; ++y)
                    for (int x = 0; x < s.w; ++x) vol.at<std::uint8_t>(x, y, z) = plane.at<std::uint8_t>(x, y, 0);
            for (auto [c2, c3] : {std::pair{4, 6}, std::pair{8, 26}}) {
                SCOPED_TRACE(size_text(s) + "x" + std::to_string(depth) + " c" + std::to_string(c3));
                const WatershedResult a = watershed(cpu_context(), plane, with_connectivity(c2));
                const WatershedResult b = watershed(cpu_context(), vol, with_connectivity(c3));
                EXPECT_EQ(a.regions, b.regions);
                std::size_t bad = 0;
                for (int z = 0; z < depth; ++z)
                    for (int y = 0; y < s.h; ++y)
                        for (int x = 0; x < s.w; ++x) bad += a.labels.at<std::int32_t>(x, y, 0) != b.labels.at<std::int32_t>(x, y, z);
                EXPECT_EQ(bad, 0u);
            }
        }
}

TEST(WatershedVolume, RandomCasesMatchTheLiteralAutomaton) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    check_cases(volume_cases(seed));
}

TEST(WatershedVolume, ALayerOfLowPixelsDrainsAcrossSlices) {
    // 3×3×3: slice 1 is 0 everywhere (one flat minimum spanning the slice), slices 0 and 2 are
    // 5: every pixel drains to slice 1: one region with 6 and 26.
    Cube v = constant({3, 3, 3}, DType::U8, 5);
    for (int y = 0; y < 3; ++y)
        for (int x = 0; x < 3; ++x) v.at<std::uint8_t>(x, y, 1) = 0;
    for (int conn : {6, 26}) EXPECT_EQ(watershed(cpu_context(), v, with_connectivity(conn)).regions, 1);
    // A 1×1×5 column 2 1 3 0 4: minima at z 1 and z 3: labels 1 1 1 2 2 (z 2 drains to its lowest
    // neighbour, z 3).
    Cube col(1, 1, 5, DType::I32);
    const int values[] = {2, 1, 3, 0, 4};
    for (int z = 0; z < 5; ++z) col.at<std::int32_t>(0, 0, z) = values[z];
    for (int conn : {6, 26}) EXPECT_EQ(labels_of(watershed(cpu_context(), col, with_connectivity(conn)).labels), ints({1, 1, 2, 2, 2}));
}

// ---- Large plateaus (the GPU test runs these against the CPU) --------------------------------

TEST(WatershedCpu, LargePlateausHaveTheIndependentRegionCountAndConnectedRegions) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Case& c : plateau_cases(seed, true)) {
        if (c.height.num_elements() < 500000) continue;
        check_case(c, 0);
    }
}

// ---- Boundary map ---------------------------------------------------------------------------

TEST(WatershedBoundary, HandComputed2D) {
    Cube labels(4, 3, 1, DType::I32);
    const int l[3][4] = {{1, 1, 2, 2}, {1, 1, 2, 2}, {3, 3, 3, 2}};
    for (int y = 0; y < 3; ++y)
        for (int x = 0; x < 4; ++x) labels.at<std::int32_t>(x, y, 0) = l[y][x];
    const std::uint8_t four[3][4] = {{0, 1, 0, 0}, {1, 1, 1, 0}, {0, 0, 1, 0}};
    const std::uint8_t eight[3][4] = {{0, 1, 1, 0}, {1, 1, 1, 1}, {0, 0, 1, 0}};
    const Cube b4 = watershed_boundary(cpu_context(), labels, 4), b8 = watershed_boundary(cpu_context(), labels, 8);
    ASSERT_EQ(b4.dtype(), DType::U8);
    for (int y = 0; y < 3; ++y)
        for (int x = 0; x < 4; ++x) {
            EXPECT_EQ(b4.at<std::uint8_t>(x, y, 0), four[y][x]) << "4: x " << x << " y " << y;
            EXPECT_EQ(b8.at<std::uint8_t>(x, y, 0), eight[y][x]) << "8: x " << x << " y " << y;
        }
    // A single region: no boundary; a BIP-strided i32 view reads the same.
    EXPECT_EQ(watershed_boundary(cpu_context(), constant({5, 4}, DType::I32, 3)).value(2, 2, 0), 0);
}

TEST(WatershedBoundary, VolumeUsesOnlyInGridForwardNeighbours) {
    // W 1, H 3, D 2: labels 1 1 2 in both slices (y = 0..2). Pixel (0, 0, 0): its forward
    // neighbours in the grid are (y 1, z 0), (y 0, z 1), (y 1, z 1), all label 1 → 0. The 26
    // forward step (dz +1, dy −1) leaves the grid at y = 0 and must be skipped (not read as the
    // last row of slice 0, label 2).
    // FAILS as of this writing: watershed_boundary (src/watershed/watershed.cpp) tests qx < 0 but
    // not qy < 0, and the 26-neighbourhood's forward steps (+1, −1, dx) have dy = −1, so at y = 0 it
    // reads ((z + 1)·H − 1)·W + qx, a pixel of the last row of slice z (an in-bounds but wrong
    // sample; at z = D − 1 the step is skipped by qz ≥ D). Fix: add `qy < 0 ||` to that test.
    Cube labels(1, 3, 2, DType::I32);
    for (int z = 0; z < 2; ++z) {
        labels.at<std::int32_t>(0, 0, z) = 1;
        labels.at<std::int32_t>(0, 1, z) = 1;
        labels.at<std::int32_t>(0, 2, z) = 2;
    }
    for (int conn : {6, 26}) {
        SCOPED_TRACE("c" + std::to_string(conn));
        const Cube b = watershed_boundary(cpu_context(), labels, conn, true);
        EXPECT_EQ(b.at<std::uint8_t>(0, 0, 0), 0) << "(y 0, z 0): no forward neighbour differs";
        EXPECT_EQ(b.at<std::uint8_t>(0, 1, 0), 1) << "(y 1, z 0): (y 2) below differs";
        EXPECT_EQ(b.at<std::uint8_t>(0, 2, 0), conn == 26 ? 1 : 0) << "(y 2, z 0): 26 sees (y 1, z 1)";
        EXPECT_EQ(b.at<std::uint8_t>(0, 0, 1), 0);
        EXPECT_EQ(b.at<std::uint8_t>(0, 1, 1), 1);
        EXPECT_EQ(b.at<std::uint8_t>(0, 2, 1), 0);
    }
    // Slices: a different label in the next slice marks the pixel.
    Cube two(2, 2, 2, DType::I32);
    for (int y = 0; y < 2; ++y)
        for (int x = 0; x < 2; ++x) two.at<std::int32_t>(x, y, 0) = 1, two.at<std::int32_t>(x, y, 1) = 2;
    const Cube b = watershed_boundary(cpu_context(), two, 6, true);
    for (int y = 0; y < 2; ++y)
        for (int x = 0; x < 2; ++x) {
            EXPECT_EQ(b.at<std::uint8_t>(x, y, 0), 1);
            EXPECT_EQ(b.at<std::uint8_t>(x, y, 1), 0);
        }
}

// ---- Views ------------------------------------------------------------------------------------

TEST(WatershedViews, WindowInputAndStridedOutputOnTheHost) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube big = ties({70, 50}, seed);
    const CubeView win = big.view().window(9, 5, 41, 37);
    const WatershedResult ref = watershed(cpu_context(), big.crop(9, 5, 41, 37));
    // Output: a window of a larger i32 cube poisoned with 0x7F bytes; the rest must stay poisoned.
    Cube out(60, 45, 1, DType::I32);
    std::memset(out.bytes(), 0x7F, out.num_bytes());
    const std::int64_t regions = watershed_into(cpu_context(), win, out.mutable_view().window(3, 4, 41, 37));
    EXPECT_EQ(regions, ref.regions);
    std::size_t bad = 0, poisoned = 0;
    for (int y = 0; y < 45; ++y)
        for (int x = 0; x < 60; ++x) {
            const bool in = x >= 3 && x < 44 && y >= 4 && y < 41;
            if (in) bad += out.at<std::int32_t>(x, y, 0) != ref.labels.at<std::int32_t>(x - 3, y - 4, 0);
            else poisoned += out.at<std::int32_t>(x, y, 0) == 0x7F7F7F7F;
        }
    EXPECT_EQ(bad, 0u);
    EXPECT_EQ(poisoned, 60u * 45u - 41u * 37u);
    // One band of a BIP cube (x stride = bands) as the relief, and markers/mask in BIP.
    Cube bip(30, 20, 3, DType::F32, Layout::BIP);
    for (int b = 0; b < 3; ++b)
        for (int y = 0; y < 20; ++y)
            for (int x = 0; x < 30; ++x) bip.at<float>(x, y, b) = float((x * 7 + y * 13 + b * 5) % 11);
    const Cube band1 = Cube::from_view(bip.view().band_range(1, 1), Layout::BSQ);
    EXPECT_TRUE(testing::cubes_identical(watershed(cpu_context(), band1).labels,
                                         watershed(cpu_context(), bip.view().band_range(1, 1)).labels));
}

TEST(WatershedViews, AVolumeInEveryLayoutGivesTheSameLabels) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Size s{21, 17, 6};
    const Cube v = ties(s, seed);
    const Cube m = random_markers(s, seed + 1, 5, true), k = random_mask(s, seed + 2);
    const CubeView mv = m.view(), kv = k.view();
    const WatershedOptions o = with_connectivity(26);
    const WatershedResult ref = watershed(cpu_context(), v, o, {.markers = &mv, .mask = &kv});
    for (Layout l : {Layout::BIL, Layout::BIP}) {
        const Cube vl = v.to_layout(l), ml = m.to_layout(l), kl = k.to_layout(l);
        const CubeView mlv = ml.view(), klv = kl.view();
        const WatershedResult w = watershed(cpu_context(), vl, o, {.markers = &mlv, .mask = &klv});
        EXPECT_EQ(w.regions, ref.regions) << layout_name(l);
        EXPECT_TRUE(testing::cubes_identical(ref.labels, w.labels)) << layout_name(l);
    }
}

// ---- Bad inputs ---------------------------------------------------------------------------------

#define EXPECT_MESSAGE_HAS(message, text) \
    EXPECT_NE((message).find(text), std::string::npos) << "message: " << (message) << "\nexpected to contain: " << (text)

TEST(WatershedErrors, NaNIsRefusedNamingThePixel) {
    Cube f(5, 4, 1, DType::F32);
    f.at<float>(2, 1, 0) = std::nanf("");
    f.at<float>(4, 3, 0) = std::nanf("");
    std::string m = invalid_input_message([&] { watershed(cpu_context(), f); });
    EXPECT_MESSAGE_HAS(m, "NaN");
    EXPECT_MESSAGE_HAS(m, "x 2");
    EXPECT_MESSAGE_HAS(m, "y 1");
    // f64 volume: the band (z-slice) is named.
    Cube d(3, 3, 4, DType::F64);
    d.at<double>(1, 2, 3) = std::nan("");
    WatershedOptions o = with_connectivity(6);
    m = invalid_input_message([&] { watershed(cpu_context(), d, o); });
    EXPECT_MESSAGE_HAS(m, "NaN");
    EXPECT_MESSAGE_HAS(m, "x 1");
    EXPECT_MESSAGE_HAS(m, "y 2");
    EXPECT_MESSAGE_HAS(m, "band 3");
    // With levels and with markers too (the check precedes every stage).
    o = {};
    o.levels = 8;
    EXPECT_MESSAGE_HAS(invalid_input_message([&] { watershed(cpu_context(), f, o); }), "NaN");
    EXPECT_MESSAGE_HAS(invalid_input_message([&] { quantize_levels(cpu_context(), f, 8); }), "NaN");
    // ±inf is comparable: accepted.
    Cube g(3, 1, 1, DType::F32);
    g.at<float>(0, 0, 0) = -INFINITY;
    g.at<float>(2, 0, 0) = INFINITY;
    EXPECT_EQ(watershed(cpu_context(), g).regions, 1);
}

TEST(WatershedErrors, BadOptionsNameTheField) {
    const Cube h = ties({6, 5}, 1), vol = ties({6, 5, 3}, 2);
    auto message = [&](const Cube& relief, WatershedOptions o) { return invalid_input_message([&] { watershed(cpu_context(), relief, o); }); };
    WatershedOptions o;
    o.connectivity = 6;  // without volume
    EXPECT_MESSAGE_HAS(message(h, o), "connectivity");
    o.connectivity = 26;
    EXPECT_MESSAGE_HAS(message(h, o), "connectivity");
    o.connectivity = 5;
    EXPECT_MESSAGE_HAS(message(h, o), "connectivity");
    o.connectivity = 4;  // 2-D connectivity with volume
    o.volume = true;
    EXPECT_MESSAGE_HAS(message(vol, o), "connectivity");
    o = {};  // bands > 1 without volume
    std::string m = message(vol, o);
    EXPECT_MESSAGE_HAS(m, "bands");
    EXPECT_MESSAGE_HAS(m, "volume");
    o.levels = 1;
    EXPECT_MESSAGE_HAS(message(h, o), "levels");
    o.levels = -2;
    EXPECT_MESSAGE_HAS(message(h, o), "levels");
    o.levels = (std::int64_t(1) << 32) + 1;
    EXPECT_MESSAGE_HAS(message(h, o), "levels");
    o = {};
    o.h_min = -1;
    EXPECT_MESSAGE_HAS(message(h, o), "h_min");
    EXPECT_MESSAGE_HAS(invalid_input_message([&] { quantize_levels(cpu_context(), h, 1); }), "levels");
    EXPECT_MESSAGE_HAS(invalid_input_message([&] { quantize_levels(cpu_context(), h, 0); }), "levels");
    EXPECT_MESSAGE_HAS(invalid_input_message([&] { watershed(cpu_context(), Cube(0, 5, 1, DType::U8)); }), "relief");
    // The labels of watershed_into: i32 of the relief's shape.
    Cube wrong(6, 5, 1, DType::U32);
    EXPECT_MESSAGE_HAS(invalid_input_message([&] { watershed_into(cpu_context(), h, wrong.mutable_view()); }), "labels");
    Cube small(5, 5, 1, DType::I32);
    EXPECT_MESSAGE_HAS(invalid_input_message([&] { watershed_into(cpu_context(), h, small.mutable_view()); }), "labels");
    // The boundary map wants i32 labels.
    EXPECT_MESSAGE_HAS(invalid_input_message([&] { watershed_boundary(cpu_context(), h); }), "labels");
}

TEST(WatershedErrors, BadMarkersAndMaskNameTheInput) {
    const Cube h = ties({6, 5}, 1);
    const Cube wrong_shape(5, 6, 1, DType::I32), float_markers(6, 5, 1, DType::F32), u16_mask(6, 5, 1, DType::U16),
        mask_shape(6, 4, 1, DType::U8), two_bands(6, 5, 2, DType::I32);
    Cube huge(6, 5, 1, DType::U32);
    huge.at<std::uint32_t>(1, 1, 0) = 3000000000u;
    auto with_markers = [&](const Cube& m) {
        const CubeView v = m.view();
        return invalid_input_message([&] { watershed(cpu_context(), h, {}, {.markers = &v}); });
    };
    auto with_mask = [&](const Cube& k) {
        const CubeView v = k.view();
        return invalid_input_message([&] { watershed(cpu_context(), h, {}, {.mask = &v}); });
    };
    std::string m = with_markers(wrong_shape);
    EXPECT_MESSAGE_HAS(m, "markers");
    EXPECT_MESSAGE_HAS(m, "5x6x1");
    EXPECT_MESSAGE_HAS(with_markers(two_bands), "markers");
    m = with_markers(float_markers);
    EXPECT_MESSAGE_HAS(m, "markers");
    EXPECT_MESSAGE_HAS(m, "f32");
    EXPECT_MESSAGE_HAS(with_markers(huge), "markers");
    m = with_mask(u16_mask);
    EXPECT_MESSAGE_HAS(m, "mask");
    EXPECT_MESSAGE_HAS(m, "u8");
    EXPECT_MESSAGE_HAS(with_mask(mask_shape), "mask");
}


// ---- Small regions (min_area) -----------------------------------------------------------------

// The merge as the header states it, step by step on the pixels (O(merges · pixels), written
// without the library's graph): `labels` are the automaton's, `r` the relief it compared. Returns
// the renumbered labels; `regions` = R'.
std::vector<std::int32_t> naive_min_area(const Relief& r, int connectivity, std::vector<std::int32_t> labels,
                                         std::int64_t min_area, std::int64_t& regions) {
    const Adjacency a = adjacency(r, connectivity);
    std::set<std::int32_t> alone;  // regions found without a neighbour (they never gain one)
    for (;;) {
        std::map<std::int32_t, std::int64_t> area;
        for (std::int64_t p = 0; p < r.size(); ++p)
            if (r.inside[std::size_t(p)] && labels[std::size_t(p)] > 0) ++area[labels[std::size_t(p)]];
        std::optional<std::pair<std::int64_t, std::int32_t>> small;  // (area, label)
        for (const auto& [l, n] : area)
            if (n < min_area && !alone.count(l) && (!small || std::make_pair(n, l) < *small)) small = std::make_pair(n, l);
        if (!small) break;
        const std::int32_t s = small->second;
        std::map<std::int32_t, double> pass;  // neighbour label → lowest max(h(p), h(q))
        for (std::int64_t p = 0; p < r.size(); ++p) {
            if (labels[std::size_t(p)] != s) continue;
            a.each(p, [&](std::int64_t q) {
                const std::int32_t b = labels[std::size_t(q)];
                if (b <= 0 || b == s) return;
                const double m = std::max(r.h[std::size_t(p)], r.h[std::size_t(q)]);
                auto it = pass.find(b);
                if (it == pass.end()) pass[b] = m;
                else it->second = std::min(it->second, m);
            });
        }
        if (pass.empty()) {
            alone.insert(s);
            continue;
        }
        std::pair<double, std::int32_t> best{pass.begin()->second, pass.begin()->first};
        for (const auto& [b, m] : pass) best = std::min(best, std::make_pair(m, b));
        for (std::int32_t& l : labels)
            if (l == s) l = best.second;
    }
    std::map<std::int32_t, std::int32_t> number;
    for (std::int32_t& l : labels) {
        if (l <= 0) continue;
        auto it = number.find(l);
        if (it == number.end()) it = number.emplace(l, std::int32_t(number.size()) + 1).first;
        l = it->second;
    }
    regions = std::int64_t(number.size());
    return labels;
}

// What every merge must give: 0 exactly outside the mask, labels 1..R' numbered by their first
// pixel, each automaton region inside one merged region, every merged region connected, every
// region below A without a neighbour; up to `naive_limit` (pixels × automaton regions) the naive
// merge's labels exactly.
void check_min_area(const Case& c, double naive_limit = 4e7) {
    SCOPED_TRACE(c.name);
    const Relief r = final_relief(c);
    WatershedOptions plain_options = c.options;
    plain_options.min_area = 0;
    const WatershedResult plain = watershed(cpu_context(), c.height, plain_options, c.inputs());
    const WatershedResult merged = watershed(cpu_context(), c.height, c.options, c.inputs());
    const std::vector<std::int32_t> before = labels_of(plain.labels), after = labels_of(merged.labels);
    std::int32_t next = 0;
    std::map<std::int32_t, std::int32_t> image_of;  // automaton label → merged label
    std::map<std::int32_t, std::int64_t> area;
    for (std::int64_t p = 0; p < r.size(); ++p) {
        const std::int32_t l = after[std::size_t(p)];
        ASSERT_EQ(l > 0, bool(r.inside[std::size_t(p)])) << where(r, p);
        if (l == 0) continue;
        ASSERT_LE(l, next + 1) << "labels numbered by their first pixel, at " << where(r, p);
        next = std::max(next, l);
        ++area[l];
        const auto [it, added] = image_of.emplace(before[std::size_t(p)], l);
        ASSERT_EQ(it->second, l) << "automaton region " << before[std::size_t(p)] << " split, at " << where(r, p);
    }
    EXPECT_EQ(merged.regions, next);
    EXPECT_LE(merged.regions, plain.regions);
    const Pieces pieces = components(r, after, c.options.connectivity);
    EXPECT_EQ(std::int64_t(pieces.label.size()), merged.regions) << "every merged region connected";
    std::set<std::int32_t> has_neighbour;
    const Adjacency a = adjacency(r, c.options.connectivity);
    for (std::int64_t p = 0; p < r.size(); ++p)
        a.each(p, [&](std::int64_t q) {
            if (after[std::size_t(q)] != after[std::size_t(p)]) has_neighbour.insert(after[std::size_t(p)]);
        });
    for (const auto& [l, n] : area) {
        if (n >= c.options.min_area) continue;
        EXPECT_FALSE(has_neighbour.count(l)) << "region " << l << " of " << n << " pixels kept";
    }
    if (double(r.size()) * double(plain.regions) > naive_limit) return;
    std::int64_t regions = 0;
    EXPECT_EQ(after, naive_min_area(r, c.options.connectivity, before, c.options.min_area, regions));
    EXPECT_EQ(merged.regions, regions);
}

WatershedOptions with_min_area(int connectivity, std::int64_t min_area) {
    WatershedOptions o = with_connectivity(connectivity);
    o.min_area = min_area;
    return o;
}

TEST(WatershedMinArea, SmallMiddleBasinJoinsTheSideAcrossTheLowerPass) {
    // The header's example: regions 1 (x 0..3), 2 (x 4..6, 3 pixels), 3 (x 7..10); passes 1–2:
    // max(3, 6) = 6, 2–3: max(4, 3) = 4. A = 4: region 2 joins region 3 (the lower pass). Mirrored,
    // the lower pass is on the left and region 2 joins region 1. A = 5: then the 4 pixels of
    // region 1 join the 7 of the union (its only neighbour): one region.
    const std::vector<double> h = {0, 1, 2, 3, 6, 1, 4, 3, 2, 1, 0};
    const std::vector<double> mirrored(h.rbegin(), h.rend());
    for (DType t : {DType::U8, DType::I16, DType::F32, DType::F64})
        for (int conn : {4, 8}) {
            SCOPED_TRACE(std::string(dtype_name(t)) + " c" + std::to_string(conn));
            EXPECT_EQ(labels_of(watershed(cpu_context(), row_cube(h, t), with_min_area(conn, 0)).labels),
                      ints({1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3}));
            WatershedResult w = watershed(cpu_context(), row_cube(h, t), with_min_area(conn, 4));
            EXPECT_EQ(w.regions, 2);
            EXPECT_EQ(labels_of(w.labels), ints({1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2}));
            w = watershed(cpu_context(), row_cube(mirrored, t), with_min_area(conn, 4));
            EXPECT_EQ(w.regions, 2);
            EXPECT_EQ(labels_of(w.labels), ints({1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2}));
            w = watershed(cpu_context(), row_cube(h, t), with_min_area(conn, 5));
            EXPECT_EQ(w.regions, 1);
            EXPECT_EQ(labels_of(w.labels), std::vector<std::int32_t>(11, 1));
        }
}

TEST(WatershedMinArea, EqualPassesGoToTheSmallerNeighbourLabel) {
    // x 6 raised to 6: both passes of the middle region are 6; it joins region 1 (the smaller label).
    const Cube h = row_cube({0, 1, 2, 3, 6, 1, 6, 3, 2, 1, 0}, DType::U8);
    EXPECT_EQ(labels_of(watershed(cpu_context(), h).labels), ints({1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3}));
    const WatershedResult w = watershed(cpu_context(), h, with_min_area(8, 4));
    EXPECT_EQ(w.regions, 2);
    EXPECT_EQ(labels_of(w.labels), ints({1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2}));
}

TEST(WatershedMinArea, EqualAreasMergeTheSmallerLabelFirst) {
    // Regions 1 (x 0..1), 2 (x 2..3), 3 (x 4..8): areas 2, 2, 5; passes 1–2: max(3, 9) = 9, 2–3:
    // max(1, 2) = 2. A = 3: region 1 goes first (label 1 < 2) into its only neighbour, region 2
    // (now 4 pixels, done). Region 2 first would have joined region 3 and left region 1 to follow.
    const Cube h = row_cube({2, 3, 9, 1, 2, 0, 1, 2, 3}, DType::U8);
    EXPECT_EQ(labels_of(watershed(cpu_context(), h).labels), ints({1, 1, 2, 2, 3, 3, 3, 3, 3}));
    const WatershedResult w = watershed(cpu_context(), h, with_min_area(4, 3));
    EXPECT_EQ(w.regions, 2);
    EXPECT_EQ(labels_of(w.labels), ints({1, 1, 1, 1, 2, 2, 2, 2, 2}));
}

TEST(WatershedMinArea, APitJoinsAcrossItsLowestPassInTwoDimensions) {
    // 4-connectivity. The automaton: 1 = the left plain (first pixel (0, 0)), 2 = the pit at
    // (x 3, y 0) with the 4 below it (which drains up to the 1), 3 = the right plain ((4, 2) = 2
    // and (3, 2) drain right):
    //   0 0 5 1 5 0 0      1 1 1 2 3 3 3
    //   0 0 5 4 5 0 0      1 1 1 2 3 3 3
    //   0 0 5 5 2 0 0      1 1 1 3 3 3 3
    // The pit's passes: to 1 max(5, 1) = max(5, 4) = 5; to 3 max(1, 5) = max(4, 5) = 5 (right and
    // below). A = 3: equal passes, the pit joins region 1; renumbered, the right plain becomes 2.
    const Cube h = image_cube({{0, 0, 5, 1, 5, 0, 0}, {0, 0, 5, 4, 5, 0, 0}, {0, 0, 5, 5, 2, 0, 0}}, DType::U8);
    EXPECT_EQ(labels_of(watershed(cpu_context(), h, with_connectivity(4)).labels),
              ints({1, 1, 1, 2, 3, 3, 3, 1, 1, 1, 2, 3, 3, 3, 1, 1, 1, 3, 3, 3, 3}));
    WatershedResult w = watershed(cpu_context(), h, with_min_area(4, 3));
    EXPECT_EQ(w.regions, 2);
    EXPECT_EQ(labels_of(w.labels), ints({1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 2}));
    // (3, 2) lowered to 3 (it still drains right, to the 2): the pass below the pit, max(4, 3) = 4,
    // is now its lowest; the pit joins the right plain and the union keeps label 3, renumbered 2.
    const Cube lowered = image_cube({{0, 0, 5, 1, 5, 0, 0}, {0, 0, 5, 4, 5, 0, 0}, {0, 0, 5, 3, 2, 0, 0}}, DType::U8);
    EXPECT_EQ(labels_of(watershed(cpu_context(), lowered, with_connectivity(4)).labels),
              ints({1, 1, 1, 2, 3, 3, 3, 1, 1, 1, 2, 3, 3, 3, 1, 1, 1, 3, 3, 3, 3}));
    w = watershed(cpu_context(), lowered, with_min_area(4, 3));
    EXPECT_EQ(w.regions, 2);
    EXPECT_EQ(labels_of(w.labels), ints({1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 2, 2, 2, 2}));
}

TEST(WatershedMinArea, OffOrOneIsTheIdentity) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Case& c : tie_cases(seed)) {
        SCOPED_TRACE(c.name);
        const WatershedResult plain = watershed(cpu_context(), c.height, c.options);
        for (std::int64_t a : {0, 1}) {
            WatershedOptions o = c.options;
            o.min_area = a;
            const WatershedResult w = watershed(cpu_context(), c.height, o);
            EXPECT_EQ(w.regions, plain.regions);
            EXPECT_TRUE(testing::cubes_identical(w.labels, plain.labels));
        }
    }
}

TEST(WatershedMinArea, RandomCasesMatchTheNaiveMerge) {  // ties, levels, h-minima, masks, volumes (6 and 26)
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Case& c : min_area_cases(seed)) {
        check_min_area(c);
        if (HasFatalFailure()) return;
    }
}

TEST(WatershedMinArea, ARegionAloneInItsMaskComponentStays) {
    // A constant 8×3 relief with the mask column x = 5 off: the automaton gives 1 (x 0..4, 15
    // pixels) and 2 (x 6..7, 6 pixels), which are nobody's neighbours. With A = 10 region 2 has no
    // neighbour to join and stays.
    Cube mask = watershed_testing::constant({8, 3}, DType::U8, 1);
    for (int y = 0; y < 3; ++y) mask.at<std::uint8_t>(5, y, 0) = 0;
    const CubeView mv = mask.view();
    const Cube h = watershed_testing::constant({8, 3}, DType::U16, 7);
    for (int conn : {4, 8}) {
        const WatershedResult w = watershed(cpu_context(), h, with_min_area(conn, 10), {.mask = &mv});
        EXPECT_EQ(w.regions, 2);
        EXPECT_EQ(labels_of(w.labels), ints({1, 1, 1, 1, 1, 0, 2, 2, 1, 1, 1, 1, 1, 0, 2, 2, 1, 1, 1, 1, 1, 0, 2, 2}));
    }
    // A huge A over a whole connected relief: one region.
    const Cube t = ties({40, 30}, 5);
    EXPECT_EQ(watershed(cpu_context(), t, with_min_area(8, 1 << 20)).regions, 1);
}

TEST(WatershedMinArea, VolumesMergeAlongZ) {
    // The header's example as a 1×1×11 column of z-slices: 6- and 26-connectivity give the row's
    // answer along z.
    const std::vector<double> h = {0, 1, 2, 3, 6, 1, 4, 3, 2, 1, 0};
    Cube column(1, 1, 11, DType::F32);
    for (int z = 0; z < 11; ++z) column.set_value(0, 0, z, h[std::size_t(z)]);
    for (int conn : {6, 26}) {
        const WatershedResult w = watershed(cpu_context(), column, with_min_area(conn, 4));
        EXPECT_EQ(w.regions, 2);
        EXPECT_EQ(labels_of(w.labels), ints({1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2}));
    }
}

TEST(WatershedMinArea, IntoAStridedHostWindow) {
    const Cube h = smooth({60, 45}, 11, DType::F32, 40);
    const WatershedOptions o = with_min_area(8, 30);
    const WatershedResult ref = watershed(cpu_context(), h, o);
    EXPECT_LT(ref.regions, watershed(cpu_context(), h).regions);
    Cube big(70, 50, 2, DType::I32, Layout::BIP);
    std::fill(big.data<std::int32_t>(), big.data<std::int32_t>() + big.num_elements(), -7);
    EXPECT_EQ(watershed_into(cpu_context(), h, big.mutable_view().window(4, 3, 60, 45).band_range(1, 1), o), ref.regions);
    EXPECT_TRUE(testing::cubes_identical(ref.labels, Cube::from_view(big.view().window(4, 3, 60, 45).band_range(1, 1), Layout::BSQ)));
    EXPECT_EQ(big.at<std::int32_t>(4, 3, 0), -7);
    EXPECT_EQ(big.at<std::int32_t>(0, 0, 1), -7);
}

TEST(WatershedMinArea, BadValuesAndMarkersAreRefusedNamingTheField) {
    const Cube h = ties({6, 5}, 1);
    EXPECT_MESSAGE_HAS(invalid_input_message([&] { watershed(cpu_context(), h, with_min_area(8, -1)); }), "min_area");
    const Cube markers = watershed_testing::constant({6, 5}, DType::I32, 1);
    const CubeView mv = markers.view();
    const std::string m = invalid_input_message([&] { watershed(cpu_context(), h, with_min_area(8, 4), {.markers = &mv}); });
    EXPECT_MESSAGE_HAS(m, "min_area = 4");
    EXPECT_MESSAGE_HAS(m, "markers");
    // Off (0 or 1) with markers is fine.
    EXPECT_EQ(watershed(cpu_context(), h, with_min_area(8, 1), {.markers = &mv}).regions, 1);
}

}  // namespace
}  // namespace cubekit
