// PGM / PPM (Netpbm): P2/P3 (ASCII) and P5/P6 (binary) on read, P5/P6 on write. No library is
// used: the format is a few text tokens and raw samples. maxval ≤ 255 gives u8, above that u16
// stored big-endian (as the format specifies). Samples keep their stored values (no rescaling to
// the full type range), so a round trip is exact.
#include <climits>
#include <cstring>

#include "io/io_internal.hpp"

namespace cubekit::io_detail {

namespace {

constexpr std::string_view kRead = "read_pnm";
constexpr std::string_view kWrite = "write_pnm";

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

class PnmScanner {
public:
    PnmScanner(const fs::path& path, const std::string& data) : path_(path), d_(data) {}

    // Next unsigned decimal number; whitespace and '#' comments (to end of line) before it.
    unsigned long number(const char* what) {
        while (pos_ < d_.size()) {
            if (is_ws(d_[pos_])) {
                ++pos_;
            } else if (d_[pos_] == '#') {
                while (pos_ < d_.size() && d_[pos_] != '\n') ++pos_;
            } else {
                break;
            }
        }
        if (pos_ >= d_.size()) throw_invalid(kRead, path_, std::string("truncated: the file ends before the ") + what);
        if (d_[pos_] < '0' || d_[pos_] > '9')
            throw_invalid(kRead, path_, std::string("expected the ") + what + " (a number), found '" + d_[pos_] + "'");
        unsigned long v = 0;
        while (pos_ < d_.size() && d_[pos_] >= '0' && d_[pos_] <= '9') {
            if (v > 0xFFFFFFFFul) throw_invalid(kRead, path_, std::string("the ") + what + " is too large");
            v = v * 10 + unsigned(d_[pos_++] - '0');
        }
        return v;
    }
    std::size_t pos() const { return pos_; }
    void set_pos(std::size_t p) { pos_ = p; }

private:
    const fs::path& path_;
    const std::string& d_;
    std::size_t pos_ = 2;  // after the magic
};

}  // namespace

Cube read_pnm(const fs::path& path) {
    const std::string d = InputFile(kRead, path).read_all();
    if (d.size() < 2 || d[0] != 'P') throw_invalid(kRead, path, "not a PGM/PPM file (no P2, P3, P5 or P6 signature)");
    const char kind = d[1];
    if (kind == '1' || kind == '4') throw_invalid(kRead, path, "bitmaps (P1, P4) are not supported (P2, P3, P5, P6 are)");
    if (kind == '7') throw_invalid(kRead, path, "PAM (P7) is not supported (P2, P3, P5, P6 are)");
    if (kind != '2' && kind != '3' && kind != '5' && kind != '6')
        throw_invalid(kRead, path, "not a PGM/PPM file (no P2, P3, P5 or P6 signature)");
    const bool ascii = kind == '2' || kind == '3';
    const int channels = (kind == '3' || kind == '6') ? 3 : 1;

    PnmScanner scan(path, d);
    const unsigned long width = scan.number("width");
    const unsigned long height = scan.number("height");
    const unsigned long maxval = scan.number("maxval");
    if (width == 0 || height == 0 || width > INT_MAX || height > INT_MAX)
        throw_invalid(kRead, path, "size " + std::to_string(width) + "x" + std::to_string(height) + " is not supported (1 to " +
                                       std::to_string(INT_MAX) + " per side is)");
    if (maxval == 0 || maxval > 65535)
        throw_invalid(kRead, path, "maxval " + std::to_string(maxval) + " is not supported (1 to 65535 is)");
    const bool wide = maxval > 255;
    // The samples the header claims must be in the file before the cube is allocated (a 20-byte
    // file claiming 50000 x 50000 must not cost gigabytes): binary, 1 or 2 bytes each; ASCII, a
    // digit and a separator each (the last separator optional).
    const long double count_claimed = static_cast<long double>(width) * height * channels;
    const long double left = static_cast<long double>(d.size() - std::min(d.size(), scan.pos()));
    if ((ascii ? 2 * count_claimed - 1 : count_claimed * (wide ? 2 : 1)) > left + (ascii ? 0 : -1))
        throw_invalid(kRead, path, "truncated: " + std::to_string(width) + "x" + std::to_string(height) + "x" +
                                       std::to_string(channels) + " samples cannot fit in the " +
                                       std::to_string(static_cast<unsigned long long>(left)) + " bytes after the header");
    Cube cube(int(width), int(height), channels, wide ? DType::U16 : DType::U8, Layout::BIP);
    const std::size_t count = cube.num_elements();

    if (ascii) {
        for (std::size_t i = 0; i < count; ++i) {
            const unsigned long v = scan.number("samples");
            if (v > maxval)
                throw_invalid(kRead, path, "sample " + std::to_string(i) + " = " + std::to_string(v) + " exceeds maxval " +
                                               std::to_string(maxval));
            if (wide)
                cube.data<std::uint16_t>()[i] = std::uint16_t(v);
            else
                cube.data<std::uint8_t>()[i] = std::uint8_t(v);
        }
        return cube;
    }
    // Binary: exactly one whitespace character separates maxval from the samples.
    std::size_t pos = scan.pos();
    if (pos >= d.size() || !is_ws(d[pos])) throw_invalid(kRead, path, "truncated: no sample data after the header");
    ++pos;
    const std::size_t need = count * (wide ? 2 : 1);
    if (d.size() - pos < need)
        throw_invalid(kRead, path, "truncated: " + std::to_string(width) + "x" + std::to_string(height) + "x" +
                                       std::to_string(channels) + " samples need " + std::to_string(need) +
                                       " bytes after the header, the file has " + std::to_string(d.size() - pos));
    const auto* src = reinterpret_cast<const unsigned char*>(d.data() + pos);
    if (wide) {
        auto* dst = cube.data<std::uint16_t>();
        for (std::size_t i = 0; i < count; ++i) dst[i] = std::uint16_t(src[2 * i] << 8 | src[2 * i + 1]);
    } else {
        std::memcpy(cube.bytes(), src, count);
    }
    return cube;
}

void write_pnm(const Cube& cube, const fs::path& path) {
    const Cube bip = image_as_bip(kWrite, path, cube, 1, 3, "1 (PGM), 3 (PPM)");
    if (bip.bands() == 2) throw_invalid(kWrite, path, "2 bands are not supported (1 (PGM), 3 (PPM) are)");
    const bool wide = bip.dtype() == DType::U16;
    // The full range of the type as maxval, so that reading back gives the same element type.
    const std::string header = std::string(bip.bands() == 1 ? "P5" : "P6") + "\n" + std::to_string(bip.width()) + " " +
                               std::to_string(bip.height()) + "\n" + (wide ? "65535" : "255") + "\n";
    AtomicFile out(kWrite, path);
    out.write(header);
    if (!wide) {
        out.write(bip.bytes(), bip.num_bytes());
    } else {
        const std::uint16_t* src = bip.data<std::uint16_t>();
        std::vector<unsigned char> row(std::size_t(bip.width()) * std::size_t(bip.bands()) * 2);
        const std::size_t per_row = row.size() / 2;
        for (int y = 0; y < bip.height(); ++y) {
            for (std::size_t i = 0; i < per_row; ++i) {
                const std::uint16_t v = src[std::size_t(y) * per_row + i];
                row[2 * i] = static_cast<unsigned char>(v >> 8);  // big-endian, as Netpbm specifies
                row[2 * i + 1] = static_cast<unsigned char>(v & 0xFF);
            }
            out.write(row.data(), row.size());
        }
    }
    out.commit();
}

}  // namespace cubekit::io_detail
