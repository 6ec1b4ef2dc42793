#pragma once
// Each subcommand adds itself to the root app and returns the work to run once parsing succeeded.
#include <CLI/CLI.hpp>

#include <functional>
#include <map>

namespace cubekit::cli {

using Action = std::function<void()>;

Action add_info(CLI::App& root);
Action add_convert(CLI::App& root);
Action add_rcmg(CLI::App& root);
Action add_quantize(CLI::App& root);
Action add_cluster(CLI::App& root);
Action add_demo(CLI::App& root);
Action add_edges(CLI::App& root);
Action add_edges_baseline(CLI::App& root);
Action add_edges_score(CLI::App& root);
Action add_pca(CLI::App& root);
Action add_zernike(CLI::App& root);
Action add_zernike_reconstruct(CLI::App& root);
Action add_detect(CLI::App& root);        // cmd_detect.cpp: `cubekit detect DETECTOR ...`
Action add_detect_score(CLI::App& root);  // cmd_detect_score.cpp: ROC/AUC of a score map against a mask
Action add_train(CLI::App& root);         // cmd_train.cpp: `cubekit train rbfn|multires ...`
Action add_synth(CLI::App& root);         // cmd_synth.cpp: `cubekit synth castaways|leaves OUT`
Action add_classify(CLI::App& root);      // cmd_classify.cpp: pixel-wise classes + majority vote in watershed regions
Action add_watershed(CLI::App& root);     // cmd_watershed.cpp: the watershed of a relief
Action add_segment(CLI::App& root);       // cmd_watershed.cpp: RCMG -> watershed of a cube
Action add_batch(CLI::App& root);         // cmd_batch.cpp: one subcommand over many scenes, on every GPU

/// Thrown by `batch` when a scene failed (its message is in the batch's output already): main exits
/// with `code`, the first failed scene's exit code.
struct BatchFailed {
    int code;
};

/// The detectors of `cubekit detect`: each adds its nested subcommand to `detect` and its work to `actions`.
using NestedActions = std::map<CLI::App*, Action>;
void add_detect_networks(CLI::App& detect, NestedActions& actions);   // cmd_detect_network.cpp: rbfn, multires
void add_detect_classical(CLI::App& detect, NestedActions& actions);  // cmd_detect_classical.cpp: rx, mf, ace, cem, sam

}  // namespace cubekit::cli
