// cubekit edges-score: a predicted edge map against a reference map (spec edges.md §6): Pratt's
// figure of merit, and precision, recall and F with a pixel tolerance.
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "cubekit/edge_baselines.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "timings.hpp"

namespace cubekit::cli {

namespace {

std::string size_text(const Cube& c) { return std::to_string(c.width()) + "x" + std::to_string(c.height()); }

Cube read_map(const std::string& role, const std::string& path) {
    Cube map = read_cube(path);
    if (map.bands() != 1)
        throw InvalidInput("edges-score: " + role + " " + path + " has " + std::to_string(map.bands()) +
                           " bands; expected a one-band map (grey PNG or (H, W) .npy; nonzero = edge)");
    return map;
}

}  // namespace

Action add_edges_score(CLI::App& root) {
    struct Args {
        std::string predicted, reference;
        double tolerance = 1.0;
        bool json = true;
    };
    auto args = std::make_shared<Args>();
    CLI::App* app = root.add_subcommand("edges-score", "Score an edge map against a reference: Pratt's FOM, precision, recall, F");
    app->footer(
        "PRED and REF are one-band maps of the same size (grey PNG or (H, W) .npy); nonzero = edge.\n"
        "d = the Euclidean distance to the nearest edge pixel of the other map (exact).\n"
        "  fom       = sum over predicted pixels of 1/(1 + d^2/9), divided by max(#predicted, #reference)\n"
        "  precision = fraction of predicted pixels with d <= tolerance; recall likewise from REF\n"
        "  f         = 2PR/(P+R) (0 when P+R = 0)\n"
        "Both maps empty: every score 1; only one empty: every score 0.\n"
        "Prints {\"fom\", \"precision\", \"recall\", \"f\", \"predicted\", \"reference\", \"tolerance\", \"timings_ms\"}\n"
        "as JSON (timings_ms: startup, read, score, total in ms).\n"
        "Example:\n"
        "  cubekit edges-score canny.png reference.png --tolerance 2");
    app->add_option("PRED", args->predicted, "predicted edge map")->required();
    app->add_option("REF", args->reference, "reference edge map")->required();
    app->add_option("--tolerance", args->tolerance, "matching distance in pixels, >= 0")->capture_default_str();
    app->add_flag("--json", args->json, "accepted for symmetry with other subcommands; the output is always JSON");
    return [args] {
        if (!(args->tolerance >= 0) || args->tolerance > 1e12)
            throw InvalidInput("--tolerance = " + nlohmann::json(args->tolerance).dump() + "; expected pixels >= 0");
        Timings timings;
        const Cube predicted = timings.time("read", [&] { return read_map("PRED", args->predicted); });
        const Cube reference = timings.time("read", [&] { return read_map("REF", args->reference); });
        if (predicted.width() != reference.width() || predicted.height() != reference.height())
            throw InvalidInput("edges-score: PRED " + args->predicted + " is " + size_text(predicted) + " and REF " +
                               args->reference + " is " + size_text(reference) + "; the maps must have the same size");
        const EdgeScore s = timings.time("score", [&] { return score_edges(predicted, reference, args->tolerance); });
        nlohmann::ordered_json j;
        j["fom"] = s.fom;
        j["precision"] = s.precision;
        j["recall"] = s.recall;
        j["f"] = s.f;
        j["predicted"] = s.predicted;
        j["reference"] = s.reference;
        j["tolerance"] = args->tolerance;
        j["timings_ms"] = nlohmann::ordered_json::object();
        const nlohmann::json steps = timings.json();
        for (auto it = steps.begin(); it != steps.end(); ++it) j["timings_ms"][it.key()] = it.value();
        std::cout << j.dump(2) << std::endl;
    };
}

}  // namespace cubekit::cli
