// Host steps of k-means that both backends share, so that they start from the same numbers:
// the valid set, the plan (fixed-point exponents, tolerance), the init sample and the
// initialisations that need no pass over the data (spec kmeans.md §3.3–3.4).
#include <cmath>
#include <limits>

#include "kmeans/kmeans_internal.hpp"

namespace cubekit::detail {

KmeansPlan prepare_kmeans(const Cube& bip, const KmeansOptions& o, int threads, std::vector<std::int64_t>& valid) {
    return visit_dtype(bip.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* x = bip.data<T>();
        const int m = bip.bands();
        const auto pixels = std::int64_t(bip.shape().num_pixels());
        std::vector<std::uint8_t> ok(static_cast<std::size_t>(pixels));
#pragma omp parallel for num_threads(threads) if(pixels >= 32768) schedule(static)
        for (std::int64_t p = 0; p < pixels; ++p) {
            bool v = o.mask.empty() || o.mask[std::size_t(p)] != 0;
            if constexpr (std::is_floating_point_v<T>)
                for (int b = 0; b < m && v; ++b) v = !std::isnan(x[p * m + b]);
            ok[std::size_t(p)] = v;
        }
        valid.clear();
        for (std::int64_t p = 0; p < pixels; ++p)
            if (ok[std::size_t(p)]) valid.push_back(p);
        const auto n = std::int64_t(valid.size());
        KmeansStats stats;
        stats.valid = n;
        stats.lo.assign(static_cast<std::size_t>(m), std::numeric_limits<double>::infinity());
        stats.hi.assign(static_cast<std::size_t>(m), -std::numeric_limits<double>::infinity());
        // Min, max and the exact moments are order-free (min/max, integer sums): threads may split them.
#pragma omp parallel num_threads(threads) if(n >= 32768)
        {
            std::vector<double> lo(stats.lo), hi(stats.hi);
#pragma omp for schedule(static) nowait
            for (std::int64_t i = 0; i < n; ++i)
                for (int b = 0; b < m; ++b) {
                    const double v = double(x[valid[std::size_t(i)] * m + b]);
                    lo[std::size_t(b)] = std::min(lo[std::size_t(b)], v);
                    hi[std::size_t(b)] = std::max(hi[std::size_t(b)], v);
                }
#pragma omp critical
            for (int b = 0; b < m; ++b) {
                stats.lo[std::size_t(b)] = std::min(stats.lo[std::size_t(b)], lo[std::size_t(b)]);
                stats.hi[std::size_t(b)] = std::max(stats.hi[std::size_t(b)], hi[std::size_t(b)]);
            }
        }
        KmeansPlan plan = make_plan(o, m, pixels, std::is_floating_point_v<T>, stats);
        // Exact moments for the tolerance: Σq in int64, Σq² in int128 (§3.4, 3.6).
        std::vector<std::int64_t> sq(static_cast<std::size_t>(m), 0);
        std::vector<km::i128> sq2(static_cast<std::size_t>(m), 0);
#pragma omp parallel num_threads(threads) if(n >= 32768)
        {
            std::vector<std::int64_t> s1(static_cast<std::size_t>(m), 0);
            std::vector<km::i128> s2(static_cast<std::size_t>(m), 0);
#pragma omp for schedule(static) nowait
            for (std::int64_t i = 0; i < n; ++i)
                for (int b = 0; b < m; ++b) {
                    const std::int64_t q = km::sum_value(x[valid[std::size_t(i)] * m + b], plan.scale);
                    s1[std::size_t(b)] += q;
                    s2[std::size_t(b)] += km::i128(q) * km::i128(q);
                }
#pragma omp critical
            for (int b = 0; b < m; ++b) {
                sq[std::size_t(b)] += s1[std::size_t(b)];
                sq2[std::size_t(b)] += s2[std::size_t(b)];
            }
        }
        set_tolerance(plan, o.tol, sq, sq2);
        return plan;
    });
}

std::vector<std::int64_t> init_sample_pixels(const std::vector<std::int64_t>& valid, const KmeansOptions& o,
                                             std::uint64_t seed, int threads) {
    const auto n = std::int64_t(valid.size());
    if (!sampling_active(o, n)) return valid;
    const double rate = sample_rate(o, n);
    std::vector<std::uint8_t> in(static_cast<std::size_t>(n));
#pragma omp parallel for num_threads(threads) if(n >= 32768) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) in[std::size_t(i)] = in_sample(seed, i, rate);
    std::vector<std::int64_t> sample;
    for (std::int64_t i = 0; i < n; ++i)
        if (in[std::size_t(i)]) sample.push_back(valid[std::size_t(i)]);
    if (sample.size() < std::size_t(o.k)) return valid;  // an unlucky tiny sample: every valid pixel
    return sample;
}

std::vector<double> simple_init(const Cube& bip, const KmeansPlan& plan, const KmeansOptions& o,
                                const std::vector<std::int64_t>& sample, std::uint64_t seed) {
    std::vector<double> c;
    switch (o.init) {
        case KmeansInit::Explicit: c = o.init_centroids; break;
        case KmeansInit::BoxDiagonal: c = box_diagonal(plan); break;
        case KmeansInit::Random: {
            const auto pos = floyd_positions(seed, std::int64_t(sample.size()), plan.k);
            c.resize(std::size_t(plan.k) * plan.m);
            for (int j = 0; j < plan.k; ++j)
                for (int b = 0; b < plan.m; ++b)
                    c[std::size_t(j) * plan.m + b] = bip.value(int(sample[std::size_t(pos[std::size_t(j)])] % bip.width()),
                                                               int(sample[std::size_t(pos[std::size_t(j)])] / bip.width()), b);
            break;
        }
        case KmeansInit::KmeansPlusPlus: break;  // backend-specific passes
    }
    if (o.legacy)
        for (double& v : c) v = std::trunc(v);
    return c;
}

}  // namespace cubekit::detail
