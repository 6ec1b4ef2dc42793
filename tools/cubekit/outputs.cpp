#include "outputs.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "cubekit/error.hpp"
#include "cubekit/io.hpp"

namespace cubekit::cli {

std::string beside(const std::string& out, const std::string& suffix) {
    const std::filesystem::path p(out);
    return (p.parent_path() / (p.stem().string() + suffix)).string();
}

void check_distinct(const std::vector<std::string>& paths, const std::string& what) {
    for (std::size_t i = 0; i < paths.size(); ++i)
        for (std::size_t j = i + 1; j < paths.size(); ++j)
            if (std::filesystem::path(paths[i]).lexically_normal() ==
                std::filesystem::path(paths[j]).lexically_normal())
                throw InvalidInput(what + ": two outputs would be the same file, " + paths[j]);
}

void remove_outputs(const std::vector<std::string>& paths) {
    for (const std::string& p : paths) {
        std::error_code ec;
        std::filesystem::remove(p, ec);
        bool envi = false;
        try {
            envi = output_format(p) == FileFormat::Envi;
        } catch (const InvalidInput&) {  // .json, .csv: no image format, one file
        }
        if (envi) {  // ENVI wrote a header and a data file
            std::filesystem::path hdr(p), img(p);
            hdr.replace_extension(".hdr");
            img.replace_extension(".img");
            std::filesystem::remove(hdr, ec);
            std::filesystem::remove(img, ec);
        }
    }
}

void OutputList::add(const std::string& path, const std::string& role, const std::string& format,
                     const std::string& dtype) {
    nlohmann::json o = {{"role", role}, {"path", path}, {"format", format}};
    if (!dtype.empty()) o["dtype"] = dtype;
    add(path, std::move(o));
}

void OutputList::add(const std::string& path, nlohmann::json entry) {
    paths_.push_back(path);
    json_.push_back(std::move(entry));
}

void OutputList::remove_all() const { remove_outputs(paths_); }

double display_white_point(const Cube& one_band) {
    std::vector<double> finite;
    finite.reserve(one_band.shape().num_pixels());
    double largest = 0;
    for (int y = 0; y < one_band.height(); ++y)
        for (int x = 0; x < one_band.width(); ++x) {
            const double v = one_band.value(x, y, 0);
            if (!std::isfinite(v)) continue;
            largest = std::max(largest, v);
            finite.push_back(v);
        }
    if (finite.empty()) return 0;
    const std::size_t k = std::min(finite.size() - 1, std::size_t(0.99 * double(finite.size())));
    std::nth_element(finite.begin(), finite.begin() + std::ptrdiff_t(k), finite.end());
    return finite[k] > 0 ? finite[k] : largest;
}

Cube binary_map_for_file(const Cube& maps, const std::string& path, bool invert) {
    Cube out = maps.clone();
    if (output_format(path) == FileFormat::Npy) return out;
    std::uint8_t* v = out.data<std::uint8_t>();
    for (std::size_t i = 0; i < out.num_elements(); ++i) v[i] = ((v[i] != 0) != invert) ? 255 : 0;
    return out;
}

std::string readable_json(const nlohmann::ordered_json& j) {
    std::string s = "{";
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
        s += first ? "\n  " : ",\n  ";
        first = false;
        s += nlohmann::ordered_json(it.key()).dump() + ": ";
        const nlohmann::ordered_json& v = it.value();
        if (v.is_array() && !v.empty() && v.front().is_object()) {
            s += "[";
            for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ",\n    " : "\n    ") + v[i].dump();
            s += "\n  ]";
        } else {
            s += v.dump();
        }
    }
    return s + "\n}\n";
}

}  // namespace cubekit::cli
