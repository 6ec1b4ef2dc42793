// The classification family's CPU oracles (spec gradient-watershed.md part C): the majority vote of
// Decision C-1 on hand-computed regions, the scores against hand-computed OA/AA/κ, the stratified
// split's counts, the class-mean classifiers, and the rejected inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <tuple>

#include "cubekit/classify.hpp"
#include "cubekit/error.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;

/// A W×H×1 image of `dtype` from rows of values.
Cube image(int width, int height, const std::vector<double>& values, DType dtype = DType::I32) {
    Cube c(width, height, 1, dtype);
    for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x) c.set_value(x, y, 0, values[std::size_t(y * width + x)]);
    return c;
}

std::vector<std::int32_t> values(const Cube& c) {
    return std::vector<std::int32_t>(c.data<std::int32_t>(), c.data<std::int32_t>() + c.num_elements());
}

void expect_throws_naming(const std::function<void()>& f, const std::string& word) {
    try {
        f();
        ADD_FAILURE() << "no InvalidInput naming '" << word << "'";
    } catch (const InvalidInput& e) {
        EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
}

// ---- the vote -------------------------------------------------------------------------------------

TEST(ClassifyVote, HeaderExample) {
    const Cube regions = image(8, 1, {1, 1, 1, 2, 2, 2, 3, 3});
    const Cube classes = image(8, 1, {5, 5, 7, 4, 6, 0, 0, 0});
    const VoteResult r = region_vote(cpu_context(), regions, classes);
    EXPECT_EQ(values(r.classes), (std::vector<std::int32_t>{5, 5, 5, 4, 6, 0, 0, 0}));
    EXPECT_EQ(r.stats.regions, 3);
    EXPECT_EQ(r.stats.relabelled, 1);
    EXPECT_EQ(r.stats.ties, 1);
    EXPECT_EQ(r.stats.no_voters, 1);
    EXPECT_EQ(r.stats.changed_pixels, 1);
}

// A 6×4 segmentation with hand-computed votes:
//   region 1 (8 px): classes 2 ×4, 3 ×2, 0 ×2        → 2 (4/8 = 0.5), the 0 pixels too
//   region 2 (6 px): classes 1 ×2, 4 ×2, 0 ×2        → tie 1/4: kept
//   region 7 (4 px): all 0                          → no voters: kept
//   region 9 (4 px): classes 3 ×3, 1 ×1             → 3 (3/4 = 0.75)
//   region 0 (2 px): classes 5, 6                   → no region: kept
const std::vector<double> kRegions = {1, 1, 1, 1, 2, 2,
                                      1, 1, 1, 1, 2, 2,
                                      7, 7, 9, 9, 2, 2,
                                      7, 7, 9, 9, 0, 0};
const std::vector<double> kClasses = {2, 2, 3, 0, 1, 4,
                                      2, 2, 3, 0, 1, 4,
                                      0, 0, 3, 3, 0, 0,
                                      0, 0, 3, 1, 5, 6};

TEST(ClassifyVote, HandComputedTieUnlabelledAndNoRegion) {
    const VoteResult r = region_vote(cpu_context(), image(6, 4, kRegions), image(6, 4, kClasses));
    const std::vector<std::int32_t> expected = {2, 2, 2, 2, 1, 4,
                                                2, 2, 2, 2, 1, 4,
                                                0, 0, 3, 3, 0, 0,
                                                0, 0, 3, 3, 5, 6};
    EXPECT_EQ(values(r.classes), expected);
    EXPECT_EQ(r.stats.regions, 4);
    EXPECT_EQ(r.stats.relabelled, 2);
    EXPECT_EQ(r.stats.ties, 1);
    EXPECT_EQ(r.stats.no_voters, 1);
    EXPECT_EQ(r.stats.below_tau, 0);
    EXPECT_EQ(r.stats.changed_pixels, 5);  // region 1: two 3s and two 0s; region 9: the 1
}

TEST(ClassifyVote, TauCountsEveryPixelOfTheRegion) {
    // Region 1's winner holds 4 of its 8 pixels (0.5), region 9's 3 of 4 (0.75).
    for (const auto& [tau, r1, r9] : std::vector<std::tuple<double, bool, bool>>{
             {0.0, true, true}, {0.5, true, true}, {0.5000001, false, true}, {0.75, false, true}, {0.76, false, false}}) {
        SCOPED_TRACE("tau " + std::to_string(tau));
        const VoteResult r = region_vote(cpu_context(), image(6, 4, kRegions), image(6, 4, kClasses), {.tau = tau});
        const std::vector<std::int32_t> v = values(r.classes);
        EXPECT_EQ(v[3] == 2, r1);   // a 0 pixel of region 1
        EXPECT_EQ(v[21] == 3, r9);  // the 1 of region 9
        EXPECT_EQ(r.stats.below_tau, int(!r1) + int(!r9));
    }
}

TEST(ClassifyVote, AnyIntegerTypeAndSparseRegionLabels) {
    const Cube regions = image(6, 4, kRegions, DType::U16);
    const Cube classes = image(6, 4, kClasses, DType::F64);  // a MATLAB map: whole numbers in f64
    const VoteResult a = region_vote(cpu_context(), regions, classes);
    std::vector<double> shifted = kRegions;
    for (double& v : shifted) v = v == 0 ? 0 : v * 100000 + 3;  // same partition, other labels
    const VoteResult b = region_vote(cpu_context(), image(6, 4, shifted), image(6, 4, kClasses, DType::U8));
    EXPECT_EQ(values(a.classes), values(b.classes));
    EXPECT_EQ(a.stats.relabelled, b.stats.relabelled);
}

TEST(ClassifyVote, RegionVoteIntoWritesTheCallersView) {
    Cube out(6, 4, 1, DType::I32);
    std::fill(out.data<std::int32_t>(), out.data<std::int32_t>() + 24, -7);  // poison
    const VoteStats s = region_vote_into(cpu_context(), image(6, 4, kRegions), image(6, 4, kClasses), out);
    EXPECT_EQ(values(out), values(region_vote(cpu_context(), image(6, 4, kRegions), image(6, 4, kClasses)).classes));
    EXPECT_EQ(s.relabelled, 2);
}

TEST(ClassifyVote, RejectsBadInputs) {
    const Cube c = image(6, 4, kClasses);
    expect_throws_naming([&] { region_vote(cpu_context(), image(5, 4, std::vector<double>(20, 1)), c); }, "regions");
    expect_throws_naming([&] { region_vote(cpu_context(), image(6, 4, kRegions), image(6, 4, std::vector<double>(24, -1))); },
                         "class_map");
    expect_throws_naming([&] { region_vote(cpu_context(), image(6, 4, std::vector<double>(24, 1.5), DType::F32), c); },
                         "regions");
    expect_throws_naming([&] { region_vote(cpu_context(), image(6, 4, kRegions), c, {.tau = 1.5}); }, "tau");
    expect_throws_naming([&] { region_vote(cpu_context(), image(6, 4, kRegions), Cube(6, 4, 2, DType::I32)); }, "class_map");
}

// ---- scores ---------------------------------------------------------------------------------------

TEST(ClassifyScores, HeaderExample) {
    const ClassificationScores s = classification_scores(cpu_context(), image(4, 1, {1, 2, 2, 2}), image(4, 1, {1, 1, 2, 2}));
    EXPECT_EQ(s.classes, (std::vector<std::int32_t>{1, 2}));
    EXPECT_EQ(s.confusion, (std::vector<std::int64_t>{1, 1, 0, 2}));
    EXPECT_DOUBLE_EQ(s.oa, 0.75);
    EXPECT_DOUBLE_EQ(s.aa, 0.75);
    EXPECT_DOUBLE_EQ(s.kappa, 0.5);
}

// Truth (0 = unlabelled) and a prediction with a class the truth lacks (9) and an unpredicted pixel:
//   truth 1: 4 px → predicted 1, 1, 1, 9      truth 2: 3 px → 2, 2, 0      truth 3: 2 px → 1, 3
// Classes 0, 1, 2, 3, 9. Rows (truth) 1: [0 3 0 0 1], 2: [1 0 2 0 0], 3: [0 1 0 1 0].
// total 9, correct 3 + 2 + 1 = 6: OA 2/3; AA (3/4 + 2/3 + 1/2)/3 = 23/36.
// Column sums: 0: 1, 1: 4, 2: 2, 3: 1, 9: 1; rows: 1: 4, 2: 3, 3: 2.
// p_e = (4·4 + 3·2 + 2·1)/81 = 24/81; κ = (2/3 − 24/81)/(1 − 24/81) = (54 − 24)/(81 − 24) = 30/57.
TEST(ClassifyScores, HandComputedWithUnpredictedAndForeignClasses) {
    const Cube truth = image(5, 2, {1, 1, 1, 1, 0, 2, 2, 2, 3, 3});
    const Cube predicted = image(5, 2, {1, 1, 1, 9, 4, 2, 2, 0, 1, 3});
    const ClassificationScores s = classification_scores(cpu_context(), predicted, truth);
    EXPECT_EQ(s.classes, (std::vector<std::int32_t>{0, 1, 2, 3, 9}));
    EXPECT_EQ(s.confusion, (std::vector<std::int64_t>{0, 0, 0, 0, 0,  //
                                                      0, 3, 0, 0, 1,  //
                                                      1, 0, 2, 0, 0,  //
                                                      0, 1, 0, 1, 0,  //
                                                      0, 0, 0, 0, 0}));
    EXPECT_EQ(s.total, 9);
    EXPECT_EQ(s.correct, 6);
    EXPECT_EQ(s.counts, (std::vector<std::int64_t>{0, 4, 3, 2, 0}));
    EXPECT_DOUBLE_EQ(s.oa, 6.0 / 9.0);
    EXPECT_DOUBLE_EQ(s.aa, 23.0 / 36.0);
    EXPECT_NEAR(s.kappa, 30.0 / 57.0, 1e-15);
    EXPECT_TRUE(std::isnan(s.per_class_accuracy[0]));
    EXPECT_DOUBLE_EQ(s.per_class_accuracy[1], 0.75);
    EXPECT_TRUE(std::isnan(s.per_class_accuracy[4]));
}

TEST(ClassifyScores, PerfectSingleClassHasUndefinedKappa) {
    const ClassificationScores s = classification_scores(cpu_context(), image(3, 1, {4, 4, 4}), image(3, 1, {4, 4, 0}));
    EXPECT_EQ(s.oa, 1.0);
    EXPECT_EQ(s.aa, 1.0);
    EXPECT_TRUE(std::isnan(s.kappa));
}

TEST(ClassifyScores, RejectsBadInputs) {
    expect_throws_naming([&] { classification_scores(cpu_context(), image(3, 1, {1, 1, 1}), image(3, 1, {0, 0, 0})); },
                         "no labelled pixel");
    expect_throws_naming([&] { classification_scores(cpu_context(), image(2, 1, {1, 1}), image(3, 1, {1, 1, 1})); },
                         "predicted");
}

// ---- stratified split -----------------------------------------------------------------------------

TEST(ClassifySplit, CountsPerClass) {
    // Class 1: 10 px, class 5: 3 px, class 7: 1 px (max(1, round(F·n))).
    std::vector<double> truth(40, 0);
    for (int i = 0; i < 10; ++i) truth[std::size_t(i * 3)] = 1;
    truth[1] = truth[4] = truth[7] = 5;
    truth[39] = 7;
    for (const auto& [fraction, n1, n5, n7] : std::vector<std::tuple<double, int, int, int>>{
             {0.05, 1, 1, 1}, {0.25, 3, 1, 1}, {0.5, 5, 2, 1}, {1.0, 10, 3, 1}}) {
        SCOPED_TRACE("fraction " + std::to_string(fraction));
        const Split s = stratified_split(cpu_context(), image(8, 5, truth), {.train_fraction = fraction, .seed = 3});
        ASSERT_EQ(s.classes.size(), 3u);
        EXPECT_EQ(s.classes[0].train, n1);
        EXPECT_EQ(s.classes[1].train, n5);
        EXPECT_EQ(s.classes[2].train, n7);
        const std::vector<std::int32_t> train = values(s.train), test = values(s.test);
        std::map<std::int32_t, int> counted;
        for (std::size_t p = 0; p < truth.size(); ++p) {
            EXPECT_TRUE(train[p] == 0 || test[p] == 0) << "pixel " << p << " is in both";
            EXPECT_EQ(train[p] + test[p], std::int32_t(truth[p])) << "pixel " << p;
            counted[train[p]] += train[p] != 0;
        }
        EXPECT_EQ(counted[1], n1);
        EXPECT_EQ(counted[5], n5);
        EXPECT_EQ(counted[7], n7);
        EXPECT_EQ(s.classes[0].test, 10 - n1);
    }
}

TEST(ClassifySplit, SeededAndDeterministic) {
    const Cube truth = testing::random_levels_cube(40, 30, 1, DType::U8, 11, 4);
    const Split a = stratified_split(cpu_context(), truth, {.train_fraction = 0.1, .seed = 5});
    const Split b = stratified_split(cpu_context(), truth, {.train_fraction = 0.1, .seed = 5});
    const Split c = stratified_split(cpu_context(), truth, {.train_fraction = 0.1, .seed = 6});
    EXPECT_EQ(values(a.train), values(b.train));
    EXPECT_NE(values(a.train), values(c.train));
}

TEST(ClassifySplit, RejectsBadInputs) {
    expect_throws_naming([&] { stratified_split(cpu_context(), image(2, 1, {1, 2}), {.train_fraction = 0}); },
                         "train_fraction");
    expect_throws_naming([&] { stratified_split(cpu_context(), image(2, 1, {0, 0})); }, "no labelled pixel");
}

// ---- class-mean classifiers ------------------------------------------------------------------------

TEST(ClassifyMeans, MinDistHeaderExampleAndTies) {
    // One band; class 1 trained on 0 and 0 (mean 0), class 2 on 10 and 10 (mean 10).
    Cube cube(5, 1, 1, DType::F64);
    const double v[5] = {0, 10, 4, 5, 6};
    for (int x = 0; x < 5; ++x) cube.at<double>(x, 0, 0) = v[x];
    const ClassMeans m = train_class_means(cpu_context(), cube, image(5, 1, {1, 2, 0, 0, 0}), Classifier::MinDist);
    EXPECT_EQ(m.classes, (std::vector<std::int32_t>{1, 2}));
    EXPECT_EQ(m.means, (std::vector<double>{0, 10}));
    EXPECT_EQ(values(predict_class_means(cpu_context(), cube, m)), (std::vector<std::int32_t>{1, 2, 1, 1, 2}));
}

TEST(ClassifyMeans, SamIgnoresBrightnessAndRefusesZeroSpectra) {
    // Two bands: class 3 along (1, 0), class 8 along (1, 1). A bright (4, 1) is class 3; (0, 0) has no angle.
    Cube cube(4, 1, 2, DType::F32, Layout::BIP);
    const float v[4][2] = {{1, 0}, {2, 2}, {4, 1}, {0, 0}};
    for (int x = 0; x < 4; ++x) cube.at<float>(x, 0, 0) = v[x][0], cube.at<float>(x, 0, 1) = v[x][1];
    const ClassMeans m = train_class_means(cpu_context(), cube, image(4, 1, {3, 8, 0, 0}), Classifier::Sam);
    EXPECT_EQ(values(predict_class_means(cpu_context(), cube, m)), (std::vector<std::int32_t>{3, 8, 3, 0}));
}

TEST(ClassifyMeans, NonFinitePixelsAreLeftOutAndGetNoClass) {
    Cube cube(3, 1, 1, DType::F64);
    cube.at<double>(0, 0, 0) = 1, cube.at<double>(1, 0, 0) = NAN, cube.at<double>(2, 0, 0) = 3;
    const ClassMeans m = train_class_means(cpu_context(), cube, image(3, 1, {1, 1, 2}), Classifier::MinDist);
    EXPECT_EQ(m.counts, (std::vector<std::int64_t>{1, 1}));
    EXPECT_EQ(values(predict_class_means(cpu_context(), cube, m)), (std::vector<std::int32_t>{1, 0, 2}));
}

TEST(ClassifyMeans, ModelFileRoundTrip) {
    const Cube cube = testing::random_cube(9, 7, 5, DType::I16, 4, -100, 900);
    const Cube train = testing::random_levels_cube(9, 7, 1, DType::U8, 8, 3);
    const ClassMeans m = train_class_means(cpu_context(), cube, train, Classifier::Sam);
    const auto path = testing::temp_dir("classify_means") / "means.json";
    write_class_means(m, path);
    const ClassMeans r = read_class_means(path);
    EXPECT_EQ(r.classifier, Classifier::Sam);
    EXPECT_EQ(r.classes, m.classes);
    EXPECT_EQ(r.means, m.means);  // JSON doubles round-trip exactly
    EXPECT_EQ(values(predict_class_means(cpu_context(), cube, r)), values(predict_class_means(cpu_context(), cube, m)));
}

TEST(ClassifyMeans, RejectsBadInputs) {
    const Cube cube = testing::random_cube(4, 4, 3, DType::F32, 1, 0, 1);
    expect_throws_naming([&] { train_class_means(cpu_context(), cube, Cube(4, 3, 1, DType::U8), Classifier::Sam); }, "train");
    expect_throws_naming([&] { train_class_means(cpu_context(), cube, Cube(4, 4, 1, DType::U8), Classifier::Sam); },
                         "no labelled pixel");
    ClassMeans m = train_class_means(cpu_context(), cube, image(4, 4, std::vector<double>(16, 2)), Classifier::MinDist);
    expect_throws_naming([&] { predict_class_means(cpu_context(), testing::random_cube(4, 4, 2, DType::F32, 1, 0, 1), m); },
                         "bands");
}

TEST(ClassifyLabels, ToLabelImageChecksValues) {
    EXPECT_EQ(values(to_label_image(cpu_context(), image(3, 1, {0, 14, 2147483647}, DType::F64))),
              (std::vector<std::int32_t>{0, 14, 2147483647}));
    expect_throws_naming([&] { to_label_image(cpu_context(), image(2, 1, {1, 2.5}, DType::F64)); }, "(x 1, y 0)");
    expect_throws_naming([&] { to_label_image(cpu_context(), image(2, 1, {1, NAN}, DType::F32)); }, "labels");
}

}  // namespace
}  // namespace cubekit
