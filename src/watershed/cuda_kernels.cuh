#pragma once
#include <cub/block/block_reduce.cuh>
#include <cuda/functional>
// The watershed on the GPU (spec gradient-watershed.md §B3, §B4). The same fixed points as the
// CPU reference, reached by schedules whose result does not depend on the update order:
//   Phase 1 and the reconstructions (h-minima, minima imposition): monotone relaxations, either one
//           global sweep per round (sync) or each block relaxing its tile in shared memory until
//           stable before the next round (block-async, the thesis' scheme); rounds run in batches
//           with one 4-byte read-back per batch, and a round whose predecessor changed nothing
//           returns at once;
//   Phase 2 arrows as parent indices; Phase 3 union-find with atomicMin (root = smallest index);
//   Phase 4 path-halving finds down the arrows; Phase 5 a scan of the root flags.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/cuda_check.hpp"
#include "core/cuda_helpers.cuh"
#include "cubekit/buffer.hpp"
#include "watershed/watershed_internal.hpp"

namespace cubekit::detail {
namespace watershed_gpu {

constexpr std::uint32_t kInf = 0xFFFFFFFFu;
constexpr int kTileX = 32, kTileY = 32, kThreadsY = 8;
constexpr int kFlagSlots = 4096;

// The neighbour steps, passed by value to every kernel.
struct Steps {
    int n = 0;
    signed char dz[26], dy[26], dx[26];
};

struct Geometry {
    int width, height, depth;
    const std::uint8_t* inside;  // null = every pixel
    Steps steps;
    __device__ bool in(std::int64_t p) const { return inside == nullptr || inside[p] != 0; }
    // The k-th neighbour of (x, y, z), or −1 when it leaves the grid or the mask.
    __device__ std::int64_t neighbour(int x, int y, int z, int k) const {
        const int qx = x + steps.dx[k], qy = y + steps.dy[k], qz = z + steps.dz[k];
        if (qx < 0 || qy < 0 || qz < 0 || qx >= width || qy >= height || qz >= depth) return -1;
        const std::int64_t q = (std::int64_t(qz) * height + qy) * width + qx;
        return in(q) ? q : -1;
    }
    __device__ std::int64_t size() const { return std::int64_t(width) * height * depth; }
};

__device__ void coordinates(const Geometry& g, std::int64_t p, int& x, int& y, int& z) {
    x = int(p % g.width);
    y = int((p / g.width) % g.height);
    z = int(p / (std::int64_t(g.width) * g.height));
}

// ---- the two monotone relaxations --------------------------------------------------------------
// Phase 1: v = plateau distance d, aux = height. A cell with d = 0 (lower border) is fixed.
template <class T>
struct DistanceRule {
    using V = std::uint32_t;
    using A = T;
    static __device__ bool fixed(V v) { return v == 0; }
    static __device__ V combine(V acc, A self, V q, A aq) {
        return (aq == self && q != kInf && q + 1 < acc) ? q + 1 : acc;
    }
    static __device__ V finish(V acc, A) { return acc; }
};
// Reconstruction by erosion: v = r, aux = the floor it may not go below.
template <class K>
struct ErosionRule {
    using V = K;
    using A = K;
    static __device__ bool fixed(V) { return false; }
    static __device__ V combine(V acc, A, V q, A) { return q < acc ? q : acc; }
    static __device__ V finish(V acc, A floor) { return acc < floor ? floor : acc; }
};

// Slot of round r in the flag ring; round r returns at once when round r − 1 changed nothing.
__device__ __host__ inline int slot(int round) { return round % kFlagSlots; }

// One sweep over every cell in global memory (sync schedule; volumes). Any change raises the flag.
template <class Rule>
__global__ void relax_global(Geometry g, const typename Rule::A* aux, typename Rule::V* v, int* flags, int round) {
    if (round > 0 && flags[slot(round - 1)] == 0) return;
    bool changed = false;
    for (std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; p < g.size();
         p += std::int64_t(gridDim.x) * blockDim.x) {
        if (!g.in(p)) continue;
        const typename Rule::V self = v[p];
        if (Rule::fixed(self)) continue;
        int x, y, z;
        coordinates(g, p, x, y, z);
        const typename Rule::A a = aux[p];
        typename Rule::V acc = self;
        for (int k = 0; k < g.steps.n; ++k) {
            const std::int64_t q = g.neighbour(x, y, z, k);
            if (q >= 0) acc = Rule::combine(acc, a, v[q], aux[q]);
        }
        acc = Rule::finish(acc, a);
        if (acc < self) {
            v[p] = acc;
            changed = true;
        }
    }
    if (changed) flags[slot(round)] = 1;
}

// 2-D tiles of kTileX × kTileY in shared memory with a one-pixel apron. Local = block-async: sweep
// until the tile is stable, and raise the flag only when a tile-border cell changed (only those
// are read by other tiles). Not Local: one sweep, any change raises the flag.
template <class Rule, bool Local>
__global__ void __launch_bounds__(kTileX * kThreadsY)
relax_tiles(Geometry g, const typename Rule::A* aux, typename Rule::V* v, int* flags, int round) {
    using V = typename Rule::V;
    using A = typename Rule::A;
    if (round > 0 && flags[slot(round - 1)] == 0) return;
    constexpr int SX = kTileX + 2, SY = kTileY + 2;
    __shared__ V sv[SY][SX];
    __shared__ A sa[SY][SX];
    __shared__ bool present[SY][SX];
    const int x0 = blockIdx.x * kTileX, y0 = blockIdx.y * kTileY;
    const int tid = threadIdx.y * kTileX + threadIdx.x;
    for (int i = tid; i < SX * SY; i += kTileX * kThreadsY) {
        const int ly = i / SX, lx = i % SX, gx = x0 + lx - 1, gy = y0 + ly - 1;
        const std::int64_t p = std::int64_t(gy) * g.width + gx;
        const bool here = gx >= 0 && gy >= 0 && gx < g.width && gy < g.height && g.in(p);
        present[ly][lx] = here;
        if (here) {
            sv[ly][lx] = v[p];
            sa[ly][lx] = aux[p];
        }
    }
    __syncthreads();
    constexpr int kRows = kTileY / kThreadsY;
    const int lx = threadIdx.x + 1;
    V start[kRows];
    for (int r = 0; r < kRows; ++r) {
        const int ly = threadIdx.y + r * kThreadsY + 1;
        if (present[ly][lx]) start[r] = sv[ly][lx];
    }
    // Jacobi inside the tile: every thread computes its cells' new values from the current tile,
    // then all write (no thread reads a cell while another writes it).
    bool any;
    do {
        V next[kRows];
        for (int r = 0; r < kRows; ++r) {
            const int ly = threadIdx.y + r * kThreadsY + 1;
            if (!present[ly][lx]) continue;
            const V self = sv[ly][lx];
            next[r] = self;
            if (Rule::fixed(self)) continue;
            const A a = sa[ly][lx];
            V acc = self;
            for (int k = 0; k < g.steps.n; ++k) {
                const int qy = ly + g.steps.dy[k], qx = lx + g.steps.dx[k];
                if (present[qy][qx]) acc = Rule::combine(acc, a, sv[qy][qx], sa[qy][qx]);
            }
            next[r] = Rule::finish(acc, a);
        }
        __syncthreads();
        bool changed = false;
        for (int r = 0; r < kRows; ++r) {
            const int ly = threadIdx.y + r * kThreadsY + 1;
            if (present[ly][lx] && next[r] < sv[ly][lx]) {
                sv[ly][lx] = next[r];
                changed = true;
            }
        }
        any = __syncthreads_or(changed);
    } while (Local && any);
    bool raise = false;
    for (int r = 0; r < kRows; ++r) {
        const int ly = threadIdx.y + r * kThreadsY + 1;
        const int gx = x0 + lx - 1, gy = y0 + ly - 1;
        if (!present[ly][lx] || sv[ly][lx] == start[r]) continue;
        v[std::int64_t(gy) * g.width + gx] = sv[ly][lx];
        raise = raise || !Local || lx == 1 || lx == kTileX || ly == 1 || ly == kTileY;
    }
    if (raise) flags[slot(round)] = 1;
}

// ---- the phases --------------------------------------------------------------------------------

// Phase 1 init: d = 0 on a lower border, ∞ elsewhere. Cells outside the mask are never read as
// neighbours, but a tile reports its ring's d, outside cells included (as the CPU piece: ∞); left
// unwritten, they reported stale device memory and the tiles never agreed (a test hung, 2026-11-28).
template <class T>
__global__ void init_distance(Geometry g, const T* h, std::uint32_t* d) {
    const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (p >= g.size()) return;
    if (!g.in(p)) {
        d[p] = kInf;
        return;
    }
    int x, y, z;
    coordinates(g, p, x, y, z);
    const T hp = h[p];
    bool lower = false;
    for (int k = 0; k < g.steps.n && !lower; ++k) {
        const std::int64_t q = g.neighbour(x, y, z, k);
        lower = q >= 0 && h[q] < hp;
    }
    d[p] = lower ? 0 : kInf;
}

// Phase 2: parent = π(p) as an index (p on minima).
template <class T>
__global__ void arrows(Geometry g, const T* h, const std::uint32_t* d, int* parent) {
    const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (p >= g.size() || !g.in(p)) return;
    int x, y, z;
    coordinates(g, p, x, y, z);
    const std::uint32_t dp = d[p];
    const T hp = h[p];
    std::int64_t best = p;
    if (dp == 0) {
        T hb = hp;
        for (int k = 0; k < g.steps.n; ++k) {
            const std::int64_t q = g.neighbour(x, y, z, k);
            if (q >= 0 && h[q] < hb) {
                best = q;
                hb = h[q];
            }
        }
    } else if (dp != kInf) {
        for (int k = 0; k < g.steps.n; ++k) {
            const std::int64_t q = g.neighbour(x, y, z, k);
            if (q >= 0 && h[q] == hp && d[q] == dp - 1) {
                best = q;
                break;
            }
        }
    }
    parent[p] = int(best);
}

__device__ int find_root(const int* parent, int x) {
    int next = parent[x];
    while (next != x) {
        x = next;
        next = parent[x];
    }
    return x;
}

// Links the trees of a and b, the larger root under the smaller (the root stays the smallest index).
__device__ void unite(int* parent, int a, int b) {
    while (true) {
        a = find_root(parent, a);
        b = find_root(parent, b);
        if (a == b) return;
        if (a < b) {
            const int t = a;
            a = b;
            b = t;
        }
        const int old = atomicMin(&parent[a], b);
        if (old == a) return;
        a = old;
    }
}

// Phase 3: join each minimum cell with its earlier minimum neighbours.
__global__ void join_minima(Geometry g, const std::uint32_t* d, int* parent) {
    const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (p >= g.size() || !g.in(p) || d[p] != kInf) return;
    int x, y, z;
    coordinates(g, p, x, y, z);
    for (int k = 0; k < g.steps.n / 2; ++k) {  // the neighbours before p in raster order
        const std::int64_t q = g.neighbour(x, y, z, k);
        if (q >= 0 && d[q] == kInf) unite(parent, int(p), int(q));
    }
}

// Phase 4: every cell's root into `root` (path halving on `parent` along the way), and root flags.
// The roots go to their own array: another thread's halving may still rewrite parent[p] with an
// ancestor that is not the root after this thread has finished.
__global__ void flatten(Geometry g, int* parent, int* root, int* is_root) {
    const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (p >= g.size()) return;
    if (!g.in(p)) {
        is_root[p] = 0;
        return;
    }
    int x = int(p);
    while (true) {
        const int px = parent[x];
        if (px == x) break;
        const int ppx = parent[px];
        if (ppx == px) {
            x = px;
            break;
        }
        parent[x] = ppx;
        x = ppx;
    }
    root[p] = x;
    is_root[p] = x == int(p);
}

// Phase 5: labels 1..R by the rank of the root, or the marker's label at the root; 0 outside.
__global__ void number(Geometry g, const int* root_of, const int* rank, const std::int32_t* markers,
                       std::int32_t* labels) {
    const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (p >= g.size()) return;
    if (!g.in(p)) {
        labels[p] = 0;
        return;
    }
    const int root = root_of[p];
    labels[p] = markers ? max(markers[root], 0) : rank[root] + 1;  // markers ≤ 0 are no seeds
}

// ---- relief preparation --------------------------------------------------------------------------

// Range keys (order-preserving, of the f64 value) of the inside cells, and the first NaN: one
// block reduction, then one atomic per block.
template <class T>
__global__ void __launch_bounds__(256) range_keys(Geometry g, const T* h, unsigned long long* lo_hi, int* nan_first) {
    using Reduce = cub::BlockReduce<unsigned long long, 256>;
    __shared__ typename Reduce::TempStorage temp;
    unsigned long long lo = ~0ull, hi = 0, nan = ~0ull;
    for (std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; p < g.size();
         p += std::int64_t(gridDim.x) * blockDim.x) {
        if (!g.in(p)) continue;
        const T v = h[p];
        if (v != v) {  // NaN (only floats)
            nan = min(nan, (unsigned long long)p);
            continue;
        }
        const unsigned long long k = height_key(double(v));
        lo = min(lo, k);
        hi = max(hi, k);
    }
    lo = Reduce(temp).Reduce(lo, cuda::minimum<>{});
    __syncthreads();
    hi = Reduce(temp).Reduce(hi, cuda::maximum<>{});
    __syncthreads();
    nan = Reduce(temp).Reduce(nan, cuda::minimum<>{});
    if (threadIdx.x == 0) {
        atomicMin(&lo_hi[0], lo);
        atomicMax(&lo_hi[1], hi);
        if (nan != ~0ull) atomicMin(nan_first, int(nan));
    }
}

__device__ double double_of_key(unsigned long long k) {
    const unsigned long long u = (k >> 63) ? (k & ~(1ull << 63)) : ~k;
    double v;
    memcpy(&v, &u, 8);
    return v;
}

template <class T>
__global__ void quantize(Geometry g, const T* h, const unsigned long long* lo_hi, double levels_minus_1,
                         std::uint32_t* q) {
    const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (p >= g.size()) return;
    q[p] = g.in(p) ? level_of(double(h[p]), double_of_key(lo_hi[0]), double_of_key(lo_hi[1]), levels_minus_1) : 0;
}

template <class T>
__global__ void raise_heights(Geometry g, const T* h, double depth, double* floor, double* raised) {
    const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (p >= g.size()) return;
    floor[p] = double(h[p]);
    raised[p] = __dadd_rn(floor[p], depth);
}

template <class T>
__global__ void impose_keys(Geometry g, const T* h, const std::int32_t* markers, std::uint64_t* floor,
                            std::uint64_t* relief) {
    const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (p >= g.size()) return;
    const bool seed = markers[p] > 0;
    floor[p] = seed ? 0 : height_key(h[p]) + 1;
    relief[p] = seed ? 0 : unreached_key;
}

// ---- one tile of a tiled run (tiled.cpp): the window is the grid, the core a rectangle in it -------

struct TileCore {
    int x0, y0, width, height;
    __device__ bool has(std::int64_t p, int grid_width) const {
        const int x = int(p % grid_width) - x0, y = int(p / grid_width) - y0;
        return x >= 0 && y >= 0 && x < width && y < height;
    }
};

// The ring's seeds: d = min(d, seed) (the tiles around know a way out of the plateau).
__global__ void seed_ring(Geometry g, const int* ring, const std::uint32_t* seeds, int count, std::uint32_t* d) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count || !g.in(ring[i])) return;
    if (seeds[i] < d[ring[i]]) d[ring[i]] = seeds[i];
}

// The first core cell holding NaN (inside the mask), by atomicMin.
template <class T>
__global__ void first_nan_in_core(Geometry g, TileCore core, const T* h, int* first) {
    const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (p < g.size() && g.in(p) && h[p] != h[p] && core.has(p, g.width)) atomicMin(first, int(p));
}

// Halo cells end descents (their own arrows would need cells outside the window).
__global__ void halo_ends(Geometry g, TileCore core, int* parent) {
    const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (p < g.size() && g.in(p) && !core.has(p, g.width)) parent[p] = int(p);
}

// The ring's distances; a halo cell without a neighbour of its height in the window reports 0 (as the
// CPU piece: it cannot change the core).
template <class T>
__global__ void gather_ring(Geometry g, TileCore core, const T* h, const int* ring, int count, const std::uint32_t* d,
                            std::uint32_t* out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    const int p = ring[i];
    bool seen = core.has(p, g.width);
    int x, y, z;
    coordinates(g, p, x, y, z);
    for (int k = 0; k < g.steps.n && !seen; ++k) {
        const std::int64_t q = g.neighbour(x, y, z, k);
        seen = q >= 0 && h[q] == h[p];
    }
    out[i] = seen ? d[p] : 0;
}

// Classes: every inside halo cell, and the root of each minimum's part in the core.
__global__ void class_flags(Geometry g, TileCore core, const int* root, int* flag) {
    const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (p >= g.size()) return;
    flag[p] = g.in(p) && (!core.has(p, g.width) || root[p] == int(p));
}

__global__ void tile_labels(Geometry g, const int* root, const int* rank, std::int32_t* labels) {
    const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (p < g.size()) labels[p] = g.in(p) ? rank[root[p]] + 1 : 0;
}

__global__ void gather_ring_labels(const int* ring, int count, const std::int32_t* labels, std::int32_t* out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) out[i] = labels[ring[i]];
}

// Each class's joined class: the class of its cell's root.
__global__ void class_table(const int* cells, const int* count, const int* root, const int* rank, int* joined) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < *count) joined[c] = rank[root[cells[c]]];
}

}  // namespace watershed_gpu
}  // namespace cubekit::detail
