// RCMG front door: validate once, choose the backend (spec/gradient-watershed.md, Part A).
#include <string>

#include "cubekit/error.hpp"

#include "cubekit/gradient.hpp"
#include "gradient/rcmg_internal.hpp"

namespace cubekit {

std::string_view precision_name(Precision p) { return p == Precision::F32 ? "f32" : "f64"; }

Precision parse_precision(std::string_view name, std::string_view what) {
    if (name == "f32" || name == "float32" || name == "single") return Precision::F32;
    if (name == "f64" || name == "float64" || name == "double") return Precision::F64;
    throw InvalidInput(std::string(what) + " = '" + std::string(name) + "': expected f32 or f64");
}

std::string_view partition_name(RcmgPartition p) {
    switch (p) {
        case RcmgPartition::Auto: return "auto";
        case RcmgPartition::Spatial: return "spatial";
        case RcmgPartition::Spectral: return "spectral";
    }
    return "?";
}

RcmgPartition parse_partition(std::string_view name, std::string_view what) {
    if (name == "auto") return RcmgPartition::Auto;
    if (name == "spatial") return RcmgPartition::Spatial;
    if (name == "spectral") return RcmgPartition::Spectral;
    throw InvalidInput(std::string(what) + " = '" + std::string(name) + "': expected auto, spatial or spectral");
}

void check_rcmg_arguments(const CubeShape& shape, const RcmgOptions& options) {
    if (options.connectivity != 4 && options.connectivity != 8)
        throw InvalidInput("rcmg: connectivity = " + std::to_string(options.connectivity) + "; expected 4 or 8");
    const int n = options.connectivity == 4 ? 5 : 9;
    const int max_reject = (n - 2) / 2;
    if (options.reject < 0 || options.reject > max_reject)
        throw InvalidInput("rcmg: reject = " + std::to_string(options.reject) + "; expected 0.." +
                           std::to_string(max_reject) + " with " + std::to_string(options.connectivity) +
                           "-connectivity");
    if (options.out_type != DType::F32 && options.out_type != DType::F64)
        throw InvalidInput("rcmg: out-type = " + std::string(dtype_name(options.out_type)) + "; expected f32 or f64");
    if (options.out_type == DType::F64 && options.precision != Precision::F64)
        throw InvalidInput("rcmg: out-type = f64 needs precision = f64 (an f32 accumulation has no f64 digits to give)");
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

Cube rcmg(const Context& ctx, const Cube& cube, const RcmgOptions& options) {
    check_rcmg_arguments(cube.shape(), options);
    ctx.log("rcmg: " + std::string(rcmg_implementation(ctx, options)) + ", " + cube.shape().describe());
    // The kernels want BSQ (each band a contiguous image); other layouts are converted once.
    const Cube converted = cube.layout() == Layout::BSQ ? Cube() : cube.to_layout(Layout::BSQ);
    const Cube& bsq = cube.layout() == Layout::BSQ ? cube : converted;
    if (!ctx.is_cuda()) {
        Cube out(cube.width(), cube.height(), 1, options.out_type, Layout::BSQ);
        detail::rcmg_cpu(ctx, bsq, out, options);
        return out;
    }
    const DeviceCube d_cube = DeviceCube::upload(ctx, bsq);
    DeviceCube d_out(ctx, CubeShape{cube.width(), cube.height(), 1, options.out_type, Layout::BSQ});
    detail::rcmg_cuda(ctx, d_cube, d_out, options);
    return d_out.download(ctx);
}

void rcmg_into(const Context& ctx, const DeviceCube& cube, DeviceCube& out, const RcmgOptions& options) {
    check_rcmg_arguments(cube.shape(), options);
    if (!ctx.is_cuda()) throw InvalidInput("rcmg_into: the context runs on the CPU; device cubes need a CUDA context");
    if (cube.shape().layout != Layout::BSQ)
        throw InvalidInput("rcmg_into: the device cube is " + std::string(layout_name(cube.shape().layout)) +
                           "; expected bsq");
    const CubeShape& o = out.shape();
    if (o.width != cube.shape().width || o.height != cube.shape().height || o.bands != 1 || o.dtype != options.out_type)
        throw InvalidInput("rcmg_into: output is " + o.describe() + "; expected " + std::to_string(cube.shape().width) +
                           "x" + std::to_string(cube.shape().height) + "x1 " + std::string(dtype_name(options.out_type)));
    detail::rcmg_cuda(ctx, cube, out, options);
}

}  // namespace cubekit

#ifndef CUBEKIT_HAVE_CUDA
namespace cubekit::detail {
// CPU-only build: a CUDA context cannot exist, so this is unreachable through the public API.
void rcmg_cuda(const Context&, const DeviceCube&, DeviceCube&, const RcmgOptions&) {
    throw DeviceError("rcmg: this cubekit was built without CUDA");
}
}  // namespace cubekit::detail
#endif
