// cubekit quantize: colour quantization of an RGB or grey image with k-means (spec kmeans.md):
// the quantized image, an indexed PNG, the palette as JSON and as a swatch.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "cubekit/kmeans_color.hpp"
#include "kmeans_output.hpp"
#include "outputs.hpp"

namespace cubekit::cli {

namespace {

/// The palette the image is finally painted with (only entries that got pixels) and the labels
/// into it (−1 = excluded pixel).
struct Painting {
    Palette palette;
    std::vector<std::int32_t> labels;
};

/// Keeps the entries of `values` (n × channels; `centroids` alike, or empty) that some label
/// uses, in their order, counts their pixels and renumbers the labels.
Painting compact(const std::vector<double>& values, const std::vector<double>& centroids, int channels, DType dtype,
                 const std::vector<std::int32_t>& labels) {
    const std::size_t c = std::size_t(channels), n = values.size() / c;
    std::vector<std::uint64_t> counts(n, 0);
    for (const std::int32_t l : labels)
        if (l >= 0) ++counts.at(std::size_t(l));
    Painting p;
    p.palette.channels = channels;
    p.palette.dtype = dtype;
    std::vector<std::int32_t> renumber(n, -1);
    for (std::size_t j = 0; j < n; ++j) {
        if (counts[j] == 0) continue;
        renumber[j] = std::int32_t(p.palette.counts.size());
        p.palette.counts.push_back(counts[j]);
        const auto row = [&](const std::vector<double>& v) { return v.begin() + std::ptrdiff_t(j * c); };
        p.palette.values.insert(p.palette.values.end(), row(values), row(values) + std::ptrdiff_t(c));
        if (!centroids.empty())
            p.palette.centroids.insert(p.palette.centroids.end(), row(centroids), row(centroids) + std::ptrdiff_t(c));
    }
    p.labels.resize(labels.size());
    for (std::size_t i = 0; i < labels.size(); ++i) p.labels[i] = labels[i] < 0 ? -1 : renumber[std::size_t(labels[i])];
    return p;
}

/// CIELAB values (rounded to f32, like rgb_u8_to_lab's image) of n × 3 sRGB u8 values.
std::vector<double> lab_of(const std::vector<double>& rgb) {
    std::vector<double> lab(rgb.size());
    for (std::size_t i = 0; i < rgb.size(); i += 3) {
        const auto v = srgb_u8_to_lab(std::uint8_t(rgb[i]), std::uint8_t(rgb[i + 1]), std::uint8_t(rgb[i + 2]));
        for (std::size_t c = 0; c < 3; ++c) lab[i + c] = double(float(v[c]));
    }
    return lab;
}

/// Labels of `r`, which applied `given` (n × m) and may have reordered it, as indices into
/// `given`: each of r's centroids is matched to the nearest (normally identical) row of `given`.
std::vector<std::int32_t> labels_in_given_order(const KmeansResult& r, const std::vector<double>& given, int m) {
    const std::size_t M = std::size_t(m), n = given.size() / M, rk = r.centroids.size() / M;
    std::vector<std::int32_t> to_given(rk, 0);
    for (std::size_t j = 0; j < rk; ++j) {
        double best = std::numeric_limits<double>::infinity();
        for (std::size_t g = 0; g < n; ++g) {
            double d = 0;
            for (std::size_t b = 0; b < M; ++b) {
                const double diff = r.centroids[j * M + b] - given[g * M + b];
                d += diff * diff;
            }
            if (d < best) best = d, to_given[j] = std::int32_t(g);
        }
    }
    std::vector<std::int32_t> labels(r.labels.size());
    for (std::size_t i = 0; i < labels.size(); ++i)
        labels[i] = r.labels[i] < 0 ? -1 : to_given[std::size_t(r.labels[i])];
    return labels;
}

/// `colour` (W×H×c, BIP) with every labelled pixel painted; excluded pixels keep their values.
Cube paint(const Cube& colour, const Painting& p) {
    Cube out = colour.to_layout(Layout::BIP);
    const int c = colour.bands();
    for (int y = 0; y < out.height(); ++y)
        for (int x = 0; x < out.width(); ++x) {
            const std::int32_t l = p.labels[std::size_t(y) * std::size_t(out.width()) + std::size_t(x)];
            if (l < 0) continue;
            for (int b = 0; b < c; ++b)
                out.set_value(x, y, b, p.palette.values[std::size_t(l) * std::size_t(c) + std::size_t(b)]);
        }
    return out;
}

/// `colour` with the image's last channel (alpha) appended again.
Cube with_alpha(const Cube& colour, const Cube& image) {
    Cube out(image.width(), image.height(), image.bands(), image.dtype(), Layout::BIP);
    for (int y = 0; y < image.height(); ++y)
        for (int x = 0; x < image.width(); ++x) {
            for (int b = 0; b < colour.bands(); ++b) out.set_value(x, y, b, colour.value(x, y, b));
            out.set_value(x, y, image.bands() - 1, image.value(x, y, image.bands() - 1));
        }
    return out;
}

std::string ext_lower(const std::string& path) {
    std::string e = std::filesystem::path(path).extension().string();
    for (char& ch : e) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    return e;
}

/// The output names of one run and what the image allows, decided before any work.
struct QuantizePlan {
    int channels = 0;  ///< colour channels (alpha not counted)
    bool lab = false, dither = false;
    FileFormat out_format = FileFormat::Auto;
    std::string palette_json_path, swatch_path, indexed_path;  ///< swatch "" = none
    bool indexed_type_ok = false;                              ///< 8-bit grey or RGB without alpha
};

/// Refuses options and OUT names that cannot work with this image.
void check_quantize_job(const Cube& image, const QuantizeJob& job, const QuantizePlan& plan) {
    if (job.colorspace != "rgb" && !plan.lab)
        throw InvalidInput("--colorspace = '" + job.colorspace + "'; expected rgb or lab");
    if (job.dither != "none" && !plan.dither)
        throw InvalidInput("--dither = '" + job.dither + "'; expected none or floyd-steinberg");
    if (plan.lab && (image.dtype() != DType::U8 || plan.channels != 3))
        throw InvalidInput("--colorspace lab needs an 8-bit RGB image; " + job.input + " is " +
                           image.shape().describe());
    if (plan.lab && job.options.legacy)
        throw InvalidInput(
            "--legacy cannot be combined with --colorspace lab (legacy reproduces integer RGB arithmetic)");
    const FileFormat f = plan.out_format;
    if ((f == FileFormat::Png || f == FileFormat::Pnm) && image.dtype() != DType::U8 && image.dtype() != DType::U16)
        throw InvalidInput(job.output + ": PNG and PNM hold unsigned 8- or 16-bit (u8, u16) images and " + job.input +
                           " is " + std::string(dtype_name(image.dtype())) + "; write OUT as .npy or ENVI (.hdr)");
    if ((f == FileFormat::Png && image.bands() > 4) || (f == FileFormat::Pnm && image.bands() != 1 && image.bands() != 3))
        throw InvalidInput(job.output + ": " + std::to_string(image.bands()) +
                           " channels do not fit this format; write OUT as .npy or ENVI (.hdr)");
    if (job.options.init == KmeansInit::Explicit && job.palette_in.empty())
        throw InvalidInput("--init explicit needs --palette-in FILE (the initial palette)");
}

QuantizePlan plan_quantize(const Cube& image, const QuantizeJob& job) {
    QuantizePlan p;
    p.channels = image.bands() - (job.alpha_last ? 1 : 0);
    p.lab = job.colorspace == "lab";
    p.dither = job.dither == "floyd-steinberg";
    p.out_format = output_format(job.output);
    check_quantize_job(image, job, p);
    const bool swatch_ok = swatch_possible(image.dtype(), p.channels);
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
                                   image.shape().describe() + " (give a .json name)");
        } else {
            throw InvalidInput("--palette-out = '" + job.palette_out + "'; expected a .json or .png file name");
        }
    }
    if (!swatch_ok) p.swatch_path.clear();
    p.indexed_type_ok = image.dtype() == DType::U8 && (p.channels == 1 || p.channels == 3) && !job.alpha_last;
    p.indexed_path = beside(job.output, ".indexed.png");
    std::vector<std::string> all = {job.output, p.palette_json_path};
    if (p.indexed_type_ok) all.push_back(p.indexed_path);
    if (!p.swatch_path.empty()) all.push_back(p.swatch_path);
    check_distinct(all, job.palette_out.empty() ? "OUT " + job.output : "--palette-out " + job.palette_out);
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

/// What decides which pixel gets which entry of a given palette: its unrounded centroids when the
/// file has them (then a fitted palette assigns every pixel exactly as the fit did), else its colours.
const std::vector<double>& assignment_values(const Palette& given) {
    return given.centroids.empty() ? given.values : given.centroids;
}

/// The palette the image is finally painted with and the labels into it: in Lab, the used
/// centroids converted to sRGB and every pixel given the colour nearest in Lab (so that
/// --palette-in with the written palette paints exactly the same image); with dithering, error
/// diffusion over the final palette; else the fit's own palette and labels.
Painting final_painting(const Context& ctx, const KmeansResult& r, const Palette& given, bool apply,
                        const QuantizePlan& plan, const Cube& colour, const Cube& space,
                        const std::vector<std::uint8_t>& mask) {
    std::vector<double> values;        // n × channels in the image's type
    std::vector<double> centroids;     // unrounded, for the palette file (integer images only)
    std::vector<std::int32_t> labels;  // into `values`
    if (plan.lab) {
        if (apply) {
            values = given.values;
        } else {
            const std::vector<std::uint8_t> rgb =
                lab_to_rgb_u8(compact(r.centroids, {}, 3, DType::F32, r.labels).palette.values);
            values.assign(rgb.begin(), rgb.end());
        }
        const std::vector<double> values_lab = lab_of(values);
        if (plan.dither) labels = dither_floyd_steinberg(space, values_lab, mask);
        else if (apply) labels = labels_in_given_order(r, values_lab, 3);
        else labels = labels_in_given_order(apply_palette(ctx, space, values_lab, mask), values_lab, 3);
    } else if (apply) {
        values = given.values;
        if (!plan.dither) centroids = given.centroids;
        labels = plan.dither ? dither_floyd_steinberg(colour, values, mask)
                             : labels_in_given_order(r, assignment_values(given), plan.channels);
    } else if (plan.dither) {
        values = compact(r.palette, {}, plan.channels, colour.dtype(), r.labels).palette.values;
        labels = dither_floyd_steinberg(colour, values, mask);
    } else {
        values = r.palette;
        if (!dtype_is_float(colour.dtype())) centroids = r.centroids;
        labels = r.labels;
    }
    return compact(values, centroids, plan.channels, colour.dtype(), labels);
}

/// The indexed PNG: palette entry i = painting entry i; excluded pixels get one more entry, black
/// and fully transparent (tRNS), since they keep colours the palette does not hold.
void write_indexed(const Painting& painting, int channels, std::int64_t excluded, int width, int height,
                   const std::string& path) {
    const std::size_t n = painting.palette.size();
    std::vector<std::array<std::uint8_t, 3>> plte(n);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t b = 0; b < 3; ++b)
            plte[i][b] = std::uint8_t(painting.palette.values[i * std::size_t(channels) + (channels == 3 ? b : 0)]);
    std::vector<std::uint8_t> alpha;
    if (excluded > 0) {
        plte.push_back({0, 0, 0});
        alpha.assign(n, 255);
        alpha.push_back(0);
    }
    std::vector<std::uint8_t> index(painting.labels.size());
    for (std::size_t i = 0; i < index.size(); ++i)
        index[i] = std::uint8_t(painting.labels[i] < 0 ? n : std::size_t(painting.labels[i]));
    write_indexed_png(path, width, height, index, plte, alpha);
}

/// What one run made, for the outputs and the summary.
struct QuantizeRun {
    KmeansResult r;
    Painting painting;
    Cube quantized;
    int k_requested = 0;
    bool apply = false;
    std::vector<std::string> warnings;
};

/// Writes OUT, the indexed PNG, the palette JSON and the swatch; a failure takes back what was written.
OutputList write_quantize_outputs(const Cube& image, const QuantizeJob& job, const QuantizePlan& plan,
                                  QuantizeRun& run) {
    const std::int64_t excluded = std::int64_t(image.shape().num_pixels()) - run.r.valid_pixels;
    const std::size_t n = run.painting.palette.size();
    bool write_index = plan.indexed_type_ok && run.k_requested <= 256;
    if (write_index && excluded > 0 && n >= 256) {
        write_index = false;
        run.warnings.push_back("no indexed PNG: 256 palette entries leave no entry for the " +
                               std::to_string(excluded) + " excluded pixels");
    }
    OutputList outputs;
    try {
        write_cube(run.quantized, job.output);
        outputs.add(job.output, "quantized", std::string(format_name(plan.out_format)),
                    std::string(dtype_name(run.quantized.dtype())));
        if (write_index) {
            write_indexed(run.painting, plan.channels, excluded, image.width(), image.height(), plan.indexed_path);
            outputs.add(plan.indexed_path, "indexed", "png", "u8");
        }
        const nlohmann::ordered_json pj = {{"palette", palette_entries_json(run.painting.palette, run.r.valid_pixels)},
                                           {"inertia", run.r.inertia},
                                           {"iterations", run.r.iterations},
                                           {"converged", run.r.converged},
                                           {"k", run.k_requested},
                                           {"k_effective", run.r.k_effective},
                                           {"valid_pixels", run.r.valid_pixels},
                                           {"channels", plan.channels},
                                           {"dtype", std::string(dtype_name(image.dtype()))},
                                           {"colorspace", job.colorspace},
                                           {"dither", job.dither},
                                           {"source", job.input}};
        write_text_file(plan.palette_json_path, readable_json(pj));
        outputs.add(plan.palette_json_path, "palette", "json");
        if (!plan.swatch_path.empty()) {
            const Cube swatch = palette_swatch(run.painting.palette);
            write_cube(swatch, plan.swatch_path);
            outputs.add(plan.swatch_path, "swatch", "png", std::string(dtype_name(swatch.dtype())));
        }
    } catch (...) {
        outputs.remove_all();
        throw;
    }
    return outputs;
}

}  // namespace

nlohmann::json run_quantize(const Context& ctx, const Cube& image, const QuantizeJob& job) {
    const auto t_start = std::chrono::steady_clock::now();
    const QuantizePlan plan = plan_quantize(image, job);
    const std::vector<std::uint8_t> mask =
        job.mask.empty() ? std::vector<std::uint8_t>{} : read_mask(job.mask, image.shape());
    const Palette given = read_given_palette(job, plan.channels);

    const auto t0 = std::chrono::steady_clock::now();
    std::vector<int> colour_bands(static_cast<std::size_t>(plan.channels));
    for (int b = 0; b < plan.channels; ++b) colour_bands[std::size_t(b)] = b;
    const Cube without_alpha = job.alpha_last ? image.select_bands(colour_bands) : Cube();
    const Cube& colour = job.alpha_last ? without_alpha : image;
    const Cube space = plan.lab ? rgb_u8_to_lab(colour) : Cube();
    const Cube& clustered = plan.lab ? space : colour;
    KmeansOptions options = job.options;
    options.mask = mask;
    QuantizeRun run;
    run.apply = given.size() > 0 && options.init != KmeansInit::Explicit;
    if (run.apply) {
        run.r = apply_palette(ctx, clustered, plan.lab ? lab_of(given.values) : assignment_values(given), mask);
    } else {
        if (given.size() > 0) {
            options.k = int(given.size());
            options.init_centroids = plan.lab ? lab_of(given.values) : assignment_values(given);
        }
        run.r = kmeans(ctx, clustered, options);
    }
    const double kmeans_ms = elapsed_ms(t0);

    const auto t1 = std::chrono::steady_clock::now();
    run.painting = final_painting(ctx, run.r, given, run.apply, plan, colour, space, mask);
    // A plain fit paints exactly the library's quantized image; the other modes paint here.
    const bool plain_fit = !plan.lab && !plan.dither && !run.apply;
    run.quantized = plain_fit ? run.r.quantized.to_layout(Layout::BIP) : paint(colour, run.painting);
    if (job.alpha_last) run.quantized = with_alpha(run.quantized, image);
    const double paint_ms = elapsed_ms(t1);

    run.warnings = run.r.warnings;
    run.k_requested = run.apply ? int(given.size()) : options.k;
    const auto t2 = std::chrono::steady_clock::now();
    const OutputList outputs = write_quantize_outputs(image, job, plan, run);
    const double write_ms = elapsed_ms(t2);

    nlohmann::json j = summary("quantize", ctx);
    j["input"] = {{"path", job.input}, {"shape", shape_json(image.shape())}, {"alpha", job.alpha_last}};
    j["parameters"] = kmeans_parameters_json(options, job.mask);
    j["parameters"]["k"] = run.k_requested;
    j["parameters"]["colorspace"] = job.colorspace;
    j["parameters"]["dither"] = job.dither;
    j["parameters"]["palette_in"] = job.palette_in.empty() ? nlohmann::json(nullptr) : nlohmann::json(job.palette_in);
    j["mode"] = run.apply ? "apply" : "fit";
    j["implementation"] = std::string(kmeans_implementation(ctx, clustered.shape(), options));
    j.update(kmeans_numbers_json(run.r));
    j["palette_size"] = run.painting.palette.size();
    j["palette"] = nlohmann::json(palette_entries_json(run.painting.palette, run.r.valid_pixels));
    j["elapsed_ms"] = elapsed_ms(t_start);
    j["timings_ms"] = {{"kmeans", kmeans_ms}, {"paint", paint_ms}, {"write", write_ms}};
    j["outputs"] = outputs.json();
    j["warnings"] = run.warnings;
    return j;
}

namespace {

struct QuantizeArgs {
    CommonOptions common;
    KmeansFlags kmeans;
    std::string input, output, palette_out, palette_in, colorspace = "rgb", dither = "none";
};

void quantize_command(const QuantizeArgs& a) {
    CommonOptions common = a.common;
    QuantizeJob job{.input = a.input,
                    .output = a.output,
                    .palette_out = a.palette_out,
                    .palette_in = a.palette_in,
                    .mask = a.kmeans.mask,
                    .options = a.kmeans.options,
                    .k_given = a.kmeans.k_given(),
                    .colorspace = a.colorspace,
                    .dither = a.dither};
    if (job.colorspace != "rgb" || job.dither != "none") {  // CPU only
        const std::string which = job.colorspace != "rgb" ? "--colorspace " + job.colorspace : "--dither " + job.dither;
        if (common.context.backend == Backend::Cuda || common.context.device >= 0)
            throw InvalidInput(which + " is CPU only; it cannot be combined with " +
                               (common.context.backend == Backend::Cuda
                                    ? std::string("--backend cuda")
                                    : "--device " + std::to_string(common.context.device)));
        common.context.backend = Backend::Cpu;
    }
    output_format(job.output);  // a bad OUT fails before any work
    Context ctx = make_context(common, "quantize");
    const auto t0 = std::chrono::steady_clock::now();
    const Cube image = read_input(a.input, common).cube;
    const double read_ms = elapsed_ms(t0);
    // PNG stores alpha as the last channel (grey+alpha, RGBA): it is not a colour to cluster.
    job.alpha_last = common.bands.empty() && (image.bands() == 2 || image.bands() == 4) &&
                     detect_format(a.input) == FileFormat::Png;
    nlohmann::json j = run_quantize(ctx, image, job);
    j["timings_ms"]["read"] = read_ms;
    say(common, "quantize: " + a.input + " (" + image.shape().describe() + ") on " + ctx.device_name() + " [" +
                    j["implementation"].get<std::string>() + "]: k = " + std::to_string(j["k"].get<int>()) + ", " +
                    std::to_string(j["palette_size"].get<std::size_t>()) + " colours used, inertia " +
                    std::to_string(j["inertia"].get<double>()) + ", " + std::to_string(j["iterations"].get<int>()) +
                    " iterations" + (j["converged"].get<bool>() ? " (converged)" : " (not converged)"));
    for (const auto& o : j["outputs"]) say(common, "  wrote " + o["path"].get<std::string>());
    for (const auto& w : j["warnings"]) std::cerr << "cubekit: warning: " << w.get<std::string>() << "\n";
    emit_json(common, j);
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
        "  cubekit quantize photo.png soft.png -k 12 --colorspace lab --dither floyd-steinberg");
    app->add_option("IN", args->input, "input image (PNG, JPEG, PPM, or any cube cubekit reads)")->required();
    app->add_option("OUT", args->output, "quantized image: .png, .ppm/.pgm, .npy or ENVI (.hdr)")->required();
    add_kmeans_flags(*app, args->kmeans, "--palette-in");
    app->add_option("--palette-out", args->palette_out,
                    "palette file name: F.json (with swatch F.png) or F.png (with F.json)");
    app->add_option("--palette-in", args->palette_in,
                    "apply the palette of this JSON file (as written by quantize; JSON only) without fitting: each\n"
                    "pixel gets the entry with the nearest \"centroid\" (\"rgb\" when the file has none); with\n"
                    "--init explicit, start k-means from it instead");
    app->add_option(
           "--colorspace", args->colorspace,
           "CPU only. rgb, or lab: cluster 8-bit sRGB in CIELAB (D65), convert the palette back to sRGB, paint\n"
           "each pixel with the palette colour nearest in Lab")
        ->capture_default_str();
    app->add_option("--dither", args->dither,
                    "CPU only. none, or floyd-steinberg: error diffusion when painting with the final palette (the\n"
                    "indexed PNG holds the dithered indices)")
        ->capture_default_str();
    add_common_flags(*app, args->common);
    return [args] { quantize_command(*args); };
}

}  // namespace cubekit::cli
