// The class-mean classifiers (classify.hpp): minimum Euclidean distance and spectral angle (SAM) to
// the mean spectrum of each training class, CPU reference, and their JSON model file.
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "core/json_numbers.hpp"
#include "classify/classify_internal.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"

namespace cubekit {
namespace {

// Nearest mean by Σ_b (x_b − m_b)²; the first (lowest) class wins a tie.
std::int32_t nearest_mean(const double* x, const ClassMeans& m) {
    const int B = m.bands;
    double best = std::numeric_limits<double>::infinity();
    std::int32_t winner = 0;
    for (std::size_t k = 0; k < m.classes.size(); ++k) {
        const double* mean = m.means.data() + k * std::size_t(B);
        double d = 0;
        for (int b = 0; b < B; ++b) d += (x[b] - mean[b]) * (x[b] - mean[b]);
        if (d < best) best = d, winner = m.classes[k];
    }
    return winner;
}

// Smallest angle = largest cosine x·m / (‖x‖ ‖m‖); a zero spectrum has no angle (0), a zero mean is
// skipped; the first (lowest) class wins a tie.
std::int32_t smallest_angle(const double* x, const ClassMeans& m, const std::vector<double>& mean_norm) {
    const int B = m.bands;
    double xx = 0;
    for (int b = 0; b < B; ++b) xx += x[b] * x[b];
    if (xx == 0) return 0;
    double best = -std::numeric_limits<double>::infinity();
    std::int32_t winner = 0;
    for (std::size_t k = 0; k < m.classes.size(); ++k) {
        if (mean_norm[k] == 0) continue;
        const double* mean = m.means.data() + k * std::size_t(B);
        double dot = 0;
        for (int b = 0; b < B; ++b) dot += x[b] * mean[b];
        const double cosine = dot / (std::sqrt(xx) * mean_norm[k]);
        if (cosine > best) best = cosine, winner = m.classes[k];
    }
    return winner;
}

void check_means(const ClassMeans& m, int bands, const char* function) {
    if (m.classifier != Classifier::Sam && m.classifier != Classifier::MinDist)
        throw InvalidInput(std::string(function) + ": model.classifier = " + std::string(enum_name(m.classifier)) +
                           "; expected sam or mindist");
    if (m.classes.empty() || m.means.size() != m.classes.size() * std::size_t(m.bands))
        throw InvalidInput(std::string(function) + ": the model has " + std::to_string(m.classes.size()) + " classes and " +
                           std::to_string(m.means.size()) + " mean values; expected K >= 1 classes and K*bands values");
    if (m.bands != bands)
        throw InvalidInput(std::string(function) + ": the model has " + std::to_string(m.bands) + " bands, the cube " +
                           std::to_string(bands));
}

}  // namespace

ClassMeans train_class_means(const Context& ctx, const CubeView& cube, const CubeView& train, Classifier classifier) {
    detail::check_cube(cube, "train_class_means");
    std::optional<CubeInLayout> storage;
    const CubeView host = detail::host_input(ctx, cube, Layout::BIP, storage);
    const detail::TrainingSet set = detail::training_set(ctx, host, train, "train_class_means");
    ClassMeans m;
    m.classifier = classifier;
    m.classes = set.classes;
    m.bands = set.bands;
    m.counts.assign(m.classes.size(), 0);
    m.means.assign(m.classes.size() * std::size_t(m.bands), 0.0);
    std::size_t k = 0;
    for (std::size_t i = 0; i < set.size(); ++i) {  // samples are sorted by class, raster order inside
        while (m.classes[k] != set.labels[i]) ++k;
        ++m.counts[k];
        for (int b = 0; b < m.bands; ++b) m.means[k * std::size_t(m.bands) + std::size_t(b)] += set.spectra[i * std::size_t(m.bands) + std::size_t(b)];
    }
    for (std::size_t c = 0; c < m.classes.size(); ++c)
        for (int b = 0; b < m.bands; ++b) m.means[c * std::size_t(m.bands) + std::size_t(b)] /= double(m.counts[c]);
    check_means(m, m.bands, "train_class_means");
    return m;
}

Cube predict_class_means(const Context& ctx, const CubeView& cube, const ClassMeans& model) {
    detail::check_cube(cube, "predict_class_means");
    check_means(model, cube.bands(), "predict_class_means");
    ctx.log("predict_class_means: cpu reference, " + std::string(enum_name(model.classifier)) + ", " + cube.describe());
    std::optional<CubeInLayout> storage;
    const CubeView host = detail::host_input(ctx, cube, Layout::BIP, storage);
    std::vector<double> mean_norm(model.classes.size(), 0.0);
    for (std::size_t k = 0; k < model.classes.size(); ++k) {
        for (int b = 0; b < model.bands; ++b)
            mean_norm[k] += model.means[k * std::size_t(model.bands) + std::size_t(b)] *
                            model.means[k * std::size_t(model.bands) + std::size_t(b)];
        mean_norm[k] = std::sqrt(mean_norm[k]);
    }
    const int W = host.width();
    std::vector<std::int32_t> out(host.num_pixels(), 0);
    detail::for_each_spectrum(ctx, host, "predict_class_means", [&](int x, int y, const double* s, bool finite) {
        if (!finite) return;
        out[std::size_t(y) * std::size_t(W) + std::size_t(x)] =
            model.classifier == Classifier::Sam ? smallest_angle(s, model, mean_norm) : nearest_mean(s, model);
    });
    return detail::label_cube(W, host.height(), out);
}

// ---- model file --------------------------------------------------------------------------------------

void write_class_means(const ClassMeans& model, const std::filesystem::path& path) {
    check_means(model, model.bands, "write_class_means");
    nlohmann::ordered_json j;
    j["format"] = "cubekit-class-means";
    j["classifier"] = enum_name(model.classifier);
    j["bands"] = model.bands;
    j["classes"] = model.classes;
    j["counts"] = model.counts;
    nlohmann::ordered_json means = nlohmann::ordered_json::array();
    for (std::size_t k = 0; k < model.classes.size(); ++k)
        means.push_back(std::vector<double>(model.means.begin() + std::ptrdiff_t(k * std::size_t(model.bands)),
                                            model.means.begin() + std::ptrdiff_t((k + 1) * std::size_t(model.bands))));
    j["means"] = means;
    write_text_file(path, detail::one_key_per_line(j));
}

ClassMeans read_class_means(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in) throw IoError("read_class_means: " + path.string() + ": cannot open");
    std::stringstream text;
    text << in.rdbuf();
    const std::string where = "read_class_means: " + path.string() + ": ";
    ClassMeans m;
    try {
        const nlohmann::json j = nlohmann::json::parse(text.str());
        if (j.value("format", "") != "cubekit-class-means")
            throw InvalidInput(where + "not a class-means file (\"format\" is not \"cubekit-class-means\")");
        m.classifier = parse_enum<Classifier>(j.at("classifier").get<std::string>(), where + "classifier");
        m.bands = detail::json_integer<int>(j.at("bands"), where + "bands");
        m.classes = detail::json_integers<std::int32_t>(j.at("classes"), where + "classes");
        m.counts = detail::json_integers<std::int64_t>(j.at("counts"), where + "counts");
        for (const auto& row : j.at("means")) {
            const auto v = row.get<std::vector<double>>();
            if (v.size() != std::size_t(m.bands))
                throw InvalidInput(where + "a mean has " + std::to_string(v.size()) + " values; expected bands = " +
                                   std::to_string(m.bands));
            m.means.insert(m.means.end(), v.begin(), v.end());
        }
    } catch (const nlohmann::json::exception& e) {
        throw InvalidInput(where + json_reason(e.what()));
    }
    check_means(m, m.bands, "read_class_means");
    return m;
}

}  // namespace cubekit
