// The cleaning step of remove_small_components_tiled on CUDA (labels/tiled.cpp): every sample of a
// tile's mask is kept where its local component is kept, else zeroed. One read of the mask and the
// labels, one write; the table (a byte per local component) is uploaded once per tile.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/cuda_check.hpp"
#include "core/cuda_helpers.cuh"
#include "cubekit/buffer.hpp"
#include "labels/labels_internal.hpp"

namespace cubekit::detail {
namespace {

constexpr int kThreads = 256;

// out(x, y, b) = keep[offset[b] + label(x, y, b)] ? mask(x, y, b) : 0. Grid-stride over the W×H×B
// samples in BSQ order; the mask is read through its strides (a tile staged in BIP or BIL).
__global__ void __launch_bounds__(kThreads)
keep_kernel(StridedView<const std::uint8_t> mask, const std::int32_t* __restrict__ labels,
            const std::uint8_t* __restrict__ keep, const std::int64_t* __restrict__ offset, std::uint8_t* __restrict__ out) {
    const std::int64_t plane = std::int64_t(mask.width) * mask.height, n = plane * mask.bands;
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        const int b = int(i / plane);
        const std::int64_t p = i - std::int64_t(b) * plane;
        const int y = int(p / mask.width), x = int(p - std::int64_t(y) * mask.width);
        const std::int32_t l = labels[i];
        out[i] = (l != 0 && keep[offset[b] + l]) ? mask(x, y, b) : std::uint8_t(0);
    }
}

}  // namespace

void apply_keep_cuda(const Context& ctx, const CubeView& mask, const CubeView& labels, const std::vector<std::uint8_t>& keep,
                     const std::vector<std::int64_t>& offset, const MutableCubeView& out) {
    const std::int64_t n = std::int64_t(mask.num_elements());
    if (n == 0) return;
    DeviceBuffer d_keep(ctx, keep.size()), d_offset(ctx, offset.size() * sizeof(std::int64_t));
    d_keep.upload(ctx, keep.data(), keep.size());
    d_offset.upload(ctx, offset.data(), offset.size() * sizeof(std::int64_t));
    const int blocks = int(std::min<long long>(div_up(n, kThreads), (long long)sm_count(ctx) * 8));
    keep_kernel<<<blocks, kThreads, 0, stream_of(ctx)>>>(
        mask.typed<std::uint8_t>(), static_cast<const std::int32_t*>(static_cast<const void*>(labels.data())),
        static_cast<const std::uint8_t*>(d_keep.data()), static_cast<const std::int64_t*>(d_offset.data()),
        static_cast<std::uint8_t*>(static_cast<void*>(out.data())));
    check_launch(ctx, "keep_kernel", dim3(blocks), dim3(kThreads));
    ctx.synchronize();  // the tables are freed on return
}

}  // namespace cubekit::detail
