// Detection outputs for people and programs: composites with boxes, object and window tables.
#include "detect_output.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace cubekit::cli {

namespace {

std::vector<int> composite_bands(int B, const Metadata& metadata) {
    if (B < 3) return {0, 0, 0};
    const auto& wl = metadata.wavelengths;
    const std::string& units = metadata.wavelength_units;
    const bool nm = int(wl.size()) == B && (units.empty() || units.find("anometer") != std::string::npos || units == "nm");
    if (nm && wl.front() < 640 && wl.back() > 460) {
        std::vector<int> out;
        for (double target : {640.0, 550.0, 460.0}) {
            int best = 0;
            for (int b = 1; b < B; ++b)
                if (std::abs(wl[b] - target) < std::abs(wl[best] - target)) best = b;
            out.push_back(best);
        }
        return out;
    }
    return {int(std::lround(0.75 * (B - 1))), int(std::lround(0.5 * (B - 1))), int(std::lround(0.25 * (B - 1)))};
}

// The p-th percentile of the finite values of band b (0 when none is finite).
double percentile(const Cube& cube, int b, double p) {
    std::vector<double> v;
    v.reserve(std::size_t(cube.width()) * cube.height());
    for (int y = 0; y < cube.height(); ++y)
        for (int x = 0; x < cube.width(); ++x) {
            const double s = cube.value(x, y, b);
            if (std::isfinite(s)) v.push_back(s);
        }
    if (v.empty()) return 0;
    const std::size_t k = std::min(v.size() - 1, std::size_t(p / 100.0 * double(v.size() - 1) + 0.5));
    std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(k), v.end());
    return v[k];
}

std::string number(double v) {
    std::ostringstream s;
    s.precision(9);
    s << v;
    return s.str();
}

}  // namespace

namespace {

// Channel c of the picture from band bands[c] of `cube`, stretched from its 2nd to its 98th percentile.
Cube stretched(const Cube& cube, const std::vector<int>& bands) {
    Cube rgb(cube.width(), cube.height(), 3, DType::U8, Layout::BSQ);
    for (int c = 0; c < 3; ++c) {
        const double lo = percentile(cube, bands[c], 2), hi = percentile(cube, bands[c], 98);
        const double scale = hi > lo ? 255.0 / (hi - lo) : 0.0;
        for (int y = 0; y < cube.height(); ++y)
            for (int x = 0; x < cube.width(); ++x) {
                const double s = cube.value(x, y, bands[c]);
                const double v = std::isfinite(s) ? std::clamp((s - lo) * scale, 0.0, 255.0) : 0.0;
                rgb.at<std::uint8_t>(x, y, c) = std::uint8_t(std::lround(v));
            }
    }
    return rgb;
}

}  // namespace

Cube composite_rgb(const Cube& cube) { return stretched(cube, composite_bands(cube.bands(), cube.metadata())); }

Cube composite_rgb(const CubeFile& file) {
    const CubeShape& s = file.shape();
    const std::vector<int> bands = composite_bands(s.bands, file.metadata());
    Cube three = Cube::uninitialized(s.width, s.height, 3, s.dtype, Layout::BSQ);
    for (int c = 0; c < 3; ++c) file.read_bands(bands[std::size_t(c)], 1, three.mutable_view().band_range(c, 1));
    return stretched(three, {0, 1, 2});
}

void draw_boxes(Cube& rgb, const std::vector<Box>& boxes, int r, int g, int b) {
    const int W = rgb.width(), H = rgb.height();
    const int colour[3] = {r, g, b};
    auto put = [&](int x, int y) {
        if (x < 0 || y < 0 || x >= W || y >= H) return;
        for (int c = 0; c < 3; ++c) rgb.at<std::uint8_t>(x, y, c) = std::uint8_t(colour[c]);
    };
    for (const Box& box : boxes) {
        const int x1 = box.x0 + box.width - 1, y1 = box.y0 + box.height - 1;
        for (int x = box.x0; x <= x1; ++x) {
            put(x, box.y0);
            put(x, y1);
        }
        for (int y = box.y0; y <= y1; ++y) {
            put(box.x0, y);
            put(x1, y);
        }
    }
}

nlohmann::json objects_json(const std::vector<DetectedObject>& objects) {
    nlohmann::json rows = nlohmann::json::array();
    for (const DetectedObject& o : objects)
        rows.push_back({{"label", o.label}, {"area", o.area}, {"x0", o.x0}, {"y0", o.y0}, {"width", o.width},
                        {"height", o.height}, {"centroid_x", o.centroid_x}, {"centroid_y", o.centroid_y},
                        {"peak_score", o.peak_score}, {"peak_x", o.peak_x}, {"peak_y", o.peak_y}, {"mean_score", o.mean_score}});
    return rows;
}

std::string objects_csv(const std::vector<DetectedObject>& objects) {
    std::string s = "label,area,x0,y0,width,height,centroid_x,centroid_y,peak_score,peak_x,peak_y,mean_score\n";
    for (const DetectedObject& o : objects)
        s += std::to_string(o.label) + "," + std::to_string(o.area) + "," + std::to_string(o.x0) + "," + std::to_string(o.y0) +
             "," + std::to_string(o.width) + "," + std::to_string(o.height) + "," + number(o.centroid_x) + "," +
             number(o.centroid_y) + "," + number(o.peak_score) + "," + std::to_string(o.peak_x) + "," +
             std::to_string(o.peak_y) + "," + number(o.mean_score) + "\n";
    return s;
}

nlohmann::json windows_json(const std::vector<Window>& windows) {
    static const char* outcome[] = {"rejected", "accepted", "split", "forced", "dropped"};
    nlohmann::json rows = nlohmann::json::array();
    for (const Window& w : windows) {
        nlohmann::json row = {{"x0", w.x0}, {"y0", w.y0}, {"width", w.width}, {"height", w.height}, {"level", w.level},
                              {"y1", w.y1}, {"y2", std::isnan(w.y2) ? nlohmann::json() : nlohmann::json(w.y2)},
                              {"at_min_scale", w.at_min_scale}};
        row["outcome"] = outcome[int(w.outcome)];
        rows.push_back(row);
    }
    return rows;
}

std::string windows_csv(const std::vector<Window>& windows) {
    std::string s = "x0,y0,width,height,level,y1,y2,at_min_scale\n";
    for (const Window& w : windows)
        s += std::to_string(w.x0) + "," + std::to_string(w.y0) + "," + std::to_string(w.width) + "," +
             std::to_string(w.height) + "," + std::to_string(w.level) + "," + number(w.y1) + "," +
             (std::isnan(w.y2) ? std::string() : number(w.y2)) + "," + (w.at_min_scale ? "1" : "0") + "\n";
    return s;
}

}  // namespace cubekit::cli
