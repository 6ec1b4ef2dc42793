// RCMG: CUDA backend against the CPU reference (spec A5). Built everywhere; every test skips
// (and says so) where no CUDA device exists. scripts/gpu-check runs them on the H100.
//
// Exactness: the spectral and shared-pairs kernels add the same squares in the same band order
// as the CPU, both built without contraction, so they must agree bit for bit for every element
// type and both precisions. The spatial kernel (the seed's band-parallel mapping) adds each
// pair's terms in a butterfly order: exact for integer inputs with f64 accumulation (every sum
// is an integer < 2^53), else within kSpatialF64RelTol (f64 rounding of a different order,
// ~B·2^-53) or kSpatialF32RelTol (f32; a near-tie may flip the rejected pair, counted apart).
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "cubekit/gradient.hpp"
#include "cubekit/io.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using testing::cubes_close;
using testing::cubes_identical;

constexpr double kSpatialF64RelTol = 1e-12;
constexpr double kSpatialF32RelTol = 1e-5;

// GPU result through rcmg_into with the output poisoned (0xFF bytes: NaN for floats), so an
// unwritten pixel shows.
Cube gpu_rcmg(const Context& gpu, const Cube& cube, const RcmgOptions& options) {
    const Cube bsq = cube.to_layout(Layout::BSQ);
    const DeviceCube d_cube = DeviceCube::upload(gpu, bsq);
    DeviceCube d_out(gpu, CubeShape{cube.width(), cube.height(), 1, options.out_type, Layout::BSQ});
    d_out.buffer().fill_bytes(gpu, 0xFF);
    rcmg_into(gpu, d_cube, d_out, options);
    return d_out.download(gpu);
}

struct Shape { int w, h, b; };
const Shape kShapes[] = {{1, 1, 1}, {1, 17, 3}, {17, 1, 3}, {2, 2, 2}, {31, 9, 2}, {61, 37, 5},
                         {33, 30, 1}, {47, 15, 300}, {113, 127, 103}};
const DType kTypes[] = {DType::U8, DType::U16, DType::I16, DType::U32, DType::I32, DType::F32, DType::F64};

double type_hi(DType t) {
    switch (t) {
        case DType::U8: return 255;
        case DType::U16: return 65535;
        case DType::I16: return 32767;
        default: return 1e6;
    }
}

TEST(RcmgGpu, SpectralAndSharedPairsMatchCpuBitForBit) {
    REQUIRE_GPU();
    for (const Shape& s : kShapes)
        for (DType t : kTypes) {
            if (s.w * s.h * s.b > 200000 && t != DType::F32 && t != DType::I16) continue;  // keep CPU time small
            const std::uint64_t seed = testing::test_seed();
            const Cube cube = testing::random_cube(s.w, s.h, s.b, t, seed, t == DType::U8 || t == DType::U16 || t == DType::U32 ? 0 : -type_hi(t), type_hi(t));
            for (int c : {4, 8})
                for (int r = 0; r <= (c == 4 ? 1 : 3); ++r)
                    for (Precision p : {Precision::F64, Precision::F32}) {
                        const RcmgOptions o{.connectivity = c, .reject = r, .precision = p};
                        SCOPED_TRACE(std::to_string(s.w) + "x" + std::to_string(s.h) + "x" + std::to_string(s.b) + " " +
                                     std::string(dtype_name(t)) + " c=" + std::to_string(c) + " r=" + std::to_string(r) +
                                     " precision " + std::string(precision_name(p)) + " seed " + std::to_string(seed));
                        const Cube cpu = rcmg(cpu_context(), cube, o);
                        for (RcmgPartition part : {RcmgPartition::Auto, RcmgPartition::Spectral}) {
                            RcmgOptions g = o;
                            g.partition = part;
                            ASSERT_TRUE(cubes_identical(cpu, gpu_rcmg(gpu, cube, g))) << partition_name(part);
                        }
                    }
        }
}

TEST(RcmgGpu, F64OutputAndSquaredMatchCpu) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube cube = testing::random_cube(70, 45, 17, DType::F64, seed, -1, 1);
    for (bool squared : {false, true})
        for (RcmgPartition part : {RcmgPartition::Auto, RcmgPartition::Spectral}) {
            const RcmgOptions o{.out_type = DType::F64, .squared = squared, .partition = part};
            EXPECT_TRUE(cubes_identical(rcmg(cpu_context(), cube, o), gpu_rcmg(gpu, cube, o)));
        }
}

TEST(RcmgGpu, SpatialPartitionAgreesWithinStatedTolerance) {
    REQUIRE_GPU();
    for (const Shape& s : {Shape{1, 1, 1}, Shape{31, 9, 2}, Shape{61, 37, 103}, Shape{40, 20, 300}})
        for (DType t : {DType::U8, DType::I16, DType::U16, DType::F32, DType::F64}) {
            const std::uint64_t seed = testing::test_seed();
            const Cube cube = testing::random_cube(s.w, s.h, s.b, t, seed, t == DType::U8 || t == DType::U16 ? 0 : -type_hi(t), type_hi(t));
            for (int c : {4, 8}) {
                SCOPED_TRACE(std::to_string(s.w) + "x" + std::to_string(s.h) + "x" + std::to_string(s.b) + " " +
                             std::string(dtype_name(t)) + " c=" + std::to_string(c) + " seed " + std::to_string(seed));
                const RcmgOptions o{.connectivity = c, .reject = 1, .partition = RcmgPartition::Spatial};
                const Cube cpu = rcmg(cpu_context(), cube, o), g = gpu_rcmg(gpu, cube, o);
                if (dtype_is_float(t)) {
                    EXPECT_TRUE(cubes_close(cpu, g, kSpatialF64RelTol, 1e-300));
                } else {
                    EXPECT_TRUE(cubes_identical(cpu, g)) << "integer inputs, f64 sums: exact in any order";
                }
                // f32 accumulation: count pixels beyond the tolerance (near-tie flips), must be rare.
                RcmgOptions o32 = o;
                o32.precision = Precision::F32;
                const Cube c32 = rcmg(cpu_context(), cube, o32), g32 = gpu_rcmg(gpu, cube, o32);
                int beyond = 0;
                for (int y = 0; y < s.h; ++y)
                    for (int x = 0; x < s.w; ++x) {
                        const double e = c32.value(x, y, 0), a = g32.value(x, y, 0);
                        if (!(std::abs(a - e) <= kSpatialF32RelTol * std::abs(e))) ++beyond;
                    }
                EXPECT_LE(beyond, 1 + s.w * s.h / 200) << "f32 spatial: " << beyond << " pixels beyond " << kSpatialF32RelTol;
            }
        }
}

TEST(RcmgGpu, ManyTiesAndNaN) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube ties = testing::random_levels_cube(67, 41, 3, DType::U8, seed, 3);
    Cube nan = testing::random_cube(37, 29, 4, DType::F32, seed, 0, 1);
    nan.at<float>(0, 0, 0) = NAN;
    nan.at<float>(20, 13, 3) = NAN;
    nan.at<float>(36, 28, 1) = NAN;
    for (int c : {4, 8})
        for (int r = 0; r <= (c == 4 ? 1 : 3); ++r)
            for (RcmgPartition part : {RcmgPartition::Auto, RcmgPartition::Spectral, RcmgPartition::Spatial}) {
                const RcmgOptions o{.connectivity = c, .reject = r, .partition = part};
                EXPECT_TRUE(cubes_identical(rcmg(cpu_context(), ties, o), gpu_rcmg(gpu, ties, o)))
                    << "ties c=" << c << " r=" << r << " " << partition_name(part);
                if (part != RcmgPartition::Spatial) {
                    EXPECT_TRUE(cubes_identical(rcmg(cpu_context(), nan, o), gpu_rcmg(gpu, nan, o)))
                        << "NaN c=" << c << " r=" << r << " " << partition_name(part);
                }
            }
}

// The shared-pairs kernel fuses d += diff·diff into one FMA for a band tile whose samples are all
// integers of magnitude ≤ 2^24 (f64 sums) or ≤ 2^10 (f32 sums): there diff² is exact, so the FMA
// rounds like the CPU's unfused sum. Squares of the scene sit on either side of those bounds
// (exactly at them, just beyond, up to 2^27 where a fused sum differs in about half the pixels,
// fractional, NaN), so a wrong bound or a wrong vote shows as a differing pixel.
TEST(RcmgGpu, FusedSquaresOnlyWhereExact) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const int W = 161, H = 121, B = 23;
    std::mt19937_64 rng(seed);
    // Regime of a 40×40 square of pixels (a kernel tile spans one or two): 0 the f64 bound, 1 beyond
    // it, 2 far beyond, 3 fractional, 4 the f32 bound, 5 just beyond the f32 bound, 6 small integers.
    auto regime = [](int x, int y) { return (x / 40 + 5 * (y / 40)) % 7; };
    auto sample = [&](int kind) -> double {
        std::uniform_int_distribution<long long> pick(0, 1 << 20);
        const long long u = pick(rng);
        switch (kind) {
            case 0: return (u % 2 ? 1 : -1) * double((1 << 24) - u % 64);
            case 1: return (u % 2 ? 1 : -1) * double((1 << 24) + 1 + u % 64);
            case 2: return double((u << 7) - (1LL << 26) + (u & 127));
            case 3: return double(u) / 7.0 - 70000.0;
            case 4: return double(u % 2049) - 1024.0;
            case 5: return (u % 2 ? 1 : -1) * double(1025 + u % 16);
            default: return double(u % 200) - 100.0;
        }
    };
    for (DType t : {DType::F32, DType::F64, DType::I32, DType::U32, DType::I16, DType::U16}) {
        Cube cube(W, H, B, t, Layout::BSQ);
        for (int b = 0; b < B; ++b)
            for (int y = 0; y < H; ++y)
                for (int x = 0; x < W; ++x) {
                    double v = sample(regime(x, y));
                    if (t == DType::U32 || t == DType::U16) v = std::abs(v);
                    if (t == DType::I16 || t == DType::U16) v = std::fmod(v, 32768.0);
                    if (t == DType::F32 && regime(x, y) == 3 && (x * 7 + y * 3 + b) % 997 == 0) v = NAN;
                    cube.set_value(x, y, b, v);
                }
        for (int c : {4, 8})
            for (Precision p : {Precision::F64, Precision::F32}) {
                const RcmgOptions o{.connectivity = c, .reject = 1, .precision = p};
                EXPECT_TRUE(cubes_identical(rcmg(cpu_context(), cube, o), gpu_rcmg(gpu, cube, o)))
                    << dtype_name(t) << " c=" << c << " " << precision_name(p);
            }
    }
}

TEST(RcmgGpu, HostApiUsesTheDevice) {
    REQUIRE_GPU();
    const Cube cube = testing::random_cube(50, 40, 8, DType::I16, 5, -1000, 1000, Layout::BIP);
    EXPECT_EQ(rcmg_implementation(gpu, {}), "cuda-shared-pairs");
    EXPECT_TRUE(cubes_identical(rcmg(cpu_context(), cube, {}), rcmg(gpu, cube, {})));
}

// Every hyperspectral cube of the shared data, plus the embedded scene.
TEST(RcmgGpu, RealScenesMatchCpuBitForBit) {
    REQUIRE_GPU();
    const auto scenes = testing::hyperspectral_scenes();
    for (const testing::SceneFile& scene_file : scenes) {
        SCOPED_TRACE(scene_file.path.string());
        const Cube scene = read_cube(scene_file.path, {.var = scene_file.var});
        for (int c : {4, 8})
            for (Precision p : {Precision::F64, Precision::F32}) {
                const RcmgOptions o{.connectivity = c, .precision = p};
                const Cube cpu = rcmg(cpu_context(), scene, o);
                for (RcmgPartition part : {RcmgPartition::Auto, RcmgPartition::Spectral}) {
                    RcmgOptions g = o;
                    g.partition = part;
                    EXPECT_TRUE(cubes_identical(cpu, gpu_rcmg(gpu, scene, g)))
                        << "c=" << c << " " << precision_name(p) << " " << partition_name(part);
                }
            }
    }
    RecordProperty("scenes_compared", int(scenes.size()));
}

TEST(RcmgGpu, CudaBackendNeverFallsBack) {
    // With a device this constructs; the CPU-only counterpart is in cli_test (exit 4).
    REQUIRE_GPU();
    EXPECT_TRUE(gpu.is_cuda());
    EXPECT_THROW(Context({.backend = Backend::Cuda, .device = 1000}), DeviceError);
}

}  // namespace
}  // namespace cubekit
