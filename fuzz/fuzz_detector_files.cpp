// The classical detectors' inputs: background statistics (.json) and target spectra (.json and
// .csv/.txt). The first byte picks the file kind; the rest is the file.
#include "cubekit/detect_classical.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace cubekit;
    if (size < 1) return 0;
    const std::string_view body = fuzz::text(data + 1, size - 1);
    switch (data[0] % 3) {
        case 0: {
            const auto p = fuzz::put("stats.json", body);
            fuzz::expect_refusal_or_success([&] { read_background_stats(p); });
            break;
        }
        case 1: {
            const auto p = fuzz::put("target.json", body);
            fuzz::expect_refusal_or_success([&] { read_target_spectrum(p, {}, 4); });
            fuzz::expect_refusal_or_success([&] { read_target_spectrum(p, {450, 550, 650, 750}, 4); });
            break;
        }
        default: {
            const auto p = fuzz::put("target.csv", body);
            fuzz::expect_refusal_or_success([&] { read_target_spectrum(p, {450, 550, 650, 750}, 4); });
        }
    }
    return 0;
}
