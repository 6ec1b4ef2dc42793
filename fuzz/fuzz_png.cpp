// Png reader: the input is the file. Read with the format forced and by content detection.
#include "cubekit/io.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace cubekit;
    const auto path = fuzz::put("x.png", fuzz::text(data, size));
    fuzz::expect_refusal_or_success([&] { read_cube(path, {.format = FileFormat::Png}); });
    fuzz::expect_refusal_or_success([&] { read_cube(path); });
    return 0;
}
