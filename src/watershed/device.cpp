// The watershed's CUDA front: the relief, mask and markers where the kernels read them (dense, in
// raster order, on the context's device: used in place when they already are), the labels written
// in place when the output is dense.
#include <optional>

#include "cubekit/watershed.hpp"
#include "watershed/watershed_internal.hpp"

namespace cubekit::detail {
namespace {

bool dense_here(const Context& ctx, const CubeView& v) {
    return v.on_device() && v.device() == ctx.device() && v.is_dense(Layout::BSQ);
}

CubeView on_device(const Context& ctx, const CubeView& v, std::optional<CubeInLayout>& storage) {
    if (dense_here(ctx, v)) return v;
    storage.emplace(ctx, v, Layout::BSQ, Memory::Device);
    return storage->view();
}

}  // namespace

std::int64_t watershed_on_device(const Context& ctx, const CubeView& height, const MutableCubeView& labels,
                                 const WatershedOptions& options, const WatershedInputs& inputs) {
    std::optional<CubeInLayout> relief_storage, mask_storage;
    const CubeView relief = on_device(ctx, height, relief_storage);
    DeviceWatershed w;
    w.grid = {height.width(), height.height(), height.bands(), nullptr};
    if (inputs.mask)
        w.grid.inside = reinterpret_cast<const std::uint8_t*>(on_device(ctx, *inputs.mask, mask_storage).data());
    DeviceCube markers;
    if (inputs.markers) {
        if (inputs.markers->dtype() == DType::I32 && dense_here(ctx, *inputs.markers)) {
            w.markers = reinterpret_cast<const std::int32_t*>(inputs.markers->data());
        } else {  // converted (and its labels checked) on the host, once
            markers = DeviceCube::upload(ctx, markers_i32(ctx, *inputs.markers));
            w.markers = reinterpret_cast<const std::int32_t*>(markers.view().data());
        }
    }
    DeviceCube dense_labels;
    const bool in_place = labels.is_dense(Layout::BSQ);
    if (!in_place) dense_labels = DeviceCube(ctx, {height.width(), height.height(), height.bands(), DType::I32, Layout::BSQ});
    const MutableCubeView out = in_place ? labels : dense_labels.mutable_view();
    w.labels = reinterpret_cast<std::int32_t*>(out.data());
    const std::int64_t regions = watershed_cuda(ctx, w, relief.data(), relief.dtype(), options);
    if (!in_place) copy_cube(ctx, dense_labels.view(), labels);
    return regions;
}

}  // namespace cubekit::detail
