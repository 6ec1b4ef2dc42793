// Multi-resolution detection, CUDA backend (spec detect.md §B.5, H100 hints).
//
// 1-2. the pyramid of block sums and σ: multires_pyramid.cu.
// 3. descent     two launches, whatever the depth. Every node of levels lmin..top is evaluated (a
//                warp per few nodes: σ into shared memory, lane (node, i) evaluates hidden neuron i
//                over the bands in order and lane `node` the output: the CPU's order, no
//                contraction). Then a thread per node walks up its ancestors: the node is reached
//                when every one split, and reached nodes are counted and listed. A node's outcome
//                depends on its own σ only, so this equals the CPU's level-by-level descent; it
//                replaced one launch per level (~15 µs each, 2026-11-26).
//                The host reads back the counters and the first detections in one copy.
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
#include "detect/multires_pyramid.cuh"

namespace cubekit::detail {
namespace {

// ---- the descent -----------------------------------------------------------------------------------

struct DeviceMlp {
    const double *W1t, *b1, *w2, *in_min, *in_max;  // W1t: W1 transposed, inputs × hidden
    double b2, norm_ymin, norm_ymax, out_tmin, out_tmax, threshold;
    int inputs, hidden;
    Activation hidden_act, output_act;
};

struct DeviceWindow {
    int i, j, level, outcome;  // outcome: Window::Outcome
    double y1, y2;
    int at_min, pad;
};

// The pyramid levels lmin..top and where each level's nodes start in the per-node arrays (levels
// in increasing order; node (i, j) of level l is offset[l] + j·gx + i).
constexpr int kMaxLevels = 32;
struct NodeTree {
    DeviceLevel level[kMaxLevels];
    std::int64_t offset[kMaxLevels + 1];
    int lmin, top, bands, keep_min_level;
    __device__ int level_of(std::int64_t node) const {
        int l = lmin;
        while (node >= offset[l + 1]) ++l;
        return l;
    }
};

// What the descent found, in device memory: counts, per-level stats, windows.
struct DescentOut {
    unsigned long long* stats;  // per level: evaluated, positive, accepted, split
    DeviceWindow* detections;
    int* detection_count;
    DeviceWindow* trace;  // null without trace
    int* trace_count;
};

__device__ double activate(Activation a, double v) {
    switch (a) {
        case Activation::Tansig: return tanh(v);
        case Activation::Logsig: return 1.0 / (1.0 + exp(-v));
        case Activation::Purelin: return v;
    }
    return v;
}

// Shared memory of the evaluation: both networks' W1t (when `stage_weights`), then per warp the σ
// and normalised inputs of its `nodes` nodes (rows of `stride` doubles: odd, so that the nodes'
// rows fall in different banks) and their hidden outputs (rows of `hidden` doubles).
struct EvalSmem {
    int w1_doubles = 0, per_warp = 0, stride = 0, nodes = 1, hidden = 0;
};

// One network on the σ rows of a warp's `count` nodes, in evaluate()'s order (no contraction); lane
// s < count returns node s's y. The lanes normalise the inputs (each x'_c the CPU's correctly
// rounded expression); then lane (s, i) adds neuron i's products over the inputs in order, and lane
// s the output. Lanes of one neuron read one W1t address (a broadcast) and the neurons' addresses
// are adjacent, so a step of the chains costs two shared-memory wavefronts for every node of the
// warp. (A lane per neuron of one node, with W1 by rows, cost six per node: the evaluation of all
// nodes took 81 µs on the 1024² scene, bound by shared-memory replays.)
__device__ double evaluate_nodes(const DeviceMlp& net, const double* W1t, const double* sigma, double* xn, double* hidden,
                                 int count, const EvalSmem& layout, int lane) {
    const double span = net.norm_ymax - net.norm_ymin;
    for (int c = lane; c < net.inputs; c += 32) {
        const double lo = net.in_min[c], range = net.in_max[c] - lo;
        for (int s = 0; s < count; ++s) {
            const double v = sigma[s * layout.stride + c];
            xn[s * layout.stride + c] = range > 0 ? __dadd_rn(__ddiv_rn(__dmul_rn(span, v - lo), range), net.norm_ymin) : v;
        }
    }
    __syncwarp();
    // Lane → (node s, first neuron i); more than 32 neurons: one node, lanes stride the neurons.
    const int per_node = min(layout.hidden, 32);
    const int s = lane / per_node;
    if (s < count)
        for (int i = lane % per_node; i < net.hidden; i += per_node) {
            double h = 0.0;
            const double* x = xn + s * layout.stride;
            const double* w = W1t + i;
            // Four steps' operands are loaded before their additions (the chain stays in order).
            int c = 0;
            for (; c + 4 <= net.inputs; c += 4) {
                const double w0 = w[c * net.hidden], w1 = w[(c + 1) * net.hidden], w2 = w[(c + 2) * net.hidden],
                             w3 = w[(c + 3) * net.hidden];
                const double x0 = x[c], x1 = x[c + 1], x2 = x[c + 2], x3 = x[c + 3];
                h = __dadd_rn(h, __dmul_rn(w0, x0));
                h = __dadd_rn(h, __dmul_rn(w1, x1));
                h = __dadd_rn(h, __dmul_rn(w2, x2));
                h = __dadd_rn(h, __dmul_rn(w3, x3));
            }
            for (; c < net.inputs; ++c) h = __dadd_rn(h, __dmul_rn(w[c * net.hidden], x[c]));
            hidden[s * layout.hidden + i] = activate(net.hidden_act, __dadd_rn(h, net.b1[i]));
        }
    __syncwarp();
    double y = CUDART_NAN;
    if (lane < count) {
        double out = net.b2;
        for (int i = 0; i < net.hidden; ++i) out = __dadd_rn(out, __dmul_rn(net.w2[i], hidden[lane * layout.hidden + i]));
        const double raw = activate(net.output_act, out);
        y = __dadd_rn(__ddiv_rn(__dmul_rn(net.out_tmax - net.out_tmin, raw - net.norm_ymin), span), net.out_tmin);
    }
    __syncwarp();  // xn and hidden are rewritten by the next call
    return y;
}

// Every node of levels lmin..top is evaluated, whether or not the descent reaches it (a warp per
// `layout.nodes` nodes): a node's outcome depends on its own σ only, so the descent needs no
// level-by-level launch. resolve_kernel then keeps the nodes whose ancestors all split. The windows
// and counts are those of the CPU's top-down descent; the work beyond it (nodes under a rejected
// window) is small next to the block sums.
__global__ void evaluate_nodes_kernel(const __grid_constant__ NodeTree tree, DeviceMlp ann1, DeviceMlp ann2,
                                      EvalSmem layout, bool stage_weights, DeviceWindow* nodes) {
    extern __shared__ double shared[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const double* W1a = ann1.W1t;
    const double* W1b = ann2.W1t;
    if (stage_weights) {
        const int na = ann1.hidden * ann1.inputs, nb = ann2.hidden * ann2.inputs;
        for (int e = threadIdx.x; e < na + nb; e += blockDim.x) shared[e] = e < na ? ann1.W1t[e] : ann2.W1t[e - na];
        __syncthreads();
        W1a = shared;
        W1b = shared + na;
    }
    const int P = layout.nodes, S = layout.stride;
    double* sigma = shared + layout.w1_doubles + std::size_t(warp) * layout.per_warp;
    double* xn = sigma + P * S;
    double* hidden = xn + P * S;
    const std::int64_t total = tree.offset[tree.top + 1];
    for (std::int64_t w0 = (std::int64_t(blockIdx.x) * warps + warp) * P; w0 < total; w0 += std::int64_t(gridDim.x) * warps * P) {
        const int count = int(total - w0 < P ? total - w0 : P);
        unsigned empty = 0;  // bit s: node s has a band without samples
        for (int s = 0; s < count; ++s) {
            const std::int64_t node = w0 + s;
            const int l = tree.level_of(node);
            const DeviceLevel& level = tree.level[l];
            const std::size_t first = std::size_t(node - tree.offset[l]) * tree.bands;
            for (int c = lane; c < tree.bands; c += 32) {
                if (level.n[first + c] == 0) empty |= 1u << s;
                sigma[s * S + c] = level.sigma[first + c];
            }
        }
        empty = __reduce_or_sync(0xffffffffu, empty);
        __syncwarp();
        const double y1 = evaluate_nodes(ann1, W1a, sigma, xn, hidden, count, layout, lane);
        const bool positive = lane < count && !((empty >> lane) & 1u) && y1 > ann1.threshold;
        double y2 = CUDART_NAN;
        if (__any_sync(0xffffffffu, positive)) y2 = evaluate_nodes(ann2, W1b, sigma, xn, hidden, count, layout, lane);
        if (lane < count) {
            const std::int64_t node = w0 + lane;
            const int l = tree.level_of(node);
            const std::int64_t local = node - tree.offset[l];
            const int gx = tree.level[l].gx;
            DeviceWindow win{int(local % gx), int(local / gx), l, int(Window::Outcome::Rejected), CUDART_NAN, CUDART_NAN, 0, 0};
            if (!((empty >> lane) & 1u)) {
                win.y1 = y1;
                if (positive) {
                    win.y2 = y2;
                    if (y2 > ann2.threshold) {
                        win.outcome = int(Window::Outcome::Accepted);
                    } else if (l > tree.lmin) {
                        win.outcome = int(Window::Outcome::Split);
                    } else {
                        win.at_min = 1;
                        win.outcome = int(tree.keep_min_level ? Window::Outcome::Forced : Window::Outcome::Dropped);
                    }
                }
            }
            nodes[node] = win;
        }
    }
}

// The descent from the evaluated nodes: a node is reached when it is the root or every ancestor
// split (one thread per node walks up, stopping at the first ancestor that did not). Reached nodes
// are counted per level and listed (detections: accepted or forced; trace: all), in any order: the
// host sorts them.
__global__ void resolve_nodes_kernel(const __grid_constant__ NodeTree tree, const DeviceWindow* nodes, DescentOut out) {
    const std::int64_t total = tree.offset[tree.top + 1];
    for (std::int64_t w = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; w < total;
         w += std::int64_t(gridDim.x) * blockDim.x) {
        const int l = tree.level_of(w);
        const DeviceWindow win = nodes[w];
        bool reached = true;
        int ai = win.i, aj = win.j;
        for (int a = l + 1; a <= tree.top && reached; ++a) {
            ai >>= 1;
            aj >>= 1;
            reached = nodes[tree.offset[a] + std::int64_t(aj) * tree.level[a].gx + ai].outcome == int(Window::Outcome::Split);
        }
        if (!reached) continue;
        unsigned long long* s = out.stats + 4 * l;
        atomicAdd(s + 0, 1ull);
        if (win.outcome != int(Window::Outcome::Rejected)) atomicAdd(s + 1, 1ull);
        if (win.outcome == int(Window::Outcome::Accepted) || win.outcome == int(Window::Outcome::Forced)) {
            atomicAdd(s + 2, 1ull);
            out.detections[atomicAdd(out.detection_count, 1)] = win;
        }
        if (win.outcome == int(Window::Outcome::Split)) atomicAdd(s + 3, 1ull);
        if (out.trace) out.trace[atomicAdd(out.trace_count, 1)] = win;
    }
}

// ---- host side -------------------------------------------------------------------------------------

// The networks' parameters in device memory (one upload).
struct UploadedNets {
    DeviceBuffer buffer;
    DeviceMlp ann1{}, ann2{};
};

UploadedNets upload_nets(const Context& ctx, const MultiresModel& model) {
    std::vector<double> host;
    std::vector<std::size_t> at;
    std::vector<double> W1t[2];
    for (int k = 0; k < 2; ++k) {
        const MlpModel& m = k == 0 ? model.ann1 : model.ann2;
        W1t[k].resize(m.W1.size());
        for (int i = 0; i < m.hidden; ++i)
            for (int c = 0; c < m.inputs; ++c)
                W1t[k][std::size_t(c) * m.hidden + i] = m.W1[std::size_t(i) * m.inputs + c];
    }
    for (int k = 0; k < 2; ++k) {
        const MlpModel& m = k == 0 ? model.ann1 : model.ann2;
        for (const std::vector<double>* v : std::initializer_list<const std::vector<double>*>{&W1t[k], &m.b1, &m.w2, &m.in_min, &m.in_max}) {
            at.push_back(host.size());
            host.insert(host.end(), v->begin(), v->end());
        }
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

namespace {

// The search on the pyramid `make_pyramid(arena, skipped)` takes from the arena and queues (the
// block sums add the non-finite samples they leave out to *skipped, device memory).
template <class MakePyramid>
MultiresResult search(const Context& ctx, const TreeGeometry& g, const MultiresModel& model, const MultiresOptions& options,
                      MakePyramid&& make_pyramid) {
    int lmin = 0;
    while ((g.block << lmin) < model.min_window) ++lmin;
    lmin = std::min(lmin, g.top);
    if (g.top >= kMaxLevels) throw InvalidInput("detect multires: " + std::to_string(g.top + 1) + " levels (at most " +
                                                std::to_string(kMaxLevels) + ")");
    NodeTree tree{};
    tree.lmin = lmin;
    tree.top = g.top;
    tree.bands = g.bands;
    tree.keep_min_level = options.keep_min_level ? 1 : 0;
    for (int l = lmin; l <= g.top; ++l)
        tree.offset[l + 1] = tree.offset[l] + std::int64_t(g.grid_x(l)) * g.grid_y(l);
    const auto total_nodes = std::size_t(tree.offset[g.top + 1]);
    const int levels = g.top + 1;
    // The counters and the detections are taken first and side by side, so that one read-back
    // usually brings both.
    Arena arena;
    const std::size_t counter_count = 2, stat_count = std::size_t(4 * levels) + 1;  // + skipped
    arena.add(sizeof(int) * counter_count);
    arena.add(sizeof(unsigned long long) * stat_count);
    arena.add(total_nodes * sizeof(DeviceWindow));                   // detections
    arena.add(total_nodes * sizeof(DeviceWindow));                   // every node's evaluation
    if (options.trace) arena.add(total_nodes * sizeof(DeviceWindow));  // trace
    add_pyramid(arena, g, g.top);
    arena.allocate(ctx);
    int* counts = arena.take<int>(counter_count);  // detections, trace
    unsigned long long* stats = arena.take<unsigned long long>(stat_count);
    DeviceWindow* detections = arena.take<DeviceWindow>(total_nodes);
    DeviceWindow* nodes = arena.take<DeviceWindow>(total_nodes);
    DeviceWindow* trace = options.trace ? arena.take<DeviceWindow>(total_nodes) : nullptr;
    const cudaStream_t stream = stream_of(ctx);
    const std::size_t head_bytes = reinterpret_cast<std::byte*>(detections) - reinterpret_cast<std::byte*>(counts);
    // The read-back copies the first detections' slots whether or not they were written: cleared
    // with the counters, so no uninitialised memory is copied.
    const std::size_t head_size = std::min<std::size_t>(64 * 1024, head_bytes + total_nodes * sizeof(DeviceWindow));
    CUBEKIT_CUDA_CHECK(cudaMemsetAsync(counts, 0, head_size, stream));
    const std::vector<DeviceLevel> pyramid = make_pyramid(arena, stats + 4 * levels);
    for (int l = lmin; l <= g.top; ++l) tree.level[l] = pyramid[std::size_t(l)];
    const UploadedNets nets = upload_nets(ctx, model);

    // Shared memory: both W1t (staged when they fit beside one warp's scratch for one node), then per
    // warp the scratch of as many nodes as the neurons let share its lanes (32 / hidden), fewer when
    // the bands are many.
    EvalSmem layout;
    layout.hidden = std::max(model.ann1.hidden, model.ann2.hidden);
    layout.stride = g.bands | 1;
    const std::size_t limit = 200 * 1024 / sizeof(double);
    auto per_warp = [&](int nodes) { return std::size_t(nodes) * (2 * std::size_t(layout.stride) + std::size_t(layout.hidden)); };
    const std::size_t w1 = std::size_t(model.ann1.hidden + model.ann2.hidden) * g.bands;
    const bool stage_weights = w1 + per_warp(1) <= limit;
    layout.w1_doubles = stage_weights ? int(w1) : 0;
    layout.nodes = layout.hidden <= 32 ? 32 / layout.hidden : 1;
    while (layout.nodes > 1 && std::size_t(layout.w1_doubles) + per_warp(layout.nodes) > limit) --layout.nodes;
    layout.per_warp = int(per_warp(layout.nodes));
    if (std::size_t(layout.w1_doubles) + per_warp(1) > limit)
        throw InvalidInput("detect multires: " + std::to_string(g.bands) + " bands need more shared memory than a GPU block has");
    const int warps = int(std::clamp<std::size_t>((limit - std::size_t(layout.w1_doubles)) / std::size_t(layout.per_warp), 1, 8));
    const std::size_t smem = (std::size_t(layout.w1_doubles) + std::size_t(warps) * layout.per_warp) * sizeof(double);
    if (smem > 48 * 1024)
        CUBEKIT_CUDA_CHECK(cudaFuncSetAttribute(evaluate_nodes_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    {
        const std::size_t per_block = std::size_t(warps) * layout.nodes;
        const dim3 grid(unsigned(std::min<std::size_t>((total_nodes + per_block - 1) / per_block, 4096))), block(32 * warps);
        evaluate_nodes_kernel<<<grid, block, smem, stream>>>(tree, nets.ann1, nets.ann2, layout, stage_weights, nodes);
        CUBEKIT_CHECK_LAUNCH(ctx, "evaluate_nodes_kernel", grid, block);
    }
    {
        const dim3 grid(unsigned(std::min<std::size_t>((total_nodes + 255) / 256, 4096))), block(256);
        resolve_nodes_kernel<<<grid, block, 0, stream>>>(tree, nodes,
                                                         DescentOut{stats, detections, counts, trace, counts + 1});
        CUBEKIT_CHECK_LAUNCH(ctx, "resolve_nodes_kernel", grid, block);
    }
    // One read-back of the counters and as many detections as fit beside them; the rest (and the
    // trace) after.
    std::vector<std::byte> head(head_size);
    if (!read_small(ctx, counts, head.data(), head.size())) {
        CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(head.data(), counts, head.size(), cudaMemcpyDeviceToHost, stream));
        ctx.synchronize();
    }
    const int* host_counts = reinterpret_cast<const int*>(head.data());
    const auto* host_stats = reinterpret_cast<const unsigned long long*>(
        head.data() + (reinterpret_cast<std::byte*>(stats) - reinterpret_cast<std::byte*>(counts)));
    std::vector<DeviceWindow> found(static_cast<std::size_t>(host_counts[0]));
    std::vector<DeviceWindow> traced(static_cast<std::size_t>(host_counts[1]));
    const std::size_t in_head = std::min(found.size(), (head.size() - head_bytes) / sizeof(DeviceWindow));
    if (in_head) std::memcpy(found.data(), head.data() + head_bytes, in_head * sizeof(DeviceWindow));
    if (found.size() > in_head)
        CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(found.data() + in_head, detections + in_head, (found.size() - in_head) * sizeof(DeviceWindow),
                                           cudaMemcpyDeviceToHost, stream));
    if (!traced.empty())
        CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(traced.data(), trace, traced.size() * sizeof(DeviceWindow), cudaMemcpyDeviceToHost, stream));
    if (found.size() > in_head || !traced.empty()) ctx.synchronize();

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

}  // namespace

MultiresResult detect_multires_cuda(const Context& ctx, const CubeView& cube, const TreeGeometry& g, const MultiresModel& model,
                                    const MultiresOptions& options) {
    return search(ctx, g, model, options, [&](Arena& arena, unsigned long long* skipped) {
        return build_pyramid(ctx, cube, g, g.top, arena, skipped);
    });
}

MultiresResult detect_multires_cuda(const Context& ctx, const PyramidLevel& level0, std::int64_t skipped, const TreeGeometry& g,
                                    const MultiresModel& model, const MultiresOptions& options) {
    MultiresResult r = search(ctx, g, model, options, [&](Arena& arena, unsigned long long*) {
        return upload_pyramid(ctx, level0, g, arena);
    });
    r.skipped_samples = skipped;
    return r;
}

}  // namespace cubekit::detail
