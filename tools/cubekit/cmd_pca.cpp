// cubekit pca: principal components of a cube (spec edges.md §3.9 "E5"): the component cube and a
// JSON sidecar with the model (mean, eigenvalues, explained variance, eigenvectors).
#include <algorithm>
#include <filesystem>
#include <memory>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "cubekit/linalg.hpp"
#include "option_flags.hpp"
#include "outputs.hpp"
#include "tile_flags.hpp"

namespace cubekit::cli {
namespace {

/// The model as the sidecar holds it (components: one array of B entries per component).
nlohmann::ordered_json model_json(const PcaModel& m, const std::string& input) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (int j = 0; j < m.num_components(); ++j)
        rows.push_back(std::vector<double>(m.components.begin() + std::ptrdiff_t(j) * m.bands,
                                           m.components.begin() + std::ptrdiff_t(j + 1) * m.bands));
    nlohmann::ordered_json j;
    j["input"] = input;
    j["bands"] = m.bands;
    j["samples"] = m.samples;
    j["num_components"] = m.num_components();
    j["mean"] = m.mean;
    j["eigenvalues"] = m.eigenvalues;
    j["explained_variance_ratio"] = m.explained_variance_ratio;
    j["components"] = rows;
    return j;
}

struct PcaArgs {
    CommonOptions common;
    std::string input, output, model_out;
    PcaOptions options;
    TileFlags tiles;
};

void pca_command(const PcaArgs& a) {
    CommonOptions common = a.common;
    std::optional<TileOptions> tiles;
    if (a.tiles.given()) tiles = tile_options(a.tiles);  // a bad flag fails before the read
    if (!a.tiles.devices.empty() && common.context.backend == Backend::Auto) common.context.backend = Backend::Cuda;
    // Refuse bad output names before any work.
    const FileFormat format = output_format(a.output);
    if (format != FileFormat::Npy && format != FileFormat::Envi)
        throw InvalidInput("pca: OUT = " + a.output + ": the components are float64; use .npy or ENVI (.hdr/.img)");
    const std::string model_path = a.model_out.empty() ? beside(a.output, ".pca.json") : a.model_out;
    check_outputs({a.output, model_path}, "pca");
    Timings timings;
    // A tiled run reads a raw file (ENVI, .npy, GeoTIFF) by windows: the scene never has to fit in memory.
    std::optional<CubeFile> file = open_windowed(a.input, common, tiles.has_value(), timings);
    std::optional<Prepared<Cube>> prepared;
    if (file) {
        // Not a structured binding: clang cannot capture one in a lambda when OpenMP is on.
        auto work_context = context_for_work(common, "pca", timings, estimate_pca(file->shape()));
        prepared.emplace(Prepared<Cube>{std::move(work_context.first), Cube(), std::move(work_context.second)});
    } else {
        prepared.emplace(context_while_reading(
            common, "pca", timings, a.input, [&] { return read_input(a.input, common).cube; }, estimate_pca));
    }
    Context& ctx = prepared->ctx;
    const Cube& cube = prepared->input;
    nlohmann::json& choice = prepared->backend_choice;
    const CubeShape shape = file ? file->shape() : cube.shape();
    if (tiles) check_tile_devices(a.tiles, *tiles, ctx);
    // The CLI clamps K to the bands (the library refuses K > B, as scikit-learn does).
    PcaOptions options = a.options;
    options.components = std::min(a.options.components, shape.bands);
    if (options.components < a.options.components)
        say(common, "pca: note: --components " + std::to_string(a.options.components) + " exceeds the " +
                        std::to_string(shape.bands) + " bands; using " + std::to_string(options.components));

    const TransferTotals copies = ctx.transfer_totals();
    const bool tiled = file || use_tiles(tiles, ctx, shape.num_bytes());
    nlohmann::json tiled_report;
    const Metadata georef = file ? file->metadata().georeference() : cube.metadata().georeference();
    // In tiles the scores land in OUT (.npy, ENVI or GeoTIFF) tile by tile: they are never held whole.
    std::optional<InPlaceResult> in_place;
    if (tiled && CubeFileWriter::streamable(a.output))
        in_place.emplace(std::vector{a.output}, CubeShape{shape.width, shape.height, options.components, DType::F64},
                         georef, WriteOptions{});
    PcaResult r = timings.time("pca", [&] {
        if (!tiled) return pca(ctx, cube, options);
        PcaResult t{{}, in_place ? Cube::borrow(in_place->view())
                                 : Cube(shape.width, shape.height, options.components, DType::F64)};
        const PcaTiled run = file ? pca_tiled(ctx, *file, t.scores.mutable_view(), options, tiles.value_or(TileOptions{}))
                                  : pca_tiled(ctx, cube, t.scores.mutable_view(), options, tiles.value_or(TileOptions{}));
        t.model = run.model;
        tiled_report = tiled_json(run.run);
        tiled_report["passes"] = run.passes;
        return t;
    });
    timings.split_transfers(ctx, copies, "pca");
    // Views carry no metadata: the component cube keeps the scene's georeferencing here.
    r.scores.metadata() = georef;

    OutputList outputs;
    timings.time("write", [&] {
        try {
            if (!in_place) {
                write_cube(r.scores, a.output);
                outputs.add(a.output, "components", std::string(format_name(format)), "f64");
            }
            write_text_file(model_path, model_json(r.model, a.input).dump(2) + "\n");
            outputs.add(model_path, "model", "json");
            if (in_place) in_place->commit(outputs, {{"role", "components"}});
        } catch (...) {
            outputs.remove_all();  // nothing half-written: a failed model file takes the cube back
            throw;
        }
    });

    say(common, "pca: " + a.input + " (" + shape.describe() + ") on " + ctx.device_name() + ", " +
                    std::to_string(r.model.samples) + " pixels used, " + std::to_string(options.components) +
                    " components, explained variance of PC1 " + std::to_string(r.model.explained_variance_ratio.front()));
    for (const auto& o : outputs.json()) say(common, "  wrote " + o["path"].get<std::string>());
    nlohmann::json j = summary("pca", ctx, choice);
    j["input"] = {{"path", a.input}, {"shape", shape_json(shape)}};
    if (file) j["input"]["windowed"] = true;
    if (tiled) j["tiled"] = tiled_report;
    j["parameters"] = parameters_json(options);
    j["parameters"]["components_requested"] = a.options.components;
    j["model"] = {{"bands", r.model.bands},
                  {"samples", r.model.samples},
                  {"eigenvalues", r.model.eigenvalues},
                  {"explained_variance_ratio", r.model.explained_variance_ratio}};
    j["explained_variance_ratio"] = r.model.explained_variance_ratio;
    j["outputs"] = outputs.json();
    emit_json(common, j, timings);
}

}  // namespace

Action add_pca(CLI::App& root) {
    auto args = std::make_shared<PcaArgs>();
    CLI::App* app = root.add_subcommand("pca", "Principal components of a cube: component images and the model");
    app->footer(
        "Pixels are samples, bands are variables; pixels with a non-finite band are left out of the fit and get\n"
        "NaN scores. Covariance C = Xc^T Xc / (P-1) from exact integer sums, one symmetric eigensolve, eigenvalues\n"
        "descending; each eigenvector is signed so that its entries sum to >= 0. Component j of a pixel is\n"
        "sum_b (x_b - mean_b) * v_j[b] in float64. CPU and CUDA results are bit-identical.\n"
        "OUT: the component cube, float64, from its extension: .npy (H, W, K) or ENVI (.hdr/.img).\n"
        "The model goes to <OUT without extension>.pca.json (or --model-out): bands, samples, mean, eigenvalues,\n"
        "explained_variance_ratio, components (K rows of B).\n"
        "Examples:\n"
        "  cubekit pca data/samson/samson_1.img pcs.npy                 # 3 components, pcs.pca.json\n"
        "  cubekit pca scene.mat pcs.hdr --var data --components 8 --model-out model.json --json\n"
        "  cubekit pca flight.hdr pcs.npy --memory-limit 2G   # in tiles, read by windows\n"
        "Tiles: --memory-limit, --device-memory-limit, --devices or --tile-size run the scene in tiles: the exact\n"
        "sums are gathered over the tiles (float input: a scan of the pixels used first), then the scores in tiles\n"
        "(bit-identical); on a GPU an input of 64 MiB or more is streamed in tiles.");
    input_file(app->add_option("IN", args->input, "input cube (any format cubekit reads)"))->required();
    app->add_option("OUT", args->output, "component cube: .npy or ENVI .hdr/.img (float64); written atomically")
        ->required();
    bind_flags(*app, args->options)["components"]->description("components K (clamped to the number of bands)");
    app->add_option("--model-out", args->model_out, "model JSON (default: <OUT without extension>.pca.json)");
    add_common_flags(*app, args->common);
    add_tile_flags(*app, args->tiles);
    return [args] { pca_command(*args); };
}

}  // namespace cubekit::cli
