#pragma once
// Connected-component labelling on CUDA, passes 1–3 (local, seams, resolve) and the forest they
// build, which the labelling and the removal of cuda.cu both finish (split from cuda.cu by stage;
// included there only). The algorithm, its invariants and measured costs are described at the
// top of cuda.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda_check.hpp"
#include "core/cuda_helpers.cuh"
#include "labels/labels_internal.hpp"

namespace cubekit::detail {
namespace {

constexpr int kTile = 32;                      // tiles of kTile × kTile pixels; a warp spans a row
constexpr int kTilePixels = kTile * kTile;     // also the capacity of a tile's run and root lists
constexpr int kTileRowsPerPass = 8;            // tile blocks: kTile × 8 threads, 4 rows each
constexpr int kTilePasses = kTile / kTileRowsPerPass;
constexpr int kTileThreads = kTile * kTileRowsPerPass;
constexpr int kFlatThreads = 256;              // seams, resolve, root lists
constexpr int kMaxGridY = 65535;               // planes beyond this loop inside the kernels
constexpr std::uint16_t kNone = 0xffff;        // `local` of background (and outside the image)
constexpr unsigned kAll = 0xffffffffu;

// The image, the maps and the labels are dense BSQ: sample (x, y) of plane p at p·W·H + y·W + x,
// the node's own index within the plane. (A pitch for windows was tried: two more live values cost
// the local kernel a 16-byte stack frame and the removal ~5 % (H100, 2026-11-25); the front door
// converts a window once instead.)
struct Geometry {
    int W, H, planes;
    int tiles_x, tiles_y, tiles_per_plane;
    __host__ __device__ std::size_t plane_base(int plane) const { return std::size_t(plane) * std::size_t(W) * std::size_t(H); }
    __host__ __device__ std::size_t tile_id(int plane, int tile) const { return std::size_t(plane) * std::size_t(tiles_per_plane) + std::size_t(tile); }
    __host__ __device__ std::size_t pixels() const { return plane_base(planes); }
    __host__ __device__ std::size_t tiles() const { return tile_id(planes, 0); }
    __device__ int tile_x0(int tile) const { return (tile % tiles_x) * kTile; }
    __device__ int tile_y0(int tile) const { return (tile / tiles_x) * kTile; }
    // Node (plane raster index) of tile offset `offset` in the tile whose corner is (x0, y0).
    __device__ int node(int x0, int y0, int offset) const { return (y0 + offset / kTile) * W + x0 + offset % kTile; }
};

Geometry make_geometry(int W, int H, int planes) {
    Geometry g{W, H, planes, int(div_up(W, kTile)), int(div_up(H, kTile)), 0};
    g.tiles_per_plane = g.tiles_x * g.tiles_y;
    return g;
}

// Device pointers of the labelling state.
struct Forest {
    std::uint16_t* local;      // per tile kTilePixels (tile-major): tile offset of the pixel's local root, or kNone
    std::uint16_t* edge_cols;  // per tile 2·kTile: `local` of column 0, then of column kTile−1
    int* parent;               // per node, at local roots: union-find parent (smaller index; roots: itself)
    int* size;                 // per node, at local roots: component size (partial until resolved)
    int4* box;                 // per node, at local roots, labelling only: (x0, y0, x1, y1) inclusive
    int* root_count;           // per tile: number of local roots
    std::uint16_t* roots;      // per tile, kTilePixels slots: tile offsets of the local roots
};

// ---- Union-find -------------------------------------------------------------------------------
// Invariant: parent[x] ≤ x, and every write to parent lowers it to a member of x's set (atomicMin
// while unions run), so a node that is not a root never becomes one again, and a root is the
// smallest index of its set.

// Root of x with path halving (each visited node re-pointed at its grandparent, an ancestor).
// Reads through volatile: other threads lower parents concurrently, and a stale value is still
// an ancestor.
__device__ __forceinline__ int find_root(int* parent, int x) {
    const volatile int* p = parent;
    for (;;) {
        const int up = p[x];
        if (up == x) return x;
        const int grand = p[up];
        if (grand == up) return up;
        atomicMin(parent + x, grand);
        x = grand;
    }
}

// Root of x once no union runs any more (concurrent writers store only final roots).
__device__ __forceinline__ int find_final_root(const int* parent, int x) {
    const volatile int* p = parent;
    int up = p[x];
    while (up != x) {
        x = up;
        up = p[x];
    }
    return x;
}

// Unites the sets of a and b (shared or global memory): the larger root goes under the smaller
// with atomicMin (Playne & Hawick 2018). When the atomicMin finds that root already linked
// elsewhere (old != root), it has either re-linked it under the other root or left a smaller
// parent; either way the loop goes on from the old parent, each turn with a smaller index,
// until both sides meet.
__device__ void unite(int* parent, int a, int b) {
    for (;;) {
        a = find_root(parent, a);
        b = find_root(parent, b);
        if (a == b) return;
        if (a < b) {
            const int old = atomicMin(parent + b, a);
            if (old == b) return;
            b = old;
        } else {
            const int old = atomicMin(parent + a, b);
            if (old == a) return;
            a = old;
        }
    }
}

// Whether a foreground pixel of value v joins a neighbour of value w.
template <typename T, bool kEqual>
__device__ __forceinline__ bool joins(T v, T w) {
    return w != T(0) && (!kEqual || v == w);
}

// Bits lo..hi (0 ≤ lo ≤ hi ≤ 31).
__device__ __forceinline__ unsigned bit_range(int lo, int hi) { return (kAll >> (31 - hi)) & (kAll << lo); }
// Start of the run holding pixel x of a row whose breaks (run starts and background) are given.
__device__ __forceinline__ int run_start(unsigned breaks, int x) { return 31 - __clz(breaks & (kAll >> (31 - x))); }
// One past the end of the run that starts at x.
__device__ __forceinline__ int run_end(unsigned breaks, int x) {
    const unsigned after = x == 31 ? 0u : breaks & (kAll << (x + 1));
    return after ? __ffs(after) - 1 : kTile;
}

// ---- 1. local: one tile per block ---------------------------------------------------------------
// Warp w loads and writes tile rows w, w+8, w+16, w+24 (lane = column); the union and root
// phases spread the tile's runs over all threads, so few runs do not leave most lanes idle.
// A run [s, e) of row y is united with one pixel of every run of row y−1 that has a joined
// pixel in columns s..e−1 (4-connectivity) or s−1..e (8-connectivity): the joined pixels there
// form one segment per such run, since a run is a maximal segment of equal, joined pixels.

template <typename T, int kConn, bool kEqual, bool kStats>
__global__ void __launch_bounds__(kTileThreads)
local_label_kernel(const T* __restrict__ image, Forest f, Geometry g) {
    __shared__ T value[kEqual ? kTilePixels : 1];
    __shared__ unsigned row_fg[kTile];      // bit x: pixel x of the row is foreground
    __shared__ unsigned row_breaks[kTile];  // bit x: pixel x does not join pixel x−1
    __shared__ int parent[kTilePixels];     // at run starts
    __shared__ int count[kTilePixels];      // at run starts: run length, then (roots) component size
    __shared__ int4 box[kStats ? kTilePixels : 1];
    __shared__ std::uint16_t runs[kTilePixels];     // tile offsets of the run starts
    __shared__ std::uint16_t root_of[kTilePixels];  // at run starts, after the union phase: the root
    __shared__ int num_runs, num_roots;
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTile + tx;
    const int tile = blockIdx.x, x0 = g.tile_x0(tile), y0 = g.tile_y0(tile), gx = x0 + tx;
    if (tid == 0) num_runs = num_roots = 0;
    __syncthreads();

    for (int plane = blockIdx.y; plane < g.planes; plane += gridDim.y) {
        const std::size_t base = g.plane_base(plane), tile_id = g.tile_id(plane, tile);
        // All four loads first, unconditional (clamped into the image) so that they are in
        // flight together; positions outside the image then become background.
        T v[kTilePasses];
#pragma unroll
        for (int k = 0; k < kTilePasses; ++k) {
            const int gy = y0 + ty + k * kTileRowsPerPass;
            v[k] = __ldg(image + base + std::size_t(min(gy, g.H - 1) * g.W + min(gx, g.W - 1)));
        }
#pragma unroll
        for (int k = 0; k < kTilePasses; ++k)
            if (gx >= g.W || y0 + ty + k * kTileRowsPerPass >= g.H) v[k] = T(0);
#pragma unroll
        for (int k = 0; k < kTilePasses; ++k) {
            const int ly = ty + k * kTileRowsPerPass, li = ly * kTile + tx;
            const T left = T(__shfl_up_sync(kAll, static_cast<unsigned>(v[k]), 1));  // lane 0: unused
            const bool fg = v[k] != T(0);
            const unsigned fg_mask = __ballot_sync(kAll, fg);
            const unsigned breaks = ~__ballot_sync(kAll, fg && tx > 0 && joins<T, kEqual>(v[k], left));
            const unsigned starts = fg_mask & breaks;
            if constexpr (kEqual) value[li] = v[k];
            int first = 0;  // the row's runs enter the list with one atomicAdd
            if (tx == 0) {
                row_fg[ly] = fg_mask;
                row_breaks[ly] = breaks;
                if (starts) first = atomicAdd(&num_runs, __popc(starts));
            }
            first = __shfl_sync(kAll, first, 0);
            if (!((starts >> tx) & 1u)) continue;
            runs[first + __popc(starts & ~(kAll << tx))] = std::uint16_t(li);
            const int end = run_end(breaks, tx);
            parent[li] = li;
            count[li] = end - tx;
            if constexpr (kStats) box[li] = make_int4(gx, y0 + ly, x0 + end - 1, y0 + ly);
        }
        __syncthreads();

        const int n_runs = num_runs;
        for (int j = tid; j < n_runs; j += kTileThreads) {
            const int s = runs[j], ly = s / kTile, x = s % kTile;
            if (ly == 0) continue;  // the row above is another tile's: seams
            const int end = run_end(row_breaks[ly], x);
            const int lo = kConn == 8 ? max(x - 1, 0) : x, hi = kConn == 8 ? min(end, kTile - 1) : end - 1;
            unsigned above = row_fg[ly - 1] & bit_range(lo, hi);
            if constexpr (kEqual) {
                const T run_value = value[s];
                for (unsigned b = above; b; b &= b - 1)
                    if (value[(ly - 1) * kTile + __ffs(b) - 1] != run_value) above &= ~(1u << (__ffs(b) - 1));
            }
            const unsigned above_breaks = row_breaks[ly - 1];
            for (unsigned seg = above & ~(above << 1); seg; seg &= seg - 1)  // first pixel of each segment
                unite(parent, s, (ly - 1) * kTile + run_start(above_breaks, __ffs(seg) - 1));
        }
        __syncthreads();

        for (int j = tid; j < n_runs; j += kTileThreads) {
            const int s = runs[j];
            const int r = find_final_root(parent, s);  // parent is read-only in this phase
            root_of[s] = std::uint16_t(r);
            if (r == s) {
                f.roots[tile_id * kTilePixels + std::size_t(atomicAdd(&num_roots, 1))] = std::uint16_t(s);
                continue;
            }
            atomicAdd(&count[r], count[s]);  // count[s] itself never changes: s is no root
            if constexpr (kStats) {
                const int4 b = box[s];
                atomicMin(&box[r].x, b.x);
                atomicMin(&box[r].y, b.y);
                atomicMax(&box[r].z, b.z);
                atomicMax(&box[r].w, b.w);
            }
        }
        __syncthreads();

        // Every position of the tile is written (full sectors, no uninitialised reads later).
#pragma unroll
        for (int k = 0; k < kTilePasses; ++k) {
            const int ly = ty + k * kTileRowsPerPass, li = ly * kTile + tx;
            std::uint16_t root = kNone;
            if ((row_fg[ly] >> tx) & 1u) root = root_of[ly * kTile + run_start(row_breaks[ly], tx)];
            f.local[tile_id * kTilePixels + li] = root;
            if (tx == 0) f.edge_cols[tile_id * 2 * kTile + ly] = root;
            if (tx == kTile - 1) f.edge_cols[tile_id * 2 * kTile + kTile + ly] = root;
            if (root != li) continue;
            const std::size_t node = base + std::size_t(g.node(x0, y0, li));
            f.parent[node] = g.node(x0, y0, li);
            f.size[node] = count[li];
            if constexpr (kStats) f.box[node] = box[li];
        }
        if (tid == 0) {
            f.root_count[tile_id] = num_roots;
            num_runs = num_roots = 0;  // for the next plane, after the barrier
        }
        __syncthreads();
    }
}

// ---- 2. seams: unions across tiles ----------------------------------------------------------------

// Node of the local root of pixel (x, y) from `local`, or −1 for background.
__device__ __forceinline__ int local_root(const Forest& f, const Geometry& g, std::size_t plane_tiles, int x, int y) {
    const int tile = (y / kTile) * g.tiles_x + x / kTile, x0 = x - x % kTile, y0 = y - y % kTile;
    const std::uint16_t o = f.local[(plane_tiles + std::size_t(tile)) * kTilePixels + std::size_t((y % kTile) * kTile + x % kTile)];
    return o == kNone ? -1 : g.node(x0, y0, o);
}
// The same for a pixel of a tile's first (side 0) or last (side 1) column, from `edge_cols`.
__device__ __forceinline__ int edge_root(const Forest& f, const Geometry& g, std::size_t plane_tiles, int x, int y, int side) {
    const int tile = (y / kTile) * g.tiles_x + x / kTile, x0 = x - x % kTile, y0 = y - y % kTile;
    const std::uint16_t o = f.edge_cols[(plane_tiles + std::size_t(tile)) * 2 * kTile + std::size_t(side * kTile + y % kTile)];
    return o == kNone ? -1 : g.node(x0, y0, o);
}

// Threads [0, row_seam_pixels) take the first rows of tiles (y = 32, 64, ...), pixel by pixel;
// the rest the first columns (x = 32, 64, ...), seam by seam, down each column.
// Rows: the row above lies in other tiles: N, and NW, NE unless N is joined (then they lie in
// N's run, or across a column seam, where that pair is united). Columns: W, NW and SW, all.
template <typename T, int kConn, bool kEqual>
__global__ void __launch_bounds__(kFlatThreads)
seam_merge_kernel(const T* __restrict__ image, Forest f, Geometry g) {
    const long long row_seam_pixels = (long long)(g.tiles_y - 1) * g.W;
    const long long col_seam_pixels = (long long)(g.tiles_x - 1) * g.H;
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= row_seam_pixels + col_seam_pixels) return;
    const bool on_row = t < row_seam_pixels;
    const int W = g.W;
    int x, y;
    if (on_row) {
        y = int(t / W + 1) * kTile;
        x = int(t % W);
    } else {
        const long long u = t - row_seam_pixels;
        x = int(u / g.H + 1) * kTile;
        y = int(u % g.H);
    }
    for (int plane = blockIdx.y; plane < g.planes; plane += gridDim.y) {
        const std::size_t plane_tiles = g.tile_id(plane, 0);
        const T* img = image + g.plane_base(plane);
        int* parent = f.parent + g.plane_base(plane);
        const int p = on_row ? local_root(f, g, plane_tiles, x, y) : edge_root(f, g, plane_tiles, x, y, 0);
        if (p < 0) continue;
        // Whether the neighbour (qx, qy), whose local root is q (−1: background), joins (x, y).
        auto joined = [&](int q, int qx, int qy) {
            if constexpr (kEqual) return q >= 0 && img[qy * W + qx] == img[y * W + x];
            else return q >= 0;
        };
        if (on_row) {
            const int n = local_root(f, g, plane_tiles, x, y - 1);
            const bool up = joined(n, x, y - 1);
            if (up) unite(parent, p, n);
            if (kConn == 8 && !up) {
                if (x > 0) {
                    const int nw = local_root(f, g, plane_tiles, x - 1, y - 1);
                    if (joined(nw, x - 1, y - 1)) unite(parent, p, nw);
                }
                if (x + 1 < W) {
                    const int ne = local_root(f, g, plane_tiles, x + 1, y - 1);
                    if (joined(ne, x + 1, y - 1)) unite(parent, p, ne);
                }
            }
        } else {
            const int w = edge_root(f, g, plane_tiles, x - 1, y, 1);
            if (joined(w, x - 1, y)) unite(parent, p, w);
            if (kConn == 8) {
                if (y > 0) {
                    const int nw = edge_root(f, g, plane_tiles, x - 1, y - 1, 1);
                    if (joined(nw, x - 1, y - 1)) unite(parent, p, nw);
                }
                if (y + 1 < g.H) {
                    const int sw = edge_root(f, g, plane_tiles, x - 1, y + 1, 1);
                    if (joined(sw, x - 1, y + 1)) unite(parent, p, sw);
                }
            }
        }
    }
}

// ---- 3. resolve: local roots → global roots, one warp per tile ------------------------------------

// Adds each local root's size (box) to its global root and points it there. Counts the global
// roots into *num_roots when given (labelling). No unions run any more, so concurrent
// compression writes only ever store the final root.
template <bool kStats>
__global__ void __launch_bounds__(kFlatThreads)
resolve_roots_kernel(Forest f, Geometry g, unsigned long long* num_roots) {
    const std::size_t warp = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    const int lane = int(threadIdx.x % 32);
    if (warp >= g.tiles()) return;  // whole warps leave together
    const int plane = int(warp / std::size_t(g.tiles_per_plane)), tile = int(warp % std::size_t(g.tiles_per_plane));
    const int x0 = g.tile_x0(tile), y0 = g.tile_y0(tile);
    const std::size_t base = g.plane_base(plane);
    int* parent = f.parent + base;
    int* size = f.size + base;
    const int n = f.root_count[warp];
    unsigned global_roots = 0;
    for (int k = lane; k < n; k += 32) {
        const int r = g.node(x0, y0, f.roots[warp * kTilePixels + std::size_t(k)]);
        const int root = find_final_root(parent, r);
        if (root == r) {
            ++global_roots;
            continue;
        }
        parent[r] = root;
        atomicAdd(size + root, size[r]);  // size[r] itself never changes: r is no root
        if constexpr (kStats) {
            int4* box = f.box + base;
            const int4 b = box[r];
            atomicMin(&box[root].x, b.x);
            atomicMin(&box[root].y, b.y);
            atomicMax(&box[root].z, b.z);
            atomicMax(&box[root].w, b.w);
        }
    }
    if (num_roots) {
        for (int offset = 16; offset > 0; offset /= 2) global_roots += __shfl_xor_sync(kAll, global_roots, offset);
        if (lane == 0 && global_roots) atomicAdd(num_roots, (unsigned long long)global_roots);
    }
}

// ---- Host side ------------------------------------------------------------------------------------

// Owns the labelling scratch of one call (freed stream-ordered when it goes out of scope).
// Memory: 8 bytes per pixel for parent and size (touched only at local roots), 4 per tile pixel
// for local and the root lists, + 16 per pixel for boxes when labelling.
struct ForestBuffers {
    DeviceBuffer local, edge_cols, parent, size, box, root_count, roots;
    ForestBuffers(const Context& ctx, const Geometry& g, bool stats, std::size_t other_bytes) {
        const std::size_t n = g.pixels(), tiles = g.tiles();
        const std::size_t bytes = n * (2 * sizeof(int) + (stats ? sizeof(int4) : 0)) +
                                  tiles * (sizeof(int) + (2 * kTilePixels + 2 * kTile) * sizeof(std::uint16_t));
        keep_pool_memory(ctx, bytes + other_bytes);
        local = DeviceBuffer(ctx, tiles * kTilePixels * sizeof(std::uint16_t));
        edge_cols = DeviceBuffer(ctx, tiles * 2 * kTile * sizeof(std::uint16_t));
        parent = DeviceBuffer(ctx, n * sizeof(int));
        size = DeviceBuffer(ctx, n * sizeof(int));
        if (stats) box = DeviceBuffer(ctx, n * sizeof(int4));
        root_count = DeviceBuffer(ctx, tiles * sizeof(int));
        roots = DeviceBuffer(ctx, tiles * kTilePixels * sizeof(std::uint16_t));
    }
    Forest forest() {
        return Forest{static_cast<std::uint16_t*>(local.data()), static_cast<std::uint16_t*>(edge_cols.data()),
                      static_cast<int*>(parent.data()), static_cast<int*>(size.data()), static_cast<int4*>(box.data()),
                      static_cast<int*>(root_count.data()), static_cast<std::uint16_t*>(roots.data())};
    }
};

dim3 plane_grid(long long x_blocks, int planes) { return dim3(unsigned(x_blocks), unsigned(std::min(planes, kMaxGridY))); }
dim3 tile_grid(const Geometry& g) { return plane_grid(g.tiles_per_plane, g.planes); }

// Passes 1–3. num_roots (labelling) receives the number of components over all planes.
template <typename T, int kConn, bool kEqual, bool kStats>
void build_forest(const Context& ctx, const T* image, Forest f, const Geometry& g, unsigned long long* num_roots) {
    const cudaStream_t stream = stream_of(ctx);
    {
        const dim3 block(kTile, kTileRowsPerPass), grid = tile_grid(g);
        local_label_kernel<T, kConn, kEqual, kStats><<<grid, block, 0, stream>>>(image, f, g);
        CUBEKIT_CHECK_LAUNCH(ctx, "local_label_kernel", grid, block);
    }
    const long long seam_pixels = (long long)(g.tiles_y - 1) * g.W + (long long)(g.tiles_x - 1) * g.H;
    if (seam_pixels > 0) {
        const dim3 block(kFlatThreads), grid = plane_grid(div_up(seam_pixels, kFlatThreads), g.planes);
        seam_merge_kernel<T, kConn, kEqual><<<grid, block, 0, stream>>>(image, f, g);
        CUBEKIT_CHECK_LAUNCH(ctx, "seam_merge_kernel", grid, block);
    }
    {
        const dim3 block(kFlatThreads), grid(unsigned(div_up((long long)g.tiles() * 32, kFlatThreads)));
        resolve_roots_kernel<kStats><<<grid, block, 0, stream>>>(f, g, num_roots);
        CUBEKIT_CHECK_LAUNCH(ctx, "resolve_roots_kernel", grid, block);
    }
}

}  // namespace
}  // namespace cubekit::detail
