// Majority vote inside segmentation regions (spec gradient-watershed.md part C step 4, Decision
// C-1): the CPU reference. Integer counts per region, so the result does not depend on the thread
// count or the order of the pixels.
#include <algorithm>
#include <optional>
#include <string>

#include "classify/classify_cuda.hpp"
#include "classify/classify_internal.hpp"
#include "core/outputs.hpp"
#include "cubekit/error.hpp"

namespace cubekit {
namespace {

enum class Outcome { Relabelled, Tie, NoVoters, BelowTau };

// The pixels of each region: region r (its index among the distinct nonzero labels, ascending)
// holds pixels[start[r] .. start[r + 1]) in raster order.
struct RegionPixels {
    std::vector<std::int32_t> labels;  // distinct nonzero region labels, ascending
    std::vector<std::int64_t> start;
    std::vector<std::int64_t> pixels;
};

RegionPixels group_by_region(const std::vector<std::int32_t>& regions) {
    RegionPixels g;
    g.labels = detail::distinct_labels(regions);
    std::vector<std::int64_t> index(regions.size(), -1), count(g.labels.size() + 1, 0);
    for (std::size_t p = 0; p < regions.size(); ++p)
        if (regions[p] != 0) {
            index[p] = std::lower_bound(g.labels.begin(), g.labels.end(), regions[p]) - g.labels.begin();
            ++count[std::size_t(index[p]) + 1];
        }
    g.start.assign(g.labels.size() + 1, 0);
    for (std::size_t r = 0; r < g.labels.size(); ++r) g.start[r + 1] = g.start[r] + count[r + 1];
    std::vector<std::int64_t> next(g.start.begin(), g.start.end() - 1);
    g.pixels.resize(std::size_t(g.start.back()));
    for (std::size_t p = 0; p < regions.size(); ++p)
        if (index[p] >= 0) g.pixels[std::size_t(next[std::size_t(index[p])]++)] = std::int64_t(p);
    return g;
}

// The vote of one region: the classes of its voters, sorted, counted in runs.
Outcome vote_region(const std::int64_t* pixels, std::int64_t size, const std::vector<std::int32_t>& classes, double tau,
                    std::vector<std::int32_t>& voters, std::int32_t& winner) {
    voters.clear();
    for (std::int64_t i = 0; i < size; ++i)
        if (classes[std::size_t(pixels[i])] != 0) voters.push_back(classes[std::size_t(pixels[i])]);
    if (voters.empty()) return Outcome::NoVoters;
    std::sort(voters.begin(), voters.end());
    std::int64_t best = 0;
    bool tie = false;
    for (std::size_t i = 0; i < voters.size();) {
        std::size_t j = i;
        while (j < voters.size() && voters[j] == voters[i]) ++j;
        const auto n = std::int64_t(j - i);
        if (n > best) best = n, winner = voters[i], tie = false;
        else if (n == best) tie = true;
        i = j;
    }
    if (tie) return Outcome::Tie;
    if (double(best) / double(size) < tau) return Outcome::BelowTau;  // n_c*/|R| ≥ τ, as the spec writes it
    return Outcome::Relabelled;
}

VoteStats vote_cpu(const Context& ctx, const std::vector<std::int32_t>& regions, const std::vector<std::int32_t>& classes,
                   double tau, std::vector<std::int32_t>& out) {
    const RegionPixels g = group_by_region(regions);
    const auto R = std::int64_t(g.labels.size());
    std::vector<Outcome> outcome(static_cast<std::size_t>(R), Outcome::NoVoters);
    out = classes;
    detail::parallel_for(
        ctx, R, {.where = "region_vote", .schedule = detail::Schedule::Dynamic},
        [] { return std::vector<std::int32_t>(); },
        [&](std::int64_t r, std::vector<std::int32_t>& voters) {
            const std::int64_t* pixels = g.pixels.data() + g.start[std::size_t(r)];
            const std::int64_t size = g.start[std::size_t(r) + 1] - g.start[std::size_t(r)];
            std::int32_t winner = 0;
            outcome[std::size_t(r)] = vote_region(pixels, size, classes, tau, voters, winner);
            if (outcome[std::size_t(r)] == Outcome::Relabelled)
                for (std::int64_t i = 0; i < size; ++i) out[std::size_t(pixels[i])] = winner;
        });
    VoteStats s;
    s.regions = R;
    for (Outcome o : outcome) {
        s.relabelled += o == Outcome::Relabelled;
        s.ties += o == Outcome::Tie;
        s.no_voters += o == Outcome::NoVoters;
        s.below_tau += o == Outcome::BelowTau;
    }
    for (std::size_t p = 0; p < out.size(); ++p) s.changed_pixels += out[p] != classes[p];
    return s;
}

// Checks, reads both label images (downloaded for a CUDA context) and votes on the host.
VoteStats vote_labels(const Context& ctx, const CubeView& regions, const CubeView& class_map, const VoteOptions& options,
                      std::vector<std::int32_t>& voted) {
    check_fields(options, "region_vote");
    detail::check_label_image(class_map, "region_vote", "class_map");
    detail::check_label_image(regions, "region_vote", "regions", class_map.width(), class_map.height(), "class_map");
    ctx.log("region_vote: cpu reference, " + class_map.describe() + ", tau " + number_text(options.tau));
    const std::vector<std::int32_t> r = detail::label_values(ctx, regions, "region_vote", "regions");
    const std::vector<std::int32_t> c = detail::label_values(ctx, class_map, "region_vote", "class_map");
    return vote_cpu(ctx, r, c, options.tau, voted);
}

#ifdef CUBEKIT_HAVE_CUDA
// The vote on the device when both label images are i32 (other types are checked and converted on
// the host); nothing when the kernels decline (negative or sparse labels: the CPU reference decides).
std::optional<VoteStats> vote_on_device(const Context& ctx, const CubeView& regions, const CubeView& class_map,
                                        const MutableCubeView& out, const VoteOptions& options) {
    if (!ctx.is_cuda() || regions.dtype() != DType::I32 || class_map.dtype() != DType::I32) return std::nullopt;
    check_fields(options, "region_vote");
    detail::check_label_image(class_map, "region_vote", "class_map");
    detail::check_label_image(regions, "region_vote", "regions", class_map.width(), class_map.height(), "class_map");
    ctx.log("region_vote: cuda, " + class_map.describe() + ", tau " + number_text(options.tau));
    const CubeInLayout r(ctx, regions, Layout::BSQ, Memory::Device), c(ctx, class_map, Layout::BSQ, Memory::Device);
    const bool dense = out.is_dense(Layout::BSQ);
    DeviceCube scratch;
    if (!dense) scratch = DeviceCube(ctx, {out.width(), out.height(), 1, DType::I32, Layout::BSQ});
    const MutableCubeView target = dense ? out : scratch.mutable_view();
    const std::optional<VoteStats> stats = detail::region_vote_cuda(
        ctx, reinterpret_cast<const std::int32_t*>(r.view().data()), reinterpret_cast<const std::int32_t*>(c.view().data()),
        std::int64_t(class_map.num_pixels()), options.tau, reinterpret_cast<std::int32_t*>(target.data()));
    if (stats && !dense) copy_cube(ctx, scratch.view(), out);
    return stats;
}
#else
std::optional<VoteStats> vote_on_device(const Context&, const CubeView&, const CubeView&, const MutableCubeView&,
                                        const VoteOptions&) {
    return std::nullopt;
}
#endif

}  // namespace

VoteStats region_vote_into(const Context& ctx, const CubeView& regions, const CubeView& class_map,
                           const MutableCubeView& out, const VoteOptions& options) {
    detail::check_output_memory(ctx, out, "region_vote_into: out is");
    detail::check_output_shape(out, class_map.width(), class_map.height(), 1, DType::I32, "region_vote_into: out is");
    if (const std::optional<VoteStats> stats = vote_on_device(ctx, regions, class_map, out, options)) return *stats;
    std::vector<std::int32_t> voted;
    const VoteStats stats = vote_labels(ctx, regions, class_map, options, voted);
    copy_cube(ctx, detail::label_cube(class_map.width(), class_map.height(), voted), out);
    return stats;
}

VoteResult region_vote(const Context& ctx, const CubeView& regions, const CubeView& class_map,
                       const VoteOptions& options) {
    VoteResult result;
    if (ctx.is_cuda() && regions.dtype() == DType::I32 && class_map.dtype() == DType::I32) {
        result.classes = detail::host_result(ctx, {class_map.width(), class_map.height(), 1, DType::I32, Layout::BSQ},
                                             [&](const MutableCubeView& out) {
                                                 result.stats = region_vote_into(ctx, regions, class_map, out, options);
                                             });
        return result;
    }
    std::vector<std::int32_t> voted;
    result.stats = vote_labels(ctx, regions, class_map, options, voted);
    result.classes = detail::label_cube(class_map.width(), class_map.height(), voted);
    return result;
}

}  // namespace cubekit
