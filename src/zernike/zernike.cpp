// Zernike moments front door: names, index arithmetic, validation, the method rule of spec
// zernike.md §3.9, backend dispatch, normalisation; reconstruction and invariants.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "cubekit/error.hpp"
#include "cubekit/zernike.hpp"
#include "zernike/zernike_internal.hpp"

namespace cubekit {

namespace {

// Orders above this would need coefficient tables of ⌊(N+2)²/4⌋ entries beyond ~100 MB; the
// stable recurrences stay accurate far below it (spec §3.10).
constexpr int kOrderLimit = 4096;

template <typename E, std::size_t K>
E parse_name(std::string_view name, std::string_view what, const std::pair<const char*, E> (&table)[K]) {
    std::string accepted;
    for (const auto& [text, value] : table) {
        if (name == text) return value;
        accepted += (accepted.empty() ? "" : ", ") + std::string(text);
    }
    throw InvalidInput(std::string(what) + " = '" + std::string(name) + "': expected " + accepted);
}

constexpr std::pair<const char*, ZernikeMethod> kMethods[] = {{"auto", ZernikeMethod::Auto},
                                                              {"direct", ZernikeMethod::Direct},
                                                              {"qrecursive", ZernikeMethod::QRecursive},
                                                              {"kintner", ZernikeMethod::Kintner}};
constexpr std::pair<const char*, ZernikeMapping> kMappings[] = {{"inscribed", ZernikeMapping::Inscribed},
                                                                {"circumscribed", ZernikeMapping::Circumscribed},
                                                                {"custom", ZernikeMapping::Custom}};
constexpr std::pair<const char*, ZernikeNormalization> kNormalizations[] = {
    {"default", ZernikeNormalization::Default},
    {"pixelcount", ZernikeNormalization::PixelCount},
    {"area", ZernikeNormalization::Area}};
constexpr std::pair<const char*, ZernikePrecision> kPrecisions[] = {{"f64", ZernikePrecision::Double},
                                                                    {"f32", ZernikePrecision::Float}};

template <typename E, std::size_t K>
std::string_view name_of(E value, const std::pair<const char*, E> (&table)[K]) {
    for (const auto& [text, v] : table)
        if (v == value) return text;
    return "?";
}

std::string moment_name(const ZernikeIndex& z) { return "A(" + std::to_string(z.n) + "," + std::to_string(z.m) + ")"; }

void check_index(const char* function, const ZernikeIndex& z) {
    const std::string f(function);
    if (z.n < 0) throw InvalidInput(f + ": order n = " + std::to_string(z.n) + "; expected n >= 0");
    if (z.n > kOrderLimit)
        throw InvalidInput(f + ": order n = " + std::to_string(z.n) + "; orders above " + std::to_string(kOrderLimit) +
                           " are not supported");
    if (z.m < 0)
        throw InvalidInput(f + ": repetition m = " + std::to_string(z.m) +
                           "; only m >= 0 is computed (A(n,-m) is the conjugate of A(n,m))");
    if (z.m > z.n) throw InvalidInput(f + ": " + moment_name(z) + " has m > n; expected 0 <= m <= n");
    if ((z.n - z.m) % 2 != 0) throw InvalidInput(f + ": " + moment_name(z) + " has n - m odd; expected n - m even");
}

ZernikeMoments compute(const char* function, const Context& ctx, const Cube& images,
                       std::vector<ZernikeIndex> wanted, ZernikeMethod auto_choice, const ZernikeOptions& options) {
    const std::string f(function);
    if (images.empty())
        throw InvalidInput(f + ": the image is " + std::to_string(images.width()) + "x" +
                           std::to_string(images.height()) + "x" + std::to_string(images.bands()) +
                           "; width, height and bands must be at least 1");
    if (wanted.empty()) throw InvalidInput(f + ": no moment requested");
    std::set<std::pair<int, int>> seen;
    for (const ZernikeIndex& z : wanted) {
        check_index(function, z);
        if (!seen.insert({z.n, z.m}).second) throw InvalidInput(f + ": " + moment_name(z) + " is requested twice");
    }
    ZernikeMoments out;
    out.disk = zernike_disk(images.width(), images.height(), options);
    out.width = images.width();
    out.height = images.height();
    out.images = images.bands();
    out.indices = std::move(wanted);

    zernike::Request request;
    request.wanted = out.indices;
    request.method = options.method == ZernikeMethod::Auto ? auto_choice : options.method;
    if (options.method == ZernikeMethod::Auto && request.method == ZernikeMethod::QRecursive &&
        options.precision == ZernikePrecision::Float)
        request.method = ZernikeMethod::Kintner;  // §3.9: the q-recursion in float is not accurate
    request.radial = options.radial;
    request.precision = options.precision;
    request.symmetric = options.symmetry && out.disk.symmetric;
    out.method = request.method;
    out.radial = request.radial;
    out.precision = request.precision;
    out.symmetric = request.symmetric;
    const int nmax = request.max_order();
    if (request.method == ZernikeMethod::Direct && request.radial == ZernikeRadial::Explicit) {
        const int limit = request.precision == ZernikePrecision::Double ? 20 : 10;
        if (nmax > limit)
            out.warnings.push_back("explicit radial polynomials lose accuracy above order " + std::to_string(limit) +
                                   " in " + std::string(zernike_precision_name(request.precision)) +
                                   " (cancellation in the factorial sum); order " + std::to_string(nmax) +
                                   " requested, use the stable radial evaluation");
    }
    ctx.log(f + ": " + std::string(ctx.backend_name()) + ", " + images.shape().describe() + ", " +
            std::to_string(out.indices.size()) + " moments up to order " + std::to_string(nmax) + ", " +
            std::string(zernike_method_name(request.method)) + (request.symmetric ? ", 8-fold symmetric" : "") +
            ", " + std::string(zernike_precision_name(request.precision)));

    const Cube converted = images.layout() == Layout::BSQ ? Cube() : images.to_layout(Layout::BSQ);
    const Cube& bsq = images.layout() == Layout::BSQ ? images : converted;
    out.values = ctx.is_cuda() ? zernike::sums_cuda(ctx, bsq, out.disk, request)
                               : zernike::sums_cpu(ctx, bsq, out.disk, request);
    const std::size_t count = out.indices.size();
    for (std::size_t i = 0; i < out.values.size(); ++i) {
        const double factor = double(out.indices[i % count].n + 1);
        out.values[i] = {out.values[i].real() * factor / out.disk.denominator,
                         out.values[i].imag() * factor / out.disk.denominator};
    }
    return out;
}

}  // namespace

std::string_view zernike_method_name(ZernikeMethod m) { return name_of(m, kMethods); }
std::string_view zernike_mapping_name(ZernikeMapping m) { return name_of(m, kMappings); }
std::string_view zernike_normalization_name(ZernikeNormalization n) { return name_of(n, kNormalizations); }
std::string_view zernike_precision_name(ZernikePrecision p) { return name_of(p, kPrecisions); }
ZernikeMethod parse_zernike_method(std::string_view name, std::string_view what) { return parse_name(name, what, kMethods); }
ZernikeMapping parse_zernike_mapping(std::string_view name, std::string_view what) { return parse_name(name, what, kMappings); }
ZernikeNormalization parse_zernike_normalization(std::string_view name, std::string_view what) {
    return parse_name(name, what, kNormalizations);
}
ZernikePrecision parse_zernike_precision(std::string_view name, std::string_view what) {
    return parse_name(name, what, kPrecisions);
}

std::size_t zernike_set_size(int nmax) {
    if (nmax < 0) return 0;
    const std::size_t a = std::size_t(nmax) + 2;
    return a * a / 4;
}

std::size_t zernike_set_index(int n, int m) {
    const std::size_t a = std::size_t(n) + 1;
    return a * a / 4 + std::size_t((m - n % 2) / 2);
}

std::vector<ZernikeIndex> zernike_set_indices(int nmax) {
    std::vector<ZernikeIndex> out;
    out.reserve(zernike_set_size(nmax));
    for (int n = 0; n <= nmax; ++n)
        for (int m = n % 2; m <= n; m += 2) out.push_back({n, m});
    return out;
}

std::vector<ZernikeIndex> zernike_order_indices(int n) {
    std::vector<ZernikeIndex> out;
    for (int m = n < 0 ? 0 : n % 2; m <= n; m += 2) out.push_back({n, m});
    return out;
}

std::complex<double> ZernikeMoments::at(int image_index, int n, int m) const {
    if (image_index < 0 || image_index >= images)
        throw InvalidInput("ZernikeMoments::at: image " + std::to_string(image_index) + " is out of range (" +
                           std::to_string(images) + " images)");
    const int am = m < 0 ? -m : m;
    for (std::size_t k = 0; k < indices.size(); ++k)
        if (indices[k].n == n && indices[k].m == am) {
            const std::complex<double> a = image(image_index)[k];
            return m < 0 ? std::conj(a) : a;
        }
    throw InvalidInput("ZernikeMoments::at: A(" + std::to_string(n) + "," + std::to_string(m) + ") was not computed");
}

int ZernikeMoments::max_order() const {
    int n = -1;
    for (const ZernikeIndex& z : indices) n = std::max(n, z.n);
    return n;
}

ZernikeMoments zernike_moment(const Context& ctx, const Cube& images, int n, int m, const ZernikeOptions& options) {
    return compute("zernike_moment", ctx, images, {{n, m}}, ZernikeMethod::Direct, options);
}

ZernikeMoments zernike_order(const Context& ctx, const Cube& images, int n, const ZernikeOptions& options) {
    check_index("zernike_order", {n, n % 2 == 0 || n < 0 ? 0 : 1});
    return compute("zernike_order", ctx, images, zernike_order_indices(n), ZernikeMethod::QRecursive, options);
}

ZernikeMoments zernike_set(const Context& ctx, const Cube& images, int nmax, const ZernikeOptions& options) {
    if (nmax < 0) throw InvalidInput("zernike_set: maximum order = " + std::to_string(nmax) + "; expected >= 0");
    check_index("zernike_set", {nmax, nmax % 2});
    return compute("zernike_set", ctx, images, zernike_set_indices(nmax), ZernikeMethod::Kintner, options);
}

ZernikeMoments zernike_moments(const Context& ctx, const Cube& images, const std::vector<ZernikeIndex>& wanted,
                               const ZernikeOptions& options) {
    return compute("zernike_moments", ctx, images, wanted, ZernikeMethod::Kintner, options);
}

Cube zernike_reconstruct(const Context& ctx, const ZernikeMoments& moments, const ZernikeDisk& disk, int max_order) {
    // The highest order K such that every (n, m), n ≤ K, is present.
    std::set<std::pair<int, int>> have;
    for (const ZernikeIndex& z : moments.indices) have.insert({z.n, z.m});
    int complete = -1;
    for (int n = 0;; ++n) {
        bool all = true;
        for (int m = n % 2; m <= n && all; m += 2) all = have.count({n, m}) > 0;
        if (!all) break;
        complete = n;
    }
    if (max_order < 0) max_order = complete;
    if (max_order < 0) throw InvalidInput("zernike_reconstruct: A(0,0) is missing; nothing to reconstruct");
    if (max_order > complete)
        throw InvalidInput("zernike_reconstruct: order " + std::to_string(max_order) + " asked for, but the moments are " +
                           "complete only up to order " + std::to_string(complete));
    if (disk.width < 1 || disk.height < 1 || disk.pixel_count < 1)
        throw InvalidInput("zernike_reconstruct: the target disk is empty; build it with zernike_disk()");
    const std::size_t size = zernike_set_size(max_order);
    std::vector<std::complex<double>> set(size * std::size_t(moments.images));
    for (std::size_t k = 0; k < moments.indices.size(); ++k) {
        const ZernikeIndex z = moments.indices[k];
        if (z.n > max_order) continue;
        for (int i = 0; i < moments.images; ++i) set[std::size_t(i) * size + zernike_set_index(z.n, z.m)] = moments.image(i)[k];
    }
    ctx.log("zernike_reconstruct: " + std::string(ctx.backend_name()) + ", " + std::to_string(disk.width) + "x" +
            std::to_string(disk.height) + ", " + std::to_string(moments.images) + " images, order " +
            std::to_string(max_order));
    return ctx.is_cuda() ? zernike::reconstruct_cuda(ctx, set, moments.images, max_order, disk)
                         : zernike::reconstruct_cpu(ctx, set, moments.images, max_order, disk);
}

Cube zernike_reconstruct(const Context& ctx, const ZernikeMoments& moments, int max_order) {
    return zernike_reconstruct(ctx, moments, moments.disk, max_order);
}

std::vector<double> zernike_reconstruction_error(const Cube& original, const Cube& reconstruction,
                                                 const ZernikeDisk& disk) {
    if (original.width() != disk.width || original.height() != disk.height ||
        reconstruction.width() != disk.width || reconstruction.height() != disk.height ||
        original.bands() != reconstruction.bands())
        throw InvalidInput("zernike_reconstruction_error: the original (" + original.shape().describe() +
                           ") and the reconstruction (" + reconstruction.shape().describe() +
                           ") must both match the disk's " + std::to_string(disk.width) + "x" +
                           std::to_string(disk.height) + " and have as many bands");
    std::vector<double> out;
    for (int b = 0; b < original.bands(); ++b) {
        double diff = 0.0, norm = 0.0;
        for (int y = 0; y < disk.height; ++y)
            for (int x = 0; x < disk.width; ++x) {
                if (!disk.inside(x, y)) continue;
                const double f = original.value(x, y, b), g = reconstruction.value(x, y, b);
                diff += (g - f) * (g - f);
                norm += f * f;
            }
        out.push_back(norm > 0.0 ? std::sqrt(diff / norm) : (diff > 0.0 ? INFINITY : 0.0));
    }
    return out;
}

std::vector<double> zernike_invariants(const ZernikeMoments& moments) {
    std::vector<double> out(moments.values.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::abs(moments.values[i]);
    return out;
}

}  // namespace cubekit

#ifndef CUBEKIT_HAVE_CUDA
namespace cubekit::zernike {
std::vector<std::complex<double>> sums_cuda(const Context&, const Cube&, const ZernikeDisk&, const Request&) {
    throw DeviceError("zernike: this cubekit was built without CUDA");
}
std::vector<std::complex<double>> sums_device(const Context&, const DeviceCube&, const ZernikeDisk&, const Request&) {
    throw DeviceError("zernike: this cubekit was built without CUDA");
}
Cube reconstruct_cuda(const Context&, const std::vector<std::complex<double>>&, int, int, const ZernikeDisk&) {
    throw DeviceError("zernike_reconstruct: this cubekit was built without CUDA");
}
}  // namespace cubekit::zernike
#endif
