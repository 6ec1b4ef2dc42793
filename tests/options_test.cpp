// Options declared once (include/cubekit/options.hpp): every subcommand's --help defaults and the
// JSON "parameters" of a run equal the Options{} values read through the declarations, so a default
// restated in the CLI fails here; the enum name tables round-trip; a range error names the field;
// library messages name fields (bands, crop, var, device) and the CLI spells them as its flags.
// CPU only, runs in CI.
#include <gtest/gtest.h>
#include <matio.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/dtype.hpp"
#include "cubekit/edge_baselines.hpp"
#include "cubekit/edges.hpp"
#include "cubekit/gradient.hpp"
#include "cubekit/io.hpp"
#include "cubekit/kmeans.hpp"
#include "cubekit/linalg.hpp"
#include "cubekit/options.hpp"
#include "cubekit/zernike.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;
using testing::source_path;

using testing::q;

// ---- the CLI's spelling of a field, written here independently of tools/cubekit -------------------

std::string flag_of(const Field& f) {
    std::string kebab(f.name);
    for (char& c : kebab)
        if (c == '_') c = '-';
    if (!f.negation.empty()) return "--no-" + kebab;
    if (f.name.size() == 1 && !f.short_flag.empty()) return std::string(f.short_flag);
    return "--" + kebab;
}

/// The help line of `flag`: its first token lists the option's names, comma separated.
std::string help_line(const std::string& help, const std::string& flag) {
    std::istringstream lines(help);
    for (std::string line; std::getline(lines, line);) {
        std::istringstream words(line);
        std::string names;
        words >> names;
        std::istringstream parts(names);
        for (std::string name; std::getline(parts, name, ',');)
            if (name == flag) return line;
    }
    return {};
}

/// The default a help line shows ("  --reject INT=1   pairs ..." → "1"; "  --threads INT:INT in [0 - 4096]=0"
/// → "0"); "" when none. The names and the type end where two spaces start the description.
std::string help_default(const std::string& line) {
    const std::size_t start = line.find_first_not_of(' ');
    const std::size_t names_end = line.find(' ', start);
    if (names_end == std::string::npos) return {};
    const std::string opts = line.substr(names_end + 1, line.find("  ", names_end + 1) - names_end - 1);
    const std::size_t eq = opts.rfind('=');
    return eq == std::string::npos ? std::string() : opts.substr(eq + 1);
}

/// Every flag field of `defaults` appears in `sub --help` with the default of `defaults`.
template <class O>
void expect_help_defaults(const std::string& sub, const O& defaults) {
    const auto r = run_cli(sub + " --help");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    visit_flags(defaults, [&](const auto& value, const Field& field) {
        const std::string flag = flag_of(field);
        const std::string line = help_line(r.out, flag);
        ASSERT_FALSE(line.empty()) << sub << " --help has no " << flag << ":\n" << r.out;
        using T = std::remove_cvref_t<decltype(value)>;
        if constexpr (std::same_as<T, bool>) {
            EXPECT_EQ(value, !field.negation.empty()) << sub << " " << flag << ": a switch turns its default over";
            EXPECT_EQ(help_default(line), "") << sub << " " << flag;
        } else {
            EXPECT_EQ(help_default(line), value_text(value, field)) << sub << " " << flag << ": " << line;
        }
    });
}

/// A declared value as the JSON writer should put it.
nlohmann::json json_of(const FieldValue& v) {
    return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}

/// Every flag field of `defaults` is in `parameters` with its value, except those in `resolved`,
/// which the command reports as they ran (compared by the caller) and `absent`, which it leaves out.
template <class O>
void expect_parameters(const std::string& sub, const nlohmann::json& parameters, const O& defaults,
                       const std::vector<std::string>& resolved = {}, const std::vector<std::string>& absent = {}) {
    const auto listed = [](const std::vector<std::string>& v, std::string_view n) {
        return std::find(v.begin(), v.end(), n) != v.end();
    };
    for (const NamedValue& p : field_values(defaults)) {
        const std::string name(p.name);
        if (listed(absent, name)) {
            EXPECT_FALSE(parameters.contains(name)) << sub << ": " << name;
        } else if (!listed(resolved, name)) {
            ASSERT_TRUE(parameters.contains(name)) << sub << " parameters lack " << name << ": " << parameters.dump();
            EXPECT_EQ(parameters[name], json_of(p.value)) << sub << ": " << name;
        }
    }
}

/// Runs `cubekit args --json --quiet --backend cpu` and returns the summary.
nlohmann::json run_json(const std::string& args) {
    const auto r = run_cli(args + " --json --quiet --backend cpu");
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    if (r.exit_code != 0) return nlohmann::json::object();
    return nlohmann::json::parse(r.out);
}

fs::path samson() { return source_path("data/samson/samson_1.img"); }
fs::path chelsea() { return source_path("data/photos/chelsea.png"); }

// ---- --help defaults ---------------------------------------------------------------------------------

TEST(OptionsCli, HelpShowsTheDeclaredDefaults) {
    expect_help_defaults("rcmg", RcmgOptions{});
    expect_help_defaults("quantize", KmeansOptions{});
    expect_help_defaults("cluster", KmeansOptions{.k = kClusterDefaultK});
    expect_help_defaults("edges", EntropyEdgeOptions{});
    expect_help_defaults("edges-baseline", BaselineOptions{});
    expect_help_defaults("pca", PcaOptions{});
    expect_help_defaults("zernike", ZernikeOptions{});
    for (const char* sub : {"rcmg", "quantize", "cluster", "edges", "edges-baseline", "pca", "zernike", "demo", "info"})
        expect_help_defaults(sub, ContextOptions{});
    for (const char* sub : {"rcmg", "quantize", "cluster", "edges", "edges-baseline", "pca", "zernike", "info", "convert"})
        expect_help_defaults(sub, ReadOptions{});
}

// ---- JSON parameters of runs with the defaults ---------------------------------------------------------

TEST(OptionsCli, RcmgAndDemoParametersAreTheDeclaredDefaults) {
    const fs::path dir = testing::temp_dir("options_rcmg");
    expect_parameters("rcmg", run_json("rcmg " + q(samson()) + " " + q(dir / "g.npy"))["parameters"], RcmgOptions{});
    const auto demo = run_cli("demo --quiet --backend cpu --out " + q(dir / "demo"));
    ASSERT_EQ(demo.exit_code, 0) << demo.err;
    std::ifstream in(dir / "demo" / "samson_rcmg.json");
    const nlohmann::json j = nlohmann::json::parse(in);
    expect_parameters("demo", j["parameters"], RcmgOptions{});
    EXPECT_EQ(j["edges"]["fusion"], enum_name(resolved_fusion(EntropyEdgeOptions{}.fusion, 156)));
    EXPECT_EQ(j["edges"]["vote_percent"], EntropyEdgeOptions{}.vote_percent);
}

TEST(OptionsCli, KmeansParametersAreTheDeclaredDefaults) {
    const fs::path dir = testing::temp_dir("options_kmeans");
    const nlohmann::json quantize = run_json("quantize " + q(chelsea()) + " " + q(dir / "q.png"));
    expect_parameters("quantize", quantize["parameters"], KmeansOptions{});
    const nlohmann::json cluster = run_json("cluster " + q(samson()) + " " + q(dir / "c.npy") + " --max-iter 3");
    expect_parameters("cluster", cluster["parameters"], KmeansOptions{.k = kClusterDefaultK, .max_iter = 3});
}

TEST(OptionsCli, EdgesParametersAreTheDeclaredDefaults) {
    const fs::path dir = testing::temp_dir("options_edges");
    const nlohmann::json cube = run_json("edges " + q(samson()) + " " + q(dir / "e.png"));
    expect_parameters("edges", cube["parameters"], EntropyEdgeOptions{}, {"fusion"});
    // The default fusion is resolved by the library from the band count, and reported as it ran.
    EXPECT_EQ(cube["parameters"]["fusion"], enum_name(resolved_fusion(EntropyEdgeOptions{}.fusion, 156)));
    const nlohmann::json band = run_json("edges " + q(samson()) + " " + q(dir / "b.png") + " --bands 7");
    EXPECT_EQ(band["parameters"]["fusion"], enum_name(resolved_fusion(EntropyEdgeOptions{}.fusion, 1)));

    const BaselineOptions b{};
    const nlohmann::json base = run_json("edges-baseline " + q(samson()) + " " + q(dir / "c.npy") + " --bands 3");
    // σ is reported as it ran (MATLAB's default resolved); thinning applies to the mask methods only.
    expect_parameters("edges-baseline", base["parameters"], b, {"sigma"}, {"thinning"});
    EXPECT_EQ(base["parameters"]["sigma"], *baseline_sigma(b));
}

TEST(OptionsCli, PcaAndZernikeParametersAreTheDeclaredDefaults) {
    const fs::path dir = testing::temp_dir("options_pca");
    const nlohmann::json p = run_json("pca " + q(samson()) + " " + q(dir / "p.npy"));
    expect_parameters("pca", p["parameters"], PcaOptions{});
    const nlohmann::json z = run_json("zernike " + q(samson()) + " --bands 0 --max-order 4");
    // The centre and radius belong to a custom disk; the default (inscribed) leaves them out.
    expect_parameters("zernike", z["parameters"], ZernikeOptions{}, {}, {"center", "radius"});
}

// ---- enum tables, ranges, messages -----------------------------------------------------------------

template <class E>
void expect_round_trip() {
    for (const EnumName<E>& n : EnumNames<E>::names) {
        EXPECT_EQ(enum_name(n.value), n.name);
        EXPECT_EQ(parse_enum<E>(n.name, "x"), n.value) << n.name;
    }
    if constexpr (requires { std::size(EnumNames<E>::aliases); }) {
        for (const EnumName<E>& n : EnumNames<E>::aliases) EXPECT_EQ(parse_enum<E>(n.name, "x"), n.value) << n.name;
    }
    EXPECT_THROW(parse_enum<E>("no-such-name", "x"), InvalidInput);
}

TEST(Options, EnumTablesRoundTrip) {
    expect_round_trip<DType>();
    expect_round_trip<Layout>();
    expect_round_trip<Backend>();
    expect_round_trip<FileFormat>();
    expect_round_trip<Precision>();
    expect_round_trip<RcmgPartition>();
    expect_round_trip<KmeansInit>();
    expect_round_trip<EmptyPolicy>();
    expect_round_trip<Quantize>();
    expect_round_trip<EdgeFusion>();
    expect_round_trip<BaselineMethod>();
    expect_round_trip<ZernikeMethod>();
    expect_round_trip<ZernikeRadial>();
    expect_round_trip<ZernikeMapping>();
    expect_round_trip<ZernikeNormalization>();
    expect_round_trip<ZernikePrecision>();
    EXPECT_EQ(parse_enum<Backend>("gpu", "backend"), Backend::Cuda);
    EXPECT_EQ(parse_enum<DType>("float32", "dtype"), DType::F32);
    EXPECT_EQ(parse_enum<Layout>(" BIP ", "layout"), Layout::BIP);
    try {
        parse_enum<Precision>("f16", "precision");
        ADD_FAILURE() << "f16 parsed";
    } catch (const InvalidInput& e) {
        EXPECT_STREQ(e.what(), "precision = 'f16': expected f32 or f64");
    }
}

std::string message_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const InvalidInput& e) {
        return e.what();
    }
    return "no error";
}

TEST(Options, RangeErrorsNameTheField) {
    const CubeShape shape{.width = 8, .height = 8, .bands = 3, .dtype = DType::U8, .layout = Layout::BIP};
    EXPECT_EQ(message_of([&] { check_kmeans_arguments(shape, {.max_iter = -1}); }),
              "kmeans: max_iter = -1; expected >= 0");
    EXPECT_EQ(message_of([&] { check_rcmg_arguments(shape, {.connectivity = 6}); }),
              "rcmg: connectivity = 6; expected 4 or 8");
    EXPECT_EQ(message_of([&] { check_rcmg_arguments(shape, {.out_type = DType::U8}); }),
              "rcmg: out_type = u8; expected f32 or f64");
    EXPECT_EQ(message_of([&] { check_baseline_options({.low_ratio = 2}); }),
              "edges-baseline: low_ratio = 2; expected 0 <= low_ratio <= 1");
    EXPECT_EQ(message_of([&] { check_kmeans_arguments(shape, {.tol = std::nan("")}); }),
              "kmeans: tol = nan; expected a finite number >= 0");
    // The automatic value is accepted although it lies outside the range.
    EXPECT_EQ(message_of([] { check_baseline_options({.threshold = -1}); }), "no error");
}

TEST(Options, DeclarationsMatchTheStructs) {
    // Every declared name is unique and snake_case; field_values lists the flag fields in order.
    const auto check = [](const auto& options) {
        std::vector<std::string> names;
        visit_fields(options, [&](const auto&, const Field& f) {
            EXPECT_EQ(std::count(names.begin(), names.end(), std::string(f.name)), 0) << f.name;
            names.emplace_back(f.name);
            for (char c : f.name) EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') << f.name;
            EXPECT_FALSE(f.doc.empty()) << f.name;
        });
    };
    check(RcmgOptions{});
    check(KmeansOptions{});
    check(EntropyEdgeOptions{});
    check(BaselineOptions{});
    check(PcaOptions{});
    check(ZernikeOptions{});
    check(ContextOptions{});
    check(ReadOptions{});
    const std::vector<NamedValue> rcmg = field_values(RcmgOptions{});
    ASSERT_EQ(rcmg.size(), 6u);
    EXPECT_EQ(rcmg[0].name, "connectivity");
    EXPECT_EQ(std::get<std::int64_t>(rcmg[0].value), 8);
    EXPECT_EQ(std::get<std::string>(rcmg[2].value), "f64");
    // Data fields (mask, explicit centroids) are declared but are no flags or keywords.
    for (const NamedValue& v : field_values(KmeansOptions{})) EXPECT_NE(v.name, "mask");
}

TEST(OptionsCli, LibraryMessagesNameTheFlags) {
    const fs::path dir = testing::temp_dir("options_flags");
    // reject ≤ 1 for 4-connectivity is a rule of the library, which names the fields.
    const auto r = run_cli("rcmg " + q(samson()) + " " + q(dir / "g.npy") + " --connectivity 4 --reject 2 --quiet");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "cubekit: rcmg: --reject = 2; expected 0..1 with --connectivity = 4\n");
    // A declared range is checked as the flag is parsed, and named as typed.
    const auto k = run_cli("quantize " + q(chelsea()) + " " + q(dir / "q.png") + " --max-iter -1");
    EXPECT_EQ(k.exit_code, 2);
    EXPECT_EQ(k.err, "cubekit: --max-iter = -1; expected >= 0\n");
    const auto z = run_cli("zernike " + q(samson()) + " --bands 0 --no-symmetry --precision f16");
    EXPECT_EQ(z.exit_code, 2);
    EXPECT_EQ(z.err, "cubekit: --precision = 'f16'; expected f64 or f32\n");
    EXPECT_TRUE(fs::is_empty(dir));
}

// ---- fields in library messages, flags at the CLI -----------------------------------------------------

/// A .mat file with two 3-D double arrays, a (4x3x2) and b (5x4x3): reading it needs var.
fs::path two_cube_mat(const fs::path& p) {
    mat_t* mat = Mat_CreateVer(p.c_str(), nullptr, MAT_FT_MAT5);
    if (!mat) throw std::runtime_error("matio cannot create " + p.string());
    for (auto [name, dims] : {std::pair<const char*, std::vector<std::size_t>>{"a", {4, 3, 2}}, {"b", {5, 4, 3}}}) {
        std::vector<double> data(dims[0] * dims[1] * dims[2], 1.0);
        matvar_t* v = Mat_VarCreate(name, MAT_C_DOUBLE, MAT_T_DOUBLE, 3, dims.data(), data.data(), 0);
        if (!v || Mat_VarWrite(mat, v, MAT_COMPRESSION_NONE) != 0) throw std::runtime_error("matio cannot write a variable");
        Mat_VarFree(v);
    }
    Mat_Close(mat);
    return p;
}

/// `text` with its first `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
    const std::size_t at = text.find(from);
    return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

TEST(OptionsCli, BandsNamedByTheLibrarySpeltAsTheFlag) {
    const Cube cube = read_cube(samson());
    EXPECT_EQ(message_of([&] { (void)cube.select_bands({156}); }),
              "bands: band 156 is out of range (the cube has 156 bands, 0..155)");
    const std::string library = message_of([] { (void)parse_band_list("999", 156); });
    EXPECT_EQ(library, "bands = '999': '999' is out of range (the cube has 156 bands, 0..155)");
    const fs::path dir = testing::temp_dir("options_bands");
    const auto r = run_cli("convert " + q(samson()) + " " + q(dir / "o.npy") + " --bands 999");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "cubekit: --" + library + "\n");
}

TEST(OptionsCli, CropNamedByTheLibrarySpeltAsTheFlag) {
    const std::string library = message_of([] { (void)read_cube(samson()).crop(90, 90, 10, 10); });
    EXPECT_EQ(library, "crop: window 10x10+90+90 does not lie inside the 95x95 image");
    const fs::path dir = testing::temp_dir("options_crop");
    const auto r = run_cli("convert " + q(samson()) + " " + q(dir / "o.npy") + " --crop 90,90,10,10");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "cubekit: --" + library + "\n");
}

TEST(OptionsCli, VarNamedByTheLibrarySpeltAsTheFlag) {
    const fs::path dir = testing::temp_dir("options_var");
    const fs::path mat = two_cube_mat(dir / "two.mat");
    const std::string library = message_of([&] { (void)read_cube(mat); });
    EXPECT_EQ(library, "read_mat: " + mat.string() + ": 2 3-D arrays, choose one with var: a (4x3x2 double), b (5x4x3 double)");
    const auto r = run_cli("convert " + q(mat) + " " + q(dir / "o.npy"));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "cubekit: " + replaced(library, "with var:", "with --var:") + "\n");
    EXPECT_EQ(run_cli("convert " + q(mat) + " " + q(dir / "o.npy") + " --var b --quiet").exit_code, 0);
}

std::string device_error_of(const ContextOptions& options) {
    try {
        Context ctx(options);
    } catch (const DeviceError& e) {
        return e.what();
    }
    return "no error";
}

TEST(OptionsCli, DeviceNamedByTheLibrarySpeltAsTheFlag) {
    const int devices = Context::cuda_device_count();
    if (devices >= 8) GTEST_SKIP() << "this machine has " << devices << " CUDA devices";
    const std::string library = device_error_of({.device = 7});
    EXPECT_TRUE(library.starts_with("context: device 7 is not available (")) << library;
    const fs::path dir = testing::temp_dir("options_device");
    const auto r = run_cli("rcmg " + q(samson()) + " " + q(dir / "g.npy") + " --device 7");
    EXPECT_EQ(r.exit_code, 4);
    EXPECT_EQ(r.err, "cubekit: " + replaced(library, "device 7", "--device 7") + "\n");
    if (devices > 0) return;
    const std::string cuda = device_error_of({.backend = Backend::Cuda});
    EXPECT_TRUE(cuda.starts_with("context: backend cuda: no usable CUDA device (")) << cuda;
    const auto c = run_cli("rcmg " + q(samson()) + " " + q(dir / "g.npy") + " --backend cuda");
    EXPECT_EQ(c.exit_code, 4);
    EXPECT_EQ(c.err, "cubekit: " + replaced(cuda, "backend cuda", "--backend cuda") + "\n");
    EXPECT_TRUE(fs::is_empty(dir));
}

TEST(OptionsCli, ConvertTakesTheValuesItAlwaysTook) {
    const fs::path dir = testing::temp_dir("options_convert");
    // NumPy's element type names and any case of the layout, as before the flags were declared.
    const auto ok = run_cli("convert " + q(samson()) + " " + q(dir / "o.hdr") + " --out-type float32 --layout BIP --quiet");
    EXPECT_EQ(ok.exit_code, 0) << ok.err;
    const Cube out = read_cube(dir / "o.hdr");
    EXPECT_EQ(out.dtype(), DType::F32);
    EXPECT_EQ(out.layout(), Layout::BIP);
    const auto zig = run_cli("convert " + q(samson()) + " " + q(dir / "z.npy") + " --layout zig");
    EXPECT_EQ(zig.exit_code, 2);
    EXPECT_EQ(zig.err, "cubekit: --layout = 'zig'; expected bsq, bil or bip\n");
    const auto u9 = run_cli("convert " + q(samson()) + " " + q(dir / "z.npy") + " --out-type u9");
    EXPECT_EQ(u9.exit_code, 2);
    EXPECT_EQ(u9.err, "cubekit: --out-type = 'u9'; expected u8, u16, i16, u32, i32, f32 or f64\n");
}

}  // namespace
}  // namespace cubekit
