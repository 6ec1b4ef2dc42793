// cubekit rcmg: Robust Color Morphological Gradient of a cube (spec gradient-watershed.md, A).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/io.hpp"
#include "option_flags.hpp"
#include "outputs.hpp"
#include "rcmg_command.hpp"
#include "tile_flags.hpp"

namespace cubekit::cli {

namespace {

/// {width, height, max, mean, non_finite} of the gradient, over its finite values.
nlohmann::json gradient_stats(const Cube& gradient) {
    double mx = 0, sum = 0;
    std::size_t finite = 0;
    for (int y = 0; y < gradient.height(); ++y)
        for (int x = 0; x < gradient.width(); ++x) {
            const double v = gradient.value(x, y, 0);
            if (!std::isfinite(v)) continue;
            mx = std::max(mx, v);
            sum += v;
            ++finite;
        }
    return {{"width", gradient.width()}, {"height", gradient.height()}, {"max", mx},
            {"mean", finite ? sum / double(finite) : 0.0}, {"non_finite", gradient.num_elements() - finite}};
}

/// Writes the gradient to every output (PNG/PNM scaled for display, others as floats); the one
/// `in_place` filled is put in place last. Each write is atomic; a failure of a later output also
/// takes back the earlier ones.
OutputList write_gradient(const Cube& gradient, const std::vector<std::string>& outputs, const WriteOptions& write,
                          InPlaceResult* in_place) {
    // The display scale (a percentile: ~15 ms on a 1.3 MP gradient) only where an image is written.
    const bool display = std::any_of(outputs.begin(), outputs.end(), [](const std::string& out) {
        const FileFormat f = output_format(out);
        return f == FileFormat::Png || f == FileFormat::Pnm;
    });
    const double white = display ? display_white_point(gradient) : std::numeric_limits<double>::quiet_NaN();
    OutputList written;
    try {
        for (const std::string& out : outputs)
            if (!in_place || out != in_place->streamed_path()) write_float_image(gradient, out, "", write, written, white);
        if (in_place) in_place->commit(written);
    } catch (...) {
        written.remove_all();
        throw;
    }
    return written;
}

// Writes the outputs and fills the summary of a computed gradient.
nlohmann::json finish_rcmg(const Context& ctx, const std::string& input, const CubeShape& shape, const Cube& gradient,
                           const std::optional<TiledRun>& tiled, double compute_ms, const RcmgOptions& options,
                           const std::vector<std::string>& outputs, const WriteOptions& write,
                           InPlaceResult* in_place = nullptr) {
    nlohmann::json stats = gradient_stats(gradient);
    const auto t0 = std::chrono::steady_clock::now();
    const OutputList written = write_gradient(gradient, outputs, write, in_place);
    const double write_ms = elapsed_ms(t0);
    nlohmann::json j = summary("rcmg", ctx);
    j["input"] = {{"path", input}, {"shape", shape_json(shape)}};
    j["parameters"] = parameters_json(options);
    j["implementation"] = std::string(rcmg_implementation(ctx, options));
    if (tiled) j["tiled"] = tiled_json(*tiled);
    j["timings_ms"] = {{"rcmg", compute_ms}, {"write", write_ms}};
    j["outputs"] = written.json();
    j["gradient"] = std::move(stats);
    return j;
}

}  // namespace

nlohmann::json run_rcmg(const Context& ctx, const std::string& input, const Cube& cube, const RcmgOptions& options,
                        const std::vector<std::string>& outputs, const WriteOptions& write,
                        const std::optional<TileOptions>& tiles) {
    check_rcmg_arguments(cube.shape(), options);
    for (const std::string& out : outputs) output_format(out);  // refuse bad names before work
    check_outputs(outputs, "rcmg");
    const auto t0 = std::chrono::steady_clock::now();
    std::optional<TiledRun> tiled;
    Cube gradient;
    if (use_tiles(tiles, ctx, cube.num_bytes())) {
        gradient = Cube::uninitialized(cube.width(), cube.height(), 1, options.out_type);
        tiled = rcmg_tiled(ctx, cube, gradient.mutable_view(), options, tiles.value_or(TileOptions{}));
    } else {
        gradient = rcmg(ctx, cube, options);
    }
    gradient.metadata() = cube.metadata().georeference();  // the outputs lie on the input's map
    return finish_rcmg(ctx, input, cube.shape(), gradient, tiled, elapsed_ms(t0), options, outputs, write);
}

nlohmann::json run_rcmg(const Context& ctx, const std::string& input, const CubeFile& file, const RcmgOptions& options,
                        const std::vector<std::string>& outputs, const WriteOptions& write, const TileOptions& tiles) {
    check_rcmg_arguments(file.shape(), options);
    const auto t0 = std::chrono::steady_clock::now();
    // The gradient lands tile by tile in the first .npy, ENVI or GeoTIFF output: it never has to fit in memory.
    InPlaceResult gradient(outputs, {file.shape().width, file.shape().height, 1, options.out_type, Layout::BSQ},
                           file.metadata().georeference(), write);
    const TiledRun tiled = rcmg_tiled(ctx, file, gradient.view(), options, tiles);
    nlohmann::json j = finish_rcmg(ctx, input, file.shape(), gradient.cube(), tiled, elapsed_ms(t0), options, outputs,
                                   write, &gradient);
    j["input"]["windowed"] = true;
    return j;
}

Action add_rcmg(CLI::App& root) {
    struct Args {
        CommonOptions common;
        std::string input;
        std::vector<std::string> outputs;
        RcmgOptions options;
        TileFlags tiles;
    };
    auto args = std::make_shared<Args>();
    CLI::App* app = root.add_subcommand("rcmg", "Robust Color Morphological Gradient: one-band edge strength of a cube");
    app->footer(
        "At each pixel: the Euclidean distances between all pairs of pixel vectors in its window (3x3 square or\n"
        "5-pixel cross), the R most distant pairs rejected (both vectors each time), the largest remaining\n"
        "distance. Borders replicate the nearest pixel. NaN in a window gives NaN.\n"
        "Outputs: .npy (H, W) or ENVI float gradient; .png scaled for display: round(255 * min(v, p99) / p99),\n"
        "p99 = the 99th percentile of the gradient (stated in --json).\n"
        "Examples:\n"
        "  cubekit rcmg data/samson/samson_1.img gradient.png gradient.npy\n"
        "  cubekit rcmg scene.mat g.hdr --var data --connectivity 4 --precision f32 --json\n"
        "  cubekit rcmg big.hdr g.npy --devices 0,1 --device-memory-limit 2G   # tiles over two GPUs\n"
        "Tiles: --memory-limit, --device-memory-limit or --devices run the scene in tiles with a 1-pixel halo (the\n"
        "result is bit-identical); on a GPU an input of 64 MiB or more is always streamed in tiles.");
    input_file(app->add_option("IN", args->input, "input cube (any format cubekit reads)"))->required();
    app->add_option("OUT", args->outputs, "one or more outputs: .npy, .hdr/.img (ENVI), .png")->required();
    bind_flags(*app, args->options);
    add_common_flags(*app, args->common);
    add_output_flags(*app, args->common);
    add_tile_flags(*app, args->tiles);
    return [args] {
        CommonOptions common = args->common;
        std::optional<TileOptions> tiles;
        if (args->tiles.given()) tiles = tile_options(args->tiles);  // a bad flag fails before the read
        if (!args->tiles.devices.empty() && common.context.backend == Backend::Auto) common.context.backend = Backend::Cuda;
        const RcmgOptions& options = args->options;
        for (const std::string& out : args->outputs) output_format(out);  // a bad OUT fails before any work
        check_outputs(args->outputs, "rcmg");
        Timings timings;
        // A tiled run reads a raw file (ENVI, .npy, GeoTIFF) by windows: the scene never has to fit in memory.
        std::optional<CubeFile> file = open_windowed(args->input, common, tiles.has_value(), timings);
        std::optional<Prepared<Cube>> prepared;
        if (!file)
            prepared.emplace(context_while_reading(
                common, "rcmg", timings, args->input, [&] { return read_input(args->input, common).cube; }, estimate_rcmg));
        else {
            // Not a structured binding: clang cannot capture one in a lambda when OpenMP is on.
            auto work_context = context_for_work(common, "rcmg", timings, estimate_rcmg(file->shape()));
            Context& c = work_context.first;
            nlohmann::json& choice = work_context.second;
            prepared.emplace(Prepared<Cube>{std::move(c), Cube(), std::move(choice)});
        }
        const Context& ctx = prepared->ctx;
        const TransferTotals copies = ctx.transfer_totals();
        if (tiles) check_tile_devices(args->tiles, *tiles, ctx);
        nlohmann::json j = file ? run_rcmg(ctx, args->input, *file, options, args->outputs, common.write, tiles.value_or(TileOptions{}))
                                : run_rcmg(ctx, args->input, prepared->input, options, args->outputs, common.write, tiles);
        const CubeShape shape = file ? file->shape() : prepared->input.shape();
        if (!prepared->backend_choice.is_null()) j["backend_choice"] = prepared->backend_choice;
        timings.add(j["timings_ms"]);  // rcmg, write
        timings.split_transfers(ctx, copies, "rcmg");
        say(common, "rcmg: " + args->input + " (" + shape.describe() + ") on " + ctx.device_name() + " [" +
                        j["implementation"].get<std::string>() + "], " + std::to_string(options.connectivity) +
                        "-connectivity, reject " + std::to_string(options.reject) + ", max gradient " +
                        std::to_string(j["gradient"]["max"].get<double>()));
        if (j.contains("tiled"))
            say(common, "  in " + std::to_string(j["tiled"]["tiles"].get<std::size_t>()) + " tiles of " +
                            std::to_string(j["tiled"]["tile_width"].get<int>()) + "x" +
                            std::to_string(j["tiled"]["tile_height"].get<int>()) + ", working memory " +
                            std::to_string(j["tiled"]["peak_bytes"].get<std::size_t>()) + " bytes");
        for (const auto& o : j["outputs"]) say(common, "  wrote " + o["path"].get<std::string>());
        emit_json(common, j, timings);
    };
}

}  // namespace cubekit::cli
