// Which pixels a Zernike sum visits (spec zernike.md §3.2, §3.6, §3.11) and the exact recurrence
// coefficients (§3.3, §3.7, §3.8).
#include <boost/multiprecision/cpp_int.hpp>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numbers>
#include <string>

#include "cubekit/error.hpp"
#include "zernike/zernike_internal.hpp"

namespace cubekit {

namespace {

// ⌊√n⌋ exactly, n ≥ 0.
std::int64_t isqrt(std::int64_t n) {
    auto r = std::int64_t(std::sqrt(double(n)));
    while (r > 0 && r * r > n) --r;
    while ((r + 1) * (r + 1) <= n) ++r;
    return r;
}

// Largest value ≤ limit with the parity of `parity` (−1 when there is none ≥ 0... or the
// negative result tells the caller the range is empty).
std::int64_t largest_with_parity(std::int64_t limit, std::int64_t parity) {
    return ((limit - parity) % 2 == 0) ? limit : limit - 1;
}

bool centred(const ZernikeDisk& d) { return d.mapping != ZernikeMapping::Custom; }

// D² of a centred mapping: min(W,H)² (Inscribed) or W² + H² (Circumscribed).
std::int64_t centred_d2(const ZernikeDisk& d) {
    if (d.mapping == ZernikeMapping::Inscribed) {
        const std::int64_t D = std::min(d.width, d.height);
        return D * D;
    }
    return std::int64_t(d.width) * d.width + std::int64_t(d.height) * d.height;
}

// Largest |u| inside the disk on row v (centred mappings), before the parity and image limits;
// −1 when the row misses the disk.
std::int64_t centred_u_limit(const ZernikeDisk& d, std::int64_t d2, std::int64_t v) {
    if (d.mapping == ZernikeMapping::Circumscribed) return d.width - 1;  // every pixel is inside
    const std::int64_t rest = d2 - v * v;
    return rest < 0 ? -1 : std::min<std::int64_t>(isqrt(rest), d.width - 1);
}

// Row y of a centred mapping on the plain path: its pixels inside the disk are u = −umax, −umax + 2,
// ..., umax (umax + 1 of them); −1 when the row has none.
std::int64_t plain_row_umax(const ZernikeDisk& d, std::int64_t d2, int y) {
    const std::int64_t v = std::int64_t(d.height) - 1 - 2 * std::int64_t(y);
    const std::int64_t limit = centred_u_limit(d, d2, v);
    if (limit < 0) return -1;
    const std::int64_t umax = largest_with_parity(limit, (d.width - 1) % 2);
    return umax < 0 ? -1 : umax;
}

}  // namespace

bool ZernikeDisk::inside(int x, int y) const {
    if (x < 0 || y < 0 || x >= width || y >= height) return false;
    if (mapping == ZernikeMapping::Custom) {
        double X, Y, t;
        zernike::custom_point(center_x, center_y, radius, x, y, X, Y, t);
        return t <= 1.0;
    }
    const std::int64_t u = 2 * std::int64_t(x) + 1 - width, v = std::int64_t(height) - 1 - 2 * std::int64_t(y);
    return mapping == ZernikeMapping::Circumscribed || u * u + v * v <= centred_d2(*this);
}

void ZernikeDisk::unit_coordinates(int x, int y, double& X, double& Y) const {
    double t;
    if (mapping == ZernikeMapping::Custom) {
        zernike::custom_point(center_x, center_y, radius, x, y, X, Y, t);
        return;
    }
    const std::int64_t d2 = centred_d2(*this);
    zernike::centred_point({d2, std::sqrt(double(d2))}, 2 * x + 1 - width, height - 1 - 2 * y, X, Y, t);
}

ZernikeDisk zernike_disk(int width, int height, const ZernikeOptions& options) {
    if (width < 1 || height < 1)
        throw InvalidInput("zernike: the image is " + std::to_string(width) + "x" + std::to_string(height) +
                           "; width and height must be at least 1");
    if (std::int64_t(width) > (1 << 29) || std::int64_t(height) > (1 << 29))
        throw InvalidInput("zernike: the image is " + std::to_string(width) + "x" + std::to_string(height) +
                           "; sides above 2^29 pixels are not supported");
    ZernikeDisk d;
    d.width = width;
    d.height = height;
    d.mapping = options.mapping;
    bool covers_disk = true;  // every point of the disk lies on the image
    switch (options.mapping) {
        case ZernikeMapping::Inscribed:
            d.center_x = (width - 1) / 2.0;
            d.center_y = (height - 1) / 2.0;
            d.radius = std::min(width, height) / 2.0;
            d.symmetric = (width - height) % 2 == 0;
            break;
        case ZernikeMapping::Circumscribed:
            d.center_x = (width - 1) / 2.0;
            d.center_y = (height - 1) / 2.0;
            d.radius = std::sqrt(double(centred_d2(d))) / 2.0;
            d.symmetric = width == height;
            covers_disk = false;
            break;
        case ZernikeMapping::Custom:
            if (!(options.radius > 0.0) || !std::isfinite(options.radius))
                throw InvalidInput("zernike: custom disk radius = " + std::to_string(options.radius) +
                                   "; expected a finite radius > 0 pixels");
            if (!std::isfinite(options.center[0]) || !std::isfinite(options.center[1]))
                throw InvalidInput("zernike: the custom disk centre must be finite");
            d.center_x = options.center[0];
            d.center_y = options.center[1];
            d.radius = options.radius;
            d.symmetric = false;
            covers_disk = d.center_x - d.radius >= -0.5 && d.center_x + d.radius <= width - 0.5 &&
                          d.center_y - d.radius >= -0.5 && d.center_y + d.radius <= height - 0.5;
            break;
    }
    d.pixel_count = zernike::disk_pixel_count(d);
    if (d.pixel_count == 0)
        throw InvalidInput("zernike: the custom disk (centre " + std::to_string(d.center_x) + ", " +
                           std::to_string(d.center_y) + ", radius " + std::to_string(d.radius) +
                           ") contains no pixel centre of the " + std::to_string(width) + "x" +
                           std::to_string(height) + " image");
    d.normalization = options.normalization;
    if (d.normalization == ZernikeNormalization::Default)
        d.normalization = covers_disk ? ZernikeNormalization::PixelCount : ZernikeNormalization::Area;
    d.denominator = d.normalization == ZernikeNormalization::PixelCount ? double(d.pixel_count)
                                                                        : std::numbers::pi * d.radius * d.radius;
    return d;
}

namespace zernike {

PointLayout point_layout(const ZernikeDisk& disk, bool symmetric) {
    PointLayout L;
    L.width = disk.width;
    L.height = disk.height;
    L.symmetric = symmetric && disk.symmetric;
    L.custom = !centred(disk);
    L.cx = disk.center_x;
    L.cy = disk.center_y;
    L.rho = disk.radius;
    if (L.custom) {
        for (int y = 0; y < disk.height; ++y) {
            if (std::abs(double(y) - disk.center_y) > disk.radius + 1.0) continue;
            int run = -1;
            for (int x = 0; x <= disk.width; ++x) {
                const bool in = x < disk.width && disk.inside(x, y);
                if (in && run < 0) run = x;
                if (!in && run >= 0) {
                    L.rows.push_back({y, run, x - run});
                    run = -1;
                }
            }
        }
    } else {
        const std::int64_t d2 = centred_d2(disk);
        L.centred = {d2, std::sqrt(double(d2))};
        if (L.symmetric) {
            const std::int64_t s = (disk.width - 1) % 2;  // u and v share this parity
            for (std::int64_t v = s;; v += 2) {
                const std::int64_t limit = centred_u_limit(disk, d2, v);
                const std::int64_t umax = largest_with_parity(limit, s);
                if (limit < 0 || umax < v) break;
                L.rows.push_back({int(v), int(v), int((umax - v) / 2 + 1)});
            }
        } else {
            for (int y = 0; y < disk.height; ++y) {
                const std::int64_t umax = plain_row_umax(disk, d2, y);
                if (umax >= 0) L.rows.push_back({int(disk.height - 1 - 2 * y), int(-umax), int(umax + 1)});
            }
        }
    }
    L.offsets.assign(1, 0);
    for (const PointRow& r : L.rows) L.offsets.push_back(L.offsets.back() + r.count);
    return L;
}

std::int64_t disk_pixel_count(const ZernikeDisk& disk) {
    if (!centred(disk)) return point_layout(disk, false).points();
    // zernike_disk runs on every call (the device-resident ones too, timed by the benchmark): the
    // plain layout's rows are counted without building them, and the last count is remembered.
    struct Last {
        int width = 0, height = 0;
        ZernikeMapping mapping = ZernikeMapping::Custom;
        std::int64_t count = 0;
    };
    thread_local Last last;
    if (last.width == disk.width && last.height == disk.height && last.mapping == disk.mapping) return last.count;
    const std::int64_t d2 = centred_d2(disk);
    std::int64_t count = 0;
    for (int y = 0; y < disk.height; ++y) count += plain_row_umax(disk, d2, y) + 1;
    last = {disk.width, disk.height, disk.mapping, count};
    return count;
}

// q-recursion H1..H3 (§3.7) for every (n, m), m ≤ n − 4, n ≤ nmax: exact rationals rounded once.
// Rational arithmetic costs milliseconds at order 34, so the table is kept; smaller orders use
// its prefix (the set order is n-major).
std::vector<QRecCoef> qrec_coefficients(int nmax) {
    using boost::multiprecision::cpp_rational;
    static std::mutex mutex;
    static std::vector<QRecCoef> table;
    static int table_nmax = -1;
    const std::lock_guard<std::mutex> lock(mutex);
    if (nmax > table_nmax) {
        table.assign(zernike_set_size(nmax), {0, 0, 0});
        for (int n = 4; n <= nmax; ++n)
            for (int m = n % 2; m <= n - 4; m += 2) {
                const cpp_rational H3 = cpp_rational(-4 * (m + 2) * (m + 1)) / ((n + m + 2) * (n - m));
                const cpp_rational H2 = H3 * (n + m + 4) * (n - m - 2) / (4 * (m + 3)) + (m + 2);
                const cpp_rational H1 =
                    cpp_rational((m + 4) * (m + 3)) / 2 - (m + 4) * H2 + H3 * (n + m + 6) * (n - m - 4) / 8;
                table[zernike_set_index(n, m)] = {H1.convert_to<double>(), H2.convert_to<double>(),
                                                  H3.convert_to<double>()};
            }
        table_nmax = nmax;
    }
    return {table.begin(), table.begin() + std::ptrdiff_t(zernike_set_size(nmax))};
}

Coefficients coefficients(int nmax, bool explicit_beta, bool qrec) {
    using boost::multiprecision::cpp_int;
    using boost::multiprecision::cpp_rational;
    Coefficients c;
    c.nmax = nmax;
    const std::size_t size = nmax < 0 ? 0 : zernike_set_size(nmax);
    c.kintner.assign(size, {0, 0, 0});
    if (qrec) c.qrec = qrec_coefficients(nmax);
    if (explicit_beta) c.beta_offset.assign(size, 0);
    for (int n = 0; n <= nmax; ++n) {
        for (int m = n % 2; m <= n; m += 2) {
            const std::size_t i = zernike_set_index(n, m);
            if (n >= m + 4) {  // Kintner K1..K4 (§3.8): integers, exact in double far beyond any order used
                const double K1 = double(std::int64_t(n + m) * (n - m) * (n - 2) / 2);
                const double K2 = double(std::int64_t(2) * n * (n - 1) * (n - 2));
                const double K3 = double(-std::int64_t(m) * m * (n - 1) - std::int64_t(n) * (n - 1) * (n - 2));
                const double K4 = double(-std::int64_t(n) * (n + m - 2) * (n - m - 2) / 2);
                c.kintner[i] = {K2 / K1, K3 / K1, K4 / K1};
            }
            if (explicit_beta) {  // β(n,m,k), factorial-free recurrence (§3.3), exact integers
                c.beta_offset[i] = std::int32_t(c.beta.size());
                const int h = (n - m) / 2, p = (n + m) / 2;
                cpp_int beta = 1;  // β0 = C(n, h)
                for (int k = 1; k <= h; ++k) beta = beta * (n - h + k) / k;
                for (int k = 0; k <= h; ++k) {
                    c.beta.push_back(beta.convert_to<double>());
                    if (k < h) beta = -beta * (p - k) * (h - k) / ((k + 1) * (n - k));
                }
            }
        }
    }
    return c;
}

}  // namespace zernike
}  // namespace cubekit
