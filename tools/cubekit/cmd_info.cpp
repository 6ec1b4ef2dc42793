// cubekit info: shape, type, layout, per-band statistics and wavelengths of a cube or image.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <vector>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/io.hpp"

namespace cubekit::cli {
namespace {

struct BandStats {
    double min = std::numeric_limits<double>::infinity();
    double max = -std::numeric_limits<double>::infinity();
    double mean = 0;
    std::size_t nan = 0;
};

std::vector<BandStats> band_stats(const Context& ctx, const Cube& cube) {
    std::vector<BandStats> stats(std::size_t(cube.bands()));
#pragma omp parallel for schedule(dynamic) num_threads(ctx.threads())
    for (int b = 0; b < cube.bands(); ++b) {
        BandStats s;
        double sum = 0;
        std::size_t n = 0;
        for (int y = 0; y < cube.height(); ++y)
            for (int x = 0; x < cube.width(); ++x) {
                const double v = cube.value(x, y, b);
                if (std::isnan(v)) { ++s.nan; continue; }
                s.min = std::min(s.min, v);
                s.max = std::max(s.max, v);
                sum += v;
                ++n;
            }
        s.mean = n ? sum / double(n) : std::nan("");
        stats[std::size_t(b)] = s;
    }
    return stats;
}

/// The --json summary: format, shape, metadata and one row of statistics per band.
nlohmann::json info_json(const std::string& input, FileFormat format, const Cube& cube,
                         const std::vector<BandStats>& stats) {
    const Metadata& meta = cube.metadata();
    nlohmann::json j = {{"command", "info"}, {"input", input}, {"format", std::string(format_name(format))}};
    j.update(shape_json(cube.shape()));
    if (!meta.wavelength_units.empty()) j["wavelength_units"] = meta.wavelength_units;
    if (!meta.map_info.empty()) j["map_info"] = meta.map_info;
    nlohmann::json bands = nlohmann::json::array();
    for (int b = 0; b < cube.bands(); ++b) {
        const BandStats& s = stats[std::size_t(b)];
        nlohmann::json row = {{"band", b}};
        auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
        row["min"] = num(s.min);
        row["max"] = num(s.max);
        row["mean"] = num(s.mean);
        if (s.nan) row["nan_count"] = s.nan;
        if (std::size_t(b) < meta.wavelengths.size()) row["wavelength"] = meta.wavelengths[std::size_t(b)];
        if (std::size_t(b) < meta.band_names.size()) row["name"] = meta.band_names[std::size_t(b)];
        bands.push_back(row);
    }
    j["band_stats"] = bands;
    return j;
}

/// The human-readable table on stdout.
void print_info(const std::string& input, FileFormat format, const Cube& cube, const std::vector<BandStats>& stats) {
    const Metadata& meta = cube.metadata();
    std::printf("%s: %s, %d x %d pixels x %d bands, %s, %s\n", input.c_str(), std::string(format_name(format)).c_str(),
                cube.width(), cube.height(), cube.bands(), std::string(dtype_name(cube.dtype())).c_str(),
                std::string(layout_name(cube.layout())).c_str());
    if (!meta.map_info.empty()) std::printf("map info: %s\n", meta.map_info.c_str());
    const bool wl = !meta.wavelengths.empty();
    std::printf("%6s %14s %14s %14s%s\n", "band", "min", "max", "mean",
                wl ? (" wavelength" + (meta.wavelength_units.empty() ? "" : " (" + meta.wavelength_units + ")")).c_str() : "");
    for (int b = 0; b < cube.bands(); ++b) {
        const BandStats& s = stats[std::size_t(b)];
        std::printf("%6d %14.6g %14.6g %14.6g", b, s.min, s.max, s.mean);
        if (wl && std::size_t(b) < meta.wavelengths.size()) std::printf(" %g", meta.wavelengths[std::size_t(b)]);
        if (s.nan) std::printf("  (%zu NaN)", s.nan);
        std::printf("\n");
    }
}

void info_command(CommonOptions common, const std::string& input) {
    // The statistics run on the CPU. Without --backend cuda or --device no CUDA context is made
    // (its start-up, ~0.4 s on the GPU machine, was most of `cubekit info`'s time); with either,
    // the context is made and checks them, so a named device that does not exist is an error.
    if (common.context.backend == Backend::Auto && common.context.device < 0) common.context.backend = Backend::Cpu;
    Timings timings;
    Context ctx = timings.time("context", [&] { return make_context(common, "info"); });
    FileFormat format = FileFormat::Auto;
    const Cube cube = timings.time("read", [&] {
        format = detect_format(input);
        return read_input(input, common).cube;
    });
    const std::vector<BandStats> stats = timings.time("stats", [&] { return band_stats(ctx, cube); });
    if (!common.json) return print_info(input, format, cube, stats);
    nlohmann::json j = info_json(input, format, cube, stats);
    emit_json(common, j, timings);
}

}  // namespace

Action add_info(CLI::App& root) {
    struct Args {
        CommonOptions common;
        std::string input;
    };
    auto args = std::make_shared<Args>();
    CLI::App* app = root.add_subcommand("info", "Show shape, element type, layout, per-band min/max/mean and wavelengths");
    app->footer("Example: cubekit info data/samson/samson_1.img\n         cubekit info scene.mat --var data --json");
    app->add_option("IN", args->input, "cube or image (ENVI, .npy, .mat, PNG, PGM/PPM, JPEG, GDAL formats)")->required();
    add_common_flags(*app, args->common);
    return [args] { info_command(args->common, args->input); };
}

}  // namespace cubekit::cli
