// Multi-resolution detection, CPU reference (spec detect.md §B.3): block sums, pyramid, descent.
#include <cmath>
#include <limits>

#include "core/parallel.hpp"
#include "detect/detect_internal.hpp"

namespace cubekit::detail {

namespace {

// Level 0: every block's n, Σx, Σx² per band, pixels in row-major order inside the block (the
// bands of a pixel are independent sums, so the loop may read a pixel's bands together).
template <typename T>
void block_sums(const Context& ctx, const StridedView<const T>& v, const TreeGeometry& g, PyramidLevel& level,
                std::int64_t& skipped) {
    const int m = g.bands, gx = level.gx;
    std::vector<std::int64_t> skipped_per_row(std::size_t(level.gy), 0);
    parallel_for(ctx, level.gy, {.where = "detect multires"}, [&](std::int64_t j) {
        for (int i = 0; i < gx; ++i) {
            const std::size_t node = std::size_t(j) * gx + std::size_t(i);
            std::int32_t* n = level.n.data() + node * m;
            double* s1 = level.s1.data() + node * m;
            double* s2 = level.s2.data() + node * m;
            const int x0 = i * g.block, y0 = int(j) * g.block;
            const int x1 = std::min(x0 + g.block, g.width), y1 = std::min(y0 + g.block, g.height);
            for (int y = y0; y < y1; ++y)
                for (int x = x0; x < x1; ++x)
                    for (int c = 0; c < m; ++c) {
                        const double s = double(v(x, y, c));
                        if (!std::isfinite(s)) {
                            ++skipped_per_row[std::size_t(j)];
                            continue;
                        }
                        n[c] += 1;
                        s1[c] = s1[c] + s;
                        s2[c] = s2[c] + s * s;
                    }
        }
    });
    for (std::int64_t s : skipped_per_row) skipped += s;
}

PyramidLevel empty_level(const TreeGeometry& g, int l) {
    PyramidLevel level;
    level.gx = g.grid_x(l);
    level.gy = g.grid_y(l);
    const std::size_t values = std::size_t(level.gx) * std::size_t(level.gy) * std::size_t(g.bands);
    level.n.assign(values, 0);
    level.s1.assign(values, 0.0);
    level.s2.assign(values, 0.0);
    return level;
}

// A level from the one below: children TL, TR, BL, BR in that order, missing ones skipped.
void merge_children(const PyramidLevel& below, PyramidLevel& level, int m) {
    for (int j = 0; j < level.gy; ++j)
        for (int i = 0; i < level.gx; ++i) {
            const std::size_t node = (std::size_t(j) * level.gx + std::size_t(i)) * m;
            for (int c4 = 0; c4 < 4; ++c4) {
                const int ci = 2 * i + (c4 & 1), cj = 2 * j + (c4 >> 1);
                if (ci >= below.gx || cj >= below.gy) continue;
                const std::size_t child = (std::size_t(cj) * below.gx + std::size_t(ci)) * m;
                for (int c = 0; c < m; ++c) {
                    level.n[node + c] += below.n[child + c];
                    level.s1[node + c] = level.s1[node + c] + below.s1[child + c];
                    level.s2[node + c] = level.s2[node + c] + below.s2[child + c];
                }
            }
        }
}

bool positive(const MlpModel& net, const double* sigma, double& y) {
    y = evaluate(net, sigma).y;
    return y > net.threshold;
}

}  // namespace

PyramidLevel block_sums_cpu(const Context& ctx, const CubeView& cube, const TreeGeometry& g, std::int64_t& skipped) {
    PyramidLevel level0 = empty_level(g, 0);
    skipped = 0;
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        block_sums(ctx, cube.typed<T>(), g, level0, skipped);
    });
    return level0;
}

std::vector<PyramidLevel> pyramid_from_level0(PyramidLevel level0, const TreeGeometry& g) {
    std::vector<PyramidLevel> pyramid;
    pyramid.push_back(std::move(level0));
    for (int l = 1; l <= g.top; ++l) {
        pyramid.push_back(empty_level(g, l));
        merge_children(pyramid[std::size_t(l) - 1], pyramid[std::size_t(l)], g.bands);
    }
    return pyramid;
}

std::vector<PyramidLevel> build_pyramid_cpu(const Context& ctx, const CubeView& cube, const TreeGeometry& g,
                                            std::int64_t& skipped) {
    return pyramid_from_level0(block_sums_cpu(ctx, cube, g, skipped), g);
}

bool node_feature(const PyramidLevel& level, std::int64_t node, int bands, double* sigma) {
    const std::size_t at = std::size_t(node) * std::size_t(bands);
    for (int c = 0; c < bands; ++c) {
        const std::int32_t count = level.n[at + c];
        if (count == 0) {
            std::fill(sigma, sigma + bands, std::numeric_limits<double>::quiet_NaN());
            return false;
        }
        const double n = double(count), s1 = level.s1[at + c], s2 = level.s2[at + c];
        const double variance = (s2 - s1 * s1 / n) / n;
        sigma[c] = std::sqrt(std::max(0.0, variance));
    }
    return true;
}

MultiresResult descend_cpu(const std::vector<PyramidLevel>& pyramid, const TreeGeometry& g, const MultiresModel& model,
                           const MultiresOptions& options) {
    MultiresResult r;
    r.block = g.block;
    r.min_window = model.min_window;
    r.top_level = g.top;
    int lmin = 0;
    while ((g.block << lmin) < model.min_window) ++lmin;
    lmin = std::min(lmin, g.top);  // an image smaller than min_window: the root is the minimum
    std::vector<std::pair<int, int>> active{{0, 0}}, next;
    std::vector<double> sigma(std::size_t(g.bands));
    for (int l = g.top; l >= lmin && !active.empty(); --l) {
        MultiresLevelCount count{.level = l};
        next.clear();
        const PyramidLevel& level = pyramid[std::size_t(l)];
        for (auto [i, j] : active) {
            Window w;
            g.box(l, i, j, w.x0, w.y0, w.width, w.height);
            w.level = l;
            w.y1 = w.y2 = std::numeric_limits<double>::quiet_NaN();
            ++count.evaluated;
            const bool finite = node_feature(level, std::int64_t(j) * level.gx + i, g.bands, sigma.data());
            if (!finite || !positive(model.ann1, sigma.data(), w.y1)) {
                w.outcome = Window::Outcome::Rejected;
            } else {
                ++count.positive;
                if (positive(model.ann2, sigma.data(), w.y2)) {
                    w.outcome = Window::Outcome::Accepted;
                } else if (l > lmin) {
                    w.outcome = Window::Outcome::Split;
                    ++count.split;
                    for (int c4 = 0; c4 < 4; ++c4) {
                        const int ci = 2 * i + (c4 & 1), cj = 2 * j + (c4 >> 1);
                        if (ci < g.grid_x(l - 1) && cj < g.grid_y(l - 1)) next.emplace_back(ci, cj);
                    }
                } else {
                    w.at_min_scale = true;
                    w.outcome = options.keep_min_level ? Window::Outcome::Forced : Window::Outcome::Dropped;
                }
                if (w.outcome == Window::Outcome::Accepted || w.outcome == Window::Outcome::Forced) {
                    ++count.accepted;
                    r.detections.push_back(w);
                }
            }
            if (options.trace) r.trace.push_back(w);
        }
        r.levels.push_back(count);
        std::swap(active, next);
    }
    sort_windows(r);
    return r;
}

}  // namespace cubekit::detail
