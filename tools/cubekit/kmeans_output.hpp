#pragma once
// What `cubekit quantize` and `cubekit cluster` share (and `cubekit demo` reuses): the k-means
// flags, the mask, the numbers of a run for JSON, and the palette file (JSON and swatch PNG).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/io.hpp"
#include "cubekit/kmeans.hpp"
#include "cubekit/quantize_image.hpp"
#include "option_flags.hpp"

namespace cubekit::cli {

/// The k-means flags of quantize and cluster: the declared KmeansOptions fields (-k, --init,
/// --seed, --max-iter, --tol, --n-init, --init-sample, --empty, --legacy) and --mask FILE.
struct KmeansFlags {
    KmeansOptions options;  ///< set options.k first for another default (cluster: kClusterDefaultK)
    std::string mask;       ///< --mask FILE, "" = every pixel
    BoundFlags bound;
    bool k_given() const { return bound.given("k"); }
};

/// Adds the k-means flags. Values are checked as they are parsed (declared ranges) and by the
/// library (check_kmeans_arguments / kmeans). `explicit_from` names the flag that gives --init
/// explicit its centroids.
void add_kmeans_flags(CLI::App& app, KmeansFlags& flags, const std::string& explicit_from);

/// Reads --mask FILE (or FILE.mat:VAR, cli_common.hpp: read_secondary): one band of any type, the image's width and height; nonzero (and not NaN)
/// = used, 0 = excluded. Throws InvalidInput naming --mask and the file for another band count,
/// another size, or a mask that excludes every pixel.
std::vector<std::uint8_t> read_mask(const std::string& path, const CubeShape& image);

/// The JSON of the k-means parameters actually used (the declared fields and the mask file).
nlohmann::json kmeans_parameters_json(const KmeansOptions& options, const std::string& mask);

/// The numbers of a run for the --json summary: k, k_effective, inertia, iterations, converged,
/// valid_pixels, winner, restarts [{seed, inertia, iterations, converged, k_effective}], history.
nlohmann::json kmeans_numbers_json(const KmeansResult& r);

/// One palette: n entries of `channels` values (row-major) with their pixel counts.
struct Palette {
    int channels = 3;
    DType dtype = DType::U8;
    std::vector<double> values;
    std::vector<double> centroids;  ///< the unrounded cluster means (n × channels), or empty
    std::vector<std::uint64_t> counts;
    std::size_t size() const { return channels > 0 ? values.size() / std::size_t(channels) : 0; }
};

/// Entries of the palette file: {"rgb": [r, g, b]} for 3 channels, {"value": v, "rgb": [v, v, v]}
/// for 1, {"values": [...]} otherwise; each with "count" and "fraction" (= count / valid), and
/// "centroid" (the unrounded mean) when the palette has centroids. Values of integer images are
/// written as integers.
nlohmann::ordered_json palette_entries_json(const Palette& palette, std::int64_t valid);

/// Reads a palette JSON file (as written by quantize) for an image of `channels` channels: each
/// entry's "values", else "value" (1 channel), else "rgb" (3 channels; 1 channel when r = g = b);
/// the "centroid"s too when every entry has one. Throws IoError when the file cannot be read,
/// InvalidInput naming `flag`, the file and the entry when the content does not fit.
Palette read_palette_json(const std::string& path, int channels, const std::string& flag);

/// The swatch: one 32×32 square per entry, at most 16 per row, left to right then top to bottom,
/// unused cells of the last row black; u8/u16 with the palette's 1 or 3 channels.
Cube palette_swatch(const Palette& palette);

/// True when a swatch PNG can show a palette of this type (u8 or u16, 1 or 3 channels).
bool swatch_possible(DType dtype, int channels);

/// One `cubekit quantize` run, also used by `cubekit demo`.
struct QuantizeJob {
    std::string input;        ///< IN, for messages and the summary
    std::string output;       ///< OUT
    std::string palette_out;  ///< "" = <OUT stem>.palette.json and .palette.png
    std::string palette_in;   ///< "" = fit a palette
    std::string mask;         ///< "" = every pixel
    KmeansOptions options;
    bool k_given = false;     ///< -k was typed (must then agree with --palette-in)
    bool alpha_last = false;  ///< the last channel is alpha: not clustered, copied to OUT
    Colorspace colorspace = Colorspace::Rgb;
    Dither dither = Dither::None;
    WriteOptions write;       ///< --png-compression, for OUT, the indexed PNG and the swatch
};

/// Runs the job: checks the output names, clusters (or applies --palette-in), writes OUT, the
/// indexed PNG, the palette JSON and swatch; returns the JSON summary. Defined in cmd_quantize.cpp.
nlohmann::json run_quantize(const Context& ctx, const Cube& image, const QuantizeJob& job);
/// The fit of a job: quantize_image's result (painted image and labels in host memory) for options
/// the job made, computed whole or in tiles.
using QuantizeFit = std::function<QuantizedImage(const QuantizeImageOptions&)>;
/// run_quantize on an image known by its shape and header (a file read by windows): `fit` quantizes it.
nlohmann::json quantize_job(const Context& ctx, const CubeShape& shape, const Metadata& metadata, const QuantizeJob& job,
                            const QuantizeFit& fit);

}  // namespace cubekit::cli
