// E6 baseline edge detectors (spec edges.md §3.10): the front door (validation, MATLAB's kernels,
// E1 quantisation, backend choice) and the CPU reference. The per-pixel rules live in
// baselines_internal.hpp, shared with the CUDA backend.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include "core/outputs.hpp"
#include "cubekit/edge_baselines.hpp"
#include "cubekit/edges.hpp"
#include "cubekit/error.hpp"
#include "edges/baselines_internal.hpp"

namespace cubekit {

std::optional<double> baseline_sigma(const BaselineOptions& o) {
    if (o.method == BaselineMethod::LoG) return o.sigma > 0 ? o.sigma : 2.0;
    if (o.method == BaselineMethod::Canny) return o.sigma > 0 ? o.sigma : std::numbers::sqrt2;
    return std::nullopt;
}

namespace detail {
namespace {

std::string number(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

// fspecial('log', fsize, sigma) with fsize = 2·⌈3σ⌉+1, then edge.m's second shift to zero mean;
// f64 as MATLAB builds it (sums in MATLAB's column-major order), rounded to f32 for the filter.
std::vector<float> matlab_log_kernel(double sigma, int& radius) {
    const int fsize = int(std::ceil(sigma * 3)) * 2 + 1;
    radius = (fsize - 1) / 2;
    const std::size_t n = std::size_t(fsize) * std::size_t(fsize);
    const double std2 = sigma * sigma;
    std::vector<double> h(n), r2(n);
    double hmax = 0;
    for (int y = -radius; y <= radius; ++y)
        for (int x = -radius; x <= radius; ++x) {
            const std::size_t i = std::size_t(y + radius) * std::size_t(fsize) + std::size_t(x + radius);
            r2[i] = double(x * x + y * y);
            h[i] = std::exp(-r2[i] / (2 * std2));
            hmax = std::max(hmax, h[i]);
        }
    const auto column_major_sum = [&](const std::vector<double>& v) {
        double s = 0;
        for (int x = 0; x < fsize; ++x)
            for (int y = 0; y < fsize; ++y) s += v[std::size_t(y) * std::size_t(fsize) + std::size_t(x)];
        return s;
    };
    for (double& v : h)
        if (v < DBL_EPSILON * hmax) v = 0;
    const double sumh = column_major_sum(h);
    if (sumh != 0)
        for (double& v : h) v /= sumh;
    for (std::size_t i = 0; i < n; ++i) h[i] = h[i] * (r2[i] - 2 * std2) / (std2 * std2);
    const double mean1 = column_major_sum(h) / double(n);
    for (double& v : h) v -= mean1;  // fspecial: the filter sums to zero
    const double mean2 = column_major_sum(h) / double(n);
    std::vector<float> kernel(n);
    for (std::size_t i = 0; i < n; ++i) kernel[i] = float(h[i] - mean2);  // edge.m: op − sum(op)/numel(op)
    return kernel;
}

// edge.m's smoothGradient kernels: a Gaussian of extent ⌈4σ⌉ normalised to sum 1, and its
// gradient() (central differences, one-sided at the ends) with the positive taps scaled to sum 1
// and the negative ones to sum −1.
void matlab_canny_kernels(double sigma, int& radius, std::vector<float>& gauss, std::vector<float>& dgauss) {
    radius = int(std::ceil(4 * sigma));
    const int n = 2 * radius + 1;
    std::vector<double> g(static_cast<std::size_t>(n)), d(static_cast<std::size_t>(n));
    const double c = 1 / (std::sqrt(2 * std::numbers::pi) * sigma);
    double sum = 0;
    for (int i = 0; i < n; ++i) {
        const double x = double(i - radius);
        g[std::size_t(i)] = c * std::exp(-(x * x) / (2 * (sigma * sigma)));
        sum += g[std::size_t(i)];
    }
    for (double& v : g) v /= sum;
    for (int i = 0; i < n; ++i) {
        const std::size_t u = std::size_t(i);
        if (i == 0) d[u] = g[1] - g[0];
        else if (i == n - 1) d[u] = g[u] - g[u - 1];
        else d[u] = (g[u + 1] - g[u - 1]) / 2;
    }
    double pos = 0, neg = 0;
    for (double v : d) {
        if (v > 0) pos += v;
        if (v < 0) neg += v;
    }
    for (double& v : d) {
        if (v > 0) v /= pos;
        else if (v < 0) v /= std::abs(neg);
    }
    gauss.assign(g.begin(), g.end());
    dgauss.assign(d.begin(), d.end());
}

}  // namespace

BaselinePlan make_baseline_plan(const BaselineOptions& o) {
    BaselinePlan p;
    p.method = o.method;
    const std::string name(baseline_name(o.method));
    const bool gaussian = o.method == BaselineMethod::LoG || o.method == BaselineMethod::Canny;
    check_fields(o, "edges-baseline");
    if (!gaussian && o.sigma != 0)
        throw InvalidInput("edges-baseline: sigma = " + number(o.sigma) + " with method " + name +
                           "; sigma applies to log and canny only");
    p.automatic = o.threshold < 0;
    p.threshold = p.automatic ? 0.0 : o.threshold;
    if (o.method == BaselineMethod::Canny && !p.automatic && p.threshold >= 1)
        throw InvalidInput("edges-baseline: threshold = " + number(o.threshold) +
                           " with method canny; the high threshold applies to the magnitude normalised to "
                           "[0, 1] and must be < 1");
    p.low_ratio = o.low_ratio;
    p.thin = o.thinning;
    switch (o.method) {
        case BaselineMethod::Sobel: p.mask_scale = 4, p.mask_divisor = 8; break;
        case BaselineMethod::Prewitt: p.mask_scale = 4, p.mask_divisor = 6; break;
        case BaselineMethod::Roberts: p.mask_scale = 6, p.mask_divisor = 2; break;
        case BaselineMethod::LoG:
            p.sigma = *baseline_sigma(o);
            p.log_kernel = matlab_log_kernel(p.sigma, p.radius);
            break;
        case BaselineMethod::Canny:
            p.sigma = *baseline_sigma(o);
            matlab_canny_kernels(p.sigma, p.radius, p.gauss, p.dgauss);
            break;
    }
    if (!gaussian && !p.automatic) {
        // m = gx² + gy² in integer levels; MATLAB's magnitude is sqrt(m) / (255·s): m > T²·(255·s)².
        const double unit = 255.0 * double(p.mask_divisor);
        const double cutoff = std::floor(p.threshold * unit * (p.threshold * unit));
        p.fixed_cutoff = cutoff >= 4e18 ? std::int64_t(4e18) : std::int64_t(cutoff);
    }
    return p;
}

// ---- CPU reference -------------------------------------------------------------------------------

namespace {

// Σ over a strided sequence in the fixed order of kSumLanes (see baselines_internal.hpp).
template <class Get>
double fixed_order_sum(std::size_t count, Get get) {
    double lane[kSumLanes] = {};
    for (std::size_t i = 0; i < count; ++i) lane[i % kSumLanes] = lane[i % kSumLanes] + get(i);
    for (int offset = kSumLanes / 2; offset > 0; offset /= 2)
        for (int l = 0; l < offset; ++l) lane[l] = lane[l] + lane[l + offset];
    return lane[0];
}

struct BandJob {
    const Context& ctx;
    const BaselinePlan& plan;
    const std::uint8_t* in;  // W×H levels
    std::uint8_t* out;       // W×H {0,1}
    int W, H;
    std::size_t N;
    float level[256];
};

BaselineThreshold mask_band(BandJob& j) {
    const int W = j.W, H = j.H;
    std::vector<std::int32_t> m(j.N);
    unsigned long long sum = 0;
#pragma omp parallel for num_threads(j.ctx.threads()) schedule(static) reduction(+ : sum)
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            int gx, gy;
            mask_gradient(j.in, W, H, x, y, j.plan.method, gx, gy);
            const std::int32_t v = gx * gx + gy * gy;
            m[std::size_t(y) * std::size_t(W) + std::size_t(x)] = v;
            sum += (unsigned long long)v;
        }
    const std::int64_t cutoff = j.plan.automatic ? mask_auto_cutoff(sum, j.plan.mask_scale, j.N) : j.plan.fixed_cutoff;
    const bool roberts = j.plan.method == BaselineMethod::Roberts;
#pragma omp parallel for num_threads(j.ctx.threads()) schedule(static)
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const std::size_t i = std::size_t(y) * std::size_t(W) + std::size_t(x);
            bool edge;
            if (j.plan.thin) {
                int gx, gy;
                mask_gradient(j.in, W, H, x, y, j.plan.method, gx, gy);
                edge = thinned_edge(m.data(), W, H, x, y, std::abs(gx), std::abs(gy), roberts, cutoff);
            } else {
                edge = std::int64_t(m[i]) > cutoff;
            }
            j.out[i] = edge ? 1 : 0;
        }
    const double unit = 255.0 * double(j.plan.mask_divisor);
    const double high = j.plan.automatic ? std::sqrt(double(j.plan.mask_scale) * double(sum) / double(j.N)) / unit
                                         : j.plan.threshold;
    return {high, 0.0};
}

BaselineThreshold log_band(BandJob& j) {
    const int W = j.W, H = j.H, R = j.plan.radius;
    std::vector<float> r(j.N);
    std::vector<double> row_sum(static_cast<std::size_t>(H));
    const float* kernel = j.plan.log_kernel.data();
#pragma omp parallel for num_threads(j.ctx.threads()) schedule(static)
    for (int y = 0; y < H; ++y) {
        float* row = r.data() + std::size_t(y) * std::size_t(W);
        for (int x = 0; x < W; ++x)
            row[x] = correlate_2d(kernel, R, x, y, W, H, [&](int xx, int yy) {
                return j.level[j.in[std::size_t(yy) * std::size_t(W) + std::size_t(xx)]];
            });
        row_sum[std::size_t(y)] = fixed_order_sum(std::size_t(W), [&](std::size_t i) { return std::fabs(double(row[i])); });
    }
    const double sum = fixed_order_sum(std::size_t(H), [&](std::size_t i) { return row_sum[i]; });
    const double thresh = j.plan.automatic ? 0.75 * sum / double(j.N) : j.plan.threshold;
    std::memset(j.out, 0, j.N);
#pragma omp parallel for num_threads(j.ctx.threads()) schedule(static)
    for (int y = 1; y < H - 1; ++y)
        for (int x = 1; x < W - 1; ++x) {
            const auto at = [&](int xx, int yy) { return r[std::size_t(yy) * std::size_t(W) + std::size_t(xx)]; };
            j.out[std::size_t(y) * std::size_t(W) + std::size_t(x)] =
                log_zero_crossing(at(x, y), at(x, y - 1), at(x, y + 1), at(x - 1, y), at(x + 1, y), thresh) ? 1 : 0;
        }
    return {thresh, 0.0};
}

BaselineThreshold canny_band(BandJob& j) {
    const int W = j.W, H = j.H, R = j.plan.radius;
    const std::size_t w = std::size_t(W), N = j.N;
    const float* g = j.plan.gauss.data();
    const float* dg = j.plan.dgauss.data();
    // GX = conv_x(conv_y(I, g), dg) and GY = conv_y(conv_x(I, g), dg), as smoothGradient filters.
    std::vector<float> sv(N), sh(N), gx(N), gy(N), mag(N);
#pragma omp parallel for num_threads(j.ctx.threads()) schedule(static)
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const std::size_t i = std::size_t(y) * w + std::size_t(x);
            sv[i] = convolve_1d(g, R, y, H, [&](int yy) { return j.level[j.in[std::size_t(yy) * w + std::size_t(x)]]; });
            sh[i] = convolve_1d(g, R, x, W, [&](int xx) { return j.level[j.in[std::size_t(y) * w + std::size_t(xx)]]; });
        }
    float magmax = 0.0f;
#pragma omp parallel for num_threads(j.ctx.threads()) schedule(static) reduction(max : magmax)
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const std::size_t i = std::size_t(y) * w + std::size_t(x);
            gx[i] = convolve_1d(dg, R, x, W, [&](int xx) { return sv[std::size_t(y) * w + std::size_t(xx)]; });
            gy[i] = convolve_1d(dg, R, y, H, [&](int yy) { return sh[std::size_t(yy) * w + std::size_t(x)]; });
            mag[i] = canny_magnitude(gx[i], gy[i]);
            magmax = std::max(magmax, mag[i]);
        }
    unsigned long long counts[kCannyBins] = {};
    for (std::size_t i = 0; i < N; ++i) {
        if (magmax > 0.0f) mag[i] = mag[i] / magmax;
        ++counts[canny_bin(mag[i])];
    }
    const double high = j.plan.automatic ? canny_auto_high(counts, W, H) : j.plan.threshold;
    const double low = j.plan.low_ratio * high;
    std::vector<std::uint8_t> state(N, kCannyNone);
#pragma omp parallel for num_threads(j.ctx.threads()) schedule(static)
    for (int y = 1; y < H - 1; ++y)
        for (int x = 1; x < W - 1; ++x) {
            const std::size_t i = std::size_t(y) * w + std::size_t(x);
            const Neighbours nb{mag[i + 1], mag[i - w + 1], mag[i - w], mag[i - w - 1],
                                mag[i - 1], mag[i + w - 1], mag[i + w], mag[i + w + 1]};
            if (canny_local_max(gx[i], gy[i], mag[i], nb, low))
                state[i] = double(mag[i]) > high ? kCannyEdge : kCannyWeak;
        }
    // Hysteresis (bwselect of the candidates, 8-connected, seeded by the strong pixels).
    std::vector<std::size_t> stack;
    for (std::size_t i = 0; i < N; ++i)
        if (state[i] == kCannyEdge) stack.push_back(i);
    while (!stack.empty()) {
        const std::size_t i = stack.back();
        stack.pop_back();
        const int x = int(i % w), y = int(i / w);
        for (int dy = -1; dy <= 1; ++dy)
            for (int dx = -1; dx <= 1; ++dx) {
                const int xx = x + dx, yy = y + dy;
                if (xx < 0 || xx >= W || yy < 0 || yy >= H) continue;
                const std::size_t k = std::size_t(yy) * w + std::size_t(xx);
                if (state[k] == kCannyWeak) state[k] = kCannyEdge, stack.push_back(k);
            }
    }
    for (std::size_t i = 0; i < N; ++i) j.out[i] = state[i] == kCannyEdge ? 1 : 0;
    return {high, low};
}

}  // namespace

namespace {

// E1 of one band (quantize_to_u8_into, per band): the band's own samples when they already are
// dense u8 (E1 leaves 8-bit samples as they are), else the quantised plane written into `plane`.
const std::uint8_t* quantized_band(const Context& ctx, const CubeView& band, std::vector<std::uint8_t>& plane) {
    if (band.dtype() == DType::U8 && band.is_dense(Layout::BSQ)) return reinterpret_cast<const std::uint8_t*>(band.data());
    const int W = band.width(), H = band.height();
    plane.resize(band.num_pixels());
    quantize_to_u8_into(ctx, band, MutableCubeView::host(plane.data(), W, H, 1, DType::U8, dense_strides(W, H, 1, Layout::BSQ)),
                        Quantize::PerBand);
    return plane.data();
}

}  // namespace

void baseline_cpu(const Context& ctx, const CubeView& cube, const BaselinePlan& plan, const MutableCubeView& edges,
                  std::vector<BaselineThreshold>& thresholds) {
    const int W = cube.width(), H = cube.height(), B = cube.bands();
    const std::size_t N = cube.num_pixels();
    thresholds.assign(std::size_t(B), {});
    std::vector<std::uint8_t> plane;    // the E1 levels of a band that are not already u8 BSQ
    std::vector<std::uint8_t> staging;  // a band of an output that is not dense BSQ
    for (int b = 0; b < B; ++b) {
        ctx.check_cancelled("edges-baseline");
        const MutableCubeView band_out = edges.band_range(b, 1);
        const bool direct = band_out.is_dense(Layout::BSQ);
        if (!direct) staging.resize(N);
        BandJob job{ctx, plan, quantized_band(ctx, cube.band_range(b, 1), plane),
                    direct ? reinterpret_cast<std::uint8_t*>(band_out.data()) : staging.data(), W, H, N, {}};
        for (int v = 0; v < 256; ++v) job.level[v] = unit_level(std::uint8_t(v));
        switch (plan.method) {
            case BaselineMethod::Sobel:
            case BaselineMethod::Prewitt:
            case BaselineMethod::Roberts: thresholds[std::size_t(b)] = mask_band(job); break;
            case BaselineMethod::LoG: thresholds[std::size_t(b)] = log_band(job); break;
            case BaselineMethod::Canny: thresholds[std::size_t(b)] = canny_band(job); break;
        }
        if (!direct)
            copy_cube(ctx, CubeView::host(staging.data(), W, H, 1, DType::U8, dense_strides(W, H, 1, Layout::BSQ)),
                      band_out);
        ctx.progress(std::size_t(b) + 1, std::size_t(B));
    }
}

}  // namespace detail

void check_baseline_options(const BaselineOptions& options) { (void)detail::make_baseline_plan(options); }

namespace {

void check_baseline_cube(const CubeView& cube) {
    if (cube.width() <= 0 || cube.height() <= 0 || cube.bands() <= 0)
        throw InvalidInput("edges-baseline: the cube is " + std::to_string(cube.width()) + "x" +
                           std::to_string(cube.height()) + "x" + std::to_string(cube.bands()) +
                           "; width, height and bands must be at least 1");
    // The mask methods' exact integer sums stay below 2^64 up to 2^40 pixels per band.
    if (cube.num_pixels() > (std::size_t(1) << 40))
        throw InvalidInput("edges-baseline: a band of " + std::to_string(cube.num_pixels()) +
                           " pixels; at most 2^40 are supported");
}

void check_edges_output(const Context& ctx, const CubeView& cube, const MutableCubeView& edges) {
    detail::check_output_memory(ctx, edges, "edges-baseline: edges is");
    detail::check_output_shape(edges, cube.width(), cube.height(), cube.bands(), DType::U8, "edges-baseline: edges is");
}

// The checked call: CUDA takes any input (it reads its own device's samples in place and uploads
// the rest); the CPU reads host samples in place and brings device samples down once.
std::vector<BaselineThreshold> run(const Context& ctx, const CubeView& cube, const detail::BaselinePlan& plan,
                                   const MutableCubeView& edges) {
    ctx.log("edges-baseline: " + std::string(baseline_name(plan.method)) + ", " + std::string(ctx.backend_name()) +
            ", " + cube.describe());
    std::vector<BaselineThreshold> thresholds;
    if (ctx.is_cuda()) {
        detail::baseline_cuda(ctx, cube, plan, edges, thresholds);
        return thresholds;
    }
    std::optional<CubeInLayout> host;
    if (cube.on_device()) host.emplace(ctx, cube, Layout::BSQ, Memory::Host);
    detail::baseline_cpu(ctx, host ? host->view() : cube, plan, edges, thresholds);
    return thresholds;
}

}  // namespace

std::vector<BaselineThreshold> baseline_edges_into(const Context& ctx, const CubeView& cube, const MutableCubeView& edges,
                                                   const BaselineOptions& options) {
    const detail::BaselinePlan plan = detail::make_baseline_plan(options);
    check_baseline_cube(cube);
    check_edges_output(ctx, cube, edges);
    return run(ctx, cube, plan, edges);
}

BaselineResult baseline_edges_with_thresholds(const Context& ctx, const CubeView& cube, const BaselineOptions& options) {
    const detail::BaselinePlan plan = detail::make_baseline_plan(options);
    check_baseline_cube(cube);
    BaselineResult r;
    r.edges = detail::host_result(ctx, {cube.width(), cube.height(), cube.bands(), DType::U8, Layout::BSQ},
                                  [&](const MutableCubeView& edges) { r.thresholds = run(ctx, cube, plan, edges); });
    return r;
}

Cube baseline_edges(const Context& ctx, const CubeView& cube, const BaselineOptions& options) {
    return baseline_edges_with_thresholds(ctx, cube, options).edges;
}

}  // namespace cubekit

#ifndef CUBEKIT_HAVE_CUDA
namespace cubekit::detail {
// CPU-only build: a CUDA context cannot exist, so this is unreachable through the public API.
void baseline_cuda(const Context&, const CubeView&, const BaselinePlan&, const MutableCubeView&,
                   std::vector<BaselineThreshold>&) {
    throw DeviceError("edges-baseline: this cubekit was built without CUDA");
}
}  // namespace cubekit::detail
#endif
