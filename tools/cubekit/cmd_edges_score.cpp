// placeholder: filled in by the edges issue (5)
#include "commands.hpp"
namespace cubekit::cli {
Action add_edges_score(CLI::App& root) {
    root.add_subcommand("edges-score", "(not built yet)");
    return [] {};
}
}  // namespace cubekit::cli
