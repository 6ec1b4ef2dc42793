// Connected-component labelling front door: validate once, choose the backend (spec edges.md
// §3.7 "E3", §4.3).
#include <algorithm>
#include <climits>
#include <string>

#include "cubekit/error.hpp"
#include "cubekit/labels.hpp"
#include "labels/labels_internal.hpp"

namespace cubekit {
namespace detail {

void check_label_geometry(const char* function, int width, int height, int planes, int connectivity) {
    const std::string f(function);
    if (connectivity != 4 && connectivity != 8)
        throw InvalidInput(f + ": connectivity = " + std::to_string(connectivity) + "; expected 4 or 8");
    if (width < 0 || height < 0 || planes < 0)
        throw InvalidInput(f + ": the image is " + std::to_string(width) + "x" + std::to_string(height) + "x" +
                           std::to_string(planes) + "; sizes must not be negative");
    if (std::int64_t(width) * std::int64_t(height) > std::int64_t(INT_MAX))
        throw InvalidInput(f + ": a band of " + std::to_string(width) + "x" + std::to_string(height) +
                           " has more than 2^31-1 pixels; tile it");
}

}  // namespace detail

namespace {

// Argument checks shared by both public functions; `what` names the cube ("image", "mask").
// u8_only: the mask of remove_small_components.
void check_cube(const char* function, const char* what, const Cube& cube, int connectivity, bool u8_only) {
    const std::string f(function);
    detail::check_label_geometry(function, cube.width(), cube.height(), cube.bands(), connectivity);
    if (cube.empty())
        throw InvalidInput(f + ": the " + what + " is " + std::to_string(cube.width()) + "x" +
                           std::to_string(cube.height()) + "x" + std::to_string(cube.bands()) +
                           "; width, height and bands must be at least 1");
    if (u8_only ? cube.dtype() != DType::U8 : dtype_is_float(cube.dtype()))
        throw InvalidInput(f + ": the " + what + " element type is " + std::string(dtype_name(cube.dtype())) +
                           (u8_only ? "; expected u8" : "; expected an integer type (u8, u16, i16, u32, i32)"));
}

Cube as_bsq(const Cube& cube) { return cube.layout() == Layout::BSQ ? cube.clone() : cube.to_layout(Layout::BSQ); }

// True when every nonzero sample holds the same value: then "equal neighbours join" and "any
// nonzero neighbours join" are the same rule, and the binary fast path is exact.
bool single_foreground_value(const Cube& mask) {
    const std::uint8_t* p = mask.data<std::uint8_t>();
    std::uint8_t seen = 0;
    for (std::size_t i = 0, n = mask.num_elements(); i < n; ++i) {
        if (p[i] == 0) continue;
        if (seen == 0) seen = p[i];
        else if (p[i] != seen) return false;
    }
    return true;
}

}  // namespace

Components label_components(const Context& ctx, const Cube& image, int connectivity) {
    check_cube("label_components", "image", image, connectivity, false);
    ctx.log("label_components: " + std::string(ctx.backend_name()) + ", " + image.shape().describe() +
            ", connectivity " + std::to_string(connectivity));
    const Cube converted = image.layout() == Layout::BSQ ? Cube() : image.to_layout(Layout::BSQ);
    const Cube& bsq = image.layout() == Layout::BSQ ? image : converted;
    if (ctx.is_cuda()) return detail::label_components_device(ctx, bsq, connectivity);
    return detail::label_components_cpu(ctx, bsq, connectivity);
}

Cube remove_small_components(const Context& ctx, const Cube& mask, std::int64_t min_size, int connectivity) {
    check_cube("remove_small_components", "mask", mask, connectivity, true);
    Cube out = as_bsq(mask);
    if (min_size <= 1) return out;  // every component has at least one pixel
    ctx.log("remove_small_components: " + std::string(ctx.backend_name()) + ", " + mask.shape().describe() +
            ", min size " + std::to_string(min_size) + ", connectivity " + std::to_string(connectivity));
    const int W = out.width(), H = out.height(), B = out.bands();
    if (single_foreground_value(out)) {
        std::uint8_t* maps = out.data<std::uint8_t>();
        if (!ctx.is_cuda()) {
            detail::remove_small_components_cpu(ctx, maps, W, H, B, min_size, connectivity);
            return out;
        }
        DeviceBuffer d_maps(ctx, out.num_bytes());
        d_maps.upload(ctx, maps, out.num_bytes());
        detail::remove_small_components_device(ctx, static_cast<std::uint8_t*>(d_maps.data()), W, H, B, min_size,
                                               connectivity);
        d_maps.download(ctx, maps, out.num_bytes());
        return out;
    }
    // Several foreground values: label with the equal-value rule, then clear by size.
    const Components c = label_components(ctx, out, connectivity);
    const std::size_t plane = std::size_t(W) * std::size_t(H);
    std::uint8_t* maps = out.data<std::uint8_t>();
    const std::int32_t* labels = c.labels.data<std::int32_t>();
    for (int b = 0; b < B; ++b) {
        const std::vector<ComponentInfo>& info = c.per_band[std::size_t(b)];
        for (std::size_t i = std::size_t(b) * plane, end = i + plane; i < end; ++i)
            if (labels[i] != 0 && info[std::size_t(labels[i] - 1)].size < min_size) maps[i] = 0;
    }
    return out;
}

}  // namespace cubekit

#ifndef CUBEKIT_HAVE_CUDA
namespace cubekit::detail {
// CPU-only build: a CUDA context cannot exist, so these are unreachable through the public API.
void remove_small_components_device(const Context&, std::uint8_t*, int, int, int, std::int64_t, int) {
    throw DeviceError("remove_small_components: this cubekit was built without CUDA");
}
Components label_components_device(const Context&, const Cube&, int) {
    throw DeviceError("label_components: this cubekit was built without CUDA");
}
}  // namespace cubekit::detail
#endif
