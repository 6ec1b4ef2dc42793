// cubekit demo: the main job on the embedded Samson scene, with PNG + JSON outputs; with --photo,
// also the 16-colour quantization of a photo (scripts/demo passes the shipped data/photos/chelsea.png).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include <unistd.h>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/edges.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "kmeans_output.hpp"
#include "rcmg_command.hpp"

namespace cubekit::cli {

Action add_demo(CLI::App& root) {
    struct Args {
        CommonOptions common;
        std::string out_dir = "out/demo";
        std::string scene = std::string(CUBEKIT_DATA_DIR) + "/samson/samson_1.img";
        std::string photo;
    };
    auto args = std::make_shared<Args>();
    CLI::App* app = root.add_subcommand("demo", "Run the RCMG and the entropy edge detector on the embedded Samson scene and write PNG + JSON outputs");
    app->footer("Examples:\n"
                "  cubekit demo --out out/demo   (then open out/demo/samson_rcmg.png and samson_edges.png)\n"
                "  cubekit demo --out out/demo --photo data/photos/chelsea.png   (also out/demo/chelsea_k16.png)");
    app->add_option("--out", args->out_dir, "output folder (created if missing)")->capture_default_str();
    app->add_option("--scene", args->scene, "scene to use instead of the embedded one")->capture_default_str();
    app->add_option("--photo", args->photo,
                    "also quantize this photo to 16 colours (k-means, seed 0): <out>/<photo stem>_k16.png, its\n"
                    ".indexed.png, .palette.json and .palette.png");
    add_common_flags(*app, args->common);
    return [args] {
        const CommonOptions& common = args->common;
        Context ctx = make_context(common, "rcmg");  // a bad --device/--backend fails before anything is made
        const Cube cube = read_input(args->scene, common);
        const Cube photo = args->photo.empty() ? Cube() : read_cube(args->photo);  // a bad photo fails before any output
        const bool made_dir = !std::filesystem::exists(args->out_dir);
        std::error_code ec;
        std::filesystem::create_directories(args->out_dir, ec);
        if (ec) throw IoError("demo: --out " + args->out_dir + ": cannot create the folder: " + ec.message());
        say(common, "demo: read " + args->scene + ": " + cube.shape().describe() + " (Samson, SAMSON sensor, 401-899 nm)");
        const std::string png = args->out_dir + "/samson_rcmg.png", npy = args->out_dir + "/samson_rcmg.npy";
        const std::string json_path = args->out_dir + "/samson_rcmg.json";
        const std::string edges_png = args->out_dir + "/samson_edges.png";
        const RcmgOptions options{};  // the spec's defaults: 8-connectivity, r = 1, f64 accumulation
        nlohmann::json j;
        std::vector<std::string> photo_outputs;
        try {
            j = run_rcmg(ctx, args->scene, cube, options, {png, npy});
            j["command"] = "demo";
            // The entropy edge detector on the same scene: vote over the per-band edge maps (15 %),
            // components under 3 pixels removed; white edges on black.
            const EntropyEdgeOptions edge_options{.min_component = 3, .fusion = EdgeFusion::EdgeVote};
            Cube edges = entropy_edges(ctx, cube, edge_options).edges;
            std::int64_t edge_pixels = 0;
            for (std::size_t i = 0; i < edges.num_elements(); ++i) {
                edge_pixels += edges.data<std::uint8_t>()[i];
                edges.data<std::uint8_t>()[i] = edges.data<std::uint8_t>()[i] ? 255 : 0;
            }
            write_cube(edges, edges_png);
            j["edges"] = {{"path", edges_png}, {"fusion", "vote-edges"}, {"vote_percent", 15}, {"min_component", 3},
                          {"edge_pixels", edge_pixels}};
            if (!args->photo.empty()) {
                const std::string stem = std::filesystem::path(args->photo).stem().string();
                QuantizeJob job{.input = args->photo,
                                .output = args->out_dir + "/" + stem + "_k16.png",
                                .options = KmeansOptions{.k = 16, .seed = 0}};
                job.alpha_last = (photo.bands() == 2 || photo.bands() == 4) && detect_format(args->photo) == FileFormat::Png;
                j["quantize"] = run_quantize(ctx, photo, job);
                for (const auto& o : j["quantize"]["outputs"]) photo_outputs.push_back(o["path"].get<std::string>());
            }
            const std::string tmp = args->out_dir + "/.samson_rcmg.json.tmp-" + std::to_string(::getpid());
            {
                std::ofstream f(tmp);
                f << j.dump(2) << "\n";
                f.close();
                if (!f) {
                    std::filesystem::remove(tmp, ec);
                    throw IoError("demo: " + json_path + ": cannot write");
                }
            }
            std::filesystem::rename(tmp, json_path, ec);
            if (ec) {
                const std::string why = ec.message();
                std::filesystem::remove(tmp, ec);
                throw IoError("demo: " + json_path + ": cannot write: " + why);
            }
        } catch (...) {
            remove_outputs({png, npy, edges_png});
            for (const std::string& p : photo_outputs) std::filesystem::remove(p, ec);
            if (made_dir) std::filesystem::remove(args->out_dir, ec);
            throw;
        }
        say(common, "demo: Robust Color Morphological Gradient (8-connectivity, 1 pair rejected, f64 sums) on " +
                        ctx.device_name() + " [" + j["implementation"].get<std::string>() + "] in " +
                        std::to_string(j["timings_ms"]["rcmg"].get<double>()) + " ms; max gradient " +
                        std::to_string(j["gradient"]["max"].get<double>()));
        say(common, "demo: wrote " + png + " (gradient scaled to 0..255: bright = strong spectral edge)");
        say(common, "demo: wrote " + npy + " (float32 gradient, shape (95, 95))");
        say(common, "demo: wrote " + edges_png + " (entropy edges: vote over the " + std::to_string(cube.bands()) + " per-band maps, " +
                        std::to_string(j["edges"]["edge_pixels"].get<std::int64_t>()) + " edge pixels)");
        if (!args->photo.empty()) {
            const nlohmann::json& q = j["quantize"];
            say(common, "demo: quantized " + args->photo + " to 16 colours (k-means++, seed 0, " +
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
                say(common, "demo: wrote " + o["path"].get<std::string>() + " (" +
                                what.at(o["role"].get<std::string>()) + ")");
        }
        say(common, "demo: wrote " + json_path + " (parameters, timings, outputs)");
        emit_json(common, j);
    };
}

}  // namespace cubekit::cli
