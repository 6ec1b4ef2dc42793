#pragma once
// The tiled runner of the families that are local with a halo (tiles.hpp): each tile's read window
// is computed by the family's own whole-scene call, and the tile's core is copied into the output.
//
// CPU context: the kernel reads the window of the caller's host view where it is (no staging copy)
// and writes a host tile buffer. CUDA context: devices × lanes workers, each a thread with its own
// Context (stream), pinned staging for the window and the tile output, and device buffers, running
// copy-in → upload → kernel → download → copy-out per tile; lanes of one device overlap each
// other's copies and kernels. Tiles are dealt from one counter, so any number of devices works and
// the output does not depend on which worker computed a tile.
#include <algorithm>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string_view>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/io.hpp"
#include "cubekit/tiles.hpp"
#include "cubekit/view.hpp"

namespace cubekit::detail {

struct LocalTileKernel {
    int halo = 0;
    /// The output: element type and bands (one output pixel per input pixel, BSQ). 0 bands: a
    /// statistics pass (halo 0, usually), whose kernel keeps what it computes (out is an empty view).
    DType out_dtype = DType::F32;
    int out_bands = 1;
    /// Device scratch the kernel needs per pixel of the read window, beyond its input and output
    /// (e.g. a reordered copy when the staged layout is not the one it reads).
    std::size_t device_work_bytes_per_pixel = 0;
    /// Host scratch the CPU backend's kernel allocates per pixel of the read window (counted in the
    /// host budget and in peak_bytes), beyond a window it reads from a file.
    std::size_t host_work_bytes_per_pixel = 0;
    /// Computes the output of the whole read window: `in` is the window (host view of the caller's
    /// data on the CPU; a dense device copy in the input's own nesting on CUDA), `out` dense BSQ in
    /// the same memory. Queued on the context's stream (the runner synchronises).
    std::function<void(const Context& ctx, const CubeView& in, const MutableCubeView& out)> run;
    /// As run, for a kernel that needs to know which tile it computes (the labelling of pieces joined
    /// across tile borders); when set, it is called instead of run.
    std::function<void(const Context& ctx, const Tile& tile, const CubeView& in, const MutableCubeView& out)> run_tile;
    /// When set, only the tiles it accepts are read and computed (a family that runs its tiles again
    /// until they agree: the watershed's plateau distances); the others keep their earlier output.
    std::function<bool(const Tile& tile)> wanted;
    void operator()(const Context& ctx, const Tile& tile, const CubeView& in, const MutableCubeView& out) const {
        if (run_tile) run_tile(ctx, tile, in, out);
        else run(ctx, in, out);
    }
};

/// Where the tiles' input comes from: a host view (read in place by the CPU backend), or a reader of
/// windows (a CubeFile: a scene that is not in memory) that fills a dense host buffer in `layout`.
struct TileSource {
    int width = 0, height = 0, bands = 0;
    DType dtype = DType::F32;
    Layout layout = Layout::BSQ;  ///< the nesting windows are staged in (a copy in it moves whole rows)
    std::optional<CubeView> view;  ///< set when the input is in host memory
    std::function<void(int x0, int y0, int w, int h, const MutableCubeView& dst)> read;
    bool in_memory() const { return view.has_value(); }
};
TileSource tile_source(const CubeView& in);
TileSource tile_source(const CubeFile& file);

/// Runs `kernel` over the tiles of `in` into `out` (host memory, in's width and height,
/// kernel.out_bands bands of kernel.out_dtype, any strides). Throws InvalidInput naming `where`
/// when a budget cannot hold one tile with its halo; exceptions of a worker stop the others and
/// reach the caller. Reports progress (tiles done) through ctx.
TiledRun run_local_tiles(const Context& ctx, const TileSource& in, const MutableCubeView& out,
                         const LocalTileKernel& kernel, const TileOptions& options, std::string_view where);

/// The tile size run_local_tiles would choose for this kernel now: {width, height} of a core. A family
/// that runs several passes over the same tiles forces this size on each (options.tile_width/height):
/// the free device memory, and so the choice, may change between passes.
std::pair<int, int> local_tile_size(const Context& ctx, const TileSource& in, const LocalTileKernel& kernel,
                                    const TileOptions& options, std::string_view where);

/// A piece of a scene where the context's backend reads it: the CPU any host view (a device piece is
/// copied to the host); CUDA a dense BSQ cube on its device (the piece itself when it is one, else a
/// copy). Returns body(view).
template <class Body>
auto on_backend(const Context& ctx, const CubeView& piece, Body&& body) {
    if (!ctx.is_cuda() && !piece.on_device()) return body(piece);
    const CubeInLayout in(ctx, piece, Layout::BSQ, ctx.is_cuda() ? Memory::Device : Memory::Host);
    return body(in.view());
}

/// Folds the memory a pass held into a run's peaks.
inline void merge_peak(TiledRun& into, const TiledRun& pass) {
    into.peak_bytes = std::max(into.peak_bytes, pass.peak_bytes);
    into.device_peak_bytes = std::max(into.device_peak_bytes, pass.device_peak_bytes);
}

/// A statistics pass over the tiles (no halo, no output): per_tile(worker context, window) on every
/// tile, merge(its result) under one lock; the merges must not depend on the order of the tiles (min,
/// max, integer sums). `device_bpp`/`host_bpp`: the scratch per_tile needs per pixel of a window.
/// Returns the pass's run (its peaks).
template <class PerTile, class Merge>
TiledRun run_statistics_pass(const Context& ctx, const TileSource& in, const TileOptions& options, std::string_view where,
                             std::size_t device_bpp, std::size_t host_bpp, PerTile&& per_tile, Merge&& merge) {
    std::mutex mutex;
    LocalTileKernel k;
    k.out_bands = 0;
    k.device_work_bytes_per_pixel = device_bpp;
    k.host_work_bytes_per_pixel = host_bpp;
    k.run = [&](const Context& c, const CubeView& window, const MutableCubeView&) {
        auto part = per_tile(c, window);
        const std::lock_guard lock(mutex);
        merge(part);
    };
    return run_local_tiles(ctx, in, MutableCubeView{}, k, options, where);
}

/// The tile size run_local_tiles uses: {width, height} of a core. `host_bpp`/`device_bpp` are the
/// bytes each worker holds per pixel of a read window on the host and on a device, `workers` the
/// number of workers sharing the budgets (the device budget is per device, shared by its lanes),
/// `device_free` the free memory of a device (0 = not a CUDA run).
std::pair<int, int> choose_tile_size(int width, int height, int halo, std::size_t host_bpp, std::size_t device_bpp,
                                     int workers, int lanes, std::size_t device_free, const TileOptions& options,
                                     std::string_view where);

}  // namespace cubekit::detail
