// PCA (cubekit/linalg.hpp): the model and the scores of a cube, as `cubekit pca` gives them, and
// the scores of another cube under a fitted model. The Python layer (python/cubekit/_pca.py)
// allocates the (H, W, K) float64 scores of the input's kind; pca_into fills them in place.
#include <pybind11/numpy.h>

#include <algorithm>

#include "bindings.hpp"
#include "cubekit/error.hpp"
#include "cubekit/linalg.hpp"

namespace cubekit::python {

namespace {

std::vector<double> doubles(py::handle a, const char* name) {
    const auto arr = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(a);
    if (!arr) throw InvalidInput(std::string("pca_transform: ") + name + " is not an array of numbers");
    return std::vector<double>(arr.data(), arr.data() + arr.size());
}

/// The model's fields, named as the CLI's pca.json names them.
py::dict model_dict(const PcaModel& m) {
    const auto b = py::ssize_t(m.bands), k = py::ssize_t(m.num_components());
    py::dict d;
    d["bands"] = m.bands;
    d["samples"] = m.samples;
    d["num_components"] = m.num_components();
    d["mean"] = array_of(m.mean, {b});
    d["eigenvalues"] = array_of(m.eigenvalues, {b});
    d["explained_variance_ratio"] = array_of(m.explained_variance_ratio, {k});
    d["components"] = array_of(m.components, {k, b});
    d["covariance"] = array_of(m.covariance, {b, b});
    return d;
}

/// Runs `into` when the scores live where the context computes, else computes host scores with
/// `host` and copies them into `scores`; returns what `into`/`host` returned as the model.
template <class Into, class Host>
PcaModel run_scores(PyContext& c, py::object progress, const MutableArrayView& scores, Into&& into, Host&& host) {
    if (in_context_memory(c.context(), scores.view))
        return c.run(std::move(progress), [&](const Context& ctx) { return into(ctx, scores.view); });
    return c.run(std::move(progress), [&](const Context& ctx) {
        PcaResult r = host(ctx);
        copy_cube(ctx, r.scores, scores.view);
        ctx.synchronize();
        return r.model;
    });
}

}  // namespace

PcaPieceSums merged_pca_sums(const py::list& parts, const char* function) {
    const auto piece = [](py::handle h) {
        const auto t = h.cast<std::tuple<int, std::int64_t, int, std::vector<std::int64_t>, std::vector<std::uint64_t>>>();
        return PcaPieceSums{std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t), std::get<4>(t)};
    };
    if (parts.empty()) throw InvalidInput(std::string(function) + ": no pieces");
    PcaPieceSums total = piece(parts[0]);
    for (std::size_t i = 1; i < parts.size(); ++i) pca_add_sums(total, piece(parts[i]));
    return total;
}

void bind_pca(py::module_& m) {
    m.def("pca_declarations", &declarations<PcaOptions>);
    // pca(ctx, cube, scores, keywords, progress) -> dict. Components beyond the bands are clamped
    // to the bands, as the CLI does (parameters: components used, components_requested).
    m.def("pca", [](PyContext& c, py::handle cube, py::handle scores, const py::dict& keywords, py::object progress) {
        PcaOptions o = options_from<PcaOptions>(keywords, "pca");
        const ArrayView in = array_view(cube, "pca", "cube");
        const int requested = o.components;
        o.components = std::min(o.components, std::max(in.view.bands(), 1));
        const MutableArrayView sv = mutable_array_view(scores, "pca", "out");
        check_out("pca", sv, in.view.width(), in.view.height(), o.components, DType::F64);
        const PcaModel model = run_scores(
            c, std::move(progress), sv, [&](const Context& ctx, const MutableCubeView& v) { return pca_into(ctx, in.view, v, o); },
            [&](const Context& ctx) { return pca(ctx, in.view, o); });
        py::dict d = model_dict(model);
        py::dict params = parameters(o);
        params["components_requested"] = requested;
        d["parameters"] = params;
        return d;
    });
    // Pieces of a scene (cubekit.dask.pca): plain Python values that pickle to a distributed worker.
    m.def("pca_piece_scan", [](PyContext& c, py::handle piece, py::object progress) {
        const ArrayView in = array_view(piece, "pca", "piece");
        const PcaPieceScan s = c.run(std::move(progress), [&](const Context& ctx) { return pca_piece_scan(ctx, in.view); });
        return py::make_tuple(s.count, s.max_abs);
    });
    m.def("pca_scene_exponent", [](std::int64_t count, double max_abs) { return pca_scene_exponent({count, max_abs}); });
    m.def("pca_piece_sums", [](PyContext& c, py::handle piece, int exponent, py::object progress) {
        const ArrayView in = array_view(piece, "pca", "piece");
        const PcaPieceSums s = c.run(std::move(progress), [&](const Context& ctx) { return pca_piece_sums(ctx, in.view, exponent); });
        return py::make_tuple(s.bands, s.count, s.exponent, s.first, s.second);
    });
    // pca_model_from_piece_sums([sums, ...], components) -> model dict: the pieces' sums merged exactly.
    m.def("pca_model_from_piece_sums", [](const py::list& parts, int components) {
        const PcaPieceSums total = merged_pca_sums(parts, "pca");
        PcaOptions o;
        o.components = std::min(components, std::max(total.bands, 1));
        py::dict d = model_dict(pca_model_from_piece_sums(total, o.components));
        py::dict params = parameters(o);
        params["components_requested"] = components;
        d["parameters"] = params;
        return d;
    });
    // pca_tiled(ctx, cube or path, keywords, tiles, progress) -> (scores, model dict, tiled dict): the
    // fit and the scores in tiles (NumPy or a file read by windows in; NumPy out).
    m.def("pca_tiled", [](PyContext& c, py::handle cube, const py::dict& keywords, const py::dict& tiles, py::object progress) {
        PcaOptions o = options_from<PcaOptions>(keywords, "pca");
        const TiledInput in = tiled_input(cube, "pca");
        const int requested = o.components;
        o.components = std::min(o.components, std::max(in.bands(), 1));
        const TileOptions t = tile_options_from(tiles);
        auto [scores, run] = c.run(std::move(progress), [&](const Context& ctx) {
            Cube s(in.width(), in.height(), o.components, DType::F64);
            PcaTiled r = in.file ? pca_tiled(ctx, *in.file, s.mutable_view(), o, t) : pca_tiled(ctx, in.array->view, s.mutable_view(), o, t);
            return std::make_pair(std::move(s), std::move(r));
        });
        py::dict d = model_dict(run.model);
        py::dict params = parameters(o);
        params["components_requested"] = requested;
        d["parameters"] = params;
        py::dict report = tiled_dict(run.run);
        report["passes"] = run.passes;
        return py::make_tuple(to_numpy(std::move(scores), false), d, report);
    });
    // pca_transform(ctx, cube, scores, mean (B), components (K × B), progress) -> None
    m.def("pca_transform", [](PyContext& c, py::handle cube, py::handle scores, py::handle mean, py::handle components,
                              py::object progress) {
        const ArrayView in = array_view(cube, "pca_transform", "cube");
        PcaModel model;
        model.mean = doubles(mean, "mean");
        model.components = doubles(components, "components");
        model.bands = int(model.mean.size());
        const MutableArrayView sv = mutable_array_view(scores, "pca_transform", "out");
        check_out("pca_transform", sv, in.view.width(), in.view.height(), model.num_components(), DType::F64);
        run_scores(
            c, std::move(progress), sv,
            [&](const Context& ctx, const MutableCubeView& v) {
                pca_transform_into(ctx, in.view, model, v);
                return model;
            },
            [&](const Context& ctx) { return PcaResult{model, pca_transform(ctx, in.view, model)}; });
    });
}

}  // namespace cubekit::python
