// k-means (cubekit/kmeans.hpp): clustering (`cubekit cluster`), applying given centroids, and colour
// quantization (cubekit/quantize_image.hpp, the library call `cubekit quantize` makes too, so that
// cubekit.quantize gives exactly what the command writes).
//
// The Python layer (python/cubekit/_kmeans.py) allocates the per-pixel outputs (labels, the
// quantized image) of the input's kind and passes the mask and explicit centroids as NumPy arrays;
// these functions return the small results as a dict whose keys are the CLI's JSON keys.
#include <pybind11/numpy.h>

#include <algorithm>
#include <cstring>

#include "bindings.hpp"
#include "cubekit/error.hpp"
#include "cubekit/kmeans.hpp"
#include "cubekit/quantize_image.hpp"

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
py::dict cluster_dict(const Context& ctx, const KmeansResult& r, const CubeShape& shape, const KmeansOptions& o,
                      const char* mode) {
    py::dict d = numbers(r);
    const auto m = std::size_t(std::max(r.bands, 1));
    d["centroids"] = table(r.centroids, m, r.centroid_type);
    d["counts"] = vector_array(r.counts);
    d["bands"] = r.bands;
    d["dtype"] = std::string(dtype_name(r.dtype));
    d["centroid_type"] = std::string(dtype_name(r.centroid_type));
    d["mode"] = mode;
    d["implementation"] = std::string(kmeans_implementation(ctx, shape, o));
    d["parameters"] = parameters(o);
    return d;
}

// ---- quantize (the library's quantize_image: the CLI's own painting rules) -------------------------

/// The dict of a quantize run (cubekit quantize --json and its palette JSON).
py::dict quantize_dict(const QuantizedImage& q, const QuantizeImageOptions& o, DType image_dtype) {
    const std::size_t c = std::size_t(q.channels);
    py::dict d = numbers(q.kmeans);
    d["palette"] = table(q.palette, c, image_dtype);
    d["centroids"] =
        q.centroids.empty() ? py::object(py::none()) : py::object(table(q.centroids, c, q.kmeans.centroid_type));
    d["counts"] = vector_array(q.counts);
    std::vector<double> fractions;
    for (const std::uint64_t n : q.counts)
        fractions.push_back(q.kmeans.valid_pixels > 0 ? double(n) / double(q.kmeans.valid_pixels) : 0.0);
    d["fractions"] = vector_array(fractions);
    d["palette_size"] = q.size();
    d["channels"] = q.channels;
    d["dtype"] = std::string(dtype_name(image_dtype));
    d["colorspace"] = std::string(enum_name(o.colorspace));
    d["dither"] = std::string(enum_name(o.dither));
    d["mode"] = q.applied ? "apply" : "fit";
    d["implementation"] = q.implementation;
    py::dict params = parameters(o.kmeans);
    params["k"] = q.kmeans.k;
    params["colorspace"] = std::string(enum_name(o.colorspace));
    params["dither"] = std::string(enum_name(o.dither));
    d["parameters"] = params;
    return d;
}

}  // namespace

void bind_kmeans(py::module_& m) {
    m.def("kmeans_declarations", &declarations<KmeansOptions>);
    m.def("quantize_declarations", &declarations<QuantizeImageOptions>);
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
        return cluster_dict(c.context(), r, shape_of(in.view), o, "fit");
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
        return cluster_dict(c.context(), r, shape_of(in.view), o, "apply");
    });
    // KmeansPieces(width, height, like, keywords, init_centroids, default_k, threads): k-means
    // over pieces computed by the caller (cubekit.dask.kmeans); next() -> bytes | None, feed([bytes]),
    // result() -> dict, labelling() -> bytes. It owns its CPU context (its driver runs in a thread).
    struct Pieces {
        Context ctx;
        KmeansOptions options;
        KmeansPieces run;
        Pieces(int w, int h, int b, DType t, KmeansOptions o, int threads)
            : ctx(ContextOptions{.backend = Backend::Cpu, .threads = threads}), options(std::move(o)),
              run(ctx, w, h, b, t, options) {}
    };
    py::class_<Pieces>(m, "KmeansPieces")
        .def(py::init([](int w, int h, py::handle like, const py::dict& keywords, py::handle init_centroids,
                         int default_k, int threads) {
            // `like`: a (1, 1, bands) array of the chunks' type, read as the pieces will be.
            const ArrayView probe = array_view(like, "kmeans", "image");
            KmeansOptions base;
            base.k = default_k;
            KmeansOptions o = options_from<KmeansOptions>(keywords, "kmeans", base);
            o.init_centroids = doubles(init_centroids);
            o.paint = false;
            return std::make_unique<Pieces>(w, h, probe.view.bands(), probe.view.dtype(), std::move(o), threads);
        }))
        .def("next", [](Pieces& p) -> py::object {
            std::optional<std::string> r;
            {
                py::gil_scoped_release release;
                r = p.run.next();
            }
            if (!r) return py::none();
            return py::bytes(*r);
        })
        .def("feed", [](Pieces& p, const std::vector<std::string>& parts) { p.run.feed(parts); })
        .def("result", [](Pieces& p) {
            const KmeansResult r = p.run.result();
            py::dict d = cluster_dict(p.ctx, r, CubeShape{r.width, r.height, r.bands, r.dtype, Layout::BIP}, p.options, "fit");
            d["palette"] = table(r.palette, std::size_t(std::max(r.bands, 1)), r.dtype);  // cubekit.dask.quantize paints with it
            return d;
        })
        .def("labelling", [](const Pieces& p) { return py::bytes(p.run.labelling()); });
    // kmeans_piece(ctx, piece (h, w[, b]) NumPy, x0, y0, mask (h, w) uint8 or None, request) -> bytes
    m.def("kmeans_piece", [](PyContext& c, py::handle piece, int x0, int y0, py::handle mask, const std::string& request) {
        const ArrayView in = array_view(piece, "kmeans_piece", "piece");
        const std::vector<std::uint8_t> cut = mask_vector(mask);
        return py::bytes(c.run(py::none(), [&](const Context& ctx) { return kmeans_piece(ctx, in.view, x0, y0, cut, request); }));
    });
    // kmeans_piece_labels(ctx, piece, x0, y0, mask, labelling) -> (h, w) int32 NumPy
    m.def("kmeans_piece_labels", [](PyContext& c, py::handle piece, int x0, int y0, py::handle mask,
                                    const std::string& labelling) {
        const ArrayView in = array_view(piece, "kmeans_piece_labels", "piece");
        const std::vector<std::uint8_t> cut = mask_vector(mask);
        Cube labels(in.view.width(), in.view.height(), 1, DType::I32);
        c.run(py::none(), [&](const Context& ctx) {
            kmeans_piece_labels(ctx, in.view, x0, y0, cut, labelling, labels.mutable_view());
        });
        return to_numpy(std::move(labels));
    });
    // kmeans_tiled(ctx, image or path, keywords, mask, init_centroids, default_k, tiles, progress)
    // -> (labels (H, W) int32 NumPy, dict with "tiled"): k-means in tiles (NumPy or a file read by windows).
    m.def("kmeans_tiled", [](PyContext& c, py::handle image, const py::dict& keywords, py::handle mask,
                             py::handle init_centroids, int default_k, const py::dict& tiles, py::object progress) {
        KmeansOptions base;
        base.k = default_k;
        KmeansOptions o = options_from<KmeansOptions>(keywords, "kmeans", base);
        o.mask = mask_vector(mask);
        o.init_centroids = doubles(init_centroids);
        o.paint = false;
        const TiledInput in = tiled_input(image, "kmeans");
        const TileOptions t = tile_options_from(tiles);
        auto [labels, run] = c.run(std::move(progress), [&](const Context& ctx) {
            Cube l(in.width(), in.height(), 1, DType::I32);
            KmeansTiled r = in.file ? kmeans_tiled(ctx, *in.file, l.mutable_view(), o, t)
                                    : kmeans_tiled(ctx, in.array->view, l.mutable_view(), o, t);
            return std::make_pair(std::move(l), std::move(r));
        });
        const CubeShape shape = in.file ? in.file->shape() : shape_of(in.array->view);
        py::dict d = cluster_dict(c.context(), run.result, shape, o, "fit");
        py::dict report = tiled_dict(run.run);
        report["passes"] = run.passes;
        d["tiled"] = report;
        return py::make_tuple(to_numpy(std::move(labels)), d);
    });
    // quantize(ctx, image, image_out, labels, keywords, mask, palette, palette_centroids,
    //          colorspace, dither, alpha, progress) -> dict
    m.def("quantize", [](PyContext& c, py::handle image, py::handle image_out, py::handle labels,
                         const py::dict& keywords, py::handle mask, py::handle palette, py::handle palette_centroids,
                         const std::string& colorspace, const std::string& dither, bool alpha, py::object progress) {
        QuantizeImageOptions o{.kmeans = options_from<KmeansOptions>(keywords, "quantize")};
        py::dict named;  // colorspace and dither through their declarations (names checked there)
        named["colorspace"] = colorspace, named["dither"] = dither;
        o = options_from<QuantizeImageOptions>(named, "quantize", std::move(o));
        o.alpha = alpha;
        o.kmeans.mask = mask_vector(mask);
        o.palette = doubles(palette);
        o.palette_centroids = doubles(palette_centroids);
        const ArrayView in = array_view(image, "quantize", "image");
        const CubeView& v = in.view;
        const MutableArrayView iv = mutable_array_view(image_out, "quantize", "out");
        const MutableArrayView lv = mutable_array_view(labels, "quantize", "labels");
        check_out("quantize", iv, v.width(), v.height(), v.bands(), v.dtype());
        check_out("quantize", lv, v.width(), v.height(), 1, DType::I32);
        // Outputs where the context computes make a plain fit kmeans_into itself (no copy).
        const QuantizedImage q = c.run(std::move(progress), [&](const Context& ctx) {
            return quantize_image_into(ctx, v, iv.view, lv.view, o);
        });
        return quantize_dict(q, o, v.dtype());
    });
    // quantize_tiled(ctx, image or path, keywords, mask, colorspace, dither, alpha, tiles, progress)
    //   -> (image, labels, dict): a plain fit in tiles (quantize_image_tiled), NumPy outputs.
    m.def("quantize_tiled", [](PyContext& c, py::handle image, const py::dict& keywords, py::handle mask,
                               const std::string& colorspace, const std::string& dither, bool alpha,
                               const py::dict& tiles, py::object progress) {
        QuantizeImageOptions o{.kmeans = options_from<KmeansOptions>(keywords, "quantize")};
        py::dict named;
        named["colorspace"] = colorspace, named["dither"] = dither;
        o = options_from<QuantizeImageOptions>(named, "quantize", std::move(o));
        o.alpha = alpha;
        o.kmeans.mask = mask_vector(mask);
        const TiledInput in = tiled_input(image, "quantize");
        const TileOptions t = tile_options_from(tiles);
        const CubeShape shape = in.file ? in.file->shape() : shape_of(in.array->view);
        auto [painted, labels, run] = c.run(std::move(progress), [&](const Context& ctx) {
            Cube out(shape.width, shape.height, shape.bands, shape.dtype, Layout::BIP);
            Cube l(shape.width, shape.height, 1, DType::I32);
            QuantizeTiled r = in.file ? quantize_image_tiled(ctx, *in.file, out.mutable_view(), l.mutable_view(), o, t)
                                      : quantize_image_tiled(ctx, in.array->view, out.mutable_view(), l.mutable_view(), o, t);
            return std::make_tuple(std::move(out), std::move(l), std::move(r));
        });
        py::dict d = quantize_dict(run.q, o, shape.dtype);
        py::dict report = tiled_dict(run.run);
        report["passes"] = run.passes;
        d["tiled"] = report;
        return py::make_tuple(to_numpy(std::move(painted)), to_numpy(std::move(labels)), d);
    });
}

}  // namespace cubekit::python
