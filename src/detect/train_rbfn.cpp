// Training of the pixel-level RBF network (spec detect.md §A.4): sampling with a holdout, the input
// transform, class-split k-means centres (the target share capped by the target sample count),
// RMS-radius widths, the balanced ridge least-squares output layer and the optional Adam refinement
// (train_rbfn_fit.cpp), θ, the report.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "cubekit/error.hpp"
#include "cubekit/kmeans.hpp"
#include "detect/train_internal.hpp"

namespace cubekit {

namespace {

using detail::SplitMix64;

constexpr const char* kFunction = "train_rbfn";

struct PixelRef {
    int cube = 0, x = 0, y = 0;
};

/// The finite pixels labelled `label`, in raster order of cube after cube.
std::vector<PixelRef> finite_pixels(std::span<const LabelledCube> data, int m, std::uint8_t label) {
    std::vector<PixelRef> refs;
    std::vector<double> spectrum(static_cast<std::size_t>(m));
    for (std::size_t c = 0; c < data.size(); ++c)
        for (int y = 0; y < data[c].cube.height(); ++y)
            for (int x = 0; x < data[c].cube.width(); ++x)
                if (detail::label_at(data[c].labels, x, y) == label && detail::read_spectrum(data[c].cube, x, y, spectrum.data()))
                    refs.push_back({int(c), x, y});
    return refs;
}

/// The spectra of refs[indices[i]], row by row.
std::vector<double> gather(std::span<const LabelledCube> data, int m, const std::vector<PixelRef>& refs,
                           const std::vector<std::int64_t>& indices) {
    std::vector<double> x(indices.size() * std::size_t(m));
    for (std::size_t i = 0; i < indices.size(); ++i) {
        const PixelRef& r = refs[std::size_t(indices[i])];
        detail::read_spectrum(data[std::size_t(r.cube)].cube, r.x, r.y, x.data() + i * std::size_t(m));
    }
    return x;
}

/// One class: at most max_per_class pixels, then a holdout part (both in raster order).
struct ClassDraw {
    std::int64_t available = 0;
    std::vector<double> train, holdout;  ///< rows of m values
};

ClassDraw draw_class(std::span<const LabelledCube> data, int m, std::uint8_t label, const RbfnTrainOptions& o, SplitMix64& rng) {
    const std::vector<PixelRef> refs = finite_pixels(data, m, label);
    ClassDraw d;
    d.available = std::int64_t(refs.size());
    const std::vector<std::int64_t> kept = detail::sample_without_replacement(d.available, o.max_per_class, rng);
    const auto n = std::int64_t(kept.size());
    std::int64_t n_hold = std::llround(o.holdout * double(n));
    if (n_hold >= n) n_hold = n - 1;  // keep one training sample
    const std::vector<std::int64_t> order = detail::random_permutation(n, rng);
    std::vector<std::int64_t> hold, train;
    for (std::int64_t i = 0; i < n; ++i) (i < n_hold ? hold : train).push_back(kept[std::size_t(order[std::size_t(i)])]);
    std::sort(hold.begin(), hold.end());
    std::sort(train.begin(), train.end());
    d.train = gather(data, m, refs, train);
    d.holdout = gather(data, m, refs, hold);
    return d;
}

/// Targets' rows then the background's, with 1/0 truth.
struct SampleSet {
    std::vector<double> x;
    std::vector<std::uint8_t> truth;
    std::int64_t targets = 0, background = 0;
    std::int64_t size() const { return targets + background; }
};

SampleSet join(const std::vector<double>& targets, const std::vector<double>& background, int m) {
    SampleSet s;
    s.targets = std::int64_t(targets.size()) / m;
    s.background = std::int64_t(background.size()) / m;
    s.x = targets;
    s.x.insert(s.x.end(), background.begin(), background.end());
    s.truth.assign(std::size_t(s.targets), 1);
    s.truth.resize(std::size_t(s.size()), 0);
    return s;
}

/// offset/gain of the input transform over the training samples (a constant band keeps gain 1).
void fit_input_transform(const SampleSet& train, int m, InputNorm norm, std::vector<double>& offset, std::vector<double>& gain) {
    offset.clear();
    gain.clear();
    if (norm == InputNorm::None) return;
    offset.assign(std::size_t(m), 0);
    gain.assign(std::size_t(m), 1);
    const std::int64_t n = train.size();
    for (int b = 0; b < m; ++b) {
        double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0;
        for (std::int64_t i = 0; i < n; ++i) {
            const double v = train.x[std::size_t(i * m + b)];
            lo = std::min(lo, v), hi = std::max(hi, v), sum += v;
        }
        const double mean = sum / double(n);
        double ss = 0;
        for (std::int64_t i = 0; i < n; ++i) {
            const double d = train.x[std::size_t(i * m + b)] - mean;
            ss += d * d;
        }
        const double spread = norm == InputNorm::Minmax ? hi - lo : std::sqrt(ss / double(n));
        offset[std::size_t(b)] = norm == InputNorm::Minmax ? lo : mean;
        if (spread > 0 && std::isfinite(1.0 / spread)) gain[std::size_t(b)] = 1.0 / spread;
    }
}

void apply_input_transform(std::vector<double>& x, int m, const std::vector<double>& offset, const std::vector<double>& gain) {
    if (offset.empty()) return;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const std::size_t b = i % std::size_t(m);
        x[i] = gain[b] * (x[i] - offset[b]);
    }
}

/// Number of Lloyd iterations after which the spec's rule "inertia changed by < 1e-6 relative"
/// stops a run whose inertia after each assignment step is `history`; 0 when it never does.
int relative_inertia_stop(const std::vector<double>& history) {
    for (std::size_t i = 1; i < history.size(); ++i) {
        const double before = history[i - 1], change = std::fabs(before - history[i]);
        if (change < 1e-6 * before || (before == 0 && history[i] == 0)) return int(i) + 1;
    }
    return 0;
}

/// kc centres of the class samples `x` (n×m) by the k-means family: k-means++ on every sample, Lloyd
/// until no centre moves or `max_iter`, and the relative-inertia rule applied by re-running the
/// restart with fewer iterations (the family stops on centre movement only). Restart r of class c
/// uses seed + 16c + r; the lowest f64 inertia (fixed order) wins, ties the first.
std::vector<double> class_centres(const Context& ctx, const std::vector<double>& x, int m, int kc, int cls,
                                  const RbfnTrainOptions& o) {
    const auto n = std::int64_t(x.size()) / m;
    const CubeView view = CubeView::host(x.data(), int(n), 1, m, DType::F64, dense_strides(int(n), 1, m, Layout::BIP));
    std::vector<double> best;
    double best_inertia = std::numeric_limits<double>::infinity();
    for (int r = 0; r < o.kmeans_restarts; ++r) {
        KmeansOptions km{.k = kc, .init = KmeansInit::KmeansPlusPlus, .seed = o.seed + 16 * std::uint64_t(cls) + std::uint64_t(r),
                         .init_sample = 0, .max_iter = o.kmeans_max_iter, .tol = 0, .n_init = 1, .history = true, .paint = false};
        KmeansResult run = kmeans(ctx, view, km);
        if (const int stop = relative_inertia_stop(run.history); stop > 0 && stop < run.iterations) {
            km.max_iter = stop;
            run = kmeans(ctx, view, km);
        }
        const double inertia = detail::assign_to_centres(ctx, x, m, run.centroids, kc).inertia;
        if (inertia < best_inertia) best_inertia = inertia, best = run.centroids;
    }
    return best;
}

double rms_distance_to_mean(const SampleSet& s, int m) {
    std::vector<double> mean(std::size_t(m), 0.0);
    for (std::int64_t i = 0; i < s.size(); ++i)
        for (int b = 0; b < m; ++b) mean[std::size_t(b)] += s.x[std::size_t(i * m + b)];
    for (double& v : mean) v /= double(s.size());
    double ss = 0;
    for (std::int64_t i = 0; i < s.size(); ++i)
        for (int b = 0; b < m; ++b) {
            const double d = s.x[std::size_t(i * m + b)] - mean[std::size_t(b)];
            ss += d * d;
        }
    return std::sqrt(ss / double(s.size()));
}

double centre_distance(const std::vector<double>& c, int m, int i, int j) {
    double d = 0;
    for (int b = 0; b < m; ++b) {
        const double t = c[std::size_t(i * m + b)] - c[std::size_t(j * m + b)];
        d += t * t;
    }
    return std::sqrt(d);
}

/// σ_i = s·RMS radius of cluster i; a cluster of ≤ 1 member or a σ below σ_floor gets
/// max(σ_floor, ½·min_{j≠i} ‖u_i − u_j‖).
std::vector<double> widths(const std::vector<double>& centres, int m, const std::vector<detail::Clusters>& clusters,
                           double width_scale, double sigma_floor) {
    std::vector<double> sigma;
    for (const detail::Clusters& cl : clusters)
        for (std::size_t i = 0; i < cl.count.size(); ++i)
            sigma.push_back(cl.count[i] > 0 ? width_scale * std::sqrt(cl.sum_d[i] / double(cl.count[i])) : 0.0);
    const int k = int(sigma.size());
    int first = 0;
    for (const detail::Clusters& cl : clusters) {
        for (int i = first; i < first + int(cl.count.size()); ++i)
            if (cl.count[std::size_t(i - first)] <= 1 || !(sigma[std::size_t(i)] >= sigma_floor)) {
                double nearest = std::numeric_limits<double>::infinity();
                for (int j = 0; j < k; ++j)
                    if (j != i) nearest = std::min(nearest, centre_distance(centres, m, i, j));
                sigma[std::size_t(i)] = std::isfinite(nearest) ? std::max(sigma_floor, 0.5 * nearest) : sigma_floor;
            }
        first += int(cl.count.size());
    }
    return sigma;
}

std::vector<double> class_weights(const std::vector<std::uint8_t>& truth, ClassWeight rule) {
    std::int64_t pos = 0;
    for (std::uint8_t t : truth) pos += t;
    const auto n = std::int64_t(truth.size()), neg = n - pos;
    std::vector<double> c(truth.size(), 1.0);
    if (rule == ClassWeight::Balanced)
        for (std::size_t i = 0; i < truth.size(); ++i) c[i] = double(n) / (2.0 * double(truth[i] ? pos : neg));
    return c;
}

void check_options(const RbfnTrainOptions& o) {
    check_fields(o, kFunction);
    if (o.target_centres > o.hidden)
        throw InvalidInput(std::string(kFunction) + ": target_centres = " + std::to_string(o.target_centres) +
                           " exceeds hidden = " + std::to_string(o.hidden));
}

/// k_t: the explicit target_centres, else min(⌈k/2⌉, max(1, ⌊n_t/q⌋)) (header: RbfnTrainOptions).
int target_centre_count(const RbfnTrainOptions& o, std::int64_t train_targets) {
    if (o.target_centres > 0) return o.target_centres;
    const std::int64_t by_samples = std::max<std::int64_t>(1, train_targets / std::max(o.samples_per_centre, 1));
    return int(std::min<std::int64_t>((o.hidden + 1) / 2, by_samples));
}

void check_class_sizes(const SampleSet& train, int k_t, int k_b) {
    const auto refuse = [](const std::string& what, std::int64_t have, int need) {
        throw InvalidInput(std::string(kFunction) + ": " + std::to_string(have) + " " + what + " pixels for training; " +
                           std::to_string(need) + " centres of that class need at least " + std::to_string(need));
    };
    if (train.targets < std::max(k_t, 1)) refuse("finite target (label 1)", train.targets, std::max(k_t, 1));
    if (train.background < k_b) refuse("finite background (label 0)", train.background, k_b);
}

nlohmann::ordered_json provenance(const RbfnTrainOptions& o, const TrainReport& report, double sigma_floor, int k_t) {
    nlohmann::ordered_json j;
    j["method"] = "class-split k-means centres, RMS widths, balanced ridge least squares (spec detect.md A.4)";
    nlohmann::ordered_json params = nlohmann::ordered_json::object();
    for (const NamedValue& p : field_values(o)) std::visit([&](const auto& v) { params[std::string(p.name)] = v; }, p.value);
    j["options"] = params;
    j["target_centres"] = k_t;
    j["sigma_floor"] = sigma_floor;
    j["report"] = nlohmann::ordered_json::parse(to_json(report));
    return j;
}

}  // namespace

RbfnModel train_rbfn(const Context& ctx, std::span<const LabelledCube> data, const RbfnTrainOptions& options, TrainReport* report) {
    const auto start = std::chrono::steady_clock::now();
    check_options(options);
    const int m = detail::check_labelled(data, kFunction);
    const int k = options.hidden;

    SplitMix64 rng{options.seed};
    const ClassDraw targets = draw_class(data, m, 1, options, rng);
    const ClassDraw background = draw_class(data, m, 0, options, rng);
    SampleSet train = join(targets.train, background.train, m);
    SampleSet holdout = join(targets.holdout, background.holdout, m);
    const int k_t = target_centre_count(options, train.targets), k_b = k - k_t;
    check_class_sizes(train, k_t, k_b);

    RbfnModel model;
    model.bands = m;
    model.hidden = k;
    model.target_name = options.target_name;
    fit_input_transform(train, m, options.input_norm, model.input_offset, model.input_gain);
    apply_input_transform(train.x, m, model.input_offset, model.input_gain);
    apply_input_transform(holdout.x, m, model.input_offset, model.input_gain);

    const std::vector<double> x_t(train.x.begin(), train.x.begin() + train.targets * m);
    const std::vector<double> x_b(train.x.begin() + train.targets * m, train.x.end());
    model.centres = class_centres(ctx, x_t, m, k_t, 0, options);
    std::vector<detail::Clusters> clusters{detail::assign_to_centres(ctx, x_t, m, model.centres, k_t)};
    if (k_b > 0) {
        const std::vector<double> c_b = class_centres(ctx, x_b, m, k_b, 1, options);
        model.centres.insert(model.centres.end(), c_b.begin(), c_b.end());
        clusters.push_back(detail::assign_to_centres(ctx, x_b, m, c_b, k_b));
    }
    const double sigma_floor = 1e-6 * rms_distance_to_mean(train, m);
    if (!(sigma_floor > 0))
        throw InvalidInput(std::string(kFunction) + ": the training samples are all identical; no width can be derived");
    model.sigma = widths(model.centres, m, clusters, options.width_scale, sigma_floor);

    const std::vector<double> c_train = class_weights(train.truth, options.class_weight);
    const std::vector<double> c_hold = class_weights(holdout.truth, options.class_weight);
    const std::vector<double> t_train(train.truth.begin(), train.truth.end());
    const std::vector<double> phi = detail::rbf_activations(ctx, train.x, m, model.centres, model.sigma);
    const detail::OutputLayer out = detail::solve_output_layer(ctx, phi, k, t_train, c_train);
    model.weights = out.weights;
    model.bias = out.bias;

    NetworkReport net{.name = "rbfn", .available_targets = targets.available, .available_background = background.available,
                      .stop_reason = "least_squares", .solver = out.solver};
    if (options.refine_epochs > 0)
        detail::refine_rbfn(ctx, model, {train.x, train.truth, c_train}, {holdout.x, holdout.truth, c_hold}, options, net);

    const std::vector<double> s_train = detail::rbfn_scores(ctx, model, train.x);
    const std::vector<double> s_hold = detail::rbfn_scores(ctx, model, holdout.x);
    model.threshold = options.threshold;
    if (options.auto_threshold)
        if (const double theta = detail::best_f1_threshold(s_hold, holdout.truth); std::isfinite(theta)) model.threshold = theta;
    net.threshold = model.threshold;
    net.splits.push_back(detail::split_report("train", s_train, train.truth, model.threshold,
                                              detail::weighted_mse(s_train, train.truth, c_train)));
    net.splits.push_back(detail::split_report("holdout", s_hold, holdout.truth, model.threshold,
                                              detail::weighted_mse(s_hold, holdout.truth, c_hold)));
    TrainReport rep{.seed = options.seed};
    rep.networks.push_back(std::move(net));
    model.training_json = provenance(options, rep, sigma_floor, k_t).dump();
    rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    validate(model, kFunction);
    if (report) *report = std::move(rep);
    return model;
}

}  // namespace cubekit
