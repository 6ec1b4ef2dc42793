// cubekit edges-baseline: the classical detectors the entropy detector is compared against (spec
// edges.md §3.10, E6), with MATLAB R2016 edge() defaults.
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/edge_baselines.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "option_flags.hpp"
#include "outputs.hpp"
#include "tile_flags.hpp"

namespace cubekit::cli {

namespace {

struct BaselineArgs {
    CommonOptions common;
    std::string input, output;
    BaselineOptions options;
    TileFlags tiles;
};

/// The declared parameters as they apply: σ as run (MATLAB's default resolved; null for the mask
/// methods), low_ratio only for canny, thinning only for the mask methods.
nlohmann::json baseline_parameters(const BaselineOptions& o) {
    nlohmann::json params = parameters_json(o);
    const std::optional<double> sigma = baseline_sigma(o);
    params["sigma"] = sigma ? nlohmann::json(*sigma) : nlohmann::json(nullptr);
    if (o.method != BaselineMethod::Canny) params.erase("low_ratio");
    if (o.method == BaselineMethod::Canny || o.method == BaselineMethod::LoG) params.erase("thinning");
    return params;
}

/// Per band: the threshold(s) cut at and the edge pixels.
nlohmann::json band_json(const BaselineResult& result, const BaselineOptions& o, std::int64_t& total) {
    const CubeShape& s = result.edges.shape();
    const std::size_t N = s.num_pixels(), B = std::size_t(s.bands), W = std::size_t(s.width);
    const std::uint8_t* e = result.edges.data<std::uint8_t>();
    std::vector<std::int64_t> counts(B, 0);  // the edges are dense in any layout (a streamed .npy is BIP)
    for (std::size_t i = 0; i < N * B; ++i) {
        const std::size_t b = s.layout == Layout::BSQ ? i / N : s.layout == Layout::BIP ? i % B : (i / W) % B;
        counts[b] += e[i];
    }
    nlohmann::json bands = nlohmann::json::array();
    total = 0;
    for (int b = 0; b < result.edges.bands(); ++b) {
        const std::int64_t count = counts[std::size_t(b)];
        total += count;
        nlohmann::json jb = {{"band", b}, {"threshold", result.thresholds[std::size_t(b)].high}, {"edge_pixels", count}};
        if (o.method == BaselineMethod::Canny) jb["low_threshold"] = result.thresholds[std::size_t(b)].low;
        bands.push_back(jb);
    }
    return bands;
}

void baseline_command(const BaselineArgs& a) {
    CommonOptions common = a.common;
    const BaselineOptions& options = a.options;
    check_baseline_options(options);  // refuse bad options and OUT before reading anything
    std::optional<TileOptions> tiles;
    if (a.tiles.given()) tiles = tile_options(a.tiles);  // a bad flag fails before the read
    if (!a.tiles.devices.empty() && common.context.backend == Backend::Auto) common.context.backend = Backend::Cuda;
    const FileFormat format = output_format(a.output);
    check_output_folder(a.output);
    if (format != FileFormat::Png && format != FileFormat::Npy)
        throw InvalidInput("edges-baseline: OUT = " + a.output + "; expected a .png or .npy path");

    Timings timings;
    // In groups of bands an ENVI, .npy or GeoTIFF cube is read a group at a time; other formats whole.
    const std::optional<CubeFile> file = tiles ? open_windowed(a.input, common, true, timings) : std::nullopt;
    // Not a structured binding: clang cannot capture one in a lambda when OpenMP is on.
    auto prepared = context_for_input(
        common, "edges-baseline", timings, a.input, file, [&] { return read_input(a.input, common).cube; },
        estimate_edge_baseline);
    Context& ctx = prepared.ctx;
    auto& cube = prepared.input;
    nlohmann::json& choice = prepared.backend_choice;
    const CubeShape shape = file ? file->shape() : cube.shape();
    if (format == FileFormat::Png && shape.bands != 1)
        throw InvalidInput("edges-baseline: OUT " + a.output + " is a PNG, which holds one band, and IN has " +
                           std::to_string(shape.bands) + " bands; pick one with --bands N or write .npy");
    if (tiles) check_tile_devices(a.tiles, *tiles, ctx);
    // Groups read from a file write their edges straight into a .npy OUT: the map is never held whole.
    std::optional<InPlaceResult> in_place;
    if (file && format == FileFormat::Npy && CubeFileWriter::streamable(a.output, common.write))
        in_place.emplace(std::vector{a.output}, CubeShape{shape.width, shape.height, shape.bands, DType::U8},
                         file->metadata().georeference(), common.write);
    const TransferTotals copies = ctx.transfer_totals();
    std::optional<TiledRun> tiled;
    const BaselineResult result = timings.time("edges", [&] {
        if (!tiles) return baseline_edges_with_thresholds(ctx, cube, options);
        tiled.emplace();
        if (in_place)
            return BaselineResult{Cube::borrow(in_place->view()),
                                  baseline_edges_tiled_into(ctx, *file, in_place->view(), options, *tiles, &*tiled)};
        return file ? baseline_edges_tiled(ctx, *file, options, *tiles, &*tiled) : baseline_edges_tiled(ctx, cube, options, *tiles, &*tiled);
    });
    timings.split_transfers(ctx, copies, "edges");
    std::int64_t total = 0;
    const nlohmann::json bands = band_json(result, options, total);
    timings.time("write", [&] {
        if (!in_place) return write_cube(binary_map_for_file(result.edges, a.output), a.output, common.write);
        OutputList written;
        in_place->commit(written);
    });

    nlohmann::json j = summary("edges-baseline", ctx, choice);
    j["input"] = {{"path", a.input}, {"shape", shape_json(shape)}};
    if (tiled) j["input"]["windowed"] = file.has_value();
    j["parameters"] = baseline_parameters(options);
    if (tiled) j["tiled"] = tiled_json(*tiled);
    j["bands"] = bands;
    j["edge_pixels"] = total;
    j["outputs"] = nlohmann::json::array({{{"path", a.output}, {"format", std::string(format_name(format))},
                                           {"dtype", "u8"}, {"edge_value", format == FileFormat::Png ? 255 : 1}}});
    if (in_place) j["outputs"][0]["streamed"] = true;
    say(common, "edges-baseline: " + a.input + " (" + shape.describe() + ") on " + ctx.device_name() + ", " +
                    std::string(baseline_name(options.method)) + ", " + std::to_string(total) + " edge pixels");
    say(common, "  wrote " + a.output);
    emit_json(common, j, timings);
}

}  // namespace

Action add_edges_baseline(CLI::App& root) {
    auto args = std::make_shared<BaselineArgs>();
    CLI::App* app = root.add_subcommand(
        "edges-baseline", "Classical edge detectors (canny, sobel, prewitt, roberts, log) with MATLAB edge() defaults");
    app->footer(
        "Each band is quantised to 8 bits (u8 as is; other types per-band min-max) and scaled to [0, 1]; then, per\n"
        "band, MATLAB R2016 edge() defaults: sobel/prewitt cutoff 4*mean(squared magnitude) with thinning;\n"
        "roberts factor 6; log sigma 2, zero crossings above 0.75*mean|response|; canny sigma sqrt(2), high\n"
        "threshold at 70% of a 64-bin histogram of the normalised magnitude, low = 0.4*high, hysteresis.\n"
        "--threshold takes MATLAB's 'thresh' (canny: the high threshold, < 1).\n"
        "Outputs: .png (one band: edges 255, else 0) or .npy ((H, W) or (H, W, B) u8, edges 1, else 0).\n"
        "Examples:\n"
        "  cubekit edges-baseline camera.png canny.png\n"
        "  cubekit edges-baseline scene.mat sobel.npy --var data --method sobel --bands 10-19 --json\n"
        "  cubekit edges-baseline big.hdr canny.npy --device-memory-limit 2G --devices all\n"
        "Tiles: --memory-limit, --device-memory-limit, --devices or --tile-size 1xN run groups of whole bands (N a\n"
        "group when forced), the same maps and thresholds; an ENVI, .npy or GeoTIFF input is then read a group of bands\n"
        "at a time (input.windowed in --json), other formats whole.");
    input_file(app->add_option("IN", args->input, "input image or cube (any format cubekit reads)"))->required();
    app->add_option("OUT", args->output, "output map: .png (one band) or .npy")->required();
    bind_flags(*app, args->options);
    add_common_flags(*app, args->common);
    add_output_flags(*app, args->common);
    add_tile_flags(*app, args->tiles);
    return [args] { baseline_command(*args); };
}

}  // namespace cubekit::cli
