// Shared pieces of the detection training (train_internal.hpp): seeded sampling, checks of the
// labelled cubes, pixel reads, the report's metrics (ROC-AUC, confusion, F1 threshold) and its JSON.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "cubekit/error.hpp"
#include "detect/train_internal.hpp"

namespace cubekit {

namespace detail {

std::vector<std::int64_t> random_permutation(std::int64_t n, SplitMix64& rng) {
    std::vector<std::int64_t> p(std::size_t(std::max<std::int64_t>(n, 0)));
    std::iota(p.begin(), p.end(), std::int64_t(0));
    for (std::int64_t i = n - 1; i > 0; --i) std::swap(p[std::size_t(i)], p[std::size_t(below(rng, i + 1))]);
    return p;
}

std::vector<std::int64_t> sample_without_replacement(std::int64_t n, std::int64_t count, SplitMix64& rng) {
    std::vector<std::int64_t> p(std::size_t(std::max<std::int64_t>(n, 0)));
    std::iota(p.begin(), p.end(), std::int64_t(0));
    if (count >= n) return p;
    // The first `count` steps of Fisher–Yates from the front: a uniform subset.
    for (std::int64_t i = 0; i < count; ++i) std::swap(p[std::size_t(i)], p[std::size_t(i + below(rng, n - i))]);
    p.resize(std::size_t(count));
    std::sort(p.begin(), p.end());
    return p;
}

namespace {

std::string shape_text(const CubeView& v) {
    return std::to_string(v.width()) + "x" + std::to_string(v.height()) + "x" + std::to_string(v.bands());
}

void check_label_values(const CubeView& labels, std::string_view function, std::size_t i) {
    for (int y = 0; y < labels.height(); ++y)
        for (int x = 0; x < labels.width(); ++x) {
            const int v = label_at(labels, x, y);
            if (v != 0 && v != 1 && v != 255)
                throw InvalidInput(std::string(function) + ": data[" + std::to_string(i) + "].labels(" + std::to_string(x) +
                                   ", " + std::to_string(y) + ") = " + std::to_string(v) +
                                   "; expected 1 target, 0 background or 255 ignore");
        }
}

}  // namespace

int check_labelled(std::span<const LabelledCube> data, std::string_view function) {
    const std::string f(function);
    if (data.empty()) throw InvalidInput(f + ": data is empty; expected at least one labelled cube");
    const int bands = data[0].cube.bands();
    for (std::size_t i = 0; i < data.size(); ++i) {
        const CubeView& cube = data[i].cube;
        const CubeView& labels = data[i].labels;
        const std::string name = f + ": data[" + std::to_string(i) + "]";
        if (cube.empty()) throw InvalidInput(name + ".cube is empty (" + shape_text(cube) + ")");
        if (cube.on_device() || labels.on_device()) throw InvalidInput(name + ": training reads host views; download first");
        if (cube.bands() != bands)
            throw InvalidInput(name + ".cube has " + std::to_string(cube.bands()) + " bands; data[0] has " + std::to_string(bands));
        if (labels.width() != cube.width() || labels.height() != cube.height() || labels.bands() != 1)
            throw InvalidInput(name + ".labels is " + shape_text(labels) + "; expected " + std::to_string(cube.width()) + "x" +
                               std::to_string(cube.height()) + "x1, the cube's size");
        if (labels.dtype() != DType::U8)
            throw InvalidInput(name + ".labels is " + std::string(dtype_name(labels.dtype())) + "; expected u8");
        check_label_values(labels, function, i);
    }
    return bands;
}

bool read_spectrum(const CubeView& cube, int x, int y, double* out) {
    return visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const StridedView<const T> v = cube.typed<T>();
        bool finite = true;
        for (int b = 0; b < v.bands; ++b) {
            out[b] = double(v(x, y, b));
            finite = finite && std::isfinite(out[b]);
        }
        return finite;
    });
}

double roc_auc(std::span<const double> scores, std::span<const std::uint8_t> truth) {
    std::vector<std::int64_t> order(scores.size());
    std::iota(order.begin(), order.end(), std::int64_t(0));
    std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
        return scores[std::size_t(a)] < scores[std::size_t(b)] || (scores[std::size_t(a)] == scores[std::size_t(b)] && a < b);
    });
    // Mann–Whitney: Σ over targets of (background below) + ½ (background tied).
    double pairs = 0;
    std::int64_t below = 0, positives = 0, negatives = 0;
    for (std::size_t i = 0; i < order.size();) {
        std::size_t j = i;
        std::int64_t pos = 0, neg = 0;
        while (j < order.size() && scores[std::size_t(order[j])] == scores[std::size_t(order[i])]) {
            (truth[std::size_t(order[j])] ? pos : neg) += 1;
            ++j;
        }
        pairs += double(pos) * (double(below) + 0.5 * double(neg));
        below += neg;
        positives += pos;
        negatives += neg;
        i = j;
    }
    if (positives == 0 || negatives == 0) return std::nan("");
    return pairs / (double(positives) * double(negatives));
}

ConfusionMatrix confusion(std::span<const double> scores, std::span<const std::uint8_t> truth, double threshold) {
    ConfusionMatrix c;
    for (std::size_t i = 0; i < scores.size(); ++i) {
        const bool detected = scores[i] > threshold;
        if (truth[i]) (detected ? c.tp : c.fn) += 1;
        else (detected ? c.fp : c.tn) += 1;
    }
    return c;
}

double best_f1_threshold(std::span<const double> scores, std::span<const std::uint8_t> truth) {
    std::vector<std::size_t> order(scores.size());
    std::iota(order.begin(), order.end(), std::size_t(0));
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
    std::int64_t positives = 0;
    for (std::uint8_t t : truth) positives += t ? 1 : 0;
    if (positives == 0) return std::nan("");
    // Walking the distinct scores upwards: at θ = s, the detections are the samples above s.
    std::int64_t tp = positives, fp = std::int64_t(scores.size()) - positives;
    double best = -1, best_theta = std::nan("");
    for (std::size_t i = 0; i < order.size();) {
        const double s = scores[order[i]];
        while (i < order.size() && scores[order[i]] == s) (truth[order[i++]] ? tp : fp) -= 1;
        const double f1 = tp == 0 ? 0.0 : 2.0 * double(tp) / (2.0 * double(tp) + double(fp) + double(positives - tp));
        if (f1 > best) best = f1, best_theta = s;
    }
    return best_theta;
}

SplitReport split_report(std::string name, std::span<const double> scores, std::span<const std::uint8_t> truth,
                         double threshold, double loss) {
    SplitReport r;
    r.name = std::move(name);
    for (std::uint8_t t : truth) (t ? r.targets : r.background) += 1;
    r.confusion = confusion(scores, truth, threshold);
    r.auc = roc_auc(scores, truth);
    r.loss = loss;
    return r;
}

}  // namespace detail

namespace {

nlohmann::ordered_json number_or_null(double v) { return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(); }

nlohmann::ordered_json split_json(const SplitReport& s) {
    const ConfusionMatrix& c = s.confusion;
    return {{"name", s.name},
            {"targets", s.targets},
            {"background", s.background},
            {"confusion", {{"tp", c.tp}, {"fp", c.fp}, {"tn", c.tn}, {"fn", c.fn}}},
            {"auc", number_or_null(s.auc)},
            {"loss", number_or_null(s.loss)}};
}

nlohmann::ordered_json network_json(const NetworkReport& n) {
    nlohmann::ordered_json j = {{"name", n.name},
                                {"available_targets", n.available_targets},
                                {"available_background", n.available_background},
                                {"threshold", n.threshold},
                                {"solver", n.solver},
                                {"epochs", n.epochs},
                                {"best_epoch", n.best_epoch},
                                {"stop_reason", n.stop_reason},
                                {"removed_inputs", n.removed_inputs}};
    j["splits"] = nlohmann::ordered_json::array();
    for (const SplitReport& s : n.splits) j["splits"].push_back(split_json(s));
    return j;
}

}  // namespace

std::string to_json(const TrainReport& report) {
    nlohmann::ordered_json j;
    j["seed"] = report.seed;
    if (report.windows > 0) j["windows"] = report.windows;
    j["networks"] = nlohmann::ordered_json::array();
    for (const NetworkReport& n : report.networks) j["networks"].push_back(network_json(n));
    if (!report.end_to_end.empty()) {
        j["end_to_end"] = nlohmann::ordered_json::array();
        for (const EndToEndReport& e : report.end_to_end)
            j["end_to_end"].push_back({{"cube", e.cube},
                                       {"objects", e.objects},
                                       {"objects_found", e.objects_found},
                                       {"boxes", e.boxes},
                                       {"false_boxes", e.false_boxes}});
    }
    return j.dump();
}

}  // namespace cubekit
