// Mat reader: the input is the file. Read with the format forced and by content detection.
#include "cubekit/io.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace cubekit;
    const auto path = fuzz::put("x.mat", fuzz::text(data, size));
    fuzz::expect_refusal_or_success([&] { read_cube(path, {.format = FileFormat::Mat}); });
    fuzz::expect_refusal_or_success([&] { read_cube(path); });
    fuzz::expect_refusal_or_success([&] { list_mat_variables(path); });
    return 0;
}
