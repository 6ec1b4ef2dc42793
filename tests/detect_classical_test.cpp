// Classical detectors (detect_classical.hpp) on the CPU against an independent reference written
// here: long-double two-pass statistics and a Gauss–Jordan inverse (the library uses exact integer
// sums, LAPACK dsyevr and a pseudo-inverse, so agreement is to rounding: 1e-9 relative on
// well-conditioned random data), plus closed forms (mean RX = K with divisor N; MF(t) = 1;
// ACE(t) = 1; CEM wᵀt = 1; SAM(t) = 1), band screening, statistics files and bad inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <tuple>

#include "cubekit/detect_classical.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "detect/classical_internal.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using LD = long double;
using Matrix = std::vector<std::vector<LD>>;

// Correlated random data: x = A·g + offset, g standard normal (never all-zero).
Cube correlated_cube(int W, int H, int B, std::uint64_t seed, Layout layout = Layout::BSQ) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> g(0, 1);
    std::vector<double> A(std::size_t(B * B));
    for (double& a : A) a = g(rng);
    Cube c(W, H, B, DType::F64, layout);
    std::vector<double> z(static_cast<std::size_t>(B));
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            for (double& v : z) v = g(rng);
            for (int b = 0; b < B; ++b) {
                double s = 10.0 + b;
                for (int k = 0; k < B; ++k) s += A[std::size_t(b * B + k)] * z[std::size_t(k)];
                c.at<double>(x, y, b) = s;
            }
        }
    return c;
}

std::vector<LD> pixel(const Cube& c, int x, int y) {
    std::vector<LD> v(std::size_t(c.bands()));
    for (int b = 0; b < c.bands(); ++b) v[std::size_t(b)] = c.value(x, y, b);
    return v;
}

struct RefStats {
    std::vector<LD> mean;
    Matrix cov;
};

RefStats ref_stats(const std::vector<std::vector<LD>>& xs, int ddof) {
    const std::size_t K = xs[0].size();
    RefStats s{std::vector<LD>(K, 0), Matrix(K, std::vector<LD>(K, 0))};
    for (const auto& x : xs)
        for (std::size_t b = 0; b < K; ++b) s.mean[b] += x[b] / LD(xs.size());
    for (const auto& x : xs)
        for (std::size_t i = 0; i < K; ++i)
            for (std::size_t j = 0; j < K; ++j) s.cov[i][j] += (x[i] - s.mean[i]) * (x[j] - s.mean[j]);
    for (auto& row : s.cov)
        for (LD& v : row) v /= LD(xs.size() - std::size_t(ddof));
    return s;
}

Matrix inverse(Matrix a) {
    const std::size_t n = a.size();
    Matrix inv(n, std::vector<LD>(n, 0));
    for (std::size_t i = 0; i < n; ++i) inv[i][i] = 1;
    for (std::size_t c = 0; c < n; ++c) {
        std::size_t p = c;
        for (std::size_t r = c + 1; r < n; ++r)
            if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
        std::swap(a[c], a[p]), std::swap(inv[c], inv[p]);
        const LD d = a[c][c];
        for (std::size_t j = 0; j < n; ++j) a[c][j] /= d, inv[c][j] /= d;
        for (std::size_t r = 0; r < n; ++r)
            if (r != c) {
                const LD f = a[r][c];
                for (std::size_t j = 0; j < n; ++j) a[r][j] -= f * a[c][j], inv[r][j] -= f * inv[c][j];
            }
    }
    return inv;
}

LD form(const std::vector<LD>& u, const Matrix& M, const std::vector<LD>& v) {
    LD s = 0;
    for (std::size_t i = 0; i < u.size(); ++i)
        for (std::size_t j = 0; j < v.size(); ++j) s += u[i] * M[i][j] * v[j];
    return s;
}
std::vector<LD> minus(const std::vector<LD>& a, const std::vector<LD>& b) {
    std::vector<LD> r(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) r[i] = a[i] - b[i];
    return r;
}

// The reference score of one detector at one pixel.
LD reference_score(Detector d, const std::vector<LD>& x, const std::vector<LD>& t, const RefStats& s, const Matrix& Si,
                   const Matrix& Ri) {
    const auto y = minus(x, s.mean), dt = minus(t, s.mean);
    switch (d) {
        case Detector::Rx: return form(y, Si, y);
        case Detector::Mf: return form(dt, Si, y) / form(dt, Si, dt);
        case Detector::Ace: {
            const LD a = form(dt, Si, y);
            return std::clamp<LD>(a * a / (form(dt, Si, dt) * form(y, Si, y)), 0, 1);
        }
        case Detector::Cem: return form(t, Ri, x) / form(t, Ri, t);
        case Detector::Sam: {
            LD tx = 0, tt = 0, xx = 0;
            for (std::size_t b = 0; b < x.size(); ++b) tx += t[b] * x[b], tt += t[b] * t[b], xx += x[b] * x[b];
            return tx / std::sqrt(tt * xx);
        }
    }
    return 0;
}

void expect_matches_reference(const Cube& cube, Detector d, int ddof) {
    SCOPED_TRACE(std::string(enum_name(d)) + " ddof " + std::to_string(ddof));
    std::vector<std::vector<LD>> xs;
    for (int y = 0; y < cube.height(); ++y)
        for (int x = 0; x < cube.width(); ++x) xs.push_back(pixel(cube, x, y));
    const RefStats s = ref_stats(xs, ddof);
    Matrix R(s.mean.size(), std::vector<LD>(s.mean.size()));
    for (std::size_t i = 0; i < R.size(); ++i)
        for (std::size_t j = 0; j < R.size(); ++j) {
            for (const auto& x : xs) R[i][j] += x[i] * x[j];
            R[i][j] /= LD(xs.size());
        }
    const Matrix Si = inverse(s.cov), Ri = inverse(R);
    const std::vector<LD> t = pixel(cube, 3, 2);
    const std::vector<double> target(t.begin(), t.end());
    const ClassicalResult r = detect_classical(cpu_context(), cube, {.detector = d, .ddof = ddof}, target);
    for (int y = 0; y < cube.height(); ++y)
        for (int x = 0; x < cube.width(); ++x) {
            const double want = double(reference_score(d, pixel(cube, x, y), t, s, Si, Ri));
            const double got = r.score.value(x, y, 0);
            ASSERT_NEAR(got, want, 1e-9 * std::max(1.0, std::fabs(want))) << "pixel " << x << "," << y;
        }
}

TEST(ClassicalDetectors, MatchIndependentReference) {
    const Cube cube = correlated_cube(23, 17, 6, 11);
    for (Detector d : {Detector::Rx, Detector::Mf, Detector::Ace, Detector::Cem, Detector::Sam})
        for (int ddof : {0, 1}) expect_matches_reference(cube, d, ddof);
}

template <class F>
void expect_invalid(F&& f, const std::string& names);

TEST(ClassicalDetectors, AwkwardSizes) {
    expect_matches_reference(correlated_cube(7, 5, 1, 12), Detector::Rx, 0);     // one band
    expect_matches_reference(correlated_cube(1, 17, 3, 13), Detector::Ace, 0);   // one column
    expect_matches_reference(correlated_cube(31, 29, 300, 14), Detector::Rx, 1);  // 300 bands, primes
    // One pixel: every band is constant, so screening leaves none (an error naming keep_all_bands);
    // with all bands kept Σ = 0, the pseudo-inverse is 0 and RX scores 0.
    expect_invalid([] { detect_classical(cpu_context(), correlated_cube(1, 1, 4, 15)); }, "keep_all_bands");
    const ClassicalResult r = detect_classical(cpu_context(), correlated_cube(1, 1, 4, 15), {.keep_all_bands = true});
    EXPECT_EQ(r.score.value(0, 0, 0), 0.0);
}

TEST(ClassicalDetectors, ClosedForms) {
    const Cube cube = correlated_cube(31, 29, 9, 5);
    const std::vector<LD> t = pixel(cube, 7, 4);
    const std::vector<double> target(t.begin(), t.end());
    const Context& ctx = cpu_context();
    // Σ_p (x−μ)ᵀΣ⁻¹(x−μ) = N·K with divisor N.
    const Cube rx = detect_classical(ctx, cube).score;
    double sum = 0;
    for (int y = 0; y < cube.height(); ++y)
        for (int x = 0; x < cube.width(); ++x) sum += rx.value(x, y, 0);
    EXPECT_NEAR(sum / (31 * 29), 9.0, 1e-9);
    for (Detector d : {Detector::Mf, Detector::Ace, Detector::Cem, Detector::Sam}) {
        const Cube s = detect_classical(ctx, cube, {.detector = d}, target).score;
        EXPECT_NEAR(s.value(7, 4, 0), 1.0, 1e-9) << enum_name(d);
    }
    // ACE within [0, 1]; SAM within [−1, 1].
    const Cube ace = detect_classical(ctx, cube, {.detector = Detector::Ace}, target).score;
    for (int y = 0; y < cube.height(); ++y)
        for (int x = 0; x < cube.width(); ++x) EXPECT_TRUE(ace.value(x, y, 0) >= 0 && ace.value(x, y, 0) <= 1);
}

TEST(ClassicalDetectors, LayoutsAndTypesAgree) {
    const Cube bsq = correlated_cube(19, 13, 5, 3);
    const Cube bip = bsq.to_layout(Layout::BIP);
    const Context& ctx = cpu_context();
    EXPECT_TRUE(testing::cubes_identical(detect_classical(ctx, bsq).score, detect_classical(ctx, bip).score));
    // f32 whitening: within 1e-5 relative of f64 on well-conditioned data.
    const Cube f32 = detect_classical(ctx, bsq, {.precision = Precision::F32}).score;
    EXPECT_TRUE(testing::cubes_close(detect_classical(ctx, bsq).score, f32, 1e-4, 1.0));
}

TEST(ClassicalDetectors, BandScreeningDropsAndReports) {
    const Cube base = correlated_cube(17, 15, 4, 8);
    Cube wide(17, 15, 7, DType::F64);
    for (int y = 0; y < 15; ++y)
        for (int x = 0; x < 17; ++x) {
            wide.at<double>(x, y, 0) = base.at<double>(x, y, 0);
            wide.at<double>(x, y, 1) = 0;  // all-zero
            wide.at<double>(x, y, 2) = base.at<double>(x, y, 1);
            wide.at<double>(x, y, 3) = 7.5;  // constant
            wide.at<double>(x, y, 4) = base.at<double>(x, y, 2);
            wide.at<double>(x, y, 5) = (x == 3 && y == 4) ? NAN : 1.0 + x;  // non-finite
            wide.at<double>(x, y, 6) = base.at<double>(x, y, 3);
        }
    const Context& ctx = cpu_context();
    const ClassicalResult r = detect_classical(ctx, wide);
    ASSERT_EQ(r.stats.dropped.size(), 3u);
    EXPECT_EQ(r.stats.dropped[0].reason, "all-zero");
    EXPECT_EQ(r.stats.dropped[1].reason, "constant");
    EXPECT_EQ(r.stats.dropped[2].reason, "non-finite");
    EXPECT_EQ(r.stats.kept, (std::vector<int>{0, 2, 4, 6}));
    EXPECT_TRUE(testing::cubes_identical(detect_classical(ctx, base).score, r.score));
    // Kept: the zero and constant bands are null directions the pseudo-inverse drops.
    const Cube no_nan = wide.select_bands({0, 1, 2, 3, 4, 6});
    const Cube kept = detect_classical(ctx, no_nan, {.keep_all_bands = true}).score;
    EXPECT_TRUE(testing::cubes_close(r.score, kept, 1e-7, 1.0));
}

// The statistics of a file read a strip of rows at a time equal the whole cube's bit for bit: the
// screening's merges and PCA's exact integer sums do not depend on how the rows are cut (strips of
// one row to the whole scene, .npy and ENVI BIL, i16 and f64 with NaN pixels, a mask, both ddofs).
TEST(ClassicalDetectors, StatisticsFromAFileInStripsEqualTheWholeFit) {
    const Cube base = correlated_cube(23, 19, 6, 12);
    Cube wide(23, 19, 8, DType::F64);
    for (int y = 0; y < 19; ++y)
        for (int x = 0; x < 23; ++x) {
            for (int b = 0; b < 6; ++b) wide.at<double>(x, y, b) = base.at<double>(x, y, b) * (b % 2 ? 1e6 : 1);
            wide.at<double>(x, y, 6) = 0;    // all-zero: dropped
            wide.at<double>(x, y, 7) = 2.5;  // constant: dropped
        }
    wide.at<double>(4, 17, 2) = NAN;  // band 2 dropped as non-finite, by the last strip only
    Cube i16(23, 19, 6, DType::I16, Layout::BIL);
    for (int y = 0; y < 19; ++y)
        for (int x = 0; x < 23; ++x)
            for (int b = 0; b < 6; ++b) i16.set_value(x, y, b, std::round(base.at<double>(x, y, b) * 300));
    Cube mask(23, 19, 1, DType::U8);
    for (int y = 0; y < 19; ++y)
        for (int x = 0; x < 23; ++x) mask.at<std::uint8_t>(x, y, 0) = (x * 7 + y * 3) % 5 != 0;
    const Context& ctx = cpu_context();
    const auto dir = testing::temp_dir("classical-file-fit");
    write_cube(wide, dir / "wide.npy");
    write_cube(i16, dir / "i16.hdr");
    const std::size_t row_wide = 23 * 8 * 8, row_i16 = 23 * 6 * 2;
    for (const auto& [path, cube, row] : {std::tuple{dir / "wide.npy", &wide, row_wide}, std::tuple{dir / "i16.hdr", &i16, row_i16}})
        for (const std::size_t rows : {1, 4, 19})
            for (const int ddof : {0, 1})
                for (const bool masked : {false, true}) {
                    SCOPED_TRACE(path.string() + " rows " + std::to_string(rows) + " ddof " + std::to_string(ddof) +
                                 (masked ? " masked" : ""));
                    const CubeView m = mask.view();
                    const BackgroundStats want = fit_background(ctx, *cube, {.ddof = ddof}, masked ? &m : nullptr);
                    // The budget counts the raw row and its gathered f64 kept bands.
                    const std::size_t budget = rows * (row + 23 * want.kept.size() * 8);
                    const BackgroundStats got = fit_background(ctx, CubeFile(path), {.ddof = ddof}, masked ? &m : nullptr, budget);
                    EXPECT_EQ(got.kept, want.kept);
                    EXPECT_EQ(got.dropped.size(), want.dropped.size());
                    EXPECT_EQ(got.samples, want.samples);
                    EXPECT_EQ(got.mean, want.mean);
                    EXPECT_EQ(got.covariance, want.covariance);
                    EXPECT_EQ(got.eigenvalues, want.eigenvalues);
                    EXPECT_EQ(got.eigenvectors, want.eigenvectors);
                }
    // The target spectrum of a mask: only the strips holding target pixels are read, the same sums.
    Cube target_mask(23, 19, 1, DType::U8);
    target_mask.at<std::uint8_t>(3, 2, 0) = target_mask.at<std::uint8_t>(20, 2, 0) = target_mask.at<std::uint8_t>(7, 15, 0) = 1;
    target_mask.at<std::uint8_t>(4, 17, 0) = 1;  // its band 2 is NaN: left out
    for (const std::size_t rows : {1, 5, 19}) {
        const auto t = target_from_mask(ctx, CubeFile(dir / "wide.npy"), target_mask.view(), rows * row_wide);
        EXPECT_EQ(t, target_from_mask(ctx, wide, target_mask.view())) << rows;
        const auto u = target_from_mask(ctx, CubeFile(dir / "i16.hdr"), target_mask.view(), rows * row_i16);
        EXPECT_EQ(u, target_from_mask(ctx, i16, target_mask.view())) << rows;
    }
    EXPECT_THROW(target_from_mask(ctx, CubeFile(dir / "wide.npy"), Cube(23, 19, 1, DType::U8).view()), InvalidInput);
    const BackgroundStats screened = screen_bands(ctx, CubeFile(dir / "wide.npy"), false, 23 * 8 * 8);
    EXPECT_EQ(screened.kept, (std::vector<int>{0, 1, 3, 4, 5}));  // band 2 holds the NaN
    EXPECT_EQ(screened.dropped.size(), 3u);
    EXPECT_THROW(fit_background(ctx, CubeFile(dir / "wide.npy"), {}, nullptr, 100), InvalidInput);  // no row fits
}

TEST(ClassicalDetectors, StatisticsFilesRoundTrip) {
    const Cube cube = correlated_cube(21, 11, 5, 4);
    const Context& ctx = cpu_context();
    const BackgroundStats s = fit_background(ctx, cube, {.ddof = 1});
    const std::vector<double> t = {11, 12, 13, 14, 15};
    const ClassicalOptions ace{.detector = Detector::Ace};
    const Cube want = apply_detector(ctx, cube, s, ace, t);
    for (const char* name : {"s.json", "s.npz"}) {
        const auto path = testing::temp_dir("classical-stats") / name;
        write_background_stats(s, path);
        const BackgroundStats back = read_background_stats(path);
        EXPECT_EQ(back.kept, s.kept);
        EXPECT_EQ(back.samples, s.samples);
        EXPECT_EQ(back.ddof, 1);
        EXPECT_TRUE(testing::cubes_identical(want, apply_detector(ctx, cube, back, ace, t))) << name;
    }
    // Statistics of one tile applied to another.
    const Cube other = correlated_cube(9, 9, 5, 4);
    EXPECT_NO_THROW(apply_detector(ctx, other, s, {}));
}

TEST(ClassicalDetectors, LocalRxMatchesReferenceWithSpyWindows) {
    const Cube cube = correlated_cube(13, 11, 3, 21);
    const int inner = 3, outer = 7, W = 13, H = 11;
    const Cube got = local_rx(cpu_context(), cube, {.window = {3, 7}});
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            // SPy 0.22.4 inner_outer_window_mask_creator, written out again.
            const auto start = [](int i, int n, int len) { return i - n / 2 < 0 ? 0 : (i - n / 2 + n > len ? len - n : i - n / 2); };
            const int oy = start(y, outer, H), ox = start(x, outer, W), iy = start(y, inner, H), ix = start(x, inner, W);
            std::vector<std::vector<LD>> xs;
            for (int yy = oy; yy < oy + outer; ++yy)
                for (int xx = ox; xx < ox + outer; ++xx)
                    if (!(yy >= iy && yy < iy + inner && xx >= ix && xx < ix + inner)) xs.push_back(pixel(cube, xx, yy));
            ASSERT_EQ(xs.size(), 40u);
            const RefStats s = ref_stats(xs, 0);
            const auto d = minus(pixel(cube, x, y), s.mean);
            const double want = double(form(d, inverse(s.cov), d));
            ASSERT_NEAR(got.value(x, y, 0), want, 1e-9 * std::max(1.0, want)) << x << "," << y;
        }
}

template <class F>
void expect_invalid(F&& f, const std::string& names) {
    try {
        f();
        ADD_FAILURE() << "no InvalidInput (expected one naming " << names << ")";
    } catch (const InvalidInput& e) {
        EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
    }
}

TEST(ClassicalDetectors, BadInputsNameTheField) {
    const Cube cube = correlated_cube(12, 12, 30, 2);
    const Context& ctx = cpu_context();
    expect_invalid([&] { local_rx(ctx, cube, {.window = {5, 7}}); }, "window");   // 24 pixels < 30 bands
    expect_invalid([&] { local_rx(ctx, cube, {.window = {4, 9}}); }, "window");   // even
    expect_invalid([&] { local_rx(ctx, cube, {.window = {3, 13}}); }, "window");  // larger than the image
    expect_invalid([&] { detect_classical(ctx, cube, {.detector = Detector::Mf}, {1, 2}); }, "target");
    const Cube mask(11, 12, 1, DType::U8);
    expect_invalid([&] { target_from_mask(ctx, cube, mask); }, "mask");
    expect_invalid([&] { fit_background(ctx, cube, {.ddof = 2}); }, "ddof");
    BackgroundStats s = fit_background(ctx, cube);
    s.mean.pop_back();
    expect_invalid([&] { apply_detector(ctx, cube, s, {}); }, "stats");
}

TEST(ClassicalDetectors, TargetSpectrumFiles) {
    const auto dir = testing::temp_dir("classical-target");
    std::ofstream(dir / "pairs.csv") << "wavelength,reflectance\n400,1\n500,2\n600,4\n";
    EXPECT_EQ(read_target_spectrum(dir / "pairs.csv", {400, 450, 600}, 3), (std::vector<double>{1, 1.5, 4}));
    std::ofstream(dir / "list.json") << "[0.5, 0.25, 0.125]";
    EXPECT_EQ(read_target_spectrum(dir / "list.json", {}, 3), (std::vector<double>{0.5, 0.25, 0.125}));
    std::ofstream(dir / "map.json") << "{\"400\": 1, \"600\": 3}";
    EXPECT_EQ(read_target_spectrum(dir / "map.json", {500}, 1), (std::vector<double>{2}));
    expect_invalid([&] { read_target_spectrum(dir / "list.json", {}, 4); }, "list.json");
    expect_invalid([&] { read_target_spectrum(dir / "pairs.csv", {380, 450}, 2); }, "pairs.csv");
}

}  // namespace
}  // namespace cubekit
