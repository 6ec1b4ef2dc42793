// Option checks of the entropy edge detector, and the exact vote rule (spec edges.md §3.8).
#include <boost/multiprecision/cpp_int.hpp>

#include <cmath>
#include <string>

#include "cubekit/error.hpp"
#include "edges/edges_internal.hpp"

namespace cubekit {

bool fusion_uses_pca(EdgeFusion f) {
    return f == EdgeFusion::PcaMean || f == EdgeFusion::PcaEdgeVote || f == EdgeFusion::PcaBinaryVote;
}
bool fusion_is_vote(EdgeFusion f) {
    return f == EdgeFusion::EdgeVote || f == EdgeFusion::BinaryVote || f == EdgeFusion::PcaEdgeVote ||
           f == EdgeFusion::PcaBinaryVote;
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
    check_fields(o, "edges");
    const EdgeFusion fusion = resolved_fusion(o.fusion, shape.bands);
    if (fusion_is_vote(fusion) && !fusion_uses_pca(fusion) && shape.bands > 65535)
        fail("the vote count is 16-bit, at most 65535 maps; the cube has " + std::to_string(shape.bands) + " bands");
}

}  // namespace detail
}  // namespace cubekit
