// RCMG (cubekit/gradient.hpp).
#include "bindings.hpp"
#include "cubekit/gradient.hpp"

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
    m.def("rcmg_implementation", [](PyContext& c, const py::dict& keywords) {
        return std::string(rcmg_implementation(c.context(), options_from<RcmgOptions>(keywords, "rcmg")));
    });
}

}  // namespace cubekit::python
