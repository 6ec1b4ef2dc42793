// k-means CPU engine across its inputs and modes: legacy mode against the seed program (oracle 10
// of kmeans.md §5), every element type, band count and awkward size, palette rounding, masked and
// NaN pixels, and bad inputs (§3.12). Shared helpers: kmeans_test_helpers.hpp. Runs in CI.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kmeans_test_helpers.hpp"

namespace cubekit {
namespace {

using namespace kmeans_test;

// ---- Oracle 10: legacy mode = the seed program ---------------------------------------------------

// The seed's sequential program (§3.1), restated independently: integer centroids, per-pixel
// argmin of the integer squared distance with strict < (lowest index wins), u32 sums, empty
// cluster → count 1 → ⌊0/1⌋ = black, exactly n_iter iterations, paint with the last assignment
// and the last update, no sort.
struct SeedOutput {
    std::vector<std::int32_t> labels;
    std::vector<std::uint32_t> centroids;
    std::vector<std::uint8_t> painted;
    int empty_events = 0;
};
SeedOutput seed_program(const std::vector<std::uint8_t>& px, std::vector<std::uint32_t> c, int n_iter) {
    const std::size_t N = px.size() / 3, k = c.size() / 3;
    SeedOutput out;
    out.labels.assign(N, 0);
    for (int it = 0; it < n_iter; ++it) {
        for (std::size_t i = 0; i < N; ++i) {
            int best = 0;
            std::int32_t bd = INT32_MAX;
            for (std::size_t j = 0; j < k; ++j) {
                std::int32_t d = 0;
                for (int b = 0; b < 3; ++b) {
                    const std::int32_t diff = std::int32_t(px[3 * i + b]) - std::int32_t(c[3 * j + b]);
                    d += diff * diff;
                }
                if (d < bd) bd = d, best = int(j);
            }
            out.labels[i] = best;
        }
        std::vector<std::uint32_t> sum(3 * k, 0), n(k, 0);
        for (std::size_t i = 0; i < N; ++i) {
            ++n[out.labels[i]];
            for (int b = 0; b < 3; ++b) sum[3 * out.labels[i] + b] += px[3 * i + b];
        }
        for (std::size_t j = 0; j < k; ++j) {
            if (n[j] == 0) n[j] = 1, ++out.empty_events;
            for (int b = 0; b < 3; ++b) c[3 * j + b] = sum[3 * j + b] / n[j];
        }
    }
    out.centroids = c;
    for (std::size_t i = 0; i < N; ++i)
        for (int b = 0; b < 3; ++b) out.painted.push_back(std::uint8_t(c[3 * out.labels[i] + b]));
    return out;
}

TEST(Kmeans, LegacyModeEqualsTheSeedProgram) {
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const int W = 41, H = 23, N = W * H;
    struct Case { std::string name; double lo, hi; std::vector<std::uint32_t> init; };
    // Data in [0, 255]; and a dark image in [0, 90] whose white centroid is empty at once
    // (→ black, which then steals the darkest pixels).
    const std::vector<Case> cases = {{"full", 0, 255, {}}, {"dark", 0, 90, {}}};
    bool any_empty = false;
    for (const Case& cs : cases)
        for (int variant = 0; variant < 3; ++variant) {
            const Cube img = testing::random_cube(W, H, 3, DType::U8, rng(), cs.lo, cs.hi, Layout::BIP);
            std::vector<std::uint8_t> px(std::size_t(N) * 3);
            for (int i = 0; i < N; ++i)
                for (int b = 0; b < 3; ++b) px[3 * i + b] = img.at<std::uint8_t>(i % W, i / W, b);
            // Initial centroids as the seed draws them: pixels with replacement (k = 10); variant 1
            // repeats one (a guaranteed empty cluster), variant 2 adds a white centroid.
            const int k = 10;
            std::vector<std::uint32_t> init;
            std::uniform_int_distribution<int> pick(0, N - 1);
            for (int j = 0; j < k; ++j) {
                const int i = pick(rng);
                for (int b = 0; b < 3; ++b) init.push_back(px[3 * i + b]);
            }
            if (variant == 1)
                for (int b = 0; b < 3; ++b) init[3 * 7 + b] = init[3 * 2 + b];
            if (variant == 2)
                for (int b = 0; b < 3; ++b) init[3 * 4 + b] = 255;
            for (int n_iter : {1, 2, 10}) {
                SCOPED_TRACE(cs.name + " variant " + std::to_string(variant) + " n_iter " + std::to_string(n_iter));
                const SeedOutput ref = seed_program(px, init, n_iter);
                any_empty = any_empty || ref.empty_events > 0;
                KmeansOptions o{.k = k, .init = KmeansInit::Explicit, .max_iter = n_iter, .tol = 0, .legacy = true};
                o.init_centroids.assign(init.begin(), init.end());
                const KmeansResult r = run(img, o);
                EXPECT_EQ(r.labels, ref.labels) << "labels = last assignment, no sort";
                ASSERT_EQ(r.centroids.size(), ref.centroids.size());
                for (std::size_t i = 0; i < ref.centroids.size(); ++i)
                    ASSERT_EQ(r.centroids[i], double(ref.centroids[i])) << "centroid element " << i << " (empty events " << ref.empty_events << ")";
                ASSERT_EQ(r.quantized.width(), W);
                std::size_t diff = 0;
                for (int i = 0; i < N; ++i)
                    for (int b = 0; b < 3; ++b) diff += r.quantized.value(i % W, i / W, b) != double(ref.painted[3 * i + b]);
                EXPECT_EQ(diff, 0u) << "painted samples differ from the seed program";
                EXPECT_EQ(r.iterations, n_iter);
                std::vector<std::uint64_t> hist(k, 0);
                for (std::int32_t l : ref.labels) ++hist[l];
                EXPECT_EQ(r.counts, hist) << "counts of the last assignment";
                if (variant == 1) {
                    EXPECT_GT(ref.empty_events, 0);
                }
            }
        }
    EXPECT_TRUE(any_empty) << "no case exercised an empty cluster";
}

// ---- Every element type, band count and awkward size -----------------------------------------------

TEST(Kmeans, EveryTypeBandCountAndSize) {
    struct Size { int W, H; };
    for (DType t : kTypes)
        for (int m : {1, 3, 4, 103})
            for (const Size& sz : {Size{1, 1}, Size{1, 50}, Size{50, 1}, Size{997, 13}}) {
                const std::uint64_t seed = test_seed();
                const auto [lo, hi] = data_range(t);
                const Cube img = testing::random_cube(sz.W, sz.H, m, t, seed, lo, hi);
                const int N = sz.W * sz.H;
                for (int k : {1, 3, 16}) {
                    if (k > N || (N * m > 100000 && k > 3)) continue;  // keep the 997×13×103 runs short
                    SCOPED_TRACE(str(t) + " " + std::to_string(sz.W) + "x" + std::to_string(sz.H) + "x" + std::to_string(m) + " k=" +
                                 std::to_string(k) + " seed " + std::to_string(seed));
                    const KmeansOptions o{.k = k, .seed = seed, .max_iter = N * m > 100000 ? 5 : 30};
                    KmeansResult r;
                    ASSERT_NO_THROW(r = run(img, o));
                    ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, r));
                    if (N == 1) {
                        for (int b = 0; b < m; ++b) {
                            EXPECT_TRUE(same_bits(r.centroids[b], as_centroid(img.value(0, 0, b), t)));
                            // u32/i32 beyond 2^24: painted with the f32-rounded centroid
                            EXPECT_EQ(r.quantized.value(0, 0, b), palette_value(as_centroid(img.value(0, 0, b), t), t));
                        }
                    }
                }
            }
}

TEST(Kmeans, PaletteRoundsHalfAwayFromZeroAndClamps) {
    // i16 centroids that are exact halves: mean of {0, 1} = 0.5 → 1, of {2, 3} = 2.5 → 3, of
    // {−3, −2} = −2.5 → −3 (half away from zero, not to even), of {255, 255} = 255.
    const Cube img = from_pixels(4, 1, 2, DType::I16, {0, 2, 1, 3, -3, 255, -2, 255});
    const KmeansOptions o{.k = 2, .init = KmeansInit::Explicit, .max_iter = 5, .init_centroids = {0.4, 2.6, -2.6, 255}};
    const KmeansResult r = run(img, o);
    ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, r));
    EXPECT_EQ(r.counts, (std::vector<std::uint64_t>{2, 2}));
    EXPECT_EQ(r.centroids, (std::vector<double>{0.5, 2.5, -2.5, 255}));
    EXPECT_EQ(r.palette, (std::vector<double>{1, 3, -3, 255}));
}

// ---- Mask and NaN ----------------------------------------------------------------------------------

TEST(Kmeans, MaskedAndNaNPixelsAreExcluded) {
    for (DType t : {DType::F32, DType::F64, DType::U16, DType::U8}) {
        const std::uint64_t seed = test_seed();
        SCOPED_TRACE(str(t) + " seed " + std::to_string(seed));
        std::mt19937_64 rng(seed);
        const int W = 43, H = 29, m = 3;
        Cube img = testing::random_cube(W, H, m, t, seed, 0, 200, Layout::BIP);
        std::vector<std::uint8_t> mask(std::size_t(W) * H, 1);
        for (std::size_t p = 0; p < mask.size(); ++p) {
            const int x = int(p % W), y = int(p / W);
            if (rng() % 5 == 0) {
                mask[p] = 0;  // masked pixels hold extreme values: they must not touch max/min/sums
                for (int b = 0; b < m; ++b) img.set_value(x, y, b, dtype_is_float(t) ? 1e30 : type_hi(t));
            } else if (dtype_is_float(t) && rng() % 7 == 0) {
                const int nb = int(rng() % m);
                img.set_value(x, y, nb, NAN);  // one NaN band excludes the pixel
                img.set_value(x, y, (nb + 1) % m, -1e30);
            }
        }
        const ValidSet s = valid_set(img, mask);
        const Cube compact = from_pixels(int(s.size()), 1, m, t, s.x);
        std::vector<double> init(s.px(5), s.px(5) + m);
        init.insert(init.end(), s.px(100), s.px(100) + m);
        init.insert(init.end(), s.px(200), s.px(200) + m);
        init.insert(init.end(), s.px(300), s.px(300) + m);
        for (KmeansInit init_kind : {KmeansInit::Explicit, KmeansInit::KmeansPlusPlus, KmeansInit::Random, KmeansInit::BoxDiagonal})
            for (std::int64_t sample : {std::int64_t(0), std::int64_t(300)}) {
                SCOPED_TRACE(std::string(kmeans_init_name(init_kind)) + " init_sample " + std::to_string(sample));
                KmeansOptions o{.k = 4, .init = init_kind, .seed = seed, .init_sample = sample, .max_iter = 30,
                                .init_centroids = init_kind == KmeansInit::Explicit ? init : std::vector<double>{}, .mask = mask};
                const KmeansResult r = run(img, o);
                ASSERT_NO_FATAL_FAILURE(check_invariants(img, o, r));  // label −1, copied unchanged
                o.mask.clear();
                const KmeansResult c = run(compact, o);
                EXPECT_EQ(r.valid_pixels, s.size());
                EXPECT_EQ(r.counts, c.counts);
                for (std::size_t i = 0; i < r.centroids.size(); ++i)
                    ASSERT_TRUE(same_bits(r.centroids[i], c.centroids[i])) << "centroid element " << i << ": " << r.centroids[i] << " vs " << c.centroids[i] << " without the excluded pixels";
                for (std::int64_t i = 0; i < s.size(); ++i) ASSERT_EQ(r.labels[s.raster[i]], c.labels[i]) << "valid pixel " << i;
                EXPECT_EQ(r.iterations, c.iterations);
                EXPECT_NEAR(r.inertia, c.inertia, 1e-9 * c.inertia);
            }
    }
}

// ---- Bad inputs (§3.12) --------------------------------------------------------------------------

void expect_invalid(const std::function<void()>& f, const std::vector<std::string>& names, const std::string& value, const std::string& what) {
    SCOPED_TRACE(what);
    try {
        f();
        ADD_FAILURE() << "no InvalidInput thrown";
    } catch (const InvalidInput& e) {
        const std::string msg = e.what();
        bool named = false;
        for (const std::string& n : names) named = named || msg.find(n) != std::string::npos;
        EXPECT_TRUE(named) << "message does not name the parameter: " << msg;
        EXPECT_NE(msg.find(value), std::string::npos) << "message does not name the value " << value << ": " << msg;
    } catch (const std::exception& e) {
        ADD_FAILURE() << "wrong exception type: " << e.what();
    }
}

TEST(Kmeans, BadInputsThrowNamingParameterAndValue) {
    const Cube img = testing::random_cube(10, 10, 3, DType::U8, 1, 0, 255);
    const Cube f32 = testing::random_cube(10, 10, 3, DType::F32, 2, 0, 255);
    const Cube u8m4 = testing::random_cube(10, 10, 4, DType::U8, 3, 0, 255);
    const std::vector<std::string> k_names = {"k"}, mi = {"max_iter", "max-iter"}, ni = {"n_init", "n-init"},
                                    is = {"init_sample", "init-sample"}, ic = {"init_centroids", "centroids", "palette"};
    auto km = [](const Cube& c, KmeansOptions o) { return [&c, o] { (void)kmeans(cpu_context(), c, o); }; };
    expect_invalid(km(img, {.k = 0}), k_names, "0", "k = 0");
    expect_invalid(km(img, {.k = -3}), k_names, "-3", "k = -3");
    expect_invalid(km(img, {.k = 101}), k_names, "101", "k > N");
    std::vector<std::uint8_t> few(100, 0);
    few[3] = few[50] = 1;
    expect_invalid(km(img, {.k = 3, .mask = few}), k_names, "3", "k > valid pixels");
    expect_invalid(km(Cube(4, 4, 0, DType::U8), {.k = 1}), {"band", "m =", "4x4x0"}, "0", "zero bands");
    expect_invalid(km(img, {.k = 2, .init = KmeansInit::Explicit, .init_centroids = {1, 2, 3, 4, 5}}), ic, "5", "init_centroids of 5 values");
    expect_invalid(km(img, {.k = 2, .init = KmeansInit::Explicit}), ic, "0", "init_centroids empty");
    expect_invalid(km(img, {.k = 2, .mask = std::vector<std::uint8_t>(99, 1)}), {"mask"}, "99", "mask of 99");
    expect_invalid(km(img, {.k = 2, .max_iter = -1}), mi, "-1", "max_iter = -1");
    expect_invalid(km(img, {.k = 2, .tol = -1}), {"tol"}, "-1", "tol = -1");
    expect_invalid(km(img, {.k = 2, .tol = NAN}), {"tol"}, "nan", "tol = NaN");
    expect_invalid(km(img, {.k = 2, .tol = INFINITY}), {"tol"}, "inf", "tol = inf");
    expect_invalid(km(img, {.k = 2, .n_init = 0}), ni, "0", "n_init = 0");
    expect_invalid(km(img, {.k = 2, .init_sample = -1}), is, "-1", "init_sample = -1");
    expect_invalid(km(f32, {.k = 2, .init = KmeansInit::Explicit, .legacy = true, .init_centroids = {0, 0, 0, 1, 1, 1}}), {"legacy"}, "f32",
                   "legacy with f32");
    expect_invalid(km(u8m4, {.k = 2, .init = KmeansInit::Explicit, .legacy = true, .init_centroids = {0, 0, 0, 0, 1, 1, 1, 1}}), {"legacy"},
                   "4", "legacy with 4 bands");
    // No value to name here: the message must say that no pixel is valid.
    expect_invalid(km(img, {.k = 1, .mask = std::vector<std::uint8_t>(100, 0)}), {"mask"}, "valid", "empty mask");
    Cube nan = f32.clone();
    for (int y = 0; y < 10; ++y)
        for (int x = 0; x < 10; ++x) nan.set_value(x, y, (x + y) % 3, NAN);
    expect_invalid(km(nan, {.k = 1}), {"NaN", "nan"}, "valid", "all-NaN image");
    // The same shape checks without data.
    expect_invalid([&] { check_kmeans_arguments(img.shape(), {.k = 0}); }, k_names, "0", "check: k = 0");
    expect_invalid([&] { check_kmeans_arguments(img.shape(), {.k = 2, .max_iter = -1}); }, mi, "-1", "check: max_iter");
    expect_invalid([&] { check_kmeans_arguments(img.shape(), {.k = 2, .mask = std::vector<std::uint8_t>(7, 1)}); }, {"mask"}, "7", "check: mask");
    expect_invalid([&] { check_kmeans_arguments(f32.shape(), {.k = 2, .legacy = true}); }, {"legacy"}, "f32", "check: legacy f32");
    EXPECT_NO_THROW(check_kmeans_arguments(img.shape(), {.k = 16}));
    // apply_palette: palette size must be a multiple of m.
    EXPECT_THROW((void)apply_palette(cpu_context(), img, {1, 2, 3, 4}), InvalidInput);
    // Option names.
    for (KmeansInit i : {KmeansInit::KmeansPlusPlus, KmeansInit::Random, KmeansInit::BoxDiagonal, KmeansInit::Explicit})
        EXPECT_EQ(parse_kmeans_init(kmeans_init_name(i)), i);
    for (EmptyPolicy p : {EmptyPolicy::Relocate, EmptyPolicy::Keep, EmptyPolicy::LegacyZero}) EXPECT_EQ(parse_empty_policy(empty_policy_name(p)), p);
    expect_invalid([] { (void)parse_kmeans_init("kmeans--"); }, {"init"}, "kmeans--", "parse init");
    expect_invalid([] { (void)parse_empty_policy("drop"); }, {"empty"}, "drop", "parse empty");
    EXPECT_EQ(kmeans_implementation(cpu_context(), img.shape(), {}), "cpu");
}

}  // namespace
}  // namespace cubekit
