// PCA, CPU backend (spec edges.md §3.9 "E5"): the exact integer sums of a fit and the f64 scores,
// read through the view's strides, so any layout or window is read where it is. The sums are
// integers, so the order of the additions (pixel blocks, threads) cannot change them; the scores
// add in band order with one rounding per subtraction, multiplication and addition (this file is
// compiled with -ffp-contract=off, as the whole library).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "linalg/pca_internal.hpp"

namespace cubekit::detail {
namespace {

// Per element type: a block's values Q, one block's dot product Dot, a thread's running sum Acc.
// Blocks hold kBlock = 256 pixels. u8: 256·255² < 2^31 and P·255² < 2^63; 16-bit: P·65535² < 2^63
// (P < 2^31); 32-bit integers and fixed point: 128-bit products and sums.
constexpr int kBlock = 256;
template <typename T> struct CpuSumTypes { using Q = std::int64_t; using Dot = i128; using Acc = i128; };
template <> struct CpuSumTypes<std::uint8_t> { using Q = std::int32_t; using Dot = std::int32_t; using Acc = std::int64_t; };
template <> struct CpuSumTypes<std::uint16_t> { using Q = std::int64_t; using Dot = std::int64_t; using Acc = std::int64_t; };
template <> struct CpuSumTypes<std::int16_t> { using Q = std::int64_t; using Dot = std::int64_t; using Acc = std::int64_t; };

// Calls f(i, sample) for band b of the n pixels p0 .. p0+n−1 in raster order (a block of pixels
// may span rows).
template <typename T, typename F>
void for_pixels(const StridedView<const T>& v, std::int64_t p0, int n, int b, F&& f) {
    int x = int(p0 % v.width), y = int(p0 / v.width);
    const T* row = &v(0, y, b);
    for (int i = 0; i < n; ++i) {
        f(i, row[std::int64_t(x) * v.strides.x]);
        if (++x == v.width && i + 1 < n) {
            x = 0;
            row = &v(0, ++y, b);
        }
    }
}

// Float input: the pixels used (all bands finite), their count and max|x| over them.
template <typename T>
std::vector<std::uint8_t> valid_pixels(const Context& ctx, const StridedView<const T>& x, std::int64_t& count,
                                       double& max_abs) {
    const std::int64_t P = std::int64_t(x.width) * x.height, blocks = (P + kBlock - 1) / kBlock;
    std::vector<std::uint8_t> valid(std::size_t(P), 1);
    double m = 0;
    std::int64_t c = 0;
#pragma omp parallel for num_threads(ctx.threads()) schedule(static) reduction(max : m) reduction(+ : c)
    for (std::int64_t blk = 0; blk < blocks; ++blk) {
        const std::int64_t p0 = blk * kBlock;
        const int n = int(std::min<std::int64_t>(kBlock, P - p0));
        std::uint8_t* ok = valid.data() + p0;
        for (int b = 0; b < x.bands; ++b)
            for_pixels(x, p0, n, b, [&](int i, T v) {
                if (!std::isfinite(double(v))) ok[i] = 0;
            });
        for (int i = 0; i < n; ++i) c += ok[i];
        double block_max = 0;  // the lambda writes a block-local, not the reduction variable
        for (int b = 0; b < x.bands; ++b)
            for_pixels(x, p0, n, b, [&](int i, T v) {
                if (ok[i]) block_max = std::max(block_max, std::fabs(double(v)));
            });
        m = std::max(m, block_max);
    }
    count = c;
    max_abs = m;
    return valid;
}

template <typename T>
PcaSums sums_cpu(const Context& ctx, const StridedView<const T>& x, std::optional<int> given_exponent) {
    using Q = typename CpuSumTypes<T>::Q;
    using Dot = typename CpuSumTypes<T>::Dot;
    using Acc = typename CpuSumTypes<T>::Acc;
    constexpr bool is_float = std::is_floating_point_v<T>;
    const int B = x.bands;
    const std::size_t nb = std::size_t(B);
    const auto P = std::int64_t(x.width) * x.height;
    const std::int64_t blocks = (P + kBlock - 1) / kBlock;
    PcaSums s;
    s.bands = B;
    s.count = P;
    std::vector<std::uint8_t> valid;
    double scale = 1;
    if constexpr (is_float) {
        double max_abs = 0;
        valid = valid_pixels(ctx, x, s.count, max_abs);
        s.exponent = given_exponent ? *given_exponent : pca_fixed_point_exponent(max_abs, s.count);
        scale = std::ldexp(1.0, s.exponent);
    }
    s.first.assign(nb, 0);
    s.second.assign(nb * nb, 0);
    const std::size_t pairs = nb * (nb + 1) / 2;
#pragma omp parallel num_threads(ctx.threads())
    {
        std::vector<Q> q(nb * kBlock);  // band b of the block: q[b·kBlock ..], zero beyond the cube
        std::vector<std::int64_t> s1(nb, 0);
        std::vector<Acc> s2(pairs, 0);  // packed upper triangle, row by row
#pragma omp for schedule(static)
        for (std::int64_t blk = 0; blk < blocks; ++blk) {
            const std::int64_t p0 = blk * kBlock;
            const int n = int(std::min<std::int64_t>(kBlock, P - p0));
            for (int b = 0; b < B; ++b) {
                Q* row = q.data() + std::size_t(b) * kBlock;
                std::int64_t first = 0;
                for_pixels(x, p0, n, b, [&](int i, T v) {
                    if constexpr (is_float) row[i] = valid[std::size_t(p0 + i)] ? km::to_fixed_scaled(double(v), scale) : 0;
                    else row[i] = Q(v);
                    first += row[i];
                });
                std::fill(row + n, row + kBlock, Q(0));
                s1[std::size_t(b)] += first;
            }
            std::size_t t = 0;
            for (int i = 0; i < B; ++i) {
                const Q* qi = q.data() + std::size_t(i) * kBlock;
                for (int j = i; j < B; ++j, ++t) {
                    const Q* qj = q.data() + std::size_t(j) * kBlock;
                    Dot d = 0;
                    for (int k = 0; k < kBlock; ++k) d += Dot(qi[k]) * Dot(qj[k]);
                    s2[t] += Acc(d);
                }
            }
        }
#pragma omp critical(cubekit_pca_sums)
        {
            std::size_t t = 0;
            for (std::size_t i = 0; i < nb; ++i) {
                s.first[i] += s1[i];
                for (std::size_t j = i; j < nb; ++j, ++t) s.second[i * nb + j] += i128(s2[t]);
            }
        }
    }
    return s;
}

template <typename T>
void transform_cpu(const Context& ctx, const StridedView<const T>& x, const PcaModel& model,
                   const StridedView<double>& y) {
    const int W = x.width, H = x.height, B = x.bands, k = model.num_components();
    const double nan = std::numeric_limits<double>::quiet_NaN();
#pragma omp parallel num_threads(ctx.threads())
    {
        std::vector<double> acc(std::size_t(k) * std::size_t(W)), diff(static_cast<std::size_t>(W));
        std::vector<std::uint8_t> ok(static_cast<std::size_t>(W));
#pragma omp for schedule(static)
        for (int row = 0; row < H; ++row) {
            std::fill(acc.begin(), acc.end(), 0.0);
            std::fill(ok.begin(), ok.end(), std::uint8_t(1));
            for (int b = 0; b < B; ++b) {
                const T* src = &x(0, row, b);
                const double mean = model.mean[std::size_t(b)];
                for (int i = 0; i < W; ++i) {
                    const double v = double(src[std::int64_t(i) * x.strides.x]);
                    if constexpr (std::is_floating_point_v<T>) ok[std::size_t(i)] &= std::uint8_t(std::isfinite(v));
                    diff[std::size_t(i)] = v - mean;
                }
                for (int j = 0; j < k; ++j) {
                    const double c = model.components[std::size_t(j) * std::size_t(B) + std::size_t(b)];
                    double* a = acc.data() + std::size_t(j) * std::size_t(W);
                    for (int i = 0; i < W; ++i) a[i] = a[i] + diff[std::size_t(i)] * c;  // no contraction
                }
            }
            for (int j = 0; j < k; ++j) {
                double* dst = &y(0, row, j);
                const double* a = acc.data() + std::size_t(j) * std::size_t(W);
                for (int i = 0; i < W; ++i) dst[std::int64_t(i) * y.strides.x] = ok[std::size_t(i)] ? a[i] : nan;
            }
        }
    }
}

}  // namespace

PcaSums pca_sums_cpu(const Context& ctx, const CubeView& cube, std::optional<int> exponent) {
    return visit_dtype(cube.dtype(), [&](auto tag) { return sums_cpu(ctx, cube.typed<decltype(tag)>(), exponent); });
}

PcaScan pca_scan_cpu(const Context& ctx, const CubeView& cube) {
    return visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        PcaScan s{std::int64_t(cube.width()) * cube.height(), 0.0};
        if constexpr (std::is_floating_point_v<T>) valid_pixels(ctx, cube.typed<T>(), s.count, s.max_abs);
        return s;
    });
}

void pca_transform_cpu(const Context& ctx, const CubeView& cube, const PcaModel& model, const MutableCubeView& out) {
    visit_dtype(cube.dtype(),
                [&](auto tag) { transform_cpu(ctx, cube.typed<decltype(tag)>(), model, out.typed<double>()); });
}

}  // namespace cubekit::detail
