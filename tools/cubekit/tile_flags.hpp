#pragma once
// The flags of the tiled path (issue 17): --memory-limit, --device-memory-limit, --devices, --tile-size.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string>

#include "cli_common.hpp"
#include "cubekit/context.hpp"
#include "cubekit/io.hpp"
#include "cubekit/tiles.hpp"
#include "timings.hpp"

namespace cubekit::cli {

struct TileFlags {
    std::string memory_limit, device_memory_limit, devices, tile_size;
    bool given() const { return !memory_limit.empty() || !device_memory_limit.empty() || !devices.empty() || !tile_size.empty(); }
};

/// Adds the four flags to a subcommand whose family has a tiled path.
void add_tile_flags(CLI::App& app, TileFlags& flags);
/// The options the flags ask for; every error names its flag (exit 2). Call it before reading the input.
TileOptions tile_options(const TileFlags& flags);
/// The tile options when a tile flag was given (none otherwise), parsed before the input is read (a
/// bad flag exits 2 before any work); --devices sets an automatic backend to CUDA.
std::optional<TileOptions> asked_tile_options(const TileFlags& flags, CommonOptions& common);
/// Throws when --devices was given to a CPU context or names a device that does not exist (exit 4).
/// Resolves --devices all.
void check_tile_devices(const TileFlags& flags, TileOptions& options, const Context& ctx);
/// A host input of this many bytes goes through the streamed tiles on a GPU even without a budget: its
/// upload overlaps the kernels and the download (bench/tiles_bench.cpp).
inline constexpr std::size_t kStreamedMinBytes = std::size_t(64) << 20;
/// Whether a command takes its tiled path: tile flags given, or a GPU context and a large host input.
inline bool use_tiles(const std::optional<TileOptions>& tiles, const Context& ctx, std::size_t input_bytes) {
    return tiles.has_value() || (ctx.is_cuda() && input_bytes >= kStreamedMinBytes);
}
/// IN opened to be read by windows (its header alone read now, timed as "read"), when a tiled run will
/// read it so: a windowed format (ENVI, C-order .npy, GDAL rasters), no --bands, and tiles asked for or
/// an input of kStreamedMinBytes or more. Otherwise nothing: the command reads IN whole.
std::optional<CubeFile> open_windowed(const std::string& path, const CommonOptions& common, bool tiles_asked,
                                      Timings& timings);

/// {"tiles", "tile_width", "tile_height", "peak_bytes", "device_peak_bytes", "devices"} for --json.
nlohmann::json tiled_json(const TiledRun& run);

}  // namespace cubekit::cli
