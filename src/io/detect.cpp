// Input format detection (magic bytes, ENVI sidecar headers, GDAL) and output format by extension.
#include <cstring>
#include <fstream>
#include <system_error>

#include "io/io_internal.hpp"

namespace cubekit {

using namespace io_detail;

namespace io_detail {

namespace {
// A regular file whose text begins with "ENVI". Other formats also pair X.hdr with X.img (Analyze
// 7.5, for one, with a binary header); those must fall through to GDAL rather than be taken as ENVI.
bool is_envi_header(const fs::path& p) {
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) return false;
    std::ifstream in(p, std::ios::binary);
    char magic[4] = {};
    return in.read(magic, 4) && std::string_view(magic, 4) == "ENVI";
}
}  // namespace

fs::path find_envi_header(const fs::path& data_path) {
    if (lower_extension(data_path) == ".hdr") return data_path;
    // X.hdr (extension replaced) first: that is what write_envi produces. Then X.img.hdr
    // (appended), as in the Samson distribution. Upper-case variants come from DOS-era tools.
    fs::path replaced = data_path;
    replaced.replace_extension(".hdr");
    fs::path replaced_upper = data_path;
    replaced_upper.replace_extension(".HDR");
    const fs::path candidates[] = {replaced, fs::path(data_path.string() + ".hdr"), replaced_upper,
                                   fs::path(data_path.string() + ".HDR")};
    for (const auto& c : candidates)
        if (c != data_path && is_envi_header(c)) return c;
    return {};
}

}  // namespace io_detail

namespace {

bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// "P5" then whitespace then a digit or a comment: three bytes of structure, which a raw data file
// is unlikely to match by chance (and ENVI data is tested before this anyway).
bool looks_like_pnm(const unsigned char* b, std::size_t n) {
    if (n < 4 || b[0] != 'P' || !std::strchr("2356", b[1]) || b[1] == 0 || !is_space(b[2])) return false;
    std::size_t i = 2;
    while (i < n && is_space(b[i])) ++i;
    return i < n && ((b[i] >= '0' && b[i] <= '9') || b[i] == '#');
}

// A MATLAB version 4 file: no magic, a 20-byte header of five int32 (type MOPT, rows, columns,
// imaginary flag, name length with its NUL) in either byte order, then the name. Taken only from a
// .mat file, where all of this holding by chance is unlikely.
bool looks_like_mat_v4(const unsigned char* b, std::size_t n) {
    if (n < 21) return false;
    for (const bool big : {false, true}) {
        const auto word = [&](int i) {
            const unsigned char* w = b + 4 * i;
            const std::uint32_t u = big ? (std::uint32_t(w[0]) << 24 | std::uint32_t(w[1]) << 16 | std::uint32_t(w[2]) << 8 | w[3])
                                        : (std::uint32_t(w[3]) << 24 | std::uint32_t(w[2]) << 16 | std::uint32_t(w[1]) << 8 | w[0]);
            return std::int32_t(u);
        };
        const std::int32_t type = word(0), rows = word(1), cols = word(2), imag = word(3), namelen = word(4);
        const int m = type / 1000, o = type / 100 % 10, p = type / 10 % 10, t = type % 10;
        if (type < 0 || m != (big ? 1 : 0) || o != 0 || p > 5 || t > 2) continue;
        if (rows < 0 || cols < 0 || (imag != 0 && imag != 1) || namelen < 1 || namelen > 4096) continue;
        if (std::size_t(20 + namelen) <= n && b[20 + namelen - 1] != 0) continue;  // the name ends in NUL
        return true;
    }
    return false;
}

bool is_tiff(const unsigned char* b, std::size_t n) {
    if (n < 4) return false;
    const std::string_view h(reinterpret_cast<const char*>(b), 4);
    return h == std::string_view("II*\0", 4) || h == std::string_view("MM\0*", 4) || h == std::string_view("II+\0", 4) ||
           h == std::string_view("MM\0+", 4);
}

// Extensions GDAL is the reader for, used for the message when GDAL is not built in.
bool gdal_extension(const std::string& ext) {
    static const char* const exts[] = {".tif", ".tiff", ".gtif", ".lan", ".gis", ".vrt", ".jp2", ".nc", ".h5", ".hdf", ".ers", ".ntf"};
    for (const char* e : exts)
        if (ext == e) return true;
    return false;
}

}  // namespace

FileFormat detect_format(const std::filesystem::path& path) {
    static constexpr std::string_view fn = "detect_format";
    InputFile file(fn, path);  // IoError when missing or unreadable
    unsigned char head[520] = {};
    const std::size_t n = file.read_some_at(0, head, sizeof(head));
    const auto starts = [&](std::string_view magic, std::size_t at = 0) {
        return n >= at + magic.size() && std::memcmp(head + at, magic.data(), magic.size()) == 0;
    };

    // Strong signatures first: these are long enough that no data file matches them by chance.
    if (starts("\x93NUMPY")) return FileFormat::Npy;
    if (starts("MATLAB ")) return FileFormat::Mat;                      // v5 and v7 (v4 has no magic: below)
    if (starts("\x89HDF\r\n\x1a\n", 512)) return FileFormat::Mat;       // v7.3 = HDF5 with 512-byte user block
    if (starts("\x89PNG\r\n\x1a\n")) return FileFormat::Png;

    // A file whose extension and signature agree is that format even with an X.hdr beside it (a
    // GeoTIFF or a PGM next to the ENVI output of the same stem): ENVI data rarely does both.
    const std::string extension = lower_extension(path);
    if ((extension == ".tif" || extension == ".tiff") && is_tiff(head, n)) {
        if (gdal_available()) return FileFormat::Gdal;
        throw_invalid(fn, path, "a TIFF is read through GDAL; GDAL support is not built in; install libgdal-dev and rebuild");
    }
    if ((extension == ".pgm" || extension == ".ppm" || extension == ".pnm") && looks_like_pnm(head, n)) return FileFormat::Pnm;
    if ((extension == ".jpg" || extension == ".jpeg") && starts("\xFF\xD8\xFF")) return FileFormat::Jpeg;
    if (extension == ".mat" && looks_like_mat_v4(head, n)) return FileFormat::Mat;

    // ENVI: the header itself, or a data file with its header beside it. Tested before the short
    // PNM/JPEG signatures because raw samples can begin with bytes such as FF D8 FF.
    if (lower_extension(path) == ".hdr" || !find_envi_header(path).empty()) return FileFormat::Envi;

    if (looks_like_pnm(head, n)) return FileFormat::Pnm;
    if (starts("\xFF\xD8\xFF")) return FileFormat::Jpeg;

    const std::string ext = lower_extension(path);
    if (gdal_available()) {
        if (gdal_identifies(path)) return FileFormat::Gdal;
        throw_invalid(fn, path,
                      "not a recognised format (ENVI with a .hdr beside it, .npy, .mat, PNG, PGM/PPM, JPEG, "
                      "or a raster GDAL can open)");
    }
    if (gdal_extension(ext)) {
        throw_invalid(fn, path,
                      "'" + ext + "' files are read through GDAL; GDAL support is not built in; install "
                      "libgdal-dev and rebuild");
    }
    throw_invalid(fn, path,
                  "not a recognised format (ENVI with a .hdr beside it, .npy, .mat, PNG, PGM/PPM, JPEG are; "
                  "GDAL formats need a build with GDAL)");
}

FileFormat output_format(const std::filesystem::path& path) {
    const std::string ext = lower_extension(path);
    if (ext == ".hdr" || ext == ".img" || ext == ".dat" || ext == ".raw" || ext == ".bsq" || ext == ".bil" ||
        ext == ".bip")
        return FileFormat::Envi;
    if (ext == ".npy") return FileFormat::Npy;
    if (ext == ".png") return FileFormat::Png;
    if (ext == ".pgm" || ext == ".ppm" || ext == ".pnm") return FileFormat::Pnm;
    // GeoTIFF through GDAL: the georeference of the input goes with it (issue 17).
    if ((ext == ".tif" || ext == ".tiff") && gdal_available()) return FileFormat::Gdal;
    static constexpr std::string_view accepted =
        "(.hdr, .img, .dat, .raw, .bsq, .bil, .bip, .npy, .png, .pgm, .ppm, .pnm are; .tif with GDAL)";
    if (ext == ".tif" || ext == ".tiff")
        throw_invalid("output_format", path, "GeoTIFF output is written through GDAL, which this cubekit cannot load "
                                             "(build with libgdal-dev); write .hdr (ENVI keeps the georeference) or .npy");
    if (ext == ".mat" || ext == ".jpg" || ext == ".jpeg")
        throw_invalid("output_format", path, "'" + ext + "' can be read but not written " + std::string(accepted));
    throw_invalid("output_format", path,
                  (ext.empty() ? std::string("no extension") : "extension '" + ext + "'") +
                      " names no output format " + std::string(accepted));
}

}  // namespace cubekit
