// Zernike moments on the GPU against the CPU on real data and special values (spec zernike.md §2,
// §5.3, §5.6, §5.7): hyperspectral scenes and photos, NaN/Inf, the 1×1 image, the 2048² image.
// zernike_gpu_test_helpers.hpp explains the tolerance. Tests named *Large* and *Real* are the slow
// ones for sanitizer runs to leave out; the others shrink their inputs under compute-sanitizer
// (NV_SANITIZER_INJECTION_*) or CUBEKIT_TEST_QUICK=1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cubekit/io.hpp"
#include "cubekit/zernike.hpp"
#include "testing.hpp"
#include "zernike_gpu_test_helpers.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using namespace zernike_gpu_test;

void compare(const Context& gpu, const Cube& img, const ImageRun& run, const std::string& what) {
    SCOPED_TRACE(what + " on " + img.shape().describe());
    EXPECT_TRUE(agree(run(cpu_context(), img), run(gpu, img), img));
}

// ---- Real data ------------------------------------------------------------------------------------

// The centred window of at most 512×512 (the CPU side stays quick).
Cube centre_crop(const Cube& c, int side = 512) {
    const int w = std::min(c.width(), side), h = std::min(c.height(), side);
    return c.crop((c.width() - w) / 2, (c.height() - h) / 2, w, h);
}

void compare_real(const Context& gpu, const Cube& img, const std::string& name) {
    using M = ZernikeMethod;
    compare(gpu, img, [](const Context& c, const Cube& i) { return zernike_set(c, i, 20, with(M::Auto)); }, name + " set 20");
    compare(gpu, img, [](const Context& c, const Cube& i) { return zernike_set(c, i, 20, with(M::Auto, false)); }, name + " set 20 plain");
    compare(gpu, img, [](const Context& c, const Cube& i) { return zernike_set(c, i, 20, with(M::Kintner, true, ZernikePrecision::Float)); },
            name + " set 20 f32");
    compare(gpu, img, [](const Context& c, const Cube& i) { return zernike_order(c, i, 20, with(M::QRecursive)); }, name + " order 20");
    compare(gpu, img, [](const Context& c, const Cube& i) { return zernike_moments(c, i, kTableIV, with(M::Direct)); },
            name + " direct Table IV");
}

// A few bands of up to 3 distinct scenes (data/samson always; Jasper Ridge, San Diego, ... from
// shared/data when present), as one batch per scene.
TEST(ZernikeGpuData, RealHyperspectralScenes) {
    REQUIRE_GPU();
    std::set<std::string> seen;
    int compared = 0;
    for (const testing::SceneFile& s : testing::hyperspectral_scenes()) {
        if (compared == 3 || !std::filesystem::exists(s.path) || !seen.insert(s.path.filename().string()).second) continue;
        const Cube scene = read_cube(s.path, {.var = s.var});
        const int B = scene.bands();
        std::vector<int> bands = {0, B / 3, 2 * B / 3, B - 1};
        bands.erase(std::unique(bands.begin(), bands.end()), bands.end());
        compare_real(gpu, centre_crop(scene.select_bands(bands)), s.path.filename().string());
        ++compared;
    }
    if (compared == 0) GTEST_SKIP() << "no hyperspectral scene found (data/samson, shared/data: see shared/data/README.md)";
    RecordProperty("scenes_compared", compared);
}

// The photos of shared/data/gray and shared/data/rgb (up to 3 channels as a batch, ≤ 512² crop).
TEST(ZernikeGpuData, RealPhotos) {
    REQUIRE_GPU();
    int compared = 0;
    for (const std::string folder : {"gray", "rgb"})
        for (const auto& p : testing::shared_photos(folder)) {
            const Cube photo = read_cube(p);
            std::vector<int> channels;
            for (int b = 0; b < std::min(3, photo.bands()); ++b) channels.push_back(b);
            compare_real(gpu, centre_crop(photo.select_bands(channels)), folder + "/" + p.filename().string());
            ++compared;
        }
    if (compared == 0) GTEST_SKIP() << "no photos in shared/data/gray or shared/data/rgb (see shared/data/README.md)";
    RecordProperty("photos_compared", compared);
}

// ---- NaN, infinity, 1×1 ---------------------------------------------------------------------------

// Spec §2: NaN/Inf propagate into the moments. Band 0: NaN inside the disk (every moment NaN);
// band 1: +Inf inside (every moment non-finite: ±Inf, or NaN from 0·Inf); band 2: NaN outside the inscribed disk (never read: all finite); band 3 clean.
TEST(ZernikeGpuData, NaNAndInfinityPropagateLikeTheCpu) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<Size> sizes = sanitized() ? std::vector<Size>{{17, 17}} : std::vector<Size>{{64, 64}, {17, 17}, {201, 200}};
    for (DType t : {DType::F32, DType::F64})
        for (const Size s : sizes) {
            Cube img = testing::random_cube(s.w, s.h, 4, t, seed, 0.0, 1.0);
            img.set_value(s.w / 2, s.h / 2, 0, NAN);  // the centre pixel for odd sizes (r = 0)
            img.set_value(s.w / 4, s.h / 2, 1, INFINITY);
            img.set_value(0, 0, 2, NAN);
            for (bool sym : {true, false}) {
                const std::vector<NamedRun> runs = {
                    {"set 34", [&](const Context& c, const Cube& i) { return zernike_set(c, i, 34, with(ZernikeMethod::Auto, sym)); }},
                    {"order 20", [&](const Context& c, const Cube& i) { return zernike_order(c, i, 20, with(ZernikeMethod::QRecursive, sym)); }},
                    {"direct", [&](const Context& c, const Cube& i) { return zernike_moments(c, i, kTableIV, with(ZernikeMethod::Direct, sym)); }}};
                for (const NamedRun& r : runs) {
                    SCOPED_TRACE(r.name + (sym ? " sym " : " plain ") + img.shape().describe());
                    const ZernikeMoments c = r.run(cpu_context(), img), g = r.run(gpu, img);
                    EXPECT_TRUE(agree(c, g, img));
                    for (std::size_t k = 0; k < g.count(); ++k) {
                        EXPECT_TRUE(std::isnan(g.image(0)[k].real()) && std::isnan(g.image(0)[k].imag())) << "band 0, moment " << k;
                        EXPECT_FALSE(std::isfinite(g.image(1)[k].real()) && std::isfinite(g.image(1)[k].imag())) << "band 1, moment " << k;
                        EXPECT_TRUE(std::isfinite(g.image(2)[k].real()) && std::isfinite(g.image(2)[k].imag())) << "band 2, moment " << k;
                    }
                }
            }
        }
}

// Spec §5.6: a 1×1 image has A(n,0) = (n+1)(−1)^(n/2)·f for even n and every other moment 0. The
// sum has one term, so the GPU equals the CPU exactly.
TEST(ZernikeGpuData, OneByOneImage) {
    REQUIRE_GPU();
    Cube img(1, 1, 3, DType::F64);
    img.set_value(0, 0, 0, 7.25);
    img.set_value(0, 0, 1, -3.0);
    using M = ZernikeMethod;
    for (M method : {M::Auto, M::Direct, M::QRecursive, M::Kintner})
        for (ZernikeRadial radial : {ZernikeRadial::Stable, ZernikeRadial::Explicit})
            for (bool sym : {true, false})
                for (ZernikePrecision p : {ZernikePrecision::Double, ZernikePrecision::Float})
                    for (ZernikeMapping mapping : {ZernikeMapping::Inscribed, ZernikeMapping::Circumscribed}) {
                        if (radial == ZernikeRadial::Explicit && method != M::Direct) continue;
                        ZernikeOptions o = with(method, sym, p);
                        o.radial = radial;
                        o.mapping = mapping;
                        const int nmax = radial == ZernikeRadial::Explicit ? 20 : 40;
                        SCOPED_TRACE(std::string(zernike_method_name(method)) + (radial == ZernikeRadial::Explicit ? "/explicit " : " ") +
                                     std::string(zernike_precision_name(p)) + (sym ? " sym " : " plain ") +
                                     std::string(zernike_mapping_name(mapping)));
                        const ZernikeMoments c = zernike_set(cpu_context(), img, nmax, o), g = zernike_set(gpu, img, nmax, o);
                        ASSERT_EQ(c.values.size(), g.values.size());
                        for (std::size_t i = 0; i < c.values.size(); ++i) {
                            EXPECT_EQ(c.values[i].real(), g.values[i].real()) << i;
                            EXPECT_EQ(c.values[i].imag(), g.values[i].imag()) << i;
                        }
                        if (mapping != ZernikeMapping::Inscribed) continue;
                        const double tol = p == ZernikePrecision::Double ? 1e-12 : 1e-5;  // the radial chain at t = 0
                        for (int b = 0; b < 3; ++b)
                            for (std::size_t k = 0; k < g.count(); ++k) {
                                const ZernikeIndex z = g.indices[k];
                                const double f = img.value(0, 0, b);
                                const double want = z.m == 0 ? (z.n + 1) * ((z.n / 2) % 2 ? -f : f) : 0.0;
                                EXPECT_NEAR(g.image(b)[k].real(), want, tol * (z.n + 1) * std::abs(f)) << "A(" << z.n << "," << z.m << ")";
                                EXPECT_EQ(g.image(b)[k].imag(), 0.0) << "A(" << z.n << "," << z.m << ")";
                            }
                    }
}

// ---- Large image -----------------------------------------------------------------------------------

// 2048² f32, the whole set to order 34 on the GPU (the seed's largest workload, spec §5.7) against
// the CPU's whole set (symmetric: ≈ 0.4 M representatives, 0.3 s on 2 cores; plain: ≈ 2.5 s on 2
// cores), and the Table IV list plus a few more through zernike_moments on both.
TEST(ZernikeGpuData, LargeImage2048SetTo34) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const int N = sanitized() ? 256 : 2048;
    const Cube img = testing::random_cube(N, N, 1, DType::F32, seed, 0.0, 1.0);
    std::vector<ZernikeIndex> few = kTableIV;
    few.insert(few.end(), {{1, 1}, {20, 4}, {33, 33}});
    for (bool sym : {true, false})
        for (ZernikePrecision p : {ZernikePrecision::Double, ZernikePrecision::Float}) {
            SCOPED_TRACE(std::string(sym ? "sym " : "plain ") + std::string(zernike_precision_name(p)));
            const ZernikeMoments g = zernike_set(gpu, img, 34, with(ZernikeMethod::Auto, sym, p));
            ASSERT_EQ(g.count(), 324u);
            EXPECT_TRUE(agree(zernike_set(cpu_context(), img, 34, with(ZernikeMethod::Auto, sym, p)), g, img)) << "whole set";
            const ZernikeOptions o = with(ZernikeMethod::Direct, sym, p);
            EXPECT_TRUE(agree(zernike_moments(cpu_context(), img, few, o), zernike_moments(gpu, img, few, o), img)) << "direct list";
        }
}

}  // namespace
}  // namespace cubekit
