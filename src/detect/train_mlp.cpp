// Training of the multi-resolution detector's ANN-1 and ANN-2 (spec detect.md §B.4): the training
// windows and their labels, stratified subsampling, class weights, the 70/15/15 split, mapminmax with
// removeconstantrows, the networks (train_mlp_net.cpp), the report and the end-to-end check.
//
// cubekit decisions beyond the letter of §B.4 (options in MultiresTrainOptions, on by default):
// - Levenberg–Marquardt μ0 = 1 (spec 1e-3). The 64 σ inputs are nearly collinear (neighbouring
//   bands), so JᵀJ has near-null directions; at μ = 1e-3 the first Gauss–Newton step of most
//   Nguyen–Widrow draws jumps into full saturation (every tansig ±1 in f64, gradient exactly 0,
//   stop "min_grad" after one epoch, ANN-1 negative everywhere: the full-size sea scene gave 0 boxes).
//   Measured on the sea scenes: 3 of 4 draws stalled at 1e-3, none of 10 at μ0 ≥ 1. μ still falls
//   by mu_dec after every good step, so after three steps it is back at the spec's value.
// - restarts = 2: each network trains from several Nguyen–Widrow draws (restart r: seed
//   + 2·stream + r·γ, r = 0 the single run's) and keeps the lowest validation loss.
// - level_balance: the subsampling to max_windows spreads each class's quota over the quad-tree
//   levels by water-filling (the few upper-level windows are all kept, the 8×8 ones thinned) and
//   each level gets an equal share of its class's weight, so that the large windows the descent
//   meets first are not drowned by 16 384 blocks per scene.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "cubekit/detect.hpp"
#include "cubekit/error.hpp"
#include "cubekit/labels.hpp"
#include "detect/train_internal.hpp"

namespace cubekit {

namespace {

using detail::SplitMix64;
using detail::TrainWindow;

constexpr const char* kFunction = "train_multires";

bool power_of_two(std::int64_t v) { return v >= 1 && (v & (v - 1)) == 0; }

void check_options(const MultiresTrainOptions& o) {
    check_fields(o, kFunction);
    if (!power_of_two(o.block))
        throw InvalidInput(std::string(kFunction) + ": block = " + std::to_string(o.block) + "; expected a power of two");
    if (o.min_window % o.block != 0 || !power_of_two(o.min_window / o.block))
        throw InvalidInput(std::string(kFunction) + ": min_window = " + std::to_string(o.min_window) +
                           "; expected block x 2^l (block = " + std::to_string(o.block) + ")");
}

/// Counts of label == value over rectangles, by an integral image ((W+1)×(H+1)).
struct LabelCounter {
    int W = 0;
    std::vector<std::int64_t> sum;
    LabelCounter(const CubeView& labels, std::uint8_t value) : W(labels.width()) {
        sum.assign(std::size_t(W + 1) * std::size_t(labels.height() + 1), 0);
        for (int y = 0; y < labels.height(); ++y)
            for (int x = 0; x < W; ++x)
                at(x + 1, y + 1) = at(x, y + 1) + at(x + 1, y) - at(x, y) + (detail::label_at(labels, x, y) == value ? 1 : 0);
    }
    std::int64_t& at(int x, int y) { return sum[std::size_t(y) * std::size_t(W + 1) + std::size_t(x)]; }
    std::int64_t count(int x0, int y0, int w, int h) { return at(x0 + w, y0 + h) - at(x0, y0 + h) - at(x0 + w, y0) + at(x0, y0); }
};

/// The windows of one grid: the level-`level` tree nodes of the cube cropped at (dx, dy).
void add_grid(const Context& ctx, const LabelledCube& lc, int cube, int block, int level, int dx, int dy,
              LabelCounter& targets, LabelCounter& ignored, std::vector<TrainWindow>& out) {
    const CubeView view = lc.cube.window(dx, dy, lc.cube.width() - dx, lc.cube.height() - dy);
    const int m = view.bands();
    const std::int64_t s = std::int64_t(block) << level;
    std::vector<std::int64_t> counts;
    const std::vector<double> features = window_features(ctx, view, block, level, &counts);
    const auto nx = int((view.width() + s - 1) / s), ny = int((view.height() + s - 1) / s);
    const bool shifted = dx != 0 || dy != 0;
    for (int j = 0; j < ny; ++j)
        for (int i = 0; i < nx; ++i) {
            const std::size_t node = std::size_t(j) * std::size_t(nx) + std::size_t(i);
            TrainWindow w{.cube = cube, .level = level, .x0 = dx + int(i * s), .y0 = dy + int(j * s), .shifted = shifted};
            w.width = int(std::min<std::int64_t>(s, view.width() - i * s));
            w.height = int(std::min<std::int64_t>(s, view.height() - j * s));
            const std::int64_t area = std::int64_t(w.width) * w.height;
            if (shifted && 2 * area < s * s) continue;  // the 50 % clipped-area rule
            if (ignored.count(w.x0, w.y0, w.width, w.height) > 0) continue;
            const std::int64_t* n = counts.data() + node * std::size_t(m);
            if (std::any_of(n, n + m, [](std::int64_t c) { return c == 0; })) continue;
            w.target_px = targets.count(w.x0, w.y0, w.width, w.height);
            w.fill = double(w.target_px) / double(area);
            w.feature.assign(features.begin() + std::ptrdiff_t(node * std::size_t(m)),
                             features.begin() + std::ptrdiff_t((node + 1) * std::size_t(m)));
            out.push_back(std::move(w));
        }
}

}  // namespace

namespace detail {

std::vector<TrainWindow> sample_windows(const Context& ctx, std::span<const LabelledCube> data, const MultiresTrainOptions& o) {
    std::vector<TrainWindow> out;
    int l_min = 0;
    while ((o.block << l_min) < o.min_window) ++l_min;
    for (std::size_t c = 0; c < data.size(); ++c) {
        const int W = data[c].cube.width(), H = data[c].cube.height();
        LabelCounter targets(data[c].labels, 1), ignored(data[c].labels, 255);
        const int top = multires_top_level(W, H, o.block);
        for (int l = l_min; l <= top; ++l) {
            add_grid(ctx, data[c], int(c), o.block, l, 0, 0, targets, ignored, out);
            if (!o.shifted_grids || l == 0) continue;  // s/2 is a multiple of b from level 1 on
            const int half = o.block << (l - 1);
            for (const auto& [dx, dy] : {std::pair{half, 0}, std::pair{0, half}, std::pair{half, half}}) {
                // Beyond the cropped cube's own top level every window is under half of s².
                if (dx >= W || dy >= H || l > multires_top_level(W - dx, H - dy, o.block)) continue;
                add_grid(ctx, data[c], int(c), o.block, l, dx, dy, targets, ignored, out);
            }
        }
    }
    return out;
}

}  // namespace detail

namespace {

/// One network's data: the chosen windows (indices into the sampled list) and their truth.
struct NetworkData {
    std::vector<std::int64_t> windows;
    std::vector<std::uint8_t> truth;
    std::int64_t available_targets = 0, available_background = 0;
};

/// The counts kept of groups of sizes `sizes` within `budget` (water-filling): every group gets an
/// equal share, a group smaller than its share is kept whole and its unused share goes to the
/// others. Sum = min(budget, Σ sizes).
std::vector<std::int64_t> water_fill(const std::vector<std::int64_t>& sizes, std::int64_t budget) {
    std::vector<std::size_t> order(sizes.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return sizes[a] < sizes[b]; });
    std::vector<std::int64_t> keep(sizes.size(), 0);
    std::int64_t left = budget;
    for (std::size_t r = 0; r < order.size(); ++r) {
        const auto groups_left = std::int64_t(order.size() - r);
        const std::int64_t share = left / groups_left + (left % groups_left > 0 ? 1 : 0);
        keep[order[r]] = std::min(sizes[order[r]], std::max<std::int64_t>(share, 0));
        left -= keep[order[r]];
    }
    return keep;
}

/// At most max_windows of the candidates, each class subsampled in proportion (uniform without
/// replacement), kept in window order. With level_balance a class's quota is spread over its
/// levels by water_fill (the scarce upper levels are kept whole, the abundant lower ones thinned),
/// each level subsampled uniformly.
NetworkData stratified(const std::vector<TrainWindow>& windows, const std::vector<std::int64_t>& candidates,
                       const std::vector<std::uint8_t>& truth, const MultiresTrainOptions& o, SplitMix64& rng) {
    std::vector<std::int64_t> pos, neg;
    for (std::size_t i = 0; i < candidates.size(); ++i) (truth[i] ? pos : neg).push_back(candidates[i]);
    NetworkData d{.available_targets = std::int64_t(pos.size()), .available_background = std::int64_t(neg.size())};
    const auto n = std::int64_t(candidates.size());
    std::int64_t n_pos = d.available_targets, n_neg = d.available_background;
    if (n > o.max_windows) {
        n_pos = std::clamp<std::int64_t>(std::llround(double(o.max_windows) * double(n_pos) / double(n)), 1, o.max_windows - 1);
        n_neg = o.max_windows - n_pos;
    }
    std::vector<std::pair<std::int64_t, std::uint8_t>> chosen;
    const auto take = [&](const std::vector<std::int64_t>& members, std::int64_t count, std::uint8_t t) {
        if (!o.level_balance) {
            for (std::int64_t i : detail::sample_without_replacement(std::int64_t(members.size()), count, rng))
                chosen.push_back({members[std::size_t(i)], t});
            return;
        }
        std::vector<std::vector<std::int64_t>> by_level;
        for (std::int64_t w : members) {
            const auto l = std::size_t(windows[std::size_t(w)].level);
            if (by_level.size() <= l) by_level.resize(l + 1);
            by_level[l].push_back(w);
        }
        std::vector<std::int64_t> sizes;
        for (const auto& g : by_level) sizes.push_back(std::int64_t(g.size()));
        const std::vector<std::int64_t> keep = water_fill(sizes, count);
        for (std::size_t l = 0; l < by_level.size(); ++l)
            for (std::int64_t i : detail::sample_without_replacement(sizes[l], keep[l], rng)) chosen.push_back({by_level[l][std::size_t(i)], t});
    };
    take(pos, n_pos, 1);
    take(neg, n_neg, 0);
    std::sort(chosen.begin(), chosen.end());
    for (const auto& [w, t] : chosen) d.windows.push_back(w), d.truth.push_back(t);
    return d;
}

/// MATLAB dividerand: a random permutation, the first 70 % train, then 15 % validation, 15 % test
/// (rounded counts; train takes the rest), each part in increasing order.
void divide_random(std::int64_t n, SplitMix64& rng, detail::MlpTrainSet& set) {
    const std::int64_t n_val = std::llround(0.15 * double(n)), n_test = std::llround(0.15 * double(n));
    const std::int64_t n_train = n - n_val - n_test;
    const std::vector<std::int64_t> perm = detail::random_permutation(n, rng);
    for (std::int64_t i = 0; i < n; ++i)
        (i < n_train ? set.train : i < n_train + n_val ? set.validation : set.test).push_back(perm[std::size_t(i)]);
    for (auto* part : {&set.train, &set.validation, &set.test}) std::sort(part->begin(), part->end());
}

/// mapminmax settings over the network's windows; a constant input passes through and is inactive.
MlpModel normalisation(const std::vector<TrainWindow>& windows, const NetworkData& d, int m, const MultiresTrainOptions& o) {
    MlpModel model{.inputs = m, .hidden = o.hidden};
    model.in_min.assign(std::size_t(m), 0.0);
    model.in_max.assign(std::size_t(m), 0.0);
    for (int c = 0; c < m; ++c) {
        double lo = windows[std::size_t(d.windows[0])].feature[std::size_t(c)], hi = lo;
        for (std::int64_t w : d.windows) {
            const double v = windows[std::size_t(w)].feature[std::size_t(c)];
            lo = std::min(lo, v), hi = std::max(hi, v);
        }
        model.in_min[std::size_t(c)] = lo, model.in_max[std::size_t(c)] = hi;
    }
    model.threshold = o.threshold;
    return model;
}

double normalised(const MlpModel& model, int c, double v) {
    const double range = model.in_max[std::size_t(c)] - model.in_min[std::size_t(c)];
    const double span = model.norm_ymax - model.norm_ymin;
    return range > 0 ? span * (v - model.in_min[std::size_t(c)]) / range + model.norm_ymin : v;
}

std::vector<double> class_weights(const std::vector<std::uint8_t>& truth) {
    std::int64_t pos = 0;
    for (std::uint8_t t : truth) pos += t;
    const auto n = std::int64_t(truth.size());
    std::vector<double> c(truth.size());
    for (std::size_t i = 0; i < truth.size(); ++i) c[i] = pos == 0 || pos == n ? 1.0 : double(n) / (2.0 * double(truth[i] ? pos : n - pos));
    return c;
}

/// The sample weights of a network: the spec's class weights, or with level_balance
/// c_n = n / (2 · G_class · n_{class,level}) with G_class the levels holding windows of that class
/// (a class alone: n / (G · n_level)). Each class still totals n/2 and each level of a class gets an
/// equal share of it, so the few large windows the descent meets first weigh as much as the
/// thousands of 8×8 ones.
std::vector<double> sample_weights(const std::vector<TrainWindow>& windows, const NetworkData& d, const MultiresTrainOptions& o) {
    if (!o.level_balance) return class_weights(d.truth);
    std::vector<std::int64_t> count[2];
    for (std::size_t i = 0; i < d.windows.size(); ++i) {
        auto& per = count[d.truth[i] ? 1 : 0];
        const auto l = std::size_t(windows[std::size_t(d.windows[i])].level);
        if (per.size() <= l) per.resize(l + 1, 0);
        ++per[l];
    }
    int groups[2] = {0, 0};
    for (int t = 0; t < 2; ++t)
        for (std::int64_t v : count[t]) groups[t] += v > 0 ? 1 : 0;
    const int classes = (groups[0] > 0 ? 1 : 0) + (groups[1] > 0 ? 1 : 0);
    const auto n = double(d.windows.size());
    std::vector<double> c(d.windows.size());
    for (std::size_t i = 0; i < c.size(); ++i) {
        const int t = d.truth[i] ? 1 : 0;
        const auto l = std::size_t(windows[std::size_t(d.windows[i])].level);
        c[i] = n / (double(classes) * double(groups[t]) * double(count[t][l]));
    }
    return c;
}

SplitReport split_of(std::string name, const MlpModel& model, const std::vector<TrainWindow>& windows, const NetworkData& d,
                     const std::vector<std::int64_t>& part, const std::vector<double>& c) {
    std::vector<double> y, raw_loss_terms;
    std::vector<std::uint8_t> truth;
    double num = 0, den = 0;
    for (std::int64_t i : part) {
        const MlpOutput out = evaluate(model, windows[std::size_t(d.windows[std::size_t(i)])].feature.data());
        y.push_back(out.y);
        truth.push_back(d.truth[std::size_t(i)]);
        const double r = out.raw - (d.truth[std::size_t(i)] ? 1.0 : -1.0);
        num += c[std::size_t(i)] * r * r, den += c[std::size_t(i)];
    }
    return detail::split_report(std::move(name), y, truth, model.threshold, den > 0 ? num / den : std::nan(""));
}

/// ANN-2 when its windows hold one class only (targets too small to fill rho of any window, or
/// always large): a network that gives that class everywhere (all weights 0, y' = tanh(±1)), so
/// detection emits targets at the minimum window (at_min_scale) or at the first positive window.
MlpModel constant_network(const std::vector<TrainWindow>& windows, const NetworkData& d, int m, const MultiresTrainOptions& o,
                          NetworkReport& report) {
    MlpModel model = normalisation(windows, d, m, o);
    model.W1.assign(std::size_t(o.hidden) * std::size_t(m), 0.0);
    model.b1.assign(std::size_t(o.hidden), 0.0);
    model.w2.assign(std::size_t(o.hidden), 0.0);
    model.b2 = d.available_targets > 0 ? 1.0 : -1.0;
    report = NetworkReport{.name = "ann2", .available_targets = d.available_targets, .available_background = d.available_background,
                           .threshold = model.threshold, .stop_reason = "one_class", .solver = "constant"};
    std::vector<std::int64_t> all(d.windows.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = std::int64_t(i);
    report.splits.push_back(split_of("train", model, windows, d, all, sample_weights(windows, d, o)));
    return model;
}

/// Trains one network on its windows; fills its report.
MlpModel train_network(const Context& ctx, const std::string& name, const std::vector<TrainWindow>& windows, const NetworkData& d,
                       int m, const MultiresTrainOptions& o, std::uint64_t stream, NetworkReport& report) {
    if (name == "ann2" && d.available_targets + d.available_background > 0 && (d.available_targets == 0 || d.available_background == 0))
        return constant_network(windows, d, m, o, report);
    if (d.available_targets == 0 || d.available_background == 0)
        throw InvalidInput(std::string(kFunction) + ": " + name + " has " + std::to_string(d.available_targets) + " positive and " +
                           std::to_string(d.available_background) + " negative windows; it needs both (check the labels, " +
                           (name == "ann1" ? "min_target_px" : "rho") + " and the window sizes)");
    MlpModel model = normalisation(windows, d, m, o);
    const auto n = std::int64_t(d.windows.size());
    std::vector<double> x(std::size_t(n) * std::size_t(m)), t(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
        for (int c = 0; c < m; ++c)
            x[std::size_t(i * m + c)] = normalised(model, c, windows[std::size_t(d.windows[std::size_t(i)])].feature[std::size_t(c)]);
        t[std::size_t(i)] = d.truth[std::size_t(i)] ? 1.0 : -1.0;
    }
    const std::vector<double> c = sample_weights(windows, d, o);
    detail::MlpTrainSet set{.x = x, .m = m, .targets = t, .weights = c};
    for (int col = 0; col < m; ++col) set.active.push_back(model.in_max[std::size_t(col)] > model.in_min[std::size_t(col)]);
    SplitMix64 split_rng{o.seed + 2 * stream + 1};
    divide_random(n, split_rng, set);
    detail::MlpTrainSettings settings = detail::mlp_settings(o);
    // Restarts: restart r starts from the Nguyen–Widrow draw of seed + 2·stream + r·γ (r = 0 is the
    // single run's); the lowest validation loss wins (train loss without validation; ties: the first).
    detail::MlpTrainOutcome out;
    for (int r = 0; r < o.restarts; ++r) {
        settings.seed = o.seed + 2 * stream + std::uint64_t(r) * SplitMix64::kGamma;
        detail::MlpTrainOutcome trial = detail::train_mlp(ctx, set, settings);
        const double score = set.validation.empty() ? trial.train_loss : trial.validation_loss;
        const double best = set.validation.empty() ? out.train_loss : out.validation_loss;
        if (r == 0 || score < best) out = std::move(trial);
    }
    model.W1 = out.weights.W1, model.b1 = out.weights.b1, model.w2 = out.weights.w2, model.b2 = out.weights.b2;

    report = NetworkReport{.name = name, .available_targets = d.available_targets, .available_background = d.available_background,
                           .threshold = model.threshold, .epochs = out.epochs, .best_epoch = out.best_epoch,
                           .stop_reason = out.stop_reason, .solver = std::string(enum_name(o.optimizer))};
    report.removed_inputs = int(std::count(set.active.begin(), set.active.end(), false));
    report.splits.push_back(split_of("train", model, windows, d, set.train, c));
    report.splits.push_back(split_of("validation", model, windows, d, set.validation, c));
    report.splits.push_back(split_of("test", model, windows, d, set.test, c));
    return model;
}

/// Runs the detector on one training cube and compares its boxes with the 8-connected target objects.
EndToEndReport end_to_end(const Context& ctx, const LabelledCube& lc, int index, const MultiresModel& model) {
    const int W = lc.cube.width(), H = lc.cube.height();
    Cube mask(W, H, 1, DType::U8);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) mask.at<std::uint8_t>(x, y, 0) = detail::label_at(lc.labels, x, y) == 1 ? 1 : 0;
    const Components objects = label_components(ctx, mask, 8);
    const MultiresResult result = detect_multires(ctx, lc.cube, model);
    EndToEndReport r{.cube = index, .objects = std::int64_t(objects.per_band[0].size()), .boxes = std::int64_t(result.detections.size())};
    std::vector<bool> found(objects.per_band[0].size(), false);
    for (const Window& w : result.detections) {
        bool any = false;
        for (int y = w.y0; y < w.y0 + w.height; ++y)
            for (int x = w.x0; x < w.x0 + w.width; ++x)
                if (const int label = objects.labels.at<std::int32_t>(x, y, 0); label > 0) found[std::size_t(label - 1)] = any = true;
        r.false_boxes += any ? 0 : 1;
    }
    r.objects_found = std::int64_t(std::count(found.begin(), found.end(), true));
    return r;
}

nlohmann::ordered_json provenance(const MultiresTrainOptions& o, const TrainReport& report) {
    nlohmann::ordered_json j;
    j["method"] = "quad-tree window sigma features, Nguyen-Widrow, " + std::string(enum_name(o.optimizer)) +
                  ", early stopping (spec detect.md B.4)";
    nlohmann::ordered_json params = nlohmann::ordered_json::object();
    for (const NamedValue& p : field_values(o)) std::visit([&](const auto& v) { params[std::string(p.name)] = v; }, p.value);
    j["options"] = params;
    j["report"] = nlohmann::ordered_json::parse(to_json(report));
    return j;
}

}  // namespace

MultiresModel train_multires(const Context& ctx, std::span<const LabelledCube> data, const MultiresTrainOptions& options,
                             TrainReport* report) {
    const auto start = std::chrono::steady_clock::now();
    check_options(options);
    const int m = detail::check_labelled(data, kFunction);
    const std::vector<TrainWindow> windows = detail::sample_windows(ctx, data, options);

    std::vector<std::int64_t> all, positive;
    std::vector<std::uint8_t> t1, t2;
    for (std::size_t i = 0; i < windows.size(); ++i) {
        all.push_back(std::int64_t(i));
        t1.push_back(windows[i].target_px >= options.min_target_px ? 1 : 0);
        if (t1.back()) positive.push_back(std::int64_t(i)), t2.push_back(windows[i].fill >= options.rho ? 1 : 0);
    }
    SplitMix64 rng1{options.seed}, rng2{options.seed + 1};
    const NetworkData d1 = stratified(windows, all, t1, options, rng1);
    const NetworkData d2 = stratified(windows, positive, t2, options, rng2);

    TrainReport rep{.seed = options.seed, .windows = std::int64_t(windows.size())};
    rep.networks.resize(2);
    MultiresModel model{.block = options.block, .min_window = options.min_window};
    model.ann1 = train_network(ctx, "ann1", windows, d1, m, options, 1, rep.networks[0]);
    model.ann2 = train_network(ctx, "ann2", windows, d2, m, options, 2, rep.networks[1]);
    if (options.end_to_end)
        for (std::size_t c = 0; c < data.size(); ++c) rep.end_to_end.push_back(end_to_end(ctx, data[c], int(c), model));
    model.training_json = provenance(options, rep).dump();
    rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    validate(model, kFunction);
    if (report) *report = std::move(rep);
    return model;
}

}  // namespace cubekit
