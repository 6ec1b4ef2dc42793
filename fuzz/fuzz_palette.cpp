// --palette-in files (JSON palettes of cubekit quantize and cluster): the first byte picks the
// channel count the image has (1..4), the rest is the file.
#include "fuzz_common.hpp"
#include "kmeans_output.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace cubekit;
    if (size < 1) return 0;
    const int channels = 1 + data[0] % 4;
    const auto path = fuzz::put("palette.json", fuzz::text(data + 1, size - 1));
    fuzz::expect_refusal_or_success([&] {
        const cli::Palette p = cli::read_palette_json(path.string(), channels, "--palette-in");
        if (p.channels != channels || p.values.empty() || p.values.size() % std::size_t(channels) != 0) std::abort();
    });
    return 0;
}
