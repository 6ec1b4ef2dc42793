// Host steps of k-means that both backends share, so that they start from the same numbers
// (spec kmeans.md §3.3–3.4): the CPU first pass (valid set, plan, tolerance), the init sample and
// the initialisations that need no pass over the data. The first pass reads a host view of any
// strides where it is; the CUDA backend has its own first pass on the device (prepare_cuda.cu)
// and shares make_plan/set_tolerance (kmeans.cpp) and simple_init with this one.
#include <cmath>
#include <limits>

#include "kmeans/kmeans_internal.hpp"

namespace cubekit::detail {
namespace {

// The m samples of raster pixel p of a view.
template <typename T>
km::Spectrum<T> spectrum(const StridedView<const T>& v, std::int64_t p) {
    return {&v(int(p % v.width), int(p / v.width), 0), v.strides.b};
}

}  // namespace

std::vector<std::int64_t> valid_pixels(const Context& ctx, const CubeView& image, const std::vector<std::uint8_t>& mask) {
    const int threads = ctx.threads();
    return visit_dtype(image.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const StridedView<const T> x = image.typed<T>();
        const int m = x.bands;
        const auto pixels = std::int64_t(image.num_pixels());
        std::vector<std::uint8_t> ok(static_cast<std::size_t>(pixels));
#pragma omp parallel for num_threads(threads) if(pixels >= 32768) schedule(static)
        for (std::int64_t p = 0; p < pixels; ++p) {
            bool v = mask.empty() || mask[std::size_t(p)] != 0;
            if constexpr (std::is_floating_point_v<T>) {
                const km::Spectrum<T> s = spectrum(x, p);
                for (int b = 0; b < m && v; ++b) v = !std::isnan(s[b]);
            }
            ok[std::size_t(p)] = v;
        }
        std::vector<std::int64_t> valid;
        for (std::int64_t p = 0; p < pixels; ++p)
            if (ok[std::size_t(p)]) valid.push_back(p);
        return valid;
    });
}

KmeansStats band_range(const Context& ctx, const CubeView& image, const std::vector<std::int64_t>& valid) {
    const int threads = ctx.threads();
    return visit_dtype(image.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const StridedView<const T> x = image.typed<T>();
        const int m = x.bands;
        const auto n = std::int64_t(valid.size());
        KmeansStats stats;
        stats.valid = n;
        stats.lo.assign(static_cast<std::size_t>(m), std::numeric_limits<double>::infinity());
        stats.hi.assign(static_cast<std::size_t>(m), -std::numeric_limits<double>::infinity());
        // Min and max are order-free: threads may split them.
#pragma omp parallel num_threads(threads) if(n >= 32768)
        {
            std::vector<double> lo(stats.lo), hi(stats.hi);
#pragma omp for schedule(static) nowait
            for (std::int64_t i = 0; i < n; ++i) {
                const km::Spectrum<T> s = spectrum(x, valid[std::size_t(i)]);
                for (int b = 0; b < m; ++b) {
                    const double v = double(s[b]);
                    lo[std::size_t(b)] = std::min(lo[std::size_t(b)], v);
                    hi[std::size_t(b)] = std::max(hi[std::size_t(b)], v);
                }
            }
#pragma omp critical
            for (int b = 0; b < m; ++b) {
                stats.lo[std::size_t(b)] = std::min(stats.lo[std::size_t(b)], lo[std::size_t(b)]);
                stats.hi[std::size_t(b)] = std::max(stats.hi[std::size_t(b)], hi[std::size_t(b)]);
            }
        }
        return stats;
    });
}

BandMoments band_moments(const Context& ctx, const CubeView& image, const std::vector<std::int64_t>& valid,
                         double scale) {
    const int threads = ctx.threads();
    return visit_dtype(image.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const StridedView<const T> x = image.typed<T>();
        const int m = x.bands;
        const auto n = std::int64_t(valid.size());
        BandMoments out;
        out.sum_q.assign(static_cast<std::size_t>(m), 0);
        out.sum_q2.assign(static_cast<std::size_t>(m), 0);
        // Exact integer sums: threads may split them.
#pragma omp parallel num_threads(threads) if(n >= 32768)
        {
            std::vector<std::int64_t> s1(static_cast<std::size_t>(m), 0);
            std::vector<km::i128> s2(static_cast<std::size_t>(m), 0);
#pragma omp for schedule(static) nowait
            for (std::int64_t i = 0; i < n; ++i) {
                const km::Spectrum<T> s = spectrum(x, valid[std::size_t(i)]);
                for (int b = 0; b < m; ++b) {
                    const std::int64_t q = km::sum_value(s[b], scale);
                    s1[std::size_t(b)] += q;
                    s2[std::size_t(b)] += km::i128(q) * km::i128(q);
                }
            }
#pragma omp critical
            out.add(s1, s2);
        }
        return out;
    });
}

void BandMoments::add(const std::vector<std::int64_t>& q, const std::vector<km::i128>& q2) {
    for (std::size_t b = 0; b < q.size(); ++b) sum_q[b] += q[b], sum_q2[b] += q2[b];
}

KmeansPlan prepare_kmeans(const Context& ctx, const CubeView& image, const KmeansOptions& o,
                          std::vector<std::int64_t>& valid) {
    valid = valid_pixels(ctx, image, o.mask);
    const bool float_input = dtype_is_float(image.dtype());
    KmeansPlan plan = make_plan(o, image.bands(), std::int64_t(image.num_pixels()), float_input,
                                band_range(ctx, image, valid));
    // Exact moments for the tolerance: Σq in int64, Σq² in int128 (§3.4, 3.6).
    const BandMoments moments = band_moments(ctx, image, valid, plan.scale);
    set_tolerance(plan, o.tol, moments.sum_q, moments.sum_q2);
    return plan;
}

std::vector<std::int64_t> init_sample_pixels(const std::vector<std::int64_t>& valid, const KmeansOptions& o,
                                             std::uint64_t seed, int threads) {
    const auto n = std::int64_t(valid.size());
    if (!sampling_active(o, n)) return valid;
    const double rate = sample_rate(o, n);
    std::vector<std::uint8_t> in(static_cast<std::size_t>(n));
#pragma omp parallel for num_threads(threads) if(n >= 32768) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) in[std::size_t(i)] = km::in_sample(seed, i, rate);
    std::vector<std::int64_t> sample;
    for (std::int64_t i = 0; i < n; ++i)
        if (in[std::size_t(i)]) sample.push_back(valid[std::size_t(i)]);
    if (sample.size() < std::size_t(o.k)) return valid;  // an unlucky tiny sample: every valid pixel
    return sample;
}

std::vector<double> simple_init(const KmeansPlan& plan, const KmeansOptions& o, std::int64_t sample_size,
                                std::uint64_t seed, const SampleValues& values) {
    std::vector<double> c;
    switch (o.init) {
        case KmeansInit::Explicit: c = o.init_centroids; break;
        case KmeansInit::BoxDiagonal: c = box_diagonal(plan); break;
        case KmeansInit::Random: c = values(floyd_positions(seed, sample_size, plan.k)); break;
        case KmeansInit::KmeansPlusPlus: break;  // backend-specific passes
    }
    if (o.legacy)
        for (double& v : c) v = std::trunc(v);
    return c;
}

}  // namespace cubekit::detail
