// Tests of the I/O module against real files (the embedded Samson scene, ../shared/data), format
// detection, output naming, atomic writes and their failure modes, and to_display_u8.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cmath>
#include <limits>

#include "io_test_helpers.hpp"

namespace fs = std::filesystem;
using namespace cubekit;
using namespace cubekit::io_test;
using cubekit::testing::cubes_identical;
using cubekit::testing::shared_data_path;
using cubekit::testing::source_path;
using cubekit::testing::temp_dir;
using cubekit::testing::test_seed;

namespace {

// Sample (x, y, b) of a raw little-endian int16 file, at element offset `index`.
double raw_i16(const std::string& raw, std::size_t index) {
    return double(std::int16_t(std::uint16_t(std::uint8_t(raw[2 * index]) | std::uint8_t(raw[2 * index + 1]) << 8)));
}

std::pair<double, double> min_max(const Cube& c) {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (int b = 0; b < c.bands(); ++b)
        for (int y = 0; y < c.height(); ++y)
            for (int x = 0; x < c.width(); ++x) lo = std::min(lo, c.value(x, y, b)), hi = std::max(hi, c.value(x, y, b));
    return {lo, hi};
}

}  // namespace

// ---- real scenes --------------------------------------------------------------------------------

TEST(IoScenes, EmbeddedSamson) {
    const fs::path p = source_path("data/samson/samson_1.img");
    if (!fs::exists(p)) GTEST_SKIP() << p << " is missing";
    EXPECT_EQ(detect_format(p), FileFormat::Envi);
    const Cube c = read_cube(p);  // header samson_1.img.hdr (appended naming)
    ASSERT_EQ(c.shape().describe(), "95x95x156 i16 bsq");
    const Metadata& m = c.metadata();
    ASSERT_EQ(m.wavelengths.size(), 156u);
    EXPECT_EQ(m.wavelengths.front(), 400.938721);
    EXPECT_EQ(m.wavelengths.back(), 899.074585);
    EXPECT_EQ(m.wavelength_units, "Nanometers");
    EXPECT_EQ(m.map_info.rfind("UTM, 1.000, 1.000, 612730.910, 4074488.708", 0), 0u) << m.map_info;
    EXPECT_EQ(m.coordinate_system.rfind("PROJCS[\"UTM_Zone_10N\"", 0), 0u) << m.coordinate_system;
    EXPECT_NE(m.description.find("File Resize Result"), std::string::npos);
    EXPECT_EQ(m.extra.at("default bands"), "{85,50,10}");
    EXPECT_EQ(m.extra.at("sensor type"), "Unknown");
    // Values against the raw file: BSQ, element (b*H + y)*W + x; range -17..1402 (data README).
    const std::string raw = get(p);
    for (int b : {0, 77, 155})
        for (int y : {0, 13, 94})
            for (int x : {0, 50, 94}) EXPECT_EQ(c.value(x, y, b), raw_i16(raw, (std::size_t(b) * 95 + y) * 95 + x));
    EXPECT_EQ(min_max(c), std::make_pair(-17.0, 1402.0));
    fs::path hdr = p;
    hdr += ".hdr";
    EXPECT_TRUE(cubes_identical(c, read_cube(hdr)));
    if (const auto shared = shared_data_path("envi/samson/samson_1.img")) {
        EXPECT_TRUE(cubes_identical(c, read_cube(*shared)));
    }

    // Round trips through ENVI (as BIP, metadata kept) and .npy.
    const fs::path dir = temp_dir("samson");
    write_cube(c, dir / "s.bip", {.format = FileFormat::Auto, .envi_keep_layout = false, .envi_layout = Layout::BIP});
    const Cube e = read_cube(dir / "s.bip");
    EXPECT_EQ(e.layout(), Layout::BIP);
    EXPECT_TRUE(cubes_identical(c, e));
    EXPECT_EQ(e.metadata().wavelengths, m.wavelengths);
    EXPECT_EQ(e.metadata().map_info, m.map_info);
    EXPECT_EQ(e.metadata().coordinate_system, m.coordinate_system);
    EXPECT_EQ(e.metadata().extra, m.extra);
    write_cube(c, dir / "s.npy");
    EXPECT_TRUE(cubes_identical(c, read_cube(dir / "s.npy")));
}

TEST(IoScenes, JasperRidgeBil) {
    const auto p = shared_data_path("envi/jasper_ridge/jasperRidge2_R198.img");
    if (!p) GTEST_SKIP() << "envi/jasper_ridge/jasperRidge2_R198.img not in shared data";
    const Cube c = read_cube(*p);  // header jasperRidge2_R198.hdr (extension replaced)
    ASSERT_EQ(c.shape().describe(), "100x100x198 i16 bil");
    EXPECT_EQ(c.metadata().wavelengths.size(), 198u);
    EXPECT_EQ(c.metadata().wavelengths.front(), 399.369995);
    EXPECT_EQ(c.metadata().extra.at("reflectance scale factor"), "10000.000000");
    EXPECT_NE(c.metadata().extra.at("bbl").find('{'), std::string::npos);  // kept verbatim, braces included
    // BIL: element (y*B + b)*W + x; range -448..5437 (data README).
    const std::string raw = get(*p);
    for (int b : {0, 100, 197})
        for (int y : {0, 42, 99})
            for (int x : {0, 7, 99}) EXPECT_EQ(c.value(x, y, b), raw_i16(raw, (std::size_t(y) * 198 + b) * 100 + x));
    EXPECT_EQ(min_max(c), std::make_pair(-448.0, 5437.0));
    fs::path hdr = *p;
    hdr.replace_extension(".hdr");
    EXPECT_EQ(detect_format(hdr), FileFormat::Envi);
    EXPECT_TRUE(cubes_identical(c, read_cube(hdr)));
}

TEST(IoScenes, GdalGeoTiff) {
    const auto p = shared_data_path("multispectral/L7_ETMs.tif");
    if (!p) GTEST_SKIP() << "multispectral/L7_ETMs.tif not in shared data";
    if (!gdal_available()) {
        const std::string msg = error_of<InvalidInput>([&] { read_cube(*p); });
        EXPECT_NE(msg.find("GDAL support is not built in; install libgdal-dev and rebuild"), std::string::npos) << msg;
        const std::string forced = error_of<InvalidInput>([&] { read_cube(*p, {.var = "", .format = FileFormat::Gdal}); });
        EXPECT_NE(forced.find("GDAL support is not built in; install libgdal-dev and rebuild"), std::string::npos) << forced;
        return;
    }
    EXPECT_EQ(detect_format(*p), FileFormat::Gdal);
    const Cube c = read_cube(*p);
    EXPECT_EQ(c.shape().describe(), "349x352x6 u8 bsq");  // TIFF ImageWidth 349, ImageLength 352
    EXPECT_NE(c.metadata().coordinate_system.find("UTM"), std::string::npos) << c.metadata().coordinate_system;
    const std::string gt = c.metadata().extra.at("geotransform");
    EXPECT_EQ(std::count(gt.begin(), gt.end(), ','), 5) << gt;
    const auto [lo, hi] = min_max(c);
    EXPECT_LT(lo, hi);
}

// ---- detection and naming -----------------------------------------------------------------------

TEST(IoDetect, MagicBytesEnviAndErrors) {
    const fs::path dir = temp_dir("detect");
    put(dir / "a.bin", "\xFF\xD8\xFF\xE0 jpeg?");
    EXPECT_EQ(detect_format(dir / "a.bin"), FileFormat::Jpeg);
    put(dir / "b.bin", "P6\n2 2\n255\n");
    EXPECT_EQ(detect_format(dir / "b.bin"), FileFormat::Pnm);
    put(dir / "c.bin", "MATLAB 5.0 MAT-file");
    EXPECT_EQ(detect_format(dir / "c.bin"), FileFormat::Mat);
    put(dir / "d.bin", std::string(512, '\0') + std::string("\x89HDF\r\n\x1a\n", 8));
    EXPECT_EQ(detect_format(dir / "d.bin"), FileFormat::Mat);
    put(dir / "e.bin", std::string("\x93NUMPY\x01\x00", 8));
    EXPECT_EQ(detect_format(dir / "e.bin"), FileFormat::Npy);
    put(dir / "f.bin", std::string("\x89PNG\r\n\x1a\n", 8));
    EXPECT_EQ(detect_format(dir / "f.bin"), FileFormat::Png);
    // Raw u8 samples that begin like a JPEG are still ENVI when the header is beside them.
    put(dir / "g.raw", "\xFF\xD8\xFF\x10");
    put(dir / "g.hdr", "ENVI\nsamples = 2\nlines = 2\nbands = 1\ndata type = 1\n");
    EXPECT_EQ(detect_format(dir / "g.raw"), FileFormat::Envi);
    EXPECT_EQ(detect_format(dir / "g.hdr"), FileFormat::Envi);
    EXPECT_EQ(read_cube(dir / "g.raw").value(1, 1, 0), 16);

    std::string msg = error_of<IoError>([&] { detect_format(dir / "missing.img"); });
    EXPECT_NE(msg.find((dir / "missing.img").string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
    EXPECT_NE(error_of<IoError>([&] { read_cube(dir / "missing.npy"); }).find("No such file or directory"), std::string::npos);
    EXPECT_NE(error_of<IoError>([&] { detect_format(dir); }).find("Is a directory"), std::string::npos);
    put(dir / "junk.xyz", "just some text that is no image");
    msg = error_of<InvalidInput>([&] { detect_format(dir / "junk.xyz"); });
    EXPECT_NE(msg.find("not a recognised format"), std::string::npos) << msg;
}

TEST(IoDetect, OutputFormatAndNames) {
    const std::pair<const char*, FileFormat> cases[] = {
        {"a.hdr", FileFormat::Envi}, {"a.IMG", FileFormat::Envi}, {"a.dat", FileFormat::Envi}, {"a.raw", FileFormat::Envi},
        {"a.bsq", FileFormat::Envi}, {"a.bil", FileFormat::Envi}, {"a.bip", FileFormat::Envi}, {"a.npy", FileFormat::Npy},
        {"a.png", FileFormat::Png},  {"a.pgm", FileFormat::Pnm},  {"a.ppm", FileFormat::Pnm},  {"a.pnm", FileFormat::Pnm}};
    for (const auto& [name, f] : cases) EXPECT_EQ(output_format(name), f) << name;
    for (const char* ro : {"a.mat", "a.jpg", "a.JPEG"})
        EXPECT_NE(error_of<InvalidInput>([&] { output_format(ro); }).find("can be read but not written"), std::string::npos) << ro;
    const std::string msg = error_of<InvalidInput>([&] { output_format("out.xyz"); });
    EXPECT_EQ(msg, "output_format: out.xyz: extension '.xyz' names no output format "
                   "(.hdr, .img, .dat, .raw, .bsq, .bil, .bip, .npy, .png, .pgm, .ppm, .pnm are; .tif with GDAL)");
    for (FileFormat f : {FileFormat::Auto, FileFormat::Envi, FileFormat::Npy, FileFormat::Mat, FileFormat::Png,
                         FileFormat::Pnm, FileFormat::Jpeg, FileFormat::Gdal})
        EXPECT_EQ(parse_format(format_name(f)), f);
    EXPECT_EQ(parse_format("JPG"), FileFormat::Jpeg);
    EXPECT_EQ(error_of<InvalidInput>([] { parse_format("tiff", "--format"); }),
              "parse_format: --format = 'tiff'; expected one of auto, envi, npy, mat, png, pnm, jpeg, gdal");
    EXPECT_NE(error_of<InvalidInput>([] { write_cube(Cube(1, 1, 1, DType::U8), "x.npy", {.format = FileFormat::Jpeg}); })
                  .find("cannot be written"),
              std::string::npos);
}

// ---- atomic writes ------------------------------------------------------------------------------

TEST(IoAtomic, PathBelowARegularFileOrMissingFolder) {
    const fs::path dir = temp_dir("atomic-notdir");
    put(dir / "plain", "x");
    const Cube f = sample_cube(4, 3, 2, DType::F32, Layout::BSQ, test_seed());
    const Cube u = sample_cube(4, 3, 3, DType::U8, Layout::BSQ, test_seed());
    for (const char* name : {"out.npy", "out.img", "out.hdr", "out.png", "out.ppm"}) {
        const fs::path target = dir / "plain" / name;
        const Cube& c = std::string(name).find(".p") != std::string::npos ? u : f;
        const std::string msg = error_of<IoError>([&] { write_cube(c, target); });
        // Named: the file that could not be created (for out.hdr that is the data file out.img).
        EXPECT_NE(msg.find((dir / "plain" / "out.").string()), std::string::npos) << msg;
        EXPECT_NE(msg.find("Not a directory"), std::string::npos) << msg;
    }
    const std::string msg = error_of<IoError>([&] { write_cube(f, dir / "nope" / "out.img"); });
    EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
    EXPECT_EQ(listing(dir), std::set<std::string>{"plain"});
    EXPECT_EQ(get(dir / "plain"), "x");
}

TEST(IoAtomic, WriteErrorLeavesNeitherOutputNorTemporary) {
    // A file-size limit makes write() fail with EFBIG part-way through, like a full disk would.
    const fs::path dir = temp_dir("atomic-efbig");
    put(dir / "keep.npy", "old contents");
    const Cube big = sample_cube(64, 64, 8, DType::F32, Layout::BSQ, test_seed());  // 128 KiB
    std::string npy_msg, envi_msg, keep_msg;
    rlimit old{};
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
    const auto previous = signal(SIGXFSZ, SIG_IGN);  // else the process is killed instead
    rlimit lim = old;
    lim.rlim_cur = 4096;
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
    // Nothing is printed while the limit is on (test output may go to a file).
    try { write_cube(big, dir / "big.npy"); } catch (const IoError& e) { npy_msg = e.what(); } catch (...) {}
    try { write_cube(big, dir / "big.img"); } catch (const IoError& e) { envi_msg = e.what(); } catch (...) {}
    try { write_cube(big, dir / "keep.npy"); } catch (const IoError& e) { keep_msg = e.what(); } catch (...) {}
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, previous);
    for (const std::string& m : {npy_msg, envi_msg, keep_msg}) EXPECT_NE(m.find("File too large"), std::string::npos) << m;
    EXPECT_NE(npy_msg.find((dir / "big.npy").string()), std::string::npos) << npy_msg;
    EXPECT_EQ(listing(dir), std::set<std::string>{"keep.npy"});
    EXPECT_EQ(get(dir / "keep.npy"), "old contents");
}

TEST(IoAtomic, ReplacesExistingFileWithUsualPermissions) {
    const fs::path dir = temp_dir("atomic-replace");
    put(dir / "o.npy", "old");
    const Cube c = sample_cube(5, 4, 2, DType::I16, Layout::BIP, test_seed());
    write_cube(c, dir / "o.npy");
    EXPECT_TRUE(cubes_identical(c, read_cube(dir / "o.npy")));
    EXPECT_EQ(listing(dir), std::set<std::string>{"o.npy"});
    const mode_t mask = umask(0);
    umask(mask);
    struct stat st {};
    ASSERT_EQ(stat((dir / "o.npy").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);  // not mkstemp's 0600
    // A refused cube leaves the existing file alone.
    put(dir / "x.png", "old png");
    error_of<InvalidInput>([&] { write_cube(c, dir / "x.png"); });
    EXPECT_EQ(get(dir / "x.png"), "old png");
    EXPECT_FALSE(has_temporaries(dir));
}

// ---- to_display_u8 ------------------------------------------------------------------------------

TEST(IoDisplay, ScalesByLargestFiniteSample) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const float in[] = {0, nan, 1, 2, 4, -3, inf};
    const int expected[] = {0, 0, 64, 128, 255, 0, 255};  // 255*1/4 = 63.75, 255*2/4 = 127.5 (ties away)
    Cube c(7, 1, 1, DType::F32);
    for (int x = 0; x < 7; ++x) c.at<float>(x, 0, 0) = in[x];
    const Cube d = to_display_u8(c);
    ASSERT_EQ(d.shape().describe().substr(0, 9), "7x1x1 u8 ");
    for (int x = 0; x < 7; ++x) EXPECT_EQ(d.value(x, 0, 0), expected[x]) << x;

    Cube u(3, 1, 1, DType::U16, Layout::BIP);
    u.at<std::uint16_t>(1, 0, 0) = 100;
    u.at<std::uint16_t>(2, 0, 0) = 200;
    const Cube du = to_display_u8(u);
    EXPECT_EQ(du.value(1, 0, 0), 128);
    EXPECT_EQ(du.value(2, 0, 0), 255);

    Cube none(2, 2, 1, DType::F64);
    none.at<double>(0, 0, 0) = std::nan("");
    none.at<double>(1, 1, 0) = -5;
    const Cube dn = to_display_u8(none);  // no positive finite max: all zero
    for (std::size_t i = 0; i < dn.num_elements(); ++i) EXPECT_EQ(dn.data<std::uint8_t>()[i], 0);
    EXPECT_NE(error_of<InvalidInput>([] { to_display_u8(Cube(2, 2, 3, DType::F32)); }).find("to_display_u8"), std::string::npos);
}

// ---- hand-made PNG files ------------------------------------------------------------------------
// Built here byte by byte (stored deflate blocks, CRC-32 and Adler-32 computed below), so that the
// 16-bit byte order, palette expansion and low bit depths are checked against the PNG
// specification rather than against our own writer.

namespace {

std::string be32(std::uint32_t v) { return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; }

std::uint32_t crc32(std::string_view s) {
    std::uint32_t c = 0xFFFFFFFFu;
    for (unsigned char ch : s) {
        c ^= ch;
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

std::string chunk(const std::string& type, const std::string& data) {
    return be32(std::uint32_t(data.size())) + type + data + be32(crc32(type + data));
}

// zlib stream holding one stored (uncompressed) deflate block.
std::string zlib_stored(const std::string& raw) {
    std::uint32_t a = 1, b = 0;
    for (unsigned char ch : raw) a = (a + ch) % 65521, b = (b + a) % 65521;
    const auto n = std::uint16_t(raw.size());
    return std::string("\x78\x01\x01", 3) + char(n & 0xFF) + char(n >> 8) + char(~n & 0xFF) + char((~n >> 8) & 0xFF) + raw +
           be32(b << 16 | a);
}

// `rows`: the filtered scanlines, each starting with its filter byte (0 = none).
std::string png_file(std::uint32_t w, std::uint32_t h, int depth, int color, const std::string& rows,
                     const std::string& extra_chunks = "") {
    const std::string ihdr = be32(w) + be32(h) + char(depth) + char(color) + std::string(3, '\0');
    return std::string("\x89PNG\r\n\x1a\n", 8) + chunk("IHDR", ihdr) + extra_chunks + chunk("IDAT", zlib_stored(rows)) +
           chunk("IEND", "");
}

}  // namespace

TEST(IoImages, HandMadePngFiles) {
    const fs::path dir = temp_dir("png-hand");
    // 16-bit gray 2x1, big-endian samples 0x0102, 0x0304.
    put(dir / "g16.png", png_file(2, 1, 16, 0, std::string("\0\x01\x02\x03\x04", 5)));
    Cube g = read_cube(dir / "g16.png");
    EXPECT_EQ(g.shape().describe(), "2x1x1 u16 bip");
    EXPECT_EQ(g.value(0, 0, 0), 258);
    EXPECT_EQ(g.value(1, 0, 0), 772);
    // 16-bit RGBA 1x1: (1, 2, 3, 65534).
    put(dir / "rgba.png", png_file(1, 1, 16, 6, std::string("\0\x00\x01\x00\x02\x00\x03\xFF\xFE", 9)));
    Cube rgba = read_cube(dir / "rgba.png");
    EXPECT_EQ(rgba.shape().describe(), "1x1x4 u16 bip");
    for (int b = 0; b < 4; ++b) EXPECT_EQ(rgba.value(0, 0, b), b < 3 ? b + 1 : 65534) << b;
    // Palette 3x1: entries (10, 20, 30), (40, 50, 60); indices 0, 1, 0 → RGB.
    const std::string plte = chunk("PLTE", "\x0A\x14\x1E\x28\x32\x3C");
    put(dir / "pal.png", png_file(3, 1, 8, 3, std::string("\0\x00\x01\x00", 4), plte));
    Cube pal = read_cube(dir / "pal.png");
    EXPECT_EQ(pal.shape().describe(), "3x1x3 u8 bip");
    EXPECT_EQ(pal.value(1, 0, 0), 40);
    EXPECT_EQ(pal.value(2, 0, 2), 30);
    // The same with tRNS (entry 0 has alpha 128, entry 1 is opaque) → RGBA.
    put(dir / "palt.png", png_file(3, 1, 8, 3, std::string("\0\x00\x01\x00", 4), plte + chunk("tRNS", "\x80")));
    Cube palt = read_cube(dir / "palt.png");
    EXPECT_EQ(palt.shape().describe(), "3x1x4 u8 bip");
    EXPECT_EQ(palt.value(0, 0, 3), 128);
    EXPECT_EQ(palt.value(1, 0, 3), 255);
    EXPECT_EQ(palt.value(1, 0, 1), 50);
    // 1-bit gray 4x1, bits 1010 → expanded to 8 bits (255, 0, 255, 0).
    put(dir / "bits.png", png_file(4, 1, 1, 0, std::string("\0\xA0", 2)));
    Cube bits = read_cube(dir / "bits.png");
    EXPECT_EQ(bits.shape().describe(), "4x1x1 u8 bip");
    for (int x = 0; x < 4; ++x) EXPECT_EQ(bits.value(x, 0, 0), x % 2 ? 0 : 255) << x;
}
