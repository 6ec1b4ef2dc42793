// Names and option checks of the entropy edge detector, and the exact vote rule (spec edges.md §3.8).
#include <boost/multiprecision/cpp_int.hpp>

#include <cmath>
#include <string>

#include "cubekit/error.hpp"
#include "edges/edges_internal.hpp"

namespace cubekit {

namespace {
struct FusionName {
    EdgeFusion fusion;
    std::string_view name;
};
constexpr FusionName kFusionNames[] = {
    {EdgeFusion::None, "none"},
    {EdgeFusion::BandMean, "mean"},
    {EdgeFusion::PcaMean, "pca"},
    {EdgeFusion::EdgeVote, "vote-edges"},
    {EdgeFusion::BinaryVote, "vote-binary"},
    {EdgeFusion::ThresholdMean, "threshold-mean"},
    {EdgeFusion::PcaEdgeVote, "pca-vote-edges"},
    {EdgeFusion::PcaBinaryVote, "pca-vote-binary"},
};
}  // namespace

std::string_view fusion_name(EdgeFusion f) {
    for (const FusionName& n : kFusionNames)
        if (n.fusion == f) return n.name;
    return "?";
}

EdgeFusion parse_fusion(std::string_view name, std::string_view what) {
    std::string all;
    for (const FusionName& n : kFusionNames) {
        if (n.name == name) return n.fusion;
        if (!all.empty()) all += '|';
        all += n.name;
    }
    throw InvalidInput(std::string(what) + " = '" + std::string(name) + "': expected " + all);
}

bool fusion_uses_pca(EdgeFusion f) {
    return f == EdgeFusion::PcaMean || f == EdgeFusion::PcaEdgeVote || f == EdgeFusion::PcaBinaryVote;
}
bool fusion_is_vote(EdgeFusion f) {
    return f == EdgeFusion::EdgeVote || f == EdgeFusion::BinaryVote || f == EdgeFusion::PcaEdgeVote ||
           f == EdgeFusion::PcaBinaryVote;
}

std::string_view quantize_name(Quantize q) { return q == Quantize::Global ? "global" : "per-band"; }

Quantize parse_quantize(std::string_view name, std::string_view what) {
    if (name == "per-band") return Quantize::PerBand;
    if (name == "global") return Quantize::Global;
    throw InvalidInput(std::string(what) + " = '" + std::string(name) + "': expected per-band or global");
}

namespace detail {

int votes_needed(double vote_percent, int k) {
    // A double is an exact binary rational, so x·K/100 is an exact rational and its floor is exact:
    // the vote never depends on how x·K would round in floating point.
    using boost::multiprecision::cpp_rational;
    const cpp_rational bound = cpp_rational(vote_percent) * k / 100;
    const boost::multiprecision::cpp_int floor_bound = numerator(bound) / denominator(bound);
    return floor_bound.convert_to<int>() + 1;
}

void check_edge_options(const CubeShape& shape, const EntropyEdgeOptions& o) {
    auto fail = [](const std::string& what) { throw InvalidInput("edges: " + what); };
    if (shape.width <= 0 || shape.height <= 0 || shape.bands <= 0)
        fail("the cube is " + std::to_string(shape.width) + "x" + std::to_string(shape.height) + "x" +
             std::to_string(shape.bands) + "; width, height and bands must be at least 1");
    if (std::size_t(shape.width) * std::size_t(shape.height) >= (std::size_t(1) << 31))
        fail("an image of " + std::to_string(shape.width) + "x" + std::to_string(shape.height) +
             " pixels is too large: at most 2^31 - 1 pixels per band");
    if (!(o.q > 0) || !std::isfinite(o.q)) fail("q = " + std::to_string(o.q) + "; expected a finite q > 0");
    if (!(o.vote_percent >= 0 && o.vote_percent < 100))
        fail("vote-percent = " + std::to_string(o.vote_percent) + "; expected 0 <= x < 100");
    if (o.pca_components < 1)
        fail("pca-components = " + std::to_string(o.pca_components) + "; expected at least 1");
    if (o.connectivity != 4 && o.connectivity != 8)
        fail("connectivity = " + std::to_string(o.connectivity) + "; expected 4 or 8");
    if (o.min_component < 0)
        fail("min-component = " + std::to_string(o.min_component) + "; expected 0 (off) or more");
    if (fusion_is_vote(o.fusion) && !fusion_uses_pca(o.fusion) && shape.bands > 65535)
        fail(std::to_string(shape.bands) + " bands: the vote count is 16-bit, at most 65535 maps");
}

}  // namespace detail
}  // namespace cubekit
