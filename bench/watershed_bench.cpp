// Watershed benchmark (spec gradient-watershed.md §B4; issue 16 item 5). Reliefs: the 2440×2040
// noise and smooth gradients of bench/peers/watershed_images.py (u8, and the f32 they were scaled
// from), and the RCMG (8-connectivity, r = 1) of the Samson scene mirror-tiled to 610×340×103 and to
// 2440×2040×32, quantised to u8 with the spec's levels rule (256 levels) — written next to the
// others so the peers (NPP, scikit-image) run on the same u8 images.
// GPU rows: relief on the device → labels on the device (watershed_into), median and minimum of
// kRuns CUDA-event timings after kWarmup runs; "host" rows: host relief → host labels (the plain
// call), wall clock. The labels of every GPU row at 8-connectivity are compared with the CPU
// reference once (identical or not).
//
// Floor: the relief is read and the labels written once — (N·sizeof(T) + 4N) B / 3.0 TB/s (8 µs for
// 2440×2040 u8); the automaton's iterations stay in L2 (state ≈ 13 B per pixel) and add ≈ 5 passes.
//
// Usage: watershed_bench --images DIR [--out FILE.md] [--cpu-limit N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "cubekit/classify.hpp"
#include "cubekit/gradient.hpp"
#include "cubekit/io.hpp"
#include "cubekit/watershed.hpp"

using namespace cubekit;

namespace {

constexpr int kWarmup = 3;
constexpr int kRuns = 20;

struct Relief {
    std::string name;
    Cube host;
};

double wall_ms(const std::function<void()>& work, int runs) { return bench::wall_median_ms(work, runs); }

std::string fmt(double v, int digits = 3) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", digits, v);
    return b;
}

// The RCMG relief of the tiled scene (f32, on the host) and its u8 quantisation, both written to dir.
std::vector<Relief> rcmg_reliefs(const Context& gpu, const Cube& scene, int w, int h, int bands, const std::string& name,
                                 const std::filesystem::path& dir) {
    const Cube cube = bench::tile_scene(scene, w, h, bands, DType::F32);
    Cube grad = rcmg(gpu, cube, {.connectivity = 8, .reject = 1});
    Cube q = quantize_levels(Context({.backend = Backend::Cpu}), grad, 256).to_dtype(DType::U8);
    write_cube(grad, dir / (name + "_f32.npy"));
    write_cube(q, dir / (name + ".npy"));
    std::vector<Relief> out;
    out.push_back({name, std::move(q)});
    out.push_back({name + "_f32", std::move(grad)});
    return out;
}

// GPU SVM prediction (issue 16 item 5): a model trained on Salinas-A (5 % split, seed 1, C and γ by
// cross-validation), applied to Salinas-A mirror-tiled to 610×340×204; against the CPU twin and
// LIBSVM's svm_predict_values, both over pixel rows with OpenMP on every core.
void svm_rows(const Context& gpu, const std::function<void(const std::string&)>& emit, const std::filesystem::path& out_dir) {
    const char* shared = std::getenv("CUBEKIT_SHARED_DATA");
    const std::filesystem::path dir = std::filesystem::path(shared ? shared : std::string(CUBEKIT_SOURCE_DIR) + "/../shared/data") /
                                      "classification/salinas_a";
    if (!std::filesystem::exists(dir / "SalinasA_corrected.mat")) {
        emit("\nSVM rows skipped: " + (dir / "SalinasA_corrected.mat").string() + " is absent.");
        return;
    }
    const Context cpu({.backend = Backend::Cpu});
    const Cube sa = read_cube(dir / "SalinasA_corrected.mat", {.var = "salinasA_corrected"});
    const Split split = stratified_split(cpu, read_cube(dir / "SalinasA_gt.mat", {.var = "salinasA_gt"}), {.train_fraction = 0.05, .seed = 1});
    const SvmModel m = train_svm(cpu, sa, split.train, {.seed = 1});
    const Cube cube = bench::tile_scene(sa, 610, 340, sa.bands(), DType::F32);
    Cube gpu_classes, cpu_classes;
    const double gpu_ms = wall_ms([&] { gpu_classes = predict_svm(gpu, cube, m).classes; }, 5);
    const DeviceCube d_cube = DeviceCube::upload(gpu, cube);  // BSQ, what the kernel reads
    const double resident_ms = wall_ms([&] { (void)predict_svm(gpu, d_cube, m); }, 5);
    const double twin_ms = wall_ms([&] { cpu_classes = predict_svm(cpu, cube, m).classes; }, 1);
    const double libsvm_ms = wall_ms([&] { (void)predict_svm(cpu, cube, m, {.engine = SvmEngine::Libsvm}); }, 1);
    const bool same = std::memcmp(gpu_classes.view().data(), cpu_classes.view().data(), gpu_classes.num_bytes()) == 0;
    // For the PyTorch peer (bench/peers/svm_torch.py): the cube (H, W, B), the model, our classes.
    write_cube(cube.to_layout(Layout::BIP), out_dir / "svm_cube.npy");
    write_svm_model(m, out_dir / "svm_model");
    write_cube(gpu_classes, out_dir / "svm_classes.npy");
    emit("");
    emit("SVM prediction, Salinas-A model (" + std::to_string(m.num_sv()) + " SVs, " + std::to_string(m.classes.size()) +
         " classes, C " + fmt(m.c, 0) + ", γ " + fmt(m.gamma, 5) + ") on Salinas-A tiled to 610×340×" + std::to_string(sa.bands()) +
         " f32: GPU host cube → host classes " + fmt(gpu_ms, 2) + " ms (wall, median of 5), device-resident BSQ cube " +
         fmt(resident_ms, 2) + " ms; CPU twin " + fmt(twin_ms, 0) + " ms, LIBSVM svm_predict_values " + fmt(libsvm_ms, 0) +
         " ms (OpenMP, " + std::to_string(cpu.threads()) + " threads, one run); GPU labels = CPU twin: " + (same ? "yes" : "**NO**") + ".");
}

}  // namespace

int main(int argc, char** argv) {
    std::string out_path, images;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!std::strcmp(argv[i], "--images") && i + 1 < argc) images = argv[++i];
        else {
            std::fprintf(stderr, "usage: watershed_bench --images DIR [--out FILE.md]\n");
            return 2;
        }
    }
    if (images.empty()) {
        std::fprintf(stderr, "watershed_bench: --images DIR (made by bench/peers/watershed_images.py) is required\n");
        return 2;
    }
#ifdef CUBEKIT_HAVE_CUDA
    if (Context::cuda_device_count() == 0) {
        std::fprintf(stderr, "watershed_bench: no CUDA device\n");
        return 4;
    }
    const Context gpu({.backend = Backend::Cuda});
    const Context cpu({.backend = Backend::Cpu});
    std::vector<std::string> lines;
    auto emit = [&](const std::string& line) {
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
        lines.push_back(line);
    };
    std::vector<Relief> reliefs;
    for (const char* name : {"noise", "smooth", "noise_f32", "smooth_f32"})
        reliefs.push_back({name, read_cube(std::filesystem::path(images) / (std::string(name) + ".npy"))});
    const Cube scene = read_cube(std::string(CUBEKIT_SOURCE_DIR) + "/data/samson/samson_1.img");
    for (Relief& r : rcmg_reliefs(gpu, scene, 610, 340, 103, "rcmg610", images)) reliefs.push_back(std::move(r));
    for (Relief& r : rcmg_reliefs(gpu, scene, 2440, 2040, 32, "rcmg2440", images)) reliefs.push_back(std::move(r));

    emit("# Watershed benchmark on " + gpu.device_name());
    emit("");
    emit("Relief on the device → i32 labels on the device (`watershed_into`), median / min of " + std::to_string(kRuns) +
         " CUDA-event runs after " + std::to_string(kWarmup) + " warm-ups; host = NumPy-like host relief → host labels, "
         "wall median of 5. CPU = the reference (one thread), one run. Floor = (relief + labels bytes) / 3.0 TB/s.");
    emit("");
    emit("| relief | size | type | conn | schedule | regions | median ms | min ms | host ms | floor ms | CPU ms | = CPU |");
    emit("|---|---|---|---|---|---|---|---|---|---|---|---|");
    cudaStream_t stream = static_cast<cudaStream_t>(gpu.cuda_stream());
    for (const Relief& r : reliefs) {
        const DeviceCube d_relief = DeviceCube::upload(gpu, r.host);
        DeviceCube d_labels(gpu, {r.host.width(), r.host.height(), 1, DType::I32, Layout::BSQ});
        const double floor_ms = (double(r.host.num_bytes()) + 4.0 * double(r.host.view().num_pixels())) / 3.0e12 * 1e3;
        for (int conn : {8, 4}) {
            Cube cpu_labels;
            double cpu_ms = 0;
            if (conn == 8) {
                const auto t0 = std::chrono::steady_clock::now();
                cpu_labels = watershed(cpu, r.host, {.connectivity = conn}).labels;
                cpu_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            }
            for (WatershedSchedule s : {WatershedSchedule::Auto, WatershedSchedule::Synchronous}) {
                const WatershedOptions o{.connectivity = conn, .schedule = s};
                std::int64_t regions = 0;
                float best = 0;
                const double median = bench::event_median_ms(stream, kWarmup, kRuns,
                    [&] { regions = watershed_into(gpu, d_relief, d_labels, o); }, best);
                std::string same = "-";
                double host_ms = 0;
                if (conn == 8) {
                    const Cube labels = d_labels.download(gpu);
                    same = std::memcmp(labels.view().data(), cpu_labels.view().data(), labels.num_bytes()) == 0 ? "yes" : "**NO**";
                }
                if (s == WatershedSchedule::Auto) host_ms = wall_ms([&] { (void)watershed(gpu, r.host, o); }, 5);
                emit("| " + r.name + " | " + std::to_string(r.host.width()) + "×" + std::to_string(r.host.height()) + " | " +
                     std::string(dtype_name(r.host.dtype())) + " | " + std::to_string(conn) + " | " +
                     std::string(enum_name(s)) + " | " + std::to_string(regions) + " | " + fmt(median) + " | " + fmt(best) +
                     " | " + (host_ms > 0 ? fmt(host_ms, 2) : "-") + " | " + fmt(floor_ms, 4) + " | " +
                     (conn == 8 && s == WatershedSchedule::Auto ? fmt(cpu_ms, 0) : "-") + " | " + same + " |");
            }
        }
    }
    // The segment chain on the 610×340×103 cube: rcmg_into then watershed_into, all on the device.
    {
        const Cube cube = bench::tile_scene(scene, 610, 340, 103, DType::F32);
        const DeviceCube d_cube = DeviceCube::upload(gpu, cube);
        DeviceCube d_grad(gpu, {610, 340, 1, DType::F32, Layout::BSQ}), d_labels(gpu, {610, 340, 1, DType::I32, Layout::BSQ});
        float best = 0;
        std::int64_t regions = 0;
        const double median = bench::event_median_ms(stream, kWarmup, kRuns, [&] {
            rcmg_into(gpu, d_cube, d_grad, {.connectivity = 8, .reject = 1});
            regions = watershed_into(gpu, d_grad, d_labels, {.connectivity = 8});
        }, best);
        const double host_ms = wall_ms([&] { (void)segment(gpu, cube); }, 5);
        emit("");
        emit("Segment chain (RCMG 8-conn r = 1, f64 sums → watershed 8-conn) on the 610×340×103 f32 cube, device-resident: "
             "median " + fmt(median) + " ms, min " + fmt(best) + " ms, " + std::to_string(regions) + " regions; host cube → "
             "host labels (`segment`): " + fmt(host_ms, 2) + " ms. Target ≤ 1 ms (device-resident).");
    }
    svm_rows(gpu, emit, images);
    if (!out_path.empty()) {
        std::string text;
        for (const std::string& l : lines) text += l + "\n";
        write_text_file(out_path, text);
    }
    return 0;
#else
    std::fprintf(stderr, "watershed_bench: built without CUDA\n");
    return 4;
#endif
}
