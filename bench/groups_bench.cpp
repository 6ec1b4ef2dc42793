// Zernike moments in groups and colour quantization in tiles (issue 17), host in, host out, against the
// whole calls on the same device, with the results compared:
//   1. Zernike set n <= 20 (121 moments) of a batch of 256×256 f32 images: the Samson scene's bands
//      mirror-tiled to 256×256, the batch its bands repeated (--images, default 624: 164 MB).
//      zernike_set whole (one upload of the batch) against zernike_set_tiled: default groups (streamed
//      through 3 lanes), a 64 MiB device budget, and groups of 8 images.
//   2. quantize_image_into (host outputs) against quantize_image_tiled on chelsea.png mirror-tiled to
//      3840×2160 (24.9 MB), k = 16, 10 iterations from the k-means++ seeds, tol = 0: default tiles and
//      a 64 MiB device budget.
// Floors: the batch over the link (bytes / 55 GB/s pinned, 15 pageable: the whole call uploads from
// pageable memory); each k-means iteration in tiles reads the image again (a pass: 24.9 MB / 55 GB/s).
// Median of --runs (default 5) after one warm-up.
//
// Usage: groups_bench [--images N] [--runs R]
#include <algorithm>
#include <chrono>
#include <complex>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "cubekit/io.hpp"
#include "cubekit/quantize_image.hpp"
#include "cubekit/zernike.hpp"

using namespace cubekit;

namespace {

double median_ms(int runs, const std::function<void()>& work) {
    work();  // warm-up
    return bench::wall_median_ms(work, runs);
}

void row(const std::string& what, double ms, double bytes, const std::string& check) {
    std::printf("| %s | %.2f | %.1f | %s |\n", what.c_str(), ms, bytes / ms * 1e-6, check.c_str());  // bytes/ms·1e-6 = GB/s
}

void zernike_rows(const Context& gpu, int images, int runs) {
    const Cube samson = read_cube(std::string(CUBEKIT_SOURCE_DIR) + "/data/samson/samson_1.img");
    const Cube tile = bench::tile_scene(samson, 256, 256, samson.bands(), DType::F32);
    Cube batch(256, 256, images, DType::F32, Layout::BSQ);
    const std::size_t plane = tile.num_bytes() / std::size_t(tile.bands());
    for (int i = 0; i < images; ++i)
        std::memcpy(batch.bytes() + std::size_t(i) * plane, tile.bytes() + std::size_t(i % tile.bands()) * plane, plane);
    const double bytes = double(batch.num_bytes());
    std::printf("\nZernike set n <= 20 of %d images of 256x256 f32 (%.1f MB); floor %.2f ms pinned, %.2f ms pageable\n\n",
                images, bytes * 1e-6, bytes / 55e6, bytes / 15e6);
    std::printf("| run | ms | GB/s of images | same values as whole |\n|---|---|---|---|\n");
    ZernikeMoments whole;
    const double whole_ms = median_ms(runs, [&] { whole = zernike_set(gpu, batch, 20); });
    row("zernike_set whole (pageable upload)", whole_ms, bytes, "-");
    const ImageStack stack = image_stack(batch.view());
    const CubeShape s = zernike_moments_shape(images, int(whole.count()));
    std::vector<std::complex<double>> got(whole.values.size());
    const MutableCubeView out =
        MutableCubeView::host(got.data(), s.width, s.height, 2, DType::F64, dense_strides(s.width, s.height, 2, s.layout));
    for (const auto& [name, t] : std::vector<std::pair<std::string, TileOptions>>{
             {"tiled, default groups", {}}, {"tiled, 64 MiB device budget", {.device_memory_limit = 64 << 20}},
             {"tiled, groups of 8 images", {.tile_height = 8}}}) {
        ZernikeTiled info;
        std::fill(got.begin(), got.end(), std::complex<double>(-1, -1));
        const double ms = median_ms(runs, [&] { info = zernike_set_tiled(gpu, stack, 20, out, {}, t); });
        const bool same = std::memcmp(got.data(), whole.values.data(), got.size() * sizeof(got[0])) == 0;
        row(name + " (" + std::to_string(info.run.tiles) + " groups of " + std::to_string(info.run.tile_height) + ")", ms,
            bytes, same ? "yes" : "NO");
    }
}

void quantize_rows(const Context& gpu, int runs) {
    const Cube photo = read_cube(std::string(CUBEKIT_SOURCE_DIR) + "/data/photos/chelsea.png");
    const Cube big = bench::tile_scene(photo, 3840, 2160, 3, DType::U8).to_layout(Layout::BIP);
    const double bytes = double(big.num_bytes());
    std::printf("\nquantize 3840x2160 RGB u8 (chelsea mirror-tiled, %.1f MB), k = 16, 10 iterations, tol 0; one pass over "
                "the link %.2f ms pinned\n\n", bytes * 1e-6, bytes / 55e6);
    std::printf("| run | ms | GB/s of image | same image and labels as whole |\n|---|---|---|---|\n");
    const QuantizeImageOptions o{.kmeans = {.k = 16, .seed = 1, .max_iter = 10, .tol = 0}};
    Cube out(3840, 2160, 3, DType::U8, Layout::BIP), labels(3840, 2160, 1, DType::I32);
    const double whole_ms = median_ms(runs, [&] { quantize_image_into(gpu, big, out.mutable_view(), labels.mutable_view(), o); });
    row("quantize_image_into whole, host outputs", whole_ms, bytes, "-");
    for (const auto& [name, t] : std::vector<std::pair<std::string, TileOptions>>{
             {"tiled, default tiles", {}}, {"tiled, 64 MiB device budget", {.device_memory_limit = 64 << 20}}}) {
        Cube tout(3840, 2160, 3, DType::U8, Layout::BIP), tlabels(3840, 2160, 1, DType::I32);
        QuantizeTiled info;
        const double ms = median_ms(runs, [&] {
            info = quantize_image_tiled(gpu, big, tout.mutable_view(), tlabels.mutable_view(), o, t);
        });
        const bool same = std::memcmp(tout.bytes(), out.bytes(), out.num_bytes()) == 0 &&
                          std::memcmp(tlabels.bytes(), labels.bytes(), labels.num_bytes()) == 0;
        row(name + " (" + std::to_string(info.run.tiles) + " tiles, " + std::to_string(info.passes) + " passes)", ms, bytes,
            same ? "yes" : "NO");
    }
}

}  // namespace

int main(int argc, char** argv) {
    int images = 624, runs = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--images") images = std::stoi(argv[i + 1]);
        else if (a == "--runs") runs = std::stoi(argv[i + 1]);
    }
    if (Context::cuda_device_count() == 0) {
        std::printf("groups_bench: no CUDA device\n");
        return 2;
    }
    const Context gpu({.backend = Backend::Cuda});
    std::printf("groups_bench on %s\n", gpu.device_name().c_str());
    zernike_rows(gpu, images, runs);
    quantize_rows(gpu, runs);
    return 0;
}
