// cubekit train rbfn|multires: trains a detection model from labelled cubes (spec detect.md §A.4,
// §B.4) and writes its JSON model file atomically.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/detect_train.hpp"
#include "cubekit/error.hpp"
#include "option_flags.hpp"
#include "outputs.hpp"

namespace cubekit::cli {

namespace {

struct TrainArgs {
    CommonOptions common;
    std::vector<std::string> inputs, labels;
    std::string output;
};

/// A one-band label image of `cube`'s size as u8 (values 0, 1, 255 only).
Cube read_labels(const std::string& spec, const Cube& cube) {
    const Cube raw = read_secondary(spec, "--labels");
    if (raw.bands() != 1 || raw.width() != cube.width() || raw.height() != cube.height())
        throw InvalidInput("--labels " + spec + " is " + raw.shape().describe() + "; expected " + std::to_string(cube.width()) + "x" +
                           std::to_string(cube.height()) + "x1, the size of its input");
    Cube out(raw.width(), raw.height(), 1, DType::U8);
    for (int y = 0; y < raw.height(); ++y)
        for (int x = 0; x < raw.width(); ++x) {
            const double v = raw.value(x, y, 0);
            if (v != 0 && v != 1 && v != 255)
                throw InvalidInput("--labels " + spec + ": value " + number_text(v) + " at (" + std::to_string(x) + ", " +
                                   std::to_string(y) + "); expected 1 target, 0 background or 255 ignore");
            out.at<std::uint8_t>(x, y, 0) = std::uint8_t(v);
        }
    return out;
}

std::string fixed4(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", v);
    return buf;
}

/// Adds IN..., --labels, -o and the common flags to a `train` subcommand.
void add_data_flags(CLI::App& app, TrainArgs& args) {
    input_file(app.add_option("IN", args.inputs, "training cubes (any format cubekit reads; --var names their MATLAB variable)"))->required();
    input_file(app.add_option("--labels", args.labels,
                   "one label image per IN, W x H: 1 target, 0 background, 255 ignore; FILE:VAR for a MATLAB variable"))
        ->required();
    app.add_option("-o,--output", args.output, "model file to write (JSON)")->required();
    add_common_flags(app, args.common);
}

struct TrainingData {
    std::vector<Cube> cubes, labels;
    std::vector<LabelledCube> views;
    nlohmann::json json = nlohmann::json::array();
};

TrainingData read_data(const TrainArgs& args) {
    if (args.labels.size() != args.inputs.size())
        throw InvalidInput("--labels: " + std::to_string(args.labels.size()) + " label images for " + std::to_string(args.inputs.size()) +
                           " inputs; give one per IN, in the same order");
    TrainingData d;
    for (std::size_t i = 0; i < args.inputs.size(); ++i) {
        d.cubes.push_back(read_input(args.inputs[i], args.common).cube);
        d.labels.push_back(read_labels(args.labels[i], d.cubes.back()));
        d.json.push_back({{"path", args.inputs[i]}, {"labels", args.labels[i]}, {"shape", shape_json(d.cubes.back().shape())}});
    }
    for (std::size_t i = 0; i < d.cubes.size(); ++i) d.views.push_back({d.cubes[i], d.labels[i]});
    return d;
}

/// Training runs on the CPU: auto means the CPU here (an explicit --backend cuda is honoured).
Context training_context(const CommonOptions& common, const std::string& task) {
    CommonOptions c = common;
    if (c.context.backend == Backend::Auto && c.context.device < 0) c.context.backend = Backend::Cpu;
    return make_context(c, task);
}

/// Trains with `train(ctx, views, report)`, writes the model, prints the summary.
template <class Options, class Train>
void run_training(const std::string& kind, const TrainArgs& args, const Options& options, Train&& train) {
    Timings timings;
    const std::string command = "train " + kind;
    check_output_folder(args.output);  // before the training, which can take minutes
    const TrainingData data = timings.time("read", [&] { return read_data(args); });
    const Context ctx = timings.time("context", [&] { return training_context(args.common, command); });
    TrainReport report;
    const auto model = timings.time("train", [&] { return train(ctx, data.views, report); });
    timings.time("write", [&] { write_model(model, args.output); });

    nlohmann::json j = summary(command, ctx);
    j["inputs"] = data.json;
    j["parameters"] = parameters_json(options);
    j["report"] = nlohmann::json::parse(to_json(report));
    j["output"] = {{"path", args.output}, {"type", kind}};
    for (const NetworkReport& n : report.networks) {
        const SplitReport& last = n.splits.back();
        say(args.common, command + ": " + n.name + " trained on " + std::to_string(n.splits[0].targets) + " target and " +
                             std::to_string(n.splits[0].background) + " background samples; " + last.name +
                             " AUC " + (std::isfinite(last.auc) ? fixed4(last.auc) : std::string("n/a")) + ", threshold " +
                             number_text(n.threshold));
    }
    say(args.common, "  wrote " + args.output);
    emit_json(args.common, j, timings);
}

CLI::App* add_rbfn(CLI::App& train, NestedActions& actions) {
    struct Args : TrainArgs {
        RbfnTrainOptions options;
    };
    auto args = std::make_shared<Args>();
    CLI::App* app = train.add_subcommand("rbfn", "Train a pixel-level RBF network (spec detect.md A.4)");
    app->footer(
        "Finite target (1) and background (0) pixels, at most --max-per-class of each, 15 % of each held out;\n"
        "k-means centres on the targets (--target-centres, auto: min(ceil(k/2), targets/4)) and the rest on the background; widths = RMS radius;\n"
        "output weights and bias by balanced ridge least squares; theta 0.5 or --auto-threshold (best F1).\n"
        "Background pixels should include distractors, or the network learns 'anything unlike the background'.\n"
        "The same inputs and --seed give a bit-identical model file.\n"
        "Example:\n"
        "  cubekit train rbfn Sandiego.mat --var data --labels Sandiego.mat:map -o planes.json --seed 1 --json\n"
        "  cubekit detect rbfn Sandiego.mat scores.npy --var data --model planes.json");
    add_data_flags(*app, *args);
    bind_flags(*app, args->options);
    app->add_option("--target-name", args->options.target_name, "the model's target_name");
    actions[app] = [args] {
        run_training("rbfn", *args, args->options, [&](const Context& ctx, std::span<const LabelledCube> data, TrainReport& r) {
            return train_rbfn(ctx, data, args->options, &r);
        });
    };
    return app;
}

CLI::App* add_multires(CLI::App& train, NestedActions& actions) {
    struct Args : TrainArgs {
        MultiresTrainOptions options;
    };
    auto args = std::make_shared<Args>();
    CLI::App* app = train.add_subcommand("multires", "Train the multi-resolution detector's ANN-1 and ANN-2 (spec detect.md B.4)");
    app->footer(
        "Windows: every quad-tree node of every level (and the half-window shifted grids), feature = per-band\n"
        "standard deviation. ANN-1 learns 'holds >= --min-target-px target pixels'; ANN-2 learns 'target fill\n"
        ">= --rho' on ANN-1-positive windows. Windows with ignore (255) pixels are left out. Each network:\n"
        "at most --max-windows windows, class weights, a 70/15/15 split, Nguyen-Widrow initialisation,\n"
        "Levenberg-Marquardt (MATLAB trainlm defaults) with early stopping. The report's end_to_end runs the\n"
        "detector on every training cube. The same inputs and --seed give a bit-identical model file.\n"
        "Example:\n"
        "  cubekit train multires HYDICE.mat --var data --labels HYDICE.mat:map -o vehicles.json --json\n"
        "  cubekit detect multires HYDICE.mat boxes.png --var data --model vehicles.json");
    add_data_flags(*app, *args);
    bind_flags(*app, args->options);
    actions[app] = [args] {
        run_training("multires", *args, args->options, [&](const Context& ctx, std::span<const LabelledCube> data, TrainReport& r) {
            return train_multires(ctx, data, args->options, &r);
        });
    };
    return app;
}

}  // namespace

Action add_train(CLI::App& root) {
    CLI::App* app = root.add_subcommand("train", "Train a detection model from labelled cubes: rbfn or multires");
    app->require_subcommand(1);
    app->footer(
        "Models (cubekit train MODEL --help for each):\n"
        "  rbfn      pixel-level RBF network, for cubekit detect rbfn\n"
        "  multires  the quad-tree search's two feed-forward networks, for cubekit detect multires\n"
        "Labels: one image per input, 1 target, 0 background, 255 ignore; FILE:VAR names a MATLAB variable.\n"
        "Example:\n"
        "  cubekit train rbfn scene1.npy scene2.npy --labels mask1.png mask2.png -o model.json --seed 3");
    auto actions = std::make_shared<NestedActions>();
    add_rbfn(*app, *actions);
    add_multires(*app, *actions);
    return [app, actions] {
        for (CLI::App* sub : app->get_subcommands()) actions->at(sub)();
    };
}

}  // namespace cubekit::cli
