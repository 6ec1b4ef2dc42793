// ROC curve, AUC and per-blob detection of a score map against a target mask
// (detect_classical.hpp, "evaluation").
//
// AUC = (Σ over target pixels of the rank of its score among all pixels − T(T+1)/2) / (T·F), ranks
// averaged over ties: the Mann–Whitney statistic, P(target > background) + ½·P(tie), which equals
// the trapezoidal area under the ROC curve through one point per distinct score (scikit-learn's
// roc_auc_score). NaN scores count as the lowest score (below −∞).
// Per-blob detection at a false-alarm rate f: the background scores sorted descending, k = ⌊f·F⌋
// of them may be detected; threshold τ = the (k+1)-th highest background score, detected ⇔
// score > τ (so the achieved rate is ≤ f, ties at τ not detected). A blob (8-connected component
// of the mask) is found when one of its pixels is detected.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <functional>

#include "core/view_sample.hpp"
#include "cubekit/detect_classical.hpp"
#include "cubekit/error.hpp"
#include "cubekit/labels.hpp"
#include "detect/classical_internal.hpp"

namespace cubekit {
namespace {

// Scores as doubles with NaN → −∞ − (a value below every finite score and −∞: ranked first).
std::vector<double> score_values(const Context& ctx, const CubeView& scores, std::int64_t& nans) {
    std::optional<CubeInLayout> down;
    CubeView s = scores;
    if (scores.on_device()) s = down.emplace(ctx, scores, Layout::BSQ, Memory::Host).view();
    std::vector<double> v(scores.num_pixels());
    nans = 0;
    for (int y = 0; y < s.height(); ++y)
        for (int x = 0; x < s.width(); ++x) {
            double d = detail::sample_as_double(s, x, y, 0);
            if (std::isnan(d)) d = -std::numeric_limits<double>::infinity(), ++nans;
            v[std::size_t(y) * std::size_t(s.width()) + std::size_t(x)] = d;
        }
    return v;
}

// AUC and the ROC points, from the pixels sorted by descending score.
void roc_and_auc(const std::vector<double>& v, const std::vector<std::uint8_t>& m, DetectionScore& r) {
    std::vector<std::size_t> order(v.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] > v[b]; });
    const double T = double(r.targets), F = double(r.background);
    double tp = 0, fp = 0, area = 0;
    r.roc.push_back({std::numeric_limits<double>::infinity(), 0, 0});
    for (std::size_t i = 0; i < order.size();) {
        std::size_t j = i;
        double dtp = 0, dfp = 0;
        while (j < order.size() && v[order[j]] == v[order[i]]) (m[order[j]] ? dtp : dfp) += 1, ++j;
        area += dfp * (tp + dtp / 2);  // background pixels in this group: targets above, half the ties
        tp += dtp, fp += dfp;
        r.roc.push_back({v[order[i]], fp / F, tp / T});
        i = j;
    }
    r.auc = area / (T * F);
}

void blobs_at_far(const Context& ctx, const std::vector<double>& v, const std::vector<std::uint8_t>& m, int W, int H,
                  DetectionScore& r) {
    std::vector<double> bg;
    for (std::size_t i = 0; i < v.size(); ++i)
        if (!m[i]) bg.push_back(v[i]);
    std::sort(bg.begin(), bg.end(), std::greater<>());
    const std::size_t k = std::min(bg.size() - 1, std::size_t(std::floor(r.far_requested * double(bg.size()))));
    r.threshold = bg[k];
    std::int64_t fa = 0, hits = 0;
    for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] > r.threshold) (m[i] ? hits : fa) += 1;
    r.far = double(fa) / double(r.background);
    r.pd = double(hits) / double(r.targets);

    Cube mask(W, H, 1, DType::U8);
    std::copy(m.begin(), m.end(), mask.data<std::uint8_t>());
    const Components c = label_components(ctx, mask, 8);
    const auto& info = c.per_band[0];
    for (std::size_t l = 0; l < info.size(); ++l)
        r.blobs.push_back({int(l + 1), info[l].size, info[l].x0, info[l].y0, info[l].x1, info[l].y1,
                           -std::numeric_limits<double>::infinity(), false});
    const std::int32_t* labels = c.labels.data<std::int32_t>();
    for (std::size_t i = 0; i < v.size(); ++i)
        if (labels[i] > 0) {
            BlobDetection& b = r.blobs[std::size_t(labels[i] - 1)];
            b.peak = std::max(b.peak, v[i]);
            b.found = b.found || v[i] > r.threshold;
        }
    for (const BlobDetection& b : r.blobs) r.blobs_found += b.found ? 1 : 0;
}

}  // namespace

DetectionScore score_detection(const Context& ctx, const CubeView& scores, const CubeView& mask, double far) {
    if (scores.bands() != 1)
        throw InvalidInput("scores: expected one band (a score map), got " + std::to_string(scores.bands()));
    if (!(far >= 0 && far <= 1)) throw InvalidInput("far = " + std::to_string(far) + ": expected 0..1");
    const int W = scores.width(), H = scores.height();
    const std::vector<std::uint8_t> m = detail::mask_bytes(ctx, mask, W, H, "mask");
    DetectionScore r;
    r.far_requested = far;
    const std::vector<double> v = score_values(ctx, scores, r.nan_scores);
    for (std::uint8_t b : m) (b ? r.targets : r.background) += 1;
    if (r.targets == 0) throw InvalidInput("mask: no target pixel (every value is 0)");
    if (r.background == 0) throw InvalidInput("mask: no background pixel (every value is nonzero)");
    roc_and_auc(v, m, r);
    blobs_at_far(ctx, v, m, W, H, r);
    return r;
}

}  // namespace cubekit
