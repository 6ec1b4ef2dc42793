// Detection model files (spec detect.md §0.4): JSON in and out, validation naming the field, and
// the f64 reference evaluation of a feed-forward network (§B.3 steps 4–6).
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cubekit/detect_models.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"

namespace cubekit {

namespace {

using nlohmann::json;

[[noreturn]] void refuse(std::string_view source, const std::string& field, const std::string& why) {
    throw InvalidInput(std::string(source) + ": " + field + " " + why);
}

std::string shown(double v) {
    std::ostringstream s;
    s.precision(17);
    s << v;
    return s.str();
}

// ---- reading ------------------------------------------------------------------------------------

const json& member(const json& j, const std::string& name, std::string_view source, const std::string& prefix) {
    auto it = j.find(name);
    if (it == j.end()) refuse(source, prefix + name, "is missing");
    return *it;
}

double number(const json& v, std::string_view source, const std::string& field) {
    if (!v.is_number()) refuse(source, field, "is not a number");
    const double d = v.get<double>();
    if (!std::isfinite(d)) refuse(source, field, "= " + shown(d) + "; expected a finite number");
    return d;
}

int count(const json& j, const std::string& name, std::string_view source, const std::string& prefix) {
    const json& v = member(j, name, source, prefix);
    if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > (1 << 24))
        refuse(source, prefix + name, "must be an integer 1..16777216");
    return v.get<int>();
}

// A vector of n numbers.
std::vector<double> vector_of(const json& v, std::size_t n, std::string_view source, const std::string& field) {
    if (!v.is_array()) refuse(source, field, "is not an array");
    if (v.size() != n) refuse(source, field, "has " + std::to_string(v.size()) + " entries; expected " + std::to_string(n));
    std::vector<double> out(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = number(v[i], source, field + "[" + std::to_string(i) + "]");
    return out;
}

// A rows×cols matrix, as nested arrays (row-major) or one flat array of rows·cols numbers.
std::vector<double> matrix_of(const json& v, std::size_t rows, std::size_t cols, std::string_view source,
                              const std::string& field) {
    if (v.is_array() && !v.empty() && v[0].is_array()) {
        if (v.size() != rows)
            refuse(source, field, "has " + std::to_string(v.size()) + " rows; expected " + std::to_string(rows));
        std::vector<double> out;
        out.reserve(rows * cols);
        for (std::size_t r = 0; r < rows; ++r) {
            const auto row = vector_of(v[r], cols, source, field + "[" + std::to_string(r) + "]");
            out.insert(out.end(), row.begin(), row.end());
        }
        return out;
    }
    return vector_of(v, rows * cols, source, field);
}

std::vector<double> optional_vector(const json& j, const std::string& name, std::size_t n, std::string_view source,
                                    const std::string& prefix) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) return {};
    return vector_of(*it, n, source, prefix + name);
}

double optional_number(const json& j, const std::string& name, double fallback, std::string_view source,
                       const std::string& prefix) {
    auto it = j.find(name);
    return it == j.end() ? fallback : number(*it, source, prefix + name);
}

void expect_type(const json& j, std::string_view want, std::string_view source, const std::string& prefix) {
    const json& t = member(j, "type", source, prefix);
    if (!t.is_string() || t.get<std::string>() != want)
        refuse(source, prefix + "type", "= " + t.dump() + "; expected \"" + std::string(want) + "\"");
}

Activation activation(const json& j, const std::string& name, std::string_view source, const std::string& prefix) {
    auto it = j.find(name);
    if (it == j.end()) return Activation::Tansig;
    if (!it->is_string()) refuse(source, prefix + name, "is not a string");
    return parse_enum<Activation>(it->get<std::string>(), std::string(source) + ": " + prefix + name);
}

MlpModel mlp_from(const json& j, std::string_view source, const std::string& prefix) {
    if (!j.is_object()) refuse(source, prefix.empty() ? "model" : prefix.substr(0, prefix.size() - 1), "is not an object");
    expect_type(j, "mlp", source, prefix);
    MlpModel m;
    m.inputs = count(j, "inputs", source, prefix);
    m.hidden = count(j, "hidden", source, prefix);
    const std::size_t k = std::size_t(m.hidden), n = std::size_t(m.inputs);
    m.W1 = matrix_of(member(j, "W1", source, prefix), k, n, source, prefix + "W1");
    m.b1 = vector_of(member(j, "b1", source, prefix), k, source, prefix + "b1");
    m.w2 = matrix_of(member(j, "w2", source, prefix), 1, k, source, prefix + "w2");
    m.b2 = number(member(j, "b2", source, prefix), source, prefix + "b2");
    m.hidden_act = activation(j, "hidden_act", source, prefix);
    m.output_act = activation(j, "output_act", source, prefix);
    m.in_min = vector_of(member(j, "in_min", source, prefix), n, source, prefix + "in_min");
    m.in_max = vector_of(member(j, "in_max", source, prefix), n, source, prefix + "in_max");
    m.norm_ymin = optional_number(j, "norm_ymin", -1, source, prefix);
    m.norm_ymax = optional_number(j, "norm_ymax", 1, source, prefix);
    m.out_tmin = optional_number(j, "out_tmin", 0, source, prefix);
    m.out_tmax = optional_number(j, "out_tmax", 1, source, prefix);
    m.threshold = optional_number(j, "threshold", 0.5, source, prefix);
    return m;
}

json parse(std::string_view text, std::string_view source) {
    try {
        return json::parse(text);
    } catch (const json::exception& e) {
        throw InvalidInput(std::string(source) + ": not valid JSON (" + json_reason(e.what()) + ")");
    }
}

std::string training_text(const json& j, std::string_view source) {
    auto it = j.find("training");
    if (it == j.end() || it->is_null()) return "{}";
    if (!it->is_object()) refuse(source, "training", "is not an object");
    return it->dump();
}

std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(path.string() + ": cannot open (" + std::strerror(errno) + ")");
    std::ostringstream s;
    s << in.rdbuf();
    if (in.bad()) throw IoError(path.string() + ": read failed");
    return s.str();
}

// ---- writing ------------------------------------------------------------------------------------

json rows_of(const std::vector<double>& v, int rows, int cols) {
    json out = json::array();
    for (int r = 0; r < rows; ++r)
        out.push_back(std::vector<double>(v.begin() + std::ptrdiff_t(r) * cols, v.begin() + std::ptrdiff_t(r + 1) * cols));
    return out;
}

json mlp_json(const MlpModel& m) {
    return {{"type", "mlp"},
            {"inputs", m.inputs},
            {"hidden", m.hidden},
            {"W1", rows_of(m.W1, m.hidden, m.inputs)},
            {"b1", m.b1},
            {"w2", m.w2},
            {"b2", m.b2},
            {"hidden_act", std::string(enum_name(m.hidden_act))},
            {"output_act", std::string(enum_name(m.output_act))},
            {"in_min", m.in_min},
            {"in_max", m.in_max},
            {"norm_ymin", m.norm_ymin},
            {"norm_ymax", m.norm_ymax},
            {"out_tmin", m.out_tmin},
            {"out_tmax", m.out_tmax},
            {"threshold", m.threshold}};
}

// nlohmann writes doubles in their shortest round-trip form, so a model reads back bit for bit.
std::string dump(const json& j) { return j.dump(1, '\t') + "\n"; }

bool is_power_of_two(int v) { return v >= 1 && (v & (v - 1)) == 0; }

void check_finite(const std::vector<double>& v, std::string_view source, const std::string& field) {
    for (std::size_t i = 0; i < v.size(); ++i)
        if (!std::isfinite(v[i])) refuse(source, field + "[" + std::to_string(i) + "]", "is not finite");
}

void check_size(const std::vector<double>& v, std::size_t n, std::string_view source, const std::string& field) {
    if (v.size() != n)
        refuse(source, field, "has " + std::to_string(v.size()) + " entries; expected " + std::to_string(n));
    check_finite(v, source, field);
}

void validate_mlp(const MlpModel& m, std::string_view source, const std::string& prefix) {
    if (m.inputs < 1) refuse(source, prefix + "inputs", "must be at least 1");
    if (m.hidden < 1) refuse(source, prefix + "hidden", "must be at least 1");
    const std::size_t k = std::size_t(m.hidden), n = std::size_t(m.inputs);
    check_size(m.W1, k * n, source, prefix + "W1");
    check_size(m.b1, k, source, prefix + "b1");
    check_size(m.w2, k, source, prefix + "w2");
    check_size(m.in_min, n, source, prefix + "in_min");
    check_size(m.in_max, n, source, prefix + "in_max");
    for (std::size_t c = 0; c < n; ++c)
        if (m.in_max[c] < m.in_min[c])
            refuse(source, prefix + "in_max[" + std::to_string(c) + "]",
                   "= " + shown(m.in_max[c]) + " is below in_min = " + shown(m.in_min[c]));
    for (auto [v, name] : {std::pair{m.b2, "b2"}, {m.norm_ymin, "norm_ymin"}, {m.norm_ymax, "norm_ymax"},
                           {m.out_tmin, "out_tmin"}, {m.out_tmax, "out_tmax"}, {m.threshold, "threshold"}})
        if (!std::isfinite(v)) refuse(source, prefix + name, "is not finite");
    if (!(m.norm_ymax > m.norm_ymin)) refuse(source, prefix + "norm_ymax", "must exceed norm_ymin");
}

double activate(Activation a, double v) {
    switch (a) {
        case Activation::Tansig: return std::tanh(v);
        case Activation::Logsig: return 1.0 / (1.0 + std::exp(-v));
        case Activation::Purelin: return v;
    }
    return v;
}

}  // namespace

void validate(const RbfnModel& m, std::string_view source) {
    if (m.bands < 1) refuse(source, "bands", "must be at least 1");
    if (m.hidden < 1) refuse(source, "hidden", "must be at least 1");
    const std::size_t k = std::size_t(m.hidden), n = std::size_t(m.bands);
    check_size(m.centres, k * n, source, "centres");
    check_size(m.sigma, k, source, "sigma");
    for (std::size_t i = 0; i < k; ++i)
        if (!(m.sigma[i] > 0)) refuse(source, "sigma[" + std::to_string(i) + "]", "= " + shown(m.sigma[i]) + "; expected > 0");
    check_size(m.weights, k, source, "weights");
    if (!m.input_offset.empty()) check_size(m.input_offset, n, source, "input_offset");
    if (!m.input_gain.empty()) check_size(m.input_gain, n, source, "input_gain");
    if (!std::isfinite(m.bias)) refuse(source, "bias", "is not finite");
    if (!std::isfinite(m.threshold)) refuse(source, "threshold", "is not finite");
}

void validate(const MlpModel& m, std::string_view source) { validate_mlp(m, source, ""); }

void validate(const MultiresModel& m, std::string_view source) {
    if (m.feature != "std") refuse(source, "feature", "= \"" + m.feature + "\"; expected \"std\"");
    if (!is_power_of_two(m.block)) refuse(source, "block", "= " + std::to_string(m.block) + "; expected a power of two");
    if (!is_power_of_two(m.min_window) || m.min_window < m.block)
        refuse(source, "min_window", "= " + std::to_string(m.min_window) + "; expected block·2^l (a power of two ≥ block = " +
                                         std::to_string(m.block) + ")");
    validate_mlp(m.ann1, source, "ann1.");
    validate_mlp(m.ann2, source, "ann2.");
    if (m.ann2.inputs != m.ann1.inputs)
        refuse(source, "ann2.inputs", "= " + std::to_string(m.ann2.inputs) + " differs from ann1.inputs = " +
                                          std::to_string(m.ann1.inputs));
}

RbfnModel rbfn_model_from_json(std::string_view text, std::string_view source) {
    const json j = parse(text, source);
    if (!j.is_object()) refuse(source, "model", "is not a JSON object");
    expect_type(j, "rbfn", source, "");
    RbfnModel m;
    m.bands = count(j, "bands", source, "");
    m.hidden = count(j, "hidden", source, "");
    const std::size_t k = std::size_t(m.hidden), n = std::size_t(m.bands);
    m.centres = matrix_of(member(j, "centres", source, ""), k, n, source, "centres");
    m.sigma = vector_of(member(j, "sigma", source, ""), k, source, "sigma");
    m.weights = vector_of(member(j, "weights", source, ""), k, source, "weights");
    m.bias = number(member(j, "bias", source, ""), source, "bias");
    m.input_offset = optional_vector(j, "input_offset", n, source, "");
    m.input_gain = optional_vector(j, "input_gain", n, source, "");
    m.threshold = optional_number(j, "threshold", 0.5, source, "");
    if (auto it = j.find("target_name"); it != j.end() && it->is_string()) m.target_name = it->get<std::string>();
    m.training_json = training_text(j, source);
    validate(m, source);
    return m;
}

MultiresModel multires_model_from_json(std::string_view text, std::string_view source) {
    const json j = parse(text, source);
    if (!j.is_object()) refuse(source, "model", "is not a JSON object");
    expect_type(j, "multires", source, "");
    MultiresModel m;
    if (auto it = j.find("feature"); it != j.end()) {
        if (!it->is_string()) refuse(source, "feature", "is not a string");
        m.feature = it->get<std::string>();
    }
    m.block = j.contains("block") ? count(j, "block", source, "") : 8;
    m.min_window = j.contains("min_window") ? count(j, "min_window", source, "") : m.block;
    m.ann1 = mlp_from(member(j, "ann1", source, ""), source, "ann1.");
    m.ann2 = mlp_from(member(j, "ann2", source, ""), source, "ann2.");
    m.training_json = training_text(j, source);
    validate(m, source);
    return m;
}

RbfnModel read_rbfn_model(const std::filesystem::path& path) { return rbfn_model_from_json(read_text(path), path.string()); }

MultiresModel read_multires_model(const std::filesystem::path& path) {
    return multires_model_from_json(read_text(path), path.string());
}

std::string model_type(const std::filesystem::path& path) {
    const json j = parse(read_text(path), path.string());
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
        refuse(path.string(), "type", "is missing (expected \"rbfn\" or \"multires\")");
    const std::string t = j["type"].get<std::string>();
    if (t != "rbfn" && t != "multires") refuse(path.string(), "type", "= \"" + t + "\"; expected \"rbfn\" or \"multires\"");
    return t;
}

std::string to_json(const RbfnModel& m) {
    json j = {{"type", "rbfn"},
              {"bands", m.bands},
              {"hidden", m.hidden},
              {"centres", rows_of(m.centres, m.hidden, m.bands)},
              {"sigma", m.sigma},
              {"weights", m.weights},
              {"bias", m.bias},
              {"threshold", m.threshold},
              {"target_name", m.target_name}};
    if (!m.input_offset.empty()) j["input_offset"] = m.input_offset;
    if (!m.input_gain.empty()) j["input_gain"] = m.input_gain;
    j["training"] = json::parse(m.training_json.empty() ? "{}" : m.training_json);
    return dump(j);
}

std::string to_json(const MultiresModel& m) {
    json j = {{"type", "multires"}, {"feature", m.feature}, {"block", m.block}, {"min_window", m.min_window},
              {"ann1", mlp_json(m.ann1)}, {"ann2", mlp_json(m.ann2)}};
    j["training"] = json::parse(m.training_json.empty() ? "{}" : m.training_json);
    return dump(j);
}

void write_model(const RbfnModel& model, const std::filesystem::path& path) {
    validate(model, path.string());
    write_text_file(path, to_json(model));
}

void write_model(const MultiresModel& model, const std::filesystem::path& path) {
    validate(model, path.string());
    write_text_file(path, to_json(model));
}

MlpOutput evaluate(const MlpModel& m, const double* features) {
    const double span = m.norm_ymax - m.norm_ymin;
    const int n = m.inputs;
    double out_sum = m.b2;
    for (int i = 0; i < m.hidden; ++i) {
        double h = 0;
        for (int c = 0; c < n; ++c) {
            // mapminmax: a zero input range passes the value through (MATLAB's rule).
            const double range = m.in_max[c] - m.in_min[c];
            const double x = range > 0 ? span * (features[c] - m.in_min[c]) / range + m.norm_ymin : features[c];
            h = h + m.W1[std::size_t(i) * n + c] * x;
        }
        h = h + m.b1[i];
        out_sum = out_sum + m.w2[i] * activate(m.hidden_act, h);
    }
    MlpOutput o;
    o.raw = activate(m.output_act, out_sum);
    o.y = (m.out_tmax - m.out_tmin) * (o.raw - m.norm_ymin) / span + m.out_tmin;
    return o;
}

}  // namespace cubekit
