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

/// CPU reference. cube: BSQ, any type. out: W×H×1 of options.out_type, BSQ.
void rcmg_cpu(const Context& ctx, const Cube& cube, Cube& out, const RcmgOptions& options);

/// CUDA. cube: BSQ device cube; out: W×H×1 device cube of options.out_type.
void rcmg_cuda(const Context& ctx, const DeviceCube& cube, DeviceCube& out, const RcmgOptions& options);

}  // namespace cubekit::detail
