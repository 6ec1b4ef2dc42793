// k-means front door (spec kmeans.md): names, validation, the per-run plan and the host steps
// both backends share, and the dispatch to the CPU reference or the CUDA implementation.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "cubekit/error.hpp"
#include "kmeans/kmeans_internal.hpp"

namespace cubekit {

void check_kmeans_arguments(const CubeShape& shape, const KmeansOptions& o) {
    const auto n = std::int64_t(shape.num_pixels());
    if (shape.width <= 0 || shape.height <= 0 || shape.bands <= 0)
        throw InvalidInput("kmeans: the image is " + std::to_string(shape.width) + "x" + std::to_string(shape.height) +
                           "x" + std::to_string(shape.bands) + "; width, height and bands must be at least 1");
    check_fields(o, "kmeans");
    if (o.k > n)
        throw InvalidInput("kmeans: k = " + std::to_string(o.k) + " exceeds the " + std::to_string(n) +
                           " pixels of the image (" + std::to_string(shape.width) + "x" + std::to_string(shape.height) + ")");
    if (!o.mask.empty() && std::int64_t(o.mask.size()) != n)
        throw InvalidInput("kmeans: mask has " + std::to_string(o.mask.size()) + " values; the image has " +
                           std::to_string(n) + " pixels (" + std::to_string(shape.width) + "x" +
                           std::to_string(shape.height) + ")");
    if (o.init == KmeansInit::Explicit) {
        const std::size_t want = std::size_t(o.k) * std::size_t(shape.bands);
        if (o.init_centroids.size() != want)
            throw InvalidInput("kmeans: explicit centroids have " + std::to_string(o.init_centroids.size()) +
                               " values; expected k × bands = " + std::to_string(o.k) + " × " +
                               std::to_string(shape.bands) + " = " + std::to_string(want));
        for (double v : o.init_centroids)
            if (!std::isfinite(v)) throw InvalidInput("kmeans: explicit centroids contain a non-finite value");
    }
    if (o.legacy && (shape.dtype != DType::U8 || shape.bands != 3))
        throw InvalidInput("kmeans: legacy = true (the seed's mode) needs 8-bit RGB input (its 24-bit BMP); the image is " +
                           std::string(dtype_name(shape.dtype)) + " with " + std::to_string(shape.bands) + " bands");
}

std::string_view kmeans_implementation(const Context& ctx, const CubeShape& shape, const KmeansOptions& options) {
    if (!ctx.is_cuda()) return "cpu";
    return detail::kmeans_cuda_fits_shared(options.k, shape.bands, shape.dtype) ? "cuda-shared" : "cuda-tiled";
}

namespace {

// A `_into` output must live where the context computes (device memory on its device for CUDA,
// host memory for the CPU) and have the expected shape and type.
void check_output(const Context& ctx, const MutableCubeView& out, std::string_view name, int width, int height,
                  int bands, DType dtype) {
    if (out.on_device() != ctx.is_cuda())
        throw InvalidInput("kmeans_into: " + std::string(name) + " is in " + (out.on_device() ? "device" : "host") +
                           " memory but the context runs on the " + std::string(ctx.backend_name()) +
                           (ctx.is_cuda() ? " (device outputs only)" : " (host outputs only)"));
    if (out.on_device() && out.device() != ctx.device())
        throw InvalidInput("kmeans_into: " + std::string(name) + " is on device " + std::to_string(out.device()) +
                           ", the context on device " + std::to_string(ctx.device()));
    if (out.width() != width || out.height() != height || out.bands() != bands || out.dtype() != dtype)
        throw InvalidInput("kmeans_into: " + std::string(name) + " is " + out.describe() + "; expected " +
                           std::to_string(width) + "x" + std::to_string(height) + "x" + std::to_string(bands) + " " +
                           std::string(dtype_name(dtype)));
}

KmeansResult empty_result(const CubeView& image, const KmeansOptions& options) {
    KmeansResult result;
    result.k = options.k;
    result.bands = image.bands();
    result.width = image.width();
    result.height = image.height();
    result.dtype = image.dtype();
    result.centroid_type = image.dtype() == DType::F64 ? DType::F64 : DType::F32;
    return result;
}

}  // namespace

KmeansResult kmeans_into(const Context& ctx, const CubeView& image, const MutableCubeView& labels,
                         const KmeansOptions& options, const MutableCubeView& quantized) {
    const CubeShape shape = shape_of(image);
    check_kmeans_arguments(shape, options);
    check_output(ctx, labels, "labels", shape.width, shape.height, 1, DType::I32);
    if (!quantized.empty()) check_output(ctx, quantized, "quantized", shape.width, shape.height, shape.bands, shape.dtype);
    ctx.log("kmeans: " + std::string(kmeans_implementation(ctx, shape, options)) + ", k = " +
            std::to_string(options.k) + ", " + image.describe());
    KmeansResult result = empty_result(image, options);
    if (ctx.is_cuda()) {
        // The kernels read dense BIP (each spectrum contiguous) on the context's device where it
        // is; any other view is uploaded or reordered there once.
        const CubeInLayout bip(ctx, image, Layout::BIP, Memory::Device);
        detail::kmeans_cuda(ctx, bip.view(), labels, quantized, options, result);
        return result;
    }
    // The CPU reference reads any host view through its strides; device input comes down once.
    std::optional<CubeInLayout> host;
    if (image.on_device()) host.emplace(ctx, image, Layout::BIP, Memory::Host);
    detail::kmeans_cpu(ctx, host ? host->view() : image, labels, quantized, options, result);
    return result;
}

KmeansResult kmeans(const Context& ctx, const CubeView& image, const KmeansOptions& options) {
    check_kmeans_arguments(shape_of(image), options);
    const int W = image.width(), H = image.height();
    std::vector<std::int32_t> labels(std::size_t(W) * std::size_t(H));
    Cube quantized = options.paint ? Cube(W, H, image.bands(), image.dtype(), Layout::BIP) : Cube();
    const auto h_labels = MutableCubeView::host(labels.data(), W, H, 1, DType::I32, dense_strides(W, H, 1, Layout::BSQ));
    KmeansResult result;
    if (!ctx.is_cuda()) {
        result = kmeans_into(ctx, image, h_labels, options, options.paint ? quantized.mutable_view() : MutableCubeView());
    } else {
        DeviceCube d_labels(ctx, CubeShape{W, H, 1, DType::I32, Layout::BSQ});
        DeviceCube d_quantized = options.paint ? DeviceCube(ctx, quantized.shape()) : DeviceCube();
        result = kmeans_into(ctx, image, d_labels, options, options.paint ? d_quantized.mutable_view() : MutableCubeView());
        copy_cube(ctx, d_labels.view(), h_labels);
        if (options.paint) copy_cube(ctx, d_quantized.view(), quantized.mutable_view());
    }
    result.labels = std::move(labels);
    result.quantized = std::move(quantized);
    return result;
}

KmeansResult apply_palette(const Context& ctx, const CubeView& image, const std::vector<double>& palette,
                           const std::vector<std::uint8_t>& mask) {
    const auto m = std::size_t(std::max(image.bands(), 1));
    if (palette.empty() || palette.size() % m != 0)
        throw InvalidInput("apply_palette: the palette has " + std::to_string(palette.size()) +
                           " values; expected a positive multiple of the " + std::to_string(m) + " bands");
    KmeansOptions o;
    o.k = int(palette.size() / m);
    o.init = KmeansInit::Explicit;
    o.init_centroids = palette;
    o.max_iter = 0;
    o.mask = mask;
    return kmeans(ctx, image, o);
}

namespace detail {
namespace {

/// ⌈log2 v⌉ for v > 0.
int ceil_log2(double v) {
    int E = 0;
    const double f = std::frexp(v, &E);  // v = f · 2^E, f ∈ [0.5, 1)
    return f == 0.5 ? E - 1 : E;
}

}  // namespace

KmeansPlan make_plan(const KmeansOptions& options, int m, std::int64_t pixels, bool float_input,
                     const KmeansStats& stats) {
    if (stats.valid == 0)
        throw InvalidInput("kmeans: no valid pixel (the mask excludes every pixel or every pixel has a NaN band)");
    if (options.k > stats.valid)
        throw InvalidInput("kmeans: k = " + std::to_string(options.k) + " exceeds the " +
                           std::to_string(stats.valid) + " valid pixels");
    KmeansPlan plan;
    plan.k = options.k;
    plan.m = m;
    plan.pixels = pixels;
    plan.valid = stats.valid;
    plan.float_input = float_input;
    plan.lo = stats.lo;
    plan.hi = stats.hi;
    double max_abs = 0;
    for (int b = 0; b < m; ++b) max_abs = std::max({max_abs, std::fabs(stats.lo[b]), std::fabs(stats.hi[b])});
    const double data_max = max_abs;
    if (options.init == KmeansInit::Explicit)
        for (double v : options.init_centroids) max_abs = std::max(max_abs, std::fabs(v));
    const int log_n = ceil_log2(double(stats.valid));
    // Sums: |q| ≤ 2^(62 − ⌈log2 N⌉), so N of them fit in int64 (§3.5).
    if (float_input && data_max > 0) plan.e = 62 - ceil_log2(data_max) - log_n;
    // Exact distances: N · m · (2 · max|x| · 2^e_d)² ≤ 2^126 fits in int128.
    const int bits = max_abs > 0 ? ceil_log2(max_abs) : 0;
    plan.e_d = (126 - log_n - ceil_log2(double(m))) / 2 - bits - 1;
    // Keep both powers of two normal doubles (data of extreme magnitude lose digits, not exactness).
    plan.e = std::clamp(plan.e, -1000, 1000);
    plan.e_d = std::clamp(plan.e_d, -1000, 1000);
    plan.scale = std::ldexp(1.0, plan.e);
    plan.scale_d = std::ldexp(1.0, plan.e_d);
    return plan;
}

void set_tolerance(KmeansPlan& plan, double tol, const std::vector<std::int64_t>& sum_q,
                   const std::vector<km::i128>& sum_q2) {
    const auto n = km::i128(plan.valid);
    double mean_var = 0;
    for (int b = 0; b < plan.m; ++b) {
        // N²·Var_b·2^(2e) = N·Σq² − (Σq)², an exact integer; converted once.
        const km::i128 num = n * sum_q2[b] - km::i128(sum_q[b]) * km::i128(sum_q[b]);
        mean_var += std::ldexp(double(num) / (double(plan.valid) * double(plan.valid)), -2 * plan.e);
    }
    plan.tol_abs = tol * (mean_var / plan.m);
}

bool sampling_active(const KmeansOptions& options, std::int64_t valid) {
    return options.init_sample > 0 && valid > options.init_sample;
}

int kmeanspp_trials(int k) { return 2 + int(std::floor(std::log(double(k)))); }

std::vector<std::int64_t> floyd_positions(std::uint64_t seed, std::int64_t n, int k) {
    std::vector<std::int64_t> out;
    out.reserve(std::size_t(k));
    std::unordered_set<std::int64_t> chosen;
    std::uint64_t draw = 0;
    for (std::int64_t j = n - k; j < n; ++j, ++draw) {
        auto t = std::int64_t(km::scaled_index(km::draw53(seed, 3, draw), std::uint64_t(j + 1)));
        if (chosen.count(t)) t = j;
        chosen.insert(t);
        out.push_back(t);
    }
    return out;
}

std::vector<double> box_diagonal(const KmeansPlan& plan) {
    std::vector<double> c(std::size_t(plan.k) * plan.m);
    for (int j = 0; j < plan.k; ++j)
        for (int b = 0; b < plan.m; ++b) {
            const double lo = plan.lo[b], hi = plan.hi[b];
            c[std::size_t(j) * plan.m + b] = plan.k == 1 ? (lo + hi) / 2 : lo + j * (hi - lo) / (plan.k - 1);
        }
    return c;
}

std::vector<FarPixel> farthest(std::vector<FarPixel> candidates, std::size_t wanted) {
    const auto before = [](const FarPixel& a, const FarPixel& b) {
        return a.distance != b.distance ? a.distance > b.distance : a.index < b.index;
    };
    wanted = std::min(wanted, candidates.size());
    std::partial_sort(candidates.begin(), candidates.begin() + std::ptrdiff_t(wanted), candidates.end(), before);
    candidates.resize(wanted);
    while (!candidates.empty() && !(candidates.back().distance > 0)) candidates.pop_back();
    return candidates;
}

std::vector<int> count_order(const std::vector<std::uint64_t>& counts) {
    std::vector<int> order(counts.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return counts[a] > counts[b]; });
    return order;
}

double palette_value(double centroid, DType dtype) {
    if (dtype == DType::F32 || dtype == DType::F64 || std::isnan(centroid)) return centroid;
    double lo = 0, hi = 0;
    switch (dtype) {
        case DType::U8: hi = 255; break;
        case DType::U16: hi = 65535; break;
        case DType::I16: lo = -32768; hi = 32767; break;
        case DType::U32: hi = 4294967295.0; break;
        case DType::I32: lo = -2147483648.0; hi = 2147483647.0; break;
        default: break;
    }
    // std::round: half away from zero; "+ 0.0" turns −0 (a centroid just below zero) into +0,
    // the value the integer image holds.
    return std::clamp(std::round(centroid), lo, hi) + 0.0;
}

std::vector<int> sort_result(KmeansResult& result, const std::vector<double>& centroids,
                             const std::vector<std::uint64_t>& counts, DType dtype, bool legacy) {
    const int k = int(counts.size());
    const int m = int(centroids.size() / std::size_t(std::max(k, 1)));
    std::vector<int> order(static_cast<std::size_t>(k));
    if (legacy) std::iota(order.begin(), order.end(), 0);  // the seed does not sort
    else order = count_order(counts);
    std::vector<int> new_label(static_cast<std::size_t>(k));
    result.centroids.assign(centroids.size(), 0);
    result.palette.assign(centroids.size(), 0);
    result.counts.assign(std::size_t(k), 0);
    result.k_effective = 0;
    for (int r = 0; r < k; ++r) {
        const int j = order[std::size_t(r)];
        new_label[std::size_t(j)] = r;
        result.counts[std::size_t(r)] = counts[std::size_t(j)];
        if (counts[std::size_t(j)] > 0) ++result.k_effective;
        for (int b = 0; b < m; ++b) {
            double c = centroids[std::size_t(j) * m + b];
            if (std::isinf(c)) c = std::numeric_limits<double>::quiet_NaN();  // never given a centroid
            result.centroids[std::size_t(r) * m + b] = c;
            result.palette[std::size_t(r) * m + b] = std::isnan(c) ? (dtype == DType::F32 || dtype == DType::F64 ? c : 0)
                                                                   : palette_value(c, dtype);
        }
    }
    if (result.k_effective < k)
        result.warnings.push_back("kmeans: only " + std::to_string(result.k_effective) + " of k = " +
                                  std::to_string(k) + " clusters are non-empty (the data hold fewer distinct " +
                                  "vectors than k, or the empty-cluster policy kept them empty)");
    return new_label;
}

#ifndef CUBEKIT_HAVE_CUDA
// CPU-only build: a CUDA context cannot exist, so these are unreachable through the public API.
void kmeans_cuda(const Context&, const CubeView&, const MutableCubeView&, const MutableCubeView&, const KmeansOptions&,
                 KmeansResult&) {
    throw DeviceError("kmeans: this cubekit was built without CUDA");
}
KmeansPlan prepare_kmeans_cuda(const Context&, const CubeView&, const KmeansOptions&, DeviceValidSet&) {
    throw DeviceError("kmeans: this cubekit was built without CUDA");
}
bool kmeans_cuda_fits_shared(int, int, DType) { return false; }
std::unique_ptr<KmeansTile> kmeans_tile_cuda(const Context&, const CubeView&, int, int, int, const KmeansOptions&,
                                             const KmeansPlan&) {
    throw DeviceError("kmeans: this cubekit was built without CUDA");
}
std::vector<double> kmeanspp_sample_init_cuda(const Context&, const CubeView&, const KmeansPlan&, std::uint64_t) {
    throw DeviceError("kmeans: this cubekit was built without CUDA");
}
#endif

}  // namespace detail
}  // namespace cubekit
