#pragma once
/// Colour helpers around k-means colour quantization (spec kmeans.md §6, "perceptual colour
/// spaces" and "dithering"): sRGB ↔ CIELAB conversions and Floyd–Steinberg error diffusion.
/// CPU only (device views are downloaded once).
///
///     cubekit::Cube lab = cubekit::rgb_u8_to_lab(photo);            // W×H×3 f32, L 0..100 (D65)
///     cubekit::KmeansResult r = cubekit::kmeans(ctx, lab, {.k = 16});
///     std::vector<std::uint8_t> rgb = cubekit::lab_to_rgb_u8(r.centroids);  // k × 3 sRGB
///     std::vector<std::int32_t> labels = cubekit::dither_floyd_steinberg(photo, r.palette);
///
/// sRGB uses the IEC 61966-2-1 transfer curve and primaries; the reference white is D65 taken as
/// the sRGB matrix applied to (1, 1, 1), so that sRGB white maps to L = 100, a = b = 0 exactly
/// (up to rounding) and neutral greys to a = b ≈ 0.
#include <array>
#include <cstdint>
#include <vector>

#include "cubekit/cube.hpp"

namespace cubekit {

/// CIELAB (D65) of one 8-bit sRGB colour: {L, a, b}, L in 0..100.
std::array<double, 3> srgb_u8_to_lab(std::uint8_t r, std::uint8_t g, std::uint8_t b);

/// 8-bit sRGB of one CIELAB colour: rounded to nearest, each channel clamped to 0..255 (colours
/// outside the sRGB gamut are clipped per channel).
std::array<std::uint8_t, 3> lab_to_srgb_u8(double L, double a, double b);

/// The CIELAB image of an 8-bit sRGB image: `rgb` is u8 with 3 bands, any view (host or device
/// memory, any layout or window; host views are read where they are, a device view is downloaded
/// once). The result is a host W×H×3 f32 BIP cube (L, a, b) with band names "L", "a", "b".
/// Throws InvalidInput naming the shape otherwise.
///
///     cubekit::Cube lab = cubekit::rgb_u8_to_lab(photo.view().window(0, 0, 32, 32));
Cube rgb_u8_to_lab(const CubeView& rgb);

/// n × 3 CIELAB values (row-major, e.g. KmeansResult::centroids of a Lab image) → n × 3 sRGB u8.
/// Throws InvalidInput when the size is not a multiple of 3.
std::vector<std::uint8_t> lab_to_rgb_u8(const std::vector<double>& lab);

/// Floyd–Steinberg error diffusion of `image` (any type and layout, m bands) with `palette`
/// (n × m, row-major, n ≥ 1): pixels are visited in raster order, left to right on every row;
/// each takes the nearest palette entry (squared Euclidean distance in f64, lowest index on ties)
/// of its value plus the error diffused to it, and passes its own error on with the classic
/// weights 7/16 (right), 3/16 (below left), 5/16 (below), 1/16 (below right). Errors are not
/// clamped. Excluded pixels (mask 0, or any NaN band) get label −1 and neither receive nor pass
/// error. `image` is any view (host views are read where they are, a device view is downloaded
/// once). Returns the W×H labels in raster order. Throws InvalidInput for an empty palette, a
/// palette size that is not a multiple of m, or a mask whose size is not W×H.
///
///     std::vector<std::int32_t> labels = cubekit::dither_floyd_steinberg(photo, {0, 0, 0, 255, 255, 255});
std::vector<std::int32_t> dither_floyd_steinberg(const CubeView& image, const std::vector<double>& palette,
                                                 const std::vector<std::uint8_t>& mask = {});

}  // namespace cubekit
