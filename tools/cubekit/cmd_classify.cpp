// cubekit classify: spectral-spatial classification (spec gradient-watershed.md part C; issue 16
// item 3). A pixel-wise classifier (RBF SVM, SAM, minimum distance, or an external class map), then
// with --segment watershed the majority vote inside the regions of RCMG → watershed; OA/AA/κ and the
// confusion matrix on the test labels. OUT: the class map (.npy/ENVI i32, or a colour PNG with a legend).
#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <tuple>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/classify.hpp"
#include "cubekit/error.hpp"
#include "cubekit/gradient.hpp"
#include "cubekit/io.hpp"
#include "cubekit/watershed.hpp"
#include "option_flags.hpp"
#include "outputs.hpp"
#include "tile_flags.hpp"

namespace cubekit::cli {
namespace {

namespace fs = std::filesystem;

// ---- flags ----------------------------------------------------------------------------------------

/// The declared options of one classify run: the vote, the split, the SVM, the watershed (2-D:
/// connectivity 4 or 8, also the RCMG window's).
struct ClassifyFlags {
    VoteOptions vote;
    SplitOptions split;
    SvmOptions svm;
    WatershedOptions watershed;
};

template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, ClassifyFlags>
void visit_fields(O& f, V&& visit) {
    visit_fields(f.vote, visit);
    visit_fields(f.split, visit);
    visit_fields(f.svm, visit);
    visit_fields(f.watershed, [&](auto& value, const Field& field) {
        if (field.name == "volume") return;
        if (field.name != "connectivity") return visit(value, field);
        visit(value, Field{.name = "connectivity", .doc = "--segment watershed: neighbours of the RCMG and the watershed, 8 or 4",
                           .one_of = {4, 8}});
    });
}

struct Args {
    CommonOptions common;
    ClassifyFlags flags;
    BoundFlags bound;
    TileFlags tiles;
    std::string input, output, train, test, classifier = "svm", segment = "none", model_in, model_out, png,
                                                                               pixelwise_out;
};

// ---- inputs ---------------------------------------------------------------------------------------

/// A label image of IN's width and height, as checked i32 labels (classify.hpp: to_label_image).
Cube read_labels(const Context& ctx, const std::string& spec, const std::string& flag, const CubeShape& in) {
    const Cube c = read_secondary(spec, flag);
    check_same_size(c, {.width = in.width, .height = in.height, .bands = 1}, flag, spec);
    try {
        return to_label_image(ctx, c);
    } catch (const InvalidInput& e) {
        throw InvalidInput(flag + " " + spec + ": " + e.what());
    }
}

/// What --classifier names: one of the classifiers, or an external class map (FILE or FILE:VAR).
std::optional<Classifier> classifier_of(const Args& a) {
    if (const std::optional<Classifier> c = find_enum<Classifier>(a.classifier)) return c;
    if (!fs::exists(split_secondary(a.classifier).path))
        throw InvalidInput("--classifier = " + a.classifier + ": expected svm, sam, mindist or a class-map file (FILE or FILE.mat:VAR)");
    return std::nullopt;
}

void check_flags(const Args& a) {
    const FileFormat f = format_of("OUT", a.output);
    if (f != FileFormat::Npy && f != FileFormat::Envi && f != FileFormat::Png && f != FileFormat::Pnm)
        throw InvalidInput("classify: OUT = " + a.output + ": use .npy or ENVI (.hdr/.img) for the class map, .png for its colours");
    for (const std::string* o : {&a.png, &a.pixelwise_out}) {
        const FileFormat g = o->empty() ? FileFormat::Png : format_of(o == &a.png ? "--png" : "--pixelwise-out", *o);
        if (g != FileFormat::Png && g != FileFormat::Pnm && (o == &a.png || (g != FileFormat::Npy && g != FileFormat::Envi)))
            throw InvalidInput(std::string(o == &a.png ? "--png = " : "--pixelwise-out = ") + *o +
                               (o == &a.png ? ": use .png" : ": use .npy, ENVI (.hdr/.img) or .png"));
    }
    if (a.segment != "none" && a.segment != "watershed")
        throw InvalidInput("--segment = '" + a.segment + "': expected watershed or none");
    if (!a.pixelwise_out.empty() && a.segment == "none")
        throw InvalidInput("--pixelwise-out: without --segment watershed OUT already is the pixel-wise map");
    if (a.bound.given("train_fraction") && !a.test.empty())
        throw InvalidInput("--test: --train-fraction already splits --train into training and test pixels; give one");
    const std::optional<Classifier> c = classifier_of(a);
    if (!c && (!a.model_in.empty() || !a.model_out.empty()))
        throw InvalidInput(std::string(a.model_in.empty() ? "--model-out" : "--model-in") +
                           ": --classifier " + a.classifier + " is a class map, there is no model");
    if (c && a.model_in.empty() && a.train.empty())
        throw InvalidInput("--train: the " + a.classifier + " classifier needs training labels (or --model-in)");
    if (a.bound.given("train_fraction") && a.train.empty())
        throw InvalidInput("--train-fraction: give --train LABELS to split");
    if (!a.model_in.empty() && !fs::is_regular_file(a.model_in))
        throw IoError("--model-in " + a.model_in + ": no such file");
    std::vector<std::string> outs{a.output};
    for (const std::string* o : {&a.png, &a.pixelwise_out, &a.model_out})
        if (!o->empty()) outs.push_back(*o);
    check_outputs(outs, "classify");
}

// ---- the pixel-wise step ----------------------------------------------------------------------------

/// The model a run used, whichever classifier it was.
using Model = ClassifierModel;

/// --model-in: a class-means JSON file (it starts with '{'), else a LIBSVM model with its scaling.
Model read_model(const std::string& path) {
    try {
        return read_classifier_model(path);
    } catch (const InvalidInput& e) {
        throw InvalidInput(std::string("--model-in: ") + e.what());
    } catch (const IoError& e) {
        throw IoError(std::string("--model-in: ") + e.what());
    }
}

/// Trains on the cube in memory, or on the training pixels of the file read a strip of rows at a time
/// (`strip_bytes`, 0 = 256 MiB): the same model.
Model train_model(const Context& ctx, const Cube& cube, const std::optional<CubeFile>& file, const Cube& train,
                  Classifier c, SvmOptions svm, std::size_t strip_bytes) {
    try {
        if (file) return train_classifier(ctx, *file, train, c, svm, strip_bytes);
        return train_classifier(ctx, cube, train, c, svm);
    } catch (const InvalidInput& e) {
        throw InvalidInput(std::string("--train: ") + e.what());
    }
}

/// The pixel-wise map; a model that does not fit the cube is named by `source` ("--model-in").
Cube predict(const Context& ctx, const Cube& cube, const Model& m, const std::string& source) {
    try {
        return predict_classifier(ctx, cube, m);
    } catch (const InvalidInput& e) {
        throw InvalidInput(source + e.what());
    }
}

nlohmann::ordered_json model_json(const Model& m) {
    nlohmann::ordered_json j;
    j["classifier"] = enum_name(m.classifier);
    if (m.means) {
        j["classes"] = m.means->classes;
        j["training_pixels"] = m.means->counts;
        return j;
    }
    const SvmModel& s = *m.svm;
    j["classes"] = s.classes;
    j["c"] = s.c;
    j["gamma"] = s.gamma;
    j["cv_accuracy"] = std::isnan(s.cv_accuracy) ? nlohmann::ordered_json() : nlohmann::ordered_json(s.cv_accuracy);
    j["support_vectors"] = s.num_sv();
    j["training_pixels"] = s.training_pixels;
    nlohmann::ordered_json grid = nlohmann::ordered_json::array();
    for (const SvmGridPoint& g : s.grid) grid.push_back({{"c", g.c}, {"gamma", g.gamma}, {"accuracy", g.accuracy}});
    j["grid"] = grid;
    return j;
}

// ---- scores ---------------------------------------------------------------------------------------

nlohmann::ordered_json scores_json(const ClassificationScores& s) {
    const auto number = [](double v) { return std::isnan(v) ? nlohmann::ordered_json() : nlohmann::ordered_json(v); };
    nlohmann::ordered_json j;
    j["oa"] = number(s.oa);
    j["aa"] = number(s.aa);
    j["kappa"] = number(s.kappa);
    const std::size_t K = s.classes.size();
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < K; ++i)
        rows.push_back(std::vector<std::int64_t>(s.confusion.begin() + std::ptrdiff_t(i * K),
                                                 s.confusion.begin() + std::ptrdiff_t((i + 1) * K)));
    j["confusion"] = rows;
    j["classes"] = s.classes;
    nlohmann::ordered_json per_class = nlohmann::ordered_json::array();
    for (double a : s.per_class_accuracy) per_class.push_back(number(a));
    j["per_class_accuracy"] = per_class;
    j["counts"] = s.counts;
    j["total"] = s.total;
    j["correct"] = s.correct;
    return j;
}

std::string scores_line(const std::string& what, const ClassificationScores& s) {
    return "  " + what + ": OA " + number_text(std::round(s.oa * 1e4) / 1e4) + ", AA " +
           number_text(std::round(s.aa * 1e4) / 1e4) + ", kappa " + number_text(std::round(s.kappa * 1e4) / 1e4) +
           " on " + std::to_string(s.total) + " test pixels";
}

// ---- the class-map PNG --------------------------------------------------------------------------------

/// 3×5 digits, one row of 3 bits per entry (bit 2 = left column).
constexpr std::uint8_t kDigits[10][5] = {{7, 5, 5, 5, 7}, {2, 6, 2, 2, 7}, {7, 1, 7, 4, 7}, {7, 1, 7, 1, 7},
                                         {5, 5, 7, 1, 1}, {7, 4, 7, 1, 7}, {7, 4, 7, 5, 7}, {7, 1, 1, 1, 1},
                                         {7, 5, 7, 5, 7}, {7, 5, 7, 1, 7}};
constexpr int kSwatch = 12, kScale = 2, kGap = 4, kRow = kSwatch + 2 * kGap;

void fill(Cube& img, int x0, int y0, int w, int h, std::array<std::uint8_t, 3> rgb) {
    for (int y = y0; y < std::min(y0 + h, img.height()); ++y)
        for (int x = x0; x < std::min(x0 + w, img.width()); ++x)
            for (int c = 0; c < 3; ++c) img.at<std::uint8_t>(x, y, c) = rgb[std::size_t(c)];
}

int legend_entry_width(std::int32_t label) { return kSwatch + kGap + int(std::to_string(label).size()) * 4 * kScale + 2 * kGap; }

/// The legend entries of `classes` laid out in rows no wider than `width`; returns the rows needed.
int legend_rows(const std::vector<std::int32_t>& classes, int width) {
    int rows = 1, x = kGap;
    for (std::int32_t c : classes) {
        if (x + legend_entry_width(c) > width && x > kGap) ++rows, x = kGap;
        x += legend_entry_width(c);
    }
    return rows;
}

/// The class map in colours (0: black), with a legend strip below: a swatch and the label of every class.
Cube class_map_png(const Cube& map, const std::vector<std::int32_t>& classes) {
    int width = map.width();
    for (std::int32_t c : classes) width = std::max(width, legend_entry_width(c) + 2 * kGap);
    const int strip = legend_rows(classes, width) * kRow;
    Cube img(width, map.height() + strip, 3, DType::U8, Layout::BIP);
    for (int y = 0; y < map.height(); ++y)
        for (int x = 0; x < map.width(); ++x) {
            const std::int32_t v = map.at<std::int32_t>(x, y, 0);
            const auto k = std::lower_bound(classes.begin(), classes.end(), v);
            if (v != 0 && k != classes.end() && *k == v) fill(img, x, y, 1, 1, class_colour(k - classes.begin()));
        }
    int x = kGap, y = map.height() + kGap;
    for (std::size_t k = 0; k < classes.size(); ++k) {
        if (x + legend_entry_width(classes[k]) > width && x > kGap) x = kGap, y += kRow;
        fill(img, x, y, kSwatch, kSwatch, class_colour(std::int64_t(k)));
        int tx = x + kSwatch + kGap;
        for (char d : std::to_string(classes[k])) {
            for (int r = 0; r < 5; ++r)
                for (int col = 0; col < 3; ++col)
                    if (kDigits[d - '0'][r] >> (2 - col) & 1)
                        fill(img, tx + col * kScale, y + 1 + r * kScale, kScale, kScale, {255, 255, 255});
            tx += 4 * kScale;
        }
        x += legend_entry_width(classes[k]);
    }
    return img;
}

/// Writes a class map: .npy/ENVI the i32 labels, .png/.pnm the colours with the legend.
void write_map(const Cube& map, const std::string& path, const std::string& role, const std::vector<std::int32_t>& classes,
               const CommonOptions& common, OutputList& outputs) {
    const FileFormat f = output_format(path);
    if (f == FileFormat::Png || f == FileFormat::Pnm) {
        write_cube(class_map_png(map, classes), path, common.write);
        nlohmann::json legend = nlohmann::json::array();
        for (std::size_t k = 0; k < classes.size(); ++k) legend.push_back({{"class", classes[k]}, {"rgb", class_colour(std::int64_t(k))}});
        outputs.add(path, {{"role", role + "_png"}, {"path", path}, {"format", format_name(f)}, {"legend", legend}});
        return;
    }
    write_cube(map, path, common.write);
    outputs.add(path, role, std::string(format_name(f)), "i32");
}

// ---- the run --------------------------------------------------------------------------------------

/// Training and test labels: --train (split by --train-fraction into both) and --test.
struct Labels {
    std::optional<Cube> train, test;
    std::vector<ClassCount> split;  ///< per class, when --train-fraction split --train
};

Labels read_run_labels(const Context& ctx, const Args& a, const CubeShape& in) {
    Labels l;
    if (!a.train.empty()) l.train = read_labels(ctx, a.train, "--train", in);
    if (a.bound.given("train_fraction")) {
        Split s;
        try {
            s = stratified_split(ctx, *l.train, a.flags.split);
        } catch (const InvalidInput& e) {
            throw InvalidInput(std::string("--train: ") + e.what());
        }
        l.train = std::move(s.train), l.test = std::move(s.test), l.split = std::move(s.classes);
        if (std::all_of(l.split.begin(), l.split.end(), [](const ClassCount& c) { return c.test == 0; }))
            l.test.reset();  // every labelled pixel trains (--train-fraction 1): nothing to score
    } else if (!a.test.empty()) {
        l.test = read_labels(ctx, a.test, "--test", in);
    }
    return l;
}

struct Run {
    std::optional<Model> model;  ///< none for an external class map
    Cube pixelwise;
    std::optional<VoteResult> vote;
    std::int64_t regions = 0;
    std::optional<ClassificationScores> pixel_scores, region_scores;
    std::vector<std::int32_t> classes;  ///< of the legend: the model's and every predicted value, ascending
    std::optional<TileOptions> tiles;   ///< tile flags given: prediction, RCMG and watershed in tiles
    nlohmann::json tiled;               ///< what each tiled step did
    /// The pixel-wise map predicted in tiles from a file straight into its output (OUT, or with --segment
    /// --pixelwise-out) when that is .npy or ENVI: never held whole in memory.
    std::optional<InPlaceResult> pixelwise_file;
};

/// Runs step `key` (timed), its host <-> device copies moved to the steps upload and download.
template <class F>
auto timed_step(const Context& ctx, Timings& t, const std::string& key, F&& f) {
    const TransferTotals copies = ctx.transfer_totals();
    auto result = t.time(key, f);
    t.split_transfers(ctx, copies, key);
    return result;
}

/// The model: trained (--train), read (--model-in), or none for an external class map (read here).
void model_step(const Context& ctx, const Args& a, const Cube& cube, const std::optional<CubeFile>& file,
                const Labels& labels, Run& run, Timings& t) {
    const std::optional<Classifier> c = classifier_of(a);
    if (!c) {
        run.pixelwise = t.time("read", [&] { return read_labels(ctx, a.classifier, "--classifier", cube.shape()); });
        return;
    }
    if (a.model_in.empty()) {
        SvmOptions svm = a.flags.svm;
        svm.seed = a.flags.split.seed;
        const std::size_t strip = run.tiles ? run.tiles->memory_limit : 0;
        run.model = t.time("train", [&] { return train_model(ctx, cube, file, *labels.train, *c, svm, strip); });
    } else {
        run.model = read_model(a.model_in);
        if (a.bound.given("classifier") && run.model->classifier != *c)
            throw InvalidInput("--model-in " + a.model_in + " holds a " + std::string(enum_name(run.model->classifier)) +
                               " model; --classifier says " + a.classifier);
    }
}

/// The pixel-wise map of the model (an external class map is already there); in tiles from the file
/// when it is read by windows.
void predict_step(const Context& ctx, const Args& a, const Cube& cube, const std::optional<CubeFile>& file, Run& run,
                  Timings& t) {
    if (!run.model) return;
    const std::string source = a.model_in.empty() ? "" : "--model-in " + a.model_in + ": ";
    if (!run.tiles) {
        run.pixelwise = timed_step(ctx, t, "predict", [&] { return predict(ctx, cube, *run.model, source); });
        return;
    }
    const CubeShape shape = file ? file->shape() : cube.shape();
    const std::string& target = a.segment == "watershed" ? a.pixelwise_out : a.output;
    if (file && !target.empty() && CubeFileWriter::streamable(target, a.common.write)) {
        run.pixelwise_file.emplace(std::vector{target}, CubeShape{shape.width, shape.height, 1, DType::I32},
                                   file->metadata().georeference(), a.common.write);
        run.pixelwise = Cube::borrow(run.pixelwise_file->view());
    } else {
        run.pixelwise = Cube::uninitialized(shape.width, shape.height, 1, DType::I32);
    }
    const Model& m = *run.model;
    const MutableCubeView map = run.pixelwise.mutable_view();
    const TiledRun r = timed_step(ctx, t, "predict", [&] {
        try {
            if (file)
                return predict_classifier_tiled(ctx, *file, m, map, *run.tiles);
            return predict_classifier_tiled(ctx, cube, m, map, *run.tiles);
        } catch (const InvalidInput& e) {
            throw InvalidInput(source + e.what());
        }
    });
    run.tiled["predict"] = tiled_json(r);
}

void segment_step(const Context& ctx, const Args& a, const Cube& cube, const std::optional<CubeFile>& file, Run& run,
                  Timings& t) {
    RcmgOptions ro;
    ro.connectivity = a.flags.watershed.connectivity;
    if (run.tiles) {  // the RCMG and the watershed in tiles: the same regions
        const CubeShape shape = file ? file->shape() : cube.shape();
        Cube gradient = Cube::uninitialized(shape.width, shape.height, 1, ro.out_type);
        run.tiled["rcmg"] = tiled_json(timed_step(ctx, t, "rcmg", [&] {
            return file ? rcmg_tiled(ctx, *file, gradient.mutable_view(), ro, *run.tiles)
                        : rcmg_tiled(ctx, cube, gradient.mutable_view(), ro, *run.tiles);
        }));
        Cube labels = Cube::uninitialized(shape.width, shape.height, 1, DType::I32);
        const WatershedTiled w = timed_step(ctx, t, "watershed", [&] {
            return watershed_tiled(ctx, gradient, labels.mutable_view(), a.flags.watershed, {}, *run.tiles);
        });
        run.tiled["watershed"] = tiled_json(w.run);
        run.tiled["watershed"]["rounds"] = w.rounds;
        run.regions = w.regions;
        run.vote = timed_step(ctx, t, "vote", [&] { return region_vote(ctx, labels, run.pixelwise, a.flags.vote); });
        return;
    }
    const Cube gradient = timed_step(ctx, t, "rcmg", [&] { return rcmg(ctx, cube, ro); });
    const WatershedResult w = timed_step(ctx, t, "watershed", [&] { return watershed(ctx, gradient, a.flags.watershed); });
    run.regions = w.regions;
    run.vote = timed_step(ctx, t, "vote", [&] { return region_vote(ctx, w.labels, run.pixelwise, a.flags.vote); });
}

void legend_classes(Run& run) {
    std::vector<std::int32_t>& c = run.classes;
    if (run.model) c = run.model->classes();
    for (std::int32_t v : std::span(run.pixelwise.data<std::int32_t>(), run.pixelwise.num_elements()))
        if (v != 0) c.push_back(v);
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
}

OutputList write_outputs(const Args& a, const Metadata& metadata, Run& run) {
    const Cube& final_map = run.vote ? run.vote->classes : run.pixelwise;
    for (Cube* m : {&run.pixelwise, run.vote ? &run.vote->classes : nullptr})
        if (m) m->metadata() = metadata.georeference();
    OutputList outputs;
    const auto streamed = [&](const std::string& path) {
        return run.pixelwise_file && run.pixelwise_file->streamed_path() == path;
    };
    try {
        if (!streamed(a.output)) write_map(final_map, a.output, "classes", run.classes, a.common, outputs);
        if (!a.png.empty()) write_map(final_map, a.png, "classes", run.classes, a.common, outputs);
        if (!a.pixelwise_out.empty() && !streamed(a.pixelwise_out))
            write_map(run.pixelwise, a.pixelwise_out, "pixelwise", run.classes, a.common, outputs);
        if (!a.model_out.empty()) {
            if (run.model->svm) {
                write_svm_model(*run.model->svm, a.model_out);
                outputs.add(a.model_out, "model", "libsvm");
                outputs.add(a.model_out + ".scaling.json", "model_scaling", "json");
            } else {
                write_class_means(*run.model->means, a.model_out);
                outputs.add(a.model_out, "model", "json");
            }
        }
        if (run.pixelwise_file)
            run.pixelwise_file->commit(outputs, {{"role", run.vote ? "pixelwise" : "classes"}});
    } catch (...) {
        outputs.remove_all();
        throw;
    }
    return outputs;
}

nlohmann::json run_json(const Args& a, const Context& ctx, const nlohmann::json& choice, const CubeShape& shape,
                        const Labels& labels, const Run& run) {
    nlohmann::json j = summary("classify", ctx, choice);
    j["input"] = {{"path", a.input}, {"shape", shape_json(shape)}};
    j["parameters"] = parameters_json(a.flags);
    j["parameters"]["classifier"] = run.model ? std::string(enum_name(run.model->classifier)) : a.classifier;
    j["parameters"]["segment"] = a.segment;
    if (!a.bound.given("train_fraction")) j["parameters"].erase("train_fraction");
    if (run.model) j["model"] = model_json(*run.model);
    if (!labels.split.empty()) {
        nlohmann::json per_class = nlohmann::json::array();
        for (const ClassCount& c : labels.split)
            per_class.push_back({{"class", c.label}, {"total", c.total}, {"train", c.train}, {"test", c.test}});
        j["split"] = {{"train_fraction", a.flags.split.train_fraction}, {"seed", a.flags.split.seed}, {"classes", per_class}};
    }
    if (run.pixel_scores) j["pixelwise"] = scores_json(*run.pixel_scores);
    if (run.vote) {
        const VoteStats& v = run.vote->stats;
        j["segmentation"] = {{"method", "rcmg + watershed"}, {"regions", run.regions}};
        j["vote"] = {{"regions", v.regions},     {"relabelled", v.relabelled}, {"ties", v.ties},
                     {"no_voters", v.no_voters}, {"below_tau", v.below_tau},   {"changed_pixels", v.changed_pixels}};
    }
    if (run.region_scores) j["regions"] = scores_json(*run.region_scores);
    if (run.tiles) j["tiled"] = run.tiled;
    return j;
}

/// The tile options when tile flags were given; the watershed's options that need the whole relief are refused.
std::optional<TileOptions> classify_tiles(const Args& a, CommonOptions& common) {
    if (!a.tiles.given()) return std::nullopt;
    const TileOptions tiles = tile_options(a.tiles);
    const WatershedOptions& o = a.flags.watershed;
    if (a.segment == "watershed")
        for (const auto& [flag, on] : {std::pair{"--levels", o.levels > 0}, {"--h-min", o.h_min > 0}, {"--min-area", o.min_area > 1}})
            if (on) throw InvalidInput(std::string(flag) + " needs the whole relief; it cannot run in tiles (leave out "
                                       "--memory-limit, --device-memory-limit, --devices and --tile-size)");
    if (!a.tiles.devices.empty() && common.context.backend == Backend::Auto) common.context.backend = Backend::Cuda;
    return tiles;
}

void classify_command(const Args& a) {
    check_flags(a);
    CommonOptions common = a.common;
    Run run;
    run.tiles = classify_tiles(a, common);
    Timings t;
    // auto (without --device): reading the labels and training are CPU code on any backend, so they run on a
    // CPU context, and auto's rule is applied to the rest (prediction, segmentation, vote) once the model and
    // its support vectors are known. Otherwise the context the flags ask for is made while IN is read.
    const bool decide_later = common.context.backend == Backend::Auto && common.context.device < 0;
    CommonOptions first = common;
    if (decide_later) first.context.backend = Backend::Cpu;
    // In tiles a raw cube is read by windows: the training pixels' rows, then the tiles.
    const std::optional<CubeFile> file = run.tiles && classifier_of(a)
                                             ? open_windowed(a.input, common, true, t)
                                             : std::nullopt;
    Prepared<Cube> p = context_for_input(
        first, "classify", t, a.input, file, [&] { return read_input(a.input, common).cube; },
        [](const CubeShape&) { return WorkEstimate{}; });  // not consulted: the backend is cpu or given
    const Cube& cube = p.input;
    const CubeShape shape = file ? file->shape() : cube.shape();
    const Labels labels = t.time("read", [&] { return read_run_labels(p.ctx, a, shape); });
    model_step(p.ctx, a, cube, file, labels, run, t);
    if (decide_later) {
        const std::int64_t support_vectors = run.model && run.model->svm ? std::int64_t(run.model->svm->num_sv()) : 0;
        std::tie(p.ctx, p.backend_choice) = context_for_work(
            common, "classify", t, estimate_classify(shape, support_vectors, a.segment == "watershed"));
    }
    const Context& ctx = p.ctx;
    const nlohmann::json& choice = p.backend_choice;
    if (run.tiles) check_tile_devices(a.tiles, *run.tiles, ctx);
    predict_step(ctx, a, cube, file, run, t);
    if (a.segment == "watershed") segment_step(ctx, a, cube, file, run, t);
    legend_classes(run);
    if (labels.test) {
        const auto score = [&](const Cube& map) {
            try {
                return classification_scores(ctx, map, *labels.test);
            } catch (const InvalidInput& e) {
                throw InvalidInput(std::string(a.test.empty() ? "--train-fraction: " : "--test: ") + e.what());
            }
        };
        run.pixel_scores = t.time("score", [&] { return score(run.pixelwise); });
        if (run.vote) run.region_scores = t.time("score", [&] { return score(run.vote->classes); });
    }
    const OutputList outputs = t.time("write", [&] { return write_outputs(a, file ? file->metadata() : cube.metadata(), run); });

    say(common, "classify: " + a.input + " (" + shape.describe() + ") on " + ctx.device_name() + ", " +
                    (run.model ? std::string(enum_name(run.model->classifier)) : "class map " + a.classifier) +
                    (run.vote ? ", " + std::to_string(run.regions) + " watershed regions" : ""));
    if (run.model && run.model->svm)
        say(common, "  svm: C " + number_text(run.model->svm->c) + ", gamma " + number_text(run.model->svm->gamma) + ", " +
                        std::to_string(run.model->svm->num_sv()) + " support vectors");
    if (run.pixel_scores) say(common, scores_line("pixel-wise", *run.pixel_scores));
    if (run.region_scores) say(common, scores_line("region vote", *run.region_scores));
    if (!labels.test) say(common, "  no test labels (--test or --train-fraction): no scores");
    for (const auto& o : outputs.json()) say(common, "  wrote " + o["path"].get<std::string>());
    nlohmann::json j = run_json(a, ctx, choice, shape, labels, run);
    if (run.tiles) j["input"]["windowed"] = file.has_value();
    j["outputs"] = outputs.json();
    emit_json(common, j, t);
}

}  // namespace

Action add_classify(CLI::App& root) {
    auto a = std::make_shared<Args>();
    CLI::App* app = root.add_subcommand(
        "classify", "Spectral-spatial classification: a pixel-wise classifier, then a majority vote in watershed regions");
    app->footer(
        "Pixel-wise: an RBF-kernel SVM (LIBSVM C-SVC, one-against-one; inputs scaled per band to [-1, 1];\n"
        "C and gamma by --cv-folds cross-validation over C in {1, 10, ..., 10000}, gamma in {1/16, ..., 16}/bands),\n"
        "the spectral angle (sam) or the Euclidean distance (mindist) to the class means, or a class map FILE.\n"
        "--segment watershed: RCMG -> watershed regions, then each region takes its majority class (a tie, no\n"
        "voters or a share below --tau keeps the pixel-wise classes). Scores (OA, AA, kappa, confusion) on --test,\n"
        "or on the labels --train-fraction leaves out of training. Labels: 0 = unlabelled; FILE.mat:VAR names a variable.\n"
        "Examples:\n"
        "  cubekit classify SalinasA_corrected.mat classes.png --var salinasA_corrected \\\n"
        "      --train SalinasA_gt.mat:salinasA_gt --train-fraction 0.05 --seed 1 --segment watershed --json\n"
        "  cubekit classify scene.hdr classes.npy --train train.png --test test.png --classifier sam --model-out sam.json\n"
        "  cubekit classify scene.hdr voted.npy --classifier svm_map.npy --segment watershed --test test.png\n"
        "Tiles: --memory-limit, --device-memory-limit, --devices or --tile-size run the prediction, the RCMG and the\n"
        "watershed in tiles (with --model-in an ENVI, .npy or GeoTIFF cube is read by windows, else whole; the maps\n"
        "equal the whole run's; --json adds tiled.predict, tiled.rcmg, tiled.watershed). Not with --levels, --h-min or\n"
        "--min-area.");
    input_file(app->add_option("IN", a->input, "input cube (any format cubekit reads; --var names a MATLAB variable)"))->required();
    app->add_option("OUT", a->output, "class map: .npy or ENVI (i32), or .png (colours with a legend)")->required();
    input_file(app->add_option("--train", a->train, "training labels, W x H (0 = unlabelled); FILE.mat:VAR for a MATLAB variable"));
    input_file(app->add_option("--test", a->test, "test labels for the scores, W x H (0 = not scored)"));
    a->bound.add("classifier", app->add_option("--classifier", a->classifier,
                                                "svm, sam, mindist, or FILE: an external class map (0 = no prediction)")
                                   ->default_str("svm"));
    app->add_option("--segment", a->segment, "watershed: majority vote in the regions of RCMG -> watershed; none")
        ->default_str("none");
    const BoundFlags flags = bind_flags(*app, a->flags);
    a->bound.add("train_fraction", flags["train_fraction"]);
    input_file(app->add_option("--model-in", a->model_in, "classify with a saved model (--model-out) instead of training"));
    app->add_option("--model-out", a->model_out, "save the model: svm: LIBSVM's model file + F.scaling.json; sam, mindist: JSON");
    app->add_option("--png", a->png, "also write the class map in colours with a legend (.png)");
    app->add_option("--pixelwise-out", a->pixelwise_out, "with --segment: also write the pixel-wise map (.npy, ENVI or .png)");
    add_common_flags(*app, a->common);
    add_output_flags(*app, a->common);
    add_tile_flags(*app, a->tiles);
    return [a] { classify_command(*a); };
}

}  // namespace cubekit::cli
