// JPEG (read only) through libjpeg(-turbo): grayscale → 1 band, YCbCr/RGB → 3 bands, u8, BIP.
// CMYK/YCCK JPEGs are refused (libjpeg cannot convert them to RGB).
//
// libjpeg's default error handler calls exit(); ours records the message and longjmps back into a
// stage function that owns no C++ objects (see the note in png.cpp), and the caller throws.
#include <csetjmp>
#include <cstdio>
#include <cstring>

#include <jpeglib.h>

#include "io/io_internal.hpp"

namespace cubekit::io_detail {

namespace {

constexpr std::string_view kRead = "read_jpeg";

struct JpegError {
    jpeg_error_mgr mgr;  // first member: libjpeg hands us a pointer to it
    std::jmp_buf jump;
    char message[JMSG_LENGTH_MAX] = {};
};

extern "C" void on_error_exit(j_common_ptr cinfo) {
    auto* err = reinterpret_cast<JpegError*>(cinfo->err);
    (*cinfo->err->format_message)(cinfo, err->message);
    std::longjmp(err->jump, 1);
}
// Warnings ("premature end of data", "extraneous bytes") are not fatal for libjpeg either.
extern "C" void on_output_message(j_common_ptr) {}

struct HeaderInfo {
    JDIMENSION width = 0, height = 0;
    int channels = 0;
    J_COLOR_SPACE color = JCS_UNKNOWN;
};

bool jpeg_header_stage(jpeg_decompress_struct* cinfo, JpegError* err, const unsigned char* data, unsigned long size,
                       HeaderInfo* out) {
    if (setjmp(err->jump)) return false;
    jpeg_create_decompress(cinfo);
    jpeg_mem_src(cinfo, data, size);
    jpeg_read_header(cinfo, TRUE);
    out->color = cinfo->jpeg_color_space;
    if (out->color == JCS_CMYK || out->color == JCS_YCCK) return true;  // the caller refuses it
    cinfo->out_color_space = out->color == JCS_GRAYSCALE ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(cinfo);
    out->width = cinfo->output_width;
    out->height = cinfo->output_height;
    out->channels = cinfo->output_components;
    return true;
}

bool jpeg_rows_stage(jpeg_decompress_struct* cinfo, JpegError* err, unsigned char* dst, std::size_t row_bytes) {
    if (setjmp(err->jump)) return false;
    while (cinfo->output_scanline < cinfo->output_height) {
        JSAMPROW row = dst + std::size_t(cinfo->output_scanline) * row_bytes;
        jpeg_read_scanlines(cinfo, &row, 1);
    }
    jpeg_finish_decompress(cinfo);
    return true;
}

struct Decompressor {
    jpeg_decompress_struct cinfo{};
    JpegError err;
    ~Decompressor() { jpeg_destroy_decompress(&cinfo); }  // safe on a partly created struct
};

}  // namespace

Cube read_jpeg(const fs::path& path) {
    const std::string bytes = InputFile(kRead, path).read_all();
    if (bytes.size() < 3 || std::memcmp(bytes.data(), "\xFF\xD8\xFF", 3) != 0)
        throw_invalid(kRead, path, "not a JPEG file (no FF D8 FF signature)");
    Decompressor d;
    d.cinfo.err = jpeg_std_error(&d.err.mgr);
    d.err.mgr.error_exit = on_error_exit;
    d.err.mgr.output_message = on_output_message;
    HeaderInfo hi;
    const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
    if (!jpeg_header_stage(&d.cinfo, &d.err, data, static_cast<unsigned long>(bytes.size()), &hi))
        throw_invalid(kRead, path, std::string("libjpeg: ") + d.err.message);
    if (hi.color == JCS_CMYK || hi.color == JCS_YCCK)
        throw_invalid(kRead, path, "CMYK JPEGs are not supported (grayscale, YCbCr and RGB are)");
    if (hi.channels != 1 && hi.channels != 3)
        throw_invalid(kRead, path, "unexpected decoded format (" + std::to_string(hi.channels) + " channels)");
    if (hi.width == 0 || hi.height == 0 || hi.width > 0x7fffffffu || hi.height > 0x7fffffffu)
        throw_invalid(kRead, path, "unsupported size " + std::to_string(hi.width) + "x" + std::to_string(hi.height));
    Cube cube(int(hi.width), int(hi.height), hi.channels, DType::U8, Layout::BIP);
    const std::size_t row_bytes = std::size_t(hi.width) * std::size_t(hi.channels);
    if (!jpeg_rows_stage(&d.cinfo, &d.err, reinterpret_cast<unsigned char*>(cube.bytes()), row_bytes))
        throw_invalid(kRead, path, std::string("libjpeg: ") + d.err.message);
    return cube;
}

}  // namespace cubekit::io_detail
