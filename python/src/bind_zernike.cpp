// Zernike moments and reconstruction (cubekit/zernike.hpp).
#include <pybind11/complex.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "cubekit/zernike.hpp"

namespace cubekit::python {

namespace {

// What was asked: a whole set (n ≤ a), an order (a), a moment (a, b) or a list.
struct Request {
    std::string kind;
    int a = 0, b = 0;
    std::vector<ZernikeIndex> list;
};

Request request_from(const std::string& kind, int a, int b, const std::vector<std::pair<int, int>>& list) {
    Request r{kind, a, b, {}};
    for (const auto& [n, m] : list) r.list.push_back({n, m});
    if (kind != "set" && kind != "order" && kind != "moment" && kind != "moments")
        throw InvalidInput("zernike_moments: request '" + kind + "'");
    return r;
}

ZernikeMoments compute(const Context& ctx, const CubeView& v, const Request& r, const ZernikeOptions& o) {
    if (r.kind == "set") return zernike_set(ctx, v, r.a, o);
    if (r.kind == "order") return zernike_order(ctx, v, r.a, o);
    if (r.kind == "moment") return zernike_moment(ctx, v, r.a, r.b, o);
    return zernike_moments(ctx, v, r.list, o);
}

ZernikeMomentsInfo compute_into(const Context& ctx, const CubeView& v, const Request& r, const MutableCubeView& out,
                                const ZernikeOptions& o) {
    if (r.kind == "set") return zernike_set_into(ctx, v, r.a, out, o);
    if (r.kind == "order") return zernike_order_into(ctx, v, r.a, out, o);
    if (r.kind == "moment") return zernike_moment_into(ctx, v, r.a, r.b, out, o);
    return zernike_moments_into(ctx, v, r.list, out, o);
}

ZernikeTiled compute_tiled(const Context& ctx, const ImageStack& s, const Request& r, const MutableCubeView& out,
                           const ZernikeOptions& o, const TileOptions& t) {
    if (r.kind == "set") return zernike_set_tiled(ctx, s, r.a, out, o, t);
    if (r.kind == "order") return zernike_order_tiled(ctx, s, r.a, out, o, t);
    if (r.kind == "moment") return zernike_moment_tiled(ctx, s, r.a, r.b, out, o, t);
    return zernike_moments_tiled(ctx, s, r.list, out, o, t);
}

std::size_t count_of(const Request& r) {
    if (r.kind == "set") return zernike_set_size(r.a);
    if (r.kind == "order") return r.a < 0 ? 0 : std::size_t(r.a / 2 + 1);
    if (r.kind == "moment") return 1;
    return r.list.size();
}

py::dict disk_dict(const ZernikeDisk& d) {
    py::dict out;
    out["mapping"] = std::string(zernike_mapping_name(d.mapping));
    out["normalization"] = std::string(zernike_normalization_name(d.normalization));
    out["center"] = py::make_tuple(d.center_x, d.center_y);
    out["radius"] = d.radius;
    out["pixel_count"] = d.pixel_count;
    out["symmetric"] = d.symmetric;
    out["denominator"] = d.denominator;
    return out;
}

// The scalar fields of a result (the CLI's JSON names where it has them).
py::dict info_dict(const ZernikeMomentsInfo& info, const ZernikeOptions& o, const Context& ctx) {
    py::dict d;
    std::vector<std::pair<int, int>> indices;
    for (const ZernikeIndex& z : info.indices) indices.emplace_back(z.n, z.m);
    d["indices"] = indices;
    d["width"] = info.width;
    d["height"] = info.height;
    d["images"] = info.images;
    d["method"] = std::string(zernike_method_name(info.method));
    d["precision"] = std::string(zernike_precision_name(info.precision));
    d["symmetric"] = info.symmetric;
    d["disk"] = disk_dict(info.disk);
    d["warnings"] = info.warnings;
    d["parameters"] = parameters(o);
    d["backend"] = std::string(ctx.backend_name());
    return d;
}

// The moments of a result as the library's host object (values (images, count) complex128).
ZernikeMoments moments_from(py::array_t<std::complex<double>, py::array::c_style | py::array::forcecast> values,
                            const std::vector<std::pair<int, int>>& indices, int width, int height,
                            const ZernikeOptions& o) {
    if (values.ndim() != 2 || std::size_t(values.shape(1)) != indices.size())
        throw InvalidInput("zernike_reconstruct: values must be (images, " + std::to_string(indices.size()) + ")");
    ZernikeMoments z;
    z.width = width;
    z.height = height;
    z.images = int(values.shape(0));
    for (const auto& [n, m] : indices) z.indices.push_back({n, m});
    z.disk = zernike_disk(width, height, o);
    z.values.assign(values.data(), values.data() + values.size());
    return z;
}

}  // namespace

void bind_zernike(py::module_& m) {
    m.def("zernike_declarations", &declarations<ZernikeOptions>);
    m.def("zernike_set_size", &zernike_set_size);
    // -> (values, info): values a new NumPy complex128 (images, count) array, or `out` (a float64
    // (images, count, 2) device or host array the caller views as complex) filled in place.
    m.def("zernike_moments", [](PyContext& c, py::handle images, py::object out, const std::string& kind, int a, int b,
                                const std::vector<std::pair<int, int>>& list, const py::dict& keywords,
                                py::object progress) -> py::tuple {
        const ZernikeOptions o = options_from<ZernikeOptions>(keywords, "zernike_moments");
        const Request r = request_from(kind, a, b, list);
        const ArrayView in = array_view(images, "zernike_moments", "images");
        if (out.is_none()) {
            ZernikeMoments z = c.run(std::move(progress), [&](const Context& ctx) { return compute(ctx, in.view, r, o); });
            auto* values = new std::vector<std::complex<double>>(std::move(z.values));
            py::capsule owner(values, [](void* p) { delete static_cast<std::vector<std::complex<double>>*>(p); });
            py::array arr(py::dtype("complex128"), std::vector<py::ssize_t>{z.images, py::ssize_t(z.count())},
                          values->data(), owner);
            return py::make_tuple(arr, info_dict(z, o, c.context()));
        }
        const MutableArrayView ov = mutable_array_view(out, "zernike_moments", "out");
        check_out("zernike_moments", ov, int(count_of(r)), in.view.bands(), 2, DType::F64);
        if (!in_context_memory(c.context(), ov.view))
            throw InvalidInput("zernike_moments: out is not in the memory of the device that computes");
        const ZernikeMomentsInfo info =
            c.run(std::move(progress), [&](const Context& ctx) { return compute_into(ctx, in.view, r, ov.view, o); });
        return py::make_tuple(out, info_dict(info, o, c.context()));
    });
    // -> (values, info): the moments in groups of images (the tile keywords; a NumPy input), values a
    // new NumPy complex128 (images, count) array, info with "tiled".
    m.def("zernike_moments_tiled", [](PyContext& c, py::handle images, const std::string& kind, int a, int b,
                                      const std::vector<std::pair<int, int>>& list, const py::dict& keywords,
                                      const py::dict& tiles, py::object progress) -> py::tuple {
        const ZernikeOptions o = options_from<ZernikeOptions>(keywords, "zernike_moments");
        const Request r = request_from(kind, a, b, list);
        const ArrayView in = array_view(images, "zernike_moments", "images");
        const TileOptions t = tile_options_from(tiles);
        const std::size_t count = count_of(r);
        auto* values = new std::vector<std::complex<double>>(std::size_t(in.view.bands()) * count);
        py::capsule owner(values, [](void* p) { delete static_cast<std::vector<std::complex<double>>*>(p); });
        const CubeShape s = zernike_moments_shape(in.view.bands(), int(count));
        const MutableCubeView out = MutableCubeView::host(values->data(), s.width, s.height, s.bands, s.dtype,
                                                          dense_strides(s.width, s.height, s.bands, s.layout));
        const ZernikeTiled z = c.run(std::move(progress), [&](const Context& ctx) {
            return compute_tiled(ctx, image_stack(in.view), r, out, o, t);
        });
        py::array arr(py::dtype("complex128"), std::vector<py::ssize_t>{in.view.bands(), py::ssize_t(count)},
                      values->data(), owner);
        py::dict info = info_dict(z.info, o, c.context());
        info["tiled"] = tiled_dict(z.run);
        return py::make_tuple(arr, info);
    });
    // -> (H, W, images) float64 NumPy array, or `out` filled in place.
    m.def("zernike_reconstruct", [](PyContext& c, py::object values, const std::vector<std::pair<int, int>>& indices,
                                    int width, int height, int max_order, py::object out, const py::dict& keywords) {
        const ZernikeOptions o = options_from<ZernikeOptions>(keywords, "zernike_reconstruct");
        const ZernikeMoments z = moments_from(values, indices, width, height, o);
        if (out.is_none())
            return py::object(to_numpy(
                c.run(py::none(), [&](const Context& ctx) { return zernike_reconstruct(ctx, z, max_order); }), false));
        const MutableArrayView ov = mutable_array_view(out, "zernike_reconstruct", "out");
        check_out("zernike_reconstruct", ov, width, height, z.images, DType::F64);
        return run_into(
            c, py::none(), ov, out,
            [&](const Context& ctx, const MutableCubeView& v) { zernike_reconstruct_into(ctx, z, z.disk, v, max_order); },
            [&](const Context& ctx) { return zernike_reconstruct(ctx, z, max_order); });
    });
    m.def("zernike_reconstruction_error", [](py::handle original, py::handle reconstruction, int width, int height,
                                             const py::dict& keywords) {
        const ZernikeOptions o = options_from<ZernikeOptions>(keywords, "zernike_reconstruction_error");
        const ArrayView a = array_view(original, "zernike_reconstruction_error", "original");
        const ArrayView r = array_view(reconstruction, "zernike_reconstruction_error", "reconstruction");
        return zernike_reconstruction_error(a.view, r.view, zernike_disk(width, height, o));
    });
}

}  // namespace cubekit::python
