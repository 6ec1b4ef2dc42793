// ClassifierModel (classify.hpp): a trained classifier of either kind, trained, applied, saved and
// read back through one type, for the CLI's --model-in/--model-out and Python's model object.
#include <algorithm>
#include <climits>
#include <fstream>

#include "classify/classify_internal.hpp"
#include "core/cuda_backend.hpp"
#include "core/file_strips.hpp"
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

ClassifierModel train_classifier(const Context& ctx, const CubeFile& cube, const CubeView& train, Classifier classifier,
                                 const SvmOptions& svm, std::size_t memory_limit) {
    const CubeShape& s = cube.shape();
    detail::check_label_image(train, "train_classifier", "train", s.width, s.height);
    const std::vector<std::int32_t> labels = detail::label_values(ctx, train, "train_classifier", "train");
    const auto n = std::count_if(labels.begin(), labels.end(), [](std::int32_t v) { return v != 0; });
    if (n == 0) throw InvalidInput("train_classifier: train has no labelled pixel (all are 0)");
    if (n > INT_MAX) throw InvalidInput("train_classifier: " + std::to_string(n) + " training pixels; at most 2^31 - 1");
    // The labelled pixels in raster order, side by side: the training set (classes ascending, raster
    // order inside each) and so the model are the whole cube's.
    Cube pixels = Cube::uninitialized(int(n), 1, s.bands, s.dtype, Layout::BIP);
    Cube pixel_labels = Cube::uninitialized(int(n), 1, 1, DType::I32);
    const auto labelled = [&](int y0, int h) {  // a strip without training pixels is not read
        const auto first = labels.begin() + std::ptrdiff_t(y0) * s.width;
        return std::any_of(first, first + std::ptrdiff_t(h) * s.width, [](std::int32_t v) { return v != 0; });
    };
    int k = 0;
    detail::read_in_strips(ctx, cube, memory_limit, "train_classifier", labelled, [&](int y0, const CubeView& rows) {
        for (int y = 0; y < rows.height(); ++y)
            for (int x = 0; x < s.width; ++x) {
                const std::int32_t label = labels[std::size_t(y0 + y) * std::size_t(s.width) + std::size_t(x)];
                if (label == 0) continue;
                detail::copy_cube_host(rows.window(x, y, 1, 1), pixels.mutable_view().window(k, 0, 1, 1));
                pixel_labels.data<std::int32_t>()[k++] = label;
            }
    });
    return train_classifier(ctx, pixels, pixel_labels, classifier, svm);
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
