#pragma once
// The work of `cubekit rcmg`, shared with `cubekit demo`.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/gradient.hpp"
#include "cubekit/io.hpp"

namespace cubekit::cli {

/// Computes the RCMG of `cube` and writes it to each of `outputs`: .png gets the display scaling
/// (v ↦ round(255·min(v, p99)/p99), p99 = the 99th percentile of the finite gradient values), anything else the float
/// gradient (.npy (H, W) or ENVI); `write` (--png-compression) goes to every write. Returns the JSON
/// summary (parameters, timings, outputs, stats). With `tiles` (or on a CUDA context for an input of
/// kStreamedMinBytes or more) the gradient is computed by rcmg_tiled and the summary has "tiled".
nlohmann::json run_rcmg(const Context& ctx, const std::string& input, const Cube& cube, const RcmgOptions& options,
                        const std::vector<std::string>& outputs, const WriteOptions& write,
                        const std::optional<TileOptions>& tiles = std::nullopt);
/// The same from a file read by windows (always tiled): `cubekit rcmg` on a large ENVI or .npy file.
nlohmann::json run_rcmg(const Context& ctx, const std::string& input, const CubeFile& file, const RcmgOptions& options,
                        const std::vector<std::string>& outputs, const WriteOptions& write, const TileOptions& tiles);

}  // namespace cubekit::cli
