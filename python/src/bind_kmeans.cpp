// k-means (cubekit/kmeans.hpp): clustering (`cubekit cluster`), applying given centroids, and colour
// quantization (`cubekit quantize`, whose painting rules live in the CLI: ported here so that
// cubekit.quantize gives exactly what the command writes).
//
// The Python layer (python/cubekit/_kmeans.py) allocates the per-pixel outputs (labels, the
// quantized image) of the input's kind and passes the mask and explicit centroids as NumPy arrays;
// these functions return the small results as a dict whose keys are the CLI's JSON keys.
#include <pybind11/numpy.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "bindings.hpp"
#include "cubekit/error.hpp"
#include "cubekit/kmeans.hpp"
#include "cubekit/kmeans_color.hpp"

namespace cubekit::python {

namespace {

// ---- small conversions --------------------------------------------------------------------------

/// A float64 C-contiguous array (made so by the Python layer) as a vector; None → empty.
std::vector<double> doubles(py::handle a) {
    if (a.is_none()) return {};
    const auto arr = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(a);
    if (!arr) throw py::type_error("expected a float64 array");
    return std::vector<double>(arr.data(), arr.data() + arr.size());
}

/// The W×H mask in raster order (uint8, 0 = excluded, made by the Python layer); None → empty.
std::vector<std::uint8_t> mask_vector(py::handle a) {
    if (a.is_none()) return {};
    const auto arr = py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast>::ensure(a);
    if (!arr) throw py::type_error("expected a uint8 mask");
    return std::vector<std::uint8_t>(arr.data(), arr.data() + arr.size());
}

/// rows × cols values as a NumPy array of element type t (values already representable).
py::array table(const std::vector<double>& v, std::size_t cols, DType t) {
    const auto rows = py::ssize_t(cols ? v.size() / cols : 0);
    py::array_t<double> a(std::vector<py::ssize_t>{rows, py::ssize_t(cols)});
    std::copy(v.begin(), v.end(), a.mutable_data());
    return a.attr("astype")(numpy_dtype(t));
}

template <class T>
py::array vector_array(const std::vector<T>& v) {
    py::array_t<T> a(py::ssize_t(v.size()));
    std::copy(v.begin(), v.end(), a.mutable_data());
    return a;
}

/// Host labels (raster order) into `out` (W×H i32 anywhere the context reaches).
void write_labels(const Context& ctx, const std::vector<std::int32_t>& labels, const CubeView& like,
                  const MutableCubeView& out) {
    Cube tmp(like.width(), like.height(), 1, DType::I32, Layout::BSQ);
    std::memcpy(tmp.data<std::int32_t>(), labels.data(), labels.size() * sizeof(std::int32_t));
    copy_cube(ctx, tmp, out);
}

/// The numbers of a run, as the CLI's kmeans_numbers_json names them.
py::dict numbers(const KmeansResult& r) {
    py::list restarts;
    for (const KmeansRun& run : r.restarts) {
        py::dict d;
        d["seed"] = run.seed, d["inertia"] = run.inertia, d["iterations"] = run.iterations;
        d["converged"] = run.converged, d["k_effective"] = run.k_effective;
        restarts.append(d);
    }
    py::dict d;
    d["k"] = r.k, d["k_effective"] = r.k_effective, d["inertia"] = r.inertia, d["iterations"] = r.iterations;
    d["converged"] = r.converged, d["valid_pixels"] = r.valid_pixels, d["winner"] = r.winner;
    d["restarts"] = restarts, d["history"] = vector_array(r.history), d["warnings"] = r.warnings;
    return d;
}

/// kmeans_into when the labels (and the quantized image, if any) live where the context computes;
/// else kmeans() and a copy into them. The labels are always written.
KmeansResult fit(PyContext& c, py::object progress, const CubeView& image, const MutableCubeView& labels,
                 const KmeansOptions& o, const MutableCubeView& quantized = {}) {
    const Context& cx = c.context();
    if (in_context_memory(cx, labels) && (quantized.empty() || in_context_memory(cx, quantized)))
        return c.run(std::move(progress),
                     [&](const Context& ctx) { return kmeans_into(ctx, image, labels, o, quantized); });
    return c.run(std::move(progress), [&](const Context& ctx) {
        KmeansOptions paint = o;
        paint.paint = !quantized.empty();
        KmeansResult r = kmeans(ctx, image, paint);
        write_labels(ctx, r.labels, image, labels);
        if (!quantized.empty()) copy_cube(ctx, r.quantized, quantized);
        ctx.synchronize();
        return r;
    });
}

/// The dict of a cluster-style run (cubekit cluster --json, centroids.json).
py::dict cluster_dict(const Context& ctx, const KmeansResult& r, const CubeView& image, const KmeansOptions& o,
                      const char* mode) {
    py::dict d = numbers(r);
    const auto m = std::size_t(std::max(r.bands, 1));
    d["centroids"] = table(r.centroids, m, r.centroid_type);
    d["counts"] = vector_array(r.counts);
    d["bands"] = r.bands;
    d["dtype"] = std::string(dtype_name(r.dtype));
    d["centroid_type"] = std::string(dtype_name(r.centroid_type));
    d["mode"] = mode;
    d["implementation"] = std::string(kmeans_implementation(ctx, shape_of(image), o));
    d["parameters"] = parameters(o);
    return d;
}

// ---- quantize: the CLI's painting rules (tools/cubekit/cmd_quantize.cpp) -------------------------

/// The palette an image is finally painted with (entries that got pixels) and its labels.
struct Painting {
    std::vector<double> values, centroids;  ///< n × channels; centroids may be empty
    std::vector<std::uint64_t> counts;
    std::vector<std::int32_t> labels;       ///< into values; −1 = excluded
};

/// Keeps the entries of `values` (and `centroids`, if any) whose count is not zero, in order;
/// `renumber` maps old entry → new (−1 = dropped).
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
        if (!centroids.empty()) p.centroids.insert(p.centroids.end(), row(centroids), row(centroids) + std::ptrdiff_t(c));
    }
    return p;
}

/// The CLI's compact(): counts from the labels, unused entries dropped, labels renumbered.
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

/// CIELAB values (rounded to f32, like rgb_u8_to_lab's image) of n × 3 sRGB u8 values.
std::vector<double> lab_of(const std::vector<double>& rgb) {
    std::vector<double> lab(rgb.size());
    for (std::size_t i = 0; i + 2 < rgb.size(); i += 3) {
        const auto v = srgb_u8_to_lab(std::uint8_t(rgb[i]), std::uint8_t(rgb[i + 1]), std::uint8_t(rgb[i + 2]));
        for (std::size_t b = 0; b < 3; ++b) lab[i + b] = double(float(v[b]));
    }
    return lab;
}

/// Labels of `r` (which applied `given` and sorted it) as indices into `given`: each of r's
/// centroids matched to the nearest row of `given`.
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

/// What one quantize call asked for.
struct QuantizeJob {
    KmeansOptions options;
    std::string colorspace, dither;
    bool alpha = false;
    std::vector<double> given, given_centroids;  ///< palette= (n × channels), its unrounded means
    int channels = 0;
    bool lab() const { return colorspace == "lab"; }
    bool dithered() const { return dither == "floyd-steinberg"; }
    /// A given palette without init='explicit' is applied, not fitted.
    bool apply() const { return !given.empty() && options.init != KmeansInit::Explicit; }
    bool plain_fit() const { return !lab() && !dithered() && !apply(); }
    const std::vector<double>& assignment() const { return given_centroids.empty() ? given : given_centroids; }
};

void check_quantize(const Context& ctx, const CubeView& image, const QuantizeJob& q) {
    if (q.colorspace != "rgb" && !q.lab())
        throw InvalidInput("quantize: colorspace = '" + q.colorspace + "'; expected rgb or lab");
    if (q.dither != "none" && !q.dithered())
        throw InvalidInput("quantize: dither = '" + q.dither + "'; expected none or floyd-steinberg");
    if ((q.lab() || q.dithered()) && ctx.is_cuda())
        throw InvalidInput(std::string("quantize: ") + (q.lab() ? "colorspace='lab'" : "dither='floyd-steinberg'") +
                           " is CPU only; give a NumPy array without backend='cuda'");
    if (q.alpha && image.bands() < 2) throw InvalidInput("quantize: alpha = True needs at least 2 channels");
    if (q.lab() && (image.dtype() != DType::U8 || q.channels != 3))
        throw InvalidInput("quantize: colorspace = 'lab' needs an 8-bit RGB image; image is " + image.describe());
    if (q.lab() && q.options.legacy)
        throw InvalidInput("quantize: legacy cannot be combined with colorspace = 'lab' (legacy reproduces integer RGB "
                           "arithmetic)");
    if (q.options.init == KmeansInit::Explicit && q.given.empty())
        throw InvalidInput("quantize: init = 'explicit' needs palette= (the initial palette)");
}

/// The CLI's final_painting(): the palette the image is painted with and the labels into it.
Painting final_painting(const Context& ctx, const KmeansResult& r, const QuantizeJob& q, const CubeView& colour,
                        const Cube& space) {
    const std::size_t c = std::size_t(q.channels);
    std::vector<double> values, centroids;
    std::vector<std::int32_t> labels;
    if (q.lab()) {
        if (q.apply()) {
            values = q.given;
        } else {
            const std::vector<std::uint8_t> rgb = lab_to_rgb_u8(compact(r.centroids, {}, 3, r.labels).values);
            values.assign(rgb.begin(), rgb.end());
        }
        const std::vector<double> values_lab = lab_of(values);
        if (q.dithered()) labels = dither_floyd_steinberg(space, values_lab, q.options.mask);
        else if (q.apply()) labels = labels_in_given_order(r, values_lab, 3);
        else labels = labels_in_given_order(apply_palette(ctx, space, values_lab, q.options.mask), values_lab, 3);
    } else if (q.apply()) {
        values = q.given;
        if (!q.dithered()) centroids = q.given_centroids;
        labels = q.dithered() ? dither_floyd_steinberg(colour, values, q.options.mask)
                              : labels_in_given_order(r, q.assignment(), c);
    } else if (q.dithered()) {
        values = compact(r.palette, {}, c, r.labels).values;
        labels = dither_floyd_steinberg(colour, values, q.options.mask);
    } else {
        values = r.palette;
        if (!dtype_is_float(colour.dtype())) centroids = r.centroids;
        labels = r.labels;
    }
    return compact(values, centroids, c, labels);
}

/// `colour` (host, BIP) with every labelled pixel painted (set_value rounds and saturates, as the
/// CLI's paint does); excluded pixels keep their values.
Cube paint(const Cube& colour, const Painting& p) {
    Cube out = colour.clone();
    const int c = colour.bands();
    for (int y = 0; y < out.height(); ++y)
        for (int x = 0; x < out.width(); ++x) {
            const std::int32_t l = p.labels[std::size_t(y) * std::size_t(out.width()) + std::size_t(x)];
            if (l < 0) continue;
            for (int b = 0; b < c; ++b)
                out.set_value(x, y, b, p.values[std::size_t(l) * std::size_t(c) + std::size_t(b)]);
        }
    return out;
}

struct Quantized {
    KmeansResult r;
    Painting painting;
};

/// Everything on the host side (apply, Lab, dithering, outputs elsewhere): the CLI's run_quantize.
Quantized quantize_general(const Context& ctx, const CubeView& image, const QuantizeJob& q, const MutableCubeView& image_out,
                           const MutableCubeView& labels_out) {
    const CubeView colour_view = q.alpha ? image.band_range(0, q.channels) : image;
    const CubeInLayout host(ctx, colour_view, Layout::BIP, Memory::Host);
    const Cube& colour = host.host();
    const Cube space = q.lab() ? rgb_u8_to_lab(colour) : Cube();
    const CubeView clustered = q.lab() ? space.view() : colour_view;
    Quantized out;
    if (q.apply()) {
        out.r = apply_palette(ctx, clustered, q.lab() ? lab_of(q.given) : q.assignment(), q.options.mask);
    } else {
        out.r = kmeans(ctx, clustered, q.options);
    }
    out.painting = final_painting(ctx, out.r, q, colour, space);
    const Cube painted = q.plain_fit() ? out.r.quantized.to_layout(Layout::BIP) : paint(colour, out.painting);
    copy_cube(ctx, painted, q.alpha ? image_out.band_range(0, q.channels) : image_out);
    if (q.alpha) copy_cube(ctx, image.band_range(q.channels, image.bands() - q.channels),
                           image_out.band_range(q.channels, image.bands() - q.channels));
    write_labels(ctx, out.painting.labels, image, labels_out);
    ctx.synchronize();
    return out;
}

/// A plain fit with the outputs where the context computes: kmeans_into paints and labels in
/// place (the device-resident call). Its labels need no renumbering: clusters are sorted by
/// decreasing count, so the empty ones (dropped from the palette) come last (legacy, which does
/// not sort, goes the general way).
Quantized quantize_in_place(const Context& ctx, const CubeView& image, const QuantizeJob& q,
                            const MutableCubeView& image_out, const MutableCubeView& labels_out) {
    const int c = q.channels;
    Quantized out;
    out.r = kmeans_into(ctx, q.alpha ? image.band_range(0, c) : image, labels_out, q.options,
                        q.alpha ? image_out.band_range(0, c) : image_out);
    if (q.alpha) copy_cube(ctx, image.band_range(c, image.bands() - c), image_out.band_range(c, image.bands() - c));
    std::vector<std::int32_t> renumber;
    const std::vector<double> centroids = dtype_is_float(image.dtype()) ? std::vector<double>{} : out.r.centroids;
    out.painting = keep_used(out.r.palette, centroids, std::size_t(c), out.r.counts, renumber);
    for (std::size_t j = 0; j < renumber.size(); ++j)
        if (renumber[j] >= 0 && renumber[j] != std::int32_t(j))
            throw std::logic_error("quantize: unsorted clusters in a plain fit");
    return out;
}

py::dict quantize_dict(const Context& ctx, const Quantized& z, const QuantizeJob& q, const CubeView& image,
                       int k_requested) {
    const std::size_t c = std::size_t(q.channels);
    const Painting& p = z.painting;
    py::dict d = numbers(z.r);
    d["palette"] = table(p.values, c, image.dtype());
    d["centroids"] = p.centroids.empty() ? py::object(py::none()) : py::object(table(p.centroids, c, z.r.centroid_type));
    d["counts"] = vector_array(p.counts);
    std::vector<double> fractions;
    for (const std::uint64_t n : p.counts)
        fractions.push_back(z.r.valid_pixels > 0 ? double(n) / double(z.r.valid_pixels) : 0.0);
    d["fractions"] = vector_array(fractions);
    d["palette_size"] = p.counts.size();
    d["channels"] = q.channels;
    d["dtype"] = std::string(dtype_name(image.dtype()));
    d["colorspace"] = q.colorspace;
    d["dither"] = q.dither;
    d["mode"] = q.apply() ? "apply" : "fit";
    const CubeView clustered = q.alpha ? image.band_range(0, q.channels) : image;
    CubeShape shape = shape_of(clustered);
    if (q.lab()) shape.dtype = DType::F32;
    d["implementation"] = std::string(kmeans_implementation(ctx, shape, q.options));
    py::dict params = parameters(q.options);
    params["k"] = k_requested;
    params["colorspace"] = q.colorspace;
    params["dither"] = q.dither;
    d["parameters"] = params;
    return d;
}

}  // namespace

void bind_kmeans(py::module_& m) {
    m.def("kmeans_declarations", &declarations<KmeansOptions>);
    m.def("kmeans_cluster_default_k", [] { return kClusterDefaultK; });
    // kmeans(ctx, image, labels, keywords, mask, init_centroids, default_k, progress) -> dict
    m.def("kmeans", [](PyContext& c, py::handle image, py::handle labels, const py::dict& keywords, py::handle mask,
                       py::handle init_centroids, int default_k, py::object progress) {
        KmeansOptions base;
        base.k = default_k;
        KmeansOptions o = options_from<KmeansOptions>(keywords, "kmeans", base);
        o.mask = mask_vector(mask);
        o.init_centroids = doubles(init_centroids);
        o.paint = false;  // labels and centroids are all that cluster gives
        const ArrayView in = array_view(image, "kmeans", "image");
        const MutableArrayView lv = mutable_array_view(labels, "kmeans", "labels");
        check_out("kmeans", lv, in.view.width(), in.view.height(), 1, DType::I32);
        const KmeansResult r = fit(c, std::move(progress), in.view, lv.view, o);
        return cluster_dict(c.context(), r, in.view, o, "fit");
    });
    // apply_palette(ctx, image, labels, palette (n × bands f64), mask, progress) -> dict:
    // the final pass alone (cubekit cluster --centroids-in).
    m.def("apply_palette", [](PyContext& c, py::handle image, py::handle labels, py::handle palette, py::handle mask,
                              py::object progress) {
        const ArrayView in = array_view(image, "apply_palette", "image");
        KmeansOptions o;
        o.init = KmeansInit::Explicit;
        o.init_centroids = doubles(palette);
        o.k = int(o.init_centroids.size() / std::size_t(std::max(in.view.bands(), 1)));
        o.max_iter = 0;
        o.mask = mask_vector(mask);
        o.paint = false;
        const MutableArrayView lv = mutable_array_view(labels, "apply_palette", "labels");
        check_out("apply_palette", lv, in.view.width(), in.view.height(), 1, DType::I32);
        const KmeansResult r = fit(c, std::move(progress), in.view, lv.view, o);
        return cluster_dict(c.context(), r, in.view, o, "apply");
    });
    // quantize(ctx, image, image_out, labels, keywords, mask, palette, palette_centroids,
    //          colorspace, dither, alpha, progress) -> dict
    m.def("quantize", [](PyContext& c, py::handle image, py::handle image_out, py::handle labels,
                         const py::dict& keywords, py::handle mask, py::handle palette, py::handle palette_centroids,
                         const std::string& colorspace, const std::string& dither, bool alpha, py::object progress) {
        QuantizeJob q{.options = options_from<KmeansOptions>(keywords, "quantize"), .colorspace = colorspace,
                      .dither = dither, .alpha = alpha};
        const ArrayView in = array_view(image, "quantize", "image");
        const CubeView& v = in.view;
        q.channels = v.bands() - (alpha ? 1 : 0);
        q.options.mask = mask_vector(mask);
        q.given = doubles(palette);
        q.given_centroids = doubles(palette_centroids);
        check_quantize(c.context(), v, q);
        if (!q.given.empty() && !q.apply()) {  // init='explicit': fit, starting from the given palette
            q.options.k = int(q.given.size() / std::size_t(std::max(q.channels, 1)));
            q.options.init_centroids = q.lab() ? lab_of(q.given) : q.assignment();
        }
        if (!q.apply()) check_kmeans_arguments(shape_of(q.alpha && q.channels > 0 ? v.band_range(0, q.channels) : v), q.options);
        const MutableArrayView iv = mutable_array_view(image_out, "quantize", "out");
        const MutableArrayView lv = mutable_array_view(labels, "quantize", "labels");
        check_out("quantize", iv, v.width(), v.height(), v.bands(), v.dtype());
        check_out("quantize", lv, v.width(), v.height(), 1, DType::I32);
        const int k_requested = q.apply() ? int(q.given.size() / std::size_t(q.channels)) : q.options.k;
        const Context& cx = c.context();
        const bool in_place = q.plain_fit() && !q.options.legacy && in_context_memory(cx, iv.view) &&
                              in_context_memory(cx, lv.view);
        const Quantized z = c.run(std::move(progress), [&](const Context& ctx) {
            return in_place ? quantize_in_place(ctx, v, q, iv.view, lv.view)
                            : quantize_general(ctx, v, q, iv.view, lv.view);
        });
        return quantize_dict(cx, z, q, v, k_requested);
    });
}

}  // namespace cubekit::python
