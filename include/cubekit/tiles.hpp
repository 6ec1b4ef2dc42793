#pragma once
/// Tiles with halos: how a scene larger than a memory budget (or spread over several GPUs) is cut,
/// and the options every tiled call takes.
///
/// A family that is *local with a halo* (RCMG: 1 pixel; the pixel detectors: 0) computes each tile
/// from its core rectangle plus `halo` pixels around it (clipped to the scene), so that the tile's
/// core equals the whole-scene result exactly: the pixels the core needs are all in the read window,
/// and at the scene's border the window's border is the scene's.
///
///     auto tiles = cubekit::plan_tiles(1000, 700, 1000, 64, 1);   // row strips of 64 rows, 1-pixel halo
///     // tiles[1]: core rows 64..127, reads rows 63..128
///
///     cubekit::TileOptions t{.device_memory_limit = 256 << 20, .devices = {0, 1}};
///     cubekit::TiledRun run = cubekit::rcmg_tiled(ctx, scene, out, {}, t);   // gradient.hpp
///
/// The CUDA path streams: each device runs `lanes` workers, each with its own stream, pinned
/// staging buffers and device buffers, so one lane's upload or download overlaps another's kernel.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <string_view>

namespace cubekit {

/// One tile: the core rectangle it produces and the window (core + halo, clipped) it reads.
struct Tile {
    int x0 = 0, y0 = 0, width = 0, height = 0;
    int read_x0 = 0, read_y0 = 0, read_width = 0, read_height = 0;
};

/// Cuts a width × height scene into cores of at most tile_width × tile_height (row-major order of
/// the tiles), each read with `halo` pixels around it clipped to the scene. Throws InvalidInput for
/// sizes < 1 or a negative halo. A halo wider than a tile is allowed (the read window grows).
std::vector<Tile> plan_tiles(int width, int height, int tile_width, int tile_height, int halo);

/// Options of the tiled calls. All budgets count bytes; 0 = no limit of that kind.
struct TileOptions {
    /// Host working memory (staging and tile buffers, beyond the input and output the caller holds).
    std::size_t memory_limit = 0;
    /// Device memory per GPU; 0 = what the device reports free (a scene that does not fit is tiled).
    std::size_t device_memory_limit = 0;
    /// CUDA devices the tiles are dealt to; empty = the context's device only.
    std::vector<int> devices;
    /// Streams (workers) per device: 3 beat 2 by 8-14 % on the H100 machine (bench/results, 2026-11-26).
    int lanes = 3;
    /// Forces the tile size (tests, benchmarks); 0 = chosen from the budgets.
    int tile_width = 0, tile_height = 0;
};

/// What a tiled call did.
struct TiledRun {
    std::size_t tiles = 0;            ///< tiles computed
    int tile_width = 0, tile_height = 0;
    std::size_t peak_bytes = 0;       ///< host working memory held at once (staging and tile buffers)
    std::size_t device_peak_bytes = 0;  ///< device memory held at once, per device
    std::vector<int> devices;         ///< devices used (empty on the CPU backend)
    /// CUDA: the input / output was page-locked host memory (cudaMallocHost, cudaHostRegister, CuPy's
    /// or PyTorch's pinned buffers), moved by the copy engines in place with no staging copy.
    bool direct_input = false, direct_output = false;
};

/// Parses a byte count: digits with an optional K, M, G or T suffix (powers of 1024, case ignored),
/// e.g. "64M". Throws InvalidInput naming `what` and the text.
std::size_t parse_bytes(std::string_view text, std::string_view what);
/// Parses a device list "0,1" (or "all": every visible device). Throws InvalidInput naming `what`.
std::vector<int> parse_devices(std::string_view text, std::string_view what);

}  // namespace cubekit
