// cubekit cluster: unsupervised classification of the pixel spectra of a cube with k-means (spec
// kmeans.md §3.11): the label image, a colour-coded class map and the centroid spectra.
#include <cerrno>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "kmeans_output.hpp"
#include "outputs.hpp"
#include "tile_flags.hpp"

namespace cubekit::cli {

namespace {

/// The label image as written: u8 when k ≤ 255 and no pixel is excluded; else u16 with excluded
/// pixels = 65535 (k ≤ 65535); beyond, i32 with −1. Georeference kept, per-band metadata dropped.
Cube label_image(const KmeansResult& r, int k, int width, int height, const Metadata& source) {
    const bool any_excluded = r.valid_pixels < std::int64_t(width) * std::int64_t(height);
    const DType t = (k <= 255 && !any_excluded) ? DType::U8 : k <= 65535 ? DType::U16 : DType::I32;
    const double excluded = t == DType::U16 ? 65535.0 : -1.0;
    Cube labels(width, height, 1, t, Layout::BSQ);
    for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x) {
            const std::int32_t l = r.labels[std::size_t(y) * std::size_t(width) + std::size_t(x)];
            labels.set_value(x, y, 0, l < 0 ? excluded : double(l));
        }
    labels.metadata() = source.georeference();
    labels.metadata().description = "cubekit cluster labels (k = " + std::to_string(k) + ")";
    return labels;
}

Cube class_map(const KmeansResult& r, int width, int height) {
    Cube png(width, height, 3, DType::U8, Layout::BIP);
    std::uint8_t* dst = png.data<std::uint8_t>();
    for (std::size_t i = 0; i < r.labels.size(); ++i) {
        if (r.labels[i] < 0) continue;  // excluded: black (the cube is zero-filled)
        const auto c = class_colour(r.labels[i]);
        std::copy(c.begin(), c.end(), dst + 3 * i);
    }
    return png;
}

/// Shortest text that reads back as the same value (as f32 when the centroids are f32).
std::string number(double v, DType centroid_type) {
    char buf[64];
    const auto res = centroid_type == DType::F32 ? std::to_chars(buf, buf + sizeof(buf), float(v))
                                                 : std::to_chars(buf, buf + sizeof(buf), v);
    return std::string(buf, res.ptr);
}

/// Reads the "centroids" of a centroids JSON file (as written by cluster): k spectra of m values.
std::vector<double> read_centroids_json(const std::string& path, int m) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw IoError("--centroids-in " + path + ": cannot read: Is a directory");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError("--centroids-in " + path + ": cannot open: " + std::strerror(errno));
    std::stringstream text;
    text << in.rdbuf();
    const std::string where = "--centroids-in " + path + ": ";
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text.str());
    } catch (const nlohmann::json::exception& e) {
        throw InvalidInput(where + "not JSON (" + json_reason(e.what()) + ")");
    }
    if (!j.is_object() || !j.contains("centroids") || !j["centroids"].is_array() || j["centroids"].empty())
        throw InvalidInput(where + "expected an object with a non-empty \"centroids\" array");
    std::vector<double> values;
    for (std::size_t i = 0; i < j["centroids"].size(); ++i) {
        const nlohmann::json& c = j["centroids"][i];
        if (!c.is_object() || !c.contains("spectrum") || !c["spectrum"].is_array() ||
            c["spectrum"].size() != std::size_t(m))
            throw InvalidInput(where + "centroid " + std::to_string(i) + " has no \"spectrum\" of " +
                               std::to_string(m) + " values (the cube has " + std::to_string(m) + " bands)");
        // A cluster that never got a centroid (count 0, fewer distinct spectra than k) is written
        // with null values; it cannot classify anything and is skipped.
        if (std::all_of(c["spectrum"].begin(), c["spectrum"].end(),
                        [](const nlohmann::json& v) { return v.is_null(); }))
            continue;
        for (const auto& v : c["spectrum"]) {
            if (!v.is_number() || !std::isfinite(v.get<double>()))
                throw InvalidInput(where + "centroid " + std::to_string(i) + ": " + v.dump() +
                                   " is not a finite number");
            values.push_back(v.get<double>());
        }
    }
    if (values.empty()) throw InvalidInput(where + "no centroid has a spectrum (all are null)");
    return values;
}

/// The centroid files: <stem>.centroids.csv (cluster,count,<band columns>) and the JSON object of
/// <stem>.centroids.json.
struct CentroidFiles {
    std::string csv;
    nlohmann::ordered_json json;
};

CentroidFiles centroid_files(const KmeansResult& r, const CubeShape& shape, const Metadata& md, const std::string& input,
                             const std::vector<int>& band_indices) {
    const int m = shape.bands;
    const bool named_by_wavelength = md.wavelengths.size() == std::size_t(m);
    CentroidFiles f;
    f.csv = "cluster,count";
    for (int b = 0; b < m; ++b)
        f.csv += "," + (named_by_wavelength ? number(md.wavelengths[std::size_t(b)], DType::F64) : "b" + std::to_string(b));
    f.csv += "\n";
    nlohmann::ordered_json centroids = nlohmann::ordered_json::array();
    for (int j = 0; j < r.k; ++j) {
        const auto first = r.centroids.begin() + std::ptrdiff_t(std::size_t(j) * std::size_t(m));
        const std::vector<double> spectrum(first, first + m);
        const std::uint64_t count = std::size_t(j) < r.counts.size() ? r.counts[std::size_t(j)] : 0;
        f.csv += std::to_string(j) + "," + std::to_string(count);
        for (const double v : spectrum) f.csv += "," + number(v, r.centroid_type);
        f.csv += "\n";
        centroids.push_back({{"cluster", j}, {"count", count}, {"colour", class_colour(j)}, {"spectrum", spectrum}});
    }
    f.json = {{"k", r.k},
              {"bands", m},
              {"dtype", std::string(dtype_name(shape.dtype))},
              {"centroid_type", std::string(dtype_name(r.centroid_type))},
              {"centroids", centroids},
              {"inertia", r.inertia},
              {"iterations", r.iterations},
              {"converged", r.converged},
              {"k_effective", r.k_effective},
              {"valid_pixels", r.valid_pixels},
              {"source", input}};
    if (named_by_wavelength) f.json["wavelengths"] = md.wavelengths, f.json["wavelength_units"] = md.wavelength_units;
    if (!band_indices.empty()) f.json["band_indices"] = band_indices;
    return f;
}

struct ClusterArgs {
    CommonOptions common;
    KmeansFlags kmeans;
    std::string input, output, centroids_in;
    TileFlags tiles;
};

/// Runs k-means with these options: the whole cube, or its tiles.
using KmeansRunner = std::function<KmeansResult(const KmeansOptions&)>;

/// Fits k-means, or classifies with --centroids-in; returns the result and "fit" or "apply".
std::pair<KmeansResult, std::string> classify(const KmeansRunner& run, const CubeShape& shape, const ClusterArgs& a,
                                              KmeansOptions& options) {
    if (!a.kmeans.mask.empty()) options.mask = read_mask(a.kmeans.mask, shape);
    std::vector<double> given;
    if (!a.centroids_in.empty()) {
        given = read_centroids_json(a.centroids_in, shape.bands);
        const int n = int(given.size() / std::size_t(shape.bands));
        if (a.kmeans.k_given() && options.k != n)
            throw InvalidInput("-k " + std::to_string(options.k) + " disagrees with --centroids-in " + a.centroids_in +
                               ", which has " + std::to_string(n) + " centroids");
        options.k = n;
    }
    if (!given.empty() && options.init != KmeansInit::Explicit) {  // apply_palette: the final pass only
        KmeansOptions apply{.k = options.k, .init = KmeansInit::Explicit, .max_iter = 0, .paint = false};
        apply.init_centroids = given;
        apply.mask = options.mask;
        return {run(apply), "apply"};
    }
    options.init_centroids = given;
    try {
        return {run(options), "fit"};
    } catch (const InvalidInput& e) {  // the library names the option; the input is named here
        throw InvalidInput(a.input + ": " + e.what());
    }
}

/// Writes the labels, the class map and the centroid files; a failure takes back what was written.
OutputList write_cluster_outputs(const KmeansResult& r, const CubeShape& shape, const Metadata& md, const std::string& out,
                                 const CentroidFiles& files, const WriteOptions& write, Cube& labels) {
    const std::string png_path = beside(out, ".png"), csv_path = beside(out, ".centroids.csv"),
                      json_path = beside(out, ".centroids.json");
    labels = label_image(r, r.k, shape.width, shape.height, md);
    OutputList outputs;
    try {
        write_cube(labels, out, write);
        outputs.add(out, "labels", std::string(format_name(output_format(out))), std::string(dtype_name(labels.dtype())));
        write_cube(class_map(r, shape.width, shape.height), png_path, write);
        outputs.add(png_path, "class-map", "png", "u8");
        write_text_file(csv_path, files.csv);
        outputs.add(csv_path, "centroids", "csv");
        write_text_file(json_path, readable_json(files.json));
        outputs.add(json_path, "centroids", "json");
    } catch (...) {
        outputs.remove_all();
        throw;
    }
    return outputs;
}

void cluster_command(const ClusterArgs& a) {
    const auto t_start = std::chrono::steady_clock::now();
    CommonOptions common = a.common;
    // The tile flags choose k-means in tiles (kmeans_tiled). Without them the scene runs whole: k-means
    // reads the scene at every iteration, so a scene that fits is uploaded once.
    const std::optional<TileOptions> tiles = asked_tile_options(a.tiles, common);
    const std::string& out = a.output;
    const FileFormat out_format = output_format(out);
    if (out_format != FileFormat::Npy && out_format != FileFormat::Envi)
        throw InvalidInput(out + ": the label image is written as .npy or ENVI (.hdr/.img), e.g. " +
                           beside(out, ".npy") + " (the class-map PNG is written next to it)");
    KmeansOptions options = a.kmeans.options;
    options.paint = false;  // labels and centroids are all cluster writes
    if (options.init == KmeansInit::Explicit && a.centroids_in.empty())
        throw InvalidInput("--init explicit needs --centroids-in FILE (the initial centroid spectra)");
    check_outputs({out, beside(out, ".png"), beside(out, ".centroids.csv"), beside(out, ".centroids.json")},
                   "OUT " + out);
    Timings timings;
    // A tiled run reads a raw file (ENVI, .npy, GeoTIFF) by windows: the scene never has to fit in memory.
    // (Only with tiles: k-means reads the scene at every iteration, so a scene that fits is read whole.)
    std::optional<CubeFile> file = tiles ? open_windowed(a.input, common, true, timings) : std::nullopt;
    const auto estimate = [&](const CubeShape& s) { return estimate_kmeans(s, options.k); };
    // Not a structured binding: clang cannot capture one in a lambda when OpenMP is on.
    auto prepared = context_for_input(common, "cluster", timings, a.input, file, [&] { return read_input(a.input, common); },
                                      estimate);
    Context& ctx = prepared.ctx;
    const Input& in = prepared.input;
    nlohmann::json& choice = prepared.backend_choice;
    const Cube& cube = in.cube;
    const CubeShape shape = file ? file->shape() : cube.shape();
    const Metadata& metadata = file ? file->metadata() : cube.metadata();
    std::optional<TileOptions> tile_run = tiles;
    if (tile_run) check_tile_devices(a.tiles, *tile_run, ctx);
    const std::vector<int> band_indices = common.bands.empty() ? std::vector<int>{} : in.bands;
    const TransferTotals copies = ctx.transfer_totals();
    nlohmann::json tiled_report;
    const KmeansRunner run = [&](const KmeansOptions& o) {
        if (!tiles) return kmeans(ctx, cube, o);
        Cube l(shape.width, shape.height, 1, DType::I32);
        KmeansTiled t = file ? kmeans_tiled(ctx, *file, l.mutable_view(), o, *tile_run)
                             : kmeans_tiled(ctx, cube, l.mutable_view(), o, *tile_run);
        t.result.labels.assign(l.data<std::int32_t>(), l.data<std::int32_t>() + l.num_elements());
        tiled_report = tiled_json(t.run);
        tiled_report["passes"] = t.passes;
        return std::move(t.result);
    };
    // Not a structured binding: clang cannot capture one in a lambda when OpenMP is on.
    const auto fit = timings.time("kmeans", [&] { return classify(run, shape, a, options); });
    const auto& r = fit.first;
    const auto& mode = fit.second;
    timings.split_transfers(ctx, copies, "kmeans");
    Cube labels;
    const OutputList outputs = timings.time("write", [&] {
        return write_cluster_outputs(r, shape, metadata, out, centroid_files(r, shape, metadata, a.input, band_indices),
                                     common.write, labels);
    });

    nlohmann::json j = summary("cluster", ctx, choice);
    j["input"] = {{"path", a.input}, {"shape", shape_json(shape)}};
    if (file) j["input"]["windowed"] = true;
    if (tiles) j["tiled"] = tiled_report;
    j["parameters"] = kmeans_parameters_json(options, a.kmeans.mask);
    j["parameters"]["centroids_in"] = a.centroids_in.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.centroids_in);
    if (!band_indices.empty()) j["parameters"]["bands"] = band_indices;
    j["mode"] = mode;
    j["implementation"] = std::string(kmeans_implementation(ctx, shape, options));
    j.update(kmeans_numbers_json(r));
    j["label_dtype"] = std::string(dtype_name(labels.dtype()));
    j["counts"] = r.counts;
    j["elapsed_ms"] = elapsed_ms(t_start);
    j["outputs"] = outputs.json();
    j["warnings"] = r.warnings;
    say(common, "cluster: " + a.input + " (" + shape.describe() + ") on " + ctx.device_name() + " [" +
                    j["implementation"].get<std::string>() + "]: k = " + std::to_string(r.k) + " (" +
                    std::to_string(r.k_effective) + " non-empty), inertia " + std::to_string(r.inertia) + ", " +
                    std::to_string(r.iterations) + " iterations" + (r.converged ? " (converged)" : " (not converged)"));
    for (const auto& o : j["outputs"]) say(common, "  wrote " + o["path"].get<std::string>());
    for (const std::string& w : r.warnings) std::cerr << "cubekit: warning: " << w << "\n";
    emit_json(common, j, timings);
}

}  // namespace

Action add_cluster(CLI::App& root) {
    auto args = std::make_shared<ClusterArgs>();
    CLI::App* app =
        root.add_subcommand("cluster", "Unsupervised classification: k-means clusters of the pixel spectra of a cube");
    app->footer(
        "Every pixel spectrum is assigned to one of k clusters (k-means, Euclidean distance on the raw values);\n"
        "clusters are numbered by decreasing pixel count. Same seed, same result, on CPU and GPU.\n"
        "Outputs (next to OUT, <stem> = OUT without its extension):\n"
        "  OUT                     labels, .npy (H, W) or ENVI: u8 when k <= 255 and no pixel is excluded, else u16\n"
        "                          with excluded pixels (--mask, NaN) = 65535\n"
        "  <stem>.png              class map: cluster j in colour j of Matplotlib's tab10 (0-9), then the light\n"
        "                          tab20 colours (10-19), then golden-angle hues; excluded pixels black\n"
        "  <stem>.centroids.csv    cluster,count,<one column per band: the wavelength if the cube has them, else b0,b1,...>\n"
        "  <stem>.centroids.json   {\"k\", \"bands\", \"centroids\": [{\"cluster\", \"count\", \"colour\", \"spectrum\"}], \"inertia\", ...}\n"
        "  (all k clusters; one that never got a centroid, when the cube has fewer distinct spectra than k, has\n"
        "  count 0 and null / nan values)\n"
        "Examples:\n"
        "  cubekit cluster data/samson/samson_1.img classes.npy                 # k = 10 -> classes.png, .centroids.*\n"
        "  cubekit cluster scene.mat classes.hdr --var data -k 6 --n-init 3 --mask valid.png --json\n"
        "  cubekit cluster scene2.hdr c2.npy --centroids-in classes.centroids.json     # classify with given spectra\n"
        "  cubekit cluster flight.hdr classes.npy --memory-limit 2G                  # in tiles, read by windows\n"
        "Tiles: --memory-limit, --device-memory-limit, --devices or --tile-size run k-means in tiles (every pass\n"
        "over the tiles, merged exactly: the same labels and centroids as the whole-scene run), on the CPU or the\n"
        "GPUs; ENVI, .npy and GeoTIFF are read by windows. Each iteration reads the scene again: use tiles for a\n"
        "scene that does not fit.");
    input_file(app->add_option("IN", args->input, "input cube (any format cubekit reads)"))->required();
    app->add_option("OUT", args->output, "label image: .npy or ENVI (.hdr/.img)")->required();
    args->kmeans.options.k = kClusterDefaultK;  // the spec's default for classification
    add_kmeans_flags(*app, args->kmeans, "--centroids-in");
    input_file(app->add_option("--centroids-in", args->centroids_in,
                    "classify with the centroid spectra of this JSON file (as written by cluster) without\n"
                    "fitting; with --init explicit, start k-means from them instead"));
    add_common_flags(*app, args->common);
    add_output_flags(*app, args->common);
    add_tile_flags(*app, args->tiles);
    return [args] { cluster_command(*args); };
}

}  // namespace cubekit::cli
