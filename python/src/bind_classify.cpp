// Spectral-spatial classification (cubekit/classify.hpp): the pixel-wise classifiers (RBF SVM
// through LIBSVM, SAM, minimum distance), the chain with RCMG → watershed → majority vote, the vote
// alone, the scores and the stratified split. Results are host (NumPy) arrays: the classification
// runs on the CPU for now (device inputs are downloaded by the library).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "cubekit/classify.hpp"
#include "cubekit/error.hpp"
#include "cubekit/gradient.hpp"
#include "cubekit/watershed.hpp"

namespace cubekit::python {

namespace {

/// The keywords of classify(): the vote's τ, the SVM's cross-validation (its seed a keyword here,
/// no CLI flag of its own there: the CLI passes --seed), and the watershed's 2-D options.
struct ClassifyKeywords {
    VoteOptions vote;
    SvmOptions svm;
    WatershedOptions watershed;
};

/// The SVM's options as keywords (the seed a keyword here: the CLI's --seed is the split's).
template <class S, class V>
void visit_svm_keywords(S& svm, V&& visit) {
    visit_fields(svm, [&](auto& value, const Field& field) {
        Field f = field;
        f.flag = true;
        visit(value, f);
    });
}

template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, ClassifyKeywords>
void visit_fields(O& k, V&& visit) {
    visit_fields(k.vote, visit);
    visit_svm_keywords(k.svm, visit);
    visit_fields(k.watershed, [&](auto& value, const Field& field) {
        if (field.name == "volume" || field.name == "schedule") return;
        if (field.name != "connectivity") return visit(value, field);
        visit(value, Field{.name = "connectivity", .doc = "segment='watershed': neighbours of the RCMG and the watershed",
                           .one_of = {4, 8}});
    });
}

py::object number(double v) { return std::isnan(v) ? py::object(py::none()) : py::object(py::float_(v)); }

py::dict model_dict(const std::optional<SvmModel>& svm, const std::optional<ClassMeans>& means) {
    py::dict d;
    if (means) {
        d["classifier"] = std::string(enum_name(means->classifier));
        d["classes"] = means->classes;
        d["counts"] = means->counts;
        d["means"] = array_of(means->means, {py::ssize_t(means->classes.size()), py::ssize_t(means->bands)});
        return d;
    }
    d["classifier"] = "svm";
    d["classes"] = svm->classes;
    d["c"] = svm->c;
    d["gamma"] = svm->gamma;
    d["cv_accuracy"] = number(svm->cv_accuracy);
    d["support_vectors"] = svm->num_sv();
    d["training_pixels"] = svm->training_pixels;
    py::list grid;
    for (const SvmGridPoint& g : svm->grid) grid.append(py::make_tuple(g.c, g.gamma, g.accuracy));
    d["grid"] = grid;
    return d;
}

py::dict vote_dict(const VoteStats& s) {
    py::dict d;
    d["regions"] = s.regions;
    d["relabelled"] = s.relabelled;
    d["ties"] = s.ties;
    d["no_voters"] = s.no_voters;
    d["below_tau"] = s.below_tau;
    d["changed_pixels"] = s.changed_pixels;
    return d;
}

/// classify(ctx, cube, train, classifier, segment, keywords, progress) -> dict: classes, pixelwise,
/// regions (None without segment), model, vote (None without segment).
// The prediction, the RCMG and the watershed in tiles (tile keywords): the whole call's maps, exactly.
Cube classify_in_tiles(const Context& ctx, const CubeView& cube, const std::optional<SvmModel>& svm,
                       const std::optional<ClassMeans>& means, bool segment, const ClassifyKeywords& k, const TileOptions& t,
                       std::optional<WatershedResult>& regions, std::optional<VoteResult>& vote) {
    Cube map(cube.width(), cube.height(), 1, DType::I32);
    if (svm) predict_svm_tiled(ctx, cube, *svm, map.mutable_view(), t);
    else predict_class_means_tiled(ctx, cube, *means, map.mutable_view(), t);
    if (!segment) return map;
    RcmgOptions ro;
    ro.connectivity = k.watershed.connectivity;
    Cube gradient(cube.width(), cube.height(), 1, ro.out_type);
    rcmg_tiled(ctx, cube, gradient.mutable_view(), ro, t);
    regions.emplace(WatershedResult{Cube(cube.width(), cube.height(), 1, DType::I32), 0});
    regions->regions = watershed_tiled(ctx, gradient, regions->labels.mutable_view(), k.watershed, {}, t).regions;
    vote = region_vote(ctx, regions->labels, map, k.vote);
    return map;
}

py::dict classify_binding(PyContext& c, py::handle cube, py::handle train, const std::string& classifier,
                          const std::string& segment, const py::dict& keywords, py::object progress,
                          const py::dict& tiles) {
    const ClassifyKeywords k = options_from<ClassifyKeywords>(keywords, "classify");
    const Classifier which = parse_enum<Classifier>(classifier, "classify: classifier");
    if (segment != "none" && segment != "watershed")
        throw InvalidInput("classify: segment = '" + segment + "'; expected 'watershed' or None");
    const ArrayView in = array_view(cube, "classify", "cube");
    const ArrayView labels = array_view(train, "classify", "train");
    std::optional<SvmModel> svm;
    std::optional<ClassMeans> means;
    std::optional<WatershedResult> regions;
    std::optional<VoteResult> vote;
    const std::optional<TileOptions> tiled = tiles.empty() ? std::nullopt : std::optional(tile_options_from(tiles));
    Cube pixelwise = c.run(std::move(progress), [&](const Context& ctx) {
        if (which == Classifier::Svm) svm = train_svm(ctx, in.view, labels.view, k.svm);
        else means = train_class_means(ctx, in.view, labels.view, which);
        if (tiled) return classify_in_tiles(ctx, in.view, svm, means, segment == "watershed", k, *tiled, regions, vote);
        Cube map = svm ? predict_svm(ctx, in.view, *svm).classes : predict_class_means(ctx, in.view, *means);
        if (segment == "watershed") {
            RcmgOptions ro;
            ro.connectivity = k.watershed.connectivity;
            regions = watershed(ctx, rcmg(ctx, in.view, ro), k.watershed);
            vote = region_vote(ctx, regions->labels, map, k.vote);
        }
        return map;
    });
    py::dict d;
    d["model"] = model_dict(svm, means);
    d["vote"] = vote ? py::object(vote_dict(vote->stats)) : py::object(py::none());
    d["regions"] = regions ? py::object(to_numpy(std::move(regions->labels))) : py::object(py::none());
    d["classes"] = vote ? to_numpy(std::move(vote->classes)) : to_numpy(pixelwise.clone());
    d["pixelwise"] = to_numpy(std::move(pixelwise));
    return d;
}

py::tuple vote_binding(PyContext& c, py::handle regions, py::handle class_map, const py::dict& keywords) {
    const VoteOptions o = options_from<VoteOptions>(keywords, "region_vote");
    const ArrayView r = array_view(regions, "region_vote", "regions");
    const ArrayView m = array_view(class_map, "region_vote", "class_map");
    VoteResult v = c.run(py::none(), [&](const Context& ctx) { return region_vote(ctx, r.view, m.view, o); });
    return py::make_tuple(to_numpy(std::move(v.classes)), vote_dict(v.stats));
}

py::dict scores_binding(PyContext& c, py::handle predicted, py::handle truth) {
    const ArrayView p = array_view(predicted, "classification_scores", "predicted");
    const ArrayView t = array_view(truth, "classification_scores", "truth");
    const ClassificationScores s =
        c.run(py::none(), [&](const Context& ctx) { return classification_scores(ctx, p.view, t.view); });
    const auto K = py::ssize_t(s.classes.size());
    py::dict d;
    d["oa"] = number(s.oa);
    d["aa"] = number(s.aa);
    d["kappa"] = number(s.kappa);
    d["confusion"] = array_of(s.confusion, {K, K});
    d["classes"] = array_of(s.classes, {K});
    d["per_class_accuracy"] = array_of(s.per_class_accuracy, {K});
    d["counts"] = array_of(s.counts, {K});
    d["total"] = s.total;
    d["correct"] = s.correct;
    return d;
}

py::tuple split_binding(PyContext& c, py::handle truth, const py::dict& keywords) {
    const SplitOptions o = options_from<SplitOptions>(keywords, "stratified_split");
    const ArrayView t = array_view(truth, "stratified_split", "truth");
    Split s = c.run(py::none(), [&](const Context& ctx) { return stratified_split(ctx, t.view, o); });
    return py::make_tuple(to_numpy(std::move(s.train)), to_numpy(std::move(s.test)));
}

/// The keywords of train_classifier(): the SVM's (its seed a keyword, as in classify()).
struct TrainKeywords {
    SvmOptions svm;
};

template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, TrainKeywords>
void visit_fields(O& k, V&& visit) {
    visit_svm_keywords(k.svm, visit);
}

/// train_classifier(ctx, cube (an array, or a file path: the training pixels' rows read a strip at a
/// time within memory_limit), train, classifier, keywords, progress, memory_limit) -> ClassifierModel.
ClassifierModel train_binding(PyContext& c, py::handle cube, py::handle train, const std::string& classifier,
                              const py::dict& keywords, py::object progress, py::object memory_limit) {
    const TrainKeywords k = options_from<TrainKeywords>(keywords, "train_classifier");
    const Classifier which = parse_enum<Classifier>(classifier, "train_classifier: classifier");
    const TiledInput in = tiled_input(cube, "train_classifier");
    const ArrayView labels = array_view(train, "train_classifier", "train");
    py::dict limit;
    limit["memory_limit"] = memory_limit;
    const std::size_t strip_bytes = tile_options_from(limit).memory_limit;
    return c.run(std::move(progress), [&](const Context& ctx) {
        if (in.file) return train_classifier(ctx, *in.file, labels.view, which, k.svm, strip_bytes);
        return train_classifier(ctx, in.array->view, labels.view, which, k.svm);
    });
}

/// predict(ctx, model, cube or path, tiles, progress) -> (H, W) int32 NumPy: whole, or in tiles when
/// tile options are given or the cube is a file (read by windows).
py::object predict_binding(PyContext& c, const ClassifierModel& model, py::handle cube, const py::dict& tiles,
                           py::object progress) {
    const TiledInput in = tiled_input(cube, "predict");
    const TileOptions t = tile_options_from(tiles);
    Cube classes = c.run(std::move(progress), [&](const Context& ctx) {
        if (!in.file && tiles.empty()) return predict_classifier(ctx, in.array->view, model);
        Cube map(in.width(), in.height(), 1, DType::I32);
        if (in.file) predict_classifier_tiled(ctx, *in.file, model, map.mutable_view(), t);
        else predict_classifier_tiled(ctx, in.array->view, model, map.mutable_view(), t);
        return map;
    });
    return to_numpy(std::move(classes));
}

// Pickling keeps every number exactly (a LIBSVM model file keeps 8 digits of the support vectors).
py::dict model_state(const ClassifierModel& m) {
    py::dict d;
    d["classifier"] = std::string(enum_name(m.classifier));
    if (m.means) {
        d["classes"] = m.means->classes, d["counts"] = m.means->counts, d["bands"] = m.means->bands;
        d["means"] = m.means->means;
        return d;
    }
    const SvmModel& v = *m.svm;
    d["classes"] = v.classes, d["bands"] = v.bands, d["c"] = v.c, d["gamma"] = v.gamma;
    d["scale_min"] = v.scale_min, d["scale_max"] = v.scale_max, d["sv_count"] = v.sv_count;
    d["support_vectors"] = v.support_vectors, d["coef"] = v.coef, d["rho"] = v.rho;
    d["cv_accuracy"] = v.cv_accuracy, d["training_pixels"] = v.training_pixels;
    py::list grid;
    for (const SvmGridPoint& g : v.grid) grid.append(py::make_tuple(g.c, g.gamma, g.accuracy));
    d["grid"] = grid;
    return d;
}

ClassifierModel model_from_state(const py::dict& d) {
    ClassifierModel m;
    m.classifier = parse_enum<Classifier>(d["classifier"].cast<std::string>(), "ClassifierModel: classifier");
    if (m.classifier != Classifier::Svm) {
        ClassMeans& c = m.means.emplace();
        c.classifier = m.classifier;
        c.classes = d["classes"].cast<std::vector<std::int32_t>>();
        c.counts = d["counts"].cast<std::vector<std::int64_t>>();
        c.bands = d["bands"].cast<int>();
        c.means = d["means"].cast<std::vector<double>>();
        return m;
    }
    SvmModel& v = m.svm.emplace();
    v.classes = d["classes"].cast<std::vector<std::int32_t>>();
    v.bands = d["bands"].cast<int>();
    v.c = d["c"].cast<double>(), v.gamma = d["gamma"].cast<double>();
    v.scale_min = d["scale_min"].cast<std::vector<double>>(), v.scale_max = d["scale_max"].cast<std::vector<double>>();
    v.sv_count = d["sv_count"].cast<std::vector<std::int32_t>>();
    v.support_vectors = d["support_vectors"].cast<std::vector<double>>();
    v.coef = d["coef"].cast<std::vector<double>>(), v.rho = d["rho"].cast<std::vector<double>>();
    v.cv_accuracy = d["cv_accuracy"].cast<double>(), v.training_pixels = d["training_pixels"].cast<std::int64_t>();
    for (const py::handle g : d["grid"].cast<py::list>()) {
        const auto t = g.cast<py::tuple>();
        v.grid.push_back({t[0].cast<double>(), t[1].cast<double>(), t[2].cast<double>()});
    }
    return m;
}

void bind_model(py::module_& m) {
    m.def("train_declarations", &declarations<TrainKeywords>);
    py::class_<ClassifierModel>(m, "NativeClassifierModel")
        .def_property_readonly("classifier", [](const ClassifierModel& x) { return std::string(enum_name(x.classifier)); })
        .def_property_readonly("classes", [](const ClassifierModel& x) { return x.classes(); })
        .def_property_readonly("bands", &ClassifierModel::bands)
        .def("info", [](const ClassifierModel& x) {
            return x.svm ? model_dict(x.svm, std::nullopt) : model_dict(std::nullopt, x.means);
        })
        .def("save", [](const ClassifierModel& x, const std::filesystem::path& path) { write_classifier_model(x, path); })
        .def(py::pickle([](const ClassifierModel& x) { return model_state(x); },
                        [](const py::dict& d) { return model_from_state(d); }));
    m.def("train_classifier", &train_binding);
    m.def("predict_classifier", &predict_binding);
    m.def("read_classifier_model", [](const std::filesystem::path& path) { return read_classifier_model(path); });
}

}  // namespace

void bind_classify(py::module_& m) {
    bind_model(m);
    m.def("classify_declarations", &declarations<ClassifyKeywords>);
    m.def("region_vote_declarations", &declarations<VoteOptions>);
    m.def("split_declarations", &declarations<SplitOptions>);
    m.def("classify", &classify_binding);
    m.def("region_vote", &vote_binding);
    m.def("classification_scores", &scores_binding);
    m.def("stratified_split", &split_binding);
}

}  // namespace cubekit::python
