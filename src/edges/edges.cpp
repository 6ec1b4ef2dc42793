// Front door of the entropy edge detector (spec edges.md): option and output checks, the input
// placed where the backend reads it, backend dispatch, and the threshold search of one histogram
// for callers and tests.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/outputs.hpp"
#include "cubekit/edges.hpp"
#include "cubekit/error.hpp"
#include "edges/edges_internal.hpp"

namespace cubekit {

EntropyEdgeBands entropy_edges_bands(int bands, const EntropyEdgeOptions& options) {
    const EdgeFusion fusion = resolved_fusion(options.fusion, bands);
    const int K = fusion_uses_pca(fusion) ? std::min(std::max(options.pca_components, 1), bands) : bands;
    switch (fusion) {
        case EdgeFusion::Auto:  // resolved above
        case EdgeFusion::None: return {bands, 0, bands, 0};
        case EdgeFusion::BandMean:
        case EdgeFusion::PcaMean:
        case EdgeFusion::ThresholdMean: return {1, 0, 1, 0};
        case EdgeFusion::EdgeVote:
        case EdgeFusion::PcaEdgeVote: return {1, K, K, 1};
        case EdgeFusion::BinaryVote:
        case EdgeFusion::PcaBinaryVote: return {1, K, 1, 1};
    }
    return {};
}

namespace {

// One output of entropy_edges_into, when given: `bands` bands of `dtype` in the context's memory;
// `bands` = 0 (the fusion has no such output) refuses a view.
void check_output(const Context& ctx, const CubeView& cube, const MutableCubeView& out, const char* name, int bands,
                  DType dtype) {
    const std::string who = std::string("entropy_edges_into: ") + name + " is";
    if (!out.data()) return;  // not asked for
    if (bands == 0) throw InvalidInput(who + " given, but this fusion has no such output");
    detail::check_output_memory(ctx, out, who);
    detail::check_output_shape(out, cube.width(), cube.height(), bands, dtype, who);
}

EntropyEdgeOptions resolved(const EntropyEdgeOptions& options, int bands) {
    EntropyEdgeOptions o = options;
    o.fusion = resolved_fusion(options.fusion, bands);
    return o;
}

// An output of the plain call: a host cube, or on a CUDA context a device cube downloaded at the
// end (dense to dense: one flat copy); none when not made.
struct HostOutput {
    Cube host;
    DeviceCube device;
    bool made = false;
    MutableCubeView view(const Context& ctx) { return ctx.is_cuda() ? device.mutable_view() : host.mutable_view(); }
    Cube take(const Context& ctx) { return made && ctx.is_cuda() ? device.download(ctx) : std::move(host); }
};

HostOutput make_output(const Context& ctx, const CubeView& cube, int bands, DType dtype) {
    HostOutput o;
    o.made = true;
    const CubeShape shape{cube.width(), cube.height(), bands, dtype, Layout::BSQ};
    if (ctx.is_cuda()) o.device = DeviceCube(ctx, shape);
    else o.host = Cube(shape.width, shape.height, shape.bands, shape.dtype, shape.layout);
    return o;
}

}  // namespace

EntropyEdgeSummary entropy_edges_into(const Context& ctx, const CubeView& cube, const MutableCubeView& edges,
                                      const EntropyEdgeOptions& options, const EntropyEdgeExtras& extras) {
    detail::check_edge_options(shape_of(cube), options);
    const EntropyEdgeOptions o = resolved(options, cube.bands());
    const EntropyEdgeBands n = entropy_edges_bands(cube.bands(), o);
    if (!edges.data()) throw InvalidInput("entropy_edges_into: edges is an empty view");
    check_output(ctx, cube, edges, "edges", n.edges, DType::U8);
    check_output(ctx, cube, extras.band_edges, "extras.band_edges", n.band_edges, DType::U8);
    check_output(ctx, cube, extras.binary, "extras.binary", n.binary, DType::U8);
    check_output(ctx, cube, extras.vote_count, "extras.vote_count", n.vote_count, DType::U16);
    ctx.log("edges: " + std::string(ctx.backend_name()) + ", fusion " + std::string(fusion_name(o.fusion)) + ", " +
            cube.describe());
    const detail::EdgeOutputs outputs{edges, extras};
    if (ctx.is_cuda()) {
        const CubeInLayout in(ctx, cube, Layout::BSQ, Memory::Device);  // the cube itself when dense BSQ there
        return detail::entropy_edges_cuda(ctx, in.view(), outputs, o);
    }
    std::optional<CubeInLayout> host;
    if (cube.on_device()) host.emplace(ctx, cube, Layout::BSQ, Memory::Host);
    return detail::entropy_edges_cpu(ctx, host ? host->view() : cube, outputs, o);
}

EntropyEdgeResult entropy_edges(const Context& ctx, const CubeView& cube, const EntropyEdgeOptions& options) {
    detail::check_edge_options(shape_of(cube), options);
    const EntropyEdgeOptions o = resolved(options, cube.bands());
    const EntropyEdgeBands n = entropy_edges_bands(cube.bands(), o);
    HostOutput edges = make_output(ctx, cube, n.edges, DType::U8), band_edges, binary, vote_count;
    EntropyEdgeExtras extras;
    if (o.keep_band_edges && n.band_edges > 0) {
        band_edges = make_output(ctx, cube, n.band_edges, DType::U8);
        extras.band_edges = band_edges.view(ctx);
    }
    if (o.keep_binary && n.binary > 0) {
        binary = make_output(ctx, cube, n.binary, DType::U8);
        extras.binary = binary.view(ctx);
    }
    if (n.vote_count > 0) {
        vote_count = make_output(ctx, cube, 1, DType::U16);
        extras.vote_count = vote_count.view(ctx);
    }
    EntropyEdgeResult r;
    static_cast<EntropyEdgeSummary&>(r) = entropy_edges_into(ctx, cube, edges.view(ctx), o, extras);
    r.edges = edges.take(ctx);
    r.band_edges = band_edges.take(ctx);
    r.binary = binary.take(ctx);
    r.vote_count = vote_count.take(ctx);
    return r;
}

std::vector<EdgeThresholds> entropy_band_thresholds(const Context& ctx, const CubeView& cube,
                                                    const EntropyEdgeOptions& options) {
    EntropyEdgeOptions o = options;
    o.fusion = EdgeFusion::None;  // no fusion runs: its limits do not apply
    detail::check_edge_options(shape_of(cube), o);
    ctx.log("edges thresholds: " + std::string(ctx.backend_name()) + ", " + cube.describe());
    if (ctx.is_cuda()) {
        const CubeInLayout in(ctx, cube, Layout::BSQ, Memory::Device);
        return detail::band_thresholds_cuda(ctx, in.view(), o.q, o.quantize);
    }
    std::optional<CubeInLayout> host;
    if (cube.on_device()) host.emplace(ctx, cube, Layout::BSQ, Memory::Host);
    return detail::band_thresholds_cpu(ctx, host ? host->view() : cube, o.q, o.quantize);
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
// CPU-only build: a CUDA context cannot exist, so these are unreachable through the public API.
EntropyEdgeSummary entropy_edges_cuda(const Context&, const CubeView&, const EdgeOutputs&, const EntropyEdgeOptions&,
                                      const EdgeSceneStats*) {
    throw DeviceError("edges: this cubekit was built without CUDA");
}
std::vector<EdgeThresholds> band_thresholds_cuda(const Context&, const CubeView&, double, Quantize) {
    throw DeviceError("edges: this cubekit was built without CUDA");
}
void quantize_cuda(const Context&, const CubeView&, const MutableCubeView&, Quantize) {
    throw DeviceError("quantize: this cubekit was built without CUDA");
}
}  // namespace detail
#endif

}  // namespace cubekit
