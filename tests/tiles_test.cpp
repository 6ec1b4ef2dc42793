// Tiles with halos (issue 17): the plan, the budgets, and tiled == whole on the CPU backend.
// (The CUDA streamed path and several devices: tiles_gpu_test.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <vector>

#include "core/tiled_local.hpp"
#include <nlohmann/json.hpp>

#include "cubekit/detect.hpp"
#include "cubekit/detect_classical.hpp"
#include "cubekit/gradient.hpp"
#include "cubekit/io.hpp"
#include "cubekit/tiles.hpp"
#include "detect_testing.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using testing::cubes_identical;

TEST(Tiles, CoresPartitionTheSceneAndWindowsHoldTheHalo) {
    for (int halo : {0, 1, 3, 9})
        for (auto [w, h, tw, th] : std::vector<std::array<int, 4>>{{1, 1, 1, 1}, {10, 7, 3, 2}, {64, 5, 64, 1},
                                                                   {17, 29, 5, 31}, {8, 8, 100, 100}}) {
            SCOPED_TRACE(::testing::Message() << w << "x" << h << " tiles " << tw << "x" << th << " halo " << halo);
            std::vector<int> covered(std::size_t(w) * std::size_t(h), 0);
            for (const Tile& t : plan_tiles(w, h, tw, th, halo)) {
                EXPECT_LE(t.width, tw);
                EXPECT_LE(t.height, th);
                for (int y = t.y0; y < t.y0 + t.height; ++y)
                    for (int x = t.x0; x < t.x0 + t.width; ++x) ++covered[std::size_t(y) * std::size_t(w) + std::size_t(x)];
                // The window is the core grown by the halo and clipped to the scene.
                EXPECT_EQ(t.read_x0, std::max(0, t.x0 - halo));
                EXPECT_EQ(t.read_y0, std::max(0, t.y0 - halo));
                EXPECT_EQ(t.read_x0 + t.read_width, std::min(w, t.x0 + t.width + halo));
                EXPECT_EQ(t.read_y0 + t.read_height, std::min(h, t.y0 + t.height + halo));
            }
            for (int c : covered) ASSERT_EQ(c, 1);
        }
    EXPECT_THROW(plan_tiles(0, 5, 1, 1, 0), InvalidInput);
    EXPECT_THROW(plan_tiles(5, 5, 1, 1, -1), InvalidInput);
}

TEST(Tiles, ParsesByteCountsAndDevices) {
    EXPECT_EQ(parse_bytes("1048576", "memory_limit"), 1048576u);
    EXPECT_EQ(parse_bytes("512K", "m"), 512u << 10);
    EXPECT_EQ(parse_bytes("64m", "m"), 64u << 20);
    EXPECT_EQ(parse_bytes("2G", "m"), std::size_t(2) << 30);
    for (const char* bad : {"", "M", "-1", "1.5G", "64MB", "0x10", "12 M", "99999999999999999999"}) {
        try {
            parse_bytes(bad, "--memory-limit");
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const InvalidInput& e) {
            EXPECT_NE(std::string(e.what()).find("--memory-limit = '"), std::string::npos) << e.what();
        }
    }
    EXPECT_EQ(parse_devices("0,1", "--devices"), (std::vector<int>{0, 1}));
    EXPECT_EQ(parse_devices("3", "--devices"), (std::vector<int>{3}));
    for (const char* bad : {"", "0,", ",1", "a", "-1", "0,0", "1;2"}) EXPECT_THROW(parse_devices(bad, "--devices"), InvalidInput) << bad;
}

TEST(Tiles, TileSizeFollowsTheBudget) {
    TileOptions o;
    // No budget on the CPU: the whole scene in one tile.
    EXPECT_EQ(detail::choose_tile_size(100, 80, 1, 4, 0, 1, 1, 0, o, "t"), std::make_pair(100, 80));
    // 4 bytes per pixel, 4000 bytes: 1000 pixels = 10 rows of 100, minus the 2 halo rows.
    o.memory_limit = 4000;
    EXPECT_EQ(detail::choose_tile_size(100, 80, 1, 4, 0, 1, 1, 0, o, "t"), std::make_pair(100, 8));
    // Too narrow for full rows: squares of floor(sqrt(250)) = 15, minus 2 halos = 13.
    o.memory_limit = 1000;
    EXPECT_EQ(detail::choose_tile_size(100, 80, 1, 4, 0, 1, 1, 0, o, "t"), std::make_pair(13, 13));
    // Less than one pixel with its halo: refused, naming the flag.
    o.memory_limit = 30;
    try {
        detail::choose_tile_size(100, 80, 1, 4, 0, 1, 1, 0, o, "rcmg");
        ADD_FAILURE() << "a budget of 7 pixels was accepted for a 3x3 halo window";
    } catch (const InvalidInput& e) {
        EXPECT_NE(std::string(e.what()).find("--memory-limit"), std::string::npos) << e.what();
    }
    // The device budget is shared by the lanes of a device.
    o = {};
    o.device_memory_limit = 8000;
    EXPECT_EQ(detail::choose_tile_size(100, 80, 0, 4, 4, 2, 2, 1 << 30, o, "t"), std::make_pair(100, 10));
    // Forced sizes win.
    o.tile_width = 7, o.tile_height = 3;
    EXPECT_EQ(detail::choose_tile_size(100, 80, 1, 4, 4, 2, 2, 1 << 30, o, "t"), std::make_pair(7, 3));
}

// Tiled RCMG equals the whole-scene RCMG bit for bit, for tiles down to 1x1 (halo wider than a
// tile), strips, layouts, types and both connectivities; the output poisoned first.
TEST(Tiles, RcmgTiledEqualsWholeOnTheCpu) {
    const Context& cpu = cpu_context();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    struct Case { int w, h, b; DType type; Layout layout; };
    for (const Case& c : {Case{23, 17, 5, DType::F32, Layout::BSQ}, Case{9, 31, 3, DType::U16, Layout::BIP},
                          Case{40, 6, 7, DType::F64, Layout::BIL}, Case{1, 13, 2, DType::I16, Layout::BSQ}}) {
        const Cube cube = testing::random_cube(c.w, c.h, c.b, c.type, seed, 0, c.type == DType::I16 ? 300 : 1000, c.layout);
        for (int conn : {4, 8}) {
            const RcmgOptions options{.connectivity = conn};
            const Cube whole = rcmg(cpu, cube, options);
            for (auto [tw, th] : std::vector<std::pair<int, int>>{{1, 1}, {2, 3}, {5, 2}, {c.w, 1}, {c.w, 4}, {7, 7}}) {
                SCOPED_TRACE(::testing::Message() << c.w << "x" << c.h << "x" << c.b << " tiles " << tw << "x" << th
                                                << " connectivity " << conn);
                Cube out(c.w, c.h, 1, DType::F32);
                std::memset(out.bytes(), 0xFF, out.num_bytes());
                const TiledRun run = rcmg_tiled(cpu, cube, out.mutable_view(), options, {.tile_width = tw, .tile_height = th});
                EXPECT_EQ(run.tiles, std::size_t((c.w + std::min(tw, c.w) - 1) / std::min(tw, c.w)) *
                                         std::size_t((c.h + std::min(th, c.h) - 1) / std::min(th, c.h)));
                ASSERT_TRUE(cubes_identical(whole, out));
            }
        }
    }
}

// A memory budget alone forces tiles; the reported peak stays within it; the output may be a
// window of a larger cube (any strides).
TEST(Tiles, MemoryLimitForcesTilesWithinTheBudget) {
    const Context& cpu = cpu_context();
    const Cube cube = testing::random_cube(50, 40, 4, DType::F32, testing::test_seed(), -5, 5);
    const Cube whole = rcmg(cpu, cube);
    Cube big(60, 45, 1, DType::F32);
    std::memset(big.bytes(), 0, big.num_bytes());
    const MutableCubeView out = big.mutable_view().window(3, 2, 50, 40);
    const TiledRun run = rcmg_tiled(cpu, cube, out, {}, {.memory_limit = 2000});
    EXPECT_GT(run.tiles, 1u);
    EXPECT_LE(run.peak_bytes, 2000u);
    const Cube got = Cube::from_view(out, Layout::BSQ);
    EXPECT_TRUE(cubes_identical(whole, got));
    EXPECT_EQ(big.value(0, 0, 0), 0.0);  // outside the window: untouched
    EXPECT_THROW(rcmg_tiled(cpu, cube, out, {}, {.memory_limit = 20}), InvalidInput);
    EXPECT_THROW(rcmg_tiled(cpu, cube, out, {}, {.devices = {0}}), InvalidInput);  // devices on a CPU context
    Cube wrong(50, 40, 1, DType::F64);
    EXPECT_THROW(rcmg_tiled(cpu, cube, wrong.mutable_view(), {}, {}), InvalidInput);
}

}  // namespace
}  // namespace cubekit

namespace cubekit {
namespace {

// The CLI's tiled path writes the same file as the whole-scene run and reports its tiles.
TEST(TilesCli, RcmgMemoryLimitWritesTheSameGradient) {
    const auto dir = testing::temp_dir("tiles_cli");
    const std::string in = testing::q(testing::source_path("data/samson/samson_1.img"));
    const auto whole = testing::run_cli("rcmg " + in + " " + testing::q(dir / "whole.npy") + " --backend cpu --quiet");
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    const auto tiled = testing::run_cli("rcmg " + in + " " + testing::q(dir / "tiled.npy") +
                                        " --backend cpu --memory-limit 64K --json --quiet");
    ASSERT_EQ(tiled.exit_code, 0) << tiled.err;
    const auto j = nlohmann::json::parse(tiled.out);
    EXPECT_GT(j["tiled"]["tiles"].get<int>(), 10);
    EXPECT_LE(j["tiled"]["peak_bytes"].get<std::size_t>(), 65536u);
    EXPECT_TRUE(j["input"]["windowed"].get<bool>());  // ENVI: read by windows, never whole
    EXPECT_TRUE(testing::cubes_identical(read_cube(dir / "whole.npy"), read_cube(dir / "tiled.npy")));
    EXPECT_TRUE(j["outputs"][0].value("streamed", false));  // the gradient landed in tiled.npy tile by tile

    // Several outputs: the first .npy/ENVI one is filled in place, the others written from it.
    const auto whole3 = testing::run_cli("rcmg " + in + " " + testing::q(dir / "w3.png") + " " + testing::q(dir / "w3.hdr") +
                                         " " + testing::q(dir / "w3.npy") + " --backend cpu --quiet");
    ASSERT_EQ(whole3.exit_code, 0) << whole3.err;
    const auto tiled3 = testing::run_cli("rcmg " + in + " " + testing::q(dir / "t3.png") + " " + testing::q(dir / "t3.hdr") +
                                         " " + testing::q(dir / "t3.npy") + " --backend cpu --memory-limit 64K --json --quiet");
    ASSERT_EQ(tiled3.exit_code, 0) << tiled3.err;
    const auto j3 = nlohmann::json::parse(tiled3.out);
    ASSERT_EQ(j3["outputs"].size(), 3u);
    int streamed = 0;
    for (const auto& o : j3["outputs"]) streamed += o.value("streamed", false) ? 1 : 0;
    EXPECT_EQ(streamed, 1);
    EXPECT_EQ(j3["outputs"][2]["path"], (dir / "t3.hdr").string());  // the streamed one is put in place last
    EXPECT_EQ(j3["gradient"], nlohmann::json::parse(testing::run_cli("rcmg " + in + " " + testing::q(dir / "w4.npy") +
                                                                     " --backend cpu --json --quiet").out)["gradient"]);
    for (const char* ext : {".png", ".hdr", ".img", ".npy"})
        EXPECT_EQ(testing::read_text(dir / (std::string("w3") + ext)), testing::read_text(dir / (std::string("t3") + ext))) << ext;
    const auto forced = testing::run_cli("rcmg " + in + " " + testing::q(dir / "forced.npy") +
                                         " --backend cpu --tile-size 7x5 --json --quiet");
    ASSERT_EQ(forced.exit_code, 0) << forced.err;
    EXPECT_EQ(nlohmann::json::parse(forced.out)["tiled"]["tiles"].get<int>(), 14 * 19);
    EXPECT_TRUE(testing::cubes_identical(read_cube(dir / "whole.npy"), read_cube(dir / "forced.npy")));
}

// A large ENVI scene (its data, not its few-hundred-byte header) is read by windows without any tile
// flag; a small one is read whole.
TEST(TilesCli, LargeEnviDataIsReadByWindows) {
    const auto dir = testing::temp_dir("tiles_cli_large");
    Cube big = testing::random_cube(1024, 1024, 33, DType::U16, testing::test_seed(), 0, 4000);  // 66 MiB
    write_cube(big, dir / "big.hdr");
    const auto r = testing::run_cli("rcmg " + testing::q(dir / "big.hdr") + " " + testing::q(dir / "g.npy") + " --backend cpu --json --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(nlohmann::json::parse(r.out)["input"]["windowed"].get<bool>());
    EXPECT_TRUE(testing::cubes_identical(rcmg(cpu_context(), big), read_cube(dir / "g.npy")));
    const auto small = testing::run_cli("rcmg " + testing::q(testing::source_path("data/samson/samson_1.img")) + " " +
                                        testing::q(dir / "s.npy") + " --backend cpu --json --quiet");
    ASSERT_EQ(small.exit_code, 0) << small.err;
    EXPECT_FALSE(nlohmann::json::parse(small.out)["input"].value("windowed", false));
}

}  // namespace
}  // namespace cubekit

namespace cubekit {
namespace {

// A copy of the ENVI file `hdr` (data X.img beside) with its samples byte-swapped and the header saying so.
std::filesystem::path big_endian_copy(const std::filesystem::path& hdr, const std::filesystem::path& dir) {
    const Cube c = read_cube(hdr);
    Cube swapped = Cube::from_view(c.view(), c.layout());
    const std::size_t e = dtype_size(c.dtype());
    for (std::size_t i = 0; i < c.num_elements(); ++i) std::reverse(swapped.bytes() + i * e, swapped.bytes() + (i + 1) * e);
    write_cube(swapped, dir / "be.hdr");
    std::ifstream in(dir / "be.hdr");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t at = text.find("byte order = 0");
    EXPECT_NE(at, std::string::npos) << text;
    text.replace(at, 14, "byte order = 1");
    std::ofstream(dir / "be.hdr") << text;
    return dir / "be.hdr";
}

// Windows read from files equal the same windows of the whole cube, for every layout, both byte
// orders, .npy, full-width and partial windows, dense and strided destinations.
TEST(CubeFile, WindowsEqualTheWholeCube) {
    const auto dir = testing::temp_dir("cube_file");
    const Cube cube = testing::random_cube(23, 17, 5, DType::I16, testing::test_seed(), -3000, 3000);
    std::vector<std::filesystem::path> files;
    for (Layout l : {Layout::BSQ, Layout::BIL, Layout::BIP}) {
        const auto p = dir / (std::string(layout_name(l)) + ".hdr");
        write_cube(cube.to_layout(l), p, {.envi_keep_layout = true});
        files.push_back(p);
    }
    files.push_back(big_endian_copy(files[0], dir));
    write_cube(cube, dir / "c.npy");
    files.push_back(dir / "c.npy");
    for (const auto& f : files) {
        SCOPED_TRACE(f.string());
        const CubeFile file(f);
        EXPECT_TRUE(file.windowed());
        const Cube whole = read_cube(f);
        for (auto [x0, y0, w, h] : std::vector<std::array<int, 4>>{{0, 0, 23, 17}, {0, 5, 23, 3}, {4, 2, 7, 9}, {22, 16, 1, 1}}) {
            for (Layout dl : {Layout::BSQ, Layout::BIP}) {
                Cube got = Cube::uninitialized(w, h, 5, DType::I16, dl);
                file.read_window(x0, y0, w, h, got.mutable_view());
                ASSERT_TRUE(testing::cubes_identical(Cube::from_view(whole.view().window(x0, y0, w, h), dl), got))
                    << x0 << "," << y0 << " " << w << "x" << h;
            }
        }
        Cube out(23, 17, 5, DType::I16);
        EXPECT_THROW(file.read_window(20, 0, 5, 2, out.mutable_view().window(0, 0, 5, 2)), InvalidInput);
        EXPECT_THROW(file.read_window(0, 0, 2, 2, out.mutable_view().window(0, 0, 3, 2)), InvalidInput);
        // Band ranges: the whole cube's bands, into dense and strided destinations.
        for (auto [b0, n] : std::vector<std::pair<int, int>>{{0, 5}, {1, 3}, {4, 1}}) {
            for (Layout dl : {Layout::BSQ, Layout::BIL, Layout::BIP}) {
                Cube got = Cube::uninitialized(23, 17, n, DType::I16, dl);
                file.read_bands(b0, n, got.mutable_view());
                ASSERT_TRUE(testing::cubes_identical(Cube::from_view(whole.view().band_range(b0, n), dl), got)) << b0 << "+" << n;
            }
        }
        Cube two(23, 17, 2, DType::I16);
        EXPECT_THROW(file.read_bands(4, 2, two.mutable_view()), InvalidInput);
        EXPECT_THROW(file.read_bands(0, 3, two.mutable_view()), InvalidInput);
        // RCMG from the file in tiles equals RCMG of the whole cube.
        Cube g(23, 17, 1, DType::F32);
        rcmg_tiled(cpu_context(), file, g.mutable_view(), {}, {.tile_width = 6, .tile_height = 4});
        EXPECT_TRUE(testing::cubes_identical(rcmg(cpu_context(), whole), g));
    }
    // A BIP file whose rows are large: its bands are read in several blocks of rows (16 MiB each).
    const Cube wide = testing::random_cube(4096, 7, 600, DType::I16, testing::test_seed(), -3000, 3000, Layout::BIP);
    write_cube(wide, dir / "wide.hdr", {.envi_keep_layout = true});
    Cube bands = Cube::uninitialized(4096, 7, 3, DType::I16, Layout::BSQ);
    CubeFile(dir / "wide.hdr").read_bands(300, 3, bands.mutable_view());
    EXPECT_TRUE(testing::cubes_identical(Cube::from_view(wide.view().band_range(300, 3), Layout::BSQ), bands));
    // Formats without windows are read whole on opening.
    write_cube(to_display_u8(rcmg(cpu_context(), cube)), dir / "g.png");
    EXPECT_FALSE(CubeFile(dir / "g.png").windowed());
}

}  // namespace
}  // namespace cubekit

namespace cubekit {
namespace {

// The RBF detector in tiles (halo 0) gives the whole-scene scores bit for bit, and the same objects.
TEST(Tiles, DetectPixelsTiledEqualsWholeOnTheCpu) {
    const Context& cpu = cpu_context();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const Cube cube = testing::random_cube(37, 29, 6, DType::U16, seed, 0, 1000, Layout::BIP);
    const std::vector<RbfnModel> models = {testing::random_rbfn(6, 4, seed + 1, 0, 1000), testing::random_rbfn(6, 3, seed + 2, 0, 1000)};
    const std::vector<PixelResult> whole = detect_pixels_many(cpu, cube, models);
    const auto dir = testing::temp_dir("tiles_detect");
    write_cube(cube.to_layout(Layout::BIL), dir / "c.hdr", {.envi_keep_layout = true});
    const CubeFile file(dir / "c.hdr");
    for (auto [tw, th] : std::vector<std::pair<int, int>>{{1, 1}, {5, 3}, {37, 2}}) {
        TiledRun run;
        const std::vector<PixelResult> tiled = detect_pixels_tiled(cpu, cube, models, {}, {.tile_width = tw, .tile_height = th}, &run);
        const std::vector<PixelResult> from_file = detect_pixels_tiled(cpu, file, models, {}, {.tile_width = tw, .tile_height = th});
        EXPECT_GT(run.tiles, 1u);
        for (std::size_t j = 0; j < models.size(); ++j) {
            SCOPED_TRACE(::testing::Message() << "model " << j << " tiles " << tw << "x" << th);
            for (const auto* r : {&tiled[j], &from_file[j]}) {
                ASSERT_TRUE(testing::cubes_identical(whole[j].score, r->score));
                EXPECT_TRUE(testing::cubes_identical(whole[j].labels, r->labels));
                EXPECT_EQ(whole[j].objects.size(), r->objects.size());
                EXPECT_EQ(whole[j].detected, r->detected);
            }
        }
    }
    EXPECT_GT(whole[0].detected + whole[1].detected, 0) << "the models detect nothing: the test would not see a wrong mask";
}

}  // namespace
}  // namespace cubekit

namespace cubekit {
namespace {

// cubekit detect rbfn with tile flags writes the same score map and object table as without.
TEST(TilesCli, DetectRbfnTileSizeWritesTheSameOutputs) {
    const auto dir = testing::temp_dir("tiles_cli_detect");
    const std::uint64_t seed = testing::test_seed();
    write_cube(testing::random_cube(41, 23, 5, DType::F32, seed, 0, 1, Layout::BIP), dir / "c.npy");
    write_model(testing::random_rbfn(5, 3, seed + 1), dir / "m.json");
    const std::string base = "detect rbfn " + testing::q(dir / "c.npy") + " ";
    const auto whole = testing::run_cli(base + testing::q(dir / "w.npy") + " --model " + testing::q(dir / "m.json") + " --backend cpu --quiet");
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    const auto tiled = testing::run_cli(base + testing::q(dir / "t.npy") + " --model " + testing::q(dir / "m.json") +
                                        " --backend cpu --tile-size 9x4 --json --quiet");
    ASSERT_EQ(tiled.exit_code, 0) << tiled.err;
    EXPECT_EQ(nlohmann::json::parse(tiled.out)["tiled"]["tiles"].get<int>(), 5 * 6);
    EXPECT_TRUE(nlohmann::json::parse(tiled.out)["input"]["windowed"].get<bool>());  // the .npy read by windows
    EXPECT_TRUE(testing::cubes_identical(read_cube(dir / "w.npy"), read_cube(dir / "t.npy")));
    const auto objects = [](const std::filesystem::path& p) {
        nlohmann::json j = nlohmann::json::parse(std::ifstream(p));
        return j["objects"];
    };
    EXPECT_EQ(objects(dir / "w.objects.json"), objects(dir / "t.objects.json"));
    // The overlay from the file's three bands alone is the whole run's, byte for byte.
    EXPECT_EQ(testing::read_text(dir / "w.overlay.png"), testing::read_text(dir / "t.overlay.png"));
    const auto bad = testing::run_cli(base + testing::q(dir / "b.npy") + " --model " + testing::q(dir / "m.json") +
                                      " --backend cpu --memory-limit 1Z");
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("--memory-limit"), std::string::npos) << bad.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "b.npy"));
}

// cubekit edges-baseline in groups of bands writes the same map and thresholds as without.
TEST(TilesCli, EdgesBaselineBandGroupsWriteTheSameOutputs) {
    const auto dir = testing::temp_dir("tiles_cli_baseline");
    const std::uint64_t seed = testing::test_seed();
    Cube cube = testing::random_cube(33, 27, 5, DType::F32, seed, 0, 1, Layout::BIP);
    for (int b = 0; b < 5; ++b)
        for (int y = 5; y < 20; ++y)
            for (int x = 6; x < 25; ++x) cube.at<float>(x, y, b) += 2.0f;
    write_cube(cube, dir / "c.npy");
    const std::string base = "edges-baseline " + testing::q(dir / "c.npy") + " ";
    const auto whole = testing::run_cli(base + testing::q(dir / "w.npy") + " --method canny --backend cpu --json --quiet");
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    const auto tiled = testing::run_cli(base + testing::q(dir / "t.npy") + " --method canny --backend cpu --tile-size 1x2 --json --quiet");
    ASSERT_EQ(tiled.exit_code, 0) << tiled.err;
    const nlohmann::json jw = nlohmann::json::parse(whole.out), jt = nlohmann::json::parse(tiled.out);
    EXPECT_EQ(jt["tiled"]["tiles"].get<int>(), 3);
    EXPECT_TRUE(jt["input"]["windowed"].get<bool>());  // the .npy read a group of bands at a time
    EXPECT_TRUE(jt["outputs"][0].value("streamed", false));  // and its edges written group by group
    EXPECT_FALSE(jw["outputs"][0].value("streamed", false));
    EXPECT_EQ(jw["bands"], jt["bands"]);
    EXPECT_GT(jw["edge_pixels"].get<std::int64_t>(), 0);
    EXPECT_TRUE(testing::cubes_identical(read_cube(dir / "w.npy"), read_cube(dir / "t.npy")));
}

// cubekit detect multires with tile flags writes the same window list, raster and overlay as without.
TEST(TilesCli, DetectMultiresTileSizeWritesTheSameOutputs) {
    const auto dir = testing::temp_dir("tiles_cli_multires");
    const std::uint64_t seed = testing::test_seed();
    write_cube(testing::random_cube(57, 45, 4, DType::F32, seed, 0, 1, Layout::BIP), dir / "c.npy");
    write_model(testing::step_multires(4, 0.2, 0.295), dir / "m.json");
    const std::string base = "detect multires " + testing::q(dir / "c.npy") + " ";
    const std::string model = " --model " + testing::q(dir / "m.json") + " --backend cpu --quiet";
    const auto whole = testing::run_cli(base + testing::q(dir / "w.npy") + model);
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    const auto tiled = testing::run_cli(base + testing::q(dir / "t.npy") + model + " --tile-size 20x10 --json");
    ASSERT_EQ(tiled.exit_code, 0) << tiled.err;
    const nlohmann::json j = nlohmann::json::parse(tiled.out);
    EXPECT_EQ(j["tiled"]["tile_width"].get<int>(), 16);  // rounded down to whole 8-pixel blocks
    EXPECT_EQ(j["tiled"]["tile_height"].get<int>(), 8);
    EXPECT_EQ(j["tiled"]["tiles"].get<int>(), 4 * 6);
    EXPECT_TRUE(j["input"]["windowed"].get<bool>());  // the .npy read by windows, the overlay by bands
    EXPECT_TRUE(testing::cubes_identical(read_cube(dir / "w.npy"), read_cube(dir / "t.npy")));
    EXPECT_TRUE(testing::cubes_identical(read_cube(dir / "w.overlay.png"), read_cube(dir / "t.overlay.png")));
    const auto windows = [](const std::filesystem::path& p) { return nlohmann::json::parse(std::ifstream(p))["detections"]; };
    EXPECT_EQ(windows(dir / "w.windows.json"), windows(dir / "t.windows.json"));
    EXPECT_GT(windows(dir / "w.windows.json").size(), 0u);
}

}  // namespace
}  // namespace cubekit

namespace cubekit {
namespace {

// cubekit batch: every scene's output equals its single run; a failed scene is reported with its exit
// code and log and fails the batch; a rerun skips what is complete and redoes what is not.
TEST(BatchCli, RunsResumesAndReportsFailures) {
    namespace fs = std::filesystem;
    const auto dir = testing::temp_dir("batch");
    const std::string samson = testing::q(testing::source_path("data/samson/samson_1.img"));
    fs::create_directories(dir / "in");
    ASSERT_EQ(testing::run_cli("convert " + samson + " " + testing::q(dir / "in" / "a.npy") + " --quiet").exit_code, 0);
    ASSERT_EQ(testing::run_cli("convert " + samson + " " + testing::q(dir / "in" / "b.hdr") + " --crop 0,0,40,30 --quiet").exit_code, 0);
    std::ofstream(dir / "in" / "c.npy") << "not a cube";
    const std::string batch = "batch rcmg " + testing::q(dir / "in") + " --out-dir " + testing::q(dir / "out") +
                              " --args '--backend cpu --connectivity 4' --json -q";
    const auto first = testing::run_cli(batch);
    EXPECT_EQ(first.exit_code, 2) << first.err;  // c.npy's own exit code
    auto j = nlohmann::json::parse(first.out);
    EXPECT_EQ(j["ok"], 2);
    EXPECT_EQ(j["failed"], 1);
    EXPECT_EQ(j["scenes"][2]["status"], "failed");
    EXPECT_NE(j["scenes"][2]["error"].get<std::string>().find("c.npy"), std::string::npos);
    EXPECT_TRUE(fs::exists(dir / "out" / "c.log"));
    EXPECT_FALSE(fs::exists(dir / "out" / "c.json"));
    for (const char* stem : {"a", "b"}) {
        const auto report = nlohmann::json::parse(std::ifstream(dir / "out" / (std::string(stem) + ".json")));
        EXPECT_EQ(report["command"], "rcmg");
        EXPECT_EQ(report["parameters"]["connectivity"], 4);
        const fs::path in = dir / "in" / (std::string(stem) + (stem[0] == 'a' ? ".npy" : ".hdr"));
        ASSERT_EQ(testing::run_cli("rcmg " + testing::q(in) + " " + testing::q(dir / "single.npy") +
                                   " --backend cpu --connectivity 4 --quiet").exit_code, 0);
        EXPECT_TRUE(testing::cubes_identical(read_cube(dir / "single.npy"), read_cube(dir / "out" / (std::string(stem) + ".npy"))));
    }
    // Resume: a and b are complete; removing a's report makes a run again.
    fs::remove(dir / "out" / "a.json");
    j = nlohmann::json::parse(testing::run_cli(batch).out);
    EXPECT_EQ(j["scenes"][0]["status"], "ok");
    EXPECT_EQ(j["scenes"][1]["status"], "skipped");
    EXPECT_EQ(j["skipped"], 1);
    // Bad invocations.
    EXPECT_EQ(testing::run_cli("batch rcmg " + testing::q(dir / "in") + " --out-dir " + testing::q(dir / "o2") + " --out-ext npy").exit_code, 2);
    EXPECT_EQ(testing::run_cli("batch rcmg " + testing::q(dir / "missing") + " --out-dir " + testing::q(dir / "o3")).exit_code, 3);
    std::ofstream(dir / "in" / "a.png") << "x";  // a.npy and a.png would both write a.npy
    const auto clash = testing::run_cli("batch rcmg " + testing::q(dir / "in") + " --out-dir " + testing::q(dir / "o4"));
    EXPECT_EQ(clash.exit_code, 2);
    EXPECT_NE(clash.err.find("would both write"), std::string::npos) << clash.err;
}

// One worker process runs a slot's scenes one after another: a scene that fails leaves the next ones
// in the same worker unaffected (same output as a process of its own), the reports carry the worker's
// per-scene timings (no `startup`: the process was already running), and two slots split the scenes.
TEST(BatchCli, WorkerRunsScenesAfterAFailure) {
    namespace fs = std::filesystem;
    const auto dir = testing::temp_dir("batch_worker");
    const std::string samson = testing::q(testing::source_path("data/samson/samson_1.img"));
    fs::create_directories(dir / "in");
    std::ofstream(dir / "in" / "a0.npy") << "not a cube";
    for (int i = 1; i <= 4; ++i)
        ASSERT_EQ(testing::run_cli("convert " + samson + " " + testing::q(dir / "in" / ("a" + std::to_string(i) + ".npy")) +
                                   " --crop " + std::to_string(i) + ",0,50,40 --quiet").exit_code, 0);
    for (int jobs : {1, 2}) {
        const fs::path out = dir / ("out" + std::to_string(jobs));
        const auto run = testing::run_cli("batch rcmg " + testing::q(dir / "in") + " --out-dir " + testing::q(out) +
                                          " --jobs " + std::to_string(jobs) + " --args '--backend cpu' --json -q");
        EXPECT_EQ(run.exit_code, 2) << run.err;
        const auto j = nlohmann::json::parse(run.out);
        EXPECT_EQ(j["ok"], 4);
        EXPECT_EQ(j["scenes"][0]["status"], "failed");
        EXPECT_NE(j["scenes"][0]["error"].get<std::string>().find("a0.npy"), std::string::npos) << j.dump();
        for (int i = 1; i <= 4; ++i) {
            const std::string stem = "a" + std::to_string(i);
            const auto report = nlohmann::json::parse(std::ifstream(out / (stem + ".json")));
            EXPECT_TRUE(report["timings_ms"].contains("total"));
            EXPECT_FALSE(report["timings_ms"].contains("startup"));
            ASSERT_EQ(testing::run_cli("rcmg " + testing::q(dir / "in" / (stem + ".npy")) + " " + testing::q(dir / "single.npy") +
                                       " --backend cpu --quiet").exit_code, 0);
            EXPECT_TRUE(testing::cubes_identical(read_cube(dir / "single.npy"), read_cube(out / (stem + ".npy")))) << stem;
        }
    }
}

}  // namespace
}  // namespace cubekit

namespace cubekit {
namespace {

// The classical detectors' apply step in tiles equals the whole-scene apply bit for bit.
TEST(Tiles, ApplyDetectorTiledEqualsWholeOnTheCpu) {
    const Context& cpu = cpu_context();
    const Cube cube = testing::random_cube(33, 21, 7, DType::I16, testing::test_seed(), -500, 2000, Layout::BIP);
    const auto dir = testing::temp_dir("tiles_classical");
    write_cube(cube, dir / "c.hdr", {.envi_keep_layout = true});
    const CubeFile file(dir / "c.hdr");
    std::vector<double> target(7);
    for (int b = 0; b < 7; ++b) target[std::size_t(b)] = cube.value(3, 4, b);
    for (Detector d : {Detector::Rx, Detector::Mf, Detector::Ace, Detector::Cem, Detector::Sam}) {
        for (DType t : {DType::F64, DType::F32}) {
            ClassicalOptions o;
            o.detector = d;
            o.out_type = t;
            const BackgroundStats stats = fit_background(cpu, cube, o);
            const std::vector<double> tg = d == Detector::Rx ? std::vector<double>{} : target;
            const Cube whole = apply_detector(cpu, cube, stats, o, tg);
            for (auto [tw, th] : std::vector<std::pair<int, int>>{{1, 1}, {8, 5}, {33, 2}}) {
                SCOPED_TRACE(::testing::Message() << enum_name(d) << " " << dtype_name(t) << " tiles " << tw << "x" << th);
                Cube a(33, 21, 1, t), b(33, 21, 1, t);
                apply_detector_tiled(cpu, cube, stats, o, tg, a.mutable_view(), {.tile_width = tw, .tile_height = th});
                apply_detector_tiled(cpu, file, stats, o, tg, b.mutable_view(), {.tile_width = tw, .tile_height = th});
                ASSERT_TRUE(testing::cubes_identical(whole, a));
                ASSERT_TRUE(testing::cubes_identical(whole, b));
            }
        }
    }
}

// cubekit detect rx with tile flags writes the same scores.
TEST(TilesCli, DetectRxTileSizeWritesTheSameScores) {
    const auto dir = testing::temp_dir("tiles_cli_rx");
    write_cube(testing::random_cube(30, 26, 6, DType::F32, testing::test_seed(), 0, 1, Layout::BSQ), dir / "c.npy");
    const std::string base = "detect rx " + testing::q(dir / "c.npy") + " ";
    ASSERT_EQ(testing::run_cli(base + testing::q(dir / "w.npy") + " --backend cpu --quiet").exit_code, 0);
    const auto tiled = testing::run_cli(base + testing::q(dir / "t.npy") + " --backend cpu --tile-size 7x4 --json --quiet");
    ASSERT_EQ(tiled.exit_code, 0) << tiled.err;
    EXPECT_EQ(nlohmann::json::parse(tiled.out)["tiled"]["tiles"].get<int>(), 5 * 7);
    EXPECT_TRUE(testing::cubes_identical(read_cube(dir / "w.npy"), read_cube(dir / "t.npy")));
    ASSERT_EQ(testing::run_cli(base + testing::q(dir / "lw.npy") + " --backend cpu --window 3,9 --quiet").exit_code, 0);
    const auto local = testing::run_cli(base + testing::q(dir / "l.npy") + " --backend cpu --window 3,9 --tile-size 7x4 --quiet");
    ASSERT_EQ(local.exit_code, 0) << local.err;
    EXPECT_TRUE(testing::cubes_identical(read_cube(dir / "lw.npy"), read_cube(dir / "l.npy")));
    // With given statistics the cube is read by windows and the scores go into OUT tile by tile.
    ASSERT_EQ(testing::run_cli(base + testing::q(dir / "s.npy") + " --backend cpu --stats-out " + testing::q(dir / "s.json") +
                               " --quiet").exit_code, 0);
    const auto given = testing::run_cli(base + testing::q(dir / "g.npy") + " --backend cpu --stats-in " + testing::q(dir / "s.json") +
                                        " --tile-size 7x4 --json --quiet");
    ASSERT_EQ(given.exit_code, 0) << given.err;
    const auto jg = nlohmann::json::parse(given.out);
    EXPECT_TRUE(jg["input"]["windowed"].get<bool>());
    EXPECT_TRUE(jg["outputs"][0].value("streamed", false));
    EXPECT_EQ(testing::read_text(dir / "s.npy"), testing::read_text(dir / "g.npy"));
    // Without them, the statistics are fitted from the file a strip of rows at a time: the same
    // statistics (file) and scores as the whole run's.
    const auto fitted = testing::run_cli(base + testing::q(dir / "f.npy") + " --backend cpu --memory-limit 3K --stats-out " +
                                         testing::q(dir / "f.json") + " --json --quiet");
    ASSERT_EQ(fitted.exit_code, 0) << fitted.err;
    const auto jf = nlohmann::json::parse(fitted.out);
    EXPECT_TRUE(jf["input"]["windowed"].get<bool>());
    bool streamed = false;
    for (const auto& o : jf["outputs"]) streamed |= o.value("streamed", false) && o["path"] == (dir / "f.npy").string();
    EXPECT_TRUE(streamed) << fitted.out;
    EXPECT_EQ(testing::read_text(dir / "s.json"), testing::read_text(dir / "f.json"));
    EXPECT_EQ(testing::read_text(dir / "s.npy"), testing::read_text(dir / "f.npy"));
}

}  // namespace
}  // namespace cubekit

namespace cubekit {
namespace {

// Local RX in tiles (halo OUTER - 1, the scene's screening) equals local RX of the whole cube, also
// where a band is constant inside some tiles only and where a pixel is NaN.
TEST(Tiles, LocalRxTiledEqualsWholeOnTheCpu) {
    const Context& cpu = cpu_context();
    Cube cube = testing::random_cube(30, 25, 5, DType::F32, testing::test_seed(), 0, 100, Layout::BSQ);
    for (int y = 0; y < 12; ++y)
        for (int x = 0; x < 30; ++x) cube.set_value(x, y, 2, 7.0);  // band 2 constant in the top rows only
    cube.set_value(4, 20, 1, std::numeric_limits<double>::quiet_NaN());
    for (int y = 13; y < 25; ++y)  // one spectrum over a corner: singular windows there (NaN scores)
        for (int x = 18; x < 30; ++x)
            for (int b = 0; b < 5; ++b) cube.set_value(x, y, b, 3.0 + b);
    const auto dir = testing::temp_dir("tiles_local_rx");
    write_cube(cube, dir / "c.npy");
    ClassicalOptions o;
    o.window = {3, 9};
    for (DType t : {DType::F64, DType::F32}) {
        o.out_type = t;
        LocalRxReport whole_report, tiled_report;
        const Cube whole = local_rx(cpu, cube, o, &whole_report);
        EXPECT_GT(whole_report.singular, 0);
        for (auto [tw, th] : std::vector<std::pair<int, int>>{{1, 1}, {7, 4}, {30, 3}}) {
            SCOPED_TRACE(::testing::Message() << dtype_name(t) << " tiles " << tw << "x" << th);
            Cube out(30, 25, 1, t);
            local_rx_tiled(cpu, cube, o, out.mutable_view(), {.tile_width = tw, .tile_height = th}, &tiled_report);
            ASSERT_TRUE(testing::cubes_identical(whole, out));
            EXPECT_EQ(tiled_report.singular, whole_report.singular);
            // From the file read by windows (screening and the report's second look in strips of 2 rows).
            Cube from_file(30, 25, 1, t);
            local_rx_tiled(cpu, CubeFile(dir / "c.npy"), o, from_file.mutable_view(),
                           {.memory_limit = 2 * 30 * 5 * 4, .tile_width = tw, .tile_height = th}, &tiled_report);
            ASSERT_TRUE(testing::cubes_identical(whole, from_file));
            EXPECT_EQ(tiled_report.singular, whole_report.singular);
        }
    }
}

}  // namespace
}  // namespace cubekit
