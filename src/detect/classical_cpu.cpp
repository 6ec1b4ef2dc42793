// Classical detectors, CPU backend (detect_classical.hpp). The arithmetic and its order are the
// CUDA kernels' (classical_cuda.cu): built without contraction, both give the same scores for the
// same prepared cube (global: z_i = Σ_b W_ib·y_b in band order by fused multiply-adds, q = Σ_i z_i² in
// row order; local:
// the same window sums, the same right-looking Cholesky and column-oriented forward solve).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/parallel.hpp"
#include "cubekit/error.hpp"
#include "detect/classical_internal.hpp"

namespace cubekit::detail {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void write_score(const MutableCubeView& out, int x, int y, double v) {
    if (out.dtype() == DType::F64) out.typed<double>()(x, y, 0) = v;
    else out.typed<float>()(x, y, 0) = float(v);
}

// One pixel of the global scoring, in T (double, or float for f32 whitening).
template <typename T>
double score_pixel(const double* x, std::int64_t plane, const ScorePlan& plan, std::vector<T>& y) {
    const int K = plan.bands;
    for (int b = 0; b < K; ++b) {
        const double v = x[std::int64_t(b) * plane];
        if (!std::isfinite(v)) return kNaN;
        y[std::size_t(b)] = T(v - plan.mean[std::size_t(b)]);
    }
    T q = 0, l = 0, n = 0;
    if (plan.mode == ScoreMode::Quadratic || plan.mode == ScoreMode::Ace)
        for (int i = 0; i < plan.rows; ++i) {
            const double* w = plan.W.data() + std::size_t(i) * std::size_t(K);
            T z = 0;
            for (int b = 0; b < K; ++b) z = std::fma(T(w[b]), y[std::size_t(b)], z);  // as the CUDA GEMM
            q = q + z * z;
        }
    if (plan.mode != ScoreMode::Quadratic)
        for (int b = 0; b < K; ++b) l = l + T(plan.a[std::size_t(b)]) * y[std::size_t(b)];
    if (plan.mode == ScoreMode::Cosine)
        for (int b = 0; b < K; ++b) n = n + y[std::size_t(b)] * y[std::size_t(b)];
    switch (plan.mode) {
        case ScoreMode::Quadratic: return double(q);
        case ScoreMode::Linear: return double(l);
        case ScoreMode::Ace: {
            const double v = double(l) * double(l) / double(q);
            return std::isnan(v) ? 0.0 : std::clamp(v, 0.0, 1.0);
        }
        case ScoreMode::Cosine: return n > 0 ? double(l) / std::sqrt(double(n)) : 0.0;
    }
    return kNaN;
}

template <typename T>
void score_rows(const Context& ctx, const CubeView& x, const ScorePlan& plan, const MutableCubeView& out) {
    const double* data = x.typed<double>().data;
    const int W = x.width();
    const std::int64_t plane = std::int64_t(W) * x.height();
    parallel_for(
        ctx, x.height(), {.where = "detect", .progress = true}, [&] { return std::vector<T>(std::size_t(plan.bands)); },
        [&](std::int64_t yrow, std::vector<T>& y) {
            for (int xc = 0; xc < W; ++xc)
                write_score(out, xc, int(yrow), score_pixel<T>(data + yrow * W + xc, plane, plan, y));
        });
}

// ---- local RX --------------------------------------------------------------------------------------------

struct LocalScratch {
    std::vector<double> mean, A, y;
    std::vector<std::int64_t> pixels;
};

// The window's pixels (outer minus inner), row-major, as offsets into a plane.
void window_pixels(int px, int py, int W, int H, LocalWindows win, std::vector<std::int64_t>& out) {
    out.clear();
    const int ox = window_start(px, win.outer, W), oy = window_start(py, win.outer, H);
    const int ix = window_start(px, win.inner, W), iy = window_start(py, win.inner, H);
    for (int yy = oy; yy < oy + win.outer; ++yy)
        for (int xx = ox; xx < ox + win.outer; ++xx) {
            const bool inner = xx >= ix && xx < ix + win.inner && yy >= iy && yy < iy + win.inner;
            if (!inner) out.push_back(std::int64_t(yy) * W + xx);
        }
}

// Mean and centred covariance (lower triangle, row-major K×K) of the window; divisor n − ddof.
void window_stats(const double* x, std::int64_t plane, int K, int ddof, LocalScratch& s) {
    const std::size_t n = s.pixels.size();
    for (int b = 0; b < K; ++b) {
        double sum = 0;
        for (std::int64_t p : s.pixels) sum = sum + x[std::int64_t(b) * plane + p];
        s.mean[std::size_t(b)] = sum / double(n);
    }
    const double div = double(std::int64_t(n) - ddof);
    for (int i = 0; i < K; ++i)
        for (int j = 0; j <= i; ++j) {
            double c = 0;
            for (std::int64_t p : s.pixels) {
                const double di = x[std::int64_t(i) * plane + p] - s.mean[std::size_t(i)];
                const double dj = x[std::int64_t(j) * plane + p] - s.mean[std::size_t(j)];
                c = std::fma(di, dj, c);  // fused, as the CUDA kernel
            }
            s.A[std::size_t(i) * std::size_t(K) + std::size_t(j)] = c / div;
        }
}

// Right-looking Cholesky of the lower triangle in place, then the forward solve of L z = y by
// columns; returns Σ z_i², or NaN when a pivot is not positive.
double cholesky_score(int K, std::vector<double>& A, std::vector<double>& y) {
    const std::size_t k2 = std::size_t(K);
    for (int k = 0; k < K; ++k) {
        const double pivot = A[std::size_t(k) * k2 + std::size_t(k)];
        if (!(pivot > 0) || !std::isfinite(pivot)) return kNaN;
        const double d = std::sqrt(pivot);
        A[std::size_t(k) * k2 + std::size_t(k)] = d;
        for (int i = k + 1; i < K; ++i) A[std::size_t(i) * k2 + std::size_t(k)] = A[std::size_t(i) * k2 + std::size_t(k)] / d;
        for (int i = k + 1; i < K; ++i) {
            const double lik = A[std::size_t(i) * k2 + std::size_t(k)];
            for (int j = k + 1; j <= i; ++j)
                A[std::size_t(i) * k2 + std::size_t(j)] =
                    std::fma(-lik, A[std::size_t(j) * k2 + std::size_t(k)], A[std::size_t(i) * k2 + std::size_t(j)]);
        }
    }
    double q = 0;
    for (int k = 0; k < K; ++k) {
        const double z = y[std::size_t(k)] / A[std::size_t(k) * k2 + std::size_t(k)];
        q = q + z * z;
        for (int i = k + 1; i < K; ++i) y[std::size_t(i)] = std::fma(-A[std::size_t(i) * k2 + std::size_t(k)], z, y[std::size_t(i)]);
    }
    return q;
}

}  // namespace

BandSummary band_summary_cpu(const Context& ctx, const CubeView& cube) {
    const int B = cube.bands();
    BandSummary s{std::vector<std::int64_t>(std::size_t(B), 0),
                  std::vector<double>(std::size_t(B), std::numeric_limits<double>::infinity()),
                  std::vector<double>(std::size_t(B), -std::numeric_limits<double>::infinity())};
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const auto v = cube.typed<T>();
        parallel_for(ctx, B, {.where = "detect: band screening"}, [&](std::int64_t b) {
            std::int64_t bad = 0;
            double lo = std::numeric_limits<double>::infinity(), hi = -lo;
            for (int y = 0; y < v.height; ++y)
                for (int x = 0; x < v.width; ++x) {
                    const double d = double(v(x, y, int(b)));
                    if (!std::isfinite(d)) { ++bad; continue; }
                    lo = std::min(lo, d);
                    hi = std::max(hi, d);
                }
            s.nonfinite[std::size_t(b)] = bad;
            s.min[std::size_t(b)] = lo;
            s.max[std::size_t(b)] = hi;
        });
    });
    return s;
}

Cube gather_f64_cpu(const Context& ctx, const CubeView& cube, const std::vector<int>& kept,
                    const std::vector<std::uint8_t>& mask) {
    const int W = cube.width(), H = cube.height(), K = int(kept.size());
    Cube out = Cube::uninitialized(W, H, K, DType::F64, Layout::BSQ);
    double* o = out.data<double>();
    const std::int64_t plane = std::int64_t(W) * H;
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const auto v = cube.typed<T>();
        parallel_for(ctx, K, {.where = "detect: prepare"}, [&](std::int64_t k) {
            const int b = kept[std::size_t(k)];
            for (int y = 0; y < H; ++y)
                for (int x = 0; x < W; ++x) {
                    const std::int64_t p = std::int64_t(y) * W + x;
                    o[k * plane + p] = (mask.empty() || mask[std::size_t(p)]) ? double(v(x, y, b)) : kNaN;
                }
        });
    });
    return out;
}

void score_cpu(const Context& ctx, const CubeView& x, const ScorePlan& plan, const MutableCubeView& out) {
    if (plan.f32) score_rows<float>(ctx, x, plan, out);
    else score_rows<double>(ctx, x, plan, out);
}

std::int64_t local_rx_cpu(const Context& ctx, const CubeView& x, LocalWindows win, int ddof,
                          const MutableCubeView& out) {
    const double* data = x.typed<double>().data;
    const int W = x.width(), H = x.height(), K = x.bands();
    const std::int64_t plane = std::int64_t(W) * H;
    std::vector<std::int64_t> singular(std::size_t(H), 0);
    const auto make = [&] {
        const std::size_t k = std::size_t(K);
        return LocalScratch{std::vector<double>(k), std::vector<double>(k * k), std::vector<double>(k), {}};
    };
    parallel_for(ctx, H, {.where = "detect rx: local windows", .progress = true, .schedule = Schedule::Dynamic}, make,
                 [&](std::int64_t py, LocalScratch& s) {
                     for (int px = 0; px < W; ++px) {
                         const std::int64_t p = py * W + px;
                         double score = kNaN;
                         bool finite = true;
                         for (int b = 0; b < K; ++b) {
                             const double v = data[std::int64_t(b) * plane + p];
                             finite = finite && std::isfinite(v);
                         }
                         if (finite) {
                             window_pixels(px, int(py), W, H, win, s.pixels);
                             window_stats(data, plane, K, ddof, s);
                             for (int b = 0; b < K; ++b)
                                 s.y[std::size_t(b)] = data[std::int64_t(b) * plane + p] - s.mean[std::size_t(b)];
                             score = cholesky_score(K, s.A, s.y);
                             if (std::isnan(score)) ++singular[std::size_t(py)];
                         }
                         write_score(out, px, int(py), score);
                     }
                 });
    std::int64_t total = 0;
    for (std::int64_t s : singular) total += s;
    return total;
}

}  // namespace cubekit::detail
