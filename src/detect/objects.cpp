// Detection post-processing (spec detect.md §A.3 step 5): mask = [score > θ], connected components
// from the labels family (canonical raster-order numbers, identical on CPU and CUDA), objects of
// fewer than min_area pixels removed, and the object table.
#include <cmath>
#include <optional>

#include "cubekit/labels.hpp"
#include "detect/detect_internal.hpp"

namespace cubekit {

namespace {

Cube threshold_mask(const Cube& score, double threshold) {
    Cube mask(score.width(), score.height(), 1, DType::U8, Layout::BSQ);
    const float* s = score.data<float>();
    std::uint8_t* m = mask.data<std::uint8_t>();
    const std::int64_t n = std::int64_t(score.num_elements());
#pragma omp parallel for schedule(static)
    for (std::int64_t p = 0; p < n; ++p) m[p] = double(s[p]) > threshold ? 1 : 0;  // NaN > θ is false
    return mask;
}

struct Accumulator {
    std::int64_t area = 0, sum_x = 0, sum_y = 0;
    int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    double peak = 0, sum_score = 0;
    int peak_x = 0, peak_y = 0;
};

// One raster pass: each object's area, box, coordinate sums, peak (first pixel on ties) and score sum.
std::vector<Accumulator> accumulate(const Cube& labels, const Cube& score, int count) {
    std::vector<Accumulator> acc(static_cast<std::size_t>(count));
    const std::int32_t* l = labels.data<std::int32_t>();
    const float* s = score.data<float>();
    const int W = labels.width(), H = labels.height();
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const std::int32_t label = l[std::size_t(y) * W + x];
            if (label == 0) continue;
            Accumulator& a = acc[std::size_t(label - 1)];
            const double v = s[std::size_t(y) * W + x];
            if (a.area == 0) {
                a.x0 = a.x1 = x;
                a.y0 = a.y1 = y;
                a.peak = v;
                a.peak_x = x;
                a.peak_y = y;
            }
            ++a.area;
            a.sum_x += x;
            a.sum_y += y;
            a.x0 = std::min(a.x0, x);
            a.x1 = std::max(a.x1, x);
            a.y1 = y;
            a.sum_score += v;
            if (v > a.peak) {
                a.peak = v;
                a.peak_x = x;
                a.peak_y = y;
            }
        }
    return acc;
}

}  // namespace

void objects_from_scores(const Context& ctx, const CubeView& score_view, double threshold, const PixelOptions& options,
                         PixelResult& result) {
    check_fields(options, "detect_pixels");
    const Cube score = score_view.on_device()             ? DeviceCube::borrow_const(score_view).download(ctx)
                       : score_view.is_dense(Layout::BSQ) ? Cube::borrow_const(score_view)
                                                          : Cube::from_view(score_view, Layout::BSQ);
    result.threshold = threshold;
    result.mask = threshold_mask(score, threshold);
    Components c = label_components(ctx, result.mask, options.connectivity);
    const int count = int(c.per_band[0].size());
    const std::vector<Accumulator> acc = accumulate(c.labels, score, count);

    // Objects below min_area leave the mask; the others keep their raster order, renumbered 1..n.
    std::vector<std::int32_t> renumber(std::size_t(count) + 1, 0);
    result.objects.clear();
    result.detected = 0;
    for (int i = 0; i < count; ++i) {
        const Accumulator& a = acc[std::size_t(i)];
        if (a.area < options.min_area) continue;
        DetectedObject o;
        o.label = int(result.objects.size()) + 1;
        o.area = a.area;
        o.x0 = a.x0;
        o.y0 = a.y0;
        o.width = a.x1 - a.x0 + 1;
        o.height = a.y1 - a.y0 + 1;
        o.centroid_x = double(a.sum_x) / double(a.area);
        o.centroid_y = double(a.sum_y) / double(a.area);
        o.peak_score = a.peak;
        o.peak_x = a.peak_x;
        o.peak_y = a.peak_y;
        o.mean_score = a.sum_score / double(a.area);
        renumber[std::size_t(i) + 1] = o.label;
        result.detected += a.area;
        result.objects.push_back(o);
    }
    std::int32_t* l = c.labels.data<std::int32_t>();
    std::uint8_t* m = result.mask.data<std::uint8_t>();
    for (std::size_t p = 0; p < c.labels.num_elements(); ++p) {
        l[p] = renumber[std::size_t(l[p])];
        m[p] = l[p] != 0 ? 1 : 0;
    }
    result.labels = std::move(c.labels);
}

}  // namespace cubekit
