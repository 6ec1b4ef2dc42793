// Connected components (cubekit/labels.hpp): labelling with per-band statistics, and the removal
// of small components. The library takes connectivity and min_size as plain arguments; their
// keywords are declared here like an options struct so that the Python signatures, defaults and
// checks come from one place.
#include <cstdint>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "cubekit/error.hpp"
#include "cubekit/labels.hpp"

namespace cubekit::python {

namespace {

struct LabelOptions {
    int connectivity = 8;  // label_components' default
};
template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, LabelOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.connectivity, Field{.name = "connectivity",
                                .doc = "neighbours: 8 (all around) or 4 (sharing an edge)", .one_of = {4, 8}});
}

struct RemoveOptions {
    std::int64_t min_size = 64;  // scikit-image's default of remove_small_objects
    int connectivity = 8;
};
template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, RemoveOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.min_size, Field{.name = "min_size", .doc = "components of fewer pixels are zeroed (0 or 1 = none)",
                            .min = 0});
    visit(o.connectivity, Field{.name = "connectivity",
                                .doc = "neighbours: 8 (all around) or 4 (sharing an edge)", .one_of = {4, 8}});
}

/// Every band's statistics as one (n, 5) int64 array per band: size, x0, y0, x1, y1 (inclusive
/// box); the Python layer views it as a structured array.
py::list stats_tables(const ComponentStats& stats) {
    py::list out;
    for (const std::vector<ComponentInfo>& band : stats) {
        py::array_t<std::int64_t> t({py::ssize_t(band.size()), py::ssize_t(5)});
        auto w = t.mutable_unchecked<2>();
        for (std::size_t i = 0; i < band.size(); ++i) {
            const ComponentInfo& c = band[i];
            const std::int64_t row[5] = {c.size, c.x0, c.y0, c.x1, c.y1};
            for (int k = 0; k < 5; ++k) w(py::ssize_t(i), k) = row[k];
        }
        out.append(t);
    }
    return out;
}

/// label_components(ctx, image, out, keywords, progress) -> (labels, per-band tables).
py::tuple label_binding(PyContext& c, py::handle image, py::object out, const py::dict& keywords,
                        py::object progress) {
    const int connectivity = options_from<LabelOptions>(keywords, "label").connectivity;
    const ArrayView in = array_view(image, "label", "image");
    if (out.is_none()) {
        Components r = c.run(std::move(progress),
                             [&](const Context& ctx) { return label_components(ctx, in.view, connectivity); });
        return py::make_tuple(to_numpy(std::move(r.labels), in.ndim == 2), stats_tables(r.per_band));
    }
    const MutableArrayView ov = mutable_array_view(out, "label", "out");
    check_out("label", ov, in.view.width(), in.view.height(), in.view.bands(), DType::I32);
    ComponentStats stats;
    if (in_context_memory(c.context(), ov.view)) {
        stats = c.run(std::move(progress),
                      [&](const Context& ctx) { return label_components_into(ctx, in.view, ov.view, connectivity); });
    } else {
        stats = c.run(std::move(progress), [&](const Context& ctx) {
            Components r = label_components(ctx, in.view, connectivity);
            copy_cube(ctx, r.labels, ov.view);
            ctx.synchronize();
            return std::move(r.per_band);
        });
    }
    return py::make_tuple(out, stats_tables(stats));
}

/// remove_small_objects(ctx, mask, out, keywords, progress) -> the cleaned mask (out when given).
py::object remove_binding(PyContext& c, py::handle mask, py::object out, const py::dict& keywords,
                          py::object progress) {
    const RemoveOptions o = options_from<RemoveOptions>(keywords, "remove_small_objects");
    const ArrayView in = array_view(mask, "remove_small_objects", "mask");
    const auto host = [&](const Context& ctx) {
        return remove_small_components(ctx, in.view, o.min_size, o.connectivity);
    };
    if (out.is_none()) return py::object(to_numpy(c.run(std::move(progress), host), in.ndim == 2));
    const MutableArrayView ov = mutable_array_view(out, "remove_small_objects", "out");
    check_out("remove_small_objects", ov, in.view.width(), in.view.height(), in.view.bands(), DType::U8);
    return run_into(
        c, std::move(progress), ov, out,
        [&](const Context& ctx, const MutableCubeView& v) {
            remove_small_components_into(ctx, in.view, v, o.min_size, o.connectivity);
        },
        host);
}

/// label_tiled(ctx, image or path, keywords, tiles, progress) -> (labels, tables, tiled dict).
py::tuple label_tiled_binding(PyContext& c, py::handle image, const py::dict& keywords, const py::dict& tiles,
                              py::object progress) {
    const int connectivity = options_from<LabelOptions>(keywords, "label").connectivity;
    const TiledInput in = tiled_input(image, "label");
    const TileOptions t = tile_options_from(tiles);
    auto [labels, r] = c.run(std::move(progress), [&](const Context& ctx) {
        Cube l(in.width(), in.height(), in.bands(), DType::I32);
        ComponentsTiled r = in.file ? label_components_tiled(ctx, *in.file, l.mutable_view(), connectivity, t)
                                    : label_components_tiled(ctx, in.array->view, l.mutable_view(), connectivity, t);
        return std::make_pair(std::move(l), std::move(r));
    });
    const bool squeeze = in.array ? in.array->ndim == 2 : in.bands() == 1;
    return py::make_tuple(to_numpy(std::move(labels), squeeze), stats_tables(r.per_band), tiled_dict(r.run));
}

/// remove_small_objects_tiled(ctx, mask or path, keywords, tiles, progress) -> (mask, tiled dict).
py::tuple remove_tiled_binding(PyContext& c, py::handle mask, const py::dict& keywords, const py::dict& tiles,
                               py::object progress) {
    const RemoveOptions o = options_from<RemoveOptions>(keywords, "remove_small_objects");
    const TiledInput in = tiled_input(mask, "remove_small_objects");
    const TileOptions t = tile_options_from(tiles);
    auto [out, run] = c.run(std::move(progress), [&](const Context& ctx) {
        Cube m(in.width(), in.height(), in.bands(), DType::U8);
        TiledRun r = in.file ? remove_small_components_tiled(ctx, *in.file, m.mutable_view(), o.min_size, o.connectivity, t)
                             : remove_small_components_tiled(ctx, in.array->view, m.mutable_view(), o.min_size, o.connectivity, t);
        return std::make_pair(std::move(m), r);
    });
    const bool squeeze = in.array ? in.array->ndim == 2 : in.bands() == 1;
    return py::make_tuple(to_numpy(std::move(out), squeeze), tiled_dict(run));
}

// ---- The piece API (cubekit.dask): a piece's summary as a dict of NumPy arrays (picklable) ----------

py::dict piece_dict(const LabelPiece& p) {
    py::dict d;
    d["x0"] = p.x0, d["y0"] = p.y0, d["width"] = p.width, d["height"] = p.height;
    d["stats"] = stats_tables(p.per_band);
    const std::size_t bands = p.edge_labels.size(), edge = 2 * std::size_t(p.width) + 2 * std::size_t(p.height);
    py::array_t<std::int32_t> labels({py::ssize_t(bands), py::ssize_t(edge)});
    py::array_t<std::int64_t> values({py::ssize_t(bands), py::ssize_t(edge)});
    for (std::size_t b = 0; b < bands; ++b)
        for (std::size_t i = 0; i < edge; ++i) {
            labels.mutable_at(py::ssize_t(b), py::ssize_t(i)) = p.edge_labels[b][i];
            values.mutable_at(py::ssize_t(b), py::ssize_t(i)) = p.edge_values[b][i];
        }
    d["edge_labels"] = labels, d["edge_values"] = values;
    return d;
}

LabelPiece piece_from(const py::dict& d) {
    LabelPiece p{.x0 = d["x0"].cast<int>(), .y0 = d["y0"].cast<int>(), .width = d["width"].cast<int>(),
                 .height = d["height"].cast<int>()};
    for (py::handle t : d["stats"].cast<py::list>()) {
        const auto a = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(t);
        if (!a || a.ndim() != 2 || a.shape(1) != 5) throw InvalidInput("merge_label_pieces: a piece's stats are not (n, 5) int64 tables");
        std::vector<ComponentInfo>& band = p.per_band.emplace_back();
        for (py::ssize_t i = 0; i < a.shape(0); ++i)
            band.push_back({a.at(i, 0), int(a.at(i, 1)), int(a.at(i, 2)), int(a.at(i, 3)), int(a.at(i, 4))});
    }
    const auto labels = py::array_t<std::int32_t, py::array::c_style | py::array::forcecast>::ensure(d["edge_labels"]);
    const auto values = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(d["edge_values"]);
    if (!labels || !values || labels.ndim() != 2 || values.ndim() != 2)
        throw InvalidInput("merge_label_pieces: a piece's edges are not (bands, pixels) arrays");
    for (py::ssize_t b = 0; b < labels.shape(0); ++b)
        p.edge_labels.emplace_back(labels.data(b, 0), labels.data(b, 0) + labels.shape(1));
    for (py::ssize_t b = 0; b < values.shape(0); ++b)
        p.edge_values.emplace_back(values.data(b, 0), values.data(b, 0) + values.shape(1));
    return p;
}

/// label_piece(ctx, piece, x0, y0, keywords) -> (local labels, summary dict). Host arrays.
py::tuple label_piece_binding(PyContext& c, py::handle piece, int x0, int y0, const py::dict& keywords) {
    const int connectivity = options_from<LabelOptions>(keywords, "label").connectivity;
    const ArrayView in = array_view(piece, "label_piece", "piece");
    auto [labels, p] = c.run(py::none(), [&](const Context& ctx) {
        const CubeShape shape{in.view.width(), in.view.height(), in.view.bands(), DType::I32, Layout::BSQ};
        Cube l(shape.width, shape.height, shape.bands, shape.dtype);
        LabelPiece p;
        if (ctx.is_cuda()) {
            DeviceCube d(ctx, shape);
            p = label_piece(ctx, in.view, x0, y0, d.mutable_view(), connectivity);
            copy_cube(ctx, d.view(), l.mutable_view());
        } else {
            p = label_piece(ctx, in.view, x0, y0, l.mutable_view(), connectivity);
        }
        return std::make_pair(std::move(l), std::move(p));
    });
    return py::make_tuple(to_numpy(std::move(labels), in.ndim == 2), piece_dict(p));
}

/// merge_label_pieces(list of summary dicts, width, height, connectivity) -> (per-piece list of
/// per-band relabel arrays, per-band tables).
py::tuple merge_binding(const py::list& summaries, int width, int height, int connectivity) {
    std::vector<LabelPiece> pieces;
    for (py::handle d : summaries) pieces.push_back(piece_from(d.cast<py::dict>()));
    const LabelMerge m = [&] {
        py::gil_scoped_release release;
        return merge_label_pieces(pieces, width, height, connectivity);
    }();
    py::list tables;
    for (const auto& piece : m.relabel) {
        py::list bands;
        for (const auto& t : piece) bands.append(py::array_t<std::int32_t>(py::ssize_t(t.size()), t.data()));
        tables.append(bands);
    }
    return py::make_tuple(tables, stats_tables(m.per_band));
}

}  // namespace

void bind_labels(py::module_& m) {
    m.def("label_tiled", &label_tiled_binding);
    m.def("remove_small_objects_tiled", &remove_tiled_binding);
    m.def("label_piece", &label_piece_binding);
    m.def("merge_label_pieces", &merge_binding);
    m.def("label_declarations", &declarations<LabelOptions>);
    m.def("label", &label_binding);
    m.def("remove_small_objects_declarations", &declarations<RemoveOptions>);
    m.def("remove_small_objects", &remove_binding);
}

}  // namespace cubekit::python
