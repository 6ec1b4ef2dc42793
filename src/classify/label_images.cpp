// Label images of the classification family (classify.hpp): checks, i32 values, and the seeded
// stratified split of a truth map.
#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "classify/classify_internal.hpp"
#include "core/view_sample.hpp"
#include "cubekit/error.hpp"
#include "cubekit/synth.hpp"

namespace cubekit::detail {

CubeView host_input(const Context& ctx, const CubeView& input, Layout layout, std::optional<CubeInLayout>& storage) {
    if (!input.on_device()) return input;
    storage.emplace(ctx, input, layout, Memory::Host);
    return storage->view();
}

void check_label_image(const CubeView& labels, const char* function, const char* what, int width, int height,
                       const char* of) {
    const std::string size = std::to_string(labels.width()) + "x" + std::to_string(labels.height()) + "x" +
                             std::to_string(labels.bands());
    if (labels.bands() != 1 || labels.empty())
        throw InvalidInput(std::string(function) + ": " + what + " is " + size + "; expected a one-band image (W x H x 1)");
    if (width > 0 && (labels.width() != width || labels.height() != height))
        throw InvalidInput(std::string(function) + ": " + what + " is " + size + "; expected " + std::to_string(width) +
                           "x" + std::to_string(height) + " (the " + of + "'s size)");
}

void check_cube(const CubeView& cube, const char* function) {
    if (cube.empty())
        throw InvalidInput(std::string(function) + ": the cube is " + std::to_string(cube.width()) + "x" +
                           std::to_string(cube.height()) + "x" + std::to_string(cube.bands()) +
                           "; width, height and bands must be at least 1");
}

std::vector<std::int32_t> label_values(const Context& ctx, const CubeView& labels, const char* function,
                                       const char* what) {
    std::optional<CubeInLayout> storage;
    const CubeView v = host_input(ctx, labels, Layout::BSQ, storage);
    const int W = v.width(), H = v.height();
    std::vector<std::int32_t> out(std::size_t(W) * std::size_t(H));
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const double value = sample_as_double(v, x, y, 0);
            if (!(value >= 0 && value <= double(INT_MAX) && value == std::floor(value)))
                throw InvalidInput(std::string(function) + ": " + what + " at (x " + std::to_string(x) + ", y " +
                                   std::to_string(y) + ") is " + number_text(value) +
                                   "; expected a whole number in 0..2147483647 (0 = none)");
            out[std::size_t(y) * std::size_t(W) + std::size_t(x)] = std::int32_t(value);
        }
    return out;
}

bool spectrum_at(const CubeView& cube, int x, int y, std::vector<double>& out) {
    out.resize(std::size_t(cube.bands()));
    return visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const StridedView<const T> v = cube.typed<T>();
        bool finite = true;
        for (int b = 0; b < v.bands; ++b) {
            out[std::size_t(b)] = double(v(x, y, b));
            finite = finite && std::isfinite(out[std::size_t(b)]);
        }
        return finite;
    });
}

TrainingSet training_set(const Context& ctx, const CubeView& cube, const CubeView& train, const char* function) {
    check_label_image(train, function, "train", cube.width(), cube.height());
    const std::vector<std::int32_t> labels = label_values(ctx, train, function, "train");
    TrainingSet set;
    set.bands = cube.bands();
    set.classes = distinct_labels(labels);
    if (set.classes.empty()) throw InvalidInput(std::string(function) + ": train has no labelled pixel (all are 0)");
    std::vector<double> s;
    for (std::int32_t c : set.classes) {
        const std::size_t before = set.size();
        for (std::size_t p = 0; p < labels.size(); ++p) {
            if (labels[p] != c) continue;
            const int x = int(p % std::size_t(cube.width())), y = int(p / std::size_t(cube.width()));
            if (!spectrum_at(cube, x, y, s)) {
                ++set.non_finite;
                continue;
            }
            set.labels.push_back(c);
            set.spectra.insert(set.spectra.end(), s.begin(), s.end());
        }
        if (set.size() == before)
            throw InvalidInput(std::string(function) + ": train: every pixel of class " + std::to_string(c) +
                               " has a non-finite band");
    }
    return set;
}

Cube label_cube(int width, int height, const std::vector<std::int32_t>& values) {
    Cube out = Cube::uninitialized(width, height, 1, DType::I32, Layout::BSQ);
    std::copy(values.begin(), values.end(), out.data<std::int32_t>());
    return out;
}

std::vector<std::int32_t> distinct_labels(const std::vector<std::int32_t>& values) {
    std::vector<std::int32_t> out;
    for (std::int32_t v : values)
        if (v != 0) out.push_back(v);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

}  // namespace cubekit::detail

namespace cubekit {

Cube to_label_image(const Context& ctx, const CubeView& labels) {
    detail::check_label_image(labels, "to_label_image", "labels");
    return detail::label_cube(labels.width(), labels.height(), detail::label_values(ctx, labels, "to_label_image", "labels"));
}

Split stratified_split(const Context& ctx, const CubeView& truth, const SplitOptions& options) {
    check_fields(options, "stratified_split");
    detail::check_label_image(truth, "stratified_split", "truth");
    const std::vector<std::int32_t> labels = detail::label_values(ctx, truth, "stratified_split", "truth");
    const std::vector<std::int32_t> classes = detail::distinct_labels(labels);
    if (classes.empty()) throw InvalidInput("stratified_split: truth has no labelled pixel (all are 0)");
    std::vector<std::vector<std::size_t>> members(classes.size());  // each class's pixels in raster order
    for (std::size_t p = 0; p < labels.size(); ++p)
        if (labels[p] != 0)
            members[std::size_t(std::lower_bound(classes.begin(), classes.end(), labels[p]) - classes.begin())].push_back(p);
    std::vector<std::int32_t> train(labels.size(), 0), test = labels;
    SplitMix64 rng{options.seed};
    Split split;
    for (std::size_t k = 0; k < classes.size(); ++k) {
        const std::int32_t c = classes[k];
        std::vector<std::size_t>& pixels = members[k];
        const auto n = std::int64_t(pixels.size());
        const std::int64_t m = std::clamp<std::int64_t>(std::llround(options.train_fraction * double(n)), 1, n);
        for (std::int64_t i = 0; i < m; ++i) {  // a partial Fisher–Yates shuffle
            const std::int64_t j = std::min(n - 1, i + std::int64_t(rng.uniform() * double(n - i)));
            std::swap(pixels[std::size_t(i)], pixels[std::size_t(j)]);
            train[pixels[std::size_t(i)]] = c;
            test[pixels[std::size_t(i)]] = 0;
        }
        split.classes.push_back({c, n, m, n - m});
    }
    split.train = detail::label_cube(truth.width(), truth.height(), train);
    split.test = detail::label_cube(truth.width(), truth.height(), test);
    return split;
}

}  // namespace cubekit
