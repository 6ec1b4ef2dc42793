#pragma once
// Backends of the RCMG; gradient.cpp validates arguments and chooses one.
#include "cubekit/gradient.hpp"

namespace cubekit::detail {

// Window of the spec (A3): vertex v at offset (dy, dx), raster order.
struct WindowOffset {
    int dy, dx;
};
inline constexpr WindowOffset kWindow4[5] = {{-1, 0}, {0, -1}, {0, 0}, {0, 1}, {1, 0}};
inline constexpr WindowOffset kWindow8[9] = {{-1, -1}, {-1, 0}, {-1, 1}, {0, -1}, {0, 0},
                                             {0, 1},   {1, -1}, {1, 0},  {1, 1}};

/// CPU reference. cube: host view, any type, any strides. out: W×H×1 host view of
/// options.out_type, any strides.
void rcmg_cpu(const Context& ctx, const CubeView& cube, const MutableCubeView& out, const RcmgOptions& options);

/// True when the CUDA kernels read `cube` where it is: BSQ, or a window of a BSQ cube.
bool rcmg_cuda_accepts(const CubeView& cube);

/// CUDA. cube: device view that rcmg_cuda_accepts; out: W×H×1 device view of options.out_type
/// with contiguous rows.
void rcmg_cuda(const Context& ctx, const CubeView& cube, const MutableCubeView& out, const RcmgOptions& options);

}  // namespace cubekit::detail
