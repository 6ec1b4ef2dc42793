#pragma once
// The arithmetic of the entropy edge detector that the CPU reference and the CUDA kernels share
// (spec edges.md §3.1–3.6, §3.8): E1 quantisation of one value, the threshold search of one
// histogram, the binarisation, the 3×3 rule, the band mean. Every function is host+device, so both
// backends run the same operations in the same order (host -ffp-contract=off, CUDA --fmad=false).
#include <cmath>
#include <cstdint>

#include "core/hd.hpp"

namespace cubekit::detail::edges {

/// Thresholds of one image, as the kernels keep them (the public EdgeThresholds has the same fields).
struct Thr {
    std::uint8_t t1 = 0, t2 = 0, t3 = 0;
    std::uint8_t constant = 0;
    std::uint16_t levels = 0, loc = 0;
};

CUBEKIT_HD bool is_finite(double v) {
#if defined(__CUDA_ARCH__)
    return isfinite(v);
#else
    return std::isfinite(v);
#endif
}

/// E1 (spec §3.1): q = ⌊(v − min)·255/(max − min) + 0.5⌋ in f64, in that order; a constant range
/// and non-finite values map to 0. The caller passes min < max only when the range is not constant.
CUBEKIT_HD std::uint8_t quantize_value(double v, double lo, double hi) {
    if (!(hi > lo) || !is_finite(v)) return 0;
    const double t = (v - lo) * 255.0 / (hi - lo) + 0.5;
    return std::uint8_t(::floor(t));
}

/// f = 1 iff (T2 ≤ v < T1) or v ≥ T3 (El-Sayed's comparisons, spec §3.5).
CUBEKIT_HD std::uint8_t binarize(std::uint8_t v, const Thr& t) {
    return std::uint8_t((t.t2 <= v && v < t.t1) || v >= t.t3);
}

/// The 3×3 rule (spec §3.6): edge iff at most 6 of the 9 window values equal the centre.
/// `same` = how many of the 8 neighbours equal the centre.
CUBEKIT_HD std::uint8_t edge_from_same(int same) { return std::uint8_t(same + 1 <= 6); }

/// Integer round-half-up mean ⌊(Σ + ⌊K/2⌋)/K⌋ (band mean, threshold mean; spec §3.8).
CUBEKIT_HD std::uint32_t rounded_mean(std::uint64_t sum, std::uint32_t count) {
    return std::uint32_t((sum + count / 2) / count);
}

/// Spec §3.8 method 5: T'_k = rounded mean over the n images of T_k.
CUBEKIT_HD Thr threshold_mean(const Thr* t, int n) {
    std::uint64_t s1 = 0, s2 = 0, s3 = 0;
    for (int i = 0; i < n; ++i) s1 += t[i].t1, s2 += t[i].t2, s3 += t[i].t3;
    Thr m;
    m.t1 = std::uint8_t(rounded_mean(s1, std::uint32_t(n)));
    m.t2 = std::uint8_t(rounded_mean(s2, std::uint32_t(n)));
    m.t3 = std::uint8_t(rounded_mean(s3, std::uint32_t(n)));
    return m;
}

/// Values at or above this are tied with the maximum `best` (spec decision 4: 1e-12·max(1, |best|)).
CUBEKIT_HD double tie_floor(double best) { return best - 1e-12 * (::fabs(best) > 1.0 ? ::fabs(best) : 1.0); }

/// Lowest index whose value is tied with the maximum.
CUBEKIT_HD int argmax_tolerant(const double* v, int n) {
    double best = v[0];
    for (int i = 1; i < n; ++i) best = v[i] > best ? v[i] : best;
    const double floor_v = tie_floor(best);
    for (int i = 0; i < n; ++i)
        if (v[i] >= floor_v) return i;
    return 0;
}

/// The objective a split search maximises (spec §3.3, §3.4): Shannon (T1, and T2/T3 when
/// |q − 1| < 1e-9), the seed's J = a·b − 1 (Tsallis q = 0.5), or the pseudo-additive Tsallis form.
enum class Objective : int { Shannon, TsallisSqrt, TsallisPow };

CUBEKIT_HD Objective tsallis_kind(double q) {
    if (::fabs(q - 1.0) < 1e-9) return Objective::Shannon;
    return q == 0.5 ? Objective::TsallisSqrt : Objective::TsallisPow;
}

/// The per-level term whose class sums the objective needs: c·log2 c, √c or c^q.
CUBEKIT_HD double class_term(std::uint32_t count, Objective k, double q) {
    const double c = double(count);
    switch (k) {
        case Objective::Shannon: return c * ::log2(c);
        case Objective::TsallisSqrt: return ::sqrt(c);
        default: return ::pow(c, q);
    }
}

/// The objective of one split from the class masses (exact integers, as doubles) and the class sums
/// of the terms. Shannon: H = log2 N_A − S_A/N_A + log2 N_B − S_B/N_B; J form: (S_A/√M_A)(S_B/√M_B) − 1;
/// pseudo-additive: S_A + S_B + (1 − q) S_A S_B with S = (1 − Σ/M^q)/(q − 1).
CUBEKIT_HD double split_value(Objective k, double q, double n_a, double n_b, double s_a, double s_b) {
    switch (k) {
        case Objective::Shannon: return (::log2(n_a) - s_a / n_a) + (::log2(n_b) - s_b / n_b);
        case Objective::TsallisSqrt: return (s_a / ::sqrt(n_a)) * (s_b / ::sqrt(n_b)) - 1.0;
        default: {
            const double sa = (1.0 - s_a / ::pow(n_a, q)) / (q - 1.0);
            const double sb = (1.0 - s_b / ::pow(n_b, q)) / (q - 1.0);
            return sa + sb + (1.0 - q) * sa * sb;
        }
    }
}

/// The objective over the counts c[0..m−1] for the splits t = 0..m−2 (class A = 0..t), written to
/// h[]. The class sums are accumulated in order: B from the top (no cancellation against a total),
/// A from the bottom; the CUDA thresholds kernel adds the same terms in the same order.
CUBEKIT_HD void split_objective(const std::uint32_t* c, int m, Objective k, double q, double* h) {
    double s_b = 0.0;
    for (int t = m - 2; t >= 0; --t) {
        s_b = s_b + class_term(c[t + 1], k, q);
        h[t] = s_b;
    }
    std::uint64_t total = 0;
    for (int i = 0; i < m; ++i) total += c[i];
    double s_a = 0.0;
    std::uint64_t n_a = 0;
    for (int t = 0; t <= m - 2; ++t) {
        s_a = s_a + class_term(c[t], k, q);
        n_a += c[t];
        h[t] = split_value(k, q, double(n_a), double(total - n_a), s_a, h[t]);
    }
}

CUBEKIT_HD void shannon_objective(const std::uint32_t* c, int m, double* h) { split_objective(c, m, Objective::Shannon, 1.0, h); }
CUBEKIT_HD void tsallis_objective(const std::uint32_t* c, int m, double q, double* h) {
    split_objective(c, m, tsallis_kind(q), q, h);
}

/// The E2 thresholds from the compacted histogram (occupied levels in increasing order with their
/// counts; spec §3.2–3.4). `search(c, m, kind, q)` returns the best split of c[0..m−1] (m ≥ 2): the
/// CPU passes serial_search, the CUDA kernel a warp-parallel search with the same arithmetic.
template <class Search>
CUBEKIT_HD Thr thresholds_from_compacted(const std::uint32_t* counts, const std::uint8_t* levels, int n, double q,
                                         Search&& search) {
    Thr t;
    t.levels = std::uint16_t(n);
    if (n <= 1) {  // a constant band (n = 0 cannot occur for a non-empty image)
        const std::uint8_t l = n == 1 ? levels[0] : 0;
        t.t1 = t.t2 = t.t3 = l;
        t.constant = 1;
        return t;
    }
    const int loc = search(counts, n, Objective::Shannon, 1.0);
    t.loc = std::uint16_t(loc);
    t.t1 = levels[loc];
    // Lower sub-histogram: positions 0..loc (it includes T1); upper: loc+1..n−1. A single entry is T.
    const int m_low = loc + 1, m_high = n - loc - 1;
    const int s_low = m_low >= 2 ? search(counts, m_low, tsallis_kind(q), q) : 0;
    const int s_high = m_high >= 2 ? search(counts + loc + 1, m_high, tsallis_kind(q), q) : 0;
    t.t2 = levels[s_low];
    t.t3 = levels[loc + 1 + s_high];
    return t;
}

/// The serial split search: the objective of every split, then the tolerant argmax.
struct SerialSearch {
    double* objective;  // 256 values of scratch
    int operator()(const std::uint32_t* c, int m, Objective k, double q) const {
        split_objective(c, m, k, q, objective);
        return argmax_tolerant(objective, m - 1);
    }
};

/// Compaction (spec §3.2) and the thresholds, serially (the CPU reference).
inline Thr thresholds_from_histogram(const std::uint32_t* hist, double q) {
    std::uint32_t counts[256];
    std::uint8_t levels[256];
    double objective[256];
    int n = 0;
    for (int g = 0; g < 256; ++g)
        if (hist[g] != 0) {
            counts[n] = hist[g];
            levels[n] = std::uint8_t(g);
            ++n;
        }
    return thresholds_from_compacted(counts, levels, n, q, SerialSearch{objective});
}

}  // namespace cubekit::detail::edges
