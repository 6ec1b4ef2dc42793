// cubekit detect rbfn | multires: the neural-network detectors (spec detect.md §A, §B).
#include <chrono>
#include <memory>
#include <optional>

#include "cli_common.hpp"
#include "tile_flags.hpp"
#include "commands.hpp"
#include "cubekit/detect.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "detect_output.hpp"
#include "option_flags.hpp"
#include "outputs.hpp"

namespace cubekit::cli {
namespace {

struct RbfnArgs {
    CommonOptions common;
    std::string input, output, model;
    PixelOptions options;
    TileFlags tiles;
};

struct MultiresArgs {
    CommonOptions common;
    std::string input, output, model;
    MultiresOptions options;
    TileFlags tiles;
};

nlohmann::json model_summary(const std::string& path, int bands, int hidden, double threshold, const std::string& name) {
    return {{"path", path}, {"bands", bands}, {"hidden", hidden}, {"threshold", threshold}, {"target_name", name}};
}

void check_bands(const std::string& path, int model_bands, const CubeShape& shape) {
    if (model_bands != shape.bands)
        throw InvalidInput("--model " + path + ": the network takes " + std::to_string(model_bands) + " bands but the input has " +
                           std::to_string(shape.bands) + " (select them with --bands)");
}

// The score map as OUT asks: float for .npy/ENVI, scaled for display for PNG/PNM.
void write_score(const Cube& score, const std::string& out, const WriteOptions& write, OutputList& written) {
    const FileFormat format = output_format(out);
    if (format == FileFormat::Png || format == FileFormat::Pnm) {
        const double white = display_white_point(score);
        write_cube(to_display_u8(score, white), out, write);
        written.add(out, {{"path", out}, {"role", "score"}, {"format", std::string(format_name(format))}, {"dtype", "u8"},
                          {"scale", {{"rule", "round(255 * clamp(v, 0, white) / white), white = 99th percentile"}, {"white", white}}}});
    } else {
        write_cube(score, out, write);
        written.add(out, "score", std::string(format_name(format)), "f32");
    }
}

// A table as JSON (for programs) and CSV (for spreadsheets), both listed in `written`.
void write_tables(const nlohmann::ordered_json& table, const std::string& csv, const std::string& role,
                  const std::pair<std::string, std::string>& paths, OutputList& written) {
    write_text_file(paths.first, readable_json(table));
    written.add(paths.first, role, "json");
    write_text_file(paths.second, csv);
    written.add(paths.second, role, "csv");
}

/// The scene of a detection run: the cube read whole, or (with tile flags, an ENVI, .npy or GeoTIFF
/// input) a file read by windows, whose overlay reads only the composite's bands.
struct Scene {
    std::optional<CubeFile> file;
    const Cube* cube = nullptr;
    CubeShape shape() const { return file ? file->shape() : cube->shape(); }
    const Metadata& metadata() const { return file ? file->metadata() : cube->metadata(); }
};

// The boxes drawn on an RGB composite of the scene, as a PNG.
void write_overlay(const Scene& scene, const std::vector<Box>& boxes, const std::string& path, const WriteOptions& write,
                   OutputList& written) {
    Cube overlay = scene.file ? composite_rgb(*scene.file) : composite_rgb(*scene.cube);
    draw_boxes(overlay, boxes);
    write_cube(overlay, path, write);
    written.add(path, "overlay", "png", "u8");
}

void run_rbfn(const RbfnArgs& a) {
    CommonOptions common = a.common;
    std::optional<TileOptions> tiles;
    if (a.tiles.given()) tiles = tile_options(a.tiles);  // a bad flag fails before the read
    if (!a.tiles.devices.empty() && common.context.backend == Backend::Auto) common.context.backend = Backend::Cuda;
    output_format(a.output);  // a bad OUT fails before any work
    const std::string objects_path = beside(a.output, ".objects.json"), csv_path = beside(a.output, ".objects.csv"),
                      overlay_path = beside(a.output, ".overlay.png");
    check_outputs({a.output, objects_path, csv_path, overlay_path}, "detect rbfn");
    const RbfnModel model = read_rbfn_model(a.model);
    Timings timings;
    Scene scene;
    scene.file = tiles ? open_windowed(a.input, common, true, timings) : std::nullopt;
    // Not a structured binding: clang cannot capture one in a lambda when OpenMP is on.
    auto prepared = context_for_input(
        common, "detect rbfn", timings, a.input, scene.file, [&] { return read_input(a.input, common).cube; },
        [&](const CubeShape& s) { return estimate_detect_rbfn(s, model.hidden); });
    Context& ctx = prepared.ctx;
    const Cube& cube = prepared.input;
    scene.cube = &cube;
    nlohmann::json& choice = prepared.backend_choice;
    const CubeShape shape = scene.shape();
    check_bands(a.model, model.bands, shape);
    const TransferTotals copies = ctx.transfer_totals();
    if (tiles) check_tile_devices(a.tiles, *tiles, ctx);
    auto t0 = std::chrono::steady_clock::now();
    std::optional<TiledRun> tiled;
    PixelResult r;
    if (scene.file || use_tiles(tiles, ctx, cube.num_bytes())) {
        tiled.emplace();
        const TileOptions t = tiles.value_or(TileOptions{});
        r = std::move((scene.file ? detect_pixels_tiled(ctx, *scene.file, std::span(&model, 1), a.options, t, &*tiled)
                                  : detect_pixels_tiled(ctx, cube, std::span(&model, 1), a.options, t, &*tiled))
                          .front());
    } else {
        r = detect_pixels(ctx, cube, model, a.options);
    }
    const double compute_ms = elapsed_ms(t0);
    r.score.metadata() = scene.metadata().georeference();  // the score map lies on the input's map

    t0 = std::chrono::steady_clock::now();
    OutputList written;
    try {
        write_score(r.score, a.output, common.write, written);
        if (a.options.objects) {
            nlohmann::ordered_json table;
            table["input"] = a.input;
            table["model"] = a.model;
            table["threshold"] = r.threshold;
            table["objects"] = objects_json(r.objects);
            std::vector<Box> boxes;
            for (const DetectedObject& o : r.objects) boxes.push_back({o.x0, o.y0, o.width, o.height});
            write_tables(table, objects_csv(r.objects), "objects", {objects_path, csv_path}, written);
            write_overlay(scene, boxes, overlay_path, common.write, written);
        }
    } catch (...) {
        written.remove_all();
        throw;
    }
    nlohmann::json j = summary("detect rbfn", ctx, choice);
    j["input"] = {{"path", a.input}, {"shape", shape_json(shape)}};
    if (tiles) j["input"]["windowed"] = scene.file.has_value();
    j["model"] = model_summary(a.model, model.bands, model.hidden, model.threshold, model.target_name);
    j["parameters"] = parameters_json(a.options);
    j["implementation"] = std::string(rbfn_implementation(ctx, a.options));
    if (tiled) j["tiled"] = tiled_json(*tiled);
    j["threshold"] = r.threshold;
    j["non_finite_pixels"] = r.non_finite;
    j["detected_pixels"] = r.detected;
    j["objects"] = objects_json(r.objects);
    j["timings_ms"] = {{"detect", compute_ms}, {"write", elapsed_ms(t0)}};
    j["outputs"] = written.json();
    timings.add(j["timings_ms"]);
    timings.split_transfers(ctx, copies, "detect");
    say(common, "detect rbfn: " + a.input + " (" + shape.describe() + ") on " + ctx.device_name() + ", " +
                    std::to_string(r.objects.size()) + " objects, " + std::to_string(r.detected) + " pixels above " +
                    std::to_string(r.threshold));
    for (const auto& o : j["outputs"]) say(common, "  wrote " + o["path"].get<std::string>());
    emit_json(common, j, timings);
}

// The 1-based index of the detection covering each pixel (0 = none), W×H×1 i32.
Cube detection_raster(const std::vector<Window>& windows, int width, int height) {
    Cube raster(width, height, 1, DType::I32, Layout::BSQ);
    for (std::size_t k = 0; k < windows.size(); ++k)
        for (int y = windows[k].y0; y < windows[k].y0 + windows[k].height; ++y)
            for (int x = windows[k].x0; x < windows[k].x0 + windows[k].width; ++x) raster.at<std::int32_t>(x, y, 0) = int(k) + 1;
    return raster;
}

void run_multires(const MultiresArgs& a) {
    CommonOptions common = a.common;
    std::optional<TileOptions> tiles;
    if (a.tiles.given()) tiles = tile_options(a.tiles);  // a bad flag fails before the read
    if (!a.tiles.devices.empty() && common.context.backend == Backend::Auto) common.context.backend = Backend::Cuda;
    const std::string ext = std::filesystem::path(a.output).extension().string();
    const bool out_json = ext == ".json";
    if (!out_json) output_format(a.output);
    const std::string windows_path = out_json ? a.output : beside(a.output, ".windows.json");
    const std::string csv_path = beside(a.output, ".windows.csv");
    const std::string overlay_path = ext == ".png" ? a.output : beside(a.output, ".overlay.png");
    std::vector<std::string> paths{windows_path, csv_path, overlay_path};
    if (!out_json && ext != ".png") paths.push_back(a.output);
    check_outputs(paths, "detect multires");
    const MultiresModel model = read_multires_model(a.model);
    Timings timings;
    Scene scene;
    scene.file = tiles ? open_windowed(a.input, common, true, timings) : std::nullopt;
    // Not a structured binding: clang cannot capture one in a lambda when OpenMP is on.
    auto prepared = context_for_input(
        common, "detect multires", timings, a.input, scene.file, [&] { return read_input(a.input, common).cube; },
        estimate_detect_multires);
    Context& ctx = prepared.ctx;
    const Cube& cube = prepared.input;
    scene.cube = &cube;
    nlohmann::json& choice = prepared.backend_choice;
    const CubeShape shape = scene.shape();
    check_bands(a.model, model.ann1.inputs, shape);
    if (tiles) check_tile_devices(a.tiles, *tiles, ctx);
    auto t0 = std::chrono::steady_clock::now();
    std::optional<TiledRun> tiled;
    MultiresResult r;
    if (scene.file || use_tiles(tiles, ctx, cube.num_bytes())) {
        tiled.emplace();
        const TileOptions t = tiles.value_or(TileOptions{});
        r = scene.file ? detect_multires_tiled(ctx, *scene.file, model, a.options, t, &*tiled)
                       : detect_multires_tiled(ctx, cube, model, a.options, t, &*tiled);
    } else {
        r = detect_multires(ctx, cube, model, a.options);
    }
    const double compute_ms = elapsed_ms(t0);

    t0 = std::chrono::steady_clock::now();
    OutputList written;
    try {
        nlohmann::ordered_json table;
        table["input"] = a.input;
        table["model"] = a.model;
        table["detections"] = windows_json(r.detections);
        if (a.options.trace) table["trace"] = windows_json(r.trace);
        std::vector<Box> boxes;
        for (const Window& w : r.detections) boxes.push_back({w.x0, w.y0, w.width, w.height});
        write_tables(table, windows_csv(r.detections), "windows", {windows_path, csv_path}, written);
        write_overlay(scene, boxes, overlay_path, common.write, written);
        if (!out_json && ext != ".png") {
            Cube raster = detection_raster(r.detections, shape.width, shape.height);
            raster.metadata() = scene.metadata().georeference();
            write_cube(raster, a.output, common.write);
            written.add(a.output, "raster", std::string(format_name(output_format(a.output))), "i32");
        }
    } catch (...) {
        written.remove_all();
        throw;
    }
    nlohmann::json j = summary("detect multires", ctx, choice);
    j["input"] = {{"path", a.input}, {"shape", shape_json(shape)}};
    if (tiles) j["input"]["windowed"] = scene.file.has_value();
    j["model"] = {{"path", a.model}, {"bands", model.ann1.inputs}, {"block", model.block}, {"min_window", model.min_window}};
    j["parameters"] = parameters_json(a.options);
    j["implementation"] = std::string(multires_implementation(ctx));
    if (tiled) j["tiled"] = tiled_json(*tiled);
    j["detections"] = windows_json(r.detections);
    nlohmann::json levels = nlohmann::json::array();
    for (const MultiresLevelCount& c : r.levels)
        levels.push_back({{"level", c.level}, {"evaluated", c.evaluated}, {"positive", c.positive}, {"accepted", c.accepted},
                          {"split", c.split}});
    j["levels"] = levels;
    j["skipped_samples"] = r.skipped_samples;
    j["timings_ms"] = {{"detect", compute_ms}, {"write", elapsed_ms(t0)}};
    j["outputs"] = written.json();
    timings.add(j["timings_ms"]);
    say(common, "detect multires: " + a.input + " (" + shape.describe() + ") on " + ctx.device_name() + ", " +
                    std::to_string(r.detections.size()) + " windows");
    for (const auto& o : j["outputs"]) say(common, "  wrote " + o["path"].get<std::string>());
    emit_json(common, j, timings);
}

}  // namespace

void add_detect_networks(CLI::App& detect, NestedActions& actions) {
    auto rbfn = std::make_shared<RbfnArgs>();
    CLI::App* app = detect.add_subcommand("rbfn", "Pixel-level detection with an RBF network: a score per pixel, objects, overlay");
    app->footer(
        "score(p) = sum_i w_i exp(-|x'(p) - u_i|^2 / (2 sigma_i^2)) + bias, x' = gain (x - offset); a pixel is detected\n"
        "when score > threshold (default: the model's); detected pixels form 8-connected objects.\n"
        "Outputs: OUT = the score map (.npy/ENVI float32, or .png scaled for display), and beside it\n"
        "<stem>.objects.json and .csv (label, area, box, centroid, peak and mean score) and <stem>.overlay.png.\n"
        "Examples:\n"
        "  cubekit train rbfn Sandiego.mat --var data --labels Sandiego.mat:map -o planes.json\n"
        "  cubekit detect rbfn Sandiego.mat scores.npy --var data --model planes.json --json\n"
        "  cubekit detect rbfn big.hdr scores.npy --model planes.json --devices 0,1   # tiles over two GPUs\n"
        "Tiles: --memory-limit, --device-memory-limit, --devices or --tile-size compute the scores in tiles (bit-identical);\n"
        "an ENVI, .npy or GeoTIFF input is then read by windows and the overlay reads only its three bands (input.windowed\n"
        "in --json); on a GPU an input of 64 MiB or more is always streamed in tiles. Objects come from the whole score map.");
    input_file(app->add_option("IN", rbfn->input, "input cube (any format cubekit reads)"))->required();
    app->add_option("OUT", rbfn->output, "score map: .npy, .hdr/.img (ENVI) or .png")->required();
    input_file(app->add_option("--model", rbfn->model, "RBF network model file (JSON, type rbfn)"))->required();
    bind_flags(*app, rbfn->options);
    add_common_flags(*app, rbfn->common);
    add_output_flags(*app, rbfn->common);
    add_tile_flags(*app, rbfn->tiles);
    actions[app] = [rbfn] { run_rbfn(*rbfn); };

    auto multires = std::make_shared<MultiresArgs>();
    app = detect.add_subcommand("multires", "Multi-resolution detection: a quad-tree of windows judged by two networks");
    app->footer(
        "Windows from the whole image down to the model's min_window: ANN-1 on the window's per-band standard\n"
        "deviations says whether a target is inside, ANN-2 whether the window fits it (then it is reported),\n"
        "else the window splits into four.\n"
        "Outputs: OUT = .json (the window list), .png (the overlay) or .npy/ENVI (int32 raster: 1-based window index,\n"
        "0 = none); beside it <stem>.windows.json, <stem>.windows.csv and <stem>.overlay.png.\n"
        "Examples:\n"
        "  cubekit detect multires sea.npy boxes.json --model castaways.json --trace --json\n"
        "  cubekit detect multires big.hdr boxes.json --model castaways.json --device-memory-limit 1G\n"
        "Tiles: --memory-limit, --device-memory-limit, --devices or --tile-size compute the block sums in tiles cut at\n"
        "block edges (the same windows); an ENVI, .npy or GeoTIFF input is then read by windows, and the overlay reads\n"
        "only its three bands (input.windowed in --json); on a GPU an input of 64 MiB or more is always streamed in tiles.");
    input_file(app->add_option("IN", multires->input, "input cube (any format cubekit reads)"))->required();
    app->add_option("OUT", multires->output, "windows: .json, .png overlay, or .npy/ENVI raster")->required();
    input_file(app->add_option("--model", multires->model, "multi-resolution model file (JSON, type multires)"))->required();
    bind_flags(*app, multires->options);
    add_common_flags(*app, multires->common);
    add_output_flags(*app, multires->common);
    add_tile_flags(*app, multires->tiles);
    actions[app] = [multires] { run_multires(*multires); };
}

}  // namespace cubekit::cli
