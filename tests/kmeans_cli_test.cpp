// k-means front end: `cubekit quantize` and `cubekit cluster` end to end against the library (same
// options → same image, labels and numbers), their file outputs (indexed PNG, palette JSON and
// swatch, class map, centroid tables), the palette/centroid round trips, the demo's photo, and the
// help text. The colour helpers: kmeans_color_test.cpp; bad inputs: kmeans_cli_bad_input_test.cpp.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cubekit/io.hpp"
#include "cubekit/kmeans.hpp"
#include "cubekit/kmeans_color.hpp"
#include "kmeans_cli_test_helpers.hpp"
#include "testing.hpp"

namespace {

namespace fs = std::filesystem;
using namespace cubekit;
using namespace cubekit::kmeans_cli_test;
using cubekit::testing::cpu_context;
using cubekit::testing::cubes_identical;
using cubekit::testing::run_cli;
using cubekit::testing::source_path;
using cubekit::testing::temp_dir;

// ---- helpers --------------------------------------------------------------------------------------

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(slurp(p)); }

const fs::path& chelsea() {
    static const fs::path p = source_path("data/photos/chelsea.png");
    return p;
}

/// The palette rows of a result that have pixels (what the palette file lists).
std::vector<std::vector<double>> listed_rows(const KmeansResult& r) {
    std::vector<std::vector<double>> rows;
    for (int j = 0; j < r.k; ++j)
        if (r.counts[std::size_t(j)] > 0)
            rows.emplace_back(r.palette.begin() + j * r.bands, r.palette.begin() + (j + 1) * r.bands);
    return rows;
}

/// Checks the --json numbers against the library's result.
void expect_numbers(const nlohmann::json& j, const KmeansResult& r) {
    EXPECT_EQ(j["k"].get<int>(), r.k);
    EXPECT_EQ(j["k_effective"].get<int>(), r.k_effective);
    EXPECT_EQ(j["inertia"].get<double>(), r.inertia);
    EXPECT_EQ(j["iterations"].get<int>(), r.iterations);
    EXPECT_EQ(j["converged"].get<bool>(), r.converged);
    EXPECT_EQ(j["valid_pixels"].get<std::int64_t>(), r.valid_pixels);
    ASSERT_EQ(j["restarts"].size(), r.restarts.size());
    for (std::size_t i = 0; i < r.restarts.size(); ++i) {
        EXPECT_EQ(j["restarts"][i]["seed"].get<std::uint64_t>(), r.restarts[i].seed);
        EXPECT_EQ(j["restarts"][i]["inertia"].get<double>(), r.restarts[i].inertia);
        EXPECT_EQ(j["restarts"][i]["iterations"].get<int>(), r.restarts[i].iterations);
        EXPECT_EQ(j["restarts"][i]["converged"].get<bool>(), r.restarts[i].converged);
    }
    EXPECT_EQ(j["implementation"], "cpu");
    EXPECT_GE(j["elapsed_ms"].get<double>(), 0.0);
}

/// Checks a palette file against the library's result: listed entries, counts, fractions, numbers.
void expect_palette_file(const fs::path& p, const KmeansResult& r) {
    const nlohmann::json pj = read_json(p);
    const auto rows = listed_rows(r);
    ASSERT_EQ(pj["palette"].size(), rows.size());
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const nlohmann::json& e = pj["palette"][i];
        const std::vector<double> got =
            rows[i].size() == 1 ? std::vector<double>{e["value"].get<double>()} : e["rgb"].get<std::vector<double>>();
        EXPECT_EQ(got, rows[i]) << "entry " << i;
        EXPECT_EQ(e["count"].get<std::uint64_t>(), r.counts[i]) << "entry " << i;
        EXPECT_DOUBLE_EQ(e["fraction"].get<double>(), double(r.counts[i]) / double(r.valid_pixels));
        total += e["count"].get<std::uint64_t>();
    }
    EXPECT_EQ(total, std::uint64_t(r.valid_pixels));
    EXPECT_EQ(pj["inertia"].get<double>(), r.inertia);
    EXPECT_EQ(pj["iterations"].get<int>(), r.iterations);
    EXPECT_EQ(pj["converged"].get<bool>(), r.converged);
}

// ---- quantize ------------------------------------------------------------------------------------------

TEST(QuantizeCli, SyntheticRgbEqualsLibraryWithAllOutputs) {
    const fs::path dir = temp_dir("quantize-rgb");
    const fs::path in = rgb_png(dir, 37, 23, 11);
    const auto r = run_cli("quantize " + q(in) + " " + q(dir / "out.png") +
                           " -k 5 --seed 3 --n-init 2 --backend cpu --json --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(listing(dir), "{in.png, out.indexed.png, out.palette.json, out.palette.png, out.png}");
    const Cube image = read_cube(in);
    const KmeansResult lib = kmeans(cpu_context(), image, {.k = 5, .seed = 3, .n_init = 2});
    const Cube out = read_cube(dir / "out.png");
    EXPECT_TRUE(cubes_identical(lib.quantized, out));
    EXPECT_TRUE(cubes_identical(out, read_cube(dir / "out.indexed.png"))) << "the indexed PNG expands to OUT";
    expect_palette_file(dir / "out.palette.json", lib);

    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(r.out)) << "stdout is not exactly one JSON object:\n" << r.out;
    expect_numbers(j, lib);
    EXPECT_EQ(j["restarts"][1]["seed"], 4);
    EXPECT_EQ(j["command"], "quantize");
    std::set<std::string> roles;
    for (const auto& o : j["outputs"]) roles.insert(o["role"].get<std::string>() + "=" + o["path"].get<std::string>());
    EXPECT_EQ(roles,
              (std::set<std::string>{
                  "quantized=" + (dir / "out.png").string(), "indexed=" + (dir / "out.indexed.png").string(),
                  "palette=" + (dir / "out.palette.json").string(), "swatch=" + (dir / "out.palette.png").string()}));

    // Swatch: one 32×32 square per listed entry, in palette order.
    const Cube swatch = read_cube(dir / "out.palette.png");
    const auto rows = listed_rows(lib);
    ASSERT_EQ(swatch.width(), 32 * int(rows.size()));
    ASSERT_EQ(swatch.height(), 32);
    for (std::size_t i = 0; i < rows.size(); ++i)
        for (int c = 0; c < 3; ++c) {
            EXPECT_EQ(swatch.value(int(i) * 32 + 3, 5, c), rows[i][std::size_t(c)]);
            EXPECT_EQ(swatch.value(int(i) * 32 + 31, 31, c), rows[i][std::size_t(c)]);
        }
}

TEST(QuantizeCli, PhotoEqualsLibraryAndPaletteRoundTrips) {
    const fs::path dir = temp_dir("quantize-photo");
    auto r = run_cli("quantize " + q(chelsea()) + " " + q(dir / "cat.png") + " --backend cpu --quiet --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const KmeansResult lib = kmeans(cpu_context(), read_cube(chelsea()), {.k = 16});
    const Cube cat = read_cube(dir / "cat.png");
    EXPECT_TRUE(cubes_identical(lib.quantized, cat));
    EXPECT_TRUE(cubes_identical(cat, read_cube(dir / "cat.indexed.png")));
    expect_palette_file(dir / "cat.palette.json", lib);
    expect_numbers(nlohmann::json::parse(r.out), lib);
    const Cube swatch = read_cube(dir / "cat.palette.png");
    EXPECT_EQ(swatch.shape().describe(), "512x32x3 u8 bip");

    // The palette file applied to the same photo paints the same image; --palette-out F.png.
    r = run_cli("quantize " + q(chelsea()) + " " + q(dir / "again.png") + " --palette-in " +
                q(dir / "cat.palette.json") + " --palette-out " + q(dir / "pal.png") + " --quiet --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(cubes_identical(cat, read_cube(dir / "again.png")));
    EXPECT_EQ(nlohmann::json::parse(r.out)["mode"], "apply");
    EXPECT_EQ(read_json(dir / "pal.json")["palette"], read_json(dir / "cat.palette.json")["palette"]);
    EXPECT_TRUE(cubes_identical(swatch, read_cube(dir / "pal.png")));
    EXPECT_FALSE(fs::exists(dir / "again.palette.json"));

    // --init explicit starts k-means from the file's palette.
    r = run_cli("quantize " + q(chelsea()) + " " + q(dir / "refit.png") + " --init explicit --palette-in " +
                q(dir / "cat.palette.json") + " --palette-out " + q(dir / "refit_palette.json") + " --quiet --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The file's unrounded centroids are the starting point.
    std::vector<double> start;
    const nlohmann::json cat_palette = read_json(dir / "cat.palette.json");
    for (const auto& e : cat_palette["palette"])
        for (const auto& v : e["centroid"]) start.push_back(v.get<double>());
    const KmeansResult refit =
        kmeans(cpu_context(), read_cube(chelsea()),
               {.k = int(start.size() / 3), .init = KmeansInit::Explicit, .init_centroids = start});
    EXPECT_TRUE(cubes_identical(refit.quantized, read_cube(dir / "refit.png")));
    expect_palette_file(dir / "refit_palette.json", refit);
    EXPECT_TRUE(fs::exists(dir / "refit_palette.png"));
}

TEST(QuantizeCli, GreyU16AndFloatInputs) {
    const fs::path dir = temp_dir("quantize-types");
    // Grey 8-bit: grey PNG out, palette entries with "value", indexed PNG reads back as RGB (v, v, v).
    Cube grey = cubekit::testing::random_levels_cube(31, 17, 1, DType::U8, 5, 200, Layout::BIP);
    write_cube(grey, dir / "g.png");
    auto r = run_cli("quantize " + q(dir / "g.png") + " " + q(dir / "gq.png") + " -k 4 --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const KmeansResult lg = kmeans(cpu_context(), grey, {.k = 4});
    const Cube gq = read_cube(dir / "gq.png");
    EXPECT_TRUE(cubes_identical(lg.quantized, gq));
    expect_palette_file(dir / "gq.palette.json", lg);
    const Cube gi = read_cube(dir / "gq.indexed.png");
    ASSERT_EQ(gi.bands(), 3);
    for (int c = 0; c < 3; ++c) EXPECT_TRUE(cubes_identical(gq, gi.select_bands({c})));
    EXPECT_EQ(read_cube(dir / "gq.palette.png").bands(), 1);

    // u16 RGB: 16-bit PNG out and swatch; no indexed PNG.
    Cube deep = cubekit::testing::random_cube(19, 11, 3, DType::U16, 9, 0, 65535, Layout::BIP);
    write_cube(deep, dir / "d.png");
    r = run_cli("quantize " + q(dir / "d.png") + " " + q(dir / "dq.png") + " -k 3 --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(cubes_identical(kmeans(cpu_context(), deep, {.k = 3}).quantized, read_cube(dir / "dq.png")));
    EXPECT_FALSE(fs::exists(dir / "dq.indexed.png"));
    EXPECT_EQ(read_cube(dir / "dq.palette.png").dtype(), DType::U16);

    // f32 cube: OUT .npy; palette entries as "values"; no swatch, no indexed PNG.
    Cube f = cubekit::testing::random_cube(13, 9, 2, DType::F32, 4, -1, 1, Layout::BIP);
    write_cube(f, dir / "f.npy");
    r = run_cli("quantize " + q(dir / "f.npy") + " " + q(dir / "fq.npy") + " -k 3 --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const KmeansResult lf = kmeans(cpu_context(), f, {.k = 3});
    EXPECT_TRUE(cubes_identical(lf.quantized, read_cube(dir / "fq.npy")));
    const nlohmann::json pf = read_json(dir / "fq.palette.json");
    ASSERT_EQ(pf["palette"].size(), listed_rows(lf).size());
    EXPECT_EQ(pf["palette"][0]["values"].get<std::vector<double>>(), listed_rows(lf)[0]);
    EXPECT_FALSE(fs::exists(dir / "fq.palette.png"));
    EXPECT_FALSE(fs::exists(dir / "fq.indexed.png"));
    // ... and the palette applied again paints the same cube.
    r = run_cli("quantize " + q(dir / "f.npy") + " " + q(dir / "fq2.npy") + " --palette-in " +
                q(dir / "fq.palette.json") + " --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(cubes_identical(read_cube(dir / "fq.npy"), read_cube(dir / "fq2.npy")));
}

TEST(QuantizeCli, MaskedPixelsCopiedAndTransparentInIndexedPng) {
    const fs::path dir = temp_dir("quantize-mask");
    const fs::path in = rgb_png(dir, 24, 16, 21);
    Cube mask(24, 16, 1, DType::U8, Layout::BIP);
    std::vector<std::uint8_t> m(24 * 16);
    for (int y = 0; y < 16; ++y)
        for (int x = 0; x < 24; ++x) {
            const bool on = !(x < 6 && y < 4);
            mask.at<std::uint8_t>(x, y, 0) = on ? 255 : 0;
            m[std::size_t(y) * 24 + std::size_t(x)] = on;
        }
    write_cube(mask, dir / "mask.png");
    const auto r = run_cli("quantize " + q(in) + " " + q(dir / "out.png") + " -k 6 --mask " + q(dir / "mask.png") +
                           " --quiet --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const Cube image = read_cube(in);
    KmeansOptions o{.k = 6};
    o.mask = m;
    const KmeansResult lib = kmeans(cpu_context(), image, o);
    const Cube out = read_cube(dir / "out.png");
    EXPECT_TRUE(cubes_identical(lib.quantized, out));
    EXPECT_EQ(lib.valid_pixels, 24 * 16 - 24);
    expect_palette_file(dir / "out.palette.json", lib);
    const Cube indexed = read_cube(dir / "out.indexed.png");
    ASSERT_EQ(indexed.bands(), 4) << "excluded pixels use a transparent palette entry";
    for (int y = 0; y < 16; ++y)
        for (int x = 0; x < 24; ++x) {
            const bool on = m[std::size_t(y) * 24 + std::size_t(x)];
            ASSERT_EQ(indexed.value(x, y, 3), on ? 255 : 0) << x << "," << y;
            for (int c = 0; c < 3 && on; ++c) ASSERT_EQ(indexed.value(x, y, c), out.value(x, y, c)) << x << "," << y;
            for (int c = 0; c < 3 && !on; ++c)
                ASSERT_EQ(out.value(x, y, c), image.value(x, y, c)) << "copied unchanged";
        }
}

TEST(QuantizeCli, FewerColoursThanKWarnsAndListsOnlyUsedEntries) {
    const fs::path dir = temp_dir("quantize-few");
    const fs::path in = rgb_png(dir, 10, 10, 2, 2, 1);  // grey, 2 levels
    const auto r = run_cli("quantize " + q(in) + " " + q(dir / "out.png") + " -k 5 --quiet --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("warning"), std::string::npos) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["k_effective"], 2);
    EXPECT_FALSE(j["warnings"].empty());
    EXPECT_EQ(read_json(dir / "out.palette.json")["palette"].size(), 2u);
    EXPECT_EQ(read_cube(dir / "out.palette.png").width(), 64);
}

TEST(QuantizeCli, LabAndDitherPaintWithThePalette) {
    const fs::path dir = temp_dir("quantize-lab");
    // A smooth colour ramp, where dithering and Lab make a visible difference.
    Cube ramp(48, 32, 3, DType::U8, Layout::BIP);
    for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 48; ++x) {
            ramp.at<std::uint8_t>(x, y, 0) = std::uint8_t(x * 5);
            ramp.at<std::uint8_t>(x, y, 1) = std::uint8_t(y * 8);
            ramp.at<std::uint8_t>(x, y, 2) = std::uint8_t(128);
        }
    write_cube(ramp, dir / "ramp.png");
    auto r =
        run_cli("quantize " + q(dir / "ramp.png") + " " + q(dir / "lab.png") + " -k 6 --colorspace lab --quiet --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The palette: the library's Lab centroids converted to sRGB; every pixel holds the palette
    // colour nearest in Lab.
    const Cube lab = rgb_u8_to_lab(ramp);
    const KmeansResult lib = kmeans(cpu_context(), lab, {.k = 6});
    const std::vector<std::uint8_t> rgb = lab_to_rgb_u8(lib.centroids);
    const nlohmann::json pj = read_json(dir / "lab.palette.json");
    std::vector<std::array<double, 3>> palette;
    for (const auto& e : pj["palette"]) palette.push_back(e["rgb"].get<std::array<double, 3>>());
    std::set<std::array<double, 3>> converted;
    for (int j = 0; j < lib.k; ++j)
        if (lib.counts[std::size_t(j)] > 0)
            converted.insert({double(rgb[std::size_t(j) * 3]), double(rgb[std::size_t(j) * 3 + 1]),
                              double(rgb[std::size_t(j) * 3 + 2])});
    for (const auto& entry : palette)
        EXPECT_TRUE(converted.count(entry)) << entry[0] << "," << entry[1] << "," << entry[2];
    const Cube out = read_cube(dir / "lab.png");
    for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 48; ++x) {
            const auto v = srgb_u8_to_lab(ramp.at<std::uint8_t>(x, y, 0), ramp.at<std::uint8_t>(x, y, 1),
                                          ramp.at<std::uint8_t>(x, y, 2));
            double best = INFINITY;
            std::size_t arg = 0;
            for (std::size_t i = 0; i < palette.size(); ++i) {
                const auto p = srgb_u8_to_lab(std::uint8_t(palette[i][0]), std::uint8_t(palette[i][1]),
                                              std::uint8_t(palette[i][2]));
                const double d =
                    (v[0] - p[0]) * (v[0] - p[0]) + (v[1] - p[1]) * (v[1] - p[1]) + (v[2] - p[2]) * (v[2] - p[2]);
                if (d < best) best = d, arg = i;
            }
            for (int c = 0; c < 3; ++c) ASSERT_EQ(out.value(x, y, c), palette[arg][std::size_t(c)]) << x << "," << y;
        }
    EXPECT_TRUE(cubes_identical(out, read_cube(dir / "lab.indexed.png")));
    r = run_cli("quantize " + q(dir / "ramp.png") + " " + q(dir / "lab2.png") + " --colorspace lab --palette-in " +
                q(dir / "lab.palette.json") + " --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(cubes_identical(out, read_cube(dir / "lab2.png"))) << "the Lab palette round trip";

    // Dithering in RGB: the library's palette, labels from dither_floyd_steinberg.
    r = run_cli("quantize " + q(dir / "ramp.png") + " " + q(dir / "d.png") + " -k 4 --dither floyd-steinberg --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const KmeansResult l4 = kmeans(cpu_context(), ramp, {.k = 4});
    std::vector<double> used;
    for (const auto& row : listed_rows(l4)) used.insert(used.end(), row.begin(), row.end());
    const auto labels = dither_floyd_steinberg(ramp, used);
    Cube expected(48, 32, 3, DType::U8, Layout::BIP);
    for (std::size_t p = 0; p < labels.size(); ++p)
        for (std::size_t c = 0; c < 3; ++c)
            expected.data<std::uint8_t>()[p * 3 + c] = std::uint8_t(used[std::size_t(labels[p]) * 3 + c]);
    const Cube dithered = read_cube(dir / "d.png");
    EXPECT_TRUE(cubes_identical(expected, dithered));
    EXPECT_FALSE(cubes_identical(l4.quantized, dithered)) << "dithering changes the picture";
    EXPECT_TRUE(cubes_identical(dithered, read_cube(dir / "d.indexed.png")));
}

TEST(QuantizeCli, RgbaAlphaIsCopiedNotClustered) {
    const fs::path dir = temp_dir("quantize-rgba");
    Cube rgba = cubekit::testing::random_levels_cube(12, 8, 4, DType::U8, 31, 256, Layout::BIP);
    write_cube(rgba, dir / "a.png");
    const auto r = run_cli("quantize " + q(dir / "a.png") + " " + q(dir / "o.png") + " -k 3 --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const Cube out = read_cube(dir / "o.png");
    ASSERT_EQ(out.bands(), 4);
    EXPECT_TRUE(cubes_identical(kmeans(cpu_context(), rgba.select_bands({0, 1, 2}), {.k = 3}).quantized,
                                out.select_bands({0, 1, 2})));
    EXPECT_TRUE(cubes_identical(rgba.select_bands({3}), out.select_bands({3})));
    EXPECT_FALSE(fs::exists(dir / "o.indexed.png"));
}

// ---- cluster -------------------------------------------------------------------------------------------

TEST(ClusterCli, SamsonEqualsLibraryWithCentroidTables) {
    const fs::path dir = temp_dir("cluster-samson");
    const fs::path samson = source_path("data/samson/samson_1.img");
    const auto r =
        run_cli("cluster " + q(samson) + " " + q(dir / "classes.npy") + " -k 6 --seed 2 --backend cpu --quiet --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(listing(dir), "{classes.centroids.csv, classes.centroids.json, classes.npy, classes.png}");
    const Cube scene = read_cube(samson);
    const KmeansResult lib = kmeans(cpu_context(), scene, {.k = 6, .seed = 2});
    const Cube labels = read_cube(dir / "classes.npy");
    ASSERT_EQ(labels.shape().describe().substr(0, 10), "95x95x1 u8");
    for (int y = 0; y < 95; ++y)
        for (int x = 0; x < 95; ++x)
            ASSERT_EQ(labels.value(x, y, 0), lib.labels[std::size_t(y) * 95 + std::size_t(x)]) << x << "," << y;
    expect_numbers(nlohmann::json::parse(r.out), lib);

    // CSV: header with the wavelengths; one row per cluster; values read back as the f32 centroids.
    std::istringstream csv(slurp(dir / "classes.centroids.csv"));
    std::string line;
    std::getline(csv, line);
    std::vector<std::string> head;
    std::stringstream header(line);
    for (std::string cell; std::getline(header, cell, ',');) head.push_back(cell);
    ASSERT_EQ(head.size(), 2u + 156u);
    EXPECT_EQ(head[0], "cluster");
    EXPECT_EQ(head[1], "count");
    EXPECT_EQ(std::stod(head[2]), scene.metadata().wavelengths.at(0));
    for (int j = 0; j < 6; ++j) {
        ASSERT_TRUE(std::getline(csv, line));
        std::stringstream row(line);
        std::string cell;
        std::getline(row, cell, ',');
        EXPECT_EQ(std::stoi(cell), j);
        std::getline(row, cell, ',');
        EXPECT_EQ(std::stoull(cell), lib.counts[std::size_t(j)]);
        for (int b = 0; b < 156; ++b) {
            std::getline(row, cell, ',');
            ASSERT_EQ(std::stof(cell), float(lib.centroids[std::size_t(j) * 156 + std::size_t(b)]))
                << "cluster " << j << " band " << b;
        }
    }
    const nlohmann::json cj = read_json(dir / "classes.centroids.json");
    EXPECT_EQ(cj["k"], 6);
    EXPECT_EQ(cj["bands"], 156);
    EXPECT_EQ(cj["inertia"].get<double>(), lib.inertia);
    EXPECT_EQ(cj["wavelengths"].size(), 156u);
    for (int j = 0; j < 6; ++j) {
        const auto& c = cj["centroids"][std::size_t(j)];
        EXPECT_EQ(c["cluster"], j);
        EXPECT_EQ(c["count"].get<std::uint64_t>(), lib.counts[std::size_t(j)]);
        EXPECT_EQ(c["spectrum"].get<std::vector<double>>(),
                  std::vector<double>(lib.centroids.begin() + j * 156, lib.centroids.begin() + (j + 1) * 156));
    }
    // Class map: cluster 0 in tab10 blue, cluster 1 orange.
    const Cube map = read_cube(dir / "classes.png");
    ASSERT_EQ(map.shape().describe(), "95x95x3 u8 bip");
    for (std::size_t p = 0; p < lib.labels.size(); ++p) {
        const int x = int(p % 95), y = int(p / 95);
        const std::array<double, 3> rgb = {map.value(x, y, 0), map.value(x, y, 1), map.value(x, y, 2)};
        const std::array<double, 3> listed =
            cj["centroids"][std::size_t(lib.labels[p])]["colour"].get<std::array<double, 3>>();
        ASSERT_EQ(listed, rgb) << "pixel " << p;
        if (lib.labels[p] == 0) {
            ASSERT_EQ(rgb, (std::array<double, 3>{31, 119, 180}));
        } else if (lib.labels[p] == 1) {
            ASSERT_EQ(rgb, (std::array<double, 3>{255, 127, 14}));
        }
    }
}

TEST(ClusterCli, MaskGivesU16LabelsInEnviAndCentroidsRoundTrip) {
    const fs::path dir = temp_dir("cluster-mask");
    Cube cube = cubekit::testing::random_cube(20, 10, 5, DType::F32, 17, 0, 100, Layout::BIP);
    cube.data<float>()[7 * 5 + 2] = NAN;  // pixel 7 excluded by NaN
    write_cube(cube, dir / "c.npy");
    Cube mask(20, 10, 1, DType::U8);
    std::vector<std::uint8_t> m(200, 1);
    for (int x = 0; x < 20; ++x) m[std::size_t(9 * 20 + x)] = 0;  // last row excluded
    for (std::size_t i = 0; i < 200; ++i) mask.data<std::uint8_t>()[i] = m[i];
    write_cube(mask, dir / "m.npy");
    auto r = run_cli("cluster " + q(dir / "c.npy") + " " + q(dir / "out" / "l.hdr") + " --mask " + q(dir / "m.npy") +
                     " -k 4 --init random --seed 5 --quiet --json");
    ASSERT_EQ(r.exit_code, 3) << "the folder out/ does not exist: " << r.err;
    fs::create_directory(dir / "out");
    r = run_cli("cluster " + q(dir / "c.npy") + " " + q(dir / "out" / "l.hdr") + " --mask " + q(dir / "m.npy") +
                " -k 4 --init random --seed 5 --quiet --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(listing(dir / "out"), "{l.centroids.csv, l.centroids.json, l.hdr, l.img, l.png}");
    KmeansOptions o{.k = 4, .init = KmeansInit::Random, .seed = 5};
    o.mask = m;
    const KmeansResult lib = kmeans(cpu_context(), cube, o);
    EXPECT_EQ(lib.valid_pixels, 200 - 21);
    const Cube labels = read_cube(dir / "out" / "l.hdr");
    ASSERT_EQ(labels.dtype(), DType::U16);
    const Cube map = read_cube(dir / "out" / "l.png");
    for (std::size_t p = 0; p < 200; ++p) {
        const int x = int(p % 20), y = int(p / 20);
        ASSERT_EQ(labels.value(x, y, 0), lib.labels[p] < 0 ? 65535.0 : double(lib.labels[p])) << p;
        if (lib.labels[p] < 0) {
            ASSERT_EQ(map.value(x, y, 0) + map.value(x, y, 1) + map.value(x, y, 2), 0) << "black";
        }
    }
    EXPECT_EQ(nlohmann::json::parse(r.out)["label_dtype"], "u16");
    EXPECT_EQ(slurp(dir / "out" / "l.centroids.csv").substr(0, 29), "cluster,count,b0,b1,b2,b3,b4\n");

    // The centroids file classifies again without fitting: the same labels.
    r = run_cli("cluster " + q(dir / "c.npy") + " " + q(dir / "again.npy") + " --mask " + q(dir / "m.npy") +
                " --centroids-in " + q(dir / "out" / "l.centroids.json") + " --quiet --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["mode"], "apply");
    EXPECT_TRUE(cubes_identical(labels.to_layout(Layout::BSQ), read_cube(dir / "again.npy").to_layout(Layout::BSQ)));
    // --bands keeps the original band indices in the centroids file.
    r = run_cli("cluster " + q(dir / "c.npy") + " " + q(dir / "b.npy") + " --bands 1,3 -k 2 --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(read_json(dir / "b.centroids.json")["band_indices"], nlohmann::json({1, 3}));
}

TEST(ClusterCli, FewerDistinctSpectraThanKAreReportedAndSkippedOnReuse) {
    const fs::path dir = temp_dir("cluster-few");
    write_cube(cubekit::testing::random_levels_cube(9, 7, 4, DType::U16, 8, 2, Layout::BSQ), dir / "c.hdr");
    auto r = run_cli("cluster " + q(dir / "c.hdr") + " " + q(dir / "l.npy") + " -k 20 --quiet --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("warning"), std::string::npos) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    const int k_eff = j["k_effective"].get<int>();
    EXPECT_LT(k_eff, 20);
    const nlohmann::json cj = read_json(dir / "l.centroids.json");
    EXPECT_EQ(cj["centroids"][19]["count"], 0);
    EXPECT_TRUE(cj["centroids"][19]["spectrum"][0].is_null()) << "a cluster that never had a centroid";
    // Reused, the centroids without a spectrum are skipped: the same labels.
    r = run_cli("cluster " + q(dir / "c.hdr") + " " + q(dir / "again.npy") + " --centroids-in " +
                q(dir / "l.centroids.json") + " --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(cubes_identical(read_cube(dir / "l.npy"), read_cube(dir / "again.npy")));
}

// ---- demo and help -------------------------------------------------------------------------------------

TEST(KmeansCliDemo, DemoQuantizesThePhoto) {
    const fs::path dir = temp_dir("kmeans-demo") / "out";
    const auto r = run_cli("demo --quiet --out " + q(dir) + " --photo " + q(chelsea()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(listing(dir),
              "{chelsea_k16.indexed.png, chelsea_k16.palette.json, chelsea_k16.palette.png, chelsea_k16.png, samson_edges.png, "
              "samson_rcmg.json, samson_rcmg.npy, samson_rcmg.png}");
    EXPECT_EQ(read_json(dir / "samson_rcmg.json")["quantize"]["k"], 16);
    EXPECT_TRUE(cubes_identical(read_cube(dir / "chelsea_k16.png"), read_cube(dir / "chelsea_k16.indexed.png")));
}

TEST(KmeansCliDemo, HelpHasExamplesAndNamesCpuOnlyFlags) {
    for (const char* sub : {"quantize", "cluster"}) {
        const auto r = run_cli(std::string(sub) + " --help");
        EXPECT_EQ(r.exit_code, 0) << r.err;
        EXPECT_NE(r.out.find("Example"), std::string::npos) << r.out;
        for (const char* flag : {"-k", "--init", "--seed", "--max-iter", "--tol", "--n-init", "--init-sample",
                                 "--empty", "--legacy", "--mask"})
            EXPECT_TRUE(names(r.out, flag)) << sub << " --help lacks " << flag;
    }
    const auto r = run_cli("quantize --help");
    EXPECT_NE(r.out.find("CPU only"), std::string::npos) << r.out;
    for (const char* flag : {"--palette-in", "--palette-out", "--colorspace", "--dither"})
        EXPECT_TRUE(names(r.out, flag)) << flag;
}

}  // namespace
