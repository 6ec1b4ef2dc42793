#pragma once
/// Zernike moments of every band of a cube (each band is one image; a batch of same-size images
/// is a cube with one band per image), image reconstruction from moments, rotation invariants
/// (spec zernike.md).
///
///     ZernikeMoments z = cubekit::zernike_set(ctx, image, 20);     // every A(n,m), n ≤ 20, m ≥ 0
///     std::complex<double> a = z.at(0, 4, 2);                       // image 0, A(4,2)
///     std::complex<double> b = z.at(0, 4, -2);                      // = conj(A(4,2))
///     Cube rebuilt = cubekit::zernike_reconstruct(ctx, z);          // f64, one band per image
///     cubekit::zernike_set_into(gpu, d_cube, 20, d_out);            // device in, device out (see below)
///
/// Conventions (spec §3.1–3.4): x grows right, y grows down (row 0 on top), θ counter-clockwise
/// from +X towards row 0; A(n,m) = (n+1)/cnt · Σ f · R̃(n,m)(t) · (X − jY)^m over the pixel centres
/// inside the disk (PixelCount normalisation) or (n+1)/(πρ²) · Σ ... (Area). Only m ≥ 0 is stored,
/// in canonical order: n ascending, then m ascending (index ⌊(n+1)²/4⌋ + (m − n mod 2)/2).
///
/// Both backends are deterministic run to run; a batch gives each image exactly the result it
/// gets alone. Throws InvalidInput naming the parameter: m > n, n − m odd, negative orders, an empty
/// cube, a Custom disk with radius ≤ 0 or no pixel inside.
#include <array>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/options.hpp"
#include "cubekit/tiles.hpp"

namespace cubekit {

/// Auto: Direct (stable radial) for one moment, QRecursive for one order (Kintner with Float
/// precision), Kintner for a whole set (spec §3.9).
enum class ZernikeMethod { Auto, Direct, QRecursive, Kintner };
/// Radial evaluation of the Direct method: Stable = Kintner chain m → n (default); Explicit = the
/// seed's factorial sum (Horner), inaccurate above order ~20 in double, ~10 in float (§3.10).
enum class ZernikeRadial { Stable, Explicit };
/// Inscribed: the disk touches the middle of the shorter image edges (default, seed).
/// Circumscribed: the disk passes through the image corners; every pixel is inside.
/// Custom: centre and radius given in pixel units (ZernikeOptions::center and radius).
enum class ZernikeMapping { Inscribed, Circumscribed, Custom };
/// PixelCount: (n+1)/cnt. Area: (n+1)/(πρ²). Default: PixelCount for Inscribed and for a Custom
/// disk inside the image, Area for Circumscribed and for a Custom disk leaving the image (§3.2).
enum class ZernikeNormalization { Default, PixelCount, Area };
/// Float evaluates the radial and angular factors in float; sums are accumulated in double.
enum class ZernikePrecision { Double, Float };

template <>
struct EnumNames<ZernikeMethod> {
    static constexpr EnumName<ZernikeMethod> names[] = {{ZernikeMethod::Auto, "auto"},
                                                        {ZernikeMethod::Direct, "direct"},
                                                        {ZernikeMethod::QRecursive, "qrecursive"},
                                                        {ZernikeMethod::Kintner, "kintner"}};
};
template <>
struct EnumNames<ZernikeRadial> {
    static constexpr EnumName<ZernikeRadial> names[] = {{ZernikeRadial::Stable, "stable"},
                                                        {ZernikeRadial::Explicit, "explicit"}};
};
template <>
struct EnumNames<ZernikeMapping> {
    static constexpr EnumName<ZernikeMapping> names[] = {{ZernikeMapping::Inscribed, "inscribed"},
                                                         {ZernikeMapping::Circumscribed, "circumscribed"},
                                                         {ZernikeMapping::Custom, "custom"}};
};
template <>
struct EnumNames<ZernikeNormalization> {
    static constexpr EnumName<ZernikeNormalization> names[] = {{ZernikeNormalization::Default, "default"},
                                                               {ZernikeNormalization::PixelCount, "pixelcount"},
                                                               {ZernikeNormalization::Area, "area"}};
};
template <>
struct EnumNames<ZernikePrecision> {
    static constexpr EnumName<ZernikePrecision> names[] = {{ZernikePrecision::Double, "f64"},
                                                           {ZernikePrecision::Float, "f32"}};
};
inline std::string_view zernike_method_name(ZernikeMethod m) { return enum_name(m); }
inline std::string_view zernike_mapping_name(ZernikeMapping m) { return enum_name(m); }
inline std::string_view zernike_normalization_name(ZernikeNormalization n) { return enum_name(n); }
inline std::string_view zernike_precision_name(ZernikePrecision p) { return enum_name(p); }

/// Options of the zernike_* functions.
struct ZernikeOptions {
    /// Algorithm (Auto: by what is asked, spec §3.9).
    ZernikeMethod method = ZernikeMethod::Auto;
    ZernikeRadial radial = ZernikeRadial::Stable;  ///< Direct only
    /// Which pixels form the unit disk.
    ZernikeMapping mapping = ZernikeMapping::Inscribed;
    /// Custom only: disk centre {x, y} in pixel units (x = 0 is the first column's centre, y = 0 the first row's).
    std::array<double, 2> center = {0.0, 0.0};
    double radius = 0.0;    ///< Custom only: disk radius in pixels
    /// (n+1)/cnt or (n+1)/(πρ²); Default picks by the mapping.
    ZernikeNormalization normalization = ZernikeNormalization::Default;
    /// Precision of the radial and angular factors.
    ZernikePrecision precision = ZernikePrecision::Double;
    /// Use the 8-fold symmetry of the square when the pixel set allows it (§3.6); results agree
    /// with the plain path to rounding.
    bool symmetry = true;
};

/// The declarations of ZernikeOptions' fields (options.hpp).
template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, ZernikeOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.method, Field{.name = "method", .doc = "auto (kintner for a set, qrecursive for an order, direct for a "
                                                   "moment), direct, qrecursive or kintner"});
    visit(o.radial, Field{.name = "radial", .doc = "direct method: stable (Kintner chain) or explicit (the seed's "
                                                   "factorial sum, inaccurate above order ~20)"});
    visit(o.mapping, Field{.name = "mapping", .doc = "inscribed, circumscribed or custom (center, radius)"});
    visit(o.center, Field{.name = "center",
                          .doc = "custom disk centre CX,CY in pixels (x = 0 is the first column's centre)"});
    visit(o.radius, Field{.name = "radius", .doc = "custom disk radius in pixels", .min = 0});
    visit(o.normalization, Field{.name = "normalization",
                                 .doc = "default (pixelcount for inscribed and a custom disk inside the image, else "
                                        "area), pixelcount (n+1)/cnt, area (n+1)/(pi rho^2)"});
    visit(o.precision, Field{.name = "precision", .doc = "f64 or f32 radial/angular evaluation (sums in double)"});
    visit(o.symmetry, Field{.name = "symmetry", .doc = "use the 8-fold symmetry of a square pixel set",
                            .negation = "do not use the 8-fold symmetry of a square pixel set"});
}

/// One moment's order n and repetition m (0 ≤ m ≤ n, n − m even).
struct ZernikeIndex {
    int n = 0;
    int m = 0;
    friend bool operator==(const ZernikeIndex&, const ZernikeIndex&) = default;
};

/// ⌊(nmax+2)²/4⌋: the moments with m ≥ 0 of a set n ≤ nmax (324 for nmax = 34).
std::size_t zernike_set_size(int nmax);
/// Position of (n, m) in a whole set: ⌊(n+1)²/4⌋ + (m − n mod 2)/2.
std::size_t zernike_set_index(int n, int m);
/// Every (n, m) of a set n ≤ nmax, in canonical order.
std::vector<ZernikeIndex> zernike_set_indices(int nmax);
/// The repetitions m = n mod 2, ..., n of order n.
std::vector<ZernikeIndex> zernike_order_indices(int n);

/// The pixel set and normalisation a mapping gives for a W×H image (resolved options).
struct ZernikeDisk {
    int width = 0;
    int height = 0;
    ZernikeMapping mapping = ZernikeMapping::Inscribed;
    ZernikeNormalization normalization = ZernikeNormalization::PixelCount;  ///< never Default
    double center_x = 0.0, center_y = 0.0;  ///< pixel units
    double radius = 0.0;                    ///< ρ in pixels
    std::int64_t pixel_count = 0;           ///< cnt: pixel centres inside the disk (exact)
    bool symmetric = false;                 ///< the pixel set has the 8 symmetries of the square
    /// Moment (n, m) = (n + 1) · Σ f V* / denominator: cnt (PixelCount) or πρ² (Area).
    double denominator = 0.0;
    /// True when pixel (x, y)'s centre is inside the disk.
    bool inside(int x, int y) const;
    /// (X, Y) of pixel (x, y)'s centre on the unit disk (Y up).
    void unit_coordinates(int x, int y, double& X, double& Y) const;
};

/// Resolves a mapping for W×H. Throws InvalidInput for bad sizes or a Custom disk without pixels.
ZernikeDisk zernike_disk(int width, int height, const ZernikeOptions& options = {});

/// What a zernike_* call computed, without the values: the moments' order in the output, the disk
/// and how the sums ran. The zernike_*_into calls return it; ZernikeMoments adds the values.
struct ZernikeMomentsInfo {
    int width = 0;   ///< of each image
    int height = 0;  ///< of each image
    int images = 0;  ///< bands of the input: one row of the output each
    /// The moments in output order: column k of the output is indices[k].
    std::vector<ZernikeIndex> indices;
    ZernikeDisk disk;
    ZernikeMethod method = ZernikeMethod::Auto;  ///< the method that ran (never Auto)
    ZernikeRadial radial = ZernikeRadial::Stable;
    ZernikePrecision precision = ZernikePrecision::Double;
    bool symmetric = false;                      ///< the 8-fold path ran
    std::vector<std::string> warnings;           ///< e.g. Explicit radial above its accurate range

    std::size_t count() const { return indices.size(); }
    /// Highest n present (−1 when empty).
    int max_order() const;
};

/// Moments of a batch: values[image * count() + k] is moment indices[k] of image `image`.
struct ZernikeMoments : ZernikeMomentsInfo {
    std::vector<std::complex<double>> values;

    const std::complex<double>* image(int i) const { return values.data() + std::size_t(i) * count(); }
    /// A(n, m) of image i; m < 0 gives conj(A(n, −m)). Throws InvalidInput when (n, |m|) is absent.
    std::complex<double> at(int image, int n, int m) const;
};

/// One moment A(n, m) of every band of `images`: any element type, any layout, window or strides,
/// host or device memory (a Cube or DeviceCube converts to its view). The CPU reads host samples
/// where they are; CUDA reads samples on the context's device where they are (any strides) and
/// uploads host samples once. Returns the moments on the host.
///
///     ZernikeMoments a = cubekit::zernike_moment(ctx, cube.view().band_range(40, 1), 4, 2);   // band 40 alone
ZernikeMoments zernike_moment(const Context& ctx, const CubeView& images, int n, int m, const ZernikeOptions& options = {});
/// Every repetition m = n mod 2, ..., n of order n, for every band (inputs as zernike_moment).
ZernikeMoments zernike_order(const Context& ctx, const CubeView& images, int n, const ZernikeOptions& options = {});
/// The whole set n ≤ nmax for every band (inputs as zernike_moment).
ZernikeMoments zernike_set(const Context& ctx, const CubeView& images, int nmax, const ZernikeOptions& options = {});
/// Any list of (n, m) (each valid, no repeats), in the order given (inputs as zernike_moment).
ZernikeMoments zernike_moments(const Context& ctx, const CubeView& images, const std::vector<ZernikeIndex>& wanted,
                               const ZernikeOptions& options = {});

/// The shape of the output of the zernike_*_into calls: count × images × 2 f64, BIP. Element
/// (k, i, 0) is Re A and (k, i, 1) is Im A of moment indices[k] of image i, so a dense BIP
/// output is exactly std::complex<double>[images][count] (NumPy/CuPy complex128 (images, count)).
///
///     DeviceCube d_out(gpu, cubekit::zernike_moments_shape(cube.bands(), int(zernike_set_size(20))));
CubeShape zernike_moments_shape(int images, int count);

/// zernike_moments into a caller's output in the context's memory — device memory for a CUDA
/// context (the device-resident call), host memory for a CPU context — of zernike_moments_shape
/// (any strides; a window of a larger output is fine). Nothing crosses to the host but the small
/// request tables; `images` is read where it is when it is on the context's device (CUDA) or in
/// host memory (CPU), else moved once. Queued on the context's stream: call ctx.synchronize()
/// before reading `out` from the host. Returns the indices (the output's columns), the disk and
/// the method that ran. Throws InvalidInput as zernike_moments, and naming `out` when its shape,
/// type or memory does not fit.
///
///     const auto wanted = cubekit::zernike_set_indices(20);
///     DeviceCube d_out(gpu, cubekit::zernike_moments_shape(d_cube.shape().bands, int(wanted.size())));
///     ZernikeMomentsInfo info = cubekit::zernike_moments_into(gpu, d_cube, wanted, d_out);
ZernikeMomentsInfo zernike_moments_into(const Context& ctx, const CubeView& images, const std::vector<ZernikeIndex>& wanted,
                                        const MutableCubeView& out, const ZernikeOptions& options = {});
/// zernike_set into `out` (count = zernike_set_size(nmax)); see zernike_moments_into.
ZernikeMomentsInfo zernike_set_into(const Context& ctx, const CubeView& images, int nmax, const MutableCubeView& out,
                                    const ZernikeOptions& options = {});
/// zernike_order into `out` (count = n/2 + 1); see zernike_moments_into.
ZernikeMomentsInfo zernike_order_into(const Context& ctx, const CubeView& images, int n, const MutableCubeView& out,
                                      const ZernikeOptions& options = {});
/// zernike_moment into `out` (count = 1); see zernike_moments_into.
ZernikeMomentsInfo zernike_moment_into(const Context& ctx, const CubeView& images, int n, int m,
                                       const MutableCubeView& out, const ZernikeOptions& options = {});

/// A batch of same-size images too large to hold at once (a folder of thousands of files), read a
/// group at a time: read(first, count, dst) fills `dst`, a dense BSQ host view width × height × count
/// of `dtype`, with images first … first + count − 1. Called from several threads at once.
struct ImageStack {
    int width = 0, height = 0, images = 0;
    DType dtype = DType::F64;
    std::function<void(int first, int count, const MutableCubeView& dst)> read;
};
/// The bands of a host view as a stack (the view must outlive it).
ImageStack image_stack(const CubeView& images);

/// What a zernike_*_tiled call did: the moments' order, disk and method (as the _into calls) and the
/// groups (run.tiles groups of at most run.tile_height images; run.tile_width = width × height).
struct ZernikeTiled {
    ZernikeMomentsInfo info;
    TiledRun run;
};

/// The _into calls in groups of images (tiles.hpp), for batches larger than a memory budget: each
/// group is staged, computed and its rows written, on the CPU or streamed through the devices
/// (tiles.devices, lanes). Every image is computed alone, so `out` (host memory,
/// zernike_moments_shape(images, count), any strides) equals the plain call's bit for bit on the same
/// backend (Auto resolves as that call does). The budgets size the groups (host: the staged images;
/// device: the images and ~16 bytes of work per pixel); a forced tile size (tiles.tile_height) is the
/// number of images per group. Throws InvalidInput as the plain call, naming `out` when it does not
/// fit, and when a budget holds less than one image.
///
///     Cube out(count, stack.images, 2, cubekit::DType::F64, cubekit::Layout::BIP);
///     auto t = cubekit::zernike_set_tiled(gpu, stack, 20, out.mutable_view(), {},
///                                         {.device_memory_limit = 1 << 30, .devices = {0, 1}});
ZernikeTiled zernike_set_tiled(const Context& ctx, const ImageStack& images, int nmax, const MutableCubeView& out,
                               const ZernikeOptions& options = {}, const TileOptions& tiles = {});
ZernikeTiled zernike_order_tiled(const Context& ctx, const ImageStack& images, int n, const MutableCubeView& out,
                                 const ZernikeOptions& options = {}, const TileOptions& tiles = {});
ZernikeTiled zernike_moment_tiled(const Context& ctx, const ImageStack& images, int n, int m, const MutableCubeView& out,
                                  const ZernikeOptions& options = {}, const TileOptions& tiles = {});
ZernikeTiled zernike_moments_tiled(const Context& ctx, const ImageStack& images, const std::vector<ZernikeIndex>& wanted,
                                   const MutableCubeView& out, const ZernikeOptions& options = {},
                                   const TileOptions& tiles = {});

/// f̂ = Σ_{n ≤ K} [A(n,0) R̃(n,0) + 2 Σ_{m>0} Re(A(n,m) R̃(n,m) (X + jY)^m)] on the pixel centres of
/// `disk` (0 outside), K = max_order (−1: the highest complete order present). Every (n, m) with
/// n ≤ K must be present. Returns f64, disk.width × disk.height × moments.images, BSQ.
Cube zernike_reconstruct(const Context& ctx, const ZernikeMoments& moments, const ZernikeDisk& disk, int max_order = -1);
/// The same on the moments' own disk.
Cube zernike_reconstruct(const Context& ctx, const ZernikeMoments& moments, int max_order = -1);
/// zernike_reconstruct into a caller's disk.width × disk.height × moments.images f64 output in the
/// context's memory (device for CUDA, host for the CPU), any strides; every sample is written (0
/// outside the disk). Queued on the context's stream. Throws InvalidInput as zernike_reconstruct,
/// and naming `out` when it does not fit.
///
///     DeviceCube d_img(gpu, {z.disk.width, z.disk.height, z.images, cubekit::DType::F64, cubekit::Layout::BSQ});
///     cubekit::zernike_reconstruct_into(gpu, z, z.disk, d_img);
void zernike_reconstruct_into(const Context& ctx, const ZernikeMoments& moments, const ZernikeDisk& disk,
                              const MutableCubeView& out, int max_order = -1);

/// ‖f̂ − f‖₂ / ‖f‖₂ over the pixels inside `disk`, per band (0 when both are 0 there, infinity
/// when only f is). Both views in host memory, any type, layout or strides.
///
///     std::vector<double> e = cubekit::zernike_reconstruction_error(image, cubekit::zernike_reconstruct(ctx, z), z.disk);
std::vector<double> zernike_reconstruction_error(const CubeView& original, const CubeView& reconstruction,
                                                 const ZernikeDisk& disk);

/// Rotation invariants |A(n, m)|, same layout as ZernikeMoments::values.
std::vector<double> zernike_invariants(const ZernikeMoments& moments);

}  // namespace cubekit
