// Zernike moments on the GPU: the exactness the spec promises (§3.11, §3.12, §5.3): two runs are
// bitwise identical; a batch gives every band bitwise what it gets alone; the reconstruction from
// the same moments is bitwise the CPU's. Synthetic agreement per method/type/mapping is in
// zernike_gpu_test.cpp, real data and special values in zernike_gpu_data_test.cpp, the device-
// resident calls and views in zernike_gpu_into_test.cpp; zernike_gpu_test_helpers.hpp explains the
// tolerance. Tests named *Large* are the slow ones for sanitizer runs to leave out; the others
// shrink their inputs under compute-sanitizer (NV_SANITIZER_INJECTION_*) or CUBEKIT_TEST_QUICK=1.
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

// ---- Bitwise comparisons ----------------------------------------------------------------------

// Band `band` of a batch against the same band computed alone: equal re and im (EXPECT_EQ rules).
::testing::AssertionResult band_equals(const ZernikeMoments& batch, int band, const ZernikeMoments& alone) {
    if (alone.images != 1 || alone.indices != batch.indices) return ::testing::AssertionFailure() << "shapes differ";
    for (std::size_t k = 0; k < batch.count(); ++k) {
        const std::complex<double> a = batch.image(band)[k], b = alone.image(0)[k];
        if (a.real() != b.real() || a.imag() != b.imag())
            return ::testing::AssertionFailure() << "band " << band << " A(" << batch.indices[k].n << "," << batch.indices[k].m
                                                 << "): batch " << a << ", alone " << b << " (diff " << a - b << ")";
    }
    return ::testing::AssertionSuccess();
}

// The paths whose exactness is promised: the Kintner set, the direct method, the q-recursion.
// main_only: just one of each (for batches of hundreds of bands, each band also run alone).
std::vector<NamedRun> exact_paths(bool main_only = false) {
    using M = ZernikeMethod;
    std::vector<NamedRun> all = {
        {"kintner set 20", [](const Context& c, const Cube& i) { return zernike_set(c, i, 20, with(M::Kintner)); }},
        {"direct Table IV", [](const Context& c, const Cube& i) { return zernike_moments(c, i, kTableIV, with(M::Direct)); }},
        {"qrecursive order 20", [](const Context& c, const Cube& i) { return zernike_order(c, i, 20, with(M::QRecursive)); }},
        {"kintner set 20 plain", [](const Context& c, const Cube& i) { return zernike_set(c, i, 20, with(M::Kintner, false)); }},
        {"kintner set 34 f32", [](const Context& c, const Cube& i) { return zernike_set(c, i, 34, with(M::Kintner, true, ZernikePrecision::Float)); }},
        {"direct set 10 plain", [](const Context& c, const Cube& i) { return zernike_set(c, i, 10, with(M::Direct, false)); }},
        {"direct A(25,13)", [](const Context& c, const Cube& i) { return zernike_moment(c, i, 25, 13, with(M::Direct)); }},
        {"qrecursive order 34 plain", [](const Context& c, const Cube& i) { return zernike_order(c, i, 34, with(M::QRecursive, false)); }},
        {"qrecursive set 12", [](const Context& c, const Cube& i) { return zernike_set(c, i, 12, with(M::QRecursive)); }},
    };
    if (main_only) all.resize(3);
    return all;
}

// ---- Exactness -----------------------------------------------------------------------------------

// Spec §5.3: every GPU run twice gives bitwise-identical results (another request in between, so
// stale device scratch would show).
TEST(ZernikeGpuExact, RepeatedRunsAreBitwiseIdentical) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube other = testing::random_cube(37, 41, 2, DType::U8, seed + 1, 0, 255);
    const std::vector<Size> sizes = sanitized() ? std::vector<Size>{{64, 64}} : std::vector<Size>{{256, 256}, {201, 200}, {64, 64}};
    const std::vector<NamedRun> paths = exact_paths();
    for (const Size s : sizes) {
        const Cube img = testing::random_cube(s.w, s.h, 3, DType::F32, seed, 0.0, 1.0);
        for (std::size_t p = 0; p < paths.size(); ++p) {
            SCOPED_TRACE(paths[p].name + " on " + img.shape().describe());
            const ZernikeMoments first = paths[p].run(gpu, img);
            paths[(p + 1) % paths.size()].run(gpu, other);
            EXPECT_TRUE(identical(first, paths[p].run(gpu, img)));
            EXPECT_TRUE(agree(paths[p].run(cpu_context(), img), first, img));
        }
    }
}

// A batch (cube of B bands) gives every band bitwise what that band gives alone, and the batch
// agrees with the CPU.
void check_batch(const Context& gpu, const Cube& cube, const NamedRun& path) {
    SCOPED_TRACE(path.name + " on " + cube.shape().describe());
    const ZernikeMoments batch = path.run(gpu, cube);
    EXPECT_TRUE(agree(path.run(cpu_context(), cube), batch, cube));
    int failures = 0;
    for (int b = 0; b < cube.bands() && failures < 3; ++b) {
        const ::testing::AssertionResult r = band_equals(batch, b, path.run(gpu, cube.select_bands({b})));
        if (!r) ++failures;
        EXPECT_TRUE(r);
    }
}

TEST(ZernikeGpuExact, BatchGivesEveryBandItsOwnResult) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    struct Case {
        int w, h, b;
        DType t;
    };
    const std::vector<Case> cases = sanitized() ? std::vector<Case>{{45, 44, 3, DType::F64}, {20, 17, 20, DType::U8}}
                                                : std::vector<Case>{{64, 64, 1, DType::F64},   {45, 44, 3, DType::F64},
                                                                    {33, 33, 257, DType::U16}, {20, 17, 257, DType::F32},
                                                                    {1, 1, 257, DType::F64},   {128, 96, 17, DType::I16}};
    for (const Case& k : cases) {
        const Cube cube = testing::random_cube(k.w, k.h, k.b, k.t, seed, 0, 1000);
        for (const NamedRun& path : exact_paths(k.b > 64)) check_batch(gpu, cube, path);
    }
}

// The largest batch: 1024 bands of 32×32 (the shape a GEMM-style batched path would take).
TEST(ZernikeGpuExact, LargeBatch1024BandsGivesEveryBandItsOwnResult) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube cube = testing::random_cube(32, 32, sanitized() ? 40 : 1024, DType::F32, seed, -1.0, 1.0);
    for (const NamedRun& path : exact_paths(true)) check_batch(gpu, cube, path);
}

// Spec §3.12: the per-pixel reconstruction is shared code (reconstruct_point, no sums across
// pixels), both backends are built without FP contraction, and IEEE double +, −, × and the
// correctly rounded division and sqrt of the disk geometry are the same on the host and the device;
// so from the same moments the two reconstructions must be bitwise equal. (Only an FMA
// contraction, fast-math division, or a device-side change of operation order would break this,
// and those are exactly what the test is for.) From the GPU's own moments the error is bounded by
// Σ_{n≤K} Σ_m c_m |ΔA(n,m)|·|V| ≤ 1e-12·mean|f|·Σ_{n≤K} (n+1)² (c_m = 2 for m > 0, |V| ≤ 1).
TEST(ZernikeGpuExact, ReconstructionIsBitwiseTheCpus) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    struct Case {
        Size s;
        ZernikeMapping mapping;
        double cx, cy, r;
    };
    using M = ZernikeMapping;
    std::vector<Case> cases = {{{64, 64}, M::Inscribed, 0, 0, 0},          {{100, 80}, M::Inscribed, 0, 0, 0},
                               {{100, 80}, M::Circumscribed, 0, 0, 0},     {{64, 64}, M::Circumscribed, 0, 0, 0},
                               {{100, 80}, M::Custom, 40.3, 30.7, 25.5},   {{100, 80}, M::Custom, 90.0, 10.0, 30.0},
                               {{1, 1}, M::Inscribed, 0, 0, 0},            {{3, 3}, M::Inscribed, 0, 0, 0},
                               {{101, 80}, M::Inscribed, 0, 0, 0}};
    if (sanitized()) cases.resize(2);
    for (const Case& k : cases)
        for (int K : {10, 40}) {
            ZernikeOptions o;
            o.mapping = k.mapping;
            o.center = {k.cx, k.cy};
            o.radius = k.r;
            const Cube img = testing::random_cube(k.s.w, k.s.h, 2, DType::F64, seed, 0.0, 1.0);
            SCOPED_TRACE(img.shape().describe() + " " + std::string(zernike_mapping_name(k.mapping)) + " K=" + std::to_string(K));
            const ZernikeMoments mc = zernike_set(cpu_context(), img, K, o), mg = zernike_set(gpu, img, K, o);
            EXPECT_TRUE(agree(mc, mg, img));
            const Cube rc = zernike_reconstruct(cpu_context(), mc);
            EXPECT_TRUE(testing::cubes_identical(rc, zernike_reconstruct(gpu, mc))) << "order " << K;
            EXPECT_TRUE(testing::cubes_identical(zernike_reconstruct(cpu_context(), mc, K / 2), zernike_reconstruct(gpu, mc, K / 2)))
                << "order " << K / 2 << " of a set to " << K;
            // Onto another grid: the disk of a larger image with the default mapping.
            const ZernikeDisk target = zernike_disk(k.s.w + 7, k.s.h + 4);
            EXPECT_TRUE(testing::cubes_identical(zernike_reconstruct(cpu_context(), mc, target), zernike_reconstruct(gpu, mc, target)))
                << "onto a " << target.width << "x" << target.height << " disk";
            // From the GPU's own moments.
            double weight = 0.0, mean = 0.0;
            for (int n = 0; n <= K; ++n) weight += double(n + 1) * double(n + 1);
            for (double m : mean_abs_inside(img, mc.disk)) mean = std::max(mean, m);
            EXPECT_TRUE(testing::cubes_close(rc, zernike_reconstruct(gpu, mg), kTol * weight, mean)) << "from the GPU moments";
        }
}

}  // namespace
}  // namespace cubekit
