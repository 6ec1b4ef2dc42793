// cubekit edges: entropy-threshold edge detection of an image or a cube, with noise removal and the
// seven fusion strategies (spec edges.md).
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/edges.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "option_flags.hpp"
#include "outputs.hpp"
#include "tile_flags.hpp"

namespace cubekit::cli {

namespace {

struct EdgesArgs {
    CommonOptions common;
    std::string input, output;
    EntropyEdgeOptions options;
    bool invert = false;
    std::string thresholds_out, per_band_out, vote_count_out;
    TileFlags tiles;
};

bool is_npy(const std::string& path) { return output_format(path) == FileFormat::Npy; }

nlohmann::json thresholds_json(const EdgeThresholds& t) {
    return {{"t1", t.t1}, {"t2", t.t2}, {"t3", t.t3}, {"levels", t.levels}, {"constant", t.constant}};
}

nlohmann::ordered_json thresholds_file(const EntropyEdgeResult& r, const std::vector<int>& band_index) {
    nlohmann::ordered_json j;
    j["bands"] = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < r.band_thresholds.size(); ++i) {
        nlohmann::ordered_json b = {{"band", band_index[i]}};
        b.update(thresholds_json(r.band_thresholds[i]));
        j["bands"].push_back(b);
    }
    for (const DerivedThresholds& d : r.derived_thresholds) {
        nlohmann::ordered_json list = nlohmann::ordered_json::array();
        for (std::size_t i = 0; i < d.thresholds.size(); ++i) {
            nlohmann::ordered_json e;
            if (d.name == "pca") e["component"] = i;
            e.update(thresholds_json(d.thresholds[i]));
            list.push_back(e);
        }
        j[d.name] = list;
    }
    return j;
}

std::string band_file(const std::string& dir, const char* stem, int index) {
    char name[64];
    std::snprintf(name, sizeof name, "%s_%03d.png", stem, index);
    return (std::filesystem::path(dir) / name).string();
}

/// Refuses what cannot work with this many bands and these outputs, before the work.
void check_edges_outputs(const EdgesArgs& a, const EntropyEdgeOptions& o, int bands) {
    const bool per_band = o.fusion == EdgeFusion::None && bands > 1;
    if (a.output.empty() && a.per_band_out.empty())
        throw InvalidInput("edges: no output: give OUT (.png or .npy) or --per-band-out DIR");
    if (!a.output.empty() && per_band && !is_npy(a.output))
        throw InvalidInput("edges: OUT = " + a.output + ": with --fusion none and " + std::to_string(bands) +
                           " bands there is one map per band; write OUT as .npy (H x W x B) or give --per-band-out DIR "
                           "(band_NNN.png) without OUT, or pick one band with --bands");
    if (!a.vote_count_out.empty() && !fusion_is_vote(o.fusion))
        throw InvalidInput("edges: --vote-count-out needs a vote fusion (vote-edges, vote-binary, pca-vote-edges, "
                           "pca-vote-binary); --fusion is " + std::string(fusion_name(o.fusion)));
    std::vector<std::string> paths;
    for (const std::string* p : {&a.output, &a.thresholds_out, &a.vote_count_out})
        if (!p->empty()) paths.push_back(*p);
    check_outputs(paths, "edges outputs");
    for (const std::string* p : {&a.output, &a.vote_count_out})
        if (!p->empty()) output_format(*p);  // a bad extension fails before the work
}

/// The vote count as its file holds it: .npy u16 counts, PNG 255·count/K rounded.
Cube vote_count_for_file(const EntropyEdgeResult& r, const EntropyEdgeOptions& o, int bands, const std::string& path) {
    Cube count = r.vote_count.clone();
    if (is_npy(path)) return count;
    const int K = fusion_uses_pca(o.fusion) ? r.pca_components_used : bands;
    Cube scaled(count.width(), count.height(), 1, DType::U8);
    for (std::size_t i = 0; i < count.num_elements(); ++i)
        scaled.data<std::uint8_t>()[i] = std::uint8_t((count.data<std::uint16_t>()[i] * 510 + K) / (2 * K));
    return scaled;
}

/// Writes every output asked for; a failure takes back what was written.
OutputList write_edges_outputs(const EdgesArgs& a, const EntropyEdgeOptions& o, const EntropyEdgeResult& r,
                               const std::vector<int>& band_index, const Metadata& georef, InPlaceResult* in_place) {
    // The maps lie on the input's map (ENVI map info, GeoTIFF georeference).
    const auto placed = [&](Cube c) {
        c.metadata() = georef;
        return c;
    };
    OutputList written;
    MadeFolders folders;
    try {
        if (!a.output.empty() && !in_place) {
            write_cube(placed(binary_map_for_file(r.edges, a.output, a.invert)), a.output, a.common.write);
            written.add(a.output, "edges", std::string(format_name(output_format(a.output))), "u8");
        }
        if (!a.per_band_out.empty()) {
            folders.create(a.per_band_out, "edges: --per-band-out");
            const Cube& maps = o.fusion == EdgeFusion::None ? r.edges : r.band_edges;
            const bool pca = fusion_uses_pca(o.fusion);
            for (int b = 0; b < maps.bands(); ++b) {
                const std::string path =
                    band_file(a.per_band_out, pca ? "pc" : "band", pca ? b : band_index[std::size_t(b)]);
                write_cube(placed(binary_map_for_file(maps.select_bands({b}), path, a.invert)), path, a.common.write);
                written.add(path, pca ? "component edges" : "band edges", "png", "u8");
            }
        }
        if (!a.thresholds_out.empty()) {
            write_text_file(a.thresholds_out, thresholds_file(r, band_index).dump(2) + "\n");
            written.add(a.thresholds_out, "thresholds", "json");
        }
        if (!a.vote_count_out.empty()) {
            const Cube count = placed(vote_count_for_file(r, o, int(band_index.size()), a.vote_count_out));
            write_cube(count, a.vote_count_out, a.common.write);
            written.add(a.vote_count_out, "vote count", std::string(format_name(output_format(a.vote_count_out))),
                        std::string(dtype_name(count.dtype())));
        }
        if (in_place) in_place->commit(written, {{"role", "edges"}});
    } catch (...) {
        written.remove_all();
        folders.remove_made();
        throw;
    }
    return written;
}

// Why this run cannot take the tiled path (empty: it can): the fusion or an output the tiles do not make.
std::string tiles_refusal(const EdgesArgs& a, const EntropyEdgeOptions& o, int bands) {
    if (!a.per_band_out.empty()) return "--per-band-out needs every band's whole map, which the tiled path does not hold";
    if (!a.vote_count_out.empty()) return "--vote-count-out is not written by the tiled path";
    return entropy_edges_tiled_refusal(o, bands);
}

// The detector in tiles: from the file by windows, or from the cube read whole; into `in_place` (the
// .npy OUT filled tile by tile) when given.
EntropyEdgeResult run_tiled(const Context& ctx, const std::optional<CubeFile>& file, const Cube& cube,
                            const EntropyEdgeOptions& o, const TileOptions& tiles, nlohmann::json& tiled_report,
                            InPlaceResult* in_place = nullptr) {
    const CubeShape shape = file ? file->shape() : cube.shape();
    EntropyEdgeResult r;
    if (in_place)
        r.edges = Cube::borrow(in_place->view());
    else
        r.edges = Cube(shape.width, shape.height, entropy_edges_bands(shape.bands, o).edges, DType::U8);
    const EntropyEdgeTiled t = file ? entropy_edges_tiled(ctx, *file, r.edges.mutable_view(), o, tiles)
                                    : entropy_edges_tiled(ctx, cube, r.edges.mutable_view(), o, tiles);
    static_cast<EntropyEdgeSummary&>(r) = t.summary;
    tiled_report = tiled_json(t.run);
    tiled_report["passes"] = t.passes;
    return r;
}

void run_edges(const EdgesArgs& a) {
    CommonOptions common = a.common;
    std::optional<TileOptions> tiles;
    if (a.tiles.given()) tiles = tile_options(a.tiles);  // a bad flag fails before the read
    if (!a.tiles.devices.empty() && common.context.backend == Backend::Auto) common.context.backend = Backend::Cuda;
    Timings timings;
    // A tiled run reads a raw file (ENVI, .npy, GeoTIFF) by windows: the scene never has to fit in memory.
    std::optional<CubeFile> file = open_windowed(a.input, common, tiles.has_value(), timings);
    std::optional<Prepared<Input>> prepared;
    if (file) {
        // Not a structured binding: clang cannot capture one in a lambda when OpenMP is on.
        auto work_context = context_for_work(common, "edges", timings, estimate_edges(file->shape()));
        prepared.emplace(Prepared<Input>{std::move(work_context.first), Input{}, std::move(work_context.second)});
        for (int b = 0; b < file->shape().bands; ++b) prepared->input.bands.push_back(b);
    } else {
        prepared.emplace(context_while_reading(
            common, "edges", timings, a.input, [&] { return read_input(a.input, common); }, estimate_edges));
    }
    Context& ctx = prepared->ctx;
    Input& in = prepared->input;
    nlohmann::json& choice = prepared->backend_choice;
    const CubeShape shape = file ? file->shape() : in.cube.shape();
    if (tiles) check_tile_devices(a.tiles, *tiles, ctx);

    EntropyEdgeOptions o = a.options;
    o.fusion = resolved_fusion(o.fusion, shape.bands);  // the fusion that runs, for the checks and the summary
    o.keep_band_edges = !a.per_band_out.empty() && o.fusion != EdgeFusion::None;
    check_edges_outputs(a, o, shape.bands);
    if (fusion_uses_pca(o.fusion) && o.pca_components > shape.bands)
        say(common, "edges: --pca-components " + std::to_string(o.pca_components) + " clamped to the " +
                        std::to_string(shape.bands) + " bands of the input");
    const std::string refusal = tiles_refusal(a, o, shape.bands);
    if (tiles && !refusal.empty())
        throw InvalidInput("edges: tiles were asked for (--memory-limit, --device-memory-limit, --devices or --tile-size), "
                           "but " + refusal);
    // Tiles only when asked for, or when the scene does not fit the device: the tiled path reads the
    // input two or three times (statistics, then maps), the whole path once (bench/results, 2026-11-26:
    // 2 GB i16 on an H100, whole 68.5 ms, tiled 190 ms pageable).
    bool tiled = tiles.has_value();
    if (file && !tiled)  // a large file without tile flags: read whole, as a scene that fits is fastest
        in.cube = timings.time("read", [&] { return read_input(a.input, common).cube; });
    const Metadata georef = file ? file->metadata().georeference() : in.cube.metadata().georeference();

    // A map read by windows lands tile by tile in a .npy OUT (which holds 0/1, as the map is computed;
    // other formats get 255 for an edge).
    std::optional<InPlaceResult> in_place;
    if (tiled && file && !a.output.empty() && output_format(a.output) == FileFormat::Npy &&
        CubeFileWriter::streamable(a.output, a.common.write))
        in_place.emplace(std::vector{a.output},
                         CubeShape{shape.width, shape.height, entropy_edges_bands(shape.bands, o).edges, DType::U8},
                         georef, a.common.write);
    const TransferTotals copies = ctx.transfer_totals();
    nlohmann::json tiled_report;
    const EntropyEdgeResult r = timings.time("edges", [&] {
        if (tiled) return run_tiled(ctx, file, in.cube, o, *tiles, tiled_report, in_place ? &*in_place : nullptr);
        try {
            return entropy_edges(ctx, in.cube, o);
        } catch (const OutOfMemory& e) {
            if (!ctx.is_cuda() || !refusal.empty()) throw;
            say(common, "edges: the scene does not fit the device (" + std::string(e.what()) + "); running it in tiles");
            tiled = true;
            return run_tiled(ctx, std::nullopt, in.cube, o, TileOptions{}, tiled_report);
        }
    });
    timings.split_transfers(ctx, copies, "edges");
    std::int64_t edge_pixels = 0;
    for (std::size_t i = 0; i < r.edges.num_elements(); ++i) edge_pixels += r.edges.data<std::uint8_t>()[i] != 0;
    const std::size_t edge_samples = r.edges.num_elements();
    const OutputList written = timings.time(
        "write", [&] { return write_edges_outputs(a, o, r, in.bands, georef, in_place ? &*in_place : nullptr); });
    nlohmann::json j = summary("edges", ctx, choice);
    j["input"] = {{"path", a.input}, {"shape", shape_json(shape)}, {"bands_used", in.bands}};
    if (file && tiles) j["input"]["windowed"] = true;
    j["parameters"] = parameters_json(o);
    if (tiled) j["tiled"] = tiled_report;
    if (fusion_is_vote(o.fusion)) j["votes_needed"] = r.votes_needed;
    if (fusion_uses_pca(o.fusion)) {
        j["pca_components_used"] = r.pca_components_used;
        j["explained_variance_ratio"] = r.explained_variance_ratio;
    }
    j["edge_pixels"] = edge_pixels;
    j["edge_fraction"] = edge_samples ? double(edge_pixels) / double(edge_samples) : 0.0;
    j["outputs"] = written.json();
    say(common, "edges: " + a.input + " (" + shape.describe() + ") on " + ctx.device_name() + ", fusion " +
                    std::string(fusion_name(o.fusion)) + ", " + std::to_string(edge_pixels) + " edge pixels");
    if (tiled)
        say(common, "  in " + std::to_string(tiled_report["tiles"].get<std::size_t>()) + " tiles of " +
                        std::to_string(tiled_report["tile_width"].get<int>()) + "x" +
                        std::to_string(tiled_report["tile_height"].get<int>()) + ", working memory " +
                        std::to_string(tiled_report["peak_bytes"].get<std::size_t>()) + " bytes");
    for (const auto& w : written.json()) say(common, "  wrote " + w["path"].get<std::string>());
    emit_json(common, j, timings);
}

}  // namespace

Action add_edges(CLI::App& root) {
    auto a = std::make_shared<EdgesArgs>();
    CLI::App* app = root.add_subcommand("edges", "Entropy-threshold edge detection (Shannon + Tsallis thresholds) of an image or a cube");
    app->footer(
        "Per band: 8-bit histogram; Shannon threshold T1 and Tsallis thresholds T2 (levels <= T1) and T3 (above);\n"
        "f = 1 where T2 <= v < T1 or v >= T3; a pixel is an edge when at most 6 of its 3x3 window share its f.\n"
        "Border pixels are never edges. Non-8-bit input is first scaled to 0..255 per band (min-max).\n"
        "Fusions of several bands into one map: mean | pca | vote-edges (default for >1 band) | vote-binary |\n"
        "threshold-mean | pca-vote-edges | pca-vote-binary; a vote sets a pixel when more than X % of the maps do.\n"
        "Outputs: PNG (edge = 255, else 0; --invert for black edges on white) or .npy (u8 0/1; H x W x B for\n"
        "--fusion none with several bands); --per-band-out DIR writes band_NNN.png (pc_NNN.png for PCA fusions).\n"
        "Examples:\n"
        "  cubekit edges photo.png edges.png --min-component 8\n"
        "  cubekit edges scene.hdr fused.png --fusion vote-edges --vote-percent 15 --min-component 3 --thresholds-out t.json\n"
        "  cubekit edges scene.hdr maps.npy --fusion none --bands 0-9\n"
        "  cubekit edges flight.hdr fused.png --memory-limit 1G   # in tiles, read by windows\n"
        "Tiles: --memory-limit, --device-memory-limit, --devices or --tile-size run the scene in tiles: the scene's\n"
        "ranges and histograms are gathered over its tiles, then the maps computed with a 1-pixel halo (the result\n"
        "is bit-identical); without tile flags a scene that does not fit the GPU runs in tiles. The tiles make the\n"
        "fused or per-band map and the thresholds (not the PCA fusions, --per-band-out, --vote-count-out,\n"
        "--filter-each-band).");
    input_file(app->add_option("IN", a->input, "input image or cube (any format cubekit reads)"))->required();
    app->add_option("OUT", a->output, "edge map: .png or .npy (may be omitted with --per-band-out)");
    bind_flags(*app, a->options);
    app->add_option("--thresholds-out", a->thresholds_out, "JSON file of every band's T1, T2, T3 (and of derived images)");
    app->add_option("--per-band-out", a->per_band_out, "folder for one PNG edge map per band");
    app->add_option("--vote-count-out", a->vote_count_out, "vote fusions: the vote count per pixel (.npy u16, or .png scaled 255*count/K)");
    app->add_flag("--invert", a->invert, "PNG: black edges on white (El-Sayed's look)");
    add_common_flags(*app, a->common);
    add_output_flags(*app, a->common);
    add_tile_flags(*app, a->tiles);
    return [a] { run_edges(*a); };
}

}  // namespace cubekit::cli
