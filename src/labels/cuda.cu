// Connected-component labelling, CUDA backend (spec edges.md §4.3 "Modern GPU CCL").
//
// Block-based union-find with atomicMin unions (Playne & Hawick 2018; Allegretti et al. 2020,
// "BUF"), all planes in every launch, nothing read back by the host on the removal path:
//   1. local    one block per 32×32 tile (and plane): row runs by warp ballots, union-find over
//               them in shared memory, full path compression, per-local-root size (and bounding
//               box) by shared atomics. Writes,
//               for each foreground pixel, its local root's plane index into `parent`, the local
//               root's size (box) into `size` (`box`), and the tile's list of local roots.
//   2. seams    one thread per pixel on a tile seam (the first row / column of a tile) unites it
//               with its neighbours in other tiles, in global memory.
//   3. resolve  one warp per tile: each local root finds its global root, points straight at
//               it and adds its size (box) to it. Every pixel now reaches its root in two
//               steps: pixel → local root → root.
//   4. remove   one pass over the pixels clears those whose root's size < min_size.
// Labelling (label_components) replaces 4 with: collect the roots, sort them (CUB radix sort of
// plane·2^32 + index), number them per plane, and write each pixel's number.
//
// Unions link the larger root under the smaller, so parents are always smaller than children
// and a root is the smallest raster index of its component, i.e. its first pixel: that makes
// the numbering canonical and equal to the CPU's. Background entries of `parent`/`size`/`box`
// are never written and never read.
//
// Skipped unions: a union is left out only where the two pixels are already connected through
// the runs of a row (consecutive joined pixels: inside a tile a run points straight at its first
// pixel, and the seams pass always unites horizontal pairs across tiles). local_label_kernel and
// seam_merge_kernel state each rule.
//
// Memory on the removal path (W·H·planes = N pixels, a fraction f foreground): local reads the
// u8 maps (N bytes) and writes 4 bytes per foreground pixel (in 32-byte sectors: most of 4N
// bytes for edge maps); seams touch about one sector per tile row per seam; resolve is sparse;
// remove reads the maps and the parents of foreground pixels and writes the cleared bytes.
// About 2 × 4N + 3N bytes: ~0.9 GB for 102 bands of 1096×715, ~0.3 ms at H100 bandwidth.
#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/cuda_check.hpp"
#include "labels/labels_internal.hpp"

namespace cubekit::detail {
namespace {

constexpr int kTile = 32;                      // tiles of kTile × kTile pixels
constexpr int kTilePixels = kTile * kTile;     // also the capacity of a tile's root list
constexpr int kTileRowsPerPass = 8;            // local block: kTile × 8 threads, 4 rows each
constexpr int kLocalThreads = kTile * kTileRowsPerPass;
constexpr int kFlatThreads = 256;              // seams, resolve, per-pixel passes
constexpr int kPixelsPerThread = 4;            // per-pixel passes
constexpr int kMaxGridY = 65535;               // planes beyond this loop inside the kernels

long long div_up(long long a, long long b) { return (a + b - 1) / b; }

// Planes of W×H pixels cut into tiles. Pixel indices within a plane are int (W·H < 2^31,
// checked by the callers); plane offsets are 64-bit.
struct Geometry {
    int W, H, planes;
    int tiles_x, tiles_y, tiles_per_plane;
    __host__ __device__ std::size_t plane_base(int plane) const { return std::size_t(plane) * std::size_t(W) * std::size_t(H); }
    __host__ __device__ std::size_t tile_id(int plane, int tile) const { return std::size_t(plane) * std::size_t(tiles_per_plane) + std::size_t(tile); }
    __host__ __device__ std::size_t pixels() const { return plane_base(planes); }
    __host__ __device__ std::size_t tiles() const { return tile_id(planes, 0); }
};

Geometry make_geometry(int W, int H, int planes) {
    Geometry g{W, H, planes, int(div_up(W, kTile)), int(div_up(H, kTile)), 0};
    g.tiles_per_plane = g.tiles_x * g.tiles_y;
    return g;
}

// Device pointers of the union-find state (all indexed by plane base + plane index, except the
// per-tile arrays).
struct Forest {
    int* parent;           // per foreground pixel: a parent with a smaller index (roots: itself)
    int* size;             // at local and global roots: the (partial) component size
    int4* box;             // at roots, labelling only: (x0, y0, x1, y1) inclusive; else nullptr
    int* root_count;       // per tile: number of local roots
    std::uint16_t* roots;  // per tile, kTilePixels slots: tile offsets (ly·kTile + lx) of local roots
};

// ---- Union-find -------------------------------------------------------------------------------
// Invariant: parent[x] ≤ x, and every write to parent is an atomicMin with a member of x's set,
// so parents only decrease, a node that is not a root never becomes one again, and a root is the
// smallest index of its set.

// Root of x with path halving: each visited node is re-pointed at its grandparent (an ancestor,
// so the same set). Reads through volatile: other threads lower parents concurrently, and a stale
// value is still an ancestor.
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

// Root of x when no union is in progress any more (plain reads; concurrent compression writes
// store only final roots).
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

// ---- 1. local: one tile per block ---------------------------------------------------------------
// Warp w owns tile rows w, w+8, w+16, w+24 (lane = column) in every phase.
//   runs     a ballot of "joins its left neighbour" gives each row's runs; every pixel points at
//            its run's first pixel, which holds the run's length (and box). No atomics.
//   rows     each run is united with the runs of the row above that it touches. A run pixel
//            only unites where the run above changes (see below), so a 2-pixel-wide vertical
//            stroke costs one union per row.
//   roots    each run start finds its root and, unless it is one, points at it and adds its
//            length (box) to it; roots enter the tile's root list.
//   write    each pixel's root (via its run start) as a plane index into parent, and size
//            (box) at the roots, to global memory.
// Rows (8-connectivity): a run [s, e] must reach every joined pixel of the row above in columns
// s−1..e+1. Its start takes NW, N, NE (only N when N is joined: NW and NE then lie in N's run);
// a later pixel x only takes NE, and only when N is not joined (else NE lies in N's run, which
// x−1 reached). 4-connectivity: x takes N when joined, unless x−1 is in the run and its N is
// joined (the same run above). Pairs with other tiles are the seams pass's.

template <typename T, int kConn, bool kEqual, bool kStats>
__global__ void __launch_bounds__(kLocalThreads)
local_label_kernel(const T* __restrict__ image, Forest f, Geometry g) {
    __shared__ T value[kTilePixels];
    __shared__ int parent[kTilePixels];
    __shared__ int count[kTilePixels];  // at run starts: run length, then (roots) component size
    __shared__ int4 box[kStats ? kTilePixels : 1];
    __shared__ int num_roots;
    constexpr int kPasses = kTile / kTileRowsPerPass;
    constexpr unsigned kAll = 0xffffffffu;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tile = blockIdx.x;
    const int x0 = (tile % g.tiles_x) * kTile, y0 = (tile / g.tiles_x) * kTile;
    const int gx = x0 + tx;

    for (int plane = blockIdx.y; plane < g.planes; plane += gridDim.y) {
        const std::size_t base = g.plane_base(plane), tile_id = g.tile_id(plane, tile);
        const T* img = image + base;
        if (tx == 0 && ty == 0) num_roots = 0;
        unsigned joins_left[kPasses];  // per owned row: bit x set when pixel x joins pixel x−1
#pragma unroll
        for (int k = 0; k < kPasses; ++k) {
            const int ly = ty + k * kTileRowsPerPass, li = ly * kTile + tx, gy = y0 + ly;
            const T v = gx < g.W && gy < g.H ? img[gy * g.W + gx] : T(0);  // outside: background
            const T left = T(__shfl_up_sync(kAll, static_cast<unsigned>(v), 1));  // lane 0: itself, unused
            joins_left[k] = __ballot_sync(kAll, v != T(0) && tx > 0 && joins<T, kEqual>(v, left));
            value[li] = v;
            if (v == T(0)) continue;
            const unsigned breaks = ~joins_left[k];  // run starts and background
            const int start = 31 - __clz(breaks & (kAll >> (31 - tx)));  // last break at or before tx
            parent[li] = ly * kTile + start;
            if (start == tx) {
                const unsigned after = tx == 31 ? 0u : breaks & (kAll << (tx + 1));
                const int end = after ? __ffs(after) - 1 : kTile;  // one past the run
                count[li] = end - tx;
                if constexpr (kStats) box[li] = make_int4(gx, gy, x0 + end - 1, gy);
            }
        }
        __syncthreads();

#pragma unroll
        for (int k = 0; k < kPasses; ++k) {
            const int ly = ty + k * kTileRowsPerPass, li = ly * kTile + tx;
            const T v = value[li];
            if (ly == 0 || v == T(0)) continue;
            const bool run_start = !((joins_left[k] >> tx) & 1u);
            const bool n = joins<T, kEqual>(v, value[li - kTile]);
            const bool nw = tx > 0 && joins<T, kEqual>(v, value[li - kTile - 1]);
            const bool ne = tx + 1 < kTile && joins<T, kEqual>(v, value[li - kTile + 1]);
            if (kConn == 4) {
                if (n && (run_start || !nw)) unite(parent, li, li - kTile);
            } else if (run_start) {
                if (n) unite(parent, li, li - kTile);
                else {
                    if (nw) unite(parent, li, li - kTile - 1);
                    if (ne) unite(parent, li, li - kTile + 1);
                }
            } else if (!n && ne) {
                unite(parent, li, li - kTile + 1);
            }
        }
        __syncthreads();

        // Run starts: roots, sizes (boxes), the root list. Every parent value is a run start
        // (runs begin so, unions link roots, halving copies parents), so after this phase any
        // pixel reaches its root in at most two steps.
#pragma unroll
        for (int k = 0; k < kPasses; ++k) {
            const int li = (ty + k * kTileRowsPerPass) * kTile + tx;
            if (value[li] == T(0) || ((joins_left[k] >> tx) & 1u)) continue;
            const int r = find_final_root(parent, li);
            if (r == li) {
                f.roots[tile_id * kTilePixels + std::size_t(atomicAdd(&num_roots, 1))] = std::uint16_t(li);
                continue;
            }
            parent[li] = r;
            atomicAdd(&count[r], count[li]);  // count[li] itself never changes: li is no root
            if constexpr (kStats) {
                const int4 b = box[li];
                atomicMin(&box[r].x, b.x);
                atomicMin(&box[r].y, b.y);
                atomicMax(&box[r].z, b.z);
                atomicMax(&box[r].w, b.w);
            }
        }
        __syncthreads();

#pragma unroll
        for (int k = 0; k < kPasses; ++k) {
            const int ly = ty + k * kTileRowsPerPass, li = ly * kTile + tx;
            if (value[li] == T(0)) continue;
            const bool run_start = !((joins_left[k] >> tx) & 1u);
            const int r = run_start ? parent[li] : parent[parent[li]];
            const std::size_t pixel = base + std::size_t((y0 + ly) * g.W + gx);
            f.parent[pixel] = (y0 + r / kTile) * g.W + x0 + r % kTile;
            if (r == li) {
                f.size[pixel] = count[li];
                if constexpr (kStats) f.box[pixel] = box[li];
            }
        }
        if (tx == 0 && ty == 0) f.root_count[tile_id] = num_roots;
        __syncthreads();  // the next plane reuses the shared arrays
    }
}

// ---- 2. seams: unions across tiles ----------------------------------------------------------------

// Threads [0, row_seam_pixels) take the first rows of tiles (y = 32, 64, ...), the rest the
// first columns (x = 32, 64, ...), row by row.
template <typename T, int kConn, bool kEqual>
__global__ void __launch_bounds__(kFlatThreads)
seam_merge_kernel(const T* __restrict__ image, int* __restrict__ parent_all, Geometry g) {
    const long long row_seam_pixels = (long long)(g.tiles_y - 1) * g.W;
    const long long col_seam_pixels = (long long)(g.tiles_x - 1) * g.H;
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= row_seam_pixels + col_seam_pixels) return;
    const bool on_row = t < row_seam_pixels;
    int x, y;
    if (on_row) {
        y = int(t / g.W + 1) * kTile;
        x = int(t % g.W);
    } else {
        const long long u = t - row_seam_pixels;
        y = int(u / (g.tiles_x - 1));
        x = int(u % (g.tiles_x - 1) + 1) * kTile;
    }
    const int i = y * g.W + x, W = g.W;
    for (int plane = blockIdx.y; plane < g.planes; plane += gridDim.y) {
        const std::size_t base = g.plane_base(plane);
        const T* img = image + base;
        int* parent = parent_all + base;
        const T v = img[i];
        if (v == T(0)) continue;
        if (on_row) {  // the row above lies in other tiles: N, and NW, NE
            const bool up = joins<T, kEqual>(v, img[i - W]);
            if (up) unite(parent, i, i - W);
            if (kConn == 8 && !up) {  // with N joined they are connected through it
                if (x > 0 && joins<T, kEqual>(v, img[i - W - 1])) unite(parent, i, i - W - 1);
                if (x + 1 < W && joins<T, kEqual>(v, img[i - W + 1])) unite(parent, i, i - W + 1);
            }
        } else {  // the column to the left lies in other tiles: W, and NW, SW (all of them)
            if (joins<T, kEqual>(v, img[i - 1])) unite(parent, i, i - 1);
            if (kConn == 8) {
                if (y > 0 && joins<T, kEqual>(v, img[i - W - 1])) unite(parent, i, i - W - 1);
                if (y + 1 < g.H && joins<T, kEqual>(v, img[i + W - 1])) unite(parent, i, i + W - 1);
            }
        }
    }
}

// ---- 3. resolve: local roots → global roots, one warp per tile ------------------------------------

// Adds each local root's size (box) to its global root and points it there. Counts the global
// roots into *num_roots when given (labelling). No unions happen any more, so concurrent
// compression writes only ever store the final root.
template <bool kStats>
__global__ void __launch_bounds__(kFlatThreads)
resolve_roots_kernel(Forest f, Geometry g, unsigned long long* num_roots) {
    const std::size_t warp = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    const int lane = int(threadIdx.x % 32);
    if (warp >= g.tiles()) return;  // whole warps leave together
    const int plane = int(warp / std::size_t(g.tiles_per_plane)), tile = int(warp % std::size_t(g.tiles_per_plane));
    const int x0 = (tile % g.tiles_x) * kTile, y0 = (tile / g.tiles_x) * kTile;
    const std::size_t base = g.plane_base(plane);
    int* parent = f.parent + base;
    int* size = f.size + base;
    const int n = f.root_count[warp];
    unsigned global_roots = 0;
    for (int k = lane; k < n; k += 32) {
        const int li = f.roots[warp * kTilePixels + std::size_t(k)];
        const int r = (y0 + li / kTile) * g.W + x0 + li % kTile;
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
        for (int offset = 16; offset > 0; offset /= 2) global_roots += __shfl_xor_sync(0xffffffffu, global_roots, offset);
        if (lane == 0 && global_roots) atomicAdd(num_roots, (unsigned long long)global_roots);
    }
}

// ---- 4. remove ------------------------------------------------------------------------------------

// Each thread takes kPixelsPerThread pixels and issues their dependent loads (map → parent →
// root → size) side by side, so the four chains overlap.
__global__ void __launch_bounds__(kFlatThreads)
remove_small_kernel(std::uint8_t* __restrict__ maps, const int* __restrict__ parent_all,
                    const int* __restrict__ size_all, Geometry g, long long min_size) {
    const long long plane_pixels = (long long)g.W * g.H;
    const long long first = (long long)blockIdx.x * (kFlatThreads * kPixelsPerThread) + threadIdx.x;
    for (int plane = blockIdx.y; plane < g.planes; plane += gridDim.y) {
        const std::size_t base = g.plane_base(plane);
        std::uint8_t* map = maps + base;
        const int* parent = parent_all + base;
        const int* size = size_all + base;
        bool on[kPixelsPerThread];
        int node[kPixelsPerThread];
#pragma unroll
        for (int k = 0; k < kPixelsPerThread; ++k) {
            const long long i = first + k * kFlatThreads;
            on[k] = i < plane_pixels && map[i] != 0;
        }
#pragma unroll
        for (int k = 0; k < kPixelsPerThread; ++k) node[k] = on[k] ? parent[first + k * kFlatThreads] : 0;
#pragma unroll
        for (int k = 0; k < kPixelsPerThread; ++k) node[k] = on[k] ? parent[node[k]] : 0;  // pixel → local root → root
#pragma unroll
        for (int k = 0; k < kPixelsPerThread; ++k)
            if (on[k] && size[node[k]] < min_size) map[first + k * kFlatThreads] = 0;
    }
}

// ---- Labelling: canonical numbers ---------------------------------------------------------------

// Writes plane·2^32 + index of every global root (parent[r] == r among the local roots).
__global__ void __launch_bounds__(kFlatThreads)
collect_roots_kernel(Forest f, Geometry g, unsigned long long* keys, unsigned long long* next) {
    const std::size_t warp = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    const int lane = int(threadIdx.x % 32);
    if (warp >= g.tiles()) return;
    const int plane = int(warp / std::size_t(g.tiles_per_plane)), tile = int(warp % std::size_t(g.tiles_per_plane));
    const int x0 = (tile % g.tiles_x) * kTile, y0 = (tile / g.tiles_x) * kTile;
    const int* parent = f.parent + g.plane_base(plane);
    const int n = f.root_count[warp];
    for (int k = lane; k < n; k += 32) {
        const int li = f.roots[warp * kTilePixels + std::size_t(k)];
        const int r = (y0 + li / kTile) * g.W + x0 + li % kTile;
        if (parent[r] == r) keys[atomicAdd(next, 1ull)] = (unsigned long long)plane << 32 | unsigned(r);
    }
}

// first[p] = index of plane p's first root in the sorted keys (first[planes] = n).
__global__ void plane_first_kernel(const unsigned long long* __restrict__ keys, long long n, int planes,
                                   long long* __restrict__ first) {
    const int p = int(blockIdx.x * blockDim.x + threadIdx.x);
    if (p > planes) return;
    const unsigned long long key = (unsigned long long)p << 32;
    long long lo = 0, hi = n;  // lower bound
    while (lo < hi) {
        const long long mid = lo + (hi - lo) / 2;
        if (keys[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    first[p] = lo;
}

// Root i of the sorted list: its statistics move to slot i; its `size` entry becomes its number.
__global__ void __launch_bounds__(kFlatThreads)
number_roots_kernel(const unsigned long long* __restrict__ keys, long long n, const long long* __restrict__ first,
                    Forest f, Geometry g, int* __restrict__ comp_size, int4* __restrict__ comp_box) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int plane = int(keys[i] >> 32), r = int(keys[i] & 0xffffffffu);
    const std::size_t at = g.plane_base(plane) + std::size_t(r);
    comp_size[i] = f.size[at];
    comp_box[i] = f.box[at];
    f.size[at] = int(i - first[plane]) + 1;
}

template <typename T>
__global__ void __launch_bounds__(kFlatThreads)
write_labels_kernel(const T* __restrict__ image, const int* __restrict__ parent_all, const int* __restrict__ number_all,
                    std::int32_t* __restrict__ labels, Geometry g) {
    const long long plane_pixels = (long long)g.W * g.H;
    const long long first = (long long)blockIdx.x * (kFlatThreads * kPixelsPerThread) + threadIdx.x;
    for (int plane = blockIdx.y; plane < g.planes; plane += gridDim.y) {
        const std::size_t base = g.plane_base(plane);
        const int* parent = parent_all + base;
#pragma unroll
        for (int k = 0; k < kPixelsPerThread; ++k) {
            const long long i = first + k * kFlatThreads;
            if (i >= plane_pixels) continue;
            labels[base + i] = image[base + i] == T(0) ? 0 : number_all[base + parent[parent[i]]];
        }
    }
}

// ---- Host side ------------------------------------------------------------------------------------

// The stream-ordered pool returns memory to the driver at every synchronisation once it holds
// more than its release threshold (default 0); keeping our scratch size lets a caller that
// synchronises between calls (a benchmark, the edge detector) reuse it instead of re-mapping it.
void keep_pool_memory(const Context& ctx, std::size_t bytes) {
    cudaMemPool_t pool = nullptr;
    CUBEKIT_CUDA_CHECK(cudaDeviceGetMemPool(&pool, ctx.device()));
    std::uint64_t threshold = 0;
    CUBEKIT_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    if (threshold >= bytes) return;
    threshold = bytes;
    CUBEKIT_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
}

// Owns the union-find scratch of one call (freed stream-ordered when it goes out of scope).
struct ForestBuffers {
    DeviceBuffer parent, size, box, root_count, roots;
    ForestBuffers(const Context& ctx, const Geometry& g, bool stats, std::size_t other_bytes) {
        const std::size_t n = g.pixels(), tiles = g.tiles();
        const std::size_t bytes = n * (2 * sizeof(int) + (stats ? sizeof(int4) : 0)) +
                                  tiles * (sizeof(int) + kTilePixels * sizeof(std::uint16_t));
        keep_pool_memory(ctx, bytes + other_bytes);
        parent = DeviceBuffer(ctx, n * sizeof(int));
        size = DeviceBuffer(ctx, n * sizeof(int));
        if (stats) box = DeviceBuffer(ctx, n * sizeof(int4));
        root_count = DeviceBuffer(ctx, tiles * sizeof(int));
        roots = DeviceBuffer(ctx, tiles * kTilePixels * sizeof(std::uint16_t));
    }
    Forest forest() {
        return Forest{static_cast<int*>(parent.data()), static_cast<int*>(size.data()), static_cast<int4*>(box.data()),
                      static_cast<int*>(root_count.data()), static_cast<std::uint16_t*>(roots.data())};
    }
};

dim3 plane_grid(long long x_blocks, int planes) { return dim3(unsigned(x_blocks), unsigned(std::min(planes, kMaxGridY))); }

// Passes 1–3. num_roots (labelling) receives the number of components over all planes.
template <typename T, int kConn, bool kEqual, bool kStats>
void build_forest(const Context& ctx, const T* image, Forest f, const Geometry& g, unsigned long long* num_roots) {
    const cudaStream_t stream = stream_of(ctx);
    {
        const dim3 block(kTile, kTileRowsPerPass), grid = plane_grid(g.tiles_per_plane, g.planes);
        local_label_kernel<T, kConn, kEqual, kStats><<<grid, block, 0, stream>>>(image, f, g);
        CUBEKIT_CHECK_LAUNCH(ctx, "local_label_kernel", grid, block);
    }
    const long long seam_pixels = (long long)(g.tiles_y - 1) * g.W + (long long)(g.tiles_x - 1) * g.H;
    if (seam_pixels > 0) {
        const dim3 block(kFlatThreads), grid = plane_grid(div_up(seam_pixels, kFlatThreads), g.planes);
        seam_merge_kernel<T, kConn, kEqual><<<grid, block, 0, stream>>>(image, f.parent, g);
        CUBEKIT_CHECK_LAUNCH(ctx, "seam_merge_kernel", grid, block);
    }
    {
        const dim3 block(kFlatThreads), grid(unsigned(div_up((long long)g.tiles() * 32, kFlatThreads)));
        resolve_roots_kernel<kStats><<<grid, block, 0, stream>>>(f, g, num_roots);
        CUBEKIT_CHECK_LAUNCH(ctx, "resolve_roots_kernel", grid, block);
    }
}

dim3 pixel_grid(const Geometry& g) {
    return plane_grid(div_up((long long)g.W * g.H, kFlatThreads * kPixelsPerThread), g.planes);
}

template <int kConn>
void remove_small(const Context& ctx, std::uint8_t* maps, const Geometry& g, std::int64_t min_size) {
    ForestBuffers buffers(ctx, g, false, 0);
    const Forest f = buffers.forest();
    build_forest<std::uint8_t, kConn, false, false>(ctx, maps, f, g, nullptr);
    const dim3 block(kFlatThreads), grid = pixel_grid(g);
    remove_small_kernel<<<grid, block, 0, stream_of(ctx)>>>(maps, f.parent, f.size, g, (long long)min_size);
    CUBEKIT_CHECK_LAUNCH(ctx, "remove_small_kernel", grid, block);
}

template <typename T, int kConn>
Components label_typed(const Context& ctx, const Cube& image) {
    const cudaStream_t stream = stream_of(ctx);
    const Geometry g = make_geometry(image.width(), image.height(), image.bands());
    const std::size_t n_pixels = g.pixels();
    DeviceBuffer d_image(ctx, image.num_bytes());
    d_image.upload(ctx, image.bytes(), image.num_bytes());
    ForestBuffers buffers(ctx, g, true, image.num_bytes() + n_pixels * sizeof(std::int32_t));
    Forest f = buffers.forest();
    const T* d_img = static_cast<const T*>(d_image.data());

    DeviceBuffer d_counter(ctx, sizeof(unsigned long long));
    auto* counter = static_cast<unsigned long long*>(d_counter.data());
    CUBEKIT_CUDA_CHECK(cudaMemsetAsync(counter, 0, sizeof(unsigned long long), stream));
    build_forest<T, kConn, true, true>(ctx, d_img, f, g, counter);
    unsigned long long n_roots = 0;
    d_counter.download(ctx, &n_roots, sizeof n_roots);  // waits

    Components out;
    out.per_band.resize(std::size_t(g.planes));
    std::vector<long long> first(std::size_t(g.planes) + 1, 0);
    std::vector<int> comp_size(n_roots);
    std::vector<int4> comp_box(n_roots);
    if (n_roots > 0) {
        const long long n = (long long)n_roots;
        DeviceBuffer keys(ctx, n_roots * 8), sorted(ctx, n_roots * 8), d_first(ctx, first.size() * 8);
        DeviceBuffer d_size(ctx, n_roots * sizeof(int)), d_box(ctx, n_roots * sizeof(int4));
        auto* k_in = static_cast<unsigned long long*>(keys.data());
        auto* k_out = static_cast<unsigned long long*>(sorted.data());
        auto* first_ptr = static_cast<long long*>(d_first.data());
        CUBEKIT_CUDA_CHECK(cudaMemsetAsync(counter, 0, sizeof(unsigned long long), stream));
        const dim3 block(kFlatThreads), tiles_grid(unsigned(div_up((long long)g.tiles() * 32, kFlatThreads)));
        collect_roots_kernel<<<tiles_grid, block, 0, stream>>>(f, g, k_in, counter);
        CUBEKIT_CHECK_LAUNCH(ctx, "collect_roots_kernel", tiles_grid, block);

        int end_bit = 32;  // plane·2^32 + index: the plane needs bit_width(planes − 1) more bits
        while (end_bit < 64 && (1ull << (end_bit - 32)) < (unsigned long long)g.planes) ++end_bit;
        std::size_t temp_bytes = 0;
        CUBEKIT_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes, k_in, k_out, n, 0, end_bit, stream));
        DeviceBuffer temp(ctx, std::max<std::size_t>(temp_bytes, 1));
        CUBEKIT_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(temp.data(), temp_bytes, k_in, k_out, n, 0, end_bit, stream));

        const dim3 first_grid(unsigned(div_up(g.planes + 1, kFlatThreads)));
        plane_first_kernel<<<first_grid, block, 0, stream>>>(k_out, n, g.planes, first_ptr);
        CUBEKIT_CHECK_LAUNCH(ctx, "plane_first_kernel", first_grid, block);
        const dim3 roots_grid(unsigned(div_up(n, kFlatThreads)));
        number_roots_kernel<<<roots_grid, block, 0, stream>>>(k_out, n, first_ptr, f, g, static_cast<int*>(d_size.data()),
                                                              static_cast<int4*>(d_box.data()));
        CUBEKIT_CHECK_LAUNCH(ctx, "number_roots_kernel", roots_grid, block);
        d_first.download(ctx, first.data(), first.size() * 8);
        d_size.download(ctx, comp_size.data(), n_roots * sizeof(int));
        d_box.download(ctx, comp_box.data(), n_roots * sizeof(int4));
    }
    DeviceBuffer d_labels(ctx, n_pixels * sizeof(std::int32_t));
    {
        const dim3 block(kFlatThreads), grid = pixel_grid(g);
        write_labels_kernel<T><<<grid, block, 0, stream>>>(d_img, f.parent, f.size,
                                                           static_cast<std::int32_t*>(d_labels.data()), g);
        CUBEKIT_CHECK_LAUNCH(ctx, "write_labels_kernel", grid, block);
    }
    out.labels = Cube(g.W, g.H, g.planes, DType::I32, Layout::BSQ);
    d_labels.download(ctx, out.labels.bytes(), n_pixels * sizeof(std::int32_t));
    for (int p = 0; p < g.planes; ++p) {
        std::vector<ComponentInfo>& band = out.per_band[std::size_t(p)];
        band.reserve(std::size_t(first[std::size_t(p) + 1] - first[std::size_t(p)]));
        for (long long i = first[std::size_t(p)]; i < first[std::size_t(p) + 1]; ++i) {
            const int4 b = comp_box[std::size_t(i)];
            band.push_back(ComponentInfo{comp_size[std::size_t(i)], b.x, b.y, b.z, b.w});
        }
    }
    return out;
}

}  // namespace

void remove_small_components_device(const Context& ctx, std::uint8_t* maps, int width, int height, int planes,
                                    std::int64_t min_size, int connectivity) {
    check_label_geometry("remove_small_components", width, height, planes, connectivity);
    if (!ctx.is_cuda()) throw DeviceError("remove_small_components: the context runs on the CPU; device maps need a CUDA context");
    if (min_size <= 1 || width == 0 || height == 0 || planes == 0) return;
    CUBEKIT_CUDA_CHECK(cudaSetDevice(ctx.device()));
    const Geometry g = make_geometry(width, height, planes);
    if (connectivity == 4) remove_small<4>(ctx, maps, g, min_size);
    else remove_small<8>(ctx, maps, g, min_size);
}

Components label_components_device(const Context& ctx, const Cube& image, int connectivity) {
    check_label_geometry("label_components", image.width(), image.height(), image.bands(), connectivity);
    if (!ctx.is_cuda()) throw DeviceError("label_components: the context runs on the CPU backend");
    if (image.layout() != Layout::BSQ) throw InvalidInput("label_components: the device path wants a BSQ cube");
    if (image.empty()) {
        Components none{Cube(image.width(), image.height(), image.bands(), DType::I32, Layout::BSQ), {}};
        none.per_band.resize(std::size_t(image.bands()));
        return none;
    }
    CUBEKIT_CUDA_CHECK(cudaSetDevice(ctx.device()));
    return visit_dtype(image.dtype(), [&](auto tag) -> Components {
        using T = decltype(tag);
        if constexpr (std::is_integral_v<T>) {
            return connectivity == 4 ? label_typed<T, 4>(ctx, image) : label_typed<T, 8>(ctx, image);
        } else {
            throw InvalidInput("label_components: element type is " + std::string(dtype_name(image.dtype())) +
                               "; expected an integer type");
        }
    });
}

}  // namespace cubekit::detail
