// k-means in tiles (issue 17): where a pass over the tiles spends its time. The scene: Samson
// mirror-tiled to 950×950×156 i16 (282 MB, pageable host memory, BIP as the reader of a .npy leaves
// it); k = 8, 20 iterations from the k-means++ seeds, tol = 0.
//   1. kmeans() whole on the device (host in, host out), warm;
//   2. kmeans_tiled() under several tile geometries and device budgets: total, passes, ms per pass,
//      and the labels compared with the whole run's;
//   3. one pass over one 950×240 tile taken apart: the staging copy into pinned memory, the upload,
//      the tile's construction (the reorder to BIP), row_valid, and assign() twice.
// Floor of a pass: the scene's bytes over the link, 282 MB / 55 GB/s pinned = 5.1 ms.
//
// Usage: kmeans_tiles_bench [--out FILE.md]
#include <algorithm>
#include <chrono>
#include <memory>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "cubekit/buffer.hpp"
#include "cubekit/io.hpp"
#include "cubekit/kmeans.hpp"
#include "core/cuda_backend.hpp"
#include "kmeans/kmeans_internal.hpp"
#include "kmeans/tiled_driver.hpp"

using namespace cubekit;

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string fmt(double v, int digits) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", digits, v);
    return b;
}

template <class F>
double timed(F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return ms_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
    std::string out_path;
    if (!bench::parse_out_flag(argc, argv, "kmeans_tiles_bench", out_path)) return 2;
    std::vector<std::string> lines;
    auto emit = [&](const std::string& line) {
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
        lines.push_back(line);
    };
    const Cube scene = read_cube(std::string(CUBEKIT_SOURCE_DIR) + "/data/samson/samson_1.img");
    const Cube cube = bench::tile_scene(scene, 950, 950, 156, DType::I16).to_layout(Layout::BIP);
    const Context gpu({.backend = Backend::Cuda});
    KmeansOptions o;
    o.k = 8;
    o.max_iter = 20;
    o.tol = 0;
    o.seed = 1;
    emit("# k-means in tiles on " + gpu.device_name());
    emit("");
    emit("Scene: " + cube.shape().describe() + " (" + std::to_string(cube.shape().num_bytes() >> 20) +
         " MiB, pageable), k = 8, 20 iterations, k-means++ seeds, tol = 0. Floor of a pass: 5.1 ms (the scene "
         "over the link at 55 GB/s pinned).");
    emit("");

    KmeansResult whole;
    for (int r = 0; r < 2; ++r) whole = kmeans(gpu, cube.view(), o);  // warm-up
    const double whole_ms = timed([&] { whole = kmeans(gpu, cube.view(), o); });
    emit("| run | tiles | passes | total ms | ms per pass | labels equal |");
    emit("|---|---|---|---|---|---|");
    emit("| `kmeans()` whole, host in and out | — | — | " + fmt(whole_ms, 1) + " | — | — |");

    struct Geometry {
        const char* name;
        TileOptions t;
    };
    std::vector<Geometry> cases = {{"one 950×950 tile", {.tile_width = 950, .tile_height = 950}},
                                   {"950×240 tiles", {.tile_width = 950, .tile_height = 240}},
                                   {"96 MiB device budget", {.device_memory_limit = std::size_t(96) << 20}},
                                   {"950×36 tiles, 1 lane", {.lanes = 1, .tile_width = 950, .tile_height = 36}}};
    // The fixed part: the same with no Lloyd iteration, and with the random init (no k-means++).
    KmeansOptions no_iter = o, random_init = o;
    no_iter.max_iter = 0;
    random_init.init = KmeansInit::Random;
    for (const auto& [name, opt] : {std::pair{"no iteration", no_iter}, std::pair{"random init", random_init}}) {
        Cube labels(950, 950, 1, DType::I32, Layout::BSQ);
        KmeansTiled run;
        std::string passes;
        const Context logged({.backend = Backend::Cuda, .log = [&](std::string_view m) { passes += std::string(m) + "\n"; }});
        const double ms = timed([&] { run = kmeans_tiled(logged, cube.view(), labels.mutable_view(), opt, cases[1].t); });
        std::fputs(passes.c_str(), stderr);
        emit(std::string("| `kmeans_tiled`, 950×240 tiles, ") + name + " | " + std::to_string(run.run.tiles) + " | " +
             std::to_string(run.passes) + " | " + fmt(ms, 1) + " | " + fmt(ms / run.passes, 2) + " | — |");
    }
    for (const Geometry& g : cases) {
        Cube labels(950, 950, 1, DType::I32, Layout::BSQ);
        KmeansTiled run;
        const double ms = timed([&] { run = kmeans_tiled(gpu, cube.view(), labels.mutable_view(), o, g.t); });
        const bool same = std::memcmp(labels.view().data(), whole.labels.data(), labels.shape().num_bytes()) == 0 &&
                          run.result.centroids == whole.centroids && run.result.iterations == whole.iterations;
        emit(std::string("| `kmeans_tiled`, ") + g.name + " | " + std::to_string(run.run.tiles) + " | " +
             std::to_string(run.passes) + " | " + fmt(ms, 1) + " | " + fmt(ms / run.passes, 2) + " | " +
             (same ? "yes" : "NO") + " |");
    }

    // One pass over one tile, taken apart.
    const int tw = 950, th = 240;
    const CubeView window = cube.view().window(0, 0, tw, th);
    const std::size_t bytes = std::size_t(tw) * th * 156 * 2;
    emit("");
    emit("One pass over one " + std::to_string(tw) + "×" + std::to_string(th) + " tile (" + std::to_string(bytes >> 20) +
         " MiB), each step timed alone (median of 5, host clock, synchronised):");
    emit("");
    emit("| step | ms | GB/s |");
    emit("|---|---|---|");
    PinnedBuffer pinned(bytes);
    DeviceBuffer dev(gpu, bytes);
    const MutableCubeView staged = MutableCubeView::host(pinned.data(), tw, th, 156, DType::I16, dense_strides(tw, th, 156, Layout::BIP));
    const CubeView d_window = CubeView::device(dev.data(), 0, tw, th, 156, DType::I16, dense_strides(tw, th, 156, Layout::BIP));
    detail::KmeansPlan plan;
    plan.k = 8, plan.m = 156, plan.pixels = std::int64_t(950) * 950, plan.valid = plan.pixels;
    std::vector<double> c(std::size_t(8) * 156);
    const auto* px = reinterpret_cast<const std::int16_t*>(cube.view().data());  // BIP: pixel p's bands at p·156
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = double(px[(i / 156) * 100003 * 156 + i % 156]);
    const KmeansOptions piece = detail::piece_options(8, {});
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    auto row = [&](const std::string& name, auto&& f, std::size_t moved) {
        std::vector<double> t;
        for (int r = 0; r < 5; ++r) t.push_back(timed([&] { f(); gpu.synchronize(); }));
        const double ms = median(t);
        emit("| " + name + " | " + fmt(ms, 2) + " | " + (moved ? fmt(double(moved) / ms / 1e6, 1) : "") + " |");
    };
    row("Context on the device (a worker's)", [&] { const Context w({.backend = Backend::Cuda, .device = 0}); }, 0);
    row("staging copy into pinned memory (all threads)", [&] { detail::copy_cube_host(window, staged); }, bytes);
    row("upload, pinned", [&] { dev.upload_async(gpu, pinned.data(), bytes); }, bytes);
    row("DeviceBuffer of the tile's size", [&] { DeviceBuffer b(gpu, bytes); }, 0);
    std::unique_ptr<detail::KmeansTile> tile;
    row("the tile's construction (reorder to BIP)", [&] { tile = detail::kmeans_tile_cuda(gpu, d_window, 0, 0, 950, piece, plan); }, 0);
    row("row_valid()", [&] { (void)tile->row_valid(); }, 0);
    row("assign() (engine set up + a pass)", [&] { (void)tile->assign(c); }, bytes);
    row("range()", [&] { (void)tile->range(); }, bytes);
    row("moments()", [&] { (void)tile->moments(); }, bytes);
    std::vector<std::int64_t> first_rank(static_cast<std::size_t>(th));
    for (int y = 0; y < th; ++y) first_rank[std::size_t(y)] = std::int64_t(y) * tw;
    row("sample() of every pixel", [&] { (void)tile->sample(1, 1.0, true, first_rank); }, bytes);
    row("final_pass()", [&] { (void)tile->final_pass(c, c, MutableCubeView{}); }, bytes);
    emit("");
    if (!out_path.empty()) {
        std::ofstream f(out_path);
        for (const std::string& l : lines) f << l << "\n";
    }
    return 0;
}
