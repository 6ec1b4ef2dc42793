#pragma once
// Shared by the Zernike GPU tests: the CPU-vs-GPU comparison with the spec's normalised error
//     e = |A_gpu − A_cpu| / ((n+1)·mean|f| over the inside pixels)
// and the quick mode under compute-sanitizer.
//
// Tolerance e ≤ 1e-12 (spec §5.3). The GPU evaluates the basis with the CPU reference's code
// (zernike_math.hpp, no FP contraction) except in the double-precision Kintner kernel, which
// contracts its products into FMAs: its basis values then differ from the CPU's by rounding
// (~1e-16 relative), and the double sums are added in another order. e is |ΔΣ f·V*| / Σ|f|
// (the (n+1)/cnt factors cancel); with |V| ≲ 1 a sum of P terms in any order is off by at most
// ~(summation depth)·ε·Σ|f·V| ≲ 4100·1.1e-16 ≈ 5e-13 even at 2048², typically ~1e-15.
// One exception: the q-recursion in Float precision, where the CPU forms each (X − jY)^m by
// binary powering and the GPU steps w^(m+2) = w^m·w² within a task; in float those differ by
// float rounding, so the bound there is 1e-6 (the spec's float-vs-double bar, §5.3).
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "cubekit/zernike.hpp"

namespace cubekit::zernike_gpu_test {

constexpr double kTol = 1e-12;
constexpr double kTolFloatQRec = 1e-6;

inline double tolerance_for(const ZernikeMoments& g) {
    return g.precision == ZernikePrecision::Float && g.method == ZernikeMethod::QRecursive ? kTolFloatQRec : kTol;
}

// The Table IV single moments of the seed (spec §4.4).
inline const std::vector<ZernikeIndex> kTableIV = {{0, 0}, {6, 2}, {12, 0}, {25, 13}, {34, 0}, {34, 18}, {34, 34}};

struct Size {
    int w, h;
};

inline ZernikeOptions with(ZernikeMethod method, bool symmetry = true, ZernikePrecision p = ZernikePrecision::Double) {
    ZernikeOptions o;
    o.method = method;
    o.symmetry = symmetry;
    o.precision = p;
    return o;
}

/// One request, run on a context and an image; and the same with a name for traces.
using ImageRun = std::function<ZernikeMoments(const Context&, const Cube&)>;
struct NamedRun {
    std::string name;
    ImageRun run;
};

// Under compute-sanitizer (NV_SANITIZER_INJECTION_* set) or CUBEKIT_TEST_QUICK=1 the same paths
// run on fewer and smaller inputs.
inline bool sanitized() {
    static const bool quick = std::getenv("NV_SANITIZER_INJECTION_PORT_BASE") != nullptr ||
                              std::getenv("NV_SANITIZER_INJECTION_TRANSPORT_TYPE") != nullptr ||
                              std::getenv("CUBEKIT_TEST_QUICK") != nullptr;
    return quick;
}
// Records the largest normalised error of the running test as its property max_normalised_error.
inline void note_error(double e) {
    static std::string test;
    static double worst = -1.0;
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "";
    if (name != test) test = name, worst = -1.0;
    if (e > worst) {
        worst = e;
        std::ostringstream s;
        s << worst;
        ::testing::Test::RecordProperty("max_normalised_error", s.str());
    }
}

// mean |f| over the pixels inside the disk, per band.
inline std::vector<double> mean_abs_inside(const Cube& img, const ZernikeDisk& d) {
    std::vector<double> out;
    for (int b = 0; b < img.bands(); ++b) {
        double s = 0.0;
        for (int y = 0; y < img.height(); ++y)
            for (int x = 0; x < img.width(); ++x)
                if (d.inside(x, y)) s += std::abs(img.value(x, y, b));
        out.push_back(s / double(d.pixel_count));
    }
    return out;
}

// Same metadata; every moment within kTol normalised error; NaN/Inf in the same places.
inline ::testing::AssertionResult agree(const ZernikeMoments& c, const ZernikeMoments& g, const Cube& img) {
    const double tol = tolerance_for(g);
    auto fail = [] { return ::testing::AssertionFailure(); };
    if (c.width != g.width || c.height != g.height || c.images != g.images || c.indices != g.indices ||
        c.values.size() != g.values.size())
        return fail() << "shapes or index lists differ";
    if (c.method != g.method || c.radial != g.radial || c.precision != g.precision || c.symmetric != g.symmetric)
        return fail() << "method/radial/precision/symmetric differ: cpu " << zernike_method_name(c.method) << " sym "
                      << c.symmetric << ", gpu " << zernike_method_name(g.method) << " sym " << g.symmetric;
    if (c.warnings != g.warnings) return fail() << "warnings differ";
    if (c.disk.pixel_count != g.disk.pixel_count || c.disk.denominator != g.disk.denominator ||
        c.disk.normalization != g.disk.normalization || c.disk.symmetric != g.disk.symmetric)
        return fail() << "disks differ";
    const std::vector<double> mean = mean_abs_inside(img, c.disk);
    double worst = -1.0;
    std::size_t wi = 0;
    for (std::size_t i = 0; i < c.values.size(); ++i) {
        const std::complex<double> a = c.values[i], b = g.values[i];
        const int image = int(i / c.count());
        const ZernikeIndex z = c.indices[i % c.count()];
        const bool finite = std::isfinite(a.real()) && std::isfinite(a.imag()) && std::isfinite(b.real()) && std::isfinite(b.imag());
        if (!finite) {
            auto same = [](double p, double q) { return std::isnan(p) ? std::isnan(q) : p == q; };
            if (!same(a.real(), b.real()) || !same(a.imag(), b.imag()))
                return fail() << "image " << image << " A(" << z.n << "," << z.m << "): cpu " << a << ", gpu " << b;
            continue;
        }
        double scale = double(z.n + 1) * mean[std::size_t(image)];
        if (!(scale > 0.0) || !std::isfinite(scale)) scale = 1.0;  // all-zero band: absolute error
        const double e = std::abs(a - b) / scale;
        if (e > worst) worst = e, wi = i;
    }
    if (worst >= 0.0) note_error(worst);
    if (worst <= tol) return ::testing::AssertionSuccess();
    const ZernikeIndex z = c.indices[wi % c.count()];
    return fail() << "normalised error " << worst << " > " << tol << " at image " << wi / c.count() << " A(" << z.n << ","
                  << z.m << "): cpu " << c.values[wi] << ", gpu " << g.values[wi];
}

// Every value bit for bit (memcmp: signed zeros and NaN payloads included).
inline ::testing::AssertionResult identical(const ZernikeMoments& a, const ZernikeMoments& b) {
    if (a.indices != b.indices || a.values.size() != b.values.size()) return ::testing::AssertionFailure() << "shapes differ";
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < a.values.size(); ++i)
        if (std::memcmp(&a.values[i], &b.values[i], sizeof(std::complex<double>)) != 0 && bad++ == 0) first = i;
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << bad << " of " << a.values.size() << " values differ; first " << first << ": "
                                         << a.values[first] << " vs " << b.values[first];
}

}  // namespace cubekit::zernike_gpu_test
