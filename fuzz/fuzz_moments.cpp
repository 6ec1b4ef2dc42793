// Moment files of cubekit zernike, read back by zernike-reconstruct: the first byte picks CSV or
// JSON, the rest is the file.
#include "fuzz_common.hpp"
#include "zernike_table.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace cubekit;
    if (size < 1) return 0;
    const bool json = data[0] % 2 == 1;
    const auto path = fuzz::put(json ? "moments.json" : "moments.csv", fuzz::text(data + 1, size - 1));
    fuzz::expect_refusal_or_success([&] { (void)cli::read_moment_file(path.string(), "MOMENTS"); });
    return 0;
}
