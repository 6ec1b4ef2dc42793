#pragma once
// E6 baselines (spec edges.md §3.10): the plan the front door resolves once, and the per-pixel rules
// shared by the CPU reference (baselines.cpp) and the CUDA kernels (baselines_cuda.cu). Sharing the
// CUBEKIT_HD functions means both backends perform the same operations in the same order (host
// -ffp-contract=off, CUDA --fmad=false), so their maps agree exactly.
//
// Reproduced from MATLAB R2016 edge() (and its 2017 code-generation twin, which spells out the
// same rules in M-code). Choices where MATLAB's arithmetic is not visible:
//   * sobel/prewitt/roberts gradients are computed exactly in integers on the 8-bit levels. MATLAB
//     works in f32 on v/255 with masks /8, /6, /2; the scale cancels in the automatic cutoff and in
//     every comparison, so the integer map is MATLAB's up to f32 rounding ties. A given threshold T
//     (MATLAB's scale) is compared as gx² + gy² > T²·(255·s)², s = 8, 6, 2.
//   * log and canny work in f32 (imfilter on a single image), kernels built in f64 as MATLAB
//     builds them and rounded to f32, taps summed in a fixed order; the canny magnitude is
//     sqrt in f64 rounded to f32 (a correctly rounded hypot).
//   * global reductions are order-independent (integer sums, maxima, histogram counts) or, for
//     the LoG's mean |response|, a fixed f64 order both backends follow (kSumLanes below).
//   * thresholds are compared in f64 (f32 values promoted), as MATLAB compares single with double.
#include <math.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/hd.hpp"
#include "cubekit/edge_baselines.hpp"

namespace cubekit::detail {

/// Everything a backend needs, resolved and validated by the front door.
struct BaselinePlan {
    BaselineMethod method = BaselineMethod::Canny;
    bool automatic = true;     ///< MATLAB's automatic threshold rule
    double threshold = 0;      ///< the given threshold (MATLAB's scale) when !automatic
    double low_ratio = 0.4;    ///< canny: low = low_ratio · high
    bool thin = true;          ///< sobel/prewitt/roberts thinning
    // sobel / prewitt / roberts
    int mask_scale = 4;              ///< automatic cutoff = mask_scale · mean(gx² + gy²)  (4; roberts 6)
    int mask_divisor = 8;            ///< MATLAB's mask normalisation (sobel 8, prewitt 6, roberts 2)
    std::int64_t fixed_cutoff = 0;   ///< given threshold: an edge needs gx² + gy² > fixed_cutoff
    // log / canny
    double sigma = 0;
    int radius = 0;                  ///< kernel half-width: log (fsize−1)/2, canny ⌈4σ⌉
    std::vector<float> log_kernel;   ///< (2·radius+1)² taps, row-major [dy][dx], correlation
    std::vector<float> gauss;        ///< canny, 2·radius+1 taps (convolution)
    std::vector<float> dgauss;       ///< canny, derivative of the Gaussian, 2·radius+1 taps
};

/// Validates the options and builds the kernels (baselines.cpp).
BaselinePlan make_baseline_plan(const BaselineOptions& options);

/// The backends: E1 (quantize_to_u8_into, per band) of `cube`, then the detector; `edges` (W×H×B
/// u8, any strides) fully written; `thresholds` the ones actually applied, per band, on MATLAB's
/// scale. CPU: cube and edges host views (the cube read where it is, one band at a time). CUDA:
/// edges a device view on the context's device; the cube anywhere (E1 reads a dense BSQ chunk on
/// the context's device where it is, and uploads or reorders anything else once, chunk by chunk).
void baseline_cpu(const Context& ctx, const CubeView& cube, const BaselinePlan& plan, const MutableCubeView& edges,
                  std::vector<BaselineThreshold>& thresholds);
void baseline_cuda(const Context& ctx, const CubeView& cube, const BaselinePlan& plan, const MutableCubeView& edges,
                   std::vector<BaselineThreshold>& thresholds);

// ---- shared arithmetic ---------------------------------------------------------------------------

/// im2single of an 8-bit level: v / 255 in f32 (both backends divide, IEEE-rounded).
CUBEKIT_HD float unit_level(std::uint8_t v) { return float(v) / 255.0f; }

CUBEKIT_HD int clamp_index(int v, int last) { return v < 0 ? 0 : (v > last ? last : v); }

/// Integer gradients of MATLAB's masks at (x, y) of a W×H u8 plane, borders replicated (imfilter
/// 'replicate', correlation). Sobel/Prewitt (fspecial's op, x mask = op'): gx = left column − right
/// column, gy = top row − bottom row, centre weight 2 (sobel) or 1. Roberts (2×2 masks anchored at
/// their top-left tap): gx = v(x,y) − v(x+1,y+1), gy = v(x+1,y) − v(x,y+1). Signs do not matter:
/// only |gx|, |gy| and gx² + gy² are used.
CUBEKIT_HD void mask_gradient(const std::uint8_t* plane, int W, int H, int x, int y, BaselineMethod method,
                              int& gx, int& gy) {
    const int x0 = clamp_index(x - 1, W - 1), x2 = clamp_index(x + 1, W - 1);
    const int y0 = clamp_index(y - 1, H - 1), y2 = clamp_index(y + 1, H - 1);
    const std::size_t w = std::size_t(W);
    const auto v = [&](int xx, int yy) { return int(plane[std::size_t(yy) * w + std::size_t(xx)]); };
    if (method == BaselineMethod::Roberts) {
        gx = v(x, y) - v(x2, y2);
        gy = v(x2, y) - v(x, y2);
        return;
    }
    const int c = method == BaselineMethod::Sobel ? 2 : 1;
    gx = (v(x0, y0) + c * v(x0, y) + v(x0, y2)) - (v(x2, y0) + c * v(x2, y) + v(x2, y2));
    gy = (v(x0, y0) + c * v(x, y0) + v(x2, y0)) - (v(x0, y2) + c * v(x, y2) + v(x2, y2));
}

/// MATLAB's computeEdgesWithThinning at (x, y), every pixel including the border; m = gx² + gy²
/// plane, ax = |gx|, ay = |gy| at (x, y). A neighbour outside the image passes its test.
///   sobel/prewitt (offsets 0):
///     (ax ≥ ay ∧ m(x−1,y) ≤ m ∧ m > m(x+1,y)) ∨ (ay ≥ ax ∧ m(x,y−1) ≤ m ∧ m > m(x,y+1))
///   roberts (offsets −1 1 1 −1): the same along the diagonals,
///     (ax ≥ ay ∧ m(x−1,y−1) ≤ m ∧ m > m(x+1,y+1)) ∨ (ay ≥ ax ∧ m(x+1,y−1) ≤ m ∧ m > m(x−1,y+1))
/// MATLAB's tolerance (ax ≥ ay − 100·eps in f32) only matters at ay = 0, where both forms hold.
CUBEKIT_HD bool thinned_edge(const std::int32_t* m, int W, int H, int x, int y, int ax, int ay, bool roberts,
                             std::int64_t cutoff) {
    const std::size_t w = std::size_t(W);
    const std::int32_t c = m[std::size_t(y) * w + std::size_t(x)];
    if (!(std::int64_t(c) > cutoff)) return false;
    const auto inside = [&](int xx, int yy) { return xx >= 0 && xx < W && yy >= 0 && yy < H; };
    const auto at = [&](int xx, int yy) { return m[std::size_t(yy) * w + std::size_t(xx)]; };
    const int o1 = roberts ? -1 : 0, o2 = roberts ? 1 : 0, o3 = roberts ? 1 : 0, o4 = roberts ? -1 : 0;
    const bool b1 = !inside(x - 1, y + o1) || at(x - 1, y + o1) <= c;
    const bool b2 = !inside(x + 1, y + o2) || c > at(x + 1, y + o2);
    const bool b3 = !inside(x + o3, y - 1) || at(x + o3, y - 1) <= c;
    const bool b4 = !inside(x + o4, y + 1) || c > at(x + o4, y + 1);
    return (ax >= ay && b1 && b2) || (ay >= ax && b3 && b4);
}

/// Automatic cutoff of the mask methods on gx² + gy²: MATLAB's `b > scale·sum(b)/numel(b)` is, for
/// an integer b, `b > ⌊scale·sum/N⌋` (exact; the front door keeps scale·sum below 2^64).
CUBEKIT_HD std::int64_t mask_auto_cutoff(unsigned long long sum, int scale, unsigned long long pixels) {
    return std::int64_t((unsigned long long)(scale) * sum / pixels);
}

/// Correlation with a (2R+1)² kernel (row-major [dy][dx]) at (x, y), borders replicated; the taps
/// are added in raster order of the kernel, in f32. get(xx, yy) returns the f32 sample.
template <class Get>
CUBEKIT_HD float correlate_2d(const float* kernel, int R, int x, int y, int W, int H, Get get) {
    const int d = 2 * R + 1;
    float acc = 0.0f;
    for (int dy = -R; dy <= R; ++dy) {
        const int yy = clamp_index(y + dy, H - 1);
        const float* row = kernel + (dy + R) * d + R;
        for (int dx = -R; dx <= R; ++dx) acc = acc + row[dx] * get(clamp_index(x + dx, W - 1), yy);
    }
    return acc;
}

/// imfilter(·, k, 'conv', 'replicate') along one axis at index i of n: Σ_t k[R+t]·in(i − t),
/// t = −R..R ascending, in f32. get(j) returns the f32 sample at index j.
template <class Get>
CUBEKIT_HD float convolve_1d(const float* k, int R, int i, int n, Get get) {
    float acc = 0.0f;
    for (int t = -R; t <= R; ++t) acc = acc + k[R + t] * get(clamp_index(i - t, n - 1));
    return acc;
}

/// |f32 difference| as a double, for comparisons with a double threshold.
CUBEKIT_HD double abs_diff(float a, float b) {
    const float d = a - b;
    return double(d < 0.0f ? -d : d);
}

/// MATLAB's LoG zero-crossing rule at an interior pixel (c = response there). A nonzero centre is
/// an edge when it is negative and a 4-neighbour is positive with |jump| > thresh ("the edge is the
/// negative point"); a zero centre when its up/down or left/right neighbours have opposite signs
/// with |jump| > 2·thresh.
CUBEKIT_HD bool log_zero_crossing(float c, float up, float down, float left, float right, double thresh) {
    if (c != 0.0f) {
        return (c < 0.0f && right > 0.0f && abs_diff(c, right) > thresh) ||
               (left > 0.0f && c < 0.0f && abs_diff(left, c) > thresh) ||
               (c < 0.0f && down > 0.0f && abs_diff(c, down) > thresh) ||
               (up > 0.0f && c < 0.0f && abs_diff(up, c) > thresh);
    }
    const double t2 = 2.0 * thresh;
    return (up < 0.0f && down > 0.0f && abs_diff(up, down) > t2) || (up > 0.0f && down < 0.0f && abs_diff(up, down) > t2) ||
           (left < 0.0f && right > 0.0f && abs_diff(left, right) > t2) ||
           (left > 0.0f && right < 0.0f && abs_diff(left, right) > t2);
}

/// Canny gradient magnitude: hypot in f64 (exact squares and sum of two f32 squares, one rounding
/// of the square root), rounded to f32.
CUBEKIT_HD float canny_magnitude(float gx, float gy) {
    const double x = double(gx), y = double(gy);
    return float(::sqrt(x * x + y * y));
}

/// imhist(magGrad, 64) bin of a normalised magnitude in [0, 1]: ⌊63·v + 0.5⌋ (in f64), clamped.
inline constexpr int kCannyBins = 64;
CUBEKIT_HD int canny_bin(float v) {
    const int k = int(::floor(double(v) * double(kCannyBins - 1) + 0.5));
    return k < 0 ? 0 : (k > kCannyBins - 1 ? kCannyBins - 1 : k);
}

/// MATLAB's high threshold: find(cumsum(counts) > 0.7·m·n, 1) / 64 (1-based bin index / 64; m rows).
/// The last cumulative count is m·n > 0.7·m·n, so a bin is always found.
CUBEKIT_HD double canny_auto_high(const unsigned long long* counts, int W, int H) {
    const double limit = 0.7 * double(H) * double(W);
    unsigned long long cum = 0;
    for (int k = 0; k < kCannyBins; ++k) {
        cum += counts[k];
        if (double(cum) > limit) return double(k + 1) / double(kCannyBins);
    }
    return 1.0;
}

/// MATLAB's cannyFindLocalMaxima at an interior pixel: ix, iy = the pixel's gradient; m its
/// normalised magnitude; the neighbours' magnitudes by compass direction (north = the row above).
/// Four direction sectors, each interpolating the magnitude on both sides along the gradient; a
/// pixel passes when it is ≥ both in some sector and above the low threshold. f32 arithmetic.
struct Neighbours {
    float e, ne, n, nw, w, sw, s, se;
};
CUBEKIT_HD bool canny_local_max(float ix, float iy, float m, const Neighbours& nb, double low) {
    if (!(double(m) > low)) return false;
    const auto keep = [m](float a1, float b1, float a2, float b2, float d) {
        const float g1 = a1 * (1.0f - d) + b1 * d;
        const float g2 = a2 * (1.0f - d) + b2 * d;
        return m >= g1 && m >= g2;
    };
    const auto ratio = [](float num, float den) {
        const float r = num / den;
        return r < 0.0f ? -r : r;
    };
    if ((iy <= 0.0f && ix > -iy) || (iy >= 0.0f && ix < -iy))
        if (keep(nb.e, nb.ne, nb.w, nb.sw, ratio(iy, ix))) return true;
    if ((ix > 0.0f && -iy >= ix) || (ix < 0.0f && -iy <= ix))
        if (keep(nb.n, nb.ne, nb.s, nb.sw, ratio(ix, iy))) return true;
    if ((ix <= 0.0f && ix > iy) || (ix >= 0.0f && ix < iy))
        if (keep(nb.n, nb.nw, nb.s, nb.se, ratio(ix, iy))) return true;
    if ((iy < 0.0f && ix <= iy) || (iy > 0.0f && ix >= iy))
        if (keep(nb.w, nb.nw, nb.e, nb.se, ratio(iy, ix))) return true;
    return false;
}

/// Canny pixel states: not a candidate, a weak candidate (local maximum above low), an edge
/// (strong, or 8-connected through candidates to a strong one).
enum : std::uint8_t { kCannyNone = 0, kCannyWeak = 1, kCannyEdge = 2 };

/// The fixed f64 summation order of the LoG's Σ|response| that both backends follow: a sequence is
/// split into kSumLanes lanes (element i to lane i mod 32, each lane adding its elements in
/// order from 0.0), then lane l += lane l+16, l+8, l+4, l+2, l+1 (l < offset) and lane 0 is the
/// sum. Rows are summed so, then the band's row sums likewise. On the GPU one warp does it with
/// __shfl_down_sync, which adds the same operands.
inline constexpr int kSumLanes = 32;

}  // namespace cubekit::detail
