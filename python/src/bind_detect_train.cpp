// Training of the detection networks (cubekit/detect_train.hpp) and the synthetic scenes with a
// known answer (cubekit/synth.hpp). Training reads host views (the Python layer brings device
// arrays to the host first) and returns the model as the library's JSON text with the report's
// JSON, which the Python layer parses into dicts with the model file's names.
#include <pybind11/numpy.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "cubekit/detect_train.hpp"
#include "cubekit/error.hpp"
#include "cubekit/synth.hpp"

namespace cubekit::python {

namespace {

/// The (cube, labels) pairs as host views; `owners` keeps their memory alive.
std::vector<LabelledCube> labelled(const py::list& cubes, const py::list& labels, const char* function,
                                   std::vector<ArrayView>& owners) {
    if (cubes.size() != labels.size())
        throw InvalidInput(std::string(function) + ": labels: " + std::to_string(labels.size()) + " label images for " +
                           std::to_string(cubes.size()) + " cubes; give one per cube, in the same order");
    if (cubes.size() == 0) throw InvalidInput(std::string(function) + ": cubes: no training cube given");
    owners.reserve(cubes.size() * 2);
    std::vector<LabelledCube> data;
    for (std::size_t i = 0; i < cubes.size(); ++i) {
        const std::string suffix = cubes.size() == 1 ? "" : "[" + std::to_string(i) + "]";
        const std::string cube_name = "cubes" + suffix, label_name = "labels" + suffix;
        owners.push_back(array_view(cubes[i], function, cube_name.c_str()));
        owners.push_back(array_view(labels[i], function, label_name.c_str()));
        data.push_back({owners[owners.size() - 2].view, owners.back().view});
    }
    return data;
}

py::tuple trained(const std::string& model_json, const TrainReport& report, double seconds) {
    py::dict extra;
    extra["seconds"] = seconds;
    return py::make_tuple(model_json, to_json(report), extra);
}

/// train_rbfn(ctx, cubes, labels, target_name, keywords, progress) -> (model JSON, report JSON, extra).
py::tuple train_rbfn_binding(PyContext& c, const py::list& cubes, const py::list& labels, const std::string& target_name,
                             const py::dict& keywords, py::object progress) {
    RbfnTrainOptions o = options_from<RbfnTrainOptions>(keywords, "train_rbfn");
    o.target_name = target_name;
    std::vector<ArrayView> owners;
    const std::vector<LabelledCube> data = labelled(cubes, labels, "train_rbfn", owners);
    TrainReport report;
    const auto t0 = std::chrono::steady_clock::now();
    const RbfnModel model = c.run(std::move(progress), [&](const Context& ctx) { return train_rbfn(ctx, data, o, &report); });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return trained(to_json(model), report, seconds);
}

py::tuple train_multires_binding(PyContext& c, const py::list& cubes, const py::list& labels, const py::dict& keywords,
                                 py::object progress) {
    const MultiresTrainOptions o = options_from<MultiresTrainOptions>(keywords, "train_multires");
    std::vector<ArrayView> owners;
    const std::vector<LabelledCube> data = labelled(cubes, labels, "train_multires", owners);
    TrainReport report;
    const auto t0 = std::chrono::steady_clock::now();
    const MultiresModel model =
        c.run(std::move(progress), [&](const Context& ctx) { return train_multires(ctx, data, o, &report); });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return trained(to_json(model), report, seconds);
}

py::dict synth_options_dict(const SynthOptions& o) {
    py::dict d;
    d["width"] = o.width;
    d["height"] = o.height;
    d["bands"] = o.bands;
    d["targets"] = o.targets;
    d["buoys"] = o.buoys;
    d["boats"] = o.boats;
    d["noise_sigma"] = o.noise_sigma;
    d["min_gap"] = o.min_gap;
    return d;
}

py::dict object_dict(const SynthObject& o) {
    py::dict d;
    d["id"] = o.id;
    d["kind"] = std::string(enum_name(o.kind));
    d["target"] = o.target;
    d["cx"] = o.cx;
    d["cy"] = o.cy;
    d["half_length"] = o.half_length;
    d["half_width"] = o.half_width;
    d["angle"] = o.angle;
    d["amplitude"] = o.amplitude;
    d["radius"] = o.radius;
    d["area"] = o.area;
    d["x0"] = o.x0;
    d["y0"] = o.y0;
    d["width"] = o.width;
    d["height"] = o.height;
    return d;
}

/// synth(kind, seed, keywords) -> dict of NumPy arrays and the objects placed.
py::dict synth_binding(const std::string& kind, std::uint64_t seed, const py::dict& keywords) {
    const SynthSceneKind k = parse_enum<SynthSceneKind>(kind, "scene");
    const std::string function = "synth_" + std::string(enum_name(k));
    const SynthOptions o = options_from<SynthOptions>(keywords, function.c_str());
    SynthScene s = [&] {
        py::gil_scoped_release release;
        return synth_scene(k, seed, o);
    }();
    py::dict d;
    d["scene"] = std::string(enum_name(s.kind));
    d["cube"] = to_numpy(std::move(s.cube), false);
    d["truth"] = to_numpy(std::move(s.truth));
    d["objects"] = to_numpy(std::move(s.objects));
    d["coverage"] = to_numpy(std::move(s.coverage));
    py::list placed;
    for (const SynthObject& p : s.placed) placed.append(object_dict(p));
    d["placed"] = placed;
    py::array_t<double> wl(py::ssize_t(s.wavelengths.size()));
    std::copy(s.wavelengths.begin(), s.wavelengths.end(), wl.mutable_data());
    d["wavelengths"] = wl;
    d["seed"] = s.seed;
    d["options"] = synth_options_dict(s.options);
    return d;
}

}  // namespace

void bind_detect_train(py::module_& m) {
    m.def("train_rbfn_declarations", &declarations<RbfnTrainOptions>);
    m.def("train_multires_declarations", &declarations<MultiresTrainOptions>);
    m.def("train_rbfn", &train_rbfn_binding);
    m.def("train_multires", &train_multires_binding);
    m.def("synth_declarations", &declarations<SynthOptions>);
    m.def("synth", &synth_binding);
    m.def("synth_reflectance", [](const std::string& material, double nm) {
        return synth_reflectance(parse_enum<SynthMaterial>(material, "material"), nm);
    });
}

}  // namespace cubekit::python
