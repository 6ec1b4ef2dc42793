// The GDAL input path (built by the fuzz-gdal preset only): the input is written as x.tif and read
// through cubekit's GDAL reader (the plugin libcubekit_gdal.so), whole and by a window, as any file no
// other reader claims. GDAL itself is fuzzed by OSS-Fuzz and is not instrumented here; this target
// checks cubekit's side: the dimensions, types, band counts, geotransforms and windows GDAL reports.
#include "cubekit/io.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace cubekit;
    const auto path = fuzz::put("x.tif", fuzz::text(data, size));
    fuzz::expect_refusal_or_success([&] {
        const CubeFile f(path, {.format = FileFormat::Gdal});
        const CubeShape& s = f.shape();
        // The whole read only below 256 MB: a compressed TIFF may rightly claim terabytes (the reader
        // then refuses what exceeds the machine's memory, which libFuzzer's malloc limit would report).
        if (double(s.width) * s.height * s.bands * dtype_size(s.dtype) <= 256e6) read_cube(path, {.format = FileFormat::Gdal});
        const int w = std::min(s.width, 3), h = std::min(s.height, 2);
        Cube window(w, h, s.bands, s.dtype);
        f.read_window(s.width - w, s.height - h, w, h, window.mutable_view());
    });
    return 0;
}
