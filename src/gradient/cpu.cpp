// RCMG, CPU reference: the specification in code (spec/gradient-watershed.md, A3).
// Pairs (i, j), i < j, in lexicographic order; D_ij = Σ_b (x_i,b − x_j,b)² with each sample
// converted to the accumulation type and the bands added in order 0..B−1 (Decision A-3);
// out-of-image window positions replicate the nearest pixel (Decision A-2). Samples are read
// through the view's strides, so any layout or window is read where it is.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/parallel.hpp"
#include "gradient/rcmg_internal.hpp"

namespace cubekit::detail {
namespace {

template <int N>
struct Pairs {
    static constexpr int count = N * (N - 1) / 2;
    int i[count], j[count];
    constexpr Pairs() : i(), j() {
        int p = 0;
        for (int a = 0; a < N; ++a)
            for (int b = a + 1; b < N; ++b) i[p] = a, j[p] = b, ++p;
    }
};

// r rounds of "reject the lexicographically first maximal pair", then the maximum of the rest.
// D holds the pair distances in lexicographic order; NaN anywhere gives NaN.
template <int N, typename Acc>
Acc robust_max(const Acc* D, int reject) {
    constexpr Pairs<N> pairs;
    for (int p = 0; p < pairs.count; ++p)
        if (std::isnan(D[p])) return std::numeric_limits<Acc>::quiet_NaN();
    unsigned active = (1u << N) - 1;  // vertex set A_t as a bitmask
    for (int t = 0; t <= reject; ++t) {
        int best = -1;
        for (int p = 0; p < pairs.count; ++p) {
            const unsigned both = (1u << pairs.i[p]) | (1u << pairs.j[p]);
            if ((active & both) != both) continue;
            if (best < 0 || D[p] > D[best]) best = p;  // strict: the first maximum wins ties
        }
        if (t == reject) return D[best];
        active &= ~((1u << pairs.i[best]) | (1u << pairs.j[best]));
    }
    return Acc(0);  // not reached: validation keeps ≥ 2 vectors in the set
}

template <typename T, typename Acc, typename Out, int N>
void rcmg_rows(const Context& ctx, const StridedView<const T>& cube, const StridedView<Out>& out,
               const RcmgOptions& options) {
    constexpr Pairs<N> pairs;
    const WindowOffset* window = N == 5 ? kWindow4 : kWindow8;
    const int W = cube.width, H = cube.height, B = cube.bands;

    // One row per item; each thread keeps one row of pair distances. Cancellation is checked and
    // progress reported (rows done, H) by parallel_for, never from inside the region.
    parallel_for(
        ctx, H, {.where = "rcmg", .progress = true, .schedule = Schedule::Dynamic},
        [&] { return std::vector<Acc>(std::size_t(W) * pairs.count); },
        [&](std::int64_t row, std::vector<Acc>& D) {
            const int y = int(row);
            std::fill(D.begin(), D.end(), Acc(0));
            for (int b = 0; b < B; ++b) {
                for (int x = 0; x < W; ++x) {
                    Acc v[N];
                    for (int k = 0; k < N; ++k) {
                        const int yy = std::clamp(y + window[k].dy, 0, H - 1);
                        const int xx = std::clamp(x + window[k].dx, 0, W - 1);
                        v[k] = Acc(cube(xx, yy, b));
                    }
                    Acc* d = &D[std::size_t(x) * pairs.count];
                    for (int p = 0; p < pairs.count; ++p) {
                        const Acc diff = v[pairs.i[p]] - v[pairs.j[p]];
                        d[p] = d[p] + diff * diff;
                    }
                }
            }
            for (int x = 0; x < W; ++x) {
                const Acc m = robust_max<N>(&D[std::size_t(x) * pairs.count], options.reject);
                // The square root is taken once, in f64, then rounded to the output type (A3).
                const double g = options.squared ? double(m) : std::sqrt(double(m));
                out(x, y, 0) = Out(g);
            }
        });
}

template <typename T, typename Acc, typename Out>
void rcmg_typed(const Context& ctx, const CubeView& cube, const MutableCubeView& out, const RcmgOptions& options) {
    if (options.connectivity == 4) rcmg_rows<T, Acc, Out, 5>(ctx, cube.typed<T>(), out.typed<Out>(), options);
    else rcmg_rows<T, Acc, Out, 9>(ctx, cube.typed<T>(), out.typed<Out>(), options);
}

}  // namespace

void rcmg_cpu(const Context& ctx, const CubeView& cube, const MutableCubeView& out, const RcmgOptions& options) {
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if (options.precision == Precision::F64) {
            if (options.out_type == DType::F64) rcmg_typed<T, double, double>(ctx, cube, out, options);
            else rcmg_typed<T, double, float>(ctx, cube, out, options);
        } else {
            rcmg_typed<T, float, float>(ctx, cube, out, options);
        }
    });
}

}  // namespace cubekit::detail
