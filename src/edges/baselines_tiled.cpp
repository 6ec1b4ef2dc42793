// The classical edge detectors in groups of bands (edge_baselines.hpp, issue 17): every band is processed
// on its own, so a group of whole bands gives the whole call's edges and thresholds for those bands.
// The groups stream through the tile runner (core/tiled_local.hpp) as a one-band scene whose row b is
// band b's width × height samples, so that a tile of whole rows is a group of whole bands; the
// runner sizes the groups to the budgets and deals them to the devices. Each worker writes its own
// bands of the result.
#include <climits>
#include <functional>
#include <string>

#include "core/cuda_backend.hpp"
#include "core/tiled_local.hpp"
#include "cubekit/buffer.hpp"
#include "cubekit/edge_baselines.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"

namespace cubekit {
namespace {

// Device work per pixel of a group beyond its samples: five f32 scratch planes and two state bytes
// (canny, edges/baselines_cuda.cu), and the group's u8 edges.
constexpr std::size_t kDeviceWorkBytes = 5 * 4 + 2 + 1;
// Host work per pixel of a group on the CPU: the planes of the band being processed (counted for
// every band of the group: an upper bound) and the edges.
constexpr std::size_t kHostWorkBytes = 5 * 4 + 1;

// The bands of the cube: its size and a reader of a band range into a dense BSQ host buffer.
struct BandSource {
    int width = 0, height = 0, bands = 0;
    DType dtype = DType::F32;
    std::function<void(int first, int n, const MutableCubeView& dst)> read;
};

std::vector<BaselineThreshold> in_groups(const Context& ctx, const BandSource& src, const MutableCubeView& edges,
                                         const BaselineOptions& options, TileOptions tiles, TiledRun* run) {
    check_baseline_options(options);
    const int W = src.width, H = src.height, B = src.bands;
    if (W < 1 || H < 1 || B < 1)
        throw InvalidInput("baseline_edges: the cube is empty (" + std::to_string(W) + "x" + std::to_string(H) + "x" + std::to_string(B) + ")");
    const std::int64_t pixels = std::int64_t(W) * H;
    if (pixels > INT_MAX)
        throw InvalidInput("baseline_edges: bands of " + std::to_string(pixels) + " pixels; at most 2^31 - 1 in groups");
    if (edges.on_device() || edges.width() != W || edges.height() != H || edges.bands() != B || edges.dtype() != DType::U8)
        throw InvalidInput("baseline_edges: the edges output is " + edges.describe() + "; expected host memory of " +
                           std::to_string(W) + "x" + std::to_string(H) + "x" + std::to_string(B) + " u8");
    std::vector<BaselineThreshold> thresholds(static_cast<std::size_t>(B));

    detail::TileSource source;
    source.width = int(pixels), source.height = B, source.bands = 1, source.dtype = src.dtype;
    source.read = [&](int, int first, int, int n, const MutableCubeView& dst) {
        src.read(first, n, MutableCubeView::host(dst.data(), W, H, n, src.dtype, dense_strides(W, H, n, Layout::BSQ)));
    };
    if (tiles.tile_width > 0 || tiles.tile_height > 0) tiles.tile_width = source.width;  // a forced size: its height bands
    detail::LocalTileKernel k;
    k.out_bands = 0;  // the bands go to the result directly
    k.device_work_bytes_per_pixel = kDeviceWorkBytes;
    k.host_work_bytes_per_pixel = kHostWorkBytes;
    const auto [tw, th] = detail::local_tile_size(ctx, source, k, tiles, "edges-baseline");
    if (tw < source.width)
        throw InvalidInput("edges-baseline: the budget holds " + std::to_string(std::int64_t(tw) * th) +
                           " pixels per group, less than one " + std::to_string(W) + "x" + std::to_string(H) + " band; raise it");
    tiles.tile_width = tw, tiles.tile_height = th;
    k.run_tile = [&](const Context& c, const Tile& t, const CubeView& in, const MutableCubeView&) {
        const Strides bsq = dense_strides(W, H, t.height, Layout::BSQ);
        const CubeView group = in.on_device() ? CubeView::device(in.data(), in.device(), W, H, t.height, in.dtype(), bsq)
                                              : CubeView::host(in.data(), W, H, t.height, in.dtype(), bsq);
        const MutableCubeView bands = edges.band_range(t.y0, t.height);
        std::vector<BaselineThreshold> cut;
        if (!c.is_cuda()) {
            cut = baseline_edges_into(c, group, bands, options);
        } else {
            DeviceCube on_device(c, {W, H, t.height, DType::U8, Layout::BSQ});
            cut = baseline_edges_into(c, group, on_device, options);
            copy_cube(c, on_device, bands);
            c.synchronize();
        }
        std::copy(cut.begin(), cut.end(), thresholds.begin() + t.y0);
    };
    const TiledRun done = detail::run_local_tiles(ctx, source, MutableCubeView{}, k, tiles, "edges-baseline");
    if (run) *run = done;
    return thresholds;
}

BandSource bands_of(const CubeView& cube) {
    if (cube.on_device()) throw InvalidInput("baseline_edges: the cube is on a device; the tiled call takes host memory");
    return {cube.width(), cube.height(), cube.bands(), cube.dtype(), [&cube](int first, int n, const MutableCubeView& dst) {
                detail::copy_cube_host(cube.band_range(first, n), dst);
            }};
}

BandSource bands_of(const CubeFile& file) {
    const CubeShape& s = file.shape();
    return {s.width, s.height, s.bands, s.dtype,
            [&file](int first, int n, const MutableCubeView& dst) { file.read_bands(first, n, dst); }};
}

template <class Input>
BaselineResult into_new_cube(const Context& ctx, const Input& in, const BaselineOptions& options, TileOptions tiles,
                             TiledRun* run) {
    const BandSource src = bands_of(in);
    check_baseline_options(options);
    BaselineResult r;
    if (src.width >= 1 && src.height >= 1 && src.bands >= 1)
        r.edges = Cube::uninitialized(src.width, src.height, src.bands, DType::U8, Layout::BSQ);
    r.thresholds = in_groups(ctx, src, r.edges.mutable_view(), options, tiles, run);
    return r;
}

}  // namespace

BaselineResult baseline_edges_tiled(const Context& ctx, const CubeView& cube, const BaselineOptions& options,
                                    TileOptions tiles, TiledRun* run) {
    return into_new_cube(ctx, cube, options, tiles, run);
}

BaselineResult baseline_edges_tiled(const Context& ctx, const CubeFile& file, const BaselineOptions& options,
                                    TileOptions tiles, TiledRun* run) {
    return into_new_cube(ctx, file, options, tiles, run);
}

std::vector<BaselineThreshold> baseline_edges_tiled_into(const Context& ctx, const CubeFile& file,
                                                         const MutableCubeView& edges, const BaselineOptions& options,
                                                         TileOptions tiles, TiledRun* run) {
    return in_groups(ctx, bands_of(file), edges, options, tiles, run);
}

}  // namespace cubekit
