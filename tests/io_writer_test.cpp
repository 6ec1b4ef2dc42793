// CubeFileWriter: outputs filled in place (tile by tile) are the same files write_cube writes, appear
// only on commit(), and leave nothing behind when abandoned or when the disk refuses their size.
#include <signal.h>
#include <sys/resource.h>

#include <thread>

#include "cubekit/context.hpp"
#include "io_test_helpers.hpp"

namespace fs = std::filesystem;
using namespace cubekit;
using namespace cubekit::io_test;
using cubekit::testing::cubes_identical;
using cubekit::testing::temp_dir;
using cubekit::testing::test_seed;

namespace {

Metadata sample_metadata(int bands) {
    Metadata m;
    for (int b = 0; b < bands; ++b) m.wavelengths.push_back(400.5 + 10 * b);
    m.wavelength_units = "Nanometers";
    m.map_info = "UTM, 1, 1, 500000, 4100000, 30, 30, 13, North, WGS-84";
    return m;
}

// Fills the writer's view from `c` in horizontal strips, from two threads, as the tile runner does.
void fill_in_strips(const CubeFileWriter& w, const Cube& c) {
    const Context cpu;
    const auto strip = [&](int y0, int h) {
        copy_cube(cpu, c.view().window(0, y0, c.width(), h), w.view().window(0, y0, c.width(), h));
    };
    const int half = c.height() / 2;
    std::thread t([&] { strip(half, c.height() - half); });
    strip(0, half);
    t.join();
}

}  // namespace

TEST(IoWriter, SameBytesAsWriteCubeEveryFormatLayoutAndType) {
    const fs::path dir = temp_dir("writer-bytes");
    int n = 0;
    for (const DType t : {DType::U8, DType::I16, DType::U16, DType::I32, DType::F32, DType::F64})
        for (const Layout l : {Layout::BSQ, Layout::BIL, Layout::BIP})
            for (const int bands : {1, 5}) {
                Cube c = sample_cube(7, 6, bands, t, l, test_seed() + ++n);
                c.metadata() = sample_metadata(bands);
                for (const char* ext : {".npy", ".img", ".hdr"}) {
                    // A stem per extension: x.img and x.hdr name the same ENVI pair.
                    const std::string stem = std::to_string(n) + (ext + 1);
                    const fs::path whole = dir / ("whole" + stem + ext);
                    const fs::path streamed = dir / ("streamed" + stem + ext);
                    write_cube(c, whole);
                    ASSERT_TRUE(CubeFileWriter::streamable(streamed));
                    CubeFileWriter w(streamed, c.shape(), c.metadata());
                    EXPECT_FALSE(fs::exists(streamed));
                    fill_in_strips(w, c);
                    EXPECT_FALSE(fs::exists(streamed));  // nothing in place before commit
                    w.commit();
                    SCOPED_TRACE(std::string(ext) + " " + c.shape().describe());
                    if (std::string(ext) == ".npy") {
                        EXPECT_EQ(get(streamed), get(whole));
                    } else {
                        for (const char* part : {".img", ".hdr"}) {
                            fs::path a = whole, b = streamed;
                            EXPECT_EQ(get(b.replace_extension(part)), get(a.replace_extension(part)));
                        }
                    }
                    EXPECT_TRUE(cubes_identical(read_cube(streamed), read_cube(whole)));
                }
            }
    EXPECT_FALSE(has_temporaries(dir));
}

TEST(IoWriter, EnviInterleaveFromOptions) {
    const fs::path dir = temp_dir("writer-interleave");
    const Cube c = sample_cube(5, 4, 3, DType::F32, Layout::BSQ, test_seed());
    WriteOptions o;
    o.envi_keep_layout = false;
    o.envi_layout = Layout::BIL;
    CubeFileWriter w(dir / "x.hdr", c.shape(), {}, o);
    EXPECT_EQ(w.shape().layout, Layout::BIL);
    EXPECT_EQ(w.view().dense_layout(), Layout::BIL);
    fill_in_strips(w, c);
    w.commit();
    const Cube back = read_cube(dir / "x.hdr");
    EXPECT_EQ(back.layout(), Layout::BIL);
    EXPECT_TRUE(cubes_identical(back.to_layout(Layout::BSQ), c));
}

TEST(IoWriter, AbandonedLeavesNothingAndKeepsTheOldFile) {
    const fs::path dir = temp_dir("writer-abandoned");
    put(dir / "keep.npy", "old contents");
    const Cube c = sample_cube(9, 8, 2, DType::F64, Layout::BIP, test_seed());
    {
        CubeFileWriter a(dir / "keep.npy", c.shape());
        CubeFileWriter b(dir / "new.hdr", c.shape());
        fill_in_strips(a, c);
        EXPECT_TRUE(has_temporaries(dir));
    }  // a failed run: neither committed
    EXPECT_EQ(listing(dir), std::set<std::string>{"keep.npy"});
    EXPECT_EQ(get(dir / "keep.npy"), "old contents");
    CubeFileWriter again(dir / "keep.npy", c.shape());
    again.commit();
    EXPECT_THROW(again.commit(), InvalidInput);
}

TEST(IoWriter, RefusedFormatsFoldersAndSizes) {
    const fs::path dir = temp_dir("writer-refused");
    const CubeShape s{.width = 4, .height = 3, .bands = 1, .dtype = DType::U8};
    for (const char* name : {"x.png", "x.ppm", "x.mat", "x.jpg", "x.unknown"}) {
        EXPECT_FALSE(CubeFileWriter::streamable(dir / name)) << name;
        EXPECT_THROW(CubeFileWriter(dir / name, s), InvalidInput) << name;
    }
    const std::string missing = error_of<IoError>([&] { CubeFileWriter(dir / "nope" / "x.npy", s); });
    EXPECT_NE(missing.find((dir / "nope" / "x.npy").string()), std::string::npos) << missing;
    EXPECT_THROW(CubeFileWriter(dir / "e.npy", CubeShape{.width = 0, .height = 3, .bands = 1}), InvalidInput);

    // The size is reserved up front: a file-size limit (like a full disk) fails at construction,
    // with an IoError naming the output, and leaves nothing.
    rlimit old{};
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
    const auto previous = signal(SIGXFSZ, SIG_IGN);
    rlimit lim = old;
    lim.rlim_cur = 4096;
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
    std::string npy_msg, envi_msg;
    const CubeShape big{.width = 64, .height = 64, .bands = 8, .dtype = DType::F32};  // 128 KiB
    try { CubeFileWriter(dir / "big.npy", big); } catch (const IoError& e) { npy_msg = e.what(); } catch (...) {}
    try { CubeFileWriter(dir / "big.hdr", big); } catch (const IoError& e) { envi_msg = e.what(); } catch (...) {}
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, previous);
    EXPECT_NE(npy_msg.find((dir / "big.npy").string()), std::string::npos) << npy_msg;
    EXPECT_NE(npy_msg.find("File too large"), std::string::npos) << npy_msg;
    EXPECT_NE(envi_msg.find((dir / "big.img").string()), std::string::npos) << envi_msg;
    EXPECT_TRUE(listing(dir).empty());
}

// A GeoTIFF cannot be filled in place: its samples go to a scratch beside the target and commit()
// has GDAL write the file. The result reads back as write_cube's does, georeference included; the
// scratch never shows up, committed or abandoned.
TEST(IoWriter, GeoTiffThroughAScratchFile) {
    if (!gdal_available()) GTEST_SKIP() << "built without GDAL";
    const fs::path dir = temp_dir("writer-geotiff");
    int n = 0;
    for (const DType t : {DType::U8, DType::I16, DType::F32, DType::F64})
        for (const int bands : {1, 4}) {
            Cube c = sample_cube(23, 17, bands, t, Layout::BIP, test_seed() + ++n);
            c.metadata().map_info = "UTM, 1, 1, 500000, 4100000, 30, 30, 13, North, WGS-84";
            const fs::path whole = dir / ("whole" + std::to_string(n) + ".tif");
            const fs::path streamed = dir / ("streamed" + std::to_string(n) + ".tif");
            write_cube(c, whole);
            ASSERT_TRUE(CubeFileWriter::streamable(streamed));
            CubeFileWriter w(streamed, c.shape(), c.metadata());
            EXPECT_EQ(w.shape().layout, Layout::BSQ);
            fill_in_strips(w, c);
            EXPECT_FALSE(fs::exists(streamed));
            w.commit();
            SCOPED_TRACE(c.shape().describe());
            const Cube a = read_cube(streamed), b = read_cube(whole);
            EXPECT_TRUE(cubes_identical(a, b));
            EXPECT_TRUE(cubes_identical(a.to_layout(Layout::BIP), c));
            ASSERT_TRUE(a.metadata().geotransform().has_value());
            EXPECT_EQ(a.metadata().geotransform(), b.metadata().geotransform());
            EXPECT_EQ(a.metadata().coordinate_system, b.metadata().coordinate_system);
        }
    EXPECT_FALSE(has_temporaries(dir));
    {
        CubeFileWriter abandoned(dir / "never.tif", CubeShape{.width = 5, .height = 4, .bands = 2, .dtype = DType::F32});
        EXPECT_TRUE(has_temporaries(dir));
    }
    EXPECT_FALSE(fs::exists(dir / "never.tif"));
    EXPECT_FALSE(has_temporaries(dir));
}
