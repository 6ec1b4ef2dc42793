#pragma once
// Pieces of the detection training (spec detect.md §A.4, §B.4) shared by train_rbfn.cpp,
// train_mlp.cpp and train_mlp_net.cpp, and the steps the tests call on their own (the least-squares
// output layer, Nguyen–Widrow, the feed-forward optimisers, the window sampling).
//
// Determinism: every reduction over samples runs over fixed chunks of kChunk samples (a partition
// that does not depend on the thread count), each chunk's partial in its own slot, the partials
// added in chunk order.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/parallel.hpp"
#include "cubekit/detect_train.hpp"
#include "cubekit/synth.hpp"

namespace cubekit::detail {

/// Samples per chunk of the fixed-partition reductions.
inline constexpr std::int64_t kChunk = 2048;

/// Runs partial(chunk, begin, end) for every fixed chunk of [0, n) in parallel and returns the
/// partials in chunk order (the caller adds them in that order).
template <class Partial, class Body>
std::vector<Partial> chunk_partials(const Context& ctx, std::int64_t n, std::string_view where, Body&& body) {
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<Partial> partials(std::size_t(chunks > 0 ? chunks : 0));
    parallel_for(ctx, chunks, {.where = where}, [&](std::int64_t c) {
        const std::int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
        partials[std::size_t(c)] = body(begin, end);
    });
    return partials;
}

/// splitmix64 of spec §C.3 (cubekit/synth.hpp): uniform() = (z >> 11)·2^-53 ∈ [0, 1).
using SplitMix64 = cubekit::SplitMix64;

/// An integer uniform on [0, n), n ≥ 1: ⌊uniform()·n⌋.
inline std::int64_t below(SplitMix64& rng, std::int64_t n) {
    const auto i = std::int64_t(rng.uniform() * double(n));
    return i < n ? i : n - 1;
}

/// A random permutation of 0..n−1 (Fisher–Yates).
std::vector<std::int64_t> random_permutation(std::int64_t n, SplitMix64& rng);
/// `count` of 0..n−1, uniform without replacement, in increasing order (all of them when count ≥ n).
std::vector<std::int64_t> sample_without_replacement(std::int64_t n, std::int64_t count, SplitMix64& rng);

/// Checks the labelled cubes (host views, labels W×H×1 u8 of the cube's size with values 0, 1,
/// 255 only, the same band count everywhere, no empty cube). Returns the band count. Throws
/// InvalidInput "<function>: data[i].labels ...".
int check_labelled(std::span<const LabelledCube> data, std::string_view function);

/// The label (0, 1, 255) of pixel (x, y).
inline std::uint8_t label_at(const CubeView& labels, int x, int y) {
    return *reinterpret_cast<const std::uint8_t*>(labels.data() + labels.offset(x, y, 0));
}

/// Pixel spectrum as f64 into out[0..m); false when a band is not finite.
bool read_spectrum(const CubeView& cube, int x, int y, double* out);

/// ROC-AUC (Mann–Whitney, ties count ½) of scores against truth (1 target, 0 background); NaN
/// without both classes.
double roc_auc(std::span<const double> scores, std::span<const std::uint8_t> truth);
/// Confusion matrix of [score > threshold] against truth.
ConfusionMatrix confusion(std::span<const double> scores, std::span<const std::uint8_t> truth, double threshold);
/// θ among the sorted distinct scores that maximises F1 of [score > θ] (ties: the smallest θ);
/// NaN without any target.
double best_f1_threshold(std::span<const double> scores, std::span<const std::uint8_t> truth);
/// A split's report: counts, confusion at θ, AUC, weighted loss.
SplitReport split_report(std::string name, std::span<const double> scores, std::span<const std::uint8_t> truth,
                         double threshold, double loss);

// ---- RBFN ----------------------------------------------------------------------------------------

/// Row-major n×k Gaussian activations h_i(x_n) = exp(−‖x_n − u_i‖²/(2σ_i²)) in f64.
std::vector<double> rbf_activations(const Context& ctx, std::span<const double> samples, int m,
                                    std::span<const double> centres, std::span<const double> sigma);

/// The output layer of spec §A.4 step 5: min Σ c_n(Φ_n·[w; th] − t_n)² + λ‖w‖², Φ_n = [h_n, 1],
/// λ = ridge_factor·trace(ΦᵀCΦ)/(k+1), the bias not penalised; Cholesky of the normal equations in
/// f64, Householder QR on [√C·Φ; √λ·I 0] when Cholesky fails.
struct OutputLayer {
    std::vector<double> weights;
    double bias = 0;
    std::string solver;  ///< "cholesky" or "qr"
};
OutputLayer solve_output_layer(const Context& ctx, std::span<const double> activations, int k,
                               std::span<const double> targets, std::span<const double> sample_weights,
                               double ridge_factor = 1e-8);

/// Nearest-centre assignment of the samples x (n×m) to kc centres (f64, bands in order, ties the
/// lower index): per cluster Σ‖x − u‖² and the member count, and the total (the inertia).
struct Clusters {
    std::vector<double> sum_d;
    std::vector<std::int64_t> count;
    double inertia = 0;
};
Clusters assign_to_centres(const Context& ctx, std::span<const double> x, int m, std::span<const double> centres, int kc);

/// y = Σ w_i h_i + bias of already transformed samples (n×m), in f64.
std::vector<double> rbfn_scores(const Context& ctx, const RbfnModel& model, std::span<const double> x);
/// Σ c_n (y_n − t_n)² / Σ c_n.
double weighted_mse(std::span<const double> scores, std::span<const std::uint8_t> truth, std::span<const double> c);

/// Samples (transformed, n×m), their truth and weights.
struct WeightedSamples {
    std::span<const double> x;
    std::span<const std::uint8_t> truth;
    std::span<const double> c;
};
/// Spec §A.4 step 6: full-batch Adam on (centres, log σ, weights, bias), loss the weighted MSE,
/// lr options.refine_lr, β = (0.9, 0.999), early stopping on the holdout loss with
/// options.refine_patience; the best holdout weights are kept (the least-squares ones when no
/// epoch improves). Without holdout samples every epoch runs and the last weights are kept.
void refine_rbfn(const Context& ctx, RbfnModel& model, const WeightedSamples& train, const WeightedSamples& holdout,
                 const RbfnTrainOptions& options, NetworkReport& report);

// ---- feed-forward networks -----------------------------------------------------------------------

/// Nguyen–Widrow (spec §B.4 step 5) of one layer with `inputs` (R) and `neurons` (S): β = 0.7·S^{1/R},
/// each row of W (S×R) uniform on [−1, 1] rescaled to norm β, biases β·linspace(−1, 1, S) (S = 1:
/// β, MATLAB's linspace) times random signs.
void nguyen_widrow(int inputs, int neurons, SplitMix64& rng, std::vector<double>& weights, std::vector<double>& biases);

/// A feed-forward training set: n×m features (already in the network's normalised input space),
/// targets t' ∈ {−1, +1}, sample weights c_n, and the indices of the train, validation and test
/// splits. `active` marks the inputs that train (removeconstantrows: the others keep weight 0).
struct MlpTrainSet {
    std::span<const double> x;  ///< n×m, normalised
    int m = 0;
    std::span<const double> targets;
    std::span<const double> weights;
    std::vector<std::int64_t> train, validation, test;
    std::vector<bool> active;
};

struct MlpTrainSettings {
    int hidden = 5;
    MlpOptimizer optimizer = MlpOptimizer::Lm;
    int epochs = 1000;
    int max_fail = 6;
    double mu = 1e-3, mu_dec = 0.1, mu_inc = 10, mu_max = 1e10, min_grad = 1e-7;
    double learning_rate = 0.01, momentum = 0.9;
    int batch = 256;
    std::uint64_t seed = 0;
};
/// The settings of `options` with the optimiser defaults filled in.
MlpTrainSettings mlp_settings(const MultiresTrainOptions& options);

/// Raw network (normalised space, tansig/tansig): W1 (k×m), b1, w2, b2.
struct MlpWeights {
    int m = 0, k = 0;
    std::vector<double> W1, b1, w2;
    double b2 = 0;
};
/// Nguyen–Widrow initialisation over the active inputs (inactive columns 0).
MlpWeights init_mlp(int m, int k, const std::vector<bool>& active, SplitMix64& rng);
/// y' of one normalised input row.
double mlp_raw(const MlpWeights& w, const double* x);

struct MlpTrainOutcome {
    MlpWeights weights;
    int epochs = 0, best_epoch = 0;
    std::string stop_reason;
    double train_loss = 0, validation_loss = 0;
};
/// Trains from Nguyen–Widrow weights (seeded) with the chosen optimiser; with validation samples
/// early stopping keeps the weights of the best validation loss (weighted MSE on y').
MlpTrainOutcome train_mlp(const Context& ctx, const MlpTrainSet& set, const MlpTrainSettings& settings);

// ---- multi-resolution windows --------------------------------------------------------------------

/// One training window of spec §B.4 step 1 with its labels (fill = targets / pixels).
struct TrainWindow {
    int cube = 0, level = 0;
    int x0 = 0, y0 = 0, width = 0, height = 0;
    bool shifted = false;
    std::int64_t target_px = 0;
    double fill = 0;
    std::vector<double> feature;  ///< σ, m values (window_features)
};
/// Every tree node of levels l_min..L of every cube, plus the shifted grids (when asked) whose
/// clipped area is ≥ 50 % of s²; windows with an ignore pixel, or a band without finite samples, are
/// dropped.
std::vector<TrainWindow> sample_windows(const Context& ctx, std::span<const LabelledCube> data,
                                        const MultiresTrainOptions& options);

}  // namespace cubekit::detail
