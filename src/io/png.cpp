// PNG through libpng: 8 and 16 bit, gray, gray+alpha, RGB, RGBA; palette and low-bit-depth gray
// are expanded. Read gives a BIP cube (u8 or u16) with bands = channels. write_indexed_png writes
// palette images (PLTE, optional tRNS) at the smallest bit depth that holds the palette.
//
// Speed: reading tries the libdeflate decoder first (png_decode.cpp, twice libpng's speed on the
// common files) and falls back to libpng; writing at PngCompression::Fast goes through the
// parallel encoder (png_encode.cpp); Default and Small stay with libpng (adaptive filters).
//
// libpng reports errors by longjmp. A longjmp must not cross C++ frames that own objects with
// destructors, so the libpng calls live in small functions (png_*_stage) that own nothing: all
// C++ state (buffers, the output file) belongs to the caller and is reached through a plain
// struct. Errors are turned into exceptions only after the stage function has returned.
#include <algorithm>
#include <bit>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <exception>

#include <png.h>

#include <zlib.h>

#include "io/png_internal.hpp"

namespace cubekit::io_detail {

namespace {

constexpr std::string_view kRead = "read_png";
constexpr std::string_view kWrite = "write_png";

struct PngState {
    char message[256] = {};
    // Reading: the encoded file in memory.
    const unsigned char* in = nullptr;
    std::size_t in_size = 0;
    std::size_t in_pos = 0;
    // Writing: the output file; an exception thrown while writing is parked here.
    AtomicFile* out = nullptr;
    std::exception_ptr write_error;
};

PngState* state_of(png_structp png) { return static_cast<PngState*>(png_get_error_ptr(png)); }

extern "C" void on_error(png_structp png, png_const_charp msg) {
    PngState* s = state_of(png);
    std::snprintf(s->message, sizeof(s->message), "%s", msg ? msg : "unknown libpng error");
    png_longjmp(png, 1);
}
extern "C" void on_warning(png_structp, png_const_charp) {}  // warnings (e.g. bad sRGB chunk) are harmless

extern "C" void read_from_memory(png_structp png, png_bytep dst, png_size_t n) {
    auto* s = static_cast<PngState*>(png_get_io_ptr(png));
    if (s->in_size - s->in_pos < n) png_error(png, "the file is truncated");
    std::memcpy(dst, s->in + s->in_pos, n);
    s->in_pos += n;
}

extern "C" void write_to_file(png_structp png, png_bytep data, png_size_t n) {
    auto* s = static_cast<PngState*>(png_get_io_ptr(png));
    bool failed = false;
    try {
        s->out->write(data, n);
    } catch (...) {
        s->write_error = std::current_exception();
        failed = true;
    }
    // png_error after the try block has ended: no C++ object is live in this frame.
    if (failed) png_error(png, "write failed");
}
extern "C" void flush_file(png_structp) {}

struct ReadInfo {
    png_uint_32 width = 0, height = 0;
    int channels = 0, bit_depth = 0;
};

// Stage 1 of reading: header and transformations. Returns false on a libpng error.
bool png_read_header_stage(png_structp png, png_infop info, ReadInfo* out) {
    if (setjmp(png_jmpbuf(png))) return false;
    png_read_info(png, info);
    const int color = png_get_color_type(png, info);
    const int depth = png_get_bit_depth(png, info);
    if (color == PNG_COLOR_TYPE_PALETTE) {
        png_set_palette_to_rgb(png);
        if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);  // RGBA
    }
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16 && std::endian::native == std::endian::little) png_set_swap(png);  // PNG is big-endian
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    out->width = png_get_image_width(png, info);
    out->height = png_get_image_height(png, info);
    out->channels = png_get_channels(png, info);
    out->bit_depth = png_get_bit_depth(png, info);
    return true;
}

// Stage 2 of reading: the rows, into caller-owned memory.
bool png_read_rows_stage(png_structp png, png_infop info, png_bytepp rows) {
    if (setjmp(png_jmpbuf(png))) return false;
    png_read_image(png, rows);
    png_read_end(png, info);
    return true;
}

// Compression settings before the header is written (see PngCompression in io.hpp), for the
// levels libpng writes: Default keeps libpng's defaults (level 6, adaptive filters).
void set_compression(png_structp png, PngCompression compression) {
    if (compression == PngCompression::Small) png_set_compression_level(png, 9);
}

// PngCompression::Fast, through encode_png: zlib level 1, the default strategy. Z_RLE (matches at
// distance 1 only, OpenCV's choice) was a little faster and 4% smaller on the 4K photo, but 1.7 to
// 2.5 times larger on quantized images (cubekit quantize's outputs), whose repeated patterns need
// longer distances.
constexpr PngDeflate kFast{1, Z_DEFAULT_STRATEGY};

bool png_write_stage(png_structp png, png_infop info, png_uint_32 w, png_uint_32 h, int depth, int color,
                     png_bytepp rows, PngCompression compression) {
    if (setjmp(png_jmpbuf(png))) return false;
    set_compression(png, compression);
    png_set_IHDR(png, info, w, h, depth, color, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    if (depth == 16 && std::endian::native == std::endian::little) png_set_swap(png);
    png_write_image(png, rows);
    png_write_end(png, info);
    return true;
}

// Indexed image: PLTE (and tRNS) before the header is written; png_set_packing packs the one
// byte per pixel the rows hold into 1, 2 or 4 bits.
bool png_write_indexed_stage(png_structp png, png_infop info, png_uint_32 w, png_uint_32 h, int depth,
                             png_const_colorp palette, int palette_size, png_const_bytep alpha, int alpha_size,
                             png_bytepp rows, PngCompression compression) {
    if (setjmp(png_jmpbuf(png))) return false;
    set_compression(png, compression);
    png_set_IHDR(png, info, w, h, depth, PNG_COLOR_TYPE_PALETTE, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_set_PLTE(png, info, palette, palette_size);
    if (alpha_size > 0) png_set_tRNS(png, info, alpha, alpha_size, nullptr);
    png_write_info(png, info);
    if (depth < 8) png_set_packing(png);
    png_write_image(png, rows);
    png_write_end(png, info);
    return true;
}

struct ReadStructs {
    png_structp png = nullptr;
    png_infop info = nullptr;
    ~ReadStructs() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};
struct WriteStructs {
    png_structp png = nullptr;
    png_infop info = nullptr;
    ~WriteStructs() { png_destroy_write_struct(&png, info ? &info : nullptr); }
};

}  // namespace

Cube decode_png_libpng(const fs::path& path, const std::string& bytes) {
    PngState state;
    state.in = reinterpret_cast<const unsigned char*>(bytes.data());
    state.in_size = bytes.size();
    ReadStructs s;
    s.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &state, on_error, on_warning);
    if (!s.png || !(s.info = png_create_info_struct(s.png))) throw std::bad_alloc();
    png_set_read_fn(s.png, &state, read_from_memory);
    // Images up to 2^31-1 pixels a side are representable; libpng's default cap (1,000,000) is
    // only a guard against hostile files, and hyperspectral mosaics can exceed it.
    png_set_user_limits(s.png, 0x7fffffff, 0x7fffffff);

    ReadInfo ri;
    if (!png_read_header_stage(s.png, s.info, &ri)) throw_invalid(kRead, path, std::string("libpng: ") + state.message);
    if ((ri.bit_depth != 8 && ri.bit_depth != 16) || ri.channels < 1 || ri.channels > 4)
        throw_invalid(kRead, path, "unexpected decoded format (" + std::to_string(ri.channels) + " channels of " +
                                       std::to_string(ri.bit_depth) + " bits)");
    if (ri.width > 0x7fffffffu || ri.height > 0x7fffffffu) throw_invalid(kRead, path, "the image is too large");
    Cube cube = Cube::uninitialized(int(ri.width), int(ri.height), ri.channels,
                                    ri.bit_depth == 16 ? DType::U16 : DType::U8, Layout::BIP);  // every row is read
    const std::size_t row_bytes = std::size_t(ri.width) * std::size_t(ri.channels) * std::size_t(ri.bit_depth / 8);
    std::vector<png_bytep> rows(ri.height);
    for (png_uint_32 y = 0; y < ri.height; ++y) rows[y] = reinterpret_cast<png_bytep>(cube.bytes() + y * row_bytes);
    if (!png_read_rows_stage(s.png, s.info, rows.data())) throw_invalid(kRead, path, std::string("libpng: ") + state.message);
    return cube;
}

Cube read_png(const fs::path& path) {
    const std::string bytes = InputFile(kRead, path).read_all();
    if (bytes.size() < 8 || png_sig_cmp(reinterpret_cast<png_const_bytep>(bytes.data()), 0, 8) != 0)
        throw_invalid(kRead, path, "not a PNG file (no PNG signature)");
    if (std::optional<Cube> cube = decode_png_fast(bytes)) return std::move(*cube);
    return decode_png_libpng(path, bytes);
}

// Writes a PNG atomically: `stage(png, info)` (one of the setjmp-guarded stages above) emits the
// image; a file error comes back as IoError, a libpng error as InvalidInput naming the file.
template <typename Stage>
void write_png_file(std::string_view what, const fs::path& path, Stage&& stage) {
    AtomicFile out(what, path);
    PngState state;
    state.out = &out;
    WriteStructs s;
    s.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &state, on_error, on_warning);
    if (!s.png || !(s.info = png_create_info_struct(s.png))) throw std::bad_alloc();
    png_set_write_fn(s.png, &state, write_to_file, flush_file);
    if (!stage(s.png, s.info)) {
        if (state.write_error) std::rethrow_exception(state.write_error);  // IoError from the file
        throw_invalid(what, path, std::string("libpng: ") + state.message);
    }
    out.commit();
}

/// encode_png into an atomic file.
void write_png_fast(std::string_view what, const fs::path& path, const PngImage& image, const PngDeflate& deflate) {
    AtomicFile out(what, path);
    encode_png(image, out, deflate);
    out.commit();
}

void write_png(const Cube& cube, const fs::path& path, PngCompression compression) {
    check_image(kWrite, path, cube, 1, 4, "1 gray, 2 gray+alpha, 3 RGB, 4 RGBA");
    // One band is the same image in every layout; more need BIP, which costs a copy.
    Cube converted;
    const Cube& bip = cube.layout() == Layout::BIP || cube.bands() == 1 ? cube : (converted = cube.to_layout(Layout::BIP));
    static constexpr int kColor[] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                     PNG_COLOR_TYPE_RGBA};
    const int depth = bip.dtype() == DType::U16 ? 16 : 8;
    const std::size_t row_bytes = std::size_t(bip.width()) * std::size_t(bip.bands()) * std::size_t(depth / 8);
    if (compression == PngCompression::Fast) {
        const PngImage image{.rows = reinterpret_cast<const unsigned char*>(bip.bytes()), .stride = row_bytes,
                             .width = std::uint32_t(bip.width()), .height = std::uint32_t(bip.height()), .depth = depth,
                             .color = kColor[bip.bands()], .palette = {}, .alpha = {}};
        return write_png_fast(kWrite, path, image, kFast);
    }
    std::vector<png_bytep> rows(std::size_t(bip.height()));
    // libpng takes non-const row pointers but does not modify the rows (png_set_swap swaps a copy).
    auto* base = const_cast<std::byte*>(bip.bytes());
    for (std::size_t y = 0; y < rows.size(); ++y) rows[y] = reinterpret_cast<png_bytep>(base + y * row_bytes);

    write_png_file(kWrite, path, [&](png_structp png, png_infop info) {
        return png_write_stage(png, info, png_uint_32(bip.width()), png_uint_32(bip.height()), depth,
                               kColor[bip.bands()], rows.data(), compression);
    });
}

}  // namespace cubekit::io_detail

namespace cubekit {

void write_indexed_png(const std::filesystem::path& path, int width, int height,
                       const std::vector<std::uint8_t>& indices,
                       const std::vector<std::array<std::uint8_t, 3>>& palette,
                       const std::vector<std::uint8_t>& alpha, PngCompression compression) {
    using namespace io_detail;
    constexpr std::string_view kIndexed = "write_indexed_png";
    if (width <= 0 || height <= 0)
        throw_invalid(kIndexed, path, "the image is empty (" + std::to_string(width) + "x" + std::to_string(height) + ")");
    if (palette.empty() || palette.size() > 256)
        throw_invalid(kIndexed, path, std::to_string(palette.size()) + " palette entries; expected 1 to 256");
    if (alpha.size() > palette.size())
        throw_invalid(kIndexed, path, std::to_string(alpha.size()) + " alpha values for " +
                                          std::to_string(palette.size()) + " palette entries");
    const std::size_t W = std::size_t(width), H = std::size_t(height);
    if (indices.size() != W * H)
        throw_invalid(kIndexed, path, std::to_string(indices.size()) + " indices for a " + std::to_string(width) + "x" +
                                          std::to_string(height) + " image");
    const auto worst = std::max_element(indices.begin(), indices.end());
    if (*worst >= palette.size())
        throw_invalid(kIndexed, path, "index " + std::to_string(*worst) + " at pixel " +
                                          std::to_string(worst - indices.begin()) + " is outside the palette of " +
                                          std::to_string(palette.size()) + " entries");
    const int depth = palette.size() <= 2 ? 1 : palette.size() <= 4 ? 2 : palette.size() <= 16 ? 4 : 8;
    if (compression == PngCompression::Fast) {
        const PngImage image{.rows = indices.data(), .stride = W, .width = std::uint32_t(W), .height = std::uint32_t(H),
                             .depth = depth, .color = PNG_COLOR_TYPE_PALETTE, .palette = palette, .alpha = alpha};
        return write_png_fast(kIndexed, path, image, kFast);
    }
    std::vector<png_color> plte(palette.size());
    for (std::size_t i = 0; i < palette.size(); ++i) plte[i] = {palette[i][0], palette[i][1], palette[i][2]};
    std::vector<png_bytep> rows(H);
    // libpng takes non-const row pointers; packing works on a copy of each row.
    auto* base = const_cast<std::uint8_t*>(indices.data());
    for (std::size_t y = 0; y < H; ++y) rows[y] = base + y * W;

    write_png_file(kIndexed, path, [&](png_structp png, png_infop info) {
        return png_write_indexed_stage(png, info, png_uint_32(width), png_uint_32(height), depth, plte.data(),
                                       int(plte.size()), alpha.data(), int(alpha.size()), rows.data(), compression);
    });
}

}  // namespace cubekit
