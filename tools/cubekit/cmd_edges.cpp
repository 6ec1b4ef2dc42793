// placeholder: filled in by the edges issue (5)
#include "commands.hpp"
namespace cubekit::cli {
Action add_edges(CLI::App& root) {
    root.add_subcommand("edges", "(not built yet)");
    return [] {};
}
}  // namespace cubekit::cli
