// cubekit zernike / zernike-reconstruct (placeholder until the commands land).
#include "commands.hpp"

namespace cubekit::cli {

Action add_zernike(CLI::App& root) {
    root.add_subcommand("zernike", "Zernike moments (not yet available)");
    return [] {};
}

Action add_zernike_reconstruct(CLI::App& root) {
    root.add_subcommand("zernike-reconstruct", "Image from Zernike moments (not yet available)");
    return [] {};
}

}  // namespace cubekit::cli
