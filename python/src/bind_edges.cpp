// Entropy edges with their fusions and noise removal (cubekit/edges.hpp), the classical baselines
// and the edge scores (cubekit/edge_baselines.hpp). The small results (thresholds, vote rule, PCA
// modes, parameters) come back as dicts keyed as the CLI's JSON (tools/cubekit/cmd_edges*.cpp).
#include <optional>
#include <set>
#include <utility>

#include "bindings.hpp"
#include "cubekit/edge_baselines.hpp"
#include "cubekit/edges.hpp"
#include "cubekit/error.hpp"

namespace cubekit::python {

namespace {

// ---- entropy edges ------------------------------------------------------------------------------

/// TypeError for a keyword that `function` does not read (options_from would accept any field of
/// the struct, but entropy_band_thresholds and quantize_to_u8 read only some).
void only_keywords(const py::dict& keywords, const char* function, const std::set<std::string>& allowed) {
    for (const auto& item : keywords) {
        const std::string key = py::str(item.first);
        if (!allowed.count(key)) {
            std::string known;
            for (const std::string& a : allowed) known += (known.empty() ? "" : ", ") + a;
            throw py::type_error(std::string(function) + "() got an unexpected keyword argument '" + key +
                                 "'; its options are " + known);
        }
    }
}

/// One image's thresholds as the CLI's thresholds file writes them.
py::dict thresholds_dict(const EdgeThresholds& t) {
    py::dict d;
    d["t1"] = t.t1;
    d["t2"] = t.t2;
    d["t3"] = t.t3;
    d["levels"] = t.levels;
    d["constant"] = t.constant;
    return d;
}

/// The "bands" list of the thresholds file: {"band": b, "t1", "t2", "t3", "levels", "constant"}.
py::list band_thresholds_list(const std::vector<EdgeThresholds>& thresholds) {
    py::list out;
    for (std::size_t i = 0; i < thresholds.size(); ++i) {
        py::dict d;
        d["band"] = i;
        for (const auto& item : thresholds_dict(thresholds[i])) d[item.first] = item.second;
        out.append(d);
    }
    return out;
}

/// The other keys of the thresholds file: name → list ("pca" entries carry "component").
py::dict derived_thresholds_dict(const std::vector<DerivedThresholds>& derived) {
    py::dict out;
    for (const DerivedThresholds& d : derived) {
        py::list list;
        for (std::size_t i = 0; i < d.thresholds.size(); ++i) {
            py::dict e;
            if (d.name == "pca") e["component"] = i;
            for (const auto& item : thresholds_dict(d.thresholds[i])) e[item.first] = item.second;
            list.append(e);
        }
        out[py::str(d.name)] = list;
    }
    return out;
}

/// The summary with the keys the CLI writes for this fusion (votes_needed for the votes,
/// pca_components_used and explained_variance_ratio for the PCA modes).
py::dict summary_dict(const EntropyEdgeSummary& s, const EntropyEdgeOptions& o) {
    py::dict d;
    d["thresholds"] = band_thresholds_list(s.band_thresholds);
    d["derived_thresholds"] = derived_thresholds_dict(s.derived_thresholds);
    d["parameters"] = parameters(o);
    if (fusion_is_vote(o.fusion)) d["votes_needed"] = s.votes_needed;
    if (fusion_uses_pca(o.fusion)) {
        d["pca_components_used"] = s.pca_components_used;
        d["explained_variance_ratio"] = s.explained_variance_ratio;
    }
    return d;
}

/// The options as the CLI runs them: the fusion resolved for this many bands.
EntropyEdgeOptions edge_options(const py::dict& keywords, const char* function, int bands) {
    EntropyEdgeOptions o = options_from<EntropyEdgeOptions>(keywords, function);
    o.fusion = resolved_fusion(o.fusion, bands);
    return o;
}

/// Flag fields, then the switches (keep_band_edges, keep_binary) that the Python function takes
/// as keywords of the same names.
py::list entropy_edges_declarations() {
    py::list out = declarations<EntropyEdgeOptions>();
    const EntropyEdgeOptions defaults{};
    visit_fields(defaults, [&](const auto& value, const Field& field) {
        using T = std::remove_cvref_t<decltype(value)>;
        if constexpr (std::same_as<T, bool>)
            if (!field.flag) out.append(py::make_tuple(std::string(field.name), value, std::string(field.doc), py::none()));
    });
    return out;
}

py::object numpy_or_none(Cube& cube, bool squeeze) {
    if (cube.empty()) return py::none();
    return to_numpy(std::move(cube), squeeze);
}

/// An optional output: its view (checked against `bands`), or an empty view for None.
MutableCubeView extra_view(py::handle obj, const char* name, const CubeView& in, int bands, DType dtype) {
    if (obj.is_none()) return {};
    if (bands == 0)
        throw InvalidInput(std::string("entropy_edges: ") + name + " is given but this fusion has no such output");
    const MutableArrayView v = mutable_array_view(obj, "entropy_edges", name);
    check_out("entropy_edges", v, in.width(), in.height(), bands, dtype);
    return v.view;
}

struct EdgeOutputs {
    py::object edges, band_edges, binary, vote_count;
};

/// The detector into caller-given outputs: in place when they all live where the context
/// computes, else on the host and copied into them.
py::dict edges_into(PyContext& c, py::object progress, const CubeView& in, EntropyEdgeOptions o,
                    const EdgeOutputs& outs) {
    const EntropyEdgeBands n = entropy_edges_bands(in.bands(), o);
    const MutableArrayView ev = mutable_array_view(outs.edges, "entropy_edges", "out");
    check_out("entropy_edges", ev, in.width(), in.height(), n.edges, DType::U8);
    EntropyEdgeExtras x;
    x.band_edges = extra_view(outs.band_edges, "band_edges", in, n.band_edges, DType::U8);
    x.binary = extra_view(outs.binary, "binary", in, n.binary, DType::U8);
    x.vote_count = extra_view(outs.vote_count, "vote_count", in, n.vote_count, DType::U16);
    const auto here = [&](const MutableCubeView& v) { return v.empty() || in_context_memory(c.context(), v); };
    if (here(ev.view) && here(x.band_edges) && here(x.binary) && here(x.vote_count)) {
        const EntropyEdgeSummary s =
            c.run(std::move(progress), [&](const Context& ctx) { return entropy_edges_into(ctx, in, ev.view, o, x); });
        return summary_dict(s, o);
    }
    o.keep_band_edges = !x.band_edges.empty();
    o.keep_binary = !x.binary.empty();
    const EntropyEdgeResult r = c.run(std::move(progress), [&](const Context& ctx) {
        EntropyEdgeResult result = entropy_edges(ctx, in, o);
        copy_cube(ctx, result.edges, ev.view);
        if (!x.band_edges.empty()) copy_cube(ctx, result.band_edges, x.band_edges);
        if (!x.binary.empty()) copy_cube(ctx, result.binary, x.binary);
        if (!x.vote_count.empty()) copy_cube(ctx, result.vote_count, x.vote_count);
        ctx.synchronize();
        return result;
    });
    return summary_dict(r, o);
}

/// entropy_edges(ctx, cube, out, band_edges, binary, vote_count, keywords, keep_band_edges,
/// keep_binary, progress) -> (edges, band_edges, binary, vote_count, summary). With out None, the
/// outputs are new NumPy arrays (each None when not produced); else the given arrays.
py::tuple entropy_edges_binding(PyContext& c, py::handle cube, const EdgeOutputs& outs, const py::dict& keywords,
                                bool keep_band_edges, bool keep_binary, py::object progress) {
    const ArrayView in = array_view(cube, "entropy_edges", "cube");
    EntropyEdgeOptions o = edge_options(keywords, "entropy_edges", in.view.bands());
    if (!outs.edges.is_none()) {
        py::dict s = edges_into(c, std::move(progress), in.view, o, outs);
        return py::make_tuple(outs.edges, outs.band_edges, outs.binary, outs.vote_count, s);
    }
    o.keep_band_edges = keep_band_edges;
    o.keep_binary = keep_binary;
    EntropyEdgeResult r = c.run(std::move(progress), [&](const Context& ctx) { return entropy_edges(ctx, in.view, o); });
    py::dict s = summary_dict(r, o);
    // fusion none keeps the input's shape ((H, W, 1) stays so); a fused map is (H, W)
    const bool squeeze = o.fusion != EdgeFusion::None || in.ndim == 2;
    return py::make_tuple(to_numpy(std::move(r.edges), squeeze), numpy_or_none(r.band_edges, false),
                          numpy_or_none(r.binary, false), numpy_or_none(r.vote_count, true), s);
}

/// entropy_edges_tiled(ctx, cube or path, keywords, tiles, progress) -> (edges, summary, tiled): the
/// detector in tiles (NumPy or a file read by windows in; NumPy out).
py::tuple entropy_edges_tiled_binding(PyContext& c, py::handle cube, const py::dict& keywords, const py::dict& tiles,
                                      py::object progress) {
    const TiledInput in = tiled_input(cube, "entropy_edges");
    const EntropyEdgeOptions o = edge_options(keywords, "entropy_edges", in.bands());
    const TileOptions t = tile_options_from(tiles);
    auto [edges, tiled] = c.run(std::move(progress), [&](const Context& ctx) {
        Cube map(in.width(), in.height(), entropy_edges_bands(in.bands(), o).edges, DType::U8);
        EntropyEdgeTiled r = in.file ? entropy_edges_tiled(ctx, *in.file, map.mutable_view(), o, t)
                                     : entropy_edges_tiled(ctx, in.array->view, map.mutable_view(), o, t);
        return std::make_pair(std::move(map), std::move(r));
    });
    py::dict run = tiled_dict(tiled.run);
    run["passes"] = tiled.passes;
    // fusion none keeps the input's shape ((H, W, 1) stays so); a fused map is (H, W)
    const bool squeeze = o.fusion != EdgeFusion::None || (in.array ? in.array->ndim == 2 : in.bands() == 1);
    return py::make_tuple(to_numpy(std::move(edges), squeeze), summary_dict(tiled.summary, o), run);
}

// ---- pieces of a scene (cubekit.dask): the scene's statistics travel as plain Python values (they
// pickle to a distributed worker): {"lo": [..], "hi": [..], "band": [(t1, t2, t3, levels, loc,
// constant), ..], "mean": (..)}.

py::tuple thresholds_tuple(const EdgeThresholds& t) { return py::make_tuple(t.t1, t.t2, t.t3, t.levels, t.loc, t.constant); }

EdgeThresholds thresholds_from(py::handle h) {
    const auto v = h.cast<std::tuple<int, int, int, int, int, bool>>();
    return {std::get<0>(v), std::get<1>(v), std::get<2>(v), std::get<3>(v), std::get<4>(v), std::get<5>(v)};
}

EdgeSceneStats scene_from(const py::dict& d) {
    EdgeSceneStats s;
    s.lo = d["lo"].cast<std::vector<double>>();
    s.hi = d["hi"].cast<std::vector<double>>();
    for (py::handle t : d["band"]) s.band.push_back(thresholds_from(t));
    if (!d["mean"].is_none()) s.mean = thresholds_from(d["mean"]);
    return s;
}

void bind_pieces(py::module_& m) {
    m.def("entropy_piece_ranges", [](PyContext& c, py::handle piece, py::object progress) {
        const ArrayView in = array_view(piece, "entropy_piece_ranges", "piece");
        std::vector<double> lo, hi;
        c.run(std::move(progress), [&](const Context& ctx) { entropy_piece_ranges(ctx, in.view, lo, hi); return 0; });
        return py::make_tuple(lo, hi);
    });
    m.def("entropy_piece_histograms", [](PyContext& c, py::handle piece, const std::vector<double>& lo,
                                         const std::vector<double>& hi, bool with_mean, py::object progress) {
        const ArrayView in = array_view(piece, "entropy_piece_histograms", "piece");
        const EdgeSceneStats scene{lo, hi, {}, {}};
        const std::vector<std::uint32_t> h = c.run(std::move(progress), [&](const Context& ctx) {
            return entropy_piece_histograms(ctx, in.view, scene, with_mean);
        });
        return array_of(h, {py::ssize_t(h.size() / 256), 256});
    });
    m.def("entropy_scene_thresholds", [](const py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>& hist,
                                         const std::vector<double>& lo, const std::vector<double>& hi, double q, bool with_mean) {
        EdgeSceneStats s{lo, hi, {}, {}};
        entropy_scene_thresholds(s, std::vector<std::uint64_t>(hist.data(), hist.data() + hist.size()), q, with_mean);
        py::dict d;
        d["lo"] = s.lo;
        d["hi"] = s.hi;
        py::list band;
        for (const EdgeThresholds& t : s.band) band.append(thresholds_tuple(t));
        d["band"] = band;
        d["mean"] = with_mean ? py::object(thresholds_tuple(s.mean)) : py::object(py::none());
        return d;
    });
    m.def("entropy_edges_piece", [](PyContext& c, py::handle piece, py::object out, const py::dict& keywords,
                                    const py::dict& scene, py::object progress) {
        const ArrayView in = array_view(piece, "entropy_edges_piece", "piece");
        const EntropyEdgeOptions o = edge_options(keywords, "entropy_edges_piece", in.view.bands());
        const MutableArrayView ov = mutable_array_view(out, "entropy_edges_piece", "out");
        check_out("entropy_edges_piece", ov, in.view.width(), in.view.height(), entropy_edges_bands(in.view.bands(), o).edges,
                  DType::U8);
        const EdgeSceneStats s = scene_from(scene);
        c.run(std::move(progress), [&](const Context& ctx) {
            entropy_edges_piece(ctx, in.view, ov.view, o, s);
            return 0;
        });
        return out;
    });
}

void bind_entropy(py::module_& m) {
    bind_pieces(m);
    m.def("entropy_edges_tiled", &entropy_edges_tiled_binding);
    m.def("entropy_edges_declarations", &entropy_edges_declarations);
    m.def("entropy_edges_bands", [](int bands, const py::dict& keywords) {
        const EntropyEdgeOptions o = edge_options(keywords, "entropy_edges", bands);
        const EntropyEdgeBands n = entropy_edges_bands(bands, o);
        py::dict d;
        d["fusion"] = std::string(fusion_name(o.fusion));
        d["edges"] = n.edges;
        d["band_edges"] = n.band_edges;
        d["binary"] = n.binary;
        d["vote_count"] = n.vote_count;
        return d;
    });
    m.def("entropy_edges", [](PyContext& c, py::handle cube, py::object out, py::object band_edges, py::object binary,
                              py::object vote_count, const py::dict& keywords, bool keep_band_edges, bool keep_binary,
                              py::object progress) {
        return entropy_edges_binding(c, cube, {out, band_edges, binary, vote_count}, keywords, keep_band_edges,
                                     keep_binary, std::move(progress));
    });
    m.def("entropy_band_thresholds", [](PyContext& c, py::handle cube, const py::dict& keywords, py::object progress) {
        only_keywords(keywords, "entropy_band_thresholds", {"q", "quantize"});
        const EntropyEdgeOptions o = options_from<EntropyEdgeOptions>(keywords, "entropy_band_thresholds");
        const ArrayView in = array_view(cube, "entropy_band_thresholds", "cube");
        return band_thresholds_list(c.run(std::move(progress), [&](const Context& ctx) {
            return entropy_band_thresholds(ctx, in.view, o);
        }));
    });
    m.def("quantize_to_u8", [](PyContext& c, py::handle cube, py::object out, const py::dict& keywords,
                               py::object progress) {
        only_keywords(keywords, "quantize_to_u8", {"quantize"});
        const Quantize mode = options_from<EntropyEdgeOptions>(keywords, "quantize_to_u8").quantize;
        const ArrayView in = array_view(cube, "quantize_to_u8", "cube");
        if (out.is_none())
            return py::object(to_numpy(
                c.run(std::move(progress), [&](const Context& ctx) { return quantize_to_u8(ctx, in.view, mode); }),
                in.ndim == 2));
        const MutableArrayView ov = mutable_array_view(out, "quantize_to_u8", "out");
        check_out("quantize_to_u8", ov, in.view.width(), in.view.height(), in.view.bands(), DType::U8);
        return run_into(
            c, std::move(progress), ov, out,
            [&](const Context& ctx, const MutableCubeView& v) { quantize_to_u8_into(ctx, in.view, v, mode); },
            [&](const Context& ctx) { return quantize_to_u8(ctx, in.view, mode); });
    });
}

// ---- baselines and scores -----------------------------------------------------------------------

/// The declared parameters as they apply (the CLI's baseline_parameters): σ as run (null for the
/// mask methods), low_ratio only for canny, thinning only for the mask methods.
py::dict baseline_parameters(const BaselineOptions& o) {
    py::dict params = parameters(o);
    const std::optional<double> sigma = baseline_sigma(o);
    params["sigma"] = sigma ? py::object(py::float_(*sigma)) : py::object(py::none());
    if (o.method != BaselineMethod::Canny) params.attr("pop")("low_ratio");
    if (o.method == BaselineMethod::Canny || o.method == BaselineMethod::LoG) params.attr("pop")("thinning");
    return params;
}

/// (high thresholds, low thresholds), one per band.
py::tuple thresholds_lists(const std::vector<BaselineThreshold>& t) {
    py::list high, low;
    for (const BaselineThreshold& b : t) {
        high.append(b.high);
        low.append(b.low);
    }
    return py::make_tuple(high, low);
}

/// baseline_edges(ctx, image, out, keywords, progress) -> (edges, (high, low), parameters).
py::tuple baseline_binding(PyContext& c, py::handle image, py::object out, const py::dict& keywords,
                           py::object progress) {
    const BaselineOptions o = options_from<BaselineOptions>(keywords, "baseline_edges");
    check_baseline_options(o);
    const ArrayView in = array_view(image, "baseline_edges", "image");
    if (out.is_none()) {
        BaselineResult r = c.run(std::move(progress),
                                 [&](const Context& ctx) { return baseline_edges_with_thresholds(ctx, in.view, o); });
        return py::make_tuple(to_numpy(std::move(r.edges), in.ndim == 2), thresholds_lists(r.thresholds),
                              baseline_parameters(o));
    }
    const MutableArrayView ov = mutable_array_view(out, "baseline_edges", "out");
    check_out("baseline_edges", ov, in.view.width(), in.view.height(), in.view.bands(), DType::U8);
    std::vector<BaselineThreshold> t;
    if (in_context_memory(c.context(), ov.view)) {
        t = c.run(std::move(progress), [&](const Context& ctx) { return baseline_edges_into(ctx, in.view, ov.view, o); });
    } else {
        t = c.run(std::move(progress), [&](const Context& ctx) {
            BaselineResult r = baseline_edges_with_thresholds(ctx, in.view, o);
            copy_cube(ctx, r.edges, ov.view);
            ctx.synchronize();
            return r.thresholds;
        });
    }
    return py::make_tuple(out, thresholds_lists(t), baseline_parameters(o));
}

/// baseline_edges_tiled(ctx, image, keywords, tiles, progress) -> (edges, (high, low), parameters, run): in
/// groups of whole bands (NumPy in, NumPy out).
py::tuple baseline_tiled_binding(PyContext& c, py::handle image, const py::dict& keywords, const py::dict& tiles,
                                 py::object progress) {
    const BaselineOptions o = options_from<BaselineOptions>(keywords, "baseline_edges");
    check_baseline_options(o);
    const TileOptions t = tile_options_from(tiles);
    const ArrayView in = array_view(image, "baseline_edges", "image");
    auto [r, run] = c.run(std::move(progress), [&](const Context& ctx) {
        TiledRun done;
        BaselineResult res = baseline_edges_tiled(ctx, in.view, o, t, &done);
        return std::make_pair(std::move(res), done);
    });
    return py::make_tuple(to_numpy(std::move(r.edges), in.ndim == 2), thresholds_lists(r.thresholds), baseline_parameters(o),
                          tiled_dict(run));
}

/// A one-band host map for score_edges: ValueError naming the argument otherwise.
ArrayView score_map(py::handle obj, const char* name) {
    ArrayView v = array_view(obj, "edge_score", name);
    if (v.view.bands() != 1)
        throw InvalidInput(std::string("edge_score: ") + name + " has " + std::to_string(v.view.bands()) +
                           " bands; expected a one-band map ((H, W); nonzero = edge)");
    if (v.view.on_device())
        throw InvalidInput(std::string("edge_score: ") + name + " lives on a CUDA device; scores are computed on the host");
    return v;
}

/// The keyword of edge_score, declared like the library's options (the CLI's --tolerance and its check).
struct ScoreOptions {
    double tolerance = 1.0;
};
template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, ScoreOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.tolerance, Field{.name = "tolerance", .doc = "matching distance in pixels of precision and recall",
                             .min = 0, .max = 1e12});
}

/// edge_score(predicted, reference, keywords) -> dict with the keys of `cubekit edges-score`.
py::dict score_binding(py::handle predicted, py::handle reference, const py::dict& keywords) {
    const double tolerance = options_from<ScoreOptions>(keywords, "edge_score").tolerance;
    const ArrayView p = score_map(predicted, "predicted");
    const ArrayView r = score_map(reference, "reference");
    if (p.view.width() != r.view.width() || p.view.height() != r.view.height())
        throw InvalidInput("edge_score: predicted is (" + std::to_string(p.view.height()) + ", " +
                           std::to_string(p.view.width()) + ") and reference is (" + std::to_string(r.view.height()) +
                           ", " + std::to_string(r.view.width()) + "); the maps must have the same size");
    EdgeScore s;
    {
        py::gil_scoped_release release;
        s = score_edges(p.view, r.view, tolerance);
    }
    py::dict d;
    d["fom"] = s.fom;
    d["precision"] = s.precision;
    d["recall"] = s.recall;
    d["f"] = s.f;
    d["predicted"] = s.predicted;
    d["reference"] = s.reference;
    d["tolerance"] = tolerance;
    return d;
}

void bind_baselines(py::module_& m) {
    m.def("baseline_edges_declarations", &declarations<BaselineOptions>);
    m.def("baseline_edges", &baseline_binding);
    m.def("baseline_edges_tiled", &baseline_tiled_binding);
    m.def("edge_score_declarations", &declarations<ScoreOptions>);
    m.def("edge_score", &score_binding);
}

}  // namespace

void bind_edges(py::module_& m) {
    bind_entropy(m);
    bind_baselines(m);
}

}  // namespace cubekit::python
