// k-means front end: a table of bad inputs to `cubekit quantize`, `cluster` and `demo` (exit code,
// one stderr line naming the flag or file and the value, nothing left behind).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cubekit/io.hpp"
#include "kmeans_cli_test_helpers.hpp"
#include "testing.hpp"

namespace {

namespace fs = std::filesystem;
using namespace cubekit;
using namespace cubekit::kmeans_cli_test;
using cubekit::testing::run_cli;
using cubekit::testing::source_path;
using cubekit::testing::temp_dir;

// ---- helpers --------------------------------------------------------------------------------------

void spit(const fs::path& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary);
    out << bytes;
    if (!out) throw std::runtime_error("cannot write fixture " + p.string());
}

// ---- bad inputs ----------------------------------------------------------------------------------------

struct Invocation {
    std::string args;
    std::vector<std::string> names;
};

struct BadRow {
    std::string name;
    int exit_code;
    std::function<Invocation(const fs::path& dir)> make;
};

std::ostream& operator<<(std::ostream& os, const BadRow& r) { return os << r.name; }

/// quantize of a small RGB PNG (written into dir) to dir/out.png, plus `flags`.
BadRow quantize_row(std::string name, const std::string& flags, std::vector<std::string> named, int code = 2) {
    return {std::move(name), code, [=](const fs::path& d) {
                return Invocation{"quantize " + q(rgb_png(d, 8, 6, 1)) + " " + q(d / "out.png") + " " + flags, named};
            }};
}

/// A f32 .npy cube (NaN-filled when `nan`) written into dir.
fs::path f32_npy(const fs::path& d, bool nan) {
    Cube c = cubekit::testing::random_cube(5, 4, 3, DType::F32, 3, 0, 1, Layout::BIP);
    if (nan) std::fill(c.data<float>(), c.data<float>() + c.num_elements(), NAN);
    write_cube(c, d / "f.npy");
    return d / "f.npy";
}

fs::path mask_file(const fs::path& d, int w, int h, std::uint8_t value) {
    Cube m(w, h, 1, DType::U8);
    std::fill(m.data<std::uint8_t>(), m.data<std::uint8_t>() + m.num_elements(), value);
    write_cube(m, d / "mask.png");
    return d / "mask.png";
}

std::vector<BadRow> bad_rows() {
    const fs::path samson = source_path("data/samson/samson_1.img");
    return {
        quantize_row("k_0", "-k 0", {"k", "0"}),
        quantize_row("k_above_pixel_count", "-k 49", {"k", "49", "48"}),
        quantize_row("max_iter_minus_1", "--max-iter -1", {"max-iter", "-1"}),
        quantize_row("tol_minus_1", "--tol -1", {"tol", "-1"}),
        quantize_row("tol_nan", "--tol nan", {"tol", "nan"}),
        quantize_row("n_init_0", "--n-init 0", {"n-init", "0"}),
        quantize_row("init_unknown", "--init kmeans--", {"--init", "kmeans--"}),
        quantize_row("empty_unknown", "--empty drop", {"--empty", "drop"}),
        quantize_row("seed_negative", "--seed -1", {"--seed", "-1"}),
        quantize_row("init_explicit_without_palette_in", "--init explicit", {"--init", "explicit", "--palette-in"}),
        quantize_row("palette_out_extension", "--palette-out p.txt", {"--palette-out", "p.txt"}),
        quantize_row("colorspace_unknown", "--colorspace hsv", {"--colorspace", "hsv"}),
        quantize_row("dither_unknown", "--dither ordered", {"--dither", "ordered"}),
        quantize_row("lab_with_backend_cuda", "--colorspace lab --backend cuda",
                     {"--colorspace", "lab", "--backend", "cuda"}),
        quantize_row("dither_with_backend_cuda", "--dither floyd-steinberg --backend cuda", {"--dither", "cuda"}),
        quantize_row("lab_with_legacy", "--colorspace lab --legacy", {"--legacy", "lab"}),
        {"mask_wrong_size", 2,
         [](const fs::path& d) {
             const fs::path m = mask_file(d, 5, 3, 1);
             return Invocation{"quantize " + q(rgb_png(d, 8, 6, 1)) + " " + q(d / "out.png") + " --mask " + q(m),
                               {"--mask", m.string(), "5x3"}};
         }},
        {"mask_all_zero", 2,
         [](const fs::path& d) {
             const fs::path m = mask_file(d, 8, 6, 0);
             return Invocation{"quantize " + q(rgb_png(d, 8, 6, 1)) + " " + q(d / "out.png") + " --mask " + q(m),
                               {"--mask", m.string()}};
         }},
        {"all_nan_input", 2,
         [](const fs::path& d) {
             return Invocation{"quantize " + q(f32_npy(d, true)) + " " + q(d / "out.npy") + " -k 2", {"valid", "NaN"}};
         }},
        {"legacy_with_float_input", 2,
         [](const fs::path& d) {
             return Invocation{"quantize " + q(f32_npy(d, false)) + " " + q(d / "out.npy") + " -k 2 --legacy",
                               {"legacy", "f32"}};
         }},
        {"png_out_for_float_input", 2,
         [](const fs::path& d) {
             return Invocation{"quantize " + q(f32_npy(d, false)) + " " + q(d / "out.png"),
                               {(d / "out.png").string(), "f32"}};
         }},
        {"lab_on_grey", 2,
         [](const fs::path& d) {
             return Invocation{
                 "quantize " + q(rgb_png(d, 8, 6, 1, 256, 1)) + " " + q(d / "out.png") + " --colorspace lab",
                 {"--colorspace", "lab"}};
         }},
        {"missing_input", 3,
         [](const fs::path& d) {
             return Invocation{"quantize " + q(d / "gone.png") + " " + q(d / "out.png"), {(d / "gone.png").string()}};
         }},
        {"input_not_an_image", 2,
         [](const fs::path& d) {
             spit(d / "bad.png", "\x89PNG\r\n\x1a\n this is not a PNG");
             return Invocation{"quantize " + q(d / "bad.png") + " " + q(d / "out.png"), {(d / "bad.png").string()}};
         }},
        {"palette_in_missing", 3,
         [](const fs::path& d) {
             return Invocation{
                 "quantize " + q(rgb_png(d, 8, 6, 1)) + " " + q(d / "out.png") + " --palette-in " + q(d / "p.json"),
                 {"--palette-in", (d / "p.json").string()}};
         }},
        {"palette_in_not_json", 2,
         [](const fs::path& d) {
             spit(d / "p.json", "{\"palette\": [");
             return Invocation{
                 "quantize " + q(rgb_png(d, 8, 6, 1)) + " " + q(d / "out.png") + " --palette-in " + q(d / "p.json"),
                 {"--palette-in", (d / "p.json").string()}};
         }},
        {"palette_in_wrong_channels", 2,
         [](const fs::path& d) {
             spit(d / "p.json", R"({"palette": [{"rgb": [1, 2, 3]}, {"values": [4, 5]}]})");
             return Invocation{
                 "quantize " + q(rgb_png(d, 8, 6, 1)) + " " + q(d / "out.png") + " --palette-in " + q(d / "p.json"),
                 {"--palette-in", (d / "p.json").string(), "1"}};
         }},
        {"palette_in_k_disagrees", 2,
         [](const fs::path& d) {
             spit(d / "p.json", R"({"palette": [{"rgb": [1, 2, 3]}, {"rgb": [4, 5, 6]}]})");
             return Invocation{"quantize " + q(rgb_png(d, 8, 6, 1)) + " " + q(d / "out.png") + " -k 3 --palette-in " +
                                   q(d / "p.json"),
                               {"-k", "3", "2"}};
         }},
        {"later_output_fails_removes_earlier", 3,
         [](const fs::path& d) {  // out.png and the indexed PNG must go
             spit(d / "afile", "");
             return Invocation{"quantize " + q(rgb_png(d, 8, 6, 1)) + " " + q(d / "out.png") + " -k 2 --palette-out " +
                                   q(d / "afile" / "p.json"),
                               {(d / "afile" / "p.json").string()}};
         }},
        {"indexed_target_is_a_folder", 3,
         [](const fs::path& d) {
             fs::create_directory(d / "out.indexed.png");
             return Invocation{"quantize " + q(rgb_png(d, 8, 6, 1)) + " " + q(d / "out.png") + " -k 2",
                               {(d / "out.indexed.png").string()}};
         }},
        {"cluster_png_out", 2,
         [=](const fs::path& d) {
             return Invocation{"cluster " + q(samson) + " " + q(d / "labels.png"), {(d / "labels.png").string()}};
         }},
        {"cluster_k_0", 2,
         [=](const fs::path& d) {
             return Invocation{"cluster " + q(samson) + " " + q(d / "l.npy") + " -k 0", {"k", "0"}};
         }},
        {"cluster_init_explicit_without_centroids", 2,
         [=](const fs::path& d) {
             return Invocation{"cluster " + q(samson) + " " + q(d / "l.npy") + " --init explicit",
                               {"--init", "explicit", "--centroids-in"}};
         }},
        {"cluster_mask_wrong_size", 2,
         [=](const fs::path& d) {
             const fs::path m = mask_file(d, 94, 95, 1);
             return Invocation{"cluster " + q(samson) + " " + q(d / "l.npy") + " --mask " + q(m),
                               {"--mask", m.string(), "94x95"}};
         }},
        {"cluster_centroids_wrong_bands", 2,
         [=](const fs::path& d) {
             spit(d / "c.json", R"({"centroids": [{"cluster": 0, "spectrum": [1, 2, 3]}]})");
             return Invocation{"cluster " + q(samson) + " " + q(d / "l.npy") + " --centroids-in " + q(d / "c.json"),
                               {"--centroids-in", (d / "c.json").string(), "156"}};
         }},
        {"cluster_json_target_is_a_folder", 3,
         [=](const fs::path& d) {  // labels, png and csv must go
             fs::create_directory(d / "l.centroids.json");
             return Invocation{"cluster " + q(samson) + " " + q(d / "l.npy") + " -k 3",
                               {(d / "l.centroids.json").string()}};
         }},
        {"cluster_missing_input", 3,
         [](const fs::path& d) {
             return Invocation{"cluster " + q(d / "none.hdr") + " " + q(d / "l.npy"), {(d / "none.hdr").string()}};
         }},
        {"demo_photo_missing", 3,  // the demo folder must not be created either
         [](const fs::path& d) {
             return Invocation{"demo --quiet --out " + q(d / "demo") + " --photo " + q(d / "none.png"),
                               {(d / "none.png").string()}};
         }},
    };
}

class KmeansCliBadInput : public ::testing::TestWithParam<BadRow> {};

TEST_P(KmeansCliBadInput, ExitCodeOneLineNothingLeft) {
    const BadRow& row = GetParam();
    const fs::path dir = temp_dir("kmeans-bad-" + row.name);
    const Invocation inv = row.make(dir);
    const std::string before = listing(dir);
    const auto r = run_cli(inv.args);
    SCOPED_TRACE("cubekit " + inv.args + "\n  exit " + std::to_string(r.exit_code) + ", stderr: " + r.err);
    EXPECT_EQ(r.exit_code, row.exit_code);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr must be exactly one line";
    for (const std::string& n : inv.names) EXPECT_TRUE(names(r.err, n)) << "stderr does not name '" << n << "'";
    EXPECT_EQ(listing(dir), before) << "the output folder must hold only what the test put there";
}

INSTANTIATE_TEST_SUITE_P(Kmeans, KmeansCliBadInput, ::testing::ValuesIn(bad_rows()),
                         [](const ::testing::TestParamInfo<BadRow>& i) { return i.param.name; });


}  // namespace
