// cubekit demo: the main job on the embedded Samson scene, with PNG + JSON outputs; with --photo,
// also the 16-colour quantization of a photo (scripts/demo passes the shipped data/photos/chelsea.png).
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/edges.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "kmeans_output.hpp"
#include "option_flags.hpp"
#include "outputs.hpp"
#include "rcmg_command.hpp"

namespace cubekit::cli {

namespace {

struct DemoArgs {
    CommonOptions common;
    std::string out_dir = "out/demo";
    std::string scene = std::string(CUBEKIT_DATA_DIR) + "/samson/samson_1.img";
    std::string photo;
};

// The entropy edge detector on the scene: vote over the per-band edge maps (the default fusion of a
// cube), components under 3 pixels removed.
const EntropyEdgeOptions kDemoEdges{.min_component = 3};

/// Writes the scene's edge map (white edges on black) and returns its entry of the summary.
nlohmann::json write_demo_edges(const Context& ctx, const Cube& cube, const std::string& path,
                                const WriteOptions& write) {
    EntropyEdgeOptions options = kDemoEdges;
    options.fusion = resolved_fusion(options.fusion, cube.bands());
    const Cube edges = entropy_edges(ctx, cube, options).edges;
    std::int64_t edge_pixels = 0;
    for (std::size_t i = 0; i < edges.num_elements(); ++i) edge_pixels += edges.data<std::uint8_t>()[i];
    write_cube(binary_map_for_file(edges, path), path, write);
    const nlohmann::json p = parameters_json(options);
    return {{"path", path}, {"fusion", p["fusion"]}, {"vote_percent", p["vote_percent"]},
            {"min_component", p["min_component"]}, {"edge_pixels", edge_pixels}};
}

/// The lines about the quantized photo.
void say_photo(const CommonOptions& common, const std::string& photo, const nlohmann::json& q) {
    say(common, "demo: quantized " + photo + " to 16 colours (k-means++, seed 0, " +
                    std::to_string(q["iterations"].get<int>()) + " iterations) in " +
                    std::to_string(q["timings_ms"]["kmeans"].get<double>()) + " ms");
    const std::size_t n = q["palette_size"].get<std::size_t>();
    const int bits = n <= 2 ? 1 : n <= 4 ? 2 : n <= 16 ? 4 : 8;
    const std::map<std::string, std::string> what = {
        {"quantized", "the photo painted with its " + std::to_string(n) + "-colour palette"},
        {"indexed", "the same image as a palette PNG: " + std::to_string(n) + " colours in its PLTE chunk, " +
                        std::to_string(bits) + " bits per pixel"},
        {"palette", "the palette: colours, pixel counts and fractions, inertia"},
        {"swatch", "the palette as 32x32 squares, most frequent colour first"}};
    for (const auto& o : q["outputs"])
        say(common, "demo: wrote " + o["path"].get<std::string>() + " (" + what.at(o["role"].get<std::string>()) + ")");
}

void demo_command(const DemoArgs& a) {
    const CommonOptions& common = a.common;
    // timings_ms: context, read (scene and photo), rcmg and write (its outputs), edges (computed and
    // written), quantize (the whole photo job; its own breakdown is under quantize.timings_ms).
    Timings timings;
    // A bad --device/--backend fails before anything is made.
    // auto's estimate: the RCMG and the edges of the scene, and the photo's k-means (k = 16; bounded
    // from its file size, as it is read after the decision).
    const auto estimate = [&](const CubeShape& s) {
        const WorkEstimate scene = estimate_rcmg(s) + estimate_edges(s);
        return a.photo.empty() ? scene : scene + estimate_kmeans(shape_lower_bound(a.photo), 16);
    };
    // Not a structured binding: clang cannot capture one in a lambda when OpenMP is on.
    auto prepared = context_while_reading(
        common, "rcmg", timings, a.scene, [&] { return read_input(a.scene, common).cube; }, estimate);
    Context& ctx = prepared.ctx;
    auto& cube = prepared.input;
    nlohmann::json& choice = prepared.backend_choice;
    // A bad photo fails before any output.
    const Cube photo = timings.time("read", [&] { return a.photo.empty() ? Cube() : read_cube(a.photo); });
    MadeFolders folders;
    folders.create(a.out_dir, "demo: --out");
    say(common, "demo: read " + a.scene + ": " + cube.shape().describe() + " (Samson, SAMSON sensor, 401-899 nm)");
    const std::string png = a.out_dir + "/samson_rcmg.png", npy = a.out_dir + "/samson_rcmg.npy";
    const std::string json_path = a.out_dir + "/samson_rcmg.json", edges_png = a.out_dir + "/samson_edges.png";
    nlohmann::json j;
    std::vector<std::string> written;
    try {
        j = run_rcmg(ctx, a.scene, cube, RcmgOptions{}, {png, npy}, common.write);  // the spec's defaults
        written = {png, npy};
        j["command"] = "demo";
        if (!choice.is_null()) j["backend_choice"] = choice;
        timings.add(j["timings_ms"]);  // rcmg, write
        j["edges"] = timings.time("edges", [&] { return write_demo_edges(ctx, cube, edges_png, common.write); });
        written.push_back(edges_png);
        if (!a.photo.empty()) {
            const std::string stem = std::filesystem::path(a.photo).stem().string();
            QuantizeJob job{.input = a.photo, .output = a.out_dir + "/" + stem + "_k16.png", .options = KmeansOptions{},
                            .write = common.write};
            job.alpha_last = (photo.bands() == 2 || photo.bands() == 4) && detect_format(a.photo) == FileFormat::Png;
            j["quantize"] = timings.time("quantize", [&] { return run_quantize(ctx, photo, job); });
            for (const auto& o : j["quantize"]["outputs"]) written.push_back(o["path"].get<std::string>());
        }
        j["timings_ms"] = timings.json();  // total: up to this file
        write_text_file(json_path, j.dump(2) + "\n");
    } catch (...) {
        remove_outputs(written);
        folders.remove_made();
        throw;
    }
    say(common, "demo: Robust Color Morphological Gradient (8-connectivity, 1 pair rejected, f64 sums) on " +
                    ctx.device_name() + " [" + j["implementation"].get<std::string>() + "] in " +
                    std::to_string(j["timings_ms"]["rcmg"].get<double>()) + " ms; max gradient " +
                    std::to_string(j["gradient"]["max"].get<double>()));
    say(common, "demo: wrote " + png + " (gradient scaled to 0..255: bright = strong spectral edge)");
    say(common, "demo: wrote " + npy + " (float32 gradient, shape (95, 95))");
    say(common, "demo: wrote " + edges_png + " (entropy edges: vote over the " + std::to_string(cube.bands()) +
                    " per-band maps, " + std::to_string(j["edges"]["edge_pixels"].get<std::int64_t>()) + " edge pixels)");
    if (!a.photo.empty()) say_photo(common, a.photo, j["quantize"]);
    say(common, "demo: wrote " + json_path + " (parameters, timings, outputs)");
    emit_json(common, j, timings);
}

}  // namespace

Action add_demo(CLI::App& root) {
    auto args = std::make_shared<DemoArgs>();
    CLI::App* app = root.add_subcommand("demo", "Run the RCMG and the entropy edge detector on the embedded Samson scene and write PNG + JSON outputs");
    app->footer("Examples:\n"
                "  cubekit demo --out out/demo   (then open out/demo/samson_rcmg.png and samson_edges.png)\n"
                "  cubekit demo --out out/demo --photo data/photos/chelsea.png   (also out/demo/chelsea_k16.png)");
    app->add_option("--out", args->out_dir, "output folder (created if missing)")->capture_default_str();
    input_file(app->add_option("--scene", args->scene, "scene to use instead of the embedded one"))->capture_default_str();
    input_file(app->add_option("--photo", args->photo,
                    "also quantize this photo to 16 colours (k-means, seed 0): <out>/<photo stem>_k16.png, its\n"
                    ".indexed.png, .palette.json and .palette.png"));
    add_common_flags(*app, args->common);
    add_output_flags(*app, args->common);
    return [args] { demo_command(*args); };
}

}  // namespace cubekit::cli
