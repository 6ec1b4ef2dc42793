// SVM prediction, CPU (classify.hpp): cubekit's own f64 twin of LIBSVM's svm_predict_values (the
// reference of the GPU kernel), and LIBSVM itself for comparison. Both scale the pixel the same way
// (svm-scale's rule, detail::scale_band); the twin then follows svm.cpp of LIBSVM 3.24 step by step:
// k_function's RBF (Σ_b d·d over the bands in order, then exp(−γ·sum)), the pairwise sums over the
// SVs of class i then of class j, minus ρ, "> 0 votes i", the first maximum of the votes.
#include <libsvm/svm.h>

#include <cmath>
#include <optional>
#include <limits>
#include <optional>
#include <string>

#include "classify/classify_cuda.hpp"
#include "classify/classify_internal.hpp"
#include "cubekit/error.hpp"

namespace cubekit {
namespace detail {

void check_svm_model(const SvmModel& m, int bands, const char* function) {
    const std::string f(function);
    const std::size_t K = m.classes.size(), B = std::size_t(m.bands);
    std::size_t n = 0;
    for (std::int32_t c : m.sv_count) n += std::size_t(c);
    if (K < 2 || m.sv_count.size() != K || m.bands < 1 || m.support_vectors.size() != n * B ||
        m.coef.size() != (K - 1) * n || m.rho.size() != K * (K - 1) / 2 || m.scale_min.size() != B ||
        m.scale_max.size() != B)
        throw InvalidInput(f + ": the model's arrays do not fit " + std::to_string(K) + " classes, " + std::to_string(n) +
                           " support vectors and " + std::to_string(m.bands) + " bands");
    if (!(m.gamma > 0)) throw InvalidInput(f + ": the model's gamma = " + number_text(m.gamma) + "; expected > 0");
    if (m.bands != bands)
        throw InvalidInput(f + ": the model has " + std::to_string(m.bands) + " bands, the cube " + std::to_string(bands));
}

}  // namespace detail

namespace {

// Per-thread scratch of the twin: the scaled pixel, the kernel values, the votes.
struct TwinScratch {
    std::vector<double> x, kvalue;
    std::vector<int> vote;
};

// One pixel (already scaled): LIBSVM's svm_predict_values, in cubekit's arrays. Fills dec (P values).
std::int32_t predict_twin(const SvmModel& m, const std::vector<std::size_t>& start, TwinScratch& t, double* dec) {
    const std::size_t K = m.classes.size(), n = m.num_sv(), B = std::size_t(m.bands);
    for (std::size_t s = 0; s < n; ++s) {
        const double* sv = m.support_vectors.data() + s * B;
        double sum = 0;
        for (std::size_t b = 0; b < B; ++b) {
            const double d = t.x[b] - sv[b];
            sum += d * d;
        }
        t.kvalue[s] = std::exp(-m.gamma * sum);
    }
    std::fill(t.vote.begin(), t.vote.end(), 0);
    std::size_t p = 0;
    for (std::size_t i = 0; i < K; ++i)
        for (std::size_t j = i + 1; j < K; ++j, ++p) {
            const double* coef1 = m.coef.data() + (j - 1) * n;  // LIBSVM: sv_coef[j − 1] for the SVs of i
            const double* coef2 = m.coef.data() + i * n;        //         sv_coef[i] for the SVs of j
            double sum = 0;
            for (std::size_t s = start[i]; s < start[i + 1]; ++s) sum += coef1[s] * t.kvalue[s];
            for (std::size_t s = start[j]; s < start[j + 1]; ++s) sum += coef2[s] * t.kvalue[s];
            sum -= m.rho[p];
            dec[p] = sum;
            ++t.vote[dec[p] > 0 ? i : j];
        }
    std::size_t winner = 0;
    for (std::size_t i = 1; i < K; ++i)
        if (t.vote[i] > t.vote[winner]) winner = i;
    return m.classes[winner];
}

// One pixel (already scaled in `x`) through LIBSVM.
std::int32_t predict_libsvm(const svm_model* model, const std::vector<double>& x, std::vector<svm_node>& nodes,
                            double* dec) {
    for (std::size_t b = 0; b < x.size(); ++b) nodes[b] = {int(b) + 1, x[b]};
    nodes[x.size()] = {-1, 0.0};
    return std::int32_t(svm_predict_values(model, nodes.data(), dec));
}

// The GPU kernel (svm_cuda.cu) for a CUDA context, the cubekit engine and K ≤ kSvmGpuMaxClasses:
// the cube once on the device in BSQ (converted when it is not), classes (and decision values) downloaded.
std::optional<SvmPrediction> predict_on_device(const Context& ctx, const CubeView& cube, const SvmModel& model,
                                               const SvmPredictOptions& options) {
#ifdef CUBEKIT_HAVE_CUDA
    const int K = int(model.classes.size());
    if (!ctx.is_cuda() || options.engine != SvmEngine::Cubekit || K > detail::kSvmGpuMaxClasses) return std::nullopt;
    ctx.log("predict_svm: cuda, " + cube.describe() + ", " + std::to_string(model.num_sv()) + " support vectors");
    const CubeInLayout in(ctx, cube, Layout::BSQ, Memory::Device);
    const int W = cube.width(), H = cube.height(), P = K * (K - 1) / 2;
    DeviceCube classes(ctx, {W, H, 1, DType::I32, Layout::BSQ}), dec;
    if (options.decision_values) dec = DeviceCube(ctx, {W, H, P, DType::F64, Layout::BIP});
    SvmPrediction r;
    r.non_finite = detail::predict_svm_cuda(ctx, in.view(), model, reinterpret_cast<std::int32_t*>(classes.mutable_view().data()),
                                            options.decision_values ? reinterpret_cast<double*>(dec.mutable_view().data()) : nullptr);
    r.classes = classes.download(ctx);
    if (options.decision_values) r.decision_values = dec.download(ctx);
    return r;
#else
    (void)ctx, (void)cube, (void)model, (void)options;
    return std::nullopt;
#endif
}

}  // namespace

SvmPrediction predict_svm(const Context& ctx, const CubeView& cube, const SvmModel& model,
                          const SvmPredictOptions& options) {
    detail::check_cube(cube, "predict_svm");
    detail::check_svm_model(model, cube.bands(), "predict_svm");
    if (std::optional<SvmPrediction> gpu = predict_on_device(ctx, cube, model, options)) return std::move(*gpu);
    ctx.log("predict_svm: cpu, " + std::string(enum_name(options.engine)) + " engine, " + cube.describe() + ", " +
            std::to_string(model.num_sv()) + " support vectors");
    std::optional<CubeInLayout> storage;
    const CubeView host = detail::host_input(ctx, cube, Layout::BIP, storage);
    const std::size_t K = model.classes.size(), P = K * (K - 1) / 2, B = std::size_t(model.bands);
    const int W = host.width(), H = host.height();
    std::vector<std::size_t> start(K + 1, 0);
    for (std::size_t k = 0; k < K; ++k) start[k + 1] = start[k] + std::size_t(model.sv_count[k]);
    std::optional<detail::LibsvmModel> libsvm;  // the LIBSVM engine's copy of the model
    if (options.engine == SvmEngine::Libsvm) libsvm.emplace(model);

    SvmPrediction r;
    std::vector<std::int32_t> classes(host.num_pixels(), 0);
    std::vector<double> dec(options.decision_values ? host.num_pixels() * P : 0);
    std::vector<char> bad(host.num_pixels(), 0);
    const auto make = [&] {
        struct Local {
            TwinScratch t;
            std::vector<svm_node> nodes;
            std::vector<double> dec;
        };
        return Local{{std::vector<double>(B), std::vector<double>(model.num_sv()), std::vector<int>(K)},
                     std::vector<svm_node>(B + 1), std::vector<double>(P)};
    };
    detail::for_each_spectrum(ctx, host, "predict_svm", make, [&](int x, int y, const double* s, bool finite, auto& l) {
        const std::size_t i = std::size_t(y) * std::size_t(W) + std::size_t(x);
        if (!finite) {
            bad[i] = 1;
            return;
        }
        for (std::size_t b = 0; b < B; ++b) l.t.x[b] = detail::scale_band(s[b], model.scale_min[b], model.scale_max[b]);
        classes[i] = options.engine == SvmEngine::Cubekit ? predict_twin(model, start, l.t, l.dec.data())
                                                          : predict_libsvm(libsvm->get(), l.t.x, l.nodes, l.dec.data());
        if (options.decision_values) std::copy(l.dec.begin(), l.dec.end(), dec.begin() + std::ptrdiff_t(i * P));
    });
    for (char b : bad) r.non_finite += b;
    r.classes = detail::label_cube(W, H, classes);
    if (options.decision_values) {
        r.decision_values = Cube::uninitialized(W, H, int(P), DType::F64, Layout::BIP);
        for (std::size_t i = 0; i < bad.size(); ++i)
            if (bad[i]) std::fill(dec.begin() + std::ptrdiff_t(i * P), dec.begin() + std::ptrdiff_t((i + 1) * P),
                                  std::numeric_limits<double>::quiet_NaN());
        std::copy(dec.begin(), dec.end(), r.decision_values.data<double>());
    }
    return r;
}

}  // namespace cubekit
