#pragma once
// The C interface of libcubekit_gdal.so, the GDAL plugin (gdal_plugin.cpp). GDAL and the ~70
// libraries it pulls in cost every process that links them ~35 ms of dynamic loading at start-up
// (measured on the 2-core development machine, 2026-11-25: `cubekit --version` 47 ms with GDAL
// linked, 11 ms without); the plugin keeps them out until a file that no other reader takes is
// opened (gdal.cpp loads it with dlopen). Plain C types only, so the plugin and the library need
// not share a C++ ABI.
#include <cstddef>

extern "C" {

/// What cubekit_gdal_open reports of a raster.
struct CubekitGdalRaster {
    int width, height, bands;
    int gdal_type;  ///< GDALDataType of band 1
    char type_name[32];
};

/// 1 when GDAL recognises the file, else 0.
typedef int (*CubekitGdalIdentify)(const char* path);
/// Opens a raster: 0 and *handle on success; else 1 and a message in error[0..error_size).
typedef int (*CubekitGdalOpen)(const char* path, void** handle, CubekitGdalRaster* raster, char* error,
                               std::size_t error_size);
/// Reads band b (0-based) as `gdal_type` into dst (width × height samples): 0 on success, else 1
/// and a message.
typedef int (*CubekitGdalReadBand)(void* handle, int band, int gdal_type, void* dst, char* error, std::size_t error_size);
/// Reads the window [x0, x0+w) × [y0, y0+h) of band b (0-based) as `gdal_type` into dst (w × h
/// samples): 0 on success, else 1 and a message. One handle must not be used by two threads at once.
typedef int (*CubekitGdalReadWindow)(void* handle, int band, int x0, int y0, int w, int h, int gdal_type, void* dst,
                                     char* error, std::size_t error_size);
/// A text of the raster: "wkt", "geotransform" (6 numbers), "map_info" (ENVI), "band_name:<b>";
/// empty when it has none. Valid until the next call on the handle.
typedef const char* (*CubekitGdalText)(void* handle, const char* key);
typedef void (*CubekitGdalClose)(void* handle);
/// Writes a GeoTIFF: `bands` planes of width × height samples of `gdal_type`, one after another
/// (BSQ), with the projection `wkt` and `geotransform` (6 numbers) when not null. 0 on success, else
/// 1 and a message.
typedef int (*CubekitGdalWriteTiff)(const char* path, int width, int height, int bands, int gdal_type, const void* bsq,
                                    const char* wkt, const double* geotransform, char* error, std::size_t error_size);
}
