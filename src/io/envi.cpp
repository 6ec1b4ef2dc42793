// ENVI: a text header (X.hdr or X.img.hdr) beside a raw binary data file.
//
// Header syntax: first line "ENVI", then "keyword = value" lines; a value that begins with '{'
// runs to the matching '}' and may span several lines. Keywords are case-insensitive. The
// keywords cubekit interprets are parsed into CubeShape/Metadata; every other one is kept in
// Metadata::extra with its value verbatim (braces included, so "fwhm = {1, 2}" is written back
// exactly as read).
#include <charconv>
#include <cerrno>
#include <climits>
#include <map>
#include <set>

#include <zlib.h>

#include "io/io_internal.hpp"

namespace cubekit::io_detail {

namespace {

constexpr std::string_view kRead = "read_envi";
constexpr std::string_view kWrite = "write_envi";

struct HeaderEntry {
    std::string key;    // as written in the file (trimmed)
    std::string value;  // trimmed; braces kept
};

// Keywords interpreted by cubekit (lower case); all others go to Metadata::extra. "file type" is
// listed so that it is not duplicated on write (we always write "ENVI Standard").
const std::set<std::string, std::less<>> kKnownKeys = {
    "samples",     "lines",     "bands",      "header offset", "data type", "interleave",
    "byte order",  "wavelength", "wavelength units", "band names", "map info",
    "coordinate system string", "description", "file type", "file compression"};

std::vector<HeaderEntry> parse_header(const fs::path& hdr, const std::string& text) {
    std::size_t pos = 0;
    const auto next_line = [&](std::string_view& line) {
        if (pos >= text.size()) return false;
        std::size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        line = std::string_view(text).substr(pos, end - pos);
        pos = end + 1;
        return true;
    };
    std::string_view line;
    bool first = true;
    std::vector<HeaderEntry> entries;
    while (next_line(line)) {
        const std::string_view t = trim(line);
        if (first) {
            if (t.substr(0, 4) != "ENVI") throw_invalid(kRead, hdr, "not an ENVI header (the first line is not 'ENVI')");
            first = false;
            continue;
        }
        if (t.empty() || t.front() == ';') continue;  // blank line or comment
        const std::size_t eq = t.find('=');
        if (eq == std::string_view::npos) continue;  // stray text: ENVI itself ignores it
        HeaderEntry e;
        e.key = std::string(trim(t.substr(0, eq)));
        std::string_view v = trim(t.substr(eq + 1));
        if (!v.empty() && v.front() == '{') {
            // A braced value: continue over lines until the closing brace.
            const std::size_t start = std::size_t(v.data() - text.data());
            const std::size_t close = text.find('}', start);
            if (close == std::string::npos)
                throw_invalid(kRead, hdr, "the value of '" + e.key + "' opens '{' but never closes it");
            v = std::string_view(text).substr(start, close + 1 - start);
            pos = text.find('\n', close);
            pos = pos == std::string::npos ? text.size() : pos + 1;
        }
        e.value = std::string(v);
        // Strip a trailing \r of Windows line endings inside multi-line values too.
        std::erase(e.value, '\r');
        entries.push_back(std::move(e));
    }
    if (first) throw_invalid(kRead, hdr, "the header is empty");
    return entries;
}

std::string_view strip_braces(std::string_view v) {
    v = trim(v);
    if (v.size() >= 2 && v.front() == '{' && v.back() == '}') v = trim(v.substr(1, v.size() - 2));
    return v;
}

std::vector<std::string> split_list(std::string_view v) {
    std::vector<std::string> items;
    v = strip_braces(v);
    if (v.empty()) return items;
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = v.find(',', start);
        items.emplace_back(trim(v.substr(start, comma == std::string_view::npos ? v.npos : comma - start)));
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    return items;
}

long long parse_int(const fs::path& hdr, const std::string& key, std::string_view v) {
    v = trim(v);
    long long out = 0;
    const auto res = std::from_chars(v.data(), v.data() + v.size(), out);
    if (res.ec != std::errc() || res.ptr != v.data() + v.size())
        throw_invalid(kRead, hdr, "'" + key + "' = '" + std::string(v) + "' is not an integer");
    return out;
}

struct DataTypeInfo {
    int code;
    DType dtype;
};
constexpr DataTypeInfo kTypes[] = {{1, DType::U8},   {2, DType::I16},  {3, DType::I32}, {4, DType::F32},
                                   {5, DType::F64},  {12, DType::U16}, {13, DType::U32}};

std::string unsupported_type_name(long long code) {
    switch (code) {
        case 6: return "complex";
        case 9: return "double complex";
        case 14: return "64-bit integer";
        case 15: return "64-bit unsigned integer";
        default: return "unknown";
    }
}

int envi_code(DType t) {
    for (const auto& info : kTypes)
        if (info.dtype == t) return info.code;
    return 0;
}

// The data file beside a header X.hdr / X.img.hdr: X.img for the latter, else the first existing
// of X, X.img, X.dat, ... Returns the tried names when none exists.
fs::path find_data_file(const fs::path& hdr, std::string& tried) {
    std::vector<fs::path> candidates;
    fs::path stem = hdr;
    stem.replace_extension();  // X.img.hdr → X.img; X.hdr → X
    candidates.push_back(stem);
    for (const char* ext : {".img", ".dat", ".raw", ".bsq", ".bil", ".bip", ".IMG", ".DAT", ".RAW"}) {
        fs::path c = stem;
        c += ext;  // appended: "X" + ".img"
        candidates.push_back(c);
    }
    for (const auto& c : candidates) {
        std::error_code ec;
        if (fs::is_regular_file(c, ec)) return c;
    }
    for (std::size_t i = 0; i < candidates.size(); ++i) tried += (i ? ", " : "") + candidates[i].filename().string();
    return {};
}

}  // namespace

RawCube describe_envi(const fs::path& path) {
    // Resolve the header and the data file from whichever of the two was given.
    fs::path hdr, data;
    if (lower_extension(path) == ".hdr") {
        hdr = path;
        InputFile probe(kRead, hdr);  // IoError naming the header when it is missing
        std::string tried;
        data = find_data_file(hdr, tried);
        if (data.empty()) throw_os_error(kRead, hdr, "no data file beside the header (tried " + tried + ")", ENOENT);
    } else {
        data = path;
        InputFile probe(kRead, data);  // IoError naming the data file when it is missing
        hdr = find_envi_header(data);
        if (hdr.empty()) {
            fs::path replaced = data;
            replaced.replace_extension(".hdr");
            for (const fs::path& c : {replaced, fs::path(data.string() + ".hdr")}) {
                std::error_code ec;
                if (fs::is_regular_file(c, ec))  // there, but find_envi_header saw no "ENVI" in it
                    throw_invalid(kRead, c, "not an ENVI header (the first line is not 'ENVI')");
            }
            throw_os_error(kRead, data,
                           "no ENVI header beside it (tried " + replaced.filename().string() + ", " +
                               data.filename().string() + ".hdr)",
                           ENOENT);
        }
    }

    const std::string text = InputFile(kRead, hdr).read_all();
    const std::vector<HeaderEntry> entries = parse_header(hdr, text);
    std::map<std::string, std::string, std::less<>> known;  // lower-case keyword → value
    Metadata meta;
    for (const auto& e : entries) {
        const std::string lower = to_lower(e.key);
        if (kKnownKeys.count(lower))
            known[lower] = e.value;
        else
            meta.extra[e.key] = e.value;
    }

    const auto dimension = [&](const char* key) {
        const auto it = known.find(key);
        if (it == known.end()) throw_invalid(kRead, hdr, std::string("'") + key + "' is missing");
        const long long v = parse_int(hdr, key, it->second);
        if (v <= 0 || v > INT_MAX)
            throw_invalid(kRead, hdr, std::string("'") + key + "' = " + std::to_string(v) + "; expected 1 to " + std::to_string(INT_MAX));
        return int(v);
    };
    const int width = dimension("samples");
    const int height = dimension("lines");
    const int bands = dimension("bands");

    const auto dt_it = known.find("data type");
    if (dt_it == known.end()) throw_invalid(kRead, hdr, "'data type' is missing");
    const long long code = parse_int(hdr, "data type", dt_it->second);
    DType dtype{};
    bool found = false;
    for (const auto& info : kTypes)
        if (info.code == code) dtype = info.dtype, found = true;
    if (!found) {
        throw_invalid(kRead, hdr,
                      "'data type' = " + std::to_string(code) + " (" + unsupported_type_name(code) +
                          ") is not supported (1, 2, 3, 4, 5, 12, 13 are)");
    }

    Layout layout = Layout::BSQ;  // ENVI's default when 'interleave' is absent
    if (const auto it = known.find("interleave"); it != known.end()) {
        const std::string il = to_lower(trim(it->second));
        if (il == "bsq") layout = Layout::BSQ;
        else if (il == "bil") layout = Layout::BIL;
        else if (il == "bip") layout = Layout::BIP;
        else throw_invalid(kRead, hdr, "'interleave' = '" + it->second + "' is not supported (bsq, bil, bip are)");
    }

    long long byte_order = 0;
    if (const auto it = known.find("byte order"); it != known.end()) {
        byte_order = parse_int(hdr, "byte order", it->second);
        if (byte_order != 0 && byte_order != 1)
            throw_invalid(kRead, hdr, "'byte order' = " + std::to_string(byte_order) + " is not supported (0, 1 are)");
    }
    long long offset = 0;
    if (const auto it = known.find("header offset"); it != known.end()) {
        offset = parse_int(hdr, "header offset", it->second);
        if (offset < 0) throw_invalid(kRead, hdr, "'header offset' = " + std::to_string(offset) + "; expected 0 or more");
    }

    // Metadata.
    if (const auto it = known.find("wavelength"); it != known.end()) {
        for (const std::string& item : split_list(it->second)) {
            double w = 0;
            const auto res = std::from_chars(item.data(), item.data() + item.size(), w);
            if (res.ec != std::errc() || res.ptr != item.data() + item.size())
                throw_invalid(kRead, hdr, "'wavelength' has a value '" + item + "' that is not a number");
            meta.wavelengths.push_back(w);
        }
        if (meta.wavelengths.size() != std::size_t(bands))
            throw_invalid(kRead, hdr,
                          "'wavelength' has " + std::to_string(meta.wavelengths.size()) + " values; expected one per band (" +
                              std::to_string(bands) + ")");
    }
    if (const auto it = known.find("band names"); it != known.end()) {
        meta.band_names = split_list(it->second);
        if (meta.band_names.size() != std::size_t(bands))
            throw_invalid(kRead, hdr,
                          "'band names' has " + std::to_string(meta.band_names.size()) + " names; expected one per band (" +
                              std::to_string(bands) + ")");
    }
    if (const auto it = known.find("wavelength units"); it != known.end()) meta.wavelength_units = std::string(strip_braces(it->second));
    if (const auto it = known.find("map info"); it != known.end()) meta.map_info = std::string(strip_braces(it->second));
    if (const auto it = known.find("coordinate system string"); it != known.end())
        meta.coordinate_system = std::string(strip_braces(it->second));
    if (const auto it = known.find("description"); it != known.end()) meta.description = std::string(strip_braces(it->second));

    // 'file compression' = 1: the data file is gzip (ENVI's own and GDAL's reading); the header
    // offset counts bytes of the uncompressed stream.
    bool gzip = false;
    if (const auto it = known.find("file compression"); it != known.end()) {
        const long long c = parse_int(hdr, "file compression", it->second);
        if (c != 0 && c != 1)
            throw_invalid(kRead, hdr, "'file compression' = " + std::to_string(c) + " is not supported (0 none, 1 gzip)");
        gzip = c == 1;
    }

    // Data: header offset + W*H*B*size bytes. Less is refused. A few bytes more (padding, a trailer:
    // less than one band) are ignored with a warning, as ENVI and GDAL do; a band or more beyond the
    // cube means the header's dimensions are wrong, which reading would turn into a sheared image.
    const std::size_t esize = dtype_size(dtype);
    std::size_t elements = 0, payload = 0;
    if (__builtin_mul_overflow(std::size_t(width) * std::size_t(height), std::size_t(bands), &elements) ||
        __builtin_mul_overflow(elements, esize, &payload))
        throw_invalid(kRead, hdr, "the cube is too large to address");
    const std::uint64_t expected = std::uint64_t(offset) + payload;
    const auto size_text = [&] {
        return "expected " + std::to_string(expected) + " bytes (header offset " + std::to_string(offset) + " + " +
               std::to_string(width) + "x" + std::to_string(height) + "x" + std::to_string(bands) + " x " +
               std::to_string(esize) + " bytes, from " + hdr.filename().string() + ")";
    };
    if (gzip) {  // zlib inflates at most about 1032 bytes per byte: a header claiming more is wrong
        const std::uint64_t packed = InputFile(kRead, data).size();
        if (expected > 1032 * packed + 1024)
            throw_invalid(kRead, data, "is truncated: " + size_text() + ", more than its " + std::to_string(packed) +
                                           " gzip bytes (file compression = 1) can hold");
    } else {
        InputFile file(kRead, data);
        if (file.size() < expected)
            throw_invalid(kRead, data, "is truncated: " + size_text() + ", the file has " + std::to_string(file.size()));
        if (file.size() - expected >= std::uint64_t(width) * std::uint64_t(height) * esize)
            throw_invalid(kRead, data, "is larger than the header says by a band or more (are samples, lines or bands "
                                       "wrong?): " + size_text() + ", the file has " + std::to_string(file.size()));
        if (file.size() > expected)
            meta.warnings.push_back(std::string(kRead) + ": " + data.string() + ": " + std::to_string(file.size() - expected) +
                                    " bytes after the " + std::to_string(expected) + " the header describes (" +
                                    hdr.filename().string() + ") were ignored");
    }
    RawCube raw;
    raw.data = data;
    raw.offset = std::uint64_t(offset);
    raw.shape = CubeShape{width, height, bands, dtype, layout};
    raw.swap = (byte_order == 0) != host_is_little_endian();
    raw.gzip = gzip;
    raw.metadata = std::move(meta);
    return raw;
}

namespace {

// The samples of a gzip data file (raw.gzip): the uncompressed stream from raw.offset, which must
// hold at least the cube; bytes beyond it are ignored with a warning.
void read_gzip_samples(RawCube& raw, Cube& cube) {
    InputFile probe(kRead, raw.data);  // IoError naming the file when it cannot be opened
    gzFile gz = gzopen(raw.data.c_str(), "rb");
    if (!gz) throw_os_error(kRead, raw.data, "cannot open", errno ? errno : ENOMEM);
    std::uint64_t got = 0;
    const auto read = [&](void* dst, std::uint64_t n) {
        std::uint64_t done = 0;
        while (done < n) {
            const unsigned chunk = unsigned(std::min<std::uint64_t>(n - done, 1u << 30));
            const int r = gzread(gz, static_cast<char*>(dst) + done, chunk);
            if (r < 0) {
                int code = 0;
                const std::string why = gzerror(gz, &code);
                gzclose(gz);
                throw_invalid(kRead, raw.data, "the gzip data is damaged (file compression = 1): " + why);
            }
            if (r == 0) break;
            done += std::uint64_t(r);
        }
        got += done;
        return done;
    };
    std::vector<char> skip(std::size_t(std::min<std::uint64_t>(raw.offset, 1u << 20)));
    for (std::uint64_t left = raw.offset; left > 0;) {
        const std::uint64_t n = std::min<std::uint64_t>(left, skip.size());
        if (read(skip.data(), n) < n) break;
        left -= n;
    }
    if (got == raw.offset) read(cube.bytes(), cube.num_bytes());
    const std::uint64_t expected = raw.offset + cube.num_bytes();
    if (got < expected) {
        gzclose(gz);
        throw_invalid(kRead, raw.data, "is truncated: the gzip data (file compression = 1) holds " + std::to_string(got) +
                                           " bytes, expected " + std::to_string(expected));
    }
    char extra[4096];
    std::uint64_t more = 0;
    for (std::uint64_t n; (n = read(extra, sizeof extra)) > 0;) more += n;
    gzclose(gz);
    if (more > 0)
        raw.metadata.warnings.push_back(std::string(kRead) + ": " + raw.data.string() + ": " + std::to_string(more) +
                                        " uncompressed bytes after the " + std::to_string(expected) +
                                        " the header describes were ignored");
}

}  // namespace

Cube read_envi(const fs::path& path) {
    RawCube raw = describe_envi(path);
    const CubeShape& s = raw.shape;
    Cube cube = Cube::uninitialized(s.width, s.height, s.bands, s.dtype, s.layout);  // the reads fill every byte
    if (raw.gzip)
        read_gzip_samples(raw, cube);
    else
        InputFile(kRead, raw.data).read_at(raw.offset, cube.bytes(), cube.num_bytes());
    if (raw.swap) byteswap_inplace(cube.bytes(), cube.num_elements(), dtype_size(s.dtype));
    cube.metadata() = std::move(raw.metadata);
    return cube;
}

std::pair<fs::path, fs::path> envi_output_paths(const fs::path& path) {
    fs::path data = path, hdr = path;
    if (lower_extension(path) == ".hdr")
        data.replace_extension(".img");
    else
        hdr.replace_extension(".hdr");
    return {data, hdr};
}

std::string envi_header(const CubeShape& shape, Layout layout, const Metadata& meta, const fs::path& path) {
    if (shape.width <= 0 || shape.height <= 0 || shape.bands <= 0)
        throw_invalid(kWrite, path, "the cube is empty (" + shape.describe() + "); ENVI needs at least 1x1x1");
    if (!meta.wavelengths.empty() && meta.wavelengths.size() != std::size_t(shape.bands))
        throw_invalid(kWrite, path, "the metadata has " + std::to_string(meta.wavelengths.size()) +
                                        " wavelengths for " + std::to_string(shape.bands) + " bands");
    if (!meta.band_names.empty() && meta.band_names.size() != std::size_t(shape.bands))
        throw_invalid(kWrite, path, "the metadata has " + std::to_string(meta.band_names.size()) +
                                        " band names for " + std::to_string(shape.bands) + " bands");
    std::string h = "ENVI\n";
    if (!meta.description.empty()) h += "description = {" + meta.description + "}\n";
    h += "samples = " + std::to_string(shape.width) + "\n";
    h += "lines = " + std::to_string(shape.height) + "\n";
    h += "bands = " + std::to_string(shape.bands) + "\n";
    h += "header offset = 0\n";
    h += "file type = ENVI Standard\n";
    h += "data type = " + std::to_string(envi_code(shape.dtype)) + "\n";
    h += "interleave = " + std::string(layout_name(layout)) + "\n";
    h += "byte order = 0\n";
    if (!meta.map_info.empty()) h += "map info = {" + meta.map_info + "}\n";
    if (!meta.coordinate_system.empty()) h += "coordinate system string = {" + meta.coordinate_system + "}\n";
    if (!meta.wavelength_units.empty()) h += "wavelength units = " + meta.wavelength_units + "\n";
    const auto write_list = [&](const char* key, std::size_t n, auto item) {
        h += key;
        h += " = {";
        for (std::size_t i = 0; i < n; ++i) {
            h += (i % 6 == 0) ? "\n " : " ";  // six per line, as ENVI writes them
            h += item(i);
            if (i + 1 < n) h += ",";
        }
        h += "}\n";
    };
    if (!meta.wavelengths.empty())
        write_list("wavelength", meta.wavelengths.size(), [&](std::size_t i) { return format_double(meta.wavelengths[i]); });
    if (!meta.band_names.empty())
        write_list("band names", meta.band_names.size(), [&](std::size_t i) { return meta.band_names[i]; });
    for (const auto& [key, value] : meta.extra) {
        // Keys we write ourselves win over stale copies in extra (e.g. after a type conversion).
        if (kKnownKeys.count(to_lower(trim(key))) || trim(key).empty()) continue;
        h += std::string(trim(key)) + " = " + value + "\n";
    }
    return h;
}

void commit_envi_pair(AtomicFile& data_file, AtomicFile& header_file) {
    data_file.close();
    header_file.close();
    data_file.commit();
    try {
        header_file.commit();
    } catch (...) {
        std::error_code ec;
        fs::remove(data_file.target(), ec);
        throw;
    }
}

void write_envi(const Cube& cube, const fs::path& path, const WriteOptions& options) {
    const Layout layout = options.envi_keep_layout ? cube.layout() : options.envi_layout;
    const std::string h = envi_header(cube.shape(), layout, cube.metadata(), path);
    const auto [data, hdr] = envi_output_paths(path);
    Cube converted;
    const Cube* src = &cube;
    if (layout != cube.layout()) {
        converted = cube.to_layout(layout);
        src = &converted;
    }

    // Both files go to temporaries first; the data is renamed into place before the header, so a
    // reader never finds a new header next to old data. If the header rename fails, the data just
    // renamed is removed again so that no half-written pair is left.
    AtomicFile data_file(kWrite, data);
    AtomicFile header_file(kWrite, hdr);
    data_file.write_cube_le(*src);
    header_file.write(h);
    commit_envi_pair(data_file, header_file);
}

}  // namespace cubekit::io_detail
