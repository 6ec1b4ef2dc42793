// Multi-resolution detection front door (spec detect.md §B): validate, choose the backend.
#include <algorithm>
#include <optional>
#include <string>

#include "cubekit/error.hpp"
#include "detect/detect_internal.hpp"

namespace cubekit {

namespace {

bool is_power_of_two(int v) { return v >= 1 && (v & (v - 1)) == 0; }

// What the CUDA backend reads: `cube` itself when it is on the context's device with strides the
// kernels take, else one upload or reorder (in the cube's nearer of BSQ and BIP) kept in `converted`.
const CubeView& device_input(const Context& ctx, const CubeView& cube, std::optional<CubeInLayout>& converted) {
    if (cube.on_device() && cube.device() == ctx.device() && detail::multires_cuda_accepts(cube)) return cube;
    converted.emplace(ctx, cube, cube.nearest_layout() == Layout::BSQ ? Layout::BSQ : Layout::BIP, Memory::Device);
    return converted->view();
}

void check_cube(const CubeView& cube, const char* who) {
    if (cube.width() <= 0 || cube.height() <= 0 || cube.bands() <= 0)
        throw InvalidInput(std::string(who) + ": the cube is " + cube.describe() + "; width, height and bands must be at least 1");
}

}  // namespace

int multires_top_level(int width, int height, int block) {
    const std::int64_t bx = (std::int64_t(width) + block - 1) / block, by = (std::int64_t(height) + block - 1) / block;
    int top = 0;
    while ((std::int64_t(1) << top) < std::max(bx, by)) ++top;
    return top;
}

std::string_view multires_implementation(const Context& ctx) { return ctx.is_cuda() ? "cuda" : "cpu"; }

namespace detail {

TreeGeometry tree_geometry(int width, int height, int bands, int block) {
    TreeGeometry g;
    g.width = width;
    g.height = height;
    g.bands = bands;
    g.block = block;
    g.top = multires_top_level(width, height, block);
    return g;
}

TreeGeometry tree_geometry(const CubeView& cube, int block) {
    return tree_geometry(cube.width(), cube.height(), cube.bands(), block);
}

void sort_windows(MultiresResult& r) {
    std::sort(r.detections.begin(), r.detections.end(),
              [](const Window& a, const Window& b) { return a.y0 != b.y0 ? a.y0 < b.y0 : a.x0 < b.x0; });
    std::sort(r.trace.begin(), r.trace.end(), [](const Window& a, const Window& b) {
        if (a.level != b.level) return a.level > b.level;
        return a.y0 != b.y0 ? a.y0 < b.y0 : a.x0 < b.x0;
    });
}

}  // namespace detail

namespace detail {

void check_multires(const MultiresModel& model, const MultiresOptions& options) {
    check_fields(options, "detect_multires");
    validate(model, "model");
}

void check_multires_bands(const MultiresModel& model, int bands) {
    if (model.ann1.inputs != bands)
        throw InvalidInput("model: ann1.inputs = " + std::to_string(model.ann1.inputs) + " but the cube has " +
                           std::to_string(bands) + " bands");
}

MultiresResult detect_from_level0(const Context& ctx, PyramidLevel level0, std::int64_t skipped, const TreeGeometry& g,
                                  const MultiresModel& model, const MultiresOptions& options) {
    if (ctx.is_cuda()) return detect_multires_cuda(ctx, level0, skipped, g, model, options);
    MultiresResult r = descend_cpu(pyramid_from_level0(std::move(level0), g), g, model, options);
    r.skipped_samples = skipped;
    return r;
}

}  // namespace detail

MultiresResult detect_multires(const Context& ctx, const CubeView& cube, const MultiresModel& model,
                               const MultiresOptions& options) {
    detail::check_multires(model, options);
    check_cube(cube, "detect_multires");
    detail::check_multires_bands(model, cube.bands());
    const detail::TreeGeometry g = detail::tree_geometry(cube, model.block);
    ctx.log("detect multires: " + std::string(multires_implementation(ctx)) + ", " + cube.describe() + ", " +
            std::to_string(g.top + 1) + " levels");
    if (ctx.is_cuda()) {
        std::optional<CubeInLayout> converted;
        return detail::detect_multires_cuda(ctx, device_input(ctx, cube, converted), g, model, options);
    }
    std::optional<CubeInLayout> host;
    if (cube.on_device()) host.emplace(ctx, cube, Layout::BIP, Memory::Host);
    std::int64_t skipped = 0;
    const auto pyramid = detail::build_pyramid_cpu(ctx, host ? host->view() : cube, g, skipped);
    MultiresResult r = detail::descend_cpu(pyramid, g, model, options);
    r.skipped_samples = skipped;
    return r;
}

BlockSums multires_block_sums(const Context& ctx, const CubeView& cube, int block) {
    check_cube(cube, "multires_block_sums");
    if (!is_power_of_two(block)) throw InvalidInput("multires_block_sums: block = " + std::to_string(block) + "; expected a power of two");
    detail::TreeGeometry g = detail::tree_geometry(cube, block);
    g.top = 0;
    BlockSums sums;
    detail::PyramidLevel level0;
    if (ctx.is_cuda()) {
        std::optional<CubeInLayout> converted;
        level0 = detail::block_sums_cuda(ctx, device_input(ctx, cube, converted), g, sums.skipped);
    } else {
        std::optional<CubeInLayout> host;
        if (cube.on_device()) host.emplace(ctx, cube, Layout::BIP, Memory::Host);
        level0 = detail::block_sums_cpu(ctx, host ? host->view() : cube, g, sums.skipped);
    }
    sums.gx = level0.gx;
    sums.gy = level0.gy;
    sums.bands = cube.bands();
    sums.block = block;
    sums.n = std::move(level0.n);
    sums.s1 = std::move(level0.s1);
    sums.s2 = std::move(level0.s2);
    return sums;
}

MultiresResult detect_multires_from_sums(const Context& ctx, BlockSums sums, int width, int height, const MultiresModel& model,
                                         const MultiresOptions& options) {
    detail::check_multires(model, options);
    if (width < 1 || height < 1) throw InvalidInput("detect_multires_from_sums: the scene is " + std::to_string(width) + "x" + std::to_string(height));
    detail::check_multires_bands(model, sums.bands);
    if (sums.block != model.block)
        throw InvalidInput("detect_multires_from_sums: the sums are of " + std::to_string(sums.block) + "-pixel blocks, the model's block is " +
                           std::to_string(model.block));
    const detail::TreeGeometry g = detail::tree_geometry(width, height, sums.bands, model.block);
    const std::size_t values = std::size_t(g.grid_x(0)) * std::size_t(g.grid_y(0)) * std::size_t(g.bands);
    if (sums.gx != g.grid_x(0) || sums.gy != g.grid_y(0) || sums.n.size() != values || sums.s1.size() != values || sums.s2.size() != values)
        throw InvalidInput("detect_multires_from_sums: the sums hold " + std::to_string(sums.gx) + "x" + std::to_string(sums.gy) +
                           " blocks; a " + std::to_string(width) + "x" + std::to_string(height) + " scene has " +
                           std::to_string(g.grid_x(0)) + "x" + std::to_string(g.grid_y(0)));
    detail::PyramidLevel level0{sums.gx, sums.gy, std::move(sums.n), std::move(sums.s1), std::move(sums.s2)};
    return detail::detect_from_level0(ctx, std::move(level0), sums.skipped, g, model, options);
}

std::vector<double> window_features(const Context& ctx, const CubeView& cube, int block, int level,
                                    std::vector<std::int64_t>* counts) {
    check_cube(cube, "window_features");
    if (!is_power_of_two(block)) throw InvalidInput("window_features: block = " + std::to_string(block) + "; expected a power of two");
    const detail::TreeGeometry g = detail::tree_geometry(cube, block);
    if (level < 0 || level > g.top)
        throw InvalidInput("window_features: level = " + std::to_string(level) + "; expected 0.." + std::to_string(g.top));
    if (ctx.is_cuda()) {
        std::optional<CubeInLayout> converted;
        return detail::window_features_cuda(ctx, device_input(ctx, cube, converted), g, level, counts);
    }
    std::optional<CubeInLayout> host;
    if (cube.on_device()) host.emplace(ctx, cube, Layout::BIP, Memory::Host);
    std::int64_t skipped = 0;
    detail::TreeGeometry upto = g;
    upto.top = level;
    const auto pyramid = detail::build_pyramid_cpu(ctx, host ? host->view() : cube, upto, skipped);
    const detail::PyramidLevel& L = pyramid[std::size_t(level)];
    const std::int64_t nodes = std::int64_t(L.gx) * L.gy;
    std::vector<double> features(std::size_t(nodes) * std::size_t(g.bands), std::numeric_limits<double>::quiet_NaN());
    for (std::int64_t node = 0; node < nodes; ++node)
        detail::node_feature(L, node, g.bands, features.data() + std::size_t(node) * std::size_t(g.bands));
    if (counts) counts->assign(L.n.begin(), L.n.end());
    return features;
}

}  // namespace cubekit

#ifndef CUBEKIT_HAVE_CUDA
namespace cubekit::detail {
// CPU-only build: a CUDA context cannot exist, so these are unreachable through the public API.
bool multires_cuda_accepts(const CubeView&) { return false; }
MultiresResult detect_multires_cuda(const Context&, const CubeView&, const TreeGeometry&, const MultiresModel&,
                                    const MultiresOptions&) {
    throw DeviceError("detect multires: this cubekit was built without CUDA");
}
std::vector<double> window_features_cuda(const Context&, const CubeView&, const TreeGeometry&, int, std::vector<std::int64_t>*) {
    throw DeviceError("window_features: this cubekit was built without CUDA");
}
PyramidLevel block_sums_cuda(const Context&, const CubeView&, const TreeGeometry&, std::int64_t&) {
    throw DeviceError("detect multires: this cubekit was built without CUDA");
}
MultiresResult detect_multires_cuda(const Context&, const PyramidLevel&, std::int64_t, const TreeGeometry&, const MultiresModel&,
                                    const MultiresOptions&) {
    throw DeviceError("detect multires: this cubekit was built without CUDA");
}
}  // namespace cubekit::detail
#endif
