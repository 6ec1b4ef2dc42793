// k-means benchmark (spec kmeans.md §4.2; issue: k-means). Workloads:
//   1. 3840×2160 RGB u8 (bench/peers/make_kmeans_image.py: bicubic astronaut + seeded ±2 noise),
//      k = 16, 10 iterations;  2. the same, k = 256;
//   3. 610×340×103 f32, the embedded Samson scene mirror-tiled (first 103 bands), k = 9, 50 iterations.
// Each case calls the public device-resident kmeans_into() on the image resident on the device
// (a DeviceCube, read in place), labels and quantized image written to device buffers, from
// fixed initial centroids (one k-means++ run), tol = 0 so exactly the stated
// iterations run. Times are host-clock medians of kRuns runs after kWarmup, each call followed by
// a synchronisation: "final" = the same call with max_iter = 0 (the device first pass, the final
// labelling pass, sort and paint), "lloyd" = the full call minus that one, run by run (the
// iterations: launches, the per-batch status read). (Until the device first pass existed, the
// first pass ran on the host outside "final".) Floor per pass = max(bytes read / 3.0 TB/s,
// 2·N·k·m flops / 67 TFLOP/s), times (iterations + 1) passes; the 25 MB photo fits the 50 MB L2,
// so after the first pass the true floor is lower than the HBM figure.
// k-means++ (issue 19 item 1): "init" = median of kmeans_into(max_iter = 0, k-means++) minus the
// median of the same call from the explicit centroids it chose, both warm and device-resident: the
// sample draw and the k-means++ steps alone (the first pass and the final pass are in both).
// "first call" = the process's first kmeans() of that workload (host image in, host labels out,
// allocations and pageable copies included), as a user's one-shot call sees it.
//
// Usage: kmeans_bench --image IMG.npy [--out FILE.md] [--write-cube FILE.npy] [--cpu]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "cubekit/io.hpp"
#include "cubekit/kmeans.hpp"
#include "kmeans/cuda_internal.hpp"

using namespace cubekit;

namespace {

constexpr int kWarmup = 3;
constexpr int kRuns = 15;
constexpr double kBandwidth = 3.0e12;
constexpr double kFp32 = 67e12;

std::size_t distinct_colours(const Cube& rgb) {
    const auto* p = rgb.data<std::uint8_t>();
    std::vector<std::uint32_t> v(rgb.shape().num_pixels());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = (std::uint32_t(p[3 * i]) << 16) | (p[3 * i + 1] << 8) | p[3 * i + 2];
    std::sort(v.begin(), v.end());
    return std::size_t(std::unique(v.begin(), v.end()) - v.begin());
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Host-clock time of one kmeans_into() on device-resident data, outputs on the device.
double timed_into(const Context& gpu, const DeviceCube& image, DeviceCube& labels, DeviceCube& quantized,
                  const KmeansOptions& o, double& inertia) {
    const auto t0 = std::chrono::steady_clock::now();
    inertia = kmeans_into(gpu, image, labels, o, quantized).inertia;
    gpu.synchronize();
    return ms_since(t0);
}

// The device phases of a k-means++ start, each timed alone (median of kRuns after kWarmup, each
// followed by a synchronisation): the first pass (valid set, plan), the sample draw, the k-means++
// steps (their centres read back). Returns "prepare / sample / kmeans++" in ms.
std::string seeding_phases(const Context& gpu, const DeviceCube& image, int k) {
#ifndef CUBEKIT_HAVE_CUDA
    (void)gpu, (void)image, (void)k;
    return "(a CPU-only build)";
#else
    KmeansOptions o{.k = k};
    std::vector<double> prep, draw, steps;
    for (int r = 0; r < kWarmup + kRuns; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        detail::DeviceValidSet valid;
        const detail::KmeansPlan plan = detail::prepare_kmeans_cuda(gpu, image.view(), o, valid);
        gpu.synchronize();
        const double a = ms_since(t0);
        t0 = std::chrono::steady_clock::now();
        const detail::DeviceSample sample = detail::init_sample_cuda(gpu, valid, o, o.seed);
        gpu.synchronize();
        const double b = ms_since(t0);
        t0 = std::chrono::steady_clock::now();
        const std::vector<double> centres = detail::kmeanspp_cuda(gpu, image.view(), sample, plan, o.seed);
        const double c = ms_since(t0);
        if (r >= kWarmup) {
            prep.push_back(a);
            draw.push_back(b);
            steps.push_back(c);
        }
    }
    char text[128];
    std::snprintf(text, sizeof text, "%.3f / %.3f / %.3f", median(prep), median(draw), median(steps));
    return text;
#endif
}

}  // namespace

int main(int argc, char** argv) {
    std::string image_path, out_path, cube_path;
    bool run_cpu = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--image") && i + 1 < argc) image_path = argv[++i];
        else if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!std::strcmp(argv[i], "--write-cube") && i + 1 < argc) cube_path = argv[++i];
        else if (!std::strcmp(argv[i], "--cpu")) run_cpu = true;
        else {
            std::fprintf(stderr, "usage: kmeans_bench --image IMG.npy [--out FILE.md] [--write-cube FILE.npy] [--cpu]\n");
            return 2;
        }
    }
    const Cube scene = read_cube(std::string(CUBEKIT_SOURCE_DIR) + "/data/samson/samson_1.img");
    const Cube cube = bench::tile_scene(scene, 610, 340, 103, DType::F32).to_layout(Layout::BIP);
    if (!cube_path.empty()) write_cube(cube, cube_path);  // (H, W, B) for the peers
    if (image_path.empty()) {
        std::fprintf(stderr, "kmeans_bench: --image IMG.npy is required (bench/peers/make_kmeans_image.py)\n");
        return 2;
    }
    const Cube photo = read_cube(image_path).to_layout(Layout::BIP);

    std::vector<std::string> lines;
    auto emit = [&](const std::string& line) {
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
        lines.push_back(line);
    };
    const Context gpu({.backend = run_cpu ? Backend::Cpu : Backend::Cuda});
    emit("# k-means benchmark on " + gpu.device_name());
    emit("");
    emit("Photo: " + photo.shape().describe() + ", " + std::to_string(distinct_colours(photo)) +
         " distinct colours. Cube: Samson mirror-tiled, " + cube.shape().describe() + ".");
    emit("Median of " + std::to_string(kRuns) + " runs after " + std::to_string(kWarmup) +
         " warm-ups, image resident on the device, outputs left on the device, fixed initial centroids, tol = 0.");
    emit("");
    emit("| workload | k | iters | path | floor ms | lloyd ms | final ms | lloyd+final ms | % of floor | kmeans++ init ms "
         "| first call ms | inertia |");
    emit("|---|---|---|---|---|---|---|---|---|---|---|---|");
    struct Case {
        const char* name;
        const Cube* image;
        int k, iters;
    };
    const Case cases[] = {{"4K RGB u8", &photo, 16, 10}, {"4K RGB u8", &photo, 256, 10}, {"610x340x103 f32", &cube, 9, 50}};
    std::vector<std::string> phases;
    for (const Case& c : cases) {
        const Cube& img = *c.image;
        // Initial centroids: one k-means++ run (default options); this first call is timed as is.
        KmeansOptions init{.k = c.k, .max_iter = 0};
        init.paint = false;
        const auto t0 = std::chrono::steady_clock::now();
        const KmeansResult seeded = kmeans(gpu, img, init);
        const double first_ms = ms_since(t0);
        double init_ms = 0;
        KmeansOptions o{.k = c.k, .init = KmeansInit::Explicit, .max_iter = c.iters, .tol = 0};
        o.init_centroids = seeded.centroids;
        o.history = false;
        std::vector<double> lloyd, fin;
        double inertia = 0;
        std::string path(kmeans_implementation(gpu, img.shape(), o));
        if (run_cpu) {
            for (int r = 0; r < 2; ++r) {
                const auto s = std::chrono::steady_clock::now();
                inertia = kmeans(gpu, img, o).inertia;
                lloyd.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
                fin.push_back(0);
            }
        } else {
            const DeviceCube d_img = DeviceCube::upload(gpu, img);
            DeviceCube d_labels(gpu, CubeShape{img.width(), img.height(), 1, DType::I32, Layout::BSQ});
            DeviceCube d_quantized(gpu, img.shape());
            KmeansOptions final_only = o;
            final_only.max_iter = 0;
            std::vector<double> seeding, explicit_start;
            for (int r = 0; r < kWarmup + kRuns; ++r) {
                double unused = 0;
                const double a = timed_into(gpu, d_img, d_labels, d_quantized, init, unused);
                const double b = timed_into(gpu, d_img, d_labels, d_quantized, final_only, unused);
                if (r >= kWarmup) {
                    seeding.push_back(a);
                    explicit_start.push_back(b);
                }
            }
            init_ms = median(seeding) - median(explicit_start);
            phases.push_back(std::string(c.name) + ", k = " + std::to_string(c.k) + ": " + seeding_phases(gpu, d_img, c.k));
            for (int r = 0; r < kWarmup + kRuns; ++r) {
                double unused = 0;
                const double full = timed_into(gpu, d_img, d_labels, d_quantized, o, inertia);
                const double last = timed_into(gpu, d_img, d_labels, d_quantized, final_only, unused);
                if (r >= kWarmup) {
                    lloyd.push_back(full - last);
                    fin.push_back(last);
                }
            }
        }
        const double n = double(img.shape().num_pixels()), m = img.bands();
        const double pass = std::max(double(img.num_bytes()) / kBandwidth, 2.0 * n * c.k * m / kFp32) * 1e3;
        const double floor_ms = pass * (c.iters + 1);
        const double l = median(lloyd), f = median(fin);
        char line[512];
        std::snprintf(line, sizeof line, "| %s | %d | %d | %s | %.3f | %.3f | %.3f | %.3f | %.0f%% | %.3f | %.1f | %.6g |",
                      c.name, c.k, c.iters, path.c_str(), floor_ms, l, f, l + f, 100.0 * floor_ms / (l + f), init_ms,
                      first_ms, inertia);
        emit(line);
    }
    emit("");
    emit("k-means++ start by device phase, ms (prepare = first pass: valid set and plan; sample = the init sample "
         "draw; kmeans++ = the steps and the centres' readback):");
    for (const std::string& p : phases) emit("- " + p);
    if (!out_path.empty()) {
        std::ofstream out(out_path);
        for (const auto& line : lines) out << line << "\n";
    }
    return 0;
}
