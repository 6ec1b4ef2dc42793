// Multi-resolution detection, CUDA backend (spec detect.md §B.5, H100 hints).
//
// 1. block sums  one thread per (block, band) sums its b² samples in row-major order in f64 (the
//                CPU's order: bit-identical). BIP-like input: a warp covers 32 bands of one block
//                (each load one contiguous run of a pixel's bands); BSQ-like: 32 adjacent blocks of
//                one band. The cube is read once.
// 2. pyramid     one thread per (node, band) adds its children TL, TR, BL, BR in that order.
// 3. descent     one launch per level, all queued without a host round trip: a warp per active
//                window computes σ (lanes over bands, into shared memory), then lane i evaluates
//                hidden neuron i over the bands in order and lane 0 the output (the CPU's order,
//                no contraction); split windows append their children to the next level's list
//                (atomics); detections and the trace go to device arrays sized for the full tree.
//                The host reads back the counts and the windows once at the end.
#include <cuda_runtime.h>
#include <math_constants.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "core/cuda_check.hpp"
#include "cubekit/buffer.hpp"
#include "detect/detect_internal.hpp"

namespace cubekit::detail {
namespace {

struct DeviceLevel {
    std::int32_t* n;
    double* s1;
    double* s2;
    int gx, gy;
};

template <typename T>
__global__ void block_sums_kernel(StridedView<const T> v, DeviceLevel level, int block, bool bands_fastest,
                                  unsigned long long* skipped) {
    const std::int64_t nodes = std::int64_t(level.gx) * level.gy;
    const std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= nodes * v.bands) return;
    const std::int64_t node = bands_fastest ? t / v.bands : t % nodes;
    const int c = int(bands_fastest ? t % v.bands : t / nodes);
    const int x0 = int(node % level.gx) * block, y0 = int(node / level.gx) * block;
    const int x1 = min(x0 + block, v.width), y1 = min(y0 + block, v.height);
    std::int32_t n = 0;
    double s1 = 0.0, s2 = 0.0;
    unsigned long long bad = 0;
    // A block row's samples are loaded together (up to 8 loads in flight per thread), then added in
    // row-major order.
    constexpr int kRow = 8;
    for (int y = y0; y < y1; ++y)
        for (int xr = x0; xr < x1; xr += kRow) {
            double row[kRow];
#pragma unroll
            for (int j = 0; j < kRow; ++j) row[j] = xr + j < x1 ? double(v(xr + j, y, c)) : 0.0;
#pragma unroll
            for (int j = 0; j < kRow; ++j) {
                if (xr + j >= x1) break;
                const double s = row[j];
                if (!isfinite(s)) {
                    ++bad;
                    continue;
                }
                n += 1;
                s1 = __dadd_rn(s1, s);
                s2 = __dadd_rn(s2, __dmul_rn(s, s));
            }
        }
    const std::size_t at = std::size_t(node) * v.bands + c;
    level.n[at] = n;
    level.s1[at] = s1;
    level.s2[at] = s2;
    if (bad) atomicAdd(skipped, bad);
}

__global__ void merge_kernel(DeviceLevel below, DeviceLevel level, int bands) {
    const std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= std::int64_t(level.gx) * level.gy * bands) return;
    const std::int64_t node = t / bands;
    const int c = int(t % bands), i = int(node % level.gx), j = int(node / level.gx);
    std::int32_t n = 0;
    double s1 = 0.0, s2 = 0.0;
    for (int c4 = 0; c4 < 4; ++c4) {
        const int ci = 2 * i + (c4 & 1), cj = 2 * j + (c4 >> 1);
        if (ci >= below.gx || cj >= below.gy) continue;
        const std::size_t child = (std::size_t(cj) * below.gx + ci) * bands + c;
        n += below.n[child];
        s1 = __dadd_rn(s1, below.s1[child]);
        s2 = __dadd_rn(s2, below.s2[child]);
    }
    level.n[t] = n;
    level.s1[t] = s1;
    level.s2[t] = s2;
}

// ---- the descent -----------------------------------------------------------------------------------

struct DeviceMlp {
    const double *W1, *b1, *w2, *in_min, *in_max;
    double b2, norm_ymin, norm_ymax, out_tmin, out_tmax, threshold;
    int inputs, hidden;
    Activation hidden_act, output_act;
};

struct DeviceWindow {
    int i, j, level, outcome;  // outcome: Window::Outcome
    double y1, y2;
    int at_min, pad;
};

struct Descent {
    DeviceLevel level;   // this level's pyramid
    const int2* active;  // this level's list
    int2* next;          // the next level's list
    int* counts;         // active-list length per level
    unsigned long long* stats;  // per level: evaluated, positive, accepted, split
    DeviceWindow* detections;
    int* detection_count;
    DeviceWindow* trace;  // null without trace
    int* trace_count;
    int l, lmin, next_gx, next_gy, bands, keep_min_level;
};

__device__ double activate(Activation a, double v) {
    switch (a) {
        case Activation::Tansig: return tanh(v);
        case Activation::Logsig: return 1.0 / (1.0 + exp(-v));
        case Activation::Purelin: return v;
    }
    return v;
}

// The network on the warp's σ (shared memory), in evaluate()'s order; every lane gets y. The inputs
// are normalised once per window by the lanes (each x'_c is the same correctly rounded expression
// the CPU evaluates), then lane i adds neuron i's products over the inputs in order, reading W1 from
// the block's shared copy: the sequential chain touches neither global memory nor a division.
__device__ double evaluate_warp(const DeviceMlp& net, const double* W1, const double* sigma, double* xn, double* hidden_out,
                                int lane) {
    const double span = net.norm_ymax - net.norm_ymin;
    for (int c = lane; c < net.inputs; c += 32) {
        const double range = net.in_max[c] - net.in_min[c];
        xn[c] = range > 0 ? __dadd_rn(__ddiv_rn(__dmul_rn(span, sigma[c] - net.in_min[c]), range), net.norm_ymin) : sigma[c];
    }
    __syncwarp();
    for (int i = lane; i < net.hidden; i += 32) {
        double h = 0.0;
        const double* w = W1 + std::size_t(i) * net.inputs;
        for (int c = 0; c < net.inputs; ++c) h = __dadd_rn(h, __dmul_rn(w[c], xn[c]));
        hidden_out[i] = activate(net.hidden_act, __dadd_rn(h, net.b1[i]));
    }
    __syncwarp();
    double y = 0.0;
    if (lane == 0) {
        double out = net.b2;
        for (int i = 0; i < net.hidden; ++i) out = __dadd_rn(out, __dmul_rn(net.w2[i], hidden_out[i]));
        const double raw = activate(net.output_act, out);
        y = __dadd_rn(__ddiv_rn(__dmul_rn(net.out_tmax - net.out_tmin, raw - net.norm_ymin), span), net.out_tmin);
    }
    __syncwarp();
    return __shfl_sync(0xffffffffu, y, 0);
}

// Shared memory of the descent: both networks' W1 (when `stage_weights`), then per warp σ, the
// normalised inputs and the hidden outputs.
struct DescentSmem {
    int w1_doubles = 0, per_warp = 0;
};

__global__ void descend_kernel(Descent d, DeviceMlp ann1, DeviceMlp ann2, DescentSmem layout, bool stage_weights) {
    extern __shared__ double shared[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const double* W1a = ann1.W1;
    const double* W1b = ann2.W1;
    if (stage_weights) {
        const int na = ann1.hidden * ann1.inputs, nb = ann2.hidden * ann2.inputs;
        for (int e = threadIdx.x; e < na + nb; e += blockDim.x) shared[e] = e < na ? ann1.W1[e] : ann2.W1[e - na];
        __syncthreads();
        W1a = shared;
        W1b = shared + na;
    }
    double* sigma = shared + layout.w1_doubles + std::size_t(warp) * layout.per_warp;
    double* xn = sigma + d.bands;
    double* hidden = xn + d.bands;
    const int count = d.counts[d.l];
    for (int w = blockIdx.x * warps + warp; w < count; w += gridDim.x * warps) {
        const int2 node = d.active[w];
        const std::size_t at = (std::size_t(node.y) * d.level.gx + node.x) * d.bands;
        bool empty = false;
        for (int c = lane; c < d.bands; c += 32) {
            const std::int32_t cnt = d.level.n[at + c];
            empty |= cnt == 0;
            const double n = double(cnt), s1 = d.level.s1[at + c], s2 = d.level.s2[at + c];
            const double variance = __ddiv_rn(s2 - __ddiv_rn(__dmul_rn(s1, s1), n), n);
            sigma[c] = sqrt(fmax(0.0, variance));
        }
        empty = __any_sync(0xffffffffu, empty);
        __syncwarp();
        DeviceWindow win{node.x, node.y, d.l, int(Window::Outcome::Rejected), CUDART_NAN, CUDART_NAN, 0, 0};
        bool emit = false;
        if (!empty) {
            win.y1 = evaluate_warp(ann1, W1a, sigma, xn, hidden, lane);
            if (win.y1 > ann1.threshold) {
                win.y2 = evaluate_warp(ann2, W1b, sigma, xn, hidden, lane);
                if (win.y2 > ann2.threshold) {
                    win.outcome = int(Window::Outcome::Accepted);
                    emit = true;
                } else if (d.l > d.lmin) {
                    win.outcome = int(Window::Outcome::Split);
                } else {
                    win.at_min = 1;
                    win.outcome = int(d.keep_min_level ? Window::Outcome::Forced : Window::Outcome::Dropped);
                    emit = d.keep_min_level != 0;
                }
            }
        }
        if (lane == 0) {
            unsigned long long* s = d.stats + 4 * d.l;
            atomicAdd(s + 0, 1ull);
            if (win.outcome != int(Window::Outcome::Rejected)) atomicAdd(s + 1, 1ull);
            if (emit) {
                atomicAdd(s + 2, 1ull);
                d.detections[atomicAdd(d.detection_count, 1)] = win;
            }
            if (win.outcome == int(Window::Outcome::Split)) {
                atomicAdd(s + 3, 1ull);
                int2 children[4];
                int k = 0;
                for (int c4 = 0; c4 < 4; ++c4) {
                    const int ci = 2 * node.x + (c4 & 1), cj = 2 * node.y + (c4 >> 1);
                    if (ci < d.next_gx && cj < d.next_gy) children[k++] = make_int2(ci, cj);
                }
                const int base = atomicAdd(d.counts + d.l - 1, k);
                for (int c4 = 0; c4 < k; ++c4) d.next[base + c4] = children[c4];
            }
            if (d.trace) d.trace[atomicAdd(d.trace_count, 1)] = win;
        }
        __syncwarp();
    }
}

// ---- host side -------------------------------------------------------------------------------------

// Device memory of one call, carved from one allocation.
class Arena {
public:
    void add(std::size_t bytes) { total_ += (bytes + 255) / 256 * 256; }
    void allocate(const Context& ctx) { buffer_ = DeviceBuffer(ctx, std::max<std::size_t>(total_, 256)); }
    /// The next piece; every take must match one add of the same size (checked).
    template <typename T>
    T* take(std::size_t count) {
        T* p = reinterpret_cast<T*>(static_cast<std::byte*>(buffer_.data()) + used_);
        used_ += (count * sizeof(T) + 255) / 256 * 256;
        if (used_ > total_) throw std::logic_error("detect multires: device arena overrun (an add() is missing)");
        return p;
    }

private:
    DeviceBuffer buffer_;
    std::size_t total_ = 0, used_ = 0;
};

std::size_t level_values(const TreeGeometry& g, int l) { return std::size_t(g.grid_x(l)) * g.grid_y(l) * g.bands; }

std::vector<DeviceLevel> build_pyramid(const Context& ctx, const CubeView& cube, const TreeGeometry& g, int top, Arena& arena,
                                       unsigned long long* skipped) {
    std::vector<DeviceLevel> levels;
    for (int l = 0; l <= top; ++l) {
        const std::size_t values = level_values(g, l);
        levels.push_back({arena.take<std::int32_t>(values), arena.take<double>(values), arena.take<double>(values),
                          g.grid_x(l), g.grid_y(l)});
    }
    const cudaStream_t stream = stream_of(ctx);
    const bool bands_fastest = cube.strides().b == 1 && cube.bands() > 1;
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const std::int64_t threads = std::int64_t(level_values(g, 0));
        const dim3 grid(unsigned((threads + 255) / 256)), block(256);
        block_sums_kernel<T><<<grid, block, 0, stream>>>(cube.typed<T>(), levels[0], g.block, bands_fastest, skipped);
        CUBEKIT_CHECK_LAUNCH(ctx, "block_sums_kernel", grid, block);
    });
    for (int l = 1; l <= top; ++l) {
        const std::int64_t threads = std::int64_t(level_values(g, l));
        const dim3 grid(unsigned((threads + 255) / 256)), block(256);
        merge_kernel<<<grid, block, 0, stream>>>(levels[std::size_t(l) - 1], levels[std::size_t(l)], g.bands);
        CUBEKIT_CHECK_LAUNCH(ctx, "merge_kernel", grid, block);
    }
    return levels;
}

void add_pyramid(Arena& arena, const TreeGeometry& g, int top) {
    for (int l = 0; l <= top; ++l) {
        const std::size_t values = level_values(g, l);
        arena.add(values * 4);
        arena.add(values * 8);
        arena.add(values * 8);
    }
}

// The networks' parameters in device memory (one upload).
struct UploadedNets {
    DeviceBuffer buffer;
    DeviceMlp ann1{}, ann2{};
};

UploadedNets upload_nets(const Context& ctx, const MultiresModel& model) {
    std::vector<double> host;
    std::vector<std::size_t> at;
    for (const MlpModel* m : {&model.ann1, &model.ann2})
        for (const std::vector<double>* v : {&m->W1, &m->b1, &m->w2, &m->in_min, &m->in_max}) {
            at.push_back(host.size());
            host.insert(host.end(), v->begin(), v->end());
        }
    UploadedNets u{DeviceBuffer(ctx, host.size() * sizeof(double)), {}, {}};
    // Pageable → device without waiting: the runtime stages the source before returning (the CUDA
    // API's documented behaviour for small asynchronous copies from pageable memory).
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(u.buffer.data(), host.data(), host.size() * sizeof(double), cudaMemcpyHostToDevice,
                                       stream_of(ctx)));
    const double* d = static_cast<const double*>(u.buffer.data());
    auto make = [&](const MlpModel& m, int k) {
        return DeviceMlp{d + at[k], d + at[k + 1], d + at[k + 2], d + at[k + 3], d + at[k + 4], m.b2, m.norm_ymin,
                         m.norm_ymax, m.out_tmin, m.out_tmax, m.threshold, m.inputs, m.hidden, m.hidden_act, m.output_act};
    };
    u.ann1 = make(model.ann1, 0);
    u.ann2 = make(model.ann2, 5);
    return u;
}

Window to_window(const DeviceWindow& d, const TreeGeometry& g) {
    Window w;
    g.box(d.level, d.i, d.j, w.x0, w.y0, w.width, w.height);
    w.level = d.level;
    w.y1 = d.y1;
    w.y2 = d.y2;
    w.at_min_scale = d.at_min != 0;
    w.outcome = Window::Outcome(d.outcome);
    return w;
}

}  // namespace

bool multires_cuda_accepts(const CubeView& cube) {
    const Strides& s = cube.strides();
    return s.x >= 0 && s.y >= 0 && s.b >= 0;
}

MultiresResult detect_multires_cuda(const Context& ctx, const CubeView& cube, const TreeGeometry& g, const MultiresModel& model,
                                    const MultiresOptions& options) {
    int lmin = 0;
    while ((g.block << lmin) < model.min_window) ++lmin;
    lmin = std::min(lmin, g.top);
    std::size_t total_nodes = 0;
    for (int l = lmin; l <= g.top; ++l) total_nodes += std::size_t(g.grid_x(l)) * g.grid_y(l);
    const int levels = g.top + 1;
    Arena arena;
    add_pyramid(arena, g, g.top);
    for (int l = 0; l <= g.top; ++l) arena.add(std::size_t(g.grid_x(l)) * g.grid_y(l) * sizeof(int2));
    arena.add(sizeof(int) * (levels + 2));                            // counts (taken separately below)
    arena.add(sizeof(unsigned long long) * (4 * levels + 1));         // stats and the skipped count
    arena.add(total_nodes * sizeof(DeviceWindow));                   // detections
    if (options.trace) arena.add(total_nodes * sizeof(DeviceWindow));  // trace
    arena.allocate(ctx);
    // Small counters first, so one memset clears them and one download reads them.
    int* counts = arena.take<int>(std::size_t(levels) + 2);  // per level, then detections, trace
    unsigned long long* stats = arena.take<unsigned long long>(std::size_t(4 * levels) + 1);  // + skipped
    const cudaStream_t stream = stream_of(ctx);
    const std::size_t counter_bytes = reinterpret_cast<std::byte*>(stats + 4 * levels + 1) - reinterpret_cast<std::byte*>(counts);
    std::vector<int> initial_counts(std::size_t(levels) + 2, 0);
    initial_counts[std::size_t(g.top)] = 1;
    CUBEKIT_CUDA_CHECK(cudaMemsetAsync(counts, 0, counter_bytes, stream));
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(counts, initial_counts.data(), initial_counts.size() * sizeof(int), cudaMemcpyHostToDevice, stream));
    std::vector<int2*> lists;
    for (int l = 0; l <= g.top; ++l) lists.push_back(arena.take<int2>(std::size_t(g.grid_x(l)) * g.grid_y(l)));
    const int2 root = make_int2(0, 0);
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(lists[std::size_t(g.top)], &root, sizeof(root), cudaMemcpyHostToDevice, stream));
    DeviceWindow* detections = arena.take<DeviceWindow>(total_nodes);
    DeviceWindow* trace = options.trace ? arena.take<DeviceWindow>(total_nodes) : nullptr;
    const std::vector<DeviceLevel> pyramid = build_pyramid(ctx, cube, g, g.top, arena, stats + 4 * levels);
    const UploadedNets nets = upload_nets(ctx, model);

    // Shared memory: both W1 (staged when they fit beside at least one warp's scratch) and per warp
    // σ, the normalised inputs and the hidden outputs.
    DescentSmem layout;
    layout.per_warp = 2 * g.bands + std::max(model.ann1.hidden, model.ann2.hidden);
    const std::size_t w1 = std::size_t(model.ann1.hidden + model.ann2.hidden) * g.bands;
    const std::size_t limit = 200 * 1024 / sizeof(double);
    const bool stage_weights = w1 + std::size_t(layout.per_warp) <= limit;
    layout.w1_doubles = stage_weights ? int(w1) : 0;
    const int warps = int(std::clamp<std::size_t>((limit - std::size_t(layout.w1_doubles)) / std::size_t(layout.per_warp), 1, 8));
    const std::size_t smem = (std::size_t(layout.w1_doubles) + std::size_t(warps) * layout.per_warp) * sizeof(double);
    if (smem > 48 * 1024) CUBEKIT_CUDA_CHECK(cudaFuncSetAttribute(descend_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    for (int l = g.top; l >= lmin; --l) {
        const std::size_t nodes = std::size_t(g.grid_x(l)) * g.grid_y(l);
        const dim3 grid(unsigned(std::min<std::size_t>((nodes + warps - 1) / warps, 1024))), block(32 * warps);
        Descent d{pyramid[std::size_t(l)], lists[std::size_t(l)], l > 0 ? lists[std::size_t(l) - 1] : nullptr, counts, stats,
                  detections, counts + levels, trace, counts + levels + 1, l, lmin,
                  l > 0 ? g.grid_x(l - 1) : 0, l > 0 ? g.grid_y(l - 1) : 0, g.bands, options.keep_min_level ? 1 : 0};
        descend_kernel<<<grid, block, smem, stream>>>(d, nets.ann1, nets.ann2, layout, stage_weights);
        CUBEKIT_CHECK_LAUNCH(ctx, "descend_kernel", grid, block);
    }
    // One read-back of the counters, then the windows.
    std::vector<std::byte> counters(counter_bytes);
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(counters.data(), counts, counter_bytes, cudaMemcpyDeviceToHost, stream));
    ctx.synchronize();
    const int* host_counts = reinterpret_cast<const int*>(counters.data());
    const auto* host_stats = reinterpret_cast<const unsigned long long*>(
        counters.data() + (reinterpret_cast<std::byte*>(stats) - reinterpret_cast<std::byte*>(counts)));
    std::vector<DeviceWindow> found(static_cast<std::size_t>(host_counts[levels]));
    std::vector<DeviceWindow> traced(static_cast<std::size_t>(host_counts[levels + 1]));
    if (!found.empty())
        CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(found.data(), detections, found.size() * sizeof(DeviceWindow), cudaMemcpyDeviceToHost, stream));
    if (!traced.empty())
        CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(traced.data(), trace, traced.size() * sizeof(DeviceWindow), cudaMemcpyDeviceToHost, stream));
    ctx.synchronize();

    MultiresResult r;
    r.block = g.block;
    r.min_window = model.min_window;
    r.top_level = g.top;
    r.skipped_samples = std::int64_t(host_stats[4 * levels]);
    for (int l = g.top; l >= lmin; --l) {
        const unsigned long long* s = host_stats + 4 * l;
        if (s[0] == 0) break;
        r.levels.push_back({l, std::int64_t(s[0]), std::int64_t(s[1]), std::int64_t(s[2]), std::int64_t(s[3])});
    }
    for (const DeviceWindow& w : found) r.detections.push_back(to_window(w, g));
    for (const DeviceWindow& w : traced) r.trace.push_back(to_window(w, g));
    sort_windows(r);
    return r;
}

std::vector<double> window_features_cuda(const Context& ctx, const CubeView& cube, const TreeGeometry& g, int level,
                                         std::vector<std::int64_t>* counts) {
    Arena arena;
    add_pyramid(arena, g, level);
    arena.add(sizeof(unsigned long long));
    arena.allocate(ctx);
    unsigned long long* skipped = arena.take<unsigned long long>(1);
    CUBEKIT_CUDA_CHECK(cudaMemsetAsync(skipped, 0, sizeof(unsigned long long), stream_of(ctx)));
    const std::vector<DeviceLevel> pyramid = build_pyramid(ctx, cube, g, level, arena, skipped);
    const DeviceLevel& d = pyramid[std::size_t(level)];
    const std::size_t values = level_values(g, level);
    PyramidLevel host;
    host.gx = d.gx;
    host.gy = d.gy;
    host.n.resize(values);
    host.s1.resize(values);
    host.s2.resize(values);
    const cudaStream_t stream = stream_of(ctx);
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(host.n.data(), d.n, values * 4, cudaMemcpyDeviceToHost, stream));
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(host.s1.data(), d.s1, values * 8, cudaMemcpyDeviceToHost, stream));
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(host.s2.data(), d.s2, values * 8, cudaMemcpyDeviceToHost, stream));
    ctx.synchronize();
    const std::int64_t nodes = std::int64_t(host.gx) * host.gy;
    std::vector<double> features(values, std::numeric_limits<double>::quiet_NaN());
    for (std::int64_t node = 0; node < nodes; ++node)
        node_feature(host, node, g.bands, features.data() + std::size_t(node) * g.bands);
    if (counts) counts->assign(host.n.begin(), host.n.end());
    return features;
}

}  // namespace cubekit::detail
