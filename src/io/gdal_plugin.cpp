// libcubekit_gdal.so: GDAL behind the plain C interface of gdal_plugin.hpp, loaded on demand by
// gdal.cpp. The reading logic (types, metadata, errors) stays in gdal.cpp.
#include "io/gdal_plugin.hpp"

#include <cpl_conv.h>
#include <cpl_error.h>
#include <gdal.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

namespace {

// GDALAllRegister must run once before any open; call_once makes concurrent first reads safe.
void ensure_registered() {
    static std::once_flag once;
    std::call_once(once, [] { GDALAllRegister(); });
}

// GDAL prints errors to stderr by default; they go into the caller's message instead. The handler
// stack is per thread in GDAL, so this does not affect other threads.
struct QuietErrors {
    QuietErrors() {
        CPLPushErrorHandler(CPLQuietErrorHandler);
        CPLErrorReset();
    }
    ~QuietErrors() { CPLPopErrorHandler(); }
};

void set_error(char* error, std::size_t size, const std::string& text) {
    if (size == 0) return;
    std::snprintf(error, size, "%s", text.c_str());
}

std::string last_error() {
    const char* msg = CPLGetLastErrorMsg();
    return msg && *msg ? msg : "unknown GDAL error";
}

struct Handle {
    GDALDatasetH ds = nullptr;
    std::string text;  // the last text returned
};

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int cubekit_gdal_identify(const char* path) {
    ensure_registered();
    QuietErrors quiet;
    return GDALIdentifyDriver(path, nullptr) != nullptr ? 1 : 0;
}

__attribute__((visibility("default"))) int cubekit_gdal_open(const char* path, void** handle, CubekitGdalRaster* raster,
                                                             char* error, std::size_t error_size) {
    ensure_registered();
    QuietErrors quiet;
    GDALDatasetH ds = GDALOpen(path, GA_ReadOnly);
    if (!ds) {
        set_error(error, error_size, "GDAL cannot open it: " + last_error());
        return 1;
    }
    raster->width = GDALGetRasterXSize(ds);
    raster->height = GDALGetRasterYSize(ds);
    raster->bands = GDALGetRasterCount(ds);
    raster->gdal_type = raster->bands > 0 ? int(GDALGetRasterDataType(GDALGetRasterBand(ds, 1))) : 0;
    std::snprintf(raster->type_name, sizeof raster->type_name, "%s",
                  GDALGetDataTypeName(GDALDataType(raster->gdal_type)));
    *handle = new Handle{ds, {}};
    return 0;
}

__attribute__((visibility("default"))) int cubekit_gdal_read_band(void* handle, int band, int gdal_type, void* dst,
                                                                  char* error, std::size_t error_size) {
    QuietErrors quiet;
    GDALDatasetH ds = static_cast<Handle*>(handle)->ds;
    const int W = GDALGetRasterXSize(ds), H = GDALGetRasterYSize(ds);
    if (GDALRasterIO(GDALGetRasterBand(ds, band + 1), GF_Read, 0, 0, W, H, dst, W, H, GDALDataType(gdal_type), 0, 0) !=
        CE_None) {
        set_error(error, error_size, "GDAL failed reading band " + std::to_string(band + 1) + ": " + last_error());
        return 1;
    }
    return 0;
}

__attribute__((visibility("default"))) int cubekit_gdal_read_window(void* handle, int band, int x0, int y0, int w, int h,
                                                                    int gdal_type, void* dst, char* error,
                                                                    std::size_t error_size) {
    QuietErrors quiet;
    GDALDatasetH ds = static_cast<Handle*>(handle)->ds;
    if (GDALRasterIO(GDALGetRasterBand(ds, band + 1), GF_Read, x0, y0, w, h, dst, w, h, GDALDataType(gdal_type), 0, 0) !=
        CE_None) {
        set_error(error, error_size, "GDAL failed reading band " + std::to_string(band + 1) + ": " + last_error());
        return 1;
    }
    return 0;
}

__attribute__((visibility("default"))) const char* cubekit_gdal_text(void* handle, const char* key) {
    Handle& h = *static_cast<Handle*>(handle);
    const std::string k(key);
    const char* value = nullptr;
    if (k == "wkt") {
        value = GDALGetProjectionRef(h.ds);
    } else if (k == "geotransform") {
        double t[6];
        if (GDALGetGeoTransform(h.ds, t) != CE_None) return "";
        h.text.clear();
        for (int i = 0; i < 6; ++i) {
            char buf[40];
            std::snprintf(buf, sizeof buf, "%.17g", t[i]);
            h.text += (i ? " " : "") + std::string(buf);
        }
        return h.text.c_str();
    } else if (k == "map_info") {
        value = GDALGetMetadataItem(h.ds, "map_info", "ENVI");
    } else if (k.rfind("band_name:", 0) == 0) {
        value = GDALGetDescription(GDALGetRasterBand(h.ds, std::stoi(k.substr(10)) + 1));
    }
    h.text = value ? value : "";
    return h.text.c_str();
}

__attribute__((visibility("default"))) int cubekit_gdal_write_tiff(const char* path, int width, int height, int bands,
                                                                   int gdal_type, const void* bsq, const char* wkt,
                                                                   const double* geotransform, char* error,
                                                                   std::size_t error_size) {
    ensure_registered();
    QuietErrors quiet;
    GDALDriverH driver = GDALGetDriverByName("GTiff");
    if (!driver) {
        set_error(error, error_size, "GDAL has no GTiff driver");
        return 1;
    }
    // BIGTIFF=IF_SAFER: a classic TIFF while it fits, BigTIFF beyond 4 GB.
    const char* options[] = {"BIGTIFF=IF_SAFER", nullptr};
    GDALDatasetH ds = GDALCreate(driver, path, width, height, bands, GDALDataType(gdal_type), const_cast<char**>(options));
    if (!ds) {
        set_error(error, error_size, "GDAL cannot create it: " + last_error());
        return 1;
    }
    bool ok = true;
    if (geotransform) ok = GDALSetGeoTransform(ds, const_cast<double*>(geotransform)) == CE_None;
    if (ok && wkt && *wkt) ok = GDALSetProjection(ds, wkt) == CE_None;
    const std::size_t plane = std::size_t(width) * std::size_t(height) * std::size_t(GDALGetDataTypeSizeBytes(GDALDataType(gdal_type)));
    for (int b = 0; ok && b < bands; ++b)
        ok = GDALRasterIO(GDALGetRasterBand(ds, b + 1), GF_Write, 0, 0, width, height,
                          const_cast<char*>(static_cast<const char*>(bsq) + plane * std::size_t(b)), width, height,
                          GDALDataType(gdal_type), 0, 0) == CE_None;
    if (!ok) set_error(error, error_size, "GDAL failed writing it: " + last_error());
    GDALClose(ds);  // flushes
    if (ok && CPLGetLastErrorType() >= CE_Failure) {
        set_error(error, error_size, "GDAL failed writing it: " + last_error());
        return 1;
    }
    return ok ? 0 : 1;
}

__attribute__((visibility("default"))) void cubekit_gdal_close(void* handle) {
    auto* h = static_cast<Handle*>(handle);
    if (h && h->ds) GDALClose(h->ds);
    delete h;
}

}  // extern "C"
