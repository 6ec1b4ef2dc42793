// Copies between views where at least one side is in device memory (copy_cube, DeviceCube::
// from_view, CubeInLayout). Host ↔ device moves dense or pitched (window) data with one
// cudaMemcpy2D/3D and no host copy; layout changes run on the device, where a transpose costs
// ~2 bytes / 3 TB/s per byte instead of a host pass; only views with strides no copy engine can
// express (negative, overlapping) are first gathered on the host.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "core/cuda_backend.hpp"
#include "core/cuda_check.hpp"
#include "cubekit/buffer.hpp"
#include "cubekit/cube.hpp"

namespace cubekit::detail {
namespace {

constexpr int kCopyBlock = 256;

// One thread per destination element, in the destination's own order (coalesced writes);
// reads follow the source strides. Moves 2 × elements × sizeof(E) bytes.
template <typename E>
__global__ void copy_strided_kernel(StridedView<const E> src, StridedView<E> dst, Layout order, std::int64_t n) {
    const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const std::int64_t W = dst.width, H = dst.height, B = dst.bands;
    int x, y, b;
    switch (order) {
        case Layout::BSQ: x = int(i % W), y = int(i / W % H), b = int(i / (W * H)); break;
        case Layout::BIL: x = int(i % W), b = int(i / W % B), y = int(i / (W * B)); break;
        default: b = int(i % B), x = int(i / B % W), y = int(i / (W * B)); break;
    }
    dst(x, y, b) = src(x, y, b);
}

template <typename E>
void launch_copy(const Context& ctx, const CubeView& src, const MutableCubeView& dst) {
    const std::int64_t n = std::int64_t(src.num_elements());
    const dim3 block(kCopyBlock), grid(unsigned((n + kCopyBlock - 1) / kCopyBlock));
    const StridedView<const E> s{reinterpret_cast<const E*>(src.data()), src.width(), src.height(), src.bands(), src.strides()};
    const StridedView<E> d{reinterpret_cast<E*>(dst.data()), dst.width(), dst.height(), dst.bands(), dst.strides()};
    copy_strided_kernel<E><<<grid, block, 0, stream_of(ctx)>>>(s, d, dst.nearest_layout(), n);
    CUBEKIT_CHECK_LAUNCH(ctx, "copy_strided_kernel", grid, block);
}

// Device → device, any strides, same device.
void copy_on_device(const Context& ctx, const CubeView& src, const MutableCubeView& dst) {
    const auto layout = src.dense_layout();
    if (layout && dst.is_dense(*layout)) {
        CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.num_bytes(), cudaMemcpyDeviceToDevice, stream_of(ctx)));
        return;
    }
    switch (dtype_size(src.dtype())) {
        case 1: launch_copy<std::uint8_t>(ctx, src, dst); break;
        case 2: launch_copy<std::uint16_t>(ctx, src, dst); break;
        case 4: launch_copy<std::uint32_t>(ctx, src, dst); break;
        default: launch_copy<std::uint64_t>(ctx, src, dst); break;
    }
}

// A view pitched in `layout` as a copy engine sees it: `rows` runs of `run` contiguous bytes,
// `row_pitch` apart, in `slices` groups `slice_pitch` apart (bytes).
struct Pitched {
    std::size_t run = 0, rows = 1, row_pitch = 0, slices = 1, slice_pitch = 0;
};

Pitched pitched_form(const CubeView& v, Layout layout) {
    const std::size_t es = dtype_size(v.dtype());
    const std::size_t W = std::size_t(v.width()), H = std::size_t(v.height()), B = std::size_t(v.bands());
    const std::size_t sy = std::size_t(v.strides().y) * es, sb = std::size_t(v.strides().b) * es;
    switch (layout) {
        case Layout::BSQ: return {W * es, H, H > 1 ? sy : W * es, B, B > 1 ? sb : 0};
        case Layout::BIL: return {W * es, B, B > 1 ? sb : W * es, H, H > 1 ? sy : 0};
        case Layout::BIP: return {W * B * es, H, H > 1 ? sy : W * B * es, 1, 0};
    }
    return {};
}

Pitched dense_form(const Pitched& p) { return {p.run, p.rows, p.run, p.slices, p.run * p.rows}; }

// One cudaMemcpy3D when the slice pitch is a whole number of rows, else one 2-D copy per slice.
void copy_pitched(const Context& ctx, void* dst, const Pitched& d, const void* src, const Pitched& s, cudaMemcpyKind kind) {
    if (s.run == 0 || s.rows == 0 || s.slices == 0) return;
    const auto dense = [](const Pitched& p) {
        return (p.rows == 1 || p.row_pitch == p.run) && (p.slices == 1 || p.slice_pitch == p.run * p.rows);
    };
    if (dense(s) && dense(d)) {  // one flat copy: cudaMemcpy3D from pageable memory measured ~2x slower
        const std::size_t bytes = s.run * s.rows * s.slices;
        if (kind == cudaMemcpyHostToDevice) upload_flat(ctx, dst, src, bytes);
        else CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream_of(ctx)));
        return;
    }
    const bool one_call = s.slices == 1 || (s.slice_pitch % s.row_pitch == 0 && d.slice_pitch % d.row_pitch == 0);
    if (one_call && s.slices > 1) {
        cudaMemcpy3DParms p{};
        p.srcPtr = make_cudaPitchedPtr(const_cast<void*>(src), s.row_pitch, s.run, s.slice_pitch / s.row_pitch);
        p.dstPtr = make_cudaPitchedPtr(dst, d.row_pitch, d.run, d.slice_pitch / d.row_pitch);
        p.extent = make_cudaExtent(s.run, s.rows, s.slices);
        p.kind = kind;
        CUBEKIT_CUDA_CHECK(cudaMemcpy3DAsync(&p, stream_of(ctx)));
        return;
    }
    for (std::size_t k = 0; k < s.slices; ++k)
        CUBEKIT_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<char*>(dst) + k * d.slice_pitch, d.row_pitch,
                                             static_cast<const char*>(src) + k * s.slice_pitch, s.row_pitch, s.run,
                                             s.rows, kind, stream_of(ctx)));
}

// The layout a copy engine can move `v` in without a host gather, if any.
bool engine_layout(const CubeView& v, Layout& layout) {
    if (const auto d = v.dense_layout()) {
        layout = *d;
        return true;
    }
    for (Layout l : {Layout::BSQ, Layout::BIL, Layout::BIP})
        if (v.is_pitched(l)) {
            layout = l;
            return true;
        }
    return false;
}

void host_to_device(const Context& ctx, const CubeView& src, const MutableCubeView& dst) {
    Layout layout;
    if (!engine_layout(src, layout)) {  // gather on the host first, in the destination's order
        const Cube staged = Cube::from_view(src, dst.nearest_layout());
        host_to_device(ctx, staged.view(), dst);
        ctx.synchronize();  // `staged` dies here
        return;
    }
    const Pitched s = pitched_form(src, layout);
    if (dst.is_pitched(layout)) {  // straight into the destination
        copy_pitched(ctx, dst.data(), pitched_form(dst, layout), src.data(), s, cudaMemcpyHostToDevice);
        return;
    }
    DeviceCube staged(ctx, CubeShape{src.width(), src.height(), src.bands(), src.dtype(), layout});
    copy_pitched(ctx, staged.data(), dense_form(s), src.data(), s, cudaMemcpyHostToDevice);
    copy_on_device(ctx, staged.view(), dst);
    ctx.synchronize();  // `staged` is freed stream-ordered; wait so the caller sees the copy done
}

void device_to_host(const Context& ctx, const CubeView& src, const MutableCubeView& dst) {
    Layout layout;
    if (engine_layout(dst, layout) && src.is_pitched(layout)) {
        copy_pitched(ctx, dst.data(), pitched_form(dst, layout), src.data(), pitched_form(src, layout),
                     cudaMemcpyDeviceToHost);
        return;
    }
    // Reorder on the device into the destination's order, then one copy (and a host scatter only
    // when the destination itself has strides no copy engine can write).
    const bool engine = engine_layout(dst, layout);
    if (!engine) layout = dst.nearest_layout();
    DeviceCube staged(ctx, CubeShape{src.width(), src.height(), src.bands(), src.dtype(), layout});
    copy_on_device(ctx, src, staged.mutable_view());
    if (engine) {
        const Pitched d = pitched_form(dst, layout);
        copy_pitched(ctx, dst.data(), d, staged.data(), dense_form(d), cudaMemcpyDeviceToHost);
        ctx.synchronize();
        return;
    }
    const Cube host = staged.download(ctx);
    copy_cube_host(host.view(), dst);
}

}  // namespace

void copy_cube_cuda(const Context& ctx, const CubeView& src, const MutableCubeView& dst) {
    if (!ctx.is_cuda())
        throw InvalidInput("copy_cube: a view is in device memory but the context runs on the CPU");
    const auto check_device = [&](const CubeView& v, const char* side) {
        if (v.on_device() && v.device() != ctx.device())
            throw InvalidInput(std::string("copy_cube: the ") + side + " is on device " + std::to_string(v.device()) +
                               ", the context on device " + std::to_string(ctx.device()));
    };
    check_device(src, "source");
    check_device(dst, "destination");
    CUBEKIT_CUDA_CHECK(cudaSetDevice(ctx.device()));
    if (src.on_device() && dst.on_device()) {
        copy_on_device(ctx, src, dst);
        ctx.synchronize();
        return;
    }
    // Host ↔ device: timed for Context::transfer_totals; a download from when the work queued before
    // it is done (it would wait for it anyway), an upload until its bytes are on the device.
    const bool upload = dst.on_device();
    if (!upload) ctx.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    if (upload) host_to_device(ctx, src, dst);
    else device_to_host(ctx, src, dst);
    ctx.synchronize();
    ctx.count_transfer(upload, src.num_bytes(),
                       std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace cubekit::detail
