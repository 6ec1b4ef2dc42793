// Scores of a class map (spec gradient-watershed.md part C step 5): confusion matrix, overall and
// average accuracy, Cohen's kappa, over the labelled pixels of a truth map.
#include <algorithm>
#include <limits>

#include "classify/classify_internal.hpp"
#include "cubekit/error.hpp"

namespace cubekit {
namespace {

// Every truth class and every value predicted on a scored pixel, ascending.
std::vector<std::int32_t> matrix_classes(const std::vector<std::int32_t>& predicted, const std::vector<std::int32_t>& truth) {
    std::vector<std::int32_t> classes;
    for (std::size_t p = 0; p < truth.size(); ++p)
        if (truth[p] != 0) classes.push_back(truth[p]), classes.push_back(predicted[p]);
    std::sort(classes.begin(), classes.end());
    classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
    return classes;
}

// OA, AA and κ from the matrix (spec: p_o = OA, p_e = Σ_c row_c·col_c / total²).
void summarise(ClassificationScores& s) {
    const std::size_t K = s.classes.size();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double total = double(s.total);
    double sum_accuracy = 0, expected = 0;
    int truth_classes = 0;
    s.counts.assign(K, 0);
    s.per_class_accuracy.assign(K, nan);
    for (std::size_t i = 0; i < K; ++i) {
        std::int64_t row = 0, col = 0;
        for (std::size_t j = 0; j < K; ++j) row += s.confusion[i * K + j], col += s.confusion[j * K + i];
        s.counts[i] = row;
        s.correct += s.confusion[i * K + i];
        expected += double(row) * double(col);
        if (row == 0) continue;
        s.per_class_accuracy[i] = double(s.confusion[i * K + i]) / double(row);
        sum_accuracy += s.per_class_accuracy[i];
        ++truth_classes;
    }
    s.oa = double(s.correct) / total;
    s.aa = sum_accuracy / double(truth_classes);
    const double p_e = expected / (total * total);
    s.kappa = p_e == 1.0 ? nan : (s.oa - p_e) / (1.0 - p_e);
}

}  // namespace

ClassificationScores classification_scores(const Context& ctx, const CubeView& predicted, const CubeView& truth) {
    detail::check_label_image(truth, "classification_scores", "truth");
    detail::check_label_image(predicted, "classification_scores", "predicted", truth.width(), truth.height(), "truth");
    const std::vector<std::int32_t> t = detail::label_values(ctx, truth, "classification_scores", "truth");
    const std::vector<std::int32_t> p = detail::label_values(ctx, predicted, "classification_scores", "predicted");
    ClassificationScores s;
    s.classes = matrix_classes(p, t);
    if (s.classes.empty()) throw InvalidInput("classification_scores: truth has no labelled pixel (all are 0)");
    const std::size_t K = s.classes.size();
    const auto index = [&](std::int32_t c) {
        return std::size_t(std::lower_bound(s.classes.begin(), s.classes.end(), c) - s.classes.begin());
    };
    s.confusion.assign(K * K, 0);
    for (std::size_t i = 0; i < t.size(); ++i)
        if (t[i] != 0) ++s.confusion[index(t[i]) * K + index(p[i])], ++s.total;
    summarise(s);
    return s;
}

}  // namespace cubekit
