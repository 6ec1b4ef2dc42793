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
/// Throws InvalidInput naming the parameter: connectivity not 4/8, reject out of 0..⌊(n−2)/2⌋,
/// zero width, height or bands, out_type not f32/f64, out_type f64 with f32 accumulation.
#include <string_view>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"

namespace cubekit {

/// Floating-point precision of an accumulation.
enum class Precision { F32, F64 };
std::string_view precision_name(Precision p);                                  ///< "f32", "f64"
Precision parse_precision(std::string_view name, std::string_view what = "--precision");

/// How the CUDA backend spreads the work (ignored by the CPU backend).
/// Spatial: the seed's mapping, threads along the bands of one pixel and a tree reduction per pair.
/// Spectral: the seed's mapping, one thread per pixel looping over bands, all pairs per thread.
/// Auto: the fastest on an H100, spectral with each distinct neighbour-pair distance computed
/// once per tile ("shared-pairs"); bit-identical to Spectral.
enum class RcmgPartition { Auto, Spatial, Spectral };
std::string_view partition_name(RcmgPartition p);                              ///< "auto", "spatial", "spectral"
RcmgPartition parse_partition(std::string_view name, std::string_view what = "--partition");

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

/// RCMG of a host cube on the context's backend; returns a W×H×1 cube of options.out_type.
Cube rcmg(const Context& ctx, const Cube& cube, const RcmgOptions& options = {});

/// RCMG of a device-resident cube (stored type, BSQ) into a device-resident W×H×1 output of
/// options.out_type (allocated by the caller, e.g. poisoned by tests). ctx must be a CUDA context.
void rcmg_into(const Context& ctx, const DeviceCube& cube, DeviceCube& out, const RcmgOptions& options = {});

/// The implementation rcmg() runs with these options on this context: "cpu", "cuda-spatial",
/// "cuda-spectral" or "cuda-shared-pairs".
std::string_view rcmg_implementation(const Context& ctx, const RcmgOptions& options);

/// Throws InvalidInput when the options or the cube's shape are invalid (done by rcmg() itself).
void check_rcmg_arguments(const CubeShape& shape, const RcmgOptions& options);

}  // namespace cubekit
