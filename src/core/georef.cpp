// The georeference of a cube's metadata (cube.hpp): ENVI 'map info', GDAL's geotransform and the
// coordinate system, shifted with windows and carried into the products of a cube.
//
// ENVI 'map info' = {projection, reference x, reference y, easting, northing, x size, y size, ...}
// with the reference pixel 1-based in file coordinates (1, 1 = the upper-left corner of the first
// pixel) and y pointing down while northing points up. GDAL's geotransform (x0, dx, rx, y0, ry, dy)
// maps pixel corner coordinates (column, row) to x = x0 + column·dx + row·rx, y = y0 + column·ry + row·dy.
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "cubekit/cube.hpp"

namespace cubekit {

namespace {

std::vector<std::string> split_fields(const std::string& text) {
    std::vector<std::string> fields;
    std::size_t start = 0;
    for (std::size_t comma; (comma = text.find(',', start)) != std::string::npos; start = comma + 1)
        fields.push_back(text.substr(start, comma - start));
    fields.push_back(text.substr(start));
    return fields;
}

std::string number(double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

// A window starting at (x0, y0) keeps the same map coordinates when its reference pixel moves by
// (−x0, −y0); a map info of another layout is kept as it was.
std::string shift_map_info(const std::string& map_info, int x0, int y0) {
    if (map_info.empty() || (x0 == 0 && y0 == 0)) return map_info;
    std::vector<std::string> fields = split_fields(map_info);
    if (fields.size() < 3) return map_info;
    try {
        char buf[64];
        std::snprintf(buf, sizeof buf, " %.6f", std::stod(fields[1]) - x0);
        fields[1] = buf;
        std::snprintf(buf, sizeof buf, " %.6f", std::stod(fields[2]) - y0);
        fields[2] = buf;
    } catch (const std::exception&) {
        return map_info;
    }
    std::string out = fields[0];
    for (std::size_t i = 1; i < fields.size(); ++i) out += "," + fields[i];
    return out;
}

std::optional<std::array<double, 6>> parse_geotransform(const std::string& text) {
    std::array<double, 6> t{};
    std::istringstream in(text);
    for (double& v : t) {
        if (!(in >> v)) return std::nullopt;
        if (in.peek() == ',') in.get();
    }
    return t;
}

// A rotation ENVI writes as "rotation=deg" is not taken: such a map info gives no geotransform.
std::optional<std::array<double, 6>> map_info_geotransform(const std::string& map_info) {
    const std::vector<std::string> f = split_fields(map_info);
    if (f.size() < 7 || map_info.find("rotation") != std::string::npos) return std::nullopt;
    try {
        const double rx = std::stod(f[1]), ry = std::stod(f[2]), e = std::stod(f[3]), n = std::stod(f[4]);
        const double dx = std::stod(f[5]), dy = std::stod(f[6]);
        return std::array<double, 6>{e - (rx - 1) * dx, dx, 0, n + (ry - 1) * dy, 0, -dy};
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

}  // namespace

std::optional<std::array<double, 6>> Metadata::geotransform() const {
    if (const auto it = extra.find("geotransform"); it != extra.end())
        if (auto t = parse_geotransform(it->second)) return t;
    if (!map_info.empty()) return map_info_geotransform(map_info);
    return std::nullopt;
}

Metadata Metadata::georeference() const {
    Metadata g;
    g.map_info = map_info;
    g.coordinate_system = coordinate_system;
    if (const auto it = extra.find("geotransform"); it != extra.end()) g.extra["geotransform"] = it->second;
    return g;
}

Metadata Metadata::window(int x0, int y0) const {
    Metadata m = *this;
    m.map_info = shift_map_info(map_info, x0, y0);
    if (const auto it = extra.find("geotransform"); it != extra.end() && (x0 != 0 || y0 != 0))
        if (auto t = parse_geotransform(it->second)) {
            (*t)[0] += x0 * (*t)[1] + y0 * (*t)[2];
            (*t)[3] += x0 * (*t)[4] + y0 * (*t)[5];
            m.extra["geotransform"] = geotransform_text(*t);
        }
    return m;
}

std::string geotransform_text(const std::array<double, 6>& t) {
    std::string s;
    for (int i = 0; i < 6; ++i) s += (i ? ", " : "") + number(t[std::size_t(i)]);
    return s;
}

std::string map_info_from_geotransform(const std::array<double, 6>& t) {
    if (t[2] != 0 || t[4] != 0 || t[1] <= 0 || t[5] >= 0) return "";  // rotated or not north-up
    // "Arbitrary": the projection itself is the coordinate system string beside it (GDAL and ENVI
    // read the projection from that string, the tie point and pixel size from here).
    return "Arbitrary, 1, 1, " + number(t[0]) + ", " + number(t[3]) + ", " + number(t[1]) + ", " + number(-t[5]);
}

}  // namespace cubekit
