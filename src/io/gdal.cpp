// Rasters through GDAL (GeoTIFF, ERDAS .lan, ...): the fallback reader for files no other reader
// recognises, through the plugin libcubekit_gdal.so loaded on first need (gdal_plugin.hpp).
// Compiled to a stub that refuses with a clear message when GDAL is not built in
// (CUBEKIT_HAVE_GDAL undefined).
//
// Result: BSQ (GDAL reads band by band), element type of the first band (the others are converted
// to it by GDAL), projection WKT in Metadata::coordinate_system, the geotransform as text in
// Metadata::extra["geotransform"], band descriptions as band names when every band has one.
#include "io/io_internal.hpp"

#ifdef CUBEKIT_HAVE_GDAL
#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "io/gdal_plugin.hpp"
#endif

namespace cubekit {

#ifndef CUBEKIT_HAVE_GDAL

bool gdal_available() { return false; }

namespace io_detail {
bool gdal_identifies(const fs::path&) { return false; }
Cube read_gdal(const fs::path& path) {
    throw_invalid("read_gdal", path, "GDAL support is not built in; install libgdal-dev and rebuild");
}
void write_gdal_planes(const std::byte*, const CubeShape&, const Metadata&, const fs::path& path) {
    throw_invalid("write_gdal", path, "GeoTIFF output needs GDAL; GDAL support is not built in; install libgdal-dev and rebuild");
}

void write_gdal(const Cube&, const fs::path& path) {
    throw_invalid("write_gdal", path, "GeoTIFF output needs GDAL; GDAL support is not built in; install libgdal-dev and rebuild");
}
struct GdalWindows::Pool {};
GdalWindows::GdalWindows(const fs::path& path) { read_gdal(path); }
GdalWindows::~GdalWindows() = default;
void GdalWindows::read(int, int, int, int, std::byte*) const {  // never reached: the constructor refuses
    throw InvalidInput("read_gdal: GDAL support is not built in");
}
}  // namespace io_detail

#else

namespace io_detail {

namespace {

constexpr std::string_view kRead = "read_gdal";
constexpr std::string_view kWrite = "write_gdal";

// GDAL's GDALDataType values (stable since GDAL 1.x), so that this file needs no GDAL header.
enum GdalType { kByte = 1, kUInt16 = 2, kInt16 = 3, kUInt32 = 4, kInt32 = 5, kFloat32 = 6, kFloat64 = 7 };

// The plugin's functions, loaded once on first need (gdal_plugin.hpp says why it is a plugin).
struct Plugin {
    CubekitGdalIdentify identify = nullptr;
    CubekitGdalOpen open = nullptr;
    CubekitGdalReadBand read_band = nullptr;
    CubekitGdalText text = nullptr;
    CubekitGdalClose close = nullptr;
    CubekitGdalWriteTiff write_tiff = nullptr;
    CubekitGdalReadWindow read_window = nullptr;
    std::string error;  // why it could not be loaded
};

// Where the plugin is looked for: $CUBEKIT_GDAL_PLUGIN; next to the binary that holds this code
// (the CLI, libcubekit.so, the Python module); where the build put it; the loader's search path.
std::vector<std::string> plugin_candidates() {
    std::vector<std::string> out;
    if (const char* env = std::getenv("CUBEKIT_GDAL_PLUGIN"); env && *env) out.emplace_back(env);
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&plugin_candidates), &info) && info.dli_fname)
        out.push_back((fs::path(info.dli_fname).parent_path() / "libcubekit_gdal.so").string());
#ifdef CUBEKIT_GDAL_PLUGIN_PATH
    out.emplace_back(CUBEKIT_GDAL_PLUGIN_PATH);
#endif
    out.emplace_back("libcubekit_gdal.so");
    return out;
}

Plugin load_plugin() {
    Plugin p;
    void* lib = nullptr;
    for (const std::string& path : plugin_candidates()) {
        if (path.find('/') != std::string::npos && !fs::exists(path)) continue;
        if ((lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
        const char* e = dlerror();
        p.error += (p.error.empty() ? "" : "; ") + std::string(e ? e : path);
    }
    if (!lib) {
        if (p.error.empty()) p.error = "libcubekit_gdal.so not found";
        return p;
    }
    const auto sym = [&](const char* name) { return dlsym(lib, name); };
    p.identify = reinterpret_cast<CubekitGdalIdentify>(sym("cubekit_gdal_identify"));
    p.open = reinterpret_cast<CubekitGdalOpen>(sym("cubekit_gdal_open"));
    p.read_band = reinterpret_cast<CubekitGdalReadBand>(sym("cubekit_gdal_read_band"));
    p.text = reinterpret_cast<CubekitGdalText>(sym("cubekit_gdal_text"));
    p.close = reinterpret_cast<CubekitGdalClose>(sym("cubekit_gdal_close"));
    p.write_tiff = reinterpret_cast<CubekitGdalWriteTiff>(sym("cubekit_gdal_write_tiff"));
    p.read_window = reinterpret_cast<CubekitGdalReadWindow>(sym("cubekit_gdal_read_window"));
    if (!p.identify || !p.open || !p.read_band || !p.text || !p.close || !p.write_tiff || !p.read_window) {
        p = {};
        p.error = "libcubekit_gdal.so lacks the cubekit_gdal_* functions";
    }
    return p;  // the library stays loaded for the life of the process
}

const Plugin& plugin() {
    static const Plugin p = load_plugin();  // thread-safe, once
    return p;
}

struct Close {
    void operator()(void* h) const { plugin().close(h); }
};

DType dtype_of(int gdal_type, const char* name, const fs::path& path) {
    switch (gdal_type) {
        case kByte: return DType::U8;
        case kUInt16: return DType::U16;
        case kInt16: return DType::I16;
        case kUInt32: return DType::U32;
        case kInt32: return DType::I32;
        case kFloat32: return DType::F32;
        case kFloat64: return DType::F64;
        default:
            throw_invalid(kRead, path,
                          std::string("band 1 type '") + name +
                              "' is not supported (Byte, UInt16, Int16, UInt32, Int32, Float32, Float64 are)");
    }
}

// Projection, geotransform (as "a, b, c, d, e, f"), ENVI map info, band names when every band has one.
void read_metadata(void* h, int bands, Metadata& meta) {
    const Plugin& p = plugin();
    std::vector<std::string> names;
    for (int b = 0; b < bands; ++b)
        if (const std::string n = p.text(h, ("band_name:" + std::to_string(b)).c_str()); !n.empty()) names.push_back(n);
    if (int(names.size()) == bands) meta.band_names = std::move(names);
    if (const std::string wkt = p.text(h, "wkt"); !wkt.empty()) meta.coordinate_system = wkt;
    if (const std::string t = p.text(h, "geotransform"); !t.empty()) {
        std::istringstream in(t);
        std::array<double, 6> gt{};
        int n = 0;
        while (n < 6 && (in >> gt[std::size_t(n)])) ++n;
        if (n == 6) meta.extra["geotransform"] = geotransform_text(gt);
    }
    // ENVI files opened through GDAL (rare: only when forced) keep their map info; others get one
    // from the geotransform, so an ENVI output of a GeoTIFF scene stays georeferenced.
    if (const std::string mi = p.text(h, "map_info"); !mi.empty()) meta.map_info = mi;
    else if (const auto gt = meta.geotransform()) meta.map_info = map_info_from_geotransform(*gt);
}

}  // namespace

bool gdal_identifies(const fs::path& path) { return gdal_available() && plugin().identify(path.c_str()) != 0; }

// Opens `path` through the plugin and checks what it reports; the handle closes itself.
std::unique_ptr<void, Close> open_raster(const fs::path& path, CubekitGdalRaster& r, DType& dtype) {
    InputFile probe(kRead, path);  // IoError with strerror when missing (GDAL's message is vaguer)
    if (!gdal_available())
        throw_invalid(kRead, path, "GDAL support is built in, but its plugin could not be loaded: " + plugin().error);
    char error[512] = {};
    void* raw = nullptr;
    if (plugin().open(path.c_str(), &raw, &r, error, sizeof error) != 0) throw_invalid(kRead, path, error);
    std::unique_ptr<void, Close> h(raw);
    if (r.width <= 0 || r.height <= 0 || r.bands <= 0)
        throw_invalid(kRead, path, "GDAL reports " + std::to_string(r.width) + "x" + std::to_string(r.height) + "x" +
                                       std::to_string(r.bands) + "; a raster with at least one band is needed");
    dtype = dtype_of(r.gdal_type, r.type_name, path);
    return h;
}

Cube read_gdal(const fs::path& path) {
    CubekitGdalRaster r{};
    DType dtype{};
    const std::unique_ptr<void, Close> h = open_raster(path, r, dtype);
    // A compressed raster may rightly claim far more than its file holds; one beyond this machine's
    // memory is refused by name (CubeFile reads such a raster by windows), not by a bad_alloc.
    const double bytes = double(r.width) * double(r.height) * double(r.bands) * double(dtype_size(dtype));
    const double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
    if (memory > 0 && bytes > memory)
        throw IoError(std::string(kRead) + ": " + path.string() + ": GDAL reports " + std::to_string(r.width) + "x" +
                      std::to_string(r.height) + "x" + std::to_string(r.bands) + " " + std::string(dtype_name(dtype)) +
                      " (" + std::to_string(bytes / 1e9) + " GB), more than this machine's " +
                      std::to_string(memory / 1e9) + " GB of memory; read it by windows (tiles)");
    Cube cube = Cube::uninitialized(r.width, r.height, r.bands, dtype, Layout::BSQ);  // every band is read
    const std::size_t band_bytes = std::size_t(r.width) * std::size_t(r.height) * dtype_size(dtype);
    char error[512] = {};
    for (int b = 0; b < r.bands; ++b)
        if (plugin().read_band(h.get(), b, r.gdal_type, cube.bytes() + std::size_t(b) * band_bytes, error, sizeof error))
            throw_invalid(kRead, path, error);
    read_metadata(h.get(), r.bands, cube.metadata());
    return cube;
}

struct GdalWindows::Pool {
    fs::path path;
    int gdal_type = 0;
    std::mutex mutex;
    std::vector<std::unique_ptr<void, Close>> idle;  // GDAL handles are not shared between threads
};

GdalWindows::GdalWindows(const fs::path& path) : pool_(std::make_unique<Pool>()) {
    CubekitGdalRaster r{};
    DType dtype{};
    std::unique_ptr<void, Close> h = open_raster(path, r, dtype);
    shape_ = CubeShape{r.width, r.height, r.bands, dtype, Layout::BSQ};
    read_metadata(h.get(), r.bands, metadata_);
    pool_->path = path;
    pool_->gdal_type = r.gdal_type;
    pool_->idle.push_back(std::move(h));
}

GdalWindows::~GdalWindows() = default;

void GdalWindows::read(int x0, int y0, int w, int h, std::byte* dst) const {
    std::unique_ptr<void, Close> handle;
    {
        const std::lock_guard lock(pool_->mutex);
        if (!pool_->idle.empty()) {
            handle = std::move(pool_->idle.back());
            pool_->idle.pop_back();
        }
    }
    if (!handle) {  // another thread holds the others: a handle of its own
        CubekitGdalRaster r{};
        DType dtype{};
        handle = open_raster(pool_->path, r, dtype);
    }
    const std::size_t plane = std::size_t(w) * std::size_t(h) * dtype_size(shape_.dtype);
    char error[512] = {};
    for (int b = 0; b < shape_.bands; ++b)
        if (plugin().read_window(handle.get(), b, x0, y0, w, h, pool_->gdal_type, dst + plane * std::size_t(b), error,
                                 sizeof error))
            throw_invalid(kRead, pool_->path, error);
    const std::lock_guard lock(pool_->mutex);
    pool_->idle.push_back(std::move(handle));
}

static int gdal_type_of(DType t, const fs::path& path) {
    switch (t) {
        case DType::U8: return kByte;
        case DType::U16: return kUInt16;
        case DType::I16: return kInt16;
        case DType::U32: return kUInt32;
        case DType::I32: return kInt32;
        case DType::F32: return kFloat32;
        case DType::F64: return kFloat64;
        default:
            throw_invalid(kWrite, path, "GeoTIFF output of " + std::string(dtype_name(t)) +
                                           " samples is not supported (u8, u16, i16, u32, i32, f32, f64 are)");
    }
}

void write_gdal_planes(const std::byte* bsq, const CubeShape& shape, const Metadata& meta, const fs::path& path) {
    if (!gdal_available())
        throw_invalid(kWrite, path, "GDAL support is built in, but its plugin could not be loaded: " + plugin().error);
    const int type = gdal_type_of(shape.dtype, path);
    const std::optional<std::array<double, 6>> gt = meta.geotransform();
    // GDAL writes the temporary; the rename makes the output appear whole or not at all.
    AtomicFile out(kWrite, path);
    out.close();
    char error[512] = {};
    if (plugin().write_tiff(out.temp_path().c_str(), shape.width, shape.height, shape.bands, type, bsq,
                            meta.coordinate_system.c_str(), gt ? gt->data() : nullptr, error, sizeof error) != 0)
        throw_invalid(kWrite, path, error);
    out.commit();
}

void write_gdal(const Cube& cube, const fs::path& path) {
    const Cube bsq = cube.layout() == Layout::BSQ ? Cube() : cube.to_layout(Layout::BSQ);
    const Cube& planes = cube.layout() == Layout::BSQ ? cube : bsq;
    write_gdal_planes(planes.bytes(), planes.shape(), cube.metadata(), path);
}

}  // namespace io_detail

bool gdal_available() { return io_detail::plugin().open != nullptr; }

#endif

}  // namespace cubekit
