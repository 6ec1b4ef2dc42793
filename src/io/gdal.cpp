// Rasters through GDAL (GeoTIFF, ERDAS .lan, ...): the fallback reader for files no other reader
// recognises. Compiled to a stub that refuses with a clear message when GDAL is not built in
// (CUBEKIT_HAVE_GDAL undefined).
//
// Result: BSQ (GDAL reads band by band), element type of the first band (the others are converted
// to it by GDAL), projection WKT in Metadata::coordinate_system, the geotransform as text in
// Metadata::extra["geotransform"], band descriptions as band names when every band has one.
#include "io/io_internal.hpp"

#ifdef CUBEKIT_HAVE_GDAL
#include <climits>
#include <memory>
#include <mutex>

#include <cpl_error.h>
#include <gdal.h>
#endif

namespace cubekit {

#ifndef CUBEKIT_HAVE_GDAL

bool gdal_available() { return false; }

namespace io_detail {
bool gdal_identifies(const fs::path&) { return false; }
Cube read_gdal(const fs::path& path) {
    throw_invalid("read_gdal", path, "GDAL support is not built in; install libgdal-dev and rebuild");
}
}  // namespace io_detail

#else

bool gdal_available() { return true; }

namespace io_detail {

namespace {

constexpr std::string_view kRead = "read_gdal";

// GDALAllRegister must run once before any open; call_once makes concurrent first reads safe.
void ensure_registered() {
    static std::once_flag once;
    std::call_once(once, [] { GDALAllRegister(); });
}

// GDAL prints errors to stderr by default; we report them in the exception instead. The handler
// stack is per thread in GDAL, so this does not affect other threads.
struct QuietErrors {
    QuietErrors() {
        CPLPushErrorHandler(CPLQuietErrorHandler);
        CPLErrorReset();
    }
    ~QuietErrors() { CPLPopErrorHandler(); }
};

std::string last_error() {
    const char* msg = CPLGetLastErrorMsg();
    return msg && *msg ? msg : "unknown GDAL error";
}

struct DatasetClose {
    void operator()(void* ds) const { GDALClose(static_cast<GDALDatasetH>(ds)); }
};

}  // namespace

bool gdal_identifies(const fs::path& path) {
    ensure_registered();
    QuietErrors quiet;
    return GDALIdentifyDriver(path.c_str(), nullptr) != nullptr;
}

Cube read_gdal(const fs::path& path) {
    InputFile probe(kRead, path);  // IoError with strerror when missing (GDAL's message is vaguer)
    ensure_registered();
    QuietErrors quiet;
    std::unique_ptr<void, DatasetClose> ds(GDALOpen(path.c_str(), GA_ReadOnly));
    if (!ds) throw_invalid(kRead, path, "GDAL cannot open it: " + last_error());
    const auto h = static_cast<GDALDatasetH>(ds.get());
    const int W = GDALGetRasterXSize(h), H = GDALGetRasterYSize(h), B = GDALGetRasterCount(h);
    if (W <= 0 || H <= 0 || B <= 0)
        throw_invalid(kRead, path, "GDAL reports " + std::to_string(W) + "x" + std::to_string(H) + "x" + std::to_string(B) +
                                       "; a raster with at least one band is needed");

    const GDALDataType gt = GDALGetRasterDataType(GDALGetRasterBand(h, 1));
    DType dtype{};
    switch (gt) {
        case GDT_Byte: dtype = DType::U8; break;
        case GDT_UInt16: dtype = DType::U16; break;
        case GDT_Int16: dtype = DType::I16; break;
        case GDT_UInt32: dtype = DType::U32; break;
        case GDT_Int32: dtype = DType::I32; break;
        case GDT_Float32: dtype = DType::F32; break;
        case GDT_Float64: dtype = DType::F64; break;
        default:
            throw_invalid(kRead, path,
                          std::string("band 1 type '") + GDALGetDataTypeName(gt) +
                              "' is not supported (Byte, UInt16, Int16, UInt32, Int32, Float32, Float64 are)");
    }

    Cube cube(W, H, B, dtype, Layout::BSQ);
    const std::size_t band_bytes = std::size_t(W) * std::size_t(H) * dtype_size(dtype);
    Metadata& meta = cube.metadata();
    bool all_named = true;
    std::vector<std::string> names;
    for (int b = 0; b < B; ++b) {
        GDALRasterBandH band = GDALGetRasterBand(h, b + 1);
        if (GDALRasterIO(band, GF_Read, 0, 0, W, H, cube.bytes() + std::size_t(b) * band_bytes, W, H, gt, 0, 0) != CE_None)
            throw_invalid(kRead, path, "GDAL failed reading band " + std::to_string(b + 1) + ": " + last_error());
        const char* desc = GDALGetDescription(band);
        if (desc && *desc)
            names.emplace_back(desc);
        else
            all_named = false;
    }
    if (all_named) meta.band_names = std::move(names);
    if (const char* wkt = GDALGetProjectionRef(h); wkt && *wkt) meta.coordinate_system = wkt;
    double t[6];
    if (GDALGetGeoTransform(h, t) == CE_None) {
        std::string s;
        for (int i = 0; i < 6; ++i) s += (i ? ", " : "") + format_double(t[i]);
        meta.extra["geotransform"] = s;
    }
    // ENVI files opened through GDAL (rare: only when forced) keep their map info.
    if (const char* mi = GDALGetMetadataItem(h, "map_info", "ENVI"); mi && *mi) meta.map_info = mi;
    return cube;
}

}  // namespace io_detail

#endif

}  // namespace cubekit
