// ENVI: the input is a header and a data file, split at the first "\n@@\n" (all header when absent;
// the seeds are real headers followed by their data's first bytes). Reads the whole cube, then a
// window through CubeFile (positioned reads).
#include "cubekit/io.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace cubekit;
    const std::string_view all = fuzz::text(data, size);
    const std::size_t cut = all.find("\n@@\n");
    const std::string_view header = all.substr(0, cut), samples = cut == all.npos ? std::string_view() : all.substr(cut + 4);
    const auto hdr = fuzz::put("x.hdr", header);
    fuzz::put("x.img", samples);
    fuzz::expect_refusal_or_success([&] { read_cube(hdr, {.format = FileFormat::Envi}); });
    fuzz::expect_refusal_or_success([&] {
        const CubeFile f(hdr, {.format = FileFormat::Envi});
        const CubeShape& s = f.shape();
        const int w = std::min(s.width, 3), h = std::min(s.height, 2);
        Cube window(w, h, s.bands, s.dtype);
        f.read_window(s.width - w, s.height - h, w, h, window.mutable_view());
    });
    return 0;
}
