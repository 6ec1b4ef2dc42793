// The watershed family (cubekit/watershed.hpp): the watershed with markers and a mask, its boundary
// map, the RCMG → watershed segmentation and the per-region statistics. The Python layer
// (python/cubekit/_watershed.py) hands volumes over as (H, W, D) views of the user's (D, H, W)
// arrays, converts int64 markers, and splits segment()'s keywords between the RCMG and the watershed.
#include <pybind11/numpy.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "bindings.hpp"
#include "cubekit/error.hpp"
#include "cubekit/gradient.hpp"
#include "cubekit/watershed.hpp"

namespace cubekit::python {

namespace {

/// The optional markers and mask as views (kept alive by the ArrayViews).
struct Seeds {
    std::optional<ArrayView> markers, mask;
    Seeds(py::object m, py::object k, const char* function) {
        if (!m.is_none()) markers = array_view(m, function, "markers");
        if (!k.is_none()) mask = array_view(k, function, "mask");
    }
    WatershedInputs inputs() const {
        return {.markers = markers ? &markers->view : nullptr, .mask = mask ? &mask->view : nullptr};
    }
};

/// The region table as columns named as the CLI's --regions-out; the Python layer assembles the
/// structured array.
py::dict region_columns(const std::vector<RegionStats>& stats, int bands) {
    std::vector<std::int64_t> label, area, x0, y0, x1, y1;
    std::vector<double> cx, cy, gradient, spectrum;
    for (const RegionStats& r : stats) {
        label.push_back(r.label);
        area.push_back(r.area);
        x0.push_back(r.x0), y0.push_back(r.y0), x1.push_back(r.x1), y1.push_back(r.y1);
        cx.push_back(r.centroid_x), cy.push_back(r.centroid_y);
        gradient.push_back(r.mean_gradient);
        spectrum.insert(spectrum.end(), r.mean_spectrum.begin(), r.mean_spectrum.end());
    }
    const py::ssize_t n = py::ssize_t(stats.size());
    py::dict d;
    d["label"] = array_of(label, {n});
    d["area"] = array_of(area, {n});
    d["x0"] = array_of(x0, {n});
    d["y0"] = array_of(y0, {n});
    d["x1"] = array_of(x1, {n});
    d["y1"] = array_of(y1, {n});
    d["centroid_x"] = array_of(cx, {n});
    d["centroid_y"] = array_of(cy, {n});
    d["mean_gradient"] = array_of(gradient, {n});
    d["mean_spectrum"] = array_of(spectrum, {n, py::ssize_t(bands)});
    return d;
}

// ---- The piece API (cubekit.dask.watershed) -------------------------------------------------------

/// A tile of a width × height scene from its core rectangle, read with a 1-pixel halo.
Tile tile_of(int width, int height, py::tuple core) {
    const int x0 = core[0].cast<int>(), y0 = core[1].cast<int>(), w = core[2].cast<int>(), h = core[3].cast<int>();
    const std::vector<Tile> t = plan_tiles(w, h, w, h, 0);  // checks the sizes
    (void)t;
    Tile tile{x0, y0, w, h};
    tile.read_x0 = std::max(0, x0 - 1), tile.read_y0 = std::max(0, y0 - 1);
    tile.read_width = std::min(width, x0 + w + 1) - tile.read_x0;
    tile.read_height = std::min(height, y0 + h + 1) - tile.read_y0;
    return tile;
}

template <class T>
std::vector<T> vector_of(py::handle a, const char* what) {
    const auto arr = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(a);
    if (!arr || arr.ndim() != 1) throw InvalidInput(std::string("watershed: ") + what + " is not a 1-D array");
    return std::vector<T>(arr.data(), arr.data() + arr.size());
}

/// watershed_piece(ctx, window, mask window or None, (width, height), core (x0, y0, w, h), seeds,
/// connectivity) -> (labels of the window as NumPy int32, ring_d, ring_labels, class_cells, class_joined).
py::tuple piece_binding(PyContext& c, py::handle window, py::object mask, py::tuple scene, py::tuple core,
                        py::handle seeds, int connectivity) {
    const ArrayView in = array_view(window, "watershed_piece", "window");
    std::optional<ArrayView> m;
    if (!mask.is_none()) m = array_view(mask, "watershed_piece", "mask");
    const int width = scene[0].cast<int>(), height = scene[1].cast<int>();  // read here: c.run releases the GIL
    const Tile tile = tile_of(width, height, core);
    const std::vector<std::uint32_t> s = vector_of<std::uint32_t>(seeds, "seeds");
    auto [labels, p] = c.run(py::none(), [&](const Context& ctx) {
        const CubeShape shape{in.view.width(), in.view.height(), 1, DType::I32, Layout::BSQ};
        Cube l(shape.width, shape.height, 1, DType::I32);
        WatershedPiece p;
        if (ctx.is_cuda()) {
            DeviceCube d(ctx, shape);
            p = watershed_piece(ctx, tile, width, in.view, m ? &m->view : nullptr, s, connectivity, d.mutable_view());
            copy_cube(ctx, d.view(), l.mutable_view());
        } else {
            p = watershed_piece(ctx, tile, width, in.view, m ? &m->view : nullptr, s, connectivity, l.mutable_view());
        }
        return std::make_pair(std::move(l), std::move(p));
    });
    const auto n = [](const auto& v) { return std::vector<py::ssize_t>{py::ssize_t(v.size())}; };
    return py::make_tuple(to_numpy(std::move(labels), true), array_of(p.ring_d, n(p.ring_d)),
                          array_of(p.ring_labels, n(p.ring_labels)), array_of(p.class_cells, n(p.class_cells)),
                          array_of(p.class_joined, n(p.class_joined)));
}

void bind_exchange(py::module_& m) {
    py::class_<WatershedExchange>(m, "WatershedExchange")
        .def(py::init([](int width, int height, const py::list& cores) {
            std::vector<Tile> tiles;
            for (py::handle core : cores) tiles.push_back(tile_of(width, height, core.cast<py::tuple>()));
            return WatershedExchange(width, height, tiles);
        }))
        .def("__len__", &WatershedExchange::size)
        .def("seeds", [](const WatershedExchange& e, std::size_t i) {
            const std::vector<std::uint32_t> s = e.seeds(i);
            return array_of(s, {py::ssize_t(s.size())});
        })
        .def("report", [](WatershedExchange& e, std::size_t i, py::handle ring_d, py::handle ring_labels,
                          py::handle class_cells, py::handle class_joined) {
            e.report(i, WatershedPiece{vector_of<std::uint32_t>(ring_d, "ring_d"), vector_of<std::int32_t>(ring_labels, "ring_labels"),
                                       vector_of<std::int64_t>(class_cells, "class_cells"),
                                       vector_of<std::int32_t>(class_joined, "class_joined")});
        })
        .def("dirty", &WatershedExchange::dirty)
        .def("join", [](const WatershedExchange& e) {
            const WatershedExchange::Join j = e.join();
            py::list tables;
            for (const std::vector<std::int32_t>& t : j.tables) tables.append(array_of(t, {py::ssize_t(t.size())}));
            return py::make_tuple(tables, j.regions);
        });
}

/// watershed(ctx, image, markers, mask, out, keywords, progress) -> (labels, regions). Without out
/// a new NumPy array; with out (of the input's kind) the labels go there, through watershed_into
/// where out lives on the context's side (device arrays: nothing leaves the device).
py::tuple watershed_binding(PyContext& c, py::handle image, py::object markers, py::object mask, py::object out,
                            const py::dict& keywords, py::object progress) {
    const WatershedOptions o = options_from<WatershedOptions>(keywords, "watershed");
    const ArrayView in = array_view(image, "watershed", "image");
    const Seeds seeds(std::move(markers), std::move(mask), "watershed");
    if (out.is_none()) {
        WatershedResult r = c.run(std::move(progress),
                                  [&](const Context& ctx) { return watershed(ctx, in.view, o, seeds.inputs()); });
        return py::make_tuple(to_numpy(std::move(r.labels), in.ndim == 2), r.regions);
    }
    const MutableArrayView ov = mutable_array_view(out, "watershed", "out");
    check_out("watershed", ov, in.view.width(), in.view.height(), in.view.bands(), DType::I32);
    const std::int64_t regions = c.run(std::move(progress), [&](const Context& ctx) {
        if (in_context_memory(ctx, ov.view)) return watershed_into(ctx, in.view, ov.view, o, seeds.inputs());
        const WatershedResult r = watershed(ctx, in.view, o, seeds.inputs());
        copy_cube(ctx, r.labels, ov.view);
        ctx.synchronize();
        return r.regions;
    });
    return py::make_tuple(out, regions);
}

/// watershed_boundary(ctx, labels, connectivity, volume) -> u8 NumPy array of the labels' shape.
py::array boundary_binding(PyContext& c, py::handle labels, int connectivity, bool volume) {
    const ArrayView in = array_view(labels, "watershed_boundary", "labels");
    Cube b = c.run(py::none(), [&](const Context& ctx) { return watershed_boundary(ctx, in.view, connectivity, volume); });
    return to_numpy(std::move(b), in.ndim == 2);
}

/// segment(ctx, cube, markers, mask, gradient_out, labels_out, rcmg_keywords, watershed_keywords,
/// statistics, progress) -> {gradient, labels, regions, table}. Without outs: the library's
/// segment(), NumPy results. With outs (device arrays of the input's kind): rcmg_into then
/// watershed_into on them — what segment() does on the device, the gradient never leaving it.
py::dict segment_binding(PyContext& c, py::handle cube, py::object markers, py::object mask, py::object gradient_out,
                         py::object labels_out, const py::dict& rcmg_keywords, const py::dict& watershed_keywords,
                         bool statistics, py::object progress) {
    const RcmgOptions ro = options_from<RcmgOptions>(rcmg_keywords, "segment");
    const WatershedOptions wo = options_from<WatershedOptions>(watershed_keywords, "segment");
    const ArrayView in = array_view(cube, "segment", "cube");
    const Seeds seeds(std::move(markers), std::move(mask), "segment");
    const int W = in.view.width(), H = in.view.height();
    py::dict d;
    std::vector<RegionStats> table;
    if (gradient_out.is_none() != labels_out.is_none())
        throw InvalidInput("segment: give both gradient_out and labels_out, or neither");
    if (gradient_out.is_none()) {
        SegmentResult r = c.run(std::move(progress), [&](const Context& ctx) {
            SegmentResult s = segment(ctx, in.view, ro, wo, seeds.inputs());
            if (statistics) {
                const CubeView gv = s.gradient.view();
                table = region_statistics(ctx, s.labels, &in.view, &gv);
            }
            return s;
        });
        d["regions"] = r.regions;
        d["gradient"] = to_numpy(std::move(r.gradient));
        d["labels"] = to_numpy(std::move(r.labels));
    } else {
        const MutableArrayView g = mutable_array_view(gradient_out, "segment", "gradient_out");
        const MutableArrayView l = mutable_array_view(labels_out, "segment", "labels_out");
        check_out("segment", g, W, H, 1, ro.out_type);
        check_out("segment", l, W, H, 1, DType::I32);
        const std::int64_t regions = c.run(std::move(progress), [&](const Context& ctx) {
            if (in_context_memory(ctx, g.view) && in_context_memory(ctx, l.view)) {
                rcmg_into(ctx, in.view, g.view, ro);
                const std::int64_t n = watershed_into(ctx, g.view, l.view, wo, seeds.inputs());
                if (statistics) {
                    const CubeView gv = g.view;
                    table = region_statistics(ctx, l.view, &in.view, &gv);
                }
                return n;
            }
            const SegmentResult s = segment(ctx, in.view, ro, wo, seeds.inputs());
            copy_cube(ctx, s.gradient, g.view);
            copy_cube(ctx, s.labels, l.view);
            ctx.synchronize();
            if (statistics) {
                const CubeView gv = s.gradient.view();
                table = region_statistics(ctx, s.labels, &in.view, &gv);
            }
            return s.regions;
        });
        d["regions"] = regions;
        d["gradient"] = gradient_out;
        d["labels"] = labels_out;
    }
    d["table"] = statistics ? py::object(region_columns(table, in.view.bands())) : py::object(py::none());
    return d;
}

/// region_statistics(ctx, labels, cube (an array, a file path: read a strip of rows at a time within
/// memory_limit bytes, or None), gradient or None, memory_limit) -> columns.
py::dict region_statistics_binding(PyContext& c, py::handle labels, py::object cube, py::object gradient,
                                   py::object memory_limit) {
    py::dict limit;
    limit["memory_limit"] = memory_limit;  // None, a byte count or "512M", as the tiled calls take it
    const std::size_t strip_bytes = tile_options_from(limit).memory_limit;
    const ArrayView l = array_view(labels, "region_statistics", "labels");
    std::optional<TiledInput> k;
    std::optional<ArrayView> g;
    if (!cube.is_none()) k = tiled_input(cube, "region_statistics");
    if (!gradient.is_none()) g = array_view(gradient, "region_statistics", "gradient");
    const CubeView* gv = g ? &g->view : nullptr;
    const std::vector<RegionStats> table = c.run(py::none(), [&](const Context& ctx) {
        if (k && k->file) return region_statistics(ctx, l.view, *k->file, gv, strip_bytes);
        return region_statistics(ctx, l.view, k ? &k->array->view : nullptr, gv);
    });
    return region_columns(table, k ? k->bands() : 0);
}

}  // namespace

void bind_watershed(py::module_& m) {
    m.def("watershed_declarations", &declarations<WatershedOptions>);
    m.def("watershed", &watershed_binding);
    m.def("watershed_boundary", &boundary_binding);
    m.def("watershed_piece", &piece_binding);
    bind_exchange(m);
    // Tiles (issue 17): image = a NumPy array or a file path (read by windows); mask a NumPy array or
    // None; tiles as rcmg_tiled's. Returns (labels, regions, tiled dict with "rounds").
    m.def("watershed_tiled", [](PyContext& c, py::handle image, py::object mask, const py::dict& keywords,
                                const py::dict& tiles, py::object progress) {
        const WatershedOptions o = options_from<WatershedOptions>(keywords, "watershed");
        const TileOptions t = tile_options_from(tiles);
        const TiledInput in = tiled_input(image, "watershed");
        const Seeds seeds(py::none(), mask, "watershed");
        auto [labels, r] = c.run(std::move(progress), [&](const Context& ctx) {
            Cube l = Cube::uninitialized(in.width(), in.height(), 1, DType::I32);
            WatershedTiled w = in.file ? watershed_tiled(ctx, *in.file, l.mutable_view(), o, seeds.inputs(), t)
                                       : watershed_tiled(ctx, in.array->view, l.mutable_view(), o, seeds.inputs(), t);
            return std::make_pair(std::move(l), w);
        });
        py::dict run = tiled_dict(r.run);
        run["rounds"] = r.rounds;
        return py::make_tuple(to_numpy(std::move(labels), true), r.regions, run);
    });

    m.def("segment", &segment_binding);
    m.def("region_statistics", &region_statistics_binding);
}

}  // namespace cubekit::python
