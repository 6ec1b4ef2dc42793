// Classical detectors: what users bring and keep — masks, target spectra (CSV/JSON, resampled),
// the mean of masked pixels, and the statistics files (.json, .npz: an uncompressed zip of .npy
// arrays as numpy.savez writes; numpy.savez_compressed's deflated members are read too).
#include <zlib.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "core/json_numbers.hpp"
#include "core/view_sample.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "detect/classical_internal.hpp"

namespace cubekit {
namespace detail {

std::vector<std::uint8_t> mask_bytes(const Context& ctx, const CubeView& mask, int width, int height, const char* what) {
    if (mask.width() != width || mask.height() != height || mask.bands() != 1)
        throw InvalidInput(std::string(what) + ": is " + std::to_string(mask.width()) + "x" + std::to_string(mask.height()) +
                           "x" + std::to_string(mask.bands()) + "; expected " + std::to_string(width) + "x" +
                           std::to_string(height) + "x1 (the cube's size)");
    std::optional<CubeInLayout> down;
    CubeView m = mask;
    if (mask.on_device()) m = down.emplace(ctx, mask, Layout::BSQ, Memory::Host).view();
    std::vector<std::uint8_t> out(std::size_t(width) * std::size_t(height));
    for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x) {
            const double v = sample_as_double(m, x, y, 0);
            out[std::size_t(y) * std::size_t(width) + std::size_t(x)] = (v != 0 && !std::isnan(v)) ? 1 : 0;
        }
    return out;
}

}  // namespace detail

namespace {

using nlohmann::json;

[[noreturn]] void bad_file(const std::filesystem::path& path, const std::string& what) {
    throw InvalidInput(path.string() + ": " + what);
}

std::string slurp(const std::filesystem::path& path, const char* role) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InvalidInput(std::string(role) + ": cannot open " + path.string());
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// ---- target spectra -----------------------------------------------------------------------------------

struct Spectrum {
    std::vector<double> wavelengths;  // empty: a band-matched list
    std::vector<double> values;
};

bool parse_number(std::string text, double& out) {
    text.erase(0, text.find_first_not_of(" \t\r\""));
    text.erase(text.find_last_not_of(" \t\r\"") + 1);
    if (text.empty()) return false;
    char* end = nullptr;
    out = std::strtod(text.c_str(), &end);
    return end == text.c_str() + text.size();
}

Spectrum parse_csv(const std::filesystem::path& path, const std::string& text) {
    Spectrum s;
    std::istringstream in(text);
    std::string line;
    int columns = 0;
    while (std::getline(in, line)) {
        if (line.find_first_not_of(" \t\r") == std::string::npos || line[0] == '#') continue;
        std::vector<double> row;
        std::stringstream cells(line);
        std::string cell;
        bool numeric = true;
        while (std::getline(cells, cell, line.find(';') != std::string::npos ? ';' : ',')) {
            double v = 0;
            numeric = numeric && parse_number(cell, v);
            row.push_back(v);
        }
        if (!numeric) {
            if (columns == 0 && s.values.empty()) continue;  // a header line
            bad_file(path, "not a number in row '" + line + "'");
        }
        if (columns == 0) columns = int(row.size());
        if (int(row.size()) != columns || columns > 2) bad_file(path, "expected rows 'wavelength,value' or 'value'");
        if (columns == 2) s.wavelengths.push_back(row[0]);
        s.values.push_back(row.back());
    }
    return s;
}

Spectrum parse_json(const std::filesystem::path& path, const std::string& text) {
    Spectrum s;
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {
        bad_file(path, std::string("not valid JSON: ") + json_reason(e.what()));
    }
    try {
        if (j.is_array()) {
            s.values = j.get<std::vector<double>>();
        } else if (j.is_object() && j.contains("values")) {
            s.values = j.at("values").get<std::vector<double>>();
            if (j.contains("wavelengths")) s.wavelengths = j.at("wavelengths").get<std::vector<double>>();
        } else if (j.is_object()) {
            std::vector<std::pair<double, double>> pairs;
            for (const auto& [k, v] : j.items()) {
                double w = 0;
                if (!parse_number(k, w)) bad_file(path, "key '" + k + "' is not a wavelength");
                pairs.emplace_back(w, v.get<double>());
            }
            std::sort(pairs.begin(), pairs.end());
            for (const auto& [w, v] : pairs) s.wavelengths.push_back(w), s.values.push_back(v);
        } else {
            bad_file(path, "expected a list of values, {\"wavelengths\", \"values\"} or {wavelength: value}");
        }
    } catch (const json::exception& e) {
        bad_file(path, std::string("expected numbers: ") + json_reason(e.what()));
    }
    if (!s.wavelengths.empty() && s.wavelengths.size() != s.values.size())
        bad_file(path, "wavelengths and values differ in length");
    return s;
}

double interpolate(const std::vector<double>& w, const std::vector<double>& v, double at) {
    const auto hi = std::lower_bound(w.begin(), w.end(), at);
    const std::size_t i = std::size_t(hi - w.begin());
    if (*hi == at) return v[i];
    const double t = (at - w[i - 1]) / (w[i] - w[i - 1]);
    return v[i - 1] + t * (v[i] - v[i - 1]);
}

// ---- .npz -----------------------------------------------------------------------------------------------

struct NpyArray {
    std::string descr;
    std::vector<std::size_t> shape;
    std::string data;
};

std::string npy_bytes(const std::string& descr, const std::vector<std::size_t>& shape, const void* data, std::size_t bytes) {
    std::string dims;
    for (std::size_t d : shape) dims += std::to_string(d) + ",";
    if (shape.size() > 1) dims.pop_back();
    std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::string out("\x93NUMPY\x01\x00", 8);
    out += char(header.size() & 0xFF);
    out += char(header.size() >> 8);
    out += header;
    out.append(static_cast<const char*>(data), bytes);
    return out;
}

void put16(std::string& s, unsigned v) { s += char(v & 0xFF), s += char((v >> 8) & 0xFF); }
void put32(std::string& s, unsigned long v) { put16(s, unsigned(v & 0xFFFF)), put16(s, unsigned(v >> 16)); }
unsigned get16(const std::string& s, std::size_t at) { return unsigned((unsigned char)s[at]) | unsigned((unsigned char)s[at + 1]) << 8; }
unsigned long get32(const std::string& s, std::size_t at) { return get16(s, at) | (unsigned long)get16(s, at + 2) << 16; }

std::string zip_stored(const std::vector<std::pair<std::string, std::string>>& members) {
    std::string out, central;
    for (const auto& [name, data] : members) {
        const unsigned long crc = crc32(0L, reinterpret_cast<const Bytef*>(data.data()), uInt(data.size()));
        const unsigned long offset = out.size();
        std::string common;
        put16(common, 20), put16(common, 0), put16(common, 0), put16(common, 0), put16(common, 0x21);
        put32(common, crc), put32(common, data.size()), put32(common, data.size());
        put16(common, unsigned(name.size())), put16(common, 0);
        out += "PK\x03\x04" + common + name + data;
        central += std::string("PK\x01\x02\x14\x00", 6) + common;
        put16(central, 0), put16(central, 0), put16(central, 0), put32(central, 0), put32(central, offset);
        central += name;
    }
    const unsigned long at = out.size();
    out += central + "PK\x05\x06";
    put16(out, 0), put16(out, 0), put16(out, unsigned(members.size())), put16(out, unsigned(members.size()));
    put32(out, central.size()), put32(out, at), put16(out, 0);
    return out;
}

std::map<std::string, NpyArray> read_npz(const std::filesystem::path& path) {
    const std::string z = slurp(path, "stats");
    std::map<std::string, NpyArray> out;
    std::size_t at = 0;
    while (at + 30 <= z.size() && z.compare(at, 4, "PK\x03\x04") == 0) {
        const unsigned method = get16(z, at + 8);
        const std::size_t csize = get32(z, at + 18), usize = get32(z, at + 22);
        const std::size_t nlen = get16(z, at + 26), xlen = get16(z, at + 28);
        if ((get16(z, at + 6) & 8) || at + 30 + nlen + xlen + csize > z.size()) bad_file(path, "unsupported or truncated zip");
        std::string name = z.substr(at + 30, nlen), data = z.substr(at + 30 + nlen + xlen, csize);
        if (method == 8) {
            std::string raw(usize, '\0');
            z_stream s{};
            inflateInit2(&s, -MAX_WBITS);
            s.next_in = reinterpret_cast<Bytef*>(data.data()), s.avail_in = uInt(data.size());
            s.next_out = reinterpret_cast<Bytef*>(raw.data()), s.avail_out = uInt(raw.size());
            const int rc = inflate(&s, Z_FINISH);
            inflateEnd(&s);
            if (rc != Z_STREAM_END) bad_file(path, "corrupt deflated member " + name);
            data = std::move(raw);
        } else if (method != 0) {
            bad_file(path, "zip compression method " + std::to_string(method) + " not supported");
        }
        at += 30 + nlen + xlen + csize;
        if (data.size() < 10 || data.compare(0, 6, "\x93NUMPY") != 0) bad_file(path, name + " is not a .npy array");
        const std::size_t hlen = data[6] == 1 ? get16(data, 8) : get32(data, 8), hstart = data[6] == 1 ? 10 : 12;
        const std::string header = data.substr(hstart, hlen);
        NpyArray a;
        const auto d = header.find("'descr': '");
        if (d == std::string::npos || header.find("'fortran_order': False") == std::string::npos)
            bad_file(path, name + ": expected a C-order array");
        a.descr = header.substr(d + 10, header.find('\'', d + 10) - d - 10);
        std::string dims = header.substr(header.find('(') + 1);
        dims = dims.substr(0, dims.find(')'));
        std::stringstream ds(dims);
        for (std::string part; std::getline(ds, part, ',');)
            if (part.find_first_not_of(" ") != std::string::npos) a.shape.push_back(std::stoul(part));
        a.data = data.substr(hstart + hlen);
        if (name.size() > 4 && name.substr(name.size() - 4) == ".npy") name.resize(name.size() - 4);
        out[name] = std::move(a);
    }
    return out;
}

std::vector<double> npz_numbers(const std::filesystem::path& path, const std::map<std::string, NpyArray>& z,
                                const std::string& name) {
    const auto it = z.find(name);
    if (it == z.end()) bad_file(path, "no array '" + name + "'");
    const NpyArray& a = it->second;
    std::size_t n = 1;
    for (std::size_t d : a.shape) n *= d;
    std::vector<double> out(n);
    const auto take = [&](auto tag) {
        using T = decltype(tag);
        if (a.data.size() < n * sizeof(T)) bad_file(path, name + ": truncated");
        for (std::size_t i = 0; i < n; ++i) {
            T v;
            std::memcpy(&v, a.data.data() + i * sizeof(T), sizeof(T));
            out[i] = double(v);
        }
    };
    if (a.descr == "<f8") take(double{});
    else if (a.descr == "<i8") take(std::int64_t{});
    else if (a.descr == "<i4") take(std::int32_t{});
    else bad_file(path, name + ": element type " + a.descr + " (expected <f8, <i8 or <i4)");
    return out;
}

}  // namespace

namespace detail {

void add_masked_pixels(const CubeView& rows, const std::uint8_t* mask_rows, std::vector<double>& sum, std::int64_t& n) {
    std::vector<double> x(sum.size());
    for (int y = 0; y < rows.height(); ++y)
        for (int xc = 0; xc < rows.width(); ++xc) {
            if (!mask_rows[std::size_t(y) * std::size_t(rows.width()) + std::size_t(xc)]) continue;
            bool finite = true;
            for (int b = 0; b < rows.bands(); ++b)
                finite = finite && std::isfinite(x[std::size_t(b)] = sample_as_double(rows, xc, y, b));
            if (!finite) continue;
            for (std::size_t b = 0; b < sum.size(); ++b) sum[b] += x[b];
            ++n;
        }
}

std::vector<double> masked_mean(std::vector<double> sum, std::int64_t n) {
    if (n == 0) throw InvalidInput("target mask: no pixel with all bands finite is set");
    for (double& s : sum) s /= double(n);
    return sum;
}

}  // namespace detail

std::vector<double> target_from_mask(const Context& ctx, const CubeView& cube, const CubeView& mask) {
    const std::vector<std::uint8_t> m = detail::mask_bytes(ctx, mask, cube.width(), cube.height(), "target mask");
    std::optional<CubeInLayout> down;
    CubeView c = cube;
    if (cube.on_device()) c = down.emplace(ctx, cube, Layout::BSQ, Memory::Host).view();
    std::vector<double> sum(std::size_t(cube.bands()), 0.0);
    std::int64_t n = 0;
    detail::add_masked_pixels(c, m.data(), sum, n);  // raster order
    return detail::masked_mean(std::move(sum), n);
}

std::vector<double> read_target_spectrum(const std::filesystem::path& path, const std::vector<double>& wavelengths,
                                         int bands) {
    const std::string text = slurp(path, "target");
    const std::size_t first = text.find_first_not_of(" \t\r\n");
    Spectrum s = first != std::string::npos && (text[first] == '{' || text[first] == '[') ? parse_json(path, text)
                                                                                          : parse_csv(path, text);
    for (double v : s.values)
        if (!std::isfinite(v)) bad_file(path, "a target value is not finite");
    if (s.wavelengths.empty() || wavelengths.empty()) {
        if (int(s.values.size()) != bands)
            bad_file(path, std::to_string(s.values.size()) + " values for a cube of " + std::to_string(bands) + " bands" +
                               (s.wavelengths.empty() ? "" : " (the cube has no wavelengths to resample to)"));
        return s.values;
    }
    for (std::size_t i = 1; i < s.wavelengths.size(); ++i)
        if (!(s.wavelengths[i] > s.wavelengths[i - 1])) bad_file(path, "wavelengths must increase");
    std::vector<double> out;
    for (double w : wavelengths) {
        if (w < s.wavelengths.front() || w > s.wavelengths.back())
            bad_file(path, "covers " + std::to_string(s.wavelengths.front()) + ".." + std::to_string(s.wavelengths.back()) +
                               "; the cube has a band at " + std::to_string(w));
        out.push_back(interpolate(s.wavelengths, s.values, w));
    }
    return out;
}

void write_background_stats(const BackgroundStats& s, const std::filesystem::path& path) {
    if (path.extension() != ".npz" && path.extension() != ".json")
        throw InvalidInput(path.string() + ": statistics files are .json or .npz");
    if (path.extension() == ".npz") {
        const std::size_t K = s.kept.size();
        std::vector<std::int64_t> kept(s.kept.begin(), s.kept.end());
        const std::int64_t scalars[3] = {s.bands, s.samples, s.ddof};
        const std::string z = zip_stored({
            {"mean.npy", npy_bytes("<f8", {K}, s.mean.data(), K * 8)},
            {"covariance.npy", npy_bytes("<f8", {K, K}, s.covariance.data(), K * K * 8)},
            {"kept_bands.npy", npy_bytes("<i8", {K}, kept.data(), K * 8)},
            {"bands.npy", npy_bytes("<i8", {}, &scalars[0], 8)},
            {"samples.npy", npy_bytes("<i8", {}, &scalars[1], 8)},
            {"ddof.npy", npy_bytes("<i8", {}, &scalars[2], 8)},
            {"eigenvalues.npy", npy_bytes("<f8", {s.eigenvalues.size()}, s.eigenvalues.data(), s.eigenvalues.size() * 8)},
            {"eigenvectors.npy", npy_bytes("<f8", {s.eigenvalues.size(), s.eigenvalues.size()}, s.eigenvectors.data(),
                                           s.eigenvectors.size() * 8)},
        });
        write_text_file(path, z);
        return;
    }
    nlohmann::ordered_json j;
    j["bands"] = s.bands;
    j["kept_bands"] = s.kept;
    j["dropped"] = json::array();
    for (const DroppedBand& d : s.dropped) j["dropped"].push_back({{"band", d.band}, {"reason", d.reason}});
    j["samples"] = s.samples;
    j["ddof"] = s.ddof;
    j["mean"] = s.mean;
    j["covariance"] = s.covariance;
    j["eigenvalues"] = s.eigenvalues;
    j["eigenvectors"] = s.eigenvectors;
    write_text_file(path, j.dump() + "\n");
}

BackgroundStats read_background_stats(const std::filesystem::path& path) {
    BackgroundStats s;
    if (path.extension() == ".npz") {
        const auto z = read_npz(path);
        const auto scalar = [&](const char* n) {
            const std::vector<double> v = npz_numbers(path, z, n);
            if (v.size() != 1) bad_file(path, std::string(n) + " must be a scalar");
            return detail::checked_integer<std::int64_t>(v[0], n);
        };
        s.bands = detail::checked_integer<int>(double(scalar("bands")), "bands");
        s.samples = scalar("samples");
        s.ddof = detail::checked_integer<int>(double(scalar("ddof")), "ddof");
        for (double v : npz_numbers(path, z, "kept_bands")) s.kept.push_back(detail::checked_integer<int>(v, "kept_bands"));
        s.mean = npz_numbers(path, z, "mean");
        s.covariance = npz_numbers(path, z, "covariance");
        if (z.count("eigenvalues") && z.count("eigenvectors"))
            s.eigenvalues = npz_numbers(path, z, "eigenvalues"), s.eigenvectors = npz_numbers(path, z, "eigenvectors");
    } else {
        try {
            const json j = json::parse(slurp(path, "stats"));
            s.bands = detail::json_integer<int>(j.at("bands"), "bands");
            s.kept = detail::json_integers<int>(j.at("kept_bands"), "kept_bands");
            s.samples = detail::json_integer<std::int64_t>(j.at("samples"), "samples");
            s.ddof = j.contains("ddof") ? detail::json_integer<int>(j["ddof"], "ddof") : 0;
            s.mean = j.at("mean").get<std::vector<double>>();
            s.covariance = j.at("covariance").get<std::vector<double>>();
            s.eigenvalues = j.value("eigenvalues", std::vector<double>{});
            s.eigenvectors = j.value("eigenvectors", std::vector<double>{});
            if (j.contains("dropped"))
                for (const json& d : j["dropped"])
                    s.dropped.push_back({detail::json_integer<int>(d.at("band"), "dropped band"), d.at("reason").get<std::string>()});
        } catch (const json::exception& e) {
            bad_file(path, std::string("not a statistics file: ") + json_reason(e.what()));
        }
    }
    const std::size_t K = s.kept.size();
    if (s.mean.size() != K || s.covariance.size() != K * K)
        bad_file(path, "mean must have one value per kept band and covariance KxK");
    for (double v : s.covariance)
        if (!std::isfinite(v)) bad_file(path, "covariance is not finite");
    if (s.eigenvalues.size() != K || s.eigenvectors.size() != K * K)  // absent or inconsistent: recomputed
        s.eigenvalues.clear(), s.eigenvectors.clear();
    return s;
}

}  // namespace cubekit
