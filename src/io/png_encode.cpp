// The parallel PNG encoder (png_internal.hpp): strips of rows filtered and compressed on all
// threads, written as IHDR, PLTE/tRNS, one IDAT per strip, IEND.
//
// A PNG holds one zlib stream, so libpng compresses on one thread (4K RGB at level 1: ~240 ms on
// the 2-core development VM, nearly all in zlib's deflate; libdeflate is twice as fast but cannot
// end a piece of stream without ending the stream, so it cannot be split like this). A deflate stream may however be cut anywhere at a byte
// boundary: each strip is compressed on its own with its 32 KiB history given as a preset
// dictionary (so matches may still reach back across the cut) and ended by a sync flush (an empty
// stored block that aligns to a byte), and the last strip by Z_FINISH. Concatenated, they are one
// valid stream; the Adler-32 of the whole is combined from the strips'. This is pigz's method.
#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <new>

#include <omp.h>
#include <zlib.h>

#include "io/png_internal.hpp"

namespace cubekit::io_detail {

namespace {

constexpr std::size_t kStripBytes = std::size_t(1) << 19;  // filtered bytes per strip (~48 strips for 4K RGB)
constexpr std::size_t kWindow = 32768;                     // deflate's history
constexpr std::size_t kFeed = std::size_t(1) << 30;        // zlib counts bytes in 32-bit uInt

void put_be32(unsigned char* p, std::uint32_t v) {
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16), p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

int channels_of(int color) { return color == 2 ? 3 : color == 4 ? 2 : color == 6 ? 4 : 1; }

/// Bytes of one filtered row, without its filter-type byte.
std::size_t row_bytes_of(const PngImage& im) {
    return (std::size_t(im.width) * std::size_t(channels_of(im.color)) * std::size_t(im.depth) + 7) / 8;
}

/// Packs `width` one-byte indices into `depth`-bit fields, the leftmost pixel in the high bits; the
/// last byte is padded with zero bits.
template <int depth>
void pack_indices(const unsigned char* src, std::size_t width, unsigned char* d) {
    constexpr std::size_t per_byte = 8 / depth;
    const std::size_t whole = width / per_byte;
    for (std::size_t i = 0; i < whole; ++i) {
        unsigned v = 0;
        for (std::size_t k = 0; k < per_byte; ++k) v = v << depth | src[i * per_byte + k];
        d[i] = (unsigned char)v;
    }
    if (const std::size_t rest = width - whole * per_byte) {
        unsigned v = 0;
        for (std::size_t k = 0; k < per_byte; ++k) v = v << depth | (k < rest ? src[whole * per_byte + k] : 0u);
        d[whole] = (unsigned char)v;
    }
}

/// Row y, filtered: the filter type, then the bytes. Palette rows: filter None, the indices packed
/// to `depth` bits (leftmost pixel in the high bits). Other rows: filter Sub (each byte minus the
/// same byte of the pixel to its left), 16-bit samples big-endian.
void filter_row(const PngImage& im, std::size_t y, unsigned char* out, std::size_t n) {
    const unsigned char* src = im.rows + y * im.stride;
    unsigned char* d = out + 1;
    if (im.color == 3) {
        out[0] = 0;
        switch (im.depth) {
            case 1: return pack_indices<1>(src, im.width, d);
            case 2: return pack_indices<2>(src, im.width, d);
            case 4: return pack_indices<4>(src, im.width, d);
            default: return (void)std::memcpy(d, src, n);
        }
    }
    out[0] = 1;
    const std::size_t bpp = std::size_t(channels_of(im.color)) * std::size_t(im.depth / 8);
    // Byte i of the big-endian row is src[i ^ swap]; bpp is even for 16 bits, so the byte one
    // pixel to the left is src[(i - bpp) ^ swap] = src[(i ^ swap) - bpp].
    const std::size_t swap = im.depth == 16 && std::endian::native == std::endian::little ? 1 : 0;
    for (std::size_t i = 0; i < std::min(bpp, n); ++i) d[i] = src[i ^ swap];
    for (std::size_t i = bpp; i < n; ++i) d[i] = (unsigned char)(src[i ^ swap] - src[(i ^ swap) - bpp]);
}

/// One strip: rows [y0, y1), its compressed bytes at buffer + out (after the zlib header for
/// strip 0), and the Adler-32 of its filtered bytes.
struct Strip {
    std::size_t y0 = 0, y1 = 0;
    std::size_t out = 0, size = 0;
    std::uint32_t adler = 1;
    std::uint32_t crc = 0;  // of its IDAT chunk ("IDAT" and the payload) so far
    int error = Z_OK;
};

/// Rows whose filtered bytes make up the 32 KiB dictionary before a strip starting at row y0.
std::size_t dictionary_rows(std::size_t row, std::size_t y0) { return std::min(y0, (kWindow + row - 1) / row); }

/// Filters and compresses one strip; `scratch` holds its rows and those of its dictionary. Called
/// on any thread: reports failure in s.error, never throws.
void compress_strip(const PngImage& im, Strip& s, bool last, const PngDeflate& opt, unsigned char* scratch,
                    unsigned char* out, std::size_t room) {
    const std::size_t n = row_bytes_of(im), row = n + 1, before = dictionary_rows(row, s.y0);
    for (std::size_t y = s.y0 - before; y < s.y1; ++y) filter_row(im, y, scratch + (y - (s.y0 - before)) * row, n);
    const unsigned char* data = scratch + before * row;
    const std::size_t size = (s.y1 - s.y0) * row, dict = std::min(kWindow, before * row);
    z_stream z{};
    s.error = deflateInit2(&z, opt.level, Z_DEFLATED, -15, 8, opt.strategy);  // raw deflate: no header
    if (s.error != Z_OK) return;
    if (dict) s.error = deflateSetDictionary(&z, data - dict, uInt(dict));
    z.next_out = out;
    z.avail_out = uInt(std::min(room, std::size_t(0xffffffffu)));
    for (std::size_t at = 0; s.error == Z_OK;) {
        z.next_in = const_cast<unsigned char*>(data + at);
        z.avail_in = uInt(std::min(kFeed, size - at));
        at += z.avail_in;
        const int flush = at < size ? Z_NO_FLUSH : last ? Z_FINISH : Z_SYNC_FLUSH;
        const int r = deflate(&z, flush);
        // The room is a bound on the output, so every call takes all its input, Z_FINISH ends the
        // stream and a sync flush completes with room to spare; anything else is reported.
        const bool done = flush == Z_FINISH ? r == Z_STREAM_END : r == Z_OK && z.avail_out > 0;
        if (!done || z.avail_in) s.error = r == Z_OK || r == Z_STREAM_END ? Z_BUF_ERROR : r;
        if (flush != Z_NO_FLUSH) break;
    }
    s.size += z.total_out;
    deflateEnd(&z);
    s.adler = std::uint32_t(adler32_z(1, data, size));
}

/// Writes a chunk whose CRC (of the type and the data) is known.
void write_chunk(AtomicFile& out, const char* type, const unsigned char* data, std::size_t n, std::uint32_t crc) {
    unsigned char head[8], tail[4];
    put_be32(head, std::uint32_t(n));
    std::memcpy(head + 4, type, 4);
    put_be32(tail, crc);
    out.write(head, 8);
    if (n) out.write(data, n);
    out.write(tail, 4);
}
void write_chunk(AtomicFile& out, const char* type, const unsigned char* data, std::size_t n) {
    std::uint32_t crc = std::uint32_t(crc32_z(0, reinterpret_cast<const unsigned char*>(type), 4));
    if (n) crc = std::uint32_t(crc32_z(crc, data, n));  // (crc32 of a null buffer restarts: no call for IEND)
    write_chunk(out, type, data, n, crc);
}

void write_header_chunks(const PngImage& im, AtomicFile& out) {
    static constexpr unsigned char kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    out.write(kSignature, 8);
    unsigned char ihdr[13] = {};
    put_be32(ihdr, im.width);
    put_be32(ihdr + 4, im.height);
    ihdr[8] = (unsigned char)im.depth;
    ihdr[9] = (unsigned char)im.color;  // compression, filter method, interlace: 0
    write_chunk(out, "IHDR", ihdr, 13);
    if (im.color != 3) return;
    std::vector<unsigned char> plte;
    for (const auto& c : im.palette) plte.insert(plte.end(), c.begin(), c.end());
    write_chunk(out, "PLTE", plte.data(), plte.size());
    if (!im.alpha.empty()) write_chunk(out, "tRNS", im.alpha.data(), im.alpha.size());
}

/// The strips: whole rows, about kStripBytes each (at least one row). The payload of strip i goes
/// to buffer + out, after room for the most the strips before it can take; `bytes` is the total,
/// with the zlib header and the Adler-32.
struct StripPlan {
    std::vector<Strip> strips;
    std::size_t rows = 0, bytes = 0;  // rows per strip, bytes of the buffer
};
StripPlan plan_strips(std::size_t row, std::size_t height) {
    const std::size_t rows = std::max<std::size_t>(1, kStripBytes / row);
    StripPlan plan{std::vector<Strip>((height + rows - 1) / rows), rows, 0};
    for (std::size_t i = 0; i < plan.strips.size(); ++i) {
        Strip& s = plan.strips[i];
        s.y0 = i * rows;
        s.y1 = std::min(height, s.y0 + rows);
        s.out = plan.bytes;
        s.size = i == 0 ? 2 : 0;  // the zlib header
        plan.bytes += s.size + compressBound(uLong((s.y1 - s.y0) * row)) + 16;  // + the sync flush's empty block
    }
    plan.bytes += 4;  // the Adler-32
    return plan;
}

/// The two bytes before the deflate data: a 32 KiB window, the level's FLEVEL, and FCHECK making
/// the pair a multiple of 31 (RFC 1950).
void put_zlib_header(unsigned char* p, int level) {
    const unsigned flevel = level <= 1 ? 0 : level <= 5 ? 1 : level == 6 ? 2 : 3;
    const unsigned cmf_flg = 0x7800u | flevel << 6;
    p[0] = 0x78;
    p[1] = (unsigned char)((cmf_flg + (31 - cmf_flg % 31) % 31) & 0xff);
}

}  // namespace

void encode_png(const PngImage& im, AtomicFile& out, const PngDeflate& opt) {
    const std::size_t row = row_bytes_of(im) + 1;
    StripPlan plan = plan_strips(row, im.height);
    std::vector<Strip>& strips = plan.strips;
    // Plain new[] (no zeroing, 4 KiB pages): only the pages the strips write are ever touched,
    // about the compressed size; huge pages would clear the whole bound. Each thread filters its
    // strip, and the rows of the dictionary before it, into its own scratch.
    const std::unique_ptr<unsigned char[]> payload(new unsigned char[plan.bytes]);
    const int threads = int(std::min<std::size_t>(std::size_t(omp_get_max_threads()), strips.size()));
    const std::size_t scratch_bytes = (plan.rows + dictionary_rows(row, im.height)) * row;
    const std::unique_ptr<unsigned char[]> scratch(new unsigned char[scratch_bytes * std::size_t(threads)]);
    put_zlib_header(payload.get(), opt.level);  // before the strips: strip 0's CRC covers it
    const auto nstrips = std::int64_t(strips.size());
#pragma omp parallel for schedule(dynamic) num_threads(threads)
    for (std::int64_t i = 0; i < nstrips; ++i) {
        Strip& s = strips[std::size_t(i)];
        const bool last = i + 1 == nstrips;
        const std::size_t room = (last ? plan.bytes - 4 : strips[std::size_t(i) + 1].out) - s.out - s.size;
        compress_strip(im, s, last, opt, scratch.get() + std::size_t(omp_get_thread_num()) * scratch_bytes,
                       payload.get() + s.out + s.size, room);
        const auto* type = reinterpret_cast<const unsigned char*>("IDAT");
        s.crc = std::uint32_t(crc32_z(crc32_z(0, type, 4), payload.get() + s.out, s.size));
    }
    for (const Strip& s : strips)
        if (s.error != Z_OK) {
            if (s.error == Z_MEM_ERROR) throw std::bad_alloc();
            throw Error("encode_png: zlib error " + std::to_string(s.error));
        }
    std::uint32_t adler = strips[0].adler;
    for (std::size_t i = 1; i < strips.size(); ++i)
        adler = std::uint32_t(adler32_combine(adler, strips[i].adler, z_off_t((strips[i].y1 - strips[i].y0) * row)));
    Strip& last = strips.back();
    put_be32(payload.get() + last.out + last.size, adler);
    last.crc = std::uint32_t(crc32_z(last.crc, payload.get() + last.out + last.size, 4));
    last.size += 4;

    write_header_chunks(im, out);
    for (const Strip& s : strips) write_chunk(out, "IDAT", payload.get() + s.out, s.size, s.crc);
    write_chunk(out, "IEND", nullptr, 0);
}

}  // namespace cubekit::io_detail
