// Front door of the entropy edge detector (spec edges.md): option checks, backend dispatch, and the
// threshold search of one histogram for callers and tests.
#include <string>
#include <vector>

#include "cubekit/edges.hpp"
#include "cubekit/error.hpp"
#include "edges/edges_internal.hpp"

namespace cubekit {

EntropyEdgeResult entropy_edges(const Context& ctx, const Cube& cube, const EntropyEdgeOptions& options) {
    detail::check_edge_options(cube.shape(), options);
    ctx.log("edges: " + std::string(ctx.backend_name()) + ", fusion " + std::string(fusion_name(options.fusion)) +
            ", " + cube.shape().describe());
    return ctx.is_cuda() ? detail::entropy_edges_cuda(ctx, cube, options) : detail::entropy_edges_cpu(ctx, cube, options);
}

namespace {
void check_histogram(const std::uint32_t* histogram, std::string_view who) {
    std::uint64_t total = 0;
    for (int g = 0; g < 256; ++g) total += histogram[g];
    if (total == 0) throw InvalidInput(std::string(who) + ": the histogram is empty (all 256 counts are 0)");
}
}  // namespace

EdgeThresholds entropy_thresholds(const std::uint32_t* histogram, double q) {
    check_histogram(histogram, "entropy_thresholds");
    if (!(q > 0)) throw InvalidInput("entropy_thresholds: q = " + std::to_string(q) + "; expected q > 0");
    return detail::edges::to_public(detail::edges::thresholds_from_histogram(histogram, q));
}

std::vector<double> shannon_curve(const std::uint32_t* histogram) {
    check_histogram(histogram, "shannon_curve");
    std::vector<std::uint32_t> counts;
    for (int g = 0; g < 256; ++g)
        if (histogram[g] != 0) counts.push_back(histogram[g]);
    if (counts.size() < 2) return {};
    std::vector<double> h(counts.size() - 1);
    detail::edges::shannon_objective(counts.data(), int(counts.size()), h.data());
    return h;
}

std::vector<double> tsallis_curve(const std::vector<std::uint64_t>& counts, double q) {
    std::vector<std::uint32_t> c;
    for (std::uint64_t x : counts) {
        if (x == 0 || x > 0xffffffffu) throw InvalidInput("tsallis_curve: counts must be in 1..2^32-1");
        c.push_back(std::uint32_t(x));
    }
    if (c.size() < 2) return {};
    std::vector<double> h(c.size() - 1);
    detail::edges::tsallis_objective(c.data(), int(c.size()), q, h.data());
    return h;
}

#ifndef CUBEKIT_HAVE_CUDA
namespace detail {
EntropyEdgeResult entropy_edges_cuda(const Context&, const Cube&, const EntropyEdgeOptions&) {
    throw DeviceError("edges: this cubekit was built without CUDA");
}
EntropyEdgeResult entropy_edges_device(const Context&, const DeviceCube&, const EntropyEdgeOptions&, bool) {
    throw DeviceError("edges: this cubekit was built without CUDA");
}
void edges_thresholds_device(const Context&, const DeviceCube&, double) {
    throw DeviceError("edges: this cubekit was built without CUDA");
}
Cube quantize_to_u8_cuda(const Context&, const Cube&, Quantize) {
    throw DeviceError("quantize: this cubekit was built without CUDA");
}
}  // namespace detail
#endif

}  // namespace cubekit
