// SVM prediction on the GPU (issue 16 item 3): the same arithmetic as the CPU twin of LIBSVM's
// svm_predict_values (svm_predict.cpp), one thread per pixel over a BSQ cube (a warp's loads coalesce). A block stages kChunk support vectors
// (all bands, f64) and their coefficients in shared memory; each thread scales its pixel's bands
// (svm-scale's rule, the same expression as detail::scale_band), accumulates the kChunk squared
// distances in band order, and adds coef·exp(−γ·d) to the pair sums. The SVs are grouped by class in
// ascending class order, so pair (i, j) sums class i's SVs before class j's, as LIBSVM does; only exp
// may differ from the host's libm (≤ 1 ulp), hence the decision values agree within rounding.
#include <cstdint>
#include <vector>

#include "classify/classify_cuda.hpp"
#include "core/cuda_check.hpp"
#include "core/device_vector.hpp"

namespace cubekit::detail {
namespace {

constexpr int kThreads = 128;
constexpr int kChunk = 16;

struct SvmArgs {
    int pixels, bands, sv_total, classes;
    double gamma;
    const double* scale_min;
    const double* scale_max;
    const double* sv;     // sv_total × bands
    const double* coef;   // (classes − 1) × sv_total
    const double* rho;    // classes(classes − 1)/2
    const int* sv_class;  // class index of each SV
    const std::int32_t* labels;
    std::int32_t* out;
    double* dec;  // pixels × pairs, or null
    unsigned long long* non_finite;
};

template <class T>
__global__ void __launch_bounds__(kThreads) svm_predict(const T* cube, SvmArgs a) {
    extern __shared__ double staged[];  // kChunk × bands SVs, then kChunk × (classes − 1) coefficients
    double* sv = staged;
    double* coef = staged + kChunk * a.bands;
    const int p = blockIdx.x * kThreads + threadIdx.x;
    const bool active = p < a.pixels;
    const T* x = cube + p;  // BSQ: band b of pixel p at x[b·pixels], coalesced across a warp
    const std::int64_t stride = a.pixels;
    bool finite = active;
    if (active)
        for (int b = 0; b < a.bands && finite; ++b) finite = isfinite(double(x[b * stride]));
    double sum[kSvmGpuMaxClasses * (kSvmGpuMaxClasses - 1) / 2];
    const int pairs = a.classes * (a.classes - 1) / 2;
    for (int q = 0; q < pairs; ++q) sum[q] = 0;
    for (int s0 = 0; s0 < a.sv_total; s0 += kChunk) {
        const int n = min(kChunk, a.sv_total - s0);
        __syncthreads();
        for (int i = threadIdx.x; i < n * a.bands; i += kThreads) sv[i] = a.sv[std::int64_t(s0) * a.bands + i];
        for (int i = threadIdx.x; i < n * (a.classes - 1); i += kThreads)
            coef[i] = a.coef[std::int64_t(i / n) * a.sv_total + s0 + i % n];
        __syncthreads();
        if (!finite) continue;
        double d2[kChunk];
        for (int s = 0; s < kChunk; ++s) d2[s] = 0;
        for (int b = 0; b < a.bands; ++b) {
            const double lo = a.scale_min[b], hi = a.scale_max[b];
            const double xs = hi == lo ? 0.0 : -1.0 + 2.0 * (double(x[b * stride]) - lo) / (hi - lo);
#pragma unroll
            for (int s = 0; s < kChunk; ++s)
                if (s < n) {
                    const double d = xs - sv[s * a.bands + b];
                    d2[s] += d * d;
                }
        }
        for (int s = 0; s < n; ++s) {
            const double k = exp(-a.gamma * d2[s]);
            const int c = a.sv_class[s0 + s];
            // Pair (i, j), i < j, has index i·K − i(i+1)/2 + (j − i − 1). An SV of class c meets the
            // pairs (i, c) for i < c with coefficient row i, and (c, j) for j > c with row j − 1.
            for (int i = 0; i < c; ++i) sum[i * a.classes - i * (i + 1) / 2 + (c - i - 1)] += coef[i * n + s] * k;
            for (int j = c + 1; j < a.classes; ++j) sum[c * a.classes - c * (c + 1) / 2 + (j - c - 1)] += coef[(j - 1) * n + s] * k;
        }
    }
    if (!active) return;
    if (!finite) {
        a.out[p] = 0;
        atomicAdd(a.non_finite, 1ull);
        if (a.dec)
            for (int q = 0; q < pairs; ++q) a.dec[std::int64_t(p) * pairs + q] = __longlong_as_double(0x7FF8000000000000ll);
        return;
    }
    int votes[kSvmGpuMaxClasses];
    for (int c = 0; c < a.classes; ++c) votes[c] = 0;
    int q = 0;
    for (int i = 0; i < a.classes; ++i)
        for (int j = i + 1; j < a.classes; ++j, ++q) {
            const double v = sum[q] - a.rho[q];
            if (a.dec) a.dec[std::int64_t(p) * pairs + q] = v;
            ++votes[v > 0 ? i : j];
        }
    int winner = 0;
    for (int c = 1; c < a.classes; ++c)
        if (votes[c] > votes[winner]) winner = c;
    a.out[p] = a.labels[winner];
}

}  // namespace

std::int64_t predict_svm_cuda(const Context& ctx, const CubeView& cube, const SvmModel& m, std::int32_t* classes,
                              double* dec) {
    const int K = int(m.classes.size());
    std::vector<int> sv_class;
    for (int c = 0; c < K; ++c) sv_class.insert(sv_class.end(), std::size_t(m.sv_count[std::size_t(c)]), c);
    const DeviceBuffer smin = upload_vector(ctx, m.scale_min), smax = upload_vector(ctx, m.scale_max),
                       sv = upload_vector(ctx, m.support_vectors), coef = upload_vector(ctx, m.coef),
                       rho = upload_vector(ctx, m.rho), cls = upload_vector(ctx, sv_class),
                       labels = upload_vector(ctx, m.classes);
    DeviceBuffer counter(ctx, sizeof(unsigned long long));
    counter.fill_bytes(ctx, 0);
    SvmArgs a{int(cube.num_pixels()), m.bands, int(sv_class.size()), K, m.gamma,
              static_cast<const double*>(smin.data()), static_cast<const double*>(smax.data()),
              static_cast<const double*>(sv.data()), static_cast<const double*>(coef.data()),
              static_cast<const double*>(rho.data()), static_cast<const int*>(cls.data()),
              static_cast<const std::int32_t*>(labels.data()), classes, dec,
              static_cast<unsigned long long*>(counter.data())};
    const std::size_t shared = std::size_t(kChunk) * std::size_t(m.bands + K - 1) * sizeof(double);
    const dim3 grid(unsigned((a.pixels + kThreads - 1) / kThreads));
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        CUBEKIT_CUDA_CHECK(cudaFuncSetAttribute(svm_predict<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
        svm_predict<T><<<grid, kThreads, shared, stream_of(ctx)>>>(static_cast<const T*>(static_cast<const void*>(cube.data())), a);
        CUBEKIT_CHECK_LAUNCH(ctx, "svm_predict", grid, dim3(kThreads));
    });
    unsigned long long bad = 0;
    counter.download(ctx, &bad, sizeof bad);
    return std::int64_t(bad);
}

}  // namespace cubekit::detail
