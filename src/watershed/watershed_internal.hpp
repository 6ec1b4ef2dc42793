#pragma once
// Backends of the watershed (watershed.cpp validates and dispatches). Shared by the CPU reference
// and the CUDA backend: the neighbour order, the order-preserving keys, the levels rule.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "cubekit/error.hpp"
#include "cubekit/watershed.hpp"

#if defined(__CUDACC__)
#define CUBEKIT_WS_HD __host__ __device__ __forceinline__
#else
#define CUBEKIT_WS_HD inline
#endif

namespace cubekit::detail {

/// One neighbour step (dz, dy, dx).
struct Step {
    int dz, dy, dx;
};

/// The neighbours of spec §B3 in their fixed order: 4/8 in 2-D as (dy, dx) row by row, 6/26 in
/// lexicographic (dz, dy, dx) order. The first half precedes the centre, the second follows it
/// (the boundary map's "forward" neighbours).
std::vector<Step> watershed_steps(int connectivity);

/// A W×H×D grid of pixels, raster index p = (z·H + y)·W + x; `inside` (dense u8, may be null = all)
/// marks the pixels that are part of the relief.
struct Grid {
    int width = 0, height = 0, depth = 0;
    const std::uint8_t* inside = nullptr;
    std::int64_t size() const { return std::int64_t(width) * height * depth; }
    bool in(std::int64_t p) const { return inside == nullptr || inside[p] != 0; }
};

/// Order-preserving unsigned key of a height (a < b ⇔ key(a) < key(b); −0.0 and +0.0 share one).
template <class T>
CUBEKIT_WS_HD std::uint64_t height_key(T h) {
    if constexpr (std::is_same_v<T, float>) {
        if (h == 0.0f) h = 0.0f;
        std::uint32_t u;
        std::memcpy(&u, &h, 4);
        return (u & 0x80000000u) ? std::uint64_t(~u) : std::uint64_t(u | 0x80000000u);
    } else if constexpr (std::is_same_v<T, double>) {
        if (h == 0.0) h = 0.0;
        std::uint64_t u;
        std::memcpy(&u, &h, 8);
        return (u >> 63) ? ~u : (u | (std::uint64_t(1) << 63));
    } else if constexpr (std::is_signed_v<T>) {
        return std::uint64_t(std::int64_t(h) - std::int64_t(std::numeric_limits<T>::min()));
    } else {
        return std::uint64_t(h);
    }
}

/// The spec's `levels` rule (B2): round((h − lo)/(hi − lo)·(levels − 1)) in f64, half away from
/// zero; 0 when hi == lo. Written so that host (no contraction) and device (--fmad=false) agree.
CUBEKIT_WS_HD std::uint32_t level_of(double h, double lo, double hi, double levels_minus_1) {
    if (!(hi > lo)) return 0;
    const double t = (h - lo) / (hi - lo) * levels_minus_1;
    return std::uint32_t(std::round(t));
}

/// Throws InvalidInput unless the `levels` rule is defined: hi − lo finite (no ±inf height, no
/// overflow of the difference).
inline void check_levels_range(double lo, double hi, std::int64_t levels) {
    if (!std::isfinite(hi - lo))
        throw InvalidInput("watershed: levels = " + std::to_string(levels) + " needs finite heights; the relief spans " +
                           std::to_string(lo) + " .. " + std::to_string(hi));
}

/// The key of "no marker reaches this pixel" in an imposed relief.
inline constexpr std::uint64_t unreached_key = std::numeric_limits<std::uint64_t>::max();

// ---- CPU (cpu.cpp, relief.cpp) ---------------------------------------------------------------

/// The automaton of spec §B3 on a dense relief `h` (raster order) of any comparable type. Writes
/// labels (dense, raster order): 1..R by the raster order of each minimum's first pixel, or, with
/// `minimum_labels` (dense, a label per pixel: the markers), the minimum's own label; 0 outside.
/// Returns R (without markers) or 0 (the caller counts marker labels).
template <class T>
std::int64_t watershed_cpu(const Context& ctx, const Grid& grid, const T* h, const std::vector<Step>& steps,
                           const std::int32_t* minimum_labels, std::int32_t* labels);

/// Phases 1 and 2 alone (tests): the plateau distance d (∞ = UINT32_MAX) and the arrows π as raster
/// indices (p on minima, −1 outside), raster order.
template <class T>
std::vector<std::uint32_t> watershed_distance_cpu(const Grid& grid, const T* h, const std::vector<Step>& steps);
template <class T>
std::vector<std::int64_t> watershed_arrows_cpu(const Grid& grid, const T* h, const std::vector<Step>& steps);

/// Reconstruction by erosion of `marker` (≥ floor everywhere) over `floor`, in place in `marker`:
/// the greatest r ≤ marker with r(p) = max(floor(p), min over in-grid neighbours r(q)) wherever
/// r(p) < marker(p). Exact (min/max only).
template <class K>
void reconstruct_by_erosion_cpu(const Grid& grid, const std::vector<Step>& steps, const K* floor, K* marker);

/// Dense relief → (lo, hi) over the inside pixels (NaN-free input).
template <class T>
void relief_range_cpu(const Grid& grid, const T* h, double& lo, double& hi);

/// The CPU pipeline's inputs: dense host memory in raster order.
struct HostWatershed {
    Grid grid;
    std::vector<Step> steps;
    WatershedOptions options;
    const std::int32_t* markers = nullptr;  // > 0 = seed label, or null
    std::int32_t* labels = nullptr;         // output
};

/// levels → h-minima → imposition → automaton (relief.cpp). Returns R without markers, else 0.
template <class T>
std::int64_t watershed_host(const Context& ctx, const HostWatershed& w, const T* h);

/// The `levels` relief (u32, raster order; 0 outside).
template <class T>
std::vector<std::uint32_t> quantize_levels_host(const Grid& g, const T* h, std::int64_t levels);

// ---- Small regions (min_area.cpp) ------------------------------------------------------------

/// WatershedOptions::min_area (the header's "Small regions"), the front door's call for either
/// context: `labels` as a backend wrote them (host or device, any strides; 1..R, 0 outside),
/// `height` the relief as given (levels and h-minima are applied here again). Runs on the host:
/// device labels and relief are downloaded, the merged labels uploaded. Renumbers the labels
/// 1..R' by their first pixel and returns R'.
std::int64_t merge_small_regions(const Context& ctx, const CubeView& height, const MutableCubeView& labels,
                                 const WatershedOptions& options, const CubeView* mask);

// ---- Tiles (tiled.cpp drives; the pieces below compute one tile) ------------------------------

/// A tile of a 2-D relief: its window (core + 1-pixel halo, clipped) in the scene and its core in
/// the window. `ring` lists the window cells outside the core's interior (the halo and the core's
/// own border), in window raster order: the cells whose plateau distances tiles exchange.
struct TileFrame {
    int scene_width = 0;
    int x0 = 0, y0 = 0, width = 0, height = 0;                      // the window, scene coordinates
    int core_x0 = 0, core_y0 = 0, core_width = 0, core_height = 0;  // the core, window coordinates
    std::vector<std::int32_t> ring;

    static TileFrame of(int scene_width, int x0, int y0, int width, int height, int read_x0, int read_y0,
                        int read_width, int read_height);
    bool in_core(std::int64_t cell) const {
        const int x = int(cell % width) - core_x0, y = int(cell / width) - core_y0;
        return x >= 0 && y >= 0 && x < core_width && y < core_height;
    }
    std::int64_t scene_index(std::int64_t cell) const {
        return (std::int64_t(y0) + cell / width) * scene_width + x0 + cell % width;
    }
    /// The window cell of a scene raster index inside the window (scene_index's inverse).
    std::int64_t window_cell(std::int64_t scene) const {
        return (scene / scene_width - y0) * width + scene % scene_width - x0;
    }
};

/// InvalidInput naming the window cell's scene pixel: NaN in the relief.
[[noreturn]] inline void throw_nan_in_tile(const TileFrame& f, std::int64_t cell) {
    const std::int64_t p = f.scene_index(cell);
    throw InvalidInput("watershed: the relief holds NaN (at x " + std::to_string(p % f.scene_width) + ", y " +
                       std::to_string(p / f.scene_width) + "); heights must be comparable");
}

/// One tile on the CPU: `h` and `inside` (dense u8 or null) cover the window; `seeds` (aligned with
/// frame.ring, UINT32_MAX = none) are upper bounds of the ring's plateau distances from the tiles
/// around; `labels` (window-sized, dense) receives the class numbers.
template <class T>
WatershedPiece watershed_piece_cpu(const TileFrame& frame, const std::vector<std::uint32_t>& seeds, const T* h,
                                   const std::uint8_t* inside, int connectivity, std::int32_t* labels);

/// The same on the context's device (h, inside and labels in its memory); identical results.
WatershedPiece watershed_piece_cuda(const Context& ctx, const TileFrame& frame, const std::vector<std::uint32_t>& seeds,
                                    const void* h, DType dtype, const std::uint8_t* inside, int connectivity,
                                    std::int32_t* labels);

// ---- CUDA (cuda.cu) --------------------------------------------------------------------------

/// Markers as a dense host i32 cube in raster order (InvalidInput for labels beyond 2^31 − 1).
Cube markers_i32(const Context& ctx, const CubeView& markers);

/// The CUDA front (device.cpp): places the relief, markers, mask and labels on the device, runs
/// watershed_cuda, copies the labels into `labels` when it is not dense. Returns R.
std::int64_t watershed_on_device(const Context& ctx, const CubeView& height, const MutableCubeView& labels,
                                 const WatershedOptions& options, const WatershedInputs& inputs);

/// What the CUDA backend needs, all on the context's device, dense raster order.
struct DeviceWatershed {
    Grid grid;                                   // inside: device pointer or null
    const std::int32_t* markers = nullptr;       // device, dense, or null
    std::int32_t* labels = nullptr;              // device, dense output
};

/// The whole pipeline on the device (levels, h-min, imposition, automaton, numbering) for a dense
/// relief `h` of element type `dtype` on the context's device. Returns R (the one read-back).
std::int64_t watershed_cuda(const Context& ctx, const DeviceWatershed& w, const void* h, DType dtype,
                            const WatershedOptions& options);

}  // namespace cubekit::detail
