// Training of one m–k–1 tansig/tansig network in its normalised space (spec detect.md §B.4 steps
// 5–6): Nguyen–Widrow initialisation, Levenberg–Marquardt with MATLAB trainlm's rules, and the
// sgd (momentum) and adam alternatives, early stopping on the validation loss. The loss is the
// weighted MSE on y': Σ c_n (y'_n − t'_n)² / Σ c_n. Sums over samples use fixed chunks added in
// order (train_internal.hpp), so the weights do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cubekit/error.hpp"
#include "detect/train_internal.hpp"

namespace cubekit::detail {

void nguyen_widrow(int inputs, int neurons, SplitMix64& rng, std::vector<double>& weights, std::vector<double>& biases) {
    const double beta = 0.7 * std::pow(double(neurons), 1.0 / double(inputs));
    weights.assign(std::size_t(inputs) * std::size_t(neurons), 0.0);
    biases.assign(std::size_t(neurons), 0.0);
    for (int s = 0; s < neurons; ++s) {
        double* row = weights.data() + std::size_t(s) * std::size_t(inputs);
        double norm = 0;
        for (int r = 0; r < inputs; ++r) {
            row[r] = 2 * rng.uniform() - 1;
            norm += row[r] * row[r];
        }
        norm = std::sqrt(norm);
        if (norm == 0) row[0] = 1, norm = 1;
        for (int r = 0; r < inputs; ++r) row[r] = beta * row[r] / norm;
    }
    for (int s = 0; s < neurons; ++s) {
        const double spaced = neurons == 1 ? 1.0 : -1.0 + 2.0 * double(s) / double(neurons - 1);
        biases[std::size_t(s)] = beta * spaced * (rng.uniform() < 0.5 ? -1.0 : 1.0);
    }
}

MlpWeights init_mlp(int m, int k, const std::vector<bool>& active, SplitMix64& rng) {
    std::vector<int> used;
    for (int c = 0; c < m; ++c)
        if (active[std::size_t(c)]) used.push_back(c);
    MlpWeights w{.m = m, .k = k, .W1 = std::vector<double>(std::size_t(k) * std::size_t(m), 0.0)};
    std::vector<double> rows, out_bias;
    nguyen_widrow(int(used.size()), k, rng, rows, w.b1);
    for (int i = 0; i < k; ++i)
        for (std::size_t c = 0; c < used.size(); ++c)
            w.W1[std::size_t(i) * std::size_t(m) + std::size_t(used[c])] = rows[std::size_t(i) * used.size() + c];
    nguyen_widrow(k, 1, rng, w.w2, out_bias);
    w.b2 = out_bias[0];
    return w;
}

namespace {

/// Hidden outputs g (k) of one row and y'.
double forward(const MlpWeights& w, const double* x, double* g) {
    double o = 0;
    for (int i = 0; i < w.k; ++i) {
        const double* row = w.W1.data() + std::size_t(i) * std::size_t(w.m);
        double h = 0;
        for (int c = 0; c < w.m; ++c) h += row[c] * x[c];
        g[i] = std::tanh(h + w.b1[std::size_t(i)]);
        o += w.w2[std::size_t(i)] * g[i];
    }
    return std::tanh(o + w.b2);
}

/// The trainable parameters: per neuron its active input weights, then b1, w2, b2.
struct ParamLayout {
    std::vector<int> used;  ///< active input columns
    int k = 0;
    std::size_t size() const { return std::size_t(k) * (used.size() + 2) + 1; }
};

std::vector<double> pack(const MlpWeights& w, const ParamLayout& L) {
    std::vector<double> v;
    v.reserve(L.size());
    for (int i = 0; i < w.k; ++i)
        for (int c : L.used) v.push_back(w.W1[std::size_t(i) * std::size_t(w.m) + std::size_t(c)]);
    v.insert(v.end(), w.b1.begin(), w.b1.end());
    v.insert(v.end(), w.w2.begin(), w.w2.end());
    v.push_back(w.b2);
    return v;
}

void unpack(const std::vector<double>& v, const ParamLayout& L, MlpWeights& w) {
    std::size_t p = 0;
    for (int i = 0; i < w.k; ++i)
        for (int c : L.used) w.W1[std::size_t(i) * std::size_t(w.m) + std::size_t(c)] = v[p++];
    for (double& b : w.b1) b = v[p++];
    for (double& b : w.w2) b = v[p++];
    w.b2 = v[p];
}

/// ∂y'/∂θ of one row (packed order) into j; returns y'.
double row_jacobian(const MlpWeights& w, const ParamLayout& L, const double* x, double* g, double* j) {
    const double y = forward(w, x, g);
    const double dy = 1 - y * y;
    const std::size_t a = L.used.size();
    for (int i = 0; i < w.k; ++i) {
        const double dh = dy * w.w2[std::size_t(i)] * (1 - g[i] * g[i]);
        double* row = j + std::size_t(i) * a;
        for (std::size_t c = 0; c < a; ++c) row[c] = dh * x[L.used[c]];
        j[std::size_t(w.k) * a + std::size_t(i)] = dh;
        j[std::size_t(w.k) * (a + 1) + std::size_t(i)] = dy * g[i];
    }
    j[L.size() - 1] = dy;
    return y;
}

double weight_sum(const MlpTrainSet& s, const std::vector<std::int64_t>& idx) {
    double sum = 0;
    for (std::int64_t i : idx) sum += s.weights[std::size_t(i)];
    return sum;
}

/// Weighted MSE on y' over the samples idx.
double subset_loss(const Context& ctx, const MlpWeights& w, const MlpTrainSet& s, const std::vector<std::int64_t>& idx) {
    if (idx.empty()) return std::nan("");
    const std::vector<double> parts = chunk_partials<double>(ctx, std::int64_t(idx.size()), "train_multires", [&](std::int64_t b, std::int64_t e) {
        std::vector<double> g(static_cast<std::size_t>(w.k));
        double sum = 0;
        for (std::int64_t q = b; q < e; ++q) {
            const std::int64_t i = idx[std::size_t(q)];
            const double r = forward(w, s.x.data() + i * s.m, g.data()) - s.targets[std::size_t(i)];
            sum += s.weights[std::size_t(i)] * r * r;
        }
        return sum;
    });
    double total = 0;
    for (double p : parts) total += p;
    return total / weight_sum(s, idx);
}

/// JᵀJ (upper triangle, P×P), Jᵀr and Σr² of the residuals r_n = √c_n (y'_n − t'_n) over the train split.
struct Normal {
    std::vector<double> JtJ, Jtr;
    double sse = 0;
};

Normal normal_equations(const Context& ctx, const MlpWeights& w, const ParamLayout& L, const MlpTrainSet& s) {
    const std::size_t P = L.size();
    const auto n = std::int64_t(s.train.size());
    const std::vector<Normal> parts = chunk_partials<Normal>(ctx, n, "train_multires", [&](std::int64_t b, std::int64_t e) {
        Normal part{std::vector<double>(P * P, 0.0), std::vector<double>(P, 0.0), 0.0};
        std::vector<double> g(static_cast<std::size_t>(w.k)), j(P);
        for (std::int64_t q = b; q < e; ++q) {
            const std::int64_t i = s.train[std::size_t(q)];
            const double sc = std::sqrt(s.weights[std::size_t(i)]);
            const double r = sc * (row_jacobian(w, L, s.x.data() + i * s.m, g.data(), j.data()) - s.targets[std::size_t(i)]);
            for (double& v : j) v *= sc;
            for (std::size_t a = 0; a < P; ++a) {
                const double ja = j[a];
                double* row = part.JtJ.data() + a * P;
                for (std::size_t c = a; c < P; ++c) row[c] += ja * j[c];
                part.Jtr[a] += ja * r;
            }
            part.sse += r * r;
        }
        return part;
    });
    Normal total{std::vector<double>(P * P, 0.0), std::vector<double>(P, 0.0), 0.0};
    for (const Normal& part : parts) {
        for (std::size_t i = 0; i < total.JtJ.size(); ++i) total.JtJ[i] += part.JtJ[i];
        for (std::size_t i = 0; i < P; ++i) total.Jtr[i] += part.Jtr[i];
        total.sse += part.sse;
    }
    return total;
}

/// Solves (JᵀJ + μI) Δ = −Jᵀr by Cholesky (UᵀU, U upper); false when it fails. Right-looking: after
/// row j of U is formed, every later row subtracts its outer-product term (contiguous, vectorised);
/// each entry subtracts the terms q = 0, 1, ... in order. One thread: a parallel region per column
/// stalls on a loaded machine (measured 20x slower on 2 busy cores).
bool lm_step(const Normal& ne, std::size_t P, double mu, std::vector<double>& delta) {
    std::vector<double> U = ne.JtJ;  // upper triangle used
    for (std::size_t i = 0; i < P; ++i) U[i * P + i] += mu;
    for (std::size_t j = 0; j < P; ++j) {
        double* row = U.data() + j * P;
        if (!(row[j] > 0) || !std::isfinite(row[j])) return false;
        row[j] = std::sqrt(row[j]);
        for (std::size_t c = j + 1; c < P; ++c) row[c] /= row[j];
        const auto rest = std::int64_t(P - j - 1);
        for (std::int64_t q = 0; q < rest; ++q) {
            const std::size_t i = j + 1 + std::size_t(q);
            const double f = row[i];
            double* target = U.data() + i * P;
            for (std::size_t c = i; c < P; ++c) target[c] -= f * row[c];
        }
    }
    delta.assign(P, 0.0);
    for (std::size_t i = 0; i < P; ++i) delta[i] = -ne.Jtr[i];
    for (std::size_t i = 0; i < P; ++i) {  // Uᵀ z = −Jᵀr, column by column
        delta[i] /= U[i * P + i];
        for (std::size_t c = i + 1; c < P; ++c) delta[c] -= U[i * P + c] * delta[i];
    }
    for (std::size_t i = P; i-- > 0;) {  // U Δ = z
        double s = delta[i];
        for (std::size_t q = i + 1; q < P; ++q) s -= U[i * P + q] * delta[q];
        delta[i] = s / U[i * P + i];
    }
    return std::all_of(delta.begin(), delta.end(), [](double v) { return std::isfinite(v); });
}

/// Early stopping on the validation loss (MATLAB's rule: a failure is a loss above the best so
/// far, an improvement resets the count); keeps the best weights.
struct EarlyStop {
    bool active = false;
    double best = std::numeric_limits<double>::infinity();
    int fails = 0;
    MlpWeights best_weights;
    int best_epoch = 0;
    void observe(double loss, const MlpWeights& w, int epoch) {
        if (!active) return;
        if (loss < best) best = loss, fails = 0, best_weights = w, best_epoch = epoch;
        else if (loss > best) ++fails;
    }
};

MlpTrainOutcome train_lm(const Context& ctx, const MlpTrainSet& s, const MlpTrainSettings& o, MlpWeights w, const ParamLayout& L,
                         EarlyStop& stop) {
    MlpTrainOutcome out;
    const std::size_t P = L.size();
    const double c_sum = weight_sum(s, s.train);
    double mu = o.mu;
    std::vector<double> theta = pack(w, L), delta;
    int epoch = 0;
    for (;; ++epoch) {
        ctx.check_cancelled("train_multires");
        const Normal ne = normal_equations(ctx, w, L, s);
        double gnorm = 0;
        for (double v : ne.Jtr) gnorm += (2 * v / c_sum) * (2 * v / c_sum);
        gnorm = std::sqrt(gnorm);
        if (epoch >= o.epochs) out.stop_reason = "epochs";
        else if (gnorm < o.min_grad) out.stop_reason = "min_grad";
        else if (mu > o.mu_max) out.stop_reason = "mu_max";
        else if (stop.active && stop.fails >= o.max_fail) out.stop_reason = "validation";
        if (!out.stop_reason.empty()) break;
        bool accepted = false;
        while (mu <= o.mu_max && !accepted) {
            if (lm_step(ne, P, mu, delta)) {
                std::vector<double> trial = theta;
                for (std::size_t i = 0; i < P; ++i) trial[i] += delta[i];
                MlpWeights tw = w;
                unpack(trial, L, tw);
                if (subset_loss(ctx, tw, s, s.train) * c_sum < ne.sse) {
                    theta = std::move(trial), w = std::move(tw), accepted = true;
                    mu *= o.mu_dec;
                    continue;
                }
            }
            mu *= o.mu_inc;
        }
        if (accepted) stop.observe(subset_loss(ctx, w, s, s.validation), w, epoch + 1);
    }
    out.epochs = epoch;
    out.weights = std::move(w);
    return out;
}

/// Gradient of the weighted MSE over the samples idx[begin, end) (packed order), in sample order.
std::vector<double> batch_gradient(const MlpWeights& w, const ParamLayout& L, const MlpTrainSet& s, const std::vector<std::int64_t>& idx,
                                   std::size_t begin, std::size_t end) {
    const std::size_t P = L.size();
    std::vector<double> grad(P, 0.0), g(static_cast<std::size_t>(w.k)), j(P);
    double c_sum = 0;
    for (std::size_t q = begin; q < end; ++q) {
        const std::int64_t i = idx[q];
        const double c = s.weights[std::size_t(i)];
        const double r = row_jacobian(w, L, s.x.data() + i * s.m, g.data(), j.data()) - s.targets[std::size_t(i)];
        for (std::size_t a = 0; a < P; ++a) grad[a] += 2 * c * r * j[a];
        c_sum += c;
    }
    for (double& v : grad) v /= c_sum;
    return grad;
}

MlpTrainOutcome train_stochastic(const Context& ctx, const MlpTrainSet& s, const MlpTrainSettings& o, MlpWeights w,
                                 const ParamLayout& L, EarlyStop& stop, SplitMix64& rng) {
    constexpr double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    const std::size_t P = L.size();
    std::vector<double> theta = pack(w, L), m1(P, 0.0), m2(P, 0.0);
    std::int64_t step = 0;
    MlpTrainOutcome out;
    int epoch = 0;
    for (;; ++epoch) {
        ctx.check_cancelled("train_multires");
        if (epoch >= o.epochs) out.stop_reason = "epochs";
        else if (stop.active && stop.fails >= o.max_fail) out.stop_reason = "validation";
        if (!out.stop_reason.empty()) break;
        const std::vector<std::int64_t> perm = random_permutation(std::int64_t(s.train.size()), rng);
        std::vector<std::int64_t> order(perm.size());
        for (std::size_t i = 0; i < perm.size(); ++i) order[i] = s.train[std::size_t(perm[i])];
        for (std::size_t b = 0; b < order.size(); b += std::size_t(o.batch)) {
            const std::vector<double> g = batch_gradient(w, L, s, order, b, std::min(order.size(), b + std::size_t(o.batch)));
            ++step;
            for (std::size_t i = 0; i < P; ++i) {
                if (o.optimizer == MlpOptimizer::Sgd) {
                    m1[i] = o.momentum * m1[i] - o.learning_rate * g[i];
                    theta[i] += m1[i];
                } else {
                    m1[i] = beta1 * m1[i] + (1 - beta1) * g[i];
                    m2[i] = beta2 * m2[i] + (1 - beta2) * g[i] * g[i];
                    const double mh = m1[i] / (1 - std::pow(beta1, double(step))), vh = m2[i] / (1 - std::pow(beta2, double(step)));
                    theta[i] -= o.learning_rate * mh / (std::sqrt(vh) + eps);
                }
            }
            unpack(theta, L, w);
        }
        stop.observe(subset_loss(ctx, w, s, s.validation), w, epoch + 1);
    }
    out.epochs = epoch;
    out.weights = std::move(w);
    return out;
}

}  // namespace

double mlp_raw(const MlpWeights& w, const double* x) {
    std::vector<double> g(static_cast<std::size_t>(w.k));
    return forward(w, x, g.data());
}

MlpTrainSettings mlp_settings(const MultiresTrainOptions& o) {
    MlpTrainSettings s{.hidden = o.hidden, .optimizer = o.optimizer};
    const bool lm = o.optimizer == MlpOptimizer::Lm;
    s.epochs = o.epochs > 0 ? o.epochs : lm ? 1000 : 500;
    s.max_fail = o.max_fail > 0 ? o.max_fail : o.optimizer == MlpOptimizer::Adam ? 20 : 6;
    s.mu = o.mu, s.mu_dec = o.mu_dec, s.mu_inc = o.mu_inc, s.mu_max = o.mu_max, s.min_grad = o.min_grad;
    s.learning_rate = o.learning_rate > 0 ? o.learning_rate : o.optimizer == MlpOptimizer::Sgd ? 0.01 : 1e-3;
    s.momentum = o.momentum, s.batch = o.batch, s.seed = o.seed;
    return s;
}

MlpTrainOutcome train_mlp(const Context& ctx, const MlpTrainSet& set, const MlpTrainSettings& settings) {
    ParamLayout L{.k = settings.hidden};
    for (int c = 0; c < set.m; ++c)
        if (set.active[std::size_t(c)]) L.used.push_back(c);
    if (L.used.empty()) throw InvalidInput("train_multires: every input is constant over the training windows; nothing to learn");
    if (set.train.empty()) throw InvalidInput("train_multires: no training sample");
    SplitMix64 rng{settings.seed};
    MlpWeights w = init_mlp(set.m, settings.hidden, set.active, rng);
    EarlyStop stop{.active = !set.validation.empty()};
    stop.observe(subset_loss(ctx, w, set, set.validation), w, 0);
    MlpTrainOutcome out = settings.optimizer == MlpOptimizer::Lm ? train_lm(ctx, set, settings, w, L, stop)
                                                                 : train_stochastic(ctx, set, settings, w, L, stop, rng);
    out.best_epoch = out.epochs;
    if (stop.active) out.weights = stop.best_weights, out.best_epoch = stop.best_epoch;
    out.train_loss = subset_loss(ctx, out.weights, set, set.train);
    out.validation_loss = subset_loss(ctx, out.weights, set, set.validation);
    return out;
}

}  // namespace cubekit::detail
