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
#include "cubekit/io.hpp"
#include "cubekit/options.hpp"
#include "cubekit/tiles.hpp"

namespace cubekit {

/// E1 scaling of non-u8 input. PerBand (default): each band's own min and max; Global: one min and
/// max over the whole cube. NaN and ±Inf are excluded from min/max and map to 0; a constant band
/// (or cube) maps to 0.
enum class Quantize { PerBand, Global };
template <>
struct EnumNames<Quantize> {
    static constexpr EnumName<Quantize> names[] = {{Quantize::PerBand, "per-band"}, {Quantize::Global, "global"}};
};
inline std::string_view quantize_name(Quantize q) { return enum_name(q); }  ///< "per-band", "global"

/// E4 fusion strategies; names as the CLI spells them.
enum class EdgeFusion {
    Auto,           ///< "auto" (default): None for one band, EdgeVote for more (resolved_fusion)
    None,           ///< "none": one edge map per band
    BandMean,       ///< "mean": E2 on the rounded band mean
    PcaMean,        ///< "pca": E2 on the rounded mean of the first x quantised principal components
    EdgeVote,       ///< "vote-edges": vote over the per-band edge maps
    BinaryVote,     ///< "vote-binary": vote over the per-band binary images, then the 3×3 rule once
    ThresholdMean,  ///< "threshold-mean": the band mean binarised with the rounded mean thresholds
    PcaEdgeVote,    ///< "pca-vote-edges": vote over the edge maps of the first x components
    PcaBinaryVote,  ///< "pca-vote-binary": vote over the binary images of the first x components
};
template <>
struct EnumNames<EdgeFusion> {
    static constexpr EnumName<EdgeFusion> names[] = {
        {EdgeFusion::Auto, "auto"},
        {EdgeFusion::None, "none"},
        {EdgeFusion::BandMean, "mean"},
        {EdgeFusion::PcaMean, "pca"},
        {EdgeFusion::EdgeVote, "vote-edges"},
        {EdgeFusion::BinaryVote, "vote-binary"},
        {EdgeFusion::ThresholdMean, "threshold-mean"},
        {EdgeFusion::PcaEdgeVote, "pca-vote-edges"},
        {EdgeFusion::PcaBinaryVote, "pca-vote-binary"},
    };
};
inline std::string_view fusion_name(EdgeFusion f) { return enum_name(f); }
inline EdgeFusion parse_fusion(std::string_view name, std::string_view what = "fusion") {
    return parse_enum<EdgeFusion>(name, what);
}
/// The fusion that runs on a cube of `bands` bands: Auto is None for one band and EdgeVote for
/// more; any other value is itself.
constexpr EdgeFusion resolved_fusion(EdgeFusion fusion, int bands) {
    if (fusion != EdgeFusion::Auto) return fusion;
    return bands > 1 ? EdgeFusion::EdgeVote : EdgeFusion::None;
}
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

/// Options of entropy_edges(); defaults are the spec's (edges.md).
struct EntropyEdgeOptions {
    /// Tsallis index q of T2/T3: 0.5 = the seed's sqrt form (default); |q − 1| < 1e-9 = Shannon.
    double q = 0.5;
    /// E3 size limit L: components smaller than L are removed; 0 or 1 = off.
    std::int64_t min_component = 0;
    /// Connectivity of E3: 8 (default) or 4.
    int connectivity = 8;
    /// E1 scaling of non-u8 input.
    Quantize quantize = Quantize::PerBand;
    /// E4 fusion; Auto: none for one band, vote-edges for more (resolved_fusion).
    EdgeFusion fusion = EdgeFusion::Auto;
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

/// The declarations of EntropyEdgeOptions' fields (options.hpp); keep_band_edges and keep_binary
/// are switches a front end sets from the outputs it writes.
template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, EntropyEdgeOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.fusion, Field{.name = "fusion",
                          .doc = "auto (none for one band, vote-edges for more), none, mean, pca, vote-edges, "
                                 "vote-binary, threshold-mean, pca-vote-edges or pca-vote-binary"});
    visit(o.vote_percent, Field{.name = "vote_percent", .doc = "vote: a pixel is set when 100*count > X*K (0 <= X < 100)",
                                .min = 0, .max = 100, .max_exclusive = true});
    visit(o.pca_components, Field{.name = "pca_components",
                                  .doc = "principal components of the PCA fusions (clamped to the bands)", .min = 1});
    visit(o.q, Field{.name = "q", .doc = "Tsallis index of T2/T3 (0.5 = the seed's; 1 = Shannon)", .min = 0,
                     .min_exclusive = true});
    visit(o.min_component, Field{.name = "min_component", .doc = "remove edge components of fewer pixels (0 = off)",
                                 .min = 0});
    visit(o.connectivity, Field{.name = "connectivity", .doc = "components: 8 or 4", .one_of = {4, 8}});
    visit(o.filter_each_band, Field{.name = "filter_each_band",
                                    .doc = "also remove small components from every band's map before a vote"});
    visit(o.quantize, Field{.name = "quantize", .doc = "scaling of non-8-bit input: per-band or global"});
    visit(o.keep_band_edges, Field{.name = "keep_band_edges", .doc = "also return the per-band edge maps", .flag = false});
    visit(o.keep_binary, Field{.name = "keep_binary", .doc = "also return the binary images f", .flag = false});
}

/// The small results of a run (host memory), whatever the outputs: what entropy_edges_into returns.
struct EntropyEdgeSummary {
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

/// Everything entropy_edges() returns: the summary and the output cubes (host, BSQ).
struct EntropyEdgeResult : EntropyEdgeSummary {
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
};

/// The band counts of the outputs of a run on a cube of `bands` bands (0: the fusion has no such
/// output), to size the views of entropy_edges_into. band_edges and binary are the sizes they have
/// when asked for (keep_band_edges, keep_binary, or a view passed).
///
///     EntropyEdgeBands n = entropy_edges_bands(103, {.fusion = EdgeFusion::PcaEdgeVote});
///     // n.edges = 1, n.band_edges = 3 (the components), n.binary = 3, n.vote_count = 1
struct EntropyEdgeBands {
    int edges = 0, band_edges = 0, binary = 0, vote_count = 0;
};
EntropyEdgeBands entropy_edges_bands(int bands, const EntropyEdgeOptions& options);

/// Optional outputs of entropy_edges_into: views (any strides) in the context's memory, each
/// W×H×(the count entropy_edges_bands gives); an empty view, the default, is not produced.
struct EntropyEdgeExtras {
    /// u8 {0,1}: the E2 edge maps that were or could be voted (fusions with band_edges > 0).
    MutableCubeView band_edges;
    /// u8 {0,1}: the binary images f (as EntropyEdgeResult::binary).
    MutableCubeView binary;
    /// u16: the vote count per pixel (vote fusions).
    MutableCubeView vote_count;
};

/// The whole detector on the context's backend; returns host cubes (a thin wrapper over
/// entropy_edges_into). cube: any element type; host or device memory (device memory needs a CUDA
/// context), any layout, a window or any strides (a Cube or DeviceCube converts to its view). Throws InvalidInput naming the field:
/// q ≤ 0, vote_percent outside [0, 100), pca_components < 1, connectivity not 4/8,
/// min_component < 0, an empty cube.
EntropyEdgeResult entropy_edges(const Context& ctx, const CubeView& cube, const EntropyEdgeOptions& options = {});

/// The detector into a caller's views in the context's memory (device memory for a CUDA context:
/// the device-resident call; host memory for a CPU one). edges: W×H×entropy_edges_bands().edges
/// u8, any strides; extras: the optional outputs (options.keep_band_edges and keep_binary are not
/// read: the views given decide). The CPU reads any host view where it is; CUDA reads a dense BSQ
/// cube on the context's device where it is (a u8 one is used as its own E1) and otherwise
/// uploads or reorders it once; nothing of the image crosses to the host. Outputs that are dense
/// BSQ are written in place, others through one copy. Returns the summary once the work is done
/// (its thresholds come back from the device in one small copy at the end).
///
///     cubekit::DeviceCube d_edges(gpu, {W, H, 1, cubekit::DType::U8});
///     cubekit::DeviceCube d_count(gpu, {W, H, 1, cubekit::DType::U16});
///     auto s = cubekit::entropy_edges_into(gpu, d_cube, d_edges, {.fusion = cubekit::EdgeFusion::EdgeVote},
///                                          {.vote_count = d_count});
///     // s.band_thresholds[b].t1 ...; d_edges and d_count hold the fused map and the votes
/// Throws InvalidInput as entropy_edges, and naming the output whose memory, size or type is wrong.
EntropyEdgeSummary entropy_edges_into(const Context& ctx, const CubeView& cube, const MutableCubeView& edges,
                                      const EntropyEdgeOptions& options = {}, const EntropyEdgeExtras& extras = {});

/// The statistics of a whole scene that E1 and E2 need, to run the detector on pieces of the scene
/// (tiles, Dask chunks) and get the whole scene's maps: entropy_edges_tiled gathers them over its
/// tiles; a caller who cuts the scene itself gathers them with the entropy_piece_* calls below.
struct EdgeSceneStats {
    /// E1: each band's finite range over the scene (quantize Global: the cube's, in every band);
    /// lo > hi when the band has no finite sample. Empty for u8 input (its own E1).
    std::vector<double> lo, hi;
    std::vector<EdgeThresholds> band;  ///< E2 thresholds of the quantised bands
    EdgeThresholds mean;               ///< of the band-mean image (fusions mean and threshold-mean)
};

/// Pieces of a scene, for a caller who cuts it (cubekit.dask does): (1) for non-u8 input, each
/// piece's finite range per band (lo > hi where the piece has none), merged by min and max over the
/// pieces (and over the bands for quantize Global) into scene.lo and scene.hi; (2) each piece's
/// 256-bin histograms of its bands quantised with those ranges, then of their band mean when
/// `with_mean` (fusions mean and threshold-mean): (B + with_mean) × 256 counts, summed over the
/// pieces (exact integers); (3) entropy_scene_thresholds; (4) entropy_edges_piece on every piece
/// grown by a 1-pixel halo (the 3×3 rule), whose core is the whole scene's map.
///
///     cubekit::EdgeSceneStats s;
///     cubekit::entropy_piece_ranges(ctx, piece, lo, hi);                       // per piece, merged
///     auto h = cubekit::entropy_piece_histograms(ctx, piece, s, false);        // per piece, summed
///     cubekit::entropy_scene_thresholds(s, total, 0.5, false);
///     cubekit::entropy_edges_piece(ctx, grown_piece, map, {}, s);
void entropy_piece_ranges(const Context& ctx, const CubeView& piece, std::vector<double>& lo, std::vector<double>& hi);
std::vector<std::uint32_t> entropy_piece_histograms(const Context& ctx, const CubeView& piece, const EdgeSceneStats& scene,
                                                    bool with_mean);
/// The scene's thresholds (scene.band, and scene.mean when with_mean) from its summed histograms.
/// Throws InvalidInput when a count exceeds 2^32 − 1 (the threshold search counts in 32 bits).
void entropy_scene_thresholds(EdgeSceneStats& scene, const std::vector<std::uint64_t>& histograms, double q, bool with_mean);
/// The detector on one piece with the scene's statistics: `edges` in the context's memory, as
/// entropy_edges_into's. E3 (min_component) is not applied (it needs the whole map): InvalidInput
/// when asked for, as for the PCA fusions.
EntropyEdgeSummary entropy_edges_piece(const Context& ctx, const CubeView& piece, const MutableCubeView& edges,
                                       const EntropyEdgeOptions& options, const EdgeSceneStats& scene);

/// What entropy_edges_tiled returns.
struct EntropyEdgeTiled {
    EntropyEdgeSummary summary;  ///< the whole scene's, as entropy_edges_into returns it
    /// The map pass (1-pixel halo); peak_bytes and device_peak_bytes cover the statistics passes too.
    TiledRun run;
    int passes = 0;  ///< reads of the input: 2 for u8 (histograms, maps), 3 otherwise (ranges first)
};

/// The detector in tiles (tiles.hpp), for a scene larger than a memory budget or spread over several
/// GPUs: the scene's statistics are gathered over its tiles (E1 ranges of a non-u8 scene, then the
/// 256-bin histograms of the quantised bands, exact counts) and the maps are computed in tiles with
/// a 1-pixel halo from the scene's thresholds, so `edges` equals entropy_edges' map bit for bit. E3
/// (min_component) runs on the map at the end, in tiles too (remove_small_components_tiled). edges: host memory, W×H×entropy_edges_bands().edges
/// u8, any strides. Fusions none, mean, vote-edges, vote-binary, threshold-mean (entropy_edges_tiled_refusal
/// says why the others are refused: InvalidInput). A CubeFile is read by windows, twice or three times.
///
///     cubekit::Cube map(W, H, 1, cubekit::DType::U8);
///     auto t = cubekit::entropy_edges_tiled(gpu, cubekit::CubeFile("flight.hdr"), map.mutable_view(),
///                                           {.min_component = 5}, {.device_memory_limit = 1ull << 30});
///     // t.summary.band_thresholds, t.run.tiles
EntropyEdgeTiled entropy_edges_tiled(const Context& ctx, const CubeView& cube, const MutableCubeView& edges,
                                     const EntropyEdgeOptions& options = {}, const TileOptions& tiles = {});
EntropyEdgeTiled entropy_edges_tiled(const Context& ctx, const CubeFile& file, const MutableCubeView& edges,
                                     const EntropyEdgeOptions& options = {}, const TileOptions& tiles = {});
/// Why entropy_edges_tiled cannot run these options on a cube of `bands` bands (a sentence), or "".
std::string entropy_edges_tiled_refusal(const EntropyEdgeOptions& options, int bands);

/// E2 thresholds of every band of a cube (E1, 256-bin histograms, the threshold search), on the
/// context's backend; reads options.q and options.quantize only. The cube is read as by
/// entropy_edges (a device cube stays on the device: only the B thresholds come back).
///
///     std::vector<cubekit::EdgeThresholds> t = cubekit::entropy_band_thresholds(gpu, d_cube);   // t[b].t1, t2, t3
std::vector<EdgeThresholds> entropy_band_thresholds(const Context& ctx, const CubeView& cube,
                                                    const EntropyEdgeOptions& options = {});

/// E1 alone: W×H×B u8, BSQ, on the host. cube: any element type, host or device, any strides.
Cube quantize_to_u8(const Context& ctx, const CubeView& cube, Quantize mode = Quantize::PerBand);

/// E1 into a caller's W×H×B u8 view (any strides) in the context's memory. Queued on the
/// context's stream (ctx.synchronize() before reading `out` from the host).
///
///     cubekit::quantize_to_u8_into(gpu, d_cube, d_bytes);
void quantize_to_u8_into(const Context& ctx, const CubeView& cube, const MutableCubeView& out,
                         Quantize mode = Quantize::PerBand);

/// E2 thresholds of one 256-bin histogram (counts of grey levels 0..255; at least one nonzero).
EdgeThresholds entropy_thresholds(const std::uint32_t* histogram, double q = 0.5);

/// The spec's objectives, for tests and curious users: Shannon H(t) for t = 0..n−2 over the occupied
/// levels, and the Tsallis objective of a sub-histogram of counts (J = ab − 1 for q = 0.5).
std::vector<double> shannon_curve(const std::uint32_t* histogram);
std::vector<double> tsallis_curve(const std::vector<std::uint64_t>& counts, double q);

}  // namespace cubekit
