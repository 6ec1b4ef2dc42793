// Detection model files (spec detect.md §0.4): the input is the JSON text, parsed as an RBF network
// and as a multi-resolution model (each refuses the other's type, naming the field).
#include "cubekit/detect_models.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace cubekit;
    const std::string_view text = fuzz::text(data, size);
    fuzz::expect_refusal_or_success([&] { rbfn_model_from_json(text); });
    fuzz::expect_refusal_or_success([&] { multires_model_from_json(text); });
    return 0;
}
