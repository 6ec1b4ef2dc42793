// Edge-map comparison metrics (spec edges.md §6): Pratt's figure of merit and precision / recall /
// F with a pixel tolerance. Distances are exact: squared Euclidean distance transforms in integer
// arithmetic (Meijster, Roerdink and Hesselink 2000), O(W·H) per map.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/view_sample.hpp"
#include "cubekit/edge_baselines.hpp"
#include "cubekit/error.hpp"

namespace cubekit {
namespace {

/// Edge pixels of a one-band host map: nonzero and not NaN.
std::vector<std::uint8_t> edge_mask(const CubeView& map, std::int64_t& count) {
    const int W = map.width(), H = map.height();
    std::vector<std::uint8_t> mask(std::size_t(W) * std::size_t(H));
    count = 0;
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const double v = detail::sample_as_double(map, x, y, 0);
            const bool edge = v != 0 && !std::isnan(v);
            mask[std::size_t(y) * std::size_t(W) + std::size_t(x)] = edge ? 1 : 0;
            count += edge;
        }
    return mask;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {  // b > 0
    const std::int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/// Squared Euclidean distance from every pixel to the nearest pixel with mask = 1 (exact). Pixels
/// get a value above W² + H² when the mask is empty.
std::vector<std::int64_t> squared_distance_transform(const std::vector<std::uint8_t>& mask, int W, int H) {
    const std::int64_t inf = std::int64_t(W) + std::int64_t(H);  // beyond any real distance
    const std::size_t w = std::size_t(W);
    // Phase 1: per column, the distance to the nearest feature pixel in that column.
    std::vector<std::int64_t> g(mask.size());
    for (int x = 0; x < W; ++x) {
        g[std::size_t(x)] = mask[std::size_t(x)] ? 0 : inf;
        for (int y = 1; y < H; ++y) {
            const std::size_t i = std::size_t(y) * w + std::size_t(x);
            g[i] = mask[i] ? 0 : std::min(inf, g[i - w] + 1);
        }
        for (int y = H - 2; y >= 0; --y) {
            const std::size_t i = std::size_t(y) * w + std::size_t(x);
            if (g[i + w] + 1 < g[i]) g[i] = g[i + w] + 1;
        }
    }
    // Phase 2: per row, the lower envelope of the parabolas (x − i)² + g(i)².
    std::vector<std::int64_t> d2(mask.size());
    std::vector<std::int64_t> s(w), t(w);
    for (int y = 0; y < H; ++y) {
        const std::int64_t* gy = g.data() + std::size_t(y) * w;
        const auto f = [&](std::int64_t x, std::int64_t i) { return (x - i) * (x - i) + gy[i] * gy[i]; };
        const auto sep = [&](std::int64_t i, std::int64_t u) {
            return floor_div(u * u - i * i + gy[u] * gy[u] - gy[i] * gy[i], 2 * (u - i));
        };
        std::int64_t q = 0;
        s[0] = 0, t[0] = 0;
        for (std::int64_t u = 1; u < W; ++u) {
            while (q >= 0 && f(t[std::size_t(q)], s[std::size_t(q)]) > f(t[std::size_t(q)], u)) --q;
            if (q < 0) {
                q = 0, s[0] = u;
            } else {
                const std::int64_t wpos = 1 + sep(s[std::size_t(q)], u);
                if (wpos < W) ++q, s[std::size_t(q)] = u, t[std::size_t(q)] = wpos;
            }
        }
        for (std::int64_t u = W - 1; u >= 0; --u) {
            d2[std::size_t(y) * w + std::size_t(u)] = f(u, s[std::size_t(q)]);
            if (u == t[std::size_t(q)]) --q;
        }
    }
    return d2;
}

std::string shape_text(const CubeView& c) {
    return std::to_string(c.width()) + "x" + std::to_string(c.height()) + "x" + std::to_string(c.bands());
}

}  // namespace

EdgeScore score_edges(const CubeView& predicted, const CubeView& reference, double tolerance) {
    if (!(tolerance >= 0) || std::isinf(tolerance)) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.17g", tolerance);
        throw InvalidInput(std::string("edges-score: tolerance = ") + buf + "; expected a finite number of pixels >= 0");
    }
    if (predicted.bands() != 1 || reference.bands() != 1 || predicted.width() != reference.width() ||
        predicted.height() != reference.height() || predicted.empty())
        throw InvalidInput("edges-score: the predicted map is " + shape_text(predicted) + " and the reference map " +
                           shape_text(reference) + "; expected two one-band maps of the same nonzero width and height");
    if (predicted.on_device() || reference.on_device())
        throw InvalidInput("edges-score: the predicted and reference maps must be in host memory");
    const int W = predicted.width(), H = predicted.height();
    EdgeScore s;
    const std::vector<std::uint8_t> pred = edge_mask(predicted, s.predicted);
    const std::vector<std::uint8_t> ref = edge_mask(reference, s.reference);
    // Both empty: the maps agree perfectly. One empty: nothing is matched, every score is 0.
    if (s.predicted == 0 && s.reference == 0) {
        s.fom = s.precision = s.recall = s.f = 1.0;
        return s;
    }
    if (s.predicted == 0 || s.reference == 0) return s;

    constexpr double alpha = 1.0 / 9.0;
    const double tol2 = tolerance * tolerance;
    const std::vector<std::int64_t> to_ref = squared_distance_transform(ref, W, H);
    const std::vector<std::int64_t> to_pred = squared_distance_transform(pred, W, H);
    double fom_sum = 0;
    std::int64_t matched_pred = 0, matched_ref = 0;
    for (std::size_t i = 0; i < pred.size(); ++i) {
        if (pred[i]) {
            const double d2 = double(to_ref[i]);
            fom_sum += 1.0 / (1.0 + alpha * d2);
            matched_pred += d2 <= tol2;
        }
        if (ref[i]) matched_ref += double(to_pred[i]) <= tol2;
    }
    s.fom = fom_sum / double(std::max(s.predicted, s.reference));
    s.precision = double(matched_pred) / double(s.predicted);
    s.recall = double(matched_ref) / double(s.reference);
    s.f = s.precision + s.recall > 0 ? 2 * s.precision * s.recall / (s.precision + s.recall) : 0.0;
    return s;
}

}  // namespace cubekit
