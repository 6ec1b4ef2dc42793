// placeholder: filled in by the edges issue (5)
#include "commands.hpp"
namespace cubekit::cli {
Action add_edges_baseline(CLI::App& root) {
    root.add_subcommand("edges-baseline", "(not built yet)");
    return [] {};
}
}  // namespace cubekit::cli
