// Zernike moments in groups of images (zernike.hpp, issue 17): a batch too large for a memory budget
// streams through the tile runner (core/tiled_local.hpp) as a one-band scene whose row i is image i's
// width × height samples, so that a tile of whole rows is a group of whole images. Each group is
// computed by the plain call's own code (zernike_into_as_plain), image by image, so the rows equal the
// whole batch's bit for bit on the same backend; each worker writes its own group's rows of `out`.
#include <climits>
#include <string>

#include "core/cuda_backend.hpp"
#include "core/outputs.hpp"
#include "core/tiled_local.hpp"
#include "cubekit/buffer.hpp"
#include "cubekit/error.hpp"
#include "cubekit/zernike.hpp"
#include "zernike/zernike_internal.hpp"

namespace cubekit {
namespace {

// Device work per pixel of a group beyond its samples: the folded values (8 bytes per point) and the
// block partials (a few bytes per point), zernike/cuda.cu; rounded up.
constexpr std::size_t kDeviceWorkBytes = 16;

// The images of a group as the one-band tile that holds them: `in` is (width·height) × count × 1,
// dense, so its bytes are the group's BSQ images.
CubeView group_view(const CubeView& in, int width, int height) {
    const Strides bsq = dense_strides(width, height, in.height(), Layout::BSQ);
    return in.on_device() ? CubeView::device(in.data(), in.device(), width, height, in.height(), in.dtype(), bsq)
                          : CubeView::host(in.data(), width, height, in.height(), in.dtype(), bsq);
}

}  // namespace

ZernikeTiled detail::zernike_in_groups(const char* where, const Context& ctx, const ImageStack& stack,
                                       const std::vector<ZernikeIndex>& wanted, ZernikeMethod auto_choice,
                                       const MutableCubeView& out, const ZernikeOptions& options, TileOptions tiles) {
    if (!stack.read) throw InvalidInput(std::string(where) + ": the image stack has no reader");
    const CubeShape shape{stack.width, stack.height, stack.images, stack.dtype, Layout::BSQ};
    ZernikeTiled result{detail::zernike_plan_info(where, shape, wanted, auto_choice, options), {}};
    const int count = int(result.info.count());
    detail::check_output_shape(out, count, stack.images, 2, DType::F64, std::string(where) + ": out is");
    if (out.on_device()) throw InvalidInput(std::string(where) + ": out is in device memory; the tiled call writes host memory");
    const std::int64_t pixels = std::int64_t(stack.width) * stack.height;
    if (pixels > INT_MAX)
        throw InvalidInput(std::string(where) + ": images of " + std::to_string(pixels) + " pixels; at most 2^31 - 1 in groups");

    detail::TileSource source;
    source.width = int(pixels), source.height = stack.images, source.bands = 1, source.dtype = stack.dtype;
    source.read = [&stack](int, int first, int, int n, const MutableCubeView& dst) {
        stack.read(first, n, MutableCubeView::host(dst.data(), stack.width, stack.height, n, stack.dtype,
                                                   dense_strides(stack.width, stack.height, n, Layout::BSQ)));
    };
    if (tiles.tile_width > 0 || tiles.tile_height > 0) tiles.tile_width = source.width;  // a forced size: its height images
    detail::LocalTileKernel k;
    k.out_bands = 0;  // the rows go to `out` directly
    k.device_work_bytes_per_pixel = kDeviceWorkBytes;
    const auto [tw, th] = detail::local_tile_size(ctx, source, k, tiles, where);
    if (tw < source.width)
        throw InvalidInput(std::string(where) + ": the budget holds " + std::to_string(std::int64_t(tw) * th) +
                           " pixels per group, less than one " + std::to_string(stack.width) + "x" +
                           std::to_string(stack.height) + " image; raise it");
    tiles.tile_width = tw, tiles.tile_height = th;
    k.run_tile = [&](const Context& c, const Tile& t, const CubeView& in, const MutableCubeView&) {
        const CubeView group = group_view(in, stack.width, stack.height);
        const MutableCubeView rows = out.window(0, t.y0, count, t.height);
        if (!c.is_cuda()) {
            detail::zernike_into_with(where, c, group, wanted, auto_choice, rows, options);
            return;
        }
        DeviceCube on_device(c, zernike_moments_shape(t.height, count));
        detail::zernike_into_with(where, c, group, wanted, auto_choice, on_device, options);
        copy_cube(c, on_device, rows);
        c.synchronize();
    };
    result.run = detail::run_local_tiles(ctx, source, MutableCubeView{}, k, tiles, where);
    return result;
}

ImageStack image_stack(const CubeView& images) {
    if (images.on_device())
        throw InvalidInput("image_stack: the images are on a device; the tiled calls take host memory (the _into calls "
                           "compute device images in place)");
    return {images.width(), images.height(), images.bands(), images.dtype(),
            [images](int first, int count, const MutableCubeView& dst) {
                detail::copy_cube_host(images.band_range(first, count), dst);
            }};
}

}  // namespace cubekit
