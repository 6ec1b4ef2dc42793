// The segmentation chain (issue 16 item 2): RCMG → watershed with the gradient kept where the
// backend computes (device memory for CUDA: no host copy between the two), and the per-region
// statistics the CLI's --regions-out and Python's segment() report.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/file_strips.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "cubekit/watershed.hpp"

namespace cubekit {

SegmentResult segment(const Context& ctx, const CubeView& cube, const RcmgOptions& rcmg_options,
                      const WatershedOptions& watershed_options, const WatershedInputs& inputs) {
    check_rcmg_arguments(shape_of(cube), rcmg_options);
    check_fields(watershed_options, "segment");
    if (watershed_options.volume)
        throw InvalidInput("segment: volume = true; the RCMG of a cube is one 2-D band (a volume goes to watershed)");
    const int W = cube.width(), H = cube.height();
    const CubeShape gradient_shape{W, H, 1, rcmg_options.out_type, Layout::BSQ};
    const CubeShape labels_shape{W, H, 1, DType::I32, Layout::BSQ};
    SegmentResult r;
    const auto run_watershed = [&](const CubeView& gradient, const MutableCubeView& labels) {
        try {
            return watershed_into(ctx, gradient, labels, watershed_options, inputs);
        } catch (const InvalidInput& e) {
            const std::string what = e.what();
            if (what.find("NaN") == std::string::npos) throw;
            throw InvalidInput("segment: the gradient is NaN where a pixel's window holds NaN in the cube (" + what + ")");
        }
    };
    if (!ctx.is_cuda()) {
        r.gradient = Cube(W, H, 1, gradient_shape.dtype, Layout::BSQ);
        rcmg_into(ctx, cube, r.gradient.mutable_view(), rcmg_options);
        r.labels = Cube(W, H, 1, DType::I32, Layout::BSQ);
        r.regions = run_watershed(r.gradient.view(), r.labels.mutable_view());
        return r;
    }
    // Device: the gradient is written and read in device memory (a dense BSQ relief, which the
    // watershed reads in place); the only copies are the two downloads at the end.
    DeviceCube d_gradient(ctx, gradient_shape);
    rcmg_into(ctx, cube, d_gradient.mutable_view(), rcmg_options);
    DeviceCube d_labels(ctx, labels_shape);
    r.regions = run_watershed(d_gradient.view(), d_labels.mutable_view());
    r.gradient = d_gradient.download(ctx);
    r.labels = d_labels.download(ctx);
    return r;
}

namespace {

std::string size_text(const CubeView& v) {
    return std::to_string(v.width()) + "x" + std::to_string(v.height()) + "x" + std::to_string(v.bands());
}

// A host view of `v`: itself, or one download (dense BSQ) kept in `storage`.
CubeView on_host(const Context& ctx, const CubeView& v, std::optional<CubeInLayout>& storage) {
    if (!v.on_device()) return v;
    storage.emplace(ctx, v, Layout::BSQ, Memory::Host);
    return storage->view();
}

// Label value → dense slot 0..R−1 (labels ascending), for the labels present (> 0).
struct Slots {
    std::vector<std::int32_t> labels;  // slot → label
    std::vector<std::int32_t> table;   // label → slot (−1 = absent) when the labels are small enough
    std::int32_t operator()(std::int32_t label) const {
        if (label <= 0) return -1;
        if (!table.empty()) return table[std::size_t(label)];
        const auto it = std::lower_bound(labels.begin(), labels.end(), label);
        return std::int32_t(it - labels.begin());
    }
};

Slots slots_of(const StridedView<const std::int32_t>& l) {
    std::int32_t top = 0;
    std::int64_t n = 0;
    for (int y = 0; y < l.height; ++y)
        for (int x = 0; x < l.width; ++x) top = std::max(top, l(x, y, 0)), ++n;
    Slots s;
    // A table of max + 1 entries when that is no more than ~4 entries a pixel (1..R labels always);
    // sparse marker labels (up to 2^31 − 1) are found by binary search instead.
    if (std::int64_t(top) <= std::max<std::int64_t>(4 * n, 1 << 16)) {
        std::vector<char> seen(std::size_t(top) + 1, 0);
        for (int y = 0; y < l.height; ++y)
            for (int x = 0; x < l.width; ++x)
                if (l(x, y, 0) > 0) seen[std::size_t(l(x, y, 0))] = 1;
        s.table.assign(std::size_t(top) + 1, -1);
        for (std::int32_t v = 1; v <= top; ++v)
            if (seen[std::size_t(v)]) s.table[std::size_t(v)] = std::int32_t(s.labels.size()), s.labels.push_back(v);
        return s;
    }
    for (int y = 0; y < l.height; ++y)
        for (int x = 0; x < l.width; ++x)
            if (l(x, y, 0) > 0) s.labels.push_back(l(x, y, 0));
    std::sort(s.labels.begin(), s.labels.end());
    s.labels.erase(std::unique(s.labels.begin(), s.labels.end()), s.labels.end());
    return s;
}

void check_companion(const CubeView& labels, const CubeView* v, const char* what, bool one_band) {
    if (!v) return;
    if (v->width() != labels.width() || v->height() != labels.height() || (one_band && v->bands() != 1))
        throw InvalidInput(std::string("region_statistics: ") + what + " is " + size_text(*v) + "; expected " +
                           std::to_string(labels.width()) + "x" + std::to_string(labels.height()) +
                           (one_band ? "x1" : "xB") + ", the labels' size");
}

// A region table being built: the slots and integer moments from the labels, then f64 sums added in
// raster order (a cube's rows may come in strips, top to bottom: the same additions in the same order).
class RegionTable {
public:
    RegionTable(const Context& ctx, const CubeView& labels) : ctx_(ctx) {
        if (labels.dtype() != DType::I32 || labels.bands() != 1)
            throw InvalidInput("region_statistics: the labels are " + size_text(labels) + " " +
                               std::string(dtype_name(labels.dtype())) + "; expected one band of i32");
        std::optional<CubeInLayout> labels_copy;
        const StridedView<const std::int32_t> l = on_host(ctx, labels, labels_copy).typed<std::int32_t>();
        const Slots slots = slots_of(l);
        R_ = slots.labels.size();
        W_ = labels.width(), H_ = labels.height();
        out_.resize(R_);
        std::vector<std::int64_t> sum_x(R_, 0), sum_y(R_, 0);
        for (std::size_t r = 0; r < R_; ++r) {
            out_[r].label = slots.labels[r];
            out_[r].x0 = W_, out_[r].y0 = H_, out_[r].x1 = -1, out_[r].y1 = -1;
            out_[r].mean_gradient = std::numeric_limits<double>::quiet_NaN();
        }
        // One pass in raster order for area, box and centroid (exact integer sums).
        slot_of_.resize(std::size_t(W_) * std::size_t(H_));
        for (int y = 0; y < H_; ++y)
            for (int x = 0; x < W_; ++x) {
                const std::int32_t s = slots(l(x, y, 0));
                slot_of_[std::size_t(y) * std::size_t(W_) + std::size_t(x)] = s;
                if (s < 0) continue;
                RegionStats& r = out_[std::size_t(s)];
                ++r.area;
                r.x0 = std::min(r.x0, x), r.x1 = std::max(r.x1, x);
                r.y0 = std::min(r.y0, y), r.y1 = std::max(r.y1, y);
                sum_x[std::size_t(s)] += x, sum_y[std::size_t(s)] += y;
            }
        for (std::size_t r = 0; r < R_; ++r) {
            out_[r].centroid_x = double(sum_x[r]) / double(out_[r].area);
            out_[r].centroid_y = double(sum_y[r]) / double(out_[r].area);
        }
    }

    void add_gradient(const CubeView& gradient) {
        std::optional<CubeInLayout> copy;
        const CubeView g = on_host(ctx_, gradient, copy);
        std::vector<double> sums(R_, 0.0);
        add_band(g, 0, 0, sums.data());
        for (std::size_t r = 0; r < R_; ++r) out_[r].mean_gradient = sums[r] / double(out_[r].area);
    }

    /// Rows y0 .. y0 + rows.height() of the cube, every band; strips must come top to bottom.
    void add_rows(const CubeView& rows, int y0) {
        std::optional<CubeInLayout> copy;
        const CubeView c = on_host(ctx_, rows, copy);
        const int B = c.bands();
        if (band_sums_.empty()) bands_ = B, band_sums_.assign(std::size_t(B) * R_, 0.0);  // band-major
#pragma omp parallel for schedule(dynamic) num_threads(ctx_.threads())
        for (int b = 0; b < B; ++b) add_band(c, b, y0, band_sums_.data() + std::size_t(b) * R_);
    }

    std::vector<RegionStats> finish() {
        for (std::size_t r = 0; r < R_ && bands_ > 0; ++r) {
            out_[r].mean_spectrum.resize(std::size_t(bands_));
            for (int b = 0; b < bands_; ++b)
                out_[r].mean_spectrum[std::size_t(b)] = band_sums_[std::size_t(b) * R_ + r] / double(out_[r].area);
        }
        return std::move(out_);
    }

private:
    // Means as f64 sums in raster order divided by the area: the same numbers for any thread count
    // and any strips.
    void add_band(const CubeView& v, int band, int y0, double* sums) const {
        visit_dtype(v.dtype(), [&](auto tag) {
            using T = decltype(tag);
            const StridedView<const T> s = v.typed<T>();
            for (int y = 0; y < v.height(); ++y)
                for (int x = 0; x < W_; ++x) {
                    const std::int32_t k = slot_of_[std::size_t(y0 + y) * std::size_t(W_) + std::size_t(x)];
                    if (k >= 0) sums[k] += double(s(x, y, band));
                }
        });
    }

    const Context& ctx_;
    std::size_t R_ = 0;
    int W_ = 0, H_ = 0, bands_ = 0;
    std::vector<RegionStats> out_;
    std::vector<std::int32_t> slot_of_;
    std::vector<double> band_sums_;
};

}  // namespace

std::vector<RegionStats> region_statistics(const Context& ctx, const CubeView& labels, const CubeView* cube,
                                           const CubeView* gradient) {
    RegionTable table(ctx, labels);
    check_companion(labels, cube, "cube", false);
    check_companion(labels, gradient, "gradient", true);
    if (gradient) table.add_gradient(*gradient);
    if (cube) table.add_rows(*cube, 0);
    return table.finish();
}

std::vector<RegionStats> region_statistics(const Context& ctx, const CubeView& labels, const CubeFile& cube,
                                           const CubeView* gradient, std::size_t memory_limit) {
    RegionTable table(ctx, labels);
    const CubeShape& s = cube.shape();
    if (s.width != labels.width() || s.height != labels.height())
        throw InvalidInput("region_statistics: the cube file is " + std::to_string(s.width) + "x" + std::to_string(s.height) +
                           "x" + std::to_string(s.bands) + "; expected " + std::to_string(labels.width()) + "x" +
                           std::to_string(labels.height()) + "xB, the labels' size");
    check_companion(labels, gradient, "gradient", true);
    if (gradient) table.add_gradient(*gradient);
    detail::read_in_strips(ctx, cube, memory_limit, "region_statistics", [](int, int) { return true; },
                           [&](int y0, const CubeView& rows) { table.add_rows(rows, y0); });
    return table.finish();
}

}  // namespace cubekit
