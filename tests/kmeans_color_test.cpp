// k-means colour helpers: sRGB ↔ CIELAB against known values and round trips, Floyd–Steinberg
// dithering, and the indexed PNG writer.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "cubekit/kmeans_color.hpp"
#include "testing.hpp"

namespace {

namespace fs = std::filesystem;
using namespace cubekit;
using cubekit::testing::temp_dir;


// ---- colour helpers ----------------------------------------------------------------------------------

TEST(KmeansColor, KnownLabValues) {
    struct Known {
        std::uint8_t r, g, b;
        double L, a, bb;
    };
    // Reference values: Bruce Lindbloom's calculator (sRGB, D65), to 4 decimals.
    const Known known[] = {{255, 255, 255, 100.0, 0.0, 0.0},         {0, 0, 0, 0.0, 0.0, 0.0},
                           {255, 0, 0, 53.2408, 80.0925, 67.2032},   {0, 255, 0, 87.7347, -86.1827, 83.1793},
                           {0, 0, 255, 32.2970, 79.1875, -107.8602}, {128, 128, 128, 53.5850, 0.0, 0.0}};
    for (const Known& k : known) {
        SCOPED_TRACE(std::to_string(k.r) + "," + std::to_string(k.g) + "," + std::to_string(k.b));
        const auto lab = srgb_u8_to_lab(k.r, k.g, k.b);
        EXPECT_NEAR(lab[0], k.L, 0.01);
        EXPECT_NEAR(lab[1], k.a, 0.01);
        EXPECT_NEAR(lab[2], k.bb, 0.01);
        const auto back = lab_to_srgb_u8(lab[0], lab[1], lab[2]);
        EXPECT_EQ(back, (std::array<std::uint8_t, 3>{k.r, k.g, k.b}));
    }
    const auto white = srgb_u8_to_lab(255, 255, 255);
    EXPECT_NEAR(white[0], 100.0, 1e-9);
    EXPECT_NEAR(white[1], 0.0, 1e-9);
    EXPECT_NEAR(white[2], 0.0, 1e-9);
    // Out of gamut: clipped per channel, never wrapped.
    EXPECT_EQ(lab_to_srgb_u8(50, 150, 0)[0], 255);
    EXPECT_EQ(lab_to_srgb_u8(-10, 0, 0), (std::array<std::uint8_t, 3>{0, 0, 0}));
}

TEST(KmeansColor, RoundTripThroughF32LabWithinOneLevel) {
    // Every colour of a lattice with step 3 (0, 3, ..., 255 per channel), as an image in BSQ.
    const int n = 86;
    Cube rgb(n * n, n, 3, DType::U8, Layout::BSQ);
    for (int r = 0; r < n; ++r)
        for (int g = 0; g < n; ++g)
            for (int b = 0; b < n; ++b) {
                rgb.at<std::uint8_t>(g * n + b, r, 0) = std::uint8_t(3 * r);
                rgb.at<std::uint8_t>(g * n + b, r, 1) = std::uint8_t(3 * g);
                rgb.at<std::uint8_t>(g * n + b, r, 2) = std::uint8_t(3 * b);
            }
    const Cube lab = rgb_u8_to_lab(rgb);
    ASSERT_EQ(lab.shape().describe(), std::to_string(n * n) + "x" + std::to_string(n) + "x3 f32 bip");
    std::vector<double> values(lab.num_elements());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = lab.data<float>()[i];
    const std::vector<std::uint8_t> back = lab_to_rgb_u8(values);
    int worst = 0;
    std::size_t exact = 0;
    for (int y = 0; y < lab.height(); ++y)
        for (int x = 0; x < lab.width(); ++x) {
            bool same = true;
            for (int c = 0; c < 3; ++c) {
                const int d = std::abs(
                    int(back[(std::size_t(y) * std::size_t(lab.width()) + std::size_t(x)) * 3 + std::size_t(c)]) -
                    int(rgb.at<std::uint8_t>(x, y, c)));
                worst = std::max(worst, d);
                same &= d == 0;
            }
            exact += same;
        }
    EXPECT_LE(worst, 1);
    EXPECT_GE(double(exact), 0.999 * double(n) * n * n) << "colours that come back exactly";
    EXPECT_THROW(rgb_u8_to_lab(Cube(2, 2, 3, DType::U16)), InvalidInput);
    EXPECT_THROW(rgb_u8_to_lab(Cube(2, 2, 1, DType::U8)), InvalidInput);
    EXPECT_THROW(lab_to_rgb_u8({1.0, 2.0}), InvalidInput);
}

TEST(KmeansColor, DitherMidGreyGivesHalfWhite) {
    for (const int bands : {1, 3}) {
        SCOPED_TRACE(std::to_string(bands) + " band(s)");
        Cube grey(64, 48, bands, DType::U8, Layout::BIP);
        std::fill(grey.data<std::uint8_t>(), grey.data<std::uint8_t>() + grey.num_elements(), std::uint8_t(128));
        const std::vector<double> palette =
            bands == 1 ? std::vector<double>{0, 255} : std::vector<double>{0, 0, 0, 255, 255, 255};
        const std::vector<std::int32_t> labels = dither_floyd_steinberg(grey, palette);
        ASSERT_EQ(labels.size(), 64u * 48u);
        const double white = double(std::count(labels.begin(), labels.end(), 1)) / double(labels.size());
        EXPECT_NEAR(white, 128.0 / 255.0, 0.01);
        EXPECT_EQ(std::count(labels.begin(), labels.end(), 0) + std::count(labels.begin(), labels.end(), 1),
                  std::ptrdiff_t(labels.size()));
    }
}

TEST(KmeansColor, DitherExactColoursMaskAndErrors) {
    // An image holding only palette colours has no error to diffuse: every pixel keeps its colour.
    Cube img(9, 7, 3, DType::U8, Layout::BSQ);
    const std::vector<double> palette = {10, 20, 30, 200, 100, 0, 0, 0, 255};
    for (int y = 0; y < 7; ++y)
        for (int x = 0; x < 9; ++x)
            for (int c = 0; c < 3; ++c) img.set_value(x, y, c, palette[std::size_t((x * y) % 3) * 3 + std::size_t(c)]);
    std::vector<std::uint8_t> mask(63, 1);
    mask[5] = mask[40] = 0;
    const auto labels = dither_floyd_steinberg(img, palette, mask);
    for (int y = 0; y < 7; ++y)
        for (int x = 0; x < 9; ++x) {
            const std::size_t p = std::size_t(y) * 9 + std::size_t(x);
            EXPECT_EQ(labels[p], mask[p] ? (x * y) % 3 : -1) << x << "," << y;
        }
    // NaN pixels are excluded too.
    Cube f(3, 1, 1, DType::F32, Layout::BIP);
    f.data<float>()[1] = NAN;
    EXPECT_EQ(dither_floyd_steinberg(f, {0.0}), (std::vector<std::int32_t>{0, -1, 0}));
    EXPECT_THROW(dither_floyd_steinberg(img, {1, 2}), InvalidInput);
    EXPECT_THROW(dither_floyd_steinberg(img, {}), InvalidInput);
    EXPECT_THROW(dither_floyd_steinberg(img, palette, std::vector<std::uint8_t>(5, 1)), InvalidInput);
}

TEST(KmeansColor, IndexedPngReadsBackAsRgbOrRgba) {
    const fs::path dir = temp_dir("indexed-png");
    for (const std::size_t n : {2u, 3u, 16u, 17u, 256u}) {
        SCOPED_TRACE(std::to_string(n) + " palette entries");
        std::vector<std::array<std::uint8_t, 3>> palette(n);
        for (std::size_t i = 0; i < n; ++i) palette[i] = {std::uint8_t(i), std::uint8_t(255 - i), std::uint8_t(i * 7)};
        std::vector<std::uint8_t> idx(13 * 5);
        for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = std::uint8_t((i * 31) % n);
        write_indexed_png(dir / "p.png", 13, 5, idx, palette);
        const Cube back = read_cube(dir / "p.png");
        ASSERT_EQ(back.shape().describe(), "13x5x3 u8 bip");
        for (std::size_t i = 0; i < idx.size(); ++i)
            for (int c = 0; c < 3; ++c)
                ASSERT_EQ(back.data<std::uint8_t>()[i * 3 + std::size_t(c)], palette[idx[i]][std::size_t(c)])
                    << "pixel " << i;
    }
    write_indexed_png(dir / "a.png", 2, 1, {0, 1}, {{1, 2, 3}, {4, 5, 6}}, {255, 0});
    const Cube rgba = read_cube(dir / "a.png");
    ASSERT_EQ(rgba.bands(), 4);
    EXPECT_EQ(rgba.value(0, 0, 3), 255);
    EXPECT_EQ(rgba.value(1, 0, 3), 0);
    EXPECT_THROW(write_indexed_png(dir / "b.png", 2, 1, {0, 2}, {{1, 2, 3}, {4, 5, 6}}), InvalidInput);
    EXPECT_THROW(write_indexed_png(dir / "b.png", 3, 1, {0, 1}, {{1, 2, 3}, {4, 5, 6}}), InvalidInput);
    EXPECT_FALSE(fs::exists(dir / "b.png"));
}

}  // namespace
