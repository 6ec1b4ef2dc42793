#pragma once
// The arithmetic of k-means that the CPU reference and the CUDA kernels must share bit for bit
// (spec kmeans.md §3.4–3.7): the Philox generator, the per-pixel distance, the fixed-point
// conversions, the k-means++ threshold and the centroid update. Every function is host+device.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/hd.hpp"

namespace cubekit::detail::km {

using i128 = __int128;
using u128 = unsigned __int128;

// The C math functions under one name for host and device passes (std:: on the host, CUDA's
// device functions on the device).
#if defined(__CUDA_ARCH__)
CUBEKIT_HD float fma32(float a, float b, float c) { return ::fmaf(a, b, c); }
CUBEKIT_HD double fma64(double a, double b, double c) { return ::fma(a, b, c); }
CUBEKIT_HD std::int64_t round_to_int64(double v) { return ::llrint(v); }
CUBEKIT_HD double scale2(double v, int e) { return ::ldexp(v, e); }
#else
inline float fma32(float a, float b, float c) { return std::fmaf(a, b, c); }
inline double fma64(double a, double b, double c) { return std::fma(a, b, c); }
inline std::int64_t round_to_int64(double v) { return std::llrint(v); }
inline double scale2(double v, int e) { return std::ldexp(v, e); }
#endif

// Philox4x32-10 (Salmon et al., SC'11): counter (c0..c3), key (k0, k1).
struct Philox4 {
    std::uint32_t v[4];
};

CUBEKIT_HD void mulhilo32(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
    const std::uint64_t p = std::uint64_t(a) * std::uint64_t(b);
    hi = std::uint32_t(p >> 32);
    lo = std::uint32_t(p);
}

CUBEKIT_HD Philox4 philox4x32_10(std::uint64_t counter, std::uint32_t stream, std::uint64_t seed) {
    std::uint32_t c0 = std::uint32_t(counter), c1 = std::uint32_t(counter >> 32), c2 = stream, c3 = 0;
    std::uint32_t k0 = std::uint32_t(seed), k1 = std::uint32_t(seed >> 32);
    for (int round = 0; round < 10; ++round) {
        std::uint32_t hi0, lo0, hi1, lo1;
        mulhilo32(0xD2511F53u, c0, hi0, lo0);
        mulhilo32(0xCD9E8D57u, c2, hi1, lo1);
        const std::uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return Philox4{{c0, c1, c2, c3}};
}

/// The 53 random bits of draw `counter` on `stream`: u = bits · 2^−53 ∈ [0, 1) (spec §3.4).
CUBEKIT_HD std::uint64_t draw53(std::uint64_t seed, std::uint32_t stream, std::uint64_t counter) {
    const Philox4 r = philox4x32_10(counter, stream, seed);
    return ((std::uint64_t(r.v[0]) << 32) | r.v[1]) >> 11;
}

CUBEKIT_HD double uniform01(std::uint64_t bits53) { return double(bits53) * 0x1.0p-53; }

/// The init sample keeps valid pixel i (its index among the valid pixels) when its stream-0 draw
/// is below rate = init_sample / N (spec §3.4).
CUBEKIT_HD bool in_sample(std::uint64_t seed, std::int64_t valid_index, double rate) {
    return uniform01(draw53(seed, 0, std::uint64_t(valid_index))) < rate;
}

/// ⌊u · n⌋ for u = bits53 · 2^−53, computed exactly in integers.
CUBEKIT_HD std::uint64_t scaled_index(std::uint64_t bits53, std::uint64_t n) {
    return std::uint64_t((u128(bits53) * u128(n)) >> 53);
}

/// ⌊u · φ⌋ for u = bits53 · 2^−53 and 0 ≤ φ < 2^127, exactly: the k-means++ candidate is the first
/// sample whose inclusive prefix sum P exceeds u·φ, i.e. P > ⌊u·φ⌋ for integer P.
CUBEKIT_HD i128 scaled_threshold(std::uint64_t bits53, i128 phi) {
    const u128 p = u128(phi);
    const u128 lo = p & ~std::uint64_t(0);
    const u128 hi = p >> 64;
    const u128 lo_prod = lo * bits53;             // < 2^117
    const u128 hi_prod = hi * bits53;             // < 2^116
    // (hi_prod·2^64 + lo_prod) >> 53 = hi_prod·2^11 + (lo_prod >> 53) exactly (both parts integers
    // once the low 53 bits of lo_prod are dropped; hi_prod·2^64 has no bits below 2^64).
    return i128((hi_prod << 11) + (lo_prod >> 53));
}

/// The m samples of one pixel, `stride` elements apart (1 for BIP): how the CPU reference reads a
/// pixel of any view. Distances read x[b] through it exactly as through a pointer.
template <typename T>
struct Spectrum {
    const T* first;
    std::int64_t stride;
    CUBEKIT_HD T operator[](int b) const { return first[std::int64_t(b) * stride]; }
};

/// Squared Euclidean distance in the spec's order: bands 0..m−1, each term added with one FMA.
/// `x` is a pointer or a Spectrum: anything whose x[b] is sample b.
template <typename X, typename D>
CUBEKIT_HD D sq_distance(X x, const D* c, int m) {
    D d = 0;
    for (int b = 0; b < m; ++b) {
        const D diff = D(x[b]) - c[b];
        if constexpr (std::is_same_v<D, float>) d = fma32(diff, diff, d);
        else d = fma64(diff, diff, d);
    }
    return d;
}

/// Fixed point of a value: llrint(v · 2^e) (the spec's q(x) with the run's exponent e).
CUBEKIT_HD std::int64_t to_fixed(double v, int e) { return round_to_int64(scale2(v, e)); }
/// The same with the power of two precomputed (scale = 2^e, a normal double): v · 2^e is exact
/// (no overflow by the choice of e; results below 2^−1022 round to 0 either way).
CUBEKIT_HD std::int64_t to_fixed_scaled(double v, double scale) { return round_to_int64(v * scale); }

/// q(x) for the first-order sums: integers as they are (e = 0), floats in fixed point (scale = 2^e).
template <typename T>
CUBEKIT_HD std::int64_t sum_value(T x, double scale) {
    if constexpr (std::is_integral_v<T>) return std::int64_t(x);
    else return to_fixed_scaled(double(x), scale);
}

/// Exact squared distance in the fixed point of exponent e_d (k-means++ weights, restart choice).
/// scale_d = 2^e_d.
template <typename X>
CUBEKIT_HD i128 exact_distance(X x, const std::int64_t* qc, int m, double scale_d) {
    i128 d = 0;
    for (int b = 0; b < m; ++b) {
        const i128 diff = i128(to_fixed_scaled(double(x[b]), scale_d)) - i128(qc[b]);
        d += diff * diff;
    }
    return d;
}

/// A cluster that has no centroid yet (k-means++ found fewer distinct vectors) holds +∞ in every
/// band: its distance is +∞ and it never wins an assignment.
template <typename D>
CUBEKIT_HD bool is_unset(const D* c) { return c[0] == D(INFINITY); }

/// Centroid update of cluster j (spec §3.5–3.7): new centroid from the exact sums, the empty-cluster
/// policy, and this cluster's contribution to the shift Σ_b (c'_b − c_b)² (f64, band order).
/// policy: 0 relocate/keep (keep the centroid), 2 legacy-zero; legacy: integer floor of the mean.
/// Returns +∞ when an unset cluster becomes set (never converged in that iteration).
template <typename D>
CUBEKIT_HD double update_cluster(const std::int64_t* sums, std::int64_t count, D* c, int m, int e, bool zero_empty,
                                 bool legacy) {
    const bool was_unset = is_unset(c);
    if (count == 0 && !zero_empty) return 0.0;
    double shift = 0;
    for (int b = 0; b < m; ++b) {
        D next;
        if (count == 0) next = D(0);
        else if (legacy) next = D(sums[b] / count);  // integer division, the seed's truncation
        else next = D(scale2(double(sums[b]), -e) / double(count));
        if (!was_unset) {
            const double diff = double(next) - double(c[b]);
            shift += diff * diff;
        }
        c[b] = next;
    }
    return was_unset ? INFINITY : shift;
}

/// Nearest set centroid of x (ties: lowest index); returns the index, writes the distance.
template <typename X, typename D>
CUBEKIT_HD int nearest(X x, const D* centroids, int k, int m, D& best) {
    best = sq_distance(x, centroids, m);
    int label = 0;
    for (int j = 1; j < k; ++j) {
        const D d = sq_distance(x, centroids + std::size_t(j) * m, m);
        if (d < best) {
            best = d;
            label = j;
        }
    }
    return label;
}

}  // namespace cubekit::detail::km
