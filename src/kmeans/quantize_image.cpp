// Colour quantization of a whole image (quantize_image.hpp): the painting rules that
// `cubekit quantize` and `cubekit.quantize` share — which palette the image is finally painted
// with, its compaction to the used entries, Lab and dithering, alpha.
#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>
#include <string>

#include "cubekit/error.hpp"
#include "cubekit/kmeans_color.hpp"
#include "cubekit/quantize_image.hpp"

namespace cubekit {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// What one call does, decided once from the options and the image.
struct Plan {
    int channels = 0;
    bool lab = false, dither = false;
    bool apply = false;      ///< a given palette, applied without a fit
    bool plain_fit = false;  ///< k-means' own palette, labels and painted image are the answer
};

Plan plan_of(const CubeShape& image, const QuantizeImageOptions& o) {
    Plan p;
    p.channels = image.bands - (o.alpha ? 1 : 0);
    p.lab = o.colorspace == Colorspace::Lab;
    p.dither = o.dither == Dither::FloydSteinberg;
    p.apply = !o.palette.empty() && o.kmeans.init != KmeansInit::Explicit;
    p.plain_fit = !p.lab && !p.dither && !p.apply;
    return p;
}

void check_options(const Context& ctx, const CubeShape& image, const QuantizeImageOptions& o, const Plan& p) {
    check_fields(o, "quantize");
    if ((p.lab || p.dither) && ctx.is_cuda())
        throw InvalidInput(std::string("quantize: ") + (p.lab ? "colorspace = lab" : "dither = floyd-steinberg") +
                           " is CPU only; use a CPU context");
    if (o.alpha && image.bands < 2)
        throw InvalidInput("quantize: alpha = true needs at least 2 channels (colour and alpha); the image is " +
                           image.describe());
    if (p.lab && (image.dtype != DType::U8 || p.channels != 3))
        throw InvalidInput("quantize: colorspace = lab needs an 8-bit RGB image; the image is " + image.describe() +
                           (o.alpha ? " (alpha last)" : ""));
    if (p.lab && o.kmeans.legacy)
        throw InvalidInput("quantize: legacy = true cannot be combined with colorspace = lab (legacy reproduces "
                           "integer RGB arithmetic)");
    if (o.kmeans.init == KmeansInit::Explicit && o.palette.empty())
        throw InvalidInput("quantize: init = 'explicit' needs palette (the initial palette)");
    const std::size_t c = std::size_t(std::max(p.channels, 1));
    if (o.palette.size() % c != 0)
        throw InvalidInput("quantize: palette has " + std::to_string(o.palette.size()) +
                           " values; expected n x " + std::to_string(c) + " (one row per entry)");
    if (!o.palette_centroids.empty() && o.palette_centroids.size() != o.palette.size())
        throw InvalidInput("quantize: palette_centroids has " + std::to_string(o.palette_centroids.size()) +
                           " values; expected one per palette value (" + std::to_string(o.palette.size()) + ")");
}

/// What decides which pixel gets which entry of a given palette: its unrounded centroids when
/// there are some (then a fitted palette assigns every pixel exactly as the fit did), else its colours.
const std::vector<double>& assignment_values(const QuantizeImageOptions& o) {
    return o.palette_centroids.empty() ? o.palette : o.palette_centroids;
}

/// CIELAB values (rounded to f32, like rgb_u8_to_lab's image) of n × 3 sRGB u8 values.
std::vector<double> lab_of(const std::vector<double>& rgb) {
    std::vector<double> lab(rgb.size());
    for (std::size_t i = 0; i + 2 < rgb.size(); i += 3) {
        const auto v = srgb_u8_to_lab(std::uint8_t(rgb[i]), std::uint8_t(rgb[i + 1]), std::uint8_t(rgb[i + 2]));
        for (std::size_t b = 0; b < 3; ++b) lab[i + b] = double(float(v[b]));
    }
    return lab;
}

/// The k-means options of a fit: with init Explicit, k and the initial centroids are the given
/// palette's (in Lab for colorspace lab).
KmeansOptions fit_options(const QuantizeImageOptions& o, const Plan& p) {
    KmeansOptions k = o.kmeans;
    if (!o.palette.empty()) {
        k.k = int(o.palette.size() / std::size_t(p.channels));
        k.init_centroids = p.lab ? lab_of(o.palette) : assignment_values(o);
    }
    k.paint = p.plain_fit;  // only a plain fit paints with k-means' own image
    return k;
}

// ---- the final palette ----------------------------------------------------------------------------

/// A palette (n × channels; centroids alike, or empty), its pixel counts and labels into it.
struct Painting {
    std::vector<double> values, centroids;
    std::vector<std::uint64_t> counts;
    std::vector<std::int32_t> labels;  ///< −1 = excluded
};

/// Keeps the entries of `values` (and `centroids`, if any) whose count is not zero, in order;
/// `renumber` maps old entry → new (−1 = dropped). No labels.
Painting keep_used(const std::vector<double>& values, const std::vector<double>& centroids, std::size_t c,
                   const std::vector<std::uint64_t>& counts, std::vector<std::int32_t>& renumber) {
    Painting p;
    renumber.assign(counts.size(), -1);
    for (std::size_t j = 0; j < counts.size(); ++j) {
        if (counts[j] == 0) continue;
        renumber[j] = std::int32_t(p.counts.size());
        p.counts.push_back(counts[j]);
        const auto row = [&](const std::vector<double>& v) { return v.begin() + std::ptrdiff_t(j * c); };
        p.values.insert(p.values.end(), row(values), row(values) + std::ptrdiff_t(c));
        if (!centroids.empty())
            p.centroids.insert(p.centroids.end(), row(centroids), row(centroids) + std::ptrdiff_t(c));
    }
    return p;
}

/// The entries of `values` that some label uses, with their pixel counts, the labels renumbered.
Painting compact(const std::vector<double>& values, const std::vector<double>& centroids, std::size_t c,
                 const std::vector<std::int32_t>& labels) {
    std::vector<std::uint64_t> counts(values.size() / c, 0);
    for (const std::int32_t l : labels)
        if (l >= 0) ++counts.at(std::size_t(l));
    std::vector<std::int32_t> renumber;
    Painting p = keep_used(values, centroids, c, counts, renumber);
    p.labels.resize(labels.size());
    for (std::size_t i = 0; i < labels.size(); ++i) p.labels[i] = labels[i] < 0 ? -1 : renumber[std::size_t(labels[i])];
    return p;
}

/// Labels of `r`, which applied `given` (n × m) and sorted it by count, as indices into `given`:
/// each of r's centroids is matched to the nearest (normally identical) row of `given`.
std::vector<std::int32_t> labels_in_given_order(const KmeansResult& r, const std::vector<double>& given,
                                                std::size_t m) {
    const std::size_t n = given.size() / m, rk = r.centroids.size() / m;
    std::vector<std::int32_t> to_given(rk, 0);
    for (std::size_t j = 0; j < rk; ++j) {
        double best = std::numeric_limits<double>::infinity();
        for (std::size_t g = 0; g < n; ++g) {
            double d = 0;
            for (std::size_t b = 0; b < m; ++b) {
                const double diff = r.centroids[j * m + b] - given[g * m + b];
                d += diff * diff;
            }
            if (d < best) best = d, to_given[j] = std::int32_t(g);
        }
    }
    std::vector<std::int32_t> labels(r.labels.size());
    for (std::size_t i = 0; i < labels.size(); ++i)
        labels[i] = r.labels[i] < 0 ? -1 : to_given[std::size_t(r.labels[i])];
    return labels;
}

/// In Lab: the palette in sRGB (the given one, or the fit's used centroids converted back) and
/// every pixel given the colour nearest in Lab (so that applying the written palette paints
/// exactly the same image), or dithered in Lab.
Painting lab_painting(const Context& ctx, const KmeansResult& r, const QuantizeImageOptions& o, const Plan& p,
                      const Cube& space) {
    std::vector<double> values;
    if (p.apply) {
        values = o.palette;
    } else {
        const std::vector<std::uint8_t> rgb = lab_to_rgb_u8(compact(r.centroids, {}, 3, r.labels).values);
        values.assign(rgb.begin(), rgb.end());
    }
    const std::vector<double> values_lab = lab_of(values);
    std::vector<std::int32_t> labels;
    if (p.dither) labels = dither_floyd_steinberg(space, values_lab, o.kmeans.mask);
    else if (p.apply) labels = labels_in_given_order(r, values_lab, 3);
    else labels = labels_in_given_order(apply_palette(ctx, space, values_lab, o.kmeans.mask), values_lab, 3);
    return compact(values, {}, 3, labels);
}

/// The palette the image is finally painted with and the labels into it (header: the rules).
/// A plain fit's palette: k-means' own counts, and its labels taken over (moved: 33 MB for a 4K photo)
/// when every cluster is used, as they then need no renumbering; else compact().
Painting fit_painting(KmeansResult& r, std::size_t c, bool integer_image) {
    const std::vector<double> no_centroids;
    const std::vector<double>& centroids = integer_image ? r.centroids : no_centroids;
    if (std::find(r.counts.begin(), r.counts.end(), std::uint64_t(0)) != r.counts.end())
        return compact(r.palette, centroids, c, r.labels);
    std::vector<std::int32_t> renumber;
    Painting p = keep_used(r.palette, centroids, c, r.counts, renumber);
    p.labels = std::move(r.labels);
    return p;
}

Painting final_painting(const Context& ctx, KmeansResult& r, const QuantizeImageOptions& o, const Plan& p,
                        const CubeView& colour, const Cube& space) {
    if (p.lab) return lab_painting(ctx, r, o, p, space);
    const std::size_t c = std::size_t(p.channels);
    std::vector<double> values, centroids;  // centroids: unrounded, integer images only
    std::vector<std::int32_t> labels;       // into values
    if (p.apply) {
        values = o.palette;
        if (!p.dither) centroids = o.palette_centroids;
        labels = p.dither ? dither_floyd_steinberg(colour, values, o.kmeans.mask)
                          : labels_in_given_order(r, assignment_values(o), c);
    } else if (p.dither) {
        values = compact(r.palette, {}, c, r.labels).values;
        labels = dither_floyd_steinberg(colour, values, o.kmeans.mask);
    } else {
        return fit_painting(r, c, !dtype_is_float(colour.dtype()));
    }
    return compact(values, centroids, c, labels);
}

// ---- painting ---------------------------------------------------------------------------------------

/// The output image (W × H × bands, BIP): k-means' own image for a plain fit, else `colour` with
/// every labelled pixel painted (set_value rounds and saturates a given palette's values to the
/// type); alpha copied from `image`.
Cube painted_image(const Context& ctx, const CubeView& image, const CubeView& colour, const Plan& p, KmeansResult& r,
                   const Painting& painting) {
    const int c = p.channels;
    if (p.plain_fit && image.bands() == c) return std::move(r.quantized);
    Cube out(image.width(), image.height(), image.bands(), image.dtype(), Layout::BIP);
    const MutableCubeView colour_out = out.mutable_view().band_range(0, c);
    copy_cube(ctx, p.plain_fit ? r.quantized.view() : colour, colour_out);
    r.quantized = Cube();
    if (!p.plain_fit)
        for (int y = 0; y < out.height(); ++y)
            for (int x = 0; x < out.width(); ++x) {
                const std::int32_t l = painting.labels[std::size_t(y) * std::size_t(out.width()) + std::size_t(x)];
                if (l < 0) continue;
                for (int b = 0; b < c; ++b)
                    out.set_value(x, y, b, painting.values[std::size_t(l) * std::size_t(c) + std::size_t(b)]);
            }
    const int extra = image.bands() - c;  // alpha
    if (extra > 0) copy_cube(ctx, image.band_range(c, extra), out.mutable_view().band_range(c, extra));
    return out;
}

QuantizedImage result_of(Painting&& painting, KmeansResult&& r, const Plan& p) {
    QuantizedImage q;
    q.labels = std::move(painting.labels);
    q.palette = std::move(painting.values);
    q.centroids = std::move(painting.centroids);
    q.counts = std::move(painting.counts);
    q.channels = p.channels;
    r.labels.clear();
    r.quantized = Cube();
    q.kmeans = std::move(r);
    q.applied = p.apply;
    return q;
}

/// The clustered image's shape as the implementation is chosen from it (Lab is f32).
CubeShape clustered_shape(const CubeView& image, const Plan& p) {
    CubeShape s = shape_of(p.channels < image.bands() ? image.band_range(0, p.channels) : image);
    if (p.lab) s.dtype = DType::F32;
    return s;
}

/// Every run but the in-place plain fit: outputs in host memory.
QuantizedImage quantize_on_host(const Context& ctx, const CubeView& image, const QuantizeImageOptions& o,
                                const Plan& p) {
    const auto t0 = Clock::now();
    const CubeView colour = o.alpha ? image.band_range(0, p.channels) : image;
    const Cube space = p.lab ? rgb_u8_to_lab(colour) : Cube();
    const CubeView clustered = p.lab ? space.view() : colour;
    const KmeansOptions k = fit_options(o, p);
    KmeansResult r = p.apply ? apply_palette(ctx, clustered, p.lab ? lab_of(o.palette) : assignment_values(o), k.mask)
                             : kmeans(ctx, clustered, k);
    const double fit_ms = ms_since(t0);
    const auto t1 = Clock::now();
    Painting painting = final_painting(ctx, r, o, p, colour, space);
    Cube painted = painted_image(ctx, image, colour, p, r, painting);
    QuantizedImage q = result_of(std::move(painting), std::move(r), p);
    q.image = std::move(painted);
    q.implementation = std::string(kmeans_implementation(ctx, clustered_shape(image, p), k));
    q.fit_ms = fit_ms;
    q.paint_ms = ms_since(t1);
    return q;
}

/// The palette of a plain fit whose labels are already in the caller's view (kmeans_into,
/// kmeans_tiled): its used entries, which need no renumbering because the clusters are sorted by
/// decreasing count (the empty ones last; legacy, which does not sort, goes the host way).
Painting sorted_fit_painting(const KmeansResult& r, std::size_t c, DType image_dtype) {
    std::vector<std::int32_t> renumber;
    const std::vector<double> centroids = dtype_is_float(image_dtype) ? std::vector<double>{} : r.centroids;
    Painting painting = keep_used(r.palette, centroids, c, r.counts, renumber);
    for (std::size_t j = 0; j < renumber.size(); ++j)
        if (renumber[j] >= 0 && renumber[j] != std::int32_t(j))
            throw std::logic_error("quantize: unsorted clusters in a plain fit");
    return painting;
}

/// A plain fit with the outputs where the context computes: kmeans_into paints and labels in
/// place (sorted_fit_painting: no renumbering).
QuantizedImage quantize_in_place(const Context& ctx, const CubeView& image, const MutableCubeView& out,
                                 const MutableCubeView& labels, const QuantizeImageOptions& o, const Plan& p) {
    const auto t0 = Clock::now();
    const int c = p.channels, bands = image.bands();
    const KmeansOptions k = fit_options(o, p);
    KmeansResult r = kmeans_into(ctx, c < bands ? image.band_range(0, c) : image, labels, k,
                                 c < bands ? out.band_range(0, c) : out);
    if (c < bands) copy_cube(ctx, image.band_range(c, bands - c), out.band_range(c, bands - c));
    Painting painting = sorted_fit_painting(r, std::size_t(c), image.dtype());
    QuantizedImage q = result_of(std::move(painting), std::move(r), p);
    q.implementation = std::string(kmeans_implementation(ctx, clustered_shape(image, p), k));
    q.fit_ms = ms_since(t0);
    return q;
}

/// True when `v` lives where the context computes (kmeans_into writes there).
bool in_context_memory(const Context& ctx, const MutableCubeView& v) {
    return ctx.is_cuda() ? v.on_device() && v.device() == ctx.device() : !v.on_device();
}

void check_output(const MutableCubeView& v, const char* where, const char* name, const CubeShape& image, int bands,
                  DType dtype) {
    if (v.width() != image.width || v.height() != image.height || v.bands() != bands || v.dtype() != dtype)
        throw InvalidInput(std::string(where) + ": " + name + " is " + v.describe() + "; expected " +
                           std::to_string(image.width) + "x" + std::to_string(image.height) + "x" +
                           std::to_string(bands) + " " + std::string(dtype_name(dtype)));
}

// ---- in tiles -------------------------------------------------------------------------------------

/// The runs that need the whole image (a given palette's compaction, Lab, dithering, legacy's
/// unsorted clusters) are refused; the plain fit's outputs are kmeans_tiled's own.
void check_tiled(const QuantizeImageOptions& o, const Plan& p, const MutableCubeView& out, const MutableCubeView& labels,
                 const CubeShape& image) {
    constexpr const char* kWhere = "quantize_image_tiled";
    const auto refuse = [&](const std::string& what) {
        throw InvalidInput(std::string(kWhere) + ": " + what + " needs the whole image; run quantize_image without tiles");
    };
    if (p.lab) refuse("colorspace = lab");
    if (p.dither) refuse("dither = floyd-steinberg");
    if (!o.palette.empty()) refuse("a palette");
    if (o.kmeans.legacy) refuse("legacy = true");
    check_output(out, kWhere, "out", image, image.bands, image.dtype);
    check_output(labels, kWhere, "labels", image, 1, DType::I32);
    if (out.on_device() || labels.on_device())
        throw InvalidInput(std::string(kWhere) + ": out and labels must be in host memory (the tiles stream through the devices)");
}

/// The plain fit over the tiles of `colour` (a host view or a file), painted into out's colour bands.
template <class Source>
QuantizeTiled fit_in_tiles(const Context& ctx, const Source& colour, const CubeShape& colour_shape,
                           const MutableCubeView& out_colour, const MutableCubeView& labels,
                           const QuantizeImageOptions& o, const Plan& p, const TileOptions& tiles) {
    const auto t0 = Clock::now();
    const KmeansOptions k = fit_options(o, p);
    KmeansTiled t = kmeans_tiled(ctx, colour, labels, k, tiles, out_colour);
    Painting painting = sorted_fit_painting(t.result, std::size_t(p.channels), colour_shape.dtype);
    QuantizeTiled r{.q = result_of(std::move(painting), std::move(t.result), p), .run = t.run, .passes = t.passes};
    r.q.implementation = std::string(kmeans_implementation(ctx, colour_shape, k));
    r.q.fit_ms = ms_since(t0);
    return r;
}

}  // namespace

QuantizedImage quantize_image(const Context& ctx, const CubeView& image, const QuantizeImageOptions& options) {
    const Plan p = plan_of(shape_of(image), options);
    check_options(ctx, shape_of(image), options, p);
    return quantize_on_host(ctx, image, options, p);
}

QuantizedImage quantize_image_into(const Context& ctx, const CubeView& image, const MutableCubeView& out,
                                   const MutableCubeView& labels, const QuantizeImageOptions& options) {
    const Plan p = plan_of(shape_of(image), options);
    check_options(ctx, shape_of(image), options, p);
    check_output(out, "quantize_image_into", "out", shape_of(image), image.bands(), image.dtype());
    check_output(labels, "quantize_image_into", "labels", shape_of(image), 1, DType::I32);
    if (p.plain_fit && !options.kmeans.legacy && in_context_memory(ctx, out) && in_context_memory(ctx, labels))
        return quantize_in_place(ctx, image, out, labels, options, p);
    QuantizedImage q = quantize_on_host(ctx, image, options, p);
    const int W = image.width(), H = image.height();
    copy_cube(ctx, q.image, out);
    copy_cube(ctx, CubeView::host(q.labels.data(), W, H, 1, DType::I32, dense_strides(W, H, 1, Layout::BSQ)), labels);
    ctx.synchronize();
    q.image = Cube();
    q.labels.clear();
    return q;
}

QuantizeTiled quantize_image_tiled(const Context& ctx, const CubeView& image, const MutableCubeView& out,
                                   const MutableCubeView& labels, const QuantizeImageOptions& options,
                                   const TileOptions& tiles) {
    const Plan p = plan_of(shape_of(image), options);
    check_options(ctx, shape_of(image), options, p);
    check_tiled(options, p, out, labels, shape_of(image));
    const int c = p.channels, bands = image.bands();
    const CubeView colour = c < bands ? image.band_range(0, c) : image;
    QuantizeTiled t = fit_in_tiles(ctx, colour, shape_of(colour), c < bands ? out.band_range(0, c) : out, labels, options,
                                   p, tiles);
    if (c < bands) copy_cube(ctx, image.band_range(c, bands - c), out.band_range(c, bands - c));  // alpha
    return t;
}

QuantizeTiled quantize_image_tiled(const Context& ctx, const CubeFile& image, const MutableCubeView& out,
                                   const MutableCubeView& labels, const QuantizeImageOptions& options,
                                   const TileOptions& tiles) {
    if (options.alpha)
        throw InvalidInput("quantize_image_tiled: alpha = true with a file; read the image (PNG: whole) and pass its view");
    const CubeShape& shape = image.shape();
    const Plan p = plan_of(shape, options);
    check_options(ctx, shape, options, p);
    check_tiled(options, p, out, labels, shape);
    return fit_in_tiles(ctx, image, shape, out, labels, options, p, tiles);
}

}  // namespace cubekit
