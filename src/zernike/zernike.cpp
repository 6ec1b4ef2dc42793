// Zernike moments front door: index arithmetic, validation, the method rule of spec zernike.md
// §3.9, backend dispatch, normalisation; invariants. Reconstruction is in reconstruct.cpp.
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "core/outputs.hpp"
#include "cubekit/error.hpp"
#include "cubekit/zernike.hpp"
#include "zernike/zernike_internal.hpp"

namespace cubekit {

namespace {

// Orders above this would need coefficient tables of ⌊(N+2)²/4⌋ entries beyond ~100 MB; the
// stable recurrences stay accurate far below it (spec §3.10).
constexpr int kOrderLimit = 4096;

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

void check_set_order(const char* function, int nmax) {
    if (nmax < 0)
        throw InvalidInput(std::string(function) + ": maximum order = " + std::to_string(nmax) + "; expected >= 0");
    check_index(function, {nmax, nmax % 2});
}

// Throws InvalidInput naming the first moment (in request order) asked for twice. Sorting the
// set indices finds whether there is one without a node allocation per moment (this runs on every
// call, the device-resident ones included).
void check_no_repeats(const char* function, const std::vector<ZernikeIndex>& wanted) {
    std::vector<std::size_t> keys;
    keys.reserve(wanted.size());
    for (const ZernikeIndex& z : wanted) keys.push_back(zernike_set_index(z.n, z.m));
    std::sort(keys.begin(), keys.end());
    if (std::adjacent_find(keys.begin(), keys.end()) == keys.end()) return;
    std::set<std::pair<int, int>> seen;
    for (const ZernikeIndex& z : wanted)
        if (!seen.insert({z.n, z.m}).second)
            throw InvalidInput(std::string(function) + ": " + moment_name(z) + " is requested twice");
}

// A request after validation: what the output holds (info) and what the backends run (request).
struct Prepared {
    ZernikeMomentsInfo info;
    zernike::Request request;
};

// The request for `images` (width × height × bands, the bands the images), checked.
Prepared prepare(const char* function, const CubeShape& images, std::vector<ZernikeIndex> wanted,
                 ZernikeMethod auto_choice, const ZernikeOptions& options) {
    const std::string f(function);
    check_fields(options, function);  // the declared ranges and enum values (options.hpp)
    if (images.width < 1 || images.height < 1 || images.bands < 1)
        throw InvalidInput(f + ": the image is " + std::to_string(images.width) + "x" + std::to_string(images.height) +
                           "x" + std::to_string(images.bands) + "; width, height and bands must be at least 1");
    if (wanted.empty()) throw InvalidInput(f + ": no moment requested");
    for (const ZernikeIndex& z : wanted) check_index(function, z);
    check_no_repeats(function, wanted);
    Prepared p;
    ZernikeMomentsInfo& out = p.info;
    out.disk = zernike_disk(images.width, images.height, options);
    out.width = images.width;
    out.height = images.height;
    out.images = images.bands;
    out.indices = std::move(wanted);

    zernike::Request& request = p.request;
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
    return p;
}

void check_moments_output(const char* function, const Context& ctx, const ZernikeMomentsInfo& info,
                          const MutableCubeView& out) {
    const std::string who = std::string(function) + ": out is";
    detail::check_output_memory(ctx, out, who);
    detail::check_output_shape(out, int(info.count()), info.images, 2, DType::F64, who);
}

// out[k, image] = Σ · (n + 1) / denominator, the order of operations the CUDA finalise follows.
void write_scaled(const std::vector<std::complex<double>>& sums, const ZernikeMomentsInfo& info,
                  const MutableCubeView& out) {
    const StridedView<double> o = out.typed<double>();
    const std::size_t count = info.count();
    for (int i = 0; i < info.images; ++i)
        for (std::size_t k = 0; k < count; ++k) {
            const std::complex<double> s = sums[std::size_t(i) * count + k];
            const double factor = double(info.indices[k].n + 1);
            o(int(k), i, 0) = s.real() * factor / info.disk.denominator;
            o(int(k), i, 1) = s.imag() * factor / info.disk.denominator;
        }
}

// Runs a prepared request into `out` (in the context's memory, shape checked). CUDA reads device
// samples on its device where they are, any strides, and uploads anything else once (no reorder
// of a dense host cube); the CPU reads host samples where they are.
void run(const char* function, const Context& ctx, const CubeView& images, const Prepared& p,
         const MutableCubeView& out) {
    ctx.log(std::string(function) + ": " + std::string(ctx.backend_name()) + ", " + images.describe() + ", " +
            std::to_string(p.info.count()) + " moments up to order " + std::to_string(p.request.max_order()) + ", " +
            std::string(zernike_method_name(p.request.method)) + (p.request.symmetric ? ", 8-fold symmetric" : "") +
            ", " + std::string(zernike_precision_name(p.request.precision)));
    if (ctx.is_cuda()) {
        const bool in_place = images.on_device() && images.device() == ctx.device();
        std::optional<CubeInLayout> moved;
        if (!in_place) moved.emplace(ctx, images, images.dense_layout().value_or(Layout::BSQ), Memory::Device);
        zernike::moments_cuda(ctx, in_place ? images : moved->view(), p.info.disk, p.request, out);
        if (moved) ctx.synchronize();  // the moved copy is freed stream-ordered; finish before it goes
        return;
    }
    std::optional<CubeInLayout> host;  // device samples come down once (a CUDA build's copy)
    if (images.on_device()) host.emplace(ctx, images, Layout::BSQ, Memory::Host);
    write_scaled(zernike::sums_cpu(ctx, host ? host->view() : images, p.info.disk, p.request), p.info, out);
}

ZernikeMomentsInfo compute_into(const char* function, const Context& ctx, const CubeView& images,
                                std::vector<ZernikeIndex> wanted, ZernikeMethod auto_choice, const MutableCubeView& out,
                                const ZernikeOptions& options) {
    Prepared p = prepare(function, shape_of(images), std::move(wanted), auto_choice, options);
    check_moments_output(function, ctx, p.info, out);
    run(function, ctx, images, p, out);
    return std::move(p.info);
}

// The plain calls: the _into path into a host array (CPU) or a device output brought down once.
ZernikeMoments compute(const char* function, const Context& ctx, const CubeView& images,
                       std::vector<ZernikeIndex> wanted, ZernikeMethod auto_choice, const ZernikeOptions& options) {
    Prepared p = prepare(function, shape_of(images), std::move(wanted), auto_choice, options);
    ZernikeMoments out;
    const CubeShape shape = zernike_moments_shape(p.info.images, int(p.info.count()));
    out.values.resize(shape.num_pixels());
    const MutableCubeView host = MutableCubeView::host(out.values.data(), shape.width, shape.height, shape.bands,
                                                       shape.dtype, dense_strides(shape.width, shape.height,
                                                                                  shape.bands, shape.layout));
    if (ctx.is_cuda()) {
        DeviceCube d_out(ctx, shape);
        run(function, ctx, images, p, d_out);
        copy_cube(ctx, d_out, host);
    } else {
        run(function, ctx, images, p, host);
    }
    static_cast<ZernikeMomentsInfo&>(out) = std::move(p.info);
    return out;
}

}  // namespace

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

int ZernikeMomentsInfo::max_order() const {
    int n = -1;
    for (const ZernikeIndex& z : indices) n = std::max(n, z.n);
    return n;
}

CubeShape zernike_moments_shape(int images, int count) { return {count, images, 2, DType::F64, Layout::BIP}; }

ZernikeMoments zernike_moment(const Context& ctx, const CubeView& images, int n, int m, const ZernikeOptions& options) {
    return compute("zernike_moment", ctx, images, {{n, m}}, ZernikeMethod::Direct, options);
}

ZernikeMoments zernike_order(const Context& ctx, const CubeView& images, int n, const ZernikeOptions& options) {
    check_index("zernike_order", {n, n % 2 == 0 || n < 0 ? 0 : 1});
    return compute("zernike_order", ctx, images, zernike_order_indices(n), ZernikeMethod::QRecursive, options);
}

ZernikeMoments zernike_set(const Context& ctx, const CubeView& images, int nmax, const ZernikeOptions& options) {
    check_set_order("zernike_set", nmax);
    return compute("zernike_set", ctx, images, zernike_set_indices(nmax), ZernikeMethod::Kintner, options);
}

ZernikeMoments zernike_moments(const Context& ctx, const CubeView& images, const std::vector<ZernikeIndex>& wanted,
                               const ZernikeOptions& options) {
    return compute("zernike_moments", ctx, images, wanted, ZernikeMethod::Kintner, options);
}

ZernikeMomentsInfo zernike_moments_into(const Context& ctx, const CubeView& images, const std::vector<ZernikeIndex>& wanted,
                                        const MutableCubeView& out, const ZernikeOptions& options) {
    return compute_into("zernike_moments_into", ctx, images, wanted, ZernikeMethod::Kintner, out, options);
}

ZernikeMomentsInfo zernike_set_into(const Context& ctx, const CubeView& images, int nmax, const MutableCubeView& out,
                                    const ZernikeOptions& options) {
    check_set_order("zernike_set_into", nmax);
    return compute_into("zernike_set_into", ctx, images, zernike_set_indices(nmax), ZernikeMethod::Kintner, out, options);
}

ZernikeMomentsInfo zernike_order_into(const Context& ctx, const CubeView& images, int n, const MutableCubeView& out,
                                      const ZernikeOptions& options) {
    check_index("zernike_order_into", {n, n % 2 == 0 || n < 0 ? 0 : 1});
    return compute_into("zernike_order_into", ctx, images, zernike_order_indices(n), ZernikeMethod::QRecursive, out,
                        options);
}

ZernikeMomentsInfo zernike_moment_into(const Context& ctx, const CubeView& images, int n, int m,
                                       const MutableCubeView& out, const ZernikeOptions& options) {
    return compute_into("zernike_moment_into", ctx, images, {{n, m}}, ZernikeMethod::Direct, out, options);
}

namespace detail {

ZernikeMomentsInfo zernike_plan_info(const char* function, const CubeShape& images, const std::vector<ZernikeIndex>& wanted,
                                     ZernikeMethod auto_choice, const ZernikeOptions& options) {
    return prepare(function, images, wanted, auto_choice, options).info;
}

ZernikeMomentsInfo zernike_into_with(const char* function, const Context& ctx, const CubeView& images,
                                     const std::vector<ZernikeIndex>& wanted, ZernikeMethod auto_choice,
                                     const MutableCubeView& out, const ZernikeOptions& options) {
    return compute_into(function, ctx, images, wanted, auto_choice, out, options);
}

}  // namespace detail

ZernikeTiled zernike_set_tiled(const Context& ctx, const ImageStack& images, int nmax, const MutableCubeView& out,
                               const ZernikeOptions& options, const TileOptions& tiles) {
    check_set_order("zernike_set_tiled", nmax);
    return detail::zernike_in_groups("zernike_set_tiled", ctx, images, zernike_set_indices(nmax), ZernikeMethod::Kintner,
                                     out, options, tiles);
}

ZernikeTiled zernike_order_tiled(const Context& ctx, const ImageStack& images, int n, const MutableCubeView& out,
                                 const ZernikeOptions& options, const TileOptions& tiles) {
    check_index("zernike_order_tiled", {n, n % 2 == 0 || n < 0 ? 0 : 1});
    return detail::zernike_in_groups("zernike_order_tiled", ctx, images, zernike_order_indices(n),
                                     ZernikeMethod::QRecursive, out, options, tiles);
}

ZernikeTiled zernike_moment_tiled(const Context& ctx, const ImageStack& images, int n, int m, const MutableCubeView& out,
                                  const ZernikeOptions& options, const TileOptions& tiles) {
    return detail::zernike_in_groups("zernike_moment_tiled", ctx, images, {{n, m}}, ZernikeMethod::Direct, out, options,
                                     tiles);
}

ZernikeTiled zernike_moments_tiled(const Context& ctx, const ImageStack& images, const std::vector<ZernikeIndex>& wanted,
                                   const MutableCubeView& out, const ZernikeOptions& options, const TileOptions& tiles) {
    return detail::zernike_in_groups("zernike_moments_tiled", ctx, images, wanted, ZernikeMethod::Kintner, out, options,
                                     tiles);
}

std::vector<double> zernike_invariants(const ZernikeMoments& moments) {
    std::vector<double> out(moments.values.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::abs(moments.values[i]);
    return out;
}

}  // namespace cubekit

#ifndef CUBEKIT_HAVE_CUDA
namespace cubekit::zernike {
// CPU-only build: a CUDA context cannot exist, so these are unreachable through the public API.
void moments_cuda(const Context&, const CubeView&, const ZernikeDisk&, const Request&, const MutableCubeView&) {
    throw DeviceError("zernike: this cubekit was built without CUDA");
}
void reconstruct_cuda(const Context&, const std::vector<std::complex<double>>&, int, int, const ZernikeDisk&,
                      const MutableCubeView&) {
    throw DeviceError("zernike_reconstruct: this cubekit was built without CUDA");
}
}  // namespace cubekit::zernike
#endif
