// The numerical steps of the RBFN training (spec detect.md §A.4 steps 3–6): nearest-centre
// assignment, activations, the balanced ridge least-squares output layer (Cholesky of the
// (k+1)² normal equations, Householder QR as the fallback) and the Adam refinement. All in f64, every
// reduction over fixed chunks combined in order (train_internal.hpp).
#include <algorithm>
#include <cmath>
#include <limits>

#include "cubekit/error.hpp"
#include "detect/train_internal.hpp"

namespace cubekit::detail {

namespace {

double squared_distance(const double* x, const double* u, int m) {
    double d = 0;
    for (int b = 0; b < m; ++b) {
        const double t = x[b] - u[b];
        d += t * t;
    }
    return d;
}

/// Normal equations ΦᵀCΦ and ΦᵀCt of one chunk, (k+1)² and k+1.
struct Normal {
    std::vector<double> A, b;
};

Normal normal_equations(const Context& ctx, std::span<const double> phi, int k, std::span<const double> t,
                        std::span<const double> c) {
    const int p = k + 1;
    const auto n = std::int64_t(t.size());
    const std::vector<Normal> parts = chunk_partials<Normal>(ctx, n, "train_rbfn", [&](std::int64_t begin, std::int64_t end) {
        Normal part{std::vector<double>(std::size_t(p * p), 0.0), std::vector<double>(std::size_t(p), 0.0)};
        std::vector<double> row(std::size_t(p), 1.0);
        for (std::int64_t i = begin; i < end; ++i) {
            std::copy_n(phi.data() + i * k, k, row.data());
            const double ci = c[std::size_t(i)];
            for (int a = 0; a < p; ++a) {
                const double ca = ci * row[std::size_t(a)];
                for (int bb = 0; bb < p; ++bb) part.A[std::size_t(a * p + bb)] += ca * row[std::size_t(bb)];
                part.b[std::size_t(a)] += ca * t[std::size_t(i)];
            }
        }
        return part;
    });
    Normal total{std::vector<double>(std::size_t(p * p), 0.0), std::vector<double>(std::size_t(p), 0.0)};
    for (const Normal& part : parts) {
        for (std::size_t i = 0; i < total.A.size(); ++i) total.A[i] += part.A[i];
        for (std::size_t i = 0; i < total.b.size(); ++i) total.b[i] += part.b[i];
    }
    return total;
}

/// Solves A x = b (A symmetric p×p) by Cholesky; false when a pivot is not positive (relative to
/// the largest diagonal entry) or not finite.
bool cholesky_solve(std::vector<double> A, int p, std::vector<double>& x) {
    double max_diag = 0;
    for (int i = 0; i < p; ++i) max_diag = std::max(max_diag, A[std::size_t(i * p + i)]);
    for (int j = 0; j < p; ++j) {
        double d = A[std::size_t(j * p + j)];
        for (int q = 0; q < j; ++q) d -= A[std::size_t(j * p + q)] * A[std::size_t(j * p + q)];
        if (!(d > 1e-15 * max_diag) || !std::isfinite(d)) return false;
        const double l = std::sqrt(d);
        A[std::size_t(j * p + j)] = l;
        for (int i = j + 1; i < p; ++i) {
            double s = A[std::size_t(i * p + j)];
            for (int q = 0; q < j; ++q) s -= A[std::size_t(i * p + q)] * A[std::size_t(j * p + q)];
            A[std::size_t(i * p + j)] = s / l;
        }
    }
    for (int i = 0; i < p; ++i) {  // L y = b
        double s = x[std::size_t(i)];
        for (int q = 0; q < i; ++q) s -= A[std::size_t(i * p + q)] * x[std::size_t(q)];
        x[std::size_t(i)] = s / A[std::size_t(i * p + i)];
    }
    for (int i = p - 1; i >= 0; --i) {  // Lᵀ x = y
        double s = x[std::size_t(i)];
        for (int q = i + 1; q < p; ++q) s -= A[std::size_t(q * p + i)] * x[std::size_t(q)];
        x[std::size_t(i)] = s / A[std::size_t(i * p + i)];
    }
    return std::all_of(x.begin(), x.end(), [](double v) { return std::isfinite(v); });
}

/// Least squares min ‖M x − r‖ by Householder QR, M rows×p row-major (overwritten).
std::vector<double> householder_solve(std::vector<double>& M, std::int64_t rows, int p, std::vector<double>& r) {
    const auto at = [&](std::int64_t i, int j) -> double& { return M[std::size_t(i * p + j)]; };
    for (int j = 0; j < p; ++j) {
        double norm = 0;
        for (std::int64_t i = j; i < rows; ++i) norm += at(i, j) * at(i, j);
        norm = std::sqrt(norm);
        if (norm == 0) continue;
        const double alpha = at(j, j) > 0 ? -norm : norm;
        at(j, j) -= alpha;  // v = column − alpha·e_j, stored in place
        double vv = 0;
        for (std::int64_t i = j; i < rows; ++i) vv += at(i, j) * at(i, j);
        const auto reflect = [&](auto&& value) {  // y ← y − 2 v (vᵀy)/(vᵀv)
            double dot = 0;
            for (std::int64_t i = j; i < rows; ++i) dot += at(i, j) * value(i);
            const double f = 2 * dot / vv;
            for (std::int64_t i = j; i < rows; ++i) value(i) -= f * at(i, j);
        };
        for (int q = j + 1; q < p; ++q) reflect([&](std::int64_t i) -> double& { return at(i, q); });
        reflect([&](std::int64_t i) -> double& { return r[std::size_t(i)]; });
        for (std::int64_t i = j + 1; i < rows; ++i) at(i, j) = 0;
        at(j, j) = alpha;
    }
    std::vector<double> x(std::size_t(p), 0.0);
    for (int i = p - 1; i >= 0; --i) {
        double s = r[std::size_t(i)];
        for (int q = i + 1; q < p; ++q) s -= at(i, q) * x[std::size_t(q)];
        x[std::size_t(i)] = at(i, i) != 0 ? s / at(i, i) : 0.0;
    }
    return x;
}

/// The fallback: QR on [√C·Φ; √λ·I 0] against [√C·t; 0].
std::vector<double> qr_output_layer(std::span<const double> phi, int k, std::span<const double> t, std::span<const double> c,
                                    double lambda) {
    const int p = k + 1;
    const auto n = std::int64_t(t.size()), rows = n + k;
    std::vector<double> M(std::size_t(rows * p), 0.0), r(std::size_t(rows), 0.0);
    for (std::int64_t i = 0; i < n; ++i) {
        const double s = std::sqrt(c[std::size_t(i)]);
        for (int a = 0; a < k; ++a) M[std::size_t(i * p + a)] = s * phi[std::size_t(i * k + a)];
        M[std::size_t(i * p + k)] = s;
        r[std::size_t(i)] = s * t[std::size_t(i)];
    }
    for (int a = 0; a < k; ++a) M[std::size_t((n + a) * p + a)] = std::sqrt(lambda);
    return householder_solve(M, rows, p, r);
}

}  // namespace

std::vector<double> rbf_activations(const Context& ctx, std::span<const double> samples, int m, std::span<const double> centres,
                                    std::span<const double> sigma) {
    const int k = int(sigma.size());
    const auto n = std::int64_t(samples.size()) / m;
    std::vector<double> h(std::size_t(n * k));
    chunk_partials<char>(ctx, n, "train_rbfn", [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i)
            for (int j = 0; j < k; ++j) {
                const double d = squared_distance(samples.data() + i * m, centres.data() + std::size_t(j) * m, m);
                const double s = sigma[std::size_t(j)];
                h[std::size_t(i * k + j)] = std::exp(-d / (2 * s * s));
            }
        return char(0);
    });
    return h;
}

Clusters assign_to_centres(const Context& ctx, std::span<const double> x, int m, std::span<const double> centres, int kc) {
    const auto n = std::int64_t(x.size()) / m;
    const std::vector<Clusters> parts = chunk_partials<Clusters>(ctx, n, "train_rbfn", [&](std::int64_t begin, std::int64_t end) {
        Clusters part{std::vector<double>(std::size_t(kc), 0.0), std::vector<std::int64_t>(std::size_t(kc), 0), 0.0};
        for (std::int64_t i = begin; i < end; ++i) {
            int best = 0;
            double best_d = std::numeric_limits<double>::infinity();
            for (int j = 0; j < kc; ++j) {
                const double d = squared_distance(x.data() + i * m, centres.data() + std::size_t(j) * m, m);
                if (d < best_d) best_d = d, best = j;
            }
            part.sum_d[std::size_t(best)] += best_d;
            part.count[std::size_t(best)] += 1;
            part.inertia += best_d;
        }
        return part;
    });
    Clusters total{std::vector<double>(std::size_t(kc), 0.0), std::vector<std::int64_t>(std::size_t(kc), 0), 0.0};
    for (const Clusters& part : parts) {
        for (int j = 0; j < kc; ++j) total.sum_d[std::size_t(j)] += part.sum_d[std::size_t(j)], total.count[std::size_t(j)] += part.count[std::size_t(j)];
        total.inertia += part.inertia;
    }
    return total;
}

std::vector<double> rbfn_scores(const Context& ctx, const RbfnModel& model, std::span<const double> x) {
    const int k = model.hidden, m = model.bands;
    const std::vector<double> h = rbf_activations(ctx, x, m, model.centres, model.sigma);
    std::vector<double> y(h.size() / std::size_t(k));
    for (std::size_t i = 0; i < y.size(); ++i) {
        double s = 0;
        for (int j = 0; j < k; ++j) s += model.weights[std::size_t(j)] * h[i * std::size_t(k) + std::size_t(j)];
        y[i] = s + model.bias;
    }
    return y;
}

double weighted_mse(std::span<const double> scores, std::span<const std::uint8_t> truth, std::span<const double> c) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < scores.size(); ++i) {
        const double r = scores[i] - double(truth[i]);
        num += c[i] * r * r;
        den += c[i];
    }
    return den > 0 ? num / den : std::nan("");
}

OutputLayer solve_output_layer(const Context& ctx, std::span<const double> activations, int k, std::span<const double> targets,
                               std::span<const double> sample_weights, double ridge_factor) {
    const int p = k + 1;
    Normal ne = normal_equations(ctx, activations, k, targets, sample_weights);
    double trace = 0;
    for (int i = 0; i < p; ++i) trace += ne.A[std::size_t(i * p + i)];
    const double lambda = ridge_factor * trace / double(p);
    for (int i = 0; i < k; ++i) ne.A[std::size_t(i * p + i)] += lambda;  // the bias is not penalised
    OutputLayer out;
    std::vector<double> x = ne.b;
    out.solver = "cholesky";
    if (!cholesky_solve(ne.A, p, x)) {
        x = qr_output_layer(activations, k, targets, sample_weights, lambda);
        out.solver = "qr";
    }
    out.weights.assign(x.begin(), x.begin() + k);
    out.bias = x[std::size_t(k)];
    return out;
}

// ---- Adam refinement -------------------------------------------------------------------------------

namespace {

/// Parameters as one vector: centres (k×m), log σ (k), weights (k), bias.
std::vector<double> pack(const RbfnModel& model) {
    std::vector<double> v = model.centres;
    for (double s : model.sigma) v.push_back(std::log(s));
    v.insert(v.end(), model.weights.begin(), model.weights.end());
    v.push_back(model.bias);
    return v;
}

void unpack(const std::vector<double>& v, RbfnModel& model) {
    const std::size_t km = model.centres.size(), k = std::size_t(model.hidden);
    std::copy_n(v.begin(), km, model.centres.begin());
    for (std::size_t i = 0; i < k; ++i) model.sigma[i] = std::exp(v[km + i]);
    std::copy_n(v.begin() + std::ptrdiff_t(km + k), k, model.weights.begin());
    model.bias = v[km + 2 * k];
}

/// Gradient of Σ c_n (y_n − t_n)² / Σ c_n with respect to pack(model).
std::vector<double> loss_gradient(const Context& ctx, const RbfnModel& model, const WeightedSamples& s) {
    const int k = model.hidden, m = model.bands;
    const auto n = std::int64_t(s.truth.size());
    const std::size_t P = std::size_t(k) * (std::size_t(m) + 2) + 1;
    double weight_sum = 0;
    for (double c : s.c) weight_sum += c;
    const std::vector<std::vector<double>> parts =
        chunk_partials<std::vector<double>>(ctx, n, "train_rbfn", [&](std::int64_t begin, std::int64_t end) {
            std::vector<double> g(P, 0.0), h(static_cast<std::size_t>(k)), d(static_cast<std::size_t>(k));
            for (std::int64_t i = begin; i < end; ++i) {
                const double* x = s.x.data() + i * m;
                double y = model.bias;
                for (int j = 0; j < k; ++j) {
                    d[std::size_t(j)] = squared_distance(x, model.centres.data() + std::size_t(j) * m, m);
                    const double sg = model.sigma[std::size_t(j)];
                    h[std::size_t(j)] = std::exp(-d[std::size_t(j)] / (2 * sg * sg));
                    y += model.weights[std::size_t(j)] * h[std::size_t(j)];
                }
                const double dy = 2 * s.c[std::size_t(i)] * (y - double(s.truth[std::size_t(i)])) / weight_sum;
                for (int j = 0; j < k; ++j) {
                    const double s2 = model.sigma[std::size_t(j)] * model.sigma[std::size_t(j)];
                    const double a = dy * model.weights[std::size_t(j)] * h[std::size_t(j)] / s2;
                    for (int b = 0; b < m; ++b) g[std::size_t(j * m + b)] += a * (x[b] - model.centres[std::size_t(j * m + b)]);
                    g[std::size_t(k * m + j)] += a * d[std::size_t(j)];
                    g[std::size_t(k * m + k + j)] += dy * h[std::size_t(j)];
                }
                g[P - 1] += dy;
            }
            return g;
        });
    std::vector<double> total(P, 0.0);
    for (const std::vector<double>& g : parts)
        for (std::size_t i = 0; i < P; ++i) total[i] += g[i];
    return total;
}

double loss(const Context& ctx, const RbfnModel& model, const WeightedSamples& s) {
    return weighted_mse(rbfn_scores(ctx, model, s.x), s.truth, s.c);
}

}  // namespace

void refine_rbfn(const Context& ctx, RbfnModel& model, const WeightedSamples& train, const WeightedSamples& holdout,
                 const RbfnTrainOptions& options, NetworkReport& report) {
    constexpr double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    const bool early_stopping = !holdout.truth.empty();
    std::vector<double> theta = pack(model), best = theta, mom(theta.size(), 0.0), vel(theta.size(), 0.0);
    double best_loss = early_stopping ? loss(ctx, model, holdout) : 0;
    int since_best = 0, epoch = 0;
    report.stop_reason = "epochs";
    for (epoch = 1; epoch <= options.refine_epochs; ++epoch) {
        ctx.check_cancelled("train_rbfn");
        const std::vector<double> g = loss_gradient(ctx, model, train);
        const double c1 = 1 - std::pow(beta1, epoch), c2 = 1 - std::pow(beta2, epoch);
        for (std::size_t i = 0; i < theta.size(); ++i) {
            mom[i] = beta1 * mom[i] + (1 - beta1) * g[i];
            vel[i] = beta2 * vel[i] + (1 - beta2) * g[i] * g[i];
            theta[i] -= options.refine_lr * (mom[i] / c1) / (std::sqrt(vel[i] / c2) + eps);
        }
        unpack(theta, model);
        if (!early_stopping) continue;
        const double l = loss(ctx, model, holdout);
        if (l < best_loss) {
            best_loss = l, best = theta, since_best = 0, report.best_epoch = epoch;
        } else if (++since_best >= options.refine_patience) {
            report.stop_reason = "patience";
            break;
        }
    }
    report.epochs = std::min(epoch, options.refine_epochs);
    if (early_stopping) unpack(best, model);
    else report.best_epoch = report.epochs;
}

}  // namespace cubekit::detail
