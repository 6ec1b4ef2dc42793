// Spectral-spatial classification (cubekit/classify.hpp): the pixel-wise classifiers (RBF SVM
// through LIBSVM, SAM, minimum distance), the chain with RCMG → watershed → majority vote, the vote
// alone, the scores and the stratified split. Results are host (NumPy) arrays: the classification
// runs on the CPU for now (device inputs are downloaded by the library).
#include <pybind11/numpy.h>

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

template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, ClassifyKeywords>
void visit_fields(O& k, V&& visit) {
    visit_fields(k.vote, visit);
    visit_fields(k.svm, [&](auto& value, const Field& field) {
        Field f = field;
        f.flag = true;  // seed: a keyword
        visit(value, f);
    });
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

}  // namespace

void bind_classify(py::module_& m) {
    m.def("classify_declarations", &declarations<ClassifyKeywords>);
    m.def("region_vote_declarations", &declarations<VoteOptions>);
    m.def("split_declarations", &declarations<SplitOptions>);
    m.def("classify", &classify_binding);
    m.def("region_vote", &vote_binding);
    m.def("classification_scores", &scores_binding);
    m.def("stratified_split", &split_binding);
}

}  // namespace cubekit::python
