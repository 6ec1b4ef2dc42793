#pragma once
// The multi-resolution detector's pyramid on the device (multires_pyramid.cu), shared with its
// descent (multires_cuda.cu): levels of per-(node, band) sums and σ, and the device arena of a call.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "core/cuda_backend.hpp"
#include "cubekit/buffer.hpp"
#include "detect/detect_internal.hpp"

namespace cubekit::detail {

// One level of the pyramid, node-major with the bands fastest: the finite-sample count and sums of
// every (node, band), and σ (spec §B.3 step 3, the CPU's node_feature expression; NaN when n = 0),
// written with the sums so that the descent reads one value per band instead of dividing.
struct DeviceLevel {
    std::int32_t* n;
    double* s1;
    double* s2;
    double* sigma;
    int gx, gy;
};

// Device memory of one call, carved from one allocation.
class Arena {
public:
    void add(std::size_t bytes) { total_ += (bytes + 255) / 256 * 256; }
    /// Keeps the pool's memory mapped across calls (cuda_backend.hpp): without it a caller that
    /// synchronises between calls had each call map its scratch again (~40 MB for 1024² × 64).
    void allocate(const Context& ctx) {
        keep_pool_memory(ctx, total_);
        buffer_ = DeviceBuffer(ctx, std::max<std::size_t>(total_, 256));
    }
    /// The next piece; every take must match one add of the same size (checked).
    template <typename T>
    T* take(std::size_t count) {
        T* p = reinterpret_cast<T*>(static_cast<std::byte*>(buffer_.data()) + used_);
        used_ += (count * sizeof(T) + 255) / 256 * 256;
        if (used_ > total_) throw std::logic_error("detect multires: device arena overrun (an add() is missing)");
        return p;
    }

private:
    DeviceBuffer buffer_;
    std::size_t total_ = 0, used_ = 0;
};

/// Values (nodes × bands) of level l.
inline std::size_t level_values(const TreeGeometry& g, int l) { return std::size_t(g.grid_x(l)) * g.grid_y(l) * g.bands; }

/// Reserves levels 0..top in the arena (before `allocate`).
void add_pyramid(Arena& arena, const TreeGeometry& g, int top);

/// Takes levels 0..top from the arena and queues their block sums and merges on the context's
/// stream (the skipped non-finite samples are added to `skipped`, device memory).
std::vector<DeviceLevel> build_pyramid(const Context& ctx, const CubeView& cube, const TreeGeometry& g, int top, Arena& arena,
                                       unsigned long long* skipped);

/// Takes levels 0..g.top from the arena, uploads a host level 0 into the first and queues the merges.
std::vector<DeviceLevel> upload_pyramid(const Context& ctx, const PyramidLevel& level0, const TreeGeometry& g, Arena& arena);

}  // namespace cubekit::detail
