// CLI tests: run the built `cubekit` binary. A table of bad inputs (exit code, one stderr line naming
// the flag or file and the offending value, nothing left in the output folder), then the positive
// paths of info, rcmg, convert and demo, the RCMG CLI against the library, bit for bit,
// --png-compression on every command that writes PNGs, and --help of every subcommand.
#include <matio.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <functional>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#if __has_include(<nlohmann/json.hpp>)
#include <nlohmann/json.hpp>
#define CUBEKIT_CLI_TEST_JSON 1
#endif

#include "cubekit/error.hpp"
#include "cubekit/gradient.hpp"
#include "cubekit/io.hpp"
#include "testing.hpp"

namespace {

namespace fs = std::filesystem;
using namespace cubekit;
using cubekit::testing::run_cli;
using cubekit::testing::source_path;
using cubekit::testing::folder_listing;
using cubekit::testing::names_token;
using cubekit::testing::temp_dir;

// ---- helpers --------------------------------------------------------------------------------------

/// Single-quotes for the shell (run_cli passes its argument string to /bin/sh as is).
using cubekit::testing::q;

const fs::path& samson() {
    static const fs::path p = source_path("data/samson/samson_1.img");
    return p;
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void spit(const fs::path& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    if (!out) throw std::runtime_error("cannot write fixture " + p.string());
}

/// The header dict of a .npy file ("{'descr': '<f4', 'fortran_order': False, 'shape': (95, 95), }").
std::string npy_header(const fs::path& p) {
    const std::string s = slurp(p);
    if (s.size() < 10 || s.compare(0, 6, "\x93NUMPY") != 0) return "<not a .npy file: " + p.string() + ">";
    const bool v1 = s[6] == 1;
    const std::size_t len = v1 ? std::size_t(std::uint8_t(s[8])) | std::size_t(std::uint8_t(s[9])) << 8
                               : std::size_t(std::uint8_t(s[8])) | std::size_t(std::uint8_t(s[9])) << 8 |
                                     std::size_t(std::uint8_t(s[10])) << 16 | std::size_t(std::uint8_t(s[11])) << 24;
    return s.substr(v1 ? 10 : 12, len);
}

/// An ENVI pair `name`.hdr + `name`.img: Samson's header with `from` replaced by `to`, and the first
/// `data_bytes` bytes of Samson's data (zero-padded when longer). Returns the data file.
fs::path envi_fixture(const fs::path& dir, const std::string& name, const std::string& from, const std::string& to,
                      std::size_t data_bytes) {
    std::string hdr = slurp(samson().string() + ".hdr");
    if (!from.empty()) {
        const std::size_t at = hdr.find(from);
        if (at == std::string::npos) throw std::runtime_error("Samson header has no '" + from + "'");
        hdr.replace(at, from.size(), to);
    }
    spit(dir / (name + ".hdr"), hdr);
    std::string data = slurp(samson());
    data.resize(data_bytes, '\0');
    spit(dir / (name + ".img"), data);
    return dir / (name + ".img");
}

/// A MATLAB v5 file of double arrays with the given names and dimensions.
fs::path mat_fixture(const fs::path& p, const std::vector<std::pair<std::string, std::vector<std::size_t>>>& vars) {
    mat_t* mat = Mat_CreateVer(p.c_str(), nullptr, MAT_FT_MAT5);
    if (!mat) throw std::runtime_error("matio cannot create " + p.string());
    for (auto [name, dims] : vars) {
        std::vector<double> data(std::accumulate(dims.begin(), dims.end(), std::size_t(1), std::multiplies<>()));
        std::iota(data.begin(), data.end(), 1.0);
        matvar_t* v = Mat_VarCreate(name.c_str(), MAT_C_DOUBLE, MAT_T_DOUBLE, int(dims.size()), dims.data(), data.data(), 0);
        if (!v || Mat_VarWrite(mat, v, MAT_COMPRESSION_NONE) != 0) throw std::runtime_error("matio cannot write " + name);
        Mat_VarFree(v);
    }
    Mat_Close(mat);
    return p;
}

constexpr std::size_t kSamsonBytes = 95u * 95u * 156u * 2u;

// ---- bad inputs ----------------------------------------------------------------------------------

struct Invocation {
    std::string args;                // the command line after `cubekit`
    std::vector<std::string> names;  // what the one stderr line must name (flag or file, offending value)
};

struct BadRow {
    std::string name;
    int exit_code;
    std::function<Invocation(const fs::path& dir)> make;  // writes its fixtures into dir (the output folder)
    std::function<std::string()> skip = {};                // a reason to skip here, or ""
};

std::ostream& operator<<(std::ostream& os, const BadRow& r) { return os << r.name; }

/// rcmg of `in` into dir/out.npy and dir/out.png (which must not appear), then `extra`.
std::string rcmg_into(const fs::path& in, const fs::path& dir, const std::string& extra = "") {
    return "rcmg " + q(in) + " " + q(dir / "out.npy") + " " + q(dir / "out.png") + (extra.empty() ? "" : " " + extra);
}
std::string convert_into(const fs::path& dir, const std::string& extra) {
    return "convert " + q(samson()) + " " + q(dir / "out.npy") + " " + extra;
}
/// A bad flag value on rcmg of Samson.
BadRow flag_row(std::string name, const std::string& flags, std::vector<std::string> named) {
    return {std::move(name), 2, [=](const fs::path& d) { return Invocation{rcmg_into(samson(), d, flags), named}; }};
}
fs::path regular_file(const fs::path& p) {
    spit(p, "");
    return p;
}

/// A 12x10 f32 relief (a ramp) at dir/relief.npy, for watershed.
fs::path relief_fixture(const fs::path& dir) {
    Cube relief(12, 10, 1, DType::F32);
    for (int y = 0; y < 10; ++y)
        for (int x = 0; x < 12; ++x) relief.at<float>(x, y, 0) = float(x + 2 * y);
    write_cube(relief, dir / "relief.npy");
    return dir / "relief.npy";
}
/// watershed of the relief fixture into dir/out.npy and dir/out.png (which must not appear), then `extra`.
std::string watershed_into(const fs::path& dir, const std::string& extra) {
    return "watershed " + q(relief_fixture(dir)) + " " + q(dir / "out.npy") + " --png " + q(dir / "out.png") + " " + extra;
}

std::string skip_if_devices_at_least(int n) {
    const int count = Context::cuda_device_count();
    return count >= n ? "this machine has " + std::to_string(count) + " CUDA device(s)" : "";
}

std::vector<BadRow> bad_rows() {
    const auto envi = [](std::string row, std::string from, std::string to, std::size_t bytes,
                         std::function<std::vector<std::string>(const fs::path& data)> named) {
        return BadRow{std::move(row), 2, [=](const fs::path& d) {
                          const fs::path data = envi_fixture(d, "scene", from, to, bytes);
                          return Invocation{rcmg_into(data, d), named(data)};
                      }};
    };
    return {
        envi("envi_truncated_data", "", "", 1000, [](const fs::path& f) { return std::vector<std::string>{f.string(), "1000"}; }),
        // A band more than the header describes (a few bytes more are read, with a warning).
        envi("envi_data_longer_than_header", "", "", kSamsonBytes + 95 * 95 * 2,
             [](const fs::path& f) { return std::vector<std::string>{f.string(), std::to_string(kSamsonBytes + 95 * 95 * 2)}; }),
        envi("envi_header_samples_changed", "samples = 95", "samples = 94", kSamsonBytes,
             [](const fs::path& f) { return std::vector<std::string>{f.string(), std::to_string(kSamsonBytes)}; }),
        envi("envi_data_type_6", "data type = 2", "data type = 6", kSamsonBytes,
             [](const fs::path&) { return std::vector<std::string>{"data type", "6"}; }),
        envi("envi_data_type_15", "data type = 2", "data type = 15", kSamsonBytes,
             [](const fs::path&) { return std::vector<std::string>{"data type", "15"}; }),
        envi("envi_zero_samples", "samples = 95", "samples = 0", kSamsonBytes,
             [](const fs::path&) { return std::vector<std::string>{"samples", "0"}; }),
        {"missing_input", 3, [](const fs::path& d) { return Invocation{rcmg_into(d / "missing.img", d), {(d / "missing.img").string()}}; }},
        {"info_missing_input", 3, [](const fs::path& d) { return Invocation{"info " + q(d / "gone.npy"), {(d / "gone.npy").string()}}; }},
        {"output_below_regular_file", 3, [](const fs::path& d) {
             const fs::path out = regular_file(d / "afile") / "out.npy";
             return Invocation{"rcmg " + q(samson()) + " " + q(out), {out.string()}};
         }},
        {"convert_output_below_regular_file", 3, [](const fs::path& d) {
             const fs::path out = regular_file(d / "afile") / "out.hdr";  // ENVI: out.img and out.hdr
             return Invocation{"convert " + q(samson()) + " " + q(out), {(d / "afile").string()}};
         }},
        {"output_folder_missing", 3, [](const fs::path& d) {
             return Invocation{"rcmg " + q(samson()) + " " + q(d / "nodir" / "out.npy"), {(d / "nodir" / "out.npy").string()}};
         }},
        {"second_output_unwritable", 3, [](const fs::path& d) {  // out.png must not stay behind either
             const fs::path bad = regular_file(d / "afile") / "out.npy";
             return Invocation{"rcmg " + q(samson()) + " " + q(d / "out.png") + " " + q(bad), {bad.string()}};
         }},
        {"envi_data_name_is_a_folder", 3, [](const fs::path& d) {
             fs::create_directory(d / "out.img");
             return Invocation{"convert " + q(samson()) + " " + q(d / "out.hdr"), {(d / "out.img").string()}};
         }},
        {"mat_wrong_var", 2, [](const fs::path& d) {
             const fs::path m = mat_fixture(d / "scene.mat", {{"data", {7, 5, 3}}, {"mask", {7, 5}}});
             return Invocation{rcmg_into(m, d, "--var nope"), {m.string(), "nope", "data", "mask"}};
         }},
        {"mat_ambiguous_without_var", 2, [](const fs::path& d) {
             const fs::path m = mat_fixture(d / "two.mat", {{"cubeA", {4, 3, 2}}, {"cubeB", {5, 4, 3}}});
             return Invocation{rcmg_into(m, d), {m.string(), "cubeA", "cubeB", "--var"}};
         }},
        {"device_7", 4, [](const fs::path& d) { return Invocation{rcmg_into(samson(), d, "--device 7"), {"--device 7"}}; },
         [] { return skip_if_devices_at_least(8); }},
        {"demo_device_7", 4, [](const fs::path& d) {  // the demo folder must not be created either
             return Invocation{"demo --out " + q(d / "demo") + " --device 7", {"--device 7"}};
         }, [] { return skip_if_devices_at_least(8); }},
        {"backend_cuda_without_device", 4,
         [](const fs::path& d) { return Invocation{rcmg_into(samson(), d, "--backend cuda"), {"--backend", "cuda"}}; },
         [] { return skip_if_devices_at_least(1); }},
        flag_row("connectivity_6", "--connectivity 6", {"--connectivity", "6"}),
        flag_row("reject_5", "--reject 5", {"reject", "5"}),
        flag_row("reject_2_with_4_connectivity", "--connectivity 4 --reject 2", {"reject", "2"}),
        flag_row("precision_f16", "--precision f16", {"--precision", "f16"}),
        flag_row("rcmg_out_type_u8", "--out-type u8", {"--out-type", "u8"}),
        flag_row("bands_999", "--bands 999", {"--bands", "999"}),
        flag_row("bands_not_numbers", "--bands a-b", {"--bands", "a-b"}),
        flag_row("threads_minus_1", "--threads -1", {"--threads", "-1"}),
        flag_row("png_compression_tiny", "--png-compression tiny", {"--png-compression", "tiny"}),
        flag_row("backend_gpu", "--backend gpu", {"--backend", "gpu"}),
        {"batch_out_ext_without_dot", 2, [](const fs::path& d) {
             return Invocation{"batch rcmg " + q(samson()) + " --out-dir " + q(d / "b") + " --out-ext npy", {"--out-ext", "npy"}};
         }},
        {"batch_missing_input", 3, [](const fs::path& d) {
             return Invocation{"batch rcmg " + q(d / "none.hdr") + " --out-dir " + q(d / "b"), {(d / "none.hdr").string()}};
         }},
        {"batch_of_batch", 2, [](const fs::path& d) {
             return Invocation{"batch batch " + q(samson()) + " --out-dir " + q(d / "b"), {"COMMAND", "batch"}};
         }},
        {"batch_jobs_0", 2, [](const fs::path& d) {
             return Invocation{"batch rcmg " + q(samson()) + " --out-dir " + q(d / "b") + " --jobs 0", {"--jobs"}};
         }},
        flag_row("memory_limit_units", "--memory-limit 12Q", {"--memory-limit", "12Q"}),
        flag_row("memory_limit_zero", "--memory-limit 0", {"--memory-limit", "0"}),
        flag_row("memory_limit_too_small", "--memory-limit 30", {"--memory-limit", "30", "raise"}),
        flag_row("device_memory_limit_negative", "--device-memory-limit -5M", {"--device-memory-limit", "-5M"}),
        flag_row("tile_size_one_number", "--tile-size 64", {"--tile-size", "64"}),
        flag_row("tile_size_zero", "--tile-size 0x8", {"--tile-size", "0x8"}),
        flag_row("devices_twice", "--devices 0,0", {"--devices", "0,0"}),
        flag_row("devices_on_cpu", "--devices 0 --backend cpu", {"--devices", "CPU"}),
        // The tile flags of the families that took them after the table was written.
        {"edges_baseline_memory_limit_units", 2, [](const fs::path& d) {
             return Invocation{"edges-baseline " + q(samson()) + " " + q(d / "e.npy") + " --memory-limit 12Q", {"--memory-limit", "12Q"}};
         }},
        {"edges_baseline_budget_below_a_band", 2, [](const fs::path& d) {
             return Invocation{"edges-baseline " + q(samson()) + " " + q(d / "e.npy") + " --memory-limit 4K", {"edges-baseline", "raise"}};
         }},
        {"multires_tile_size_zero", 2, [](const fs::path& d) {  // refused before the model is read
             return Invocation{"detect multires " + q(samson()) + " " + q(d / "w.json") + " --model " + q(samson()) + " --tile-size 0x8",
                               {"--tile-size", "0x8"}};
         }},
        {"unknown_output_extension", 2, [](const fs::path& d) {
             return Invocation{"rcmg " + q(samson()) + " " + q(d / "out.xyz"), {(d / "out.xyz").string()}};
         }},
        {"read_only_output_format", 2, [](const fs::path& d) {
             return Invocation{"rcmg " + q(samson()) + " " + q(d / "out.jpg"), {(d / "out.jpg").string()}};
         }},
        {"convert_read_only_output_format", 2, [](const fs::path& d) {
             return Invocation{"convert " + q(samson()) + " " + q(d / "out.jpg"), {(d / "out.jpg").string()}};
         }},
        {"png_with_156_bands", 2, [](const fs::path& d) {
             return Invocation{"convert " + q(samson()) + " " + q(d / "out.png") + " --out-type u8", {(d / "out.png").string(), "156"}};
         }},
        {"unknown_subcommand", 2, [](const fs::path&) { return Invocation{"frobnicate " + q(samson()), {"frobnicate"}}; }},
        {"missing_required_argument", 2, [](const fs::path&) { return Invocation{"rcmg " + q(samson()), {"OUT"}}; }},
        {"convert_crop_outside", 2, [](const fs::path& d) { return Invocation{convert_into(d, "--crop 90,90,10,10"), {"--crop", "90"}}; }},
        {"convert_crop_syntax", 2, [](const fs::path& d) { return Invocation{convert_into(d, "--crop 1,2,3"), {"--crop", "1,2,3"}}; }},
        {"convert_layout_zig", 2, [](const fs::path& d) { return Invocation{convert_into(d, "--layout zig"), {"--layout", "zig"}}; }},
        {"convert_out_type_u9", 2, [](const fs::path& d) { return Invocation{convert_into(d, "--out-type u9"), {"--out-type", "u9"}}; }},
        // watershed, segment, classify, and the secondary inputs (FILE or FILE.mat:VAR) of every command:
        // a missing file is refused by the system (3), a variable the file lacks is its content (2).
        {"watershed_missing_mask", 3, [](const fs::path& d) {
             return Invocation{watershed_into(d, "--mask " + q(d / "gone.png")), {"--mask", (d / "gone.png").string()}};
         }},
        {"watershed_markers_var_missing", 2, [](const fs::path& d) {
             const fs::path m = mat_fixture(d / "seeds.mat", {{"seeds", {10, 12}}});
             return Invocation{watershed_into(d, "--markers " + q(m.string() + ":nope")), {"--markers", "nope", "seeds"}};
         }},
        {"watershed_markers_other_size", 2, [](const fs::path& d) {
             const fs::path m = mat_fixture(d / "seeds.mat", {{"seeds", {10, 11}}});
             return Invocation{watershed_into(d, "--markers " + q(m.string() + ":seeds")), {"--markers", "11x10x1"}};
         }},
        {"watershed_connectivity_6", 2,
         [](const fs::path& d) { return Invocation{watershed_into(d, "--connectivity 6"), {"--connectivity", "6"}}; }},
        {"watershed_labels_as_png", 2, [](const fs::path& d) {
             return Invocation{"watershed " + q(relief_fixture(d)) + " " + q(d / "out.png"), {"OUT", (d / "out.png").string()}};
         }},
        {"segment_bands_999", 2, [](const fs::path& d) {
             return Invocation{"segment " + q(samson()) + " " + q(d / "out.npy") + " --bands 999", {"--bands", "999"}};
         }},
        {"segment_regions_out_txt", 2, [](const fs::path& d) {
             return Invocation{"segment " + q(samson()) + " " + q(d / "out.npy") + " --regions-out " + q(d / "r.txt"),
                               {"--regions-out", (d / "r.txt").string()}};
         }},
        {"classify_missing_train", 3, [](const fs::path& d) {
             return Invocation{"classify " + q(samson()) + " " + q(d / "out.png") + " --train " + q(d / "gone.png"),
                               {"--train", (d / "gone.png").string()}};
         }},
        {"classify_unknown_classifier", 2, [](const fs::path& d) {
             return Invocation{"classify " + q(samson()) + " " + q(d / "out.png") + " --classifier nosuch",
                               {"--classifier", "nosuch"}};
         }},
        {"detect_missing_target_mask", 3, [](const fs::path& d) {
             return Invocation{"detect mf " + q(samson()) + " " + q(d / "out.npy") + " --target-mask " + q(d / "gone.png"),
                               {"--target-mask", (d / "gone.png").string()}};
         }},
        {"detect_score_missing_mask", 3, [](const fs::path& d) {
             return Invocation{"detect-score " + q(relief_fixture(d)) + " " + q(d / "gone.png"), {"MASK", (d / "gone.png").string()}};
         }},
        {"train_missing_labels", 3, [](const fs::path& d) {
             return Invocation{"train rbfn " + q(samson()) + " --labels " + q(d / "gone.npy") + " -o " + q(d / "m.json"),
                               {"--labels", (d / "gone.npy").string()}};
         }},
        {"cluster_mask_var_missing", 2, [](const fs::path& d) {
             const fs::path m = mat_fixture(d / "valid.mat", {{"valid", {95, 95}}});
             return Invocation{"cluster " + q(samson()) + " " + q(d / "out.npy") + " --mask " + q(m.string() + ":nope"),
                               {"--mask", "nope"}};
         }},
        {"demo_out_below_regular_file", 3, [](const fs::path& d) {
             const fs::path out = regular_file(d / "afile") / "demo";
             return Invocation{"demo --out " + q(out), {out.string()}};
         }},
        {"demo_json_target_is_a_folder", 3, [](const fs::path& d) {  // png and npy must not stay behind
             fs::create_directory(d / "samson_rcmg.json");
             return Invocation{"demo --quiet --out " + q(d), {(d / "samson_rcmg.json").string()}};
         }},
    };
}

class CliBadInput : public ::testing::TestWithParam<BadRow> {};

TEST_P(CliBadInput, ExitCodeOneLineNothingLeft) {
    const BadRow& row = GetParam();
    if (row.skip)
        if (const std::string why = row.skip(); !why.empty()) GTEST_SKIP() << row.name << ": " << why;
    const fs::path dir = temp_dir("bad-" + row.name);
    const Invocation inv = row.make(dir);
    const std::string before = folder_listing(dir);
    const auto r = run_cli(inv.args);
    SCOPED_TRACE("cubekit " + inv.args + "\n  exit " + std::to_string(r.exit_code) + ", stderr: " + r.err);
    EXPECT_EQ(r.exit_code, row.exit_code);
    EXPECT_EQ(r.out, "") << "nothing on stdout on failure";
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr must be exactly one line";
    EXPECT_TRUE(!r.err.empty() && r.err.back() == '\n') << "stderr must be one complete line";
    for (const std::string& n : inv.names) EXPECT_TRUE(names_token(r.err, n)) << "stderr does not name '" << n << "'";
    EXPECT_EQ(folder_listing(dir), before) << "the output folder must hold only what the test put there";
}

INSTANTIATE_TEST_SUITE_P(Cli, CliBadInput, ::testing::ValuesIn(bad_rows()),
                         [](const ::testing::TestParamInfo<BadRow>& i) { return i.param.name; });

// A device named on a subcommand that never uses one must not be silently ignored (the flag's help
// says "naming one requires it"): either refused as usage (2) or as a missing device (4).
TEST(CliDevice, NamedDeviceIsNeverIgnored) {
    if (const std::string why = skip_if_devices_at_least(8); !why.empty()) GTEST_SKIP() << why;
    const fs::path dir = temp_dir("device-ignored");
    for (const std::string& args : {"info " + q(samson()) + " --device 7", convert_into(dir, "--device 7")}) {
        const auto r = run_cli(args);
        SCOPED_TRACE("cubekit " + args + "\n  exit " + std::to_string(r.exit_code) + ", stderr: " + r.err);
        EXPECT_TRUE(r.exit_code == 2 || r.exit_code == 4);
        EXPECT_TRUE(names_token(r.err, "--device 7"));
        EXPECT_EQ(folder_listing(dir), "{}");
    }
}

// ---- info ----------------------------------------------------------------------------------------

TEST(CliInfo, HumanOutputOnSamson) {
    const auto r = run_cli("info " + q(samson()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_NE(r.out.find("95 x 95"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("156 bands"), std::string::npos) << r.out;
    const Cube cube = read_cube(samson());
    std::istringstream lines(r.out);
    int rows = 0;
    for (std::string line; std::getline(lines, line);) {
        std::istringstream s(line);
        int band;
        double mn, mx;
        if (!(s >> band >> mn >> mx)) continue;  // the title and column header
        ASSERT_EQ(band, rows) << line;
        double lo = INFINITY, hi = -INFINITY;
        for (int y = 0; y < cube.height(); ++y)
            for (int x = 0; x < cube.width(); ++x) lo = std::min(lo, cube.value(x, y, band)), hi = std::max(hi, cube.value(x, y, band));
        EXPECT_EQ(mn, lo) << line;
        EXPECT_EQ(mx, hi) << line;
        ++rows;
    }
    EXPECT_EQ(rows, cube.bands());
}

TEST(CliInfo, JsonIsOneObjectAndQuietStderr) {
    const auto r = run_cli("info " + q(samson()) + " --json --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
#ifdef CUBEKIT_CLI_TEST_JSON
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(r.out)) << "stdout is not exactly one JSON document:\n" << r.out;
    ASSERT_TRUE(j.is_object());
    const Cube cube = read_cube(samson());
    EXPECT_EQ(j["width"], cube.width());
    EXPECT_EQ(j["height"], cube.height());
    EXPECT_EQ(j["bands"], 156);
    EXPECT_EQ(j["dtype"], "i16");
    ASSERT_EQ(j["band_stats"].size(), std::size_t(cube.bands()));
    for (int b = 0; b < cube.bands(); ++b) {
        double lo = INFINITY, hi = -INFINITY, sum = 0;
        for (int y = 0; y < cube.height(); ++y)
            for (int x = 0; x < cube.width(); ++x) {
                const double v = cube.value(x, y, b);
                lo = std::min(lo, v), hi = std::max(hi, v), sum += v;
            }
        const auto& s = j["band_stats"][std::size_t(b)];
        EXPECT_EQ(s["band"], b);
        EXPECT_EQ(s["min"].get<double>(), lo) << "band " << b;
        EXPECT_EQ(s["max"].get<double>(), hi) << "band " << b;
        EXPECT_NEAR(s["mean"].get<double>(), sum / double(cube.width() * cube.height()), 1e-9) << "band " << b;
        EXPECT_EQ(s["wavelength"].get<double>(), cube.metadata().wavelengths.at(std::size_t(b))) << "band " << b;
    }
#else
    ASSERT_FALSE(r.out.empty());
    EXPECT_EQ(r.out.front(), '{');
    EXPECT_EQ(r.out.substr(r.out.find_last_not_of('\n')), "}");
    EXPECT_NE(r.out.find("\"bands\": 156"), std::string::npos);
#endif
}

// "--flag=" with nothing after '=' is refused naming the flag; it never takes the next argument as its
// value (`--var= --json` used to make "--json" the variable name and print the text table).
TEST(CliArgs, EmptyValueAfterEqualsIsRefusedNamingTheFlag) {
    const fs::path dir = temp_dir("cli-empty-value");
    const std::vector<std::string> invocations = {"info " + q(samson()) + " --var= --json",
                                                  "rcmg " + q(samson()) + " " + q(dir / "g.npy") + " --connectivity="};
    for (const std::string& args : invocations) {
        const auto r = run_cli(args);
        EXPECT_EQ(r.exit_code, 2) << args;
        EXPECT_EQ(r.out, "") << args;
        const std::string flag = args.find("--var=") != std::string::npos ? "--var" : "--connectivity";
        EXPECT_NE(r.err.find(flag + ": an empty value"), std::string::npos) << r.err;
    }
    EXPECT_FALSE(fs::exists(dir / "g.npy"));
    EXPECT_EQ(run_cli("rcmg " + q(samson()) + " " + q(dir / "g.npy") + " --connectivity=4 --backend cpu --quiet").exit_code, 0);
}

// ---- rcmg ----------------------------------------------------------------------------------------

TEST(CliRcmg, NpyAndPngWithJsonSummary) {
    const fs::path dir = temp_dir("rcmg-out");
    const auto r = run_cli(rcmg_into(samson(), dir, "--json --quiet --backend cpu"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(folder_listing(dir), "{out.npy, out.png}");
    const std::string h = npy_header(dir / "out.npy");
    EXPECT_NE(h.find("'shape': (95, 95)"), std::string::npos) << h;
    EXPECT_NE(h.find("'descr': '<f4'"), std::string::npos) << h;

    // The PNG is a display of the gradient: 95x95 gray u8, non-decreasing in the gradient value.
    const Cube g = read_cube(dir / "out.npy"), png = read_cube(dir / "out.png");
    ASSERT_EQ(png.shape().describe().substr(0, 11), "95x95x1 u8 ");
    std::vector<std::pair<double, double>> pairs;
    for (int y = 0; y < 95; ++y)
        for (int x = 0; x < 95; ++x) pairs.emplace_back(g.value(x, y, 0), png.value(x, y, 0));
    std::sort(pairs.begin(), pairs.end());
    for (std::size_t i = 1; i < pairs.size(); ++i)
        ASSERT_LE(pairs[i - 1].second, pairs[i].second) << "gradient " << pairs[i - 1].first << " < " << pairs[i].first;
    EXPECT_EQ(pairs.back().second, 255);

#ifdef CUBEKIT_CLI_TEST_JSON
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(r.out)) << "stdout is not exactly one JSON document:\n" << r.out;
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j["implementation"], std::string(rcmg_implementation(Context({.backend = Backend::Cpu}), {})));
    for (const char* t : {"read", "rcmg", "write"}) EXPECT_GE(j["timings_ms"][t].get<double>(), 0.0) << t;
    ASSERT_EQ(j["outputs"].size(), 2u);
    EXPECT_EQ(j["outputs"][0]["path"], (dir / "out.npy").string());
    EXPECT_EQ(j["outputs"][1]["path"], (dir / "out.png").string());
#else
    ASSERT_FALSE(r.out.empty());
    EXPECT_EQ(r.out.front(), '{');
    for (const char* key : {"\"implementation\"", "\"timings_ms\"", "\"outputs\""}) EXPECT_NE(r.out.find(key), std::string::npos) << key;
#endif
}

TEST(CliRcmg, OutTypeF64) {
    const fs::path dir = temp_dir("rcmg-f64");
    const auto r = run_cli("rcmg " + q(samson()) + " " + q(dir / "g.npy") + " --out-type f64");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string h = npy_header(dir / "g.npy");
    EXPECT_NE(h.find("'descr': '<f8'"), std::string::npos) << h;
    EXPECT_NE(h.find("'shape': (95, 95)"), std::string::npos) << h;
}

// The CLI on the CPU gives exactly the library's gradient, for each mapping of flags to options.
TEST(CliRcmg, CpuEqualsLibraryBitForBit) {
    const Cube scene = read_cube(samson());
    std::vector<int> subset(10);
    std::iota(subset.begin(), subset.end(), 0);
    subset.insert(subset.end(), {20, 150});
    struct Case {
        std::string flags;
        RcmgOptions options;
        std::vector<int> bands;  // empty: all
    };
    const Case cases[] = {
        {"", {}, {}},
        {"--connectivity 4 --reject 0", {.connectivity = 4, .reject = 0}, {}},
        {"--reject 3 --precision f32", {.reject = 3, .precision = Precision::F32}, {}},
        {"--squared --out-type f64 --threads 2", {.out_type = DType::F64, .squared = true}, {}},
        {"--bands 0-9,20,150 --connectivity 4", {.connectivity = 4}, subset},
    };
    const Context cpu({.backend = Backend::Cpu});
    for (const Case& c : cases) {
        SCOPED_TRACE("flags: " + c.flags);
        const fs::path dir = temp_dir("rcmg-lib");
        const auto r = run_cli("rcmg " + q(samson()) + " " + q(dir / "g.npy") + " --backend cpu --quiet " + c.flags);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const Cube expected = c.bands.empty() ? rcmg(cpu, scene, c.options) : rcmg(cpu, scene.select_bands(c.bands), c.options);
        EXPECT_TRUE(cubekit::testing::cubes_identical(expected, read_cube(dir / "g.npy")));
    }
}

// ---- convert -------------------------------------------------------------------------------------

TEST(CliConvert, NpyWindowOfBands) {
    const fs::path dir = temp_dir("convert-npy");
    const auto r = run_cli("convert " + q(samson()) + " " + q(dir / "w.npy") + " --bands 0-2 --crop 10,20,30,40");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(folder_listing(dir), "{w.npy}");
    const std::string h = npy_header(dir / "w.npy");
    EXPECT_NE(h.find("'shape': (40, 30, 3)"), std::string::npos) << h;
    EXPECT_NE(h.find("'descr': '<i2'"), std::string::npos) << h;
    const Cube scene = read_cube(samson()), w = read_cube(dir / "w.npy");
    ASSERT_EQ(w.shape().describe().substr(0, 11), "30x40x3 i16");
    for (int b = 0; b < 3; ++b)
        for (int y = 0; y < 40; ++y)
            for (int x = 0; x < 30; ++x) ASSERT_EQ(w.value(x, y, b), scene.value(10 + x, 20 + y, b)) << x << "," << y << "," << b;
}

TEST(CliConvert, EnviBipReadsBackAsTheCrop) {
    const fs::path dir = temp_dir("convert-envi");
    const std::vector<int> bands = {3, 1, 7};
    const auto r = run_cli("convert " + q(samson()) + " " + q(dir / "w.hdr") + " --layout bip --bands 3,1,7 --crop 10,20,30,40 --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(folder_listing(dir), "{w.hdr, w.img}");
    const Cube scene = read_cube(samson()), w = read_cube(dir / "w.hdr");
    ASSERT_EQ(w.shape().describe(), "30x40x3 i16 bip");
    for (int i = 0; i < 3; ++i)
        for (int y = 0; y < 40; ++y)
            for (int x = 0; x < 30; ++x)
                ASSERT_EQ(w.value(x, y, i), scene.value(10 + x, 20 + y, bands[std::size_t(i)])) << x << "," << y << "," << i;
    ASSERT_EQ(w.metadata().wavelengths.size(), 3u);
    for (int i = 0; i < 3; ++i)
        EXPECT_EQ(w.metadata().wavelengths[std::size_t(i)], scene.metadata().wavelengths.at(std::size_t(bands[std::size_t(i)])));
}

// ENVI 'map info' = {projection, ref x, ref y, easting, northing, x size, y size, ...} (1-based pixels).
// The top-left pixel of a crop must keep the map coordinates it had in the original image.
TEST(CliConvert, CropKeepsGeoreference) {
    const fs::path dir = temp_dir("convert-geo");
    const auto r = run_cli("convert " + q(samson()) + " " + q(dir / "w.hdr") + " --crop 10,20,30,40 --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto map_xy = [](const std::string& info, double px, double py) {
        std::vector<double> f;
        std::istringstream s(info);
        for (std::string item; std::getline(s, item, ',');) f.push_back(std::atof(item.c_str()));
        if (f.size() < 7) return std::pair<double, double>{NAN, NAN};
        return std::pair<double, double>{f[3] + (px - f[1]) * f[5], f[4] - (py - f[2]) * f[6]};
    };
    const std::string original = read_cube(samson()).metadata().map_info, cropped = read_cube(dir / "w.hdr").metadata().map_info;
    ASSERT_FALSE(original.empty());
    const auto [e0, n0] = map_xy(original, 1 + 10, 1 + 20);
    const auto [e1, n1] = map_xy(cropped, 1, 1);
    EXPECT_NEAR(e1, e0, 1e-6) << "map info of the crop: " << cropped;
    EXPECT_NEAR(n1, n0, 1e-6) << "map info of the crop: " << cropped;
}

// ---- --png-compression ---------------------------------------------------------------------------

/// One command that writes PNG files: its arguments for an output folder, and the PNGs it writes there.
struct PngRun {
    std::string name;
    std::function<std::string(const fs::path& dir)> args;
    std::vector<std::string> pngs;  // relative to the output folder
};

std::vector<PngRun> png_runs() {
    const std::string s = q(samson()), photo = q(source_path("data/photos/chelsea.png"));
    return {
        {"convert", [=](const fs::path& d) { return "convert " + s + " " + q(d / "c.png") + " --bands 85,50,10 --out-type u8"; },
         {"c.png"}},
        {"rcmg", [=](const fs::path& d) { return "rcmg " + s + " " + q(d / "g.png") + " " + q(d / "g.npy"); }, {"g.png"}},
        {"quantize", [=](const fs::path& d) { return "quantize " + photo + " " + q(d / "q.png") + " -k 8 --seed 3"; },
         {"q.png", "q.indexed.png", "q.palette.png"}},
        {"cluster", [=](const fs::path& d) { return "cluster " + s + " " + q(d / "cl.npy") + " -k 4"; }, {"cl.png"}},
        {"edges", [=](const fs::path& d) {
             return "edges " + s + " " + q(d / "e.png") + " --bands 0-2 --per-band-out " + q(d / "pb") +
                    " --vote-count-out " + q(d / "vc.png");
         }, {"e.png", "pb/band_000.png", "pb/band_002.png", "vc.png"}},
        {"edges-baseline", [=](const fs::path& d) { return "edges-baseline " + s + " " + q(d / "eb.png") + " --bands 40"; },
         {"eb.png"}},
        {"zernike", [=](const fs::path& d) {
             return "zernike " + s + " --bands 40 --max-order 12 -o " + q(d / "z.json") + " --reconstruct " + q(d / "zr.png");
         }, {"zr.png"}},
        {"zernike-reconstruct", [=](const fs::path& d) {  // from the moments the zernike row wrote just before
             return "zernike-reconstruct " + q(d / "z.json") + " " + q(d / "zrr.png");
         }, {"zrr.png"}},
        {"watershed", [=](const fs::path& d) {  // the relief the rcmg row wrote
             return "watershed " + q(d / "g.npy") + " " + q(d / "w.npy") + " --png " + q(d / "w.png") + " --boundary-out " +
                    q(d / "wb.png");
         }, {"w.png", "wb.png"}},
        {"segment", [=](const fs::path& d) {
             return "segment " + s + " " + q(d / "s.npy") + " --png " + q(d / "s.png") + " --gradient-out " + q(d / "sg.png");
         }, {"s.png", "sg.png"}},
        {"classify", [=](const fs::path& d) {  // the clusters of the cluster row as an external class map
             return "classify " + s + " " + q(d / "k.png") + " --classifier " + q(d / "cl.npy") + " --segment watershed" +
                    " --pixelwise-out " + q(d / "kp.png");
         }, {"k.png", "kp.png"}},
        {"demo", [=](const fs::path& d) { return "demo --out " + q(d / "demo") + " --photo " + photo; },
         {"demo/samson_rcmg.png", "demo/samson_edges.png", "demo/chelsea_k16.png", "demo/chelsea_k16.indexed.png",
          "demo/chelsea_k16.palette.png"}},
    };
}

// Every PNG of every command that writes PNGs follows --png-compression: small gives the same pixels
// in a smaller file than the default (fast), and the default is exactly --png-compression fast.
TEST(CliPngCompression, EveryPngOfEveryCommandFollowsTheFlag) {
    const fs::path fast = temp_dir("png-fast"), small = temp_dir("png-small"), dflt = temp_dir("png-default");
    for (const PngRun& run : png_runs()) {
        SCOPED_TRACE(run.name);
        for (const auto& [dir, flag] : {std::pair{dflt, std::string()}, std::pair{small, std::string(" --png-compression small")}}) {
            const auto r = run_cli(run.args(dir) + " --quiet" + flag);
            ASSERT_EQ(r.exit_code, 0) << "cubekit " << run.args(dir) << flag << ": " << r.err;
        }
        for (const std::string& png : run.pngs) {
            SCOPED_TRACE(png);
            EXPECT_TRUE(cubekit::testing::cubes_identical(read_cube(dflt / png), read_cube(small / png)));
            EXPECT_LT(fs::file_size(small / png), fs::file_size(dflt / png)) << "small must write a smaller file";
        }
    }
    // The default is fast, byte for byte (libpng writes no time stamp).
    const auto r = run_cli("rcmg " + q(samson()) + " " + q(fast / "g.png") + " --quiet --png-compression fast");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(slurp(fast / "g.png"), slurp(dflt / "g.png"));
}

// The flag is an output setting, not a parameter of the algorithm: the JSON "parameters" do not
// change, and libpng's own settings ("default") decode to the same pixels.
TEST(CliPngCompression, ParametersUnchangedAndDefaultLevelDecodesAlike) {
#ifdef CUBEKIT_CLI_TEST_JSON
    const fs::path dir = temp_dir("png-parameters");
    const std::string photo = q(source_path("data/photos/chelsea.png"));
    for (const std::string& cmd : {"rcmg " + q(samson()) + " " + q(dir / "g.png"),
                                   "quantize " + photo + " " + q(dir / "q.png") + " -k 4 --seed 1 --n-init 1"}) {
        SCOPED_TRACE(cmd);
        const fs::path png = cmd.rfind("rcmg", 0) == 0 ? dir / "g.png" : dir / "q.png";
        std::vector<nlohmann::json> parameters;
        std::vector<Cube> images;
        for (const char* level : {"", " --png-compression default", " --png-compression small"}) {
            const auto r = run_cli(cmd + " --json --quiet" + level);
            ASSERT_EQ(r.exit_code, 0) << level << ": " << r.err;
            nlohmann::json j;
            ASSERT_NO_THROW(j = nlohmann::json::parse(r.out)) << r.out;
            EXPECT_FALSE(j["parameters"].contains("png_compression")) << j["parameters"].dump();
            parameters.push_back(j["parameters"]);
            images.push_back(read_cube(png));
        }
        for (std::size_t i = 1; i < images.size(); ++i) {
            EXPECT_EQ(parameters[i], parameters[0]);
            EXPECT_TRUE(cubekit::testing::cubes_identical(images[0], images[i]));
        }
    }
#else
    GTEST_SKIP() << "built without nlohmann/json";
#endif
}

// --help of the commands that write PNGs shows the flag with its choices; the others do not offer it.
TEST(CliPngCompression, HelpOfPngWritersOnly) {
    for (const char* sub : {"convert", "rcmg", "quantize", "cluster", "edges", "edges-baseline", "zernike",
                            "zernike-reconstruct", "watershed", "segment", "classify", "demo"}) {
        const auto r = run_cli(std::string(sub) + " --help");
        EXPECT_NE(r.out.find("--png-compression TEXT:{fast,default,small}=fast"), std::string::npos) << sub << ":\n" << r.out;
    }
    for (const char* sub : {"info", "edges-score", "pca"}) {
        const auto r = run_cli(std::string(sub) + " --help");
        EXPECT_EQ(r.out.find("--png-compression"), std::string::npos) << sub;
    }
}

// ---- demo, help, version -------------------------------------------------------------------------

TEST(CliDemo, WritesPngNpyJson) {
    const fs::path dir = temp_dir("demo") / "out";  // created by the demo
    const auto r = run_cli("demo --quiet --out " + q(dir));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(folder_listing(dir), "{samson_edges.png, samson_rcmg.json, samson_rcmg.npy, samson_rcmg.png}");
    const std::string h = npy_header(dir / "samson_rcmg.npy");
    EXPECT_NE(h.find("'shape': (95, 95)"), std::string::npos) << h;
    EXPECT_EQ(read_cube(dir / "samson_rcmg.png").shape().describe().substr(0, 10), "95x95x1 u8");
#ifdef CUBEKIT_CLI_TEST_JSON
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(slurp(dir / "samson_rcmg.json")));
    EXPECT_EQ(j["command"], "demo");
    EXPECT_EQ(j["outputs"].size(), 2u);
    EXPECT_GT(j["edges"]["edge_pixels"].get<int>(), 0);
#endif
    const Cube edges = read_cube(dir / "samson_edges.png");
    EXPECT_EQ(edges.shape().describe().substr(0, 10), "95x95x1 u8");
}

TEST(CliHelp, EverySubcommandHasAnExampleAndVersionWorks) {
    const auto root = run_cli("--help");
    EXPECT_EQ(root.exit_code, 0);
    EXPECT_NE(root.out.find("Exit codes"), std::string::npos) << root.out;
    for (const char* sub : {"info", "convert", "rcmg", "demo", "edges", "edges-baseline", "edges-score", "pca",
                            "zernike", "zernike-reconstruct", "watershed", "segment", "classify"}) {
        const auto r = run_cli(std::string(sub) + " --help");
        EXPECT_EQ(r.exit_code, 0) << sub << ": " << r.err;
        EXPECT_NE(r.out.find("Example"), std::string::npos) << sub << " --help:\n" << r.out;
        EXPECT_NE(r.out.find("cubekit " + std::string(sub) + " "), std::string::npos) << sub << ": an example runs it";
        // The root listing names it with a one-line description.
        const std::size_t at = root.out.find("\n  " + std::string(sub) + " ");
        ASSERT_NE(at, std::string::npos) << sub << " is not listed by cubekit --help:\n" << root.out;
        const std::string line = root.out.substr(at + 1, root.out.find('\n', at + 1) - at - 1);
        const std::size_t description = line.find_first_not_of(' ', 2 + std::string(sub).size());
        ASSERT_NE(description, std::string::npos) << "no description: " << line;
        EXPECT_TRUE(std::isupper(static_cast<unsigned char>(line[description]))) << "a capital first: " << line;
    }
    const auto v = run_cli("--version");
    EXPECT_EQ(v.exit_code, 0) << v.err;
    EXPECT_EQ(v.out.rfind("cubekit ", 0), 0u) << v.out;
    EXPECT_TRUE(v.out.size() > 8 && std::isdigit(static_cast<unsigned char>(v.out[8]))) << v.out;
}

}  // namespace
