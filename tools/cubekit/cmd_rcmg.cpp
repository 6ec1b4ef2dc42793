// cubekit rcmg: Robust Color Morphological Gradient of a cube (spec gradient-watershed.md, A).
#include <algorithm>
#include <filesystem>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/io.hpp"
#include "rcmg_command.hpp"

namespace cubekit::cli {

void remove_outputs(const std::vector<std::string>& paths) {
    for (const std::string& p : paths) {
        std::error_code ec;
        std::filesystem::remove(p, ec);
        if (output_format(p) == FileFormat::Envi) {  // ENVI wrote a header and a data file
            std::filesystem::path hdr(p), img(p);
            hdr.replace_extension(".hdr");
            img.replace_extension(".img");
            std::filesystem::remove(hdr, ec);
            std::filesystem::remove(img, ec);
        }
    }
}

nlohmann::json run_rcmg(const Context& ctx, const std::string& input, const Cube& cube, const RcmgOptions& options,
                        const std::vector<std::string>& outputs) {
    check_rcmg_arguments(cube.shape(), options);
    std::vector<FileFormat> formats;
    for (const std::string& out : outputs) formats.push_back(output_format(out));  // refuse bad names before work
    auto t0 = std::chrono::steady_clock::now();
    const Cube gradient = rcmg(ctx, cube, options);
    const double compute_ms = elapsed_ms(t0);

    double mx = 0, sum = 0;
    std::vector<double> finite_values;
    finite_values.reserve(gradient.num_elements());
    for (int y = 0; y < gradient.height(); ++y)
        for (int x = 0; x < gradient.width(); ++x) {
            const double v = gradient.value(x, y, 0);
            if (!std::isfinite(v)) continue;
            mx = std::max(mx, v);
            sum += v;
            finite_values.push_back(v);
        }
    const std::size_t finite = finite_values.size();
    // PNG white point: the 99th percentile, so that a few very strong edges do not leave the rest
    // of the picture black (the largest value when that percentile is 0).
    double white = 0;
    if (finite) {
        const std::size_t k = std::min(finite - 1, std::size_t(0.99 * double(finite)));
        std::nth_element(finite_values.begin(), finite_values.begin() + std::ptrdiff_t(k), finite_values.end());
        white = finite_values[k] > 0 ? finite_values[k] : mx;
    }
    t0 = std::chrono::steady_clock::now();
    nlohmann::json written = nlohmann::json::array();
    std::size_t done = 0;
    try {
    for (std::size_t i = 0; i < outputs.size(); ++i, ++done) {
        if (formats[i] == FileFormat::Png || formats[i] == FileFormat::Pnm) {
            write_cube(to_display_u8(gradient, white), outputs[i]);
            written.push_back({{"path", outputs[i]}, {"format", std::string(format_name(formats[i]))}, {"dtype", "u8"},
                               {"scale", {{"rule", "round(255 * min(v, white) / white), white = 99th percentile"},
                                          {"white", white}}}});
        } else {
            write_cube(gradient, outputs[i]);
            written.push_back({{"path", outputs[i]}, {"format", std::string(format_name(formats[i]))},
                               {"dtype", std::string(dtype_name(gradient.dtype()))}});
        }
    }
    } catch (...) {
        // Each write is atomic; a failure of a later output also takes back the earlier ones, so
        // a failed run leaves no partial set of outputs.
        remove_outputs(std::vector<std::string>(outputs.begin(), outputs.begin() + std::ptrdiff_t(done)));
        throw;
    }
    const double write_ms = elapsed_ms(t0);
    nlohmann::json j = summary("rcmg", ctx);
    j["input"] = {{"path", input}, {"shape", shape_json(cube.shape())}};
    j["parameters"] = {{"connectivity", options.connectivity}, {"reject", options.reject},
                       {"precision", std::string(precision_name(options.precision))},
                       {"out_type", std::string(dtype_name(options.out_type))}, {"squared", options.squared},
                       {"partition", std::string(partition_name(options.partition))}};
    j["implementation"] = std::string(rcmg_implementation(ctx, options));
    j["timings_ms"] = {{"rcmg", compute_ms}, {"write", write_ms}};
    j["outputs"] = written;
    j["gradient"] = {{"width", gradient.width()}, {"height", gradient.height()}, {"max", mx},
                     {"mean", finite ? sum / double(finite) : 0.0},
                     {"non_finite", gradient.num_elements() - finite}};
    return j;
}

Action add_rcmg(CLI::App& root) {
    struct Args {
        CommonOptions common;
        std::string input;
        std::vector<std::string> outputs;
        int connectivity = 8, reject = 1;
        std::string precision = "f64", out_type = "f32", partition = "auto";
        bool squared = false;
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
        "  cubekit rcmg scene.mat g.hdr --var data --connectivity 4 --precision f32 --json");
    app->add_option("IN", args->input, "input cube (any format cubekit reads)")->required();
    app->add_option("OUT", args->outputs, "one or more outputs: .npy, .hdr/.img (ENVI), .png")->required();
    app->add_option("--connectivity", args->connectivity, "window: 8 (3x3 square) or 4 (cross)")
        ->check(CLI::IsMember({4, 8}))->capture_default_str();
    app->add_option("--reject", args->reject, "pairs rejected, r (0 = CMG; up to 1 for 4-, 3 for 8-connectivity)")
        ->capture_default_str();
    app->add_option("--precision", args->precision, "accumulation precision: f64 or f32")
        ->check(CLI::IsMember({"f32", "f64"}))->capture_default_str();
    app->add_option("--out-type", args->out_type, "output element type: f32 or f64 (f64 needs --precision f64)")
        ->check(CLI::IsMember({"f32", "f64"}))->capture_default_str();
    app->add_option("--partition", args->partition, "CUDA work partitioning: auto, spatial or spectral")
        ->check(CLI::IsMember({"auto", "spatial", "spectral"}))->capture_default_str();
    app->add_flag("--squared", args->squared, "output squared distances (no square root)");
    add_common_flags(*app, args->common);
    return [args] {
        const CommonOptions& common = args->common;
        const RcmgOptions options{.connectivity = args->connectivity, .reject = args->reject,
                                  .precision = parse_precision(args->precision), .out_type = parse_dtype(args->out_type, "--out-type"),
                                  .squared = args->squared, .partition = parse_partition(args->partition)};
        for (const std::string& out : args->outputs) output_format(out);  // a bad OUT fails before any work
        Context ctx = make_context(common, "rcmg");
        const auto t0 = std::chrono::steady_clock::now();
        const Cube cube = read_input(args->input, common);
        const double read_ms = elapsed_ms(t0);
        nlohmann::json j = run_rcmg(ctx, args->input, cube, options, args->outputs);
        j["timings_ms"]["read"] = read_ms;
        say(common, "rcmg: " + args->input + " (" + cube.shape().describe() + ") on " + ctx.device_name() + " [" +
                        j["implementation"].get<std::string>() + "], " + std::to_string(args->connectivity) +
                        "-connectivity, reject " + std::to_string(args->reject) + ", max gradient " +
                        std::to_string(j["gradient"]["max"].get<double>()));
        for (const auto& o : j["outputs"]) say(common, "  wrote " + o["path"].get<std::string>());
        emit_json(common, j);
    };
}

}  // namespace cubekit::cli
