// Connected-component labelling front door: validate once, choose the backend, place the input
// where the backend reads it (spec edges.md §3.7 "E3", §4.3).
#include <algorithm>
#include <climits>
#include <optional>
#include <string>

#include "core/outputs.hpp"
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

// Argument checks shared by the public functions; `what` names the cube ("image", "mask").
// u8_only: the mask of remove_small_components.
void check_cube(const char* function, const char* what, const CubeView& cube, int connectivity, bool u8_only) {
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

// The output of an _into call: the input's size, `dtype`, in the context's memory.
void check_output(const char* function, const Context& ctx, const CubeView& input, const MutableCubeView& out,
                  DType dtype) {
    const std::string who = std::string(function) + ": the output is";
    detail::check_output_memory(ctx, out, who);
    detail::check_output_shape(out, input.width(), input.height(), input.bands(), dtype, who);
}

// `out` is `mask` itself (views of one cube start at the same sample; other overlaps are refused by
// the documentation, not detected).
bool same_samples(const CubeView& a, const CubeView& b) { return a.data() == b.data() && a.memory() == b.memory(); }

// The input where the CUDA kernels read it: itself, or one converted copy (upload or reorder).
CubeView for_cuda(const Context& ctx, const CubeView& input, std::optional<CubeInLayout>& storage) {
    if (detail::labels_cuda_accepts(ctx, input)) return input;
    storage.emplace(ctx, input, Layout::BSQ, Memory::Device);
    return storage->view();
}

// The input where the CPU reads it: itself (any host view), or one download.
CubeView for_cpu(const Context& ctx, const CubeView& input, std::optional<CubeInLayout>& storage) {
    if (!input.on_device()) return input;
    storage.emplace(ctx, input, Layout::BSQ, Memory::Host);
    return storage->view();
}

}  // namespace

ComponentStats label_components_into(const Context& ctx, const CubeView& image, const MutableCubeView& labels,
                                     int connectivity) {
    check_cube("label_components", "image", image, connectivity, false);
    check_output("label_components_into", ctx, image, labels, DType::I32);
    ctx.log("label_components: " + std::string(ctx.backend_name()) + ", " + image.describe() + ", connectivity " +
            std::to_string(connectivity));
    std::optional<CubeInLayout> converted;
    if (!ctx.is_cuda()) return detail::label_components_cpu(ctx, for_cpu(ctx, image, converted), labels, connectivity);
    const CubeView input = for_cuda(ctx, image, converted);
    if (detail::labels_cuda_accepts(ctx, labels)) return detail::label_components_cuda(ctx, input, labels, connectivity);
    DeviceCube dense(ctx, CubeShape{image.width(), image.height(), image.bands(), DType::I32, Layout::BSQ});
    ComponentStats stats = detail::label_components_cuda(ctx, input, dense.mutable_view(), connectivity);
    copy_cube(ctx, dense.view(), labels);
    return stats;
}

Components label_components(const Context& ctx, const CubeView& image, int connectivity) {
    check_cube("label_components", "image", image, connectivity, false);
    Components out;
    out.labels = detail::host_result(ctx, {image.width(), image.height(), image.bands(), DType::I32, Layout::BSQ},
                                     [&](const MutableCubeView& labels) {
                                         out.per_band = label_components_into(ctx, image, labels, connectivity);
                                     });
    return out;
}

void remove_small_components_into(const Context& ctx, const CubeView& mask, const MutableCubeView& out,
                                  std::int64_t min_size, int connectivity) {
    check_cube("remove_small_components", "mask", mask, connectivity, true);
    check_output("remove_small_components_into", ctx, mask, out, DType::U8);
    const bool in_place = same_samples(mask, out);
    if (min_size <= 1) {  // every component has at least one pixel
        if (!in_place) copy_cube(ctx, mask, out);
        return;
    }
    ctx.log("remove_small_components: " + std::string(ctx.backend_name()) + ", " + mask.describe() + ", min size " +
            std::to_string(min_size) + ", connectivity " + std::to_string(connectivity));
    if (!ctx.is_cuda()) {
        if (!in_place) copy_cube(ctx, mask, out);
        // The equal-value rule is exact for any mask (the binary rule only for one foreground value).
        detail::remove_small_components_cpu(ctx, out, min_size, connectivity, true);
        return;
    }
    // The removal's first pass copies the mask into the maps it cleans: it reads a window in place.
    std::optional<CubeInLayout> converted;
    const bool readable = mask.on_device() && mask.device() == ctx.device() && mask.is_pitched(Layout::BSQ);
    const CubeView source = readable ? mask : for_cuda(ctx, mask, converted);
    if (detail::labels_cuda_accepts(ctx, out)) {
        detail::remove_small_components_cuda(ctx, source, out, min_size, connectivity);
        return;
    }
    DeviceCube dense(ctx, CubeShape{mask.width(), mask.height(), mask.bands(), DType::U8, Layout::BSQ});
    detail::remove_small_components_cuda(ctx, source, dense.mutable_view(), min_size, connectivity);
    copy_cube(ctx, dense.view(), out);
}

Cube remove_small_components(const Context& ctx, const CubeView& mask, std::int64_t min_size, int connectivity) {
    check_cube("remove_small_components", "mask", mask, connectivity, true);
    const CubeShape shape{mask.width(), mask.height(), mask.bands(), DType::U8, Layout::BSQ};
    if (min_size <= 1) {  // a copy, wherever the mask is
        Cube out(shape.width, shape.height, shape.bands, shape.dtype, shape.layout);
        copy_cube(ctx, mask, out);
        return out;
    }
    return detail::host_result(ctx, shape, [&](const MutableCubeView& out) {
        remove_small_components_into(ctx, mask, out, min_size, connectivity);
    });
}

}  // namespace cubekit

#ifndef CUBEKIT_HAVE_CUDA
namespace cubekit::detail {
// CPU-only build: a CUDA context cannot exist, so these are unreachable through the public API.
void remove_small_components_device(const Context&, std::uint8_t*, int, int, int, std::int64_t, int) {
    throw DeviceError("remove_small_components: this cubekit was built without CUDA");
}
bool labels_cuda_accepts(const Context&, const CubeView&) { return false; }
ComponentStats label_components_cuda(const Context&, const CubeView&, const MutableCubeView&, int) {
    throw DeviceError("label_components: this cubekit was built without CUDA");
}
void remove_small_components_cuda(const Context&, const CubeView&, const MutableCubeView&, std::int64_t, int) {
    throw DeviceError("remove_small_components: this cubekit was built without CUDA");
}
void apply_keep_cuda(const Context&, const CubeView&, const CubeView&, const std::vector<std::uint8_t>&,
                     const std::vector<std::int64_t>&, const MutableCubeView&) {
    throw DeviceError("remove_small_components_tiled: this cubekit was built without CUDA");
}
}  // namespace cubekit::detail
#endif
