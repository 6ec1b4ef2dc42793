// Classical detectors (detect_classical.hpp): the front door shared by both backends — band
// screening, the prepared f64 BSQ cube of the kept bands (CPU, local RX), the statistics (CPU: the
// PCA family's exact integer sums; CUDA: two-pass f64 moments on the tensor cores, classical_mma.cu),
// the host eigensolve and pseudo-inverse, the scoring plans.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <string>

#include "cubekit/detect_classical.hpp"
#include "cubekit/error.hpp"
#include "cubekit/linalg.hpp"
#include "detect/classical_internal.hpp"

// LAPACK's MRRR symmetric eigensolver (all pairs): 13 ms for 200×200 with the reference LAPACK
// on the 2-core machine, against 19–30 ms for dsyev (QR iteration).
extern "C" void dsyevr_(const char* jobz, const char* range, const char* uplo, const int* n, double* a, const int* lda,
                        const double* vl, const double* vu, const int* il, const int* iu, const double* abstol, int* m,
                        double* w, double* z, const int* ldz, int* isuppz, double* work, const int* lwork, int* iwork,
                        const int* liwork, int* info, std::size_t jobz_len, std::size_t range_len, std::size_t uplo_len);

namespace cubekit {
namespace {

using detail::ScoreMode;
using detail::ScorePlan;

// ---- symmetric eigensolve and pseudo-inverse -------------------------------------------------------------

struct Eigen {
    int n = 0;
    std::vector<double> values;   ///< descending
    std::vector<double> vectors;  ///< row i = the unit eigenvector of values[i]
};

Eigen eigen_descending(int n, std::vector<double> a) {
    Eigen e{n, std::vector<double>(std::size_t(n)), std::vector<double>(std::size_t(n) * std::size_t(n))};
    if (n == 0) return e;
    std::vector<double> w(static_cast<std::size_t>(n)), z(std::size_t(n) * std::size_t(n));
    std::vector<int> support(2 * std::size_t(n));
    const double none = 0, abstol = 0;  // abstol 0: LAPACK's default accuracy
    const int lo = 1, hi = n;
    int found = 0, info = 0, lwork = -1, liwork = -1, iquery = 0;
    double query = 0;
    dsyevr_("V", "A", "U", &n, a.data(), &n, &none, &none, &lo, &hi, &abstol, &found, w.data(), z.data(), &n,
            support.data(), &query, &lwork, &iquery, &liwork, &info, 1, 1, 1);
    std::vector<double> work(std::size_t(std::max(1, int(query))));
    std::vector<int> iwork(std::size_t(std::max(1, iquery)));
    lwork = int(work.size()), liwork = int(iwork.size());
    dsyevr_("V", "A", "U", &n, a.data(), &n, &none, &none, &lo, &hi, &abstol, &found, w.data(), z.data(), &n,
            support.data(), work.data(), &lwork, iwork.data(), &liwork, &info, 1, 1, 1);
    if (info != 0 || found != n)
        throw InvalidInput("detect: the covariance eigensolve failed (LAPACK dsyevr info " + std::to_string(info) +
                           "); is the data finite?");
    // z holds the eigenvectors as columns (column-major), ascending.
    for (int i = 0; i < n; ++i) {
        const int src = n - 1 - i;
        e.values[std::size_t(i)] = w[std::size_t(src)];
        for (int j = 0; j < n; ++j)
            e.vectors[std::size_t(i) * std::size_t(n) + std::size_t(j)] = z[std::size_t(src) * std::size_t(n) + std::size_t(j)];
    }
    return e;
}

// A + loading·(tr A / n)·I, then its eigendecomposition (`cached` when given and no loading).
Eigen loaded_eigen(int n, std::vector<double> A, const ClassicalOptions& o, const Eigen* cached) {
    if (o.loading > 0 && n > 0) {
        double trace = 0;
        for (int i = 0; i < n; ++i) trace += A[std::size_t(i) * std::size_t(n) + std::size_t(i)];
        for (int i = 0; i < n; ++i) A[std::size_t(i) * std::size_t(n) + std::size_t(i)] += o.loading * trace / n;
    } else if (cached) {
        return *cached;
    }
    return eigen_descending(n, std::move(A));
}

// W (r × n): rows v_i / sqrt(λ_i) for λ_i > cutoff·λ_max.
std::vector<double> whitening(int n, std::vector<double> A, const ClassicalOptions& o, int& rows,
                              const Eigen* cached = nullptr) {
    const Eigen e = loaded_eigen(n, std::move(A), o, cached);
    const double rcond = o.rcond > 0 ? o.rcond : n * std::ldexp(1.0, -52);
    const double cutoff = n > 0 ? rcond * e.values[0] : 0;
    std::vector<double> W;
    rows = 0;
    for (int i = 0; i < n && e.values[std::size_t(i)] > cutoff && e.values[std::size_t(i)] > 0; ++i, ++rows) {
        const double s = 1.0 / std::sqrt(e.values[std::size_t(i)]);
        for (int j = 0; j < n; ++j) W.push_back(e.vectors[std::size_t(i) * std::size_t(n) + std::size_t(j)] * s);
    }
    return W;
}

// W v (r entries) and Wᵀ s (n entries).
std::vector<double> times(const std::vector<double>& W, int r, int n, const std::vector<double>& v) {
    std::vector<double> out(std::size_t(r), 0.0);
    for (int i = 0; i < r; ++i)
        for (int j = 0; j < n; ++j) out[std::size_t(i)] += W[std::size_t(i) * std::size_t(n) + std::size_t(j)] * v[std::size_t(j)];
    return out;
}
std::vector<double> times_transposed(const std::vector<double>& W, int r, int n, const std::vector<double>& s) {
    std::vector<double> out(std::size_t(n), 0.0);
    for (int i = 0; i < r; ++i)
        for (int j = 0; j < n; ++j) out[std::size_t(j)] += W[std::size_t(i) * std::size_t(n) + std::size_t(j)] * s[std::size_t(i)];
    return out;
}
double dot(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

// ---- checks -----------------------------------------------------------------------------------------------

void check_options(const ClassicalOptions& o) {
    check_fields(o, "detect");
    const int inner = int(o.window[0]), outer = int(o.window[1]);
    if (o.window[0] != inner || o.window[1] != outer)
        throw InvalidInput("detect: window = " + value_text(o.window) + ": expected two integers INNER,OUTER");
    if (outer == 0 && inner == 0) return;
    if (o.detector != Detector::Rx) throw InvalidInput("detect: window: only rx has a local (two-window) form");
    if (inner < 1 || inner % 2 == 0 || outer % 2 == 0 || inner >= outer)
        throw InvalidInput("detect: window = " + value_text(o.window) + ": expected odd INNER < OUTER, e.g. 5,21");
}

std::vector<double> kept_target(const BackgroundStats& s, const std::vector<double>& target, Detector d) {
    if (d == Detector::Rx) return {};
    if (int(target.size()) != s.bands)
        throw InvalidInput("detect " + std::string(enum_name(d)) + ": target has " + std::to_string(target.size()) +
                           " values; the cube has " + std::to_string(s.bands) + " bands");
    std::vector<double> t;
    for (int b : s.kept) {
        if (!std::isfinite(target[std::size_t(b)]))
            throw InvalidInput("detect: target: value of band " + std::to_string(b) + " is not finite");
        t.push_back(target[std::size_t(b)]);
    }
    return t;
}

void check_stats(const BackgroundStats& s, int cube_bands, Detector d) {
    const std::size_t K = s.kept.size();
    if (s.bands != cube_bands)
        throw InvalidInput("detect: stats: fitted on " + std::to_string(s.bands) + " bands; the cube has " +
                           std::to_string(cube_bands));
    for (std::size_t i = 0; i < K; ++i)
        if (s.kept[i] < 0 || s.kept[i] >= s.bands || (i > 0 && s.kept[i] <= s.kept[i - 1]))
            throw InvalidInput("detect: stats: kept_bands must be ascending band indices below " + std::to_string(s.bands));
    if (K == 0) throw InvalidInput("detect: no band left after screening (keep_all_bands, --keep-all-bands, keeps them)");
    if (d == Detector::Sam) return;
    if (s.mean.size() != K || s.covariance.size() != K * K)
        throw InvalidInput("detect: stats: mean needs " + std::to_string(K) + " values and covariance " +
                           std::to_string(K) + "x" + std::to_string(K));
    if (s.samples < 1) throw InvalidInput("detect: stats: samples must be >= 1");
}

// ---- the prepared cube -------------------------------------------------------------------------------------

// The kept bands as a dense BSQ f64 cube in the backend's memory (NaN where mask == 0).
struct Prepared {
    Cube host;
    DeviceCube device;
    CubeView view;
};

Prepared prepare(const Context& ctx, const CubeView& cube, const std::vector<int>& kept,
                 const std::vector<std::uint8_t>& mask) {
    Prepared p;
    if (ctx.is_cuda()) {
        const CubeInLayout in(ctx, cube, Layout::BSQ, Memory::Device);
        p.device = detail::gather_f64_device(ctx, in.view(), kept, mask);
        p.view = p.device.view();
    } else {
        std::optional<CubeInLayout> down;
        CubeView src = cube;
        if (cube.on_device()) src = down.emplace(ctx, cube, Layout::BSQ, Memory::Host).view();
        p.host = detail::gather_f64_cpu(ctx, src, kept, mask);
        p.view = p.host.view();
    }
    return p;
}

ScorePlan make_plan(const BackgroundStats& s, const ClassicalOptions& o, const std::vector<double>& t) {
    const int K = int(s.kept.size());
    ScorePlan plan;
    plan.bands = K;
    plan.f32 = o.precision == Precision::F32;
    plan.mean.assign(std::size_t(K), 0.0);
    if (o.detector == Detector::Sam) {
        const double norm = std::sqrt(dot(t, t));
        if (!(norm > 0)) throw InvalidInput("detect sam: target: the target spectrum is zero over the kept bands");
        plan.mode = ScoreMode::Cosine;
        for (double v : t) plan.a.push_back(v / norm);
        return plan;
    }
    if (o.detector == Detector::Cem) {
        const double n = double(s.samples), scale = (n - s.ddof) / n;
        std::vector<double> R(s.covariance.size());
        for (int i = 0; i < K; ++i)
            for (int j = 0; j < K; ++j)
                R[std::size_t(i) * std::size_t(K) + std::size_t(j)] =
                    s.covariance[std::size_t(i) * std::size_t(K) + std::size_t(j)] * scale + s.mean[std::size_t(i)] * s.mean[std::size_t(j)];
        int r = 0;
        const std::vector<double> W = whitening(K, std::move(R), o, r);
        const std::vector<double> u = times_transposed(W, r, K, times(W, r, K, t));  // R⁺t
        const double tu = dot(t, u);
        if (!(tu > 0)) throw InvalidInput("detect cem: target: t'R+t = 0 (the target lies outside the data's span)");
        plan.mode = ScoreMode::Linear;
        for (double v : u) plan.a.push_back(v / tu);
        return plan;
    }
    plan.mean = s.mean;
    const std::size_t k2 = std::size_t(K) * std::size_t(K);
    const bool cached = s.eigenvalues.size() == std::size_t(K) && s.eigenvectors.size() == k2;
    const Eigen e{K, s.eigenvalues, s.eigenvectors};
    plan.W = whitening(K, s.covariance, o, plan.rows, cached ? &e : nullptr);
    if (o.detector == Detector::Rx) return plan;
    std::vector<double> d(static_cast<std::size_t>(K));
    for (int b = 0; b < K; ++b) d[std::size_t(b)] = t[std::size_t(b)] - s.mean[std::size_t(b)];
    const std::vector<double> sv = times(plan.W, plan.rows, K, d);
    const double ss = dot(sv, sv);
    if (!(ss > 0))
        throw InvalidInput("detect " + std::string(enum_name(o.detector)) +
                           ": target: equals the background mean in the whitened space");
    plan.a = times_transposed(plan.W, plan.rows, K, sv);
    const double div = o.detector == Detector::Mf ? ss : std::sqrt(ss);
    for (double& v : plan.a) v /= div;
    plan.mode = o.detector == Detector::Mf ? ScoreMode::Linear : ScoreMode::Ace;
    if (plan.mode == ScoreMode::Linear) plan.W.clear(), plan.rows = 0;
    return plan;
}

void check_out(const Context& ctx, const CubeView& cube, const MutableCubeView& out, const ClassicalOptions& o) {
    if (out.width() != cube.width() || out.height() != cube.height() || out.bands() != 1)
        throw InvalidInput("detect: out is " + out.describe() + "; expected " + std::to_string(cube.width()) + "x" +
                           std::to_string(cube.height()) + "x1");
    if (out.dtype() != o.out_type)
        throw InvalidInput("detect: out has element type " + std::string(dtype_name(out.dtype())) + "; out_type is " +
                           std::string(dtype_name(o.out_type)));
    if (out.on_device() != ctx.is_cuda())
        throw InvalidInput(std::string("detect: out must be in ") + (ctx.is_cuda() ? "device" : "host") +
                           " memory for this context");
}

Cube host_output(const Context& ctx, const CubeView& cube, const ClassicalOptions& o,
                 const std::function<void(const MutableCubeView&)>& run) {
    if (!ctx.is_cuda()) {
        Cube out(cube.width(), cube.height(), 1, o.out_type);
        run(out.mutable_view());
        return out;
    }
    DeviceCube d(ctx, CubeShape{cube.width(), cube.height(), 1, o.out_type, Layout::BSQ});
    run(d.mutable_view());
    return d.download(ctx);
}

}  // namespace

BackgroundStats screen_bands(const Context& ctx, const CubeView& cube, bool keep_all) {
    if (cube.empty()) throw InvalidInput("detect: the cube is empty (" + cube.describe() + ")");
    BackgroundStats s;
    s.bands = cube.bands();
    if (keep_all) {
        s.kept.resize(std::size_t(s.bands));
        std::iota(s.kept.begin(), s.kept.end(), 0);
        return s;
    }
    detail::screen(s, cube.on_device() ? detail::band_summary_device(ctx, cube) : detail::band_summary_cpu(ctx, cube));
    return s;
}

BackgroundStats fit_background(const Context& ctx, const CubeView& cube, const ClassicalOptions& options,
                               const CubeView* mask) {
    check_options(options);
    BackgroundStats s = screen_bands(ctx, cube, options.keep_all_bands);
    if (s.kept.empty()) throw InvalidInput("detect: every band was dropped by screening (keep_all_bands, --keep-all-bands, keeps them)");
    std::vector<std::uint8_t> bytes;
    if (mask) bytes = detail::mask_bytes(ctx, *mask, cube.width(), cube.height(), "mask");
    const auto check_samples = [&](std::int64_t N) {
        if (N - options.ddof < 1) throw InvalidInput("detect: ddof: " + std::to_string(N) + " pixel(s) used; too few");
    };
    if (ctx.is_cuda()) {
        // Two-pass f64 moments on the device straight from the cube (classical_mma.cu).
        const CubeInLayout in(ctx, cube, Layout::BSQ, Memory::Device);
        detail::DeviceMoments m = detail::moments_device(ctx, in.view(), s.kept, bytes);
        check_samples(m.samples);
        s.samples = m.samples;
        s.mean = std::move(m.mean);
        s.covariance = std::move(m.scatter);
        const double div = double(m.samples - options.ddof);
        for (double& c : s.covariance) c /= div;
    } else {
        const Prepared p = prepare(ctx, cube, s.kept, bytes);
        const PcaModel m = pca_fit(ctx, p.view, {.components = 1});  // exact integer sums
        check_samples(m.samples);
        s.samples = m.samples;
        s.mean = m.mean;
        const double scale = double(m.samples - 1) / double(m.samples - options.ddof);  // PCA's divisor N − 1 → N − ddof
        s.covariance = m.covariance;
        if (scale != 1.0)
            for (double& c : s.covariance) c *= scale;
    }
    s.ddof = options.ddof;
    detail::add_eigen(s);
    return s;
}

namespace detail {

void screen(BackgroundStats& s, const BandSummary& sum) {
    for (int b = 0; b < s.bands; ++b) {
        const std::size_t i = std::size_t(b);
        if (sum.nonfinite[i] > 0) s.dropped.push_back({b, "non-finite"});
        else if (sum.min[i] == 0 && sum.max[i] == 0) s.dropped.push_back({b, "all-zero"});
        else if (sum.min[i] == sum.max[i]) s.dropped.push_back({b, "constant"});
        else s.kept.push_back(b);
    }
}

void add_eigen(BackgroundStats& s) {
    Eigen e = eigen_descending(int(s.kept.size()), s.covariance);
    s.eigenvalues = std::move(e.values);
    s.eigenvectors = std::move(e.vectors);
}

ScorePlan checked_plan(const BackgroundStats& stats, const ClassicalOptions& options, const std::vector<double>& target,
                       int cube_bands) {
    check_options(options);
    if (options.window[1] != 0) throw InvalidInput("detect: window: apply_detector takes global statistics; use local_rx");
    check_stats(stats, cube_bands, options.detector);
    return make_plan(stats, options, kept_target(stats, target, options.detector));
}

void apply_plan_into(const Context& ctx, const CubeView& cube, const BackgroundStats& stats, const ScorePlan& plan,
                     const ClassicalOptions& options, const MutableCubeView& out) {
    check_out(ctx, cube, out, options);
    if (ctx.is_cuda()) {  // straight from the cube (classical_mma.cu): no f64 copy
        const CubeInLayout in(ctx, cube, Layout::BSQ, Memory::Device);
        detail::score_direct_device(ctx, in.view(), stats.kept, plan, out);
        return;
    }
    const Prepared p = prepare(ctx, cube, stats.kept, {});
    detail::score_cpu(ctx, p.view, plan, out);
}

}  // namespace detail

void apply_detector_into(const Context& ctx, const CubeView& cube, const BackgroundStats& stats,
                         const ClassicalOptions& options, const std::vector<double>& target,
                         const MutableCubeView& out) {
    const ScorePlan plan = detail::checked_plan(stats, options, target, cube.bands());
    detail::apply_plan_into(ctx, cube, stats, plan, options, out);
}

Cube apply_detector(const Context& ctx, const CubeView& cube, const BackgroundStats& stats,
                    const ClassicalOptions& options, const std::vector<double>& target) {
    return host_output(ctx, cube, options,
                       [&](const MutableCubeView& out) { apply_detector_into(ctx, cube, stats, options, target, out); });
}

void local_rx_into(const Context& ctx, const CubeView& cube, const ClassicalOptions& options,
                   const MutableCubeView& out, LocalRxReport* report) {
    check_options(options);
    if (options.window[1] == 0) throw InvalidInput("detect rx: window: local RX needs INNER,OUTER");
    detail::local_rx_kept(ctx, cube, options, screen_bands(ctx, cube, options.keep_all_bands).kept, out, report);
}

namespace detail {

void local_rx_kept(const Context& ctx, const CubeView& cube, const ClassicalOptions& options, const std::vector<int>& kept,
                   const MutableCubeView& out, LocalRxReport* report) {
    const detail::LocalWindows win{int(options.window[0]), int(options.window[1])};
    if (win.outer == 0) throw InvalidInput("detect rx: window: local RX needs INNER,OUTER");
    check_out(ctx, cube, out, options);
    if (win.outer > cube.width() || win.outer > cube.height())
        throw InvalidInput("detect rx: window: OUTER = " + std::to_string(win.outer) + " exceeds the image (" +
                           std::to_string(cube.width()) + "x" + std::to_string(cube.height()) + ")");
    const BackgroundStats s{.kept = kept};
    const int K = int(s.kept.size());
    if (K == 0) throw InvalidInput("detect: every band was dropped by screening (keep_all_bands, --keep-all-bands, keeps them)");
    if (win.samples() - options.ddof <= K)
        throw InvalidInput("detect rx: window = " + value_text(options.window) + " gives " + std::to_string(win.samples()) +
                           " background pixels, too few for " + std::to_string(K) +
                           " bands (OUTER^2 - INNER^2 must exceed the bands)");
    const Prepared p = prepare(ctx, cube, s.kept, {});
    const std::int64_t singular = ctx.is_cuda() ? detail::local_rx_device(ctx, p.view, win, options.ddof, out)
                                                : detail::local_rx_cpu(ctx, p.view, win, options.ddof, out);
    if (report) report->singular = singular;
}

}  // namespace detail

Cube local_rx(const Context& ctx, const CubeView& cube, const ClassicalOptions& options, LocalRxReport* report) {
    return host_output(ctx, cube, options,
                       [&](const MutableCubeView& out) { local_rx_into(ctx, cube, options, out, report); });
}

ClassicalResult detect_classical(const Context& ctx, const CubeView& cube, const ClassicalOptions& options,
                                 const std::vector<double>& target) {
    check_options(options);
    ClassicalResult r;
    if (options.window[1] != 0) {
        r.score = local_rx(ctx, cube, options, &r.local);
        return r;
    }
    r.stats = options.detector == Detector::Sam ? screen_bands(ctx, cube, options.keep_all_bands)
                                                : fit_background(ctx, cube, options);
    r.score = apply_detector(ctx, cube, r.stats, options, target);
    return r;
}

}  // namespace cubekit

#ifndef CUBEKIT_HAVE_CUDA
namespace cubekit::detail {
namespace {
[[noreturn]] void no_cuda() { throw DeviceError("detect: this cubekit was built without CUDA"); }
}  // namespace
BandSummary band_summary_device(const Context&, const CubeView&) { no_cuda(); }
DeviceCube gather_f64_device(const Context&, const CubeView&, const std::vector<int>&, const std::vector<std::uint8_t>&) {
    no_cuda();
}
DeviceMoments moments_device(const Context&, const CubeView&, const std::vector<int>&, const std::vector<std::uint8_t>&) {
    no_cuda();
}
void score_direct_device(const Context&, const CubeView&, const std::vector<int>&, const ScorePlan&,
                         const MutableCubeView&) {
    no_cuda();
}
std::int64_t local_rx_device(const Context&, const CubeView&, LocalWindows, int, const MutableCubeView&) { no_cuda(); }
}  // namespace cubekit::detail
#endif
