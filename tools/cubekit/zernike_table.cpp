// Moment tables of `cubekit zernike` (CSV, JSON) and their reader for `cubekit zernike-reconstruct`;
// the image file of a reconstruction.
#include "zernike_table.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "outputs.hpp"

namespace cubekit::cli {

namespace {

std::string lower_extension(const std::string& path) {
    std::string ext = std::filesystem::path(path).extension().string();
    for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
    return ext;
}

/// A CSV field: quoted (RFC 4180) when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string out = "\"";
    for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

void append_number(std::string& s, double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    s += buf;
}

}  // namespace

std::pair<int, int> ZernikeTable::origin(int s) const {
    for (std::size_t i = 0; i < sources.size(); ++i) {
        if (s < int(sources[i].bands.size())) return {int(i), sources[i].bands[std::size_t(s)]};
        s -= int(sources[i].bands.size());
    }
    return {0, s};
}

std::string zernike_csv(const ZernikeTable& t) {
    const ZernikeMoments& z = t.moments;
    std::string s = t.batch ? "image,band,n,m,re,im,abs\n" : "band,n,m,re,im,abs\n";
    s.reserve(s.size() + z.values.size() * 64);
    for (int i = 0; i < z.images; ++i) {
        const auto [source, band] = t.origin(i);
        const std::string prefix =
            (t.batch ? csv_field(t.sources[std::size_t(source)].name) + "," : std::string()) + std::to_string(band) + ",";
        for (std::size_t k = 0; k < z.count(); ++k) {
            const std::complex<double> a = z.image(i)[k];
            s += prefix + std::to_string(z.indices[k].n) + "," + std::to_string(z.indices[k].m) + ",";
            append_number(s, a.real());
            s += ",";
            append_number(s, a.imag());
            s += ",";
            append_number(s, std::abs(a));
            s += "\n";
        }
    }
    return s;
}

namespace {

template <typename J>
J rows_json(const ZernikeTable& t) {
    const ZernikeMoments& z = t.moments;
    J rows = J::array();
    for (int i = 0; i < z.images; ++i) {
        const auto [source, band] = t.origin(i);
        for (std::size_t k = 0; k < z.count(); ++k) {
            const std::complex<double> a = z.image(i)[k];
            J r;
            if (t.batch) r["image"] = t.sources[std::size_t(source)].name;
            r["band"] = band;
            r["n"] = z.indices[k].n;
            r["m"] = z.indices[k].m;
            r["re"] = a.real();
            r["im"] = a.imag();
            r["abs"] = std::abs(a);
            rows.push_back(std::move(r));
        }
    }
    return rows;
}

}  // namespace

nlohmann::json zernike_rows_json(const ZernikeTable& t) { return rows_json<nlohmann::json>(t); }

nlohmann::ordered_json zernike_json_file(const ZernikeTable& t) {
    const ZernikeMoments& z = t.moments;
    nlohmann::ordered_json j;
    j["format"] = "cubekit-zernike-moments";
    j["width"] = z.width;
    j["height"] = z.height;
    j["mapping"] = std::string(zernike_mapping_name(z.disk.mapping));
    j["center_x"] = z.disk.center_x;
    j["center_y"] = z.disk.center_y;
    j["radius"] = z.disk.radius;
    j["normalization"] = std::string(zernike_normalization_name(z.disk.normalization));
    j["pixel_count"] = z.disk.pixel_count;
    j["max_order"] = z.max_order();
    j["mode"] = t.mode;
    j["method"] = std::string(zernike_method_name(z.method));
    j["radial"] = z.radial == ZernikeRadial::Explicit ? "explicit" : "stable";
    j["precision"] = std::string(zernike_precision_name(z.precision));
    j["symmetric"] = z.symmetric;
    j["dtype"] = t.dtype;
    j["moments_per_band"] = z.count();
    if (t.batch) {
        nlohmann::ordered_json images = nlohmann::ordered_json::array();
        for (const ZernikeSource& s : t.sources) images.push_back({{"image", s.name}, {"path", s.path}, {"bands", s.bands}});
        j["images"] = images;
    } else {
        j["input"] = t.sources.empty() ? std::string() : t.sources.front().path;
        j["bands"] = t.sources.empty() ? std::vector<int>() : t.sources.front().bands;
    }
    j["moments"] = rows_json<nlohmann::ordered_json>(t);
    return j;
}

// ---- reading ---------------------------------------------------------------------------------------

namespace {

std::string slurp(const std::string& path, const std::string& flag) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) throw IoError(flag + " " + path + ": cannot read: " + std::strerror(EISDIR));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(flag + " " + path + ": cannot open: " + std::strerror(errno));
    std::stringstream text;
    text << in.rdbuf();
    if (in.bad()) throw IoError(flag + " " + path + ": cannot read");
    return text.str();
}

/// Splits one CSV line into fields (RFC 4180 quotes); false when a quote is left open.
bool split_csv(const std::string& line, std::vector<std::string>& fields) {
    fields.assign(1, std::string());
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (quoted) {
            if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') fields.back() += '"', ++i;
            else if (c == '"') quoted = false;
            else fields.back() += c;
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            fields.emplace_back();
        } else {
            fields.back() += c;
        }
    }
    return !quoted;
}

bool parse_int(const std::string& s, int& v) {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool parse_double(const std::string& s, double& v) {
    if (s.empty() || std::isspace(static_cast<unsigned char>(s.front()))) return false;
    char* end = nullptr;
    errno = 0;
    v = std::strtod(s.c_str(), &end);
    return end == s.c_str() + s.size() && errno != ERANGE;
}

void check_moment(const ZernikeIndex& z, const std::string& where) {
    if (z.n < 0 || z.m < 0 || z.m > z.n || (z.n - z.m) % 2 != 0)
        throw InvalidInput(where + "A(" + std::to_string(z.n) + "," + std::to_string(z.m) +
                           ") is not a moment; expected 0 <= m <= n with n - m even");
}

void read_csv(MomentFile& f, const std::string& text, const std::string& flag) {
    std::istringstream in(text);
    std::string line;
    std::vector<std::string> fields;
    int number = 0;
    while (std::getline(in, line)) {
        ++number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        const std::string where = flag + " " + f.path + ": line " + std::to_string(number) + ": ";
        if (number == 1) {
            if (line == "image,band,n,m,re,im,abs") f.batch = true;
            else if (line != "band,n,m,re,im,abs")
                throw InvalidInput(where + "header '" + line.substr(0, 80) +
                                   "'; expected 'band,n,m,re,im,abs' (or with a leading 'image' column), as "
                                   "cubekit zernike writes it");
            continue;
        }
        if (line.empty()) continue;
        const std::size_t want = f.batch ? 7 : 6;
        if (!split_csv(line, fields) || fields.size() != want)
            throw InvalidInput(where + std::to_string(fields.size()) + " fields; expected " + std::to_string(want));
        const std::size_t o = f.batch ? 1 : 0;
        MomentFile::Row r;
        if (f.batch) r.image = fields[0];
        double re = 0, im = 0;
        if (!parse_int(fields[o], r.band) || r.band < 0) throw InvalidInput(where + "band '" + fields[o] + "' is not an index >= 0");
        if (!parse_int(fields[o + 1], r.index.n)) throw InvalidInput(where + "n '" + fields[o + 1] + "' is not an integer");
        if (!parse_int(fields[o + 2], r.index.m)) throw InvalidInput(where + "m '" + fields[o + 2] + "' is not an integer");
        if (!parse_double(fields[o + 3], re)) throw InvalidInput(where + "re '" + fields[o + 3] + "' is not a number");
        if (!parse_double(fields[o + 4], im)) throw InvalidInput(where + "im '" + fields[o + 4] + "' is not a number");
        check_moment(r.index, where);
        r.value = {re, im};
        f.rows.push_back(std::move(r));
    }
    if (number == 0) throw InvalidInput(flag + " " + f.path + ": empty file; expected the CSV of cubekit zernike");
}

double json_number(const nlohmann::json& v, const std::string& where) {
    if (v.is_null()) return NAN;  // JSON has no NaN; nlohmann writes it as null
    if (!v.is_number()) throw InvalidInput(where + "expected a number, got " + v.dump());
    return v.get<double>();
}

int json_int(const nlohmann::json& o, const char* key, const std::string& where) {
    if (!o.contains(key) || !o[key].is_number_integer())
        throw InvalidInput(where + "'" + key + "' missing or not an integer");
    const auto v = o[key].get<std::int64_t>();
    if (v < 0 || v > (1 << 30)) throw InvalidInput(where + "'" + key + "' = " + std::to_string(v) + " is out of range");
    return int(v);
}

void read_json(MomentFile& f, const std::string& text, const std::string& flag) {
    const std::string where = flag + " " + f.path + ": ";
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw InvalidInput(where + "not valid JSON: " + json_reason(e.what()));
    }
    if (!j.is_object() || !j.contains("moments") || !j["moments"].is_array())
        throw InvalidInput(where + "no 'moments' array; expected a JSON file written by cubekit zernike -o FILE.json");
    f.width = json_int(j, "width", where);
    f.height = json_int(j, "height", where);
    if (f.width < 1 || f.height < 1) throw InvalidInput(where + "width and height must be at least 1");
    if (j.contains("mapping")) {
        if (!j["mapping"].is_string()) throw InvalidInput(where + "'mapping' must be a string");
        f.options.mapping = parse_enum<ZernikeMapping>(j["mapping"].get<std::string>(), where + "mapping");
    }
    if (j.contains("normalization")) {
        if (!j["normalization"].is_string()) throw InvalidInput(where + "'normalization' must be a string");
        f.options.normalization = parse_enum<ZernikeNormalization>(j["normalization"].get<std::string>(), where + "normalization");
    }
    if (f.options.mapping == ZernikeMapping::Custom) {
        for (const char* key : {"center_x", "center_y", "radius"})
            if (!j.contains(key)) throw InvalidInput(where + "mapping custom needs '" + key + "'");
        f.options.center = {json_number(j["center_x"], where + "center_x: "), json_number(j["center_y"], where + "center_y: ")};
        f.options.radius = json_number(j["radius"], where + "radius: ");
    }
    if (j.contains("dtype") && j["dtype"].is_string()) f.dtype = j["dtype"].get<std::string>();
    const nlohmann::json& rows = j["moments"];
    f.batch = !rows.empty() && rows.front().is_object() && rows.front().contains("image");
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const std::string at = where + "moments[" + std::to_string(i) + "]: ";
        const nlohmann::json& o = rows[i];
        if (!o.is_object()) throw InvalidInput(at + "expected an object {band, n, m, re, im, abs}");
        MomentFile::Row r;
        if (f.batch) {
            if (!o.contains("image") || !o["image"].is_string()) throw InvalidInput(at + "'image' missing or not a string");
            r.image = o["image"].get<std::string>();
        }
        r.band = json_int(o, "band", at);
        r.index = {json_int(o, "n", at), json_int(o, "m", at)};
        for (const char* key : {"re", "im"})
            if (!o.contains(key)) throw InvalidInput(at + "'" + key + "' missing");
        r.value = {json_number(o["re"], at + "re: "), json_number(o["im"], at + "im: ")};
        check_moment(r.index, at);
        f.rows.push_back(std::move(r));
    }
}

}  // namespace

MomentFile read_moment_file(const std::string& path, const std::string& flag) {
    const std::string ext = lower_extension(path);
    if (ext != ".csv" && ext != ".json")
        throw InvalidInput(flag + " " + path + ": extension '" + ext +
                           "'; expected .csv or .json (a file written by cubekit zernike -o)");
    MomentFile f;
    f.path = path;
    f.json = ext == ".json";
    const std::string text = slurp(path, flag);
    if (f.json) read_json(f, text, flag);
    else read_csv(f, text, flag);
    if (f.rows.empty()) throw InvalidInput(flag + " " + path + ": no moments in the file");
    return f;
}

// ---- reconstruction images ---------------------------------------------------------------------

void check_image_output(const std::string& path, const std::string& flag) {
    const std::string ext = lower_extension(path);
    if (ext != ".png" && ext != ".npy")
        throw InvalidInput(flag + " " + path + ": extension '" + ext +
                           "'; expected .png (one band, scaled) or .npy (every band, float64)");
}

PngScale write_reconstruction(const Cube& rebuilt, int band, const ZernikeDisk& disk, int bits, const std::string& path,
                              const WriteOptions& write) {
    if (lower_extension(path) == ".npy") {
        write_cube(rebuilt, path, write);
        return {0, 0.0, 0.0};
    }
    const int W = rebuilt.width(), H = rebuilt.height();
    if (bits == 8) {
        write_cube(rebuilt.select_bands({band}).to_dtype(DType::U8), path, write);  // rounds, clamps, NaN -> 0
        return {8, 0.0, 255.0};
    }
    double lo = INFINITY, hi = -INFINITY;
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x)
            if (disk.inside(x, y)) {
                const double v = rebuilt.value(x, y, band);
                if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
            }
    if (!(lo <= hi)) lo = hi = 0.0;  // no finite value inside the disk
    Cube png(W, H, 1, DType::U16);
    const double span = hi - lo;
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            if (!disk.inside(x, y) || span <= 0.0) continue;
            const double v = rebuilt.value(x, y, band);
            if (!std::isfinite(v)) continue;
            png.at<std::uint16_t>(x, y, 0) = std::uint16_t(std::clamp(std::lround((v - lo) / span * 65535.0), 0L, 65535L));
        }
    write_cube(png, path, write);
    return {16, lo, hi};
}

}  // namespace cubekit::cli
