#pragma once
// Pieces the PCA backends share (spec edges.md §3.9): the exact sums both backends produce, the
// one host routine that turns them into a model, the fixed-point exponent, argument checks, and
// the device-resident entry points (cuda.cu; stubs in CPU-only builds).
#include <cstdint>
#include <optional>
#include <vector>

#include "cubekit/linalg.hpp"
#include "kmeans/kmeans_math.hpp"

namespace cubekit::detail {

using i128 = km::i128;

/// The exact sums of a fit. Bounds (P ≤ 2^31 − 1, checked by check_pca_cube):
/// - integer input, q = x: |q| < 2^32, so |Σq_b| < 2^63 and |Σq_i q_j| < 2^95;
/// - float input, q = llrint(x·2^e) with e from pca_fixed_point_exponent: |q| ≤ 2^(62−⌈log2 P⌉),
///   so |Σq_b| ≤ 2^62 and |Σq_i q_j| ≤ 2^(124−⌈log2 P⌉) ≤ 2^124.
struct PcaSums {
    int bands = 0;
    std::int64_t count = 0;           ///< P, the pixels used
    int exponent = 0;                 ///< e of the fixed point (0 for integer input)
    std::vector<std::int64_t> first;  ///< Σ q_b, B entries
    std::vector<i128> second;         ///< Σ q_i q_j, B×B row-major; only i ≤ j is read
};

/// Adds a part's sums (the same bands and exponent) into `into`: exact.
void add_pca_sums(PcaSums& into, const PcaSums& part);

/// What fixes the fixed point of float input: the pixels used and the largest |x| among them.
struct PcaScan {
    std::int64_t count = 0;
    double max_abs = 0;
};

/// The fixed-point exponent of kmeans.md §3.5: e = 62 − ⌈log2 max|x|⌉ − ⌈log2 P⌉ over the pixels
/// used (0 when max|x| = 0), clamped to [−1000, 1000] so that 2^e stays a normal double.
int pca_fixed_point_exponent(double max_abs, std::int64_t count);

/// The shared host routine: mean, covariance, one LAPACK eigensolve (dsyevr), descending order,
/// sign rule, explained variance, the first `components` eigenvectors. Throws InvalidInput when
/// count = 0 or the covariance overflows f64.
PcaModel pca_model_from_sums(const PcaSums& sums, int components);

/// Argument checks shared by the front door and the device entry points ("pca_fit", ...).
void check_pca_cube(const CubeShape& shape, const char* fn);
void check_pca_components(int components, int bands, const char* fn);
void check_pca_model(const PcaModel& model, int cube_bands, const char* fn);

/// CPU backend (cpu.cpp). `cube`: a host view, any element type, any strides; `out`: a host
/// W×H×k f64 view, any strides.
/// `exponent`: the scene's fixed point (a tile of a scene, pca_tiled); unset: the cube's own.
PcaSums pca_sums_cpu(const Context& ctx, const CubeView& cube, std::optional<int> exponent = {});
PcaScan pca_scan_cpu(const Context& ctx, const CubeView& cube);
void pca_transform_cpu(const Context& ctx, const CubeView& cube, const PcaModel& model, const MutableCubeView& out);

/// Device-resident entry points (cuda.cu), stream-ordered on ctx's stream. `cube`: any element
/// type, a dense BSQ view on ctx's device (anything else: InvalidInput). pca_fit_device waits for
/// the sums (the eigensolve is on the host).
PcaModel pca_fit_device(const Context& ctx, const CubeView& cube, int components);
/// The sums and the scan alone (pca_tiled), as the CPU's.
PcaSums pca_sums_device(const Context& ctx, const CubeView& cube, std::optional<int> exponent);
PcaScan pca_scan_device(const Context& ctx, const CubeView& cube);
/// `out`: device memory for k planes of H×W f64 (plane j = scores of component j).
void pca_transform_device(const Context& ctx, const CubeView& cube, const PcaModel& model, double* out);

}  // namespace cubekit::detail
