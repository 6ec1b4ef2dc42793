// Zernike moments: CUDA against the CPU reference (spec zernike.md §5.3), on synthetic images:
// every method, radial evaluation, symmetry setting, precision, request kind, element type,
// layout and mapping. Exactness and reconstruction are in zernike_gpu_exact_test.cpp; real data,
// NaN and the large image in zernike_gpu_data_test.cpp; the device-resident calls and views in
// zernike_gpu_into_test.cpp. Built everywhere; every test skips (and says so) without a CUDA device.
//
// Tolerances: zernike_gpu_test_helpers.hpp. The largest e seen per test is recorded as the test
// property max_normalised_error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cubekit/zernike.hpp"
#include "testing.hpp"
#include "zernike_gpu_test_helpers.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using namespace zernike_gpu_test;
using Run = std::function<ZernikeMoments(const Context&)>;

template <typename T>
std::vector<T> pick(std::vector<T> all, std::size_t quick) {
    if (sanitized() && all.size() > quick) all.resize(quick);
    return all;
}

std::string describe(const ZernikeOptions& o) {
    std::string s(zernike_method_name(o.method));
    if (o.method == ZernikeMethod::Direct) s += o.radial == ZernikeRadial::Explicit ? "/explicit" : "/stable";
    s += " " + std::string(zernike_mapping_name(o.mapping));
    if (o.mapping == ZernikeMapping::Custom) {
        std::ostringstream c;
        c << "(" << o.center[0] << "," << o.center[1] << ",r=" << o.radius << ")";
        s += c.str();
    }
    if (o.normalization != ZernikeNormalization::Default) s += " " + std::string(zernike_normalization_name(o.normalization));
    return s + " " + std::string(zernike_precision_name(o.precision)) + (o.symmetry ? " sym" : " plain");
}

// Runs one request on both backends and compares; returns the GPU result.
ZernikeMoments compare(const Context& gpu, const Cube& img, const Run& run, const std::string& what) {
    SCOPED_TRACE(what + " on " + img.shape().describe());
    const ZernikeMoments c = run(cpu_context());
    ZernikeMoments g = run(gpu);
    EXPECT_TRUE(agree(c, g, img));
    return g;
}

ZernikeOptions options(ZernikeMethod method, ZernikeRadial radial, bool symmetry, ZernikePrecision precision) {
    ZernikeOptions o;
    o.method = method;
    o.radial = radial;
    o.symmetry = symmetry;
    o.precision = precision;
    return o;
}

// Every method and radial evaluation; Explicit only up to the order it is meant for.
struct Variant {
    ZernikeMethod method;
    ZernikeRadial radial;
    int max_order;
};
constexpr Variant kVariants[] = {{ZernikeMethod::Auto, ZernikeRadial::Stable, 1 << 20},
                                 {ZernikeMethod::Direct, ZernikeRadial::Stable, 1 << 20},
                                 {ZernikeMethod::Direct, ZernikeRadial::Explicit, 20},
                                 {ZernikeMethod::QRecursive, ZernikeRadial::Stable, 1 << 20},
                                 {ZernikeMethod::Kintner, ZernikeRadial::Stable, 1 << 20}};
constexpr ZernikePrecision kPrecisions[] = {ZernikePrecision::Double, ZernikePrecision::Float};

std::vector<ZernikeIndex> up_to(const std::vector<ZernikeIndex>& list, int nmax) {
    std::vector<ZernikeIndex> out;
    for (const ZernikeIndex& z : list)
        if (z.n <= nmax) out.push_back(z);
    return out;
}

// Whole sets to order 34 (Explicit: 20): every method × symmetry × precision, square sizes of both
// parities, 1×1 to 3×3, non-square sizes of equal parity (symmetric crop) and mixed parity (plain).
TEST(ZernikeGpu, WholeSetsEveryMethodSymmetryAndPrecision) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Size s : pick<Size>({{17, 17}, {30, 21}, {3, 3}, {64, 64}, {127, 127}, {128, 128}, {300, 200}, {201, 200},
                                    {1, 1}, {2, 2}, {255, 255}},
                                   3)) {
        const Cube img = testing::random_cube(s.w, s.h, 2, DType::F64, seed, -1.0, 2.0);
        for (const Variant& v : kVariants)
            for (bool sym : {true, false})
                for (ZernikePrecision p : kPrecisions) {
                    const ZernikeOptions o = options(v.method, v.radial, sym, p);
                    const int nmax = std::min(34, v.max_order);
                    const ZernikeMoments g = compare(
                        gpu, img, [&](const Context& ctx) { return zernike_set(ctx, img, nmax, o); },
                        describe(o) + " set " + std::to_string(nmax));
                    EXPECT_EQ(g.symmetric, sym && (s.w - s.h) % 2 == 0);
                }
    }
}

// Sets to order 60 and 100 (spec §3.10: no order cap), every stable method.
TEST(ZernikeGpu, HighOrderSets) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    struct Case {
        Size s;
        int nmax;
    };
    for (const Case k : pick<Case>({{{64, 64}, 60}, {{64, 64}, 100}, {{127, 127}, 60}, {{201, 200}, 60}, {{128, 96}, 60}}, 2)) {
        const Cube img = testing::random_cube(k.s.w, k.s.h, 1, DType::F32, seed, 0.0, 1.0);
        for (const Variant& v : kVariants) {
            // Direct is a Kintner chain per moment: its high orders are checked on 64² (CPU time).
            if (v.radial == ZernikeRadial::Explicit || (v.method == ZernikeMethod::Direct && k.s.w > 64)) continue;
            for (bool sym : {true, false})
                for (ZernikePrecision p : kPrecisions) {
                    const ZernikeOptions o = options(v.method, v.radial, sym, p);
                    compare(gpu, img, [&](const Context& ctx) { return zernike_set(ctx, img, k.nmax, o); },
                            describe(o) + " set " + std::to_string(k.nmax));
                }
        }
    }
}

// All repetitions of one order (Auto: QRecursive, or Kintner in float).
TEST(ZernikeGpu, SingleOrders) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<int> orders = pick<int>({34, 1, 0, 60, 5, 2, 3, 4, 8, 16, 20, 33}, 4);
    for (const Size s : pick<Size>({{64, 64}, {45, 44}, {201, 200}, {255, 255}, {256, 256}, {300, 200}, {1, 1}, {2, 2}}, 2)) {
        const Cube img = testing::random_cube(s.w, s.h, 1, DType::F64, seed, 0.0, 1.0);
        for (int n : orders)
            for (const Variant& v : kVariants) {
                if (n > v.max_order) continue;
                for (bool sym : {true, false})
                    for (ZernikePrecision p : kPrecisions) {
                        const ZernikeOptions o = options(v.method, v.radial, sym, p);
                        compare(gpu, img, [&](const Context& ctx) { return zernike_order(ctx, img, n, o); },
                                describe(o) + " order " + std::to_string(n));
                    }
            }
    }
}

// Single moments: the seed's Table IV list (spec §5.7: at 64, 256 and 1024) plus a few more.
TEST(ZernikeGpu, SingleMomentsTableIV) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::vector<ZernikeIndex> list = kTableIV;
    list.insert(list.end(), {{1, 1}, {60, 0}, {60, 58}, {100, 2}});
    for (const Size s : pick<Size>({{64, 64}, {3, 3}, {45, 44}, {201, 200}, {256, 256}, {255, 255}, {1024, 1024}, {1, 1}, {2, 2}}, 3)) {
        const Cube img = testing::random_cube(s.w, s.h, 1, DType::F32, seed, 0.0, 255.0);
        for (const ZernikeIndex z : list)
            for (const Variant& v : kVariants) {
                if (z.n > v.max_order || (s.w >= 1024 && z.n > 34)) continue;
                for (bool sym : {true, false})
                    for (ZernikePrecision p : kPrecisions) {
                        const ZernikeOptions o = options(v.method, v.radial, sym, p);
                        compare(gpu, img, [&](const Context& ctx) { return zernike_moment(ctx, img, z.n, z.m, o); },
                                describe(o) + " A(" + std::to_string(z.n) + "," + std::to_string(z.m) + ")");
                    }
            }
    }
}

// Any list of (n, m), in the order given: a fixed list with gaps and a random shuffled one.
TEST(ZernikeGpu, ArbitraryMomentLists) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::vector<ZernikeIndex> shuffled = zernike_set_indices(50);
    std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(seed));
    shuffled.resize(40);
    const std::vector<std::vector<ZernikeIndex>> lists = {
        {{34, 18}, {0, 0}, {7, 3}, {60, 2}, {20, 20}, {5, 1}, {2, 0}, {33, 33}, {13, 1}, {34, 34}, {35, 1}}, shuffled};
    for (const Size s : pick<Size>({{64, 64}, {45, 44}, {201, 200}, {127, 127}, {300, 200}}, 2)) {
        const Cube img = testing::random_cube(s.w, s.h, 3, DType::I16, seed, -3000, 3000);
        for (const auto& full : lists)
            for (const Variant& v : kVariants)
                for (bool sym : {true, false})
                    for (ZernikePrecision p : kPrecisions) {
                        const std::vector<ZernikeIndex> wanted = up_to(full, v.max_order);
                        const ZernikeOptions o = options(v.method, v.radial, sym, p);
                        const ZernikeMoments g = compare(
                            gpu, img, [&](const Context& ctx) { return zernike_moments(ctx, img, wanted, o); },
                            describe(o) + " list of " + std::to_string(wanted.size()));
                        EXPECT_EQ(g.indices, wanted);
                    }
    }
}

// Every element type, BSQ/BIL/BIP input, 3 bands. The device reads every layout through its
// strides with the same arithmetic, so the layout must not change a single bit of the GPU result.
TEST(ZernikeGpu, EveryElementTypeAndLayout) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    struct Type {
        DType t;
        double lo, hi;
    };
    const Type types[] = {{DType::U8, 0, 255},         {DType::U16, 0, 65535},          {DType::I16, -32768, 32767},
                          {DType::U32, 0, 4.0e9},      {DType::I32, -2.0e9, 2.0e9},     {DType::F32, -1e3, 1e3},
                          {DType::F64, -1e-3, 5e-3}};
    for (const Size s : pick<Size>({{64, 64}, {65, 64}, {37, 52}}, 2))
        for (const Type& t : types) {
            const Cube bsq = testing::random_cube(s.w, s.h, 3, t.t, seed, t.lo, t.hi);
            std::vector<ZernikeMoments> by_layout;
            for (Layout l : {Layout::BSQ, Layout::BIL, Layout::BIP}) {
                const Cube img = bsq.to_layout(l);
                const std::string what = std::string(dtype_name(t.t)) + " " + std::string(layout_name(l));
                ZernikeOptions o;
                by_layout.push_back(compare(gpu, img, [&](const Context& ctx) { return zernike_set(ctx, img, 20, o); }, what + " set 20"));
                o.method = ZernikeMethod::QRecursive;
                compare(gpu, img, [&](const Context& ctx) { return zernike_order(ctx, img, 20, o); }, what + " order 20");
                o.method = ZernikeMethod::Direct;
                o.symmetry = false;
                compare(gpu, img, [&](const Context& ctx) { return zernike_moments(ctx, img, up_to(kTableIV, 25), o); },
                        what + " direct Table IV, plain");
            }
            for (std::size_t i = 1; i < by_layout.size(); ++i)
                EXPECT_EQ(0, std::memcmp(by_layout[0].values.data(), by_layout[i].values.data(),
                                         by_layout[0].values.size() * sizeof(std::complex<double>)))
                    << dtype_name(t.t) << ": the GPU result depends on the input layout (" << i << ")";
        }
}

// Inscribed, Circumscribed (square: symmetric; non-square: plain), Custom inside the image,
// sticking out, touching the edges, bigger than the image, a single pixel; every normalisation.
TEST(ZernikeGpu, EveryMappingAndNormalization) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    struct Case {
        Size s;
        ZernikeMapping mapping;
        double cx, cy, r;
    };
    using M = ZernikeMapping;
    const std::vector<Case> cases = pick<Case>({{{64, 64}, M::Circumscribed, 0, 0, 0},
                                                {{101, 80}, M::Custom, 50.3, 39.6, 30.2},
                                                {{101, 80}, M::Custom, 10.5, 70.25, 45.0},
                                                {{64, 64}, M::Inscribed, 0, 0, 0},
                                                {{300, 200}, M::Circumscribed, 0, 0, 0},
                                                {{201, 200}, M::Circumscribed, 0, 0, 0},
                                                {{300, 200}, M::Inscribed, 0, 0, 0},
                                                {{101, 80}, M::Custom, 50.0, 39.5, 39.5},
                                                {{101, 80}, M::Custom, 50.0, 40.0, 200.0},
                                                {{64, 64}, M::Custom, 10.0, 12.0, 0.5},
                                                {{64, 64}, M::Custom, -20.0, 31.5, 30.0}},
                                               3);
    for (const Case& k : cases) {
        const Cube img = testing::random_cube(k.s.w, k.s.h, 2, DType::U16, seed, 0, 4095);
        for (ZernikeNormalization norm : {ZernikeNormalization::Default, ZernikeNormalization::PixelCount, ZernikeNormalization::Area})
            for (bool sym : {true, false})
                for (ZernikePrecision p : kPrecisions) {
                    ZernikeOptions o = options(ZernikeMethod::Auto, ZernikeRadial::Stable, sym, p);
                    o.mapping = k.mapping;
                    o.center = {k.cx, k.cy};
                    o.radius = k.r;
                    o.normalization = norm;
                    const std::string what = describe(o);
                    compare(gpu, img, [&](const Context& ctx) { return zernike_set(ctx, img, 34, o); }, what + " set 34");
                    o.method = ZernikeMethod::Direct;
                    o.radial = ZernikeRadial::Explicit;
                    compare(gpu, img, [&](const Context& ctx) { return zernike_set(ctx, img, 12, o); }, what + " direct/explicit set 12");
                    o.radial = ZernikeRadial::Stable;
                    o.method = ZernikeMethod::QRecursive;
                    compare(gpu, img, [&](const Context& ctx) { return zernike_order(ctx, img, 34, o); }, what + " order 34");
                    o.method = ZernikeMethod::Direct;
                    compare(gpu, img, [&](const Context& ctx) { return zernike_moments(ctx, img, kTableIV, o); },
                            what + " direct Table IV");
                }
    }
}

}  // namespace
}  // namespace cubekit
