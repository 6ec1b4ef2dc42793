// The tile options of the Python functions (tiles.hpp).
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "cubekit/error.hpp"

namespace cubekit::python {

namespace {

std::size_t bytes_of(py::handle value, const char* key) {
    if (py::isinstance<py::str>(value)) return parse_bytes(value.cast<std::string>(), key);
    const long long v = value.cast<long long>();
    if (v <= 0) throw InvalidInput(std::string(key) + " = " + std::to_string(v) + "; expected a positive byte count or None");
    return std::size_t(v);
}

}  // namespace

TileOptions tile_options_from(const py::dict& tiles) {
    TileOptions t;
    for (const auto& [k, v] : tiles) {
        const std::string key = k.cast<std::string>();
        if (v.is_none()) continue;
        if (key == "memory_limit") t.memory_limit = bytes_of(v, "memory_limit");
        else if (key == "device_memory_limit") t.device_memory_limit = bytes_of(v, "device_memory_limit");
        else if (key == "devices") t.devices = v.cast<std::vector<int>>();
        else if (key == "lanes") t.lanes = v.cast<int>();
        else if (key == "tile_size") {
            const auto [w, h] = v.cast<std::pair<int, int>>();
            if (w < 1 || h < 1)
                throw InvalidInput("tile_size = (" + std::to_string(w) + ", " + std::to_string(h) + "); expected (width, height) >= 1");
            t.tile_width = w, t.tile_height = h;
        } else {
            throw InvalidInput("unknown tile option '" + key + "' (memory_limit, device_memory_limit, devices, tile_size, lanes)");
        }
    }
    for (int d : t.devices)
        if (d < 0 || d >= Context::cuda_device_count())
            throw DeviceError("devices: device " + std::to_string(d) + " is not available (" +
                              std::to_string(Context::cuda_device_count()) + " visible)");
    return t;
}

TiledInput tiled_input(py::handle cube, const char* function) {
    TiledInput in;
    if (py::isinstance<py::str>(cube) || py::hasattr(cube, "__fspath__"))
        in.file.emplace(py::str(py::module_::import("os").attr("fspath")(cube)).cast<std::string>());
    else
        in.array.emplace(array_view(cube, function, "cube"));
    return in;
}

py::dict tiled_dict(const TiledRun& run) {
    py::dict d;
    d["tiles"] = run.tiles;
    d["tile_width"] = run.tile_width;
    d["tile_height"] = run.tile_height;
    d["peak_bytes"] = run.peak_bytes;
    d["device_peak_bytes"] = run.device_peak_bytes;
    d["devices"] = run.devices;
    d["direct_input"] = run.direct_input;
    d["direct_output"] = run.direct_output;
    return d;
}

}  // namespace cubekit::python
