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

/// Lowest index whose value is within 1e-12·max(1, |max|) of the maximum (spec decision 4).
CUBEKIT_HD int argmax_tolerant(const double* v, int n) {
    double best = v[0];
    for (int i = 1; i < n; ++i) best = v[i] > best ? v[i] : best;
    const double floor_v = best - 1e-12 * (::fabs(best) > 1.0 ? ::fabs(best) : 1.0);
    for (int i = 0; i < n; ++i)
        if (v[i] >= floor_v) return i;
    return 0;
}

/// Shannon objective over the counts c[0..m−1] (total M): H(t) for t = 0..m−2, written to h[].
/// H(t) = log2 N_A − S_A/N_A + log2 N_B − S_B/N_B with S = Σ c·log2 c; class masses are exact
/// integers and S_B is summed from the top (no cancellation against a total).
CUBEKIT_HD void shannon_objective(const std::uint32_t* c, int m, double* h) {
    // Suffix sums first (into h, shifted): h[t] holds S_B(t) = Σ_{i>t} c_i log2 c_i.
    double s_b = 0.0;
    for (int t = m - 2; t >= 0; --t) {
        const double ci = double(c[t + 1]);
        s_b = s_b + ci * ::log2(ci);
        h[t] = s_b;
    }
    std::uint64_t total = 0;
    for (int i = 0; i < m; ++i) total += c[i];
    double s_a = 0.0;
    std::uint64_t n_a = 0;
    for (int t = 0; t <= m - 2; ++t) {
        const double ci = double(c[t]);
        s_a = s_a + ci * ::log2(ci);
        n_a += c[t];
        const double na = double(n_a), nb = double(total - n_a);
        h[t] = (::log2(na) - s_a / na) + (::log2(nb) - h[t] / nb);
    }
}

/// Tsallis objective over the counts c[0..m−1], s = 0..m−2, written to h[]. q = 0.5: the seed's
/// J = a·b − 1 with a = Σ_A √c / √M_A; other q: the pseudo-additive form; |q − 1| < 1e-9: Shannon.
CUBEKIT_HD void tsallis_objective(const std::uint32_t* c, int m, double q, double* h) {
    if (::fabs(q - 1.0) < 1e-9) {
        shannon_objective(c, m, h);
        return;
    }
    const bool sqrt_form = q == 0.5;
    double s_b = 0.0;
    for (int s = m - 2; s >= 0; --s) {
        const double ci = double(c[s + 1]);
        s_b = s_b + (sqrt_form ? ::sqrt(ci) : ::pow(ci, q));
        h[s] = s_b;
    }
    std::uint64_t total = 0;
    for (int i = 0; i < m; ++i) total += c[i];
    double s_a = 0.0;
    std::uint64_t n_a = 0;
    for (int s = 0; s <= m - 2; ++s) {
        const double ci = double(c[s]);
        s_a = s_a + (sqrt_form ? ::sqrt(ci) : ::pow(ci, q));
        n_a += c[s];
        const double ma = double(n_a), mb = double(total - n_a);
        if (sqrt_form) {
            h[s] = (s_a / ::sqrt(ma)) * (h[s] / ::sqrt(mb)) - 1.0;
        } else {
            const double sa = (1.0 - s_a / ::pow(ma, q)) / (q - 1.0);
            const double sb = (1.0 - h[s] / ::pow(mb, q)) / (q - 1.0);
            h[s] = sa + sb + (1.0 - q) * sa * sb;
        }
    }
}

/// The E2 thresholds of one 256-bin histogram (spec §3.2–3.4). `scratch` holds 2·256 values
/// (compacted counts reinterpret the first 256·4 bytes of a separate buffer on the device).
CUBEKIT_HD Thr thresholds_from_histogram(const std::uint32_t* hist, double q, std::uint32_t* counts,
                                         std::uint8_t* levels, double* objective) {
    int n = 0;
    for (int g = 0; g < 256; ++g)
        if (hist[g] != 0) {
            counts[n] = hist[g];
            levels[n] = std::uint8_t(g);
            ++n;
        }
    Thr t;
    t.levels = std::uint16_t(n);
    if (n <= 1) {  // a constant band (n = 0 cannot occur for a non-empty image)
        const std::uint8_t l = n == 1 ? levels[0] : 0;
        t.t1 = t.t2 = t.t3 = l;
        t.constant = 1;
        return t;
    }
    shannon_objective(counts, n, objective);
    const int loc = argmax_tolerant(objective, n - 1);
    t.loc = std::uint16_t(loc);
    t.t1 = levels[loc];
    // Lower sub-histogram: positions 0..loc (it includes T1); upper: loc+1..n−1.
    const int m_low = loc + 1, m_high = n - loc - 1;
    int s_low = 0, s_high = 0;
    if (m_low >= 2) {
        tsallis_objective(counts, m_low, q, objective);
        s_low = argmax_tolerant(objective, m_low - 1);
    }
    if (m_high >= 2) {
        tsallis_objective(counts + loc + 1, m_high, q, objective);
        s_high = argmax_tolerant(objective, m_high - 1);
    }
    t.t2 = levels[s_low];
    t.t3 = levels[loc + 1 + s_high];
    return t;
}

}  // namespace cubekit::detail::edges
