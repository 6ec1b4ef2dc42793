// cubekit detect: target detection (spec detect.md). The detectors are nested subcommands,
// each defined with its family: the networks (cmd_detect_network.cpp) and the classical
// detectors (cmd_detect_classical.cpp).
#include <memory>

#include "commands.hpp"

namespace cubekit::cli {

Action add_detect(CLI::App& root) {
    CLI::App* app = root.add_subcommand("detect", "Target detection: RBF network, multi-resolution networks, RX, MF, ACE, CEM, SAM");
    app->require_subcommand(1);
    app->footer(
        "Detectors (cubekit detect DETECTOR --help for each):\n"
        "  rbfn      pixel-level RBF network (--model M.json)\n"
        "  multires  quad-tree search with two feed-forward networks (--model M.json)\n"
        "  rx        anomaly detector, global or two-window local (--window INNER,OUTER)\n"
        "  mf, ace, cem, sam   target detectors (--target FILE or --target-mask MASK)\n"
        "Examples:\n"
        "  cubekit synth castaways scene.npy --seed 1\n"
        "  cubekit detect rx scene.mat:data rx.npy --var data --json");
    auto actions = std::make_shared<NestedActions>();
    add_detect_networks(*app, *actions);
    add_detect_classical(*app, *actions);
    return [app, actions] {
        for (CLI::App* sub : app->get_subcommands()) actions->at(sub)();
    };
}

}  // namespace cubekit::cli
