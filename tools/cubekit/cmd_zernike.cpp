// cubekit zernike: Zernike moments of every band of an image, a cube, or a batch of same-size
// images (a folder or a list of files) as a CSV or JSON table; optionally the reconstruction from a
// whole set with its error (spec zernike.md §2, §3.12).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "cubekit/zernike.hpp"
#include "kmeans_output.hpp"
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
    std::string method = "auto", mapping = "inscribed", normalization = "default", precision = "f64", radial = "stable";
    std::string center;
    double radius = 0.0;
    bool no_symmetry = false;
    std::string output, reconstruct, reconstruct_image;
    int reconstruct_band = -1;
};

std::string lower(std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

/// "A,B" as two numbers; false when it is not exactly that.
template <typename T>
bool parse_pair(const std::string& text, T& a, T& b) {
    const std::size_t comma = text.find(',');
    if (comma == std::string::npos) return false;
    try {
        std::size_t used = 0;
        const std::string first = text.substr(0, comma), second = text.substr(comma + 1);
        if constexpr (std::is_same_v<T, int>) {
            a = std::stoi(first, &used);
            if (used != first.size()) return false;
            b = std::stoi(second, &used);
        } else {
            a = std::stod(first, &used);
            if (used != first.size()) return false;
            b = std::stod(second, &used);
        }
        return used == second.size();
    } catch (const std::exception&) {
        return false;
    }
}

ZernikeOptions parse_options(const ZernikeArgs& a) {
    ZernikeOptions o;
    o.method = parse_zernike_method(a.method, "--method");
    o.mapping = parse_zernike_mapping(a.mapping, "--mapping");
    o.normalization = parse_zernike_normalization(a.normalization, "--normalization");
    o.precision = parse_zernike_precision(a.precision, "--precision");
    if (a.radial != "stable" && a.radial != "explicit")
        throw InvalidInput("--radial = '" + a.radial + "': expected stable, explicit");
    o.radial = a.radial == "explicit" ? ZernikeRadial::Explicit : ZernikeRadial::Stable;
    o.symmetry = !a.no_symmetry;
    const bool custom = o.mapping == ZernikeMapping::Custom;
    if (custom && (a.center.empty() || a.radius <= 0.0))
        throw InvalidInput("--mapping custom needs --center CX,CY and --radius R > 0 (pixel units; got " +
                           (a.center.empty() ? std::string("no --center") : "--center " + a.center) + ", --radius " +
                           std::to_string(a.radius) + ")");
    if (!custom && (!a.center.empty() || a.radius != 0.0))
        throw InvalidInput("--center and --radius need --mapping custom (--mapping is " + a.mapping + ")");
    if (custom && !parse_pair(a.center, o.center_x, o.center_y))
        throw InvalidInput("--center = '" + a.center + "': expected CX,CY (pixel units, e.g. 31.5,31.5)");
    o.radius = a.radius;
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

/// Reads the inputs into one BSQ cube (a batch stacked band after band, in a common element type:
/// the files' own when they agree, else f64) and the table's sources.
Cube read_batch(const ZernikeArgs& a, ZernikeTable& t) {
    const std::vector<std::string> files = expand_inputs(a.inputs, t.batch);
    CommonOptions all = a.common;
    all.bands.clear();
    std::vector<Cube> cubes;
    std::set<std::string> names;
    bool unique = true;
    for (const std::string& file : files) {
        Cube c = read_input(file, all);
        ZernikeSource s{fs::path(file).filename().string(), file, {}};
        if (a.common.bands.empty()) {
            for (int b = 0; b < c.bands(); ++b) s.bands.push_back(b);
        } else {
            s.bands = parse_band_list(a.common.bands, c.bands(), "--bands");
            c = c.select_bands(s.bands);
        }
        if (!cubes.empty() && (c.width() != cubes.front().width() || c.height() != cubes.front().height()))
            throw InvalidInput("IN " + file + " is " + std::to_string(c.width()) + "x" + std::to_string(c.height()) +
                               " but " + t.sources.front().path + " is " + std::to_string(cubes.front().width()) + "x" +
                               std::to_string(cubes.front().height()) +
                               "; every image of a batch must have the same width and height");
        unique = names.insert(s.name).second && unique;
        t.sources.push_back(std::move(s));
        cubes.push_back(std::move(c));
    }
    if (!unique)  // the same file name in two folders: the paths tell the images apart
        for (ZernikeSource& s : t.sources) s.name = s.path;
    if (!t.batch) {
        t.sources.front().name.clear();
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

void run_zernike(const ZernikeArgs& a) {
    const CommonOptions& common = a.common;
    const auto start = std::chrono::steady_clock::now();
    // Everything that can be refused without the input, before any work.
    std::vector<std::string> modes;
    for (CLI::Option* o : {a.max_order_opt, a.order_opt, a.moment_opt})
        if (o->count() > 0) modes.push_back(o->get_name() + " " + o->as<std::string>());
    if (modes.size() > 1)
        throw InvalidInput("zernike: " + modes[0] + " and " + modes[1] +
                           " exclude each other; give one of --max-order N (whole set), --order N, --moment N,M");
    const std::string mode = a.order_opt->count() ? "order" : a.moment_opt->count() ? "moment" : "set";
    ZernikeIndex single;
    if (mode == "moment") {
        if (!parse_pair(a.moment, single.n, single.m))
            throw InvalidInput("--moment = '" + a.moment + "': expected N,M (e.g. 4,2)");
        if (single.n < 0 || single.m < 0 || single.m > single.n || (single.n - single.m) % 2 != 0)
            throw InvalidInput("--moment = " + a.moment + ": A(" + std::to_string(single.n) + "," + std::to_string(single.m) +
                               ") does not exist; expected 0 <= M <= N with N - M even");
    }
    if (mode == "set" && a.max_order < 0)
        throw InvalidInput("--max-order = " + std::to_string(a.max_order) + ": expected an order >= 0");
    if (mode == "order" && a.order < 0) throw InvalidInput("--order = " + std::to_string(a.order) + ": expected an order >= 0");
    const ZernikeOptions options = parse_options(a);
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
    check_distinct(outs, "zernike outputs");

    Context ctx = make_context(common, "zernike");
    ZernikeTable t;
    t.mode = mode;
    auto t0 = std::chrono::steady_clock::now();
    const Cube cube = read_batch(a, t);
    const double read_ms = elapsed_ms(t0);
    const int target = a.reconstruct.empty() ? 0 : reconstruct_target(a, t);

    t0 = std::chrono::steady_clock::now();
    if (mode == "set") t.moments = zernike_set(ctx, cube, a.max_order, options);
    else if (mode == "order") t.moments = zernike_order(ctx, cube, a.order, options);
    else t.moments = zernike_moment(ctx, cube, single.n, single.m, options);
    const double zernike_ms = elapsed_ms(t0);
    const ZernikeMoments& z = t.moments;
    for (const std::string& w : z.warnings) say(common, "zernike: warning: " + w);

    Cube rebuilt;
    std::vector<double> errors;
    double reconstruct_ms = 0.0;
    if (!a.reconstruct.empty()) {
        t0 = std::chrono::steady_clock::now();
        rebuilt = zernike_reconstruct(ctx, z);
        errors = zernike_reconstruction_error(cube, rebuilt, z.disk);
        reconstruct_ms = elapsed_ms(t0);
    }

    t0 = std::chrono::steady_clock::now();
    OutputList written;
    PngScale scale;
    try {
        if (!a.output.empty()) {
            write_text_file(a.output, oext == ".csv" ? zernike_csv(t) : readable_json(zernike_json_file(t)));
            written.add(a.output, "moments", oext.substr(1));
        }
        if (!a.reconstruct.empty()) {
            scale = write_reconstruction(rebuilt, target, z.disk, cube.dtype() == DType::U8 ? 8 : 16, a.reconstruct);
            const bool npy = scale.bits == 0;
            written.add(a.reconstruct, "reconstruction", npy ? "npy" : "png", npy ? "f64" : scale.bits == 8 ? "u8" : "u16");
        }
    } catch (...) {
        written.remove_all();
        throw;
    }
    const double write_ms = elapsed_ms(t0);

    const std::string what = mode == "set" ? "up to order " + std::to_string(a.max_order)
                             : mode == "order" ? "of order " + std::to_string(a.order)
                                               : "A(" + a.moment + ")";
    const std::string source = t.batch ? std::to_string(t.sources.size()) + (t.sources.size() == 1 ? " image" : " images")
                                       : a.inputs.front();
    say(common, "zernike: " + source + " (" + cube.shape().describe() + ") on " + ctx.device_name() + ": " +
                    std::to_string(z.count()) + " moments " + what + " per band, " +
                    std::string(zernike_method_name(z.method)) + (z.symmetric ? " (8-fold symmetric)" : "") + ", " +
                    std::string(zernike_mapping_name(z.disk.mapping)) + " disk of " +
                    std::to_string(z.disk.pixel_count) + " pixels, " +
                    std::string(zernike_normalization_name(z.disk.normalization)) + " normalisation");
    for (std::size_t s = 0; s < errors.size(); ++s) {
        char value[32];
        std::snprintf(value, sizeof value, "%.6g", errors[s]);
        say(common, "zernike: reconstruction to order " + std::to_string(a.max_order) + ", " + band_label(t, int(s)) +
                        ": relative L2 error inside the disk " + value);
    }
    for (const auto& w : written.json()) say(common, "  wrote " + w["path"].get<std::string>());

    if (!common.json) {
        if (a.output.empty()) std::cout << zernike_csv(t) << std::flush;
        return;
    }
    nlohmann::json j = summary("zernike", ctx);
    std::vector<std::string> paths;
    for (const ZernikeSource& s : t.sources) paths.push_back(s.path);
    j["input"] = {{"paths", paths}, {"shape", shape_json(cube.shape())}, {"batch", t.batch}};
    if (t.batch) j["input"]["images"] = t.sources.size();
    else j["input"]["bands_used"] = t.sources.front().bands;
    j["parameters"] = {{"mode", mode}, {"method", a.method}, {"mapping", a.mapping}, {"normalization", a.normalization},
                       {"precision", a.precision}, {"radial", a.radial}, {"symmetry", !a.no_symmetry}};
    if (mode == "set") j["parameters"]["max_order"] = a.max_order;
    if (mode == "order") j["parameters"]["order"] = a.order;
    if (mode == "moment") j["parameters"]["moment"] = {single.n, single.m};
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
        j["reconstruction_error"] = errors;
        const auto [source, band] = t.origin(target);
        j["reconstruction_band"] = band;
        if (t.batch) j["reconstruction_image"] = t.sources[std::size_t(source)].name;
        if (scale.bits) j["reconstruction_scale"] = scale.json();
    }
    j["elapsed_ms"] = elapsed_ms(start);
    j["timings_ms"] = {{"read", read_ms}, {"zernike", zernike_ms}, {"reconstruct", reconstruct_ms}, {"write", write_ms}};
    j["outputs"] = written.json();
    if (a.output.empty()) j["moments"] = zernike_rows_json(t);
    emit_json(common, j);
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
        "Examples:\n"
        "  cubekit zernike data/samson/samson_1.img --bands 40 --max-order 12 -o samson40.csv\n"
        "  cubekit zernike data/photos/chelsea.png --bands 1 --max-order 30 --reconstruct chelsea_z30.png\n"
        "  cubekit zernike shapes/ --moment 4,2 --json          # a folder of same-size images\n"
        "  cubekit zernike a.png b.png --order 6 --mapping circumscribed -o ab.json");
    app->add_option("IN", a->inputs, "image or cube, several files, or a folder of same-size images")->required()->expected(1, -1);
    a->max_order_opt = app->add_option("--max-order", a->max_order, "every moment with n <= N (default mode, N = 20)");
    a->order_opt = app->add_option("--order", a->order, "every repetition m of order N");
    a->moment_opt = app->add_option("--moment", a->moment, "the one moment A(N,M), written N,M");
    app->add_option("--method", a->method, "auto (kintner for a set, qrecursive for an order, direct for a moment), "
                                           "direct, qrecursive or kintner")->capture_default_str();
    app->add_option("--radial", a->radial, "direct method: stable (Kintner chain) or explicit (the seed's factorial "
                                           "sum, inaccurate above order ~20)")->capture_default_str();
    app->add_option("--mapping", a->mapping, "inscribed, circumscribed or custom (--center, --radius)")->capture_default_str();
    app->add_option("--center", a->center, "custom disk centre CX,CY in pixels (x = 0 is the first column's centre)");
    app->add_option("--radius", a->radius, "custom disk radius in pixels");
    app->add_option("--normalization", a->normalization,
                    "default (pixelcount for inscribed and a custom disk inside the image, else area), pixelcount "
                    "(n+1)/cnt, area (n+1)/(pi rho^2)")->capture_default_str();
    app->add_option("--precision", a->precision, "f64 or f32 radial/angular evaluation (sums in double)")->capture_default_str();
    app->add_flag("--no-symmetry", a->no_symmetry, "do not use the 8-fold symmetry of a square pixel set");
    app->add_option("-o,--output", a->output, "moments file: .csv or .json (default: CSV on stdout)");
    app->add_option("--reconstruct", a->reconstruct, "with --max-order: rebuild the bands into OUT.png (one band) or "
                                                     "OUT.npy (every band, float64) and report the error");
    app->add_option("--reconstruct-band", a->reconstruct_band, "input band the PNG shows (default: the first used)")
        ->check(CLI::NonNegativeNumber);
    app->add_option("--reconstruct-image", a->reconstruct_image, "batch: image (file name) the PNG shows (default: the first)");
    add_common_flags(*app, a->common);
    return [a] { run_zernike(*a); };
}

}  // namespace cubekit::cli
