// quantize_image (cubekit/quantize_image.hpp) on small images: a plain fit is k-means' own answer,
// an applied palette paints each pixel with its nearest entry (brute force here), alpha and
// excluded pixels are copied, Lab and dithering paint with their palette, the _into call (in
// place and through the host) gives the same outputs, and bad options are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cubekit/error.hpp"
#include "cubekit/kmeans_color.hpp"
#include "cubekit/quantize_image.hpp"
#include "testing.hpp"

namespace {

using namespace cubekit;
using cubekit::testing::cpu_context;
using cubekit::testing::cubes_identical;
using cubekit::testing::random_cube;
using cubekit::testing::test_seed;

/// Every valid pixel of q.image holds the palette entry of its label (colour channels); the
/// counts are the label histogram.
void expect_painted_by_labels(const QuantizedImage& q) {
    const int c = q.channels;
    std::vector<std::uint64_t> counts(q.size(), 0);
    for (int y = 0; y < q.image.height(); ++y)
        for (int x = 0; x < q.image.width(); ++x) {
            const std::int32_t l = q.labels[std::size_t(y) * std::size_t(q.image.width()) + std::size_t(x)];
            if (l < 0) continue;
            ASSERT_LT(std::size_t(l), q.size());
            ++counts[std::size_t(l)];
            for (int b = 0; b < c; ++b)
                ASSERT_EQ(q.image.value(x, y, b), q.palette[std::size_t(l) * std::size_t(c) + std::size_t(b)])
                    << "pixel " << x << "," << y << " band " << b;
        }
    EXPECT_EQ(counts, q.counts);
    for (const std::uint64_t n : q.counts) EXPECT_GT(n, 0u) << "the palette holds used entries only";
}

TEST(QuantizeImage, PlainFitIsKmeansOwnAnswer) {
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube photo = random_cube(13, 9, 3, DType::U8, seed, 0, 255, Layout::BIP);
    const KmeansOptions k{.k = 5, .seed = 11};
    const QuantizedImage q = quantize_image(cpu_context(), photo, {.kmeans = k});
    const KmeansResult r = kmeans(cpu_context(), photo, k);
    EXPECT_TRUE(cubes_identical(r.quantized, q.image));
    EXPECT_EQ(q.labels, r.labels);
    EXPECT_EQ(q.palette, r.palette);
    EXPECT_EQ(q.centroids, r.centroids);  // integer image: the unrounded means come along
    EXPECT_EQ(q.counts, r.counts);
    EXPECT_EQ(q.kmeans.inertia, r.inertia);
    EXPECT_EQ(q.kmeans.k, 5);
    EXPECT_TRUE(q.kmeans.labels.empty() && q.kmeans.quantized.empty()) << "held once, in q.labels and q.image";
    EXPECT_FALSE(q.applied);
    EXPECT_EQ(q.implementation, "cpu");
    EXPECT_EQ(q.channels, 3);
    expect_painted_by_labels(q);
    // Float images have no separate centroids: the palette is the means.
    const Cube f = random_cube(8, 7, 2, DType::F32, seed + 1, -1, 1, Layout::BIP);
    EXPECT_TRUE(quantize_image(cpu_context(), f, {.kmeans = {.k = 3}}).centroids.empty());
}

TEST(QuantizeImage, AppliedPaletteTakesTheNearestEntryAndDropsUnusedOnes) {
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube photo = random_cube(11, 10, 3, DType::U8, seed, 0, 200, Layout::BIP);
    // Entry 1 (white) is nearer no pixel (all ≤ 200 and it sits beyond 250): dropped.
    const std::vector<double> given = {20, 20, 20, 255, 255, 255, 180, 60, 60, 60, 180, 60, 60, 60, 180, 150, 150, 150};
    const QuantizedImage q = quantize_image(cpu_context(), photo, {.kmeans = {.k = 99}, .palette = given});
    EXPECT_TRUE(q.applied);
    EXPECT_EQ(q.kmeans.k, 6) << "k is the palette's";
    EXPECT_TRUE(q.centroids.empty());
    // The oracle: the nearest given entry (lowest index on ties), then the used entries in order.
    std::vector<int> nearest(photo.shape().num_pixels());
    std::vector<bool> used(6, false);
    for (int y = 0; y < photo.height(); ++y)
        for (int x = 0; x < photo.width(); ++x) {
            double best = std::numeric_limits<double>::infinity();
            int at = 0;
            for (int j = 0; j < 6; ++j) {
                double d = 0;
                for (int b = 0; b < 3; ++b) d += std::pow(photo.value(x, y, b) - given[std::size_t(j * 3 + b)], 2);
                if (d < best) best = d, at = j;
            }
            nearest[std::size_t(y * photo.width() + x)] = at;
            used[std::size_t(at)] = true;
        }
    ASSERT_FALSE(used[1]);
    std::vector<double> expected_palette;
    std::vector<int> renumber(6, -1);
    for (int j = 0, n = 0; j < 6; ++j)
        if (used[std::size_t(j)]) {
            renumber[std::size_t(j)] = n++;
            for (int b = 0; b < 3; ++b) expected_palette.push_back(given[std::size_t(j * 3 + b)]);
        }
    EXPECT_EQ(q.palette, expected_palette);
    for (std::size_t p = 0; p < nearest.size(); ++p) ASSERT_EQ(q.labels[p], renumber[std::size_t(nearest[p])]) << p;
    expect_painted_by_labels(q);
}

TEST(QuantizeImage, FittedPaletteAppliedAgainPaintsTheSameImage) {
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube photo = random_cube(16, 12, 3, DType::U8, seed, 0, 255, Layout::BIP);
    for (const Colorspace space : {Colorspace::Rgb, Colorspace::Lab}) {
        SCOPED_TRACE(std::string(enum_name(space)));
        const QuantizedImage fit = quantize_image(cpu_context(), photo, {.kmeans = {.k = 6}, .colorspace = space});
        const QuantizedImage again = quantize_image(
            cpu_context(), photo, {.colorspace = space, .palette = fit.palette, .palette_centroids = fit.centroids});
        EXPECT_TRUE(cubes_identical(fit.image, again.image));
        EXPECT_EQ(fit.labels, again.labels);
        EXPECT_EQ(fit.palette, again.palette);
        EXPECT_EQ(fit.counts, again.counts);
        expect_painted_by_labels(fit);
    }
}

TEST(QuantizeImage, AlphaAndExcludedPixelsAreCopied) {
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube rgba = random_cube(10, 8, 4, DType::U16, seed, 0, 60000, Layout::BSQ);
    std::vector<std::uint8_t> mask(rgba.shape().num_pixels(), 1);
    for (std::size_t p = 0; p < mask.size(); p += 3) mask[p] = 0;
    for (const Dither dither : {Dither::None, Dither::FloydSteinberg}) {
        SCOPED_TRACE(std::string(enum_name(dither)));
        const QuantizedImage q =
            quantize_image(cpu_context(), rgba, {.kmeans = {.k = 4, .mask = mask}, .dither = dither, .alpha = true});
        ASSERT_EQ(q.image.bands(), 4);
        EXPECT_EQ(q.image.dtype(), DType::U16);
        EXPECT_EQ(q.channels, 3);
        EXPECT_EQ(q.kmeans.valid_pixels, std::int64_t(mask.size() - (mask.size() + 2) / 3));
        for (int y = 0; y < rgba.height(); ++y)
            for (int x = 0; x < rgba.width(); ++x) {
                const std::size_t p = std::size_t(y * rgba.width() + x);
                ASSERT_EQ(q.image.value(x, y, 3), rgba.value(x, y, 3)) << "alpha at " << p;
                if (mask[p]) continue;
                ASSERT_EQ(q.labels[p], -1);
                for (int b = 0; b < 3; ++b) ASSERT_EQ(q.image.value(x, y, b), rgba.value(x, y, b)) << p;
            }
        expect_painted_by_labels(q);
    }
}

TEST(QuantizeImage, DitheringDiffusesOverTheFinalPalette) {
    // A smooth grey ramp: dithering must use more than one entry per plateau of the plain fit.
    Cube ramp(32, 4, 1, DType::U8, Layout::BIP);
    for (int y = 0; y < 4; ++y)
        for (int x = 0; x < 32; ++x) ramp.set_value(x, y, 0, x * 8);
    const QuantizedImage plain = quantize_image(cpu_context(), ramp, {.kmeans = {.k = 3}});
    const QuantizedImage d =
        quantize_image(cpu_context(), ramp, {.kmeans = {.k = 3}, .dither = Dither::FloydSteinberg});
    EXPECT_EQ(d.labels, dither_floyd_steinberg(ramp, plain.palette));
    EXPECT_EQ(d.palette, plain.palette);
    EXPECT_TRUE(d.centroids.empty()) << "dithered labels are not the clusters the means belong to";
    EXPECT_FALSE(cubes_identical(plain.image, d.image));
    expect_painted_by_labels(d);
}

TEST(QuantizeImage, IntoGivesTheSameOutputsInPlaceAndThroughTheHost) {
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube photo = random_cube(12, 9, 3, DType::U8, seed, 0, 255, Layout::BSQ);
    for (const Dither dither : {Dither::None, Dither::FloydSteinberg}) {  // in place, then the host way
        SCOPED_TRACE(std::string(enum_name(dither)));
        const QuantizeImageOptions o{.kmeans = {.k = 4, .seed = 2}, .dither = dither};
        const QuantizedImage q = quantize_image(cpu_context(), photo, o);
        Cube out(12, 9, 3, DType::U8, Layout::BSQ);  // another layout than the result's BIP
        Cube labels(12, 9, 1, DType::I32, Layout::BSQ);
        const QuantizedImage into = quantize_image_into(cpu_context(), photo, out, labels, o);
        EXPECT_TRUE(cubes_identical(q.image, out.to_layout(Layout::BIP)));
        EXPECT_EQ(q.labels, std::vector<std::int32_t>(labels.data<std::int32_t>(),
                                                      labels.data<std::int32_t>() + labels.num_elements()));
        EXPECT_EQ(q.palette, into.palette);
        EXPECT_EQ(q.centroids, into.centroids);
        EXPECT_EQ(q.counts, into.counts);
        EXPECT_EQ(q.kmeans.inertia, into.kmeans.inertia);
        EXPECT_TRUE(into.image.empty() && into.labels.empty());
    }
}

TEST(QuantizeImage, RefusesBadOptionsByName) {
    const Cube rgb = random_cube(6, 5, 3, DType::U8, 1, 0, 255, Layout::BIP);
    const Cube grey = random_cube(6, 5, 1, DType::U8, 1, 0, 255, Layout::BIP);
    const auto refuses = [](const Cube& image, const QuantizeImageOptions& o, const std::string& words) {
        try {
            (void)quantize_image(cpu_context(), image, o);
            ADD_FAILURE() << "accepted; expected a refusal naming " << words;
        } catch (const InvalidInput& e) {
            EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
        }
    };
    refuses(grey, {.colorspace = Colorspace::Lab}, "colorspace = lab needs an 8-bit RGB image");
    refuses(rgb, {.kmeans = {.legacy = true}, .colorspace = Colorspace::Lab}, "legacy = true");
    refuses(rgb, {.kmeans = {.init = KmeansInit::Explicit}}, "init = 'explicit' needs palette");
    refuses(grey, {.alpha = true}, "alpha = true needs at least 2 channels");
    refuses(rgb, {.palette = {1, 2}}, "palette has 2 values");
    refuses(rgb, {.palette = {1, 2, 3}, .palette_centroids = {1, 2}}, "palette_centroids");
    refuses(rgb, {.kmeans = {.k = 31}}, "k = 31");
    Cube out(6, 5, 1, DType::U8), labels(6, 5, 1, DType::I32);
    EXPECT_THROW((void)quantize_image_into(cpu_context(), rgb, out, labels), InvalidInput);
}

}  // namespace
