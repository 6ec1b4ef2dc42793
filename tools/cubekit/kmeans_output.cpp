// Shared parts of `cubekit quantize` and `cubekit cluster`: flags, mask, JSON numbers, outputs.
#include "kmeans_output.hpp"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "rcmg_command.hpp"

namespace cubekit::cli {

void add_kmeans_flags(CLI::App& app, KmeansFlags& f, int default_k, const std::string& explicit_from) {
    f.k = default_k;
    f.k_option =
        app.add_option("-k", f.k, "number of clusters, 1 <= k <= number of valid pixels")->capture_default_str();
    app.add_option("--init", f.init,
                   "initial centroids: kmeans++ (greedy, seeded), random (k distinct pixels), box-diagonal (evenly\n"
                   "spaced on the per-band min-max diagonal) or explicit (from the file given with " +
                       explicit_from + ")")
        ->capture_default_str();
    app.add_option("--seed", f.seed, "64-bit seed of the random draws; restart r uses seed + r")
        ->check([](const std::string& v) {  // CLI11 would wrap -1 to 2^64 - 1
            return !v.empty() && v[0] == '-' ? "seed = " + v + ": expected 0 to 2^64 - 1" : std::string();
        })
        ->capture_default_str();
    app.add_option("--max-iter", f.max_iter, "Lloyd iterations at most")->capture_default_str();
    app.add_option("--tol", f.tol,
                   "stop when the centroids move less than tol x mean band variance (sum of squared shifts);\n"
                   "0 = only when they stop moving")
        ->capture_default_str();
    app.add_option("--n-init", f.n_init, "independent restarts (seeds seed, seed+1, ...); the lowest inertia wins")
        ->capture_default_str();
    app.add_option("--init-sample", f.init_sample,
                   "kmeans++/random initialisation works on a seeded sample of about this many pixels (0 = all)")
        ->capture_default_str();
    app.add_option("--empty", f.empty,
                   "a cluster left without pixels: relocate (takes the farthest pixel), keep (keeps its centroid)\n"
                   "or legacy-zero (becomes the zero vector)")
        ->capture_default_str();
    app.add_flag("--legacy", f.legacy,
                 "reproduce the 2018 seed program's integer arithmetic (8-bit RGB input, with --init explicit):\n"
                 "truncated centroids, empty -> black, no convergence test, no final re-assignment, no sorting");
    app.add_option("--mask", f.mask,
                   "one-band image of the same size; 0 = pixel excluded (label -1, copied unchanged)");
}

KmeansOptions kmeans_options(const KmeansFlags& f) {
    KmeansOptions o;
    o.k = f.k;
    o.init = parse_kmeans_init(f.init, "--init");
    o.seed = f.seed;
    o.init_sample = f.init_sample;
    o.max_iter = f.max_iter;
    o.tol = f.tol;
    o.empty = parse_empty_policy(f.empty, "--empty");
    o.n_init = f.n_init;
    o.legacy = f.legacy;
    return o;
}

std::vector<std::uint8_t> read_mask(const std::string& path, const CubeShape& image) {
    const std::string where = "--mask " + path + ": ";
    Cube mask;
    try {
        mask = read_cube(path);
    } catch (const IoError& e) {  // the reader names the file; say which flag gave it
        throw IoError("--mask: " + std::string(e.what()));
    } catch (const InvalidInput& e) {
        throw InvalidInput("--mask: " + std::string(e.what()));
    }
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
    nlohmann::json j = {{"k", o.k},
                        {"init", std::string(kmeans_init_name(o.init))},
                        {"seed", o.seed},
                        {"init_sample", o.init_sample},
                        {"max_iter", o.max_iter},
                        {"tol", o.tol},
                        {"empty", std::string(empty_policy_name(o.empty))},
                        {"n_init", o.n_init},
                        {"legacy", o.legacy}};
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

void write_text_file(const std::string& path, const std::string& text) {
    const std::filesystem::path target(path);
    const std::filesystem::path tmp =
        target.parent_path() / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()));
    {
        std::ofstream f(tmp, std::ios::binary);
        if (!f) throw IoError("write: " + path + ": cannot create: " + std::strerror(errno));
        f << text;
        f.close();
        if (!f) {
            std::error_code ec;
            std::filesystem::remove(tmp, ec);
            throw IoError("write: " + path + ": cannot write");
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, target, ec);
    if (ec) {
        const std::string why = ec.message();
        std::filesystem::remove(tmp, ec);
        throw IoError("write: " + path + ": cannot write: " + why);
    }
}

void OutputList::add(const std::string& path, const std::string& role, const std::string& format,
                     const std::string& dtype) {
    paths_.push_back(path);
    nlohmann::json o = {{"role", role}, {"path", path}, {"format", format}};
    if (!dtype.empty()) o["dtype"] = dtype;
    json_.push_back(o);
}

void OutputList::remove_all() const {
    for (const std::string& p : paths_) {
        std::error_code ec;
        std::filesystem::remove(p, ec);
        FileFormat format = FileFormat::Auto;
        try {
            format = output_format(p);
        } catch (const InvalidInput&) {  // .json, .csv: not image formats
        }
        if (format == FileFormat::Envi) remove_outputs({p});  // also the header and the data file
    }
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
        throw InvalidInput(where + "not JSON (" + std::string(e.what()) + ")");
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
