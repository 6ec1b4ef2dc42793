#pragma once
// The entropy edge detector's pipeline (spec edges.md §3), written once over a backend's primitive
// operations, so that the CPU reference and the CUDA implementation run the same stages in the same
// order. A backend `Ops` provides (Planes = n dense planes of W×H bytes, owned or a caller's dense
// output; the CPU's images may also be the u8 input itself, read through its strides; Thr =
// per-image thresholds; every output planes argument is written in full):
//   Planes quantize(Quantize)                                 E1 of the backend's cube, B planes
//   Planes pca_images(int k, std::vector<double>& ratios)     E5 + E1 of the first k components
//   Thr    thresholds(const Planes& images, int n, double q)  histograms + E2 search
//   Thr    threshold_mean(const Thr& t, int n)                one image's T' (spec §3.8 method 5)
//   Thr    thresholds_of(const std::vector<EdgeThresholds>&)  given thresholds (a tile of a scene)
//   const EdgeSceneStats* given                                the scene's statistics, or null
//   Planes band_mean(const Planes& images, int n)             one plane
//   void   edge_maps(images, thr, n, Planes& out)             E2 binarisation + 3×3 rule, n planes
//   void   binary_maps(images, thr, n, Planes& out)
//   void   edge_vote(images, thr, n, needed, Planes& count, Planes& out)   fused E2 + vote
//   void   binary_vote(images, thr, n, needed, Planes& count, Planes& out) F = vote(f_b)
//   void   vote(const Planes& maps, n, needed, Planes& count, Planes& out)
//   void   edges_of_binary(const Planes& f, Planes& out)      3×3 rule on one binary plane
//   void   remove_small(Planes& maps, int n, std::int64_t L, int connectivity)   E3, in place
//   Planes output(Output, int n)     the caller's view when it is dense BSQ, else owned planes
//   bool   wants(Output)             the caller gave a view for it
//   void   deliver(Planes&, Output)  copies owned planes into the caller's view (if given)
//   void   to_host(const Thr&, int n, std::vector<EdgeThresholds>& dest)   filled by finish() at the latest
//   void   finish()                  waits for the work; every to_host destination is filled
// The vote count planes hold u16 values.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "cubekit/edges.hpp"
#include "edges/edges_math.hpp"

namespace cubekit::detail {

/// ⌊x·K/100⌋ + 1, computed exactly (x is a double, i.e. a binary rational): the smallest count
/// with 100·count > x·K.
int votes_needed(double vote_percent, int k);
/// Throws InvalidInput naming the option when it is out of range.
void check_edge_options(const CubeShape& shape, const EntropyEdgeOptions& options);

/// The outputs of a run (views in the context's memory, checked by edges.cpp); an extra whose
/// data() is null was not asked for.
struct EdgeOutputs {
    MutableCubeView edges;
    EntropyEdgeExtras extras;
};

/// The backends. cube: CPU, any host view; CUDA, a dense BSQ view on the context's device.
/// options.fusion is resolved (never Auto). given: the scene's statistics when `cube` is a tile's
/// window (its E1 ranges and thresholds are used instead of the window's own; no PCA fusion).
EntropyEdgeSummary entropy_edges_cpu(const Context& ctx, const CubeView& cube, const EdgeOutputs& outputs,
                                     const EntropyEdgeOptions& options, const EdgeSceneStats* given = nullptr);
EntropyEdgeSummary entropy_edges_cuda(const Context& ctx, const CubeView& cube, const EdgeOutputs& outputs,
                                      const EntropyEdgeOptions& options, const EdgeSceneStats* given = nullptr);
/// The pieces of the scene statistics (entropy_piece_ranges, entropy_piece_histograms) for a cube as above.
void band_ranges_cpu(const Context& ctx, const CubeView& cube, std::vector<double>& lo, std::vector<double>& hi);
void band_ranges_cuda(const Context& ctx, const CubeView& cube, std::vector<double>& lo, std::vector<double>& hi);
std::vector<std::uint32_t> tile_histograms_cpu(const Context& ctx, const CubeView& cube, const EdgeSceneStats& scene,
                                               bool with_mean);
std::vector<std::uint32_t> tile_histograms_cuda(const Context& ctx, const CubeView& cube, const EdgeSceneStats& scene,
                                                bool with_mean);
/// E1 of a host view with given ranges (quantize.cpp), into `out` (u8, same size, any strides).
void quantize_with_ranges_cpu(const Context& ctx, const CubeView& cube, const MutableCubeView& out,
                              const std::vector<double>& lo, const std::vector<double>& hi);
/// E1 + histograms + thresholds alone (entropy_band_thresholds); cube as above.
std::vector<EdgeThresholds> band_thresholds_cpu(const Context& ctx, const CubeView& cube, double q, Quantize mode);
std::vector<EdgeThresholds> band_thresholds_cuda(const Context& ctx, const CubeView& cube, double q, Quantize mode);

/// E1 into `out` (u8, same size, any strides, the backend's memory); cube as above.
void quantize_cpu(const Context& ctx, const CubeView& cube, const MutableCubeView& out, Quantize mode);
void quantize_cuda(const Context& ctx, const CubeView& cube, const MutableCubeView& out, Quantize mode);
/// E1 of a host view into a new host cube (W×H×B u8, BSQ).
Cube quantize_to_u8_cpu(const Context& ctx, const CubeView& cube, Quantize mode);

namespace edges {

/// The outputs a pipeline may deliver to the caller.
enum class Output { Edges, BandEdges, Binary, VoteCount };

/// The caller's view for an output (data() null when not asked for).
inline const MutableCubeView& view_of(const EdgeOutputs& o, Output which) {
    switch (which) {
        case Output::Edges: return o.edges;
        case Output::BandEdges: return o.extras.band_edges;
        case Output::Binary: return o.extras.binary;
        case Output::VoteCount: break;
    }
    return o.extras.vote_count;
}

inline EdgeThresholds to_public(const Thr& t) {
    return {t.t1, t.t2, t.t3, t.levels, t.loc, t.constant != 0};
}
inline std::vector<EdgeThresholds> to_public(const Thr* t, int n) {
    std::vector<EdgeThresholds> out;
    out.reserve(std::size_t(n));
    for (int i = 0; i < n; ++i) out.push_back(to_public(t[i]));
    return out;
}

inline Thr from_public(const EdgeThresholds& t) {
    Thr r;
    r.t1 = std::uint8_t(t.t1), r.t2 = std::uint8_t(t.t2), r.t3 = std::uint8_t(t.t3);
    r.constant = t.constant ? 1 : 0;
    r.levels = std::uint16_t(t.levels), r.loc = std::uint16_t(t.loc);
    return r;
}
inline std::vector<Thr> from_public(const std::vector<EdgeThresholds>& t) {
    std::vector<Thr> out;
    for (const EdgeThresholds& e : t) out.push_back(from_public(e));
    return out;
}

inline std::vector<Thr> threshold_mean_of(const std::vector<Thr>& t) { return {threshold_mean(t.data(), int(t.size()))}; }

/// The binary images of `n` images into the binary output.
template <class Ops, class Planes, class Thresholds>
void deliver_binary(Ops& ops, const Planes& images, const Thresholds& thr, int n) {
    auto f = ops.output(Output::Binary, n);
    ops.binary_maps(images, thr, n, f);
    ops.deliver(f, Output::Binary);
}

/// The fusions (everything but None) on the images E2 runs on: writes the fused map into `out`
/// (and the vote count into `count` for the votes), the optional outputs the caller asked for, and
/// the derived thresholds of the mean modes into mean_t and tmean_t (by finish() at the latest).
template <class Ops, class Planes, class Thresholds>
void fuse(Ops& ops, const Planes& images, const Thresholds& thr, int K, const EntropyEdgeOptions& o, int needed,
          Planes& count, Planes& out, std::vector<EdgeThresholds>& mean_t, std::vector<EdgeThresholds>& tmean_t) {
    const bool filter = o.min_component > 1;
    switch (o.fusion) {
        case EdgeFusion::BandMean:
        case EdgeFusion::PcaMean:
        case EdgeFusion::ThresholdMean: {
            auto mean = ops.band_mean(images, K);
            auto mean_thr = ops.given ? ops.thresholds_of({ops.given->mean}) : ops.thresholds(mean, 1, o.q);
            ops.to_host(mean_thr, 1, mean_t);
            if (o.fusion == EdgeFusion::ThresholdMean) {
                mean_thr = ops.threshold_mean(thr, K);
                ops.to_host(mean_thr, 1, tmean_t);
            }
            ops.edge_maps(mean, mean_thr, 1, out);
            if (ops.wants(Output::Binary)) deliver_binary(ops, mean, mean_thr, 1);
            break;
        }
        case EdgeFusion::EdgeVote:
        case EdgeFusion::PcaEdgeVote: {
            if (o.filter_each_band || ops.wants(Output::BandEdges)) {
                auto e = ops.output(Output::BandEdges, K);
                ops.edge_maps(images, thr, K, e);
                if (o.filter_each_band && filter) ops.remove_small(e, K, o.min_component, o.connectivity);
                ops.vote(e, K, needed, count, out);
                ops.deliver(e, Output::BandEdges);
            } else {
                ops.edge_vote(images, thr, K, needed, count, out);
            }
            if (ops.wants(Output::Binary)) deliver_binary(ops, images, thr, K);
            break;
        }
        case EdgeFusion::BinaryVote:
        case EdgeFusion::PcaBinaryVote: {
            auto f = ops.output(Output::Binary, 1);
            ops.binary_vote(images, thr, K, needed, count, f);
            ops.edges_of_binary(f, out);
            ops.deliver(f, Output::Binary);
            if (ops.wants(Output::BandEdges)) {
                auto e = ops.output(Output::BandEdges, K);
                ops.edge_maps(images, thr, K, e);
                ops.deliver(e, Output::BandEdges);
            }
            break;
        }
        case EdgeFusion::Auto:  // resolved by the front door
        case EdgeFusion::None: break;
    }
}

template <class Ops>
EntropyEdgeSummary run_pipeline(Ops& ops, int B, const EntropyEdgeOptions& o) {
    const bool filter = o.min_component > 1;
    EntropyEdgeSummary r;
    std::vector<EdgeThresholds> pca_t, mean_t, tmean_t;  // derived thresholds, named at the end
    // Progress by stage (quantise + thresholds, edge maps or fusion, noise removal, done), with a
    // cancellation check between stages (never inside their parallel loops).
    const std::size_t stages = filter ? 4 : 3;
    std::size_t stage = 0;
    const auto advance = [&] {
        ops.ctx.progress(++stage, stages);
        if (stage < stages) ops.ctx.check_cancelled("entropy_edges");
    };
    auto quantized = ops.quantize(o.quantize);  // with the scene's ranges when given
    auto band_thr = ops.given ? ops.thresholds_of(ops.given->band) : ops.thresholds(quantized, B, o.q);
    ops.to_host(band_thr, B, r.band_thresholds);
    advance();

    if (o.fusion == EdgeFusion::None) {
        auto e = ops.output(Output::Edges, B);
        ops.edge_maps(quantized, band_thr, B, e);
        advance();
        if (filter) {
            ops.remove_small(e, B, o.min_component, o.connectivity);
            advance();
        }
        ops.deliver(e, Output::Edges);
        if (ops.wants(Output::Binary)) deliver_binary(ops, quantized, band_thr, B);
        ops.finish();
        advance();
        return r;
    }

    // The images E2 runs on: the quantised bands, or the first x quantised principal components.
    int K = B;
    auto images = std::move(quantized);
    auto thr = std::move(band_thr);
    const bool pca = fusion_uses_pca(o.fusion);
    if (pca) {
        K = std::min(o.pca_components, B);
        r.pca_components_used = K;
        images = ops.pca_images(K, r.explained_variance_ratio);
        thr = ops.thresholds(images, K, o.q);
        ops.to_host(thr, K, pca_t);
    }
    const bool vote = fusion_is_vote(o.fusion);
    if (vote) r.votes_needed = votes_needed(o.vote_percent, K);
    auto out = ops.output(Output::Edges, 1);
    decltype(out) count;
    if (vote) count = ops.output(Output::VoteCount, 1);
    fuse(ops, images, thr, K, o, r.votes_needed, count, out, mean_t, tmean_t);
    advance();
    if (filter) {
        ops.remove_small(out, 1, o.min_component, o.connectivity);
        advance();
    }
    ops.deliver(out, Output::Edges);
    if (vote) ops.deliver(count, Output::VoteCount);
    ops.finish();
    advance();

    if (pca) r.derived_thresholds.push_back({"pca", std::move(pca_t)});
    if (o.fusion == EdgeFusion::PcaMean) r.derived_thresholds.push_back({"pca_mean", std::move(mean_t)});
    if (o.fusion == EdgeFusion::BandMean || o.fusion == EdgeFusion::ThresholdMean)
        r.derived_thresholds.push_back({"band_mean", std::move(mean_t)});
    if (o.fusion == EdgeFusion::ThresholdMean) r.derived_thresholds.push_back({"threshold_mean", std::move(tmean_t)});
    return r;
}

/// E1, histograms and thresholds alone.
template <class Ops>
std::vector<EdgeThresholds> run_thresholds(Ops& ops, int B, double q, Quantize mode) {
    std::vector<EdgeThresholds> t;
    ops.to_host(ops.thresholds(ops.quantize(mode), B, q), B, t);
    ops.finish();
    return t;
}

}  // namespace edges
}  // namespace cubekit::detail
