// Multi-resolution detection, CUDA backend: the pyramid (spec detect.md §B.5, H100 hints).
//
// 1. block sums  one thread per (block, band) sums its b² samples in row-major order in f64 (the
//                CPU's order: bit-identical), or per (block, 4 bands) with one vector load per pixel
//                when the pixels' band runs allow it. BIP-like input: a warp covers 32 bands of one
//                block (each load one contiguous run of a pixel's bands); BSQ-like: 32 adjacent
//                blocks of one band. The cube is read once.
// 2. pyramid     one thread per (node, band) adds its children TL, TR, BL, BR in that order, two
//                levels per launch (the children of the level between are stored on the way). σ of
//                every (node, band) is stored with its sums.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/cuda_check.hpp"
#include "detect/multires_pyramid.cuh"

namespace cubekit::detail {
namespace {

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

// σ of every (node, band) of a level whose sums are set (a level 0 uploaded with no merge after it).
__global__ void level_sigma_kernel(DeviceLevel level, std::int64_t values) {
    const std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t < values) store_sigma(level, std::size_t(t), Sums{level.n[t], level.s1[t], level.s2[t]});
}

std::vector<DeviceLevel> take_levels(Arena& arena, const TreeGeometry& g, int top) {
    std::vector<DeviceLevel> levels;
    for (int l = 0; l <= top; ++l) {
        const std::size_t values = level_values(g, l);
        levels.push_back({arena.take<std::int32_t>(values), arena.take<double>(values), arena.take<double>(values),
                          arena.take<double>(values), g.grid_x(l), g.grid_y(l)});
    }
    return levels;
}

// Levels 1..top from level 0 (whose σ the first merge stores).
void queue_merges(const Context& ctx, const std::vector<DeviceLevel>& levels, const TreeGeometry& g, int top) {
    const cudaStream_t stream = stream_of(ctx);
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
}

// A device level's counts and sums, downloaded.
PyramidLevel download_level(const Context& ctx, const DeviceLevel& d, std::size_t values) {
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
    return host;
}

}  // namespace

std::vector<DeviceLevel> build_pyramid(const Context& ctx, const CubeView& cube, const TreeGeometry& g, int top, Arena& arena,
                                       unsigned long long* skipped) {
    std::vector<DeviceLevel> levels = take_levels(arena, g, top);
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
    queue_merges(ctx, levels, g, top);
    return levels;
}

std::vector<DeviceLevel> upload_pyramid(const Context& ctx, const PyramidLevel& level0, const TreeGeometry& g, Arena& arena) {
    std::vector<DeviceLevel> levels = take_levels(arena, g, g.top);
    const std::size_t values = level_values(g, 0);
    if (level0.n.size() != values || level0.s1.size() != values || level0.s2.size() != values)
        throw std::logic_error("detect multires: level 0 does not match the tree");
    const cudaStream_t stream = stream_of(ctx);
    // Pageable → device: the runtime stages the source before returning, so level0 may go after.
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(levels[0].n, level0.n.data(), values * 4, cudaMemcpyHostToDevice, stream));
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(levels[0].s1, level0.s1.data(), values * 8, cudaMemcpyHostToDevice, stream));
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(levels[0].s2, level0.s2.data(), values * 8, cudaMemcpyHostToDevice, stream));
    if (g.top == 0) {
        const dim3 grid(unsigned((values + 255) / 256)), block(256);
        level_sigma_kernel<<<grid, block, 0, stream>>>(levels[0], std::int64_t(values));
        CUBEKIT_CHECK_LAUNCH(ctx, "level_sigma_kernel", grid, block);
    }
    queue_merges(ctx, levels, g, g.top);
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

std::vector<double> window_features_cuda(const Context& ctx, const CubeView& cube, const TreeGeometry& g, int level,
                                         std::vector<std::int64_t>* counts) {
    Arena arena;
    add_pyramid(arena, g, level);
    arena.add(sizeof(unsigned long long));
    arena.allocate(ctx);
    unsigned long long* skipped = arena.take<unsigned long long>(1);
    CUBEKIT_CUDA_CHECK(cudaMemsetAsync(skipped, 0, sizeof(unsigned long long), stream_of(ctx)));
    const std::vector<DeviceLevel> pyramid = build_pyramid(ctx, cube, g, level, arena, skipped);
    const std::size_t values = level_values(g, level);
    const PyramidLevel host = download_level(ctx, pyramid[std::size_t(level)], values);
    const std::int64_t nodes = std::int64_t(host.gx) * host.gy;
    std::vector<double> features(values, std::numeric_limits<double>::quiet_NaN());
    for (std::int64_t node = 0; node < nodes; ++node)
        node_feature(host, node, g.bands, features.data() + std::size_t(node) * g.bands);
    if (counts) counts->assign(host.n.begin(), host.n.end());
    return features;
}

PyramidLevel block_sums_cuda(const Context& ctx, const CubeView& cube, const TreeGeometry& g, std::int64_t& skipped) {
    Arena arena;
    add_pyramid(arena, g, 0);
    arena.add(sizeof(unsigned long long));
    arena.allocate(ctx);
    auto* d_skipped = arena.take<unsigned long long>(1);
    CUBEKIT_CUDA_CHECK(cudaMemsetAsync(d_skipped, 0, sizeof(unsigned long long), stream_of(ctx)));
    const std::vector<DeviceLevel> pyramid = build_pyramid(ctx, cube, g, 0, arena, d_skipped);
    PyramidLevel level0 = download_level(ctx, pyramid[0], level_values(g, 0));
    unsigned long long count = 0;
    if (!read_small(ctx, d_skipped, &count, sizeof count)) {
        CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(&count, d_skipped, sizeof count, cudaMemcpyDeviceToHost, stream_of(ctx)));
        ctx.synchronize();
    }
    skipped = std::int64_t(count);
    return level0;
}

}  // namespace cubekit::detail
