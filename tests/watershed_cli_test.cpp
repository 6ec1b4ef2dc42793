// `cubekit watershed` and `cubekit segment`: outputs read back and compared with the library calls,
// markers / mask / levels / volumes, the region tables, the --json summary, and bad inputs (exit 2
// or 3, the flag named, nothing written).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cubekit/gradient.hpp"
#include "cubekit/io.hpp"
#include "cubekit/watershed.hpp"
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

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::set<std::string> keys(const nlohmann::json& j) {
    std::set<std::string> k;
    for (auto it = j.begin(); it != j.end(); ++it) k.insert(it.key());
    return k;
}

const fs::path samson() { return testing::source_path("data/samson/samson_1.img"); }

/// A W×H×D volume as a .npy file of shape (D, H, W) (the cube whose (H', W', B') = (D, H, W)).
void write_volume_npy(const Cube& volume, const fs::path& path) {
    const Cube v = volume.to_layout(Layout::BSQ);
    const std::int64_t W = v.width(), H = v.height();
    write_cube(Cube::from_view(CubeView::host(v.bytes(), v.height(), v.bands(), v.width(), v.dtype(), {W, W * H, 1}),
                               Layout::BIP),
               path);
}

/// A (D, H, W) .npy read back as the W×H×D volume.
Cube read_volume_npy(const fs::path& path) {
    const Cube raw = read_cube(path);  // (H', W', B') = (D, H, W)
    Cube v(raw.bands(), raw.width(), raw.height(), raw.dtype(), Layout::BSQ);
    for (int d = 0; d < raw.height(); ++d)
        for (int h = 0; h < raw.width(); ++h)
            for (int w = 0; w < raw.bands(); ++w) v.set_value(w, h, d, raw.value(h, d, w));
    return v;
}

// ---- watershed -------------------------------------------------------------------------------------

TEST(WatershedCli, LabelsAreTheLibrarysOnTiesAndFloats) {
    const fs::path dir = testing::temp_dir("ws-cli-labels");
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube ties = testing::random_levels_cube(37, 23, 1, DType::U8, seed, 8);
    const Cube floats = testing::random_cube(31, 19, 1, DType::F32, seed + 1, -5, 5);
    write_cube(ties, dir / "ties.npy");
    write_cube(floats, dir / "floats.npy");
    for (const auto& [name, relief] : {std::pair<std::string, const Cube*>{"ties", &ties}, {"floats", &floats}})
        for (int connectivity : {4, 8}) {
            const fs::path out = dir / (name + std::to_string(connectivity) + ".npy");
            const auto r = run_cli("watershed " + q(dir / (name + ".npy")) + " " + q(out) + " --connectivity " +
                                   std::to_string(connectivity) + " --backend cpu --json");
            ASSERT_EQ(r.exit_code, 0) << r.err;
            WatershedOptions o;
            o.connectivity = connectivity;
            const WatershedResult lib = watershed(testing::cpu_context(), *relief, o);
            const Cube back = read_cube(out);
            EXPECT_EQ(back.dtype(), DType::I32);
            EXPECT_TRUE(testing::cubes_identical(lib.labels, back.to_layout(Layout::BSQ))) << name << connectivity;
            const nlohmann::json j = nlohmann::json::parse(r.out);
            EXPECT_EQ(j["command"], "watershed");
            EXPECT_EQ(j["regions"], lib.regions);
            EXPECT_GT(lib.regions, 3);
            EXPECT_EQ(j["unlabelled_pixels"], 0);
            EXPECT_EQ(j["parameters"]["connectivity"], connectivity);
            EXPECT_EQ(keys(j["parameters"]), (std::set<std::string>{"connectivity", "levels", "h_min", "min_area", "volume", "schedule"}));
            EXPECT_TRUE(j["markers"].is_null() && j["mask"].is_null());
            for (const char* step : {"context", "read", "watershed", "write", "total"})
                EXPECT_TRUE(j["timings_ms"].contains(step)) << step;
            ASSERT_EQ(j["outputs"].size(), 1u);
            EXPECT_EQ(j["outputs"][0]["role"], "labels");
            EXPECT_EQ(j["outputs"][0]["dtype"], "i32");
        }
}

TEST(WatershedCli, MarkersMaskLevelsAndHMinAreTheLibrarys) {
    const fs::path dir = testing::temp_dir("ws-cli-markers");
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const int W = 40, H = 30;
    const Cube relief = testing::random_cube(W, H, 1, DType::F32, seed, 0, 100);
    Cube markers(W, H, 1, DType::U8), mask(W, H, 1, DType::U8);
    markers.at<std::uint8_t>(3, 4, 0) = 9, markers.at<std::uint8_t>(30, 20, 0) = 3, markers.at<std::uint8_t>(31, 20, 0) = 3;
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) mask.at<std::uint8_t>(x, y, 0) = (x < 35 && y > 1) ? 255 : 0;  // PNG: 255 = inside
    write_cube(relief, dir / "relief.npy");
    write_cube(markers, dir / "seeds.png");
    write_cube(mask, dir / "valid.png");
    const auto r = run_cli("watershed " + q(dir / "relief.npy") + " " + q(dir / "labels.npy") + " --markers " +
                           q(dir / "seeds.png") + " --mask " + q(dir / "valid.png") + " --levels 16 --backend cpu --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    Cube inside(W, H, 1, DType::U8);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) inside.at<std::uint8_t>(x, y, 0) = mask.at<std::uint8_t>(x, y, 0) != 0;
    WatershedOptions o;
    o.levels = 16;
    const CubeView mv = markers.view(), kv = inside.view();
    const WatershedResult lib = watershed(testing::cpu_context(), relief, o, {.markers = &mv, .mask = &kv});
    const Cube back = read_cube(dir / "labels.npy").to_layout(Layout::BSQ);
    EXPECT_TRUE(testing::cubes_identical(lib.labels, back));
    std::set<int> values;
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) values.insert(back.at<std::int32_t>(x, y, 0));
    EXPECT_EQ(values, (std::set<int>{0, 3, 9}));  // the marker labels kept, 0 outside the mask
    EXPECT_EQ(back.at<std::int32_t>(36, 10, 0), 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["regions"], 2);
    EXPECT_EQ(j["parameters"]["levels"], 16);
    EXPECT_EQ(j["markers"], (dir / "seeds.png").string());
    EXPECT_GT(j["unlabelled_pixels"].get<int>(), 5 * H);

    // h-minima and an ENVI output: the labels of the library, the georeference kept.
    Cube georeferenced = relief.clone();
    georeferenced.metadata().map_info = "UTM, 1.000, 1.000, 500000.000, 4100000.000, 1.0, 1.0, 33, North, WGS-84";
    write_cube(georeferenced, dir / "relief.hdr");
    ASSERT_EQ(run_cli("watershed " + q(dir / "relief.img") + " " + q(dir / "hmin.hdr") + " --h-min 20 --quiet").exit_code, 0);
    WatershedOptions h;
    h.h_min = 20;
    const Cube envi = read_cube(dir / "hmin.hdr");
    EXPECT_TRUE(testing::cubes_identical(watershed(testing::cpu_context(), relief, h).labels, envi.to_layout(Layout::BSQ)));
    EXPECT_EQ(envi.metadata().map_info, georeferenced.metadata().map_info);
}

TEST(WatershedCli, PictureAndBoundaryMap) {
    const fs::path dir = testing::temp_dir("ws-cli-png");
    const Cube relief = testing::random_levels_cube(29, 17, 1, DType::U16, testing::test_seed(), 6);
    write_cube(relief, dir / "relief.npy");
    const auto r = run_cli("watershed " + q(dir / "relief.npy") + " " + q(dir / "l.npy") + " --connectivity 4 --png " +
                           q(dir / "l.png") + " --boundary-out " + q(dir / "b.npy") + " --json --backend cpu");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const Context& ctx = testing::cpu_context();
    WatershedOptions o;
    o.connectivity = 4;
    const Cube labels = watershed(ctx, relief, o).labels;
    const Cube boundary = watershed_boundary(ctx, labels, 4);
    EXPECT_TRUE(testing::cubes_identical(boundary, read_cube(dir / "b.npy").to_layout(Layout::BSQ)));
    const Cube png = read_cube(dir / "l.png");
    ASSERT_EQ(png.bands(), 3);
    ASSERT_EQ(png.width(), 29);
    int drawn = 0;
    for (int y = 0; y < 17; ++y)
        for (int x = 0; x < 29; ++x) {
            const bool black = png.value(x, y, 0) == 0 && png.value(x, y, 1) == 0 && png.value(x, y, 2) == 0;
            EXPECT_EQ(black, boundary.at<std::uint8_t>(x, y, 0) == 1) << x << "," << y;
            drawn += black;
        }
    EXPECT_GT(drawn, 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["timings_ms"].contains("paint"));
    EXPECT_EQ(j["outputs"].size(), 3u);
}

TEST(WatershedCli, VolumesAreDepthHeightWidthNpy) {
    const fs::path dir = testing::temp_dir("ws-cli-volume");
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube volume = testing::random_levels_cube(11, 9, 7, DType::U8, seed, 5);  // W 11, H 9, D 7
    write_volume_npy(volume, dir / "vol.npy");
    const Context& ctx = testing::cpu_context();
    for (int connectivity : {0, 6}) {  // 0: the default, 26
        const fs::path out = dir / ("l" + std::to_string(connectivity) + ".npy");
        const auto r = run_cli("watershed " + q(dir / "vol.npy") + " " + q(out) + " --volume --json --backend cpu" +
                               (connectivity ? " --connectivity 6" : ""));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        WatershedOptions o;
        o.volume = true;
        o.connectivity = connectivity ? connectivity : 26;
        const WatershedResult lib = watershed(ctx, volume, o);
        const Cube raw = read_cube(out);
        EXPECT_EQ(raw.height(), 7);  // (D, H, W) = (7, 9, 11)
        EXPECT_EQ(raw.width(), 9);
        EXPECT_EQ(raw.bands(), 11);
        EXPECT_TRUE(testing::cubes_identical(lib.labels, read_volume_npy(out)));
        const nlohmann::json j = nlohmann::json::parse(r.out);
        EXPECT_EQ(j["parameters"]["connectivity"], o.connectivity);
        EXPECT_EQ(j["parameters"]["volume"], true);
        EXPECT_EQ(j["regions"], lib.regions);
    }
    // The bands of an ENVI cube are z-slices too.
    write_cube(volume, dir / "vol.hdr");
    ASSERT_EQ(run_cli("watershed " + q(dir / "vol.img") + " " + q(dir / "envi.npy") + " --volume -q").exit_code, 0);
    WatershedOptions o;
    o.volume = true;
    o.connectivity = 26;
    EXPECT_TRUE(testing::cubes_identical(watershed(ctx, volume, o).labels, read_volume_npy(dir / "envi.npy")));
}

// ---- segment ---------------------------------------------------------------------------------------

TEST(WatershedCli, TilesGiveTheWholeLabelsAndReportThemselves) {
    const fs::path dir = testing::temp_dir("ws-cli-tiles");
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube relief = testing::random_levels_cube(53, 41, 1, DType::U16, seed, 6);
    write_cube(relief, dir / "relief.hdr");  // ENVI: read by windows
    write_cube(relief, dir / "relief.png");  // read whole, then tiled
    Cube mask(53, 41, 1, DType::U8);
    for (int y = 0; y < 41; ++y)
        for (int x = 0; x < 53; ++x) mask.set_value(x, y, 0, (x * 7 + y * 3) % 11 != 0);
    write_cube(mask, dir / "mask.npy");
    const CubeView mask_view = mask.view();
    for (const std::string in : {"relief.hdr", "relief.png"})
        for (const std::string& flags : std::vector<std::string>{"--memory-limit 6K", "--tile-size 5x4", "--tile-size 1x1 --connectivity 4 --mask " + q(dir / "mask.npy")}) {
            SCOPED_TRACE(in + " " + flags);
            const fs::path out = dir / "labels.npy";
            const auto r = run_cli("watershed " + q(dir / in) + " " + q(out) + " " + flags + " --backend cpu --json");
            ASSERT_EQ(r.exit_code, 0) << r.err;
            WatershedOptions o;
            o.connectivity = flags.find("--connectivity 4") != std::string::npos ? 4 : 8;
            const bool masked = flags.find("--mask") != std::string::npos;
            const WatershedResult lib = watershed(testing::cpu_context(), relief, o, {.mask = masked ? &mask_view : nullptr});
            EXPECT_TRUE(testing::cubes_identical(lib.labels, read_cube(out).to_layout(Layout::BSQ)));
            const nlohmann::json j = nlohmann::json::parse(r.out);
            EXPECT_EQ(j["regions"], lib.regions);
            EXPECT_GT(j["tiled"]["tiles"].get<int>(), 1);
            EXPECT_GE(j["tiled"]["rounds"].get<int>(), 1);
            EXPECT_EQ(j["input"]["windowed"], in == "relief.hdr");
            EXPECT_TRUE(j["outputs"][0].value("streamed", false));  // the labels were written tile by tile
        }
    // Without tile flags the relief runs whole.
    const auto whole = run_cli("watershed " + q(dir / "relief.hdr") + " " + q(dir / "w.npy") + " --backend cpu --json");
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    EXPECT_FALSE(nlohmann::json::parse(whole.out).contains("tiled"));
    // Options that need the whole relief are refused with tiles, naming the flag, nothing written.
    for (const std::string& flag : std::vector<std::string>{"--levels 8", "--h-min 2", "--min-area 4", "--markers " + q(dir / "mask.npy")}) {
        const auto r = run_cli("watershed " + q(dir / "relief.hdr") + " " + q(dir / "x.npy") + " --tile-size 8x8 " + flag);
        EXPECT_EQ(r.exit_code, 2) << flag;
        EXPECT_TRUE(testing::names_token(r.err, flag.substr(0, flag.find(' ')))) << r.err;
        EXPECT_FALSE(fs::exists(dir / "x.npy"));
    }
    const auto bad = run_cli("watershed " + q(dir / "relief.hdr") + " " + q(dir / "x.npy") + " --memory-limit 12Q");
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_TRUE(testing::names_token(bad.err, "--memory-limit")) << bad.err;
    const auto cpu_devices = run_cli("watershed " + q(dir / "relief.hdr") + " " + q(dir / "x.npy") + " --devices 0 --backend cpu");
    EXPECT_EQ(cpu_devices.exit_code, 2) << cpu_devices.err;
    EXPECT_FALSE(fs::exists(dir / "x.npy"));
    // segment in tiles: the RCMG and the watershed in tiles give the whole run's labels and gradient.
    const auto seg = run_cli("segment " + q(samson()) + " " + q(dir / "s.npy") + " --gradient-out " + q(dir / "g.npy") +
                             " --backend cpu --quiet");
    ASSERT_EQ(seg.exit_code, 0) << seg.err;
    const auto seg_tiles = run_cli("segment " + q(samson()) + " " + q(dir / "st.npy") + " --gradient-out " + q(dir / "gt.npy") +
                                   " --tile-size 17x13 --backend cpu --json --quiet");
    ASSERT_EQ(seg_tiles.exit_code, 0) << seg_tiles.err;
    EXPECT_TRUE(testing::cubes_identical(read_cube(dir / "s.npy"), read_cube(dir / "st.npy")));
    EXPECT_TRUE(testing::cubes_identical(read_cube(dir / "g.npy"), read_cube(dir / "gt.npy")));
    const nlohmann::json sj = nlohmann::json::parse(seg_tiles.out);
    EXPECT_EQ(sj["tiled"]["watershed"]["tiles"], 48);
    EXPECT_EQ(sj["tiled"]["rcmg"]["tiles"], 48);
    EXPECT_TRUE(sj["input"]["windowed"].get<bool>());  // ENVI: the RCMG's tiles read by windows
    // The labels went tile by tile into st.npy; ENVI labels keep the description and the same bytes.
    EXPECT_EQ(testing::read_text(dir / "s.npy"), testing::read_text(dir / "st.npy"));
    int streamed = 0;
    for (const auto& o : sj["outputs"]) streamed += o.value("streamed", false) && o["path"] == (dir / "st.npy").string();
    EXPECT_EQ(streamed, 1);
    const auto seg_envi = run_cli("segment " + q(samson()) + " " + q(dir / "se.hdr") + " --backend cpu --quiet");
    const auto seg_envi_tiles = run_cli("segment " + q(samson()) + " " + q(dir / "ste.hdr") + " --tile-size 17x13 --backend cpu --quiet");
    ASSERT_EQ(seg_envi.exit_code, 0) << seg_envi.err;
    ASSERT_EQ(seg_envi_tiles.exit_code, 0) << seg_envi_tiles.err;
    EXPECT_EQ(testing::read_text(dir / "se.hdr"), testing::read_text(dir / "ste.hdr"));
    EXPECT_EQ(testing::read_text(dir / "se.img"), testing::read_text(dir / "ste.img"));
    // The region table in tiles: the cube read by windows a strip of rows at a time, the same table.
    for (const char* table : {"r.csv", "r.json"}) {
        const auto whole_table = run_cli("segment " + q(samson()) + " " + q(dir / "sw.npy") + " --regions-out " +
                                         q(dir / (std::string("w") + table)) + " --backend cpu --quiet");
        ASSERT_EQ(whole_table.exit_code, 0) << whole_table.err;
        const auto tiled_table = run_cli("segment " + q(samson()) + " " + q(dir / "sx.npy") + " --tile-size 17x13 --memory-limit 64K" +
                                         " --regions-out " + q(dir / (std::string("t") + table)) + " --backend cpu --quiet");
        ASSERT_EQ(tiled_table.exit_code, 0) << tiled_table.err;
        std::string w = testing::read_text(dir / (std::string("w") + table)), t = testing::read_text(dir / (std::string("t") + table));
        if (std::string(table) == "r.json") {  // the label file's name differs
            auto jw = nlohmann::json::parse(w), jt = nlohmann::json::parse(t);
            jw.erase("labels"), jt.erase("labels");
            EXPECT_EQ(jw, jt);
            EXPECT_GT(jw["count"].get<int>(), 1);
        } else {
            EXPECT_EQ(w, t);
        }
    }
}

TEST(SegmentCli, SamsonLabelsGradientAndRegionTables) {
    const fs::path dir = testing::temp_dir("segment-cli");
    const auto r = run_cli("segment " + q(samson()) + " " + q(dir / "s.npy") + " --levels 32 --regions-out " +
                           q(dir / "s.csv") + " --gradient-out " + q(dir / "g.npy") + " --png " + q(dir / "s.png") +
                           " --backend cpu --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const Context& ctx = testing::cpu_context();
    const Cube cube = read_cube(samson());
    WatershedOptions wo;
    wo.levels = 32;
    const SegmentResult lib = segment(ctx, cube, RcmgOptions{}, wo);
    EXPECT_TRUE(testing::cubes_identical(lib.labels, read_cube(dir / "s.npy").to_layout(Layout::BSQ)));
    EXPECT_TRUE(testing::cubes_identical(lib.gradient, read_cube(dir / "g.npy").to_layout(Layout::BSQ)));
    EXPECT_TRUE(testing::cubes_identical(rcmg(ctx, cube), lib.gradient));  // RCMG → watershed, nothing else
    EXPECT_TRUE(testing::cubes_identical(watershed(ctx, lib.gradient, wo).labels, lib.labels));
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["command"], "segment");
    EXPECT_EQ(j["regions"], lib.regions);
    EXPECT_GT(lib.regions, 20);
    EXPECT_EQ(j["parameters"]["rcmg"]["connectivity"], 8);
    EXPECT_EQ(j["parameters"]["watershed"]["levels"], 32);
    EXPECT_FALSE(j["parameters"]["watershed"].contains("volume") && j["parameters"]["watershed"]["volume"] == true);
    for (const char* step : {"context", "read", "segment", "stats", "paint", "write", "total"})
        EXPECT_TRUE(j["timings_ms"].contains(step)) << step;
    EXPECT_EQ(j["outputs"].size(), 4u);

    // CSV: header with the wavelengths, one row per region, areas adding up to the image.
    std::istringstream csv(slurp(dir / "s.csv"));
    std::string header, line;
    std::getline(csv, header);
    EXPECT_EQ(header.rfind("label,area,x0,y0,x1,y1,centroid_x,centroid_y,mean_gradient,", 0), 0u) << header;
    EXPECT_EQ(std::count(header.begin(), header.end(), ','), 8 + 156);
    const CubeView cube_view = cube.view();
    const std::vector<RegionStats> stats = region_statistics(ctx, lib.labels, &cube_view);
    std::int64_t rows = 0, area = 0;
    while (std::getline(csv, line)) {
        ++rows;
        area += std::stoll(line.substr(line.find(',') + 1));
    }
    EXPECT_EQ(rows, lib.regions);
    EXPECT_EQ(area, 95 * 95);
    ASSERT_EQ(std::int64_t(stats.size()), lib.regions);

    // JSON: the same table; with --connectivity 4 both steps use 4 unless --rcmg-connectivity.
    const auto rj = run_cli("segment " + q(samson()) + " " + q(dir / "s4.npy") + " --connectivity 4 --regions-out " +
                            q(dir / "s4.json") + " --backend cpu --json");
    ASSERT_EQ(rj.exit_code, 0) << rj.err;
    const nlohmann::json j4 = nlohmann::json::parse(rj.out);
    EXPECT_EQ(j4["parameters"]["rcmg"]["connectivity"], 4);
    EXPECT_EQ(j4["parameters"]["watershed"]["connectivity"], 4);
    const nlohmann::json table = nlohmann::json::parse(slurp(dir / "s4.json"));
    EXPECT_EQ(table["count"], j4["regions"]);
    EXPECT_EQ(table["regions"].size(), j4["regions"].get<std::size_t>());
    EXPECT_EQ(table["bands"].size(), 156u);
    EXPECT_EQ(table["wavelengths"].size(), 156u);
    const nlohmann::json& first = table["regions"][0];
    EXPECT_EQ(keys(first), (std::set<std::string>{"label", "area", "x0", "y0", "x1", "y1", "centroid_x", "centroid_y",
                                                  "mean_gradient", "mean_spectrum"}));
    EXPECT_EQ(first["label"], 1);
    EXPECT_EQ(first["mean_spectrum"].size(), 156u);
    RcmgOptions r4;
    r4.connectivity = 4;
    WatershedOptions w4;
    w4.connectivity = 4;
    const SegmentResult lib4 = segment(ctx, cube, r4, w4);
    EXPECT_TRUE(testing::cubes_identical(lib4.labels, read_cube(dir / "s4.npy").to_layout(Layout::BSQ)));
    const CubeView gradient4 = lib4.gradient.view();
    const std::vector<RegionStats> s4 = region_statistics(ctx, lib4.labels, &cube_view, &gradient4);
    EXPECT_EQ(first["area"], s4[0].area);
    EXPECT_NEAR(first["mean_gradient"].get<double>(), s4[0].mean_gradient, 1e-9 * s4[0].mean_gradient);
    EXPECT_NEAR(first["mean_spectrum"][100].get<double>(), s4[0].mean_spectrum[100], 1e-9 * std::abs(s4[0].mean_spectrum[100]));

    const auto rm = run_cli("segment " + q(samson()) + " " + q(dir / "s48.npy") +
                            " --connectivity 4 --rcmg-connectivity 8 --backend cpu --json");
    ASSERT_EQ(rm.exit_code, 0) << rm.err;
    const nlohmann::json jm = nlohmann::json::parse(rm.out);
    EXPECT_EQ(jm["parameters"]["rcmg"]["connectivity"], 8);
    EXPECT_EQ(jm["parameters"]["watershed"]["connectivity"], 4);
}

TEST(SegmentCli, MarkersFromAMatlabVariable) {
    const auto scene = testing::shared_data_path("classification/salinas_a/SalinasA_corrected.mat");
    const auto gt = testing::shared_data_path("classification/salinas_a/SalinasA_gt.mat");
    if (!scene || !gt) GTEST_SKIP() << "../shared/data/classification/salinas_a is not here";
    const fs::path dir = testing::temp_dir("segment-cli-mat");
    const auto r = run_cli("segment " + q(*scene) + " " + q(dir / "l.npy") + " --markers " + q(gt->string() + ":salinasA_gt") +
                           " --backend cpu --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const Context& ctx = testing::cpu_context();
    const Cube markers = read_cube(*gt, {.var = "salinasA_gt"}).to_dtype(DType::I32);  // f64 class numbers
    const CubeView mv = markers.view();
    const SegmentResult lib = segment(ctx, read_cube(*scene), {}, {}, {.markers = &mv});
    EXPECT_TRUE(testing::cubes_identical(lib.labels, read_cube(dir / "l.npy").to_layout(Layout::BSQ)));
    EXPECT_EQ(nlohmann::json::parse(r.out)["regions"], 6);  // Salinas-A's six classes
}

// ---- bad inputs ------------------------------------------------------------------------------------

struct Bad {
    std::string args;   // after `cubekit`
    int exit_code;
    std::string named;  // what stderr must contain
};

TEST(WatershedCli, BadInputsExitNamingTheFlagAndWriteNothing) {
    const fs::path dir = testing::temp_dir("ws-cli-bad");
    const fs::path in = dir / "in", out = dir / "out";
    fs::create_directories(in);
    fs::create_directories(out);
    write_cube(testing::random_cube(12, 10, 1, DType::F32, 7, 0, 1), in / "relief.npy");
    write_cube(testing::random_cube(12, 10, 3, DType::F32, 8, 0, 1), in / "three.npy");
    write_cube(testing::random_cube(11, 10, 1, DType::U8, 9, 0, 3), in / "small.npy");
    write_cube(testing::random_cube(12, 10, 1, DType::F32, 10, 0, 3), in / "fractions.npy");
    write_cube(testing::random_cube(12, 10, 1, DType::U8, 13, 0, 3), in / "seeds.npy");
    Cube nan = testing::random_cube(12, 10, 1, DType::F32, 11, 0, 1);
    nan.at<float>(4, 6, 0) = std::nanf("");
    write_cube(nan, in / "nan.npy");
    write_volume_npy(testing::random_cube(6, 5, 4, DType::U8, 12, 0, 9), in / "vol.npy");
    const std::string relief = q(in / "relief.npy"), o = q(out / "l.npy");
    const std::vector<Bad> rows = {
        {"watershed " + relief + " " + o + " --connectivity 6", 2, "--connectivity = 6"},
        {"watershed " + relief + " " + o + " --connectivity 5", 2, "--connectivity"},
        {"watershed " + q(in / "vol.npy") + " " + o + " --volume --connectivity 8", 2, "--connectivity = 8"},
        {"watershed " + relief + " " + o + " --levels 1", 2, "--levels = 1"},
        {"watershed " + relief + " " + o + " --levels -3", 2, "--levels"},
        {"watershed " + relief + " " + o + " --h-min -1", 2, "--h-min"},
        {"watershed " + relief + " " + o + " --min-area -1", 2, "--min-area"},
        {"watershed " + relief + " " + o + " --min-area 4 --markers " + q(in / "seeds.npy"), 2, "--min-area = 4 with markers"},
        {"watershed " + relief + " " + o + " --schedule fast", 2, "--schedule"},
        {"watershed " + q(in / "three.npy") + " " + o, 2, "3 bands"},
        {"watershed " + relief + " " + o + " --markers " + q(in / "small.npy"), 2, "--markers"},
        {"watershed " + relief + " " + o + " --markers " + q(in / "fractions.npy"), 2, "--markers"},
        {"watershed " + relief + " " + o + " --mask " + q(in / "small.npy"), 2, "--mask"},
        {"watershed " + relief + " " + o + " --markers " + q(in / "missing.png"), 3, "--markers"},
        {"watershed " + q(in / "nan.npy") + " " + o, 2, "NaN"},
        {"watershed " + relief + " " + q(out / "l.png"), 2, "OUT"},
        {"watershed " + relief + " " + o + " --png " + q(out / "p.npy"), 2, "--png"},
        {"watershed " + relief + " " + o + " --boundary-out " + q(out / "b.txt"), 2, "--boundary-out"},
        {"segment " + q(samson()) + " " + o + " --gradient-out " + q(out / "g.jpg"), 2, "--gradient-out"},
        {"watershed " + relief + " " + o + " --boundary-out " + o, 2, "same file"},
        {"watershed " + q(in / "vol.npy") + " " + o + " --volume --png " + q(out / "p.png"), 2, "--png"},
        {"segment " + q(samson()) + " " + o + " --connectivity 6", 2, "--connectivity = 6"},
        {"segment " + q(samson()) + " " + o + " --rcmg-connectivity 6", 2, "--rcmg-connectivity"},
        {"segment " + q(samson()) + " " + o + " --reject 9", 2, "--reject"},
        {"segment " + q(samson()) + " " + o + " --volume", 2, "--volume"},
        {"segment " + q(samson()) + " " + o + " --regions-out " + q(out / "r.txt"), 2, "--regions-out"},
        {"segment " + q(samson()) + " " + o + " --mask " + q(in / "relief.npy"), 2, "--mask"},
        {"segment " + q(samson()) + " " + o + " --levels 1 --png " + q(out / "p.png"), 2, "--levels = 1"},
    };
    for (const Bad& row : rows) {
        const auto r = run_cli(row.args);
        EXPECT_EQ(r.exit_code, row.exit_code) << row.args << "\n" << r.err;
        EXPECT_NE(r.err.find(row.named), std::string::npos) << row.args << "\n" << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_EQ(files_in(out), 0u) << row.args;
    }
}

TEST(WatershedCli, HelpTeachesWithExamples) {
    for (const char* command : {"watershed", "segment"}) {
        const auto r = run_cli(std::string(command) + " --help");
        ASSERT_EQ(r.exit_code, 0);
        for (const char* flag : {"--connectivity", "--levels", "--h-min", "--markers", "--mask", "--png", "--boundary-out",
                                 "Examples:"})
            EXPECT_NE(r.out.find(flag), std::string::npos) << command << " " << flag;
    }
    const auto s = run_cli("segment --help");
    for (const char* flag : {"--rcmg-connectivity", "--reject", "--regions-out", "--gradient-out"})
        EXPECT_NE(s.out.find(flag), std::string::npos) << flag;
    EXPECT_EQ(s.out.find("--volume"), std::string::npos);
}

}  // namespace
}  // namespace cubekit
