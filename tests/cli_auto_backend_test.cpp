// `--backend auto` picks the CPU where a CUDA process cannot win (issue 14, item 1): the rule of
// tools/cubekit/auto_backend.hpp, its per-family estimates against the crossovers measured on the GPU
// machine (bench/results/2026-11-26-h100.md), and the CLI reporting and obeying it.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "auto_backend.hpp"
#include "cubekit/context.hpp"
#include "testing.hpp"

namespace cubekit::cli {
namespace {

CubeShape shape(int w, int h, int b, DType t) { return {.width = w, .height = h, .bands = b, .dtype = t}; }

TEST(AutoBackend, RuleComparesTheCpuEstimateWithTheCudaProcessCost) {
    // 1 s of CPU work on one thread: the GPU on 1 thread, the CPU on 16 (62.5 ms < 295 ms).
    EXPECT_EQ(choose_backend({.cpu_thread_ms = 1000}, 1).backend, Backend::Cuda);
    EXPECT_EQ(choose_backend({.cpu_thread_ms = 1000}, 16).backend, Backend::Cpu);
    // Just above and below the fixed cost.
    EXPECT_EQ(choose_backend({.cpu_thread_ms = 16 * (kCudaProcessMs + 1)}, 16).backend, Backend::Cuda);
    EXPECT_EQ(choose_backend({.cpu_thread_ms = 16 * (kCudaProcessMs - 1)}, 16).backend, Backend::Cpu);
    // Copies count against the GPU: 400 ms of CPU work is not worth 3 GB of pageable copies (200 ms).
    const BackendChoice c = choose_backend({.cpu_thread_ms = 400, .bytes_moved = 3e9}, 1);
    EXPECT_EQ(c.backend, Backend::Cpu);
    EXPECT_DOUBLE_EQ(c.cpu_ms, 400);
    EXPECT_DOUBLE_EQ(c.gpu_ms, kCudaProcessMs + 3e9 / kPageableBytesPerMs);
    const nlohmann::json j = c.json();
    EXPECT_EQ(j["picked"], "cpu");
    EXPECT_EQ(j["rule"], "auto");
    EXPECT_NE(j["reason"].get<std::string>().find("below"), std::string::npos) << j.dump();
}

// The decisions the measured wall times call for at 16 threads (the GPU machine): CPU where its whole
// process beat the CUDA one, GPU where it lost.
TEST(AutoBackend, FamiliesPickWhatWasFasterOnTheGpuMachine) {
    const int threads = 16;
    const auto pick = [&](const WorkEstimate& w) { return choose_backend(w, threads).backend; };
    const CubeShape cube80 = shape(1096, 715, 102, DType::U8), pavia = shape(610, 340, 103, DType::F32);
    const CubeShape photo4k = shape(3840, 2160, 3, DType::U8), photo128 = shape(128, 128, 3, DType::U8);
    EXPECT_EQ(pick(estimate_edges(cube80)), Backend::Cpu);          // 53.5 ms CPU, 341.5 ms CUDA
    EXPECT_EQ(pick(estimate_rcmg(pavia)), Backend::Cpu);            // 50.1 vs 384.6
    EXPECT_EQ(pick(estimate_pca(pavia)), Backend::Cpu);             // 179 vs 370
    EXPECT_EQ(pick(estimate_kmeans(pavia, 9)), Backend::Cuda);      // 1019 vs 396
    EXPECT_EQ(pick(estimate_kmeans(photo4k, 16)), Backend::Cuda);   // 4696 vs 631
    EXPECT_EQ(pick(estimate_kmeans(photo128, 16)), Backend::Cpu);   // 101 vs 352
    EXPECT_EQ(pick(estimate_kmeans(shape(256, 256, 32, DType::F32), 9)), Backend::Cpu);  // 113 vs 373
    EXPECT_EQ(pick(estimate_zernike(shape(2048, 2048, 1, DType::U8), 121)), Backend::Cpu);  // 79 vs 375
    EXPECT_EQ(pick(estimate_zernike_reconstruct(2048 * 2048, 121)), Backend::Cpu);          // 191 vs 424
    EXPECT_EQ(pick(estimate_edges(shape(64, 64, 16, DType::U8))), Backend::Cpu);             // 14.5 vs 261
    EXPECT_EQ(pick(estimate_edge_baseline(shape(3840, 2160, 1, DType::U8))), Backend::Cpu);  // 331 vs 381
    // Larger work turns to the GPU: a whole Zernike set to 34 of a 64-image batch.
    EXPECT_EQ(pick(estimate_zernike(shape(2048, 2048, 64, DType::U8), 324)), Backend::Cuda);
}

// Sequential work (the watershed's CPU reference) is not divided by the threads; estimates of steps add up.
TEST(AutoBackend, SerialWorkIsNotDividedByTheThreads) {
    const WorkEstimate serial{.cpu_serial_ms = kCudaProcessMs + 10};
    EXPECT_EQ(choose_backend(serial, 1).backend, Backend::Cuda);
    EXPECT_EQ(choose_backend(serial, 64).backend, Backend::Cuda);
    EXPECT_DOUBLE_EQ(choose_backend({.cpu_thread_ms = 160, .cpu_serial_ms = 50}, 16).cpu_ms, 60);
    const WorkEstimate sum = WorkEstimate{1, 2, 3} + WorkEstimate{10, 20, 30};
    EXPECT_DOUBLE_EQ(sum.cpu_thread_ms, 11);
    EXPECT_DOUBLE_EQ(sum.bytes_moved, 22);
    EXPECT_DOUBLE_EQ(sum.cpu_serial_ms, 33);
}

// watershed, segment, classify: the CPU reference of the watershed is sequential (220 ns a pixel), the GPU's
// own time (0.88 ms for 2440×2040 on the H100, 6-9 ms host to host) is far below a CUDA process's cost.
TEST(AutoBackend, WatershedSegmentClassify) {
    for (const int threads : {1, 16}) {
        SCOPED_TRACE(threads);
        const auto pick = [&](const WorkEstimate& w) { return choose_backend(w, threads).backend; };
        // ~1.1 s of CPU against ~297 ms: the GPU, whatever the threads.
        EXPECT_EQ(pick(estimate_watershed(shape(2440, 2040, 1, DType::U8))), Backend::Cuda);
        EXPECT_EQ(pick(estimate_watershed(shape(2440, 2040, 1, DType::F32))), Backend::Cuda);
        // The crossover is ~1.3 Mpixel: 1024² (231 ms) stays, 1280² (360 ms) goes.
        EXPECT_EQ(pick(estimate_watershed(shape(1024, 1024, 1, DType::U8))), Backend::Cpu);
        EXPECT_EQ(pick(estimate_watershed(shape(1280, 1280, 1, DType::U8))), Backend::Cuda);
        EXPECT_EQ(pick(estimate_watershed(shape(95, 95, 1, DType::F32))), Backend::Cpu);
        // A volume counts its voxels: 128 slices of 128².
        EXPECT_EQ(pick(estimate_watershed(shape(128, 128, 128, DType::U8))), Backend::Cuda);
        // segment of Samson on the CPU; of a 2440×2040×32 tile on the GPU.
        EXPECT_EQ(pick(estimate_segment(shape(95, 95, 156, DType::I16))), Backend::Cpu);
        EXPECT_EQ(pick(estimate_segment(shape(2440, 2040, 32, DType::F32))), Backend::Cuda);
        // classify: nothing the GPU runs (sam, mindist, a class map; no segmentation) stays on the CPU.
        EXPECT_EQ(pick(estimate_classify(shape(2440, 2040, 200, DType::F32), 0, false)), Backend::Cpu);
        EXPECT_DOUBLE_EQ(estimate_classify(shape(610, 340, 103, DType::F32), 0, false).cpu_thread_ms, 0);
        // Salinas-A, 56 support vectors, with the vote: the CPU.
        EXPECT_EQ(pick(estimate_classify(shape(86, 83, 204, DType::F64), 56, true)), Backend::Cpu);
        // Pavia University with a large model: 21.4 M samples × 1500 SVs, 26 s on one thread.
        EXPECT_EQ(pick(estimate_classify(shape(610, 340, 103, DType::F32), 1500, false)), Backend::Cuda);
    }
    // The measured SVM prediction on the GPU machine: the CPU twin 219 ms at 16 threads (Salinas-A tiled to
    // 610×340×204, 56 SVs) against a CUDA process's 295 ms + 9.4 ms host to host: the CPU.
    const BackendChoice svm = choose_backend(estimate_classify(shape(610, 340, 204, DType::F32), 56, false), 16);
    EXPECT_EQ(svm.backend, Backend::Cpu);
    EXPECT_NEAR(svm.cpu_ms, 219, 1);
    // segment of 610×340×103 (the bench's tile): 14.7 ms of RCMG at 16 threads + 46 ms of watershed.
    const BackendChoice pavia = choose_backend(estimate_segment(shape(610, 340, 103, DType::F32)), 16);
    EXPECT_EQ(pavia.backend, Backend::Cpu);
    EXPECT_NEAR(pavia.cpu_ms, 610 * 340 * 103 * 11.0e-6 / 16 + 610 * 340 * 220e-6, 1e-9);
    // The segmentation's share of classify is segment's work and more (the gradient goes through the host).
    const CubeShape salinas = shape(86, 83, 204, DType::F64);
    const WorkEstimate voted = estimate_classify(salinas, 0, true), segmented = estimate_segment(salinas);
    EXPECT_DOUBLE_EQ(voted.cpu_thread_ms, segmented.cpu_thread_ms);
    EXPECT_GT(voted.cpu_serial_ms, segmented.cpu_serial_ms);
    EXPECT_GT(voted.bytes_moved, segmented.bytes_moved);
}

TEST(AutoBackend, LowerBoundOfTheSamplesFromTheFileSize) {
    const auto dir = testing::temp_dir("auto_bound");
    const auto write = [&](const std::string& name, const std::string& magic, std::size_t bytes) {
        std::ofstream(dir / name, std::ios::binary) << magic << std::string(bytes - magic.size(), 'x');
        return dir / name;
    };
    // A PNG: width × height × channels from its IHDR (here 300 × 200 RGB).
    const std::string ihdr = std::string("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\x01\x2c\0\0\0\xc8\x08\x02", 26);
    EXPECT_EQ(shape_lower_bound(write("a.png", ihdr, 10000)).num_elements(), 180000u);
    EXPECT_EQ(shape_lower_bound(testing::source_path("data/photos/chelsea.png")).num_elements(), 451u * 300u * 3u);
    EXPECT_EQ(shape_lower_bound(write("b.npy", "\x93NUMPY", 8000)).num_elements(), 1000u);  // f64 at most
    EXPECT_EQ(shape_lower_bound(dir / "missing.npy").num_elements(), 0u);
}

// The CLI reports the decision and follows it; --backend cpu bypasses the rule.
TEST(AutoBackend, CliReportsAndFollowsTheRule) {
    const auto dir = testing::temp_dir("auto_cli");
    const std::string samson = testing::source_path("data/samson/samson_1.img").string();
    for (const char* threads : {"1", "2"}) {
        const auto r = testing::run_cli("edges " + samson + " " + (dir / "e.png").string() + " --json --threads " + threads);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const nlohmann::json j = nlohmann::json::parse(r.out);
        ASSERT_TRUE(j.contains("backend_choice")) << r.out;
        const nlohmann::json& c = j["backend_choice"];
        const BackendChoice expected = choose_backend(estimate_edges(shape(95, 95, 156, DType::I16)), std::stoi(threads));
        EXPECT_EQ(c["picked"], expected.backend == Backend::Cuda ? "cuda" : "cpu") << c.dump();
        EXPECT_NEAR(c["cpu_estimate_ms"].get<double>(), expected.cpu_ms, 1e-9 * expected.cpu_ms) << c.dump();
        // The Samson scene is far below the crossover: the CPU, and no CUDA initialised for it.
        EXPECT_EQ(c["picked"], "cpu");
        EXPECT_EQ(j["backend"], "cpu");
    }
    const auto forced = testing::run_cli("edges " + samson + " " + (dir / "f.png").string() + " --json --backend cpu");
    ASSERT_EQ(forced.exit_code, 0) << forced.err;
    EXPECT_FALSE(nlohmann::json::parse(forced.out).contains("backend_choice")) << forced.out;
}

// watershed, segment and classify report auto's decision from their estimates; --backend cpu bypasses it.
TEST(AutoBackend, CliWatershedSegmentClassify) {
    const auto dir = testing::temp_dir("auto_watershed");
    const std::string samson = testing::source_path("data/samson/samson_1.img").string(), d = dir.string();
    ASSERT_EQ(testing::run_cli("rcmg " + samson + " " + d + "/g.npy --quiet --backend cpu").exit_code, 0);
    ASSERT_EQ(testing::run_cli("cluster " + samson + " " + d + "/cl.npy -k 4 --quiet --backend cpu").exit_code, 0);
    const CubeShape scene = shape(95, 95, 156, DType::I16);
    const struct {
        std::string args;
        WorkEstimate expected;
    } cases[] = {
        {"watershed " + d + "/g.npy " + d + "/w.npy", estimate_watershed(shape(95, 95, 1, DType::F32))},
        {"segment " + samson + " " + d + "/s.npy", estimate_segment(scene)},
        // sam: the class means run on the CPU on any backend; the vote's segmentation is the work.
        {"classify " + samson + " " + d + "/c.npy --classifier sam --train " + d + "/cl.npy --train-fraction 0.1 --segment watershed",
         estimate_classify(scene, 0, true)},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.args);
        for (const char* threads : {"1", "2"}) {
            const auto r = testing::run_cli(c.args + " --json --quiet --threads " + threads);
            ASSERT_EQ(r.exit_code, 0) << r.err;
            const nlohmann::json j = nlohmann::json::parse(r.out);
            ASSERT_TRUE(j.contains("backend_choice")) << r.out;
            const BackendChoice expected = choose_backend(c.expected, std::stoi(threads));
            EXPECT_NEAR(j["backend_choice"]["cpu_estimate_ms"].get<double>(), expected.cpu_ms, 1e-9 * expected.cpu_ms) << r.out;
            EXPECT_NEAR(j["backend_choice"]["gpu_estimate_ms"].get<double>(), expected.gpu_ms, 1e-9 * expected.gpu_ms) << r.out;
            EXPECT_EQ(j["backend_choice"]["picked"], "cpu") << r.out;  // Samson is far below every crossover
            EXPECT_EQ(j["backend"], "cpu");
        }
        const auto forced = testing::run_cli(c.args + " --json --quiet --backend cpu");
        ASSERT_EQ(forced.exit_code, 0) << forced.err;
        EXPECT_FALSE(nlohmann::json::parse(forced.out).contains("backend_choice")) << forced.out;
    }
}

// A pick of the GPU runs there when a device exists, and on the CPU (said so) when none does. The
// work must exceed the crossover on one thread: quantize of a 512² photo with k = 64.
TEST(AutoBackend, CliGpuPickWithAndWithoutADevice) {
    const std::string photo = testing::source_path("data/photos/chelsea.png").string();
    const auto dir = testing::temp_dir("auto_gpu");
    const auto r = testing::run_cli("quantize " + photo + " " + (dir / "q.png").string() + " -k 64 --json --threads 1");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    ASSERT_TRUE(j.contains("backend_choice")) << r.out;
    EXPECT_EQ(j["backend_choice"]["picked"], "cuda") << r.out;
    if (Context::cuda_device_count() > 0) {
        EXPECT_EQ(j["backend"], "cuda") << r.out;
    } else {
        EXPECT_EQ(j["backend"], "cpu") << r.out;
        EXPECT_NE(j["backend_choice"]["reason"].get<std::string>().find("no usable CUDA device"), std::string::npos)
            << r.out;
    }
}

}  // namespace
}  // namespace cubekit::cli
