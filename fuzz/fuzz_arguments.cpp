// The CLI's small argument syntaxes: the first byte picks the parser, the rest is the text.
// --crop X,Y,W,H (then the crop of a 40x30 cube), --size/--tile-size WxH, byte sizes (--memory-limit),
// device lists (--devices), and the tile flags together.
#include "arg_parsers.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/tiles.hpp"
#include "fuzz_common.hpp"
#include "tile_flags.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace cubekit;
    if (size < 1) return 0;
    const std::string text(fuzz::text(data + 1, size - 1));
    switch (data[0] % 5) {
        case 0:
            fuzz::expect_refusal_or_success([&] {
                const std::array<int, 4> v = cli::parse_crop(text, "--crop");
                if (v[0] < 0 || v[1] < 0 || v[2] <= 0 || v[3] <= 0) std::abort();
                static const Cube cube(40, 30, 2, DType::U8);
                const Cube c = cube.crop(v[0], v[1], v[2], v[3]);
                if (c.width() != v[2] || c.height() != v[3]) std::abort();
            });
            break;
        case 1:
            fuzz::expect_refusal_or_success([&] {
                const auto [w, h] = cli::parse_width_height(text, "--size", "64x64");
                if (w <= 0 || h <= 0) std::abort();
            });
            break;
        case 2:
            fuzz::expect_refusal_or_success([&] { (void)parse_bytes(text, "--memory-limit"); });
            break;
        case 3:
            fuzz::expect_refusal_or_success([&] {
                for (int d : parse_devices(text, "--devices"))
                    if (d < 0) std::abort();
            });
            break;
        default: {
            // The four tile flags, split at '|' (a text without one fills the first flag).
            cli::TileFlags flags;
            std::string* field[4] = {&flags.memory_limit, &flags.device_memory_limit, &flags.devices, &flags.tile_size};
            std::size_t at = 0;
            for (int i = 0; i < 4 && at <= text.size(); ++i) {
                const std::size_t bar = std::min(text.find('|', at), text.size());
                *field[i] = text.substr(at, bar - at);
                at = bar + 1;
            }
            fuzz::expect_refusal_or_success([&] { (void)cli::tile_options(flags); });
        }
    }
    return 0;
}
