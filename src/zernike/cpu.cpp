// CPU reference of the Zernike moments (spec zernike.md §3.5–3.8, §3.11): the readable version.
// For every point of the disk (a pixel, or a representative folding its 8 mirrors), evaluate the
// requested basis values with the chosen method and add f·V* to the row's partial sums; the row
// partials are then added in row order, so the result does not depend on the thread count.
#include <algorithm>
#include <map>

#include "core/parallel.hpp"
#include "cubekit/error.hpp"
#include "zernike/zernike_internal.hpp"

namespace cubekit::zernike {

namespace {

using C = Cplx<double>;

// A Kintner chain of one repetition m: the wanted orders (ascending) and their output slots.
struct Chain {
    int m;
    std::vector<std::pair<int, int>> n_out;
};
// One order of the q-recursion: the wanted repetitions (descending) and their output slots.
struct Order {
    int n;
    std::vector<std::pair<int, int>> m_out;
};

template <typename T>
C to_double(Cplx<T> w) {
    return {double(w.re), double(w.im)};
}

// Evaluates the requested basis values at one point with the requested method, in precision T.
template <typename T>
class Evaluator {
public:
    Evaluator(const Request& request, const Coefficients& co) : rq_(request), co_(co) {
        if (rq_.method == ZernikeMethod::Kintner) {
            std::map<int, Chain> by_m;
            for (std::size_t k = 0; k < rq_.wanted.size(); ++k) {
                auto& c = by_m[rq_.wanted[k].m];
                c.m = rq_.wanted[k].m;
                c.n_out.push_back({rq_.wanted[k].n, int(k)});
            }
            for (auto& [m, c] : by_m) {
                std::sort(c.n_out.begin(), c.n_out.end());
                chains_.push_back(c);
            }
        } else if (rq_.method == ZernikeMethod::QRecursive) {
            std::map<int, Order> by_n;
            for (std::size_t k = 0; k < rq_.wanted.size(); ++k) {
                auto& o = by_n[rq_.wanted[k].n];
                o.n = rq_.wanted[k].n;
                o.m_out.push_back({rq_.wanted[k].m, int(k)});
            }
            for (auto& [n, o] : by_n) {
                std::sort(o.m_out.begin(), o.m_out.end(), std::greater<>());
                orders_.push_back(o);
            }
        } else {
            for (std::size_t k = 0; k < rq_.wanted.size(); ++k)
                chains_.push_back({rq_.wanted[k].m, {{rq_.wanted[k].n, int(k)}}});
        }
    }

    // acc[k] += f·V*(wanted[k]) at the point (X, Y), t = X² + Y².
    void add(double X, double Y, double t, const Folded& f, C* acc) const {
        const T tt = T(t);
        const Cplx<T> w{T(X), T(-Y)};  // X − jY
        if (rq_.method == ZernikeMethod::QRecursive) {
            for (const Order& o : orders_) add_order(o, tt, w, f, acc);
            return;
        }
        const bool expl = rq_.method == ZernikeMethod::Direct && rq_.radial == ZernikeRadial::Explicit;
        for (const Chain& c : chains_) {
            const C P = angular_sum(to_double(cpow(w, c.m)), f, c.m);
            if (expl) {
                const auto [n, out] = c.n_out.front();
                accumulate(acc[out], explicit_radial(n, c.m, tt), P);
                continue;
            }
            // Kintner chain R̃(m,m) = 1, R̃(m+2,m), ... up to the last wanted order.
            T r1 = T(1), r2 = T(0);
            int cur = c.m;
            for (const auto& [n, out] : c.n_out) {
                for (; cur < n; cur += 2) {
                    const T r = cur + 2 == c.m + 2 ? kintner_second(c.m, tt)
                                                   : kintner_step(co_.kintner[set_index(cur + 2, c.m)], tt, r1, r2);
                    r2 = r1;
                    r1 = r;
                }
                accumulate(acc[out], r1, P);
            }
        }
    }

private:
    static void accumulate(C& acc, T radial, const C& P) {
        acc.re += double(radial) * P.re;
        acc.im += double(radial) * P.im;
    }

    // The seed's factorial sum, Horner in t: R̃ = Σ β(k) t^(h−k).
    T explicit_radial(int n, int m, T t) const {
        const double* beta = co_.beta.data() + co_.beta_offset[set_index(n, m)];
        T r = T(beta[0]);
        for (int k = 1; k <= (n - m) / 2; ++k) r = r * t + T(beta[k]);
        return r;
    }

    // Scaled q-recursion (§3.7) downwards from S(n) = 1, then each wanted repetition.
    void add_order(const Order& o, T t, Cplx<T> w, const Folded& f, C* acc) const {
        const int n = o.n;
        std::vector<T> S(std::size_t(n / 2 + 1));  // S[(m − n mod 2)/2]
        auto slot = [&](int m) -> T& { return S[std::size_t((m - n % 2) / 2)]; };
        const int lowest = o.m_out.back().first;
        slot(n) = T(1);
        if (n - 2 >= lowest) slot(n - 2) = qrec_second(n, t);
        for (int m = n - 4; m >= lowest; m -= 2) slot(m) = qrec_step(co_.qrec[set_index(n, m)], t, slot(m + 4), slot(m + 2));
        for (const auto& [m, out] : o.m_out) accumulate(acc[out], slot(m), angular_sum(to_double(cpow(w, m)), f, m));
    }

    const Request& rq_;
    const Coefficients& co_;
    std::vector<Chain> chains_;
    std::vector<Order> orders_;
};

// Σ over the points of L of f·V* for every wanted moment of band b of `img`, added row by row:
// each row sums into its own slot of `partial`, then the slots are added in row order.
template <typename T, typename E>
void band_sums(const Context& ctx, const Evaluator<T>& eval, const PointLayout& L, const StridedView<const E>& img,
               int b, std::size_t M, std::vector<C>& partial, std::complex<double>* out) {
    const int W = img.width, H = img.height;
    // f at centred coordinates (u, v): column (u + W − 1)/2, row (H − 1 − v)/2.
    auto f = [&](int u, int v) { return double(img((u + W - 1) / 2, (H - 1 - v) / 2, b)); };
    const std::size_t rows = L.rows.size();
    std::fill(partial.begin(), partial.end(), C{0.0, 0.0});
    // Cancellation is checked between rows.
    detail::parallel_for(ctx, std::int64_t(rows),
                         {.where = "zernike", .schedule = detail::Schedule::Dynamic, .parallel = L.points() >= 4096},
                         [&](std::int64_t r) {
        const PointRow row = L.rows[std::size_t(r)];
        C* acc = partial.data() + std::size_t(r) * M;
        for (int j = 0; j < row.count; ++j) {
            double X, Y, t;
            if (L.custom) {
                const int x = row.first + j;
                custom_point(L.cx, L.cy, L.rho, x, row.v, X, Y, t);
                eval.add(X, Y, t, plain_point(double(img(x, row.v, b))), acc);
                continue;
            }
            const int u = row.first + 2 * j;
            centred_point(L.centred, u, row.v, X, Y, t);
            eval.add(X, Y, t, L.symmetric ? fold_representative(f, u, row.v) : plain_point(f(u, row.v)), acc);
        }
    });
    for (std::size_t k = 0; k < M; ++k) {
        C s{0.0, 0.0};
        for (std::size_t r = 0; r < rows; ++r) {
            s.re += partial[r * M + k].re;
            s.im += partial[r * M + k].im;
        }
        out[k] = {s.re, s.im};
    }
}

template <typename T>
std::vector<std::complex<double>> sums(const Context& ctx, const CubeView& images, const ZernikeDisk& disk,
                                       const Request& request) {
    const Coefficients co = coefficients(request.max_order(), request.radial == ZernikeRadial::Explicit,
                                         request.method == ZernikeMethod::QRecursive);
    const Evaluator<T> eval(request, co);
    const PointLayout L = point_layout(disk, request.symmetric);
    const int B = images.bands();
    const std::size_t M = request.wanted.size();
    std::vector<std::complex<double>> out(std::size_t(B) * M);
    std::vector<C> partial(L.rows.size() * M);
    // Samples are read through the view's strides (any layout or window, no copy), each converted
    // to double where it is loaded.
    visit_dtype(images.dtype(), [&](auto tag) {
        using E = decltype(tag);
        const StridedView<const E> img = images.typed<E>();
        for (int b = 0; b < B; ++b) {
            ctx.check_cancelled("zernike");
            band_sums(ctx, eval, L, img, b, M, partial, out.data() + std::size_t(b) * M);
            ctx.progress(std::size_t(b) + 1, std::size_t(B));
        }
    });
    return out;
}

}  // namespace

std::vector<std::complex<double>> sums_cpu(const Context& ctx, const CubeView& images, const ZernikeDisk& disk,
                                           const Request& request) {
    return request.precision == ZernikePrecision::Float ? sums<float>(ctx, images, disk, request)
                                                        : sums<double>(ctx, images, disk, request);
}

void reconstruct_cpu(const Context& ctx, const std::vector<std::complex<double>>& set, int images, int K,
                     const ZernikeDisk& disk, const MutableCubeView& out) {
    const Coefficients co = coefficients(K, false, false);
    const PointLayout L = point_layout(disk, false);  // every pixel inside the disk, row by row
    const int W = disk.width, H = disk.height;
    const StridedView<double> o = out.typed<double>();
    const std::size_t size = zernike_set_size(K);
    for (int b = 0; b < images; ++b) {
        ctx.check_cancelled("zernike_reconstruct");
        const C* A = reinterpret_cast<const C*>(set.data() + std::size_t(b) * size);
        for (int y = 0; y < H; ++y)  // outside the disk stays 0
            for (int x = 0; x < W; ++x) o(x, y, b) = 0.0;
        detail::parallel_for(ctx, std::int64_t(L.rows.size()),
                             {.where = "zernike_reconstruct", .schedule = detail::Schedule::Dynamic,
                              .parallel = L.points() >= 4096},
                             [&](std::int64_t r) {
            const PointRow row = L.rows[std::size_t(r)];
            for (int j = 0; j < row.count; ++j) {
                double X, Y, t;
                int x, y;
                if (L.custom) {
                    x = row.first + j;
                    y = row.v;
                    custom_point(L.cx, L.cy, L.rho, x, y, X, Y, t);
                } else {
                    const int u = row.first + 2 * j;
                    x = (u + W - 1) / 2;
                    y = (H - 1 - row.v) / 2;
                    centred_point(L.centred, u, row.v, X, Y, t);
                }
                o(x, y, b) = reconstruct_point(A, K, co.kintner.data(), X, Y, t);
            }
        });
        ctx.progress(std::size_t(b) + 1, std::size_t(images));
    }
}

}  // namespace cubekit::zernike
