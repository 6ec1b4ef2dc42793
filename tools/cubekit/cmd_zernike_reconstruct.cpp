// cubekit zernike-reconstruct: an image rebuilt from the moments `cubekit zernike` wrote (CSV or
// JSON), on the disk the file describes (spec zernike.md §3.12).
#include <algorithm>
#include <chrono>
#include <map>
#include <memory>

#include "arg_parsers.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "cubekit/zernike.hpp"
#include "outputs.hpp"
#include "zernike_table.hpp"

namespace cubekit::cli {

namespace {

struct ReconstructArgs {
    CommonOptions common;
    std::string moments, output, size, image;
    int max_order = -1, band = -1, png_depth = 0;
};

std::string moment_name(int n, int m) { return "A(" + std::to_string(n) + "," + std::to_string(m) + ")"; }


/// The image (batch files) and band --image and --band pick; default the first in the file.
std::pair<std::string, int> pick_band(const ReconstructArgs& a, const MomentFile& f) {
    std::string image = f.rows.front().image;
    if (!a.image.empty()) {
        if (!f.batch) throw InvalidInput("--image " + a.image + ": MOMENTS " + a.moments + " has no image column (one input)");
        image = a.image;
        if (std::none_of(f.rows.begin(), f.rows.end(), [&](const MomentFile::Row& r) { return r.image == image; }))
            throw InvalidInput("--image " + a.image + ": no such image in " + a.moments + " (first: " + f.rows.front().image + ")");
    }
    int band = a.band;
    if (band < 0) {
        for (const MomentFile::Row& r : f.rows)
            if (r.image == image) {
                band = r.band;
                break;
            }
    } else if (std::none_of(f.rows.begin(), f.rows.end(), [&](const MomentFile::Row& r) { return r.image == image && r.band == band; })) {
        throw InvalidInput("--band " + std::to_string(band) + ": " + a.moments + " has no moments of band " + std::to_string(band) +
                           (f.batch ? " of image " + image : std::string()));
    }
    return {image, band};
}

/// The moments of one band, by (n, m); `which` names the band in messages.
std::map<std::pair<int, int>, std::complex<double>> band_moments(const ReconstructArgs& a, const MomentFile& f,
                                                                 const std::string& image, int band,
                                                                 const std::string& which) {
    std::map<std::pair<int, int>, std::complex<double>> have;
    for (const MomentFile::Row& r : f.rows) {
        if (r.image != image || r.band != band) continue;
        if (!have.emplace(std::pair{r.index.n, r.index.m}, r.value).second)
            throw InvalidInput("MOMENTS " + a.moments + ": " + moment_name(r.index.n, r.index.m) + " of " + which +
                               " is listed twice");
    }
    return have;
}

/// Throws InvalidInput listing (the first few) A(n,m) with n <= K that `have` lacks.
void check_complete(const ReconstructArgs& a, const std::map<std::pair<int, int>, std::complex<double>>& have, int K,
                    const std::string& which) {
    std::vector<std::string> missing;
    std::size_t count_missing = 0;
    for (int n = 0; n <= K; ++n)
        for (int m = n % 2; m <= n; m += 2)
            if (!have.count({n, m}) && count_missing++ < 6) missing.push_back(moment_name(n, m));
    if (count_missing == 0) return;
    std::string list;
    for (const std::string& s : missing) list += (list.empty() ? "" : ", ") + s;
    if (count_missing > missing.size()) list += " and " + std::to_string(count_missing - missing.size()) + " more";
    throw InvalidInput("zernike-reconstruct: order " + std::to_string(K) + " needs every A(n,m) with n <= " +
                       std::to_string(K) + "; MOMENTS " + a.moments + " (" + which + ") lacks " + list +
                       (a.max_order >= 0 ? "; lower --max-order" : "; give a lower --max-order") +
                       " or compute a whole set with cubekit zernike --max-order " + std::to_string(K));
}

void run_reconstruct(const ReconstructArgs& a) {
    const CommonOptions& common = a.common;
    const auto start = std::chrono::steady_clock::now();
    Timings timings;
    check_image_output(a.output, "OUT");
    check_outputs({a.output}, "zernike-reconstruct");  // OUT may not be MOMENTS (input_file)
    int width = 0, height = 0;
    if (!a.size.empty()) std::tie(width, height) = parse_width_height(a.size, "--size", "64x64");
    if (a.png_depth != 0 && a.png_depth != 8 && a.png_depth != 16)
        throw InvalidInput("--png-depth = " + std::to_string(a.png_depth) + ": expected 8 or 16");
    const MomentFile f = timings.time("read", [&] { return read_moment_file(a.moments, "MOMENTS"); });
    if (!f.json && a.size.empty())
        throw InvalidInput("zernike-reconstruct: MOMENTS " + a.moments + " is CSV, which carries no image size; give "
                           "--size WxH (the size of the image the moments came from), or use the JSON from -o FILE.json");
    if (a.size.empty()) width = f.width, height = f.height;
    const auto [image, band] = pick_band(a, f);
    const std::string which = (f.batch ? "image " + image + " " : std::string()) + "band " + std::to_string(band);
    const auto have = band_moments(a, f, image, band, which);
    const int K = a.max_order >= 0 ? a.max_order : have.rbegin()->first.first;
    check_complete(a, have, K, which);

    ZernikeMoments z;
    z.width = width;
    z.height = height;
    z.images = 1;
    for (const auto& [nm, value] : have) {
        if (nm.first > K) continue;
        z.indices.push_back({nm.first, nm.second});
        z.values.push_back(value);
    }
    z.disk = zernike_disk(width, height, f.options);
    // Not a structured binding: clang cannot capture one in a lambda when OpenMP is on.
    auto work_context = context_for_work(common, "zernike-reconstruct", timings,
                                          estimate_zernike_reconstruct(std::int64_t(width) * height, std::int64_t(z.indices.size())));
    Context& ctx = work_context.first;
    nlohmann::json& choice = work_context.second;
    const TransferTotals copies = ctx.transfer_totals();
    const Cube rebuilt = timings.time("reconstruct", [&] { return zernike_reconstruct(ctx, z, z.disk, K); });
    timings.split_transfers(ctx, copies, "reconstruct");
    const int bits = a.png_depth ? a.png_depth : f.dtype == "u8" ? 8 : 16;
    const PngScale scale = timings.time("write", [&] {  // atomic
        return write_reconstruction(rebuilt, 0, z.disk, bits, a.output, common.write);
    });
    OutputList written;
    written.add(a.output, "reconstruction", scale.bits == 0 ? "npy" : "png",
                scale.bits == 0 ? "f64" : bits == 8 ? "u8" : "u16");
    say(common, "zernike-reconstruct: " + a.moments + " (" + which + "), order " + std::to_string(K) + ", " +
                    std::to_string(width) + "x" + std::to_string(height) + " " +
                    std::string(zernike_mapping_name(z.disk.mapping)) + " disk of " + std::to_string(z.disk.pixel_count) +
                    " pixels, on " + ctx.device_name());
    say(common, "  wrote " + a.output);

    nlohmann::json j = summary("zernike-reconstruct", ctx, choice);
    j["input"] = {{"path", a.moments}, {"format", f.json ? "json" : "csv"}};
    j["width"] = width;
    j["height"] = height;
    j["mapping"] = std::string(zernike_mapping_name(z.disk.mapping));
    j["normalization"] = std::string(zernike_normalization_name(z.disk.normalization));
    j["pixel_count"] = z.disk.pixel_count;
    j["disk"] = {{"center_x", z.disk.center_x}, {"center_y", z.disk.center_y}, {"radius", z.disk.radius}};
    j["order"] = K;
    j["band"] = band;
    if (f.batch) j["image"] = image;
    if (scale.bits) j["reconstruction_scale"] = scale.json();
    j["elapsed_ms"] = elapsed_ms(start);
    j["outputs"] = written.json();
    emit_json(common, j, timings);
}

}  // namespace

Action add_zernike_reconstruct(CLI::App& root) {
    auto a = std::make_shared<ReconstructArgs>();
    CLI::App* app = root.add_subcommand("zernike-reconstruct", "Rebuild an image from the Zernike moments cubekit zernike wrote");
    app->footer(
        "f(x,y) = sum over n <= K of [A(n,0) R(n,0)(r) + 2 Re(A(n,m) R(n,m)(r) e^(j m theta)), m > 0] on the pixel\n"
        "centres inside the disk (0 outside), K = --max-order (default: the highest order in the file); every A(n,m)\n"
        "with n <= K must be in the file (compute them with cubekit zernike --max-order K).\n"
        "MOMENTS: the JSON of cubekit zernike -o FILE.json carries width, height and the disk (--size overrides the\n"
        "size, the mapping stays); the CSV carries no size, so --size WxH is required and the disk is the default\n"
        "(inscribed). --image NAME and --band B pick one image of a batch and one band (default: the first).\n"
        "OUT: .npy (float64, H x W) or .png: 16-bit, min-max over the disk pixels scaled to 0..65535 (outside the disk\n"
        "0; --json states value = min + png/65535*(max-min)), or 8-bit rounded and clamped to 0..255 when the\n"
        "JSON says the input was u8 or --png-depth 8 is given.\n"
        "Examples:\n"
        "  cubekit zernike data/samson/samson_1.img --bands 40 --max-order 20 -o m.json\n"
        "  cubekit zernike-reconstruct m.json rebuilt.png --max-order 12\n"
        "  cubekit zernike-reconstruct moments.csv rebuilt.npy --size 95x95 --band 40");
    input_file(app->add_option("MOMENTS", a->moments, "moments file written by cubekit zernike (.csv or .json)"))->required();
    app->add_option("OUT", a->output, "reconstruction: .png (one band, scaled) or .npy (float64)")->required();
    app->add_option("--size", a->size, "image size WxH (required for CSV; overrides the JSON's)");
    app->add_option("--max-order", a->max_order, "highest order K used (default: the highest in the file)")
        ->check(CLI::NonNegativeNumber);
    app->add_option("--band", a->band, "band to rebuild (the 'band' column; default: the first)")
        ->check(CLI::NonNegativeNumber);
    app->add_option("--image", a->image, "batch files: image to rebuild (the 'image' column; default: the first)");
    app->add_option("--png-depth", a->png_depth, "PNG: 16 (min-max scaled) or 8 (clamped 0..255); default 8 when "
                                                 "the JSON says u8, else 16");
    add_common_flags(*app, a->common);
    add_output_flags(*app, a->common);
    app->remove_option(app->get_option("--var"));  // no cube is read here
    app->remove_option(app->get_option("--bands"));
    return [a] { run_reconstruct(*a); };
}

}  // namespace cubekit::cli
