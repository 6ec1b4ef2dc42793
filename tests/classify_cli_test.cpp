// `cubekit classify`: the maps and scores against the library, the --json summary, the models
// written and read back, a run on Salinas-A, and bad inputs (exit 2 naming the flag, nothing written).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>

#include "cubekit/classify.hpp"
#include "cubekit/gradient.hpp"
#include "cubekit/io.hpp"
#include "cubekit/synth.hpp"
#include "cubekit/watershed.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

namespace fs = std::filesystem;
using testing::cpu_context;
using testing::run_cli;

using testing::q;

std::size_t files_in(const fs::path& dir) {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir)) n += e.is_regular_file();
    return n;
}

/// Four blocky classes (2, 3, 5, 8) in 5 bands with noise, 36×28, written as .npy with training
/// labels (every 4th pixel) and test labels (the others).
struct Scene {
    fs::path dir, cube, train, test;
    Cube cube_data, train_data, test_data;
};

Scene write_scene(const std::string& name) {
    Scene s;
    s.dir = testing::temp_dir(name);
    const int W = 36, H = 28, B = 5;
    const std::int32_t labels[4] = {2, 3, 5, 8};
    s.cube_data = Cube(W, H, B, DType::F32, Layout::BIP);
    s.train_data = Cube(W, H, 1, DType::I32);
    s.test_data = Cube(W, H, 1, DType::I32);
    SplitMix64 rng{4};
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const int k = (x / 18) + 2 * (y / 14);
            for (int b = 0; b < B; ++b) s.cube_data.at<float>(x, y, b) = float(50 * k + 10 * b * (k % 2) + 6 * rng.normal());
            (((x + y) % 4 == 0) ? s.train_data : s.test_data).at<std::int32_t>(x, y, 0) = labels[k];
        }
    s.cube = s.dir / "cube.npy", s.train = s.dir / "train.npy", s.test = s.dir / "test.npy";
    write_cube(s.cube_data, s.cube);
    write_cube(s.train_data, s.train);
    write_cube(s.test_data, s.test);
    return s;
}

TEST(ClassifyCli, MindistMapAndScoresEqualTheLibrary) {
    const Scene s = write_scene("classify-mindist");
    const fs::path out = s.dir / "map.npy";
    const auto r = run_cli("classify " + q(s.cube) + " " + q(out) + " --train " + q(s.train) + " --test " + q(s.test) +
                           " --classifier mindist --backend cpu --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    const ClassMeans m = train_class_means(cpu_context(), s.cube_data, s.train_data, Classifier::MinDist);
    const Cube map = predict_class_means(cpu_context(), s.cube_data, m);
    EXPECT_TRUE(testing::cubes_identical(map, read_cube(out)));
    const ClassificationScores a = classification_scores(cpu_context(), map, s.test_data);
    EXPECT_EQ(j["pixelwise"]["oa"].get<double>(), a.oa);
    EXPECT_EQ(j["pixelwise"]["aa"].get<double>(), a.aa);
    EXPECT_EQ(j["pixelwise"]["kappa"].get<double>(), a.kappa);
    EXPECT_EQ(j["pixelwise"]["confusion"].size(), a.classes.size());
    EXPECT_FALSE(j.contains("regions"));
    EXPECT_EQ(j["model"]["classifier"], "mindist");
    EXPECT_TRUE(j["timings_ms"].contains("train"));
}

TEST(ClassifyCli, SvmModelOutThenModelInGiveTheSameMap) {
    const Scene s = write_scene("classify-svm-model");
    const fs::path a = s.dir / "a.npy", b = s.dir / "b.npy", model = s.dir / "scene.svm";
    auto r = run_cli("classify " + q(s.cube) + " " + q(a) + " --train " + q(s.train) + " --model-out " + q(model) +
                     " --cv-folds 3 --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::is_regular_file(model.string() + ".scaling.json"));
    r = run_cli("classify " + q(s.cube) + " " + q(b) + " --model-in " + q(model) + " --test " + q(s.test) + " --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(testing::cubes_identical(read_cube(a), read_cube(b)));
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["model"]["classifier"], "svm");
    EXPECT_GT(j["pixelwise"]["oa"].get<double>(), 0.9);
}

TEST(ClassifyCli, ExternalClassMapWithWatershedVote) {
    const Scene s = write_scene("classify-external");
    const fs::path out = s.dir / "voted.npy", pixelwise = s.dir / "pixelwise.png", png = s.dir / "voted.png";
    const auto r = run_cli("classify " + q(s.cube) + " " + q(out) + " --classifier " + q(s.test) +
                           " --segment watershed --test " + q(s.test) + " --pixelwise-out " + q(pixelwise) + " --png " +
                           q(png) + " --tau 0.25 --backend cpu --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const WatershedResult w = watershed(cpu_context(), rcmg(cpu_context(), s.cube_data));
    const VoteResult v = region_vote(cpu_context(), w.labels, s.test_data, {.tau = 0.25});
    EXPECT_TRUE(testing::cubes_identical(v.classes, read_cube(out)));
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["segmentation"]["regions"].get<std::int64_t>(), w.regions);
    EXPECT_EQ(j["vote"]["relabelled"].get<std::int64_t>(), v.stats.relabelled);
    EXPECT_EQ(j["pixelwise"]["oa"].get<double>(), 1.0);  // the test labels classify themselves
    ASSERT_TRUE(j.contains("regions"));
    EXPECT_EQ(j["regions"]["oa"].get<double>(), classification_scores(cpu_context(), v.classes, s.test_data).oa);
    const Cube shown = read_cube(png);
    EXPECT_EQ(shown.bands(), 3);
    EXPECT_GE(shown.width(), 36);  // at least the map, and one legend entry
    EXPECT_GT(shown.height(), 28);  // the legend strip
    EXPECT_TRUE(fs::is_regular_file(pixelwise));
}

TEST(ClassifyCli, TilesGiveTheWholeMapsAndScores) {
    const Scene s = write_scene("classify-tiles");
    for (const std::string classifier : {"svm", "sam"}) {
        SCOPED_TRACE(classifier);
        const std::string flags = " --train " + q(s.train) + " --test " + q(s.test) + " --classifier " + classifier +
                                  " --segment watershed --cv-folds 3 --backend cpu --json --quiet";
        const auto whole = run_cli("classify " + q(s.cube) + " " + q(s.dir / "w.npy") + flags + " --pixelwise-out " +
                                   q(s.dir / "wp.npy"));
        ASSERT_EQ(whole.exit_code, 0) << whole.err;
        const auto tiled = run_cli("classify " + q(s.cube) + " " + q(s.dir / "t.npy") + flags + " --pixelwise-out " +
                                   q(s.dir / "tp.npy") + " --tile-size 7x5");
        ASSERT_EQ(tiled.exit_code, 0) << tiled.err;
        EXPECT_TRUE(testing::cubes_identical(read_cube(s.dir / "w.npy"), read_cube(s.dir / "t.npy")));
        EXPECT_TRUE(testing::cubes_identical(read_cube(s.dir / "wp.npy"), read_cube(s.dir / "tp.npy")));
        const nlohmann::json w = nlohmann::json::parse(whole.out), t = nlohmann::json::parse(tiled.out);
        EXPECT_EQ(w["regions"], t["regions"]);
        EXPECT_EQ(w["pixelwise"], t["pixelwise"]);
        EXPECT_EQ(w["vote"], t["vote"]);
        EXPECT_FALSE(w.contains("tiled"));
        for (const char* step : {"predict", "rcmg", "watershed"}) EXPECT_GT(t["tiled"][step]["tiles"].get<int>(), 1) << step;
        // The .npy is read by windows: the training pixels' rows a strip at a time, then the tiles; the
        // model is the whole run's (the same grid point, support vectors and maps).
        EXPECT_TRUE(t["input"]["windowed"].get<bool>());
        EXPECT_EQ(w["model"], t["model"]);
        // With a saved model the cube (.npy) is read by windows: the same maps and scores.
        const std::string model = (s.dir / (classifier + ".model")).string();
        ASSERT_EQ(run_cli("classify " + q(s.cube) + " " + q(s.dir / "m.npy") + flags + " --model-out " + q(model)).exit_code, 0);
        const std::string apply = " --model-in " + q(model) + " --test " + q(s.test) +
                                  " --segment watershed --backend cpu --json --quiet --pixelwise-out ";
        const auto saved = run_cli("classify " + q(s.cube) + " " + q(s.dir / "sw.npy") + apply + q(s.dir / "swp.npy"));
        ASSERT_EQ(saved.exit_code, 0) << saved.err;
        const auto windows = run_cli("classify " + q(s.cube) + " " + q(s.dir / "sv.npy") + apply + q(s.dir / "svp.npy") +
                                     " --memory-limit 8K");
        ASSERT_EQ(windows.exit_code, 0) << windows.err;
        EXPECT_TRUE(testing::cubes_identical(read_cube(s.dir / "sw.npy"), read_cube(s.dir / "sv.npy")));
        EXPECT_TRUE(testing::cubes_identical(read_cube(s.dir / "swp.npy"), read_cube(s.dir / "svp.npy")));
        const nlohmann::json sj = nlohmann::json::parse(saved.out), vj = nlohmann::json::parse(windows.out);
        EXPECT_TRUE(vj["input"]["windowed"].get<bool>());
        EXPECT_GT(vj["tiled"]["predict"]["tiles"].get<int>(), 2);
        EXPECT_EQ(sj["regions"], vj["regions"]);
        EXPECT_EQ(sj["pixelwise"], vj["pixelwise"]);
        // The pixel-wise map predicted from the file went into --pixelwise-out tile by tile, and without
        // --segment into OUT: the same bytes as the whole run's files.
        int streamed = 0;
        for (const auto& o : vj["outputs"]) streamed += o.value("streamed", false) && o["path"] == (s.dir / "svp.npy").string();
        EXPECT_EQ(streamed, 1);
        EXPECT_EQ(testing::read_text(s.dir / "swp.npy"), testing::read_text(s.dir / "svp.npy"));
        const std::string plain = " --model-in " + q(model) + " --backend cpu --json --quiet";
        ASSERT_EQ(run_cli("classify " + q(s.cube) + " " + q(s.dir / "pw.hdr") + plain).exit_code, 0);
        const auto plain_tiled = run_cli("classify " + q(s.cube) + " " + q(s.dir / "pt.hdr") + plain + " --tile-size 9x4");
        ASSERT_EQ(plain_tiled.exit_code, 0) << plain_tiled.err;
        EXPECT_TRUE(nlohmann::json::parse(plain_tiled.out)["outputs"][0].value("streamed", false));
        EXPECT_EQ(testing::read_text(s.dir / "pw.img"), testing::read_text(s.dir / "pt.img"));
        EXPECT_EQ(testing::read_text(s.dir / "pw.hdr"), testing::read_text(s.dir / "pt.hdr"));
    }
    const auto refused = run_cli("classify " + q(s.cube) + " " + q(s.dir / "x.npy") + " --train " + q(s.train) +
                                 " --segment watershed --levels 8 --tile-size 7x5");
    EXPECT_EQ(refused.exit_code, 2);
    EXPECT_TRUE(testing::names_token(refused.err, "--levels")) << refused.err;
    EXPECT_FALSE(fs::exists(s.dir / "x.npy"));
}

TEST(ClassifyCli, TrainFractionOneLeavesNothingToScore) {
    const Scene s = write_scene("classify-all-train");
    const auto r = run_cli("classify " + q(s.cube) + " " + q(s.dir / "map.npy") + " --train " + q(s.train) +
                           " --train-fraction 1 --classifier sam --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_FALSE(j.contains("pixelwise"));
    EXPECT_EQ(j["split"]["classes"][0]["test"], 0);
    EXPECT_NE(r.err.find("no scores"), std::string::npos) << r.err;
}

TEST(ClassifyCli, SalinasA) {
    const auto cube = testing::shared_data_path("classification/salinas_a/SalinasA_corrected.mat");
    const auto gt = testing::shared_data_path("classification/salinas_a/SalinasA_gt.mat");
    if (!cube || !gt)
        GTEST_SKIP() << "../shared/data/classification/salinas_a/SalinasA_corrected.mat or SalinasA_gt.mat is absent "
                        "(see ../shared/data/README.md)";
    const fs::path dir = testing::temp_dir("classify-salinas");
    for (const std::string classifier : {"svm", "sam", "mindist"}) {
        const fs::path out = dir / (classifier + ".png");
        const auto r = run_cli("classify " + q(*cube) + " " + q(out) + " --var salinasA_corrected --train " +
                               q(gt->string() + ":salinasA_gt") + " --train-fraction 0.05 --seed 1 --classifier " +
                               classifier + " --segment watershed --backend cpu --json");
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const nlohmann::json j = nlohmann::json::parse(r.out);
        std::cout << "[ Salinas-A " << classifier << " 5 % seed 1 ] pixel-wise OA " << j["pixelwise"]["oa"] << " AA "
                  << j["pixelwise"]["aa"] << " kappa " << j["pixelwise"]["kappa"] << "; region vote OA "
                  << j["regions"]["oa"] << " AA " << j["regions"]["aa"] << " kappa " << j["regions"]["kappa"] << " ("
                  << j["segmentation"]["regions"] << " regions)\n";
        EXPECT_EQ(j["pixelwise"]["total"].get<std::int64_t>() + 268, 5348);  // 5 % of each class trains
        EXPECT_GT(j["pixelwise"]["oa"].get<double>(), 0.6);
        EXPECT_EQ(j["split"]["classes"].size(), 6u);
        EXPECT_TRUE(fs::is_regular_file(out));
    }
}

// ---- bad inputs ------------------------------------------------------------------------------------

TEST(ClassifyCli, BadInputsExit2NamingTheFlag) {
    const Scene s = write_scene("classify-bad");
    const fs::path out_dir = s.dir / "out";
    fs::create_directories(out_dir);
    const Cube small(5, 5, 1, DType::I32);
    write_cube(small, s.dir / "small.npy");
    Cube negative = s.train_data.clone();
    negative.at<std::int32_t>(1, 2, 0) = -3;
    write_cube(negative, s.dir / "negative.npy");
    ClassMeans means = train_class_means(cpu_context(), s.cube_data, s.train_data, Classifier::Sam);
    write_class_means(means, s.dir / "sam.json");
    write_class_means(train_class_means(cpu_context(), s.cube_data.select_bands({0, 1}), s.train_data, Classifier::Sam),
                      s.dir / "two_bands.json");
    const std::string base = "classify " + q(s.cube) + " " + q(out_dir / "map.npy") + " ";
    const std::string train = " --train " + q(s.train);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {train + " --test " + q(s.dir / "small.npy"), "--test"},
        {" --train " + q(s.dir / "small.npy"), "--train"},
        {" --train " + q(s.dir / "negative.npy"), "--train"},
        {train + " --classifier nosuch", "--classifier"},
        {train + " --segment quadtree", "--segment"},
        {train + " --tau 2", "--tau"},
        {train + " --train-fraction 0", "--train-fraction"},
        {train + " --train-fraction 0.5 --test " + q(s.test), "--test"},
        {"", "--train"},
        {train + " --svm-c -1", "--svm-c"},
        {train + " --cv-folds 1", "--cv-folds"},
        {train + " --pixelwise-out " + q(out_dir / "p.npy"), "--pixelwise-out"},
        {" --classifier " + q(s.test) + " --model-out " + q(out_dir / "m.svm"), "--model-out"},
        {" --model-in " + q(s.dir / "sam.json") + " --classifier svm", "--model-in"},
        {" --model-in " + q(s.dir / "two_bands.json"), "--model-in"},
        {train + " --png " + q(out_dir / "map.npy2"), "--png"},
    };
    for (const auto& [args, flag] : cases) {
        SCOPED_TRACE(args);
        const auto r = run_cli(base + args);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
        EXPECT_EQ(files_in(out_dir), 0u);
    }
    const auto r = run_cli("classify " + q(s.cube) + " " + q(out_dir / "map.txt") + train);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("OUT"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace cubekit
