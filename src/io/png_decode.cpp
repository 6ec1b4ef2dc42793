// The fast PNG decoder (png_internal.hpp): chunks checked, IDAT payloads joined, one libdeflate
// inflate of the whole zlib stream, rows unfiltered straight into the cube.
//
// Measured on the 3840x2160 RGB photo of bench/cli_wall.py (cv2.imwrite: Sub filter, zlib level 1),
// one thread of the 2-core development VM, from memory: libpng 106 ms, of which zlib's inflate is
// 82 ms; libdeflate inflates the same stream in 45 ms; read_png with this decoder takes 59 ms (file
// included). libspng (Debian 0.7.3) inflates with zlib too: 117 ms; stb_image 151, lodepng 170.
//
// Every check libpng makes on the data it keeps is made here too (each chunk's CRC, the zlib
// stream's Adler-32, the exact amount of image data); a file that fails one is not reported here
// but handed to libpng, so that the error (or libpng's leniency, e.g. for a bad CRC in an
// ancillary chunk, which it skips) stays what it was.
#include <algorithm>
#include <bit>
#include <cstring>

#include "io/png_internal.hpp"

#ifdef CUBEKIT_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

namespace cubekit::io_detail {

#ifndef CUBEKIT_HAVE_LIBDEFLATE

bool png_fast_decoder_built() { return false; }
std::optional<Cube> decode_png_fast(const std::string&) { return std::nullopt; }

#else

bool png_fast_decoder_built() { return true; }

namespace {

std::uint32_t be32(const unsigned char* p) {
    return std::uint32_t(p[0]) << 24 | std::uint32_t(p[1]) << 16 | std::uint32_t(p[2]) << 8 | std::uint32_t(p[3]);
}

struct Header {
    std::uint32_t width = 0, height = 0;
    int depth = 0, color = 0;
    int channels() const { return color == 0 ? 1 : color == 2 ? 3 : color == 4 ? 2 : 4; }
};

/// What the chunk walk found: the header and where the IDAT payloads are.
struct Chunks {
    Header header;
    std::vector<std::pair<std::size_t, std::size_t>> idat;  // offset, length
    std::size_t idat_bytes = 0;
};

bool is_chunk(const unsigned char* type, const char* name) { return std::memcmp(type, name, 4) == 0; }

/// The IHDR payload, if it is one this decoder takes.
std::optional<Header> parse_ihdr(const unsigned char* d) {
    Header h{be32(d), be32(d + 4), d[8], d[9]};
    const bool plain = d[10] == 0 && d[11] == 0 && d[12] == 0;  // deflate, filter method 0, not interlaced
    if (!plain || h.width == 0 || h.height == 0 || h.width > 0x7fffffffu || h.height > 0x7fffffffu) return std::nullopt;
    if ((h.depth != 8 && h.depth != 16) || (h.color != 0 && h.color != 2 && h.color != 4 && h.color != 6))
        return std::nullopt;
    return h;
}

/// Walks the chunks from the signature to IEND, checking every CRC. Takes IHDR first, at most one
/// run of consecutive IDATs, PLTE before it (a suggested palette; colour only), and ancillary
/// chunks anywhere; anything else is left to libpng.
std::optional<Chunks> walk_chunks(const unsigned char* f, std::size_t size) {
    Chunks c;
    bool have_header = false, idat_done = false;
    for (std::size_t pos = 8;;) {
        if (size - pos < 12) return std::nullopt;
        const std::uint32_t len = be32(f + pos);
        const unsigned char* type = f + pos + 4;
        if (len > 0x7fffffffu || size - pos - 12 < len) return std::nullopt;
        if (libdeflate_crc32(0, type, std::size_t(len) + 4) != be32(type + 4 + len)) return std::nullopt;
        const bool ihdr = is_chunk(type, "IHDR"), idat = is_chunk(type, "IDAT");
        if (have_header == ihdr) return std::nullopt;  // IHDR first, and only there
        if (!idat && !c.idat.empty()) idat_done = true;
        if (ihdr) {
            if (len != 13) return std::nullopt;
            const std::optional<Header> h = parse_ihdr(type + 4);
            if (!h) return std::nullopt;
            c.header = *h;
            have_header = true;
        } else if (idat) {
            if (idat_done) return std::nullopt;
            c.idat.emplace_back(pos + 8, len);
            c.idat_bytes += len;
        } else if (is_chunk(type, "IEND")) {
            return c.idat.empty() || len != 0 ? std::nullopt : std::optional<Chunks>(std::move(c));
        } else if (is_chunk(type, "PLTE")) {
            if (!c.idat.empty() || (c.header.color != 2 && c.header.color != 6)) return std::nullopt;
        } else if ((type[0] & 0x20) == 0) {
            return std::nullopt;  // an unknown critical chunk: libpng refuses it
        }
        pos += std::size_t(len) + 12;
    }
}

// ---- unfiltering (PNG specification §9.2), byte by byte as the specification writes it ---------

/// Row `y`: filter type f, filtered bytes `in`, the previous output row `prev` (zeros above row
/// 0), output `out`; bpp bytes per pixel (a template argument, so each pixel's bytes unroll).
template <int bpp>
bool unfilter_row(int f, const unsigned char* in, const unsigned char* prev, unsigned char* out, std::size_t n) {
    switch (f) {
        case 0: std::memcpy(out, in, n); return true;
        case 1:
            std::memcpy(out, in, std::min<std::size_t>(bpp, n));
            for (std::size_t i = bpp; i < n; ++i) out[i] = (unsigned char)(in[i] + out[i - bpp]);
            return true;
        case 2:
            for (std::size_t i = 0; i < n; ++i) out[i] = (unsigned char)(in[i] + prev[i]);
            return true;
        case 3:
            for (std::size_t i = 0; i < std::min<std::size_t>(bpp, n); ++i) out[i] = (unsigned char)(in[i] + (prev[i] >> 1));
            for (std::size_t i = bpp; i < n; ++i) out[i] = (unsigned char)(in[i] + ((out[i - bpp] + prev[i]) >> 1));
            return true;
        case 4:
            for (std::size_t i = 0; i < std::min<std::size_t>(bpp, n); ++i) out[i] = (unsigned char)(in[i] + prev[i]);
            for (std::size_t i = bpp; i < n; ++i) {
                const int a = out[i - bpp], b = prev[i], c = prev[i - bpp];
                const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
                const int pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
                out[i] = (unsigned char)(in[i] + pred);
            }
            return true;
        default: return false;
    }
}

template <int bpp>
bool unfilter_image(const unsigned char* raw, unsigned char* out, std::size_t row_bytes, std::size_t height) {
    const std::vector<unsigned char> zeros(row_bytes, 0);
    const unsigned char* prev = zeros.data();
    for (std::size_t y = 0; y < height; ++y) {
        const unsigned char* in = raw + y * (row_bytes + 1);
        unsigned char* row = out + y * row_bytes;
        if (!unfilter_row<bpp>(in[0], in + 1, prev, row, row_bytes)) return false;  // filter type > 4
        prev = row;
    }
    return true;
}

bool unfilter(int bpp, const unsigned char* raw, unsigned char* out, std::size_t row_bytes, std::size_t height) {
    switch (bpp) {
        case 1: return unfilter_image<1>(raw, out, row_bytes, height);
        case 2: return unfilter_image<2>(raw, out, row_bytes, height);
        case 3: return unfilter_image<3>(raw, out, row_bytes, height);
        case 4: return unfilter_image<4>(raw, out, row_bytes, height);
        case 6: return unfilter_image<6>(raw, out, row_bytes, height);
        default: return unfilter_image<8>(raw, out, row_bytes, height);
    }
}

struct Decompressor {
    libdeflate_decompressor* d = libdeflate_alloc_decompressor();
    ~Decompressor() { libdeflate_free_decompressor(d); }
};

/// Inflates the joined IDAT payloads into exactly `raw_size` bytes, or fails. The zlib stream
/// must end exactly at the end of the IDAT data (libdeflate checks its Adler-32).
bool inflate_all(const unsigned char* in, std::size_t in_size, unsigned char* raw, std::size_t raw_size) {
    Decompressor dec;
    if (!dec.d) throw std::bad_alloc();
    std::size_t used = 0, made = 0;
    const libdeflate_result r = libdeflate_zlib_decompress_ex(dec.d, in, in_size, raw, raw_size, &used, &made);
    return r == LIBDEFLATE_SUCCESS && used == in_size && made == raw_size;
}

}  // namespace

std::optional<Cube> decode_png_fast(const std::string& file) {
    const auto* f = reinterpret_cast<const unsigned char*>(file.data());
    const std::optional<Chunks> c = walk_chunks(f, file.size());
    if (!c) return std::nullopt;
    const Header& h = c->header;
    const std::size_t bpp = std::size_t(h.channels()) * std::size_t(h.depth / 8);
    const std::size_t row_bytes = std::size_t(h.width) * bpp, H = h.height;
    // Deflate expands at most 1032:1, so a stream too short for the image cannot be valid: no
    // buffer is allocated for it (libpng reports the missing data). This also bounds raw_size.
    if (row_bytes + 1 > (c->idat_bytes * 1032 + 1024) / H) return std::nullopt;
    const std::size_t raw_size = H * (row_bytes + 1);

    // One buffer: the inflated rows, then the IDAT payloads joined into one zlib stream. (Joining
    // them in place in `file` would save the copy, ~1 ms for a 4K photo, but libpng must get the
    // file intact when this decoder declines it.)
    HostBuffer buffer(raw_size + c->idat_bytes);
    auto* raw = reinterpret_cast<unsigned char*>(buffer.data());
    unsigned char* joined = raw + raw_size;
    std::size_t at = 0;
    for (const auto& [offset, len] : c->idat) {
        std::memcpy(joined + at, f + offset, len);
        at += len;
    }
    if (!inflate_all(joined, at, raw, raw_size)) return std::nullopt;
    Cube cube = Cube::uninitialized(int(h.width), int(H), h.channels(), h.depth == 16 ? DType::U16 : DType::U8,
                                    Layout::BIP);
    auto* out = reinterpret_cast<unsigned char*>(cube.bytes());
    if (!unfilter(int(bpp), raw, out, row_bytes, H)) return std::nullopt;
    if (h.depth == 16 && std::endian::native == std::endian::little) byteswap_inplace(out, H * row_bytes / 2, 2);
    return cube;
}

#endif  // CUBEKIT_HAVE_LIBDEFLATE

}  // namespace cubekit::io_detail
