// Shared parts of `cubekit quantize` and `cubekit cluster`: flags, mask, JSON numbers, palette file.
#include "kmeans_output.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_common.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "outputs.hpp"

namespace cubekit::cli {

void add_kmeans_flags(CLI::App& app, KmeansFlags& f, const std::string& explicit_from) {
    f.bound = bind_flags(app, f.options);
    // The CLI gives explicit centroids through a file flag, not the init_centroids field.
    CLI::Option* init = f.bound["init"];
    std::string doc = init->get_description();
    doc.replace(doc.find("(init_centroids)"), 16, "(from the file given with " + explicit_from + ")");
    init->description(doc);
    CLI::Option* legacy = f.bound["legacy"];
    doc = legacy->get_description();
    doc.replace(doc.find("with init explicit"), 18, "with --init explicit");
    legacy->description(doc);
    input_file(app.add_option("--mask", f.mask, "one-band image of the same size (FILE or FILE.mat:VAR); 0 = pixel excluded (label -1, copied unchanged)"));
}

std::vector<std::uint8_t> read_mask(const std::string& path, const CubeShape& image) {
    const std::string where = "--mask " + path + ": ";
    const Cube mask = read_secondary(path, "--mask");
    if (mask.bands() != 1)
        throw InvalidInput(where + std::to_string(mask.bands()) + " bands (" + mask.shape().describe() +
                           "); expected one band (0 = excluded)");
    if (mask.width() != image.width || mask.height() != image.height)
        throw InvalidInput(where + "the mask is " + std::to_string(mask.width()) + "x" + std::to_string(mask.height()) +
                           ", the image " + std::to_string(image.width) + "x" + std::to_string(image.height));
    std::vector<std::uint8_t> used(mask.shape().num_pixels());
    std::size_t count = 0;
    for (int y = 0; y < mask.height(); ++y)
        for (int x = 0; x < mask.width(); ++x) {
            const double v = mask.value(x, y, 0);
            const bool on = v != 0 && !std::isnan(v);
            used[std::size_t(y) * std::size_t(mask.width()) + std::size_t(x)] = on ? 1 : 0;
            count += on;
        }
    if (count == 0) throw InvalidInput(where + "every pixel is 0 (excluded); nothing is left to cluster");
    return used;
}

nlohmann::json kmeans_parameters_json(const KmeansOptions& o, const std::string& mask) {
    nlohmann::json j = parameters_json(o);
    j["mask"] = mask.empty() ? nlohmann::json(nullptr) : nlohmann::json(mask);
    return j;
}

nlohmann::json kmeans_numbers_json(const KmeansResult& r) {
    nlohmann::json restarts = nlohmann::json::array();
    for (const KmeansRun& run : r.restarts)
        restarts.push_back({{"seed", run.seed},
                            {"inertia", run.inertia},
                            {"iterations", run.iterations},
                            {"converged", run.converged},
                            {"k_effective", run.k_effective}});
    return {{"k", r.k},
            {"k_effective", r.k_effective},
            {"inertia", r.inertia},
            {"iterations", r.iterations},
            {"converged", r.converged},
            {"valid_pixels", r.valid_pixels},
            {"winner", r.winner},
            {"restarts", restarts},
            {"history", r.history}};
}

// ---- palette file ---------------------------------------------------------------------------------

nlohmann::ordered_json palette_entries_json(const Palette& p, std::int64_t valid) {
    nlohmann::ordered_json entries = nlohmann::ordered_json::array();
    const std::size_t c = std::size_t(p.channels);
    const auto number = [&](double v) {
        return dtype_is_float(p.dtype) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(std::int64_t(v));
    };
    for (std::size_t i = 0; i < p.size(); ++i) {
        nlohmann::ordered_json v = nlohmann::ordered_json::array();
        for (std::size_t b = 0; b < c; ++b) v.push_back(number(p.values[i * c + b]));
        nlohmann::ordered_json e;
        if (c == 3) {
            e["rgb"] = v;
        } else if (c == 1) {
            e["value"] = v[0];
            e["rgb"] = {v[0], v[0], v[0]};  // for viewers that only know RGB palettes
        } else {
            e["values"] = v;
        }
        if (!p.centroids.empty())
            e["centroid"] = std::vector<double>(p.centroids.begin() + std::ptrdiff_t(i * c),
                                                p.centroids.begin() + std::ptrdiff_t((i + 1) * c));
        const std::uint64_t count = i < p.counts.size() ? p.counts[i] : 0;
        e["count"] = count;
        e["fraction"] = valid > 0 ? double(count) / double(valid) : 0.0;
        entries.push_back(e);
    }
    return entries;
}

Palette read_palette_json(const std::string& path, int channels, const std::string& flag) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw IoError(flag + " " + path + ": cannot read: " + std::strerror(EISDIR));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(flag + " " + path + ": cannot open: " + std::strerror(errno));
    std::stringstream text;
    text << in.rdbuf();
    const std::string where = flag + " " + path + ": ";
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text.str());
    } catch (const nlohmann::json::exception& e) {
        throw InvalidInput(where + "not JSON (" + json_reason(e.what()) + ")");
    }
    if (!j.is_object() || !j.contains("palette") || !j["palette"].is_array() || j["palette"].empty())
        throw InvalidInput(where + "expected an object with a non-empty \"palette\" array");
    Palette palette;
    palette.channels = channels;
    std::vector<double>& values = palette.values;
    std::size_t with_centroid = 0;
    const auto numbers = [&](const nlohmann::json& a, std::size_t n, std::size_t entry) {
        if (!a.is_array() || a.size() != n)
            throw InvalidInput(where + "palette entry " + std::to_string(entry) + " has " +
                               (a.is_array() ? std::to_string(a.size()) : std::string("no array of")) +
                               " values; the image has " + std::to_string(channels) + " channel(s)");
        std::vector<double> v;
        for (const auto& x : a) {
            if (!x.is_number() || !std::isfinite(x.get<double>()))
                throw InvalidInput(where + "palette entry " + std::to_string(entry) + ": " + x.dump() +
                                   " is not a finite number");
            v.push_back(x.get<double>());
        }
        return v;
    };
    const std::size_t c = std::size_t(channels);
    for (std::size_t i = 0; i < j["palette"].size(); ++i) {
        const nlohmann::json& e = j["palette"][i];
        std::vector<double> v;
        if (e.is_object() && e.contains("values")) {
            v = numbers(e["values"], c, i);
        } else if (e.is_object() && c == 1 && e.contains("value")) {
            v = numbers(nlohmann::json::array({e["value"]}), 1, i);
        } else if (e.is_object() && e.contains("rgb") && (c == 3 || c == 1)) {
            v = numbers(e["rgb"], 3, i);
            if (c == 1) {
                if (v[0] != v[1] || v[1] != v[2])
                    throw InvalidInput(where + "palette entry " + std::to_string(i) + " is the colour " +
                                       e["rgb"].dump() + "; the image is grey (give grey entries or a \"value\")");
                v.resize(1);
            }
        } else {
            throw InvalidInput(where + "palette entry " + std::to_string(i) + " has no " +
                               (c == 3   ? "\"rgb\""
                                : c == 1 ? "\"value\""
                                         : "\"values\"") +
                               " for an image of " + std::to_string(channels) + " channel(s)");
        }
        values.insert(values.end(), v.begin(), v.end());
        if (e.contains("centroid")) {
            const std::vector<double> m = numbers(e["centroid"], c, i);
            palette.centroids.insert(palette.centroids.end(), m.begin(), m.end());
            ++with_centroid;
        }
    }
    // Centroids decide the assignment only when every entry has one.
    if (with_centroid != palette.size()) palette.centroids.clear();
    return palette;
}

bool swatch_possible(DType dtype, int channels) {
    return (dtype == DType::U8 || dtype == DType::U16) && (channels == 1 || channels == 3);
}

Cube palette_swatch(const Palette& p) {
    constexpr int kCell = 32, kPerRow = 16;
    const int n = int(p.size());
    const int cols = std::min(n, kPerRow), rows = (n + kPerRow - 1) / kPerRow;
    Cube s(cols * kCell, rows * kCell, p.channels, p.dtype, Layout::BIP);
    for (int i = 0; i < n; ++i) {
        const int x0 = (i % kPerRow) * kCell, y0 = (i / kPerRow) * kCell;
        for (int y = y0; y < y0 + kCell; ++y)
            for (int x = x0; x < x0 + kCell; ++x)
                for (int b = 0; b < p.channels; ++b)
                    s.set_value(x, y, b, p.values[std::size_t(i) * std::size_t(p.channels) + std::size_t(b)]);
    }
    return s;
}

}  // namespace cubekit::cli
