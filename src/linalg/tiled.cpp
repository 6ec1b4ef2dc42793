// PCA in tiles (tiles.hpp, linalg.hpp): the fit's exact sums gathered over the scene's tiles and merged
// exactly (float input: a first pass for the pixels used and the largest |x|, which fix the scene's
// fixed point), one eigensolve on the merged sums, then the scores in tiles (no halo). Integer sums do
// not depend on how the pixels are split, so the model and the scores equal pca_into's bit for bit.
#include <algorithm>
#include <optional>
#include <type_traits>
#include <string>
#include <vector>

#include "core/tiled_local.hpp"
#include "cubekit/error.hpp"
#include "cubekit/linalg.hpp"
#include "linalg/pca_internal.hpp"

namespace cubekit {

namespace {

constexpr const char* kWhere = "pca";

std::size_t reorder_bytes(const detail::TileSource& s) {
    return s.layout != Layout::BSQ ? std::size_t(s.bands) * dtype_size(s.dtype) : 0;
}

// The scan (float input) and the sums of one tile, on the worker's backend.
detail::PcaScan scan_tile(const Context& c, const CubeView& window) {
    return detail::on_backend(c, window, [&](const CubeView& in) {
        return c.is_cuda() ? detail::pca_scan_device(c, in) : detail::pca_scan_cpu(c, in);
    });
}
detail::PcaSums sums_tile(const Context& c, const CubeView& window, std::optional<int> exponent) {
    return detail::on_backend(c, window, [&](const CubeView& in) {
        return c.is_cuda() ? detail::pca_sums_device(c, in, exponent) : detail::pca_sums_cpu(c, in, exponent);
    });
}

PcaTiled pca_source(const Context& ctx, const detail::TileSource& src, const MutableCubeView& scores,
                    const PcaOptions& options, const TileOptions& tiles) {
    const CubeShape shape{src.width, src.height, src.bands, src.dtype, src.layout};
    detail::check_pca_cube(shape, "pca_tiled");
    detail::check_pca_components(options.components, src.bands, "pca_tiled");
    ctx.log("pca tiled: " + std::string(ctx.backend_name()) + ", " + shape.describe());
    PcaTiled result;
    // As the backends decide (a fixed point for the floating-point types).
    const bool is_float = visit_dtype(src.dtype, [](auto tag) { return std::is_floating_point_v<decltype(tag)>; });

    // Pass 1 (float input): the pixels used and the largest |x| among them fix the fixed point.
    std::optional<int> exponent;
    if (is_float) {
        detail::PcaScan scene;
        const auto merge = [&](const detail::PcaScan& part) {  // a sum and a max: any order
            scene.count += part.count;
            scene.max_abs = std::max(scene.max_abs, part.max_abs);
        };
        detail::merge_peak(result.run, detail::run_statistics_pass(ctx, src, tiles, kWhere, reorder_bytes(src) + 1, 1,
                                                                   scan_tile, merge));
        if (scene.count == 0) throw InvalidInput("pca_tiled: no pixel has all its bands finite; nothing to fit");
        exponent = detail::pca_fixed_point_exponent(scene.max_abs, scene.count);
    }
    // Pass 2: the exact sums with the scene's fixed point, merged.
    detail::PcaSums sums;
    sums.bands = src.bands;
    sums.exponent = exponent.value_or(0);
    sums.first.assign(std::size_t(src.bands), 0);
    sums.second.assign(std::size_t(src.bands) * std::size_t(src.bands), 0);
    detail::merge_peak(result.run, detail::run_statistics_pass(
                                       ctx, src, tiles, kWhere, reorder_bytes(src) + 1, 1,
                                       [&](const Context& c, const CubeView& w) { return sums_tile(c, w, exponent); },
                                       [&](const detail::PcaSums& part) { detail::add_pca_sums(sums, part); }));
    result.model = detail::pca_model_from_sums(sums, options.components);

    // Pass 3: the scores, a pixel's from its own samples (no halo).
    detail::LocalTileKernel k;
    k.out_dtype = DType::F64;
    k.out_bands = options.components;
    k.device_work_bytes_per_pixel = reorder_bytes(src);
    k.run = [&](const Context& c, const CubeView& window, const MutableCubeView& out) {
        if (!c.is_cuda()) return detail::pca_transform_cpu(c, window, result.model, out);
        const CubeInLayout in(c, window, Layout::BSQ, Memory::Device);
        detail::pca_transform_device(c, in.view(), result.model, reinterpret_cast<double*>(out.data()));
    };
    const TiledRun maps = detail::run_local_tiles(ctx, src, scores, k, tiles, kWhere);
    detail::merge_peak(result.run, maps);
    result.run.tiles = maps.tiles, result.run.tile_width = maps.tile_width, result.run.tile_height = maps.tile_height;
    result.run.devices = maps.devices;
    result.run.direct_input = maps.direct_input, result.run.direct_output = maps.direct_output;
    result.passes = is_float ? 3 : 2;
    return result;
}

}  // namespace

namespace detail {

void add_pca_sums(PcaSums& into, const PcaSums& part) {
    if (part.bands != into.bands || part.exponent != into.exponent || part.first.size() != into.first.size() ||
        part.second.size() != into.second.size())
        throw InvalidInput("pca: sums of different shapes or fixed points cannot be merged (internal)");
    into.count += part.count;
    for (std::size_t i = 0; i < into.first.size(); ++i) into.first[i] += part.first[i];
    for (std::size_t i = 0; i < into.second.size(); ++i) into.second[i] += part.second[i];
}

#ifndef CUBEKIT_HAVE_CUDA
// CPU-only build: a CUDA context cannot exist, so these are unreachable through the public API.
PcaSums pca_sums_device(const Context&, const CubeView&, std::optional<int>) {
    throw DeviceError("pca: this cubekit was built without CUDA");
}
PcaScan pca_scan_device(const Context&, const CubeView&) { throw DeviceError("pca: this cubekit was built without CUDA"); }
#endif

}  // namespace detail

namespace {

PcaPieceSums to_public(const detail::PcaSums& s) {
    PcaPieceSums p{s.bands, s.count, s.exponent, s.first, {}};
    p.second.reserve(2 * s.second.size());
    for (const detail::i128 v : s.second) {
        const auto u = static_cast<unsigned __int128>(v);
        p.second.push_back(std::uint64_t(u)), p.second.push_back(std::uint64_t(u >> 64));
    }
    return p;
}

detail::PcaSums from_public(const PcaPieceSums& p, const char* who) {
    const std::size_t B = std::size_t(std::max(p.bands, 0));
    if (p.bands < 1 || p.first.size() != B || p.second.size() != 2 * B * B || p.count < 0)
        throw InvalidInput(std::string(who) + ": sums of " + std::to_string(p.bands) + " bands hold " +
                           std::to_string(p.first.size()) + " first-order and " + std::to_string(p.second.size()) +
                           " second-order words; expected B and 2*B*B");
    detail::PcaSums s;
    s.bands = p.bands, s.count = p.count, s.exponent = p.exponent, s.first = p.first;
    s.second.resize(B * B);
    for (std::size_t i = 0; i < B * B; ++i)
        s.second[i] = detail::i128((static_cast<unsigned __int128>(p.second[2 * i + 1]) << 64) | p.second[2 * i]);
    return s;
}

}  // namespace

PcaPieceScan pca_piece_scan(const Context& ctx, const CubeView& piece) {
    detail::check_pca_cube(shape_of(piece), "pca_piece_scan");
    const detail::PcaScan s = scan_tile(ctx, piece);
    return {s.count, s.max_abs};
}

int pca_scene_exponent(const PcaPieceScan& scene) {
    if (scene.count <= 0) throw InvalidInput("pca: no pixel has all its bands finite; nothing to fit");
    return detail::pca_fixed_point_exponent(scene.max_abs, scene.count);
}

PcaPieceSums pca_piece_sums(const Context& ctx, const CubeView& piece, int exponent) {
    detail::check_pca_cube(shape_of(piece), "pca_piece_sums");
    return to_public(sums_tile(ctx, piece, exponent));
}

void pca_add_sums(PcaPieceSums& into, const PcaPieceSums& part) {
    detail::PcaSums a = from_public(into, "pca_add_sums");
    detail::add_pca_sums(a, from_public(part, "pca_add_sums"));
    into = to_public(a);
}

PcaModel pca_model_from_piece_sums(const PcaPieceSums& sums, int components) {
    detail::check_pca_components(components, sums.bands, "pca_model_from_piece_sums");
    return detail::pca_model_from_sums(from_public(sums, "pca_model_from_piece_sums"), components);
}

PcaTiled pca_tiled(const Context& ctx, const CubeView& cube, const MutableCubeView& scores, const PcaOptions& options,
                   const TileOptions& tiles) {
    return pca_source(ctx, detail::tile_source(cube), scores, options, tiles);
}

PcaTiled pca_tiled(const Context& ctx, const CubeFile& file, const MutableCubeView& scores, const PcaOptions& options,
                   const TileOptions& tiles) {
    return pca_source(ctx, detail::tile_source(file), scores, options, tiles);
}

}  // namespace cubekit
