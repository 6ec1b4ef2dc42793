// RBF network scores, CPU reference (spec detect.md §A.3): f32, bands in order, libm expf.
// Rows are independent OpenMP items; inside a row the bands are the outer loop, so a BSQ or BIP
// cube is read in its own order while each pixel still adds its bands 0..m−1 in order.
#include <cmath>
#include <limits>

#include "core/parallel.hpp"
#include "detect/detect_internal.hpp"

namespace cubekit::detail {

namespace {

bool same_transform(const RbfnModel& a, const RbfnModel& b) {
    return a.input_offset == b.input_offset && a.input_gain == b.input_gain;
}

void add_model(RbfnGroup& g, const RbfnModel& m, int index) {
    if (g.first.empty()) g.first.push_back(0);
    for (int i = 0; i < m.hidden; ++i) {
        for (int b = 0; b < m.bands; ++b) g.centres.push_back(float(m.centres[std::size_t(i) * m.bands + b]));
        const double s = m.sigma[i];
        g.gamma.push_back(float(1.0 / (2.0 * s * s)));
        g.weight.push_back(float(m.weights[i]));
    }
    g.first.push_back(g.neurons());
    g.bias.push_back(float(m.bias));
    g.model_index.push_back(index);
}

template <typename T>
void score_row(const StridedView<const T>& v, int y, const RbfnGroup& g, std::vector<float>& d, std::vector<float>& xt,
               std::span<const MutableCubeView> scores) {
    const int W = v.width, m = g.bands, K = g.neurons();
    std::fill(d.begin(), d.end(), 0.0f);
    for (int b = 0; b < m; ++b) {
        for (int x = 0; x < W; ++x) {
            float s = float(v(x, y, b));
            if (g.transform) s = g.gain[b] * (s - g.offset[b]);
            xt[x] = s;
        }
        for (int i = 0; i < K; ++i) {
            const float u = g.centres[std::size_t(i) * m + b];
            float* di = d.data() + std::size_t(i) * W;
            for (int x = 0; x < W; ++x) {
                const float diff = xt[x] - u;
                di[x] = di[x] + diff * diff;
            }
        }
    }
    for (int j = 0; j < g.models(); ++j) {
        float* out = reinterpret_cast<float*>(scores[j].data()) + std::int64_t(y) * scores[j].strides().y;
        const std::int64_t sx = scores[j].strides().x;
        for (int x = 0; x < W; ++x) {
            float acc = 0.0f;
            for (int i = g.first[j]; i < g.first[j + 1]; ++i) {
                // A non-finite distance (a NaN or Inf band, or beyond f32) makes the score NaN.
                const float di = d[std::size_t(i) * W + x];
                acc = acc + (std::isfinite(di) ? g.weight[i] * std::exp(-(di * g.gamma[i])) : std::numeric_limits<float>::quiet_NaN());
            }
            out[x * sx] = acc + g.bias[j];
        }
    }
}

}  // namespace

std::vector<RbfnGroup> rbfn_groups(std::span<const RbfnModel> models) {
    std::vector<RbfnGroup> groups;
    std::vector<int> leader;  // the first model of each group
    for (int j = 0; j < int(models.size()); ++j) {
        int gi = 0;
        while (gi < int(groups.size()) && !same_transform(models[leader[gi]], models[j])) ++gi;
        if (gi == int(groups.size())) {
            RbfnGroup g;
            g.bands = models[j].bands;
            const RbfnModel& m = models[j];
            g.transform = !m.input_offset.empty() || !m.input_gain.empty();
            if (g.transform)
                for (int b = 0; b < m.bands; ++b) {
                    g.offset.push_back(m.input_offset.empty() ? 0.0f : float(m.input_offset[b]));
                    g.gain.push_back(m.input_gain.empty() ? 1.0f : float(m.input_gain[b]));
                }
            groups.push_back(std::move(g));
            leader.push_back(j);
        }
        add_model(groups[gi], models[j], j);
    }
    return groups;
}

void rbfn_scores_cpu(const Context& ctx, const CubeView& cube, const RbfnGroup& g, std::span<const MutableCubeView> scores) {
    const int W = cube.width();
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const StridedView<const T> v = cube.typed<T>();
        struct Scratch {
            std::vector<float> d, xt;
        };
        parallel_for(
            ctx, cube.height(), {.where = "detect rbfn", .progress = true},
            [&] { return Scratch{std::vector<float>(std::size_t(g.neurons()) * W), std::vector<float>(W)}; },
            [&](std::int64_t y, Scratch& s) { score_row(v, int(y), g, s.d, s.xt, scores); });
    });
}

}  // namespace cubekit::detail
