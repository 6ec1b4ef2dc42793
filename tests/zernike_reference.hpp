#pragma once
// Independent exact reference for the Zernike moments (spec zernike.md §5.1). It shares no code
// with src/zernike and calls no cubekit Zernike function: the pixel set, the count, the β
// coefficients (factorials) and the sums are all computed here, in exact integer arithmetic
// (Boost.Multiprecision), and rounded to double only at the very end.
//
// With u = 2x + 1 − W, v = H − 1 − 2y and D² the integer squared diameter (Inscribed: min(W,H)²,
// Circumscribed: W² + H²), X = u/D, Y = v/D and
//     D^n · V*(n,m)(X,Y) = Σ_k β(n,m,k) (u² + v²)^(h−k) (D²)^k (u − jv)^m,   h = (n − m)/2,
// a Gaussian integer. For an integer image the moment
//     A(n,m) = (n + 1) / (cnt · D^n) · Σ f · (...)           (PixelCount)
//     A(n,m) = (n + 1) / (π D²/4 · D^n) · Σ f · (...)         (Area, ρ = D/2)
// is an exact rational (times 1/π for Area). The sums T[m][p] = Σ f (u − jv)^m (u² + v²)^p are
// accumulated once, so a whole set costs one pass over the pixels.
#include <complex>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cubekit::zernike_reference {

enum class Mapping { Inscribed, Circumscribed };
enum class Norm { PixelCount, Area };

/// Pixels of a W×H image whose centre is inside the disk, counted pixel by pixel.
std::int64_t pixel_count(int width, int height, Mapping mapping = Mapping::Inscribed);

/// β(n, m, k) = (−1)^k (n−k)! / (k! ((n+m)/2 − k)! ((n−m)/2 − k)!) as a decimal string (exact).
std::string beta_string(int n, int m, int k);

/// R̃(n,m)(t) = Σ_k β(n,m,k) t^(h−k) at the exact value of the double t (t converted exactly to a
/// dyadic rational, the sum done in integers), rounded once to long double.
long double radial_exact(int n, int m, double t);
/// The Jacobi form R̃(n,m)(t) = P_h^(0,m)(2t − 1) (three-term Jacobi recurrence in n, evaluated
/// in 50-digit binary floating point), rounded to long double. A second, independent formula.
long double radial_jacobi(int n, int m, double t);
/// The same for every order of repetition m at once: element i is R̃(m + 2i, m)(t), m + 2i ≤ nmax.
std::vector<long double> radial_jacobi_column(int nmax, int m, double t);

/// Exact moments of one integer image up to order nmax.
class ExactMoments {
public:
    /// f: H rows of W samples, row 0 on top (f[y * W + x]).
    ExactMoments(int width, int height, const std::vector<std::int64_t>& f, int nmax,
                 Mapping mapping = Mapping::Inscribed);
    ~ExactMoments();
    ExactMoments(ExactMoments&&) noexcept;
    ExactMoments& operator=(ExactMoments&&) noexcept;

    int max_order() const { return nmax_; }
    std::int64_t count() const { return count_; }
    /// Mean of |f| over the pixels inside the disk (the scale of the normalised error e).
    double mean_abs() const { return mean_abs_; }
    /// A(n, m), 0 ≤ m ≤ n ≤ nmax, n − m even, rounded once to double from ≥ 100 digits.
    std::complex<double> moment(int n, int m, Norm norm = Norm::PixelCount) const;

private:
    struct Sums;
    int nmax_ = 0;
    std::int64_t count_ = 0;
    double mean_abs_ = 0.0;
    std::unique_ptr<Sums> sums_;
};

}  // namespace cubekit::zernike_reference
