// placeholder: filled in by the edges issue (5)
#include "commands.hpp"
namespace cubekit::cli {
Action add_pca(CLI::App& root) {
    root.add_subcommand("pca", "(not built yet)");
    return [] {};
}
}  // namespace cubekit::cli
