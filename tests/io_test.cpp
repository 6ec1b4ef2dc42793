// Tests of the I/O module (include/cubekit/io.hpp), per format: round trips for every element type
// and layout, hand-written files checked value by value, refusals and their messages, .mat
// fixtures written with matio. Real scenes, detection, atomic writes: io_files_test.cpp.
#include <algorithm>
#include <cstring>
#include <vector>

#include <matio.h>

#include "io_test_helpers.hpp"

namespace fs = std::filesystem;
using namespace cubekit;
using namespace cubekit::io_test;
using cubekit::testing::cubes_identical;
using cubekit::testing::shared_data_path;
using cubekit::testing::temp_dir;
using cubekit::testing::test_seed;

namespace {

int envi_code(DType t) {
    switch (t) {
        case DType::U8: return 1;
        case DType::I16: return 2;
        case DType::I32: return 3;
        case DType::F32: return 4;
        case DType::F64: return 5;
        case DType::U16: return 12;
        case DType::U32: return 13;
    }
    return 0;
}

std::string envi_header(int w, int h, int b, int code, std::string_view il, int byte_order, std::string_view more = "") {
    return "ENVI\nsamples = " + std::to_string(w) + "\nlines = " + std::to_string(h) + "\nbands = " + std::to_string(b) +
           "\nheader offset = 0\ndata type = " + std::to_string(code) + "\ninterleave = " + std::string(il) +
           "\nbyte order = " + std::to_string(byte_order) + "\n" + std::string(more);
}

Metadata sample_metadata(int bands) {
    Metadata m;
    for (int i = 0; i < bands; ++i) {
        m.wavelengths.push_back(400.938721 + 3.25 * i);
        m.band_names.push_back("Band " + std::to_string(i + 1));
    }
    m.wavelength_units = "Nanometers";
    m.map_info = "UTM, 1.000, 1.000, 612730.910, 4074488.708, 1.0, 1.0, 10, North, WGS-84, units=Meters";
    m.coordinate_system = "PROJCS[\"UTM_Zone_10N\",GEOGCS[\"GCS_WGS_1984\"]]";
    m.description = "cubekit test cube";
    m.extra["sensor type"] = "Unknown";
    m.extra["fwhm"] = "{\n 1.5, 2.5,\n 3.5, 4.5}";
    return m;
}

void expect_same_metadata(const Metadata& e, const Metadata& a) {
    EXPECT_EQ(e.wavelengths, a.wavelengths);
    EXPECT_EQ(e.band_names, a.band_names);
    EXPECT_EQ(e.wavelength_units, a.wavelength_units);
    EXPECT_EQ(e.map_info, a.map_info);
    EXPECT_EQ(e.coordinate_system, a.coordinate_system);
    EXPECT_EQ(e.description, a.description);
    EXPECT_EQ(e.extra, a.extra);
}

}  // namespace

// ---- ENVI ---------------------------------------------------------------------------------------

TEST(IoEnvi, RoundTripEveryTypeAndLayout) {
    const fs::path dir = temp_dir("envi-rt");
    for (DType t : kAllTypes)
        for (Layout l : kAllLayouts) {
            const std::uint64_t seed = test_seed();
            SCOPED_TRACE(std::string(dtype_name(t)) + " " + std::string(layout_name(l)) + " seed " + std::to_string(seed));
            Cube c = sample_cube(7, 5, 4, t, l, seed);
            c.metadata() = sample_metadata(4);
            const fs::path img = dir / (std::string(dtype_name(t)) + "_" + std::string(layout_name(l)) + ".img");
            write_cube(c, img);
            fs::path hdr = img;
            hdr.replace_extension(".hdr");
            const std::string header = get(hdr);
            EXPECT_NE(header.find("interleave = " + std::string(layout_name(l)) + "\n"), std::string::npos) << header;
            EXPECT_NE(header.find("byte order = 0\n"), std::string::npos);
            EXPECT_NE(header.find("data type = " + std::to_string(envi_code(t)) + "\n"), std::string::npos);
            // The data file holds the samples in the cube's layout, little-endian (this host is).
            const std::string data = get(img);
            ASSERT_EQ(data.size(), c.num_bytes());
            EXPECT_EQ(std::memcmp(data.data(), c.bytes(), c.num_bytes()), 0);
            EXPECT_EQ(detect_format(img), FileFormat::Envi);
            Cube back = read_cube(img);
            EXPECT_EQ(back.layout(), l);
            EXPECT_TRUE(cubes_identical(c, back));
            expect_same_metadata(c.metadata(), back.metadata());
            EXPECT_TRUE(cubes_identical(c, read_cube(hdr)));  // through the header path too
        }
    EXPECT_FALSE(has_temporaries(dir));
}

TEST(IoEnvi, HandComputedLittleEndianBytes) {
    const fs::path dir = temp_dir("envi-bytes");
    Cube c(2, 1, 2, DType::I16, Layout::BSQ);
    c.at<std::int16_t>(0, 0, 0) = 1;
    c.at<std::int16_t>(1, 0, 0) = -2;
    c.at<std::int16_t>(0, 0, 1) = 300;
    c.at<std::int16_t>(1, 0, 1) = 4;
    write_cube(c, dir / "s.hdr");  // header path given: data goes to s.img
    EXPECT_EQ(get(dir / "s.img"), std::string("\x01\x00\xFE\xFF\x2C\x01\x04\x00", 8));
    WriteOptions bip{.envi_keep_layout = false, .envi_layout = Layout::BIP};
    write_cube(c, dir / "p.dat", bip);  // .dat → header p.hdr
    EXPECT_EQ(get(dir / "p.dat"), std::string("\x01\x00\x2C\x01\xFE\xFF\x04\x00", 8));
    EXPECT_NE(get(dir / "p.hdr").find("interleave = bip"), std::string::npos);
    EXPECT_EQ(read_cube(dir / "p.dat").layout(), Layout::BIP);
}

TEST(IoEnvi, BigEndianFilesAreSwapped) {
    const fs::path dir = temp_dir("envi-be");
    // Hand-computed: 2x1x2 i16 BIL, big-endian: line 0 = band 0 (258, 772), band 1 (-2, 5).
    put(dir / "t.img", std::string("\x01\x02\x03\x04\xFF\xFE\x00\x05", 8));
    put(dir / "t.hdr", envi_header(2, 1, 2, 2, "bil", 1));
    Cube t = read_cube(dir / "t.img");
    EXPECT_EQ(t.value(0, 0, 0), 258);
    EXPECT_EQ(t.value(1, 0, 0), 772);
    EXPECT_EQ(t.value(0, 0, 1), -2);
    EXPECT_EQ(t.value(1, 0, 1), 5);
    // Every type and layout: the same samples written big-endian by hand read back identical.
    for (DType type : kAllTypes)
        for (Layout l : kAllLayouts) {
            SCOPED_TRACE(std::string(dtype_name(type)) + " " + std::string(layout_name(l)));
            Cube c = sample_cube(3, 4, 5, type, l, test_seed());
            std::string bytes(reinterpret_cast<const char*>(c.bytes()), c.num_bytes());
            const std::size_t es = dtype_size(type);
            for (std::size_t i = 0; i < bytes.size(); i += es) std::reverse(bytes.begin() + long(i), bytes.begin() + long(i + es));
            const std::string name = "be_" + std::string(dtype_name(type)) + "_" + std::string(layout_name(l));
            put(dir / (name + ".img"), bytes);
            put(dir / (name + ".img.hdr"), envi_header(3, 4, 5, envi_code(type), layout_name(l), 1));  // appended naming
            EXPECT_TRUE(cubes_identical(c, read_cube(dir / (name + ".img"))));
            EXPECT_TRUE(cubes_identical(c, read_cube(dir / (name + ".img.hdr"))));
        }
}

TEST(IoEnvi, HeaderSyntax) {
    const fs::path dir = temp_dir("envi-syntax");
    // Mixed-case keywords, comments, multi-line braces, a header offset, unknown keywords kept.
    const std::string hdr =
        "ENVI\r\n; a comment line\r\ndescription = {\r\n  two\r\n  lines}\r\nSamples = 2\r\nlines   = 2\r\n"
        "bands = 1\r\nheader offset = 4\r\ndata type = 1\r\ninterleave = BSQ\r\nwavelength = {\r\n 500.5 }\r\n"
        "band names = { red }\r\ndefault bands = {1,1,1}\r\nreflectance scale factor = 10000\r\n";
    put(dir / "h.hdr", hdr);
    put(dir / "h.img", std::string("JUNK\x0A\x0B\x0C\x0D", 8));
    Cube c = read_cube(dir / "h.hdr");
    EXPECT_EQ(c.value(0, 0, 0), 10);
    EXPECT_EQ(c.value(1, 0, 0), 11);
    EXPECT_EQ(c.value(0, 1, 0), 12);
    EXPECT_EQ(c.value(1, 1, 0), 13);
    EXPECT_EQ(c.metadata().description, "two\n  lines");
    EXPECT_EQ(c.metadata().wavelengths, std::vector<double>{500.5});
    EXPECT_EQ(c.metadata().band_names, std::vector<std::string>{"red"});
    EXPECT_EQ(c.metadata().extra.at("default bands"), "{1,1,1}");
    EXPECT_EQ(c.metadata().extra.at("reflectance scale factor"), "10000");
    // Written back: the unknown keywords appear verbatim.
    write_cube(c, dir / "w.img");
    const std::string out = get(dir / "w.hdr");
    EXPECT_NE(out.find("default bands = {1,1,1}\n"), std::string::npos) << out;
    EXPECT_NE(out.find("reflectance scale factor = 10000\n"), std::string::npos) << out;
}

TEST(IoEnvi, RefusesUnsupportedDataTypes) {
    const fs::path dir = temp_dir("envi-types");
    const std::pair<int, const char*> cases[] = {{6, "complex"}, {9, "double complex"}, {14, "64-bit integer"}, {15, "64-bit unsigned integer"}};
    for (const auto& [code, name] : cases) {
        const fs::path hdr = dir / ("scene" + std::to_string(code) + ".hdr");
        put(hdr, envi_header(2, 2, 1, code, "bsq", 0));
        put(dir / ("scene" + std::to_string(code) + ".img"), std::string(64, '\x01'));
        const std::string msg = error_of<InvalidInput>([&] { read_cube(hdr); });
        EXPECT_EQ(msg, "read_envi: " + hdr.string() + ": 'data type' = " + std::to_string(code) + " (" + name +
                           ") is not supported (1, 2, 3, 4, 5, 12, 13 are)");
    }
}

TEST(IoEnvi, TruncatedAndOversizedData) {
    const fs::path dir = temp_dir("envi-size");
    put(dir / "t.hdr", envi_header(4, 3, 2, 2, "bsq", 0));  // needs 4*3*2*2 = 48 bytes
    put(dir / "t.img", std::string(47, '\x01'));
    std::string msg = error_of<InvalidInput>([&] { read_cube(dir / "t.img"); });
    EXPECT_NE(msg.find("read_envi: " + (dir / "t.img").string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
    EXPECT_NE(msg.find("48"), std::string::npos) << msg;
    EXPECT_NE(msg.find("47"), std::string::npos) << msg;
    put(dir / "t.img", std::string(96, '\x01'));  // header says 4x3x2, the file holds twice that
    msg = error_of<InvalidInput>([&] { read_cube(dir / "t.img"); });
    EXPECT_NE(msg.find("larger than the header says by a band or more"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected 48 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("the file has 96"), std::string::npos) << msg;
    put(dir / "t.img", std::string(48 + 23, '\x01'));  // less than a band (24 bytes) more: read, with a warning
    const Cube c = read_cube(dir / "t.img");
    ASSERT_EQ(c.metadata().warnings.size(), 1u);
    EXPECT_NE(c.metadata().warnings[0].find("23 bytes after the 48"), std::string::npos) << c.metadata().warnings[0];
}

TEST(IoEnvi, ZeroOrMissingDimensions) {
    const fs::path dir = temp_dir("envi-dims");
    put(dir / "z.img", std::string(8, '\x01'));
    put(dir / "z.hdr", envi_header(0, 2, 1, 1, "bsq", 0));
    EXPECT_NE(error_of<InvalidInput>([&] { read_cube(dir / "z.img"); }).find("'samples' = 0"), std::string::npos);
    put(dir / "z.hdr", "ENVI\nsamples = 2\nlines = 2\ndata type = 1\n");
    EXPECT_NE(error_of<InvalidInput>([&] { read_cube(dir / "z.img"); }).find("'bands' is missing"), std::string::npos);
    put(dir / "z.hdr", envi_header(2, 2, 2, 1, "bsx", 0));
    EXPECT_NE(error_of<InvalidInput>([&] { read_cube(dir / "z.img"); }).find("(bsq, bil, bip are)"), std::string::npos);
}

TEST(IoEnvi, MissingFilesAreIoErrors) {
    const fs::path dir = temp_dir("envi-missing");
    std::string msg = error_of<IoError>([&] { read_cube(dir / "nothing.img"); });
    EXPECT_NE(msg.find((dir / "nothing.img").string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
    put(dir / "lonely.hdr", envi_header(1, 1, 1, 1, "bsq", 0));  // header without data
    msg = error_of<IoError>([&] { read_cube(dir / "lonely.hdr"); });
    EXPECT_NE(msg.find("no data file"), std::string::npos) << msg;
    put(dir / "nohdr.img", "x");  // data without header, format forced
    msg = error_of<IoError>([&] { read_cube(dir / "nohdr.img", {.var = "", .format = FileFormat::Envi}); });
    EXPECT_NE(msg.find("no ENVI header"), std::string::npos) << msg;
}

// ---- NumPy --------------------------------------------------------------------------------------

TEST(IoNpy, RoundTripEveryTypeAndShape) {
    const fs::path dir = temp_dir("npy-rt");
    const std::pair<DType, const char*> descr[] = {{DType::U8, "|u1"},  {DType::U16, "<u2"}, {DType::I16, "<i2"}, {DType::U32, "<u4"},
                                                   {DType::I32, "<i4"}, {DType::F32, "<f4"}, {DType::F64, "<f8"}};
    for (const auto& [t, d] : descr)
        for (int bands : {1, 3}) {
            SCOPED_TRACE(std::string(dtype_name(t)) + " bands " + std::to_string(bands));
            const Cube c = sample_cube(7, 5, bands, t, Layout::BSQ, test_seed());  // BSQ: the writer converts
            const fs::path p = dir / (std::string(dtype_name(t)) + std::to_string(bands) + ".npy");
            write_cube(c, p);
            const std::string f = get(p);
            ASSERT_GT(f.size(), 10u);
            EXPECT_EQ(f.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
            const std::size_t hlen = std::uint8_t(f[8]) | std::uint8_t(f[9]) << 8;
            EXPECT_EQ((10 + hlen) % 64, 0u);
            const std::string header = f.substr(10, hlen);
            EXPECT_NE(header.find(std::string("'descr': '") + d + "'"), std::string::npos) << header;
            EXPECT_NE(header.find("'fortran_order': False"), std::string::npos) << header;
            EXPECT_NE(header.find(bands == 1 ? "'shape': (5, 7)" : "'shape': (5, 7, 3)"), std::string::npos) << header;
            // C order (H, W, B): the data is the BIP image.
            const Cube bip = c.to_layout(Layout::BIP);
            ASSERT_EQ(f.size(), 10 + hlen + bip.num_bytes());
            EXPECT_EQ(std::memcmp(f.data() + 10 + hlen, bip.bytes(), bip.num_bytes()), 0);
            Cube back = read_cube(p);
            EXPECT_EQ(back.layout(), Layout::BIP);
            EXPECT_TRUE(cubes_identical(c, back));
        }
}

namespace {
std::string npy_file(std::string_view dict, std::string_view data, int major = 1) {
    std::string h(dict);
    const std::size_t prefix = major == 1 ? 10 : 12;
    while ((prefix + h.size() + 1) % 64) h += ' ';
    h += '\n';
    std::string f = std::string("\x93NUMPY", 6) + char(major) + '\0';
    f += char(h.size() & 0xFF);
    f += char(h.size() >> 8);
    if (major != 1) f += std::string(2, '\0');
    return f + h + std::string(data);
}
}  // namespace

TEST(IoNpy, HandWrittenCAndFortranOrder) {
    const fs::path dir = temp_dir("npy-hand");
    // C order (2, 3) <i2: rows (1, -2, 3), (4, 5, -6).
    put(dir / "c.npy", npy_file("{'descr': '<i2', 'fortran_order': False, 'shape': (2, 3), }",
                                std::string("\x01\x00\xFE\xFF\x03\x00\x04\x00\x05\x00\xFA\xFF", 12)));
    Cube c = read_cube(dir / "c.npy");
    ASSERT_EQ(c.width(), 3);
    ASSERT_EQ(c.height(), 2);
    ASSERT_EQ(c.bands(), 1);
    const double rows[2][3] = {{1, -2, 3}, {4, 5, -6}};
    for (int y = 0; y < 2; ++y)
        for (int x = 0; x < 3; ++x) EXPECT_EQ(c.value(x, y, 0), rows[y][x]) << x << "," << y;

    // Fortran order (H=2, W=3, B=2) <u2: element (h, w, b) = 100h + 10w + b + 1, stored at
    // h + 2*(w + 3*b): 1, 101, 11, 111, 21, 121, 2, 102, 12, 112, 22, 122.
    const int order[] = {1, 101, 11, 111, 21, 121, 2, 102, 12, 112, 22, 122};
    std::string le, be;
    for (int v : order) le += std::string{char(v & 0xFF), char(v >> 8)}, be += std::string{char(v >> 8), char(v & 0xFF)};
    put(dir / "f.npy", npy_file("{'descr': '<u2', 'fortran_order': True, 'shape': (2, 3, 2), }", le));
    put(dir / "fbe.npy", npy_file("{\"descr\": \">u2\", \"fortran_order\": True, \"shape\": (2L, 3L, 2L)}", be, 2));
    for (const char* name : {"f.npy", "fbe.npy"}) {
        SCOPED_TRACE(name);
        Cube f = read_cube(dir / name);
        ASSERT_EQ(f.shape().describe(), "3x2x2 u16 bip");
        for (int h = 0; h < 2; ++h)
            for (int w = 0; w < 3; ++w)
                for (int b = 0; b < 2; ++b) EXPECT_EQ(f.value(w, h, b), 100 * h + 10 * w + b + 1) << h << w << b;
    }
    // Big-endian f4, 3-D C order (1, 1, 2): 1.5 = 3FC00000, -2 = C0000000.
    put(dir / "be.npy", npy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (1, 1, 2), }",
                                 std::string("\x3F\xC0\x00\x00\xC0\x00\x00\x00", 8)));
    Cube be4 = read_cube(dir / "be.npy");
    EXPECT_EQ(be4.dtype(), DType::F32);
    EXPECT_EQ(be4.value(0, 0, 0), 1.5);
    EXPECT_EQ(be4.value(0, 0, 1), -2.0);
}

TEST(IoNpy, Refusals) {
    const fs::path dir = temp_dir("npy-bad");
    const fs::path x = dir / "x.npy";
    put(x, npy_file("{'descr': '<c8', 'fortran_order': False, 'shape': (1, 1), }", std::string(8, '\1')));
    EXPECT_EQ(error_of<InvalidInput>([&] { read_cube(x); }),
              "read_npy: " + x.string() + ": dtype '<c8' is not supported (u1, u2, i2, u4, i4, f4, f8 are)");
    put(x, npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", std::string(16, '\1')));
    EXPECT_NE(error_of<InvalidInput>([&] { read_cube(x); }).find("shape (4,) has 1 dimensions"), std::string::npos);
    put(x, npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", std::string(15, '\1')));
    const std::string msg = error_of<InvalidInput>([&] { read_cube(x); });
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
    EXPECT_NE(msg.find("needs 16 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("the file has 15"), std::string::npos) << msg;
}

// ---- PNG, PGM/PPM, JPEG -------------------------------------------------------------------------

TEST(IoImages, PngAndPnmRoundTrips) {
    const fs::path dir = temp_dir("img-rt");
    for (DType t : {DType::U8, DType::U16})
        for (int bands = 1; bands <= 4; ++bands) {
            SCOPED_TRACE(std::string(dtype_name(t)) + " bands " + std::to_string(bands));
            const Cube c = sample_cube(7, 5, bands, t, Layout::BSQ, test_seed());
            const fs::path png = dir / ("i" + std::to_string(bands) + std::string(dtype_name(t)) + ".png");
            write_cube(c, png);
            EXPECT_EQ(detect_format(png), FileFormat::Png);
            Cube back = read_cube(png);
            EXPECT_EQ(back.layout(), Layout::BIP);
            EXPECT_TRUE(cubes_identical(c, back));
            if (bands == 1 || bands == 3) {
                const fs::path pnm = dir / ("i" + std::to_string(bands) + std::string(dtype_name(t)) + (bands == 1 ? ".pgm" : ".ppm"));
                write_cube(c, pnm);
                EXPECT_EQ(detect_format(pnm), FileFormat::Pnm);
                EXPECT_TRUE(cubes_identical(c, read_cube(pnm)));
            }
        }
    // Refusals: float samples, 5 bands, 2 bands in PNM.
    EXPECT_NE(error_of<InvalidInput>([&] { write_cube(Cube(2, 2, 1, DType::F32), dir / "f.png"); }).find("element type f32"),
              std::string::npos);
    EXPECT_NE(error_of<InvalidInput>([&] { write_cube(Cube(2, 2, 5, DType::U8), dir / "f.png"); }).find("5 bands"), std::string::npos);
    EXPECT_NE(error_of<InvalidInput>([&] { write_cube(Cube(2, 2, 2, DType::U8), dir / "f.pgm"); }).find("2 bands"), std::string::npos);
    EXPECT_FALSE(fs::exists(dir / "f.png"));
    // Damaged files are InvalidInput (libpng's longjmp turned into an exception), not a crash.
    const std::string png = get(dir / "i3u8.png");
    put(dir / "cut.png", png.substr(0, png.size() / 2));
    std::string msg = error_of<InvalidInput>([&] { read_cube(dir / "cut.png"); });
    EXPECT_EQ(msg.rfind("read_png: " + (dir / "cut.png").string() + ": libpng: ", 0), 0u) << msg;
    put(dir / "cut.jpg", std::string("\xFF\xD8\xFF\xE0\x00\x10JFIF\x00", 11));
    msg = error_of<InvalidInput>([&] { read_cube(dir / "cut.jpg"); });
    EXPECT_EQ(msg.rfind("read_jpeg: " + (dir / "cut.jpg").string() + ": libjpeg: ", 0), 0u) << msg;
}

TEST(IoImages, PnmBytesAndAsciiVariants) {
    const fs::path dir = temp_dir("pnm");
    Cube c(2, 1, 1, DType::U16, Layout::BIP);
    c.at<std::uint16_t>(0, 0, 0) = 258;
    c.at<std::uint16_t>(1, 0, 0) = 772;
    write_cube(c, dir / "w.pgm");
    EXPECT_EQ(get(dir / "w.pgm"), std::string("P5\n2 1\n65535\n\x01\x02\x03\x04", 17));  // 16-bit is big-endian
    put(dir / "a.pgm", "P2\n# comment\n3 2\n# another\n1000\n0 1 2\n999 1000 7\n");
    Cube a = read_cube(dir / "a.pgm");
    EXPECT_EQ(a.shape().describe(), "3x2x1 u16 bip");
    EXPECT_EQ(a.value(0, 1, 0), 999);
    EXPECT_EQ(a.value(1, 1, 0), 1000);
    put(dir / "a.ppm", "P3 2 1 255  1 2 3  250 251 252\n");
    Cube p = read_cube(dir / "a.ppm");
    EXPECT_EQ(p.shape().describe(), "2x1x3 u8 bip");
    EXPECT_EQ(p.value(1, 0, 2), 252);
    put(dir / "b.pgm", std::string("P5\n2 2\n255\n\x01\x02\x03", 14));
    EXPECT_NE(error_of<InvalidInput>([&] { read_cube(dir / "b.pgm"); }).find("truncated"), std::string::npos);
    put(dir / "bit.pbm", "P1\n2 2\n0 1 1 0\n");
    EXPECT_NE(error_of<InvalidInput>([&] { read_cube(dir / "bit.pbm", {.var = "", .format = FileFormat::Pnm}); }).find("(P2, P3, P5, P6 are)"),
              std::string::npos);
}

TEST(IoImages, RealPngAndJpeg) {
    const auto jpg = shared_data_path("rgb/grace_hopper.jpg");
    if (!jpg) GTEST_SKIP() << "rgb/grace_hopper.jpg not in shared data";
    EXPECT_EQ(detect_format(*jpg), FileFormat::Jpeg);
    Cube j = read_cube(*jpg);
    EXPECT_EQ(j.shape().describe(), "512x600x3 u8 bip");  // (600, 512, 3) = H 600, W 512
    double sum = 0;
    for (std::size_t i = 0; i < j.num_elements(); ++i) sum += double(j.data<std::uint8_t>()[i]);
    EXPECT_GT(sum / double(j.num_elements()), 20.0);  // a real photograph, not blank
    if (const auto png = shared_data_path("rgb/chelsea.png")) {
        EXPECT_EQ(read_cube(*png).shape().describe(), "451x300x3 u8 bip");
    }
    if (const auto png = shared_data_path("gray/camera.png")) {
        EXPECT_EQ(read_cube(*png).shape().describe(), "512x512x1 u8 bip");
    }
}

// ---- MATLAB -------------------------------------------------------------------------------------

namespace {
// f(r, c, b): distinct, non-zero, fits in uint8; negative in odd bands for signed types.
double mat_value(std::size_t r, std::size_t c, std::size_t b, bool is_signed) {
    const double v = double(r * 30 + c * 5 + b + 1);
    return (is_signed && b % 2) ? -v : v;
}

template <typename T>
void add_var(mat_t* mat, const char* name, matio_classes cls, matio_types type, std::vector<std::size_t> dims,
             matio_compression comp, int flags = 0) {
    const std::size_t B = dims.size() == 3 ? dims[2] : 1;
    std::vector<T> data(dims[0] * dims[1] * B);
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t c = 0; c < dims[1]; ++c)
            for (std::size_t r = 0; r < dims[0]; ++r)  // column-major, as MATLAB stores it
                data[r + dims[0] * (c + dims[1] * b)] = T(mat_value(r, c, b, T(-1) < T(0)));
    matvar_t* v = Mat_VarCreate(name, cls, type, int(dims.size()), dims.data(), data.data(), flags);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(Mat_VarWrite(mat, v, comp), 0) << name;
    Mat_VarFree(v);
}

struct MatFile {
    const char* tag;
    mat_ft version;
    matio_compression comp;
};
constexpr MatFile kMatFiles[] = {{"v5", MAT_FT_MAT5, MAT_COMPRESSION_NONE},
                                 {"v5z", MAT_FT_MAT5, MAT_COMPRESSION_ZLIB},
                                 {"v73", MAT_FT_MAT73, MAT_COMPRESSION_NONE}};

mat_t* create_mat(const fs::path& p, mat_ft version) { return Mat_CreateVer(p.c_str(), nullptr, version); }
}  // namespace

TEST(IoMat, FixturesEveryVersionTypeAndOrientation) {
    const fs::path dir = temp_dir("mat");
    for (const MatFile& mf : kMatFiles) {
        const std::pair<const char*, DType> types[] = {{"f64", DType::F64}, {"f32", DType::F32}, {"u8", DType::U8}, {"i16", DType::I16}};
        for (const auto& [tname, dtype] : types) {
            SCOPED_TRACE(std::string(mf.tag) + " " + tname);
            const fs::path p = dir / (std::string(mf.tag) + "_" + tname + ".mat");
            mat_t* mat = create_mat(p, mf.version);
            ASSERT_NE(mat, nullptr) << "matio cannot create " << mf.tag;
            const std::vector<std::size_t> dims = {7, 5, 3};  // R=7 rows, C=5 columns, 3 bands
            switch (dtype) {
                case DType::F64: add_var<double>(mat, "data", MAT_C_DOUBLE, MAT_T_DOUBLE, dims, mf.comp); break;
                case DType::F32: add_var<float>(mat, "data", MAT_C_SINGLE, MAT_T_SINGLE, dims, mf.comp); break;
                case DType::U8: add_var<std::uint8_t>(mat, "data", MAT_C_UINT8, MAT_T_UINT8, dims, mf.comp); break;
                default: add_var<std::int16_t>(mat, "data", MAT_C_INT16, MAT_T_INT16, dims, mf.comp); break;
            }
            add_var<std::uint8_t>(mat, "mask", MAT_C_UINT8, MAT_T_UINT8, {7, 5}, mf.comp, MAT_F_LOGICAL);
            Mat_Close(mat);
            EXPECT_EQ(detect_format(p), FileFormat::Mat);
            Cube c = read_cube(p);  // default: the only 3-D array
            ASSERT_EQ(c.width(), 5);
            ASSERT_EQ(c.height(), 7);
            ASSERT_EQ(c.bands(), 3);
            EXPECT_EQ(c.dtype(), dtype);
            const bool is_signed = dtype != DType::U8;
            for (int b = 0; b < 3; ++b)
                for (int y = 0; y < 7; ++y)
                    for (int x = 0; x < 5; ++x)  // pixel (x, y, b) == data(y+1, x+1, b+1)
                        ASSERT_EQ(c.value(x, y, b), mat_value(std::size_t(y), std::size_t(x), std::size_t(b), is_signed))
                            << x << "," << y << "," << b;
            Cube m = read_cube(p, {.var = "mask"});
            EXPECT_EQ(m.shape().describe().substr(0, 9), "5x7x1 u8 ");
            EXPECT_EQ(m.value(4, 6, 0), mat_value(6, 4, 0, false));
            EXPECT_EQ(list_mat_variables(p), (std::vector<std::string>{"data: 7x5x3 " + std::string(
                                                                           dtype == DType::F64 ? "double" : dtype == DType::F32 ? "single" : dtype == DType::U8 ? "uint8" : "int16"),
                                                                       "mask: 7x5 logical"}));
        }
    }
}

TEST(IoMat, VariableSelection) {
    const fs::path dir = temp_dir("mat-var");
    const fs::path p = dir / "scene.mat";
    mat_t* mat = create_mat(p, MAT_FT_MAT5);
    ASSERT_NE(mat, nullptr);
    add_var<double>(mat, "data", MAT_C_DOUBLE, MAT_T_DOUBLE, {7, 5, 3}, MAT_COMPRESSION_ZLIB);
    add_var<std::int16_t>(mat, "cube2", MAT_C_INT16, MAT_T_INT16, {4, 6, 2}, MAT_COMPRESSION_ZLIB);
    add_var<std::int8_t>(mat, "small", MAT_C_INT8, MAT_T_INT8, {3, 2}, MAT_COMPRESSION_NONE);
    Mat_Close(mat);
    EXPECT_EQ(error_of<InvalidInput>([&] { read_cube(p); }),
              "read_mat: " + p.string() + ": 2 3-D arrays, choose one with var: data (7x5x3 double), cube2 (4x6x2 int16)");
    Cube c2 = read_cube(p, {.var = "cube2"});
    EXPECT_EQ(c2.shape().describe(), "6x4x2 i16 bsq");
    EXPECT_EQ(c2.value(5, 3, 1), mat_value(3, 5, 1, true));
    Cube s = read_cube(p, {.var = "small"});  // int8 → i16
    EXPECT_EQ(s.shape().describe(), "2x3x1 i16 bsq");
    EXPECT_EQ(s.value(1, 2, 0), mat_value(2, 1, 0, true));
    const std::string msg = error_of<InvalidInput>([&] { read_cube(p, {.var = "nope"}); });
    EXPECT_NE(msg.find("no variable 'nope'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("data (7x5x3 double), cube2 (4x6x2 int16), small (3x2 int8)"), std::string::npos) << msg;

    const fs::path two = dir / "two.mat";
    mat = create_mat(two, MAT_FT_MAT73);
    ASSERT_NE(mat, nullptr);
    add_var<float>(mat, "a", MAT_C_SINGLE, MAT_T_SINGLE, {7, 5}, MAT_COMPRESSION_NONE);
    add_var<float>(mat, "b", MAT_C_SINGLE, MAT_T_SINGLE, {3, 3}, MAT_COMPRESSION_NONE);
    Mat_Close(mat);
    EXPECT_EQ(error_of<InvalidInput>([&] { read_cube(two); }),
              "read_mat: " + two.string() + ": no 3-D array and 2 2-D arrays, choose one with var: a (7x5 single), b (3x3 single)");
    EXPECT_EQ(read_cube(two, {.var = "b"}).shape().describe(), "3x3x1 f32 bsq");

    const fs::path big = dir / "big.mat";
    mat = create_mat(big, MAT_FT_MAT5);
    ASSERT_NE(mat, nullptr);
    add_var<std::int64_t>(mat, "big", MAT_C_INT64, MAT_T_INT64, {2, 2, 2}, MAT_COMPRESSION_NONE);
    Mat_Close(mat);
    const std::string m64 = error_of<InvalidInput>([&] { read_cube(big); });
    EXPECT_NE(m64.find("variable 'big' (2x2x2 int64): 64-bit integers are not supported"), std::string::npos) << m64;
}

TEST(IoMat, RealHydice) {
    const auto p = shared_data_path("target_detection/HYDICE.mat");
    if (!p) GTEST_SKIP() << "target_detection/HYDICE.mat not in shared data";
    Cube c = read_cube(*p);  // 'data' is the only 3-D array
    EXPECT_EQ(c.shape().describe(), "100x80x162 u16 bsq");
    Cube named = read_cube(*p, {.var = "data"});
    EXPECT_TRUE(cubes_identical(c, named));
    // Independent check of the orientation: the file is uncompressed v5, so the uint16 samples
    // follow the tag (miUINT16 = 4, 80*100*162*2 = 2592000 bytes) column-major.
    const std::string raw = get(*p);
    const std::size_t tag = raw.find(std::string("\x04\x00\x00\x00\x00\x8D\x27\x00", 8));
    ASSERT_NE(tag, std::string::npos);
    const auto raw_at = [&](std::size_t r, std::size_t col, std::size_t b) {
        const std::size_t i = tag + 8 + 2 * (r + 80 * (col + 100 * b));
        return double(std::uint8_t(raw[i]) | std::uint8_t(raw[i + 1]) << 8);
    };
    double sum = 0;
    for (int b : {0, 1, 80, 161})
        for (int y : {0, 1, 40, 79})
            for (int x : {0, 1, 57, 99}) {
                EXPECT_EQ(c.value(x, y, b), raw_at(std::size_t(y), std::size_t(x), std::size_t(b))) << x << "," << y << "," << b;
                sum += c.value(x, y, b);
            }
    EXPECT_GT(sum, 0);
    Cube map = read_cube(*p, {.var = "map"});
    EXPECT_EQ(map.shape().describe().substr(0, 9), "100x80x1 ");
}
