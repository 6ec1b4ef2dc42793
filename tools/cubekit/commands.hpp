#pragma once
// Each subcommand adds itself to the root app and returns the work to run once parsing succeeded.
#include <CLI/CLI.hpp>

#include <functional>

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

}  // namespace cubekit::cli
