#pragma once
/// Principal component analysis of a cube: pixels are samples, bands are variables
/// (spec edges.md §3.9 "E5", §4.3, §5.2–5.3).
///
///     cubekit::PcaResult r = cubekit::pca(ctx, cube, {.components = 3});
///     // r.model.eigenvalues (all B, descending), r.model.components (3×B, row j = v_j),
///     // r.model.explained_variance_ratio, r.scores (W×H×3 f64, BSQ, NaN where a band is not finite)
///
/// Exact recipe, so that the CPU and CUDA backends give bit-identical models and scores:
/// - pixels with a non-finite band are left out (P = the pixels used);
/// - first-order sums Σq_b in int64 and second-order sums Σq_i·q_j in signed 128-bit integers, with
///   q = the value for integer input and q = llrint(x·2^e) for float input (the global fixed point
///   of kmeans.md §3.5); integer sums do not depend on the order of the additions;
/// - one host routine turns the exact sums into the mean and C = (1/(P−1)) Xc^T Xc and solves the
///   B×B eigenproblem with one LAPACK call; eigenvalues descending; sign rule: v_j is flipped when
///   Σ_b v_j[b] < 0, and when |Σ_b v_j[b]| ≤ 1e-12·||v_j||_1 its largest-magnitude entry (the first
///   on ties) is made positive;
/// - scores Y_j(p) = Σ_b (x_b(p) − mean_b)·v_j[b] in f64, bands in order 0..B−1, each term a
///   separate subtraction, multiplication and addition (no contraction).
///
/// Throws InvalidInput naming the parameter: components outside 1..B, an empty cube, more than
/// 2^31 − 1 pixels, no pixel with all bands finite, a model whose band count differs from the cube's.
#include <cstdint>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/io.hpp"
#include "cubekit/options.hpp"
#include "cubekit/tiles.hpp"

namespace cubekit {

/// Options of pca() and pca_fit().
struct PcaOptions {
    /// Components kept (rows of PcaModel::components, bands of the scores): 1..B. Callers clamp.
    int components = 3;
};

/// The declarations of PcaOptions' fields (options.hpp).
template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, PcaOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.components, Field{.name = "components", .doc = "components K, 1..bands", .min = 1, .short_flag = "-k"});
}

struct PcaModel {
    int bands = 0;
    /// Pixels used: those whose bands are all finite.
    std::int64_t samples = 0;
    /// Per-band mean (B).
    std::vector<double> mean;
    /// B×B row-major, (1/(P−1)) Xc^T Xc (all zeros when P = 1).
    std::vector<double> covariance;
    /// All B eigenvalues of the covariance, descending.
    std::vector<double> eigenvalues;
    /// k×B row-major; row j is the unit eigenvector v_j with the sign rule above.
    std::vector<double> components;
    /// k entries: eigenvalue / sum of all eigenvalues (0 when that sum is 0).
    std::vector<double> explained_variance_ratio;

    int num_components() const { return bands > 0 ? int(components.size() / std::size_t(bands)) : 0; }
};

/// Fits the model on the context's backend. cube: any element type; host or device memory (device
/// memory needs a CUDA context), any layout, a window or any strides (a Cube or DeviceCube converts
/// to its view). The CPU reads a
/// host view where it is; CUDA reads a dense BSQ cube on the context's device where it is (no
/// host copy: the device-resident fit) and otherwise uploads or reorders it once. Only the exact
/// sums ((B+1)² 128-bit words) come back to the host, for the shared eigensolve.
///
///     cubekit::PcaModel m = cubekit::pca_fit(gpu, d_cube, {.components = 3});   // d_cube: a DeviceCube
PcaModel pca_fit(const Context& ctx, const CubeView& cube, const PcaOptions& options = {});

/// Scores of `cube` under `model`: W×H×k, DType::F64, BSQ, band j = Y_j (bands named PC1..PCk);
/// NaN where the pixel has a non-finite band. The cube must have model.bands bands. Returns a
/// host cube (a thin wrapper over pca_transform_into).
Cube pca_transform(const Context& ctx, const CubeView& cube, const PcaModel& model);

/// The scores into a caller's W×H×k f64 view in the context's memory (device memory for a CUDA
/// context, host memory for a CPU one; any strides): the device-resident transform. The cube is
/// read as by pca_fit. Queued on the context's stream (ctx.synchronize() before reading `scores`
/// from the host).
///
///     cubekit::DeviceCube d_scores(gpu, {W, H, m.num_components(), cubekit::DType::F64});
///     cubekit::pca_transform_into(gpu, d_cube, m, d_scores);
void pca_transform_into(const Context& ctx, const CubeView& cube, const PcaModel& model, const MutableCubeView& scores);

struct PcaResult {
    PcaModel model;
    Cube scores;
};

/// pca_fit followed by pca_transform of the same cube (the cube uploaded or reordered at most once).
PcaResult pca(const Context& ctx, const CubeView& cube, const PcaOptions& options = {});

/// pca_fit followed by pca_transform_into (the cube uploaded or reordered at most once); returns
/// the model. `scores`: W×H×options.components f64 in the context's memory.
PcaModel pca_into(const Context& ctx, const CubeView& cube, const MutableCubeView& scores, const PcaOptions& options = {});

/// Pieces of a scene, for a caller who cuts it (cubekit.dask.pca does): (1) float input: each piece's
/// pca_piece_scan, merged (counts summed, the largest max_abs), and the scene's fixed point from
/// pca_scene_exponent (integer input: 0); (2) each piece's exact sums with that exponent, merged with
/// pca_add_sums in any order; (3) pca_model_from_piece_sums; (4) pca_transform_into on every piece.
/// The model and the scores equal pca_into's bit for bit.
struct PcaPieceScan {
    std::int64_t count = 0;  ///< pixels whose bands are all finite
    double max_abs = 0;      ///< the largest |x| among them
};
struct PcaPieceSums {
    int bands = 0;
    std::int64_t count = 0;            ///< pixels used
    int exponent = 0;                  ///< the fixed point the sums were made with
    std::vector<std::int64_t> first;   ///< Σ q_b, B entries
    /// Σ q_i q_j, B×B row-major (i ≤ j read), each a signed 128-bit integer as two 64-bit words, low then high.
    std::vector<std::uint64_t> second;
};
PcaPieceScan pca_piece_scan(const Context& ctx, const CubeView& piece);
/// The fixed point of float input from the merged scan. Throws InvalidInput when no pixel is usable.
int pca_scene_exponent(const PcaPieceScan& scene);
PcaPieceSums pca_piece_sums(const Context& ctx, const CubeView& piece, int exponent);
/// Adds `part` into `into` (the same bands and exponent; InvalidInput otherwise); exact.
void pca_add_sums(PcaPieceSums& into, const PcaPieceSums& part);
PcaModel pca_model_from_piece_sums(const PcaPieceSums& sums, int components);

/// What pca_tiled returns.
struct PcaTiled {
    PcaModel model;
    /// The scores pass (no halo); peak_bytes and device_peak_bytes cover the statistics passes too.
    TiledRun run;
    int passes = 0;  ///< reads of the input: 2 for integer types (sums, scores), 3 for float (a scan first)
};

/// PCA in tiles (tiles.hpp), for a scene larger than a memory budget or spread over several GPUs: the
/// fit's exact sums are gathered over the scene's tiles and merged (float input: a first pass finds the
/// pixels used and the largest |x|, which fix the scene's fixed point), one eigensolve, then the scores
/// in tiles. Integer sums do not depend on how the pixels are split: the model and `scores` equal
/// pca_into's bit for bit. scores: host memory, W×H×options.components f64, any strides.
///
///     cubekit::Cube pcs(W, H, 3, cubekit::DType::F64);
///     auto t = cubekit::pca_tiled(gpu, cubekit::CubeFile("flight.hdr"), pcs.mutable_view(), {.components = 3},
///                                 {.devices = {0, 1}});   // t.model.explained_variance_ratio
PcaTiled pca_tiled(const Context& ctx, const CubeView& cube, const MutableCubeView& scores, const PcaOptions& options = {},
                   const TileOptions& tiles = {});
PcaTiled pca_tiled(const Context& ctx, const CubeFile& file, const MutableCubeView& scores, const PcaOptions& options = {},
                   const TileOptions& tiles = {});

}  // namespace cubekit
