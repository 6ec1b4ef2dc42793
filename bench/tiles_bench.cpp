// Host-in/host-out RCMG and the RBF detector on a cube of a few GB (issues 17 and 20): the streamed
// tiled path on 1, 2, 4, ... and every visible GPU against the whole-scene call, the pinned-link floor and the device-resident
// kernel. The cube is a real scene mirror-tiled to the size asked for, in its stored type (i16 BSQ),
// in pageable host memory as a reader leaves it.
//
//   tiles_bench [--scene FILE] [--width 3000] [--height 1700] [--envi-out DIR] [--write-only FILE.hdr] [--kmeans-only]
//               [--watershed-only]
//
// Scaling (issue 20): every tiled figure is taken on 1, 2, 4, ... and all visible GPUs, from pageable
// memory (staged through pinned buffers) and from page-locked memory (moved in place), beside the host
// memory bandwidth (memcpy on 1..all threads) and each GPU's PCIe/NUMA placement.
// --write-only writes the mirror-tiled cube as ENVI and exits (the scenes of the batch run).
//
// Floor: the bytes that must cross the link (input + f32 output) at 55 GB/s pinned per GPU (the
// measured host-to-device rate of the H100 machine); the target is >= 80 % of it end to end.
// Time: wall clock of the host call, median of 3 after one warm-up; every tiled output is compared
// with the whole-scene output byte for byte.
#include <omp.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <span>
#include <thread>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cubekit/buffer.hpp"
#include "cubekit/detect.hpp"
#include "cubekit/detect_classical.hpp"
#include "cubekit/edges.hpp"
#include "cubekit/linalg.hpp"
#include "cubekit/gradient.hpp"
#include "cubekit/io.hpp"
#include "cubekit/kmeans.hpp"
#include "cubekit/labels.hpp"
#include "cubekit/watershed.hpp"
#include "bench_common.hpp"

using namespace cubekit;

namespace {

constexpr double kLinkGBs = 55.0;

// Mirror-tiles a BSQ scene row by row (memcpy of mirrored runs), fast enough for GBs.
Cube mirror_tile(const Cube& scene, int width, int height) {
    const Cube src = scene.to_layout(Layout::BSQ);
    const int sw = src.width(), sh = src.height(), B = src.bands();
    const std::size_t e = dtype_size(src.dtype());
    Cube out = Cube::uninitialized(width, height, B, src.dtype(), Layout::BSQ);
    const auto mirror = [](int v, int n) { const int m = v % (2 * n); return m < n ? m : 2 * n - 1 - m; };
#pragma omp parallel for schedule(static)
    for (long long r = 0; r < (long long)B * height; ++r) {
        const int b = int(r / height), y = int(r % height);
        const std::byte* srow = src.bytes() + ((std::size_t(b) * sh + std::size_t(mirror(y, sh))) * sw) * e;
        std::byte* drow = out.bytes() + ((std::size_t(b) * height + std::size_t(y)) * width) * e;
        for (int x = 0; x < width; ++x) std::memcpy(drow + std::size_t(x) * e, srow + std::size_t(mirror(x, sw)) * e, e);
    }
    return out;
}

template <class F>
double median_wall_ms(F&& f, int runs = 3) {
    f();  // warm-up: pools, pinned buffers, module loading
    return bench::wall_median_ms(f, runs);
}

std::string read_text(const std::string& path) {
    std::ifstream f(path);
    std::string line;
    std::getline(f, line);
    return line.empty() ? "?" : line;
}

// 1, 2, 4, ... and the count itself: the GPU counts of the scaling curve.
std::vector<int> device_counts(int ndev) {
    std::vector<int> n;
    for (int k = 1; k < ndev; k *= 2) n.push_back(k);
    n.push_back(ndev);
    return n;
}

std::vector<int> first_devices(int n) {
    std::vector<int> d(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) d[std::size_t(i)] = i;
    return d;
}

// Where each GPU sits: PCI bus, NUMA node and the CPUs local to it (what binds staging threads).
void print_topology(int ndev) {
    std::printf("Host: %u hardware threads, NUMA nodes:", std::thread::hardware_concurrency());
    for (int node = 0; node < 16; ++node) {
        const std::string cpus = read_text("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
        if (cpus != "?") std::printf(" %d (CPUs %s)", node, cpus.c_str());
    }
    std::printf(".\n");
#ifdef CUBEKIT_HAVE_CUDA
    for (int d = 0; d < ndev; ++d) {
        char bus[32] = {};
        cudaDeviceGetPCIBusId(bus, sizeof bus, d);
        std::string id = bus;
        std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return char(std::tolower(c)); });
        const std::string dir = "/sys/bus/pci/devices/" + id;
        std::printf("GPU %d: PCI %s, NUMA node %s, local CPUs %s, link %s x%s.\n", d, id.c_str(),
                    read_text(dir + "/numa_node").c_str(), read_text(dir + "/local_cpulist").c_str(),
                    read_text(dir + "/current_link_speed").c_str(), read_text(dir + "/current_link_width").c_str());
    }
#endif
}

// Host memory bandwidth: memcpy of `bytes` (pageable to pageable) on 1, 4, 16, ... threads.
void print_host_bandwidth(std::size_t bytes) {
    std::vector<std::byte> a(bytes), b(bytes);
    std::memset(a.data(), 1, bytes);
    std::memset(b.data(), 2, bytes);
    const int max_threads = omp_get_max_threads();
    std::printf("Host memcpy (%.2f GB, pageable -> pageable; GB/s of bytes copied, read + write = 2x):", double(bytes) / 1e9);
    for (int t = 1;; t = std::min(t * 4, max_threads)) {
        const double ms = median_wall_ms([&] {
            const std::size_t piece = std::size_t(4) << 20, n = (bytes + piece - 1) / piece;
#pragma omp parallel for schedule(static) num_threads(t)
            for (long long i = 0; i < (long long)n; ++i) {
                const std::size_t at = std::size_t(i) * piece;
                std::memcpy(b.data() + at, a.data() + at, std::min(piece, bytes - at));
            }
        });
        std::printf(" %d threads %.1f GB/s;", t, double(bytes) / ms / 1e6);
        if (t == max_threads) break;
    }
    std::printf("\n");
}

// Pinned host <-> device alone on n GPUs at once (one stream each): up, down, and both directions.
void print_link_rates(const std::byte* pinned, std::byte* pinned_back, std::size_t bytes, int ndev) {
    for (int n = 1; n <= ndev; n = (n == ndev ? ndev + 1 : std::min(n * 2, ndev))) {
        std::vector<Context> ctxs;
        std::vector<DeviceBuffer> bufs;
        const std::size_t part = bytes / std::size_t(n);
        for (int d = 0; d < n; ++d) {
            ctxs.emplace_back(ContextOptions{.backend = Backend::Cuda, .device = d});
            bufs.emplace_back(ctxs.back(), part);
        }
        const auto sync = [&] { for (int d = 0; d < n; ++d) ctxs[std::size_t(d)].synchronize(); };
        const double up = median_wall_ms([&] {
            for (int d = 0; d < n; ++d) bufs[std::size_t(d)].upload_async(ctxs[std::size_t(d)], pinned + part * std::size_t(d), part);
            sync();
        });
        const double down = median_wall_ms([&] {
            for (int d = 0; d < n; ++d) bufs[std::size_t(d)].download_async(ctxs[std::size_t(d)], pinned_back + part * std::size_t(d), part);
            sync();
        });
        std::printf("Pinned link alone, %d GPU(s) at once, %.2f GB: up %.1f GB/s, down %.1f GB/s.\n", n, double(bytes) / 1e9,
                    double(bytes) / up / 1e6, double(bytes) / down / 1e6);
    }
}

struct Table {
    double in_gb, out_gb, base_ms = 0;
    void header(const char* title) {
        std::printf("\n| %s | GPUs | lanes | tiles | tile | ms | GB/s (in+out) | floor ms | %% of floor | speed-up | staging | identical |\n"
                    "|---|---|---|---|---|---|---|---|---|---|---|---|\n", title);
        base_ms = 0;
    }
    void row(const char* path, int gpus, int lanes, const TiledRun& info, double ms, bool same) {
        if (gpus == 1 && base_ms == 0) base_ms = ms;
        const double floor = (in_gb + out_gb) / (kLinkGBs * gpus) * 1e3;
        std::printf("| %s | %d | %d | %zu | %dx%d | %.1f | %.1f | %.1f | %.0f %% | %.2fx | %s | %s |\n", path, gpus, lanes,
                    info.tiles, info.tile_width, info.tile_height, ms, (in_gb + out_gb) / ms * 1e3, floor, 100 * floor / ms,
                    base_ms > 0 ? base_ms / ms : 0.0,
                    info.direct_input ? (info.direct_output ? "none" : "out") : (info.direct_output ? "in" : "in+out"),
                    same ? "yes" : "NO");
        std::fflush(stdout);
    }
};

// A mask of the cube's first `bands` bands: each sample above its band's mean (from every 97th pixel).
Cube threshold_mask(const Cube& cube, int bands) {
    Cube mask = Cube::uninitialized(cube.width(), cube.height(), bands, DType::U8);
    const std::int64_t n = std::int64_t(cube.width()) * cube.height();
    for (int b = 0; b < bands; ++b) {
        double sum = 0;
        std::int64_t count = 0;
        for (std::int64_t i = 0; i < n; i += 97, ++count) sum += cube.value(int(i % cube.width()), int(i / cube.width()), b);
        const double mean = sum / double(count);
#pragma omp parallel for schedule(static)
        for (int y = 0; y < cube.height(); ++y)
            for (int x = 0; x < cube.width(); ++x) mask.at<std::uint8_t>(x, y, b) = cube.value(x, y, b) > mean ? 1 : 0;
    }
    return mask;
}

// A 4-neuron RBF network on the cube's bands, centres at four of its pixels (the score's value does
// not matter here; the work per pixel does).
RbfnModel bench_model(const Cube& cube) {
    RbfnModel m;
    m.bands = cube.bands();
    m.hidden = 4;
    for (int j = 0; j < 4; ++j)
        for (int b = 0; b < cube.bands(); ++b) m.centres.push_back(cube.value(17 + 40 * j, 23 + 31 * j, b));
    m.sigma = {2000, 3000, 4000, 5000};
    m.weights = {1.0, -0.4, -0.4, -0.2};
    m.bias = 0.1;
    m.threshold = 0.5;
    return m;
}

}  // namespace

// k-means (k = 8, 10 iterations from k-means++, tol = 0) in tiles: every pass reads the cube (the first
// pass twice, the init sample, each iteration, the final counts, the labels); i32 labels out. Against
// the whole-scene kmeans() on one GPU: labels and centroids identical.
void kmeans_scaling(const Context& gpu, const Cube& cube, double in_gb, const std::vector<int>& counts) {
    KmeansOptions o;
    o.k = 8, o.seed = 1, o.max_iter = 10, o.tol = 0;
    KmeansResult whole;
    const double whole_ms = median_wall_ms([&] { whole = kmeans(gpu, cube.view(), o); }, 1);
    std::printf("\nkmeans() whole scene on one GPU (k = 8, 10 iterations; upload, passes, labels download): %.1f ms.\n", whole_ms);
    Cube labels = Cube::uninitialized(cube.width(), cube.height(), 1, DType::I32);
    const int passes = kmeans_tiled(gpu, cube.view(), labels.mutable_view(), o, {}).passes;
    Table t{in_gb * passes, double(labels.num_bytes()) / 1e9};
    t.header((std::string("kmeans_tiled (k = 8, 10 iterations), ") + std::to_string(passes) + " reads, pageable").c_str());
    for (int n : counts) {
        KmeansTiled r;
        std::memset(labels.bytes(), 0xFF, labels.num_bytes());
        const double ms = median_wall_ms([&] { r = kmeans_tiled(gpu, cube.view(), labels.mutable_view(), o, {.devices = first_devices(n)}); }, 1);
        const bool same = std::memcmp(labels.bytes(), whole.labels.data(), labels.num_bytes()) == 0 &&
                          r.result.centroids == whole.centroids && r.result.iterations == whole.iterations;
        t.row("kmeans_tiled", n, 3, r.run, ms, same);
    }
}

// The watershed of the RCMG gradient (issue 17): each tile's automaton on a device, the plateau
// distances exchanged until the tiles agree, the classes joined and the labels renumbered on the host.
void watershed_rows(const Context& gpu, const Cube& whole, double out_gb, const std::vector<int>& counts) {
    const int width = whole.width(), height = whole.height();
    {
        WatershedResult ref;
        const double ws_ms = median_wall_ms([&] { ref = watershed(gpu, whole); });
        std::printf("\nwatershed() whole %dx%d f32 RCMG on one GPU (upload, automaton, download): %.1f ms; %lld regions.\n",
                    width, height, ws_ms, static_cast<long long>(ref.regions));
        Cube labels = Cube::uninitialized(width, height, 1, DType::I32);
        Table t{out_gb, out_gb};
        std::string rounds;
        t.header("watershed_tiled (8-connectivity), pageable");
        for (int n : counts)
            for (std::size_t budget : {std::size_t(0), std::size_t(64) << 20}) {
                WatershedTiled w;
                const double ms = median_wall_ms([&] {
                    w = watershed_tiled(gpu, whole, labels.mutable_view(), {}, {},
                                        {.device_memory_limit = budget, .devices = first_devices(n)});
                });
                t.row(budget ? "watershed_tiled, 64 MiB device budget" : "watershed_tiled", n, 3, w.run, ms,
                      w.regions == ref.regions && std::memcmp(labels.bytes(), ref.labels.bytes(), labels.num_bytes()) == 0);
                rounds += " " + std::to_string(w.rounds);
            }
        std::printf("\nRounds of the rows above (passes over the tiles until the plateau distances agreed):%s.\n", rounds.c_str());
        // Where a tiled call's time goes (its own log): the tiles' passes, the join, the relabelling.
        const Context logged({.backend = Backend::Cuda, .log = [](std::string_view m) {
                                  std::printf("  %.*s\n", int(m.size()), m.data());
                              }});
        for (std::size_t budget : {std::size_t(0), std::size_t(64) << 20})
            watershed_tiled(logged, whole, labels.mutable_view(), {}, {}, {.device_memory_limit = budget});
    }
}

int main(int argc, char** argv) {
    std::string scene_path, envi_out, write_only;
    int width = 3000, height = 1700;
    bool kmeans_only = false, watershed_only = false;
    for (int i = 1; i < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--watershed-only") {  // issue 17: the watershed rows alone
            watershed_only = true;
            --i;
            continue;
        }
        if (a == "--kmeans-only") {  // issue 20: the k-means scaling alone
            kmeans_only = true;
            --i;
            continue;
        }
        if (i + 1 >= argc) { std::fprintf(stderr, "tiles_bench: %s needs a value\n", a.c_str()); return 2; }
        if (a == "--scene") scene_path = argv[i + 1];
        else if (a == "--width") width = std::stoi(argv[i + 1]);
        else if (a == "--height") height = std::stoi(argv[i + 1]);
        else if (a == "--envi-out") envi_out = argv[i + 1];
        else if (a == "--write-only") write_only = argv[i + 1];
        else { std::fprintf(stderr, "tiles_bench: unknown argument %s\n", a.c_str()); return 2; }
    }
    if (scene_path.empty()) scene_path = std::string(CUBEKIT_SOURCE_DIR) + "/data/samson/samson_1.img";
    const Cube scene = read_cube(scene_path);
    if (!write_only.empty()) {
        write_cube(mirror_tile(scene, width, height), write_only);
        return 0;
    }
    if (Context::cuda_device_count() == 0) { std::printf("tiles_bench: no CUDA device\n"); return 0; }
    const Context gpu({.backend = Backend::Cuda});
    const Cube cube = mirror_tile(scene, width, height);
    const double in_gb = double(cube.num_bytes()) / 1e9, out_gb = double(cube.width()) * double(cube.height()) * 4 / 1e9;
    const int ndev = Context::cuda_device_count();
    const std::vector<int> counts = device_counts(ndev);
    std::printf("## Tiled host-in/host-out RCMG and RBFN on 1..%d GPUs (issues 17, 20)\n\n", ndev);
    std::printf("%s x %d; cube %dx%dx%d %s BSQ mirror-tiled from %s: %.2f GB in, %.2f GB out (f32); "
                "host threads %d. Floor: (in + out) / (%.0f GB/s x GPUs). Wall time, median of 3 after a warm-up. "
                "Staging: which side went through pinned staging buffers (pageable memory); none = page-locked "
                "input and output moved in place.\n\n",
                gpu.device_name().c_str(), ndev, width, height, cube.bands(), std::string(dtype_name(cube.dtype())).c_str(),
                scene_path.c_str(), in_gb, out_gb, gpu.threads(), kLinkGBs);
    print_topology(ndev);
    if (kmeans_only) {
        kmeans_scaling(gpu, cube, in_gb, counts);
        return 0;
    }
    print_host_bandwidth(std::min<std::size_t>(cube.num_bytes(), std::size_t(2) << 30));
    Table table{in_gb, out_gb};

    Cube whole;
    const double whole_ms = median_wall_ms([&] { whole = rcmg(gpu, cube); });
    if (watershed_only) {
        watershed_rows(gpu, whole, out_gb, counts);
        return 0;
    }
    const double floor1 = (in_gb + out_gb) / kLinkGBs * 1e3;
    std::printf("\nrcmg() whole scene on one GPU (upload, kernel, download): %.1f ms, %.0f %% of the one-GPU floor %.1f ms.\n",
                whole_ms, 100 * floor1 / whole_ms, floor1);

    // The caller's cube and output in page-locked memory (as a CuPy or PyTorch pinned array is).
    PinnedBuffer pinned(cube.num_bytes()), pinned_back(cube.num_bytes());
    std::memcpy(pinned.data(), cube.bytes(), cube.num_bytes());
    const CubeView pinned_cube = CubeView::host(pinned.data(), width, height, cube.bands(), cube.dtype(), cube.view().strides());
    PinnedBuffer pinned_out(whole.num_bytes());
    const MutableCubeView pinned_out_view = MutableCubeView::host(pinned_out.data(), width, height, 1, DType::F32,
                                                                  dense_strides(width, height, 1, Layout::BSQ));
    Cube out = Cube::uninitialized(width, height, 1, DType::F32);
    struct Source { const char* name; CubeView in; MutableCubeView out; std::byte* out_bytes; };
    const std::vector<Source> sources = {{"pageable", cube.view(), out.mutable_view(), out.bytes()},
                                         {"page-locked", pinned_cube, pinned_out_view, pinned_out.data()}};
    for (const Source& src : sources) {
        table.header((std::string("rcmg_tiled, ") + src.name).c_str());
        for (int n : counts)
            for (int lanes : {2, 3, 4}) {
                TiledRun info;
                std::memset(src.out_bytes, 0xFF, whole.num_bytes());
                const double ms = median_wall_ms([&] {
                    info = rcmg_tiled(gpu, src.in, src.out, {}, {.devices = first_devices(n), .lanes = lanes});
                });
                table.row("rcmg_tiled", n, lanes, info, ms, std::memcmp(src.out_bytes, whole.bytes(), whole.num_bytes()) == 0);
            }
    }

    // The RBF detector (scores only): input-bound, 4 bytes out per pixel.
    {
        const RbfnModel model = bench_model(cube);
        const PixelOptions o{.objects = false};
        const std::vector<PixelResult> ref = detect_pixels_many(gpu, cube, std::span(&model, 1), o);
        Table t{in_gb, out_gb};
        for (const Source& src : sources) {
            t.header((std::string("detect_pixels_tiled (RBFN 4 neurons, scores), ") + src.name).c_str());
            for (int n : counts) {
                TiledRun info;
                std::vector<PixelResult> r;
                const double ms = median_wall_ms([&] {
                    r = detect_pixels_tiled(gpu, src.in, std::span(&model, 1), o, {.devices = first_devices(n)}, &info);
                });
                t.row("detect_pixels_tiled", n, 3, info, ms, std::memcmp(r[0].score.bytes(), ref[0].score.bytes(), ref[0].score.num_bytes()) == 0);
            }
        }
    }

    // The entropy edge detector (default vote, small components removed): the statistics passes read the
    // cube as well, so the floor counts every read (passes x in + out).
    {
        const EntropyEdgeOptions o{.min_component = 5};
        Cube ref;
        const double whole_edges_ms = median_wall_ms([&] { ref = entropy_edges(gpu, cube, o).edges; });
        std::printf("\nentropy_edges() whole scene on one GPU (upload, kernels, download): %.1f ms.\n", whole_edges_ms);
        Cube map = Cube::uninitialized(width, height, 1, DType::U8);
        PinnedBuffer pinned_map(map.num_bytes());
        const MutableCubeView pinned_map_view = MutableCubeView::host(pinned_map.data(), width, height, 1, DType::U8,
                                                                      dense_strides(width, height, 1, Layout::BSQ));
        const std::vector<Source> edge_sources = {{"pageable", cube.view(), map.mutable_view(), map.bytes()},
                                                  {"page-locked", pinned_cube, pinned_map_view, pinned_map.data()}};
        const int passes = cube.dtype() == DType::U8 ? 2 : 3;  // EntropyEdgeTiled::passes
        for (const Source& src : edge_sources) {
            Table t{in_gb * passes, double(map.num_bytes()) / 1e9};
            t.header((std::string("entropy_edges_tiled (vote, L 5), ") + std::to_string(passes) + " reads, " + src.name).c_str());
            for (int n : counts) {
                TiledRun info;
                const double ms = median_wall_ms([&] {
                    info = entropy_edges_tiled(gpu, src.in, src.out, o, {.devices = first_devices(n)}).run;
                });
                t.row("entropy_edges_tiled", n, 3, info, ms, std::memcmp(src.out_bytes, ref.bytes(), ref.num_bytes()) == 0);
            }
        }
    }

    // PCA (3 components): the sums pass reads the cube, then the scores pass reads it again and writes
    // 3 f64 per pixel.
    {
        Cube ref;
        const double whole_pca_ms = median_wall_ms([&] { ref = pca(gpu, cube, {.components = 3}).scores; });
        std::printf("\npca() whole scene on one GPU (upload, sums, eigensolve, scores, download): %.1f ms.\n", whole_pca_ms);
        Cube pcs = Cube::uninitialized(width, height, 3, DType::F64);
        const int passes = cube.dtype() == DType::F32 || cube.dtype() == DType::F64 ? 3 : 2;  // PcaTiled::passes
        Table t{in_gb * passes, double(pcs.num_bytes()) / 1e9};
        t.header((std::string("pca_tiled (3 components), ") + std::to_string(passes) + " reads, pageable").c_str());
        for (int n : counts) {
            TiledRun info;
            const double ms = median_wall_ms([&] {
                info = pca_tiled(gpu, cube.view(), pcs.mutable_view(), {.components = 3}, {.devices = first_devices(n)}).run;
            });
            t.row("pca_tiled", n, 3, info, ms, std::memcmp(pcs.bytes(), ref.bytes(), ref.num_bytes()) == 0);
        }
    }

    kmeans_scaling(gpu, cube, in_gb, counts);

    // Connected components (8-connectivity) of an 8-band mask: the tiles labelled on their own, joined on
    // the host from their edges and renumbered in place; the removal reads the mask twice.
    {
        const int mb = std::min(8, cube.bands());
        const Cube mask = threshold_mask(cube, mb);
        Components ref;
        const double whole_ms = median_wall_ms([&] { ref = label_components(gpu, mask, 8); });
        std::printf("\nlabel_components() whole %dx%dx%d u8 mask on one GPU (upload, labels, statistics, download): "
                    "%.1f ms; %zu components in band 0.\n", width, height, mb, whole_ms, ref.per_band[0].size());
        Cube labels = Cube::uninitialized(width, height, mb, DType::I32);
        const double mask_gb = double(mask.num_bytes()) / 1e9;
        Table t{mask_gb, double(labels.num_bytes()) / 1e9};
        t.header("label_components_tiled (8-connectivity), pageable");
        for (int n : counts) {
            TiledRun info;
            const double ms = median_wall_ms([&] {
                info = label_components_tiled(gpu, mask, labels.mutable_view(), 8, {.devices = first_devices(n)}).run;
            });
            t.row("label_components_tiled", n, 3, info, ms, std::memcmp(labels.bytes(), ref.labels.bytes(), labels.num_bytes()) == 0);
        }
        Cube clean_ref;
        const double clean_ms = median_wall_ms([&] { clean_ref = remove_small_components(gpu, mask, 5, 8); });
        std::printf("\nremove_small_components() whole mask on one GPU: %.1f ms.\n", clean_ms);
        Cube cleaned = Cube::uninitialized(width, height, mb, DType::U8);
        Table r{2 * mask_gb, mask_gb};
        r.header("remove_small_components_tiled (L 5), 2 reads, pageable");
        for (int n : counts) {
            TiledRun info;
            const double ms = median_wall_ms([&] {
                info = remove_small_components_tiled(gpu, mask, cleaned.mutable_view(), 5, 8, {.devices = first_devices(n)});
            });
            r.row("remove_small_components_tiled", n, 3, info, ms, std::memcmp(cleaned.bytes(), clean_ref.bytes(), cleaned.num_bytes()) == 0);
        }
    }

    watershed_rows(gpu, whole, out_gb, counts);

    std::printf("\n");
    print_link_rates(pinned.data(), pinned_back.data(), cube.num_bytes(), ndev);
    {
        MutableCubeView back = MutableCubeView::host(pinned_back.data(), width, height, cube.bands(), cube.dtype(),
                                                     cube.view().strides());
        const double copy_ms = median_wall_ms([&] { copy_cube(gpu, cube.view().window(0, 0, width, height), back); });
        std::printf("Host staging copy alone (pageable -> pinned, %d threads): %.1f ms, %.1f GB/s.\n", gpu.threads(), copy_ms,
                    in_gb / copy_ms * 1e3);
    }

    // A compute-bound family: local RX, windows (5, 21), on a 240x200 crop, on 1..all GPUs.
    {
        const Cube crop = Cube::from_view(cube.view().window(0, 0, 240, 200), Layout::BSQ);
        ClassicalOptions o;
        o.window = {5, 21};
        o.out_type = DType::F32;
        Cube one_gpu(240, 200, 1, DType::F32);
        double ms1 = 0;
        std::printf("\nLocal RX (5, 21), 240x200x%d i16 crop, f32 scores, 25-row tiles:", cube.bands());
        for (int n : counts) {
            Cube r(240, 200, 1, DType::F32);
            const double ms = median_wall_ms([&] { local_rx_tiled(gpu, crop, o, r.mutable_view(), {.devices = first_devices(n), .tile_height = 25}); }, 1);
            if (n == 1) { ms1 = ms; std::memcpy(one_gpu.bytes(), r.bytes(), r.num_bytes()); }
            std::printf(" %d GPU(s) %.1f ms (%.2fx, identical: %s);", n, ms, ms1 / ms,
                        std::memcmp(one_gpu.bytes(), r.bytes(), r.num_bytes()) == 0 ? "yes" : "NO");
        }
        std::printf("\n");
    }
#ifdef CUBEKIT_HAVE_CUDA
    // Page-locking the caller's cube in place instead of staging it: what cudaHostRegister costs, and
    // the tiled call on the registered cube over every GPU.
    {
        const auto t0 = std::chrono::steady_clock::now();
        std::byte* base = const_cast<std::byte*>(cube.bytes());
        const cudaError_t reg = cudaHostRegister(base, cube.num_bytes(), cudaHostRegisterPortable);
        const double reg_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        double run_ms = 0;
        if (reg == cudaSuccess) {
            TiledRun info;
            run_ms = median_wall_ms([&] { info = rcmg_tiled(gpu, cube, pinned_out_view, {}, {.devices = first_devices(ndev)}); });
            if (!info.direct_input) std::printf("(the registered cube was not seen as page-locked)\n");
        }
        const auto t1 = std::chrono::steady_clock::now();
        if (reg == cudaSuccess) cudaHostUnregister(base);
        const double unreg_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
        std::printf("cudaHostRegister of the %.2f GB cube: %s in %.1f ms; rcmg_tiled on it over %d GPU(s) %.1f ms; unregister %.1f ms.\n",
                    in_gb, reg == cudaSuccess ? "ok" : cudaGetErrorString(reg), reg_ms, ndev, run_ms, unreg_ms);
    }
    // The kernel alone, cube resident on the device.
    {
        const DeviceCube d_cube = DeviceCube::upload(gpu, cube);
        DeviceCube d_out(gpu, CubeShape{width, height, 1, DType::F32, Layout::BSQ});
        float best = 0;
        const double ms = bench::event_median_ms(static_cast<cudaStream_t>(gpu.cuda_stream()), 2, 5,
                                                 [&] { rcmg_into(gpu, d_cube, d_out); }, best);
        std::printf("\nDevice-resident kernel (no copies): %.2f ms median, %.2f min (%.0f GB/s of input).\n", ms, double(best),
                    in_gb / ms * 1e3);
    }
#endif
    if (!envi_out.empty()) {
        const auto t0 = std::chrono::steady_clock::now();
        write_cube(cube, envi_out + "/big.hdr");
        std::printf("Wrote %s/big.hdr for the CLI run in %.0f ms.\n\n", envi_out.c_str(),
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        // File in, host out: windows read from the file (in the page cache after the write) straight
        // into the pinned staging buffers.
        const CubeFile file(envi_out + "/big.hdr");
        for (const Source& src : sources) {
            table.header((std::string("rcmg_tiled(CubeFile), file in (page cache), ") + src.name + " out").c_str());
            for (int n : counts) {
                TiledRun info;
                std::memset(src.out_bytes, 0xFF, whole.num_bytes());
                const double ms = median_wall_ms([&] { info = rcmg_tiled(gpu, file, src.out, {}, {.devices = first_devices(n)}); });
                table.row("rcmg_tiled(CubeFile)", n, 3, info, ms, std::memcmp(src.out_bytes, whole.bytes(), whole.num_bytes()) == 0);
            }
        }
    }
    return 0;
}
