// cubekit detect rx|mf|ace|cem|sam: the classical detectors (detect_classical.hpp, issue 15 item 4).
// OUT is the score map: .npy (H, W) / ENVI float, or .png scaled for display (p99 white point).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>

#include "cli_common.hpp"
#include "tile_flags.hpp"
#include "commands.hpp"
#include "cubekit/detect_classical.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "option_flags.hpp"
#include "outputs.hpp"

namespace cubekit::cli {
namespace {

struct ClassicalArgs {
    CommonOptions common;
    std::string input, output, target, target_mask, stats_in, stats_out;
    TileFlags tiles;
    ClassicalOptions options;
};

WorkEstimate estimate_classical(const CubeShape& s, const ClassicalOptions& o) {
    if (o.window[1] == 0) return estimate_pca(s);
    const double n = o.window[1] * o.window[1] - o.window[0] * o.window[0], K = s.bands;
    return {double(s.num_pixels()) * (n * K * K / 2 + K * K * K / 6) * 1e-6, double(s.num_bytes()) * 2};
}

nlohmann::json dropped_json(const BackgroundStats& s) {
    nlohmann::json d = nlohmann::json::array();
    for (const DroppedBand& b : s.dropped) d.push_back({{"band", b.band}, {"reason", b.reason}});
    return d;
}

/// The target spectrum: a file resampled to the input's wavelengths, or the mean of the masked pixels
/// of `cube` (read whole: a run that reads by windows takes no --target-mask).
std::vector<double> target_of(const Context& ctx, const ClassicalArgs& a, const Cube& cube, const CubeFile* file,
                              const CubeShape& shape, const Metadata& metadata, std::size_t strip_bytes) {
    if (a.options.detector == Detector::Rx) return {};
    if (a.target.empty() == a.target_mask.empty())
        throw InvalidInput("detect " + std::string(enum_name(a.options.detector)) +
                           ": give one of --target FILE or --target-mask MASK");
    if (!a.target.empty()) {
        try {
            return read_target_spectrum(a.target, metadata.wavelengths, shape.bands);
        } catch (const InvalidInput& e) {
            throw InvalidInput(std::string("--target: ") + e.what());
        }
    }
    const Cube mask = read_secondary(a.target_mask, "--target-mask");
    try {
        return file ? target_from_mask(ctx, *file, mask, strip_bytes) : target_from_mask(ctx, cube, mask);
    } catch (const InvalidInput& e) {
        throw InvalidInput(std::string("--target-mask: ") + e.what());
    }
}

void write_scores(const Cube& score, const std::string& path, const CommonOptions& common, OutputList& outputs) {
    const FileFormat f = output_format(path);
    if (f == FileFormat::Png || f == FileFormat::Pnm) {
        const double white = display_white_point(score);
        write_cube(to_display_u8(score, white), path, common.write);
        outputs.add(path, {{"role", "score"}, {"path", path}, {"format", format_name(f)}, {"dtype", "u8"}, {"white", white}});
    } else {
        write_cube(score, path, common.write);
        outputs.add(path, "score", std::string(format_name(f)), std::string(dtype_name(score.dtype())));
    }
}

nlohmann::json score_summary(const Cube& score) {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    std::int64_t nan = 0;
    for (int y = 0; y < score.height(); ++y)
        for (int x = 0; x < score.width(); ++x) {
            const double v = score.value(x, y, 0);
            if (std::isnan(v)) ++nan;
            else lo = std::min(lo, v), hi = std::max(hi, v);
        }
    return {{"min", std::isfinite(lo) ? nlohmann::json(lo) : nlohmann::json()},
            {"max", std::isfinite(hi) ? nlohmann::json(hi) : nlohmann::json()},
            {"nan", nan}};
}

void check_flags(const ClassicalArgs& a) {
    const FileFormat f = output_format(a.output);
    if (f != FileFormat::Npy && f != FileFormat::Envi && f != FileFormat::Png && f != FileFormat::Pnm)
        throw InvalidInput("detect: OUT = " + a.output + ": use .npy, ENVI (.hdr/.img) or .png");
    const bool local = a.options.window[1] != 0;
    if (local && !a.stats_in.empty()) throw InvalidInput("--stats-in: local RX (--window) fits its own windows");
    if (local && !a.stats_out.empty()) throw InvalidInput("--stats-out: local RX (--window) has no global statistics");
    if (!a.stats_in.empty() && !std::filesystem::is_regular_file(a.stats_in))
        throw InvalidInput("--stats-in = " + a.stats_in + ": no such file");
    if (!a.stats_out.empty()) {
        const auto ext = std::filesystem::path(a.stats_out).extension();
        if (ext != ".json" && ext != ".npz") throw InvalidInput("--stats-out = " + a.stats_out + ": use .json or .npz");
    }
    check_outputs({a.output, a.stats_out}, "detect");
}

void classical_command(const ClassicalArgs& a) {
    CommonOptions common = a.common;
    const std::string name = "detect " + std::string(enum_name(a.options.detector));
    check_flags(a);
    std::optional<TileOptions> tiles;
    if (a.tiles.given()) tiles = tile_options(a.tiles);  // a bad flag fails before the read
    if (!a.tiles.devices.empty() && common.context.backend == Backend::Auto) common.context.backend = Backend::Cuda;
    Timings timings;
    const bool local = a.options.window[1] != 0;
    // In tiles an ENVI, .npy or GeoTIFF input is read by windows: the screening, the statistics (unless
    // given) and a --target-mask spectrum a strip of rows at a time, the scores (global or local) tile
    // by tile into a .npy/ENVI/GeoTIFF OUT. The scene never has to fit in memory.
    const std::optional<CubeFile> file = tiles ? open_windowed(a.input, common, true, timings) : std::nullopt;
    const std::size_t strips = tiles ? tiles->memory_limit : 0;
    // Not a structured binding: clang cannot capture one in a lambda when OpenMP is on.
    auto prepared = context_for_input(
        common, name, timings, a.input, file, [&] { return read_input(a.input, common).cube; },
        [&](const CubeShape& s) { return estimate_classical(s, a.options); });
    Context& ctx = prepared.ctx;
    auto& cube = prepared.input;
    nlohmann::json& choice = prepared.backend_choice;
    const CubeShape shape = file ? file->shape() : cube.shape();
    const Metadata& metadata = file ? file->metadata() : cube.metadata();
    if (tiles) check_tile_devices(a.tiles, *tiles, ctx);
    const std::vector<double> target =
        timings.time("target", [&] { return target_of(ctx, a, cube, file ? &*file : nullptr, shape, metadata, strips); });
    std::optional<TiledRun> tiled;

    ClassicalResult r;
    std::string stats_source = "fitted";
    std::optional<InPlaceResult> in_place;
    if (file && CubeFileWriter::streamable(a.output, common.write))
        in_place.emplace(std::vector{a.output}, CubeShape{shape.width, shape.height, 1, a.options.out_type},
                         metadata.georeference(), common.write);
    const TransferTotals copies = ctx.transfer_totals();
    timings.time("detect", [&] {
        if (local) {
            if (file) {
                r.score = in_place ? Cube::borrow(in_place->view()) : Cube::uninitialized(shape.width, shape.height, 1, a.options.out_type);
                tiled = local_rx_tiled(ctx, *file, a.options, r.score.mutable_view(), *tiles, &r.local);
            } else if (tiles) {
                r.score = Cube::uninitialized(cube.width(), cube.height(), 1, a.options.out_type);
                tiled = local_rx_tiled(ctx, cube, a.options, r.score.mutable_view(), *tiles, &r.local);
            } else {
                r.score = local_rx(ctx, cube, a.options, &r.local);
            }
            return;
        }
        const bool fit = a.options.detector != Detector::Sam || !a.stats_out.empty();
        if (!a.stats_in.empty()) r.stats = read_background_stats(a.stats_in), stats_source = a.stats_in;
        else if (file) r.stats = fit ? fit_background(ctx, *file, a.options, nullptr, strips)
                                     : screen_bands(ctx, *file, a.options.keep_all_bands, strips);
        else if (fit) r.stats = fit_background(ctx, cube, a.options);
        else r.stats = screen_bands(ctx, cube, a.options.keep_all_bands);
        if (file) {
            r.score = in_place ? Cube::borrow(in_place->view()) : Cube::uninitialized(shape.width, shape.height, 1, a.options.out_type);
            tiled = apply_detector_tiled(ctx, *file, r.stats, a.options, target, r.score.mutable_view(), *tiles);
        } else if (use_tiles(tiles, ctx, cube.num_bytes())) {
            r.score = Cube::uninitialized(cube.width(), cube.height(), 1, a.options.out_type);
            tiled = apply_detector_tiled(ctx, cube, r.stats, a.options, target, r.score.mutable_view(), tiles.value_or(TileOptions{}));
        } else {
            r.score = apply_detector(ctx, cube, r.stats, a.options, target);
        }
    });
    timings.split_transfers(ctx, copies, "detect");
    r.score.metadata() = metadata.georeference();

    OutputList outputs;
    timings.time("write", [&] {
        try {
            if (!in_place) write_scores(r.score, a.output, common, outputs);
            if (!a.stats_out.empty()) {
                write_background_stats(r.stats, a.stats_out);
                outputs.add(a.stats_out, "stats", std::filesystem::path(a.stats_out).extension().string().substr(1));
            }
            if (in_place) in_place->commit(outputs, {{"role", "score"}});
        } catch (...) {
            outputs.remove_all();
            throw;
        }
    });

    say(common, name + ": " + a.input + " (" + shape.describe() + ") on " + ctx.device_name() +
                    (local ? ", local windows " + value_text(a.options.window) : ", global statistics") +
                    (r.stats.dropped.empty() ? "" : ", " + std::to_string(r.stats.dropped.size()) + " bands dropped"));
    for (const DroppedBand& d : r.stats.dropped) say(common, "  dropped band " + std::to_string(d.band) + ": " + d.reason);
    if (r.local.singular > 0)
        say(common, "  " + std::to_string(r.local.singular) + " pixels with a singular window covariance scored NaN");
    for (const auto& o : outputs.json()) say(common, "  wrote " + o["path"].get<std::string>());
    nlohmann::json j = summary(name, ctx, choice);
    j["input"] = {{"path", a.input}, {"shape", shape_json(shape)}};
    if (tiles) j["input"]["windowed"] = file.has_value();
    j["parameters"] = parameters_json(a.options);
    j["parameters"]["detector"] = enum_name(a.options.detector);
    if (!local) {
        j["bands"] = {{"total", shape.bands}, {"kept", r.stats.kept.size()}, {"dropped", dropped_json(r.stats)}};
        j["stats"] = {{"source", stats_source}, {"samples", r.stats.samples}, {"ddof", r.stats.ddof}};
    } else {
        j["local"] = {{"singular_pixels", r.local.singular}};
    }
    if (!a.target.empty()) j["target"] = {{"file", a.target}};
    if (!a.target_mask.empty()) j["target"] = {{"mask", a.target_mask}};
    if (tiled) j["tiled"] = tiled_json(*tiled);
    j["score"] = score_summary(r.score);
    j["outputs"] = outputs.json();
    emit_json(common, j, timings);
}

void add_one(CLI::App& detect, NestedActions& actions, Detector d, const std::string& help, const std::string& footer) {
    auto args = std::make_shared<ClassicalArgs>();
    args->options.detector = d;
    CLI::App* app = detect.add_subcommand(std::string(enum_name(d)), help);
    app->footer(footer);
    input_file(app->add_option("IN", args->input, "input cube (any format cubekit reads; --var names a MATLAB variable)"))->required();
    app->add_option("OUT", args->output, "score map: .npy or ENVI (float), or .png scaled for display")->required();
    BoundFlags flags = bind_flags(*app, args->options);
    add_tile_flags(*app, args->tiles);
    if (d != Detector::Rx) app->remove_option(flags["window"]);
    if (d != Detector::Rx) {
        input_file(app->add_option("--target", args->target,
                        "target spectrum: CSV (wavelength,value rows or one value per band) or JSON"));
        input_file(app->add_option("--target-mask", args->target_mask,
                        "target = mean spectrum of the mask's nonzero pixels (FILE or FILE.mat:VAR)"));
    }
    input_file(app->add_option("--stats-in", args->stats_in, "background statistics to use (.json or .npz from --stats-out)"));
    app->add_option("--stats-out", args->stats_out, "write the background statistics (.json or .npz)");
    add_common_flags(*app, args->common);
    add_output_flags(*app, args->common);
    actions[app] = [args] { classical_command(*args); };
}

}  // namespace

void add_detect_classical(CLI::App& detect, NestedActions& actions) {
    const std::string common_notes =
        "Statistics in float64 over the pixels whose kept bands are all finite: mean, covariance with divisor N\n"
        "(--ddof 1: N-1, as Spectral Python), inverted by a pseudo-inverse (eigenvalues <= rcond * max dropped);\n"
        "--loading adds loading * trace/B to the diagonal (off by default). Bands that are non-finite, all-zero or\n"
        "constant are dropped and reported unless --keep-all-bands.\n";
    add_one(detect, actions, Detector::Rx, "RX anomaly detector: (x-mu)' Sigma^+ (x-mu), global or two-window local",
            common_notes +
                "--window INNER,OUTER: local RX, statistics of the OUTER x OUTER window minus the INNER guard window,\n"
                "shifted at the borders as Spectral Python does; Cholesky per pixel (NaN where singular).\n"
                "Examples:\n  cubekit detect rx abu-airport-1.mat rx.npy --var data\n"
                "  cubekit detect rx scene.mat rx.png --var data --window 5,21");
    const std::string target_notes =
        "--target FILE: CSV or JSON spectrum, resampled to the cube's wavelengths (linear), or one value per band.\n"
        "--target-mask MASK: the mean spectrum of the mask's pixels (a MATLAB variable: FILE.mat:VAR).\n";
    add_one(detect, actions, Detector::Mf, "matched filter: (t-mu)' S^+ (x-mu) / (t-mu)' S^+ (t-mu)",
            common_notes + target_notes + "Example:\n  cubekit detect mf Sandiego.mat mf.npy --var data --target-mask Sandiego.mat:map");
    add_one(detect, actions, Detector::Ace, "ACE: ((t-mu)' S^+ (x-mu))^2 / ((t-mu)' S^+ (t-mu) (x-mu)' S^+ (x-mu)), in [0, 1]",
            common_notes + target_notes + "Example:\n  cubekit detect ace HYDICE.mat ace.npy --var data --target t.csv");
    add_one(detect, actions, Detector::Cem, "CEM: w'x, w = R^+ t / t' R^+ t, R the correlation matrix X'X/N",
            common_notes + target_notes + "Example:\n  cubekit detect cem scene.hdr cem.npy --target t.json");
    add_one(detect, actions, Detector::Sam, "spectral angle as its cosine t'x / (|t| |x|): higher = more target-like",
            target_notes + "Example:\n  cubekit detect sam scene.hdr sam.png --target t.csv");
}

}  // namespace cubekit::cli
