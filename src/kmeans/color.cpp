// sRGB ↔ CIELAB and Floyd–Steinberg dithering for colour quantization (kmeans_color.hpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "cubekit/context.hpp"
#include "cubekit/error.hpp"
#include "cubekit/kmeans_color.hpp"

namespace cubekit {

namespace {

// sRGB (linear) → XYZ, IEC 61966-2-1 primaries with the D65 white.
constexpr double kRgbToXyz[3][3] = {
    {0.4124564, 0.3575761, 0.1804375}, {0.2126729, 0.7151522, 0.0721750}, {0.0193339, 0.1191920, 0.9503041}};

struct LabTables {
    double white[3];          // XYZ of linear (1, 1, 1): the row sums, so white maps to a = b = 0
    double xyz_to_rgb[3][3];  // inverse of kRgbToXyz
    double linear[256];       // sRGB u8 → linear 0..1
};

const LabTables& tables() {
    static const LabTables t = [] {
        LabTables r{};
        for (int i = 0; i < 3; ++i) r.white[i] = kRgbToXyz[i][0] + kRgbToXyz[i][1] + kRgbToXyz[i][2];
        const auto& m = kRgbToXyz;
        const double det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
                           m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
                           m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
                // Cofactor of (j, i) over the determinant: the inverse by the adjugate.
                const int r0 = (j + 1) % 3, r1 = (j + 2) % 3, c0 = (i + 1) % 3, c1 = (i + 2) % 3;
                r.xyz_to_rgb[i][j] = (m[r0][c0] * m[r1][c1] - m[r0][c1] * m[r1][c0]) / det;
            }
        for (int v = 0; v < 256; ++v) {
            const double c = v / 255.0;
            r.linear[v] = c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4);
        }
        return r;
    }();
    return t;
}

constexpr double kDelta = 6.0 / 29.0;

// The samples of `image` in host memory: the view itself, or a host copy of a device view (made
// with a CUDA context on its device: these helpers take no context).
CubeView host_view(const CubeView& image, Cube& copy) {
    if (!image.on_device()) return image;
    const Context gpu({.backend = Backend::Cuda, .device = image.device()});
    copy = Cube(image.width(), image.height(), image.bands(), image.dtype(), Layout::BIP);
    copy_cube(gpu, image, copy.mutable_view());
    return copy.view();
}

double lab_f(double t) { return t > kDelta * kDelta * kDelta ? std::cbrt(t) : t / (3 * kDelta * kDelta) + 4.0 / 29.0; }
double lab_f_inverse(double t) { return t > kDelta ? t * t * t : 3 * kDelta * kDelta * (t - 4.0 / 29.0); }

std::uint8_t encode_srgb(double linear) {
    const double c = linear <= 0.0031308 ? 12.92 * linear : 1.055 * std::pow(linear, 1 / 2.4) - 0.055;
    const double v = std::round(255.0 * c);
    if (!(v > 0)) return 0;  // also NaN
    return std::uint8_t(std::min(v, 255.0));
}

}  // namespace

std::array<double, 3> srgb_u8_to_lab(std::uint8_t r, std::uint8_t g, std::uint8_t b) {
    const LabTables& t = tables();
    const double lin[3] = {t.linear[r], t.linear[g], t.linear[b]};
    double f[3];
    for (int i = 0; i < 3; ++i) {
        const double xyz = kRgbToXyz[i][0] * lin[0] + kRgbToXyz[i][1] * lin[1] + kRgbToXyz[i][2] * lin[2];
        f[i] = lab_f(xyz / t.white[i]);
    }
    return {116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])};
}

std::array<std::uint8_t, 3> lab_to_srgb_u8(double L, double a, double b) {
    const LabTables& t = tables();
    const double fy = (L + 16) / 116, fx = fy + a / 500, fz = fy - b / 200;
    const double xyz[3] = {t.white[0] * lab_f_inverse(fx), t.white[1] * lab_f_inverse(fy),
                           t.white[2] * lab_f_inverse(fz)};
    std::array<std::uint8_t, 3> rgb{};
    for (int i = 0; i < 3; ++i)
        rgb[std::size_t(i)] =
            encode_srgb(t.xyz_to_rgb[i][0] * xyz[0] + t.xyz_to_rgb[i][1] * xyz[1] + t.xyz_to_rgb[i][2] * xyz[2]);
    return rgb;
}

Cube rgb_u8_to_lab(const CubeView& rgb) {
    if (rgb.dtype() != DType::U8 || rgb.bands() != 3)
        throw InvalidInput("rgb_u8_to_lab: the image is " + rgb.describe() + "; expected 3 bands of u8 (sRGB)");
    Cube copy;
    const StridedView<const std::uint8_t> src = host_view(rgb, copy).typed<std::uint8_t>();
    const int W = rgb.width(), H = rgb.height();
    Cube lab(W, H, 3, DType::F32, Layout::BIP);
    lab.metadata().band_names = {"L", "a", "b"};
    float* dst = lab.data<float>();
    // Photos repeat colours a lot, but a 2^24 cache would cost 200 MB; the conversion is cheap enough.
#pragma omp parallel for schedule(static)
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const auto v = srgb_u8_to_lab(src(x, y, 0), src(x, y, 1), src(x, y, 2));
            const std::size_t p = (std::size_t(y) * std::size_t(W) + std::size_t(x)) * 3;
            for (std::size_t c = 0; c < 3; ++c) dst[p + c] = float(v[c]);
        }
    return lab;
}

std::vector<std::uint8_t> lab_to_rgb_u8(const std::vector<double>& lab) {
    if (lab.size() % 3 != 0)
        throw InvalidInput("lab_to_rgb_u8: " + std::to_string(lab.size()) +
                           " values; expected a multiple of 3 (L, a, b)");
    std::vector<std::uint8_t> rgb(lab.size());
    for (std::size_t i = 0; i < lab.size(); i += 3) {
        const auto v = lab_to_srgb_u8(lab[i], lab[i + 1], lab[i + 2]);
        std::copy(v.begin(), v.end(), rgb.begin() + std::ptrdiff_t(i));
    }
    return rgb;
}

std::vector<std::int32_t> dither_floyd_steinberg(const CubeView& image, const std::vector<double>& palette,
                                                 const std::vector<std::uint8_t>& mask) {
    const int W = image.width(), H = image.height(), m = image.bands();
    if (m < 1 || palette.empty() || palette.size() % std::size_t(m) != 0)
        throw InvalidInput("dither_floyd_steinberg: palette of " + std::to_string(palette.size()) + " values for " +
                           std::to_string(m) + " bands; expected a positive multiple of the band count");
    if (!mask.empty() && mask.size() != image.num_pixels())
        throw InvalidInput("dither_floyd_steinberg: mask of " + std::to_string(mask.size()) + " pixels for a " +
                           std::to_string(W) + "x" + std::to_string(H) + " image");
    const std::size_t n = palette.size() / std::size_t(m), M = std::size_t(m);
    // The samples as doubles, pixel-major (the error diffusion reads them pixel by pixel).
    Cube copy;
    const CubeView host = host_view(image, copy);
    std::vector<double> values(image.num_elements());
    visit_dtype(image.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const StridedView<const T> src = host.typed<T>();
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x)
                for (int b = 0; b < m; ++b) values[(std::size_t(y) * std::size_t(W) + std::size_t(x)) * M + std::size_t(b)] = double(src(x, y, b));
    });
    std::vector<std::int32_t> labels(image.num_pixels(), -1);
    // Error rows with one pixel of padding on each side, so the neighbours need no bounds checks.
    std::vector<double> err_here((std::size_t(W) + 2) * M, 0.0), err_next(err_here.size(), 0.0);
    std::vector<double> want(M);
    for (int y = 0; y < H; ++y) {
        std::fill(err_next.begin(), err_next.end(), 0.0);
        for (int x = 0; x < W; ++x) {
            const std::size_t p = std::size_t(y) * std::size_t(W) + std::size_t(x);
            const double* v = &values[p * M];
            bool excluded = !mask.empty() && mask[p] == 0;
            for (std::size_t b = 0; b < M && !excluded; ++b) excluded = std::isnan(v[b]);
            if (excluded) continue;  // its error slot is dropped: nothing flows through it
            double* e = &err_here[(std::size_t(x) + 1) * M];
            for (std::size_t b = 0; b < M; ++b) want[b] = v[b] + e[b];
            std::size_t best = 0;
            double best_d = std::numeric_limits<double>::infinity();
            for (std::size_t j = 0; j < n; ++j) {
                double d = 0;
                for (std::size_t b = 0; b < M; ++b) {
                    const double diff = want[b] - palette[j * M + b];
                    d += diff * diff;
                }
                if (d < best_d) best_d = d, best = j;
            }
            labels[p] = std::int32_t(best);
            // Neighbours that are excluded get error too, but never use it (see above).
            double* right = &err_here[(std::size_t(x) + 2) * M];
            double* below_left = &err_next[std::size_t(x) * M];
            double* below = &err_next[(std::size_t(x) + 1) * M];
            double* below_right = &err_next[(std::size_t(x) + 2) * M];
            for (std::size_t b = 0; b < M; ++b) {
                const double q = want[b] - palette[best * M + b];
                right[b] += q * (7.0 / 16);
                below_left[b] += q * (3.0 / 16);
                below[b] += q * (5.0 / 16);
                below_right[b] += q * (1.0 / 16);
            }
        }
        std::swap(err_here, err_next);
    }
    return labels;
}

}  // namespace cubekit
