// Multi-resolution detection, CUDA backend (spec detect.md §B.5, H100 hints).
//
// 1. block sums  one thread per (block, band) sums its b² samples in row-major order in f64 (the
//                CPU's order: bit-identical), or per (block, 4 bands) with one vector load per pixel
//                when the pixels' band runs allow it. BIP-like input: a warp covers 32 bands of one
//                block (each load one contiguous run of a pixel's bands); BSQ-like: 32 adjacent
//                blocks of one band. The cube is read once. Each (node, band) also stores σ.
// 2. pyramid     one thread per (node, band) adds its children TL, TR, BL, BR in that order, two or
//                three levels per launch (the children of the levels between are stored on the way).
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

#include "core/cuda_backend.hpp"
#include "core/cuda_check.hpp"
#include "cubekit/buffer.hpp"
#include "detect/detect_internal.hpp"

namespace cubekit::detail {
namespace {

// One level of the pyramid, node-major with the bands fastest: the finite-sample count and sums of
// every (node, band), and σ (spec §B.3 step 3, the CPU's node_feature expression; NaN when n = 0),
// written with the sums so that the descent reads one value per band instead of dividing.
struct DeviceLevel {
    std::int32_t* n;
    double* s1;
    double* s2;
    double* sigma;
    int gx, gy;
};

struct Sums {
    std::int32_t n = 0;
    double s1 = 0.0, s2 = 0.0;
};

__device__ __forceinline__ void add(Sums& total, const Sums& part) {
    total.n += part.n;
    total.s1 = __dadd_rn(total.s1, part.s1);
    total.s2 = __dadd_rn(total.s2, part.s2);
}

__device__ __forceinline__ void store_sigma(const DeviceLevel& level, std::size_t at, const Sums& v) {
    const double n = double(v.n);
    level.sigma[at] = sqrt(fmax(0.0, __ddiv_rn(v.s2 - __ddiv_rn(__dmul_rn(v.s1, v.s1), n), n)));
}

// The sums, and σ when `Sigma` (the block sums leave level 0's σ to the first merge, which reads
// the sums anyway: computing it there cost the block-sum kernel registers and occupancy).
template <bool Sigma = true>
__device__ __forceinline__ void store(const DeviceLevel& level, std::size_t at, const Sums& v) {
    level.n[at] = v.n;
    level.s1[at] = v.s1;
    level.s2[at] = v.s2;
    if constexpr (Sigma) store_sigma(level, at, v);
}

template <typename T, bool Sigma>
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
    store<Sigma>(level, std::size_t(node) * v.bands + c, Sums{n, s1, s2});
    if (bad) atomicAdd(skipped, bad);
}

// BIP-like input whose pixels are runs of bands in multiples of 4, aligned for a 4-sample vector
// load: a thread sums 4 adjacent bands of one block (the same row-major order and arithmetic as
// block_sums_kernel), one load per pixel; for 64 bands a warp reads two blocks' runs of 256 bytes.
template <typename T>
struct alignas(4 * sizeof(T)) Sample4 {
    T v[4];
};

template <typename T>
bool sums4_fit(const CubeView& cube) {
    const Strides& s = cube.strides();
    return sizeof(T) <= 4 && s.b == 1 && cube.bands() % 4 == 0 && s.x % 4 == 0 && s.y % 4 == 0 &&
           reinterpret_cast<std::uintptr_t>(cube.data()) % (4 * sizeof(T)) == 0;
}

template <typename T, bool Sigma>
__global__ void block_sums4_kernel(StridedView<const T> v, DeviceLevel level, int block, unsigned long long* skipped) {
    const int quads = v.bands / 4;
    const std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= std::int64_t(level.gx) * level.gy * quads) return;
    const std::int64_t node = t / quads;
    const int c0 = int(t % quads) * 4;
    const int x0 = int(node % level.gx) * block, y0 = int(node / level.gx) * block;
    const int x1 = min(x0 + block, v.width), y1 = min(y0 + block, v.height);
    std::int32_t n[4] = {0, 0, 0, 0};
    double s1[4] = {0.0, 0.0, 0.0, 0.0}, s2[4] = {0.0, 0.0, 0.0, 0.0};
    unsigned long long bad = 0;
    constexpr int kRow = 8;
    for (int y = y0; y < y1; ++y)
        for (int xr = x0; xr < x1; xr += kRow) {
            Sample4<T> row[kRow];
#pragma unroll
            for (int j = 0; j < kRow; ++j)
                if (xr + j < x1) row[j] = *reinterpret_cast<const Sample4<T>*>(&v(xr + j, y, c0));
#pragma unroll
            for (int j = 0; j < kRow; ++j) {
                if (xr + j >= x1) break;
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const double s = double(row[j].v[q]);
                    if (!isfinite(s)) {
                        ++bad;
                        continue;
                    }
                    n[q] += 1;
                    s1[q] = __dadd_rn(s1[q], s);
                    s2[q] = __dadd_rn(s2[q], __dmul_rn(s, s));
                }
            }
        }
    const std::size_t at = std::size_t(node) * v.bands + c0;
#pragma unroll
    for (int q = 0; q < 4; ++q) store<Sigma>(level, at + q, Sums{n[q], s1[q], s2[q]});
    if (bad) atomicAdd(skipped, bad);
}

// The sums of node (i, j) of levels[Depth] from its children in levels[Depth − 1] (TL, TR, BL, BR,
// the CPU's order); the children of a node above level 1 of the launch are computed the same way
// and stored on the way. The four children's loads are issued before their additions.
template <int Depth, bool LeafSigma>
__device__ Sums merged(const DeviceLevel* levels, int i, int j, int c, int bands) {
    const DeviceLevel& below = levels[Depth - 1];
    Sums part[4];
    bool in[4];
#pragma unroll
    for (int c4 = 0; c4 < 4; ++c4) {
        const int ci = 2 * i + (c4 & 1), cj = 2 * j + (c4 >> 1);
        in[c4] = ci < below.gx && cj < below.gy;
        if constexpr (Depth == 1) {
            const std::size_t child = (std::size_t(cj) * below.gx + ci) * bands + c;
            if (in[c4]) part[c4] = Sums{below.n[child], below.s1[child], below.s2[child]};
            if (LeafSigma && in[c4]) store_sigma(below, child, part[c4]);
        } else if (in[c4]) {
            part[c4] = merged<Depth - 1, LeafSigma>(levels, ci, cj, c, bands);
            store(below, (std::size_t(cj) * below.gx + ci) * bands + c, part[c4]);
        }
    }
    Sums total;
#pragma unroll
    for (int c4 = 0; c4 < 4; ++c4)
        if (in[c4]) add(total, part[c4]);
    return total;
}

// Levels l+1 … l+Depth from level l in one launch (levels[0] = level l): a thread per (node of the
// top one, band); LeafSigma: level l's σ too (the first merge, from the block sums). Depth 2 (8
// levels: 4 launches instead of 7); a thread doing Depth 3 ran its 64 leaves' chain too long (the
// levels 3-5 launch took 22 µs on the 1024² scene against 6 for levels 3-4).
template <int Depth>
struct MergeLevels {
    DeviceLevel level[Depth + 1];
};

template <int Depth, bool LeafSigma>
__global__ void merge_kernel(MergeLevels<Depth> m, int bands) {
    const DeviceLevel& top = m.level[Depth];
    const std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= std::int64_t(top.gx) * top.gy * bands) return;
    const int node = int(t / bands), c = int(t % bands);
    store(top, std::size_t(t), merged<Depth, LeafSigma>(m.level, node % top.gx, node / top.gx, c, bands));
}

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

// Device memory of one call, carved from one allocation.
class Arena {
public:
    void add(std::size_t bytes) { total_ += (bytes + 255) / 256 * 256; }
    /// Keeps the pool's memory mapped across calls (cuda_backend.hpp): without it a caller that
    /// synchronises between calls had each call map its scratch again (~40 MB for 1024² × 64).
    void allocate(const Context& ctx) {
        keep_pool_memory(ctx, total_);
        buffer_ = DeviceBuffer(ctx, std::max<std::size_t>(total_, 256));
    }
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
                          arena.take<double>(values), g.grid_x(l), g.grid_y(l)});
    }
    const cudaStream_t stream = stream_of(ctx);
    const bool bands_fastest = cube.strides().b == 1 && cube.bands() > 1;
    // Level 0's σ: with the sums when no merge follows, else in the first merge.
    const bool sigma_here = top == 0;
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (sizeof(T) <= 4) {
            if (sums4_fit<T>(cube)) {
                const std::int64_t threads = std::int64_t(level_values(g, 0)) / 4;
                const dim3 grid(unsigned((threads + 255) / 256)), block(256);
                if (sigma_here) block_sums4_kernel<T, true><<<grid, block, 0, stream>>>(cube.typed<T>(), levels[0], g.block, skipped);
                else block_sums4_kernel<T, false><<<grid, block, 0, stream>>>(cube.typed<T>(), levels[0], g.block, skipped);
                CUBEKIT_CHECK_LAUNCH(ctx, "block_sums4_kernel", grid, block);
                return;
            }
        }
        const std::int64_t threads = std::int64_t(level_values(g, 0));
        const dim3 grid(unsigned((threads + 255) / 256)), block(256);
        if (sigma_here)
            block_sums_kernel<T, true><<<grid, block, 0, stream>>>(cube.typed<T>(), levels[0], g.block, bands_fastest, skipped);
        else
            block_sums_kernel<T, false><<<grid, block, 0, stream>>>(cube.typed<T>(), levels[0], g.block, bands_fastest, skipped);
        CUBEKIT_CHECK_LAUNCH(ctx, "block_sums_kernel", grid, block);
    });
    auto merge = [&](auto depth_tag, auto leaf_sigma_tag, int l) {  // levels l .. l + Depth − 1 from level l − 1
        constexpr int Depth = decltype(depth_tag)::value;
        MergeLevels<Depth> m;
        for (int k = 0; k <= Depth; ++k) m.level[k] = levels[std::size_t(l - 1 + k)];
        const std::int64_t threads = std::int64_t(level_values(g, l + Depth - 1));
        const dim3 grid(unsigned((threads + 255) / 256)), block(256);
        merge_kernel<Depth, decltype(leaf_sigma_tag)::value><<<grid, block, 0, stream>>>(m, g.bands);
        CUBEKIT_CHECK_LAUNCH(ctx, "merge_kernel", grid, block);
        return l + Depth;
    };
    using Two = std::integral_constant<int, 2>;
    using One = std::integral_constant<int, 1>;
    for (int l = 1; l <= top;) {
        const bool two = top - l + 1 >= 2;
        if (l == 1) l = two ? merge(Two{}, std::true_type{}, l) : merge(One{}, std::true_type{}, l);
        else l = two ? merge(Two{}, std::false_type{}, l) : merge(One{}, std::false_type{}, l);
    }
    return levels;
}

void add_pyramid(Arena& arena, const TreeGeometry& g, int top) {
    for (int l = 0; l <= top; ++l) {
        const std::size_t values = level_values(g, l);
        arena.add(values * 4);
        arena.add(values * 8);
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

MultiresResult detect_multires_cuda(const Context& ctx, const CubeView& cube, const TreeGeometry& g, const MultiresModel& model,
                                    const MultiresOptions& options) {
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
    const std::vector<DeviceLevel> pyramid = build_pyramid(ctx, cube, g, g.top, arena, stats + 4 * levels);
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
