// Background statistics of a cube file read a strip of rows at a time (issue 17): the scene never has
// to fit in memory. The screening's per-band minimum, maximum and non-finite count merge exactly; μ
// and Σ come from PCA's exact integer sums (the CPU reference's own route, fit_background in
// classical.cpp), gathered piece by piece: a scan for the scene's fixed point, then the sums. So the
// statistics equal the CPU reference's fit_background of the whole cube bit for bit, on any backend.
#include <algorithm>
#include <cstring>

#include "core/file_strips.hpp"
#include "cubekit/detect_classical.hpp"
#include "cubekit/linalg.hpp"
#include "detect/classical_internal.hpp"

namespace cubekit {

namespace {

constexpr std::string_view kWhere = "detect: background statistics from a file";

/// The rows y0 .. y0 + h − 1 of a W×H mask as bytes (empty without a mask).
std::vector<std::uint8_t> mask_rows(const std::vector<std::uint8_t>& mask, int width, int y0, int h) {
    if (mask.empty()) return {};
    const auto first = mask.begin() + std::ptrdiff_t(y0) * width;
    return {first, first + std::ptrdiff_t(h) * width};
}

std::size_t strip_budget(const CubeFile& file, std::size_t memory_limit, std::size_t gathered_bands) {
    // The strip read in the file's type plus its kept bands gathered as f64: the budget covers both.
    const CubeShape& s = file.shape();
    const std::size_t raw = std::size_t(s.width) * std::size_t(s.bands) * dtype_size(s.dtype);
    const std::size_t row = raw + std::size_t(s.width) * gathered_bands * sizeof(double);
    const std::size_t budget = memory_limit ? memory_limit : std::size_t(256) << 20;
    if (row > budget)
        throw InvalidInput(std::string(kWhere) + ": memory_limit = " + std::to_string(budget) + " bytes holds no row of the cube (" +
                           std::to_string(row) + " bytes a row: the row read and its kept bands in f64); raise it");
    return budget / row * raw;
}

}  // namespace

BackgroundStats screen_bands(const Context& ctx, const CubeFile& file, bool keep_all, std::size_t memory_limit) {
    const CubeShape& shape = file.shape();
    if (shape.num_elements() == 0) throw InvalidInput("detect: the cube is empty (" + shape.describe() + ")");
    BackgroundStats s;
    s.bands = shape.bands;
    if (keep_all) {
        for (int b = 0; b < shape.bands; ++b) s.kept.push_back(b);
        return s;
    }
    const Context cpu({.backend = Backend::Cpu, .threads = ctx.threads()});
    detail::BandSummary all;
    detail::read_in_strips(ctx, file, memory_limit, kWhere, [](int, int) { return true; }, [&](int, const CubeView& rows) {
        const detail::BandSummary part = detail::band_summary_cpu(cpu, rows);
        if (all.min.empty()) {
            all = part;
            return;
        }
        for (std::size_t b = 0; b < part.min.size(); ++b) {  // the earlier strip wins ties, as in raster order
            all.nonfinite[b] += part.nonfinite[b];
            all.min[b] = std::min(all.min[b], part.min[b]);
            all.max[b] = std::max(all.max[b], part.max[b]);
        }
    });
    detail::screen(s, all);
    return s;
}

BackgroundStats fit_background(const Context& ctx, const CubeFile& file, const ClassicalOptions& options,
                               const CubeView* mask, std::size_t memory_limit) {
    if (options.window[1] != 0) throw InvalidInput("detect: window: background statistics are global; use local_rx");
    const CubeShape& shape = file.shape();
    BackgroundStats s = screen_bands(ctx, file, options.keep_all_bands, memory_limit);
    if (s.kept.empty()) throw InvalidInput("detect: every band was dropped by screening (keep_all_bands, --keep-all-bands, keeps them)");
    std::vector<std::uint8_t> bytes;
    if (mask) bytes = detail::mask_bytes(ctx, *mask, shape.width, shape.height, "mask");
    const Context cpu({.backend = Backend::Cpu, .threads = ctx.threads()});
    const std::size_t budget = strip_budget(file, memory_limit, s.kept.size());
    const auto gather = [&](int y0, const CubeView& rows) {
        return detail::gather_f64_cpu(cpu, rows, s.kept, mask_rows(bytes, shape.width, y0, rows.height()));
    };
    // Pass 1: the pixels used and the largest |x| fix the scene's fixed point (as pca_fit's own scan).
    PcaPieceScan scene;
    detail::read_in_strips(ctx, file, budget, kWhere, [](int, int) { return true; }, [&](int y0, const CubeView& rows) {
        const PcaPieceScan part = pca_piece_scan(cpu, gather(y0, rows).view());
        scene.count += part.count;
        scene.max_abs = std::max(scene.max_abs, part.max_abs);
    });
    const int exponent = pca_scene_exponent(scene);
    // Pass 2: the exact sums, merged.
    PcaPieceSums sums;
    bool first = true;
    detail::read_in_strips(ctx, file, budget, kWhere, [](int, int) { return true; }, [&](int y0, const CubeView& rows) {
        PcaPieceSums part = pca_piece_sums(cpu, gather(y0, rows).view(), exponent);
        if (first) sums = std::move(part), first = false;
        else pca_add_sums(sums, part);
    });
    return background_from_piece_sums(std::move(s), sums, options.ddof);
}

BackgroundStats background_from_piece_sums(BackgroundStats screened, const PcaPieceSums& sums, int ddof) {
    if (ddof != 0 && ddof != 1) throw InvalidInput("detect: ddof = " + std::to_string(ddof) + "; expected 0 or 1");
    if (sums.bands != int(screened.kept.size()))
        throw InvalidInput("detect: the sums hold " + std::to_string(sums.bands) + " bands, the screening kept " +
                           std::to_string(screened.kept.size()));
    BackgroundStats s = std::move(screened);
    const PcaModel m = pca_model_from_piece_sums(sums, 1);
    if (m.samples - ddof < 1) throw InvalidInput("detect: ddof: " + std::to_string(m.samples) + " pixel(s) used; too few");
    s.samples = m.samples;
    s.mean = m.mean;
    const double scale = double(m.samples - 1) / double(m.samples - ddof);  // PCA's divisor N − 1 → N − ddof
    s.covariance = m.covariance;
    if (scale != 1.0)
        for (double& c : s.covariance) c *= scale;
    s.ddof = ddof;
    detail::add_eigen(s);
    return s;
}

std::vector<double> target_from_mask(const Context& ctx, const CubeFile& file, const CubeView& mask, std::size_t memory_limit) {
    const CubeShape& shape = file.shape();
    const std::vector<std::uint8_t> m = detail::mask_bytes(ctx, mask, shape.width, shape.height, "target mask");
    const std::size_t W = std::size_t(shape.width);
    std::vector<double> sum(std::size_t(shape.bands), 0.0);
    std::int64_t n = 0;
    // Only the strips that hold a target pixel are read; the sums run in raster order, as the whole call's.
    const auto holds_target = [&](int y0, int h) {
        return std::any_of(m.begin() + std::ptrdiff_t(std::size_t(y0) * W), m.begin() + std::ptrdiff_t(std::size_t(y0 + h) * W),
                           [](std::uint8_t v) { return v != 0; });
    };
    detail::read_in_strips(ctx, file, memory_limit, kWhere, holds_target, [&](int y0, const CubeView& rows) {
        detail::add_masked_pixels(rows, m.data() + std::size_t(y0) * W, sum, n);
    });
    return detail::masked_mean(std::move(sum), n);
}

}  // namespace cubekit
