// cubekit zernike: Zernike moments of every band of an image, a cube, or a batch of same-size
// images (a folder or a list of files) as a CSV or JSON table; optionally the reconstruction from a
// whole set with its error (spec zernike.md §2, §3.12).
#include <algorithm>
#include <climits>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <set>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "cubekit/zernike.hpp"
#include "option_flags.hpp"
#include "outputs.hpp"
#include "tile_flags.hpp"
#include "zernike_table.hpp"

namespace cubekit::cli {

namespace {

namespace fs = std::filesystem;

struct ZernikeArgs {
    CommonOptions common;
    std::vector<std::string> inputs;
    int max_order = 20, order = 0;
    std::string moment;
    CLI::Option *max_order_opt = nullptr, *order_opt = nullptr, *moment_opt = nullptr;
    ZernikeOptions options;
    BoundFlags bound;  // the flags of `options`
    std::string output, reconstruct, reconstruct_image;
    int reconstruct_band = -1;
    TileFlags tiles;
};

std::string lower(std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

/// "N,M" as a moment index; false when it is not exactly two integers.
bool parse_moment(const std::string& text, ZernikeIndex& z) {
    const std::size_t comma = text.find(',');
    long long n = 0, m = 0;
    if (comma == std::string::npos || !detail::parse_integer(text.substr(0, comma), n) ||
        !detail::parse_integer(text.substr(comma + 1), m) || n < INT_MIN || n > INT_MAX || m < INT_MIN || m > INT_MAX)
        return false;
    z = {int(n), int(m)};
    return true;
}

/// The options as given; the disk flags checked together (centre and radius belong to a custom disk).
ZernikeOptions checked_options(const ZernikeArgs& a) {
    const ZernikeOptions& o = a.options;
    const bool custom = o.mapping == ZernikeMapping::Custom, center_given = a.bound.given("center");
    if (custom && (!center_given || o.radius <= 0.0))
        throw InvalidInput("--mapping custom needs --center CX,CY and --radius R > 0 (pixel units; got " +
                           (center_given ? "--center " + value_text(o.center) : std::string("no --center")) +
                           ", --radius " + std::to_string(o.radius) + ")");
    if (!custom && (center_given || o.radius != 0.0))
        throw InvalidInput("--center and --radius need --mapping custom (--mapping is " +
                           std::string(enum_name(o.mapping)) + ")");
    return o;
}

// ---- inputs -----------------------------------------------------------------------------------------

/// Extensions of the formats cubekit reads; an ENVI data file is one with a header beside it.
bool is_image_file(const fs::path& p) {
    static const std::set<std::string> exts = {".png", ".pgm", ".ppm", ".pnm", ".jpg", ".jpeg",
                                               ".npy", ".mat", ".tif", ".tiff"};
    const std::string ext = lower(p.extension().string());
    if (ext == ".hdr" || p.filename().string().front() == '.') return false;
    if (exts.count(ext)) return true;
    std::error_code ec;
    fs::path replaced = p;
    replaced.replace_extension(".hdr");
    return fs::is_regular_file(replaced, ec) || fs::is_regular_file(p.string() + ".hdr", ec);
}

/// The files of IN: a folder gives its image files sorted by name.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs, bool& batch) {
    std::vector<std::string> files;
    batch = inputs.size() > 1;
    for (const std::string& in : inputs) {
        std::error_code ec;
        if (!fs::is_directory(in, ec)) {
            files.push_back(in);
            continue;
        }
        batch = true;
        std::vector<fs::path> found;
        for (fs::directory_iterator it(in, ec), end; !ec && it != end; it.increment(ec))
            if (it->is_regular_file(ec) && is_image_file(it->path())) found.push_back(it->path());
        if (ec) throw IoError("IN " + in + ": cannot list the folder: " + ec.message());
        std::sort(found.begin(), found.end(), [](const fs::path& x, const fs::path& y) { return x.filename() < y.filename(); });
        if (found.empty())
            throw InvalidInput("IN " + in + ": the folder holds no image file (.png, .pgm, .ppm, .pnm, .jpg, .npy, "
                               ".mat, .tif, or ENVI data with a .hdr beside it)");
        for (const fs::path& p : found) files.push_back(p.string());
    }
    return files;
}

/// The `image` column: the file names, or their paths when two folders hold the same name; none for
/// a single input.
void name_sources(ZernikeTable& t, bool unique) {
    if (!unique)
        for (ZernikeSource& s : t.sources) s.name = s.path;
    if (!t.batch) t.sources.front().name.clear();
}

/// The inputs as a stack read a group at a time (tiles): the files' headers now (PNG and JPEG are
/// decoded to learn their shape), each file read whole again when a group needs its images, in the
/// type read_batch would stack them in.
ImageStack stack_of_files(const ZernikeArgs& a, ZernikeTable& t) {
    const std::vector<std::string> files = expand_inputs(a.inputs, t.batch);
    std::set<std::string> names;
    bool unique = true;
    auto first = std::make_shared<std::vector<int>>();  // the stack index of each file's first image
    ImageStack stack;
    for (const std::string& file : files) {
        const CubeFile f(file, a.common.read);
        const CubeShape& s = f.shape();
        std::vector<int> bands = a.common.bands.empty() ? std::vector<int>{} : parse_band_list(a.common.bands, s.bands, "bands");
        if (bands.empty())
            for (int b = 0; b < s.bands; ++b) bands.push_back(b);
        if (first->empty()) stack.width = s.width, stack.height = s.height, stack.dtype = s.dtype;
        else if (s.width != stack.width || s.height != stack.height)
            throw InvalidInput("IN " + file + " is " + std::to_string(s.width) + "x" + std::to_string(s.height) + " but " +
                               t.sources.front().path + " is " + std::to_string(stack.width) + "x" +
                               std::to_string(stack.height) + "; every image of a batch must have the same width and height");
        if (s.dtype != stack.dtype) stack.dtype = DType::F64;
        first->push_back(stack.images);
        stack.images += int(bands.size());
        unique = names.insert(fs::path(file).filename().string()).second && unique;
        t.sources.push_back({fs::path(file).filename().string(), file, std::move(bands)});
    }
    name_sources(t, unique);
    t.dtype = std::string(dtype_name(stack.dtype));
    stack.read = [files, first, common = a.common, dtype = stack.dtype, W = stack.width, H = stack.height](
                     int from, int count, const MutableCubeView& dst) {
        std::size_t at = std::size_t(std::upper_bound(first->begin(), first->end(), from) - first->begin()) - 1;
        const std::size_t plane = std::size_t(W) * std::size_t(H) * dtype_size(dtype);
        for (int done = 0; done < count; ++at) {
            const int skip = from + done - (*first)[at];
            std::byte* into = dst.data() + std::size_t(done) * plane;
            int n = 0;
            if (common.bands.empty()) {  // a band range: only those bands are read (CubeFile::read_bands)
                const CubeFile f(files[at], common.read);
                n = std::min(f.shape().bands - skip, count - done);
                const MutableCubeView here = MutableCubeView::host(into, W, H, n, dtype, dense_strides(W, H, n, Layout::BSQ));
                if (f.shape().dtype == dtype) {
                    f.read_bands(skip, n, here);
                } else {  // a batch of mixed types is stacked in f64
                    Cube part = Cube::uninitialized(W, H, n, f.shape().dtype, Layout::BSQ);
                    f.read_bands(skip, n, part.mutable_view());
                    std::memcpy(into, part.to_dtype(dtype).bytes(), std::size_t(n) * plane);
                }
            } else {
                const Cube images = read_input(files[at], common).cube.to_dtype(dtype).to_layout(Layout::BSQ);
                n = std::min(images.bands() - skip, count - done);
                std::memcpy(into, images.bytes() + std::size_t(skip) * plane, std::size_t(n) * plane);
            }
            done += n;
        }
    };
    return stack;
}

/// Reads the inputs into one BSQ cube (a batch stacked band after band, in a common element type:
/// the files' own when they agree, else f64) and the table's sources.
Cube read_batch(const ZernikeArgs& a, ZernikeTable& t) {
    const std::vector<std::string> files = expand_inputs(a.inputs, t.batch);
    std::vector<Cube> cubes;
    std::set<std::string> names;
    bool unique = true;
    for (const std::string& file : files) {
        Input in = read_input(file, a.common);
        Cube c = std::move(in.cube);
        ZernikeSource s{fs::path(file).filename().string(), file, std::move(in.bands)};
        if (!cubes.empty() && (c.width() != cubes.front().width() || c.height() != cubes.front().height()))
            throw InvalidInput("IN " + file + " is " + std::to_string(c.width()) + "x" + std::to_string(c.height()) +
                               " but " + t.sources.front().path + " is " + std::to_string(cubes.front().width()) + "x" +
                               std::to_string(cubes.front().height()) +
                               "; every image of a batch must have the same width and height");
        unique = names.insert(s.name).second && unique;
        t.sources.push_back(std::move(s));
        cubes.push_back(std::move(c));
    }
    name_sources(t, unique);
    if (!t.batch) {
        t.dtype = std::string(dtype_name(cubes.front().dtype()));
        return std::move(cubes.front());
    }
    DType dtype = cubes.front().dtype();
    int bands = 0;
    for (const Cube& c : cubes) {
        if (c.dtype() != dtype) dtype = DType::F64;
        bands += c.bands();
    }
    t.dtype = std::string(dtype_name(dtype));
    Cube stacked(cubes.front().width(), cubes.front().height(), bands, dtype, Layout::BSQ);
    std::size_t at = 0;
    for (Cube& c : cubes) {
        const Cube bsq = (c.dtype() == dtype ? c.to_layout(Layout::BSQ) : c.to_dtype(dtype).to_layout(Layout::BSQ));
        std::memcpy(stacked.bytes() + at, bsq.bytes(), bsq.num_bytes());
        at += bsq.num_bytes();
        c = Cube();
    }
    return stacked;
}

/// The stacked band --reconstruct-image / --reconstruct-band pick (default: the first band).
int reconstruct_target(const ZernikeArgs& a, const ZernikeTable& t) {
    int source = 0;
    if (!a.reconstruct_image.empty()) {
        if (!t.batch) throw InvalidInput("--reconstruct-image " + a.reconstruct_image + ": IN is one file, not a batch");
        source = -1;
        for (std::size_t i = 0; i < t.sources.size(); ++i)
            if (t.sources[i].name == a.reconstruct_image) source = int(i);
        if (source < 0)
            throw InvalidInput("--reconstruct-image " + a.reconstruct_image + ": no such image in the batch (first: " +
                               t.sources.front().name + ")");
    }
    int s = 0;
    for (int i = 0; i < source; ++i) s += int(t.sources[std::size_t(i)].bands.size());
    const std::vector<int>& bands = t.sources[std::size_t(source)].bands;
    if (a.reconstruct_band < 0) return s;
    const auto it = std::find(bands.begin(), bands.end(), a.reconstruct_band);
    if (it == bands.end())
        throw InvalidInput("--reconstruct-band " + std::to_string(a.reconstruct_band) +
                           ": not a band of the input used here (" + std::to_string(bands.size()) + " bands, first " +
                           std::to_string(bands.front()) + ")");
    return s + int(it - bands.begin());
}

std::string band_label(const ZernikeTable& t, int s) {
    const auto [source, band] = t.origin(s);
    return (t.batch ? "image " + t.sources[std::size_t(source)].name + " " : std::string()) + "band " + std::to_string(band);
}

// ---- the command ------------------------------------------------------------------------------------

/// What `cubekit zernike` computes: set, order or moment (refused when more than one is given).
std::string zernike_mode(const ZernikeArgs& a, ZernikeIndex& single) {
    std::vector<std::string> modes;
    for (CLI::Option* o : {a.max_order_opt, a.order_opt, a.moment_opt})
        if (o->count() > 0) modes.push_back(o->get_name() + " " + o->as<std::string>());
    if (modes.size() > 1)
        throw InvalidInput("zernike: " + modes[0] + " and " + modes[1] +
                           " exclude each other; give one of --max-order N (whole set), --order N, --moment N,M");
    const std::string mode = a.order_opt->count() ? "order" : a.moment_opt->count() ? "moment" : "set";
    if (mode == "moment") {
        if (!parse_moment(a.moment, single))
            throw InvalidInput("--moment = '" + a.moment + "': expected N,M (e.g. 4,2)");
        if (single.n < 0 || single.m < 0 || single.m > single.n || (single.n - single.m) % 2 != 0)
            throw InvalidInput("--moment = " + a.moment + ": A(" + std::to_string(single.n) + "," +
                               std::to_string(single.m) + ") does not exist; expected 0 <= M <= N with N - M even");
    }
    if (mode == "set" && a.max_order < 0)
        throw InvalidInput("--max-order = " + std::to_string(a.max_order) + ": expected an order >= 0");
    if (mode == "order" && a.order < 0)
        throw InvalidInput("--order = " + std::to_string(a.order) + ": expected an order >= 0");
    return mode;
}

/// Refuses output names and reconstruction flags that cannot work, before any work.
void check_zernike_outputs(const ZernikeArgs& a, const std::string& mode) {
    const std::string oext = lower(fs::path(a.output).extension().string());
    if (!a.output.empty() && oext != ".csv" && oext != ".json")
        throw InvalidInput("-o " + a.output + ": extension '" + oext + "'; expected .csv or .json");
    if (!a.reconstruct.empty()) {
        if (mode != "set")
            throw InvalidInput("--reconstruct needs a whole set (--max-order N): the reconstruction sums every A(n,m) "
                               "with n <= N, and --" + mode + " computes only " +
                               (mode == "order" ? "one order" : "one moment"));
        check_image_output(a.reconstruct, "--reconstruct");
    } else if (a.reconstruct_band >= 0 || !a.reconstruct_image.empty()) {
        throw InvalidInput("--reconstruct-band and --reconstruct-image need --reconstruct OUT.png|OUT.npy");
    }
    std::vector<std::string> outs;
    for (const std::string* p : {&a.output, &a.reconstruct})
        if (!p->empty()) outs.push_back(*p);
    check_outputs(outs, "zernike outputs");
}

/// One run: the table, the input, the reconstruction and the timings.
struct ZernikeRun {
    ZernikeTable t;
    Cube cube;        ///< the stacked images (empty in tiles)
    CubeShape shape;  ///< the stack's: width × height × images
    ZernikeIndex single;
    Cube rebuilt;
    std::vector<double> errors;  ///< per band, with --reconstruct
    int target = 0;              ///< the stacked band the PNG shows
    PngScale scale;
    double zernike_ms = 0, reconstruct_ms = 0, write_ms = 0;
};

void compute_moments(const Context& ctx, const ZernikeArgs& a, const ZernikeOptions& options, ZernikeRun& run) {
    const std::string& mode = run.t.mode;
    auto t0 = std::chrono::steady_clock::now();
    if (mode == "set") run.t.moments = zernike_set(ctx, run.cube, a.max_order, options);
    else if (mode == "order") run.t.moments = zernike_order(ctx, run.cube, a.order, options);
    else run.t.moments = zernike_moment(ctx, run.cube, run.single.n, run.single.m, options);
    run.zernike_ms = elapsed_ms(t0);
    if (!a.reconstruct.empty()) {
        t0 = std::chrono::steady_clock::now();
        run.rebuilt = zernike_reconstruct(ctx, run.t.moments);
        run.errors = zernike_reconstruction_error(run.cube, run.rebuilt, run.t.moments.disk);
        run.reconstruct_ms = elapsed_ms(t0);
    }
}

OutputList write_zernike_outputs(const ZernikeArgs& a, ZernikeRun& run) {
    const auto t0 = std::chrono::steady_clock::now();
    OutputList written;
    try {
        if (!a.output.empty()) {
            const std::string oext = lower(fs::path(a.output).extension().string());
            write_text_file(a.output, oext == ".csv" ? zernike_csv(run.t) : readable_json(zernike_json_file(run.t)));
            written.add(a.output, "moments", oext.substr(1));
        }
        if (!a.reconstruct.empty()) {
            const int bits = run.cube.dtype() == DType::U8 ? 8 : 16;
            run.scale = write_reconstruction(run.rebuilt, run.target, run.t.moments.disk, bits, a.reconstruct,
                                             a.common.write);
            const bool npy = run.scale.bits == 0;
            written.add(a.reconstruct, "reconstruction", npy ? "npy" : "png",
                        npy ? "f64" : run.scale.bits == 8 ? "u8" : "u16");
        }
    } catch (...) {
        written.remove_all();
        throw;
    }
    run.write_ms = elapsed_ms(t0);
    return written;
}

/// The status lines on stderr.
void say_zernike(const ZernikeArgs& a, const Context& ctx, const ZernikeRun& run, const OutputList& written) {
    const ZernikeTable& t = run.t;
    const ZernikeMoments& z = t.moments;
    const std::string what = t.mode == "set" ? "up to order " + std::to_string(a.max_order)
                             : t.mode == "order" ? "of order " + std::to_string(a.order)
                                                 : "A(" + a.moment + ")";
    const std::string source = t.batch ? std::to_string(t.sources.size()) + (t.sources.size() == 1 ? " image" : " images")
                                       : a.inputs.front();
    say(a.common, "zernike: " + source + " (" + run.shape.describe() + ") on " + ctx.device_name() + ": " +
                      std::to_string(z.count()) + " moments " + what + " per band, " +
                      std::string(zernike_method_name(z.method)) + (z.symmetric ? " (8-fold symmetric)" : "") + ", " +
                      std::string(zernike_mapping_name(z.disk.mapping)) + " disk of " +
                      std::to_string(z.disk.pixel_count) + " pixels, " +
                      std::string(zernike_normalization_name(z.disk.normalization)) + " normalisation");
    for (std::size_t s = 0; s < run.errors.size(); ++s) {
        char value[32];
        std::snprintf(value, sizeof value, "%.6g", run.errors[s]);
        say(a.common, "zernike: reconstruction to order " + std::to_string(a.max_order) + ", " +
                          band_label(t, int(s)) + ": relative L2 error inside the disk " + value);
    }
    for (const auto& w : written.json()) say(a.common, "  wrote " + w["path"].get<std::string>());
}

/// The --json summary (timings and outputs are added by the caller).
nlohmann::json zernike_summary(const ZernikeArgs& a, const Context& ctx, const ZernikeRun& run) {
    const ZernikeTable& t = run.t;
    const ZernikeMoments& z = t.moments;
    nlohmann::json j = summary("zernike", ctx);
    std::vector<std::string> paths;
    for (const ZernikeSource& s : t.sources) paths.push_back(s.path);
    j["input"] = {{"paths", paths}, {"shape", shape_json(run.shape)}, {"batch", t.batch}};
    if (t.batch) j["input"]["images"] = t.sources.size();
    else j["input"]["bands_used"] = t.sources.front().bands;
    j["parameters"] = parameters_json(a.options);
    j["parameters"]["mode"] = t.mode;
    if (a.options.mapping != ZernikeMapping::Custom) j["parameters"].erase("center"), j["parameters"].erase("radius");
    if (t.mode == "set") j["parameters"]["max_order"] = a.max_order;
    if (t.mode == "order") j["parameters"]["order"] = a.order;
    if (t.mode == "moment") j["parameters"]["moment"] = {run.single.n, run.single.m};
    j["moments_count"] = z.count();
    j["rows"] = z.values.size();
    j["max_order"] = z.max_order();
    j["method"] = std::string(zernike_method_name(z.method));
    j["precision"] = std::string(zernike_precision_name(z.precision));
    j["symmetric"] = z.symmetric;
    j["mapping"] = std::string(zernike_mapping_name(z.disk.mapping));
    j["normalization"] = std::string(zernike_normalization_name(z.disk.normalization));
    j["pixel_count"] = z.disk.pixel_count;
    j["disk"] = {{"center_x", z.disk.center_x}, {"center_y", z.disk.center_y}, {"radius", z.disk.radius}};
    j["warnings"] = z.warnings;
    if (!a.reconstruct.empty()) {
        j["reconstruction_order"] = a.max_order;
        j["reconstruction_error"] = run.errors;
        const auto [source, band] = t.origin(run.target);
        j["reconstruction_band"] = band;
        if (t.batch) j["reconstruction_image"] = t.sources[std::size_t(source)].name;
        if (run.scale.bits) j["reconstruction_scale"] = run.scale.json();
    }
    if (a.output.empty()) j["moments"] = zernike_rows_json(t);
    return j;
}

/// In tiles: the images read a group at a time (stack_of_files), the moments written row by row.
nlohmann::json compute_in_groups(const Context& ctx, const ZernikeArgs& a, const ImageStack& stack,
                                 const ZernikeOptions& options, TileOptions tiles, ZernikeRun& run) {
    check_tile_devices(a.tiles, tiles, ctx);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string& mode = run.t.mode;
    const std::size_t count = mode == "set" ? zernike_set_size(a.max_order) : mode == "order" ? std::size_t(a.order / 2 + 1) : 1;
    ZernikeMoments& z = run.t.moments;
    const CubeShape shape = zernike_moments_shape(stack.images, int(count));
    z.values.assign(shape.num_pixels(), {});
    const MutableCubeView out = MutableCubeView::host(z.values.data(), shape.width, shape.height, shape.bands, shape.dtype,
                                                      dense_strides(shape.width, shape.height, shape.bands, shape.layout));
    ZernikeTiled done = mode == "set"     ? zernike_set_tiled(ctx, stack, a.max_order, out, options, tiles)
                        : mode == "order" ? zernike_order_tiled(ctx, stack, a.order, out, options, tiles)
                                          : zernike_moment_tiled(ctx, stack, run.single.n, run.single.m, out, options, tiles);
    static_cast<ZernikeMomentsInfo&>(z) = std::move(done.info);
    run.zernike_ms = elapsed_ms(t0);
    return tiled_json(done.run);
}

void run_zernike(const ZernikeArgs& args) {
    const auto start = std::chrono::steady_clock::now();
    ZernikeArgs a = args;
    const std::optional<TileOptions> tiles = asked_tile_options(a.tiles, a.common);  // --devices: CUDA
    ZernikeRun run;
    run.t.mode = zernike_mode(a, run.single);  // everything that can be refused without the input, first
    const ZernikeOptions options = checked_options(a);
    check_zernike_outputs(a, run.t.mode);
    if (tiles && !a.reconstruct.empty())
        throw InvalidInput("--reconstruct needs the images in memory: leave out --memory-limit, --device-memory-limit, "
                           "--devices and --tile-size, or reconstruct the one image alone");

    Timings timings;
    std::optional<ImageStack> stack;
    if (tiles) stack = timings.time("read", [&] { return stack_of_files(a, run.t); });
    else run.cube = timings.time("read", [&] { return read_batch(a, run.t); });
    run.shape = tiles ? CubeShape{stack->width, stack->height, stack->images, stack->dtype, Layout::BSQ} : run.cube.shape();
    const std::int64_t moments = run.t.mode == "set"     ? std::int64_t(zernike_set_size(a.max_order))
                                 : run.t.mode == "order" ? a.order / 2 + 1
                                                         : 1;
    // Not a structured binding: clang cannot capture one in a lambda when OpenMP is on.
    auto work_context = context_for_work(a.common, "zernike", timings, estimate_zernike(run.shape, moments));
    Context& ctx = work_context.first;
    nlohmann::json& choice = work_context.second;
    run.target = a.reconstruct.empty() ? 0 : reconstruct_target(a, run.t);
    nlohmann::json tiled_report;
    if (tiles) tiled_report = compute_in_groups(ctx, a, *stack, options, *tiles, run);
    else compute_moments(ctx, a, options, run);
    for (const std::string& w : run.t.moments.warnings) say(a.common, "zernike: warning: " + w);
    const OutputList written = write_zernike_outputs(a, run);
    say_zernike(a, ctx, run, written);
    if (!a.common.json) {
        if (a.output.empty()) std::cout << zernike_csv(run.t) << std::flush;
        return;
    }
    nlohmann::json j = zernike_summary(a, ctx, run);
    if (!choice.is_null()) j["backend_choice"] = choice;
    if (tiles) j["tiled"] = tiled_report;
    j["elapsed_ms"] = elapsed_ms(start);
    timings.add("zernike", run.zernike_ms);
    timings.add("reconstruct", run.reconstruct_ms);
    timings.add("write", run.write_ms);
    j["outputs"] = written.json();
    emit_json(a.common, j, timings);
}

}  // namespace

Action add_zernike(CLI::App& root) {
    auto a = std::make_shared<ZernikeArgs>();
    CLI::App* app = root.add_subcommand("zernike", "Zernike moments A(n,m) of every band of an image, a cube or a batch of images");
    app->footer(
        "Each band is one image. Its pixel centres inside a disk (--mapping inscribed: the disk touches the middle of\n"
        "the shorter edges; circumscribed: it passes through the corners; custom: --center CX,CY --radius R in pixels)\n"
        "are projected on the Zernike polynomials: A(n,m) = (n+1)/cnt * sum f(x,y) R(n,m)(r) e^(-j m theta), with y up\n"
        "(row 0 on top) and cnt the pixels inside the disk (normalisation pixelcount; area uses pi*rho^2 instead).\n"
        "|A(n,m)| does not change when the image turns about the disk centre; A(n,-m) = conj(A(n,m)) is not listed.\n"
        "What: --max-order N (every A(n,m) with n <= N; the default is --max-order 20), --order N (m = N mod 2..N), or\n"
        "--moment N,M (0 <= M <= N, N - M even). Rows: band (0-based input band), then n ascending, m ascending.\n"
        "Output: CSV 'band,n,m,re,im,abs' (%.17g) on stdout, or -o FILE.csv, or -o FILE.json (the rows plus width,\n"
        "height, mapping, centre, radius, normalization, pixel_count, max_order, method, precision, dtype), which\n"
        "cubekit zernike-reconstruct reads back. With --json and no -o the rows go into the summary under 'moments'.\n"
        "Batch: IN is a folder (its image files, sorted by name) or several files, all of one width and height; rows\n"
        "gain a leading 'image' column (the file name): 'image,band,n,m,re,im,abs'. One call computes the whole batch.\n"
        "--reconstruct OUT.png|OUT.npy rebuilds each band from the set, prints the relative L2 error inside the disk\n"
        "per band, and writes one band as PNG (u8 input: rounded and clamped to 0..255; else 16-bit, min-max over the\n"
        "disk, outside 0, scale in --json) or every band as float64 .npy.\n"
        "Groups: --memory-limit, --device-memory-limit, --devices or --tile-size 1xN (N images a group) read and\n"
        "compute the images a group at a time, on the CPU or dealt to the GPUs: a batch larger than memory gives the\n"
        "same rows, bit for bit. The files' headers are read first (PNG and JPEG are decoded twice); no --reconstruct.\n"
        "Examples:\n"
        "  cubekit zernike data/samson/samson_1.img --bands 40 --max-order 12 -o samson40.csv\n"
        "  cubekit zernike data/photos/chelsea.png --bands 1 --max-order 30 --reconstruct chelsea_z30.png\n"
        "  cubekit zernike shapes/ --moment 4,2 --json          # a folder of same-size images\n"
        "  cubekit zernike a.png b.png --order 6 --mapping circumscribed -o ab.json\n"
        "  cubekit zernike scans/ --max-order 20 --devices all --memory-limit 2G -o scans.csv   # in groups");
    input_file(app->add_option("IN", a->inputs, "image or cube, several files, or a folder of same-size images"))->required()->expected(1, -1);
    a->max_order_opt = app->add_option("--max-order", a->max_order, "every moment with n <= N (default mode, N = 20)");
    a->order_opt = app->add_option("--order", a->order, "every repetition m of order N");
    a->moment_opt = app->add_option("--moment", a->moment, "the one moment A(N,M), written N,M");
    a->bound = bind_flags(*app, a->options);
    app->add_option("-o,--output", a->output, "moments file: .csv or .json (default: CSV on stdout)");
    app->add_option("--reconstruct", a->reconstruct, "with --max-order: rebuild the bands into OUT.png (one band) or "
                                                     "OUT.npy (every band, float64) and report the error");
    app->add_option("--reconstruct-band", a->reconstruct_band, "input band the PNG shows (default: the first used)")
        ->check(CLI::NonNegativeNumber);
    app->add_option("--reconstruct-image", a->reconstruct_image, "batch: image (file name) the PNG shows (default: the first)");
    add_tile_flags(*app, a->tiles);
    add_common_flags(*app, a->common);
    add_output_flags(*app, a->common);  // the --reconstruct PNG
    return [a] { run_zernike(*a); };
}

}  // namespace cubekit::cli
