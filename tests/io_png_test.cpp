// PNG reading and writing (src/io/png*.cpp). The libdeflate decoder gives the samples a PNG was
// made from (files made by libpng's writer, every filter and format it takes), the same cube as
// libpng on the shared images, and declines the formats it leaves to libpng and every damaged file,
// so that read_png's outcome (pixels or message) stays libpng's. The parallel encoder's files read
// back exactly through libpng, and are the same bytes for any thread count.
#include <cmath>
#include <csetjmp>
#include <cstring>
#include <functional>
#include <random>

#include <omp.h>
#include <png.h>
#include <zlib.h>

#include "io/png_internal.hpp"
#include "io_test_helpers.hpp"

namespace fs = std::filesystem;
using namespace cubekit;
using namespace cubekit::io_test;
using namespace cubekit::testing;
using io_detail::decode_png_fast;
using io_detail::decode_png_libpng;

namespace {

// ---- PNG files made by libpng's writer ----------------------------------------------------------

/// What libpng's writer is asked for. `samples`: one byte per sample at depth <= 8 (palette
/// indices, or gray values below 2^depth), two big-endian bytes per sample at 16.
struct PngSpec {
    std::uint32_t w = 37, h = 23;
    int depth = 8, color = PNG_COLOR_TYPE_RGB;
    int filters = PNG_ALL_FILTERS;
    bool interlace = false;
    std::vector<png_color> palette;
    std::vector<unsigned char> trns;
    std::size_t idat_size = 8192;  // libpng's IDAT chunk size (png_set_compression_buffer_size)
    std::string samples;
};

extern "C" void append_to_string(png_structp png, png_bytep d, png_size_t n) {
    static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(d), n);
}
extern "C" void no_flush(png_structp) {}

// Owns nothing (libpng's longjmp may leave it).
bool libpng_write_stage(png_structp png, png_infop info, const PngSpec* s, png_bytepp rows) {
    if (setjmp(png_jmpbuf(png))) return false;
    png_set_filter(png, 0, s->filters);
    png_set_compression_buffer_size(png, s->idat_size);
    png_set_IHDR(png, info, s->w, s->h, s->depth, s->color, s->interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (!s->palette.empty()) png_set_PLTE(png, info, s->palette.data(), int(s->palette.size()));
    if (!s->trns.empty()) png_set_tRNS(png, info, s->trns.data(), int(s->trns.size()), nullptr);
    png_write_info(png, info);
    if (s->depth < 8) png_set_packing(png);
    if (s->interlace) png_set_interlace_handling(png);
    png_write_image(png, rows);
    png_write_end(png, info);
    return true;
}

int channels_of(int color) { return color == 2 ? 3 : color == 4 ? 2 : color == 6 ? 4 : 1; }

std::string libpng_file(const PngSpec& s) {
    std::string out;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
    png_infop info = png_create_info_struct(png);
    png_set_write_fn(png, &out, append_to_string, no_flush);
    const std::size_t row = std::size_t(s.w) * std::size_t(channels_of(s.color)) * (s.depth == 16 ? 2 : 1);
    std::vector<png_bytep> rows(s.h);
    std::string samples = s.samples;
    for (std::size_t y = 0; y < s.h; ++y) rows[y] = reinterpret_cast<png_bytep>(samples.data() + y * row);
    const bool ok = libpng_write_stage(png, info, &s, rows.data());
    png_destroy_write_struct(&png, &info);
    EXPECT_TRUE(ok);
    return out;
}

/// Samples with smooth runs, flat patches and noise, so that every filter and every branch of the
/// Paeth predictor is taken. `max` bounds each byte (palette indices, low-depth gray).
std::string test_samples(std::size_t n, std::uint32_t w, int max, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t x = i % (w * 8), y = i / (w * 8);
        int v = int((x * 3 + y * 5) & 0xff);
        if ((y / 4) % 3 == 1) v = 200;                // flat patches
        if ((x / 16) % 2 == 1) v ^= int(rng() & 0x3f);  // noise
        s[i] = char(v % (max + 1));
    }
    return s;
}

PngSpec spec(int color, int depth, std::uint32_t w, std::uint32_t h, int filters = PNG_ALL_FILTERS) {
    PngSpec s;
    s.w = w, s.h = h, s.color = color, s.depth = depth, s.filters = filters;
    const std::size_t n = std::size_t(w) * h * std::size_t(channels_of(color)) * (depth == 16 ? 2 : 1);
    const std::uint64_t seed = 7u * w + h + std::uint64_t(color) * 131 + std::uint64_t(depth);
    s.samples = test_samples(n, w, depth < 8 ? (1 << depth) - 1 : 255, seed);
    return s;
}

/// The cube libpng should give for a non-palette, 8/16-bit spec: the samples, 16 bits in host order.
Cube expected_cube(const PngSpec& s) {
    Cube c(int(s.w), int(s.h), channels_of(s.color), s.depth == 16 ? DType::U16 : DType::U8, Layout::BIP);
    if (s.depth == 8) {
        std::memcpy(c.bytes(), s.samples.data(), s.samples.size());
    } else {
        auto* p = c.data<std::uint16_t>();
        for (std::size_t i = 0; i < c.num_elements(); ++i)
            p[i] = std::uint16_t((unsigned char)s.samples[2 * i] << 8 | (unsigned char)s.samples[2 * i + 1]);
    }
    return c;
}

::testing::AssertionResult same_cube(const Cube& a, const Cube& b) {
    if (a.shape().describe() != b.shape().describe())
        return ::testing::AssertionFailure() << a.shape().describe() << " against " << b.shape().describe();
    if (std::memcmp(a.bytes(), b.bytes(), a.num_bytes()) != 0) return ::testing::AssertionFailure() << "samples differ";
    return ::testing::AssertionSuccess();
}

// ---- chunk surgery for damaged files ------------------------------------------------------------

std::uint32_t be32_at(const std::string& f, std::size_t p) {
    return std::uint32_t((unsigned char)f[p]) << 24 | std::uint32_t((unsigned char)f[p + 1]) << 16 |
           std::uint32_t((unsigned char)f[p + 2]) << 8 | std::uint32_t((unsigned char)f[p + 3]);
}
void set_be32(std::string& f, std::size_t p, std::uint32_t v) {
    for (int k = 0; k < 4; ++k) f[p + std::size_t(k)] = char(v >> (24 - 8 * k));
}
struct ChunkAt {
    std::size_t offset, length;
    std::string type;
};
std::vector<ChunkAt> chunks_of(const std::string& f) {
    std::vector<ChunkAt> c;
    for (std::size_t p = 8; p + 12 <= f.size(); p += 12 + be32_at(f, p)) c.push_back({p, be32_at(f, p), f.substr(p + 4, 4)});
    return c;
}
void fix_crc(std::string& f, const ChunkAt& c) {
    const auto* d = reinterpret_cast<const Bytef*>(f.data() + c.offset + 4);
    set_be32(f, c.offset + 8 + c.length, std::uint32_t(crc32(0, d, uInt(c.length + 4))));
}
std::string chunk(const std::string& type, const std::string& data) {
    std::string c(4, '\0');
    set_be32(c, 0, std::uint32_t(data.size()));
    c += type + data + std::string(4, '\0');
    fix_crc(c, {0, data.size(), type});
    return c;
}

/// What reading gave: the samples, or the message.
std::string outcome(const std::function<Cube()>& read) {
    try {
        const Cube c = read();
        return c.shape().describe() + ":" + std::string(reinterpret_cast<const char*>(c.bytes()), c.num_bytes());
    } catch (const InvalidInput& e) {
        return std::string("error: ") + e.what();
    }
}

}  // namespace

// ---- reading ------------------------------------------------------------------------------------

TEST(IoPng, FastDecoderGivesTheSamplesOfEveryFilterAndFormat) {
    if (!io_detail::png_fast_decoder_built()) GTEST_SKIP() << "built without libdeflate";
    const int filters[] = {PNG_FILTER_NONE, PNG_FILTER_SUB, PNG_FILTER_UP, PNG_FILTER_AVG, PNG_FILTER_PAETH, PNG_ALL_FILTERS};
    for (int color : {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGBA})
        for (int depth : {8, 16})
            for (int f : filters)
                for (auto [w, h] : {std::pair<std::uint32_t, std::uint32_t>{37, 23}, {1, 5}, {9, 1}}) {
                    SCOPED_TRACE("color " + std::to_string(color) + ", depth " + std::to_string(depth) + ", filters " +
                                 std::to_string(f) + ", " + std::to_string(w) + "x" + std::to_string(h));
                    PngSpec s = spec(color, depth, w, h, f);
                    s.idat_size = 64;  // many IDAT chunks
                    const std::string file = libpng_file(s);
                    const std::optional<Cube> fast = decode_png_fast(file);
                    ASSERT_TRUE(fast.has_value());
                    EXPECT_TRUE(same_cube(*fast, expected_cube(s)));
                    EXPECT_TRUE(same_cube(*fast, decode_png_libpng("x.png", file)));
                }
}

TEST(IoPng, PaletteLowDepthAndInterlacedAreLeftToLibpng) {
    const fs::path dir = temp_dir("png-libpng");
    std::vector<PngSpec> specs;
    for (int depth : {1, 2, 4}) specs.push_back(spec(PNG_COLOR_TYPE_GRAY, depth, 37, 23));
    for (int depth : {4, 8}) {
        PngSpec s = spec(PNG_COLOR_TYPE_PALETTE, depth, 37, 23);
        for (int i = 0; i < (1 << depth); ++i) s.palette.push_back({png_byte(i * 7), png_byte(255 - i), png_byte(i * 3)});
        if (depth == 8) s.trns = {0, 128, 255, 7};
        specs.push_back(s);
    }
    PngSpec rgb = spec(PNG_COLOR_TYPE_RGB, 8, 37, 23), ga16 = spec(PNG_COLOR_TYPE_GRAY_ALPHA, 16, 37, 23);
    rgb.interlace = ga16.interlace = true;
    specs.push_back(rgb);
    specs.push_back(ga16);
    for (const PngSpec& s : specs) {
        SCOPED_TRACE("color " + std::to_string(s.color) + ", depth " + std::to_string(s.depth) +
                     (s.interlace ? ", interlaced" : ""));
        const std::string file = libpng_file(s);
        EXPECT_FALSE(decode_png_fast(file).has_value());
        put(dir / "f.png", file);
        const Cube libpng = decode_png_libpng(dir / "f.png", file);
        EXPECT_TRUE(same_cube(read_cube(dir / "f.png"), libpng));
        if (s.interlace) EXPECT_TRUE(same_cube(libpng, expected_cube(s)));
    }
}

TEST(IoPng, SharedImagesDecodeAsWithLibpng) {
    int fast = 0;
    for (const char* folder : {"rgb", "gray"}) {
        const std::optional<fs::path> dir = shared_data_path(folder);
        if (!dir) continue;
        for (const auto& e : fs::directory_iterator(*dir)) {
            if (e.path().extension() != ".png") continue;
            SCOPED_TRACE(e.path().string());
            const std::string file = get(e.path());
            const Cube libpng = decode_png_libpng(e.path(), file);
            if (const std::optional<Cube> c = decode_png_fast(file)) {
                EXPECT_TRUE(same_cube(*c, libpng));
                ++fast;
            }
            EXPECT_TRUE(same_cube(read_cube(e.path()), libpng));
        }
    }
    if (fast == 0) GTEST_SKIP() << "no shared PNG decoded by the fast decoder (no shared data, or no libdeflate)";
}

// Every damage gives what libpng alone gives: the same samples (libpng skips an ancillary chunk with
// a bad CRC and what follows IEND) or the same message.
TEST(IoPng, DamagedFilesReadAsWithLibpng) {
    const fs::path dir = temp_dir("png-damaged");
    PngSpec s = spec(PNG_COLOR_TYPE_RGB, 8, 64, 40);
    s.idat_size = 256;
    std::string good = libpng_file(s);
    good.insert(chunks_of(good)[1].offset, chunk("tEXt", std::string("Comment\0made by libpng", 22)));
    const std::vector<ChunkAt> c = chunks_of(good);  // IHDR, tEXt, IDAT..., IEND
    const ChunkAt& idat = c[2];
    const ChunkAt& last_idat = c[c.size() - 2];
    std::vector<std::pair<std::string, std::string>> cases;  // name, file
    auto damaged = [&](const std::string& name, auto&& edit) {
        std::string f = good;
        edit(f);
        cases.emplace_back(name, f);
    };
    damaged("IDAT byte flipped", [&](std::string& f) { f[idat.offset + 8 + 100] ^= 0x55; });
    damaged("IDAT byte flipped, CRC fixed", [&](std::string& f) { f[idat.offset + 8 + 100] ^= 0x55, fix_crc(f, idat); });
    damaged("Adler-32 wrong, CRC fixed", [&](std::string& f) {
        f[last_idat.offset + 8 + last_idat.length - 1] ^= 1, fix_crc(f, last_idat);
    });
    damaged("tEXt CRC wrong", [&](std::string& f) { f[c[1].offset + 10] ^= 1; });
    damaged("no IEND", [&](std::string& f) { f.resize(c.back().offset); });
    damaged("cut in the middle", [&](std::string& f) { f.resize(f.size() / 2); });
    damaged("cut in the last CRC", [&](std::string& f) { f.resize(f.size() - 1); });
    damaged("bytes after IEND", [&](std::string& f) { f += "trailing"; });
    damaged("zlib data after the stream", [&](std::string& f) { f.insert(c.back().offset, chunk("IDAT", "more")); });
    damaged("IDAT after a gap", [&](std::string& f) { f.insert(last_idat.offset, chunk("tIME", std::string(7, '\1'))); });
    damaged("unknown critical chunk", [&](std::string& f) { f.insert(c[1].offset, chunk("ABCD", "x")); });
    damaged("IDAT missing", [&](std::string& f) {
        f.erase(idat.offset, last_idat.offset + last_idat.length + 12 - idat.offset);
    });
    damaged("height one row more", [&](std::string& f) { set_be32(f, 8 + 12, s.h + 1), fix_crc(f, c[0]); });
    damaged("filter type 5", [&](std::string& f) {
        // Decompress, set row 3's filter byte to 5, recompress into one IDAT.
        std::string z;
        for (std::size_t i = 2; i + 1 < c.size(); ++i) z += f.substr(c[i].offset + 8, c[i].length);
        std::string raw(std::size_t(s.h) * (s.w * 3 + 1), '\0');
        uLongf n = uLongf(raw.size());
        const auto* zin = reinterpret_cast<const Bytef*>(z.data());
        ASSERT_EQ(uncompress(reinterpret_cast<Bytef*>(raw.data()), &n, zin, uLong(z.size())), Z_OK);
        raw[3 * (s.w * 3 + 1)] = 5;
        std::string zz(compressBound(uLong(raw.size())), '\0');
        uLongf m = uLongf(zz.size());
        compress(reinterpret_cast<Bytef*>(zz.data()), &m, reinterpret_cast<const Bytef*>(raw.data()), uLong(raw.size()));
        f = f.substr(0, idat.offset) + chunk("IDAT", zz.substr(0, m)) + f.substr(c.back().offset);
    });
    for (const auto& named : cases) {  // not a structured binding: clang cannot capture one with OpenMP
        const std::string& name = named.first;
        const std::string& file = named.second;
        SCOPED_TRACE(name);
        put(dir / "d.png", file);
        const std::string expected = outcome([&] { return decode_png_libpng(dir / "d.png", file); });
        EXPECT_EQ(outcome([&] { return read_cube(dir / "d.png"); }), expected);
        if (name != "bytes after IEND") EXPECT_FALSE(decode_png_fast(file).has_value());
    }
}

// ---- writing ------------------------------------------------------------------------------------

namespace {

/// A cube with smooth runs and noise (so that both deflate's matches and literals are used).
Cube image_cube(int w, int h, int bands, DType t, Layout layout, std::uint64_t seed) {
    Cube c = sample_cube(w, h, bands, t, layout, seed);
    const double top = t == DType::U16 ? 65535 : 255;
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            for (int b = 0; b < bands; ++b)
                if ((x / 8 + y / 8) % 2) c.set_value(x, y, b, std::fmod(x * 3.0 + y + b * 40.0, top));
    return c;
}

std::vector<ChunkAt> chunks_in(const fs::path& p) { return chunks_of(get(p)); }

}  // namespace

TEST(IoPng, FastEncoderRoundTripsThroughLibpng) {
    const fs::path dir = temp_dir("png-encode");
    struct Case {
        int w, h, bands;
        DType t;
        Layout layout;
    };
    const Case cases[] = {{37, 23, 1, DType::U8, Layout::BIP},  {37, 23, 2, DType::U8, Layout::BSQ},
                          {37, 23, 3, DType::U16, Layout::BIL}, {37, 23, 4, DType::U16, Layout::BIP},
                          {1, 1, 3, DType::U8, Layout::BIP},    {700, 400, 3, DType::U8, Layout::BIP},
                          {500, 300, 4, DType::U16, Layout::BSQ}};
    for (const Case& k : cases) {
        const Cube cube = image_cube(k.w, k.h, k.bands, k.t, k.layout, std::uint64_t(k.w * 10 + k.bands));
        SCOPED_TRACE(cube.shape().describe());
        const fs::path p = dir / "e.png";
        write_cube(cube, p, {.png_compression = PngCompression::Fast});
        const Cube back = decode_png_libpng(p, get(p));  // libpng checks every CRC and the Adler-32
        EXPECT_TRUE(same_cube(back, cube.to_layout(Layout::BIP)));
        EXPECT_TRUE(same_cube(read_cube(p), back));
        std::size_t idats = 0;
        for (const ChunkAt& c : chunks_in(p)) idats += c.type == "IDAT";
        const std::size_t bytes = std::size_t(k.w) * std::size_t(k.h) * std::size_t(k.bands) * dtype_size(k.t);
        if (bytes > 1000000) EXPECT_GT(idats, 1u) << "a large image is compressed in several strips";
    }
}

TEST(IoPng, FastEncoderFileIsTheSameForEveryThreadCount) {
    const fs::path dir = temp_dir("png-threads");
    const Cube cube = image_cube(1000, 600, 3, DType::U8, Layout::BIP, 5);
    const int before = omp_get_max_threads();
    std::vector<std::string> files;
    for (int threads : {1, 3, 8}) {
        omp_set_num_threads(threads);
        write_cube(cube, dir / "t.png", {.png_compression = PngCompression::Fast});
        files.push_back(get(dir / "t.png"));
    }
    omp_set_num_threads(before);
    EXPECT_EQ(files[0], files[1]);
    EXPECT_EQ(files[0], files[2]);
    EXPECT_TRUE(same_cube(read_cube(dir / "t.png"), cube));
}

TEST(IoPng, IndexedFastEncoderRoundTrips) {
    const fs::path dir = temp_dir("png-indexed");
    for (int entries : {2, 3, 4, 16, 17, 256})
        for (auto [w, h] : {std::pair<int, int>{13, 7}, {2000, 600}})
            for (bool with_alpha : {false, true}) {
                SCOPED_TRACE(std::to_string(entries) + " entries, " + std::to_string(w) + "x" + std::to_string(h) +
                             (with_alpha ? ", alpha" : ""));
                std::vector<std::array<std::uint8_t, 3>> palette;
                for (int i = 0; i < entries; ++i)
                    palette.push_back({std::uint8_t(i), std::uint8_t(255 - i), std::uint8_t(i * 5)});
                std::vector<std::uint8_t> alpha;
                if (with_alpha) alpha = {9, 200};
                std::vector<std::uint8_t> index(std::size_t(w) * std::size_t(h));
                std::mt19937 rng(unsigned(entries + w));
                for (std::size_t i = 0; i < index.size(); ++i)
                    index[i] = std::uint8_t((i / 5 % 3 == 0 ? rng() : i / 7) % unsigned(entries));
                const fs::path p = dir / "i.png";
                write_indexed_png(p, w, h, index, palette, alpha, PngCompression::Fast);
                const std::string file = get(p);
                const int depth = entries <= 2 ? 1 : entries <= 4 ? 2 : entries <= 16 ? 4 : 8;
                EXPECT_EQ(int(file[24]), depth);
                const Cube back = decode_png_libpng(p, file);
                ASSERT_EQ(back.bands(), with_alpha ? 4 : 3);
                for (std::size_t i = 0; i < index.size(); ++i) {
                    const int x = int(i % std::size_t(w)), y = int(i / std::size_t(w)), k = index[i];
                    for (int b = 0; b < 3; ++b)
                        ASSERT_EQ(back.value(x, y, b), palette[std::size_t(k)][std::size_t(b)]) << x << "," << y;
                    if (with_alpha) ASSERT_EQ(back.value(x, y, 3), std::size_t(k) < alpha.size() ? alpha[std::size_t(k)] : 255);
                }
            }
}
