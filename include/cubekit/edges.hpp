#pragma once
/// Entropy-threshold edge detection on grayscale images and hyperspectral cubes (spec: edges.md).
///
/// E1  every band is quantised to 0..255 (u8 as it is; other types per-band min-max, round half up).
/// E2  per band: 256-bin histogram; Shannon threshold T1 (maximum-entropy split of the occupied levels);
///     Tsallis thresholds T2 (levels ≤ T1) and T3 (levels > T1); binary image
///     f = (T2 ≤ v < T1) or (v ≥ T3); a pixel is an edge when at most 6 of its 3×3 window equal its f.
///     Border rows and columns are never edges.
/// E3  optional: connected groups of edge pixels smaller than L are removed (8- or 4-connectivity).
/// E4  fusion of the bands into one map: band mean, PCA mean, vote over edge maps (default for B > 1),
///     vote over binary images, threshold mean, PCA + edge vote, PCA + binary vote.
///
///     cubekit::EntropyEdgeResult r = cubekit::entropy_edges(ctx, cube, {.min_component = 5});
///     // r.edges: W×H×1 u8 {0,1} (vote over the per-band edge maps, x = 15 %)
///
/// CPU and CUDA give identical thresholds, binary images, edge maps, vote counts and fused maps
/// (PCA fusions included: exact sums, one shared host eigensolve, f64 projection without contraction).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"

namespace cubekit {

/// E1 scaling of non-u8 input. PerBand (default): each band's own min and max; Global: one min and
/// max over the whole cube. NaN and ±Inf are excluded from min/max and map to 0; a constant band
/// (or cube) maps to 0.
enum class Quantize { PerBand, Global };
std::string_view quantize_name(Quantize q);                                    ///< "per-band", "global"
Quantize parse_quantize(std::string_view name, std::string_view what = "--quantize");

/// E4 fusion strategies; names as the CLI spells them.
enum class EdgeFusion {
    None,           ///< "none": one edge map per band
    BandMean,       ///< "mean": E2 on the rounded band mean
    PcaMean,        ///< "pca": E2 on the rounded mean of the first x quantised principal components
    EdgeVote,       ///< "vote-edges": vote over the per-band edge maps
    BinaryVote,     ///< "vote-binary": vote over the per-band binary images, then the 3×3 rule once
    ThresholdMean,  ///< "threshold-mean": the band mean binarised with the rounded mean thresholds
    PcaEdgeVote,    ///< "pca-vote-edges": vote over the edge maps of the first x components
    PcaBinaryVote,  ///< "pca-vote-binary": vote over the binary images of the first x components
};
std::string_view fusion_name(EdgeFusion f);
EdgeFusion parse_fusion(std::string_view name, std::string_view what = "--fusion");
bool fusion_uses_pca(EdgeFusion f);
bool fusion_is_vote(EdgeFusion f);

/// The E2 thresholds of one image (grey levels 0..255).
struct EdgeThresholds {
    int t1 = 0, t2 = 0, t3 = 0;
    int levels = 0;         ///< n, the number of occupied grey levels (1..256)
    int loc = 0;            ///< position of T1 among the occupied levels
    bool constant = false;  ///< n = 1: T1 = T2 = T3 = the level, no edges
    bool operator==(const EdgeThresholds&) const = default;
};

struct DerivedThresholds {
    std::string name;
    std::vector<EdgeThresholds> thresholds;
};

struct EntropyEdgeOptions {
    /// Tsallis index q of T2/T3: 0.5 = the seed's sqrt form (default); |q − 1| < 1e-9 = Shannon.
    double q = 0.5;
    /// E3 size limit L: components smaller than L are removed; 0 or 1 = off.
    std::int64_t min_component = 0;
    /// Connectivity of E3: 8 (default) or 4.
    int connectivity = 8;
    Quantize quantize = Quantize::PerBand;
    EdgeFusion fusion = EdgeFusion::None;
    /// Vote rule: a pixel is set iff 100·count > x·K (exact), 0 ≤ x < 100.
    double vote_percent = 15.0;
    /// Principal components x of the PCA fusions, 1..B (clamped to B; see pca_components_used).
    int pca_components = 3;
    /// Filter (E3) every per-band edge map before an edge vote, as well as the fused map.
    bool filter_each_band = false;
    /// Also return the per-band edge maps of the fused images (fusions other than None).
    bool keep_band_edges = false;
    /// Also return the binary images f of the images E2 ran on.
    bool keep_binary = false;
};

struct EntropyEdgeResult {
    /// None: W×H×B u8 {0,1} (one map per band, each filtered by E3); a fusion: W×H×1 u8 {0,1}.
    Cube edges;
    /// keep_band_edges with a fusion: the E2 edge maps that were or could be voted (input bands, or the
    /// PCA components for the PCA modes), filtered when filter_each_band; else empty.
    Cube band_edges;
    /// keep_binary: the binary images f (input bands; band mean for mean/threshold-mean; PCA
    /// components for the PCA modes; the voted F for the binary votes); else empty.
    Cube binary;
    /// Vote fusions: the vote count per pixel, W×H×1 u16 (0..K), a soft edge strength; else empty.
    Cube vote_count;
    /// The thresholds of every input band, whatever the fusion.
    std::vector<EdgeThresholds> band_thresholds;
    /// Thresholds of derived images, by name: "band_mean" (the band-mean image: mean and
    /// threshold-mean), "threshold_mean" (the averaged thresholds), "pca" (one per component image),
    /// "pca_mean" (the mean of the component images); empty for None and the band votes.
    std::vector<DerivedThresholds> derived_thresholds;
    /// PCA modes: min(pca_components, B) and the explained-variance ratios of those components.
    int pca_components_used = 0;
    std::vector<double> explained_variance_ratio;
    /// The smallest vote count that sets a pixel (vote fusions), i.e. ⌊x·K/100⌋ + 1.
    int votes_needed = 0;
};

/// The whole detector on the context's backend. Throws InvalidInput naming the option: q ≤ 0,
/// vote_percent outside [0, 100), pca_components < 1, connectivity not 4/8, min_component < 0,
/// an empty cube.
EntropyEdgeResult entropy_edges(const Context& ctx, const Cube& cube, const EntropyEdgeOptions& options = {});

/// E1 alone: W×H×B u8, BSQ.
Cube quantize_to_u8(const Context& ctx, const Cube& cube, Quantize mode = Quantize::PerBand);

/// E2 thresholds of one 256-bin histogram (counts of grey levels 0..255; at least one nonzero).
EdgeThresholds entropy_thresholds(const std::uint32_t* histogram, double q = 0.5);

/// The spec's objectives, for tests and curious users: Shannon H(t) for t = 0..n−2 over the occupied
/// levels, and the Tsallis objective of a sub-histogram of counts (J = ab − 1 for q = 0.5).
std::vector<double> shannon_curve(const std::uint32_t* histogram);
std::vector<double> tsallis_curve(const std::vector<std::uint64_t>& counts, double q);

}  // namespace cubekit
