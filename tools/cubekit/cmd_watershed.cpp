// cubekit watershed | segment: the cellular-automaton watershed of a relief the user has, and the
// RCMG → watershed segmentation of a cube with per-region statistics (spec gradient-watershed.md
// part B; issue 16 items 1 and 2).
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "cubekit/watershed.hpp"
#include "option_flags.hpp"
#include "outputs.hpp"
#include "region_table.hpp"
#include "tile_flags.hpp"

namespace cubekit::cli {
namespace {

namespace fs = std::filesystem;

// ---- the flags of both commands, from the declarations ------------------------------------------

/// WatershedOptions' fields (segment: without volume, connectivity 4 or 8) and, for segment,
/// RcmgOptions' fields with the RCMG's connectivity spelt --rcmg-connectivity (issue 16: in
/// segment --connectivity sets both unless --rcmg-connectivity is given; 0 = "as --connectivity").
struct ChainFlags {
    explicit ChainFlags(bool chain) : segment(chain) { rcmg.connectivity = 0; }
    WatershedOptions watershed;
    RcmgOptions rcmg;
    bool segment;
};

template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, ChainFlags>
void visit_fields(O& f, V&& visit) {
    visit_fields(f.watershed, [&](auto& value, const Field& field) {
        Field d = field;
        if (field.name == "volume") {
            if (f.segment) return;
            d.doc = "IN's bands are the z-slices of a volume (a 3-D .npy is (D, H, W)); 6 or 26 neighbours, default 26";
        }
        if (field.name == "connectivity")
            d = f.segment ? Field{.name = "connectivity", .doc = "neighbours: 8 or 4, of the watershed and the RCMG window "
                                                                "(unless --rcmg-connectivity)", .one_of = {4, 8}}
                          : Field{.name = "connectivity", .doc = "neighbours: 4 or 8; with --volume 6 or 26 (default 26)",
                                  .one_of = {4, 6, 8, 26}};
        visit(value, d);
    });
    if (!f.segment) return;
    visit_fields(f.rcmg, [&](auto& value, const Field& field) {
        Field d = field;
        if (field.name == "connectivity")
            d = Field{.name = "rcmg_connectivity", .doc = "RCMG window: 8 (3x3 square) or 4 (cross); default: --connectivity",
                      .one_of = {4, 8}, .automatic = 0};
        visit(value, d);
    });
}

struct Args {
    explicit Args(bool chain) : flags(chain) {}
    CommonOptions common;
    ChainFlags flags;
    BoundFlags bound;
    TileFlags tiles;  // watershed only
    std::string input, output, markers, mask, png, boundary_out, gradient_out, regions_out;
};

// ---- inputs ---------------------------------------------------------------------------------------

/// The number of axes of a .npy file's array; 0 when `path` is no .npy (or its header says nothing).
int npy_ndim(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    char head[12] = {};
    if (!in.read(head, 10) || std::string(head + 1, 5) != "NUMPY") return 0;
    std::size_t length = std::uint8_t(head[8]) | std::size_t(std::uint8_t(head[9])) << 8;
    if (head[6] >= 2) {  // format 2.0 and 3.0: a 4-byte header length
        if (!in.read(head + 10, 2)) return 0;
        length |= std::size_t(std::uint8_t(head[10])) << 16 | std::size_t(std::uint8_t(head[11])) << 24;
    }
    std::string header(std::min<std::size_t>(length, 1 << 16), '\0');
    in.read(header.data(), std::streamsize(header.size()));
    const std::size_t open = header.find('(', header.find("'shape'")), close = header.find(')', open);
    if (header.find("'shape'") == std::string::npos || open == std::string::npos || close == std::string::npos) return 0;
    int axes = 0;
    bool digits = false;
    for (std::size_t i = open + 1; i < close; ++i) {
        if (std::isdigit(static_cast<unsigned char>(header[i])) && !digits) ++axes;
        digits = std::isdigit(static_cast<unsigned char>(header[i]));
    }
    return axes;
}

/// A (D, H, W) .npy array — read as H' = D, W' = H, B' = W — as the W×H×D volume it holds
/// (dense BSQ: bands = z-slices), whatever strides the reader gave it.
Cube npy_volume(const Cube& read) {
    const CubeView v = read.view();
    const Strides s = v.strides();
    return Cube::from_view(CubeView::host(v.data(), v.bands(), v.width(), v.height(), v.dtype(), {s.b, s.x, s.y}),
                           Layout::BSQ);
}

/// A W×H×D volume as a .npy file of shape (D, H, W): the cube whose (H', W', B') = (D, H, W).
Cube npy_volume_layout(const Cube& volume) {
    const Cube bsq = volume.layout() == Layout::BSQ ? Cube() : volume.to_layout(Layout::BSQ);
    const Cube& v = volume.layout() == Layout::BSQ ? volume : bsq;
    const std::int64_t W = v.width(), H = v.height();
    return Cube::from_view(CubeView::host(v.bytes(), v.height(), v.bands(), v.width(), v.dtype(), {W, W * H, 1}),
                           Layout::BIP);
}

/// A secondary input (cli_common.hpp: FILE or FILE.mat:VAR); with --volume a 3-D .npy is (D, H, W).
Cube read_secondary_map(const std::string& spec, const std::string& flag, bool volume) {
    Cube c = read_secondary(spec, flag);
    if (volume && npy_ndim(split_secondary(spec).path) == 3) return npy_volume(c);
    return c;
}

/// --markers: integer labels (> 0 = a seed); floats (MATLAB's doubles) only when every value is an
/// integer of the i32 range.
Cube read_markers(const std::string& spec, const CubeShape& relief, bool volume) {
    Cube m = read_secondary_map(spec, "--markers", volume);
    check_same_size(m, relief, "--markers", spec);
    if (!dtype_is_float(m.dtype())) return m;
    for (int b = 0; b < m.bands(); ++b)
        for (int y = 0; y < m.height(); ++y)
            for (int x = 0; x < m.width(); ++x) {
                const double v = m.value(x, y, b);
                if (!(v == std::floor(v) && std::abs(v) <= 2147483647.0))
                    throw InvalidInput("--markers " + spec + ": value " + number_text(v) + " at (x " + std::to_string(x) +
                                       ", y " + std::to_string(y) + (volume ? ", z " + std::to_string(b) : "") +
                                       "); expected integer labels (> 0 = a marker)");
            }
    return m.to_dtype(DType::I32);
}

/// --mask: nonzero (and not NaN) = inside, as u8 0/1.
Cube read_mask(const std::string& spec, const CubeShape& relief, bool volume) {
    const Cube m = read_secondary_map(spec, "--mask", volume);
    check_same_size(m, relief, "--mask", spec);
    Cube inside(m.width(), m.height(), m.bands(), DType::U8, Layout::BSQ);
    for (int b = 0; b < m.bands(); ++b)
        for (int y = 0; y < m.height(); ++y)
            for (int x = 0; x < m.width(); ++x) {
                const double v = m.value(x, y, b);
                inside.at<std::uint8_t>(x, y, b) = v != 0 && !std::isnan(v);
            }
    return inside;
}

/// IN of `watershed`: one band, or with --volume a W×H×D volume (--bands then picks z-slices).
Cube read_relief(const std::string& path, const CommonOptions& common, bool volume) {
    if (!volume || npy_ndim(path) != 3) return read_input(path, common).cube;
    CommonOptions every_band = common;
    every_band.bands.clear();
    Cube v = npy_volume(read_input(path, every_band).cube);
    if (common.bands.empty()) return v;
    return v.select_bands(parse_band_list(common.bands, v.bands(), "--bands"));
}

// ---- outputs --------------------------------------------------------------------------------------

/// The regions in their colours with the boundary map (watershed_boundary) drawn black.
Cube region_picture(const Cube& labels, const Cube& boundary) {
    Cube rgb(labels.width(), labels.height(), 3, DType::U8, Layout::BIP);
    std::uint8_t* out = rgb.data<std::uint8_t>();
    for (int y = 0; y < labels.height(); ++y)
        for (int x = 0; x < labels.width(); ++x) {
            if (boundary.at<std::uint8_t>(x, y, 0)) continue;
            const auto c = region_colour(labels.at<std::int32_t>(x, y, 0));
            std::copy(c.begin(), c.end(), out + 3 * (std::size_t(y) * std::size_t(labels.width()) + std::size_t(x)));
        }
    return rgb;
}

/// A W×H×D map as `path` holds it: .npy volumes (D, H, W), ENVI as it is.
void write_map(const Cube& map, const std::string& path, bool volume, const CommonOptions& common) {
    const bool npy = output_format(path) == FileFormat::Npy;
    if (volume && npy)
        write_cube(npy_volume_layout(map), path, common.write);
    else
        write_cube(map, path, common.write);
}

/// The metadata OUT carries: the input's georeference (ENVI and GeoTIFF keep it) and a description.
Metadata labels_metadata(const Args& a, const Metadata& source) {
    Metadata m = source.georeference();
    m.description = a.flags.segment ? "cubekit segment labels" : "cubekit watershed labels";
    return m;
}

/// OUT filled tile by tile (a tiled run of one relief: the labels are never held whole in memory).
std::optional<InPlaceResult> labels_in_place(const Args& a, const CubeShape& shape, const Metadata& source, bool volume) {
    std::optional<InPlaceResult> r;
    if (!volume && CubeFileWriter::streamable(a.output, a.common.write))
        r.emplace(std::vector{a.output}, CubeShape{shape.width, shape.height, 1, DType::I32}, labels_metadata(a, source),
                  a.common.write);
    return r;
}

/// The labels (OUT, unless `in_place` holds them: then put in place last), the boundary map and the
/// picture; every file in `written`. Returns the ms spent making the boundary map and the picture
/// (the "paint" step, outside "write").
double write_label_outputs(const Context& ctx, const Args& a, Cube& labels, const WatershedOptions& o,
                           const Metadata& source, OutputList& written, std::optional<InPlaceResult>& in_place) {
    labels.metadata() = labels_metadata(a, source);
    if (!in_place) {
        write_map(labels, a.output, o.volume, a.common);
        written.add(a.output, "labels", std::string(format_name(output_format(a.output))), "i32");
    }
    const auto finish = [&] {
        if (in_place) in_place->commit(written, {{"role", "labels"}});
    };
    if (a.boundary_out.empty() && a.png.empty()) return finish(), 0.0;
    if (a.boundary_out.empty() && a.png.empty()) return 0;
    const auto t0 = std::chrono::steady_clock::now();
    const Cube boundary = watershed_boundary(ctx, labels, o.connectivity, o.volume);
    const Cube picture = a.png.empty() ? Cube() : region_picture(labels, boundary);
    const double paint_ms = elapsed_ms(t0);
    if (!a.boundary_out.empty()) {
        const FileFormat f = output_format(a.boundary_out);
        if (f == FileFormat::Npy || f == FileFormat::Envi)
            write_map(boundary, a.boundary_out, o.volume, a.common);
        else
            write_cube(binary_map_for_file(boundary, a.boundary_out), a.boundary_out, a.common.write);
        written.add(a.boundary_out, "boundary", std::string(format_name(f)), "u8");
    }
    if (!a.png.empty()) {
        write_cube(picture, a.png, a.common.write);
        written.add(a.png, "picture", "png", "u8");
    }
    finish();
    return paint_ms;
}

/// Checks every output name of the run before any work: OUT (labels), the pictures, the maps, the table.
void check_output_names(const Args& a) {
    const FileFormat f = format_of("OUT", a.output);
    if (f != FileFormat::Npy && f != FileFormat::Envi)
        throw InvalidInput("OUT = " + a.output + ": the labels are i32; write .npy or ENVI (.hdr/.img), and the picture with --png");
    if (!a.png.empty() && format_of("--png", a.png) != FileFormat::Png)
        throw InvalidInput("--png = " + a.png + ": expected a .png file name");
    if (!a.boundary_out.empty()) format_of("--boundary-out", a.boundary_out);
    if (!a.gradient_out.empty()) format_of("--gradient-out", a.gradient_out);
    const std::string ext = fs::path(a.regions_out).extension().string();
    if (!a.regions_out.empty() && ext != ".csv" && ext != ".json")
        throw InvalidInput("--regions-out = " + a.regions_out + ": expected a .csv or .json file name");
    std::vector<std::string> paths{a.output};
    for (const std::string* p : {&a.png, &a.boundary_out, &a.gradient_out, &a.regions_out})
        if (!p->empty()) paths.push_back(*p);
    check_outputs(paths, a.flags.segment ? "segment" : "watershed");
}

/// A volume of more than one slice has no one picture: --png and a PNG/PNM --boundary-out are refused.
void check_pictures_of(const Args& a, const Cube& volume) {
    if (volume.bands() == 1) return;
    for (const auto& [flag, path] : {std::pair<std::string, std::string>{"--png", a.png}, {"--boundary-out", a.boundary_out}}) {
        if (path.empty()) continue;
        const FileFormat f = output_format(path);
        if (f == FileFormat::Png || f == FileFormat::Pnm)
            throw InvalidInput(flag + " = " + path + ": a volume of " + std::to_string(volume.bands()) +
                               " slices has no one picture (write the map as .npy or ENVI)");
    }
}

// ---- the commands ----------------------------------------------------------------------------------

/// Options as the run uses them; refuses connectivity and volume that do not go together.
WatershedOptions resolved(const Args& a) {
    WatershedOptions o = a.flags.watershed;
    if (o.volume && !a.bound.given("connectivity")) o.connectivity = 26;
    const bool three_d = o.connectivity == 6 || o.connectivity == 26;
    if (three_d != o.volume)
        throw InvalidInput("--connectivity = " + std::to_string(o.connectivity) + "; expected " +
                           (o.volume ? "6 or 26 with --volume" : "4 or 8 for an image (6 or 26 need --volume)"));
    return o;
}

/// The secondary inputs, read and checked against IN's shape (timed as "read").
struct Secondary {
    Cube markers, mask;
    CubeView markers_view, mask_view;
    WatershedInputs inputs() const {
        return {.markers = markers.empty() ? nullptr : &markers_view, .mask = mask.empty() ? nullptr : &mask_view};
    }
};

std::unique_ptr<Secondary> read_secondaries(const Args& a, const CubeShape& want, bool volume, Timings& timings) {
    auto s = std::make_unique<Secondary>();
    timings.time("read", [&] {
        if (!a.markers.empty()) s->markers = read_markers(a.markers, want, volume);
        if (!a.mask.empty()) s->mask = read_mask(a.mask, want, volume);
    });
    s->markers_view = s->markers.view();
    s->mask_view = s->mask.view();
    return s;
}

/// Writes the outputs: `write` adds each to the list and returns the ms it spent painting (the boundary
/// map and the picture), timed as "paint" and the rest as "write". A failure takes back what was written.
template <class Write>
OutputList write_timed(Timings& timings, Write&& write) {
    const auto t0 = std::chrono::steady_clock::now();
    OutputList written;
    double paint_ms = 0;
    try {
        paint_ms = write(written);
    } catch (...) {
        written.remove_all();
        throw;
    }
    if (paint_ms > 0) timings.add("paint", paint_ms);
    timings.add("write", elapsed_ms(t0) - paint_ms);
    return written;
}

/// The status line and the outputs on stderr, then the summary (--json).
void report(const CommonOptions& common, nlohmann::json& j, const Timings& timings, const std::string& line) {
    say(common, line);
    for (const auto& out : j["outputs"]) say(common, "  wrote " + out["path"].get<std::string>());
    emit_json(common, j, timings);
}

/// The summary's common part.
nlohmann::json run_json(const std::string& command, const Context& ctx, const nlohmann::json& choice, const Args& a,
                        const CubeShape& in, std::int64_t regions, const Cube& labels, const OutputList& written) {
    nlohmann::json j = summary(command, ctx, choice);
    j["input"] = {{"path", a.input}, {"shape", shape_json(in)}};
    j["markers"] = a.markers.empty() ? nlohmann::json() : nlohmann::json(a.markers);
    j["mask"] = a.mask.empty() ? nlohmann::json() : nlohmann::json(a.mask);
    j["regions"] = regions;
    const std::int32_t* l = labels.data<std::int32_t>();
    j["unlabelled_pixels"] = std::count(l, l + labels.num_elements(), 0);
    j["outputs"] = written.json();
    return j;
}

/// Why these options cannot run in tiles (they need the whole relief), or "" when they can.
std::string untileable(const Args& a, const WatershedOptions& o) {
    if (o.volume) return "--volume";
    if (o.levels > 0) return "--levels";
    if (o.h_min > 0) return "--h-min";
    if (o.min_area > 1) return "--min-area";
    if (!a.markers.empty()) return "--markers";
    return "";
}

/// The relief: read whole, or opened to be read by windows when the run takes tiles (tile flags given)
/// and its options allow them. Unlike rcmg, a large relief is not tiled unasked: the whole automaton
/// on the device is faster than the tiles (8 vs 32 ms for a 3000x1700 f32 relief on an H100, host in
/// and out; bench/results/2026-11-27-h100.md) and needs ~32 bytes of device memory per pixel.
struct Relief {
    std::optional<CubeFile> file;
    Cube cube;
    Context ctx;
    nlohmann::json choice;
    CubeShape shape() const { return file ? file->shape() : cube.shape(); }
    const Metadata& metadata() const { return file ? file->metadata() : cube.metadata(); }
};

Relief open_relief(const Args& a, const CommonOptions& common, const WatershedOptions& o, bool tiles_asked,
                   Timings& timings) {
    std::optional<CubeFile> file;
    if (tiles_asked && untileable(a, o).empty()) file = open_windowed(a.input, common, true, timings);
    if (file) {
        // Not a structured binding: clang cannot capture one in a lambda when OpenMP is on.
        auto work = context_for_work(common, "watershed", timings, estimate_watershed(file->shape()));
        return {std::move(file), Cube(), std::move(work.first), std::move(work.second)};
    }
    auto prepared = context_while_reading(
        common, "watershed", timings, a.input, [&] { return read_relief(a.input, common, o.volume); }, estimate_watershed);
    return {std::nullopt, std::move(prepared.input), std::move(prepared.ctx), std::move(prepared.backend_choice)};
}

/// The tile options when tile flags were given: bad flags, and options that need the whole relief or
/// cube, fail before the read; --devices implies the CUDA backend.
std::optional<TileOptions> tiles_asked(const Args& a, const WatershedOptions& o, CommonOptions& common) {
    if (!a.tiles.given()) return std::nullopt;
    const TileOptions tiles = tile_options(a.tiles);
    std::string flag = untileable(a, o);
    if (!flag.empty())
        throw InvalidInput(flag + " needs the whole " + (a.flags.segment ? "cube" : "relief") +
                           "; it cannot run in tiles (leave out --memory-limit, --device-memory-limit, --devices and --tile-size)");
    if (!a.tiles.devices.empty() && common.context.backend == Backend::Auto) common.context.backend = Backend::Cuda;
    return tiles;
}

/// Tiles for a relief the device cannot hold whole (~32 bytes a pixel, beyond the relief and the
/// labels): the run then succeeds in tiles instead of failing, with the same labels.
std::optional<TileOptions> tiles_when_too_large(const Args& a, const WatershedOptions& o, const Context& ctx,
                                                const CubeShape& shape) {
    if (!ctx.is_cuda() || o.volume || !untileable(a, o).empty()) return std::nullopt;
    const double need = double(shape.num_pixels()) * double(32 + 4 + dtype_size(shape.dtype)), free = double(ctx.device_free_bytes());
    if (need <= 0.8 * free) return std::nullopt;
    say(a.common, "watershed: the relief needs about " + std::to_string(std::llround(need / 1e6)) + " MB of device memory and " +
                      std::to_string(std::llround(free / 1e6)) + " MB are free: it runs in tiles (the same labels)");
    return TileOptions{};
}

void run_watershed(const Args& a) {
    CommonOptions common = a.common;
    const WatershedOptions o = resolved(a);
    std::optional<TileOptions> tiles = tiles_asked(a, o, common);
    check_output_names(a);
    Timings timings;
    Relief relief = open_relief(a, common, o, tiles.has_value(), timings);
    const Context& ctx = relief.ctx;
    const CubeShape shape = relief.shape();
    if (!o.volume && shape.bands != 1)
        throw InvalidInput("IN = " + a.input + ": " + std::to_string(shape.bands) +
                           " bands; the relief is one band (pick one with --bands B, or --volume: the bands are z-slices)");
    if (!relief.file) check_pictures_of(a, relief.cube);
    if (tiles) check_tile_devices(a.tiles, *tiles, ctx);
    const bool automatic = !tiles && (tiles = tiles_when_too_large(a, o, ctx, shape)).has_value();
    const std::unique_ptr<Secondary> secondary = read_secondaries(a, shape, o.volume, timings);
    const TransferTotals copies = ctx.transfer_totals();
    const bool tiled = tiles.has_value();
    WatershedResult r;
    std::optional<WatershedTiled> t;
    std::optional<InPlaceResult> in_place;
    if (tiled) in_place = labels_in_place(a, shape, relief.metadata(), o.volume);
    try {
        r = timings.time("watershed", [&] {
            if (!tiled) return watershed(ctx, relief.cube, o, secondary->inputs());
            WatershedResult out{in_place ? Cube::borrow(in_place->view())
                                         : Cube::uninitialized(shape.width, shape.height, 1, DType::I32), 0};
            const TileOptions options = tiles.value_or(TileOptions{});
            t = relief.file ? watershed_tiled(ctx, *relief.file, out.labels.mutable_view(), o, secondary->inputs(), options)
                            : watershed_tiled(ctx, relief.cube, out.labels.mutable_view(), o, secondary->inputs(), options);
            out.regions = t->regions;
            return out;
        });
    } catch (const InvalidInput& e) {
        if (std::string(e.what()).find("NaN") == std::string::npos) throw;
        throw InvalidInput("IN = " + a.input + ": " + e.what());
    }
    timings.split_transfers(ctx, copies, "watershed");

    const OutputList written = write_timed(
        timings, [&](OutputList& w) { return write_label_outputs(ctx, a, r.labels, o, relief.metadata(), w, in_place); });
    nlohmann::json j = run_json("watershed", ctx, relief.choice, a, shape, r.regions, r.labels, written);
    j["parameters"] = parameters_json(o);
    if (t) {
        j["tiled"] = tiled_json(t->run);
        j["tiled"]["rounds"] = t->rounds;
        j["tiled"]["automatic"] = automatic;  // no tile flag: the relief did not fit the device
        j["input"]["windowed"] = relief.file.has_value();
    }
    report(common, j, timings,
           "watershed: " + a.input + " (" + shape.describe() + ") on " + ctx.device_name() + ", " +
               std::to_string(o.connectivity) + "-connectivity: " + std::to_string(r.regions) + " regions" +
               (t ? ", in " + std::to_string(t->run.tiles) + " tiles (" + std::to_string(t->rounds) + " round(s))" : ""));
}

/// segment in tiles: the RCMG in tiles into host memory (the cube read by windows when `file` is
/// open), then the watershed of it in tiles, into `labels` (OUT filled in place) when given.
SegmentResult segment_in_tiles(const Context& ctx, const Cube& cube, const std::optional<CubeFile>& file,
                               const RcmgOptions& r, const WatershedOptions& o, const WatershedInputs& inputs,
                               TileOptions tiles, nlohmann::json& report, std::optional<InPlaceResult>& labels) {
    const CubeShape shape = file ? file->shape() : cube.shape();
    SegmentResult out{Cube::uninitialized(shape.width, shape.height, 1, r.out_type),
                      labels ? Cube::borrow(labels->view()) : Cube::uninitialized(shape.width, shape.height, 1, DType::I32), 0};
    report["rcmg"] = tiled_json(file ? rcmg_tiled(ctx, *file, out.gradient.mutable_view(), r, tiles)
                                     : rcmg_tiled(ctx, cube, out.gradient.mutable_view(), r, tiles));
    const WatershedTiled w = watershed_tiled(ctx, out.gradient, out.labels.mutable_view(), o, inputs, tiles);
    report["watershed"] = tiled_json(w.run);
    report["watershed"]["rounds"] = w.rounds;
    out.regions = w.regions;
    return out;
}

void run_segment(const Args& a) {
    CommonOptions common = a.common;
    const WatershedOptions o = a.flags.watershed;
    RcmgOptions rcmg_options = a.flags.rcmg;
    if (rcmg_options.connectivity == 0) rcmg_options.connectivity = o.connectivity;
    std::optional<TileOptions> tiles = tiles_asked(a, o, common);
    check_output_names(a);
    Timings timings;
    // In tiles an ENVI, .npy or GeoTIFF cube is read by windows (the RCMG's tiles); other formats whole.
    const std::optional<CubeFile> file = tiles ? open_windowed(a.input, common, true, timings) : std::nullopt;
    // Not a structured binding: clang cannot capture one in a lambda when OpenMP is on.
    auto prepared = context_for_input(common, "segment", timings, a.input, file, [&] { return read_input(a.input, common); },
                                      estimate_segment);
    Context& ctx = prepared.ctx;
    auto& in = prepared.input;
    nlohmann::json& choice = prepared.backend_choice;
    const Cube& cube = in.cube;
    const CubeShape shape = file ? file->shape() : cube.shape();
    check_rcmg_arguments(shape, rcmg_options);
    const std::unique_ptr<Secondary> secondary =
        read_secondaries(a, {shape.width, shape.height, 1, DType::U8}, false, timings);
    if (tiles) check_tile_devices(a.tiles, *tiles, ctx);
    const TransferTotals copies = ctx.transfer_totals();
    nlohmann::json tiled;
    std::optional<InPlaceResult> in_place;
    if (tiles) in_place = labels_in_place(a, shape, file ? file->metadata() : cube.metadata(), false);
    SegmentResult r = timings.time("segment", [&] {
        return tiles ? segment_in_tiles(ctx, cube, file, rcmg_options, o, secondary->inputs(), *tiles, tiled, in_place)
                     : segment(ctx, cube, rcmg_options, o, secondary->inputs());
    });
    timings.split_transfers(ctx, copies, "segment");
    std::vector<RegionStats> stats;
    // A cube read by windows gives its table a strip of rows at a time (the same numbers).
    if (!a.regions_out.empty())
        stats = timings.time("stats", [&] {
            const CubeView cube_view = cube.view(), gradient_view = r.gradient.view();
            if (file) return region_statistics(ctx, r.labels, *file, &gradient_view, tiles->memory_limit);
            return region_statistics(ctx, r.labels, &cube_view, &gradient_view);
        });
    std::vector<int> bands = in.bands;
    if (file) {
        bands.resize(std::size_t(shape.bands));
        std::iota(bands.begin(), bands.end(), 0);
    }

    const OutputList written = write_timed(timings, [&](OutputList& w) {
        const double paint_ms = write_label_outputs(ctx, a, r.labels, o, file ? file->metadata() : cube.metadata(), w, in_place);
        if (!a.gradient_out.empty()) write_float_image(r.gradient, a.gradient_out, "gradient", common.write, w);
        if (!a.regions_out.empty())
            write_region_table(a.regions_out, a.input, a.output, bands, file ? file->metadata() : cube.metadata(), stats, w);
        return paint_ms;
    });
    nlohmann::json j = run_json("segment", ctx, choice, a, shape, r.regions, r.labels, written);
    if (tiles) j["tiled"] = tiled, j["input"]["windowed"] = file.has_value();
    j["parameters"] = {{"rcmg", parameters_json(rcmg_options)}, {"watershed", parameters_json(o)}};
    j["implementation"] = {{"rcmg", std::string(rcmg_implementation(ctx, rcmg_options))}};
    report(common, j, timings,
           "segment: " + a.input + " (" + shape.describe() + ") on " + ctx.device_name() + ", RCMG " +
               std::to_string(rcmg_options.connectivity) + "-connectivity reject " + std::to_string(rcmg_options.reject) +
               ", watershed " + std::to_string(o.connectivity) + "-connectivity: " + std::to_string(r.regions) + " regions");
}

/// The flags both commands share: the options, the secondary inputs and the pictures.
void add_flags(CLI::App& app, Args& a) {
    a.bound = bind_flags(app, a.flags);
    input_file(app.add_option("--markers", a.markers,
                   "seed labels, IN's size: > 0 = a marker whose label its region keeps (minima imposition); "
                   "FILE or FILE.mat:VAR"));
    input_file(app.add_option("--mask", a.mask, "IN's size; 0 = outside (label 0, not part of the relief); FILE or FILE.mat:VAR"));
    app.add_option("--png", a.png, "the regions in distinct colours, boundaries black (.png)");
    app.add_option("--boundary-out", a.boundary_out,
                   "u8 boundary map: 1 where a right/lower (8-conn: any forward) neighbour has another label "
                   "(.npy 0/1, ENVI, .png 0/255)");
    add_common_flags(app, a.common);
    add_output_flags(app, a.common);
}

}  // namespace

Action add_watershed(CLI::App& root) {
    auto a = std::make_shared<Args>(false);
    CLI::App* app = root.add_subcommand("watershed", "Cellular-automaton watershed of a relief: a region per regional minimum");
    app->footer(
        "Every pixel flows down its steepest neighbour (the lowest; plateaus towards their nearest lower border) into a\n"
        "regional minimum; each minimum's basin is a region (spec gradient-watershed.md B3). No watershed-line pixels:\n"
        "every pixel gets a label, and CPU and GPU give the same labels. Heights are compared exactly in their type\n"
        "(u8 ... f64; NaN is refused). Over-segmentation of raw gradients: --levels N, --h-min H, --min-area A (regions\n"
        "below A pixels join the neighbour across their lowest pass) or --markers.\n"
        "Outputs: OUT = i32 labels, .npy (H, W) or ENVI: 1..R numbered by each minimum's first pixel in raster order,\n"
        "the marker labels with --markers, 0 outside --mask (and where no marker reaches). --volume: IN's bands are\n"
        "z-slices, a 3-D .npy is (D, H, W) and OUT .npy is (D, H, W) too.\n"
        "Examples:\n"
        "  cubekit rcmg data/samson/samson_1.img g.npy && cubekit watershed g.npy regions.npy --png regions.png\n"
        "  cubekit watershed g.npy regions.npy --levels 64 --connectivity 4 --json\n"
        "  cubekit watershed g.npy regions.npy --markers seeds.png --mask valid.png\n"
        "  cubekit watershed scene.mat labels.hdr --var gradient --markers scene.mat:seeds\n"
        "  cubekit watershed ct.npy ct_labels.npy --volume --connectivity 6\n"
        "  cubekit watershed big_gradient.hdr regions.npy --memory-limit 1G --json   # in tiles, the same labels\n"
        "Tiles: --memory-limit, --device-memory-limit, --devices or --tile-size run the relief in tiles with a 1-pixel\n"
        "halo; the tiles exchange plateau distances until they agree, then their labels are joined: the labels equal\n"
        "the whole run's. A raw file (ENVI, .npy, GeoTIFF) is then read by windows. Without these flags the relief runs\n"
        "whole (faster while it fits: ~32 bytes of device memory per pixel); on a GPU without room for it, in tiles\n"
        "(tiled.automatic in --json). --levels, --h-min, --min-area, --markers and --volume need the whole relief.");
    input_file(app->add_option("IN", a->input, "the relief: one band (any format cubekit reads), or a volume with --volume"))->required();
    app->add_option("OUT", a->output, "i32 labels: .npy or .hdr/.img (ENVI)")->required();
    add_flags(*app, *a);
    add_tile_flags(*app, a->tiles);
    return [a] { run_watershed(*a); };
}

Action add_segment(CLI::App& root) {
    auto a = std::make_shared<Args>(true);
    CLI::App* app = root.add_subcommand("segment", "Segmentation of a cube: its RCMG gradient, then the watershed of it");
    app->footer(
        "RCMG (as `cubekit rcmg`) then the watershed of the gradient (as `cubekit watershed`), with the gradient kept on\n"
        "the device between the two. --connectivity sets both the watershed's neighbours and the RCMG window unless\n"
        "--rcmg-connectivity is given.\n"
        "Outputs: OUT = i32 labels, .npy (H, W) or ENVI (georeference kept); --png the regions picture;\n"
        "--gradient-out the RCMG (.npy/ENVI float, .png scaled as rcmg's); --regions-out F.csv|F.json one row per region:\n"
        "label, area, inclusive box x0,y0,x1,y1, centroid_x/y, mean_gradient and the mean spectrum (CSV: one column per\n"
        "band, named by wavelength when the cube has them, else b<band>).\n"
        "Examples:\n"
        "  cubekit segment data/samson/samson_1.img regions.npy --png regions.png --regions-out regions.csv\n"
        "  cubekit segment scene.mat labels.hdr --var data --connectivity 4 --levels 32 --gradient-out g.png --json\n"
        "Tiles: --memory-limit, --device-memory-limit, --devices or --tile-size run the RCMG and the watershed in tiles\n"
        "(an ENVI, .npy or GeoTIFF cube read by windows, other formats whole; the labels and gradient equal the whole\n"
        "run's; --json adds tiled.rcmg and tiled.watershed). Not with --levels, --h-min, --min-area, --markers or\n"
        "--regions-out.");
    input_file(app->add_option("IN", a->input, "input cube (any format cubekit reads)"))->required();
    app->add_option("OUT", a->output, "i32 labels: .npy or .hdr/.img (ENVI)")->required();
    add_flags(*app, *a);
    add_tile_flags(*app, a->tiles);
    app->add_option("--gradient-out", a->gradient_out, "the RCMG gradient: .npy/ENVI float, or .png scaled for display");
    app->add_option("--regions-out", a->regions_out,
                    "per-region statistics: .csv or .json (area, box, centroid, mean spectrum, mean gradient)");
    return [a] { run_segment(*a); };
}

}  // namespace cubekit::cli
