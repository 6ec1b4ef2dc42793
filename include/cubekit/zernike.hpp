#pragma once
/// Zernike moments of every band of a cube (each band is one image; a batch of same-size images
/// is a cube with one band per image), image reconstruction from moments, rotation invariants
/// (spec zernike.md).
///
///     ZernikeMoments z = cubekit::zernike_set(ctx, image, 20);     // every A(n,m), n ≤ 20, m ≥ 0
///     std::complex<double> a = z.at(0, 4, 2);                       // image 0, A(4,2)
///     std::complex<double> b = z.at(0, 4, -2);                      // = conj(A(4,2))
///     Cube rebuilt = cubekit::zernike_reconstruct(ctx, z);          // f64, one band per image
///
/// Conventions (spec §3.1–3.4): x grows right, y grows down (row 0 on top), θ counter-clockwise
/// from +X towards row 0; A(n,m) = (n+1)/cnt · Σ f · R̃(n,m)(t) · (X − jY)^m over the pixel centres
/// inside the disk (PixelCount normalisation) or (n+1)/(πρ²) · Σ ... (Area). Only m ≥ 0 is stored,
/// in canonical order: n ascending, then m ascending (index ⌊(n+1)²/4⌋ + (m − n mod 2)/2).
///
/// Both backends are deterministic run to run; a batch gives each image exactly the result it
/// gets alone. Throws InvalidInput naming the parameter: m > n, n − m odd, negative orders, an empty
/// cube, a Custom disk with radius ≤ 0 or no pixel inside.
#include <complex>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"

namespace cubekit {

/// Auto: Direct (stable radial) for one moment, QRecursive for one order (Kintner with Float
/// precision), Kintner for a whole set (spec §3.9).
enum class ZernikeMethod { Auto, Direct, QRecursive, Kintner };
/// Radial evaluation of the Direct method: Stable = Kintner chain m → n (default); Explicit = the
/// seed's factorial sum (Horner), inaccurate above order ~20 in double, ~10 in float (§3.10).
enum class ZernikeRadial { Stable, Explicit };
/// Inscribed: the disk touches the middle of the shorter image edges (default, seed).
/// Circumscribed: the disk passes through the image corners; every pixel is inside.
/// Custom: centre and radius given in pixel units (ZernikeOptions::center_x/center_y/radius).
enum class ZernikeMapping { Inscribed, Circumscribed, Custom };
/// PixelCount: (n+1)/cnt. Area: (n+1)/(πρ²). Default: PixelCount for Inscribed and for a Custom
/// disk inside the image, Area for Circumscribed and for a Custom disk leaving the image (§3.2).
enum class ZernikeNormalization { Default, PixelCount, Area };
/// Float evaluates the radial and angular factors in float; sums are accumulated in double.
enum class ZernikePrecision { Double, Float };

std::string_view zernike_method_name(ZernikeMethod m);                ///< "auto", "direct", "qrecursive", "kintner"
std::string_view zernike_mapping_name(ZernikeMapping m);              ///< "inscribed", "circumscribed", "custom"
std::string_view zernike_normalization_name(ZernikeNormalization n);  ///< "default", "pixelcount", "area"
std::string_view zernike_precision_name(ZernikePrecision p);          ///< "f64", "f32"
/// Parsers of those names; throw InvalidInput naming `what` and listing the accepted names.
ZernikeMethod parse_zernike_method(std::string_view name, std::string_view what = "method");
ZernikeMapping parse_zernike_mapping(std::string_view name, std::string_view what = "mapping");
ZernikeNormalization parse_zernike_normalization(std::string_view name, std::string_view what = "normalization");
ZernikePrecision parse_zernike_precision(std::string_view name, std::string_view what = "precision");

struct ZernikeOptions {
    ZernikeMethod method = ZernikeMethod::Auto;
    ZernikeRadial radial = ZernikeRadial::Stable;  ///< Direct only
    ZernikeMapping mapping = ZernikeMapping::Inscribed;
    double center_x = 0.0;  ///< Custom only: disk centre, column units (x = 0 is the first pixel centre)
    double center_y = 0.0;  ///< Custom only: disk centre, row units
    double radius = 0.0;    ///< Custom only: disk radius in pixels
    ZernikeNormalization normalization = ZernikeNormalization::Default;
    ZernikePrecision precision = ZernikePrecision::Double;
    /// Use the 8-fold symmetry of the square when the pixel set allows it (§3.6); results agree
    /// with the plain path to rounding.
    bool symmetry = true;
};

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

/// Moments of a batch: values[image * count() + k] is moment indices[k] of image `image`.
struct ZernikeMoments {
    int width = 0;
    int height = 0;
    int images = 0;
    std::vector<ZernikeIndex> indices;
    std::vector<std::complex<double>> values;
    ZernikeDisk disk;
    ZernikeMethod method = ZernikeMethod::Auto;  ///< the method that ran (never Auto)
    ZernikeRadial radial = ZernikeRadial::Stable;
    ZernikePrecision precision = ZernikePrecision::Double;
    bool symmetric = false;                      ///< the 8-fold path ran
    std::vector<std::string> warnings;           ///< e.g. Explicit radial above its accurate range

    std::size_t count() const { return indices.size(); }
    const std::complex<double>* image(int i) const { return values.data() + std::size_t(i) * count(); }
    /// A(n, m) of image i; m < 0 gives conj(A(n, −m)). Throws InvalidInput when (n, |m|) is absent.
    std::complex<double> at(int image, int n, int m) const;
    /// Highest n present (−1 when empty).
    int max_order() const;
};

/// One moment A(n, m) of every band.
ZernikeMoments zernike_moment(const Context& ctx, const Cube& images, int n, int m, const ZernikeOptions& options = {});
/// Every repetition m = n mod 2, ..., n of order n, for every band.
ZernikeMoments zernike_order(const Context& ctx, const Cube& images, int n, const ZernikeOptions& options = {});
/// The whole set n ≤ nmax for every band.
ZernikeMoments zernike_set(const Context& ctx, const Cube& images, int nmax, const ZernikeOptions& options = {});
/// Any list of (n, m) (each valid, no repeats), in the order given.
ZernikeMoments zernike_moments(const Context& ctx, const Cube& images, const std::vector<ZernikeIndex>& wanted,
                               const ZernikeOptions& options = {});

/// f̂ = Σ_{n ≤ K} [A(n,0) R̃(n,0) + 2 Σ_{m>0} Re(A(n,m) R̃(n,m) (X + jY)^m)] on the pixel centres of
/// `disk` (0 outside), K = max_order (−1: the highest complete order present). Every (n, m) with
/// n ≤ K must be present. Returns f64, disk.width × disk.height × moments.images, BSQ.
Cube zernike_reconstruct(const Context& ctx, const ZernikeMoments& moments, const ZernikeDisk& disk, int max_order = -1);
/// The same on the moments' own disk.
Cube zernike_reconstruct(const Context& ctx, const ZernikeMoments& moments, int max_order = -1);

/// ‖f̂ − f‖₂ / ‖f‖₂ over the pixels inside `disk`, per band (0 when both are 0 there, infinity
/// when only f is).
std::vector<double> zernike_reconstruction_error(const Cube& original, const Cube& reconstruction,
                                                 const ZernikeDisk& disk);

/// Rotation invariants |A(n, m)|, same layout as ZernikeMoments::values.
std::vector<double> zernike_invariants(const ZernikeMoments& moments);

}  // namespace cubekit
