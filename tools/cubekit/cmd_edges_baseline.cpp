// cubekit edges-baseline: the classical detectors the entropy detector is compared against (spec
// edges.md §3.10, E6), with MATLAB R2016 edge() defaults.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <numbers>
#include <optional>
#include <string>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/edge_baselines.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"

namespace cubekit::cli {

namespace {

/// The σ the method runs with (null for the mask methods).
nlohmann::json sigma_used(const BaselineOptions& o) {
    if (o.method == BaselineMethod::LoG) return o.sigma > 0 ? o.sigma : 2.0;
    if (o.method == BaselineMethod::Canny) return o.sigma > 0 ? o.sigma : std::numbers::sqrt2;
    return nullptr;
}

/// One band of the edge cube with edges = 255 (for PNG).
Cube band_as_png(const Cube& edges) {
    Cube png(edges.width(), edges.height(), 1, DType::U8, Layout::BSQ);
    const std::uint8_t* in = edges.data<std::uint8_t>();
    std::uint8_t* out = png.data<std::uint8_t>();
    for (std::size_t i = 0; i < png.num_elements(); ++i) out[i] = in[i] ? 255 : 0;
    return png;
}

}  // namespace

Action add_edges_baseline(CLI::App& root) {
    struct Args {
        CommonOptions common;
        std::string input, output, method = "canny";
        double sigma = 0, low_ratio = 0.4;
        std::optional<double> threshold;
        bool no_thinning = false;
    };
    auto args = std::make_shared<Args>();
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
        "  cubekit edges-baseline scene.mat sobel.npy --var data --method sobel --bands 10-19 --json");
    app->add_option("IN", args->input, "input image or cube (any format cubekit reads)")->required();
    app->add_option("OUT", args->output, "output map: .png (one band) or .npy")->required();
    app->add_option("--method", args->method, "canny, sobel, prewitt, roberts or log")
        ->check(CLI::IsMember({"canny", "sobel", "prewitt", "roberts", "log"}))
        ->capture_default_str();
    app->add_option("--sigma", args->sigma, "Gaussian sigma of log and canny (default: log 2, canny sqrt(2))");
    app->add_option("--threshold", args->threshold, "MATLAB's thresh, >= 0 (default: MATLAB's automatic rule)");
    app->add_option("--low-ratio", args->low_ratio, "canny: low threshold = ratio * high, 0..1")->capture_default_str();
    app->add_flag("--no-thinning", args->no_thinning, "sobel/prewitt/roberts: every pixel above the cutoff (MATLAB 'nothinning')");
    add_common_flags(*app, args->common);
    return [args] {
        const CommonOptions& common = args->common;
        BaselineOptions options;
        options.method = parse_baseline(args->method);
        options.sigma = args->sigma;
        if (args->threshold) {
            if (!(*args->threshold >= 0))
                throw InvalidInput("--threshold = " + nlohmann::json(*args->threshold).dump() +
                                   "; expected >= 0 (leave it out for MATLAB's automatic rule)");
            options.threshold = *args->threshold;
        }
        options.low_ratio = args->low_ratio;
        options.thin = !args->no_thinning;
        check_baseline_options(options);  // refuse bad options and OUT before reading anything
        const FileFormat format = output_format(args->output);
        if (format != FileFormat::Png && format != FileFormat::Npy)
            throw InvalidInput("edges-baseline: OUT = " + args->output + "; expected a .png or .npy path");

        Context ctx = make_context(common, "edges-baseline");
        auto t0 = std::chrono::steady_clock::now();
        const Cube cube = read_input(args->input, common);
        const double read_ms = elapsed_ms(t0);
        if (format == FileFormat::Png && cube.bands() != 1)
            throw InvalidInput("edges-baseline: OUT " + args->output + " is a PNG, which holds one band, and IN has " +
                               std::to_string(cube.bands()) + " bands; pick one with --bands N or write .npy");
        t0 = std::chrono::steady_clock::now();
        const BaselineResult result = baseline_edges_with_thresholds(ctx, cube, options);
        const double edges_ms = elapsed_ms(t0);
        t0 = std::chrono::steady_clock::now();
        if (format == FileFormat::Png) write_cube(band_as_png(result.edges), args->output);
        else write_cube(result.edges, args->output);
        const double write_ms = elapsed_ms(t0);

        const std::size_t N = result.edges.shape().num_pixels();
        const std::uint8_t* e = result.edges.data<std::uint8_t>();
        nlohmann::json bands = nlohmann::json::array();
        std::int64_t total = 0;
        for (int b = 0; b < cube.bands(); ++b) {
            std::int64_t count = 0;
            for (std::size_t i = 0; i < N; ++i) count += e[std::size_t(b) * N + i];
            total += count;
            nlohmann::json jb = {{"band", b}, {"threshold", result.thresholds[std::size_t(b)].high}, {"edge_pixels", count}};
            if (options.method == BaselineMethod::Canny) jb["low_threshold"] = result.thresholds[std::size_t(b)].low;
            bands.push_back(jb);
        }
        nlohmann::json j = summary("edges-baseline", ctx);
        j["input"] = {{"path", args->input}, {"shape", shape_json(cube.shape())}};
        nlohmann::json params = {{"method", std::string(baseline_name(options.method))},
                                 {"sigma", sigma_used(options)},
                                 {"threshold", args->threshold ? nlohmann::json(*args->threshold) : nlohmann::json("auto")}};
        if (options.method == BaselineMethod::Canny) params["low_ratio"] = options.low_ratio;
        if (options.method != BaselineMethod::Canny && options.method != BaselineMethod::LoG)
            params["thinning"] = options.thin;
        j["parameters"] = params;
        j["bands"] = bands;
        j["edge_pixels"] = total;
        j["timings_ms"] = {{"read", read_ms}, {"edges", edges_ms}, {"write", write_ms}};
        j["outputs"] = nlohmann::json::array(
            {{{"path", args->output}, {"format", std::string(format_name(format))}, {"dtype", "u8"},
              {"edge_value", format == FileFormat::Png ? 255 : 1}}});
        say(common, "edges-baseline: " + args->input + " (" + cube.shape().describe() + ") on " + ctx.device_name() +
                        ", " + std::string(baseline_name(options.method)) + ", " + std::to_string(total) +
                        " edge pixels");
        say(common, "  wrote " + args->output);
        emit_json(common, j);
    };
}

}  // namespace cubekit::cli
