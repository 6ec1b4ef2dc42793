#pragma once
// The entropy edge detector's pipeline (spec edges.md §3), written once over a backend's primitive
// operations, so that the CPU reference and the CUDA implementation run the same stages in the same
// order. A backend `Ops` provides (Bytes = planes of W×H u8, Thr = per-image thresholds):
//   Bytes quantize(Quantize)                                E1 of the backend's cube, B planes
//   Bytes pca_images(int k, std::vector<double>& ratios)    E5 + E1 of the first k components
//   Thr   thresholds(const Bytes& images, int n, double q)  histograms + E2 search
//   Thr   threshold_mean(const Thr& t, int n)               one image's T' (spec §3.8 method 5)
//   Bytes band_mean(const Bytes& images, int n)             one plane
//   Bytes edge_maps(const Bytes& images, const Thr&, int n)   E2 binarisation + 3×3 rule
//   Bytes binary_maps(const Bytes& images, const Thr&, int n)
//   Bytes edge_vote(const Bytes& images, const Thr&, int n, int needed, Bytes& count)  fused E2 + vote
//   Bytes binary_vote(const Bytes& images, const Thr&, int n, int needed, Bytes& count) F = vote(f_b)
//   Bytes vote(const Bytes& maps, int n, int needed, Bytes& count)
//   Bytes edges_of_binary(const Bytes& f)                   3×3 rule on one binary plane
//   void  remove_small(Bytes& maps, int n, std::int64_t L, int connectivity)   E3, in place
//   Cube  to_cube(const Bytes&, int n) / to_cube_u16(const Bytes& count)
//   std::vector<Thr> to_host(const Thr&, int n)
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

EntropyEdgeResult entropy_edges_cpu(const Context& ctx, const Cube& cube, const EntropyEdgeOptions& options);
EntropyEdgeResult entropy_edges_cuda(const Context& ctx, const Cube& cube, const EntropyEdgeOptions& options);
/// The detector on a device-resident BSQ cube; download = false leaves every output on the device
/// and returns empty cubes and zeroed thresholds (the benchmark times the device work alone).
EntropyEdgeResult entropy_edges_device(const Context& ctx, const DeviceCube& cube, const EntropyEdgeOptions& options,
                                       bool download);
/// Histograms and thresholds alone of a u8 BSQ device cube (the benchmark's first row).
void edges_thresholds_device(const Context& ctx, const DeviceCube& cube, double q);
Cube quantize_to_u8_cpu(const Context& ctx, const Cube& cube, Quantize mode);
Cube quantize_to_u8_cuda(const Context& ctx, const Cube& cube, Quantize mode);

namespace edges {

inline EdgeThresholds to_public(const Thr& t) {
    return {t.t1, t.t2, t.t3, t.levels, t.loc, t.constant != 0};
}
inline std::vector<EdgeThresholds> to_public(const std::vector<Thr>& t) {
    std::vector<EdgeThresholds> out;
    out.reserve(t.size());
    for (const Thr& x : t) out.push_back(to_public(x));
    return out;
}

inline std::vector<Thr> threshold_mean_of(const std::vector<Thr>& t) { return {threshold_mean(t.data(), int(t.size()))}; }

template <class Ops>
EntropyEdgeResult run_pipeline(Ops& ops, int B, const EntropyEdgeOptions& o) {
    const bool filter = o.min_component > 1;
    EntropyEdgeResult r;
    auto quantized = ops.quantize(o.quantize);
    auto band_thr = ops.thresholds(quantized, B, o.q);
    r.band_thresholds = to_public(ops.to_host(band_thr, B));

    if (o.fusion == EdgeFusion::None) {
        auto e = ops.edge_maps(quantized, band_thr, B);
        if (filter) ops.remove_small(e, B, o.min_component, o.connectivity);
        r.edges = ops.to_cube(e, B);
        if (o.keep_binary) r.binary = ops.to_cube(ops.binary_maps(quantized, band_thr, B), B);
        return r;
    }

    // The images E2 runs on: the quantised bands, or the first x quantised principal components.
    int K = B;
    auto images = std::move(quantized);
    auto thr = std::move(band_thr);
    if (fusion_uses_pca(o.fusion)) {
        K = std::min(o.pca_components, B);
        r.pca_components_used = K;
        images = ops.pca_images(K, r.explained_variance_ratio);
        thr = ops.thresholds(images, K, o.q);
        r.derived_thresholds.push_back({"pca", to_public(ops.to_host(thr, K))});
    }
    decltype(images) out, count;
    switch (o.fusion) {
        case EdgeFusion::BandMean:
        case EdgeFusion::PcaMean:
        case EdgeFusion::ThresholdMean: {
            auto mean = ops.band_mean(images, K);
            auto mean_thr = ops.thresholds(mean, 1, o.q);
            const bool pca = o.fusion == EdgeFusion::PcaMean;
            r.derived_thresholds.push_back({pca ? "pca_mean" : "band_mean", to_public(ops.to_host(mean_thr, 1))});
            if (o.fusion == EdgeFusion::ThresholdMean) {
                mean_thr = ops.threshold_mean(thr, K);
                r.derived_thresholds.push_back({"threshold_mean", to_public(ops.to_host(mean_thr, 1))});
            }
            out = ops.edge_maps(mean, mean_thr, 1);
            if (o.keep_binary) r.binary = ops.to_cube(ops.binary_maps(mean, mean_thr, 1), 1);
            break;
        }
        case EdgeFusion::EdgeVote:
        case EdgeFusion::PcaEdgeVote: {
            r.votes_needed = votes_needed(o.vote_percent, K);
            if (o.filter_each_band || o.keep_band_edges) {
                auto e = ops.edge_maps(images, thr, K);
                if (o.filter_each_band && filter) ops.remove_small(e, K, o.min_component, o.connectivity);
                out = ops.vote(e, K, r.votes_needed, count);
                if (o.keep_band_edges) r.band_edges = ops.to_cube(e, K);
            } else {
                out = ops.edge_vote(images, thr, K, r.votes_needed, count);
            }
            if (o.keep_binary) r.binary = ops.to_cube(ops.binary_maps(images, thr, K), K);
            break;
        }
        case EdgeFusion::BinaryVote:
        case EdgeFusion::PcaBinaryVote: {
            r.votes_needed = votes_needed(o.vote_percent, K);
            auto f = ops.binary_vote(images, thr, K, r.votes_needed, count);
            out = ops.edges_of_binary(f);
            if (o.keep_binary) r.binary = ops.to_cube(f, 1);
            if (o.keep_band_edges) r.band_edges = ops.to_cube(ops.edge_maps(images, thr, K), K);
            break;
        }
        case EdgeFusion::None: break;
    }
    if (filter) ops.remove_small(out, 1, o.min_component, o.connectivity);
    r.edges = ops.to_cube(out, 1);
    if (fusion_is_vote(o.fusion)) r.vote_count = ops.to_cube_u16(count);
    return r;
}

}  // namespace edges
}  // namespace cubekit::detail
