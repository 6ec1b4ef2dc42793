// Synthetic detection scenes (spec detect.md §C.3, cubekit/synth.hpp): the RNG against the
// splitmix64 reference, bit-identical scenes across runs and thread counts, every sample against the
// mixing formula recomputed here from the §C.3 spectra and an independent 4×4 supersampling, the
// noise's law, object counts, parameter ranges and gaps, the truth and id maps, bad options, and
// the `cubekit synth` command.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <numbers>
#include <string>
#include <vector>

#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "cubekit/synth.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

namespace fs = std::filesystem;
using testing::cubes_identical;

// ---- oracles: §C.3 written out again, independently of src/detect/synth.cpp ------------------------

double logistic(double l, double mu, double w) { return 1.0 / (1.0 + std::exp(-(l - mu) / w)); }

double spec_reflectance(SynthObjectKind kind, double l) {
    switch (kind) {
        case SynthObjectKind::Castaway: return 0.05 + 0.55 * logistic(l, 580, 15);
        case SynthObjectKind::Buoy: return 0.05 + 0.60 * logistic(l, 520, 15);
        case SynthObjectKind::Boat: return 0.60 + 0.05 * (l - 400) / 600;
        case SynthObjectKind::Leaf: {
            const double g = (l - 550) / 30;
            return 0.05 + 0.07 * std::exp(-g * g) + 0.45 * logistic(l, 715, 12);
        }
    }
    return 0;
}

double spec_water(double l) {
    const double g = (l - 480) / 80;
    return 0.02 + 0.06 * std::exp(-g * g);
}

double spec_paper(double l) { return 0.80 - 0.10 * (l - 400) / 600; }

/// The background of pixel (x, y) at λ.
double spec_background(SynthSceneKind kind, int x, int y, double l) {
    if (kind == SynthSceneKind::Leaves) return spec_paper(l);
    const double deg30 = std::numbers::pi / 6;
    return spec_water(l) * (1 + 0.15 * std::sin(2 * std::numbers::pi * (x * std::cos(deg30) + y * std::sin(deg30)) / 37));
}

bool spec_inside(const SynthObject& o, double px, double py) {
    const double dx = px - o.cx, dy = py - o.cy;
    const double u = dx * std::cos(o.angle) + dy * std::sin(o.angle), v = -dx * std::sin(o.angle) + dy * std::cos(o.angle);
    switch (o.kind) {
        case SynthObjectKind::Buoy: return std::hypot(dx, dy) <= o.half_length + 1e-12;
        case SynthObjectKind::Boat: return std::abs(u) <= o.half_length && std::abs(v) <= o.half_width;
        default: return (u / o.half_length) * (u / o.half_length) + (v / o.half_width) * (v / o.half_width) <= 1;
    }
}

/// Index into `placed` of the object over pixel (x, y) and its 4×4-supersampled coverage; (−1, 0) for none.
std::pair<int, double> spec_coverage(const std::vector<SynthObject>& placed, int x, int y) {
    for (std::size_t i = 0; i < placed.size(); ++i) {
        const SynthObject& o = placed[i];
        if (std::hypot(x + 0.5 - o.cx, y + 0.5 - o.cy) > o.radius + 1) continue;
        int in = 0;
        for (int j = 0; j < 4; ++j)
            for (int k = 0; k < 4; ++k) in += spec_inside(o, x + (k + 0.5) / 4, y + (j + 0.5) / 4);
        if (in > 0) return {int(i), in / 16.0};
    }
    return {-1, 0.0};
}

/// A castaway scene small enough for per-pixel oracles: all 17 objects of the spec in 256×256×10.
const SynthOptions kSmall{.width = 256, .height = 256, .bands = 10};
/// A small leaves scene.
const SynthOptions kSmallLeaves{.width = 320, .height = 128, .bands = 6, .targets = 6};

/// Reports the first sample where two scenes' placed objects differ.
::testing::AssertionResult same_objects(const SynthScene& a, const SynthScene& b) {
    if (a.placed.size() != b.placed.size()) return ::testing::AssertionFailure() << "object counts differ";
    for (std::size_t i = 0; i < a.placed.size(); ++i) {
        const SynthObject &p = a.placed[i], &q = b.placed[i];
        if (p.cx != q.cx || p.cy != q.cy || p.half_length != q.half_length || p.half_width != q.half_width ||
            p.angle != q.angle || p.amplitude != q.amplitude || p.area != q.area)
            return ::testing::AssertionFailure() << "object " << p.id << " differs";
    }
    return ::testing::AssertionSuccess();
}

// ---- the generator -----------------------------------------------------------------------------------

TEST(SynthRng, SplitMix64MatchesTheReferenceStream) {
    SplitMix64 rng{0};
    EXPECT_EQ(rng.next(), 0xe220a8397b1dcdafULL);
    EXPECT_EQ(rng.next(), 0x6e789e6aa1b965f4ULL);
    EXPECT_EQ(rng.next(), 0x06c45d188009454fULL);

    SplitMix64 a{12345}, b{12345};
    const std::uint64_t z = b.next();
    EXPECT_EQ(a.uniform(), double(z >> 11) / 9007199254740992.0);  // (z >> 11)·2⁻⁵³
    const double u1 = b.uniform(), u2 = b.uniform();
    EXPECT_EQ(a.normal(), std::sqrt(-2 * std::log(1 - u1)) * std::cos(2 * std::numbers::pi * u2));

    SplitMix64 walked{99}, jumped{99};
    for (int i = 0; i < 1000; ++i) walked.next();
    jumped.skip(1000);
    EXPECT_EQ(walked.next(), jumped.next());
}

TEST(SynthRng, NormalHasZeroMeanAndUnitVariance) {
    SplitMix64 rng{7};
    const int n = 200000;
    double sum = 0, sum2 = 0;
    for (int i = 0; i < n; ++i) {
        const double v = rng.normal();
        sum += v, sum2 += v * v;
    }
    const double mean = sum / n, var = sum2 / n - mean * mean;
    EXPECT_LT(std::abs(mean), 4 / std::sqrt(double(n)));
    EXPECT_NEAR(var, 1.0, 4 * std::sqrt(2.0 / n));
}

TEST(SynthScene, WavelengthsAndSpectraFollowTheSpec) {
    const std::vector<double> l = synth_wavelengths(64);
    ASSERT_EQ(l.size(), 64u);
    EXPECT_EQ(l[0], 400.0);
    EXPECT_EQ(l[21], 600.0);
    EXPECT_EQ(l[63], 1000.0);
    for (int c = 0; c < 64; ++c) EXPECT_DOUBLE_EQ(l[std::size_t(c)], 400 + 600.0 * c / 63);
    EXPECT_EQ(synth_wavelengths(1), std::vector<double>{400.0});
    EXPECT_THROW(synth_wavelengths(0), InvalidInput);
    for (double nm : {400.0, 480.0, 517.3, 600.0, 715.0, 1000.0}) {
        EXPECT_NEAR(synth_reflectance(SynthMaterial::Water, nm), spec_water(nm), 1e-15);
        EXPECT_NEAR(synth_reflectance(SynthMaterial::Paper, nm), spec_paper(nm), 1e-15);
        EXPECT_NEAR(synth_reflectance(SynthMaterial::Castaway, nm), spec_reflectance(SynthObjectKind::Castaway, nm), 1e-15);
        EXPECT_NEAR(synth_reflectance(SynthMaterial::Buoy, nm), spec_reflectance(SynthObjectKind::Buoy, nm), 1e-15);
        EXPECT_NEAR(synth_reflectance(SynthMaterial::Boat, nm), spec_reflectance(SynthObjectKind::Boat, nm), 1e-15);
        EXPECT_NEAR(synth_reflectance(SynthMaterial::Leaf, nm), spec_reflectance(SynthObjectKind::Leaf, nm), 1e-15);
    }
    EXPECT_NEAR(synth_reflectance(SynthMaterial::Castaway, 600), 0.48527, 5e-6);  // the header's table
    EXPECT_NEAR(synth_reflectance(SynthMaterial::Leaf, 600), 0.05438, 5e-6);
}

TEST(SynthScene, ShapesTypesAndMetadata) {
    const SynthScene s = synth_castaways(3, kSmall);
    EXPECT_EQ(s.cube.shape().describe(), "256x256x10 f32 bip");
    EXPECT_EQ(s.truth.shape().describe(), "256x256x1 u8 bsq");
    EXPECT_EQ(s.objects.shape().describe(), "256x256x1 i32 bsq");
    EXPECT_EQ(s.coverage.shape().describe(), "256x256x1 f32 bsq");
    EXPECT_EQ(s.wavelengths, synth_wavelengths(10));
    EXPECT_EQ(s.cube.metadata().wavelengths, s.wavelengths);
    EXPECT_EQ(s.cube.metadata().wavelength_units, "Nanometers");
    EXPECT_EQ(s.seed, 3u);
    EXPECT_EQ(s.options.targets, 8);
    EXPECT_EQ(s.options.buoys, 6);
    EXPECT_EQ(s.options.boats, 3);
    const SynthOptions leaves = resolved_synth_options(SynthSceneKind::Leaves, {});
    EXPECT_EQ(leaves.width, 1024);
    EXPECT_EQ(leaves.height, 256);
    EXPECT_EQ(leaves.targets, 17);
    EXPECT_EQ(leaves.buoys + leaves.boats, 0);
}

TEST(SynthScene, BitIdenticalAcrossRunsAndThreadCounts) {
    const int threads = omp_get_max_threads();
    std::vector<SynthScene> runs;
    for (int t : {1, 2, 3, 1}) {
        omp_set_num_threads(t);
        runs.push_back(synth_castaways(11, kSmall));
    }
    omp_set_num_threads(threads);
    for (std::size_t i = 1; i < runs.size(); ++i) {
        SCOPED_TRACE("run " + std::to_string(i));
        EXPECT_TRUE(cubes_identical(runs[0].cube, runs[i].cube));
        EXPECT_TRUE(cubes_identical(runs[0].truth, runs[i].truth));
        EXPECT_TRUE(cubes_identical(runs[0].objects, runs[i].objects));
        EXPECT_TRUE(cubes_identical(runs[0].coverage, runs[i].coverage));
        EXPECT_TRUE(same_objects(runs[0], runs[i]));
    }
    const SynthScene other = synth_castaways(12, kSmall);
    EXPECT_NE(other.placed[0].cx, runs[0].placed[0].cx);
    EXPECT_FALSE(cubes_identical(runs[0].cube, other.cube));
}

TEST(SynthScene, CoverageTruthAndIdsAreTheSupersampledShapes) {
    for (const SynthScene& s : {synth_castaways(5, kSmall), synth_leaves(5, kSmallLeaves)}) {
        SCOPED_TRACE(std::string(enum_name(s.kind)));
        std::vector<std::int64_t> area(s.placed.size(), 0);
        for (int y = 0; y < s.cube.height(); ++y)
            for (int x = 0; x < s.cube.width(); ++x) {
                const auto [i, alpha] = spec_coverage(s.placed, x, y);
                ASSERT_EQ(s.coverage.at<float>(x, y, 0), float(alpha)) << "(" << x << ", " << y << ")";
                const int id = alpha >= 0.5 ? s.placed[std::size_t(i)].id : 0;
                ASSERT_EQ(s.objects.at<std::int32_t>(x, y, 0), id) << "(" << x << ", " << y << ")";
                ASSERT_EQ(s.truth.at<std::uint8_t>(x, y, 0), id > 0 && id <= s.options.targets ? 1 : 0);
                if (id == 0) continue;
                const SynthObject& o = s.placed[std::size_t(i)];
                ++area[std::size_t(i)];
                EXPECT_TRUE(x >= o.x0 && x < o.x0 + o.width && y >= o.y0 && y < o.y0 + o.height) << "object " << id;
            }
        for (std::size_t i = 0; i < s.placed.size(); ++i) {
            const SynthObject& o = s.placed[i];
            EXPECT_EQ(o.area, area[i]) << "object " << o.id;
            // the box is tight: each of its four edges holds a pixel of the object
            bool top = false, bottom = false, left = false, right = false;
            const auto is = [&](int x, int y) { return s.objects.at<std::int32_t>(x, y, 0) == o.id; };
            for (int x = o.x0; x < o.x0 + o.width; ++x) top |= is(x, o.y0), bottom |= is(x, o.y0 + o.height - 1);
            for (int y = o.y0; y < o.y0 + o.height; ++y) left |= is(o.x0, y), right |= is(o.x0 + o.width - 1, y);
            EXPECT_TRUE(top && bottom && left && right) << "object " << o.id;
        }
    }
}

TEST(SynthScene, NoiseFreeSamplesAreTheMixingFormula) {
    for (const SynthScene& s : {synth_castaways(5, {.width = 256, .height = 256, .bands = 10, .noise_sigma = 0}),
                                synth_leaves(5, {.width = 320, .height = 128, .bands = 6, .targets = 6, .noise_sigma = 0})}) {
        SCOPED_TRACE(std::string(enum_name(s.kind)));
        int checked_pure = 0;
        for (int y = 0; y < s.cube.height(); ++y)
            for (int x = 0; x < s.cube.width(); ++x) {
                const auto [i, alpha] = spec_coverage(s.placed, x, y);
                for (int b = 0; b < s.cube.bands(); ++b) {
                    const double l = s.wavelengths[std::size_t(b)], background = spec_background(s.kind, x, y, l);
                    double expected = background;
                    if (i >= 0) {
                        const SynthObject& o = s.placed[std::size_t(i)];
                        expected = alpha * o.amplitude * spec_reflectance(o.kind, l) + (1 - alpha) * background;
                        checked_pure += alpha == 1;
                    }
                    ASSERT_NEAR(s.cube.at<float>(x, y, b), expected, 1e-7) << "(" << x << ", " << y << ", " << b << ")";
                }
            }
        EXPECT_GT(checked_pure, 0);
    }
}

/// Checks the pixel under each object's centre against its material and a grid of pixels far from
/// every object against the background, within 5 σ of the noise.
void expect_pure_pixels(const SynthScene& s) {
    SCOPED_TRACE(std::string(enum_name(s.kind)));
    const double tol = 5 * s.options.noise_sigma;
    for (const SynthObject& o : s.placed) {
        const int x = int(o.cx), y = int(o.cy);
        ASSERT_EQ(s.coverage.at<float>(x, y, 0), 1.0f) << "object " << o.id;
        for (int b = 0; b < s.cube.bands(); ++b)
            EXPECT_NEAR(s.cube.at<float>(x, y, b), o.amplitude * spec_reflectance(o.kind, s.wavelengths[std::size_t(b)]), tol)
                << enum_name(o.kind) << " " << o.id << " band " << b;
    }
    int far_pixels = 0;
    for (int y = 5; y < s.cube.height(); y += 41)
        for (int x = 7; x < s.cube.width(); x += 97) {
            bool far = true;
            for (const SynthObject& o : s.placed) far &= std::hypot(x + 0.5 - o.cx, y + 0.5 - o.cy) > o.radius + 2;
            if (!far) continue;
            ++far_pixels;
            EXPECT_EQ(s.objects.at<std::int32_t>(x, y, 0), 0);
            for (int b = 0; b < s.cube.bands(); ++b)
                EXPECT_NEAR(s.cube.at<float>(x, y, b), spec_background(s.kind, x, y, s.wavelengths[std::size_t(b)]), tol)
                    << "background (" << x << ", " << y << ") band " << b;
        }
    EXPECT_GT(far_pixels, 30);
}

TEST(SynthScene, FullSizePurePixelsAreTheMaterialSpectraWithinTheNoise) {
    // The spec's scenes at their full size (the one 1024×1024×64 run of this file, timed).
    const auto t0 = std::chrono::steady_clock::now();
    const SynthScene sea = synth_castaways(0);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RecordProperty("full_size_castaways_seconds", std::to_string(seconds));
    std::printf("synth_castaways(0), 1024x1024x64, %d threads: %.3f s\n", omp_get_max_threads(), seconds);
    EXPECT_EQ(sea.cube.shape().describe(), "1024x1024x64 f32 bip");
    EXPECT_EQ(sea.placed.size(), 17u);
    expect_pure_pixels(sea);
    const SynthScene leaves = synth_leaves(0);
    EXPECT_EQ(leaves.cube.shape().describe(), "1024x256x64 f32 bip");
    EXPECT_EQ(leaves.placed.size(), 17u);
    expect_pure_pixels(leaves);
}

TEST(SynthScene, NoiseIsGaussianWithTheGivenSigmaOnEverySample) {
    SynthOptions clean_options = kSmall;
    clean_options.noise_sigma = 0;
    SynthOptions noisy_options = kSmall;
    noisy_options.noise_sigma = 0.01;
    const SynthScene clean = synth_castaways(9, clean_options), noisy = synth_castaways(9, noisy_options);
    EXPECT_TRUE(same_objects(clean, noisy));  // the layout does not depend on the noise
    const float* a = clean.cube.data<float>();
    const float* b = noisy.cube.data<float>();
    const std::size_t n = clean.cube.num_elements();
    double sum = 0, sum2 = 0, sum3 = 0, sum4 = 0;
    std::size_t zero = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const double d = (double(b[i]) - double(a[i])) / 0.01;
        sum += d, sum2 += d * d, sum3 += d * d * d, sum4 += d * d * d * d;
        zero += d == 0;
    }
    const double mean = sum / double(n), var = sum2 / double(n);
    EXPECT_LT(std::abs(mean), 4 / std::sqrt(double(n)));
    EXPECT_NEAR(var, 1.0, 0.01);
    EXPECT_NEAR(sum3 / double(n), 0.0, 0.02);  // symmetric
    EXPECT_NEAR(sum4 / double(n), 3.0, 0.05);  // Gaussian kurtosis
    EXPECT_LT(zero, n / 1000);                 // every sample got noise
}

TEST(SynthScene, ObjectCountsKindsAndParameterRanges) {
    const auto in = [](double v, double lo, double hi) { return v >= lo && v <= hi; };
    for (const SynthScene& s : {synth_castaways(2, kSmall), synth_leaves(2, {.bands = 2})}) {
        SCOPED_TRACE(std::string(enum_name(s.kind)));
        const bool sea = s.kind == SynthSceneKind::Castaways;
        ASSERT_EQ(s.placed.size(), 17u);  // 8 + 6 + 3, or 17 leaves
        for (std::size_t i = 0; i < s.placed.size(); ++i) {
            const SynthObject& o = s.placed[i];
            EXPECT_EQ(o.id, int(i) + 1);
            EXPECT_GT(o.area, 0) << "object " << o.id;
            EXPECT_TRUE(in(o.angle, 0, std::numbers::pi));
            const SynthObjectKind kind = !sea ? SynthObjectKind::Leaf
                                         : i < 8  ? SynthObjectKind::Castaway
                                         : i < 14 ? SynthObjectKind::Buoy
                                                  : SynthObjectKind::Boat;
            ASSERT_EQ(o.kind, kind) << "object " << o.id;
            EXPECT_EQ(o.target, kind == SynthObjectKind::Castaway || kind == SynthObjectKind::Leaf);
            if (kind != SynthObjectKind::Leaf) {
                EXPECT_EQ(o.amplitude, 1.0);
            }
            switch (kind) {
                case SynthObjectKind::Castaway:
                    EXPECT_TRUE(in(o.half_length, 6, 12) && in(o.half_width, 3, 6)) << o.half_length << " x " << o.half_width;
                    break;
                case SynthObjectKind::Buoy:
                    EXPECT_TRUE(in(o.half_length, 3, 5) && o.half_width == o.half_length) << o.half_length;
                    break;
                case SynthObjectKind::Boat:
                    EXPECT_TRUE(in(2 * o.half_length, 20, 60) && in(2 * o.half_width, 8, 20));
                    EXPECT_DOUBLE_EQ(o.radius, std::hypot(o.half_length, o.half_width));
                    break;
                case SynthObjectKind::Leaf:
                    EXPECT_TRUE(in(o.half_length, 15, 30) && in(o.half_width, 8, 15));
                    EXPECT_TRUE(in(o.amplitude, 0.9, 1.1)) << o.amplitude;
                    break;
            }
        }
        std::int64_t truth = 0;
        for (std::size_t p = 0; p < s.truth.num_elements(); ++p) truth += s.truth.data<std::uint8_t>()[p];
        std::int64_t target_area = 0;
        for (const SynthObject& o : s.placed) target_area += o.target ? o.area : 0;
        EXPECT_EQ(truth, target_area);
    }
}

TEST(SynthScene, ObjectsKeepTheMinimumGapAndStayInside) {
    for (const SynthScene& s : {synth_castaways(4, kSmall), synth_leaves(4, kSmallLeaves), synth_leaves(4, {.bands = 1})}) {
        SCOPED_TRACE(std::string(enum_name(s.kind)) + " " + std::to_string(s.cube.width()));
        const double gap = s.options.min_gap;
        for (const SynthObject& o : s.placed) {
            EXPECT_TRUE(o.cx >= o.radius && o.cx <= s.cube.width() - o.radius) << "object " << o.id;
            EXPECT_TRUE(o.cy >= o.radius && o.cy <= s.cube.height() - o.radius) << "object " << o.id;
            for (const SynthObject& p : s.placed)
                if (p.id < o.id) {
                    EXPECT_GE(std::hypot(o.cx - p.cx, o.cy - p.cy), o.radius + p.radius + gap) << o.id << ", " << p.id;
                }
        }
        // Pixel level: each covered pixel has one of its 16 points inside its object, at most
        // 0.375·√2 px from its centre, so covered pixels of two objects are min_gap − 0.75·√2 apart.
        const int W = s.cube.width(), H = s.cube.height(), reach = int(std::ceil(gap));
        std::vector<int> owner(std::size_t(W) * std::size_t(H), -1);
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x)
                if (s.coverage.at<float>(x, y, 0) > 0) owner[std::size_t(y * W + x)] = spec_coverage(s.placed, x, y).first;
        double nearest = 1e9;
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                const int mine = owner[std::size_t(y * W + x)];
                if (mine < 0) continue;
                for (int v = std::max(0, y - reach); v <= std::min(H - 1, y + reach); ++v)
                    for (int u = std::max(0, x - reach); u <= std::min(W - 1, x + reach); ++u) {
                        const int theirs = owner[std::size_t(v * W + u)];
                        if (theirs >= 0 && theirs != mine) nearest = std::min(nearest, std::hypot(u - x, v - y));
                    }
            }
        EXPECT_GE(nearest, gap - 0.75 * std::sqrt(2.0));
    }
}

TEST(SynthScene, TrainingVariants) {
    const SynthScene none = synth_castaways(1, {.width = 256, .height = 256, .bands = 4, .targets = 0});
    EXPECT_EQ(none.placed.size(), 9u);
    for (std::size_t p = 0; p < none.truth.num_elements(); ++p) ASSERT_EQ(none.truth.data<std::uint8_t>()[p], 0);
    const SynthScene twelve = synth_castaways(1, {.width = 512, .height = 512, .bands = 4, .targets = 12});
    EXPECT_EQ(twelve.placed[11].kind, SynthObjectKind::Castaway);
    EXPECT_EQ(twelve.placed[12].kind, SynthObjectKind::Buoy);
    for (int n : {10, 20}) {
        const SynthScene leaves = synth_leaves(1, {.bands = 4, .targets = n});
        EXPECT_EQ(leaves.placed.size(), std::size_t(n));
        EXPECT_EQ(leaves.cube.shape().describe(), "1024x256x4 f32 bip");
    }
    const SynthScene only_castaways = synth_castaways(1, {.width = 128, .height = 128, .bands = 4, .buoys = 0, .boats = 0});
    EXPECT_EQ(only_castaways.placed.size(), 8u);
}

TEST(SynthScene, BadOptionsThrowNamingTheField) {
    const auto message = [](auto&& f) {
        try {
            f();
        } catch (const InvalidInput& e) {
            return std::string(e.what());
        }
        return std::string("(nothing thrown)");
    };
    EXPECT_NE(message([] { synth_leaves(0, {.buoys = 2}); }).find("synth_leaves: buoys = 2"), std::string::npos);
    EXPECT_NE(message([] { synth_leaves(0, {.boats = 1}); }).find("boats = 1"), std::string::npos);
    EXPECT_NE(message([] { synth_castaways(0, {.width = -3}); }).find("synth_castaways: width = -3"), std::string::npos);
    EXPECT_NE(message([] { synth_castaways(0, {.bands = 0}); }).find("bands = 0"), std::string::npos);
    EXPECT_NE(message([] { synth_castaways(0, {.targets = -2}); }).find("targets = -2"), std::string::npos);
    EXPECT_NE(message([] { synth_castaways(0, {.noise_sigma = -1}); }).find("noise_sigma = -1"), std::string::npos);
    EXPECT_NE(message([] { synth_castaways(0, {.noise_sigma = NAN}); }).find("noise_sigma"), std::string::npos);
    EXPECT_NE(message([] { synth_castaways(0, {.min_gap = 1}); }).find("min_gap = 1"), std::string::npos);
    EXPECT_NE(message([] { synth_castaways(0, {.width = 10, .height = 100, .bands = 1}); }).find("width = 10 is too small"),
              std::string::npos);
    EXPECT_NE(message([] { synth_castaways(0, {.width = 128, .height = 128, .bands = 1, .targets = 40}); })
                  .find("could not place castaway"),
              std::string::npos);
}

// ---- the CLI -----------------------------------------------------------------------------------------

using testing::q;

TEST(SynthCli, WritesTheSceneTruthAndIdsOfTheLibrary) {
    const fs::path dir = testing::temp_dir("synth_cli");
    const auto r = testing::run_cli("synth castaways " + q(dir / "sea.npy") +
                                    " --seed 5 --width 200 --height 160 --bands 8 --targets 3 --buoys 2 --boats 1 --objects " +
                                    q(dir / "ids.npy") + " --threads 2 --json --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    const SynthScene s = synth_castaways(5, {.width = 200, .height = 160, .bands = 8, .targets = 3, .buoys = 2, .boats = 1});
    EXPECT_TRUE(cubes_identical(s.cube, read_cube(dir / "sea.npy")));
    EXPECT_TRUE(cubes_identical(s.truth, read_cube(dir / "sea.truth.npy")));
    EXPECT_TRUE(cubes_identical(s.objects, read_cube(dir / "ids.npy")));
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["command"], "synth");
    EXPECT_EQ(j["scene"], "castaways");
    EXPECT_EQ(j["seed"], 5);
    EXPECT_EQ(j["parameters"]["targets"], 3);
    EXPECT_EQ(j["shape"]["bands"], 8);
    EXPECT_EQ(j["wavelengths"].size(), 8u);
    ASSERT_EQ(j["objects"].size(), 6u);
    EXPECT_EQ(j["objects"][0]["kind"], "castaway");
    EXPECT_EQ(j["objects"][5]["kind"], "boat");
    EXPECT_EQ(j["objects"][1]["cx"].get<double>(), s.placed[1].cx);
    EXPECT_EQ(j["objects"][1]["box"]["width"], s.placed[1].width);
    EXPECT_EQ(j["outputs"].size(), 3u);
}

TEST(SynthCli, EnviKeepsTheWavelengthsAndPngIsAPicture) {
    const fs::path dir = testing::temp_dir("synth_cli_formats");
    const SynthOptions o{.width = 320, .height = 128, .bands = 6, .targets = 6};
    const std::string size = " --width 320 --height 128 --bands 6 --targets 6 --quiet";
    ASSERT_EQ(testing::run_cli("synth hojas " + q(dir / "leaves.hdr") + size).exit_code, 0);
    const SynthScene s = synth_leaves(0, o);
    const Cube envi = read_cube(dir / "leaves.hdr");
    EXPECT_TRUE(cubes_identical(s.cube, envi));
    EXPECT_EQ(envi.metadata().wavelengths, s.wavelengths);
    EXPECT_TRUE(fs::exists(dir / "leaves.truth.npy"));

    const auto r = testing::run_cli("synth leaves " + q(dir / "leaves.png") + " --truth " + q(dir / "t.png") + size);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const Cube picture = read_cube(dir / "leaves.png"), truth = read_cube(dir / "t.png");
    EXPECT_EQ(picture.shape().describe().substr(0, 13), "320x128x3 u8 ");
    std::int64_t set = 0;
    for (std::size_t p = 0; p < truth.num_elements(); ++p) {
        const std::uint8_t v = truth.data<std::uint8_t>()[p];
        ASSERT_TRUE(v == 0 || v == 255);
        set += v == 255;
        ASSERT_EQ(v == 255, s.truth.data<std::uint8_t>()[p] == 1);
    }
    EXPECT_GT(set, 0);
}

TEST(SynthCli, BadValuesExitTwoNamingTheFlagAndWriteNothing) {
    const fs::path dir = testing::temp_dir("synth_cli_bad");
    const std::string out = q(dir / "x.npy");
    struct Case {
        std::string args, named;
    };
    for (const Case& c : {Case{"ships " + out, "SCENE"}, Case{"castaways " + out + " --targets -2", "--targets"},
                          Case{"castaways " + out + " --seed abc", "--seed"},
                          Case{"castaways " + out + " --width 10 --height 10", "--width"},
                          Case{"leaves " + out + " --buoys 3", "--buoys"},
                          Case{"castaways " + out + " --min-gap 1", "--min-gap"},
                          Case{"castaways " + out + " --objects " + q(dir / "ids.png"), "--objects"},
                          Case{"castaways " + q(dir / "x.mat"), "x.mat"},
                          Case{"castaways " + out + " --truth " + out, "synth"}}) {
        const auto r = testing::run_cli("synth " + c.args + " --quiet");
        EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.err;
        EXPECT_NE(r.err.find(c.named), std::string::npos) << c.args << ": " << r.err;
    }
    EXPECT_TRUE(fs::is_empty(dir));
    const auto help = testing::run_cli("synth --help");
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_NE(help.out.find("Examples:"), std::string::npos);
    EXPECT_NE(help.out.find("--noise-sigma"), std::string::npos);
}

}  // namespace
}  // namespace cubekit
