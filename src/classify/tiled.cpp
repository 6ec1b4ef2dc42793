// Pixel-wise classification in tiles (classify.hpp; issue 17): every pixel's class depends on its own
// spectrum only, so each tile's window is the core (halo 0) and the tiled map equals the whole one.
#include <string>

#include "core/tiled_local.hpp"
#include "cubekit/classify.hpp"

namespace cubekit {
namespace {

// Scratch per pixel of a tile: the predicted map (i32) and a host copy of it on CUDA; the SVM's
// per-pixel decision accumulators (f64 per class pair) stay within the model's own buffers.
constexpr std::size_t kWorkBytes = 16;

template <class Predict>
TiledRun predict_in_tiles(const Context& ctx, const detail::TileSource& s, const MutableCubeView& classes,
                          const TileOptions& tiles, const char* where, Predict&& predict) {
    detail::LocalTileKernel k;
    k.out_dtype = DType::I32;
    k.device_work_bytes_per_pixel = kWorkBytes;
    k.host_work_bytes_per_pixel = kWorkBytes;
    k.run = [&](const Context& c, const CubeView& in, const MutableCubeView& out) { copy_cube(c, predict(c, in), out); };
    return detail::run_local_tiles(ctx, s, classes, k, tiles, where);
}

template <class Source>
TiledRun svm_in_tiles(const Context& ctx, const Source& cube, const SvmModel& model, const MutableCubeView& classes,
                      const TileOptions& tiles) {
    return predict_in_tiles(ctx, detail::tile_source(cube), classes, tiles, "predict_svm_tiled",
                            [&](const Context& c, const CubeView& in) { return predict_svm(c, in, model).classes; });
}

template <class Source>
TiledRun means_in_tiles(const Context& ctx, const Source& cube, const ClassMeans& model, const MutableCubeView& classes,
                        const TileOptions& tiles) {
    return predict_in_tiles(ctx, detail::tile_source(cube), classes, tiles, "predict_class_means_tiled",
                            [&](const Context& c, const CubeView& in) { return predict_class_means(c, in, model); });
}

}  // namespace

TiledRun predict_svm_tiled(const Context& ctx, const CubeView& cube, const SvmModel& model, const MutableCubeView& classes,
                           const TileOptions& tiles) {
    return svm_in_tiles(ctx, cube, model, classes, tiles);
}

TiledRun predict_svm_tiled(const Context& ctx, const CubeFile& cube, const SvmModel& model, const MutableCubeView& classes,
                           const TileOptions& tiles) {
    return svm_in_tiles(ctx, cube, model, classes, tiles);
}

TiledRun predict_class_means_tiled(const Context& ctx, const CubeView& cube, const ClassMeans& model,
                                   const MutableCubeView& classes, const TileOptions& tiles) {
    return means_in_tiles(ctx, cube, model, classes, tiles);
}

TiledRun predict_class_means_tiled(const Context& ctx, const CubeFile& cube, const ClassMeans& model,
                                   const MutableCubeView& classes, const TileOptions& tiles) {
    return means_in_tiles(ctx, cube, model, classes, tiles);
}

}  // namespace cubekit
