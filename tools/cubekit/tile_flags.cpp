// The flags of the tiled path (tile_flags.hpp).
#include "tile_flags.hpp"

#include <charconv>

#include "arg_parsers.hpp"
#include "cubekit/error.hpp"

namespace cubekit::cli {

void add_tile_flags(CLI::App& app, TileFlags& flags) {
    app.add_option("--memory-limit", flags.memory_limit,
                   "host working-memory budget (bytes; K, M, G suffixes): the scene runs in tiles that fit it");
    app.add_option("--device-memory-limit", flags.device_memory_limit,
                   "device-memory budget per GPU (bytes; K, M, G): forces tiles (default: the free memory)");
    app.add_option("--devices", flags.devices, "CUDA devices to deal the tiles to: 0,1 or all (implies --backend cuda)");
    app.add_option("--tile-size", flags.tile_size, "force tiles of WIDTHxHEIGHT pixels (testing; the budgets choose otherwise)");
}

TileOptions tile_options(const TileFlags& flags) {
    TileOptions o;
    const auto positive = [](const std::string& text, const char* flag) {
        const std::size_t v = parse_bytes(text, flag);
        if (v == 0) throw InvalidInput(std::string(flag) + " = 0; expected a positive byte count (leave the flag out for no limit)");
        return v;
    };
    if (!flags.memory_limit.empty()) o.memory_limit = positive(flags.memory_limit, "--memory-limit");
    if (!flags.device_memory_limit.empty()) o.device_memory_limit = positive(flags.device_memory_limit, "--device-memory-limit");
    if (!flags.devices.empty() && flags.devices != "all") o.devices = parse_devices(flags.devices, "--devices");
    if (!flags.tile_size.empty()) std::tie(o.tile_width, o.tile_height) = parse_width_height(flags.tile_size, "--tile-size", "512x256");
    return o;
}

std::optional<TileOptions> asked_tile_options(const TileFlags& flags, CommonOptions& common) {
    if (!flags.given()) return std::nullopt;
    if (!flags.devices.empty() && common.context.backend == Backend::Auto) common.context.backend = Backend::Cuda;
    return tile_options(flags);
}

void check_tile_devices(const TileFlags& flags, TileOptions& options, const Context& ctx) {
    if (flags.devices.empty()) return;
    if (!ctx.is_cuda()) throw InvalidInput("--devices " + flags.devices + ": the backend is the CPU");
    if (flags.devices == "all") options.devices = parse_devices("all", "--devices");
    for (int d : options.devices)
        if (d >= Context::cuda_device_count())
            throw DeviceError("--devices " + flags.devices + ": device " + std::to_string(d) + " is not available (" +
                              std::to_string(Context::cuda_device_count()) + " visible)");
}

namespace {
// ENVI, .npy and GDAL rasters (GeoTIFF) are read by windows (CubeFile); other formats whole.
bool windowed_format(const std::string& path) {
    try {
        const FileFormat f = detect_format(path);
        return f == FileFormat::Envi || f == FileFormat::Npy || f == FileFormat::Gdal;
    } catch (const Error&) {
        return false;  // the whole read names the problem
    }
}
}  // namespace

std::optional<CubeFile> open_windowed(const std::string& path, const CommonOptions& common, bool tiles_asked,
                                      Timings& timings) {
    std::optional<CubeFile> file;
    if (!common.bands.empty() || !windowed_format(path)) return file;
    file.emplace(timings.time("read", [&] { return CubeFile(path, common.read); }));
    say_read_warnings(common, file->metadata());
    // A Fortran-order .npy is not windowed: read whole, as a small scene is. Large: the data, not the
    // path (an ENVI header is a few hundred bytes beside gigabytes).
    if (!file->windowed() || (!tiles_asked && file->shape().num_bytes() < kStreamedMinBytes)) file.reset();
    return file;
}

nlohmann::json tiled_json(const TiledRun& run) {
    return {{"tiles", run.tiles}, {"tile_width", run.tile_width}, {"tile_height", run.tile_height},
            {"peak_bytes", run.peak_bytes}, {"device_peak_bytes", run.device_peak_bytes}, {"devices", run.devices},
            {"direct_input", run.direct_input}, {"direct_output", run.direct_output}};
}

}  // namespace cubekit::cli
