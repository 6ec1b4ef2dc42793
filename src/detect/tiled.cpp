// The pixel detectors in tiles (tiles.hpp): local with no halo (a pixel's score is its own), so each
// tile's scores are the whole-scene scores. The RBF network's objects come from the whole score map;
// the classical detectors apply statistics fitted beforehand (global, on the whole scene or saved).
// The multi-resolution search: its block sums in tiles cut at block edges, then one descent.
#include <cmath>
#include <cstdint>

#include <algorithm>
#include <mutex>

#include "core/file_strips.hpp"
#include "core/tiled_local.hpp"
#include "detect/detect_internal.hpp"
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

double score_at(const MutableCubeView& out, DType type, int x, int y) {
    return type == DType::F32 ? double(*reinterpret_cast<const float*>(out.data() + out.offset(x, y, 0) * 4))
                              : *reinterpret_cast<const double*>(out.data() + out.offset(x, y, 0) * 8);
}

// Pixels of rows y0 .. of the scene (`rows`, a strip or the whole cube) scored NaN although their kept
// bands are all finite: local RX's singular windows.
std::int64_t singular_pixels(const CubeView& rows, int y0, const MutableCubeView& out, DType type, const std::vector<int>& kept) {
    std::int64_t n = 0;
    for (int y = 0; y < rows.height(); ++y)
        for (int x = 0; x < rows.width(); ++x) {
            if (!std::isnan(score_at(out, type, x, y0 + y))) continue;
            bool finite = true;
            for (int b : kept) finite = finite && std::isfinite(sample_value(rows, x, y, b));
            n += finite ? 1 : 0;
        }
    return n;
}

TiledRun local_rx_source(const Context& ctx, const detail::TileSource& source, const ClassicalOptions& options,
                         const std::vector<int>& kept, const MutableCubeView& out, const TileOptions& tiles) {
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
    return detail::run_local_tiles(ctx, source, out, kernel, tiles, "detect rx");
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

MultiresResult multires_source(const Context& ctx, const detail::TileSource& source, const MultiresModel& model,
                               const MultiresOptions& options, const TileOptions& tiles, TiledRun* run) {
    detail::check_multires(model, options);
    if (source.width < 1 || source.height < 1 || source.bands < 1)
        throw InvalidInput("detect_multires: the cube is empty (" + std::to_string(source.width) + "x" +
                           std::to_string(source.height) + "x" + std::to_string(source.bands) + ")");
    detail::check_multires_bands(model, source.bands);
    const int b = model.block;
    BlockSums sums;
    sums.gx = (source.width + b - 1) / b;
    sums.gy = (source.height + b - 1) / b;
    sums.bands = source.bands;
    sums.block = b;
    const std::size_t m = std::size_t(source.bands), values = std::size_t(sums.gx) * std::size_t(sums.gy) * m;
    sums.n.resize(values);
    sums.s1.resize(values);
    sums.s2.resize(values);
    // A tile's block sums on either backend: about 20 bytes per band and block, a small share of a pixel.
    const std::size_t sums_bpp = (20 * m + std::size_t(b) * b - 1) / (std::size_t(b) * b) + 1;
    detail::LocalTileKernel kernel;
    kernel.out_bands = 0;
    kernel.device_work_bytes_per_pixel = sums_bpp + sums_bpp / 2;  // + σ on the device
    kernel.host_work_bytes_per_pixel = sums_bpp;
    TileOptions cut = tiles;  // whole blocks per tile
    const auto [tw, th] = detail::local_tile_size(ctx, source, kernel, tiles, "detect multires");
    cut.tile_width = std::max(b, tw / b * b);
    cut.tile_height = std::max(b, th / b * b);
    std::mutex mutex;
    kernel.run_tile = [&](const Context& c, const Tile& tile, const CubeView& in, const MutableCubeView&) {
        const BlockSums part = multires_block_sums(c, in, b);
        const int i0 = tile.x0 / b, j0 = tile.y0 / b;
        for (int j = 0; j < part.gy; ++j) {  // the tile's rows of blocks, in place (disjoint between tiles)
            const std::size_t from = std::size_t(j) * std::size_t(part.gx) * m;
            const std::size_t to = (std::size_t(j0 + j) * std::size_t(sums.gx) + std::size_t(i0)) * m;
            const std::size_t count = std::size_t(part.gx) * m;
            std::copy_n(part.n.begin() + std::ptrdiff_t(from), count, sums.n.begin() + std::ptrdiff_t(to));
            std::copy_n(part.s1.begin() + std::ptrdiff_t(from), count, sums.s1.begin() + std::ptrdiff_t(to));
            std::copy_n(part.s2.begin() + std::ptrdiff_t(from), count, sums.s2.begin() + std::ptrdiff_t(to));
        }
        const std::lock_guard lock(mutex);
        sums.skipped += part.skipped;
    };
    const TiledRun done = detail::run_local_tiles(ctx, source, MutableCubeView{}, kernel, cut, "detect multires");
    if (run) *run = done;
    return detect_multires_from_sums(ctx, std::move(sums), source.width, source.height, model, options);
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
    const TiledRun run = local_rx_source(ctx, detail::tile_source(cube), options, kept, out, tiles);
    if (report) report->singular = singular_pixels(cube, 0, out, options.out_type, kept);
    return run;
}

TiledRun local_rx_tiled(const Context& ctx, const CubeFile& file, const ClassicalOptions& options, const MutableCubeView& out,
                        const TileOptions& tiles, LocalRxReport* report) {
    if (options.window[1] == 0) throw InvalidInput("detect rx: window: local RX needs INNER,OUTER");
    const std::vector<int> kept = screen_bands(ctx, file, options.keep_all_bands, tiles.memory_limit).kept;
    const TiledRun run = local_rx_source(ctx, detail::tile_source(file), options, kept, out, tiles);
    if (report) {  // the file again, only the strips that hold a NaN score
        report->singular = 0;
        const auto has_nan = [&](int y0, int h) {
            for (int y = y0; y < y0 + h; ++y)
                for (int x = 0; x < out.width(); ++x)
                    if (std::isnan(score_at(out, options.out_type, x, y))) return true;
            return false;
        };
        detail::read_in_strips(ctx, file, tiles.memory_limit, "detect rx: singular windows", has_nan,
                               [&](int y0, const CubeView& rows) {
                                   report->singular += singular_pixels(rows, y0, out, options.out_type, kept);
                               });
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

MultiresResult detect_multires_tiled(const Context& ctx, const CubeView& cube, const MultiresModel& model,
                                     const MultiresOptions& options, const TileOptions& tiles, TiledRun* run) {
    return multires_source(ctx, detail::tile_source(cube), model, options, tiles, run);
}

MultiresResult detect_multires_tiled(const Context& ctx, const CubeFile& file, const MultiresModel& model,
                                     const MultiresOptions& options, const TileOptions& tiles, TiledRun* run) {
    return multires_source(ctx, detail::tile_source(file), model, options, tiles, run);
}

}  // namespace cubekit
