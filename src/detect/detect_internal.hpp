#pragma once
// Internals of the detection family shared by the front doors and the backends.
#include <cstdint>
#include <span>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/detect.hpp"
#include "cubekit/view.hpp"

namespace cubekit::detail {

// ---- A. RBF networks ----------------------------------------------------------------------------

/// Several RBF networks that share one input transform, in the f32 form every backend evaluates
/// (spec detect.md §A.3): neurons of all models back to back, model j owning neurons
/// [first[j], first[j+1]). y_j = (Σ_{i of j} w_i·expf(−d_i·γ_i)) + bias_j, the products added in
/// neuron order starting from 0, d_i = Σ_b (x'_b − u_ib)² in band order, x'_b = gain_b·(x_b − offset_b)
/// (only when `transform`), every operation rounded to f32 (no contraction). A neuron whose d_i is not
/// finite (a NaN or Inf band, or a distance beyond f32) contributes NaN, so the score is NaN.
struct RbfnGroup {
    int bands = 0;
    bool transform = false;
    std::vector<float> offset, gain;  ///< bands each (transform only)
    std::vector<float> centres;       ///< neurons × bands
    std::vector<float> gamma;         ///< float(1 / (2σ²)) with the division in f64
    std::vector<float> weight;
    std::vector<int> first;           ///< models + 1 entries
    std::vector<float> bias;          ///< per model
    std::vector<int> model_index;     ///< which of the caller's models each group model is
    int neurons() const { return int(gamma.size()); }
    int models() const { return int(bias.size()); }
};

/// The caller's models split into groups of identical input transforms (most often one group).
std::vector<RbfnGroup> rbfn_groups(std::span<const RbfnModel> models);

/// CPU reference: scores[j] (W×H×1 f32 host views) of the group's models; NaN where a band is not
/// finite. Any host view of any element type, read where it is.
void rbfn_scores_cpu(const Context& ctx, const CubeView& cube, const RbfnGroup& group,
                     std::span<const MutableCubeView> scores);

/// True when the CUDA kernels read this device view where it is (x or band stride 1 with pitched
/// rows: BSQ-like or BIP-like).
bool rbfn_cuda_accepts(const CubeView& cube);
/// CUDA: scores of a device view `rbfn_cuda_accepts` took, into dense W×H f32 device outputs.
void rbfn_scores_cuda(const Context& ctx, const CubeView& cube, const RbfnGroup& group,
                      std::span<float* const> scores, const PixelOptions& options);

// ---- B. multi-resolution pyramid ---------------------------------------------------------------

/// One level of the block-sum pyramid: a gx × gy grid of nodes, per node and band the finite
/// sample count n and the f64 sums S1 = Σx, S2 = Σx² (node-major: [node][band]).
struct PyramidLevel {
    int gx = 0, gy = 0;
    std::vector<std::int32_t> n;
    std::vector<double> s1, s2;
};

/// Geometry of the quad-tree (spec §B.3 step 2).
struct TreeGeometry {
    int width = 0, height = 0, bands = 0, block = 8;
    int top = 0;  ///< L
    int grid_x(int level) const { return int((std::int64_t(width) + (std::int64_t(block) << level) - 1) / (std::int64_t(block) << level)); }
    int grid_y(int level) const { return int((std::int64_t(height) + (std::int64_t(block) << level) - 1) / (std::int64_t(block) << level)); }
    /// The node's pixel box, clipped to the image.
    void box(int level, int i, int j, int& x0, int& y0, int& w, int& h) const {
        const std::int64_t s = std::int64_t(block) << level;
        x0 = int(i * s);
        y0 = int(j * s);
        w = int(std::min<std::int64_t>(s, width - x0));
        h = int(std::min<std::int64_t>(s, height - y0));
    }
};

TreeGeometry tree_geometry(const CubeView& cube, int block);
TreeGeometry tree_geometry(int width, int height, int bands, int block);

/// CPU reference of the level-0 block sums (row-major pixel order inside a block, f64) and of
/// the levels above (children TL, TR, BL, BR). Returns levels 0..top; counts skipped samples.
std::vector<PyramidLevel> build_pyramid_cpu(const Context& ctx, const CubeView& cube, const TreeGeometry& g,
                                            std::int64_t& skipped);

/// The level-0 block sums alone (CPU), and the levels 1..g.top above a level 0 (however it was
/// computed: whole, or assembled from tiles whose edges fall on block edges).
PyramidLevel block_sums_cpu(const Context& ctx, const CubeView& cube, const TreeGeometry& g, std::int64_t& skipped);
std::vector<PyramidLevel> pyramid_from_level0(PyramidLevel level0, const TreeGeometry& g);

/// detect_multires' checks: the options and model, then the model against a cube of `bands` bands.
void check_multires(const MultiresModel& model, const MultiresOptions& options);
void check_multires_bands(const MultiresModel& model, int bands);
/// The levels above a level 0 and the descent, on the context's backend (CUDA: uploaded once); the
/// result of detect_multires on a scene with this level 0.
MultiresResult detect_from_level0(const Context& ctx, PyramidLevel level0, std::int64_t skipped, const TreeGeometry& g,
                                  const MultiresModel& model, const MultiresOptions& options);

/// σ_c = sqrt(max(0, (S2 − S1·S1/n)/n)) of one node (false when some band has n = 0).
bool node_feature(const PyramidLevel& level, std::int64_t node, int bands, double* sigma);

/// The quad-tree descent on a pyramid (CPU reference of spec §B.3 step 7).
MultiresResult descend_cpu(const std::vector<PyramidLevel>& pyramid, const TreeGeometry& g, const MultiresModel& model,
                           const MultiresOptions& options);

/// CUDA: the whole search (block sums, pyramid, descent) on a device view `multires_cuda_accepts` took.
bool multires_cuda_accepts(const CubeView& cube);
MultiresResult detect_multires_cuda(const Context& ctx, const CubeView& cube, const TreeGeometry& g,
                                    const MultiresModel& model, const MultiresOptions& options);
/// CUDA: the level-0 block sums of a device view, downloaded; and the levels above and the descent
/// from a host level 0 (uploaded once). `skipped`: the non-finite samples left out of level 0.
PyramidLevel block_sums_cuda(const Context& ctx, const CubeView& cube, const TreeGeometry& g, std::int64_t& skipped);
MultiresResult detect_multires_cuda(const Context& ctx, const PyramidLevel& level0, std::int64_t skipped, const TreeGeometry& g,
                                    const MultiresModel& model, const MultiresOptions& options);
/// CUDA: the σ of every node at `level` (nodes × bands) and their counts.
std::vector<double> window_features_cuda(const Context& ctx, const CubeView& cube, const TreeGeometry& g, int level,
                                         std::vector<std::int64_t>* counts);

/// Sorts detections by (y0, x0) and the trace by (level desc, y0, x0).
void sort_windows(MultiresResult& result);

}  // namespace cubekit::detail
