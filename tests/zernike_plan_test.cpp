// Internal pieces of the Zernike moments: the CUDA work plan, the point layouts (every pixel of
// the disk visited exactly once, with its 8-fold weight), and agreement of the CPU paths.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "cubekit/zernike.hpp"
#include "testing.hpp"
#include "zernike/zernike_internal.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;

double max_abs_diff(const ZernikeMoments& a, const ZernikeMoments& b) {
    double d = 0.0;
    for (std::size_t i = 0; i < a.values.size(); ++i) d = std::max(d, std::abs(a.values[i] - b.values[i]));
    return d;
}

TEST(ZernikeSmoke, MethodsAndPathsAgree) {
    const Cube img = testing::random_cube(64, 64, 2, DType::U8, 7, 0, 255);
    const int N = 30;
    ZernikeOptions o;
    o.method = ZernikeMethod::Kintner;
    const ZernikeMoments k = zernike_set(cpu_context(), img, N, o);
    EXPECT_TRUE(k.symmetric);
    o.symmetry = false;
    const ZernikeMoments kp = zernike_set(cpu_context(), img, N, o);
    o.method = ZernikeMethod::QRecursive;
    const ZernikeMoments q = zernike_set(cpu_context(), img, N, o);
    o.method = ZernikeMethod::Direct;
    const ZernikeMoments d = zernike_set(cpu_context(), img, N, o);
    const double scale = 255.0 * (N + 1);
    EXPECT_LT(max_abs_diff(k, kp), 1e-12 * scale);
    EXPECT_LT(max_abs_diff(k, q), 1e-12 * scale);
    EXPECT_LT(max_abs_diff(k, d), 1e-12 * scale);
    EXPECT_GT(std::abs(k.at(0, 2, 2)), 0.0);
}

TEST(ZernikeSmoke, SignConventionOfX) {
    const int N = 64;
    Cube img(N, N, 1, DType::F64);
    for (int y = 0; y < N; ++y)
        for (int x = 0; x < N; ++x) img.at<double>(x, y, 0) = (2.0 * x + 1 - N) / N;
    const ZernikeMoments z = zernike_set(cpu_context(), img, 3);
    EXPECT_NEAR(z.at(0, 1, 1).real(), 0.5, 0.01);
    EXPECT_NEAR(z.at(0, 1, 1).imag(), 0.0, 1e-15);
}

}  // namespace
}  // namespace cubekit
