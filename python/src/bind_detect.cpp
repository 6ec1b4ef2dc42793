// Target detection with networks (cubekit/detect.hpp, detect_models.hpp): the RBFN pixel detector
// (score map, mask, labels, object table), several models in one pass, the multi-resolution
// quad-tree search, the window features, and the model files. The Python layer
// (python/cubekit/_detect.py) hands every model over as JSON text and the name of where it came
// from (a path, or "model"); the library's own reader parses and validates it, so errors name the
// file and the field exactly as the CLI's do.
#include <pybind11/numpy.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "cubekit/detect.hpp"
#include "cubekit/detect_models.hpp"
#include "cubekit/error.hpp"

namespace cubekit::python {

namespace {

/// The object table as columns (NumPy arrays named as the CLI's <stem>.objects.json); the Python
/// layer assembles the structured array.
py::dict object_columns(const std::vector<DetectedObject>& objects) {
    std::vector<std::int64_t> label, area, x0, y0, width, height, peak_x, peak_y;
    std::vector<double> cx, cy, peak, mean;
    for (const DetectedObject& o : objects) {
        label.push_back(o.label);
        area.push_back(o.area);
        x0.push_back(o.x0);
        y0.push_back(o.y0);
        width.push_back(o.width);
        height.push_back(o.height);
        cx.push_back(o.centroid_x);
        cy.push_back(o.centroid_y);
        peak.push_back(o.peak_score);
        peak_x.push_back(o.peak_x);
        peak_y.push_back(o.peak_y);
        mean.push_back(o.mean_score);
    }
    const py::ssize_t n = py::ssize_t(objects.size());
    py::dict d;
    d["label"] = array_of(label, {n});
    d["area"] = array_of(area, {n});
    d["x0"] = array_of(x0, {n});
    d["y0"] = array_of(y0, {n});
    d["width"] = array_of(width, {n});
    d["height"] = array_of(height, {n});
    d["centroid_x"] = array_of(cx, {n});
    d["centroid_y"] = array_of(cy, {n});
    d["peak_score"] = array_of(peak, {n});
    d["peak_x"] = array_of(peak_x, {n});
    d["peak_y"] = array_of(peak_y, {n});
    d["mean_score"] = array_of(mean, {n});
    return d;
}

py::object cube_or_none(Cube&& c) { return c.empty() ? py::object(py::none()) : py::object(to_numpy(std::move(c))); }

std::int64_t count_nan(const CubeView& score) {
    std::int64_t n = 0;
    const StridedView<const float> s = score.typed<float>();
    for (int y = 0; y < score.height(); ++y)
        for (int x = 0; x < score.width(); ++x) n += std::isnan(s(x, y, 0)) ? 1 : 0;
    return n;
}

/// The result dict of detect_rbfn: score (the given array), mask, labels, object columns, numbers.
py::dict pixel_dict(py::object score, PixelResult&& r, bool counted) {
    py::dict d;
    d["score"] = std::move(score);
    d["mask"] = cube_or_none(std::move(r.mask));
    d["labels"] = cube_or_none(std::move(r.labels));
    d["objects"] = object_columns(r.objects);
    d["threshold"] = r.threshold;
    d["non_finite"] = counted ? py::object(py::int_(r.non_finite)) : py::object(py::none());
    d["detected"] = r.detected;
    return d;
}

/// detect_rbfn(ctx, cube, out, model_text, source, keywords, progress) -> dict.
/// Without out: detect_pixels, all on the host. With out (the score map, of the input's kind): the
/// scores go there (rbfn_scores_into where out lives on the context's side), then the objects
/// from a host copy of them; a device out with objects=False stays on the device (non_finite None).
py::dict detect_rbfn_binding(PyContext& c, py::handle cube, py::object out, const std::string& text,
                             const std::string& source, const py::dict& keywords, py::object progress) {
    const PixelOptions o = options_from<PixelOptions>(keywords, "detect_rbfn");
    const RbfnModel model = rbfn_model_from_json(text, source);
    const ArrayView in = array_view(cube, "detect_rbfn", "cube");
    if (out.is_none()) {
        PixelResult r = c.run(std::move(progress), [&](const Context& ctx) { return detect_pixels(ctx, in.view, model, o); });
        py::object score = to_numpy(std::move(r.score));
        return pixel_dict(std::move(score), std::move(r), true);
    }
    const MutableArrayView ov = mutable_array_view(out, "detect_rbfn", "out");
    check_out("detect_rbfn", ov, in.view.width(), in.view.height(), 1, DType::F32);
    const bool on_device = ov.view.on_device();
    PixelResult r = c.run(std::move(progress), [&](const Context& ctx) {
        PixelResult res;
        if (in_context_memory(ctx, ov.view)) {
            const MutableCubeView views[] = {ov.view};
            rbfn_scores_into(ctx, in.view, std::span<const RbfnModel>(&model, 1), views, o);
        } else {
            PixelOptions scores_only = o;
            scores_only.objects = false;
            const PixelResult host = detect_pixels(ctx, in.view, model, scores_only);
            copy_cube(ctx, host.score, ov.view);
            ctx.synchronize();
        }
        res.threshold = std::isnan(o.threshold) ? model.threshold : o.threshold;
        if (on_device && !o.objects) return res;
        Cube down;
        if (on_device) {  // the objects are made on the host: one download of the score map
            down = Cube(in.view.width(), in.view.height(), 1, DType::F32, Layout::BSQ);
            copy_cube(ctx, ov.view, down.mutable_view());
            ctx.synchronize();
        }
        const CubeView score = on_device ? down.view() : CubeView(ov.view);
        res.non_finite = count_nan(score);
        if (o.objects) objects_from_scores(ctx, score, res.threshold, o, res);
        return res;
    });
    return pixel_dict(std::move(out), std::move(r), !on_device || o.objects);
}

/// rbfn_scores(ctx, cube, out, texts, sources, keywords, progress) -> out: band j of out (H, W, J)
/// f32 (or (H, W) for one model) is the score map of model j, all from one pass over the cube.
py::object rbfn_scores_binding(PyContext& c, py::handle cube, py::object out, const std::vector<std::string>& texts,
                               const std::vector<std::string>& sources, const py::dict& keywords, py::object progress) {
    const PixelOptions o = options_from<PixelOptions>(keywords, "rbfn_scores");
    std::vector<RbfnModel> models;
    for (std::size_t j = 0; j < texts.size(); ++j) models.push_back(rbfn_model_from_json(texts[j], sources[j]));
    if (models.empty()) throw InvalidInput("rbfn_scores: models is empty; give one model or a list of them");
    const ArrayView in = array_view(cube, "rbfn_scores", "cube");
    const MutableArrayView ov = mutable_array_view(out, "rbfn_scores", "out");
    const int J = int(models.size());
    check_out("rbfn_scores", ov, in.view.width(), in.view.height(), J, DType::F32);
    std::vector<MutableCubeView> views;
    for (int j = 0; j < J; ++j) views.push_back(ov.view.band_range(j, 1));
    PixelOptions scores_only = o;
    scores_only.objects = false;
    c.run(std::move(progress), [&](const Context& ctx) {
        if (in_context_memory(ctx, ov.view)) {
            rbfn_scores_into(ctx, in.view, models, views, scores_only);
            return;
        }
        const std::vector<PixelResult> host = detect_pixels_many(ctx, in.view, models, scores_only);
        for (int j = 0; j < J; ++j) copy_cube(ctx, host[std::size_t(j)].score, views[std::size_t(j)]);
        ctx.synchronize();
    });
    return out;
}

/// rbfn_scores_tiled(ctx, cube_or_path, texts, sources, keywords, tiles, progress) -> ((H, W, J) f32, run):
/// the score maps computed in tiles (tiles.hpp) from a NumPy array or a file read by windows.
py::tuple rbfn_scores_tiled_binding(PyContext& c, py::handle cube, const std::vector<std::string>& texts,
                                    const std::vector<std::string>& sources, const py::dict& keywords, const py::dict& tiles,
                                    py::object progress) {
    PixelOptions o = options_from<PixelOptions>(keywords, "rbfn_scores");
    o.objects = false;
    std::vector<RbfnModel> models;
    for (std::size_t j = 0; j < texts.size(); ++j) models.push_back(rbfn_model_from_json(texts[j], sources[j]));
    if (models.empty()) throw InvalidInput("rbfn_scores: models is empty; give one model or a list of them");
    const TileOptions t = tile_options_from(tiles);
    const TiledInput in = tiled_input(cube, "rbfn_scores");
    auto [scores, run] = c.run(std::move(progress), [&](const Context& ctx) {
        TiledRun r;
        const std::vector<PixelResult> res = in.file ? detect_pixels_tiled(ctx, *in.file, models, o, t, &r)
                                                     : detect_pixels_tiled(ctx, in.array->view, models, o, t, &r);
        Cube all = Cube::uninitialized(in.width(), in.height(), int(models.size()), DType::F32, Layout::BIP);
        for (std::size_t j = 0; j < res.size(); ++j) copy_cube(ctx, res[j].score, all.mutable_view().band_range(int(j), 1));
        return std::make_pair(std::move(all), r);
    });
    return py::make_tuple(to_numpy(std::move(scores), false), tiled_dict(run));
}

py::dict window_dict(const Window& w) {
    static const char* outcome[] = {"rejected", "accepted", "split", "forced", "dropped"};
    py::dict d;
    d["x0"] = w.x0;
    d["y0"] = w.y0;
    d["width"] = w.width;
    d["height"] = w.height;
    d["level"] = w.level;
    d["y1"] = w.y1;
    d["y2"] = std::isnan(w.y2) ? py::object(py::none()) : py::object(py::float_(w.y2));
    d["at_min_scale"] = w.at_min_scale;
    d["outcome"] = outcome[int(w.outcome)];
    return d;
}

py::list window_list(const std::vector<Window>& windows) {
    py::list l;
    for (const Window& w : windows) l.append(window_dict(w));
    return l;
}

/// The search's result with the CLI's JSON names.
py::dict multires_dict(const MultiresResult& r, const std::string& implementation) {
    py::dict d;
    d["detections"] = window_list(r.detections);
    d["trace"] = window_list(r.trace);
    py::list levels;
    for (const MultiresLevelCount& l : r.levels) {
        py::dict e;
        e["level"] = l.level;
        e["evaluated"] = l.evaluated;
        e["positive"] = l.positive;
        e["accepted"] = l.accepted;
        e["split"] = l.split;
        levels.append(e);
    }
    d["levels"] = levels;
    d["skipped_samples"] = r.skipped_samples;
    d["block"] = r.block;
    d["min_window"] = r.min_window;
    d["top_level"] = r.top_level;
    d["implementation"] = implementation;
    return d;
}

/// detect_multires(ctx, cube, model_text, source, keywords, progress) -> dict (the CLI's JSON names).
py::dict detect_multires_binding(PyContext& c, py::handle cube, const std::string& text, const std::string& source,
                                 const py::dict& keywords, py::object progress) {
    const MultiresOptions o = options_from<MultiresOptions>(keywords, "detect_multires");
    const MultiresModel model = multires_model_from_json(text, source);
    const ArrayView in = array_view(cube, "detect_multires", "cube");
    std::string implementation;
    const MultiresResult r = c.run(std::move(progress), [&](const Context& ctx) {
        implementation = std::string(multires_implementation(ctx));
        return detect_multires(ctx, in.view, model, o);
    });
    return multires_dict(r, implementation);
}

/// detect_multires_tiled(ctx, cube_or_path, model_text, source, keywords, tiles, progress) -> (dict, run):
/// the block sums in tiles (a NumPy array or a file read by windows), then one search.
py::tuple detect_multires_tiled_binding(PyContext& c, py::handle cube, const std::string& text, const std::string& source,
                                        const py::dict& keywords, const py::dict& tiles, py::object progress) {
    const MultiresOptions o = options_from<MultiresOptions>(keywords, "detect_multires");
    const MultiresModel model = multires_model_from_json(text, source);
    const TileOptions t = tile_options_from(tiles);
    const TiledInput in = tiled_input(cube, "detect_multires");
    std::string implementation;
    auto [r, run] = c.run(std::move(progress), [&](const Context& ctx) {
        implementation = std::string(multires_implementation(ctx));
        TiledRun done;
        MultiresResult res = in.file ? detect_multires_tiled(ctx, *in.file, model, o, t, &done)
                                     : detect_multires_tiled(ctx, in.array->view, model, o, t, &done);
        return std::make_pair(std::move(res), done);
    });
    return py::make_tuple(multires_dict(r, implementation), tiled_dict(run));
}

/// multires_block_sums(ctx, cube, block, progress) -> (sums (gy, gx, B, 3) f64: the count, Σx, Σx²;
/// skipped): the pieces of a Dask array, whose sums side by side are the scene's.
py::tuple multires_block_sums_binding(PyContext& c, py::handle cube, int block, py::object progress) {
    const ArrayView in = array_view(cube, "multires_block_sums", "cube");
    const BlockSums s = c.run(std::move(progress), [&](const Context& ctx) { return multires_block_sums(ctx, in.view, block); });
    std::vector<double> packed(s.n.size() * 3);
    for (std::size_t v = 0; v < s.n.size(); ++v) {
        packed[3 * v] = double(s.n[v]);
        packed[3 * v + 1] = s.s1[v];
        packed[3 * v + 2] = s.s2[v];
    }
    return py::make_tuple(array_of(packed, {py::ssize_t(s.gy), py::ssize_t(s.gx), py::ssize_t(s.bands), 3}), s.skipped);
}

/// detect_multires_from_sums(ctx, sums (gy, gx, B, 3) f64, skipped, width, height, model_text, source,
/// keywords, progress) -> dict.
py::dict detect_multires_from_sums_binding(PyContext& c, const py::array_t<double, py::array::c_style | py::array::forcecast>& sums,
                                           std::int64_t skipped, int width, int height, const std::string& text,
                                           const std::string& source, const py::dict& keywords, py::object progress) {
    const MultiresOptions o = options_from<MultiresOptions>(keywords, "detect_multires");
    const MultiresModel model = multires_model_from_json(text, source);
    if (sums.ndim() != 4 || sums.shape(3) != 3)
        throw InvalidInput("detect_multires_from_sums: sums must be (gy, gx, bands, 3); got " + std::to_string(sums.ndim()) + " dimensions");
    BlockSums s;
    s.gy = int(sums.shape(0));
    s.gx = int(sums.shape(1));
    s.bands = int(sums.shape(2));
    s.block = model.block;
    s.skipped = skipped;
    const std::size_t values = std::size_t(s.gx) * std::size_t(s.gy) * std::size_t(s.bands);
    const double* p = sums.data();
    s.n.resize(values);
    s.s1.resize(values);
    s.s2.resize(values);
    for (std::size_t v = 0; v < values; ++v) {
        if (!(p[3 * v] >= 0 && p[3 * v] <= 2147483647.0 && p[3 * v] == std::floor(p[3 * v])))
            throw InvalidInput("detect_multires_from_sums: sums[..., 0] holds the counts; " + std::to_string(p[3 * v]) + " is not one");
        s.n[v] = std::int32_t(p[3 * v]);
        s.s1[v] = p[3 * v + 1];
        s.s2[v] = p[3 * v + 2];
    }
    std::string implementation;
    const MultiresResult r = c.run(std::move(progress), [&](const Context& ctx) {
        implementation = std::string(multires_implementation(ctx));
        return detect_multires_from_sums(ctx, std::move(s), width, height, model, o);
    });
    return multires_dict(r, implementation);
}

/// window_features(ctx, cube, block, level, progress) -> (features, counts), each (gy, gx, B).
py::tuple window_features_binding(PyContext& c, py::handle cube, int block, int level, py::object progress) {
    const ArrayView in = array_view(cube, "window_features", "cube");
    std::vector<std::int64_t> counts;
    const std::vector<double> f = c.run(std::move(progress), [&](const Context& ctx) {
        return window_features(ctx, in.view, block, level, &counts);
    });
    const std::int64_t side = std::int64_t(block) << std::max(0, std::min(level, 40));
    const auto gx = py::ssize_t((in.view.width() + side - 1) / side), gy = py::ssize_t((in.view.height() + side - 1) / side);
    const auto m = py::ssize_t(in.view.bands());
    if (py::ssize_t(f.size()) != gx * gy * m || py::ssize_t(counts.size()) != gx * gy * m)
        throw InvalidInput("window_features: " + std::to_string(f.size()) + " values for a " + std::to_string(gy) + "x" +
                           std::to_string(gx) + " grid of " + std::to_string(m) + " bands");
    return py::make_tuple(array_of(f, {gy, gx, m}), array_of(counts, {gy, gx, m}));
}

}  // namespace

void bind_detect(py::module_& m) {
    m.def("detect_rbfn_declarations", &declarations<PixelOptions>);
    m.def("detect_multires_declarations", &declarations<MultiresOptions>);
    m.def("detect_rbfn", &detect_rbfn_binding);
    m.def("rbfn_scores", &rbfn_scores_binding);
    m.def("rbfn_scores_tiled", &rbfn_scores_tiled_binding);
    m.def("detect_multires", &detect_multires_binding);
    m.def("detect_multires_tiled", &detect_multires_tiled_binding);
    m.def("multires_block_sums", &multires_block_sums_binding);
    m.def("detect_multires_from_sums", &detect_multires_from_sums_binding);
    m.def("window_features", &window_features_binding);
    m.def("rbfn_implementation", [](PyContext& c, const py::dict& keywords) {
        return std::string(rbfn_implementation(c.context(), options_from<PixelOptions>(keywords, "detect_rbfn")));
    });
    m.def("multires_top_level", &multires_top_level);
    // Models: JSON text in (with where it came from), the library's canonical JSON out (every field,
    // numbers read back bit for bit); `type` is the model's "type" field, which the Python layer reads.
    m.def("model_json", [](const std::string& text, const std::string& source, const std::string& type) {
        if (type == "rbfn") return to_json(rbfn_model_from_json(text, source));
        if (type == "multires") return to_json(multires_model_from_json(text, source));
        throw InvalidInput(source + ": type = \"" + type + "\"; expected \"rbfn\" or \"multires\"");
    });
    m.def("write_model", [](const std::string& text, const std::string& source, const std::string& type,
                            const std::string& path) {
        if (type == "rbfn") write_model(rbfn_model_from_json(text, source), path);
        else if (type == "multires") write_model(multires_model_from_json(text, source), path);
        else throw InvalidInput(source + ": type = \"" + type + "\"; expected \"rbfn\" or \"multires\"");
    });
}

}  // namespace cubekit::python
