#pragma once
/// Connected-component labelling of every band of a cube, and small-component removal
/// (spec edges.md §3.7 "E3", §4.3; used by the edge detector, watershed and target detection).
///
/// Nonzero pixels are foreground. Two neighbouring foreground pixels belong to the same component
/// iff they hold the same value, so both a binary mask and a label image work. Neighbours: the
/// 4 edge-sharing pixels (connectivity 4) or all 8 (connectivity 8). Bands are independent.
///
///     Components c = cubekit::label_components(ctx, mask);          // 8-connectivity
///     int first = c.labels.at<std::int32_t>(x, y, b);               // 0 = background
///     std::int64_t n = c.per_band[b][first - 1].size;
///     Cube clean = cubekit::remove_small_components(ctx, edges, 5); // components of < 5 pixels → 0
///
/// Inputs are views (a Cube or DeviceCube converts to one): host or device memory (device memory
/// needs a CUDA context), any layout, a window or any strides. The CPU reads them where they are;
/// CUDA reads a dense BSQ cube on the context's device where it is (the removal also a window of
/// one), and otherwise uploads or reorders it once.
/// Both backends give identical results (labels, statistics, cleaned maps). Throws InvalidInput
/// naming the parameter: float element types, connectivity not 4/8, an empty cube, a band of
/// more than 2^31 − 1 pixels; remove_small_components also wants a u8 mask.
#include <cstdint>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"

namespace cubekit {

/// Size and bounding box of one component; the box is inclusive ([x0, x1] × [y0, y1]).
struct ComponentInfo {
    std::int64_t size = 0;
    int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

/// Statistics of every band's components: per_band[b][label − 1].
using ComponentStats = std::vector<std::vector<ComponentInfo>>;

struct Components {
    /// W×H×B, DType::I32, BSQ; 0 = background. In each band the components are numbered
    /// 1..n in raster order (row by row, left to right) of each component's first pixel.
    Cube labels;
    /// per_band[b][label − 1]: the component's size and bounding box.
    ComponentStats per_band;
};

/// Labels the components of every band. image: u8, u16, i16, u32 or i32, any layout, host or
/// device. Returns host labels (a thin wrapper over label_components_into).
Components label_components(const Context& ctx, const CubeView& image, int connectivity = 8);

/// Labels into a caller's W×H×B i32 view in the context's memory (device memory for a CUDA
/// context, host memory for a CPU one; any strides) and returns every band's statistics. Nothing
/// of the image is copied when the backend reads it where it is (CUDA: a dense BSQ cube on the
/// context's device; CPU: any host view), and a dense BSQ output is written in place (others
/// through one copy). Returns once the statistics are on the host; the labels are queued on the
/// context's stream (ctx.synchronize() before reading them from the host).
///
///     cubekit::DeviceCube d_labels(gpu, {W, H, B, cubekit::DType::I32});
///     cubekit::ComponentStats stats = cubekit::label_components_into(gpu, d_mask, d_labels, 8);
ComponentStats label_components_into(const Context& ctx, const CubeView& image, const MutableCubeView& labels,
                                     int connectivity = 8);

/// Zeroes every pixel of a component (per band, equal-value rule above) of fewer than min_size
/// pixels; other pixels keep their value. mask: u8, nonzero = foreground, any layout, host or
/// device. min_size ≤ 1 is the identity (a copy). Returns u8, same shape, BSQ, on the host.
Cube remove_small_components(const Context& ctx, const CubeView& mask, std::int64_t min_size, int connectivity = 8);

/// remove_small_components into a caller's W×H×B u8 view in the context's memory (any strides).
/// `out` may be `mask` itself (the same memory and strides: cleaned in place); otherwise the two
/// must not overlap. Queued on the context's stream (a CUDA context reads back one 8-byte flag:
/// whether the mask holds one foreground value, which allows the faster binary rule).
///
///     cubekit::remove_small_components_into(gpu, d_edges, d_edges, 5);   // in place, on the device
void remove_small_components_into(const Context& ctx, const CubeView& mask, const MutableCubeView& out,
                                  std::int64_t min_size, int connectivity = 8);

}  // namespace cubekit
