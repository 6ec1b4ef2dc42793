// --bands lists ("0-9,20"): the first byte is the cube's band count (1..256), the rest the text.
#include "cubekit/cube.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace cubekit;
    if (size < 1) return 0;
    const int bands = int(data[0]) + 1;
    fuzz::expect_refusal_or_success([&] {
        const std::vector<int> list = cubekit::parse_band_list(fuzz::text(data + 1, size - 1), bands);
        if (list.size() > std::size_t(bands)) std::abort();  // the selection may not outgrow the cube
        for (int b : list)
            if (b < 0 || b >= bands) std::abort();
    });
    return 0;
}
