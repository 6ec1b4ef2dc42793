// cubekit synth: the synthetic target-detection scenes of spec detect.md §C.3 (cubekit/synth.hpp),
// their ground truth beside them, and a --json summary of the objects placed.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "cubekit/synth.hpp"
#include "option_flags.hpp"
#include "outputs.hpp"

namespace cubekit::cli {

/// The flags of a run that are no SynthOptions field: the seed (an argument of synth_castaways) and
/// the CPU threads (there is no Context).
struct SynthRun {
    std::uint64_t seed = 0;
    int threads = 0;
};

template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, SynthRun>
void visit_fields(O& o, V&& visit) {
    visit(o.seed, Field{.name = "seed", .doc = "seed of every random draw: the objects and the noise"});
    visit(o.threads, Field{.name = "threads", .doc = "CPU threads (0 = all cores); the scene is the same for any count",
                           .min = 0, .max = 4096});
}

namespace {

struct SynthArgs {
    CommonOptions common;  // --json, --quiet, --png-compression
    std::string scene, output, truth, objects;
    SynthRun run;
    SynthOptions options;
};

bool is_image(FileFormat f) { return f == FileFormat::Png || f == FileFormat::Pnm; }

/// The band whose wavelength is nearest to `nm` (the first on ties).
int nearest_band(const std::vector<double>& wavelengths, double nm) {
    const auto it = std::min_element(wavelengths.begin(), wavelengths.end(),
                                     [&](double a, double b) { return std::abs(a - nm) < std::abs(b - nm); });
    return int(it - wavelengths.begin());
}

/// The cube as an 8-bit RGB picture: the bands nearest 640, 550 and 460 nm, each sample v shown as
/// round(255·sqrt(min(max(v, 0), white)/white)), white = the largest sample of the three bands (one
/// scale for all three keeps the materials' colours; the square root lifts the dark sea).
Cube rgb_composite(const SynthScene& s, nlohmann::json& entry) {
    const std::array<int, 3> rgb = {nearest_band(s.wavelengths, 640), nearest_band(s.wavelengths, 550),
                                    nearest_band(s.wavelengths, 460)};
    const Cube& c = s.cube;
    double white = 0;
    for (int y = 0; y < c.height(); ++y)
        for (int x = 0; x < c.width(); ++x)
            for (int b : rgb) white = std::max(white, double(c.at<float>(x, y, b)));
    Cube out(c.width(), c.height(), 3, DType::U8, Layout::BIP);
    for (int y = 0; y < c.height(); ++y)
        for (int x = 0; x < c.width(); ++x)
            for (int k = 0; k < 3; ++k) {
                const double v = std::clamp(double(c.at<float>(x, y, rgb[std::size_t(k)])), 0.0, white);
                out.at<std::uint8_t>(x, y, k) = std::uint8_t(white > 0 ? std::lround(255 * std::sqrt(v / white)) : 0);
            }
    entry["composite"] = {{"bands", rgb},
                          {"wavelengths", {s.wavelengths[std::size_t(rgb[0])], s.wavelengths[std::size_t(rgb[1])],
                                           s.wavelengths[std::size_t(rgb[2])]}},
                          {"rule", "round(255 * sqrt(min(max(v, 0), white) / white))"},
                          {"white", white}};
    return out;
}

/// Writes the scene cube (PNG/PNM: the RGB composite) and its truth and object maps, listing them in
/// `outputs`; a failure takes back what was written.
void write_scene(const SynthScene& s, const SynthArgs& a, OutputList& outputs) {
    const FileFormat format = output_format(a.output);
    try {
        nlohmann::json entry = {{"path", a.output}, {"role", "cube"}, {"format", std::string(format_name(format))}};
        if (is_image(format)) {
            write_cube(rgb_composite(s, entry), a.output, a.common.write);
            entry["dtype"] = "u8";
        } else {
            write_cube(s.cube, a.output, a.common.write);  // ENVI: BIP, with the wavelengths
            entry["dtype"] = "f32";
        }
        outputs.add(a.output, entry);
        Cube truth = s.truth.clone();
        if (is_image(output_format(a.truth)))
            for (std::size_t i = 0; i < truth.num_elements(); ++i) truth.data<std::uint8_t>()[i] *= 255;
        write_cube(truth, a.truth, a.common.write);
        outputs.add(a.truth, "truth", std::string(format_name(output_format(a.truth))), "u8");
        if (!a.objects.empty()) {
            write_cube(s.objects, a.objects, a.common.write);
            outputs.add(a.objects, "objects", std::string(format_name(output_format(a.objects))), "i32");
        }
    } catch (...) {
        outputs.remove_all();
        throw;
    }
}

nlohmann::json object_json(const SynthObject& o) {
    return {{"id", o.id},
            {"kind", std::string(enum_name(o.kind))},
            {"target", o.target},
            {"cx", o.cx},
            {"cy", o.cy},
            {"half_length", o.half_length},
            {"half_width", o.half_width},
            {"angle", o.angle},
            {"amplitude", o.amplitude},
            {"radius", o.radius},
            {"area", o.area},
            {"box", {{"x0", o.x0}, {"y0", o.y0}, {"width", o.width}, {"height", o.height}}}};
}

/// Refuses bad output names before any work: OUT any format cubekit writes, the object ids (i32)
/// only where integers survive, no two outputs on one file.
void check_synth_outputs(const SynthArgs& a) {
    output_format(a.output);
    output_format(a.truth);
    if (!a.objects.empty() && is_image(output_format(a.objects)))
        throw InvalidInput("synth: --objects = " + a.objects + ": the object ids are i32; use .npy or ENVI (.hdr/.img)");
    std::vector<std::string> paths = {a.output, a.truth};
    if (!a.objects.empty()) paths.push_back(a.objects);
    check_outputs(paths, "synth");
}

void synth_command(SynthArgs a) {
    const SynthSceneKind kind = parse_enum<SynthSceneKind>(a.scene, "synth: SCENE");
    if (a.truth.empty()) a.truth = beside(a.output, ".truth.npy");
    check_synth_outputs(a);
    if (a.run.threads > 0) omp_set_num_threads(a.run.threads);
    Timings timings;
    const SynthScene s = timings.time("synth", [&] { return synth_scene(kind, a.run.seed, a.options); });
    OutputList outputs;
    timings.time("write", [&] { write_scene(s, a, outputs); });

    std::int64_t target_pixels = 0;
    for (const SynthObject& o : s.placed) target_pixels += o.target ? o.area : 0;
    const SynthOptions& o = s.options;
    const std::string targets = kind == SynthSceneKind::Castaways ? " castaways" : " leaves";
    say(a.common, "synth: " + std::string(enum_name(kind)) + ", seed " + std::to_string(a.run.seed) + ": " +
                      s.cube.shape().describe() + ", " + std::to_string(o.targets) + targets + " (" +
                      std::to_string(target_pixels) + " target pixels), " + std::to_string(o.buoys) + " buoys, " +
                      std::to_string(o.boats) + " boats, noise sigma " + number_text(o.noise_sigma));
    for (const auto& out : outputs.json()) say(a.common, "  wrote " + out["path"].get<std::string>());
    nlohmann::json j = {{"command", "synth"}, {"cubekit_version", CUBEKIT_VERSION}, {"scene", std::string(enum_name(kind))},
                        {"seed", a.run.seed}};
    j["parameters"] = parameters_json(o);
    j["shape"] = shape_json(s.cube.shape());
    j["wavelengths"] = s.wavelengths;
    j["target_pixels"] = target_pixels;
    j["objects"] = nlohmann::json::array();
    for (const SynthObject& p : s.placed) j["objects"].push_back(object_json(p));
    j["outputs"] = outputs.json();
    emit_json(a.common, j, timings);
}

}  // namespace

Action add_synth(CLI::App& root) {
    auto args = std::make_shared<SynthArgs>();
    CLI::App* app = root.add_subcommand("synth", "Synthetic target-detection scenes with their ground truth (sea with castaways, leaves)");
    app->footer(
        "Scenes (spec detect.md C.3; formulas in include/cubekit/synth.hpp):\n"
        "  castaways  (naufragos) 1024x1024x64: 8 castaways (the targets), 6 buoys and 3 boats on a rippled sea\n"
        "  leaves     (hojas)     1024x256x64: 17 leaves (the targets) on paper\n"
        "Bands 400..1000 nm, objects at random positions at least --min-gap px apart, 4x4-supersampled coverage\n"
        "alpha mixing object and background, N(0, sigma^2) noise on every sample. The same seed and flags give the\n"
        "same scene, bit for bit, on every run and for any number of threads. Target pixels: alpha >= 0.5.\n"
        "OUT, from its extension: .npy (H, W, bands) f32; ENVI .hdr/.img (BIP, with the wavelengths); .png or .ppm:\n"
        "an RGB picture of the bands nearest 640, 550, 460 nm, round(255 * sqrt(v / white)), white = their largest\n"
        "sample (the cube itself then is not written; use .npy or ENVI for the data).\n"
        "Ground truth: <OUT without extension>.truth.npy (or --truth), u8 1 = target, 0 = background: the label\n"
        "image `cubekit train --labels` takes. --truth X.png writes 0/255 for viewing (in label images 255 means\n"
        "'ignore'; train on the .npy). --objects: the i32 object ids (1.. targets first, then buoys, then boats;\n"
        "0 background) as .npy or ENVI. --json lists every object: kind, centre, half axes, angle, area, box.\n"
        "Examples:\n"
        "  cubekit synth castaways sea.npy --seed 1                    # sea.npy + sea.truth.npy\n"
        "  cubekit synth castaways sea.png --seed 1 --truth sea.truth.png   # pictures to look at\n"
        "  cubekit synth leaves leaves.hdr --objects leaves.ids.npy --json\n"
        "  cubekit synth castaways train3.npy --seed 3 --targets 12 --width 512 --height 512   # a training variant");
    app->add_option("SCENE", args->scene, "castaways (alias naufragos) or leaves (alias hojas)")->required();
    app->add_option("OUT", args->output, "the scene: .npy, ENVI .hdr/.img, or .png/.ppm (an RGB picture); written atomically")
        ->required();
    bind_flags(*app, args->run);
    bind_flags(*app, args->options);
    app->add_option("--truth", args->truth,
                    "ground truth, u8 (default: <OUT without extension>.truth.npy, 0/1; .png/.pgm get 0/255)");
    app->add_option("--objects", args->objects, "also write the i32 object-id map here (.npy or ENVI)");
    app->add_flag("--json", args->common.json, "print one JSON object on stdout (and nothing else)");
    app->add_flag("-q,--quiet", args->common.quiet, "no status lines on stderr");
    add_output_flags(*app, args->common);
    return [args] { synth_command(*args); };
}

}  // namespace cubekit::cli
