// RCMG front door: validate once, choose the backend (spec/gradient-watershed.md, Part A).
#include <optional>
#include <string>

#include "cubekit/error.hpp"

#include "core/outputs.hpp"
#include "cubekit/gradient.hpp"
#include "gradient/rcmg_internal.hpp"

namespace cubekit {

void check_rcmg_arguments(const CubeShape& shape, const RcmgOptions& options) {
    check_fields(options, "rcmg");
    // r pairs leave 2r of the window's n vectors; at least two must remain to form a pair.
    const int n = options.connectivity == 4 ? 5 : 9;
    const int max_reject = (n - 2) / 2;
    if (options.reject > max_reject)
        throw InvalidInput("rcmg: reject = " + std::to_string(options.reject) + "; expected 0.." +
                           std::to_string(max_reject) + " with connectivity = " + std::to_string(options.connectivity));
    if (options.out_type == DType::F64 && options.precision != Precision::F64)
        throw InvalidInput("rcmg: out_type = f64 needs precision = f64 (an f32 accumulation has no f64 digits to give)");
    if (shape.width <= 0 || shape.height <= 0 || shape.bands <= 0)
        throw InvalidInput("rcmg: the cube is " + std::to_string(shape.width) + "x" + std::to_string(shape.height) +
                           "x" + std::to_string(shape.bands) + "; width, height and bands must be at least 1");
}

std::string_view rcmg_implementation(const Context& ctx, const RcmgOptions& options) {
    if (!ctx.is_cuda()) return "cpu";
    switch (options.partition) {
        case RcmgPartition::Spatial: return "cuda-spatial";
        case RcmgPartition::Spectral: return "cuda-spectral";
        case RcmgPartition::Auto: return "cuda-shared-pairs";
    }
    return "?";
}

namespace {

void check_rcmg_output(const Context& ctx, const CubeView& cube, const MutableCubeView& out, const RcmgOptions& options) {
    detail::check_output_memory(ctx, out, "rcmg_into: out is");
    detail::check_output_shape(out, cube.width(), cube.height(), 1, options.out_type, "rcmg_into: out is");
}

// CUDA: reads a BSQ cube (or window) on the context's device where it is, else one upload or
// device reorder; writes `out` directly when its rows are contiguous.
void rcmg_on_device(const Context& ctx, const CubeView& cube, const MutableCubeView& out, const RcmgOptions& options) {
    const bool in_place = cube.on_device() && cube.device() == ctx.device() && detail::rcmg_cuda_accepts(cube);
    std::optional<CubeInLayout> converted;
    if (!in_place) converted.emplace(ctx, cube, Layout::BSQ, Memory::Device);
    const CubeView& input = in_place ? cube : converted->view();
    if (out.is_pitched(Layout::BSQ)) {
        detail::rcmg_cuda(ctx, input, out, options);
        if (converted) ctx.synchronize();  // the converted copy is freed stream-ordered; finish before it goes
        return;
    }
    DeviceCube dense(ctx, CubeShape{cube.width(), cube.height(), 1, options.out_type, Layout::BSQ});
    detail::rcmg_cuda(ctx, input, dense.mutable_view(), options);
    copy_cube(ctx, dense.view(), out);
}

}  // namespace

void rcmg_into(const Context& ctx, const CubeView& cube, const MutableCubeView& out, const RcmgOptions& options) {
    check_rcmg_arguments(shape_of(cube), options);
    check_rcmg_output(ctx, cube, out, options);
    ctx.log("rcmg: " + std::string(rcmg_implementation(ctx, options)) + ", " + cube.describe());
    if (ctx.is_cuda()) {
        rcmg_on_device(ctx, cube, out, options);
        return;
    }
    // The CPU reference reads any host view through its strides; device input comes down once.
    std::optional<CubeInLayout> host;
    if (cube.on_device()) host.emplace(ctx, cube, Layout::BSQ, Memory::Host);
    detail::rcmg_cpu(ctx, host ? host->view() : cube, out, options);
}

Cube rcmg(const Context& ctx, const CubeView& cube, const RcmgOptions& options) {
    check_rcmg_arguments(shape_of(cube), options);
    Cube out(cube.width(), cube.height(), 1, options.out_type, Layout::BSQ);
    if (!ctx.is_cuda()) {
        rcmg_into(ctx, cube, out, options);
        return out;
    }
    DeviceCube d_out(ctx, out.shape());
    rcmg_into(ctx, cube, d_out, options);
    copy_cube(ctx, d_out.view(), out);
    return out;
}

}  // namespace cubekit

#ifndef CUBEKIT_HAVE_CUDA
namespace cubekit::detail {
// CPU-only build: a CUDA context cannot exist, so these are unreachable through the public API.
bool rcmg_cuda_accepts(const CubeView&) { return false; }
void rcmg_cuda(const Context&, const CubeView&, const MutableCubeView&, const RcmgOptions&) {
    throw DeviceError("rcmg: this cubekit was built without CUDA");
}
}  // namespace cubekit::detail
#endif
