#pragma once
/// Spectral-spatial classification (spec gradient-watershed.md part C; issue 16 item 3): pixel-wise
/// classifiers, the majority vote inside segmentation regions, scores, and seeded stratified splits.
///
///     cubekit::Split s = cubekit::stratified_split(ctx, truth, {.train_fraction = 0.05, .seed = 1});
///     cubekit::SvmModel m = cubekit::train_svm(ctx, cube, s.train);          // C, γ by 5-fold CV
///     cubekit::Cube pixelwise = cubekit::predict_svm(ctx, cube, m).classes;   // W×H×1 i32
///     cubekit::Cube regions = cubekit::watershed(ctx, cubekit::rcmg(ctx, cube)).labels;
///     cubekit::VoteResult v = cubekit::region_vote(ctx, regions, pixelwise);  // Decision C-1
///     cubekit::ClassificationScores a = cubekit::classification_scores(ctx, v.classes, s.test);
///
/// Label images (truth, training and test labels, class maps, regions): W×H×1, any element type
/// whose values are whole numbers in 0..2^31−1 (a MATLAB map stored as double included); 0 means
/// unlabelled (truth), no prediction (class map) or no region. Classes are the label values
/// themselves (Salinas-A: 1, 10, 11, 12, 13, 14), listed in ascending order wherever a list appears.
/// Cubes: any element type and layout (host views are read where they are). Inputs may live on a
/// device: a CUDA context downloads them and runs these CPU references for now (the GPU kernels of
/// the vote and the SVM prediction come later behind the same functions).
/// Throws InvalidInput naming the input or field: shapes that differ, a label that is negative,
/// fractional, NaN or above 2^31−1, options out of range, no training pixel, too few classes.
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cubekit/context.hpp"
#include "cubekit/tiles.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/io.hpp"
#include "cubekit/options.hpp"

namespace cubekit {

/// A label image as a W×H×1 i32 host cube (BSQ), every value checked to be a whole number in
/// 0..2^31−1 (e.g. a MATLAB ground-truth map read as f64). Throws InvalidInput naming "labels" and the
/// first bad pixel, or the shape when it has more than one band.
Cube to_label_image(const Context& ctx, const CubeView& labels);

// ---- stratified split ------------------------------------------------------------------------------

/// Options of stratified_split().
struct SplitOptions {
    /// Share of each class's labelled pixels drawn for training: max(1, round(fraction·n_c)).
    double train_fraction = 0.05;
    /// Seed of the SplitMix64 stream that draws them.
    std::uint64_t seed = 0;
};

template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, SplitOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.train_fraction, Field{.name = "train_fraction",
                                  .doc = "share of each class drawn for training: max(1, round(F*n_c)); the rest is tested",
                                  .min = 0.0, .max = 1.0, .min_exclusive = true});
    visit(o.seed, Field{.name = "seed", .doc = "seed of the stratified split (and of the SVM's cross-validation folds)"});
}

/// One class of a split.
struct ClassCount {
    std::int32_t label = 0;
    std::int64_t total = 0, train = 0, test = 0;
};

struct Split {
    Cube train;  ///< W×H×1 i32: the training pixels keep their class, others 0
    Cube test;   ///< W×H×1 i32: the labelled pixels not drawn for training
    std::vector<ClassCount> classes;  ///< ascending labels
};

/// Seeded stratified split of a truth map: class c (n_c pixels) gets m_c = max(1, round(F·n_c))
/// training pixels (round half away from zero), drawn by one SplitMix64{seed} stream over the classes
/// in ascending order: with p_0..p_{n−1} the class's pixels in raster order, for i = 0..m_c−1,
/// j = i + ⌊u·(n_c − i)⌋ (u = uniform(), the next draw), swap p_i and p_j; p_0..p_{m_c−1} train.
///
///     truth (one class, 4 pixels), train_fraction 0.5  →  2 training pixels, 2 test pixels
Split stratified_split(const Context& ctx, const CubeView& truth, const SplitOptions& options = {});

// ---- pixel-wise classifiers --------------------------------------------------------------------------

/// The pixel-wise classifiers: RBF-kernel SVM (LIBSVM C-SVC), spectral angle to the class means,
/// Euclidean distance to the class means.
enum class Classifier { Svm, Sam, MinDist };
template <>
struct EnumNames<Classifier> {
    static constexpr EnumName<Classifier> names[] = {
        {Classifier::Svm, "svm"}, {Classifier::Sam, "sam"}, {Classifier::MinDist, "mindist"}};
    static constexpr EnumName<Classifier> aliases[] = {{Classifier::MinDist, "min-distance"},
                                                       {Classifier::MinDist, "minimum-distance"}};
};

/// Class mean spectra, the model of the SAM and minimum-distance classifiers.
struct ClassMeans {
    Classifier classifier = Classifier::MinDist;  ///< Sam or MinDist
    std::vector<std::int32_t> classes;            ///< K labels, ascending
    std::vector<std::int64_t> counts;             ///< training pixels per class
    int bands = 0;
    std::vector<double> means;                    ///< K×bands, row-major, f64
};

/// The mean spectrum (f64, pixels in raster order) of each class of `train` (nonzero labels). Pixels
/// with a non-finite band are left out. `classifier`: Sam or MinDist (stored in the model).
ClassMeans train_class_means(const Context& ctx, const CubeView& cube, const CubeView& train, Classifier classifier);

/// Class of every pixel: MinDist the class whose mean is nearest (Σ_b (x_b − m_b)², f64, bands in
/// order); Sam the smallest spectral angle, i.e. the largest cos = x·m / (‖x‖ ‖m‖) (f64). Ties go
/// to the lowest class. A pixel with a non-finite band, or (Sam) a zero spectrum, gets 0; Sam skips a
/// class whose mean is zero. Returns W×H×1 i32.
///
///     classes 1 (mean 0) and 2 (mean 10), one band; pixels 4 5 6  →  mindist 1 1 2 (5: a tie, the lower class)
Cube predict_class_means(const Context& ctx, const CubeView& cube, const ClassMeans& model);

/// Options of train_svm(). The grid of the cross-validation (when svm_c or svm_gamma is auto):
///     C ∈ {1, 10, 100, 1000, 10000},  γ ∈ {1/16, 1/4, 1, 4, 16} / B   (B = bands; the inputs are
///     scaled to [−1, 1] per band, so γ·B sets the kernel's width whatever the band count)
/// Each point is scored by LIBSVM's svm_cross_validation (cv_folds folds, stratified by LIBSVM; the
/// folds drawn with the C library's rand() after srand(seed), under a lock: reproducible on one C
/// library). The best accuracy wins; ties go to the first point (C ascending, then γ ascending).
struct SvmOptions {
    /// Folds of the cross-validation (LIBSVM caps them at the training pixel count).
    int cv_folds = 5;
    /// C of the C-SVC; 0 = chosen by cross-validation over the grid.
    double svm_c = 0;
    /// γ of the kernel exp(−γ‖x − y‖²) on the scaled inputs; 0 = chosen by cross-validation.
    double svm_gamma = 0;
    /// Seed of the folds (front ends pass the split's seed).
    std::uint64_t seed = 0;
};

template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, SvmOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.cv_folds, Field{.name = "cv_folds", .doc = "folds of the SVM's cross-validation of C and gamma", .min = 2});
    visit(o.svm_c, Field{.name = "svm_c", .doc = "SVM C (default: cross-validated over 1, 10, ..., 10000)", .min = 0.0,
                         .min_exclusive = true, .automatic = 0.0});
    visit(o.svm_gamma, Field{.name = "svm_gamma",
                             .doc = "RBF gamma on inputs scaled to [-1, 1] (default: cross-validated over {1/16..16}/bands)",
                             .min = 0.0, .min_exclusive = true, .automatic = 0.0});
    visit(o.seed, Field{.name = "seed", .doc = "seed of the cross-validation folds", .flag = false});
}

/// One point of the cross-validation grid and its accuracy (correct / training pixels).
struct SvmGridPoint {
    double c = 0, gamma = 0, accuracy = 0;
};

/// A trained RBF C-SVC, one-against-one over K classes, in LIBSVM's layout (svm.h: struct svm_model).
/// Inputs are scaled per band as svm-scale does: x' = −1 + 2(x − min_b)/(max_b − min_b) with the
/// training pixels' min and max (a constant band gives 0); the support vectors are scaled spectra.
struct SvmModel {
    std::vector<std::int32_t> classes;    ///< K labels in LIBSVM's order (ascending: training is fed sorted)
    int bands = 0;
    double c = 0, gamma = 0;
    std::vector<double> scale_min, scale_max;  ///< per band
    std::vector<std::int32_t> sv_count;   ///< support vectors per class (LIBSVM nSV), in class order
    std::vector<double> support_vectors;  ///< n_sv × bands, row-major, grouped by class
    std::vector<double> coef;             ///< (K − 1) × n_sv (LIBSVM sv_coef)
    std::vector<double> rho;              ///< K(K − 1)/2, pairs (i, j), i < j, in order
    double cv_accuracy = std::numeric_limits<double>::quiet_NaN();  ///< of the chosen point; NaN if none
    std::vector<SvmGridPoint> grid;       ///< every point tried (empty when C and γ were given)
    std::int64_t training_pixels = 0;
    std::size_t num_sv() const { return sv_count.empty() ? 0 : support_vectors.size() / std::size_t(bands); }
};

/// Trains the SVM on the pixels of `cube` with a nonzero label in `train` (pixels with a non-finite
/// band are left out), after choosing C and γ (SvmOptions). Needs ≥ 2 classes. CPU only (LIBSVM).
SvmModel train_svm(const Context& ctx, const CubeView& cube, const CubeView& train, const SvmOptions& options = {});

/// Who evaluates the decision functions: cubekit's own f64 twin of LIBSVM's svm_predict_values (the
/// reference of the GPU kernel), or LIBSVM itself (for comparison).
enum class SvmEngine { Cubekit, Libsvm };
template <>
struct EnumNames<SvmEngine> {
    static constexpr EnumName<SvmEngine> names[] = {{SvmEngine::Cubekit, "cubekit"}, {SvmEngine::Libsvm, "libsvm"}};
};

struct SvmPredictOptions {
    SvmEngine engine = SvmEngine::Cubekit;
    /// Also return the K(K − 1)/2 decision values of every pixel.
    bool decision_values = false;
};

struct SvmPrediction {
    Cube classes;          ///< W×H×1 i32; 0 where a band is not finite
    Cube decision_values;  ///< W×H×K(K−1)/2 f64 BIP (empty unless asked); NaN where classes is 0
    std::int64_t non_finite = 0;  ///< pixels with a non-finite band
};

/// Class of every pixel. Per pair (i, j), i < j: f_ij(x) = Σ_{s ∈ SV_i} coef[j−1][s]·K(x, s) +
/// Σ_{s ∈ SV_j} coef[i][s]·K(x, s) − ρ_ij, K(x, s) = exp(−γ Σ_b (x_b − s_b)²) in f64, bands in order,
/// SVs in order; f_ij > 0 votes i, else j; the class with the most votes wins, ties to the lowest
/// index in `classes` (LIBSVM's rules). The twin gives LIBSVM's labels; its decision values agree
/// within rounding (equal when libm's exp and the compilers' arithmetic are the same).
SvmPrediction predict_svm(const Context& ctx, const CubeView& cube, const SvmModel& model,
                          const SvmPredictOptions& options = {});

/// The pixel-wise maps in tiles (issue 17): `classes` is a host W×H×1 i32 view (any strides); each
/// tile is predicted on its own (halo 0), so the map equals predict_svm's / predict_class_means'
/// classes exactly. Tiles as tiles.hpp's options (budgets, devices). The cube is a host view, or a
/// file read by windows (a scene larger than memory, classified with a saved model).
///
///     cubekit::Cube map(W, H, 1, cubekit::DType::I32);
///     cubekit::predict_svm_tiled(gpu, cube, model, map.mutable_view(), {.device_memory_limit = 1ull << 30});
TiledRun predict_svm_tiled(const Context& ctx, const CubeView& cube, const SvmModel& model, const MutableCubeView& classes,
                           const TileOptions& tiles = {});
TiledRun predict_svm_tiled(const Context& ctx, const CubeFile& cube, const SvmModel& model, const MutableCubeView& classes,
                           const TileOptions& tiles = {});
TiledRun predict_class_means_tiled(const Context& ctx, const CubeView& cube, const ClassMeans& model,
                                   const MutableCubeView& classes, const TileOptions& tiles = {});
TiledRun predict_class_means_tiled(const Context& ctx, const CubeFile& cube, const ClassMeans& model,
                                   const MutableCubeView& classes, const TileOptions& tiles = {});

/// The model as LIBSVM's model file at `path` (svm_save_model: support vectors with 8 significant
/// digits, coefficients with 17) and the scaling beside it at `path` + ".scaling.json" ({"format":
/// "cubekit-svm-scaling", "bands", "lower": −1, "upper": 1, "min": [...], "max": [...], "c", "gamma",
/// "cv_accuracy", "grid"}). A model read back predicts with the 8-digit support vectors: decision
/// values within ~1e-7 of the trained model's. Throws IoError when a file cannot be written.
void write_svm_model(const SvmModel& model, const std::filesystem::path& path);
/// Reads both files. Throws IoError (missing file), InvalidInput (not an RBF C-SVC, bad scaling file).
SvmModel read_svm_model(const std::filesystem::path& path);

/// Class means as JSON: {"format": "cubekit-class-means", "classifier", "bands", "classes",
/// "counts", "means": [[...], ...]}.
void write_class_means(const ClassMeans& model, const std::filesystem::path& path);
ClassMeans read_class_means(const std::filesystem::path& path);

// ---- a trained classifier of any kind ------------------------------------------------------------------

/// A trained pixel-wise classifier: the SVM (svm set) or the class means (means set), what
/// train_classifier returns, a saved model file reads back as, and predict_classifier applies.
///
///     cubekit::ClassifierModel m = cubekit::train_classifier(cpu, cube, train, cubekit::Classifier::Sam);
///     cubekit::write_classifier_model(m, "sam.json");
///     cubekit::Cube map = cubekit::predict_classifier(gpu, other_scene, cubekit::read_classifier_model("sam.json"));
struct ClassifierModel {
    Classifier classifier = Classifier::Svm;
    std::optional<SvmModel> svm;
    std::optional<ClassMeans> means;
    int bands() const { return svm ? svm->bands : means ? means->bands : 0; }
    const std::vector<std::int32_t>& classes() const;
};

/// train_svm (Svm, with `svm`'s options) or train_class_means (Sam, MinDist) on the labelled pixels of `train`.
ClassifierModel train_classifier(const Context& ctx, const CubeView& cube, const CubeView& train, Classifier classifier,
                                 const SvmOptions& svm = {});
/// The same from a cube file larger than memory: the rows holding training pixels are read a strip
/// at a time (`memory_limit` bytes a strip, 0 = 256 MiB) and only the labelled pixels' spectra are
/// kept, in raster order, so the model is the one trained on the whole cube (the same training set,
/// bit for bit). `train` is the W×H label image in host or device memory.
ClassifierModel train_classifier(const Context& ctx, const CubeFile& cube, const CubeView& train, Classifier classifier,
                                 const SvmOptions& svm = {}, std::size_t memory_limit = 0);
/// The class of every pixel (W×H×1 i32): predict_svm's classes or predict_class_means'.
Cube predict_classifier(const Context& ctx, const CubeView& cube, const ClassifierModel& model);
/// The same in tiles (predict_svm_tiled / predict_class_means_tiled): a host view or a file read by windows.
TiledRun predict_classifier_tiled(const Context& ctx, const CubeView& cube, const ClassifierModel& model,
                                  const MutableCubeView& classes, const TileOptions& tiles = {});
TiledRun predict_classifier_tiled(const Context& ctx, const CubeFile& cube, const ClassifierModel& model,
                                  const MutableCubeView& classes, const TileOptions& tiles = {});
/// write_svm_model or write_class_means, by the model's kind.
void write_classifier_model(const ClassifierModel& model, const std::filesystem::path& path);
/// A class-means JSON file (it starts with '{') or a LIBSVM model with its scaling file. Throws as
/// read_class_means / read_svm_model.
ClassifierModel read_classifier_model(const std::filesystem::path& path);

// ---- majority vote inside regions (spec part C step 4, Decision C-1) --------------------------------

struct VoteOptions {
    /// τ: relabel a region only when n_c*/|R| ≥ τ (|R| counts every pixel of the region).
    double tau = 0;
};

template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, VoteOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.tau, Field{.name = "tau", .doc = "relabel a region only when its winning class holds >= tau of its pixels",
                       .min = 0.0, .max = 1.0});
}

/// What the vote did, per region (regions = distinct nonzero labels).
struct VoteStats {
    std::int64_t regions = 0;
    std::int64_t relabelled = 0;  ///< regions whose pixels all received c*
    std::int64_t ties = 0;        ///< kept: two classes tied for the maximum
    std::int64_t no_voters = 0;   ///< kept: no pixel of the region has a class
    std::int64_t below_tau = 0;   ///< kept: n_c*/|R| < τ
    std::int64_t changed_pixels = 0;  ///< pixels whose class changed
};

struct VoteResult {
    Cube classes;  ///< W×H×1 i32
    VoteStats stats;
};

/// Majority vote: for region R, n_c = #{p ∈ R : C(p) = c} over the pixels with C(p) ≠ 0, c* the
/// arg-max. R keeps its pixel-wise classes when two classes tie for the maximum, when no pixel
/// votes, or when n_c*/|R| < τ (f64 division, as written); otherwise every pixel of R, voters or
/// not, receives c*. Pixels of region 0 keep their class. Integer counts: exact and deterministic.
///
///     regions  1 1 1 2 2 2 3 3      class_map  5 5 7 4 6 0 0 0
///     result   5 5 5 4 6 0 0 0      region 1: 5 wins 2:1; region 2: tie 4/6, kept; region 3: no voters
VoteResult region_vote(const Context& ctx, const CubeView& regions, const CubeView& class_map,
                       const VoteOptions& options = {});

/// The vote into a caller's W×H×1 i32 view in the context's memory (device memory for a CUDA
/// context: computed on the host from downloaded inputs for now, then copied).
VoteStats region_vote_into(const Context& ctx, const CubeView& regions, const CubeView& class_map,
                           const MutableCubeView& out, const VoteOptions& options = {});

// ---- scores (spec part C step 5) ---------------------------------------------------------------------

/// Scores of a class map on the labelled pixels of a truth map (truth 0 = not scored).
struct ClassificationScores {
    /// The classes of the matrix, ascending: every truth class and every predicted value met on a
    /// scored pixel (0 when some scored pixel has no prediction).
    std::vector<std::int32_t> classes;
    std::vector<std::int64_t> confusion;  ///< K×K row-major: row = truth, column = predicted
    std::vector<std::int64_t> counts;     ///< scored pixels per class (the row sums)
    std::vector<double> per_class_accuracy;  ///< diagonal / row sum; NaN for a class without truth pixels
    std::int64_t total = 0, correct = 0;
    double oa = 0;     ///< correct / total
    double aa = 0;     ///< mean per-class accuracy over the truth classes
    double kappa = 0;  ///< (p_o − p_e)/(1 − p_e), p_o = OA, p_e = Σ_c row_c·col_c / total²; NaN when p_e = 1
};

/// Scores of `predicted` against `truth` (both label images of one shape). Throws InvalidInput when
/// truth has no labelled pixel.
///
///     truth 1 1 2 2   predicted 1 2 2 2   →  OA 0.75, AA (0.5 + 1)/2 = 0.75, p_e = (2·1 + 2·3)/16 = 0.5, κ 0.5
ClassificationScores classification_scores(const Context& ctx, const CubeView& predicted, const CubeView& truth);

}  // namespace cubekit
