// `cubekit zernike` and `cubekit zernike-reconstruct`: the CSV/JSON tables against the library (bit-exact
// through %.17g), the --json summary, batches (folder, file list) equal to single runs, the reconstruction
// and its error, the round trip through the moments files, and bad inputs (exit 2 or 3, nothing written).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cubekit/io.hpp"
#include "cubekit/zernike.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;

using testing::q;

std::size_t files_in(const fs::path& dir) {
    std::size_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir)) n += e.is_regular_file();
    return n;
}

std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
    std::vector<std::vector<std::string>> rows;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        std::vector<std::string> fields(1);
        for (char c : line) {
            if (c == ',') fields.emplace_back();
            else fields.back().push_back(c);
        }
        rows.push_back(fields);
    }
    return rows;
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

/// A smooth blob: amplitude · exp(−r²/2σ²) about the image centre, in `dtype`.
Cube gaussian(int w, int h, double sigma, DType dtype, double amplitude = 200.0) {
    Cube c(w, h, 1, DType::F64);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            const double dx = x - (w - 1) / 2.0, dy = y - (h - 1) / 2.0;
            c.at<double>(x, y, 0) = amplitude * std::exp(-(dx * dx + dy * dy) / (2 * sigma * sigma));
        }
    return c.to_dtype(dtype);
}

const std::string cpu = " --backend cpu --quiet";

TEST(ZernikeCli, CsvHeaderAndRowCountsForEveryMode) {
    const fs::path dir = testing::temp_dir("zernike_cli_rows");
    write_cube(testing::random_cube(32, 32, 2, DType::F64, 11, 0, 1), dir / "two.npy");
    struct Case {
        std::string flags;
        std::size_t rows_per_band;
    };
    for (const Case& c : {Case{"--max-order 6", zernike_set_size(6)}, Case{"--order 5", 3}, Case{"--moment 4,2", 1},
                          Case{"", zernike_set_size(20)}}) {
        const auto r = run_cli("zernike " + q(dir / "two.npy") + " " + c.flags + cpu);
        ASSERT_EQ(r.exit_code, 0) << c.flags << ": " << r.err;
        const auto rows = parse_csv(r.out);
        ASSERT_EQ(rows.size(), 1 + 2 * c.rows_per_band) << c.flags;
        EXPECT_EQ(r.out.substr(0, r.out.find('\n')), "band,n,m,re,im,abs");
        EXPECT_EQ(rows[1][0], "0");
        EXPECT_EQ(rows.back()[0], "1");
        for (std::size_t i = 1; i < rows.size(); ++i) ASSERT_EQ(rows[i].size(), 6u) << c.flags << " row " << i;
    }
    EXPECT_EQ(files_in(dir), 1u);
}

TEST(ZernikeCli, CsvValuesAreTheLibrarysBitForBit) {
    const fs::path dir = testing::temp_dir("zernike_cli_exact");
    const Cube cube = testing::random_cube(40, 36, 3, DType::U16, 5, 0, 60000, Layout::BIP);
    write_cube(cube, dir / "c.npy");
    const Context& ctx = testing::cpu_context();
    const Cube band1 = cube.select_bands({1});
    struct Case {
        std::string flags;
        ZernikeMoments want;
    };
    const Case cases[] = {{"--max-order 12", zernike_set(ctx, band1, 12)},
                          {"--order 7", zernike_order(ctx, band1, 7)},
                          {"--moment 9,3", zernike_moment(ctx, band1, 9, 3)},
                          {"--max-order 9 --mapping circumscribed --precision f32",
                           zernike_set(ctx, band1, 9, {.mapping = ZernikeMapping::Circumscribed, .precision = ZernikePrecision::Float})}};
    for (const Case& c : cases) {
        const fs::path out = dir / "m.csv";
        const auto r = run_cli("zernike " + q(dir / "c.npy") + " --bands 1 -o " + q(out) + " " + c.flags + cpu);
        ASSERT_EQ(r.exit_code, 0) << c.flags << ": " << r.err;
        EXPECT_TRUE(r.out.empty()) << r.out;
        const auto rows = parse_csv(slurp(out));
        ASSERT_EQ(rows.size(), 1 + c.want.count()) << c.flags;
        for (std::size_t k = 0; k < c.want.count(); ++k) {
            const auto& row = rows[k + 1];
            ASSERT_EQ(row[0], "1");  // the input's band index, not the position among the bands used
            EXPECT_EQ(std::stoi(row[1]), c.want.indices[k].n);
            EXPECT_EQ(std::stoi(row[2]), c.want.indices[k].m);
            EXPECT_EQ(std::strtod(row[3].c_str(), nullptr), c.want.values[k].real()) << c.flags << " row " << k;
            EXPECT_EQ(std::strtod(row[4].c_str(), nullptr), c.want.values[k].imag()) << c.flags << " row " << k;
            EXPECT_EQ(std::strtod(row[5].c_str(), nullptr), std::abs(c.want.values[k])) << c.flags << " row " << k;
        }
    }
}

TEST(ZernikeCli, JsonFileCarriesTheDiskAndTheRows) {
    const fs::path dir = testing::temp_dir("zernike_cli_jsonfile");
    const Cube img = gaussian(33, 30, 6, DType::F32);
    write_cube(img, dir / "g.npy");
    auto r = run_cli("zernike " + q(dir / "g.npy") + " --max-order 8 -o " + q(dir / "m.json") + cpu);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(slurp(dir / "m.json"));
    EXPECT_EQ(j["width"], 33);
    EXPECT_EQ(j["height"], 30);
    EXPECT_EQ(j["mapping"], "inscribed");
    EXPECT_EQ(j["normalization"], "pixelcount");
    EXPECT_EQ(j["pixel_count"], zernike_disk(33, 30).pixel_count);
    EXPECT_EQ(j["max_order"], 8);
    EXPECT_EQ(j["method"], "kintner");
    EXPECT_EQ(j["precision"], "f64");
    EXPECT_EQ(j["dtype"], "f32");
    ASSERT_EQ(j["moments"].size(), zernike_set_size(8));
    const ZernikeMoments want = zernike_set(testing::cpu_context(), img, 8);
    for (std::size_t k = 0; k < want.count(); ++k) {
        const auto& row = j["moments"][k];
        EXPECT_EQ(row["band"], 0);
        EXPECT_EQ(row["n"], want.indices[k].n);
        EXPECT_EQ(row["m"], want.indices[k].m);
        EXPECT_EQ(row["re"].get<double>(), want.values[k].real());
        EXPECT_EQ(row["im"].get<double>(), want.values[k].imag());
        EXPECT_FALSE(row.contains("image"));
    }
    r = run_cli("zernike " + q(dir / "g.npy") + " --order 4 --mapping circumscribed -o " + q(dir / "c.JSON") + cpu);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    j = nlohmann::json::parse(slurp(dir / "c.JSON"));
    EXPECT_EQ(j["mapping"], "circumscribed");
    EXPECT_EQ(j["normalization"], "area");
    EXPECT_EQ(j["pixel_count"], 33 * 30);
    EXPECT_EQ(j["method"], "qrecursive");
}

TEST(ZernikeCli, JsonSummaryHoldsTheRowsOnlyWithoutOutputFile) {
    const fs::path dir = testing::temp_dir("zernike_cli_summary");
    write_cube(gaussian(32, 32, 5, DType::U8), dir / "g.png");
    auto r = run_cli("zernike " + q(dir / "g.png") + " --max-order 10 --backend cpu --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out);  // stdout is the JSON object and nothing else
    EXPECT_EQ(j["command"], "zernike");
    EXPECT_EQ(j["backend"], "cpu");
    EXPECT_EQ(j["input"]["shape"]["width"], 32);
    EXPECT_EQ(j["moments_count"], zernike_set_size(10));
    EXPECT_EQ(j["method"], "kintner");
    EXPECT_EQ(j["symmetric"], true);  // a square inscribed disk
    EXPECT_EQ(j["mapping"], "inscribed");
    EXPECT_EQ(j["normalization"], "pixelcount");
    EXPECT_EQ(j["pixel_count"], zernike_disk(32, 32).pixel_count);
    EXPECT_TRUE(j["elapsed_ms"].is_number());
    EXPECT_TRUE(j["outputs"].empty());
    ASSERT_EQ(j["moments"].size(), zernike_set_size(10));
    for (const char* key : {"band", "n", "m", "re", "im", "abs"}) EXPECT_TRUE(j["moments"][3].contains(key)) << key;
    EXPECT_EQ(j["moments"][0]["n"], 0);
    EXPECT_EQ(j["moments"][3]["n"], 2);
    EXPECT_EQ(j["moments"][3]["m"], 2);
    // With -o the summary lists the file instead of the rows.
    r = run_cli("zernike " + q(dir / "g.png") + " --max-order 10 --no-symmetry --backend cpu --json -o " + q(dir / "m.csv"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    j = nlohmann::json::parse(r.out);
    EXPECT_FALSE(j.contains("moments"));
    EXPECT_EQ(j["symmetric"], false);
    ASSERT_EQ(j["outputs"].size(), 1u);
    EXPECT_EQ(j["outputs"][0]["path"], (dir / "m.csv").string());
    EXPECT_TRUE(fs::exists(dir / "m.csv"));
}

TEST(ZernikeCli, BatchFolderAndFileListEqualSingleRuns) {
    const fs::path dir = testing::temp_dir("zernike_cli_batch");
    const fs::path in = dir / "in";
    fs::create_directories(in);
    write_cube(gaussian(36, 32, 6, DType::U8), in / "b_blob.png");
    write_cube(testing::random_cube(36, 32, 2, DType::F64, 3, -1, 1), in / "a_noise.npy");
    write_cube(testing::random_cube(36, 32, 1, DType::F32, 4, 0, 9), in / "c_f32.npy");
    std::ofstream(in / "notes.txt") << "not an image\n";
    const char* names[] = {"a_noise.npy", "b_blob.png", "c_f32.npy"};
    const int bands[] = {2, 1, 1};
    const std::string flags = " --max-order 7" + cpu;
    const auto batch = run_cli("zernike " + q(in) + flags);
    ASSERT_EQ(batch.exit_code, 0) << batch.err;
    const auto rows = parse_csv(batch.out);
    EXPECT_EQ(batch.out.substr(0, batch.out.find('\n')), "image,band,n,m,re,im,abs");
    const std::size_t per_band = zernike_set_size(7);
    ASSERT_EQ(rows.size(), 1 + 4 * per_band);
    std::size_t at = 1;
    for (int f = 0; f < 3; ++f) {
        const auto alone = run_cli("zernike " + q(in / names[f]) + flags);
        ASSERT_EQ(alone.exit_code, 0) << alone.err;
        const auto single = parse_csv(alone.out);
        ASSERT_EQ(single.size(), 1 + bands[f] * per_band);
        for (std::size_t i = 1; i < single.size(); ++i, ++at) {
            ASSERT_EQ(rows[at][0], names[f]);
            ASSERT_EQ(std::vector<std::string>(rows[at].begin() + 1, rows[at].end()), single[i]) << names[f] << " row " << i;
        }
    }
    // A list keeps its order; the JSON summary names every image.
    const auto list = run_cli("zernike " + q(in / "c_f32.npy") + " " + q(in / "b_blob.png") + flags + " --json");
    ASSERT_EQ(list.exit_code, 0) << list.err;
    const nlohmann::json j = nlohmann::json::parse(list.out);
    EXPECT_EQ(j["input"]["images"], 2);
    ASSERT_EQ(j["moments"].size(), 2 * per_band);
    EXPECT_EQ(j["moments"][0]["image"], "c_f32.npy");
    EXPECT_EQ(j["moments"][per_band]["image"], "b_blob.png");
    for (std::size_t k = 0; k < per_band; ++k) {
        const auto& b = j["moments"][per_band + k];
        const auto& row = rows[1 + 2 * per_band + k];  // b_blob.png in the folder run (after a_noise's 2 bands)
        EXPECT_EQ(b["re"].get<double>(), std::strtod(row[4].c_str(), nullptr));
        EXPECT_EQ(b["im"].get<double>(), std::strtod(row[5].c_str(), nullptr));
    }
}

TEST(ZernikeCli, BatchOfDifferentSizesExits2NamingTheFile) {
    const fs::path dir = testing::temp_dir("zernike_cli_mismatch");
    const fs::path in = dir / "in";
    fs::create_directories(in);
    write_cube(gaussian(32, 32, 5, DType::U8), in / "a.png");
    write_cube(gaussian(32, 30, 5, DType::U8), in / "b.png");
    const auto r = run_cli("zernike " + q(in) + " -o " + q(dir / "m.csv") + " --reconstruct " + q(dir / "r.png") + cpu);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("b.png"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("32x30"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("32x32"), std::string::npos) << r.err;
    EXPECT_EQ(files_in(dir), 2u);  // the two inputs only
}

TEST(ZernikeCli, BadArgumentsExitWithTheirCodeAndWriteNothing) {
    const fs::path dir = testing::temp_dir("zernike_cli_bad");
    const fs::path img = dir / "in" / "g.png";
    fs::create_directories(img.parent_path());
    write_cube(gaussian(32, 32, 5, DType::U8), img);
    const fs::path out = dir / "out";
    fs::create_directories(out);
    struct Case {
        std::string args;
        int code;
        std::string named;
    };
    const std::string m = " -o " + q(out / "m.csv");
    const Case cases[] = {
        {"zernike " + q(img) + " --moment 2,3" + m, 2, "--moment"},
        {"zernike " + q(img) + " --moment 3,2" + m, 2, "N - M even"},
        {"zernike " + q(img) + " --moment 3" + m, 2, "--moment"},
        {"zernike " + q(img) + " --max-order 4 --order 3" + m, 2, "--order"},
        {"zernike " + q(img) + " --order 2 --moment 2,0" + m, 2, "--moment"},
        {"zernike " + q(img) + " --max-order -1" + m, 2, "--max-order"},
        {"zernike " + q(img) + " -o " + q(out / "m.txt"), 2, "-o"},
        {"zernike " + q(img) + " --order 4 --reconstruct " + q(out / "r.png") + m, 2, "--reconstruct"},
        {"zernike " + q(img) + " --reconstruct " + q(out / "r.jpg") + m, 2, "--reconstruct"},
        {"zernike " + q(img) + " --reconstruct " + q(out / "r.png") + " --reconstruct-band 1" + m, 2, "--reconstruct-band"},
        {"zernike " + q(img) + " --mapping custom --radius 8" + m, 2, "--center"},
        {"zernike " + q(img) + " --center 3,4" + m, 2, "--mapping custom"},
        {"zernike " + q(img) + " --method fast" + m, 2, "--method"},
        {"zernike " + q(img) + " --bands 1" + m, 2, "--bands"},
        {"zernike " + q(dir / "missing.png") + m, 3, "missing.png"},
        {"zernike " + q(img) + " " + q(dir / "missing.png") + m, 3, "missing.png"},
        {"zernike " + q(dir / "out") + m, 2, "no image"},
        {"zernike " + q(img) + " -o " + q(dir / "no" / "such" / "m.csv"), 3, "m.csv"},
        {"zernike-reconstruct " + q(dir / "missing.csv") + " " + q(out / "r.png") + " --size 8x8", 3, "missing.csv"},
        {"zernike-reconstruct " + q(img) + " " + q(out / "r.png"), 2, "MOMENTS"},
    };
    for (const Case& c : cases) {
        const auto r = run_cli(c.args + cpu);
        EXPECT_EQ(r.exit_code, c.code) << c.args << "\n" << r.err;
        EXPECT_NE(r.err.find(c.named), std::string::npos) << c.args << "\n" << r.err;
        EXPECT_TRUE(r.out.empty()) << c.args;
        EXPECT_EQ(files_in(out), 0u) << c.args;
    }
}

TEST(ZernikeCli, ReconstructionErrorIsSmallForASmoothImageAndFallsWithOrder) {
    const fs::path dir = testing::temp_dir("zernike_cli_recon");
    write_cube(gaussian(48, 48, 8, DType::U8), dir / "blob.png");
    std::vector<double> errors;
    for (int order : {2, 4, 8, 20}) {
        const std::string png = "r" + std::to_string(order) + ".png";
        const auto r = run_cli("zernike " + q(dir / "blob.png") + " --max-order " + std::to_string(order) + " -o " +
                               q(dir / "m.csv") + " --reconstruct " + q(dir / png) + " --backend cpu --json");
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_NE(r.err.find("relative L2 error"), std::string::npos) << r.err;
        const nlohmann::json j = nlohmann::json::parse(r.out);
        ASSERT_EQ(j["reconstruction_error"].size(), 1u);
        errors.push_back(j["reconstruction_error"][0]);
        EXPECT_EQ(j["reconstruction_scale"]["bits"], 8);  // u8 input: clamped, not scaled
        const Cube out = read_cube(dir / png);
        EXPECT_EQ(out.dtype(), DType::U8);
        EXPECT_EQ(out.width(), 48);
    }
    // Falls fast with the order until the pixel grid's own error (~0.5 % here) is reached; beyond order
    // ~16 the discrete moments are no exact projection and the error creeps up again (spec §5.5).
    EXPECT_GT(errors[0], errors[1]);
    EXPECT_GT(errors[1], errors[2]);
    EXPECT_LT(errors[3], errors[1]);
    EXPECT_LT(errors[3], 0.02);
    // Non-u8 input: 16-bit PNG, min-max over the disk.
    write_cube(gaussian(48, 48, 8, DType::F64), dir / "blob.npy");
    const auto r = run_cli("zernike " + q(dir / "blob.npy") + " --reconstruct " + q(dir / "r16.png") + " --backend cpu --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["reconstruction_order"], 20);
    EXPECT_LT(j["reconstruction_error"][0].get<double>(), 0.2);
    const nlohmann::json& s = j["reconstruction_scale"];
    EXPECT_EQ(s["bits"], 16);
    EXPECT_NEAR(s["max"].get<double>(), 200.0, 10.0);
    const Cube png = read_cube(dir / "r16.png");
    ASSERT_EQ(png.dtype(), DType::U16);
    EXPECT_EQ(png.at<std::uint16_t>(24, 24, 0), 65535);
}

TEST(ZernikeReconstructCli, CsvAndJsonRoundTripToTheSameImage) {
    const fs::path dir = testing::temp_dir("zernike_cli_roundtrip");
    Cube two(40, 36, 2, DType::F64);
    const Cube g = gaussian(40, 36, 7, DType::F64), n = testing::random_cube(40, 36, 1, DType::F64, 8, 0, 5);
    for (int y = 0; y < 36; ++y)
        for (int x = 0; x < 40; ++x) two.at<double>(x, y, 0) = g.at<double>(x, y, 0), two.at<double>(x, y, 1) = n.at<double>(x, y, 0);
    write_cube(two, dir / "two.npy");
    auto r = run_cli("zernike " + q(dir / "two.npy") + " --max-order 16 -o " + q(dir / "m.json") + " --reconstruct " +
                     q(dir / "r.npy") + cpu);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_EQ(run_cli("zernike " + q(dir / "two.npy") + " --max-order 16 -o " + q(dir / "m.csv") + cpu).exit_code, 0);
    const Cube all = read_cube(dir / "r.npy").to_layout(Layout::BSQ);
    ASSERT_EQ(all.bands(), 2);
    const Cube want = zernike_reconstruct(testing::cpu_context(), zernike_set(testing::cpu_context(), two, 16));
    EXPECT_TRUE(testing::cubes_identical(want, all));

    r = run_cli("zernike-reconstruct " + q(dir / "m.csv") + " " + q(dir / "c.npy") + cpu);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--size"), std::string::npos) << r.err;
    for (const std::string& args : {q(dir / "m.csv") + " " + q(dir / "c.npy") + " --size 40x36 --band 1",
                                    q(dir / "m.json") + " " + q(dir / "j.npy") + " --band 1"}) {
        r = run_cli("zernike-reconstruct " + args + cpu);
        ASSERT_EQ(r.exit_code, 0) << args << ": " << r.err;
    }
    EXPECT_TRUE(testing::cubes_identical(all.select_bands({1}), read_cube(dir / "c.npy").to_layout(Layout::BSQ)));
    EXPECT_TRUE(testing::cubes_identical(all.select_bands({1}), read_cube(dir / "j.npy").to_layout(Layout::BSQ)));
    // A lower order from the JSON equals --reconstruct of that order; the PNG states its scale.
    ASSERT_EQ(run_cli("zernike " + q(dir / "two.npy") + " --max-order 9 --reconstruct " + q(dir / "r9.npy") + cpu + " -o " +
                      q(dir / "m9.csv")).exit_code, 0);
    r = run_cli("zernike-reconstruct " + q(dir / "m.json") + " " + q(dir / "j9.npy") + " --max-order 9" + cpu);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(testing::cubes_identical(read_cube(dir / "r9.npy").to_layout(Layout::BSQ).select_bands({0}),
                                         read_cube(dir / "j9.npy").to_layout(Layout::BSQ)));
    r = run_cli("zernike-reconstruct " + q(dir / "m.json") + " " + q(dir / "j.png") + " --backend cpu --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["order"], 16);
    EXPECT_EQ(j["reconstruction_scale"]["bits"], 16);
    EXPECT_EQ(read_cube(dir / "j.png").dtype(), DType::U16);
    // A custom disk travels in the JSON (centre and radius in pixels, sticking out: area normalisation).
    const std::string custom = " --max-order 12 --mapping custom --center 17,20.5 --radius 19";
    ASSERT_EQ(run_cli("zernike " + q(dir / "two.npy") + custom + " -o " + q(dir / "cu.json") + " --reconstruct " +
                      q(dir / "cu.npy") + cpu).exit_code, 0);
    EXPECT_EQ(nlohmann::json::parse(slurp(dir / "cu.json"))["normalization"], "area");
    r = run_cli("zernike-reconstruct " + q(dir / "cu.json") + " " + q(dir / "cu1.npy") + " --band 1" + cpu);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(testing::cubes_identical(read_cube(dir / "cu.npy").to_layout(Layout::BSQ).select_bands({1}),
                                         read_cube(dir / "cu1.npy").to_layout(Layout::BSQ)));
}

TEST(ZernikeReconstructCli, MissingMomentsAndBatchSelection) {
    const fs::path dir = testing::temp_dir("zernike_cli_select");
    const fs::path in = dir / "in";
    fs::create_directories(in);
    write_cube(gaussian(32, 32, 5, DType::U8), in / "a.png");
    write_cube(gaussian(32, 32, 9, DType::U8), in / "b.png");
    ASSERT_EQ(run_cli("zernike " + q(in / "a.png") + " --order 4 -o " + q(dir / "o4.csv") + cpu).exit_code, 0);
    auto r = run_cli("zernike-reconstruct " + q(dir / "o4.csv") + " " + q(dir / "x.png") + " --size 32x32" + cpu);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("A(0,0)"), std::string::npos) << r.err;
    ASSERT_EQ(run_cli("zernike " + q(in) + " --max-order 10 -o " + q(dir / "b.json") + cpu).exit_code, 0);
    r = run_cli("zernike-reconstruct " + q(dir / "b.json") + " " + q(dir / "x.png") + " --max-order 12" + cpu);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("A(11,1)"), std::string::npos) << r.err;
    r = run_cli("zernike-reconstruct " + q(dir / "b.json") + " " + q(dir / "x.png") + " --image c.png" + cpu);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--image"), std::string::npos) << r.err;
    r = run_cli("zernike-reconstruct " + q(dir / "b.json") + " " + q(dir / "x.tif") + cpu);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("OUT"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "x.png"));
    // --image b.png of the batch = b.png alone (u8 in the JSON: an 8-bit PNG, as --reconstruct writes).
    ASSERT_EQ(run_cli("zernike " + q(in / "b.png") + " --max-order 10 --reconstruct " + q(dir / "alone.png") + cpu).exit_code, 0);
    r = run_cli("zernike-reconstruct " + q(dir / "b.json") + " " + q(dir / "b.png") + " --image b.png" + cpu);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(testing::cubes_identical(read_cube(dir / "alone.png"), read_cube(dir / "b.png")));
}

}  // namespace
}  // namespace cubekit
