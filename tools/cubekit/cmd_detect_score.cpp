// cubekit detect-score SCORES MASK [--far 0.01]: ROC AUC and per-blob detection of a score map
// against a target mask (detect_classical.hpp, score_detection). Prints one JSON object.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/detect_classical.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "outputs.hpp"

namespace cubekit::cli {
namespace {

struct ScoreArgs {
    CommonOptions common;
    std::string scores, mask, roc_out;
    double far = 0.01;
};

nlohmann::ordered_json result_json(const DetectionScore& r) {
    nlohmann::ordered_json j;
    j["auc"] = r.auc;
    j["blobs"] = r.blobs.size();
    j["blobs_found"] = r.blobs_found;
    j["far"] = r.far;
    j["far_requested"] = r.far_requested;
    j["threshold"] = r.threshold;
    j["pd"] = r.pd;
    j["target_pixels"] = r.targets;
    j["background_pixels"] = r.background;
    j["nan_scores"] = r.nan_scores;
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const BlobDetection& b : r.blobs) {
        nlohmann::ordered_json e;
        e["label"] = b.label;
        e["area"] = b.area;
        e["box"] = std::vector<int>{b.x0, b.y0, b.x1, b.y1};
        e["peak"] = b.peak;
        e["found"] = b.found;
        list.push_back(std::move(e));
    }
    j["blob_list"] = list;
    return j;
}

void score_command(const ScoreArgs& a) {
    if (!a.roc_out.empty() && std::filesystem::path(a.roc_out).extension() != ".csv")
        throw InvalidInput("--roc-out = " + a.roc_out + ": use .csv");
    check_output_folder(a.roc_out);
    Timings timings;
    CommonOptions common = a.common;
    if (common.context.backend == Backend::Auto) common.context.backend = Backend::Cpu;  // host work
    const Context ctx = timings.time("context", [&] { return make_context(common, "detect-score"); });
    const Cube scores = timings.time("read", [&] { return read_input(a.scores, common).cube; });
    const Cube mask = timings.time("read", [&] { return read_secondary(a.mask, "MASK"); });
    const DetectionScore r = timings.time("score", [&] { return score_detection(ctx, scores, mask, a.far); });
    if (!a.roc_out.empty()) {
        std::string csv = "threshold,far,pd\n";
        for (const RocPoint& p : r.roc) csv += number_text(p.threshold) + "," + number_text(p.far) + "," + number_text(p.pd) + "\n";
        write_text_file(a.roc_out, csv);
    }
    say(common, "detect-score: AUC " + std::to_string(r.auc) + ", " + std::to_string(r.blobs_found) + " of " +
                    std::to_string(r.blobs.size()) + " blobs found at a false-alarm rate of " + std::to_string(r.far));
    if (!common.json) {
        std::cout << result_json(r).dump() << "\n";
        return;
    }
    nlohmann::json j = summary("detect-score", ctx);
    const nlohmann::ordered_json result = result_json(r);
    for (const auto& item : result.items()) j[item.key()] = item.value();
    j["input"] = {{"scores", a.scores}, {"mask", a.mask}};
    if (!a.roc_out.empty()) j["outputs"] = {{{"role", "roc"}, {"path", a.roc_out}, {"format", "csv"}}};
    emit_json(common, j, timings);
}

}  // namespace

Action add_detect_score(CLI::App& root) {
    auto args = std::make_shared<ScoreArgs>();
    CLI::App* app = root.add_subcommand("detect-score", "ROC AUC and per-blob detection of a score map against a target mask");
    app->footer(
        "AUC: the Mann-Whitney statistic (ties count one half; NaN scores are the lowest). At --far f the threshold\n"
        "is the (floor(f*F)+1)-th highest background score, detected = score > threshold; a blob (8-connected\n"
        "component of the mask) is found when one of its pixels is detected. Prints\n"
        "{\"auc\", \"blobs\", \"blobs_found\", \"far\", \"far_requested\", \"threshold\", \"pd\", ..., \"blob_list\"}.\n"
        "Examples:\n"
        "  cubekit detect-score rx.npy abu-airport-1.mat:map\n"
        "  cubekit detect-score mf.npy Sandiego.mat:map --far 0.001 --roc-out roc.csv");
    input_file(app->add_option("SCORES", args->scores, "score map (one band; --var names its MATLAB variable)"))->required();
    input_file(app->add_option("MASK", args->mask, "target mask, nonzero = target (FILE or FILE.mat:VAR)"))->required();
    app->add_option("--far", args->far, "false-alarm rate for the per-blob detection")
        ->default_val(0.01)
        ->check(CLI::Range(0.0, 1.0));
    app->add_option("--roc-out", args->roc_out, "write the ROC curve as CSV (threshold,far,pd)");
    add_common_flags(*app, args->common);
    return [args] { score_command(*args); };
}

}  // namespace cubekit::cli
