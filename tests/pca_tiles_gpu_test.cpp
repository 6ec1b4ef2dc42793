// PCA streamed in tiles on CUDA (issue 17): the scan and sums passes and the scores pass on one or
// several devices give the CPU whole-scene model and scores bit for bit (the CUDA PCA is bit-identical
// to the CPU, pca_gpu_test.cpp), for every element type, tile size, lane count and device list, from
// memory and from a file. Skips without a device.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

#include "cubekit/io.hpp"
#include "cubekit/linalg.hpp"
#include "pca_test_helpers.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using pca_test::correlated_cube;
using pca_test::models_identical;
using testing::cpu_context;
using testing::cubes_identical;

TEST(PcaTilesGpu, StreamedEqualsCpuWhole) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const std::vector<int> devices = testing::devices_twice_or_all();
    const Layout layouts[] = {Layout::BSQ, Layout::BIP, Layout::BIL};
    int i = 0;
    for (DType t : pca_test::kTypes) {
        const Layout layout = layouts[i++ % 3];
        Cube cube = correlated_cube(157, 61, 9, t, seed + std::uint64_t(i), layout);
        if (t == DType::F32 || t == DType::F64) {
            cube.set_value(3, 4, 2, std::numeric_limits<double>::quiet_NaN());
            cube.set_value(100, 60, 8, -std::numeric_limits<double>::infinity());
        }
        const PcaResult whole = pca(cpu_context(), cube, {.components = 4});
        struct Run { int tw, th, lanes; std::vector<int> devices; };
        for (const Run& r : std::vector<Run>{{157, 8, 2, {}}, {31, 17, 1, {}}, {6, 5, 3, {}}, {157, 3, 2, devices}}) {
            SCOPED_TRACE(::testing::Message() << dtype_name(t) << " tiles " << r.tw << "x" << r.th << " lanes " << r.lanes
                                              << " devices " << r.devices.size());
            Cube out(157, 61, 4, DType::F64);
            std::memset(out.bytes(), 0xAB, out.num_bytes());
            const PcaTiled p = pca_tiled(gpu, cube, out.mutable_view(), {.components = 4},
                                         {.devices = r.devices, .lanes = r.lanes, .tile_width = r.tw, .tile_height = r.th});
            EXPECT_GT(p.run.tiles, 1u);
            EXPECT_TRUE(models_identical(whole.model, p.model));
            ASSERT_TRUE(cubes_identical(whole.scores, out));
        }
    }
}

TEST(PcaTilesGpu, DeviceBudgetAndFile) {
    REQUIRE_GPU();
    const auto path = testing::source_path("data/samson/samson_1.img");
    const Cube scene = read_cube(path);
    const PcaResult whole = pca(cpu_context(), scene, {.components = 5});
    Cube out(scene.width(), scene.height(), 5, DType::F64);
    const PcaTiled p = pca_tiled(gpu, scene, out.mutable_view(), {.components = 5}, {.device_memory_limit = 512 << 10});
    EXPECT_GT(p.run.tiles, 2u);
    EXPECT_LE(p.run.device_peak_bytes, std::size_t(512) << 10);
    EXPECT_TRUE(models_identical(whole.model, p.model));
    EXPECT_TRUE(cubes_identical(whole.scores, out));
    Cube from_file(scene.width(), scene.height(), 5, DType::F64);
    const PcaTiled f = pca_tiled(gpu, CubeFile(path), from_file.mutable_view(), {.components = 5}, {.tile_height = 10});
    EXPECT_TRUE(models_identical(whole.model, f.model));
    EXPECT_TRUE(cubes_identical(whole.scores, from_file));
}

}  // namespace
}  // namespace cubekit
