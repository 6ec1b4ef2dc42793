// PCA (spec edges.md §3.9 "E5"): the front door and the host routine both backends share (exact
// sums → mean, covariance, one LAPACK eigensolve, sign rule); the CPU backend is cpu.cpp.
//
// Exactness: the backends only produce integer sums (PcaSums), which do not depend on the order
// of the additions; everything in floating point after that happens here, once, for both. The
// scores are f64 with one rounding per subtraction, multiplication and addition in band order
// (this file is compiled with -ffp-contract=off; cuda.cu uses __dsub_rn/__dmul_rn/__dadd_rn).
#include <boost/multiprecision/cpp_int.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <type_traits>

#include "core/outputs.hpp"
#include "cubekit/error.hpp"
#include "linalg/pca_internal.hpp"

// LAPACK (Fortran ABI; the trailing arguments are gfortran's hidden lengths of the CHARACTER
// arguments): tridiagonal reduction, all eigenvalues of the tridiagonal, a few of its eigenvectors
// by bisection and inverse iteration (what dsyevr itself does for part of the spectrum; MRRR, dstemr,
// fails on some matrices when asked for a subset), and their back-transformation; dsyevr (all
// eigenvectors) when all are kept or when a step of the short path fails (dstebz does on some
// near-overflow covariances), as dsyevr itself falls back from one method to another. Only the k vectors the model keeps are computed: the back-
// transformation of all B vectors would cost more than the reduction itself.
extern "C" {
void dsyevr_(const char* jobz, const char* range, const char* uplo, const int* n, double* a, const int* lda,
             const double* vl, const double* vu, const int* il, const int* iu, const double* abstol, int* m, double* w,
             double* z, const int* ldz, int* isuppz, double* work, const int* lwork, int* iwork, const int* liwork,
             int* info, std::size_t jobz_len, std::size_t range_len, std::size_t uplo_len);
void dsytrd_(const char* uplo, const int* n, double* a, const int* lda, double* d, double* e, double* tau, double* work,
             const int* lwork, int* info, std::size_t uplo_len);
void dsterf_(const int* n, double* d, double* e, int* info);
void dstebz_(const char* range, const char* order, const int* n, const double* vl, const double* vu, const int* il,
             const int* iu, const double* abstol, const double* d, const double* e, int* m, int* nsplit, double* w,
             int* iblock, int* isplit, double* work, int* iwork, int* info, std::size_t range_len, std::size_t order_len);
void dstein_(const int* n, const double* d, const double* e, const int* m, const double* w, const int* iblock,
             const int* isplit, double* z, const int* ldz, double* work, int* iwork, int* ifail, int* info);
void dormtr_(const char* side, const char* uplo, const char* trans, const int* m, const int* n, const double* a,
             const int* lda, const double* tau, double* c, const int* ldc, double* work, const int* lwork, int* info,
             std::size_t side_len, std::size_t uplo_len, std::size_t trans_len);
}

namespace cubekit {
namespace detail {
namespace {

namespace mp = boost::multiprecision;
using u64 = std::uint64_t;
using km::u128;

constexpr std::int64_t kMaxPixels = std::numeric_limits<std::int32_t>::max();  // the bounds of PcaSums

// ---- exact integer → f64, correctly rounded ------------------------------------------------------
// A magnitude of more than 64 bits keeps its top 64 bits plus a sticky bit for everything below:
// the conversion of that u64 rounds to nearest-even at bit 11, far above the sticky bit, so the
// result is the correctly rounded value of the whole integer. (Boost 1.74's own conversion does
// not promise correct rounding.)
double rounded(u64 top, bool sticky, int shift) { return std::ldexp(double(top | (sticky ? 1u : 0u)), shift); }

double to_double(i128 v) {
    const bool negative = v < 0;
    const u128 m = negative ? u128(0) - u128(v) : u128(v);
    const u64 hi = u64(m >> 64), lo = u64(m);
    double r;
    if (hi == 0) {
        r = double(lo);
    } else {
        const int shift = 64 - __builtin_clzll(hi);  // bits of m above its top 64
        r = rounded(u64(m >> shift), (m & ((u128(1) << shift) - 1)) != 0, shift);
    }
    return negative ? -r : r;
}

double to_double(const mp::int256_t& v) {
    if (v == 0) return 0.0;
    const bool negative = v < 0;
    const mp::int256_t m = negative ? mp::int256_t(-v) : v;
    const unsigned msb = mp::msb(m);
    if (msb < 64) return (negative ? -1.0 : 1.0) * double(m.convert_to<u64>());
    const unsigned shift = msb - 63;
    const bool sticky = (m & ((mp::int256_t(1) << shift) - 1)) != 0;
    const double r = rounded((m >> shift).convert_to<u64>(), sticky, int(shift));
    return negative ? -r : r;
}

mp::int256_t wide(i128 v) {
    return mp::int256_t(std::int64_t(v >> 64)) * (mp::int256_t(1) << 64) + mp::int256_t(u64(v));
}

// P·S_ij − S_i·S_j exactly (P²·cov_ij·2^(2e)). With |S_ij| < 2^95 every term fits in 128 bits
// (P < 2^31, |S_i| < 2^63), which is the case for all integer input; else 256-bit arithmetic.
double centred_numerator(std::int64_t P, i128 s_ij, std::int64_t s_i, std::int64_t s_j) {
    constexpr i128 k95 = i128(1) << 95;
    if (s_ij < k95 && s_ij > -k95) return to_double(i128(P) * s_ij - i128(s_i) * i128(s_j));
    return to_double(wide(s_ij) * P - mp::int256_t(s_i) * s_j);
}

/// ⌈log2 v⌉ for v > 0 (as in kmeans.cpp).
int ceil_log2(double v) {
    int E = 0;
    const double f = std::frexp(v, &E);
    return f == 0.5 ? E - 1 : E;
}

// The short path: all eigenvalues (ascending) and the eigenvectors of the k largest (columns of
// `vectors`, n×k, ascending). False when a LAPACK step fails.
bool top_eigen(int n, int k, std::vector<double> a, std::vector<double>& values, std::vector<double>& vectors) {
    const std::size_t nn = std::size_t(n);
    std::vector<double> d(nn), e(nn), tau(std::max<std::size_t>(nn, 1));
    int info = 0, lwork = -1;
    double query = 0;
    dsytrd_("U", &n, a.data(), &n, d.data(), e.data(), tau.data(), &query, &lwork, &info, 1);
    if (info != 0) return false;
    std::vector<double> work(std::size_t(std::max(1, int(query))));
    lwork = int(work.size());
    dsytrd_("U", &n, a.data(), &n, d.data(), e.data(), tau.data(), work.data(), &lwork, &info, 1);
    if (info != 0) return false;

    values = d;  // dsterf overwrites its copies of the tridiagonal with the eigenvalues
    std::vector<double> e_values = e;
    dsterf_(&n, values.data(), e_values.data(), &info);
    if (info != 0) return false;

    const int il = n - k + 1, iu = n;
    const double vl = 0, vu = 0, abstol = 0;  // abstol 0: LAPACK's default accuracy
    int found = 0, nsplit = 0;
    std::vector<double> w(nn), stebz_work(4 * nn), stein_work(5 * nn);
    std::vector<int> iblock(nn), isplit(nn), iwork(3 * nn), ifail(static_cast<std::size_t>(k));
    dstebz_("I", "B", &n, &vl, &vu, &il, &iu, &abstol, d.data(), e.data(), &found, &nsplit, w.data(), iblock.data(),
            isplit.data(), stebz_work.data(), iwork.data(), &info, 1, 1);
    if (info != 0 || found != k) return false;
    std::vector<double> z(nn * std::size_t(k));
    dstein_(&n, d.data(), e.data(), &found, w.data(), iblock.data(), isplit.data(), z.data(), &n, stein_work.data(),
            iwork.data(), ifail.data(), &info);
    if (info != 0) return false;
    // dstebz orders by split block; the model wants ascending values (stable, so ties keep LAPACK's order).
    std::vector<int> order(static_cast<std::size_t>(k));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return w[std::size_t(x)] < w[std::size_t(y)]; });
    vectors.resize(nn * std::size_t(k));
    for (int j = 0; j < k; ++j)
        std::copy_n(z.data() + std::size_t(order[std::size_t(j)]) * nn, nn, vectors.data() + std::size_t(j) * nn);

    lwork = -1;
    dormtr_("L", "U", "N", &n, &k, a.data(), &n, tau.data(), vectors.data(), &n, &query, &lwork, &info, 1, 1, 1);
    if (info != 0) return false;
    work.assign(std::size_t(std::max(1, int(query))), 0.0);
    lwork = int(work.size());
    dormtr_("L", "U", "N", &n, &k, a.data(), &n, tau.data(), vectors.data(), &n, work.data(), &lwork, &info, 1, 1, 1);
    if (info != 0) return false;
    return true;
}

// All eigenvalues (ascending) and all eigenvectors (columns) by one dsyevr.
void all_eigen(int n, std::vector<double> a, std::vector<double>& values, std::vector<double>& vectors) {
    values.assign(std::size_t(n), 0.0);
    vectors.assign(std::size_t(n) * std::size_t(n), 0.0);
    std::vector<int> support(2 * std::size_t(n));
    const double vl = 0, vu = 0, abstol = 0;  // abstol 0: LAPACK's default (full accuracy)
    const int il = 1, iu = n;
    int found = 0, info = 0, lwork = -1, liwork = -1, iwork_size = 0;
    double work_size = 0;
    dsyevr_("V", "A", "U", &n, a.data(), &n, &vl, &vu, &il, &iu, &abstol, &found, values.data(), vectors.data(), &n,
            support.data(), &work_size, &lwork, &iwork_size, &liwork, &info, 1, 1, 1);
    if (info != 0) throw InvalidInput("pca: LAPACK dsyevr workspace query failed (info = " + std::to_string(info) + ")");
    lwork = int(work_size);
    liwork = iwork_size;
    std::vector<double> work(std::size_t(std::max(lwork, 1)));
    std::vector<int> iwork(std::size_t(std::max(liwork, 1)));
    dsyevr_("V", "A", "U", &n, a.data(), &n, &vl, &vu, &il, &iu, &abstol, &found, values.data(), vectors.data(), &n,
            support.data(), work.data(), &lwork, iwork.data(), &liwork, &info, 1, 1, 1);
    if (info != 0 || found != n)
        throw InvalidInput("pca: LAPACK dsyevr failed on the " + std::to_string(n) + "x" + std::to_string(n) +
                           " covariance (info = " + std::to_string(info) + ")");
}

// All eigenvalues of the symmetric n×n `a` (ascending) and the eigenvectors of the k largest
// (columns of `vectors`, n×k, in ascending order of their eigenvalues).
void symmetric_eigen(int n, int k, const std::vector<double>& a, std::vector<double>& values, std::vector<double>& vectors) {
    if (k < n && top_eigen(n, k, a, values, vectors)) return;
    all_eigen(n, a, values, vectors);
    vectors.erase(vectors.begin(), vectors.begin() + std::ptrdiff_t(std::size_t(n - k) * std::size_t(n)));
}

// Sign rule of §3.9 on one eigenvector.
void fix_sign(double* v, int n) {
    double sum = 0, l1 = 0;
    for (int b = 0; b < n; ++b) sum += v[b], l1 += std::fabs(v[b]);
    bool flip = sum < 0;
    if (std::fabs(sum) <= 1e-12 * l1) {
        int largest = 0;
        for (int b = 1; b < n; ++b)
            if (std::fabs(v[b]) > std::fabs(v[largest])) largest = b;  // strict: the first on ties
        flip = v[largest] < 0;
    }
    if (flip)
        for (int b = 0; b < n; ++b) v[b] = -v[b];
}

}  // namespace

int pca_fixed_point_exponent(double max_abs, std::int64_t count) {
    if (!(max_abs > 0) || count <= 0) return 0;
    // |q| ≤ 2^(62 − ⌈log2 P⌉): P such values sum to at most 2^62 in int64, and P products to at
    // most 2^(124 − ⌈log2 P⌉) in int128.
    return std::clamp(62 - ceil_log2(max_abs) - ceil_log2(double(count)), -1000, 1000);
}

PcaModel pca_model_from_sums(const PcaSums& s, int components) {
    const int B = s.bands;
    check_pca_components(components, B, "pca_fit");
    if (s.count <= 0) throw InvalidInput("pca_fit: no pixel has all its bands finite; nothing to fit");
    const std::size_t nb = std::size_t(B);
    PcaModel m;
    m.bands = B;
    m.samples = s.count;
    m.mean.resize(nb);
    for (std::size_t b = 0; b < nb; ++b) m.mean[b] = std::ldexp(double(s.first[b]) / double(s.count), -s.exponent);
    // C_ij = (P·S_ij − S_i·S_j) / (P·(P − 1)) · 2^(−2e): the numerator exact and rounded once to
    // f64, one division by the denominator P(P − 1) (exact in 128 bits, rounded once to f64), an
    // exact power-of-two scaling. The same code for both backends, so bit-identical.
    m.covariance.assign(nb * nb, 0.0);
    if (s.count > 1) {
        const double denominator = to_double(i128(s.count) * i128(s.count - 1));
        for (int i = 0; i < B; ++i)
            for (int j = i; j < B; ++j) {
                const double num = centred_numerator(s.count, s.second[std::size_t(i) * nb + std::size_t(j)],
                                                     s.first[std::size_t(i)], s.first[std::size_t(j)]);
                const double c = std::ldexp(num / denominator, -2 * s.exponent);
                if (!std::isfinite(c))
                    throw InvalidInput("pca_fit: the covariance of bands " + std::to_string(i) + " and " +
                                       std::to_string(j) + " overflows f64 (the values are too large)");
                m.covariance[std::size_t(i) * nb + std::size_t(j)] = c;
                m.covariance[std::size_t(j) * nb + std::size_t(i)] = c;
            }
    }
    std::vector<double> values, vectors;
    symmetric_eigen(B, components, m.covariance, values, vectors);
    // Descending: LAPACK's values and the k vectors come in ascending order.
    m.eigenvalues.assign(values.rbegin(), values.rend());
    double total = 0;
    for (double v : m.eigenvalues) total += v;
    m.components.resize(std::size_t(components) * nb);
    m.explained_variance_ratio.resize(std::size_t(components));
    for (int j = 0; j < components; ++j) {
        double* v = m.components.data() + std::size_t(j) * nb;
        std::copy_n(vectors.data() + std::size_t(components - 1 - j) * nb, nb, v);  // the j-th largest
        fix_sign(v, B);
        m.explained_variance_ratio[std::size_t(j)] = total != 0 ? m.eigenvalues[std::size_t(j)] / total : 0.0;
    }
    return m;
}

void check_pca_cube(const CubeShape& shape, const char* fn) {
    if (shape.width <= 0 || shape.height <= 0 || shape.bands <= 0)
        throw InvalidInput(std::string(fn) + ": the cube is " + std::to_string(shape.width) + "x" +
                           std::to_string(shape.height) + "x" + std::to_string(shape.bands) +
                           "; width, height and bands must be at least 1");
    if (std::int64_t(shape.num_pixels()) > kMaxPixels)
        throw InvalidInput(std::string(fn) + ": the cube has " + std::to_string(shape.num_pixels()) +
                           " pixels; at most 2^31 - 1 are supported (bounds of the exact sums)");
}

void check_pca_components(int components, int bands, const char* fn) {
    if (components < 1 || components > bands)
        throw InvalidInput(std::string(fn) + ": components = " + std::to_string(components) + "; expected 1.." +
                           std::to_string(bands) + " (the number of bands)");
}

void check_pca_model(const PcaModel& model, int cube_bands, const char* fn) {
    const std::size_t nb = std::size_t(std::max(model.bands, 0));
    if (model.bands < 1 || model.mean.size() != nb || model.components.empty() || model.components.size() % nb != 0)
        throw InvalidInput(std::string(fn) + ": the model is inconsistent (bands = " + std::to_string(model.bands) +
                           ", " + std::to_string(model.mean.size()) + " means, " +
                           std::to_string(model.components.size()) + " component entries)");
    if (model.bands != cube_bands)
        throw InvalidInput(std::string(fn) + ": the cube has " + std::to_string(cube_bands) +
                           " bands; the model was fitted on " + std::to_string(model.bands));
}

}  // namespace detail

// ---- front door ------------------------------------------------------------------------------------

namespace {

// The cube where the backend reads it: the CPU any host view as it is (a device view comes down
// once); CUDA a dense BSQ cube on its device as it is (anything else is uploaded or reordered once).
CubeView pca_input(const Context& ctx, const CubeView& cube, std::optional<CubeInLayout>& storage) {
    if (!ctx.is_cuda() && !cube.on_device()) return cube;
    storage.emplace(ctx, cube, Layout::BSQ, ctx.is_cuda() ? Memory::Device : Memory::Host);
    return storage->view();
}

PcaModel fit_on(const Context& ctx, const CubeView& input, int components) {
    if (!ctx.is_cuda()) return detail::pca_model_from_sums(detail::pca_sums_cpu(ctx, input), components);
    return detail::pca_fit_device(ctx, input, components);
}

// `scores`: checked by check_scores. CUDA writes a dense BSQ output directly, any other through one
// device copy.
void transform_on(const Context& ctx, const CubeView& input, const PcaModel& model, const MutableCubeView& scores) {
    if (!ctx.is_cuda()) {
        detail::pca_transform_cpu(ctx, input, model, scores);
        return;
    }
    if (scores.is_dense(Layout::BSQ)) {
        detail::pca_transform_device(ctx, input, model, reinterpret_cast<double*>(scores.data()));
        return;
    }
    DeviceCube dense(ctx, CubeShape{scores.width(), scores.height(), scores.bands(), DType::F64, Layout::BSQ});
    detail::pca_transform_device(ctx, input, model, static_cast<double*>(dense.data()));
    copy_cube(ctx, dense.view(), scores);
}

void check_scores(const Context& ctx, const CubeView& cube, int components, const MutableCubeView& scores,
                  const char* fn) {
    const std::string who = std::string(fn) + ": scores are";
    detail::check_output_memory(ctx, scores, who);
    detail::check_output_shape(scores, cube.width(), cube.height(), components, DType::F64, who);
}

// The host scores of the plain calls (bands named PC1..PCk), through a device cube on a CUDA context.
Cube host_scores(const Context& ctx, const CubeView& input, const PcaModel& model) {
    const int k = model.num_components();
    Cube out = detail::host_result(ctx, {input.width(), input.height(), k, DType::F64, Layout::BSQ},
                                   [&](const MutableCubeView& scores) { transform_on(ctx, input, model, scores); });
    for (int j = 0; j < k; ++j) out.metadata().band_names.push_back("PC" + std::to_string(j + 1));
    return out;
}

}  // namespace

PcaModel pca_fit(const Context& ctx, const CubeView& cube, const PcaOptions& options) {
    detail::check_pca_cube(shape_of(cube), "pca_fit");
    detail::check_pca_components(options.components, cube.bands(), "pca_fit");
    ctx.log("pca_fit: " + std::string(ctx.backend_name()) + ", " + cube.describe());
    std::optional<CubeInLayout> storage;
    return fit_on(ctx, pca_input(ctx, cube, storage), options.components);
}

void pca_transform_into(const Context& ctx, const CubeView& cube, const PcaModel& model, const MutableCubeView& scores) {
    detail::check_pca_cube(shape_of(cube), "pca_transform");
    detail::check_pca_model(model, cube.bands(), "pca_transform");
    check_scores(ctx, cube, model.num_components(), scores, "pca_transform_into");
    std::optional<CubeInLayout> storage;
    transform_on(ctx, pca_input(ctx, cube, storage), model, scores);
}

Cube pca_transform(const Context& ctx, const CubeView& cube, const PcaModel& model) {
    detail::check_pca_cube(shape_of(cube), "pca_transform");
    detail::check_pca_model(model, cube.bands(), "pca_transform");
    std::optional<CubeInLayout> storage;
    return host_scores(ctx, pca_input(ctx, cube, storage), model);
}

PcaModel pca_into(const Context& ctx, const CubeView& cube, const MutableCubeView& scores, const PcaOptions& options) {
    detail::check_pca_cube(shape_of(cube), "pca");
    detail::check_pca_components(options.components, cube.bands(), "pca");
    check_scores(ctx, cube, options.components, scores, "pca_into");
    ctx.log("pca: " + std::string(ctx.backend_name()) + ", " + cube.describe());
    std::optional<CubeInLayout> storage;
    const CubeView input = pca_input(ctx, cube, storage);  // one upload or reorder for the fit and the scores
    PcaModel model = fit_on(ctx, input, options.components);
    transform_on(ctx, input, model, scores);
    return model;
}

PcaResult pca(const Context& ctx, const CubeView& cube, const PcaOptions& options) {
    detail::check_pca_cube(shape_of(cube), "pca");
    detail::check_pca_components(options.components, cube.bands(), "pca");
    ctx.log("pca: " + std::string(ctx.backend_name()) + ", " + cube.describe());
    std::optional<CubeInLayout> storage;
    const CubeView input = pca_input(ctx, cube, storage);  // one upload or reorder for the fit and the scores
    PcaResult r;
    r.model = fit_on(ctx, input, options.components);
    r.scores = host_scores(ctx, input, r.model);
    return r;
}

}  // namespace cubekit

#ifndef CUBEKIT_HAVE_CUDA
namespace cubekit::detail {
// CPU-only build: a CUDA context cannot exist, so these are unreachable through the public API.
PcaModel pca_fit_device(const Context&, const CubeView&, int) {
    throw DeviceError("pca: this cubekit was built without CUDA");
}
void pca_transform_device(const Context&, const CubeView&, const PcaModel&, double*) {
    throw DeviceError("pca: this cubekit was built without CUDA");
}
}  // namespace cubekit::detail
#endif
