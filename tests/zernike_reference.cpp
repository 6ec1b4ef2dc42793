// Independent exact reference for the Zernike moments (spec zernike.md §5.1); see the header.
// Nothing here comes from src/zernike: the pixel set, the count, the β coefficients, the sums and
// the Jacobi evaluation are written from the spec's formulas alone.
#include "zernike_reference.hpp"

#include <boost/math/constants/constants.hpp>
#include <boost/multiprecision/cpp_bin_float.hpp>
#include <boost/multiprecision/cpp_int.hpp>

#include <cmath>
#include <map>
#include <stdexcept>

namespace cubekit::zernike_reference {

namespace {

using boost::multiprecision::cpp_int;
using Big = boost::multiprecision::cpp_bin_float_100;

std::int64_t squared_diameter(int width, int height, Mapping mapping) {
    const std::int64_t W = width, H = height;
    if (mapping == Mapping::Circumscribed) return W * W + H * H;
    const std::int64_t D = W < H ? W : H;
    return D * D;
}

bool centre_inside(std::int64_t u, std::int64_t v, std::int64_t d2, Mapping mapping) {
    return mapping == Mapping::Circumscribed || u * u + v * v <= d2;
}

// n! (cached: the tests run on one thread).
cpp_int factorial(int n) {  // by value: a later call may grow the table
    static std::vector<cpp_int> table(1, cpp_int(1));
    while (int(table.size()) <= n) table.push_back(table.back() * int(table.size()));
    return table[std::size_t(n)];
}

// β(n,m,k) straight from the factorial definition (spec §3.1).
cpp_int beta(int n, int m, int k) {
    const cpp_int q = factorial(n - k) / (factorial(k) * factorial((n + m) / 2 - k) * factorial((n - m) / 2 - k));
    return k % 2 ? cpp_int(-q) : q;
}

void check_nm(int n, int m) {
    if (n < 0 || m < 0 || m > n || (n - m) % 2)
        throw std::invalid_argument("zernike_reference: invalid (n, m) = (" + std::to_string(n) + ", " +
                                    std::to_string(m) + ")");
}

// A double t ≥ 0 as the exact fraction a / 2^s.
void dyadic(double t, cpp_int& a, unsigned& s) {
    if (!(t >= 0.0) || !std::isfinite(t)) throw std::invalid_argument("zernike_reference: t must be finite and >= 0");
    int e = 0;
    const double mant = std::frexp(t, &e);  // t = mant · 2^e, mant in [0.5, 1)
    const auto integer = std::int64_t(std::ldexp(mant, 53));
    e -= 53;
    a = integer;
    s = 0;
    if (e >= 0)
        a <<= unsigned(e);
    else
        s = unsigned(-e);
}

}  // namespace

std::int64_t pixel_count(int width, int height, Mapping mapping) {
    const std::int64_t d2 = squared_diameter(width, height, mapping);
    std::int64_t cnt = 0;
    for (std::int64_t y = 0; y < height; ++y) {
        const std::int64_t v = height - 1 - 2 * y;
        for (std::int64_t x = 0; x < width; ++x) cnt += centre_inside(2 * x + 1 - width, v, d2, mapping) ? 1 : 0;
    }
    return cnt;
}

std::string beta_string(int n, int m, int k) {
    check_nm(n, m);
    return beta(n, m, k).str();
}

long double radial_exact(int n, int m, double t) {
    check_nm(n, m);
    cpp_int a;
    unsigned s = 0;
    dyadic(t, a, s);
    const int h = (n - m) / 2;
    // R̃(t) · 2^(s·h) = Σ_k β_k a^(h−k) 2^(s·k): an integer.
    cpp_int sum = 0;
    for (int k = 0; k <= h; ++k) sum += (beta(n, m, k) * cpp_int(pow(a, unsigned(h - k)))) << (s * unsigned(k));
    Big value(sum);
    value = ldexp(value, -int(s) * h);
    return value.convert_to<long double>();
}

std::vector<long double> radial_jacobi_column(int nmax, int m, double t) {
    check_nm(m, m);
    if (nmax < m) return {};
    if (!(t >= 0.0) || !std::isfinite(t)) throw std::invalid_argument("zernike_reference: t must be finite and >= 0");
    // P_h^(α,β)(x) with α = 0, β = m, x = 2t − 1 (spec §3.3): R̃(m + 2h, m)(t) = P_h^(0,m)(2t − 1).
    using Jf = boost::multiprecision::cpp_bin_float_50;
    const int H = (nmax - m) / 2;
    const Jf x = Jf(2) * Jf(t) - 1, b = m;
    std::vector<long double> out;
    Jf p0 = 1, p1 = 1 + (b + 2) * (x - 1) / 2;
    out.push_back(1.0L);
    if (H >= 1) out.push_back(p1.convert_to<long double>());
    for (int k = 2; k <= H; ++k) {
        // 2k(k+β)(2k+β−2) P_k = (2k+β−1)[(2k+β)(2k+β−2) x − β²] P_(k−1) − 2(k−1)(k+β−1)(2k+β) P_(k−2)
        const Jf c = 2 * k + b;
        const Jf p2 = ((c - 1) * (c * (c - 2) * x - b * b) * p1 - 2 * Jf(k - 1) * (k + b - 1) * c * p0) /
                      (2 * Jf(k) * (k + b) * (c - 2));
        p0 = p1;
        p1 = p2;
        out.push_back(p1.convert_to<long double>());
    }
    return out;
}

long double radial_jacobi(int n, int m, double t) {
    check_nm(n, m);
    return radial_jacobi_column(n, m, t).back();
}

// T[m][p] = Σ f (u − jv)^m (u² + v²)^p as exact Gaussian integers, m ≤ nmax, p ≤ (nmax − m)/2.
struct ExactMoments::Sums {
    Mapping mapping = Mapping::Inscribed;
    std::int64_t d2 = 0;
    std::vector<std::vector<cpp_int>> re, im;
};

ExactMoments::ExactMoments(int width, int height, const std::vector<std::int64_t>& f, int nmax, Mapping mapping)
    : nmax_(nmax), sums_(std::make_unique<Sums>()) {
    if (width < 1 || height < 1 || f.size() != std::size_t(width) * std::size_t(height) || nmax < 0)
        throw std::invalid_argument("zernike_reference: bad image or order");
    Sums& S = *sums_;
    S.mapping = mapping;
    S.d2 = squared_diameter(width, height, mapping);
    // Ring sums G[s][m] = Σ_{u²+v² = s} f (u − jv)^m first: the powers of s are then shared by
    // every pixel of the ring.
    std::map<std::int64_t, std::vector<std::pair<cpp_int, cpp_int>>> rings;
    double abs_sum = 0.0;
    for (int y = 0; y < height; ++y) {
        const std::int64_t v = std::int64_t(height) - 1 - 2 * std::int64_t(y);
        for (int x = 0; x < width; ++x) {
            const std::int64_t u = 2 * std::int64_t(x) + 1 - width;
            if (!centre_inside(u, v, S.d2, mapping)) continue;
            ++count_;
            const std::int64_t value = f[std::size_t(y) * std::size_t(width) + std::size_t(x)];
            abs_sum += std::fabs(double(value));
            if (value == 0) continue;
            auto& ring = rings[u * u + v * v];
            if (ring.empty()) ring.resize(std::size_t(nmax) + 1);
            cpp_int zr = value, zi = 0;  // f (u − jv)^m
            for (int m = 0; m <= nmax; ++m) {
                ring[std::size_t(m)].first += zr;
                ring[std::size_t(m)].second += zi;
                const cpp_int nr = zr * u + zi * v;
                zi = zi * u - zr * v;
                zr = nr;
            }
        }
    }
    mean_abs_ = count_ ? abs_sum / double(count_) : 0.0;
    S.re.resize(std::size_t(nmax) + 1);
    S.im.resize(std::size_t(nmax) + 1);
    for (int m = 0; m <= nmax; ++m) {
        S.re[std::size_t(m)].assign(std::size_t((nmax - m) / 2) + 1, 0);
        S.im[std::size_t(m)].assign(std::size_t((nmax - m) / 2) + 1, 0);
    }
    for (const auto& [s, ring] : rings)
        for (int m = 0; m <= nmax; ++m) {
            cpp_int yr = ring[std::size_t(m)].first, yi = ring[std::size_t(m)].second;
            const int P = (nmax - m) / 2;
            for (int p = 0; p <= P; ++p) {
                S.re[std::size_t(m)][std::size_t(p)] += yr;
                S.im[std::size_t(m)][std::size_t(p)] += yi;
                if (p < P) {
                    yr *= s;
                    yi *= s;
                }
            }
        }
}

ExactMoments::~ExactMoments() = default;
ExactMoments::ExactMoments(ExactMoments&&) noexcept = default;
ExactMoments& ExactMoments::operator=(ExactMoments&&) noexcept = default;

std::complex<double> ExactMoments::moment(int n, int m, Norm norm) const {
    check_nm(n, m);
    if (n > nmax_) throw std::invalid_argument("zernike_reference: order above the reference's nmax");
    const Sums& S = *sums_;
    const int h = (n - m) / 2;
    cpp_int re = 0, im = 0, d2k = 1;  // Σ_k β_k (D²)^k T[m][h−k]
    for (int k = 0; k <= h; ++k) {
        const cpp_int c = beta(n, m, k) * d2k;
        re += c * S.re[std::size_t(m)][std::size_t(h - k)];
        im += c * S.im[std::size_t(m)][std::size_t(h - k)];
        d2k *= S.d2;
    }
    // D^n = (D²)^⌊n/2⌋ · (√D² when n is odd).
    Big dn(cpp_int(pow(cpp_int(S.d2), unsigned(n / 2))));
    if (n % 2) dn *= sqrt(Big(S.d2));
    Big denominator = norm == Norm::PixelCount
                          ? Big(count_)
                          : boost::math::constants::pi<Big>() * Big(S.d2) / 4;  // πρ², ρ = D/2
    denominator *= dn;
    const Big factor = Big(n + 1) / denominator;
    return {(Big(re) * factor).convert_to<double>(), (Big(im) * factor).convert_to<double>()};
}

}  // namespace cubekit::zernike_reference
