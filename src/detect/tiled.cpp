// The pixel detectors in tiles (tiles.hpp): local with no halo (a pixel's score is its own), so each
// tile's scores are the whole-scene scores. The RBF network's objects come from the whole score map;
// the classical detectors apply statistics fitted beforehand (global, on the whole scene or saved).
#include <cmath>
#include <cstdint>

#include "core/tiled_local.hpp"
#include "detect/classical_internal.hpp"
#include "cubekit/detect.hpp"
#include "cubekit/detect_classical.hpp"

namespace cubekit {

namespace {

// One sample of a host view as f64.
double sample_value(const CubeView& v, int x, int y, int b) {
    double out = 0;
    visit_dtype(v.dtype(), [&](auto tag) { out = double(v.typed<decltype(tag)>()(x, y, b)); });
    return out;
}

std::vector<PixelResult> detect_source(const Context& ctx, const detail::TileSource& source, std::span<const RbfnModel> models,
                                       const PixelOptions& options, const TileOptions& tiles, TiledRun* run) {
    if (models.empty()) throw InvalidInput("detect rbfn: no model given");
    const int k = int(models.size());
    Cube all = Cube::uninitialized(source.width, source.height, k, DType::F32, Layout::BSQ);
    detail::LocalTileKernel kernel;
    kernel.halo = 0;
    kernel.out_dtype = DType::F32;
    kernel.out_bands = k;
    // The CUDA kernels read BIP or BSQ tiles where they are; a BIL tile is reordered on the device.
    if (source.layout == Layout::BIL) kernel.device_work_bytes_per_pixel = std::size_t(source.bands) * dtype_size(source.dtype);
    kernel.run = [&](const Context& c, const CubeView& in, const MutableCubeView& out) {
        std::vector<MutableCubeView> scores;
        for (int j = 0; j < k; ++j) scores.push_back(out.band_range(j, 1));
        rbfn_scores_into(c, in, models, scores, options);
    };
    const TiledRun done = detail::run_local_tiles(ctx, source, all.mutable_view(), kernel, tiles, "detect rbfn");
    if (run) *run = done;
    std::vector<PixelResult> results(models.size());
    for (int j = 0; j < k; ++j) {
        PixelResult& r = results[std::size_t(j)];
        // One model: the map is the score (no copy); the count runs on every core (a serial pass over
        // 20 M pixels took ~20 ms, a tail that capped the 4-GPU speed-up, bench/results 2026-11-26).
        r.score = k == 1 ? std::move(all) : Cube::from_view(all.view().band_range(j, 1), Layout::BSQ);
        r.threshold = std::isnan(options.threshold) ? models[std::size_t(j)].threshold : options.threshold;
        const float* s = r.score.data<float>();
        const std::int64_t n = std::int64_t(r.score.num_elements());
        std::int64_t nan = 0;
#pragma omp parallel for reduction(+ : nan) schedule(static) num_threads(ctx.threads())
        for (std::int64_t p = 0; p < n; ++p) nan += std::isnan(s[p]) ? 1 : 0;
        r.non_finite = nan;
        if (options.objects) objects_from_scores(ctx, r.score, r.threshold, options, r);
    }
    return results;
}

TiledRun apply_source(const Context& ctx, const detail::TileSource& source, const BackgroundStats& stats,
                      const ClassicalOptions& options, const std::vector<double>& target, const MutableCubeView& out,
                      const TileOptions& tiles) {
    detail::LocalTileKernel kernel;
    kernel.halo = 0;
    kernel.out_dtype = options.out_type;
    kernel.out_bands = 1;
    // The CUDA apply reads a BSQ cube; other nestings are reordered on the device.
    if (source.layout != Layout::BSQ) kernel.device_work_bytes_per_pixel = std::size_t(source.bands) * dtype_size(source.dtype);
    // The plan (the whitening from the fitted eigenpairs, the target) once, not per tile.
    const detail::ScorePlan plan = detail::checked_plan(stats, options, target, source.bands);
    kernel.run = [&](const Context& c, const CubeView& in, const MutableCubeView& o) {
        detail::apply_plan_into(c, in, stats, plan, options, o);
    };
    return detail::run_local_tiles(ctx, source, out, kernel, tiles, "detect");
}

}  // namespace

TiledRun local_rx_tiled(const Context& ctx, const CubeView& cube, const ClassicalOptions& options, const MutableCubeView& out,
                        const TileOptions& tiles, LocalRxReport* report) {
    if (options.window[1] == 0) throw InvalidInput("detect rx: window: local RX needs INNER,OUTER");
    // The scene's band screening, once: a tile screened on its own could keep other bands.
    const std::vector<int> kept = screen_bands(ctx, cube, options.keep_all_bands).kept;
    detail::LocalTileKernel kernel;
    // A core pixel's windows (shifted inward at the scene's border, SPy's rule) reach OUTER - 1
    // pixels from it; with that halo a tile edge inside the scene never shifts a core pixel's window.
    kernel.halo = int(options.window[1]) - 1;
    kernel.out_dtype = options.out_type;
    kernel.out_bands = 1;
    kernel.device_work_bytes_per_pixel = kept.size() * sizeof(double);  // the f64 copy local RX works on
    kernel.run = [&](const Context& c, const CubeView& in, const MutableCubeView& o) {
        detail::local_rx_kept(c, in, options, kept, o, nullptr);
    };
    const TiledRun run = detail::run_local_tiles(ctx, detail::tile_source(cube), out, kernel, tiles, "detect rx");
    if (report) {  // singular windows: NaN scores of pixels whose kept bands are all finite
        report->singular = 0;
        for (int y = 0; y < cube.height(); ++y)
            for (int x = 0; x < cube.width(); ++x) {
                const double score = options.out_type == DType::F32 ? double(*reinterpret_cast<const float*>(out.data() + out.offset(x, y, 0) * 4))
                                                                    : *reinterpret_cast<const double*>(out.data() + out.offset(x, y, 0) * 8);
                if (!std::isnan(score)) continue;
                bool finite = true;
                for (int b : kept) finite = finite && std::isfinite(sample_value(cube, x, y, b));
                report->singular += finite ? 1 : 0;
            }
    }
    return run;
}

TiledRun apply_detector_tiled(const Context& ctx, const CubeView& cube, const BackgroundStats& stats, const ClassicalOptions& options,
                              const std::vector<double>& target, const MutableCubeView& out, const TileOptions& tiles) {
    return apply_source(ctx, detail::tile_source(cube), stats, options, target, out, tiles);
}

TiledRun apply_detector_tiled(const Context& ctx, const CubeFile& file, const BackgroundStats& stats, const ClassicalOptions& options,
                              const std::vector<double>& target, const MutableCubeView& out, const TileOptions& tiles) {
    return apply_source(ctx, detail::tile_source(file), stats, options, target, out, tiles);
}

std::vector<PixelResult> detect_pixels_tiled(const Context& ctx, const CubeView& cube, std::span<const RbfnModel> models,
                                             const PixelOptions& options, const TileOptions& tiles, TiledRun* run) {
    return detect_source(ctx, detail::tile_source(cube), models, options, tiles, run);
}

std::vector<PixelResult> detect_pixels_tiled(const Context& ctx, const CubeFile& file, std::span<const RbfnModel> models,
                                             const PixelOptions& options, const TileOptions& tiles, TiledRun* run) {
    return detect_source(ctx, detail::tile_source(file), models, options, tiles, run);
}

}  // namespace cubekit
