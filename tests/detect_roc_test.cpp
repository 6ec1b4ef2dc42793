// ROC, AUC and per-blob detection (score_detection) against brute force written here, and the
// classical detectors' CLI (detect rx|mf|ace|cem|sam, detect-score): outputs, JSON keys, bad inputs
// (exit 2, nothing written).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <random>

#include "cubekit/detect_classical.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;

Cube map_of(int W, int H, const std::vector<double>& v, DType t = DType::F64) {
    Cube c(W, H, 1, t);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) c.set_value(x, y, 0, v[std::size_t(y * W + x)]);
    return c;
}

// P(target > background) + ½ P(tie), over all pairs.
double brute_auc(const std::vector<double>& s, const std::vector<double>& m) {
    double num = 0, pairs = 0;
    for (std::size_t i = 0; i < s.size(); ++i)
        for (std::size_t j = 0; j < s.size(); ++j)
            if (m[i] != 0 && m[j] == 0) num += s[i] > s[j] ? 1 : s[i] == s[j] ? 0.5 : 0, pairs += 1;
    return num / pairs;
}

TEST(RocAuc, MatchesBruteForceWithTies) {
    std::mt19937_64 rng(testing::test_seed());
    std::uniform_int_distribution<int> level(0, 9), coin(0, 4);
    for (int trial = 0; trial < 5; ++trial) {
        const int W = 13, H = 7;
        std::vector<double> s(W * H), m(W * H);
        for (std::size_t i = 0; i < s.size(); ++i) s[i] = level(rng), m[i] = coin(rng) == 0 ? 1 : 0;
        m[0] = 1, m[1] = 0;
        const DetectionScore r = score_detection(cpu_context(), map_of(W, H, s), map_of(W, H, m, DType::U8));
        EXPECT_NEAR(r.auc, brute_auc(s, m), 1e-12);
        EXPECT_EQ(r.roc.front().far, 0);
        EXPECT_EQ(r.roc.back().far, 1);
        EXPECT_EQ(r.roc.back().pd, 1);
    }
}

TEST(RocAuc, PerfectReversedAndNan) {
    const std::vector<double> m = {1, 1, 0, 0, 0, 0};
    EXPECT_EQ(score_detection(cpu_context(), map_of(6, 1, {5, 6, 1, 2, 3, 4}), map_of(6, 1, m)).auc, 1.0);
    EXPECT_EQ(score_detection(cpu_context(), map_of(6, 1, {0, 0, 1, 2, 3, 4}), map_of(6, 1, m)).auc, 0.0);
    const DetectionScore r = score_detection(cpu_context(), map_of(6, 1, {NAN, 6, 1, 2, 3, 4}), map_of(6, 1, m));
    EXPECT_EQ(r.nan_scores, 1);
    EXPECT_EQ(r.auc, 0.5);  // the NaN target is below every background pixel
}

TEST(RocBlobs, FoundAtFalseAlarmRate) {
    // 10×10 background scores 0..99 (distinct), two blobs: one peaks above every background pixel.
    const int W = 12, H = 10;
    std::vector<double> s(W * H), m(W * H, 0);
    for (int i = 0; i < W * H; ++i) s[std::size_t(i)] = i % 100;
    for (int y = 1; y <= 2; ++y)
        for (int x = 1; x <= 2; ++x) m[std::size_t(y * W + x)] = 1, s[std::size_t(y * W + x)] = 1000 + x;
    m[std::size_t(7 * W + 9)] = 1, s[std::size_t(7 * W + 9)] = -5;
    const DetectionScore r = score_detection(cpu_context(), map_of(W, H, s), map_of(W, H, m), 0.05);
    ASSERT_EQ(r.blobs.size(), 2u);
    EXPECT_EQ(r.blobs_found, 1);
    EXPECT_TRUE(r.blobs[0].found);
    EXPECT_EQ(r.blobs[0].area, 4);
    EXPECT_EQ(r.blobs[0].peak, 1002);
    EXPECT_FALSE(r.blobs[1].found);
    EXPECT_LE(r.far, 0.05);
    EXPECT_GT(r.far, 0.03);
    EXPECT_EQ(r.pd, 0.8);
}

TEST(RocBlobs, MaskOfAnotherSizeIsRefused) {
    try {
        score_detection(cpu_context(), Cube(4, 4, 1, DType::F32), Cube(4, 5, 1, DType::U8));
        FAIL() << "no InvalidInput";
    } catch (const InvalidInput& e) {
        EXPECT_NE(std::string(e.what()).find("mask"), std::string::npos) << e.what();
    }
}

// ---- CLI ---------------------------------------------------------------------------------------------------

Cube scene(int W, int H, int B) {
    Cube c = testing::random_cube(W, H, B, DType::F32, 17, 0, 100, Layout::BIP);
    c.at<float>(5, 6, 0) = 400;  // an anomaly
    return c;
}

TEST(RocCli, DetectAndScore) {
    const auto dir = testing::temp_dir("classical-cli");
    write_cube(scene(20, 16, 6), dir / "scene.npy");
    Cube mask(20, 16, 1, DType::U8);
    mask.at<std::uint8_t>(5, 6, 0) = 1;
    write_cube(mask, dir / "mask.npy");
    const auto rx = testing::run_cli("detect rx " + (dir / "scene.npy").string() + " " + (dir / "rx.npy").string() +
                                     " --stats-out " + (dir / "stats.npz").string() + " --json --backend cpu");
    ASSERT_EQ(rx.exit_code, 0) << rx.err;
    const auto j = nlohmann::json::parse(rx.out);
    EXPECT_EQ(j["bands"]["kept"], 6);
    EXPECT_TRUE(std::filesystem::exists(dir / "stats.npz"));
    const auto score = testing::run_cli("detect-score " + (dir / "rx.npy").string() + " " + (dir / "mask.npy").string() +
                                        " --far 0.01");
    ASSERT_EQ(score.exit_code, 0) << score.err;
    const auto s = nlohmann::json::parse(score.out);
    for (const char* key : {"auc", "blobs", "blobs_found", "far"}) EXPECT_TRUE(s.contains(key)) << key;
    EXPECT_EQ(s["auc"], 1.0);
    EXPECT_EQ(s["blobs_found"], 1);
    // Statistics reused; a target from a mask; PNG output.
    for (const char* d : {"mf", "ace", "cem", "sam"}) {
        const auto r = testing::run_cli(std::string("detect ") + d + " " + (dir / "scene.npy").string() + " " +
                                        (dir / (std::string(d) + ".png")).string() + " --target-mask " +
                                        (dir / "mask.npy").string() + " --stats-in " + (dir / "stats.npz").string());
        EXPECT_EQ(r.exit_code, 0) << d << ": " << r.err;
    }
    // In tiles the input is read by windows: the mask's target and the fitted statistics a strip of
    // rows at a time; the same scores as the whole run.
    for (const char* d : {"mf", "ace"}) {
        const std::string base = std::string("detect ") + d + " " + (dir / "scene.npy").string() + " ";
        const std::string flags = " --target-mask " + (dir / "mask.npy").string() + " --backend cpu";
        ASSERT_EQ(testing::run_cli(base + (dir / "whole.npy").string() + flags).exit_code, 0) << d;
        const auto tiled = testing::run_cli(base + (dir / "tiled.npy").string() + flags + " --memory-limit 4K --json --quiet");
        ASSERT_EQ(tiled.exit_code, 0) << d << ": " << tiled.err;
        EXPECT_TRUE(nlohmann::json::parse(tiled.out)["input"]["windowed"].get<bool>()) << d;
        EXPECT_EQ(testing::read_text(dir / "whole.npy"), testing::read_text(dir / "tiled.npy")) << d;
    }
}

TEST(RocCli, BadInputsExit2AndWriteNothing) {
    const auto dir = testing::temp_dir("classical-cli-bad");
    write_cube(scene(20, 16, 30), dir / "scene.npy");
    write_cube(Cube(19, 16, 1, DType::U8), dir / "small.npy");
    const std::string in = (dir / "scene.npy").string(), out = (dir / "out.npy").string();
    const struct {
        std::string args, names;
    } cases[] = {
        {"detect rx " + in + " " + out + " --window 5,7", "--window"},
        {"detect mf " + in + " " + out + " --target-mask " + (dir / "small.npy").string(), "--target-mask"},
        {"detect ace " + in + " " + out, "--target"},
        {"detect rx " + in + " " + out + " --window 3,9 --stats-out " + (dir / "s.json").string(), "--stats-out"},
        {"detect-score " + in + " " + (dir / "small.npy").string(), "scores"},
    };
    for (const auto& c : cases) {
        const auto r = testing::run_cli(c.args);
        EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
        EXPECT_NE(r.err.find(c.names), std::string::npos) << c.args << "\n" << r.err;
        EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
    }
}

}  // namespace
}  // namespace cubekit
