// The GPU kernels of the classification (issue 16 item 3) against the CPU references: the region
// vote (labels and statistics identical) and the SVM prediction (labels identical; decision values
// within kDecisionTol·Σ|coef|: the GPU's exp and glibc's may differ by an ulp or two, every other
// operation is the same f64 expression in the same order).
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "cubekit/classify.hpp"
#include "cubekit/io.hpp"
#include "cubekit/synth.hpp"
#include "cubekit/watershed.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using testing::cubes_identical;

constexpr double kDecisionTol = 1e-14;

Cube random_labels(int W, int H, std::int32_t top, std::uint64_t seed, double zero_share) {
    Cube c(W, H, 1, DType::I32);
    SplitMix64 rng{seed};
    for (std::int64_t p = 0; p < std::int64_t(W) * H; ++p)
        c.data<std::int32_t>()[p] = rng.uniform() < zero_share ? 0 : 1 + std::int32_t(rng.uniform() * top);
    return c;
}

void expect_same_vote(const Context& gpu, const Cube& regions, const Cube& classes, double tau) {
    SCOPED_TRACE("tau " + std::to_string(tau));
    const VoteResult c = region_vote(cpu_context(), regions, classes, {.tau = tau});
    const VoteResult g = region_vote(gpu, regions, classes, {.tau = tau});
    EXPECT_TRUE(cubes_identical(c.classes, g.classes));
    EXPECT_EQ(c.stats.regions, g.stats.regions);
    EXPECT_EQ(c.stats.relabelled, g.stats.relabelled);
    EXPECT_EQ(c.stats.ties, g.stats.ties);
    EXPECT_EQ(c.stats.no_voters, g.stats.no_voters);
    EXPECT_EQ(c.stats.below_tau, g.stats.below_tau);
    EXPECT_EQ(c.stats.changed_pixels, g.stats.changed_pixels);
}

TEST(ClassifyGpu, VoteMatchesCpu) {
    REQUIRE_GPU();
    // The header's worked case: a win, a tie, a region without voters.
    Cube regions(8, 1, 1, DType::I32), classes(8, 1, 1, DType::I32);
    const std::int32_t r[8] = {1, 1, 1, 2, 2, 2, 3, 3}, k[8] = {5, 5, 7, 4, 6, 0, 0, 0};
    std::copy(r, r + 8, regions.data<std::int32_t>());
    std::copy(k, k + 8, classes.data<std::int32_t>());
    const VoteResult v = region_vote(gpu, regions, classes);
    const std::int32_t expected[8] = {5, 5, 5, 4, 6, 0, 0, 0};
    EXPECT_TRUE(std::equal(expected, expected + 8, v.classes.data<std::int32_t>()));
    EXPECT_EQ(v.stats.ties, 1);
    EXPECT_EQ(v.stats.no_voters, 1);
    for (std::uint64_t seed : {1, 2, 3})
        for (double tau : {0.0, 0.5, 0.75}) {
            // Few classes and small regions: many ties; region 0 and class 0 pixels.
            expect_same_vote(gpu, random_labels(97, 61, 300, seed, 0.05), random_labels(97, 61, 3, seed + 10, 0.2), tau);
            expect_same_vote(gpu, random_labels(131, 7, 20, seed + 20, 0.0), random_labels(131, 7, 9, seed + 30, 0.5), tau);
        }
    // Watershed regions of a real-looking relief, a device-resident call into a poisoned output.
    const Cube relief = random_labels(200, 150, 50, 7, 0.0);
    const Cube ws = watershed(cpu_context(), relief).labels;
    const Cube cls = random_labels(200, 150, 4, 8, 0.1);
    const VoteResult ref = region_vote(cpu_context(), ws, cls);
    const DeviceCube d_ws = DeviceCube::upload(gpu, ws), d_cls = DeviceCube::upload(gpu, cls);
    DeviceCube out(gpu, {200, 150, 1, DType::I32, Layout::BSQ});
    out.buffer().fill_bytes(gpu, 0x7F);
    const VoteStats s = region_vote_into(gpu, d_ws, d_cls, out);
    EXPECT_TRUE(cubes_identical(ref.classes, out.download(gpu)));
    EXPECT_EQ(s.relabelled, ref.stats.relabelled);
    // A u8 class map goes through the host checks: the same answer.
    expect_same_vote(gpu, ws, cls.to_dtype(DType::U8).to_dtype(DType::I32), 0.0);
}

// CPU twin vs GPU on `cube` with model m: labels identical, decision values within tolerance.
void expect_same_svm(const Context& gpu, const CubeView& cube, const SvmModel& m) {
    const SvmPrediction c = predict_svm(cpu_context(), cube, m, {.decision_values = true});
    const SvmPrediction g = predict_svm(gpu, cube, m, {.decision_values = true});
    EXPECT_TRUE(cubes_identical(c.classes, g.classes));
    EXPECT_EQ(c.non_finite, g.non_finite);
    double coef_sum = 0;
    for (double v : m.coef) coef_sum += std::abs(v);
    double worst = 0;
    const double* a = c.decision_values.data<double>();
    const double* b = g.decision_values.data<double>();
    for (std::size_t i = 0; i < c.decision_values.view().num_elements(); ++i) {
        if (std::isnan(a[i]) || std::isnan(b[i])) {
            EXPECT_TRUE(std::isnan(a[i]) && std::isnan(b[i])) << "element " << i;
            continue;
        }
        worst = std::max(worst, std::abs(a[i] - b[i]));
    }
    EXPECT_LE(worst, kDecisionTol * coef_sum);
    std::cout << "[ svm gpu vs cpu ] " << cube.width() << "x" << cube.height() << "x" << cube.bands() << ", " << m.num_sv()
              << " SVs, " << m.classes.size() << " classes: worst |decision difference| " << worst << " (bound "
              << kDecisionTol * coef_sum << ")\n";
}

TEST(ClassifyGpu, SvmMatchesCpuTwin) {
    REQUIRE_GPU();
    const int W = 53, H = 41, B = 7;
    Cube cube(W, H, B, DType::F32, Layout::BIP), train(W, H, 1, DType::I32);
    SplitMix64 rng{5};
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const int k = (x / 11 + y / 9) % 5;
            for (int b = 0; b < B; ++b) cube.at<float>(x, y, b) = float(40 * k + 10 * b * (k % 2) + 12 * rng.normal());
            if ((x * 7 + y) % 4 == 0) train.at<std::int32_t>(x, y, 0) = 2 * k + 1;
        }
    cube.at<float>(3, 4, 2) = std::nanf("");  // a non-finite pixel: class 0, NaN decisions
    const SvmModel m = train_svm(cpu_context(), cube, train, {.svm_c = 10, .svm_gamma = 0.5});
    expect_same_svm(gpu, cube, m);
    expect_same_svm(gpu, cube.to_dtype(DType::F64).to_layout(Layout::BSQ), m);
    // In tiles on the device (issue 17): the whole call's classes, SVM and class means.
    Cube tiled(W, H, 1, DType::I32);
    predict_svm_tiled(gpu, cube, m, tiled.mutable_view(), {.lanes = 2, .tile_width = 9, .tile_height = 7});
    EXPECT_TRUE(cubes_identical(predict_svm(gpu, cube, m).classes, tiled));
    const ClassMeans means = train_class_means(cpu_context(), cube, train, Classifier::Sam);
    predict_class_means_tiled(gpu, cube, means, tiled.mutable_view(), {.device_memory_limit = 64 << 10});
    EXPECT_TRUE(cubes_identical(predict_class_means(cpu_context(), cube, means), tiled));
    // From a file read by windows (classify --model-in in tiles).
    const auto file = testing::temp_dir("classify_gpu_tiles") / "cube.npy";
    write_cube(cube, file);
    predict_svm_tiled(gpu, CubeFile(file), m, tiled.mutable_view(), {.device_memory_limit = 64 << 10});
    EXPECT_TRUE(cubes_identical(predict_svm(gpu, cube, m).classes, tiled));
    predict_class_means_tiled(gpu, CubeFile(file), means, tiled.mutable_view(), {.lanes = 2, .tile_width = 20, .tile_height = 9});
    EXPECT_TRUE(cubes_identical(predict_class_means(cpu_context(), cube, means), tiled));
    const auto cube_path = testing::shared_data_path("classification/salinas_a/SalinasA_corrected.mat");
    const auto gt_path = testing::shared_data_path("classification/salinas_a/SalinasA_gt.mat");
    if (!cube_path || !gt_path) GTEST_SKIP() << "Salinas-A is absent (../shared/data/classification/salinas_a)";
    const Cube sa = read_cube(*cube_path, {.var = "salinasA_corrected"});
    const Split split = stratified_split(cpu_context(), read_cube(*gt_path, {.var = "salinasA_gt"}), {.train_fraction = 0.05, .seed = 1});
    expect_same_svm(gpu, sa, train_svm(cpu_context(), sa, split.train, {.seed = 1}));
}

}  // namespace
}  // namespace cubekit
