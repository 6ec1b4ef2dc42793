// RCMG in tiles (tiles.hpp): local with a 1-pixel halo, so each tile's core is the whole-scene result.
#include "core/tiled_local.hpp"
#include "cubekit/gradient.hpp"

namespace cubekit {

namespace {

TiledRun rcmg_source(const Context& ctx, const detail::TileSource& source, const MutableCubeView& out,
                     const RcmgOptions& options, const TileOptions& tiles) {
    check_rcmg_arguments(CubeShape{source.width, source.height, source.bands, source.dtype, source.layout}, options);
    detail::LocalTileKernel kernel;
    kernel.halo = 1;  // the 3x3 window (or 5-pixel cross) of each pixel
    kernel.out_dtype = options.out_type;
    kernel.out_bands = 1;
    // Tiles are staged in the input's own nesting; the CUDA kernel reads BSQ, so another nesting is
    // reordered on the device into a copy of the tile.
    if (source.layout != Layout::BSQ)
        kernel.device_work_bytes_per_pixel = std::size_t(source.bands) * dtype_size(source.dtype);
    kernel.run = [&options](const Context& c, const CubeView& in, const MutableCubeView& o) { rcmg_into(c, in, o, options); };
    return detail::run_local_tiles(ctx, source, out, kernel, tiles, "rcmg");
}

}  // namespace

TiledRun rcmg_tiled(const Context& ctx, const CubeView& cube, const MutableCubeView& out, const RcmgOptions& options,
                    const TileOptions& tiles) {
    return rcmg_source(ctx, detail::tile_source(cube), out, options, tiles);
}

TiledRun rcmg_tiled(const Context& ctx, const CubeFile& file, const MutableCubeView& out, const RcmgOptions& options,
                    const TileOptions& tiles) {
    return rcmg_source(ctx, detail::tile_source(file), out, options, tiles);
}

}  // namespace cubekit
