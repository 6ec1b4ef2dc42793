#pragma once
/// Classical edge detectors the entropy detector is compared against (spec edges.md §3.10, E6), and
/// the comparison metrics of §6 (Pratt's figure of merit; precision, recall and F with a tolerance).
///
/// Each band is quantised to 8 bits by E1 (quantize_to_u8, per band) and scaled to [0, 1] as
/// MATLAB's im2single does (v / 255 in f32); then every band is processed on its own with MATLAB
/// R2016 `edge()` defaults:
///   sobel, prewitt  masks /8 and /6, replicated borders; cutoff on the squared magnitude
///                   4·mean(gx² + gy²); MATLAB's directional thinning (a pixel is kept when it is a
///                   maximum of the squared magnitude across the dominant gradient axis).
///   roberts         2×2 diagonal masks /2, cutoff 6·mean, the same thinning along the diagonals.
///   log             σ = 2, a (2·⌈3σ⌉+1)² Laplacian-of-Gaussian kernel shifted to zero mean, replicated
///                   borders; zero crossings whose jump exceeds 0.75·mean|response|.
///   canny           σ = √2, derivative-of-Gaussian gradient (replicated borders), magnitude
///                   normalised by its maximum; high threshold = the first of 64 histogram bins at
///                   which more than 70 % of the pixels lie, /64; low = 0.4·high; non-maximum
///                   suppression and 8-connected hysteresis.
///
///     cubekit::Cube e = cubekit::baseline_edges(ctx, cube, {.method = cubekit::BaselineMethod::Canny});
///     cubekit::EdgeScore s = cubekit::score_edges(e_band, reference, 1.0);   // s.fom, s.f, ...
///
/// Output: W×H×B u8 {0,1}, BSQ. The CPU and CUDA backends run the same operations in the same order
/// and reduce in the same fixed order, so they are meant to agree exactly (the spec allows them to
/// differ only at pixels whose value lies within 1e-5 relative of a threshold).
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/options.hpp"
#include "cubekit/tiles.hpp"

namespace cubekit {

class CubeFile;

enum class BaselineMethod { Sobel, Prewitt, Roberts, LoG, Canny };
template <>
struct EnumNames<BaselineMethod> {
    static constexpr EnumName<BaselineMethod> names[] = {{BaselineMethod::Canny, "canny"},
                                                         {BaselineMethod::Sobel, "sobel"},
                                                         {BaselineMethod::Prewitt, "prewitt"},
                                                         {BaselineMethod::Roberts, "roberts"},
                                                         {BaselineMethod::LoG, "log"}};
};
inline std::string_view baseline_name(BaselineMethod m) { return enum_name(m); }  ///< "sobel", "log", ...
inline BaselineMethod parse_baseline(std::string_view name, std::string_view what = "method") {
    return parse_enum<BaselineMethod>(name, what);
}

/// Options of baseline_edges(); defaults are MATLAB R2016 edge()'s.
struct BaselineOptions {
    /// The detector.
    BaselineMethod method = BaselineMethod::Canny;
    /// Gaussian σ of log and canny; 0 = MATLAB's default (log 2, canny √2). Must be 0 for the mask
    /// methods. At most kMaxBaselineSigma.
    double sigma = 0;
    /// −1: MATLAB's automatic rule. Otherwise (≥ 0) MATLAB's `thresh` argument: sobel/prewitt/roberts a
    /// cutoff on the gradient magnitude of the [0,1] image (masks scaled by 1/8, 1/6, 1/2); log the
    /// minimum jump of a zero crossing; canny the high threshold on the normalised magnitude (< 1).
    double threshold = -1;
    /// Canny: low threshold = low_ratio · high, 0 ≤ low_ratio ≤ 1 (MATLAB: 0.4).
    double low_ratio = 0.4;
    /// Sobel/Prewitt/Roberts: MATLAB's thinning (false = 'nothinning': every pixel above the cutoff).
    /// Ignored by log and canny.
    bool thinning = true;
};

/// Largest σ accepted (the LoG kernel is (6σ+1)² taps).
inline constexpr double kMaxBaselineSigma = 64.0;

/// The declarations of BaselineOptions' fields (options.hpp).
template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, BaselineOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.method, Field{.name = "method", .doc = "canny, sobel, prewitt, roberts or log"});
    visit(o.sigma, Field{.name = "sigma", .doc = "Gaussian sigma of log and canny (default: log 2, canny sqrt(2))",
                         .min = 0, .max = kMaxBaselineSigma, .automatic = 0});
    visit(o.threshold, Field{.name = "threshold", .doc = "MATLAB's thresh, >= 0 (default: MATLAB's automatic rule)",
                             .min = 0, .automatic = -1});
    visit(o.low_ratio, Field{.name = "low_ratio", .doc = "canny: low threshold = ratio * high, 0..1", .min = 0,
                             .max = 1});
    visit(o.thinning, Field{.name = "thinning", .doc = "sobel/prewitt/roberts: MATLAB's thinning of the edges",
                            .negation = "sobel/prewitt/roberts: every pixel above the cutoff (MATLAB 'nothinning')"});
}

/// The σ `options.method` runs with: options.sigma, or MATLAB's default when it is 0 (log 2,
/// canny √2); nullopt for the mask methods, which have none.
std::optional<double> baseline_sigma(const BaselineOptions& options);

/// The thresholds a band was cut at, on MATLAB's scale (what `[~, thresh] = edge(...)` returns).
struct BaselineThreshold {
    /// sobel/prewitt/roberts: sqrt(cutoff) on the magnitude; log: the zero-crossing jump; canny: high.
    double high = 0;
    /// canny: the low threshold; 0 for the other methods.
    double low = 0;
};

struct BaselineResult {
    Cube edges;                                ///< W×H×B u8 {0,1}, BSQ
    std::vector<BaselineThreshold> thresholds; ///< one per band
};

/// Throws InvalidInput naming the field when the options are invalid (done by the detector itself).
void check_baseline_options(const BaselineOptions& options);

/// The detector on the context's backend, for any cube view: host or device memory, any element
/// type, layout, window or strides (a Cube or DeviceCube converts to its view). The CPU reads host
/// samples where they are (one band at a time); CUDA reads samples on the context's device where
/// they are and uploads host samples once. Returns the edges on the host (W×H×B u8 BSQ) and the
/// thresholds. Throws InvalidInput for an empty cube, a σ or threshold out of range (NaN, σ < 0,
/// σ > kMaxBaselineSigma, σ ≠ 0 for a mask method, canny threshold ≥ 1), low_ratio outside
/// [0, 1], or a band of more than 2^40 pixels.
///
///     BaselineResult r = cubekit::baseline_edges_with_thresholds(ctx, cube.view().band_range(40, 1));
BaselineResult baseline_edges_with_thresholds(const Context& ctx, const CubeView& cube, const BaselineOptions& options = {});
/// The same, edges only.
Cube baseline_edges(const Context& ctx, const CubeView& cube, const BaselineOptions& options = {});

/// The detector into a caller's W×H×B u8 {0,1} output in the context's memory: device memory for a
/// CUDA context (the device-resident call), host memory for a CPU context; any strides (a dense
/// BSQ output is written in place, any other through a staging band). Returns the thresholds of
/// every band (the only data that crosses to the host on the CUDA path); `edges` is complete on
/// return. `cube` is read as by baseline_edges_with_thresholds. Throws InvalidInput as it, and
/// naming `edges` when its shape, type or memory does not fit.
///
///     cubekit::DeviceCube d_edges(gpu, {W, H, B, cubekit::DType::U8, cubekit::Layout::BSQ});
///     std::vector<BaselineThreshold> t = cubekit::baseline_edges_into(gpu, d_cube, d_edges, {.method = BaselineMethod::Sobel});
std::vector<BaselineThreshold> baseline_edges_into(const Context& ctx, const CubeView& cube, const MutableCubeView& edges,
                                                   const BaselineOptions& options = {});

/// baseline_edges_with_thresholds in groups of whole bands (tiles.hpp, issue 17): a host cube too large for
/// the budgets of `tiles` (or dealt to several GPUs) runs a group of bands at a time; every band is
/// processed on its own, so the edges and thresholds are the whole call's, bit for bit on the same
/// backend. A forced tile size `1xN` (tile_height) means N bands a group. `run` (optional) receives
/// what the grouping did (its `tiles` = groups). Throws as baseline_edges, and InvalidInput when a
/// budget cannot hold one band.
///
///     BaselineResult r = cubekit::baseline_edges_tiled(gpu, cube, {.method = BaselineMethod::Canny},
///                                                      {.device_memory_limit = 1 << 30, .devices = {0, 1}});
BaselineResult baseline_edges_tiled(const Context& ctx, const CubeView& cube, const BaselineOptions& options = {},
                                    TileOptions tiles = {}, TiledRun* run = nullptr);
/// The same from a file read a group of bands at a time (CubeFile::read_bands), so the cube never has
/// to fit in memory; only the edges (one byte per sample) are held whole.
BaselineResult baseline_edges_tiled(const Context& ctx, const CubeFile& file, const BaselineOptions& options = {},
                                    TileOptions tiles = {}, TiledRun* run = nullptr);
/// The same into a caller's host output (W×H×B u8 {0,1}, any strides), group by group: with a
/// CubeFileWriter's view the edges go to a file as they are made and are never held whole. Returns
/// the thresholds of every band; InvalidInput naming `edges` when its shape, type or memory does not fit.
///
///     cubekit::CubeFile f("flight.hdr");
///     cubekit::CubeFileWriter out("canny.npy", {f.shape().width, f.shape().height, f.shape().bands, cubekit::DType::U8});
///     auto t = cubekit::baseline_edges_tiled_into(gpu, f, out.view(), {}, {.memory_limit = 1ull << 30});
///     out.commit();
std::vector<BaselineThreshold> baseline_edges_tiled_into(const Context& ctx, const CubeFile& file,
                                                         const MutableCubeView& edges, const BaselineOptions& options = {},
                                                         TileOptions tiles = {}, TiledRun* run = nullptr);

/// Comparison of a predicted edge map with a reference map (spec §6). d(p) is the exact Euclidean
/// distance from p to the nearest edge pixel of the other map.
///   fom       = (1 / max(N_ref, N_pred)) · Σ_{p predicted} 1 / (1 + d(p)²/9)   (Pratt, α = 1/9)
///   precision = #{p predicted : d(p) ≤ tolerance} / N_pred
///   recall    = #{p reference : d(p) ≤ tolerance} / N_ref
///   f         = 2·P·R / (P + R), 0 when P + R = 0
/// Empty maps: both empty → every score 1 (perfect agreement); only one empty → every score 0.
struct EdgeScore {
    double fom = 0, precision = 0, recall = 0, f = 0;
    std::int64_t predicted = 0, reference = 0;  ///< N_pred, N_ref
};

/// Both maps one band in host memory (any element type, layout or strides; nonzero and not NaN =
/// edge) of the same W×H, else InvalidInput naming both shapes; tolerance finite and ≥ 0 (pixels),
/// else InvalidInput.
///
///     EdgeScore s = cubekit::score_edges(edges.view().band_range(3, 1), reference, 1.0);
EdgeScore score_edges(const CubeView& predicted, const CubeView& reference, double tolerance = 1.0);

}  // namespace cubekit
