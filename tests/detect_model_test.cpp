// Detection model files (spec detect.md §0.4): round trip, validation naming the field, evaluation.
#include <gtest/gtest.h>

#include <cmath>

#include "cubekit/detect_models.hpp"
#include "cubekit/error.hpp"
#include "detect_testing.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

std::string error_of(const std::string& text, bool multires = false) {
    try {
        if (multires) multires_model_from_json(text, "m.json");
        else rbfn_model_from_json(text, "m.json");
    } catch (const InvalidInput& e) {
        return e.what();
    }
    return "";
}

TEST(DetectModel, RbfnRoundTripIsBitExact) {
    RbfnModel m = testing::random_rbfn(7, 3, 11);
    m.input_gain.assign(7, 1.0 / 3.0);
    m.target_name = "planes";
    m.training_json = R"({"seed":0})";
    const RbfnModel back = rbfn_model_from_json(to_json(m));
    EXPECT_EQ(back.centres, m.centres);
    EXPECT_EQ(back.sigma, m.sigma);
    EXPECT_EQ(back.weights, m.weights);
    EXPECT_EQ(back.bias, m.bias);
    EXPECT_EQ(back.input_gain, m.input_gain);
    EXPECT_TRUE(back.input_offset.empty());
    EXPECT_EQ(back.target_name, "planes");
    EXPECT_EQ(to_json(back), to_json(m));
}

TEST(DetectModel, MultiresRoundTripIsBitExact) {
    MultiresModel m = testing::step_multires(5);
    m.ann1.hidden_act = Activation::Logsig;
    m.ann2.W1[3] = 0.1;
    const MultiresModel back = multires_model_from_json(to_json(m));
    EXPECT_EQ(to_json(back), to_json(m));
    EXPECT_EQ(back.ann1.hidden_act, Activation::Logsig);
}

TEST(DetectModel, ErrorsNameTheField) {
    const std::string good = R"({"type":"rbfn","bands":2,"hidden":1,"centres":[[0,1]],"sigma":[1],"weights":[1],"bias":0})";
    EXPECT_EQ(error_of(good), "");
    EXPECT_NE(error_of(R"({"type":"rbfn","bands":2,"hidden":1,"centres":[[0,1]],"sigma":[-1],"weights":[1],"bias":0})")
                  .find("sigma[0]"), std::string::npos);
    EXPECT_NE(error_of(R"({"type":"rbfn","bands":2,"hidden":1,"centres":[[0,1,2]],"sigma":[1],"weights":[1],"bias":0})")
                  .find("centres[0] has 3 entries; expected 2"), std::string::npos);
    EXPECT_NE(error_of(R"({"type":"rbfn","bands":2,"hidden":1,"centres":[[0,"x"]],"sigma":[1],"weights":[1],"bias":0})")
                  .find("centres[0][1]"), std::string::npos);
    EXPECT_NE(error_of(R"({"type":"rbfn","bands":2,"hidden":1,"centres":[[0,1]],"sigma":[1],"weights":[1]})").find("bias is missing"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"type":"mlp"})").find("type"), std::string::npos);
    EXPECT_NE(error_of("{nope").find("not valid JSON"), std::string::npos);
    EXPECT_NE(error_of(R"({"type":"rbfn","bands":2,"hidden":1,"centres":[[0,1]],"sigma":[1],"weights":[1],"bias":0,
                           "input_gain":[1]})").find("input_gain has 1 entries; expected 2"), std::string::npos);
    MultiresModel m = testing::step_multires(2);
    m.ann2.in_max[1] = -3;
    EXPECT_NE(error_of(to_json(m), true).find("ann2.in_max[1]"), std::string::npos);
    m = testing::step_multires(2);
    m.block = 6;
    EXPECT_THROW(validate(m), InvalidInput);
}

TEST(DetectModel, MlpEvaluationFollowsMapminmaxAndTansig) {
    MlpModel n;
    n.inputs = 2;
    n.hidden = 1;
    n.W1 = {0.5, -0.25};
    n.b1 = {0.1};
    n.w2 = {2.0};
    n.b2 = -0.3;
    n.in_min = {0, 5};
    n.in_max = {10, 5};  // zero range: passes the value through
    const double x[2] = {2.5, 7};
    const double x0 = 2.0 * (2.5 - 0) / 10 - 1;  // mapminmax to [-1, 1]
    const double h = std::tanh(0.5 * x0 + -0.25 * 7 + 0.1);
    const double raw = std::tanh(2.0 * h - 0.3);
    const MlpOutput o = evaluate(n, x);
    EXPECT_NEAR(o.raw, raw, 1e-15);
    EXPECT_NEAR(o.y, (raw + 1) / 2, 1e-15);
}

}  // namespace
}  // namespace cubekit
