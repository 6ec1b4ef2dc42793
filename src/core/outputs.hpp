#pragma once
// What the `_into` calls of every family check of a caller's output, and how a plain call wraps
// its `_into` (allocate in the context's memory, run, bring the result to the host).
#include <string>
#include <string_view>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/error.hpp"

namespace cubekit::detail {

/// Throws InvalidInput unless `out` is in the context's memory: device memory on the context's
/// device for a CUDA context, host memory for a CPU one. `who` names the output in the message:
///     "pca_into: scores are in host memory but the context runs on the cuda (device outputs only)"
inline void check_output_memory(const Context& ctx, const CubeView& out, std::string_view who) {
    const std::string w(who);
    if (out.on_device() != ctx.is_cuda())
        throw InvalidInput(w + " in " + (out.on_device() ? "device" : "host") + " memory but the context runs on the " +
                           std::string(ctx.backend_name()) + (ctx.is_cuda() ? " (device outputs only)" : " (host outputs only)"));
    if (out.on_device() && out.device() != ctx.device())
        throw InvalidInput(w + " on device " + std::to_string(out.device()) + ", the context on device " +
                           std::to_string(ctx.device()));
}

/// Throws InvalidInput unless `out` is width×height×bands of `dtype`:
///     "rcmg_into: out is 12x11x1 f32; expected 13x11x1 f32"
inline void check_output_shape(const CubeView& out, int width, int height, int bands, DType dtype, std::string_view who) {
    if (out.width() != width || out.height() != height || out.bands() != bands || out.dtype() != dtype)
        throw InvalidInput(std::string(who) + " " + out.describe() + "; expected " + std::to_string(width) + "x" +
                           std::to_string(height) + "x" + std::to_string(bands) + " " + std::string(dtype_name(dtype)));
}

/// The plain call over its `_into`: into(view) writes a new cube of `shape`, on the host for a CPU
/// context, on the device for a CUDA one (then downloaded). Returns the host cube.
///
///     return host_result(ctx, {W, H, 1, DType::F32, Layout::BSQ}, [&](const MutableCubeView& out) { f_into(ctx, in, out); });
template <class Into>
Cube host_result(const Context& ctx, const CubeShape& shape, Into&& into) {
    if (!ctx.is_cuda()) {
        Cube out(shape.width, shape.height, shape.bands, shape.dtype, shape.layout);
        into(out.mutable_view());
        return out;
    }
    DeviceCube d_out(ctx, shape);
    into(d_out.mutable_view());
    // Dense to dense: one flat copy (copy_cube's cudaMemcpy3DAsync of pageable memory measured
    // 4× slower for 80 MB on an H100 machine, 2026-11-25).
    return d_out.download(ctx);
}

}  // namespace cubekit::detail
