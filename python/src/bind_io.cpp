// Reading and writing files (cubekit/io.hpp) with their metadata.
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "bindings.hpp"
#include "cubekit/io.hpp"

namespace cubekit::python {

namespace {

py::dict metadata_dict(const Metadata& m) {
    py::dict d;
    d["wavelengths"] = m.wavelengths;
    d["wavelength_units"] = m.wavelength_units;
    d["band_names"] = m.band_names;
    d["map_info"] = m.map_info;
    d["coordinate_system"] = m.coordinate_system;
    d["description"] = m.description;
    d["extra"] = m.extra;
    d["warnings"] = m.warnings;
    return d;
}

// The keys of metadata_dict; unknown keys raise ValueError (a typo would otherwise be lost).
Metadata metadata_from(const py::dict& d, int bands) {
    Metadata m;
    for (const auto& item : d) {
        const std::string key = py::str(item.first);
        const py::handle v = item.second;
        if (v.is_none()) continue;
        if (key == "wavelengths") m.wavelengths = v.cast<std::vector<double>>();
        else if (key == "wavelength_units") m.wavelength_units = v.cast<std::string>();
        else if (key == "band_names") m.band_names = v.cast<std::vector<std::string>>();
        else if (key == "map_info") m.map_info = v.cast<std::string>();
        else if (key == "coordinate_system") m.coordinate_system = v.cast<std::string>();
        else if (key == "description") m.description = v.cast<std::string>();
        else if (key == "extra") m.extra = v.cast<std::map<std::string, std::string>>();
        else
            throw InvalidInput("write: metadata key '" + key +
                               "'; expected wavelengths, wavelength_units, band_names, map_info, coordinate_system, "
                               "description or extra");
    }
    if (!m.wavelengths.empty() && int(m.wavelengths.size()) != bands)
        throw InvalidInput("write: metadata has " + std::to_string(m.wavelengths.size()) + " wavelengths for " +
                           std::to_string(bands) + " bands");
    if (!m.band_names.empty() && int(m.band_names.size()) != bands)
        throw InvalidInput("write: metadata has " + std::to_string(m.band_names.size()) + " band names for " +
                           std::to_string(bands) + " bands");
    return m;
}

}  // namespace

void bind_io(py::module_& m) {
    // read(path, keywords, format) -> (array, metadata dict, format name); keywords: the declared
    // ReadOptions fields (var). The array shares the cube's memory: (H, W[, B]) with the strides of
    // the stored interleave (BSQ files give band-major strides).
    m.def("read", [](const std::filesystem::path& path, const py::dict& keywords, const std::string& format) {
        ReadOptions o = options_from<ReadOptions>(keywords, "read");
        o.format = parse_format(format, "format");
        const FileFormat used = o.format == FileFormat::Auto ? detect_format(path) : o.format;
        Cube cube = [&] {
            py::gil_scoped_release release;
            return read_cube(path, o);
        }();
        py::dict meta = metadata_dict(cube.metadata());
        return py::make_tuple(to_numpy(std::move(cube)), meta, std::string(format_name(used)));
    });
    // file_shape(path) -> (H, W, B): the size a tiled call will read (the header alone, or the file whole
    // for formats that cannot be read by windows).
    m.def("file_shape", [](const std::filesystem::path& path) {
        const CubeShape s = CubeFile(path).shape();
        return py::make_tuple(s.height, s.width, s.bands);
    });
    // write(path, array, metadata dict, format, layout or "") — atomically; nothing left on failure.
    m.def("write_declarations", &declarations<WriteOptions>);
    m.def("write", [](const std::filesystem::path& path, py::handle array, const py::dict& metadata,
                      const std::string& format, const std::string& layout, const py::dict& keywords) {
        const ArrayView in = array_view(array, "write", "array");
        if (in.view.on_device())
            throw InvalidInput("write: array is in device memory; bring it to the host first (e.g. cupy.asnumpy)");
        WriteOptions o = options_from<WriteOptions>(keywords, "write");
        o.format = parse_format(format, "format");
        if (!layout.empty()) {
            o.envi_keep_layout = false;
            o.envi_layout = parse_enum<Layout>(layout, "write: layout");
        }
        Metadata meta = metadata_from(metadata, in.view.bands());
        py::gil_scoped_release release;
        // A dense array is written where it is; any other strides are gathered once.
        Cube cube = in.view.dense_layout() ? Cube::borrow_const(in.view)
                                           : Cube::from_view(in.view, in.view.nearest_layout());
        cube.metadata() = std::move(meta);
        write_cube(cube, path, o);
    });
    m.def("mat_variables", [](const std::filesystem::path& path) { return list_mat_variables(path); });
    m.def("gdal_available", &gdal_available);
    m.def("detect_format", [](const std::filesystem::path& path) { return std::string(format_name(detect_format(path))); });
}

}  // namespace cubekit::python
