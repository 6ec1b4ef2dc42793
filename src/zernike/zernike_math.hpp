#pragma once
// Per-pixel arithmetic of the Zernike moments that the CPU reference and the CUDA kernels share
// (spec zernike.md §3.3–3.8), so that both backends evaluate every basis value with the same
// operations in the same order; only the order of the pixel sums differs between them.
#include <cstdint>

#include "core/hd.hpp"

namespace cubekit::zernike {

template <typename T>
struct Cplx {
    T re, im;
};

template <typename T>
CUBEKIT_HD Cplx<T> cmul(Cplx<T> a, Cplx<T> b) {
    return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}

/// w^m by binary powering (⌈log2 m⌉ squarings): relative error ~ log2(m)·ε, |w| ≤ 1. `mul` is the
/// complex product (cmul; the CUDA chain kernel passes an FMA version).
template <typename T, typename Mul>
CUBEKIT_HD Cplx<T> cpow(Cplx<T> w, int m, Mul mul) {
    Cplx<T> result{T(1), T(0)};
    Cplx<T> base = w;
    while (m > 0) {
        if (m & 1) result = mul(result, base);
        m >>= 1;
        if (m > 0) base = mul(base, base);
    }
    return result;
}

template <typename T>
CUBEKIT_HD Cplx<T> cpow(Cplx<T> w, int m) {
    return cpow(w, m, [](Cplx<T> a, Cplx<T> b) { return cmul(a, b); });
}

/// Kintner step coefficients of R̃(n,m) (n ≥ m + 4): R̃n = (a·t + b)·R̃(n−2) + c·R̃(n−4).
struct KintnerCoef {
    double a, b, c;
};
/// q-recursion coefficients of S(m) (m ≤ n − 4): S(m) = H1·t²·S(m+4) + (H2·t + H3)·S(m+2).
struct QRecCoef {
    double h1, h2, h3;
};

/// One step of the Kintner chain: from R̃(n−2) = r1 and R̃(n−4) = r2.
template <typename T>
CUBEKIT_HD T kintner_step(const KintnerCoef& k, T t, T r1, T r2) {
    return (T(k.a) * t + T(k.b)) * r1 + T(k.c) * r2;
}
/// R̃(m+2, m) = (m+2)·t − (m+1).
template <typename T>
CUBEKIT_HD T kintner_second(int m, T t) {
    return T(m + 2) * t - T(m + 1);
}
/// One downward q-recursion step: S(m) from S(m+4) = s4 and S(m+2) = s2.
template <typename T>
CUBEKIT_HD T qrec_step(const QRecCoef& h, T t, T s4, T s2) {
    return T(h.h1) * (t * t) * s4 + (T(h.h2) * t + T(h.h3)) * s2;
}
/// S(n−2) = R̃(n, n−2) = n·t − (n−1).
template <typename T>
CUBEKIT_HD T qrec_second(int n, T t) {
    return T(n) * t - T(n - 1);
}

/// The 8 mirror values of a representative (u ≥ v ≥ 0) folded per spec §3.6:
///   Sa(k) = a0 + (−j)^k a1 + (−1)^k a2 + j^k a3 (a = f(u,v), f(−v,u), f(−u,−v), f(v,−u))
///   Sb(k) likewise from b = f(u,−v), f(v,u), f(−u,v), f(−v,−u)
/// kept as Sa(0) = sa0, Sa(2) = sa2, Sa(1) = da + j·ea, Sa(3) = da − j·ea (same for b).
/// A plain pixel of value f is {f, f, f, 0, 0, 0, 0, 0}.
struct Folded {
    double sa0, sa2, da, ea, sb0, sb2, db, eb;
};

CUBEKIT_HD Folded fold(double a0, double a1, double a2, double a3, double b0, double b1, double b2, double b3) {
    const double pa = a0 + a2, qa = a1 + a3, pb = b0 + b2, qb = b1 + b3;
    return {pa + qa, pa - qa, a0 - a2, a3 - a1, pb + qb, pb - qb, b0 - b2, b3 - b1};
}

/// Folded values of the representative (u, v), u ≥ v ≥ 0 (spec §3.6 partition rules): the
/// diagonal u = v and the axis v = 0 have 4 distinct mirrors (Sb = 0), the centre has one.
/// f(u, v) returns the pixel value at centred coordinates (u, v).
template <typename F>
CUBEKIT_HD Folded fold_representative(const F& f, int u, int v) {
    if (u == 0 && v == 0) return fold(f(0, 0), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    const double a0 = f(u, v), a1 = f(-v, u), a2 = f(-u, -v), a3 = f(v, -u);
    if (u == v || v == 0) return fold(a0, a1, a2, a3, 0.0, 0.0, 0.0, 0.0);
    return fold(a0, a1, a2, a3, f(u, -v), f(v, u), f(-u, v), f(-v, -u));
}

/// A plain (non-symmetric) point of value f.
CUBEKIT_HD Folded plain_point(double f) { return fold(f, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0); }

/// Position of (n, m) in a whole set (canonical order).
CUBEKIT_HD std::int64_t set_index(int n, int m) {
    const std::int64_t a = std::int64_t(n) + 1;
    return a * a / 4 + (m - n % 2) / 2;
}

/// Sa(m mod 4) = ar + j·ai and Sb(m mod 4) = br + j·bi of a folded point.
CUBEKIT_HD void folded_sums(const Folded& f, int m, double& ar, double& ai, double& br, double& bi) {
    switch (m & 3) {
        case 0: ar = f.sa0; ai = 0.0; br = f.sb0; bi = 0.0; break;
        case 1: ar = f.da; ai = f.ea; br = f.db; bi = f.eb; break;
        case 2: ar = f.sa2; ai = 0.0; br = f.sb2; bi = 0.0; break;
        default: ar = f.da; ai = -f.ea; br = f.db; bi = -f.eb; break;
    }
}

/// P = w^m·Sa(m mod 4) + conj(w^m)·Sb(m mod 4): the angular factor of a representative, to be
/// multiplied by R̃(n, m) for every n of repetition m.
CUBEKIT_HD Cplx<double> angular_sum(Cplx<double> wm, const Folded& f, int m) {
    double ar, ai, br, bi;
    folded_sums(f, m, ar, ai, br, bi);
    // w·Sa + conj(w)·Sb
    return {(wm.re * ar - wm.im * ai) + (wm.re * br + wm.im * bi),
            (wm.re * ai + wm.im * ar) + (wm.re * bi - wm.im * br)};
}

/// Integer-centred geometry (Inscribed, Circumscribed): u = 2x + 1 − W, v = H − 1 − 2y, D² an
/// integer; X = u/D, Y = v/D, t = (u² + v²)/D² with a single rounding.
struct CentredGeometry {
    std::int64_t d2;  ///< D²
    double d;         ///< D = √D²
};

CUBEKIT_HD void centred_point(const CentredGeometry& g, int u, int v, double& X, double& Y, double& t) {
    X = double(u) / g.d;
    Y = double(v) / g.d;
    t = double(std::int64_t(u) * u + std::int64_t(v) * v) / double(g.d2);
}

/// Custom disk: X = (x − cx)/ρ, Y = (cy − y)/ρ, t = X² + Y².
CUBEKIT_HD void custom_point(double cx, double cy, double rho, int x, int y, double& X, double& Y, double& t) {
    X = (double(x) - cx) / rho;
    Y = (cy - double(y)) / rho;
    t = X * X + Y * Y;
}

/// Reconstruction at one point (spec §3.12): Σ_{n ≤ K} [A(n,0) R̃(n,0) + 2 Σ_{m>0} Re(A(n,m) R̃(n,m)
/// (X + jY)^m)]; A holds one image's whole set n ≤ K, kc the Kintner coefficients by set index.
CUBEKIT_HD double reconstruct_point(const Cplx<double>* A, int K, const KintnerCoef* kc, double X, double Y,
                                    double t) {
    const Cplx<double> z{X, Y};
    Cplx<double> zm{1.0, 0.0};
    double total = 0.0;
    for (int m = 0; m <= K; ++m) {
        if (m > 0) zm = cmul(zm, z);
        double r1 = 1.0, r2 = 0.0, sum = 0.0;
        for (int n = m; n <= K; n += 2) {
            if (n > m) {
                const double r = n == m + 2 ? kintner_second(m, t) : kintner_step(kc[set_index(n, m)], t, r1, r2);
                r2 = r1;
                r1 = r;
            }
            const Cplx<double> a = A[set_index(n, m)];
            sum += r1 * (a.re * zm.re - a.im * zm.im);
        }
        total += m == 0 ? sum : 2.0 * sum;
    }
    return total;
}

}  // namespace cubekit::zernike
