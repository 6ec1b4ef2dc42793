// The RBF-kernel SVM (classify.hpp): training through LIBSVM (C-SVC, one-against-one; C and γ by
// LIBSVM's cross-validation over a small log grid), inputs scaled per band as svm-scale does, and
// the model files (LIBSVM's own model file + the scaling as JSON beside it).
#include <libsvm/svm.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>

#include "core/json_numbers.hpp"
#include "classify/classify_internal.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"

namespace cubekit {
namespace detail {

LibsvmModel::LibsvmModel(const SvmModel& m) : coef_(m.coef), rho_(m.rho) {
    const std::size_t n = m.num_sv(), B = std::size_t(m.bands), K = m.classes.size();
    nodes_.resize(n * (B + 1));
    sv_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        svm_node* row = nodes_.data() + i * (B + 1);
        for (std::size_t b = 0; b < B; ++b) row[b] = {int(b) + 1, m.support_vectors[i * B + b]};
        row[B] = {-1, 0.0};
        sv_[i] = row;
    }
    for (std::size_t k = 0; k + 1 < K; ++k) coef_rows_.push_back(coef_.data() + k * n);
    labels_.assign(m.classes.begin(), m.classes.end());
    nsv_.assign(m.sv_count.begin(), m.sv_count.end());
    model_ = new svm_model{};
    model_->param.svm_type = C_SVC;
    model_->param.kernel_type = RBF;
    model_->param.gamma = m.gamma;
    model_->param.C = m.c;
    model_->nr_class = int(K);
    model_->l = int(n);
    model_->SV = sv_.data();
    model_->sv_coef = coef_rows_.data();
    model_->rho = rho_.data();
    model_->label = labels_.data();
    model_->nSV = nsv_.data();
}

LibsvmModel::~LibsvmModel() { delete model_; }

SvmModel from_libsvm(const svm_model& m, int bands, const std::string& where) {
    if (m.param.svm_type != C_SVC || m.param.kernel_type != RBF)
        throw InvalidInput(where + "not an RBF C-SVC (svm_type " + std::to_string(m.param.svm_type) + ", kernel_type " +
                           std::to_string(m.param.kernel_type) + "; expected c_svc and rbf)");
    // LIBSVM's reader leaves the arrays a model file does not list null (a file without "label" or
    // "nr_sv" lines loads): each is checked before it is read.
    if (m.nr_class < 2 || m.l < 1 || !m.label || !m.nSV || !m.rho || !m.sv_coef || !m.SV)
        throw InvalidInput(where + "an incomplete LIBSVM model (nr_class " + std::to_string(m.nr_class) + ", total_sv " +
                           std::to_string(m.l) + (!m.label ? ", no label line" : "") + (!m.nSV ? ", no nr_sv line" : "") +
                           (!m.rho ? ", no rho line" : "") + ")");
    long long listed = 0;
    for (int k = 0; k < m.nr_class; ++k) listed += m.nSV[k];
    if (listed != m.l)
        throw InvalidInput(where + "nr_sv adds up to " + std::to_string(listed) + "; total_sv is " + std::to_string(m.l));
    SvmModel out;
    const auto K = std::size_t(m.nr_class), n = std::size_t(m.l), B = std::size_t(bands);
    out.bands = bands;
    out.gamma = m.param.gamma;
    out.c = m.param.C;
    out.classes.assign(m.label, m.label + K);
    out.sv_count.assign(m.nSV, m.nSV + K);
    out.support_vectors.assign(n * B, 0.0);  // absent nodes are zeros (LIBSVM's sparse rule)
    for (std::size_t i = 0; i < n; ++i)
        for (const svm_node* p = m.SV[i]; p->index != -1; ++p) {
            if (p->index < 1 || std::size_t(p->index) > B)
                throw InvalidInput(where + "support vector " + std::to_string(i) + " has feature index " +
                                   std::to_string(p->index) + "; the scaling has " + std::to_string(bands) + " bands");
            out.support_vectors[i * B + std::size_t(p->index - 1)] = p->value;
        }
    for (std::size_t k = 0; k + 1 < K; ++k) out.coef.insert(out.coef.end(), m.sv_coef[k], m.sv_coef[k] + n);
    out.rho.assign(m.rho, m.rho + K * (K - 1) / 2);
    return out;
}

}  // namespace detail

namespace {

// LIBSVM's global state: its print function and, for the folds, the C library's rand().
std::mutex& libsvm_mutex() {
    static std::mutex m;
    return m;
}

void quiet(const char*) {}

// The training pixels scaled and in LIBSVM's sparse format (dense here: nodes 1..B, then −1).
struct Problem {
    std::vector<double> y;
    std::vector<svm_node> nodes;
    std::vector<svm_node*> x;
    svm_problem prob{};
};

void build_problem(const detail::TrainingSet& set, const SvmModel& m, Problem& p) {
    const std::size_t n = set.size(), B = std::size_t(set.bands);
    p.y.assign(set.labels.begin(), set.labels.end());
    p.nodes.resize(n * (B + 1));
    p.x.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        svm_node* row = p.nodes.data() + i * (B + 1);
        for (std::size_t b = 0; b < B; ++b)
            row[b] = {int(b) + 1, detail::scale_band(set.spectra[i * B + b], m.scale_min[b], m.scale_max[b])};
        row[B] = {-1, 0.0};
        p.x[i] = row;
    }
    p.prob.l = int(n);
    p.prob.y = p.y.data();
    p.prob.x = p.x.data();
}

svm_parameter rbf_parameter(double c, double gamma) {
    svm_parameter param{};
    param.svm_type = C_SVC;
    param.kernel_type = RBF;
    param.degree = 3;
    param.gamma = gamma;
    param.cache_size = 100;
    param.eps = 1e-3;
    param.C = c;
    param.nu = 0.5;
    param.p = 0.1;
    param.shrinking = 1;
    return param;
}

// Accuracy of one grid point by LIBSVM's cross-validation (caller holds the lock).
double cross_validate(const Problem& p, double c, double gamma, int folds, std::uint64_t seed) {
    const svm_parameter param = rbf_parameter(c, gamma);
    if (const char* error = svm_check_parameter(&p.prob, &param)) throw InvalidInput(std::string("train_svm: ") + error);
    std::vector<double> target(p.y.size());
    std::srand(unsigned(seed ^ (seed >> 32)));
    svm_cross_validation(&p.prob, &param, std::min(folds, p.prob.l), target.data());
    std::size_t correct = 0;
    for (std::size_t i = 0; i < target.size(); ++i) correct += target[i] == p.y[i];
    return double(correct) / double(target.size());
}

// The grid of classify.hpp, or the given value alone.
std::vector<double> grid_values(double given, const std::vector<double>& grid) {
    return given > 0 ? std::vector<double>{given} : grid;
}

// C and γ: the given ones, or the best grid point (ties: the first, C then γ ascending).
void choose_parameters(const Context& ctx, const Problem& p, const SvmOptions& o, SvmModel& m) {
    const std::vector<double> cs = grid_values(o.svm_c, {1, 10, 100, 1000, 10000});
    const double B = m.bands;
    const std::vector<double> gammas = grid_values(o.svm_gamma, {1 / (16 * B), 1 / (4 * B), 1 / B, 4 / B, 16 / B});
    m.c = cs[0], m.gamma = gammas[0];
    if (cs.size() == 1 && gammas.size() == 1) return;
    m.cv_accuracy = -1;
    std::size_t done = 0;
    for (double c : cs)
        for (double gamma : gammas) {
            ctx.check_cancelled("train_svm");
            const double accuracy = cross_validate(p, c, gamma, o.cv_folds, o.seed);
            m.grid.push_back({c, gamma, accuracy});
            if (accuracy > m.cv_accuracy) m.cv_accuracy = accuracy, m.c = c, m.gamma = gamma;
            ctx.progress(++done, cs.size() * gammas.size());
        }
}

}  // namespace

SvmModel train_svm(const Context& ctx, const CubeView& cube, const CubeView& train, const SvmOptions& options) {
    check_fields(options, "train_svm");
    detail::check_cube(cube, "train_svm");
    std::optional<CubeInLayout> storage;
    const CubeView host = detail::host_input(ctx, cube, Layout::BIP, storage);
    const detail::TrainingSet set = detail::training_set(ctx, host, train, "train_svm");
    if (set.classes.size() < 2)
        throw InvalidInput("train_svm: train has one class (" + std::to_string(set.classes[0]) +
                           "); the SVM needs at least 2");
    ctx.log("train_svm: LIBSVM C-SVC, " + std::to_string(set.size()) + " training pixels, " +
            std::to_string(set.classes.size()) + " classes");
    SvmModel m;
    m.bands = set.bands;
    m.training_pixels = std::int64_t(set.size());
    m.scale_min.assign(std::size_t(m.bands), std::numeric_limits<double>::infinity());
    m.scale_max.assign(std::size_t(m.bands), -std::numeric_limits<double>::infinity());
    for (std::size_t i = 0; i < set.size(); ++i)
        for (std::size_t b = 0; b < std::size_t(m.bands); ++b) {
            m.scale_min[b] = std::min(m.scale_min[b], set.spectra[i * std::size_t(m.bands) + b]);
            m.scale_max[b] = std::max(m.scale_max[b], set.spectra[i * std::size_t(m.bands) + b]);
        }
    Problem p;
    build_problem(set, m, p);
    const std::lock_guard<std::mutex> lock(libsvm_mutex());
    svm_set_print_string_function(&quiet);
    choose_parameters(ctx, p, options, m);
    const svm_parameter param = rbf_parameter(m.c, m.gamma);
    svm_model* trained = svm_train(&p.prob, &param);
    SvmModel out = detail::from_libsvm(*trained, m.bands, "train_svm: ");
    svm_free_and_destroy_model(&trained);
    out.scale_min = std::move(m.scale_min), out.scale_max = std::move(m.scale_max);
    out.c = m.c, out.cv_accuracy = m.cv_accuracy, out.grid = std::move(m.grid), out.training_pixels = m.training_pixels;
    return out;
}

// ---- model files ---------------------------------------------------------------------------------------

namespace {

std::filesystem::path scaling_path(const std::filesystem::path& model) { return model.string() + ".scaling.json"; }

std::string scaling_json(const SvmModel& m) {
    nlohmann::ordered_json j;
    j["format"] = "cubekit-svm-scaling";
    j["bands"] = m.bands;
    j["lower"] = -1;
    j["upper"] = 1;
    j["min"] = m.scale_min;
    j["max"] = m.scale_max;
    j["c"] = m.c;
    j["gamma"] = m.gamma;
    j["cv_accuracy"] = std::isnan(m.cv_accuracy) ? nlohmann::ordered_json() : nlohmann::ordered_json(m.cv_accuracy);
    j["training_pixels"] = m.training_pixels;
    nlohmann::ordered_json grid = nlohmann::ordered_json::array();
    for (const SvmGridPoint& g : m.grid) grid.push_back({{"c", g.c}, {"gamma", g.gamma}, {"accuracy", g.accuracy}});
    j["grid"] = grid;
    return detail::one_key_per_line(j);
}

void read_scaling(const std::filesystem::path& path, SvmModel& m) {
    std::ifstream in(path);
    if (!in) throw IoError("read_svm_model: " + path.string() + ": cannot open (the scaling written beside the model)");
    std::stringstream text;
    text << in.rdbuf();
    const std::string where = "read_svm_model: " + path.string() + ": ";
    try {
        const nlohmann::json j = nlohmann::json::parse(text.str());
        if (j.value("format", "") != "cubekit-svm-scaling")
            throw InvalidInput(where + "not a scaling file (\"format\" is not \"cubekit-svm-scaling\")");
        m.bands = detail::json_integer<int>(j.at("bands"), where + "bands");
        m.scale_min = j.at("min").get<std::vector<double>>();
        m.scale_max = j.at("max").get<std::vector<double>>();
        m.c = j.at("c").get<double>();
        if (j.contains("cv_accuracy") && j["cv_accuracy"].is_number()) m.cv_accuracy = j["cv_accuracy"].get<double>();
        m.training_pixels = j.contains("training_pixels") ? detail::json_integer<std::int64_t>(j["training_pixels"], where + "training_pixels") : 0;
        for (const auto& g : j.value("grid", nlohmann::json::array()))
            m.grid.push_back({g.at("c").get<double>(), g.at("gamma").get<double>(), g.at("accuracy").get<double>()});
    } catch (const nlohmann::json::exception& e) {
        throw InvalidInput(where + json_reason(e.what()));
    }
    if (m.bands < 1 || m.scale_min.size() != std::size_t(m.bands) || m.scale_max.size() != std::size_t(m.bands))
        throw InvalidInput(where + "bands = " + std::to_string(m.bands) + " with " + std::to_string(m.scale_min.size()) +
                           " min and " + std::to_string(m.scale_max.size()) + " max values; expected bands of each");
}


// LIBSVM's svm_load_model trusts its file: a support-vector line with fewer fields than the
// model's nr_class − 1 coefficients passes NULL to strtod, a huge nr_class sizes its arrays, and a
// NUL byte makes its line reader grow without end (crashes found by fuzzing). So the text is checked first against what svm_load_model will read:
// the header ends at the first token "SV" (no header value can be one), nr_class and total_sv are
// the last values given, and total_sv lines follow, each with its coefficients.
void check_libsvm_text(const std::filesystem::path& path, const std::string& where) {
    std::ifstream in(path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // A NUL hides a line's end from LIBSVM's readline, which then doubles its buffer once per line
    // that follows until the int size overflows.
    if (text.find('\0') != std::string::npos)
        throw InvalidInput(where + "a NUL byte at offset " + std::to_string(text.find('\0')) + " (not a text file)");
    long long nr_class = -1, total_sv = -1;
    std::size_t at = 0;
    bool header_done = false;
    const auto next_token = [&](std::string& token) {
        at = text.find_first_not_of(" \t\r\n\v\f", at);
        if (at == std::string::npos) return false;
        const std::size_t end = std::min(text.find_first_of(" \t\r\n\v\f", at), text.size());
        token = text.substr(at, end - at);
        at = end;
        return true;
    };
    std::string token, value;
    while (!header_done && next_token(token)) {
        if (token == "SV") header_done = true;
        else if ((token == "nr_class" || token == "total_sv") && next_token(value))
            (token == "nr_class" ? nr_class : total_sv) = std::atoll(value.c_str());
    }
    if (!header_done) return;  // svm_load_model refuses a header without SV itself
    const double pairs = double(nr_class) * double(nr_class - 1) / 2;  // rho values the header must hold
    if (nr_class < 2 || pairs > double(text.size()))
        throw InvalidInput(where + "nr_class " + std::to_string(nr_class) + " is missing or larger than the file can hold");
    std::size_t line = text.find('\n', at);  // the rest of the SV line is skipped
    for (long long i = 0; i < total_sv; ++i) {
        if (line == std::string::npos || line + 1 >= text.size())
            throw InvalidInput(where + "total_sv is " + std::to_string(total_sv) + " but " + std::to_string(i) +
                               " support vectors follow SV");
        const std::size_t begin = line + 1;
        line = text.find('\n', begin);
        const std::string sv = text.substr(begin, (line == std::string::npos ? text.size() : line) - begin);
        long long fields = 0;  // as strtok(" \t") splits it
        for (std::size_t k = 0; k < sv.size();) {
            const std::size_t start = sv.find_first_not_of(" \t", k);
            if (start == std::string::npos) break;
            ++fields;
            k = std::min(sv.find_first_of(" \t", start), sv.size());
        }
        if (fields < nr_class - 1)
            throw InvalidInput(where + "support vector " + std::to_string(i) + " has " + std::to_string(fields) +
                               " field(s); its line needs the " + std::to_string(nr_class - 1) + " coefficient(s) first");
    }
    if (total_sv < 1) throw InvalidInput(where + "total_sv " + std::to_string(total_sv) + " is missing or not positive");
}
}  // namespace

void write_svm_model(const SvmModel& model, const std::filesystem::path& path) {
    detail::check_svm_model(model, model.bands, "write_svm_model");
    const std::filesystem::path temporary = path.parent_path() / ("." + path.filename().string() + ".tmp-svm");
    {
        const detail::LibsvmModel m(model);
        const std::lock_guard<std::mutex> lock(libsvm_mutex());
        if (svm_save_model(temporary.c_str(), m.get()) != 0) {
            std::error_code ec;
            std::filesystem::remove(temporary, ec);
            throw IoError("write_svm_model: " + path.string() + ": cannot write");
        }
    }
    std::error_code ec;
    std::filesystem::rename(temporary, path, ec);
    if (ec) {
        std::filesystem::remove(temporary, ec);
        throw IoError("write_svm_model: " + path.string() + ": cannot write: " + ec.message());
    }
    try {
        write_text_file(scaling_path(path), scaling_json(model));
    } catch (...) {
        std::filesystem::remove(path, ec);
        throw;
    }
}

SvmModel read_svm_model(const std::filesystem::path& path) {
    if (!std::filesystem::is_regular_file(path)) throw IoError("read_svm_model: " + path.string() + ": no such file");
    SvmModel scaling;
    read_scaling(scaling_path(path), scaling);
    check_libsvm_text(path, "read_svm_model: " + path.string() + ": ");
    svm_model* loaded = nullptr;
    {
        const std::lock_guard<std::mutex> lock(libsvm_mutex());
        loaded = svm_load_model(path.c_str());
    }
    if (!loaded) throw InvalidInput("read_svm_model: " + path.string() + ": not a LIBSVM model file");
    SvmModel m;
    try {
        m = detail::from_libsvm(*loaded, scaling.bands, "read_svm_model: " + path.string() + ": ");
    } catch (...) {
        svm_free_and_destroy_model(&loaded);
        throw;
    }
    svm_free_and_destroy_model(&loaded);
    m.scale_min = std::move(scaling.scale_min), m.scale_max = std::move(scaling.scale_max);
    m.c = scaling.c, m.cv_accuracy = scaling.cv_accuracy, m.grid = std::move(scaling.grid);
    m.training_pixels = scaling.training_pixels;
    detail::check_svm_model(m, m.bands, "read_svm_model");
    return m;
}

}  // namespace cubekit
