// ClassifierModel (classify.hpp): a trained classifier of either kind, trained, applied, saved and
// read back through one type, for the CLI's --model-in/--model-out and Python's model object.
#include <fstream>

#include "cubekit/classify.hpp"
#include "cubekit/error.hpp"

namespace cubekit {

const std::vector<std::int32_t>& ClassifierModel::classes() const {
    static const std::vector<std::int32_t> none;
    return svm ? svm->classes : means ? means->classes : none;
}

namespace {

const ClassifierModel& checked(const ClassifierModel& m) {
    if (bool(m.svm) == bool(m.means) || (m.svm && m.classifier != Classifier::Svm) ||
        (m.means && m.classifier != m.means->classifier))
        throw InvalidInput("classifier model: it must hold the SVM or the class means of its classifier ('" +
                           std::string(enum_name(m.classifier)) + "')");
    return m;
}

}  // namespace

ClassifierModel train_classifier(const Context& ctx, const CubeView& cube, const CubeView& train, Classifier classifier,
                                 const SvmOptions& svm) {
    ClassifierModel m;
    m.classifier = classifier;
    if (classifier == Classifier::Svm) m.svm = train_svm(ctx, cube, train, svm);
    else m.means = train_class_means(ctx, cube, train, classifier);
    return m;
}

Cube predict_classifier(const Context& ctx, const CubeView& cube, const ClassifierModel& model) {
    checked(model);
    return model.svm ? predict_svm(ctx, cube, *model.svm).classes : predict_class_means(ctx, cube, *model.means);
}

TiledRun predict_classifier_tiled(const Context& ctx, const CubeView& cube, const ClassifierModel& model,
                                  const MutableCubeView& classes, const TileOptions& tiles) {
    checked(model);
    return model.svm ? predict_svm_tiled(ctx, cube, *model.svm, classes, tiles)
                     : predict_class_means_tiled(ctx, cube, *model.means, classes, tiles);
}

TiledRun predict_classifier_tiled(const Context& ctx, const CubeFile& cube, const ClassifierModel& model,
                                  const MutableCubeView& classes, const TileOptions& tiles) {
    checked(model);
    return model.svm ? predict_svm_tiled(ctx, cube, *model.svm, classes, tiles)
                     : predict_class_means_tiled(ctx, cube, *model.means, classes, tiles);
}

void write_classifier_model(const ClassifierModel& model, const std::filesystem::path& path) {
    checked(model);
    if (model.svm) write_svm_model(*model.svm, path);
    else write_class_means(*model.means, path);
}

ClassifierModel read_classifier_model(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in) throw IoError(path.string() + ": cannot open the model file");
    char first = 0;
    in >> first;
    ClassifierModel m;
    if (first == '{') {
        m.means = read_class_means(path);
        m.classifier = m.means->classifier;
    } else {
        m.svm = read_svm_model(path);
        m.classifier = Classifier::Svm;
    }
    return m;
}

}  // namespace cubekit
