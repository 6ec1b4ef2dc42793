#pragma once
/// Robust Color Morphological Gradient (RCMG) of a cube (spec: gradient-watershed.md, Part A).
///
/// At each pixel p the window χ(p) holds the n vectors of p and its neighbours (4-connectivity:
/// the 5-pixel cross; 8-connectivity: the 3×3 square), out-of-image positions replicated from
/// the nearest pixel. D_ij = Σ_b (x_i,b − x_j,b)² for the pairs i < j in raster order of the
/// window. r times, the lexicographically first pair with the largest D is found and both of its
/// vectors leave the set; RCMG_r(p) = sqrt(max D over the pairs that remain). r = 0 gives the
/// colour morphological gradient (CMG).
///
///     one band, 8-connectivity, r = 1:          window values 0 0 0 0 9 0 0 0 0  → 0 (the outlier is rejected)
///                                               window values 0 0 0 5 5 5 9 9 9  → 9 (a step survives)
///
///     cubekit::Cube g = cubekit::rcmg(ctx, cube, {.connectivity = 8, .reject = 1});
///
/// Input: any element type, any layout (converted to BSQ once). Output: W×H×1, f32 (or f64 with
/// out_type = F64 and f64 accumulation), ≥ 0; NaN where the window contains NaN.
/// Throws InvalidInput naming the field: connectivity not 4/8, reject out of 0..⌊(n−2)/2⌋,
/// zero width, height or bands, out_type not f32/f64, out_type f64 with f32 accumulation.
#include <string_view>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/options.hpp"
#include "cubekit/io.hpp"
#include "cubekit/tiles.hpp"

namespace cubekit {

/// Floating-point precision of an accumulation.
enum class Precision { F32, F64 };
template <>
struct EnumNames<Precision> {
    static constexpr EnumName<Precision> names[] = {{Precision::F32, "f32"}, {Precision::F64, "f64"}};
    static constexpr EnumName<Precision> aliases[] = {{Precision::F32, "float32"}, {Precision::F32, "single"},
                                                      {Precision::F64, "float64"}, {Precision::F64, "double"}};
};
inline std::string_view precision_name(Precision p) { return enum_name(p); }  ///< "f32", "f64"

/// How the CUDA backend spreads the work (ignored by the CPU backend).
/// Spatial: the seed's mapping, threads along the bands of one pixel and a tree reduction per pair.
/// Spectral: the seed's mapping, one thread per pixel looping over bands, all pairs per thread.
/// Auto: the fastest on an H100, spectral with each distinct neighbour-pair distance computed
/// once per tile ("shared-pairs"); bit-identical to Spectral.
enum class RcmgPartition { Auto, Spatial, Spectral };
template <>
struct EnumNames<RcmgPartition> {
    static constexpr EnumName<RcmgPartition> names[] = {
        {RcmgPartition::Auto, "auto"}, {RcmgPartition::Spatial, "spatial"}, {RcmgPartition::Spectral, "spectral"}};
};
inline std::string_view partition_name(RcmgPartition p) { return enum_name(p); }  ///< "auto", "spatial", "spectral"

/// Options of rcmg(). Defaults are the spec's (Decisions, seed's r = 1).
struct RcmgOptions {
    /// 4 (cross of 5 pixels) or 8 (3×3 square).
    int connectivity = 8;
    /// Pairs rejected, r: 0 ≤ r ≤ 1 for 4-connectivity, ≤ 3 for 8-connectivity.
    int reject = 1;
    /// Precision of differences, squares and sums (bands added in order 0..B−1).
    Precision precision = Precision::F64;
    /// Output element type: F32 or F64 (F64 requires F64 precision).
    DType out_type = DType::F32;
    /// Return the squared distance (no square root).
    bool squared = false;
    /// CUDA work partitioning.
    RcmgPartition partition = RcmgPartition::Auto;
};

/// The declarations of RcmgOptions' fields (options.hpp).
template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, RcmgOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.connectivity, Field{.name = "connectivity", .doc = "window: 8 (3x3 square) or 4 (cross)", .one_of = {4, 8}});
    visit(o.reject, Field{.name = "reject",
                          .doc = "pairs rejected, r (0 = CMG; up to 1 for 4-, 3 for 8-connectivity)",
                          .min = 0});
    visit(o.precision, Field{.name = "precision", .doc = "accumulation precision: f64 or f32"});
    visit(o.out_type, Field{.name = "out_type",
                            .doc = "output element type: f32 or f64 (f64 needs precision f64)",
                            .one_of = enum_values(DType::F32, DType::F64)});
    visit(o.squared, Field{.name = "squared", .doc = "output squared distances (no square root)"});
    visit(o.partition, Field{.name = "partition", .doc = "CUDA work partitioning: auto, spatial or spectral"});
}

/// RCMG of any cube view on the context's backend: host or device memory, any element type, any
/// layout or window (a Cube or DeviceCube converts to its view). Returns a host W×H×1 cube of
/// options.out_type. The CPU reads the samples where they are (any strides, no copy); CUDA reads
/// a device BSQ cube or a window of one where it is, and otherwise uploads or reorders once.
Cube rcmg(const Context& ctx, const CubeView& cube, const RcmgOptions& options = {});

/// RCMG into a caller's W×H×1 output of options.out_type in the context's memory: device memory
/// for a CUDA context (the device-resident call: a CuPy array, a poisoned test buffer, a pipeline
/// stage), host memory for a CPU context. `cube` may be anywhere; nothing is allocated or copied
/// when it is already where and how the backend reads it (CUDA: a BSQ cube or window on the
/// context's device; CPU: any host view) and `out` has contiguous rows. Queued on the context's
/// stream; call ctx.synchronize() before reading `out` from the host.
///
///     cubekit::DeviceCube d_out(gpu, {W, H, 1, cubekit::DType::F32});
///     cubekit::rcmg_into(gpu, d_cube.view().window(0, 0, W, H), d_out);
void rcmg_into(const Context& ctx, const CubeView& cube, const MutableCubeView& out, const RcmgOptions& options = {});

/// RCMG of a host cube into a host output (W×H×1 of options.out_type, any strides) in tiles with a
/// 1-pixel halo (tiles.hpp): within `tiles`' memory budgets, streamed through pinned buffers and
/// several CUDA streams, over several devices when `tiles.devices` names them. The result is
/// bit-identical to rcmg() on the whole scene.
///
///     cubekit::Cube g(W, H, 1, cubekit::DType::F32);
///     auto run = cubekit::rcmg_tiled(gpu, scene, g.mutable_view(), {}, {.devices = {0, 1}});
TiledRun rcmg_tiled(const Context& ctx, const CubeView& cube, const MutableCubeView& out, const RcmgOptions& options = {},
                    const TileOptions& tiles = {});
/// The same from a file read by windows (io.hpp): the scene never has to fit in memory.
///
///     cubekit::CubeFile f("flight_line.hdr");
///     cubekit::Cube g(f.shape().width, f.shape().height, 1, cubekit::DType::F32);
///     cubekit::rcmg_tiled(gpu, f, g.mutable_view(), {}, {.memory_limit = 1ull << 30});
TiledRun rcmg_tiled(const Context& ctx, const CubeFile& file, const MutableCubeView& out, const RcmgOptions& options = {},
                    const TileOptions& tiles = {});
/// The implementation rcmg() runs with these options on this context: "cpu", "cuda-spatial",
/// "cuda-spectral" or "cuda-shared-pairs".
std::string_view rcmg_implementation(const Context& ctx, const RcmgOptions& options);

/// Throws InvalidInput when the options or the cube's shape are invalid (done by rcmg() itself).
void check_rcmg_arguments(const CubeShape& shape, const RcmgOptions& options);

}  // namespace cubekit
