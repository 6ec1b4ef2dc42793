// Pixel-level detection front door (spec detect.md §A): validate once, group the models, run the
// backend, then the mask, labels and object table.
#include <cmath>
#include <optional>
#include <string>

#include "core/outputs.hpp"
#include "cubekit/error.hpp"
#include "detect/detect_internal.hpp"

namespace cubekit {

namespace {

void check_arguments(const CubeView& cube, std::span<const RbfnModel> models, const PixelOptions& options) {
    check_fields(options, "detect_pixels");
    if (models.empty()) throw InvalidInput("detect_pixels: no model given");
    if (cube.width() <= 0 || cube.height() <= 0 || cube.bands() <= 0)
        throw InvalidInput("detect_pixels: the cube is " + cube.describe() + "; width, height and bands must be at least 1");
    for (std::size_t j = 0; j < models.size(); ++j) {
        const std::string source = models.size() == 1 ? "model" : "model " + std::to_string(j);
        validate(models[j], source);
        if (models[j].bands != cube.bands())
            throw InvalidInput(source + ": bands = " + std::to_string(models[j].bands) + " but the cube has " +
                               std::to_string(cube.bands()) + " bands");
    }
}

void check_scores(const Context& ctx, const CubeView& cube, std::span<const MutableCubeView> scores, std::size_t models) {
    if (scores.size() != models)
        throw InvalidInput("rbfn_scores_into: " + std::to_string(scores.size()) + " score outputs for " +
                           std::to_string(models) + " models");
    for (const MutableCubeView& s : scores) {
        detail::check_output_memory(ctx, s, "rbfn_scores_into: a score map is");
        detail::check_output_shape(s, cube.width(), cube.height(), 1, DType::F32, "rbfn_scores_into: a score map is");
    }
}

bool dense_rows(const MutableCubeView& v) { return v.strides().x == 1 && v.strides().y == v.width(); }

void scores_cuda(const Context& ctx, const CubeView& cube, const std::vector<detail::RbfnGroup>& groups,
                 std::span<const MutableCubeView> scores, const PixelOptions& options) {
    const bool in_place = cube.on_device() && cube.device() == ctx.device() && detail::rbfn_cuda_accepts(cube);
    std::optional<CubeInLayout> converted;
    if (!in_place) {
        // One upload in the cube's own order when it is BIP- or BSQ-like, else a reorder to BIP.
        const Layout nearest = cube.nearest_layout();
        converted.emplace(ctx, cube, nearest == Layout::BSQ ? Layout::BSQ : Layout::BIP, Memory::Device);
    }
    const CubeView& input = in_place ? cube : converted->view();
    std::vector<DeviceCube> dense;  // for outputs whose rows are not contiguous
    std::vector<float*> out(scores.size());
    for (std::size_t j = 0; j < scores.size(); ++j) {
        if (dense_rows(scores[j])) {
            out[j] = reinterpret_cast<float*>(scores[j].data());
        } else {
            dense.emplace_back(ctx, CubeShape{cube.width(), cube.height(), 1, DType::F32, Layout::BSQ});
            out[j] = reinterpret_cast<float*>(dense.back().mutable_view().data());
        }
    }
    for (const detail::RbfnGroup& g : groups) {
        std::vector<float*> group_out;
        for (int index : g.model_index) group_out.push_back(out[std::size_t(index)]);
        detail::rbfn_scores_cuda(ctx, input, g, group_out, options);
    }
    for (std::size_t j = 0, d = 0; j < scores.size(); ++j)
        if (!dense_rows(scores[j])) copy_cube(ctx, dense[d++].view(), scores[j]);
    if (converted || !dense.empty()) ctx.synchronize();  // temporaries are freed stream-ordered
}

}  // namespace

std::string_view rbfn_implementation(const Context& ctx, const PixelOptions& options) {
    if (!ctx.is_cuda()) return "cpu";
    switch (options.mapping) {
        case RbfnMapping::Fused: return "cuda-fused";
        case RbfnMapping::Neuron: return "cuda-neuron";
        case RbfnMapping::Synapse: return "cuda-synapse";
    }
    return "?";
}

void rbfn_scores_into(const Context& ctx, const CubeView& cube, std::span<const RbfnModel> models,
                      std::span<const MutableCubeView> scores, const PixelOptions& options) {
    check_arguments(cube, models, options);
    check_scores(ctx, cube, scores, models.size());
    ctx.log("detect rbfn: " + std::string(rbfn_implementation(ctx, options)) + ", " + cube.describe() + ", " +
            std::to_string(models.size()) + " model(s)");
    const std::vector<detail::RbfnGroup> groups = detail::rbfn_groups(models);
    if (ctx.is_cuda()) {
        scores_cuda(ctx, cube, groups, scores, options);
        return;
    }
    std::optional<CubeInLayout> host;
    if (cube.on_device()) host.emplace(ctx, cube, Layout::BIP, Memory::Host);
    for (const detail::RbfnGroup& g : groups) {
        std::vector<MutableCubeView> group_scores;
        for (int index : g.model_index) group_scores.push_back(scores[std::size_t(index)]);
        detail::rbfn_scores_cpu(ctx, host ? host->view() : cube, g, group_scores);
    }
}

std::vector<PixelResult> detect_pixels_many(const Context& ctx, const CubeView& cube, std::span<const RbfnModel> models,
                                            const PixelOptions& options) {
    check_arguments(cube, models, options);
    const CubeShape shape{cube.width(), cube.height(), 1, DType::F32, Layout::BSQ};
    std::vector<PixelResult> results(models.size());
    if (ctx.is_cuda()) {
        std::vector<DeviceCube> d_scores;
        std::vector<MutableCubeView> views;
        for (std::size_t j = 0; j < models.size(); ++j) d_scores.emplace_back(ctx, shape);
        for (DeviceCube& d : d_scores) views.push_back(d.mutable_view());
        rbfn_scores_into(ctx, cube, models, views, options);
        for (std::size_t j = 0; j < models.size(); ++j) results[j].score = d_scores[j].download(ctx);
    } else {
        std::vector<MutableCubeView> views;
        for (PixelResult& r : results) {
            r.score = Cube(shape.width, shape.height, 1, DType::F32, Layout::BSQ);
            views.push_back(r.score.mutable_view());
        }
        rbfn_scores_into(ctx, cube, models, views, options);
    }
    for (std::size_t j = 0; j < models.size(); ++j) {
        PixelResult& r = results[j];
        r.threshold = std::isnan(options.threshold) ? models[j].threshold : options.threshold;
        const float* s = r.score.data<float>();
        for (std::size_t p = 0; p < r.score.num_elements(); ++p) r.non_finite += std::isnan(s[p]) ? 1 : 0;
        if (options.objects) objects_from_scores(ctx, r.score, r.threshold, options, r);
    }
    return results;
}

PixelResult detect_pixels(const Context& ctx, const CubeView& cube, const RbfnModel& model, const PixelOptions& options) {
    return std::move(detect_pixels_many(ctx, cube, std::span<const RbfnModel>(&model, 1), options).front());
}

}  // namespace cubekit

#ifndef CUBEKIT_HAVE_CUDA
namespace cubekit::detail {
// CPU-only build: a CUDA context cannot exist, so these are unreachable through the public API.
bool rbfn_cuda_accepts(const CubeView&) { return false; }
void rbfn_scores_cuda(const Context&, const CubeView&, const RbfnGroup&, std::span<float* const>, const PixelOptions&) {
    throw DeviceError("detect rbfn: this cubekit was built without CUDA");
}
}  // namespace cubekit::detail
#endif
