#pragma once
// What the classification files share: label images as checked i32 values, inputs brought to the
// host, a loop over every pixel's spectrum in f64, and a LIBSVM svm_model over an SvmModel's arrays.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/parallel.hpp"
#include "cubekit/classify.hpp"
#include "cubekit/cube.hpp"

struct svm_model;
struct svm_node;

namespace cubekit::detail {

/// The input where the CPU reads it: itself (any host view), or one download (a CUDA context with
/// device memory), dense in `layout`.
CubeView host_input(const Context& ctx, const CubeView& input, Layout layout, std::optional<CubeInLayout>& storage);

/// Throws InvalidInput "<function>: <what> is WxHxB; expected a one-band image (W×H×1)" or, with
/// width > 0, "...; expected <width>x<height> (the <of>'s size)".
void check_label_image(const CubeView& labels, const char* function, const char* what, int width = 0, int height = 0,
                       const char* of = "cube");

/// A label image's values in raster order (y·W + x), each checked: a whole number in 0..2^31−1.
/// Throws InvalidInput naming `what` and the first bad pixel. Host or device input.
std::vector<std::int32_t> label_values(const Context& ctx, const CubeView& labels, const char* function, const char* what);

/// A W×H×1 i32 BSQ host cube holding `values` (raster order).
Cube label_cube(int width, int height, const std::vector<std::int32_t>& values);

/// The distinct nonzero values, ascending.
std::vector<std::int32_t> distinct_labels(const std::vector<std::int32_t>& values);

/// Throws InvalidInput unless `cube` is a non-empty host-readable cube (function: its name).
void check_cube(const CubeView& cube, const char* function);

/// The B samples of pixel (x, y) of a host view as double; false when one is not finite.
bool spectrum_at(const CubeView& cube, int x, int y, std::vector<double>& out);

/// The training pixels of a label image: samples sorted by class (ascending), then in raster order;
/// pixels with a non-finite band left out (and counted).
struct TrainingSet {
    int bands = 0;
    std::vector<std::int32_t> classes;  ///< distinct labels, ascending
    std::vector<std::int32_t> labels;   ///< one per sample
    std::vector<double> spectra;        ///< samples × bands, as read (unscaled)
    std::int64_t non_finite = 0;
    std::size_t size() const { return labels.size(); }
};

/// Checks `train` against the host cube (size, values) and gathers its pixels. Throws InvalidInput
/// naming `function` and "train": no labelled pixel, a class whose pixels all have a non-finite band.
TrainingSet training_set(const Context& ctx, const CubeView& cube, const CubeView& train, const char* function);

/// Calls body(x, y, spectrum, finite, local) for every pixel of a host view: spectrum holds its B
/// samples as double, finite says whether all are finite, local is the thread's scratch made by
/// make_local(). Rows run in parallel (parallel_for); a body writes only its own pixel's results.
template <class MakeLocal, class Body>
void for_each_spectrum(const Context& ctx, const CubeView& cube, const char* where, MakeLocal&& make_local, Body&& body) {
    using Local = std::decay_t<std::invoke_result_t<MakeLocal&>>;
    struct Scratch {
        std::vector<double> s;
        Local local;
    };
    visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const StridedView<const T> v = cube.typed<T>();
        parallel_for(
            ctx, v.height, {.where = where, .progress = true},
            [&] { return Scratch{std::vector<double>(std::size_t(v.bands)), make_local()}; },
            [&](std::int64_t row, Scratch& scratch) {
                const int y = int(row);
                double* s = scratch.s.data();
                for (int x = 0; x < v.width; ++x) {
                    bool finite = true;
                    for (int b = 0; b < v.bands; ++b) {
                        s[b] = double(v(x, y, b));
                        finite = finite && std::isfinite(s[b]);
                    }
                    body(x, y, static_cast<const double*>(s), finite, scratch.local);
                }
            });
    });
}

/// for_each_spectrum without scratch: body(x, y, spectrum, finite).
template <class Body>
void for_each_spectrum(const Context& ctx, const CubeView& cube, const char* where, Body&& body) {
    struct None {};
    for_each_spectrum(ctx, cube, where, [] { return None{}; },
                      [&](int x, int y, const double* s, bool finite, None&) { body(x, y, s, finite); });
}

/// A JSON object as text for files people read: one key per line, each value on its line.
template <class Json>
std::string one_key_per_line(const Json& object) {
    std::string text = "{";
    for (auto it = object.begin(); it != object.end(); ++it)
        text += std::string(it == object.begin() ? "\n " : ",\n ") + Json(it.key()).dump() + ": " + it.value().dump();
    return text + "\n}\n";
}

/// svm-scale's rule: x' = −1 + 2(x − min)/(max − min) per band; 0 for a constant band.
inline double scale_band(double x, double lo, double hi) {
    return hi == lo ? 0.0 : -1.0 + 2.0 * (x - lo) / (hi - lo);
}

/// A LIBSVM svm_model over a copy of an SvmModel's arrays (dense nodes 1..B, then −1), for
/// svm_predict_values and svm_save_model.
class LibsvmModel {
public:
    explicit LibsvmModel(const SvmModel& model);
    ~LibsvmModel();
    LibsvmModel(const LibsvmModel&) = delete;
    LibsvmModel& operator=(const LibsvmModel&) = delete;
    const svm_model* get() const { return model_; }

private:
    svm_model* model_ = nullptr;
    std::vector<svm_node> nodes_;
    std::vector<svm_node*> sv_;
    std::vector<double> coef_, rho_;
    std::vector<double*> coef_rows_;
    std::vector<int> labels_, nsv_;
};

/// Throws InvalidInput naming `function` unless the model is consistent (≥ 2 classes, array sizes,
/// γ > 0) and has `bands` bands.
void check_svm_model(const SvmModel& model, int bands, const char* function);

/// Copies a LIBSVM RBF C-SVC into cubekit's layout (bands: the node indices' range 1..bands).
/// Throws InvalidInput naming `where` for another SVM or kernel type or an index beyond bands.
SvmModel from_libsvm(const svm_model& m, int bands, const std::string& where);

}  // namespace cubekit::detail
