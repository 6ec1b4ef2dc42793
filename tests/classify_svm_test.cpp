// The SVM of the classification family: cubekit's CPU twin of LIBSVM's decision function against
// LIBSVM's own svm_predict_values (labels equal, decision values within kDecisionRelTol), on a
// synthetic scene and on Salinas-A; the model files; the cross-validation's determinism; bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "cubekit/classify.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "cubekit/synth.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;

/// Both evaluate the same f64 expression in the same order with the same libm exp, so they agree
/// to the last bit where LIBSVM was compiled without contraction (Debian's x86-64 build); the
/// tolerance allows a build that contracts into FMA.
constexpr double kDecisionRelTol = 1e-9;

/// Three Gaussian classes in 6 bands around separated means, 40×30 pixels; labels 1, 4, 9 in bands
/// of rows, about a third of them also in `train` (every third pixel).
struct Scene {
    Cube cube, truth, train;
};

Scene gaussian_scene(std::uint64_t seed) {
    const int W = 40, H = 30, B = 6;
    const std::int32_t labels[3] = {1, 4, 9};
    const double means[3][B] = {{100, 120, 140, 150, 150, 140}, {110, 110, 110, 120, 140, 170}, {90, 130, 160, 150, 120, 100}};
    Scene s{Cube(W, H, B, DType::F32, Layout::BIP), Cube(W, H, 1, DType::I32), Cube(W, H, 1, DType::I32)};
    SplitMix64 rng{seed};
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const int k = (y / 10 + (x > 25 ? 1 : 0)) % 3;
            for (int b = 0; b < B; ++b) s.cube.at<float>(x, y, b) = float(means[k][b] + 9 * rng.normal());
            s.truth.at<std::int32_t>(x, y, 0) = labels[k];
            if ((x + y * W) % 3 == 0) s.train.at<std::int32_t>(x, y, 0) = labels[k];
        }
    return s;
}

/// Labels equal on every pixel (or on `where` ≠ 0) and the worst relative decision difference.
double expect_engines_agree(const Cube& cube, const SvmModel& m, const Cube* where = nullptr) {
    const SvmPrediction twin = predict_svm(cpu_context(), cube, m, {.engine = SvmEngine::Cubekit, .decision_values = true});
    const SvmPrediction lib = predict_svm(cpu_context(), cube, m, {.engine = SvmEngine::Libsvm, .decision_values = true});
    const int P = twin.decision_values.bands();
    EXPECT_EQ(P, int(m.classes.size() * (m.classes.size() - 1) / 2));
    double worst = 0;
    std::int64_t compared = 0, differing = 0, bit_equal = 0;
    for (int y = 0; y < cube.height(); ++y)
        for (int x = 0; x < cube.width(); ++x) {
            if (where && where->at<std::int32_t>(x, y, 0) == 0) continue;
            ++compared;
            differing += twin.classes.at<std::int32_t>(x, y, 0) != lib.classes.at<std::int32_t>(x, y, 0);
            for (int p = 0; p < P; ++p) {
                const double a = twin.decision_values.at<double>(x, y, p), b = lib.decision_values.at<double>(x, y, p);
                bit_equal += a == b;
                worst = std::max(worst, std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-300}));
            }
        }
    EXPECT_EQ(differing, 0) << "labels differ on " << differing << " of " << compared << " pixels";
    EXPECT_LE(worst, kDecisionRelTol);
    std::cout << "[ twin vs LIBSVM ] " << compared << " pixels, " << m.num_sv() << " SVs, labels differ on " << differing
              << ", decision values bit-equal " << bit_equal << " of " << compared * P << ", worst relative difference "
              << worst << "\n";
    return worst;
}

TEST(ClassifySvm, TwinMatchesLibsvmOnASyntheticScene) {
    const Scene s = gaussian_scene(7);
    const SvmModel m = train_svm(cpu_context(), s.cube, s.train, {.svm_c = 10, .svm_gamma = 0.5});
    EXPECT_EQ(m.classes, (std::vector<std::int32_t>{1, 4, 9}));  // fed in ascending order
    EXPECT_GT(m.num_sv(), 0u);
    EXPECT_TRUE(m.grid.empty());
    expect_engines_agree(s.cube, m);
    const ClassificationScores a = classification_scores(cpu_context(), predict_svm(cpu_context(), s.cube, m).classes, s.truth);
    EXPECT_GT(a.oa, 0.9);
}

TEST(ClassifySvm, TiledPredictionEqualsWhole) {  // issue 17
    const Context& cpu = testing::cpu_context();
    const int W = 29, H = 23, B = 4;
    Cube cube(W, H, B, DType::F32, Layout::BIL), train(W, H, 1, DType::I32);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const int k = (x / 7 + y / 5) % 3;
            for (int b = 0; b < B; ++b) cube.at<float>(x, y, b) = float(20 * k + b * k + ((x * 13 + y * 7 + b) % 9));
            if ((x + 3 * y) % 5 == 0) train.at<std::int32_t>(x, y, 0) = k + 1;
        }
    cube.at<float>(5, 6, 1) = std::nanf("");
    const SvmModel m = train_svm(cpu, cube, train, {.svm_c = 10, .svm_gamma = 0.5});
    const ClassMeans means = train_class_means(cpu, cube, train, Classifier::MinDist);
    for (auto [tw, th] : {std::pair{1, 1}, std::pair{6, 4}, std::pair{29, 2}}) {
        Cube tiled(W, H, 1, DType::I32);
        const TiledRun r = predict_svm_tiled(cpu, cube, m, tiled.mutable_view(), {.tile_width = tw, .tile_height = th});
        EXPECT_GT(r.tiles, 1u);
        EXPECT_TRUE(testing::cubes_identical(predict_svm(cpu, cube, m).classes, tiled));
        predict_class_means_tiled(cpu, cube, means, tiled.mutable_view(), {.tile_width = tw, .tile_height = th});
        EXPECT_TRUE(testing::cubes_identical(predict_class_means(cpu, cube, means), tiled));
    }
}

TEST(ClassifySvm, CrossValidationIsSeededAndPicksAGridPoint) {
    const Scene s = gaussian_scene(3);
    const SvmModel a = train_svm(cpu_context(), s.cube, s.train, {.cv_folds = 4, .seed = 11});
    const SvmModel b = train_svm(cpu_context(), s.cube, s.train, {.cv_folds = 4, .seed = 11});
    ASSERT_EQ(a.grid.size(), 25u);
    for (std::size_t i = 0; i < a.grid.size(); ++i) EXPECT_EQ(a.grid[i].accuracy, b.grid[i].accuracy) << "point " << i;
    EXPECT_EQ(a.c, b.c);
    EXPECT_EQ(a.gamma, b.gamma);
    EXPECT_EQ(a.support_vectors, b.support_vectors);
    double best = 0;
    for (const SvmGridPoint& g : a.grid) best = std::max(best, g.accuracy);
    EXPECT_EQ(a.cv_accuracy, best);
    const auto first = std::find_if(a.grid.begin(), a.grid.end(), [&](const SvmGridPoint& g) { return g.accuracy == best; });
    EXPECT_EQ(first->c, a.c);  // ties go to the first point
    EXPECT_EQ(first->gamma, a.gamma);
    // With only γ given, the grid runs over C alone.
    EXPECT_EQ(train_svm(cpu_context(), s.cube, s.train, {.svm_gamma = 0.1}).grid.size(), 5u);
}

TEST(ClassifySvm, ModelFileRoundTrip) {
    const Scene s = gaussian_scene(5);
    const SvmModel m = train_svm(cpu_context(), s.cube, s.train, {.cv_folds = 3});
    const auto path = testing::temp_dir("classify_svm") / "scene.svm";
    write_svm_model(m, path);
    EXPECT_TRUE(std::filesystem::is_regular_file(path.string() + ".scaling.json"));
    const SvmModel r = read_svm_model(path);
    EXPECT_EQ(r.classes, m.classes);
    EXPECT_EQ(r.sv_count, m.sv_count);
    EXPECT_EQ(r.coef, m.coef);  // %.17g
    EXPECT_EQ(r.rho, m.rho);
    EXPECT_EQ(r.gamma, m.gamma);
    EXPECT_EQ(r.c, m.c);
    EXPECT_EQ(r.scale_min, m.scale_min);
    EXPECT_EQ(r.cv_accuracy, m.cv_accuracy);
    EXPECT_EQ(r.grid.size(), m.grid.size());
    ASSERT_EQ(r.support_vectors.size(), m.support_vectors.size());
    for (std::size_t i = 0; i < m.support_vectors.size(); ++i)  // LIBSVM writes them with %.8g
        EXPECT_NEAR(r.support_vectors[i], m.support_vectors[i], 1e-8) << "value " << i;
    const Cube a = predict_svm(cpu_context(), s.cube, m).classes, b = predict_svm(cpu_context(), s.cube, r).classes;
    EXPECT_TRUE(testing::cubes_identical(a, b));
    expect_engines_agree(s.cube, r);
}

TEST(ClassifySvm, NonFinitePixels) {
    Scene s = gaussian_scene(9);
    s.cube.at<float>(3, 0, 2) = NAN;  // a training pixel (x + y·W = 3) and a predicted one
    const SvmModel m = train_svm(cpu_context(), s.cube, s.train, {.svm_c = 10, .svm_gamma = 0.5});
    EXPECT_EQ(m.training_pixels, 399);  // 400 labelled, one left out
    const SvmPrediction p = predict_svm(cpu_context(), s.cube, m, {.decision_values = true});
    EXPECT_EQ(p.non_finite, 1);
    EXPECT_EQ(p.classes.at<std::int32_t>(3, 0, 0), 0);
    EXPECT_TRUE(std::isnan(p.decision_values.at<double>(3, 0, 0)));
}

TEST(ClassifySvm, RejectsBadInputs) {
    const Scene s = gaussian_scene(1);
    Cube one(s.train.width(), s.train.height(), 1, DType::I32);
    one.at<std::int32_t>(0, 0, 0) = one.at<std::int32_t>(1, 0, 0) = 4;
    EXPECT_THROW(
        {
            try {
                train_svm(cpu_context(), s.cube, one);
            } catch (const InvalidInput& e) {
                EXPECT_NE(std::string(e.what()).find("at least 2"), std::string::npos) << e.what();
                throw;
            }
        },
        InvalidInput);
    EXPECT_THROW(train_svm(cpu_context(), s.cube, s.train, {.svm_c = -1}), InvalidInput);
    EXPECT_THROW(train_svm(cpu_context(), s.cube, s.train, {.cv_folds = 1}), InvalidInput);
    const SvmModel m = train_svm(cpu_context(), s.cube, s.train, {.svm_c = 1, .svm_gamma = 1});
    EXPECT_THROW(predict_svm(cpu_context(), s.cube.select_bands({0, 1}), m), InvalidInput);
    const auto dir = testing::temp_dir("classify_svm_bad");
    EXPECT_THROW(read_svm_model(dir / "absent.svm"), IoError);
    write_text_file(dir / "lonely.svm", "svm_type c_svc\n");
    EXPECT_THROW(read_svm_model(dir / "lonely.svm"), IoError);  // no scaling beside it
}

// ---- Salinas-A (../shared/data/classification/salinas_a) -------------------------------------------

TEST(ClassifySvm, TwinMatchesLibsvmOnSalinasA) {
    const auto cube_path = testing::shared_data_path("classification/salinas_a/SalinasA_corrected.mat");
    const auto gt_path = testing::shared_data_path("classification/salinas_a/SalinasA_gt.mat");
    if (!cube_path || !gt_path)
        GTEST_SKIP() << "../shared/data/classification/salinas_a/SalinasA_corrected.mat or SalinasA_gt.mat is absent "
                        "(see ../shared/data/README.md)";
    const Cube cube = read_cube(*cube_path, {.var = "salinasA_corrected"});
    const Cube truth = read_cube(*gt_path, {.var = "salinasA_gt"});
    const Split split = stratified_split(cpu_context(), truth, {.train_fraction = 0.05, .seed = 1});
    const SvmModel m = train_svm(cpu_context(), cube, split.train, {.seed = 1});
    EXPECT_EQ(m.classes, (std::vector<std::int32_t>{1, 10, 11, 12, 13, 14}));
    expect_engines_agree(cube, m, &split.test);
    const ClassificationScores s =
        classification_scores(cpu_context(), predict_svm(cpu_context(), cube, m).classes, split.test);
    std::cout << "[ Salinas-A svm 5 % seed 1 ] C " << m.c << " gamma " << m.gamma << " cv " << m.cv_accuracy << ": OA "
              << s.oa << " AA " << s.aa << " kappa " << s.kappa << "\n";
    EXPECT_GT(s.oa, 0.9);
}

}  // namespace
}  // namespace cubekit

namespace cubekit {
namespace {

// Training from a cube file read a strip of rows at a time gives the model trained on the cube in
// memory, bit for bit (the same training set: labelled pixels in raster order), for every classifier,
// file layout and strip size; a pixel with a non-finite band is left out in both.
TEST(ClassifyModel, TrainingFromAFileInStripsEqualsTrainingInMemory) {
    const auto dir = testing::temp_dir("classify-train-file");
    Scene s = gaussian_scene(testing::test_seed());
    s.cube.at<float>(3, 0, 2) = std::nanf("");  // a labelled pixel (every third) with a NaN band
    ASSERT_NE(s.train.at<std::int32_t>(3, 0, 0), 0);
    const std::size_t row = std::size_t(s.cube.width()) * s.cube.bands() * 4;
    for (const Layout l : {Layout::BSQ, Layout::BIP}) {
        const std::string name = std::string("c_") + std::string(layout_name(l)) + ".hdr";
        write_cube(s.cube.to_layout(l), dir / name);
        const CubeFile file(dir / name);
        for (const Classifier c : {Classifier::Svm, Classifier::Sam, Classifier::MinDist}) {
            // C and γ given (no grid) except in one case, which also compares the cross-validation.
            const bool grid = l == Layout::BIP && c == Classifier::Svm;
            const SvmOptions svm{.cv_folds = 3, .svm_c = grid ? 0.0 : 10.0, .svm_gamma = grid ? 0.0 : 0.5, .seed = 5};
            const ClassifierModel whole = train_classifier(cpu_context(), s.cube, s.train, c, svm);
            for (const std::size_t limit : {row, 7 * row + 3, std::size_t(0)}) {
                if (grid && limit != row) continue;
                SCOPED_TRACE(std::string(layout_name(l)) + " " + std::string(enum_name(c)) + " strip " + std::to_string(limit));
                const ClassifierModel strips = train_classifier(cpu_context(), file, s.train, c, svm, limit);
                ASSERT_EQ(strips.classifier, whole.classifier);
                if (c == Classifier::Svm) {
                    EXPECT_EQ(strips.svm->support_vectors, whole.svm->support_vectors);
                    EXPECT_EQ(strips.svm->coef, whole.svm->coef);
                    EXPECT_EQ(strips.svm->rho, whole.svm->rho);
                    EXPECT_EQ(strips.svm->c, whole.svm->c);
                    EXPECT_EQ(strips.svm->gamma, whole.svm->gamma);
                    EXPECT_EQ(strips.svm->training_pixels, whole.svm->training_pixels);
                    if (grid) {
                        EXPECT_EQ(strips.svm->cv_accuracy, whole.svm->cv_accuracy);
                    }
                } else {
                    EXPECT_EQ(strips.means->means, whole.means->means);
                    EXPECT_EQ(strips.means->counts, whole.means->counts);
                }
            }
        }
        EXPECT_THROW(train_classifier(cpu_context(), file, s.train, Classifier::Sam, {}, row - 1), InvalidInput);
        EXPECT_THROW(train_classifier(cpu_context(), file, Cube(3, 3, 1, DType::I32), Classifier::Sam), InvalidInput);
        EXPECT_THROW(train_classifier(cpu_context(), file, Cube(s.cube.width(), s.cube.height(), 1, DType::I32), Classifier::Sam),
                     InvalidInput);  // no labelled pixel
    }
}

}  // namespace
}  // namespace cubekit
