// Zernike reconstruction front door (spec zernike.md §3.12): validation, the whole set in
// canonical order per image, backend dispatch; the reconstruction error.
#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "core/outputs.hpp"
#include "core/view_sample.hpp"
#include "cubekit/error.hpp"
#include "cubekit/zernike.hpp"
#include "zernike/zernike_internal.hpp"

namespace cubekit {

namespace {

// A reconstruction after validation: order K and, per image, the whole set n ≤ K in canonical order.
struct ReconstructPlan {
    int K = -1;
    std::vector<std::complex<double>> set;
};

ReconstructPlan prepare(const ZernikeMoments& moments, const ZernikeDisk& disk, int max_order) {
    // The highest order K such that every (n, m), n ≤ K, is present.
    std::set<std::pair<int, int>> have;
    for (const ZernikeIndex& z : moments.indices) have.insert({z.n, z.m});
    int complete = -1;
    for (int n = 0;; ++n) {
        bool all = true;
        for (int m = n % 2; m <= n && all; m += 2) all = have.count({n, m}) > 0;
        if (!all) break;
        complete = n;
    }
    if (max_order < 0) max_order = complete;
    if (max_order < 0) throw InvalidInput("zernike_reconstruct: A(0,0) is missing; nothing to reconstruct");
    if (max_order > complete)
        throw InvalidInput("zernike_reconstruct: order " + std::to_string(max_order) + " asked for, but the moments are " +
                           "complete only up to order " + std::to_string(complete));
    if (disk.width < 1 || disk.height < 1 || disk.pixel_count < 1)
        throw InvalidInput("zernike_reconstruct: the target disk is empty; build it with zernike_disk()");
    ReconstructPlan p;
    p.K = max_order;
    const std::size_t size = zernike_set_size(max_order);
    p.set.resize(size * std::size_t(moments.images));
    for (std::size_t k = 0; k < moments.indices.size(); ++k) {
        const ZernikeIndex z = moments.indices[k];
        if (z.n > max_order) continue;
        for (int i = 0; i < moments.images; ++i)
            p.set[std::size_t(i) * size + zernike_set_index(z.n, z.m)] = moments.image(i)[k];
    }
    return p;
}

void run(const Context& ctx, const ReconstructPlan& p, int images, const ZernikeDisk& disk, const MutableCubeView& out) {
    ctx.log("zernike_reconstruct: " + std::string(ctx.backend_name()) + ", " + std::to_string(disk.width) + "x" +
            std::to_string(disk.height) + ", " + std::to_string(images) + " images, order " + std::to_string(p.K));
    if (ctx.is_cuda()) zernike::reconstruct_cuda(ctx, p.set, images, p.K, disk, out);
    else zernike::reconstruct_cpu(ctx, p.set, images, p.K, disk, out);
}

}  // namespace

Cube zernike_reconstruct(const Context& ctx, const ZernikeMoments& moments, const ZernikeDisk& disk, int max_order) {
    const ReconstructPlan p = prepare(moments, disk, max_order);
    return detail::host_result(ctx, {disk.width, disk.height, moments.images, DType::F64, Layout::BSQ},
                               [&](const MutableCubeView& out) { run(ctx, p, moments.images, disk, out); });
}

Cube zernike_reconstruct(const Context& ctx, const ZernikeMoments& moments, int max_order) {
    return zernike_reconstruct(ctx, moments, moments.disk, max_order);
}

void zernike_reconstruct_into(const Context& ctx, const ZernikeMoments& moments, const ZernikeDisk& disk,
                              const MutableCubeView& out, int max_order) {
    const ReconstructPlan p = prepare(moments, disk, max_order);
    detail::check_output_memory(ctx, out, "zernike_reconstruct_into: out is");
    detail::check_output_shape(out, disk.width, disk.height, moments.images, DType::F64, "zernike_reconstruct_into: out is");
    run(ctx, p, moments.images, disk, out);
}

std::vector<double> zernike_reconstruction_error(const CubeView& original, const CubeView& reconstruction,
                                                 const ZernikeDisk& disk) {
    if (original.width() != disk.width || original.height() != disk.height ||
        reconstruction.width() != disk.width || reconstruction.height() != disk.height ||
        original.bands() != reconstruction.bands())
        throw InvalidInput("zernike_reconstruction_error: the original (" + shape_of(original).describe() +
                           ") and the reconstruction (" + shape_of(reconstruction).describe() +
                           ") must both match the disk's " + std::to_string(disk.width) + "x" +
                           std::to_string(disk.height) + " and have as many bands");
    if (original.on_device() || reconstruction.on_device())
        throw InvalidInput("zernike_reconstruction_error: the original and the reconstruction must be in host memory");
    std::vector<double> out;
    for (int b = 0; b < original.bands(); ++b) {
        double diff = 0.0, norm = 0.0;
        for (int y = 0; y < disk.height; ++y)
            for (int x = 0; x < disk.width; ++x) {
                if (!disk.inside(x, y)) continue;
                const double f = detail::sample_as_double(original, x, y, b);
                const double g = detail::sample_as_double(reconstruction, x, y, b);
                diff += (g - f) * (g - f);
                norm += f * f;
            }
        out.push_back(norm > 0.0 ? std::sqrt(diff / norm) : (diff > 0.0 ? INFINITY : 0.0));
    }
    return out;
}

}  // namespace cubekit
