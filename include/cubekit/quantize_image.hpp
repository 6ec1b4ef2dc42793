#pragma once
/// Colour quantization of an image with k-means, whole (spec kmeans.md §6): the fit (or a given
/// palette), the palette the image is finally painted with, the painted image and its labels —
/// what `cubekit quantize` writes and `cubekit.quantize` returns, from this one implementation.
///
///     cubekit::QuantizedImage q = cubekit::quantize_image(ctx, photo, {.kmeans = {.k = 16, .seed = 7}});
///     // q.image: the photo painted with q.palette (q.counts pixels each); q.labels index q.palette
///     cubekit::QuantizedImage again = cubekit::quantize_image(
///         ctx, frame2, {.palette = q.palette, .palette_centroids = q.centroids});   // apply, no fit
///
/// The painting rules:
///   - rgb, no dithering, no palette given (a plain fit): k-means' own palette and labels
///     (kmeans(): the palette is the centroids rounded to the image's type);
///   - a palette given without KmeansOptions::init = Explicit: applied without a fit, each pixel
///     taking the entry with the nearest centroid (the colour where no centroids are given);
///     with Explicit, k-means starts from it (k is then the palette's);
///   - colorspace lab (8-bit RGB only): k-means on the CIELAB image (rgb_u8_to_lab), the used
///     centroids converted back to sRGB, and every pixel painted with the colour nearest in Lab
///     (so that applying the written palette paints exactly the same image);
///   - dither floyd-steinberg: error diffusion over the final palette (dither_floyd_steinberg),
///     in Lab when the colorspace is lab;
///   - the palette keeps only entries that got pixels, in their order (decreasing count for a
///     fit, the given order for an applied palette); excluded pixels (mask 0, a NaN band) keep
///     their values and get label −1; alpha (the last channel, when options.alpha) is copied.
/// Lab and dithering run on the CPU (the context must be a CPU one).
#include <cstdint>
#include <string>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/io.hpp"
#include "cubekit/kmeans.hpp"
#include "cubekit/options.hpp"
#include "cubekit/tiles.hpp"

namespace cubekit {

/// The space k-means clusters the colours in.
enum class Colorspace { Rgb, Lab };
template <>
struct EnumNames<Colorspace> {
    static constexpr EnumName<Colorspace> names[] = {{Colorspace::Rgb, "rgb"}, {Colorspace::Lab, "lab"}};
};

/// How the image is painted with the final palette: nearest entry, or error diffusion.
enum class Dither { None, FloydSteinberg };
template <>
struct EnumNames<Dither> {
    static constexpr EnumName<Dither> names[] = {{Dither::None, "none"}, {Dither::FloydSteinberg, "floyd-steinberg"}};
};

/// Options of quantize_image().
struct QuantizeImageOptions {
    /// The k-means of the colours (k, seed, ..., mask). Its fields are declared with KmeansOptions'
    /// own visit_fields (a front end binds both structs), so it is not visited below.
    KmeansOptions kmeans;
    /// Cluster in the image's own values, or in CIELAB (8-bit RGB only, CPU only).
    Colorspace colorspace = Colorspace::Rgb;
    /// Paint with the nearest palette entry, or by Floyd–Steinberg error diffusion (CPU only).
    Dither dither = Dither::None;
    /// The image's last channel is alpha: neither clustered nor painted, copied to the output.
    bool alpha = false;
    /// A given palette, n × channels row-major in the image's units (empty = fit one): applied,
    /// or with kmeans.init = Explicit the start of the fit.
    std::vector<double> palette;
    /// The unrounded means behind `palette` (n × channels, e.g. QuantizedImage::centroids), or
    /// empty: an applied palette then assigns each pixel by them, as the fit that made it did.
    std::vector<double> palette_centroids;
};

/// The declarations of QuantizeImageOptions' fields (options.hpp): colorspace and dither are
/// flags and keywords; alpha, palette and palette_centroids are data a front end sets itself (the
/// CLI detects alpha from a PNG's channels, and reads the palette from --palette-in).
template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, QuantizeImageOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.colorspace, Field{.name = "colorspace",
                              .doc = "CPU only. rgb, or lab: cluster 8-bit sRGB in CIELAB (D65), convert the palette "
                                     "back to sRGB, paint each pixel with the palette colour nearest in Lab"});
    visit(o.dither, Field{.name = "dither",
                          .doc = "CPU only. none, or floyd-steinberg: error diffusion when painting with the final "
                                 "palette (the labels and the indexed PNG hold the dithered indices)"});
    visit(o.alpha, Field{.name = "alpha", .doc = "the last channel is alpha: copied, not clustered", .flag = false});
    visit(o.palette, Field{.name = "palette", .doc = "given palette, n x channels", .flag = false});
    visit(o.palette_centroids,
          Field{.name = "palette_centroids", .doc = "the given palette's unrounded means", .flag = false});
}

/// What quantize_image() made.
struct QuantizedImage {
    /// The painted image: W × H × bands (alpha included), the input's type, BIP, host memory,
    /// no metadata. Empty after quantize_image_into() (which paints into the caller's view).
    Cube image;
    /// The palette entry of each pixel in raster order, −1 for excluded pixels. Empty after
    /// quantize_image_into().
    std::vector<std::int32_t> labels;
    /// The entries the image is painted with (only those that got pixels), n × channels
    /// row-major, values of the image's type.
    std::vector<double> palette;
    /// Their unrounded cluster means (n × channels, KmeansResult::centroid_type values) for
    /// integer images fitted in rgb without dithering, or the given palette_centroids of an
    /// applied palette; else empty.
    std::vector<double> centroids;
    /// Pixels painted with each entry.
    std::vector<std::uint64_t> counts;
    /// Colour channels (the image's bands, less the alpha channel).
    int channels = 0;
    /// The fit (or the application of a given palette) that chose the colours: k (the k asked
    /// for: the palette's when one is given), k_effective, inertia, iterations, converged,
    /// valid_pixels, winner, restarts, history, warnings. In Lab its centroids are Lab values.
    /// Its labels and quantized image are left empty (see labels and image above).
    KmeansResult kmeans;
    /// True when a given palette was applied without a fit (the CLI's mode "apply").
    bool applied = false;
    /// kmeans_implementation() of the clustering as it ran ("cpu", "cuda-shared", "cuda-tiled").
    std::string implementation;
    /// Wall time of the clustering and of the painting (host clock; the CLI reports them).
    double fit_ms = 0, paint_ms = 0;

    std::size_t size() const { return counts.size(); }
};

/// Quantizes `image` (any view: host or device memory, any layout or window; u8 … f64, 1 or more
/// colour channels) as the header says, on the context's backend. Returns the painted image and
/// the labels in host memory with the palette and the statistics. Throws InvalidInput naming the
/// field for: colorspace lab on anything but 8-bit RGB (alpha aside), lab with kmeans.legacy,
/// lab or dithering on a CUDA context, alpha with fewer than 2 bands, init Explicit without a
/// palette, a palette (or palette_centroids) that is not n × channels, and as kmeans() does.
///
///     cubekit::QuantizedImage q = cubekit::quantize_image(ctx, rgba, {.alpha = true});
QuantizedImage quantize_image(const Context& ctx, const CubeView& image, const QuantizeImageOptions& options = {});

/// quantize_image() with the painted image and the labels written into the caller's views:
/// `out` W × H × bands of the image's type, `labels` W × H × 1 i32, any strides, host memory or
/// the context's device. A plain fit (rgb, no dithering, no palette, not legacy) whose outputs
/// both live where the context computes is kmeans_into() itself: on a CUDA context the whole run
/// stays on the device and nothing is copied (then queued on the context's stream: call
/// ctx.synchronize() before reading the outputs from the host). Any other run computes on the
/// host side as quantize_image() does and copies into the views (complete on return). Returns
/// the palette and statistics with `image` and `labels` empty. Throws InvalidInput naming `out`
/// or `labels` when one has the wrong shape or type, and as quantize_image() does.
///
///     cubekit::QuantizedImage q = cubekit::quantize_image_into(gpu, d_photo, d_out, d_labels, {.kmeans = {.k = 8}});
QuantizedImage quantize_image_into(const Context& ctx, const CubeView& image, const MutableCubeView& out,
                                   const MutableCubeView& labels, const QuantizeImageOptions& options = {});

/// What quantize_image_tiled() did: the palette and statistics (image and labels empty: they are in
/// the caller's views), the tiles, and the reads of the input (KmeansTiled::passes).
struct QuantizeTiled {
    QuantizedImage q;
    TiledRun run;
    int passes = 0;
};

/// A plain fit (rgb, no dithering, no palette, not legacy) in tiles, for an image larger than a
/// memory budget (kmeans_tiled: every pass over the tiles, merged exactly): `out` and `labels` (host
/// memory, any strides, as quantize_image_into) and every field equal quantize_image_into's bit for
/// bit but the f64 inertia and history (within 1e-12 relative; 1e-9 on a GPU). The image is a host
/// view (alpha allowed: copied) or a file read by windows (no alpha: the formats with alpha, PNG, are
/// read whole). Throws InvalidInput naming the option for a palette, lab, dithering, legacy or alpha
/// from a file (they need the whole image: run quantize_image), and as quantize_image_into does.
///
///     cubekit::Cube out(W, H, 3, cubekit::DType::U8), labels(W, H, 1, cubekit::DType::I32);
///     auto t = cubekit::quantize_image_tiled(gpu, panorama, out.mutable_view(), labels.mutable_view(),
///                                            {.kmeans = {.k = 16}}, {.device_memory_limit = 1 << 30});
QuantizeTiled quantize_image_tiled(const Context& ctx, const CubeView& image, const MutableCubeView& out,
                                   const MutableCubeView& labels, const QuantizeImageOptions& options = {},
                                   const TileOptions& tiles = {});
QuantizeTiled quantize_image_tiled(const Context& ctx, const CubeFile& image, const MutableCubeView& out,
                                   const MutableCubeView& labels, const QuantizeImageOptions& options = {},
                                   const TileOptions& tiles = {});

}  // namespace cubekit
