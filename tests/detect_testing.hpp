#pragma once
// Models and scenes shared by the detection tests (spec detect.md §A.6, §B.6).
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cubekit/cube.hpp"
#include "cubekit/detect_models.hpp"

namespace cubekit::testing {

/// A random RBF network m–k–1 whose centres lie in the data range [lo, hi] and whose widths make
/// scores spread over (0, 1): σ ~ spread · sqrt(m) · (hi − lo).
inline RbfnModel random_rbfn(int bands, int hidden, std::uint64_t seed, double lo = 0, double hi = 1, double spread = 0.3) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0, 1);
    RbfnModel m;
    m.bands = bands;
    m.hidden = hidden;
    for (int i = 0; i < hidden * bands; ++i) m.centres.push_back(lo + (hi - lo) * u(rng));
    for (int i = 0; i < hidden; ++i) {
        m.sigma.push_back(spread * std::sqrt(double(bands)) * (hi - lo) * (0.5 + u(rng)));
        m.weights.push_back(2 * u(rng) - 0.5);
    }
    m.bias = 0.1 * (u(rng) - 0.5);
    m.threshold = 0.3;
    return m;
}

/// The spec's closed-form feed-forward net (§B.6): positive iff σ_1 > c (identity normalisation,
/// U_11 = G = 1000, b_1 = −G·c, w_1 = 1, b_0 = 0, t = (0, 1), θ = 0.5).
inline MlpModel step_net(int bands, double c, int hidden = 2) {
    MlpModel n;
    n.inputs = bands;
    n.hidden = hidden;
    n.W1.assign(std::size_t(hidden) * bands, 0.0);
    n.W1[0] = 1000;
    n.b1.assign(std::size_t(hidden), 0.0);
    n.b1[0] = -1000 * c;
    n.w2.assign(std::size_t(hidden), 0.0);
    n.w2[0] = 1;
    n.b2 = 0;
    n.in_min.assign(std::size_t(bands), -1.0);
    n.in_max.assign(std::size_t(bands), 1.0);
    return n;
}

/// ANN-1 positive iff σ_1 > c1, ANN-2 positive iff σ_1 > c2; block 8, min_window 8.
inline MultiresModel step_multires(int bands, double c1 = 0.01, double c2 = 0.4) {
    MultiresModel m;
    m.ann1 = step_net(bands, c1);
    m.ann2 = step_net(bands, c2);
    return m;
}

/// A W×H×bands f32 BIP cube, 1 in every band inside [x0, x1) × [y0, y1), 0 elsewhere.
inline Cube square_target(int width, int height, int bands, int x0, int y0, int x1, int y1) {
    Cube c(width, height, bands, DType::F32, Layout::BIP);
    for (int y = y0; y < y1; ++y)
        for (int x = x0; x < x1; ++x)
            for (int b = 0; b < bands; ++b) c.at<float>(x, y, b) = 1.0f;
    return c;
}

}  // namespace cubekit::testing
