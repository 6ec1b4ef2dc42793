// Watershed front door (spec gradient-watershed.md part B): validate once, place the relief, the
// markers and the mask where the backend reads them, dispatch.
#include <climits>
#include <cmath>
#include <optional>
#include <set>
#include <string>

#include "core/outputs.hpp"
#include "cubekit/error.hpp"
#include "cubekit/watershed.hpp"
#include "watershed/watershed_internal.hpp"

namespace cubekit {
namespace detail {

std::vector<Step> watershed_steps(int connectivity) {
    std::vector<Step> steps;
    const bool three_d = connectivity == 6 || connectivity == 26;
    for (int dz = three_d ? -1 : 0; dz <= (three_d ? 1 : 0); ++dz)
        for (int dy = -1; dy <= 1; ++dy)
            for (int dx = -1; dx <= 1; ++dx) {
                const int order = std::abs(dz) + std::abs(dy) + std::abs(dx);
                if (order == 0) continue;
                if ((connectivity == 4 || connectivity == 6) && order != 1) continue;
                steps.push_back({dz, dy, dx});
            }
    return steps;
}


// Markers as dense i32 (values beyond 2^31 − 1 refused; ≤ 0 = no seed).
Cube markers_i32(const Context& ctx, const CubeView& markers) {
    std::optional<CubeInLayout> storage;
    storage.emplace(ctx, markers, Layout::BSQ, Memory::Host);
    const Cube& dense = storage->host();
    return visit_dtype(dense.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* m = dense.template data<T>();
        for (std::size_t i = 0; i < dense.view().num_elements(); ++i)
            if (double(m[i]) > double(INT_MAX))
                throw InvalidInput("watershed: markers hold " + std::to_string(double(m[i])) +
                                   "; marker labels must be at most 2^31-1");
        return dense.to_dtype(DType::I32);
    });
}

}  // namespace detail

namespace {

std::string shape_text(const CubeView& v) {
    return std::to_string(v.width()) + "x" + std::to_string(v.height()) + "x" + std::to_string(v.bands());
}

void check_relief(const CubeView& height, const WatershedOptions& o) {
    check_fields(o, "watershed");
    if (height.empty())
        throw InvalidInput("watershed: the relief is " + shape_text(height) + "; width, height and bands must be at least 1");
    const bool three_d = o.connectivity == 6 || o.connectivity == 26;
    if (o.volume != three_d)
        throw InvalidInput("watershed: connectivity = " + std::to_string(o.connectivity) + "; expected " +
                           (o.volume ? "6 or 26 for a volume" : "4 or 8 for an image (6 or 26 need volume)"));
    if (!o.volume && height.bands() != 1)
        throw InvalidInput("watershed: the relief has " + std::to_string(height.bands()) +
                           " bands; expected one (or volume: the bands are z-slices)");
    if (std::int64_t(height.width()) * height.height() * height.bands() > std::int64_t(INT_MAX))
        throw InvalidInput("watershed: the relief " + shape_text(height) + " has more than 2^31-1 pixels; tile it");
    if (o.levels == 1 || o.levels > (std::int64_t(1) << 32))
        throw InvalidInput("watershed: levels = " + std::to_string(o.levels) + "; expected 0 (off) or 2..2^32");
}

void check_secondary(const CubeView& height, const CubeView* v, const char* what) {
    if (!v) return;
    if (v->width() != height.width() || v->height() != height.height() || v->bands() != height.bands())
        throw InvalidInput(std::string("watershed: ") + what + " is " + shape_text(*v) + "; expected the relief's " +
                           shape_text(height));
    const bool markers = std::string(what) == "markers";
    if (markers ? dtype_is_float(v->dtype()) : v->dtype() != DType::U8)
        throw InvalidInput(std::string("watershed: ") + what + " element type is " + std::string(dtype_name(v->dtype())) +
                           (markers ? "; expected an integer type" : "; expected u8"));
}

// A dense host copy in raster order (BSQ), or the view itself when it already is one.
const Cube& dense_host(const Context& ctx, const CubeView& v, std::optional<CubeInLayout>& storage) {
    storage.emplace(ctx, v, Layout::BSQ, Memory::Host);
    return storage->host();
}

template <class T>
void refuse_nan(const T* h, std::int64_t n, const CubeView& v, const std::uint8_t* inside) {
    if constexpr (std::is_floating_point_v<T>) {
        for (std::int64_t p = 0; p < n; ++p)
            if (std::isnan(h[p]) && (!inside || inside[p])) {  // NaN outside the mask: no data, allowed
                const std::int64_t plane = std::int64_t(v.width()) * v.height();
                throw InvalidInput("watershed: the relief holds NaN (first at x " + std::to_string(p % v.width()) +
                                   ", y " + std::to_string((p % plane) / v.width()) + ", band " +
                                   std::to_string(p / plane) + "); heights must be comparable");
            }
    }
}

std::int64_t count_marker_labels(const std::int32_t* m, const std::uint8_t* inside, std::int64_t n) {
    std::set<std::int32_t> seen;
    for (std::int64_t p = 0; p < n; ++p)
        if (m[p] > 0 && (!inside || inside[p])) seen.insert(m[p]);
    return std::int64_t(seen.size());
}

std::int64_t watershed_on_host(const Context& ctx, const CubeView& height, const MutableCubeView& labels,
                               const WatershedOptions& o, const WatershedInputs& in) {
    std::optional<CubeInLayout> relief_storage, mask_storage;
    const Cube& relief = dense_host(ctx, height, relief_storage);
    detail::HostWatershed w;
    w.grid = {height.width(), height.height(), height.bands(), nullptr};
    w.steps = detail::watershed_steps(o.connectivity);
    w.options = o;
    Cube markers;
    if (in.mask) w.grid.inside = dense_host(ctx, *in.mask, mask_storage).data<std::uint8_t>();
    if (in.markers) {
        markers = detail::markers_i32(ctx, *in.markers);
        w.markers = markers.data<std::int32_t>();
    }
    Cube out(height.width(), height.height(), height.bands(), DType::I32);
    w.labels = out.data<std::int32_t>();
    std::int64_t regions = visit_dtype(relief.dtype(), [&](auto tag) {
        using T = decltype(tag);
        refuse_nan(relief.data<T>(), w.grid.size(), height, w.grid.inside);
        return detail::watershed_host(ctx, w, relief.data<T>());
    });
    if (w.markers) regions = count_marker_labels(w.markers, w.grid.inside, w.grid.size());
    copy_cube(ctx, out, labels);
    return regions;
}

}  // namespace

std::int64_t watershed_into(const Context& ctx, const CubeView& height, const MutableCubeView& labels,
                            const WatershedOptions& options, const WatershedInputs& inputs) {
    check_relief(height, options);
    check_secondary(height, inputs.markers, "markers");
    check_secondary(height, inputs.mask, "mask");
    detail::check_output_memory(ctx, labels, "watershed_into: the labels are");
    detail::check_output_shape(labels, height.width(), height.height(), height.bands(), DType::I32,
                               "watershed_into: the labels are");
    ctx.log("watershed: " + std::string(ctx.backend_name()) + ", " + height.describe() + ", connectivity " +
            std::to_string(options.connectivity));
    if (options.min_area > 1 && inputs.markers)
        throw InvalidInput("watershed: min_area = " + std::to_string(options.min_area) +
                           " with markers; the marker labels are the caller's (give fewer markers instead)");
    const std::int64_t regions = ctx.is_cuda() ? detail::watershed_on_device(ctx, height, labels, options, inputs)
                                               : watershed_on_host(ctx, height, labels, options, inputs);
    if (options.min_area <= 1) return regions;
    // Small regions are merged on the host for now (a CUDA context downloads the labels and the
    // relief, and uploads the merged labels): min_area.cpp.
    return detail::merge_small_regions(ctx, height, labels, options, inputs.mask);
}

WatershedResult watershed(const Context& ctx, const CubeView& height, const WatershedOptions& options,
                          const WatershedInputs& inputs) {
    check_relief(height, options);
    WatershedResult r;
    r.labels = detail::host_result(ctx, {height.width(), height.height(), height.bands(), DType::I32, Layout::BSQ},
                                   [&](const MutableCubeView& out) { r.regions = watershed_into(ctx, height, out, options, inputs); });
    return r;
}

Cube watershed_boundary(const Context& ctx, const CubeView& labels, int connectivity, bool volume) {
    if (labels.dtype() != DType::I32)
        throw InvalidInput("watershed_boundary: the labels are " + std::string(dtype_name(labels.dtype())) + "; expected i32");
    WatershedOptions o;
    o.connectivity = connectivity;
    o.volume = volume;
    check_relief(labels, o);
    std::optional<CubeInLayout> storage;
    const Cube& dense = dense_host(ctx, labels, storage);
    const std::int32_t* l = dense.data<std::int32_t>();
    const std::vector<detail::Step> steps = detail::watershed_steps(connectivity);
    const int W = labels.width(), H = labels.height(), D = labels.bands();
    Cube out(W, H, D, DType::U8);
    std::uint8_t* b = out.data<std::uint8_t>();
#pragma omp parallel for num_threads(ctx.threads())
    for (int z = 0; z < D; ++z)
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                const std::int64_t p = (std::int64_t(z) * H + y) * W + x;
                std::uint8_t edge = 0;
                for (std::size_t k = steps.size() / 2; k < steps.size(); ++k) {  // forward neighbours
                    const int qx = x + steps[k].dx, qy = y + steps[k].dy, qz = z + steps[k].dz;
                    if (qx < 0 || qx >= W || qy < 0 || qy >= H || qz >= D) continue;
                    edge |= l[(std::int64_t(qz) * H + qy) * W + qx] != l[p];
                }
                b[p] = edge;
            }
    return out;
}

Cube quantize_levels(const Context& ctx, const CubeView& height, std::int64_t levels) {
    WatershedOptions o;
    o.levels = levels;
    o.volume = height.bands() > 1;
    o.connectivity = o.volume ? 6 : 8;
    check_relief(height, o);
    if (levels == 0) throw InvalidInput("quantize_levels: levels = 0; expected 2..2^32");
    std::optional<CubeInLayout> storage;
    const Cube& dense = dense_host(ctx, height, storage);
    Cube out(height.width(), height.height(), height.bands(), DType::U32);
    const detail::Grid g{height.width(), height.height(), height.bands(), nullptr};
    visit_dtype(dense.dtype(), [&](auto tag) {
        using T = decltype(tag);
        refuse_nan(dense.data<T>(), g.size(), height, nullptr);
        const std::vector<std::uint32_t> q = detail::quantize_levels_host(g, dense.data<T>(), levels);
        std::copy(q.begin(), q.end(), out.data<std::uint32_t>());
    });
    return out;
}

}  // namespace cubekit

#ifndef CUBEKIT_HAVE_CUDA
namespace cubekit::detail {
// CPU-only build: a CUDA context cannot exist, so this is unreachable through the public API.
std::int64_t watershed_on_device(const Context&, const CubeView&, const MutableCubeView&, const WatershedOptions&,
                                 const WatershedInputs&) {
    throw DeviceError("watershed: this cubekit was built without CUDA");
}
WatershedPiece watershed_piece_cuda(const Context&, const TileFrame&, const std::vector<std::uint32_t>&, const void*, DType,
                                    const std::uint8_t*, int, std::int32_t*) {
    throw DeviceError("watershed_tiled: this cubekit was built without CUDA");
}
}  // namespace cubekit::detail
#endif
