// `cubekit edges`: outputs against the library, the contract of the issue (PNG 255/0, .npy,
// --per-band-out band_NNN.png, the thresholds JSON with input band indices, the default fusion),
// and bad inputs (exit 2 or 3, one stderr line, nothing written).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "cubekit/edges.hpp"
#include "cubekit/io.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;

using testing::q;
const fs::path& samson() {
    static const fs::path p = testing::source_path("data/samson/samson_1.img");
    return p;
}
std::size_t files_in(const fs::path& dir) {
    std::size_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir)) n += e.is_regular_file();
    return n;
}
Cube from_file_to_01(const Cube& c) {
    Cube out = c.to_layout(Layout::BSQ);
    for (std::size_t i = 0; i < out.num_elements(); ++i) out.data<std::uint8_t>()[i] = out.data<std::uint8_t>()[i] ? 1 : 0;
    return out;
}

TEST(EdgesCli, OneBandPngMatchesTheLibraryWithWhiteEdges) {
    const fs::path dir = testing::temp_dir("edges_cli_png");
    const Cube band = read_cube(samson()).select_bands({40});
    write_cube(band, dir / "band.npy");
    const auto r = run_cli("edges " + q(dir / "band.npy") + " " + q(dir / "e.png") + " --min-component 4 --backend cpu --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["parameters"]["fusion"], "none");
    const Cube png = read_cube(dir / "e.png");
    for (std::size_t i = 0; i < png.num_elements(); ++i) ASSERT_TRUE(png.data<std::uint8_t>()[i] == 0 || png.data<std::uint8_t>()[i] == 255);
    const Cube want = entropy_edges(testing::cpu_context(), band, {.min_component = 4}).edges;
    EXPECT_TRUE(testing::cubes_identical(want, from_file_to_01(png)));
    EXPECT_GT(j["edge_pixels"].get<std::int64_t>(), 0);
    // --invert: black edges on white.
    ASSERT_EQ(run_cli("edges " + q(dir / "band.npy") + " " + q(dir / "i.png") + " --min-component 4 --invert --quiet").exit_code, 0);
    const Cube inv = read_cube(dir / "i.png");
    for (std::size_t i = 0; i < inv.num_elements(); ++i)
        ASSERT_EQ(inv.data<std::uint8_t>()[i], 255 - png.data<std::uint8_t>()[i]);
}

TEST(EdgesCli, CubeDefaultsToEdgeVoteAndWritesThresholdsWithInputIndices) {
    const fs::path dir = testing::temp_dir("edges_cli_vote");
    const auto r = run_cli("edges " + q(samson()) + " " + q(dir / "v.png") + " --bands 10-19,30 --thresholds-out " +
                           q(dir / "t.json") + " --vote-count-out " + q(dir / "count.npy") + " --backend cpu --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["parameters"]["fusion"], "vote-edges");
    EXPECT_EQ(j["votes_needed"], 2);  // 15 % of 11 maps = 1.65 → at least 2
    const Cube cube = read_cube(samson()).select_bands({10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 30});
    const EntropyEdgeResult want = entropy_edges(testing::cpu_context(), cube, {.fusion = EdgeFusion::EdgeVote});
    EXPECT_TRUE(testing::cubes_identical(want.edges, from_file_to_01(read_cube(dir / "v.png"))));
    EXPECT_TRUE(testing::cubes_identical(want.vote_count, read_cube(dir / "count.npy").to_layout(Layout::BSQ)));
    std::ifstream in(dir / "t.json");
    const nlohmann::json t = nlohmann::json::parse(in);
    ASSERT_EQ(t["bands"].size(), 11u);
    EXPECT_EQ(t["bands"][0]["band"], 10);
    EXPECT_EQ(t["bands"][10]["band"], 30);
    for (std::size_t i = 0; i < 11; ++i) {
        EXPECT_EQ(t["bands"][i]["t1"], want.band_thresholds[i].t1);
        EXPECT_EQ(t["bands"][i]["t2"], want.band_thresholds[i].t2);
        EXPECT_EQ(t["bands"][i]["t3"], want.band_thresholds[i].t3);
    }
}

TEST(EdgesCli, DerivedThresholdsAndPcaClampNote) {
    const fs::path dir = testing::temp_dir("edges_cli_derived");
    auto r = run_cli("edges " + q(samson()) + " " + q(dir / "m.png") + " --fusion threshold-mean --thresholds-out " + q(dir / "t.json"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json t = nlohmann::json::parse(std::ifstream(dir / "t.json"));
    EXPECT_EQ(t["bands"].size(), 156u);
    EXPECT_TRUE(t.contains("band_mean"));
    EXPECT_TRUE(t.contains("threshold_mean"));
    r = run_cli("edges " + q(samson()) + " " + q(dir / "p.png") + " --fusion pca-vote-binary --bands 0-3 --pca-components 7 "
                "--thresholds-out " + q(dir / "p.json"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("clamped"), std::string::npos) << r.err;
    t = nlohmann::json::parse(std::ifstream(dir / "p.json"));
    EXPECT_EQ(t["bands"].size(), 4u);
    ASSERT_EQ(t["pca"].size(), 4u);
    EXPECT_EQ(t["pca"][3]["component"], 3);
}

TEST(EdgesCli, NoneWithSeveralBandsWritesNpyOrPerBandPngs) {
    const fs::path dir = testing::temp_dir("edges_cli_none");
    ASSERT_EQ(run_cli("edges " + q(samson()) + " " + q(dir / "all.npy") + " --fusion none --bands 5,7,9 --quiet").exit_code, 0);
    const Cube npy = read_cube(dir / "all.npy");
    EXPECT_EQ(npy.bands(), 3);
    const Cube cube = read_cube(samson()).select_bands({5, 7, 9});
    const Cube want = entropy_edges(testing::cpu_context(), cube, {.fusion = EdgeFusion::None}).edges;
    EXPECT_TRUE(testing::cubes_identical(want, npy.to_layout(Layout::BSQ)));
    const auto r = run_cli("edges " + q(samson()) + " --fusion none --bands 5,7,9 --per-band-out " + q(dir / "maps") + " --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (int b : {5, 7, 9}) {
        char name[32];
        std::snprintf(name, sizeof name, "band_%03d.png", b);
        ASSERT_TRUE(fs::exists(dir / "maps" / name)) << name;
    }
    EXPECT_TRUE(testing::cubes_identical(want.select_bands({1}), from_file_to_01(read_cube(dir / "maps" / "band_007.png"))));
}

TEST(EdgesCli, BadInputsExitTwoOrThreeAndWriteNothing) {
    const fs::path dir = testing::temp_dir("edges_cli_bad");
    const std::string in = q(samson());
    struct Case {
        std::string args;
        int code;
        std::string says;
    };
    const Case cases[] = {
        {in + " " + q(dir / "x.png") + " --fusion none", 2, ".npy"},
        {in + " " + q(dir / "x.png") + " --fusion votes", 2, "--fusion"},
        {in + " " + q(dir / "x.png") + " --q 0", 2, "q ="},
        {in + " " + q(dir / "x.png") + " --vote-percent 100", 2, "vote-percent"},
        {in + " " + q(dir / "x.png") + " --pca-components 0 --fusion pca", 2, "pca-components"},
        {in + " " + q(dir / "x.png") + " --min-component -3", 2, "min-component"},
        {in + " " + q(dir / "x.png") + " --connectivity 6", 2, "connectivity"},
        {in + " " + q(dir / "x.png") + " --fusion mean --vote-count-out " + q(dir / "c.npy"), 2, "--vote-count-out"},
        {in + " " + q(dir / "x.png") + " --bands 999", 2, "999"},
        {in + " " + q(dir / "x.txt"), 2, "x.txt"},
        {in, 2, "no output"},
        {q(dir / "missing.png") + " " + q(dir / "x.png"), 3, "missing.png"},
    };
    for (const Case& c : cases) {
        const auto r = run_cli("edges " + c.args);
        EXPECT_EQ(r.exit_code, c.code) << c.args << "\n" << r.err;
        EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
        EXPECT_EQ(files_in(dir), 0u) << c.args;
    }
}

}  // namespace
}  // namespace cubekit
