#pragma once
// Pieces the classical detectors' backends share (detect_classical.hpp): band screening sums, the
// prepared f64 BSQ cube of the kept bands, the scoring plan, SPy's window geometry, and the
// backend entry points (classical_cpu.cpp; classical_cuda.cu, stubs in CPU-only builds).
#include <cstdint>
#include <vector>

#include "cubekit/detect_classical.hpp"

#if defined(__CUDACC__)
#define CK_HD __host__ __device__ __forceinline__
#else
#define CK_HD inline
#endif

namespace cubekit::detail {

/// Per band: samples that are not finite, and min/max over the finite ones.
struct BandSummary {
    std::vector<std::int64_t> nonfinite;
    std::vector<double> min, max;
};

/// What the scoring kernel computes per pixel from y = x − μ (μ = 0 when not centred):
/// Quadratic q = Σ_i (W_i·y)² (RX); Linear l = a·y (MF, CEM); Ace clip(l²/q) with NaN → 0;
/// Cosine l / sqrt(y·y) (SAM, 0 when y = 0). A pixel with a non-finite sample scores NaN.
enum class ScoreMode { Quadratic, Linear, Ace, Cosine };

struct ScorePlan {
    ScoreMode mode = ScoreMode::Quadratic;
    int bands = 0;               ///< K, bands of the prepared cube
    int rows = 0;                ///< r, rows of W (Quadratic, Ace)
    std::vector<double> mean;    ///< K (zeros when not centred)
    std::vector<double> W;       ///< r×K row-major
    std::vector<double> a;       ///< K (Linear, Ace, Cosine)
    bool f32 = false;            ///< f32 whitening
};

/// SPy 0.22.4's inner_outer_window_mask_creator: a window of size n for the pixel at i in an axis of
/// length len starts at i − n/2, shifted to stay inside [0, len).
CK_HD int window_start(int i, int n, int len) {
    int s = i - n / 2;
    if (s < 0) s = 0;
    else if (s + n > len) s = len - n;
    return s;
}

struct LocalWindows {
    int inner = 0, outer = 0;
    int samples() const { return outer * outer - inner * inner; }
};

/// A W×H×1 mask (any element type, host or device) as W·H bytes, 1 where nonzero (NaN counts as 0).
/// Throws InvalidInput naming `what` when its size is not W×H×1.
std::vector<std::uint8_t> mask_bytes(const Context& ctx, const CubeView& mask, int width, int height, const char* what);

// ---- the global detectors' plan, made once for every tile (classical.cpp) ------------------------------
/// The checks of apply_detector_into (options, statistics against `cube_bands`, target) and its plan.
ScorePlan checked_plan(const BackgroundStats& stats, const ClassicalOptions& options, const std::vector<double>& target,
                       int cube_bands);
/// apply_detector_into with the plan made: the output's checks, then the scores.
void apply_plan_into(const Context& ctx, const CubeView& cube, const BackgroundStats& stats, const ScorePlan& plan,
                     const ClassicalOptions& options, const MutableCubeView& out);

// ---- CPU (classical_cpu.cpp): host views ---------------------------------------------------------------
BandSummary band_summary_cpu(const Context& ctx, const CubeView& cube);
/// Adds the pixels of `rows` whose mask byte is set and whose bands are all finite to sum (f64, in
/// raster order) and counts them in n; mask_rows: the mask's bytes for these rows.
void add_masked_pixels(const CubeView& rows, const std::uint8_t* mask_rows, std::vector<double>& sum, std::int64_t& n);
/// sum / n; InvalidInput when n = 0 (no usable target pixel).
std::vector<double> masked_mean(std::vector<double> sum, std::int64_t n);
/// Band screening from a summary (s.bands set): the kept bands and the dropped ones with their reason
/// ("non-finite", "all-zero", "constant"), in band order.
void screen(BackgroundStats& s, const BandSummary& sum);
/// Fills s.eigenvalues and s.eigenvectors from s.covariance (classical.cpp's eigensolve).
void add_eigen(BackgroundStats& s);
/// Dense BSQ f64 copy of the `kept` bands; pixels with mask[p] == 0 become NaN (mask: W·H or empty).
Cube gather_f64_cpu(const Context& ctx, const CubeView& cube, const std::vector<int>& kept,
                    const std::vector<std::uint8_t>& mask);
/// `x`: dense BSQ f64 host cube; `out`: W×H×1 host view of f32 or f64.
void score_cpu(const Context& ctx, const CubeView& x, const ScorePlan& plan, const MutableCubeView& out);
/// local_rx_into with the bands already screened (`kept`): a tile of a scene uses the scene's screening.
void local_rx_kept(const Context& ctx, const CubeView& cube, const ClassicalOptions& options, const std::vector<int>& kept,
                   const MutableCubeView& out, LocalRxReport* report);
std::int64_t local_rx_cpu(const Context& ctx, const CubeView& x, LocalWindows win, int ddof,
                          const MutableCubeView& out);

// ---- CUDA (classical_cuda.cu): device views on ctx's device ----------------------------------------------
BandSummary band_summary_device(const Context& ctx, const CubeView& cube);
DeviceCube gather_f64_device(const Context& ctx, const CubeView& cube, const std::vector<int>& kept,
                             const std::vector<std::uint8_t>& mask);
std::int64_t local_rx_device(const Context& ctx, const CubeView& x, LocalWindows win, int ddof,
                             const MutableCubeView& out);

// ---- CUDA fast path (classical_mma.cu): straight from the caller's BSQ device cube, any type ------------
/// Global moments of the `kept` bands over the pixels with mask ≠ 0 (mask: W·H or empty) whose kept
/// bands are all finite: N, the f64 mean and the centred scatter matrix Σ (x − μ)(x − μ)ᵀ (K×K).
struct DeviceMoments {
    std::int64_t samples = 0;
    std::vector<double> mean, scatter;
};
DeviceMoments moments_device(const Context& ctx, const CubeView& cube, const std::vector<int>& kept,
                             const std::vector<std::uint8_t>& mask);
/// Global scoring of the `kept` bands of `cube` (plan.bands = kept.size()) into `out` (device).
void score_direct_device(const Context& ctx, const CubeView& cube, const std::vector<int>& kept, const ScorePlan& plan,
                         const MutableCubeView& out);

/// Row blocks of the resident whitening kernel (whiten_mma.cu) for W of `rows` × K, or 0 where its
/// row blocks do not fit in shared memory (then classical_mma.cu's streamed kernel scores).
int whiten_row_blocks(const Context& ctx, int K, int rows);
/// partial[rb·P + p] = Σ over row block rb's rows r of (W_r · y_p)², y = x − mean (f32: both rounded
/// to f32), NaN for a pixel with a non-finite kept band. `kept`, `mean`: device arrays of K;
/// W: r×K row-major on the host; `partial`: device, whiten_row_blocks(K, rows) × P.
void whiten_resident(const Context& ctx, const CubeView& cube, const int* kept, const double* mean,
                     const std::vector<double>& W, int rows, bool f32, double* partial);

#if defined(__CUDACC__)
/// A score map as the CUDA kernels write it: f32 or f64, any x/y strides; pixel p = y·width + x.
struct OutView {
    void* data;
    bool f64;
    int width;
    long long sx, sy;
    __device__ void put(long long p, double v) const {
        const long long o = (p % width) * sx + (p / width) * sy;
        if (f64) static_cast<double*>(data)[o] = v;
        else static_cast<float*>(data)[o] = float(v);
    }
};

/// Local RX on the f64 tensor cores (local_rx_mma.cu) from the BIP f64 cube `xb` (W×H×K) on ctx's
/// device; adds the singular pixels to `*singular`. Returns false, launching nothing, where it does
/// not apply (K + 1 > 208 bands, the window's staging beyond shared memory, more than 2³¹ − 1 pixels).
bool local_rx_mma(const Context& ctx, const double* xb, int W, int H, int K, LocalWindows win, int ddof,
                  const OutView& out, unsigned long long* singular);
#endif

}  // namespace cubekit::detail
