// The georeference of scenes (issue 17, item 5): map info and geotransform shifted with windows, GDAL's
// geotransform turned into an ENVI map info, GeoTIFF written through GDAL with the input's georeference,
// and the CLI's products (gradients, maps) on the input's map.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cubekit/cube.hpp"
#include "cubekit/gradient.hpp"
#include "cubekit/io.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

constexpr const char* kWgs84 =
    "GEOGCS[\"WGS 84\",DATUM[\"WGS_1984\",SPHEROID[\"WGS 84\",6378137,298.257223563]],PRIMEM[\"Greenwich\",0],"
    "UNIT[\"degree\",0.0174532925199433]]";

void expect_near(const std::array<double, 6>& a, const std::array<double, 6>& b) {
    for (std::size_t i = 0; i < 6; ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * (1 + std::abs(b[i]))) << "coefficient " << i;
}

TEST(Georef, MapInfoAndGeotransformAgreeAndShiftWithWindows) {
    Metadata m;
    m.map_info = "UTM, 1, 1, 289061.25, 9120190.75, 28.5, 28.5, 25, South";
    const auto gt = m.geotransform();
    ASSERT_TRUE(gt);
    expect_near(*gt, {289061.25, 28.5, 0, 9120190.75, 0, -28.5});
    // A window keeps every pixel's map coordinates.
    const auto shifted = m.window(10, 20).geotransform();
    ASSERT_TRUE(shifted);
    expect_near(*shifted, {289061.25 + 10 * 28.5, 28.5, 0, 9120190.75 - 20 * 28.5, 0, -28.5});
    // GDAL's form wins over the map info, and shifts the same way.
    Metadata g;
    g.extra["geotransform"] = geotransform_text({100, 2, 0, 500, 0, -3});
    expect_near(*g.window(4, 5).geotransform(), {108, 2, 0, 485, 0, -3});
    // The map info written for a north-up geotransform reads back as it.
    Metadata back;
    back.map_info = map_info_from_geotransform({100, 2, 0, 500, 0, -3});
    expect_near(*back.geotransform(), {100, 2, 0, 500, 0, -3});
    EXPECT_EQ(map_info_from_geotransform({100, 2, 0.5, 500, 0, -3}), "");  // rotated: no map info
    Metadata rotated;
    rotated.map_info = "UTM, 1, 1, 5, 6, 1, 1, 25, South, rotation=30";
    EXPECT_FALSE(rotated.geotransform());
    EXPECT_FALSE(Metadata{}.geotransform());
    // georeference() keeps only the georeference.
    Metadata full = g;
    full.wavelengths = {1, 2};
    full.coordinate_system = kWgs84;
    const Metadata only = full.georeference();
    EXPECT_TRUE(only.wavelengths.empty());
    EXPECT_EQ(only.coordinate_system, kWgs84);
    EXPECT_EQ(only.extra.at("geotransform"), g.extra.at("geotransform"));
}

TEST(Georef, CropShiftsTheGeotransform) {
    Cube c = testing::random_cube(30, 20, 2, DType::U8, testing::test_seed(), 0, 255);
    c.metadata().extra["geotransform"] = geotransform_text({1000, 10, 0, 2000, 0, -10});
    c.metadata().map_info = map_info_from_geotransform({1000, 10, 0, 2000, 0, -10});
    const Cube w = c.crop(3, 4, 10, 10);
    expect_near(*w.metadata().geotransform(), {1030, 10, 0, 1960, 0, -10});
    Metadata from_map_info;
    from_map_info.map_info = w.metadata().map_info;
    expect_near(*from_map_info.geotransform(), {1030, 10, 0, 1960, 0, -10});
}

TEST(Georef, GeoTiffWrittenThroughGdalKeepsSamplesAndGeoreference) {
    const auto dir = testing::temp_dir("georef_tif");
    if (!gdal_available()) {
        // Without GDAL a .tif output is refused at once, naming the reason.
        try {
            output_format(dir / "g.tif");
            FAIL() << ".tif accepted without GDAL";
        } catch (const InvalidInput& e) {
            EXPECT_NE(std::string(e.what()).find("GDAL"), std::string::npos) << e.what();
        }
        GTEST_SKIP() << "GDAL not available: the refusal was checked";
    }
    for (DType t : {DType::U8, DType::I16, DType::F32, DType::F64}) {
        SCOPED_TRACE(std::string(dtype_name(t)));
        Cube c = testing::random_cube(37, 23, 3, t, testing::test_seed(), -100, 100, Layout::BIP);
        c.metadata().coordinate_system = kWgs84;
        c.metadata().extra["geotransform"] = geotransform_text({-3.5, 0.01, 0, 40.25, 0, -0.02});
        write_cube(c, dir / "c.tif");
        const Cube back = read_cube(dir / "c.tif");
        EXPECT_TRUE(testing::cubes_identical(Cube::from_view(c.view(), Layout::BSQ), back));
        ASSERT_TRUE(back.metadata().geotransform());
        expect_near(*back.metadata().geotransform(), {-3.5, 0.01, 0, 40.25, 0, -0.02});
        EXPECT_NE(back.metadata().coordinate_system.find("WGS"), std::string::npos);
        EXPECT_FALSE(back.metadata().map_info.empty());  // an ENVI output of it stays georeferenced
    }
    // A folder that does not exist: the system's refusal, and nothing written.
    const Cube small = testing::random_cube(5, 5, 1, DType::U16, 1, 0, 50);
    EXPECT_THROW(write_cube(small, dir / "missing" / "g.tif"), IoError);
    for (const auto& e : std::filesystem::directory_iterator(dir))
        EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

// A GeoTIFF is read by GDAL's windows (a scene larger than memory never has to fit): every window,
// into a dense BSQ buffer or any other strides, from several threads, equals the whole read; the CLI's
// tiled RCMG reads it so.
TEST(Georef, GeoTiffReadByWindows) {
    if (!gdal_available()) GTEST_SKIP() << "GDAL not available";
    const auto dir = testing::temp_dir("georef_windows");
    Cube c = testing::random_cube(67, 45, 4, DType::I16, testing::test_seed(), -300, 3000);
    c.metadata().coordinate_system = kWgs84;
    c.metadata().extra["geotransform"] = geotransform_text({10, 0.5, 0, 60, 0, -0.5});
    write_cube(c, dir / "s.tif");
    const CubeFile f(dir / "s.tif");
    ASSERT_TRUE(f.windowed());
    EXPECT_EQ(f.shape().width, 67);
    EXPECT_EQ(f.shape().bands, 4);
    expect_near(*f.metadata().geotransform(), {10, 0.5, 0, 60, 0, -0.5});
    const Cube whole = read_cube(dir / "s.tif");
    struct Window { int x0, y0, w, h; };
    const Window windows[] = {{0, 0, 67, 45}, {5, 7, 20, 9}, {66, 44, 1, 1}, {0, 30, 67, 15}};
#pragma omp parallel for num_threads(4)
    for (int i = 0; i < 4; ++i) {
        const Window& w = windows[i];
        for (Layout l : {Layout::BSQ, Layout::BIP}) {
            Cube got = Cube::uninitialized(w.w, w.h, 4, DType::I16, l);
            f.read_window(w.x0, w.y0, w.w, w.h, got.mutable_view());
            const bool same = testing::cubes_identical(whole.crop(w.x0, w.y0, w.w, w.h), Cube::from_view(got.view(), Layout::BSQ));
#pragma omp critical
            EXPECT_TRUE(same) << "window " << i << " layout " << int(l);
        }
    }
    const auto r = testing::run_cli("rcmg " + testing::q(dir / "s.tif") + " " + testing::q(dir / "g.tif") +
                                    " --backend cpu --memory-limit 4K --json --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["input"]["windowed"].get<bool>());
    EXPECT_GT(j["tiled"]["tiles"].get<int>(), 4);
    // The GeoTIFF output is filled tile by tile (through its scratch file), not held whole.
    bool streamed = false;
    for (const auto& o : j["outputs"]) streamed |= o.value("streamed", false) && o["path"] == (dir / "g.tif").string();
    EXPECT_TRUE(streamed) << r.out;
    const Cube g = read_cube(dir / "g.tif");
    EXPECT_TRUE(testing::cubes_identical(rcmg(testing::cpu_context(), c), g));
    expect_near(*g.metadata().geotransform(), {10, 0.5, 0, 60, 0, -0.5});
    EXPECT_EQ(g.metadata().coordinate_system.empty(), false);
    EXPECT_EQ(testing::folder_listing(dir).find(".tmp-"), std::string::npos) << testing::folder_listing(dir);
}

// `cubekit rcmg L7_ETMs.tif g.tif g.hdr`: both outputs lie on the input's map; convert --crop shifts it.
TEST(GeorefCli, GradientOfAGeoTiffSceneKeepsItsGeoreference) {
    const auto l7 = testing::shared_data_path("multispectral/L7_ETMs.tif");
    if (!l7) GTEST_SKIP() << "multispectral/L7_ETMs.tif not in shared data";
    if (!gdal_available()) GTEST_SKIP() << "GDAL not available";
    const auto dir = testing::temp_dir("georef_cli");
    const Cube scene = read_cube(*l7);
    const auto gt = scene.metadata().geotransform();
    ASSERT_TRUE(gt);
    const auto r = testing::run_cli("rcmg " + testing::q(*l7) + " " + testing::q(dir / "g.tif") + " " +
                                    testing::q(dir / "g.hdr") + " --backend cpu --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const Cube tif = read_cube(dir / "g.tif"), hdr = read_cube(dir / "g.hdr");
    EXPECT_TRUE(testing::cubes_identical(rcmg(testing::cpu_context(), scene), tif));
    EXPECT_TRUE(testing::cubes_identical(tif, hdr));
    for (const Cube* c : {&tif, &hdr}) {
        ASSERT_TRUE(c->metadata().geotransform());
        expect_near(*c->metadata().geotransform(), *gt);
        EXPECT_NE(c->metadata().coordinate_system.find("UTM"), std::string::npos);
    }
    const auto crop = testing::run_cli("convert " + testing::q(*l7) + " " + testing::q(dir / "crop.tif") + " --crop 10,20,50,40 --quiet");
    ASSERT_EQ(crop.exit_code, 0) << crop.err;
    const auto cgt = read_cube(dir / "crop.tif").metadata().geotransform();
    ASSERT_TRUE(cgt);
    expect_near(*cgt, {(*gt)[0] + 10 * (*gt)[1], (*gt)[1], 0, (*gt)[3] + 20 * (*gt)[5], 0, (*gt)[5]});
}

}  // namespace
}  // namespace cubekit
