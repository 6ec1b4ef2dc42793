// RCMG (cubekit/gradient.hpp).
#include <chrono>
#include <optional>

#include "bindings.hpp"
#include "cubekit/gradient.hpp"
#include "cubekit/io.hpp"
#include "cubekit/tiles.hpp"

namespace cubekit::python {

void bind_gradient(py::module_& m) {
    m.def("rcmg_declarations", &declarations<RcmgOptions>);
    m.def("rcmg", [](PyContext& c, py::handle cube, py::object out, const py::dict& keywords, py::object progress) {
        const RcmgOptions o = options_from<RcmgOptions>(keywords, "rcmg");
        const ArrayView in = array_view(cube, "rcmg", "cube");
        if (out.is_none())
            return py::object(to_numpy(c.run(std::move(progress), [&](const Context& ctx) { return rcmg(ctx, in.view, o); })));
        const MutableArrayView ov = mutable_array_view(out, "rcmg", "out");
        check_out("rcmg", ov, in.view.width(), in.view.height(), 1, o.out_type);
        return run_into(c, std::move(progress), ov, out,
                        [&](const Context& ctx, const MutableCubeView& v) { rcmg_into(ctx, in.view, v, o); },
                        [&](const Context& ctx) { return rcmg(ctx, in.view, o); });
    });
    // Benchmark helper (bench/python/binding_overhead.py): seconds per call of rcmg_into alone,
    // called n times from C++ without the GIL — the library's own per-call cost, which the
    // binding's overhead is measured against.
    m.def("_time_rcmg_into", [](PyContext& c, py::handle cube, py::handle out, int n) {
        const ArrayView in = array_view(cube, "rcmg", "cube");
        const MutableArrayView ov = mutable_array_view(out, "rcmg", "out");
        return c.run(py::none(), [&](const Context& ctx) {
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < n; ++i) rcmg_into(ctx, in.view, ov.view, RcmgOptions{});
            ctx.synchronize();
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n;
        });
    });
    // Tiles (issue 17): cube = a NumPy array or a file path (read by windows); tiles = {memory_limit,
    // device_memory_limit (bytes or "64M"), devices (list), tile_size ((w, h)), lanes}. Returns
    // (gradient, {"tiles", "tile_width", "tile_height", "peak_bytes", "device_peak_bytes", "devices"}).
    // rcmg_tiled(ctx, cube or path, keywords, tiles, progress, out or None) -> (gradient, tiled dict): `out`
    // (a host NumPy array, e.g. a memmap) is filled in place and returned.
    m.def("rcmg_tiled", [](PyContext& c, py::handle cube, const py::dict& keywords, const py::dict& tiles, py::object progress,
                           py::object out) {
        const RcmgOptions o = options_from<RcmgOptions>(keywords, "rcmg");
        const TileOptions t = tile_options_from(tiles);
        const TiledInput in = tiled_input(cube, "rcmg");
        std::optional<MutableArrayView> ov;
        if (!out.is_none()) {
            ov = mutable_array_view(out, "rcmg", "out");
            check_out("rcmg", *ov, in.width(), in.height(), 1, o.out_type);
        }
        auto [gradient, run] = c.run(std::move(progress), [&](const Context& ctx) {
            Cube g = ov ? Cube() : Cube::uninitialized(in.width(), in.height(), 1, o.out_type);
            const MutableCubeView target = ov ? ov->view : g.mutable_view();
            const TiledRun r = in.file ? rcmg_tiled(ctx, *in.file, target, o, t) : rcmg_tiled(ctx, in.array->view, target, o, t);
            return std::make_pair(std::move(g), r);
        });
        return py::make_tuple(ov ? out : to_numpy(std::move(gradient)), tiled_dict(run));
    });
    m.def("rcmg_implementation", [](PyContext& c, const py::dict& keywords) {
        return std::string(rcmg_implementation(c.context(), options_from<RcmgOptions>(keywords, "rcmg")));
    });
}

}  // namespace cubekit::python
