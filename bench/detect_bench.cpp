// Target detection benchmark (spec detect.md §A.5, §B.5; issue 15 item 8). The cube is the synthetic
// castaway scene of spec §C.3 (1024×1024×64 f32, seed 1), resident on the device; a 64-4-1 RBF
// network centred on the scene's materials; for the multi-resolution search a hand-set pair of step
// networks on the band nearest 650 nm. GPU rows: median and minimum of kRuns CUDA-event timings after
// kWarmup runs; rows marked "wall" use the host clock (they include the final synchronisation and
// the read-back). CPU rows: the reference on all cores and on one (the seed's baseline).
//
// Floors: the RBFN reads the cube once (N·m·4 B) and writes 4 B per pixel: 272 MB / 3.0 TB/s =
// 0.091 ms; compute 2·k·N·m = 0.54 GFLOP (f32, no FMA) ≈ 0.008 ms. The block sums read the cube once
// (the same 0.09 ms) and write 20 B per block and band.
//
// Usage: detect_bench [--out FILE.md] [--write-cube FILE.npy] [--write-model FILE.json]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cubekit/detect.hpp"
#include "cubekit/io.hpp"
#include "cubekit/synth.hpp"
#include "bench_common.hpp"

#ifdef CUBEKIT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

using namespace cubekit;

namespace {

constexpr int kWarmup = 5;
constexpr int kRuns = 30;
constexpr double kBandwidth = 3.0e12;

RbfnModel scene_model(const std::vector<double>& wl) {
    RbfnModel m;
    m.bands = int(wl.size());
    m.hidden = 4;
    for (SynthMaterial mat : {SynthMaterial::Castaway, SynthMaterial::Buoy, SynthMaterial::Boat, SynthMaterial::Water})
        for (double l : wl) m.centres.push_back(synth_reflectance(mat, l));
    m.sigma = {0.8, 0.8, 1.5, 0.3};
    m.weights = {1.0, -0.4, -0.4, -0.2};
    m.bias = 0.1;
    m.target_name = "castaway";
    return m;
}

MultiresModel step_model(int bands, int band) {
    auto net = [&](double c) {
        MlpModel n;
        n.inputs = bands;
        n.hidden = 5;
        n.W1.assign(std::size_t(5) * bands, 0.0);
        n.W1[std::size_t(band)] = 1000;
        n.b1 = {-1000 * c, 0, 0, 0, 0};
        n.w2 = {1, 0, 0, 0, 0};
        n.in_min.assign(std::size_t(bands), -1.0);
        n.in_max.assign(std::size_t(bands), 1.0);
        return n;
    };
    MultiresModel m;
    m.ann1 = net(0.02);
    m.ann2 = net(0.15);
    return m;
}

double wall_ms(const std::function<void()>& work, int runs) {
    std::vector<double> ms;
    for (int r = 0; r < runs + 2; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        work();
        const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (r >= 2) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    std::string out_path, cube_path, model_path;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!std::strcmp(argv[i], "--write-cube") && i + 1 < argc) cube_path = argv[++i];
        else if (!std::strcmp(argv[i], "--write-model") && i + 1 < argc) model_path = argv[++i];
        else {
            std::fprintf(stderr, "usage: detect_bench [--out FILE.md] [--write-cube FILE.npy] [--write-model FILE.json]\n");
            return 2;
        }
    }
    const SynthScene scene = synth_castaways(1);
    const Cube& cube = scene.cube;  // BIP f32
    const RbfnModel model = scene_model(scene.wavelengths);
    int red = 0;
    for (int b = 0; b < cube.bands(); ++b)
        if (std::abs(scene.wavelengths[b] - 650) < std::abs(scene.wavelengths[red] - 650)) red = b;
    const MultiresModel multires = step_model(cube.bands(), red);
    if (!cube_path.empty()) write_cube(cube, cube_path);
    if (!model_path.empty()) write_model(model, model_path);
    std::string report;
    auto emit = [&](const std::string& line) {
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
        report += line + "\n";
    };
    const double pixels = double(cube.width()) * cube.height();
    const double floor_ms = (double(cube.num_bytes()) + 4 * pixels) / kBandwidth * 1e3;
    char line[512];
    emit("## Target detection (castaways 1024x1024x64 f32, RBFN 64-4-1; multires step nets, block 8)");
    emit("");
#ifdef CUBEKIT_HAVE_CUDA
    const Context gpu({.backend = Backend::Cuda});
    const cudaStream_t stream = static_cast<cudaStream_t>(gpu.cuda_stream());
    const DeviceCube d_bip = DeviceCube::upload(gpu, cube), d_bsq = DeviceCube::upload(gpu, cube.to_layout(Layout::BSQ));
    DeviceCube d_score(gpu, CubeShape{cube.width(), cube.height(), 1, DType::F32, Layout::BSQ});
    std::vector<DeviceCube> d_many;
    for (int j = 0; j < 4; ++j) d_many.emplace_back(gpu, CubeShape{cube.width(), cube.height(), 1, DType::F32, Layout::BSQ});
    auto events_ms = [&](const std::function<void()>& work, float& best) {
        return bench::event_median_ms(stream, kWarmup, kRuns, work, best);
    };
    emit("| workload (GPU, cube on the device) | floor ms | median ms | min ms | median / floor |");
    emit("|---|---|---|---|---|");
    auto row = [&](const std::string& name, double floor, const std::function<void()>& work) {
        float best = 0;
        const double median = events_ms(work, best);
        std::snprintf(line, sizeof line, "| %s | %.3f | %.3f | %.3f | %.2f× |", name.c_str(), floor, median, double(best), median / floor);
        emit(line);
    };
    auto scores = [&](const CubeView& in, const PixelOptions& o) {
        const MutableCubeView out = d_score.mutable_view();
        rbfn_scores_into(gpu, in, std::span<const RbfnModel>(&model, 1), std::span<const MutableCubeView>(&out, 1), o);
    };
    row("rbfn fused, BIP", floor_ms, [&] { scores(d_bip, {}); });
    row("rbfn fused, BSQ", floor_ms, [&] { scores(d_bsq, {}); });
    row("rbfn neuron (seed mapping), BIP", floor_ms, [&] { scores(d_bip, {.mapping = RbfnMapping::Neuron}); });
    row("rbfn synapse (seed mapping), BIP", floor_ms, [&] { scores(d_bip, {.mapping = RbfnMapping::Synapse}); });
    for (std::int64_t chunk : {std::int64_t(1) << 10, std::int64_t(1) << 14, std::int64_t(1) << 18})
        row("rbfn fused, BIP, chunk 2^" + std::to_string(__builtin_ctzll(std::uint64_t(chunk))), floor_ms,
            [&] { scores(d_bip, {.chunk_pixels = chunk}); });
    const std::vector<RbfnModel> four(4, model);
    row("rbfn fused, 4 models in one pass, BIP", (double(cube.num_bytes()) + 16 * pixels) / kBandwidth * 1e3, [&] {
        std::vector<MutableCubeView> outs;
        for (DeviceCube& d : d_many) outs.push_back(d.mutable_view());
        rbfn_scores_into(gpu, d_bip, four, outs, {});
    });
    emit("");
    emit("| workload (wall clock) | median ms |");
    emit("|---|---|");
    auto wall_row = [&](const std::string& name, int runs, const std::function<void()>& work) {
        std::snprintf(line, sizeof line, "| %s | %.3f |", name.c_str(), wall_ms(work, runs));
        emit(line);
    };
    wall_row("multires, cube on the device (GPU: sums, pyramid, descent, read-back)", 20,
             [&] { detect_multires(gpu, d_bip, multires); });
    wall_row("multires, BSQ cube on the device", 20, [&] { detect_multires(gpu, d_bsq, multires); });
    wall_row("rbfn scores, host cube in, host map out (GPU, pageable)", 10, [&] {
        Cube out(cube.width(), cube.height(), 1, DType::F32, Layout::BSQ);
        DeviceCube d = DeviceCube::upload(gpu, cube);
        scores(d, {});
        (void)d_score.download(gpu);
    });
    wall_row("detect_pixels (scores, mask, labels, objects), host cube in (GPU)", 10, [&] { detect_pixels(gpu, cube, model); });
    const MultiresResult mr = detect_multires(gpu, d_bip, multires);
    std::snprintf(line, sizeof line, "multires: %zu windows, %zu levels evaluated", mr.detections.size(), mr.levels.size());
    emit("");
    emit(line);
#else
    std::fprintf(stderr, "detect_bench: built without CUDA; CPU rows only\n");
#endif
    emit("");
    emit("| workload (CPU reference) | threads | median ms |");
    emit("|---|---|---|");
    for (int threads : {0, 1}) {
        const Context cpu({.backend = Backend::Cpu, .threads = threads});
        const std::string t = threads == 0 ? "all" : "1";
        std::snprintf(line, sizeof line, "| rbfn scores | %s | %.1f |", t.c_str(),
                      wall_ms([&] { detect_pixels(cpu, cube, model, {.objects = false}); }, threads == 0 ? 5 : 1));
        emit(line);
        std::snprintf(line, sizeof line, "| multires | %s | %.1f |", t.c_str(),
                      wall_ms([&] { detect_multires(cpu, cube, multires); }, threads == 0 ? 5 : 1));
        emit(line);
    }
    if (!out_path.empty()) {
        FILE* f = std::fopen(out_path.c_str(), "a");
        if (f) {
            std::fputs(report.c_str(), f);
            std::fclose(f);
        }
    }
    return 0;
}
