// `cubekit detect rbfn` and `cubekit detect multires`: outputs against the library, the --json
// summary, and bad inputs (exit 2, nothing written).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cubekit/detect.hpp"
#include "cubekit/io.hpp"
#include "detect_testing.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;

using testing::q;

std::size_t files_in(const fs::path& dir) {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir)) n += e.is_regular_file();
    return n;
}

struct Scene {
    fs::path dir, cube, model;
};

// Two bright squares on a dark cube and a one-neuron model that finds them.
Scene rbfn_scene(const std::string& name) {
    Scene s;
    s.dir = testing::temp_dir(name);
    Cube cube = testing::square_target(40, 30, 4, 5, 5, 10, 9);
    for (int y = 20; y < 24; ++y)
        for (int x = 30; x < 33; ++x)
            for (int b = 0; b < 4; ++b) cube.at<float>(x, y, b) = 1.0f;
    s.cube = s.dir / "scene.npy";
    write_cube(cube, s.cube);
    RbfnModel m;
    m.bands = 4;
    m.hidden = 1;
    m.centres = {1, 1, 1, 1};
    m.sigma = {0.5};
    m.weights = {1};
    m.target_name = "squares";
    s.model = s.dir / "model.json";
    write_model(m, s.model);
    return s;
}

TEST(DetectCli, RbfnWritesScoresObjectsAndOverlay) {
    const Scene s = rbfn_scene("detect-rbfn");
    const fs::path out = s.dir / "out" / "scores.npy";
    fs::create_directories(out.parent_path());
    const auto r = run_cli("detect rbfn " + q(s.cube) + " " + q(out) + " --model " + q(s.model) + " --backend cpu --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["command"], "detect rbfn");
    ASSERT_EQ(j["objects"].size(), 2u);
    EXPECT_EQ(j["objects"][0]["area"], 20);
    EXPECT_EQ(j["objects"][1]["x0"], 30);
    EXPECT_EQ(j["detected_pixels"], 32);
    EXPECT_EQ(j["parameters"]["connectivity"], 8);
    // The score map equals the library's.
    const Cube cube = read_cube(s.cube);
    const PixelResult lib = detect_pixels(testing::cpu_context(), cube, read_rbfn_model(s.model));
    EXPECT_TRUE(testing::cubes_identical(lib.score, read_cube(out).to_layout(Layout::BSQ)));
    for (const char* suffix : {"scores.objects.json", "scores.objects.csv", "scores.overlay.png"})
        EXPECT_TRUE(fs::exists(out.parent_path() / suffix)) << suffix;
    const Cube overlay = read_cube(out.parent_path() / "scores.overlay.png");
    EXPECT_EQ(overlay.bands(), 3);
    EXPECT_EQ(overlay.value(5, 5, 0), 255);  // the box outline, red
}

TEST(DetectCli, RbfnBadInputsWriteNothing) {
    const Scene s = rbfn_scene("detect-rbfn-bad");
    const fs::path out = s.dir / "out";
    fs::create_directories(out);
    // A model of another band count.
    RbfnModel m = read_rbfn_model(s.model);
    m.bands = 3;
    m.centres = {1, 1, 1};
    write_model(m, s.dir / "three.json");
    auto r = run_cli("detect rbfn " + q(s.cube) + " " + q(out / "a.npy") + " --model " + q(s.dir / "three.json"));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("3 bands"), std::string::npos) << r.err;
    // σ ≤ 0 and NaN in the model file: the field named.
    std::ofstream(s.dir / "bad.json") << R"({"type":"rbfn","bands":4,"hidden":1,"centres":[[1,1,1,1]],"sigma":[0],"weights":[1],"bias":0})";
    r = run_cli("detect rbfn " + q(s.cube) + " " + q(out / "b.npy") + " --model " + q(s.dir / "bad.json"));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("sigma[0]"), std::string::npos) << r.err;
    std::ofstream(s.dir / "nan.json") << R"({"type":"rbfn","bands":4,"hidden":1,"centres":[[1,NaN,1,1]],"sigma":[1],"weights":[1],"bias":0})";
    r = run_cli("detect rbfn " + q(s.cube) + " " + q(out / "c.npy") + " --model " + q(s.dir / "nan.json"));
    EXPECT_EQ(r.exit_code, 2);
    r = run_cli("detect rbfn " + q(s.cube) + " " + q(out / "d.npy") + " --model " + q(s.model) + " --connectivity 6");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--connectivity"), std::string::npos) << r.err;
    r = run_cli("detect rbfn " + q(s.cube) + " " + q(out / "e.npy") + " --model " + q(s.dir / "missing.json"));
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_EQ(files_in(out), 0u);
}

TEST(DetectCli, MultiresWritesWindowsOverlayAndRaster) {
    const fs::path dir = testing::temp_dir("detect-multires");
    write_cube(testing::square_target(128, 128, 3, 48, 48, 64, 64), dir / "sea.npy");
    write_text_file(dir / "m.json", to_json(testing::step_multires(3)));
    auto r = run_cli("detect multires " + q(dir / "sea.npy") + " " + q(dir / "boxes.npy") + " --model " + q(dir / "m.json") +
                     " --trace --json --backend cpu");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["detections"].size(), 1u);
    EXPECT_EQ(j["detections"][0]["x0"], 32);
    EXPECT_EQ(j["detections"][0]["width"], 32);
    const Cube raster = read_cube(dir / "boxes.npy");
    EXPECT_EQ(raster.value(40, 40, 0), 1);
    EXPECT_EQ(raster.value(10, 10, 0), 0);
    std::ifstream in(dir / "boxes.windows.json");
    const nlohmann::json w = nlohmann::json::parse(in);
    EXPECT_EQ(w["trace"].size(), 9u);
    EXPECT_TRUE(fs::exists(dir / "boxes.overlay.png"));
    EXPECT_TRUE(fs::exists(dir / "boxes.windows.csv"));
    // Bad model: min_window not block·2^l.
    MultiresModel m = testing::step_multires(3);
    m.min_window = 12;
    std::ofstream(dir / "bad.json") << to_json(m);
    r = run_cli("detect multires " + q(dir / "sea.npy") + " " + q(dir / "x.json") + " --model " + q(dir / "bad.json"));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("min_window"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "x.json"));
}

}  // namespace
}  // namespace cubekit
