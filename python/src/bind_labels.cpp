// Connected components (cubekit/labels.hpp): labelling with per-band statistics, and the removal
// of small components. The library takes connectivity and min_size as plain arguments; their
// keywords are declared here like an options struct so that the Python signatures, defaults and
// checks come from one place.
#include <cstdint>

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

}  // namespace

void bind_labels(py::module_& m) {
    m.def("label_declarations", &declarations<LabelOptions>);
    m.def("label", &label_binding);
    m.def("remove_small_objects_declarations", &declarations<RemoveOptions>);
    m.def("remove_small_objects", &remove_binding);
}

}  // namespace cubekit::python
