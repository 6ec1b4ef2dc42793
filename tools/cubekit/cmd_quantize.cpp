// cubekit quantize: colour quantization of an RGB or grey image with k-means (spec kmeans.md):
// the quantized image, an indexed PNG, the palette as JSON and as a swatch. The quantization itself
// (palette, painting, Lab, dithering, alpha) is the library's quantize_image; this file plans the
// output names, reads the --mask and --palette-in files and writes the outputs.
#include <array>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "cubekit/quantize_image.hpp"
#include "kmeans_output.hpp"
#include "outputs.hpp"
#include "tile_flags.hpp"

namespace cubekit::cli {

namespace {

std::string ext_lower(const std::string& path) {
    std::string e = std::filesystem::path(path).extension().string();
    for (char& ch : e) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    return e;
}

/// The output names of one run and what the image allows, decided before any work.
struct QuantizePlan {
    int channels = 0;  ///< colour channels (alpha not counted)
    FileFormat out_format = FileFormat::Auto;
    std::string palette_json_path, swatch_path, indexed_path;  ///< swatch "" = none
    bool indexed_type_ok = false;                              ///< 8-bit grey or RGB without alpha
};

/// Refuses OUT names and flag combinations that cannot work with this image (what the options
/// allow, quantize_image checks).
void check_quantize_job(const CubeShape& image, const QuantizeJob& job, const QuantizePlan& plan) {
    const FileFormat f = plan.out_format;
    if ((f == FileFormat::Png || f == FileFormat::Pnm) && image.dtype != DType::U8 && image.dtype != DType::U16)
        throw InvalidInput(job.output + ": PNG and PNM hold unsigned 8- or 16-bit (u8, u16) images and " + job.input +
                           " is " + std::string(dtype_name(image.dtype)) + "; write OUT as .npy or ENVI (.hdr)");
    if ((f == FileFormat::Png && image.bands > 4) || (f == FileFormat::Pnm && image.bands != 1 && image.bands != 3))
        throw InvalidInput(job.output + ": " + std::to_string(image.bands) +
                           " channels do not fit this format; write OUT as .npy or ENVI (.hdr)");
    if (job.options.init == KmeansInit::Explicit && job.palette_in.empty())
        throw InvalidInput("--init explicit needs --palette-in FILE (the initial palette)");
}

QuantizePlan plan_quantize(const CubeShape& image, const QuantizeJob& job) {
    QuantizePlan p;
    p.channels = image.bands - (job.alpha_last ? 1 : 0);
    p.out_format = output_format(job.output);
    check_quantize_job(image, job, p);
    const bool swatch_ok = swatch_possible(image.dtype, p.channels);
    p.palette_json_path = beside(job.output, ".palette.json");
    p.swatch_path = beside(job.output, ".palette.png");
    if (!job.palette_out.empty()) {
        const std::string e = ext_lower(job.palette_out);
        if (e == ".json") {
            p.palette_json_path = job.palette_out, p.swatch_path = beside(job.palette_out, ".png");
        } else if (e == ".png") {
            p.swatch_path = job.palette_out, p.palette_json_path = beside(job.palette_out, ".json");
            if (!swatch_ok)
                throw InvalidInput("--palette-out " + job.palette_out +
                                   ": a swatch PNG needs an 8- or 16-bit grey or RGB image; " + job.input + " is " +
                                   image.describe() + " (give a .json name)");
        } else {
            throw InvalidInput("--palette-out = '" + job.palette_out + "'; expected a .json or .png file name");
        }
    }
    if (!swatch_ok) p.swatch_path.clear();
    p.indexed_type_ok = image.dtype == DType::U8 && (p.channels == 1 || p.channels == 3) && !job.alpha_last;
    p.indexed_path = beside(job.output, ".indexed.png");
    std::vector<std::string> all = {job.output, p.palette_json_path};
    if (p.indexed_type_ok) all.push_back(p.indexed_path);
    if (!p.swatch_path.empty()) all.push_back(p.swatch_path);
    check_outputs(all, job.palette_out.empty() ? "OUT " + job.output : "--palette-out " + job.palette_out);
    return p;
}

/// --palette-in, checked against -k when both are given (empty palette without --palette-in).
Palette read_given_palette(const QuantizeJob& job, int channels) {
    if (job.palette_in.empty()) return {};
    Palette given = read_palette_json(job.palette_in, channels, "--palette-in");
    if (job.k_given && job.options.k != int(given.size()))
        throw InvalidInput("-k " + std::to_string(job.options.k) + " disagrees with --palette-in " + job.palette_in +
                           ", which has " + std::to_string(given.size()) + " entries");
    return given;
}

/// The indexed PNG: palette entry i = entry i of the final palette; excluded pixels get one more
/// entry, black and fully transparent (tRNS), since they keep colours the palette does not hold.
void write_indexed(const QuantizedImage& q, std::int64_t excluded, int width, int height, const std::string& path,
                   PngCompression compression) {
    const std::size_t n = q.size(), channels = std::size_t(q.channels);
    std::vector<std::array<std::uint8_t, 3>> plte(n);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t b = 0; b < 3; ++b)
            plte[i][b] = std::uint8_t(q.palette[i * channels + (channels == 3 ? b : 0)]);
    std::vector<std::uint8_t> alpha;
    if (excluded > 0) {
        plte.push_back({0, 0, 0});
        alpha.assign(n, 255);
        alpha.push_back(0);
    }
    std::vector<std::uint8_t> index(q.labels.size());
    for (std::size_t i = 0; i < index.size(); ++i)
        index[i] = std::uint8_t(q.labels[i] < 0 ? n : std::size_t(q.labels[i]));
    write_indexed_png(path, width, height, index, plte, alpha, compression);
}

/// What one run made, for the outputs and the summary.
struct QuantizeRun {
    QuantizedImage q;
    Palette palette;  ///< q's palette, for the palette file and the swatch
    std::vector<std::string> warnings;
};

/// Writes OUT, the indexed PNG, the palette JSON and the swatch; a failure takes back what was written.
OutputList write_quantize_outputs(const CubeShape& image, const QuantizeJob& job, const QuantizePlan& plan,
                                  QuantizeRun& run) {
    const KmeansResult& r = run.q.kmeans;
    const std::int64_t excluded = std::int64_t(image.num_pixels()) - r.valid_pixels;
    bool write_index = plan.indexed_type_ok && r.k <= 256;
    if (write_index && excluded > 0 && run.q.size() >= 256) {
        write_index = false;
        run.warnings.push_back("no indexed PNG: 256 palette entries leave no entry for the " +
                               std::to_string(excluded) + " excluded pixels");
    }
    OutputList outputs;
    try {
        write_cube(run.q.image, job.output, job.write);
        outputs.add(job.output, "quantized", std::string(format_name(plan.out_format)),
                    std::string(dtype_name(run.q.image.dtype())));
        if (write_index) {
            write_indexed(run.q, excluded, image.width, image.height, plan.indexed_path, job.write.png_compression);
            outputs.add(plan.indexed_path, "indexed", "png", "u8");
        }
        const nlohmann::ordered_json pj = {{"palette", palette_entries_json(run.palette, r.valid_pixels)},
                                           {"inertia", r.inertia},
                                           {"iterations", r.iterations},
                                           {"converged", r.converged},
                                           {"k", r.k},
                                           {"k_effective", r.k_effective},
                                           {"valid_pixels", r.valid_pixels},
                                           {"channels", plan.channels},
                                           {"dtype", std::string(dtype_name(image.dtype))},
                                           {"colorspace", std::string(enum_name(job.colorspace))},
                                           {"dither", std::string(enum_name(job.dither))},
                                           {"source", job.input}};
        write_text_file(plan.palette_json_path, readable_json(pj));
        outputs.add(plan.palette_json_path, "palette", "json");
        if (!plan.swatch_path.empty()) {
            const Cube swatch = palette_swatch(run.palette);
            write_cube(swatch, plan.swatch_path, job.write);
            outputs.add(plan.swatch_path, "swatch", "png", std::string(dtype_name(swatch.dtype())));
        }
    } catch (...) {
        outputs.remove_all();
        throw;
    }
    return outputs;
}

/// The library's options for this job: the flags, the --mask and --palette-in files, alpha.
QuantizeImageOptions quantize_options(const CubeShape& image, const QuantizeJob& job, int channels) {
    QuantizeImageOptions o{.kmeans = job.options, .colorspace = job.colorspace, .dither = job.dither,
                           .alpha = job.alpha_last};
    if (!job.mask.empty()) o.kmeans.mask = read_mask(job.mask, image);
    Palette given = read_given_palette(job, channels);
    o.palette = std::move(given.values);
    o.palette_centroids = std::move(given.centroids);
    return o;
}

}  // namespace

nlohmann::json quantize_job(const Context& ctx, const CubeShape& shape, const Metadata& metadata, const QuantizeJob& job,
                            const QuantizeFit& fit) {
    const auto t_start = std::chrono::steady_clock::now();
    const QuantizePlan plan = plan_quantize(shape, job);
    QuantizeRun run;
    try {
        run.q = fit(quantize_options(shape, job, plan.channels));
    } catch (const InvalidInput& e) {  // the library names the option; the input is named here
        throw InvalidInput(job.input + ": " + e.what());
    }
    const QuantizedImage& q = run.q;
    // The painted modes have always carried the input's header (wavelengths, map info, ...) to
    // OUT; a plain fit and an image with alpha have not (the library's image has no metadata).
    const bool plain_fit = job.colorspace == Colorspace::Rgb && job.dither == Dither::None && !q.applied;
    if (!plain_fit && !job.alpha_last) run.q.image.metadata() = metadata;
    run.palette = {.channels = q.channels, .dtype = shape.dtype, .values = q.palette, .centroids = q.centroids,
                   .counts = q.counts};
    run.warnings = q.kmeans.warnings;
    const auto t2 = std::chrono::steady_clock::now();
    const OutputList outputs = write_quantize_outputs(shape, job, plan, run);
    const double write_ms = elapsed_ms(t2);

    nlohmann::json j = summary("quantize", ctx);
    j["input"] = {{"path", job.input}, {"shape", shape_json(shape)}, {"alpha", job.alpha_last}};
    j["parameters"] = kmeans_parameters_json(job.options, job.mask);
    j["parameters"]["k"] = q.kmeans.k;
    j["parameters"]["colorspace"] = std::string(enum_name(job.colorspace));
    j["parameters"]["dither"] = std::string(enum_name(job.dither));
    j["parameters"]["palette_in"] = job.palette_in.empty() ? nlohmann::json(nullptr) : nlohmann::json(job.palette_in);
    j["mode"] = q.applied ? "apply" : "fit";
    j["implementation"] = q.implementation;
    j.update(kmeans_numbers_json(q.kmeans));
    j["palette_size"] = q.size();
    j["palette"] = nlohmann::json(palette_entries_json(run.palette, q.kmeans.valid_pixels));
    j["elapsed_ms"] = elapsed_ms(t_start);
    j["timings_ms"] = {{"kmeans", q.fit_ms}, {"paint", q.paint_ms}, {"write", write_ms}};
    j["outputs"] = outputs.json();
    j["warnings"] = run.warnings;
    return j;
}

nlohmann::json run_quantize(const Context& ctx, const Cube& image, const QuantizeJob& job) {
    return quantize_job(ctx, image.shape(), image.metadata(), job,
                        [&](const QuantizeImageOptions& o) { return quantize_image(ctx, image, o); });
}

namespace {

struct QuantizeArgs {
    CommonOptions common;
    KmeansFlags kmeans;
    QuantizeImageOptions quantize;  ///< --colorspace and --dither (its declared flags)
    std::string input, output, palette_out, palette_in;
    TileFlags tiles;
};

/// The tile flags ask for a plain fit in tiles (quantize_image_tiled): the flags that need the whole
/// image are refused by name before any work.
std::optional<TileOptions> quantize_tile_options(const QuantizeArgs& a, CommonOptions& common) {
    std::optional<TileOptions> tiles = asked_tile_options(a.tiles, common);
    if (!tiles) return tiles;
    const auto refuse = [](const std::string& flag) {
        throw InvalidInput(flag + " needs the whole image; leave out --memory-limit, --device-memory-limit, --devices "
                                  "and --tile-size (tiles run plain fits)");
    };
    if (a.quantize.colorspace != Colorspace::Rgb) refuse("--colorspace " + std::string(enum_name(a.quantize.colorspace)));
    if (a.quantize.dither != Dither::None) refuse("--dither " + std::string(enum_name(a.quantize.dither)));
    if (!a.palette_in.empty()) refuse("--palette-in");
    if (a.kmeans.options.legacy) refuse("--legacy");
    return tiles;
}

/// The plain fit over the tiles of the image (read whole) or of the file (read by windows); the
/// painted image and labels come back in host memory, as quantize_image's. Fills `report`.
QuantizeFit tiled_fit(const Context& ctx, const Cube& image, const std::optional<CubeFile>& file, const CubeShape& shape,
                      const TileOptions& tiles, nlohmann::json& report) {
    return [&ctx, &image, &file, shape, tiles, &report](const QuantizeImageOptions& o) {
        Cube out(shape.width, shape.height, shape.bands, shape.dtype, Layout::BIP);
        Cube labels(shape.width, shape.height, 1, DType::I32);
        QuantizeTiled t = file ? quantize_image_tiled(ctx, *file, out.mutable_view(), labels.mutable_view(), o, tiles)
                               : quantize_image_tiled(ctx, image, out.mutable_view(), labels.mutable_view(), o, tiles);
        t.q.image = std::move(out);
        t.q.labels.assign(labels.data<std::int32_t>(), labels.data<std::int32_t>() + labels.num_elements());
        report = tiled_json(t.run);
        report["passes"] = t.passes;
        return std::move(t.q);
    };
}

void quantize_command(const QuantizeArgs& a) {
    CommonOptions common = a.common;
    const std::optional<TileOptions> tiles = quantize_tile_options(a, common);
    QuantizeJob job{.input = a.input,
                    .output = a.output,
                    .palette_out = a.palette_out,
                    .palette_in = a.palette_in,
                    .mask = a.kmeans.mask,
                    .options = a.kmeans.options,
                    .k_given = a.kmeans.k_given(),
                    .colorspace = a.quantize.colorspace,
                    .dither = a.quantize.dither,
                    .write = common.write};
    if (job.colorspace != Colorspace::Rgb || job.dither != Dither::None) {  // CPU only
        const std::string which = job.colorspace != Colorspace::Rgb
                                      ? "--colorspace " + std::string(enum_name(job.colorspace))
                                      : "--dither " + std::string(enum_name(job.dither));
        if (common.context.backend == Backend::Cuda || common.context.device >= 0)
            throw InvalidInput(which + " is CPU only; it cannot be combined with " +
                               (common.context.backend == Backend::Cuda
                                    ? std::string("--backend cuda")
                                    : "--device " + std::to_string(common.context.device)));
        common.context.backend = Backend::Cpu;
    }
    output_format(job.output);  // a bad OUT (or its missing folder) fails before any work
    check_outputs({job.output}, "quantize");
    Timings timings;
    // In tiles a raw file (ENVI, .npy, GeoTIFF) is read by windows; PNG and JPEG are read whole.
    const std::optional<CubeFile> file = tiles ? open_windowed(a.input, common, true, timings) : std::nullopt;
    const auto estimate = [&](const CubeShape& s) { return estimate_kmeans(s, job.options.k); };
    // Not a structured binding: clang cannot capture one in a lambda when OpenMP is on.
    auto prepared = context_for_input(common, "quantize", timings, a.input, file,
                                      [&] { return read_input(a.input, common).cube; }, estimate);
    Context& ctx = prepared.ctx;
    const Cube& image = prepared.input;
    const CubeShape shape = file ? file->shape() : image.shape();
    nlohmann::json& choice = prepared.backend_choice;
    // PNG stores alpha as the last channel (grey+alpha, RGBA): it is not a colour to cluster.
    job.alpha_last = common.bands.empty() && (shape.bands == 2 || shape.bands == 4) &&
                     detect_format(a.input) == FileFormat::Png;
    std::optional<TileOptions> tile_run = tiles;
    if (tile_run) check_tile_devices(a.tiles, *tile_run, ctx);
    nlohmann::json tiled_report;
    const TransferTotals copies = ctx.transfer_totals();
    nlohmann::json j = tiles ? quantize_job(ctx, shape, file ? file->metadata() : image.metadata(), job,
                                            tiled_fit(ctx, image, file, shape, *tile_run, tiled_report))
                             : run_quantize(ctx, image, job);
    if (!choice.is_null()) j["backend_choice"] = choice;
    if (file) j["input"]["windowed"] = true;
    if (tiles) j["tiled"] = tiled_report;
    timings.add(j["timings_ms"]);  // kmeans, paint, write
    timings.split_transfers(ctx, copies, "kmeans");
    say(common, "quantize: " + a.input + " (" + shape.describe() + ") on " + ctx.device_name() + " [" +
                    j["implementation"].get<std::string>() + "]: k = " + std::to_string(j["k"].get<int>()) + ", " +
                    std::to_string(j["palette_size"].get<std::size_t>()) + " colours used, inertia " +
                    std::to_string(j["inertia"].get<double>()) + ", " + std::to_string(j["iterations"].get<int>()) +
                    " iterations" + (j["converged"].get<bool>() ? " (converged)" : " (not converged)") +
                    (tiles ? ", " + std::to_string(tiled_report["tiles"].get<std::size_t>()) + " tiles" : ""));
    for (const auto& o : j["outputs"]) say(common, "  wrote " + o["path"].get<std::string>());
    for (const auto& w : j["warnings"]) std::cerr << "cubekit: warning: " << w.get<std::string>() << "\n";
    emit_json(common, j, timings);
}

}  // namespace

Action add_quantize(CLI::App& root) {
    auto args = std::make_shared<QuantizeArgs>();
    CLI::App* app = root.add_subcommand(
        "quantize", "Colour quantization: repaint an RGB or grey image with a k-colour palette (k-means)");
    app->footer(
        "k-means (Lloyd) on the pixel colours finds k palette colours (sorted by decreasing pixel count); every\n"
        "pixel is then painted with its nearest palette colour. Same seed, same result, on CPU and GPU.\n"
        "Outputs (next to OUT, <stem> = OUT without its extension):\n"
        "  OUT                   the quantized image: PNG/PNM with the input's channels, 8-bit (16-bit for u16 input);\n"
        "                        other input types need OUT .npy or ENVI (.hdr). Alpha is copied, not clustered.\n"
        "  <stem>.indexed.png    8-bit grey/RGB input and k <= 256: palette PNG (PLTE), reads back as RGB; pixels\n"
        "                        excluded by --mask get one extra black, fully transparent entry\n"
        "  <stem>.palette.json   {\"palette\": [{\"rgb\": [r,g,b], \"centroid\": [...], \"count\": n, \"fraction\": f}, ...],\n"
        "                        \"inertia\", ...}; grey images: {\"value\": v, \"rgb\": [v,v,v]}; clusters without pixels\n"
        "                        are not listed; \"centroid\" = the unrounded cluster mean (integer images)\n"
        "  <stem>.palette.png    swatch: one 32x32 square per palette entry, 16 per row (8/16-bit grey or RGB)\n"
        "  --palette-out F.json writes F.json and F.png instead; --palette-out F.png writes F.png and F.json.\n"
        "Examples:\n"
        "  cubekit quantize data/photos/chelsea.png chelsea_k16.png            # 16 colours + indexed + palette\n"
        "  cubekit quantize photo.png poster.png -k 8 --n-init 4 --seed 7 --json\n"
        "  cubekit quantize frame2.png frame2_q.png --palette-in chelsea_k16.palette.json   # reuse a palette\n"
        "  cubekit quantize photo.png soft.png -k 12 --colorspace lab --dither floyd-steinberg\n"
        "  cubekit quantize panorama.npy pano_k16.png --device-memory-limit 2G          # in tiles, read by windows\n"
        "Tiles: --memory-limit, --device-memory-limit, --devices or --tile-size fit the palette in tiles (every\n"
        "k-means pass over the tiles, merged exactly: the same image, labels and palette as the whole run) on the\n"
        "CPU or the GPUs; .npy, ENVI and GeoTIFF are read by windows, PNG and JPEG whole. Plain fits only (no\n"
        "--colorspace lab, --dither, --palette-in or --legacy). Each iteration reads the image again.");
    input_file(app->add_option("IN", args->input, "input image (PNG, JPEG, PPM, or any cube cubekit reads)"))->required();
    app->add_option("OUT", args->output, "quantized image: .png, .ppm/.pgm, .npy or ENVI (.hdr)")->required();
    add_kmeans_flags(*app, args->kmeans, "--palette-in");
    app->add_option("--palette-out", args->palette_out,
                    "palette file name: F.json (with swatch F.png) or F.png (with F.json)");
    input_file(app->add_option("--palette-in", args->palette_in,
                    "apply the palette of this JSON file (as written by quantize; JSON only) without fitting: each\n"
                    "pixel gets the entry with the nearest \"centroid\" (\"rgb\" when the file has none); with\n"
                    "--init explicit, start k-means from it instead"));
    bind_flags(*app, args->quantize);  // --colorspace, --dither
    add_tile_flags(*app, args->tiles);
    add_common_flags(*app, args->common);
    add_output_flags(*app, args->common);
    return [args] { quantize_command(*args); };
}

}  // namespace cubekit::cli
