// Classification model files: the SVM scaling JSON beside a LIBSVM model, and class means. The
// first byte picks the kind; for the SVM the rest is split at "\n@@\n" into the LIBSVM text and the
// scaling JSON.
#include "cubekit/classify.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace cubekit;
    if (size < 1) return 0;
    const std::string_view body = fuzz::text(data + 1, size - 1);
    if (data[0] % 2 == 0) {
        const auto p = fuzz::put("means.json", body);
        fuzz::expect_refusal_or_success([&] { read_class_means(p); });
        return 0;
    }
    const std::size_t cut = body.find("\n@@\n");
    const auto model = fuzz::put("m.svm", body.substr(0, cut));
    fuzz::put("m.svm.scaling.json", cut == body.npos ? std::string_view() : body.substr(cut + 4));
    fuzz::expect_refusal_or_success([&] { read_svm_model(model); });
    return 0;
}
