#pragma once
// The control flow of k-means over the pieces of a scene (tiles of kmeans_tiled, chunks of
// cubekit.dask.kmeans): the whole-scene engine's steps, each pass over the pixels asked of the
// pieces as a KmeansRequest and merged from their KmeansParts. Every merge is exact and does not
// depend on the order the parts arrive in (integer sums, minima, maxima, ranks), except the f64
// inertia, which is summed per piece and then over the pieces in raster order of their corners.
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kmeans/kmeans_internal.hpp"

namespace cubekit::detail {

enum class KmeansPass { Range, Moments, Sample, Assign, Farthest, Final, Labels };

using Corner = std::pair<int, int>;  ///< (y0, x0) of a piece: the pieces in raster order

/// What a pass asks of every piece.
struct KmeansRequest {
    KmeansPass pass = KmeansPass::Range;
    KmeansPlan plan;                 ///< the scene's (k = plan.k); incomplete for Range
    std::vector<double> a, p;        ///< Assign/Farthest: a; Final/Labels: assign a, measure p
    std::uint64_t seed = 0;          ///< Sample
    double rate = 1;                 ///< Sample
    bool all = false;                ///< Sample: every valid pixel
    std::size_t wanted = 0;          ///< Farthest
    std::map<Corner, std::vector<std::int64_t>> first_rank;  ///< Sample: per piece, per row
    std::vector<int> new_label;      ///< Labels: old → new label
};

/// A piece's answer (the fields of its pass).
struct KmeansPart {
    Corner corner;
    std::vector<std::int64_t> row_valid;  ///< Range
    KmeansStats stats;                    ///< Range
    BandMoments moments;                  ///< Moments
    TilePixels pixels;                    ///< Sample, Farthest
    TileSums sums;                        ///< Assign
    RestartStats final;                   ///< Final
};

/// The piece's answer to a request (any pass but Labels).
KmeansPart compute_part(const KmeansTile& tile, Corner corner, const KmeansRequest& request);

/// The piece's options: the scene's k with the piece's mask.
KmeansOptions piece_options(int k, std::vector<std::uint8_t> mask);

/// Runs one pass: hands `request` to every piece and every answer to `merge` (one at a time).
using PassRunner = std::function<void(const KmeansRequest& request, const std::function<void(KmeansPart&&)>& merge)>;

/// k-means++ over a gathered init sample (n × 1 × m, rank order) with the scene's plan: the k × m
/// centroids, +∞ for unset ones, as kmeans_sample_init_cpu returns them (kmeanspp_sample_init_cuda).
using SampleSeeding = std::function<std::vector<double>(const CubeView& sample, const KmeansPlan& plan, std::uint64_t seed)>;

/// The engine's steps over pieces: the first pass, the restarts (init, Lloyd, restart statistics),
/// the final counts and the sort. Fills `result` (labels excepted) and returns the old → new label
/// map; `final_request` is the Labels request that labels a piece (the CPU tile's label pass).
/// `kmeanspp`, when set, seeds k-means++ instead of the CPU engine (the same centroids).
std::vector<int> run_kmeans_pieces(const Context& ctx, int width, int height, int bands, DType dtype,
                                   const KmeansOptions& options, const PassRunner& run_pass, KmeansResult& result,
                                   KmeansRequest& final_request, const SampleSeeding& kmeanspp = {});

}  // namespace cubekit::detail
