// Pixel-level RBF detection, CPU reference: the oracles of spec detect.md §A.6.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

#include "cubekit/detect.hpp"
#include "detect_testing.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;

RbfnModel one_neuron(int bands, double centre, double sigma) {
    RbfnModel m;
    m.bands = bands;
    m.hidden = 1;
    m.centres.assign(std::size_t(bands), centre);
    m.sigma = {sigma};
    m.weights = {1.0};
    m.bias = 0;
    return m;
}

TEST(DetectPixel, ClosedFormConstantCube) {
    // k = 1, u = 0, σ = 1, w = 1, th = 0, m = 64, every band v = 0.125 ⇒ y = exp(−64·v²/2) = e^−0.5.
    Cube cube(7, 5, 64, DType::F32, Layout::BIP);
    for (std::size_t i = 0; i < cube.num_elements(); ++i) cube.data<float>()[i] = 0.125f;
    const PixelResult r = detect_pixels(cpu_context(), cube, one_neuron(64, 0.0, 1.0));
    for (std::size_t p = 0; p < r.score.num_elements(); ++p) EXPECT_NEAR(r.score.data<float>()[p], 0.60653066, 1e-7);
    EXPECT_EQ(r.objects.size(), 1u);  // the whole image: 0.6065 > 0.5
    EXPECT_EQ(r.objects[0].area, 35);
}

TEST(DetectPixel, PixelAtACentreScoresOneExactly) {
    const RbfnModel m = testing::random_rbfn(17, 3, 5);
    Cube cube(3, 1, 17, DType::F32, Layout::BIP);
    for (int i = 0; i < 3; ++i)
        for (int b = 0; b < 17; ++b) cube.at<float>(i, 0, b) = float(m.centres[std::size_t(i) * 17 + b]);
    RbfnModel single = m;
    single.weights = {1, 0, 0};
    single.bias = 0;
    const PixelResult r = detect_pixels(cpu_context(), cube, single, {.objects = false});
    EXPECT_EQ(r.score.at<float>(0, 0, 0), 1.0f);  // exp(−0) exactly
}

TEST(DetectPixel, ScoresWithinTheOutputBounds) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(seed);
    const Cube cube = testing::random_cube(23, 19, 30, DType::F32, seed, 0, 1, Layout::BIP);
    const RbfnModel m = testing::random_rbfn(30, 5, seed + 1);
    const PixelResult r = detect_pixels(cpu_context(), cube, m, {.objects = false});
    double lo = m.bias, hi = m.bias;
    for (double w : m.weights) (w < 0 ? lo : hi) += w;
    for (std::size_t p = 0; p < r.score.num_elements(); ++p) {
        EXPECT_GE(r.score.data<float>()[p], lo - 1e-6);
        EXPECT_LE(r.score.data<float>()[p], hi + 1e-6);
    }
}

TEST(DetectPixel, AnyLayoutAndTypeGivesTheSameScores) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(seed);
    const Cube bip = testing::random_cube(31, 13, 12, DType::U16, seed, 0, 4000, Layout::BIP);
    const RbfnModel m = testing::random_rbfn(12, 4, seed + 2, 0, 4000);
    const PixelResult a = detect_pixels(cpu_context(), bip, m);
    for (Layout l : {Layout::BSQ, Layout::BIL}) {
        const PixelResult b = detect_pixels(cpu_context(), bip.to_layout(l), m);
        EXPECT_TRUE(testing::cubes_identical(a.score, b.score));
        EXPECT_TRUE(testing::cubes_identical(a.labels, b.labels));
    }
    // A window view scores its pixels exactly as the whole cube does.
    const PixelResult w = detect_pixels(cpu_context(), bip.view().window(5, 3, 20, 9), m, {.objects = false});
    for (int y = 0; y < 9; ++y)
        for (int x = 0; x < 20; ++x) ASSERT_EQ(w.score.at<float>(x, y, 0), a.score.at<float>(x + 5, y + 3, 0));
}

TEST(DetectPixel, PermutingPixelsPermutesScores) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(seed);
    const Cube cube = testing::random_cube(16, 4, 9, DType::F32, seed, -1, 1, Layout::BIP);
    const RbfnModel m = testing::random_rbfn(9, 3, seed, -1, 1);
    Cube flipped(16, 4, 9, DType::F32, Layout::BIP);
    for (int y = 0; y < 4; ++y)
        for (int x = 0; x < 16; ++x)
            for (int b = 0; b < 9; ++b) flipped.at<float>(15 - x, 3 - y, b) = cube.at<float>(x, y, b);
    const PixelResult a = detect_pixels(cpu_context(), cube, m, {.objects = false});
    const PixelResult b = detect_pixels(cpu_context(), flipped, m, {.objects = false});
    for (int y = 0; y < 4; ++y)
        for (int x = 0; x < 16; ++x) ASSERT_EQ(a.score.at<float>(x, y, 0), b.score.at<float>(15 - x, 3 - y, 0));
}

TEST(DetectPixel, PermutingBandsAndCentresKeepsScores) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(seed);
    const int B = 40;
    const Cube cube = testing::random_cube(11, 7, B, DType::F32, seed, 0, 1, Layout::BIP);
    const RbfnModel m = testing::random_rbfn(B, 4, seed + 3);
    std::vector<int> perm(B);
    std::iota(perm.begin(), perm.end(), 0);
    std::reverse(perm.begin(), perm.end());
    const Cube permuted = cube.select_bands(perm);
    RbfnModel pm = m;
    for (int i = 0; i < m.hidden; ++i)
        for (int b = 0; b < B; ++b) pm.centres[std::size_t(i) * B + b] = m.centres[std::size_t(i) * B + perm[b]];
    const PixelResult a = detect_pixels(cpu_context(), cube, m, {.objects = false});
    const PixelResult b = detect_pixels(cpu_context(), permuted, pm, {.objects = false});
    const double tol = 1e-5 * (1 + B / 64.0) * (std::abs(m.bias) + std::accumulate(m.weights.begin(), m.weights.end(), 0.0,
                                                                                   [](double s, double w) { return s + std::abs(w); }));
    for (std::size_t p = 0; p < a.score.num_elements(); ++p)
        EXPECT_NEAR(a.score.data<float>()[p], b.score.data<float>()[p], tol);
}

TEST(DetectPixel, TwoMaterialSceneMasksExactlyAboveHalfCoverage) {
    // §A.6: k = 1, u = t, σ = D/(2·sqrt(2 ln 2)); x = αt + (1−α)g scores 2^{−4(1−α)²}; mask = [α > 0.5].
    const int B = 8, W = 41;
    std::vector<double> t(B), g(B);
    for (int b = 0; b < B; ++b) {
        t[b] = 0.6 + 0.05 * b;
        g[b] = 0.1 + 0.01 * b;
    }
    double D2 = 0;
    for (int b = 0; b < B; ++b) D2 += (t[b] - g[b]) * (t[b] - g[b]);
    RbfnModel m;
    m.bands = B;
    m.hidden = 1;
    m.centres = t;
    m.sigma = {std::sqrt(D2) / (2 * std::sqrt(2 * std::numbers::ln2))};
    m.weights = {1};
    m.bias = 0;
    Cube cube(W, 1, B, DType::F64, Layout::BIP);
    for (int x = 0; x < W; ++x) {
        const double a = x / double(W - 1);
        for (int b = 0; b < B; ++b) cube.at<double>(x, 0, b) = a * t[b] + (1 - a) * g[b];
    }
    const PixelResult r = detect_pixels(cpu_context(), cube, m, {.min_area = 1});
    for (int x = 0; x < W; ++x) {
        const double a = x / double(W - 1);
        EXPECT_NEAR(r.score.at<float>(x, 0, 0), std::pow(2.0, -4 * (1 - a) * (1 - a)), 2e-6) << "alpha " << a;
        if (a != 0.5) EXPECT_EQ(r.mask.at<std::uint8_t>(x, 0, 0), a > 0.5 ? 1 : 0) << "alpha " << a;
    }
}

TEST(DetectPixel, NonFinitePixelsScoreNaNAndAreNeverDetected) {
    Cube cube(4, 1, 3, DType::F32, Layout::BIP);
    for (std::size_t i = 0; i < cube.num_elements(); ++i) cube.data<float>()[i] = 0.5f;
    cube.at<float>(1, 0, 2) = std::nanf("");
    cube.at<float>(2, 0, 0) = INFINITY;
    const PixelResult r = detect_pixels(cpu_context(), cube, one_neuron(3, 0.5, 1.0));
    EXPECT_TRUE(std::isnan(r.score.at<float>(1, 0, 0)));
    EXPECT_TRUE(std::isnan(r.score.at<float>(2, 0, 0)));
    EXPECT_EQ(r.non_finite, 2);
    EXPECT_EQ(r.mask.at<std::uint8_t>(1, 0, 0), 0);
    EXPECT_EQ(r.objects.size(), 2u);  // pixels 0 and 3, not joined through the NaN pixels
}

TEST(DetectPixel, ObjectTableAndMinArea) {
    // Two blobs of 1s in a 0 background; a one-neuron model centred on 1.
    Cube cube = testing::square_target(12, 10, 2, 1, 1, 4, 3);  // 3×2 = 6 pixels
    cube.at<float>(8, 7, 0) = cube.at<float>(8, 7, 1) = 1.0f;   // a single pixel
    cube.at<float>(2, 1, 0) = 0.9f;                               // a lower score inside the big blob
    const RbfnModel m = one_neuron(2, 1.0, 0.5);
    PixelResult r = detect_pixels(cpu_context(), cube, m);
    ASSERT_EQ(r.objects.size(), 2u);
    const DetectedObject& o = r.objects[0];
    EXPECT_EQ(o.label, 1);
    EXPECT_EQ(o.area, 6);
    EXPECT_EQ(o.x0, 1);
    EXPECT_EQ(o.y0, 1);
    EXPECT_EQ(o.width, 3);
    EXPECT_EQ(o.height, 2);
    EXPECT_DOUBLE_EQ(o.centroid_x, 2.0);
    EXPECT_DOUBLE_EQ(o.centroid_y, 1.5);
    EXPECT_EQ(o.peak_score, 1.0);
    EXPECT_EQ(o.peak_x, 1);  // the first pixel of the ties in raster order
    EXPECT_EQ(o.peak_y, 1);
    EXPECT_EQ(r.labels.at<std::int32_t>(8, 7, 0), 2);
    EXPECT_EQ(r.detected, 7);
    r = detect_pixels(cpu_context(), cube, m, {.min_area = 2});
    ASSERT_EQ(r.objects.size(), 1u);
    EXPECT_EQ(r.labels.at<std::int32_t>(8, 7, 0), 0);
    EXPECT_EQ(r.mask.at<std::uint8_t>(8, 7, 0), 0);
    EXPECT_EQ(r.detected, 6);
}

TEST(DetectPixel, SeveralModelsInOnePassEqualOneByOne) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(seed);
    const Cube cube = testing::random_cube(19, 11, 6, DType::I16, seed, -50, 50, Layout::BSQ);
    std::vector<RbfnModel> models{testing::random_rbfn(6, 1, seed, -50, 50), testing::random_rbfn(6, 17, seed + 1, -50, 50),
                                  testing::random_rbfn(6, 3, seed + 2, -50, 50)};
    models[2].input_gain.assign(6, 0.5);  // a second transform group
    models[2].input_offset.assign(6, 3.0);
    const std::vector<PixelResult> many = detect_pixels_many(cpu_context(), cube, models);
    for (std::size_t j = 0; j < models.size(); ++j) {
        const PixelResult one = detect_pixels(cpu_context(), cube, models[j]);
        EXPECT_TRUE(testing::cubes_identical(one.score, many[j].score)) << "model " << j;
    }
}

TEST(DetectPixel, BadInputsNameTheField) {
    const Cube cube = testing::random_cube(4, 4, 5, DType::F32, 1, 0, 1);
    RbfnModel m = testing::random_rbfn(6, 2, 1);
    EXPECT_THROW(
        {
            try {
                detect_pixels(cpu_context(), cube, m);
            } catch (const InvalidInput& e) {
                EXPECT_NE(std::string(e.what()).find("bands = 6"), std::string::npos) << e.what();
                throw;
            }
        },
        InvalidInput);
    m = testing::random_rbfn(5, 2, 1);
    m.sigma[1] = 0;
    EXPECT_THROW(detect_pixels(cpu_context(), cube, m), InvalidInput);
    m = testing::random_rbfn(5, 2, 1);
    EXPECT_THROW(detect_pixels(cpu_context(), cube, m, {.connectivity = 6}), InvalidInput);
    EXPECT_THROW(detect_pixels(cpu_context(), cube, m, {.min_area = 0}), InvalidInput);
}

}  // namespace
}  // namespace cubekit
