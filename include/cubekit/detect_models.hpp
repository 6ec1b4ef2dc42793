#pragma once
/// Detection model files (spec detect.md §0.4): an RBF network for pixel-level detection and a pair
/// of feed-forward networks (ANN-1 "target inside?", ANN-2 "right scale?") for the multi-resolution
/// detector. JSON, row-major arrays, field names that let a MATLAB-trained network be copied in
/// (net.IW → W1, net.LW → w2, net.b → b1/b2, the mapminmax settings → in_min/in_max, out_tmin/out_tmax).
///
///     {"type":"rbfn", "bands":3, "hidden":1, "centres":[[0.1,0.5,0.9]], "sigma":[0.2],
///      "weights":[1], "bias":0, "threshold":0.5}
///
///     cubekit::RbfnModel m = cubekit::read_rbfn_model("castaway.json");
///     std::string text = cubekit::to_json(m);          // the same model back, every field written
///
/// Loading validates shapes, σ > 0, in_max ≥ in_min and that every number is finite, and throws
/// InvalidInput naming the file and the field ("castaway.json: sigma[2] = -1; expected > 0").
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cubekit/options.hpp"

namespace cubekit {

/// Gaussian RBF network m–k–1 (spec §A.3): y = Σ_i w_i exp(−d_i / (2σ_i²)) + bias,
/// d_i = Σ_b (gain_b·(x_b − offset_b) − u_{i,b})².
struct RbfnModel {
    int bands = 0;   ///< m, the inputs
    int hidden = 0;  ///< k, the Gaussian neurons
    std::vector<double> centres;       ///< k×m, row i = centre u_i
    std::vector<double> sigma;         ///< k widths, > 0
    std::vector<double> weights;       ///< k output weights w_i
    double bias = 0;                   ///< th: added to the output (a bias, not a decision threshold)
    std::vector<double> input_offset;  ///< m, or empty = 0
    std::vector<double> input_gain;    ///< m, or empty = 1
    double threshold = 0.5;            ///< θ: detected ⇔ y > θ
    std::string target_name;
    std::string training_json = "{}";  ///< provenance written by training (a JSON object, kept verbatim)
};

/// Transfer functions of a feed-forward layer (MATLAB names).
enum class Activation { Tansig, Logsig, Purelin };
template <>
struct EnumNames<Activation> {
    static constexpr EnumName<Activation> names[] = {
        {Activation::Tansig, "tansig"}, {Activation::Logsig, "logsig"}, {Activation::Purelin, "purelin"}};
};

/// Feed-forward network m–k–1 with MATLAB `mapminmax` input and output processing (spec §B.3 steps 4–6):
/// x' = (ymax−ymin)(x − in_min)/(in_max − in_min) + ymin (x' = x where in_max = in_min),
/// g = act_h(W1 x' + b1), y' = act_o(w2·g + b2), y = (out_tmax − out_tmin)(y' − ymin)/(ymax − ymin) + out_tmin,
/// positive ⇔ y > threshold.
struct MlpModel {
    int inputs = 0, hidden = 0;
    std::vector<double> W1;  ///< k×m, row i = neuron i's input weights
    std::vector<double> b1;  ///< k
    std::vector<double> w2;  ///< k
    double b2 = 0;
    Activation hidden_act = Activation::Tansig, output_act = Activation::Tansig;
    std::vector<double> in_min, in_max;  ///< m each
    double norm_ymin = -1, norm_ymax = 1;
    double out_tmin = 0, out_tmax = 1;
    double threshold = 0.5;
};

/// The multi-resolution detector's model (spec §B): window feature = per-band standard deviation.
struct MultiresModel {
    std::string feature = "std";  ///< the only feature the spec defines
    int block = 8;                ///< side b of the statistics blocks: a power of two ≥ 1
    int min_window = 8;           ///< smallest window side: block·2^l for an integer l ≥ 0
    MlpModel ann1, ann2;          ///< same input count (the bands)
    std::string training_json = "{}";
};

/// Parses and validates; `source` names the text in errors (a path, or "model").
RbfnModel rbfn_model_from_json(std::string_view text, std::string_view source = "model");
MultiresModel multires_model_from_json(std::string_view text, std::string_view source = "model");
/// Reads a model file (IoError when it cannot be read; InvalidInput naming the file and field).
RbfnModel read_rbfn_model(const std::filesystem::path& path);
MultiresModel read_multires_model(const std::filesystem::path& path);
/// "rbfn" or "multires": the `type` field of a model file (InvalidInput when missing or unknown).
std::string model_type(const std::filesystem::path& path);

/// Throws InvalidInput naming `source` and the offending field.
void validate(const RbfnModel& model, std::string_view source = "model");
void validate(const MlpModel& model, std::string_view source = "model");
void validate(const MultiresModel& model, std::string_view source = "model");

/// Every field, numbers with 17 significant digits (read back bit for bit).
std::string to_json(const RbfnModel& model);
std::string to_json(const MultiresModel& model);
/// Writes atomically (nothing half-written).
void write_model(const RbfnModel& model, const std::filesystem::path& path);
void write_model(const MultiresModel& model, const std::filesystem::path& path);

/// The network's raw output y' and the denormalised y of one feature vector (inputs values), in
/// f64 with the fixed order of spec §B.3 (inputs in order, then neurons in order, no contraction):
/// the CPU reference that the CUDA descent matches and that training uses.
struct MlpOutput {
    double raw = 0;  ///< y'
    double y = 0;    ///< denormalised
};
MlpOutput evaluate(const MlpModel& model, const double* features);

}  // namespace cubekit
