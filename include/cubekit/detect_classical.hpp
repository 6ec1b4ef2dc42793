#pragma once
/// Classical target and anomaly detectors (issue 15 item 4; spec detect.md §A.7 "classical
/// detectors"), with Spectral Python's definitions (spectral/algorithms/detectors.py, 0.22.4) as
/// the defaults. x is a pixel's spectrum over the bands kept (see band screening), N the pixels used.
///
/// Statistics (f64; CPU: the exact integer sums of the PCA family; CUDA: two-pass f64 sums on the
/// tensor cores, the mean first, then the centred scatter matrix — see "Precision"):
///     μ = (1/N) Σ x,   Σ = (1/(N − ddof)) Σ (x − μ)(x − μ)ᵀ      (ddof = 0: divisor N, the default;
///                                                                  ddof = 1: SPy's np.cov)
///     R = (1/N) Σ x xᵀ = Σ·(N − ddof)/N + μ μᵀ                    (CEM's correlation matrix)
/// Inverse: the pseudo-inverse from the eigendecomposition A = V diag(λ) Vᵀ (LAPACK dsyevr):
/// eigenvalues λ_i ≤ rcond·λ_max are dropped (rcond 0 = auto = B·2⁻⁵²). Optional diagonal loading
/// A + loading·(tr A / B)·I before it (off by default). Whitening W = diag(λ_i^{-1/2}) V_iᵀ (r × B
/// over the r eigenvalues kept), so Σ⁺ = WᵀW and every quadratic form is a squared norm.
///
///     RX    y = (x − μ)ᵀ Σ⁺ (x − μ) = ‖z‖²,   z = W (x − μ)                           (SPy rx)
///     MF    y = (t − μ)ᵀ Σ⁺ (x − μ) / (t − μ)ᵀ Σ⁺ (t − μ)                             (SPy matched_filter)
///     ACE   y = clip₀¹( (sᵀz)² / (sᵀs · zᵀz) ),  s = W (t − μ); NaN → 0              (SPy ace, one target)
///     CEM   y = wᵀx,  w = R⁺t / (tᵀ R⁺ t)
///     SAM   y = cos∠(x, t) = tᵀx / (‖t‖ ‖x‖)   (higher = more target-like; 0 when ‖x‖ = 0)
///
/// Local RX (SPy's rx(X, window=(inner, outer))): for each pixel, μ and Σ from the pixels of the
/// outer window (outer×outer) that are not in the inner guard window (inner×inner). Near the
/// borders both windows are shifted (not clipped) to stay inside the image — what SPy 0.22.4's
/// code does (its docstring says the inner window is clipped; the code shifts it) — so every pixel
/// uses outer² − inner² samples. Σ (f64, two passes: the mean, then centred products, pixels in
/// row-major order) is inverted by Cholesky; a pixel whose window covariance is not positive
/// definite scores NaN and is counted (LocalRxReport). Needs outer² − inner² > B.
///
/// Band screening (default on): bands with a non-finite sample, all-zero bands and constant bands
/// are left out and reported; keep_all_bands keeps them (the pseudo-inverse then drops the null
/// directions of zero and constant bands; non-finite samples still leave their pixel out).
/// Pixels with a non-finite sample in a kept band are left out of the statistics and score NaN.
///
///     cubekit::ClassicalResult r = cubekit::detect_classical(ctx, cube, {.detector = Detector::Rx});
///     cubekit::BackgroundStats s = cubekit::fit_background(ctx, cube);          // reusable
///     cubekit::write_background_stats(s, "scene.stats.npz");
///     cubekit::Cube y = cubekit::apply_detector(ctx, other_tile, s, {.detector = Detector::Ace}, target);
///
/// Precision: statistics and scoring in f64 (default). Precision::F32 scores through f32
/// whitening (z = W(x − μ) with W, x − μ rounded to f32; ~1e-6 relative), never an f32 Σ⁻¹.
/// CUDA scores equal the CPU's within 1e-6 of the score scale (max |score|; the contract), not bit
/// for bit: the CUDA statistics are two-pass f64 sums, and z = W(x − μ) is accumulated by the f64
/// tensor cores in another order. The eigensolve (one host routine, LAPACK dsyevr) amplifies the
/// statistics' rounding by up to κ(Σ) in the small eigen-directions. A CPU emulation of the GPU's
/// sums on the ABU airport-2 and beach-3, San Diego and HYDICE cubes (κ 3e6 … 2.4e8): covariance
/// within 2e-14 of its largest entry, RX/MF/ACE/CEM scores within 4e-9 of the scale.
/// f32 whitening: the GPU rounds W and x − μ to f32 as the CPU does but accumulates in f64 (the CPU
/// in f32): within 1e-5 of the scale. Local RX keeps the CPU's arithmetic and order.
/// Throws InvalidInput naming the field or flag (detector, window, target, mask, stats ...).
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/gradient.hpp"  // Precision
#include "cubekit/io.hpp"
#include "cubekit/linalg.hpp"  // PcaPieceSums
#include "cubekit/options.hpp"
#include "cubekit/tiles.hpp"

namespace cubekit {

/// The classical detectors.
enum class Detector { Rx, Mf, Ace, Cem, Sam };
template <>
struct EnumNames<Detector> {
    static constexpr EnumName<Detector> names[] = {{Detector::Rx, "rx"},
                                                   {Detector::Mf, "mf"},
                                                   {Detector::Ace, "ace"},
                                                   {Detector::Cem, "cem"},
                                                   {Detector::Sam, "sam"}};
    static constexpr EnumName<Detector> aliases[] = {{Detector::Mf, "matched_filter"}};
};

/// Options of the classical detectors. Defaults: SPy's definitions, divisor N, pseudo-inverse.
struct ClassicalOptions {
    Detector detector = Detector::Rx;
    /// Local RX windows {inner, outer} (odd, inner < outer); {0, 0} = global statistics.
    std::array<double, 2> window = {0, 0};
    /// Covariance divisor N − ddof: 0 (N, the default) or 1 (SPy's np.cov).
    int ddof = 0;
    /// Pseudo-inverse cutoff relative to the largest eigenvalue; 0 = auto (B·2⁻⁵²).
    double rcond = 0;
    /// Diagonal loading, in units of tr(A)/B; 0 = none (the default: no regularisation).
    double loading = 0;
    /// Scoring precision: f64, or f32 through whitening.
    Precision precision = Precision::F64;
    /// Keep all-zero, constant and non-finite bands.
    bool keep_all_bands = false;
    /// Score element type: f64 or f32.
    DType out_type = DType::F64;
};

template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, ClassicalOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.detector, Field{.name = "detector", .doc = "rx, mf, ace, cem or sam", .flag = false});
    visit(o.window, Field{.name = "window", .doc = "local RX: INNER,OUTER odd window sizes (default: global RX)",
                          .min = 0});
    visit(o.ddof, Field{.name = "ddof", .doc = "covariance divisor N - ddof: 0 (N) or 1 (SPy's np.cov)", .one_of = {0, 1}});
    visit(o.rcond, Field{.name = "rcond", .doc = "pseudo-inverse cutoff relative to the largest eigenvalue (0 = B*eps)",
                         .min = 0, .max = 1});
    visit(o.loading, Field{.name = "loading", .doc = "diagonal loading in units of trace/B (0 = none)", .min = 0});
    visit(o.precision, Field{.name = "precision", .doc = "scoring precision: f64, or f32 through whitening"});
    visit(o.keep_all_bands, Field{.name = "keep_all_bands", .doc = "keep all-zero, constant and non-finite bands"});
    visit(o.out_type, Field{.name = "out_type", .doc = "score element type: f64 or f32",
                            .one_of = enum_values(DType::F32, DType::F64)});
}

/// A band left out by screening and why ("non-finite", "all-zero", "constant").
struct DroppedBand {
    int band = 0;
    std::string reason;
};

/// Background statistics, separate from the apply step (saveable; reusable on tiles and scenes).
struct BackgroundStats {
    int bands = 0;                   ///< bands of the cube they were fitted on
    std::vector<int> kept;           ///< bands used (ascending), K of them
    std::vector<DroppedBand> dropped;
    std::int64_t samples = 0;        ///< N, pixels used
    int ddof = 0;                    ///< divisor N − ddof
    std::vector<double> mean;        ///< K
    std::vector<double> covariance;  ///< K×K row-major, divisor N − ddof
    /// Derived and optional: the covariance's eigenvalues (descending) and unit eigenvectors (K×K,
    /// row i for eigenvalue i), filled by fit_background and kept in the files, so that applying
    /// saved statistics to many tiles solves no eigenproblem; recomputed when empty.
    std::vector<double> eigenvalues, eigenvectors;
};

/// Band screening of a cube: the bands kept and those dropped (keep_all: all kept, none dropped).
BackgroundStats screen_bands(const Context& ctx, const CubeView& cube, bool keep_all = false);

/// μ and Σ of the kept bands over the pixels whose kept bands are all finite (mask: a u8/any-int
/// W×H×1 view; when given, only pixels with mask ≠ 0 are used). Screening as options say.
BackgroundStats fit_background(const Context& ctx, const CubeView& cube, const ClassicalOptions& options = {},
                               const CubeView* mask = nullptr);

/// The same two from a cube file read a strip of rows at a time within `memory_limit` bytes (0: 256
/// MiB), for a scene larger than memory: the statistics equal the CPU reference's fit_background of
/// the whole cube bit for bit (exact integer sums) on any backend. Two passes over the file (three
/// with screening). mask: W×H×1 host view, or null.
///
///     const cubekit::BackgroundStats s = cubekit::fit_background(ctx, cubekit::CubeFile("flight.hdr"));
BackgroundStats screen_bands(const Context& ctx, const CubeFile& file, bool keep_all = false, std::size_t memory_limit = 0);
BackgroundStats fit_background(const Context& ctx, const CubeFile& file, const ClassicalOptions& options = {},
                               const CubeView* mask = nullptr, std::size_t memory_limit = 0);

/// The statistics of a scene a caller cuts into pieces (cubekit.dask.background_stats): `screened` the
/// screening of the whole scene (bands, kept, dropped), `sums` PCA's exact sums (linalg.hpp's piece
/// API) of the pieces' kept bands as f64, pixels outside a mask NaN, merged: the statistics equal
/// the CPU reference's fit_background bit for bit.
BackgroundStats background_from_piece_sums(BackgroundStats screened, const PcaPieceSums& sums, int ddof);

/// Scores of a detector under given statistics: W×H×1 host cube of options.out_type. `target`:
/// B spectrum values over all bands of the cube (empty for RX). Global statistics only.
Cube apply_detector(const Context& ctx, const CubeView& cube, const BackgroundStats& stats,
                    const ClassicalOptions& options, const std::vector<double>& target = {});
/// The same into a caller's W×H×1 view of options.out_type in the context's memory (device for
/// CUDA: the device-resident call). Queued on the context's stream.
void apply_detector_into(const Context& ctx, const CubeView& cube, const BackgroundStats& stats,
                         const ClassicalOptions& options, const std::vector<double>& target,
                         const MutableCubeView& out);

/// apply_detector_into in tiles (tiles.hpp) of a host cube or of a file read by windows, into a host
/// W×H×1 `out` of options.out_type: within the budgets of `tiles` and over its devices. A score
/// depends on its own pixel and the given statistics only, so the scores equal apply_detector's on
/// the same backend bit for bit.
///
///     const cubekit::BackgroundStats s = cubekit::read_background_stats("scene.stats.json");
///     cubekit::apply_detector_tiled(gpu, cubekit::CubeFile("flight.hdr"), s, {}, {}, out, {.devices = {0, 1}});
TiledRun apply_detector_tiled(const Context& ctx, const CubeView& cube, const BackgroundStats& stats, const ClassicalOptions& options,
                              const std::vector<double>& target, const MutableCubeView& out, const TileOptions& tiles = {});
TiledRun apply_detector_tiled(const Context& ctx, const CubeFile& file, const BackgroundStats& stats, const ClassicalOptions& options,
                              const std::vector<double>& target, const MutableCubeView& out, const TileOptions& tiles = {});

/// Pixels of local RX whose window covariance was not positive definite (scored NaN).
struct LocalRxReport {
    std::int64_t singular = 0;
};

/// Local (two-window) RX into a W×H×1 host cube (options.window set, f64 statistics).
Cube local_rx(const Context& ctx, const CubeView& cube, const ClassicalOptions& options,
              LocalRxReport* report = nullptr);
void local_rx_into(const Context& ctx, const CubeView& cube, const ClassicalOptions& options,
                   const MutableCubeView& out, LocalRxReport* report = nullptr);

/// Local RX of a host cube into a host W×H×1 `out` of options.out_type, in tiles (tiles.hpp) with a
/// halo of OUTER − 1 pixels, over the devices of `tiles`: the bands are screened once on the whole
/// cube, so the scores equal local_rx's on the same backend bit for bit. Local RX is compute-bound
/// (~10⁷ flops per pixel at 205 bands), so several GPUs divide its time.
TiledRun local_rx_tiled(const Context& ctx, const CubeView& cube, const ClassicalOptions& options, const MutableCubeView& out,
                        const TileOptions& tiles = {}, LocalRxReport* report = nullptr);
/// The same from a cube file read by windows (the screening a strip of rows at a time): a scene
/// larger than memory; the report reads again only the strips that hold a NaN score.
TiledRun local_rx_tiled(const Context& ctx, const CubeFile& file, const ClassicalOptions& options, const MutableCubeView& out,
                        const TileOptions& tiles = {}, LocalRxReport* report = nullptr);

/// Everything in one call: screening, statistics of the cube itself, scores.
struct ClassicalResult {
    Cube score;
    BackgroundStats stats;  ///< empty for local RX
    LocalRxReport local;
};
ClassicalResult detect_classical(const Context& ctx, const CubeView& cube, const ClassicalOptions& options = {},
                                 const std::vector<double>& target = {});

/// Mean spectrum (all B bands, f64) of the pixels with mask ≠ 0 whose bands are all finite.
std::vector<double> target_from_mask(const Context& ctx, const CubeView& cube, const CubeView& mask);
/// The same from a cube file, reading only the strips of rows (within memory_limit bytes; 0: 256 MiB)
/// that hold a target pixel: the same spectrum bit for bit (the sums run in raster order).
std::vector<double> target_from_mask(const Context& ctx, const CubeFile& file, const CubeView& mask,
                                     std::size_t memory_limit = 0);

/// A target spectrum file: CSV ("wavelength,value" rows, or one value per row) or JSON
/// ({"wavelengths": [...], "values": [...]}, {"<wavelength>": value, ...} or [v0, v1, ...]).
/// Pairs are resampled to `wavelengths` by linear interpolation (every cube wavelength must lie in
/// the file's range); a plain list must have exactly `bands` values (band-matched). Pairs given
/// for a cube without wavelengths are accepted only when their count equals `bands`.
std::vector<double> read_target_spectrum(const std::filesystem::path& path, const std::vector<double>& wavelengths,
                                         int bands);

/// Statistics files: .json (bands, kept_bands, dropped, samples, ddof, mean, covariance) or .npz
/// (the same arrays: mean, covariance, kept_bands, samples, bands, ddof); another extension is
/// InvalidInput. Reading checks shapes.
void write_background_stats(const BackgroundStats& stats, const std::filesystem::path& path);
BackgroundStats read_background_stats(const std::filesystem::path& path);

// ---- evaluation: ROC, AUC, per-blob detection --------------------------------------------------------

struct RocPoint {
    double threshold = 0;  ///< detected ⇔ score ≥ threshold
    double far = 0;        ///< background pixels detected / background pixels
    double pd = 0;         ///< target pixels detected / target pixels
};

/// One 8-connected target blob of the mask and whether it was found (a pixel scored > threshold).
struct BlobDetection {
    int label = 0;
    std::int64_t area = 0;
    int x0 = 0, y0 = 0, x1 = 0, y1 = 0;  ///< inclusive box
    double peak = 0;                     ///< highest score in the blob
    bool found = false;
};

struct DetectionScore {
    double auc = 0;                 ///< Mann–Whitney: P(target > background) + ½ P(tie)
    std::vector<RocPoint> roc;      ///< one point per distinct score, descending thresholds, from (0,0) to (1,1)
    double far_requested = 0;
    double threshold = 0;           ///< detected ⇔ score > threshold
    double far = 0;                 ///< achieved false-alarm rate (≤ far_requested)
    double pd = 0;                  ///< target pixels detected at that threshold
    std::int64_t targets = 0, background = 0, nan_scores = 0;
    std::vector<BlobDetection> blobs;
    int blobs_found = 0;
};

/// ROC, AUC and per-blob detection of a W×H×1 score map against a W×H×1 mask (nonzero = target).
/// NaN scores count as the lowest score. Throws InvalidInput naming "mask" on a size mismatch, or
/// when the mask has no target or no background pixel.
DetectionScore score_detection(const Context& ctx, const CubeView& scores, const CubeView& mask, double far = 0.01);

}  // namespace cubekit
