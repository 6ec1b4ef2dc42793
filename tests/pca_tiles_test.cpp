// PCA in tiles (issue 17) on the CPU backend: the model and the scores equal pca_into's bit for bit for
// every element type, layouts, non-finite pixels and tile sizes down to one pixel; the budget; a file
// read by windows; the CLI. (The CUDA streamed path: pca_tiles_gpu_test in pca_gpu_test.cpp.)
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

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

Cube poisoned_scores(int w, int h, int k) {
    Cube out(w, h, k, DType::F64);
    std::memset(out.bytes(), 0xAB, out.num_bytes());
    return out;
}

TEST(PcaTiles, TiledEqualsWholeOnTheCpu) {
    const Context& cpu = cpu_context();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const Layout layouts[] = {Layout::BSQ, Layout::BIP, Layout::BIL};
    int i = 0, compared = 0;
    for (DType t : pca_test::kTypes) {
        const Layout layout = layouts[i++ % 3];
        Cube cube = correlated_cube(19, 14, 6, t, seed + std::uint64_t(i), layout);
        if (t == DType::F32 || t == DType::F64) {  // pixels left out of the fit, NaN scores
            cube.set_value(3, 4, 2, std::numeric_limits<double>::quiet_NaN());
            cube.set_value(0, 13, 5, std::numeric_limits<double>::infinity());
        }
        for (int k : {1, 3, 6}) {
            Cube whole(19, 14, k, DType::F64);
            const PcaModel model = pca_into(cpu, cube, whole.mutable_view(), {.components = k});
            for (auto [tw, th] : std::vector<std::pair<int, int>>{{1, 1}, {2, 3}, {19, 1}, {7, 5}}) {
                SCOPED_TRACE(::testing::Message() << dtype_name(t) << " k " << k << " tiles " << tw << "x" << th);
                Cube out = poisoned_scores(19, 14, k);
                const PcaTiled r = pca_tiled(cpu, cube, out.mutable_view(), {.components = k},
                                             {.tile_width = tw, .tile_height = th});
                EXPECT_GT(r.run.tiles, 1u);
                EXPECT_EQ(r.passes, t == DType::F32 || t == DType::F64 ? 3 : 2);
                EXPECT_TRUE(models_identical(model, r.model));
                ASSERT_TRUE(cubes_identical(whole, out));
                ++compared;
            }
        }
    }
    EXPECT_EQ(compared, 7 * 3 * 4);
}

// The embedded scene under a memory budget, and from its file read by windows.
TEST(PcaTiles, RealSceneUnderABudgetAndFromAFile) {
    const Context& cpu = cpu_context();
    const auto path = testing::source_path("data/samson/samson_1.img");
    const Cube scene = read_cube(path);
    const PcaResult whole = pca(cpu, scene, {.components = 4});
    Cube out = poisoned_scores(scene.width(), scene.height(), 4);
    const PcaTiled r = pca_tiled(cpu, scene, out.mutable_view(), {.components = 4}, {.memory_limit = 48 << 10});
    EXPECT_GT(r.run.tiles, 4u);
    EXPECT_LE(r.run.peak_bytes, std::size_t(48) << 10);
    EXPECT_TRUE(models_identical(whole.model, r.model));
    EXPECT_TRUE(cubes_identical(whole.scores, out));
    Cube from_file = poisoned_scores(scene.width(), scene.height(), 4);
    const PcaTiled f = pca_tiled(cpu, CubeFile(path), from_file.mutable_view(), {.components = 4}, {.memory_limit = 256 << 10});
    EXPECT_GT(f.run.tiles, 1u);
    EXPECT_TRUE(models_identical(whole.model, f.model));
    EXPECT_TRUE(cubes_identical(whole.scores, from_file));

    Cube wrong(scene.width(), scene.height(), 3, DType::F64);
    EXPECT_THROW(pca_tiled(cpu, scene, wrong.mutable_view(), {.components = 4}), InvalidInput);
    EXPECT_THROW(pca_tiled(cpu, scene, out.mutable_view(), {.components = 0}), InvalidInput);
    Cube all_nan(5, 4, 2, DType::F32);
    for (std::size_t j = 0; j < all_nan.num_elements(); ++j) all_nan.data<float>()[j] = std::numeric_limits<float>::quiet_NaN();
    Cube o2 = poisoned_scores(5, 4, 1);
    EXPECT_THROW(pca_tiled(cpu, all_nan, o2.mutable_view(), {.components = 1}, {.tile_width = 2}), InvalidInput);
}

// The piece API (what cubekit.dask.pca calls): three uneven windows scanned, summed and merged in
// another order give the whole fit.
TEST(PcaTiles, PiecesMergeToTheWholeModel) {
    const Context& cpu = cpu_context();
    for (DType t : {DType::I16, DType::F32}) {
        Cube cube = correlated_cube(23, 17, 5, t, testing::test_seed());
        if (t == DType::F32) cube.set_value(2, 2, 1, std::numeric_limits<double>::quiet_NaN());
        const PcaModel whole = pca_fit(cpu, cube, {.components = 3});
        const std::vector<CubeView> pieces = {cube.view().window(0, 0, 23, 6), cube.view().window(0, 6, 10, 11),
                                              cube.view().window(10, 6, 13, 11)};
        PcaPieceScan scan;
        for (const CubeView& p : pieces) {
            const PcaPieceScan s = pca_piece_scan(cpu, p);
            scan.count += s.count, scan.max_abs = std::max(scan.max_abs, s.max_abs);
        }
        const int e = t == DType::F32 ? pca_scene_exponent(scan) : 0;
        PcaPieceSums total = pca_piece_sums(cpu, pieces[2], e);
        pca_add_sums(total, pca_piece_sums(cpu, pieces[0], e));
        pca_add_sums(total, pca_piece_sums(cpu, pieces[1], e));
        EXPECT_TRUE(models_identical(whole, pca_model_from_piece_sums(total, 3))) << dtype_name(t);
        PcaPieceSums other = pca_piece_sums(cpu, pieces[0], e + 1);
        if (t == DType::F32) EXPECT_THROW(pca_add_sums(total, other), InvalidInput);  // another fixed point
    }
    EXPECT_THROW(pca_scene_exponent({}), InvalidInput);
}

// The CLI's tiled path writes the same scores and model as the whole-scene run.
TEST(PcaTilesCli, MemoryLimitWritesTheSameScores) {
    const auto dir = testing::temp_dir("pca_tiles_cli");
    const std::string in = testing::q(testing::source_path("data/samson/samson_1.img"));
    const auto whole = testing::run_cli("pca " + in + " " + testing::q(dir / "whole.npy") + " -k 3 --backend cpu --json --quiet");
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    const auto tiled = testing::run_cli("pca " + in + " " + testing::q(dir / "tiled.npy") +
                                        " -k 3 --backend cpu --memory-limit 64K --json --quiet");
    ASSERT_EQ(tiled.exit_code, 0) << tiled.err;
    const auto jw = nlohmann::json::parse(whole.out), jt = nlohmann::json::parse(tiled.out);
    EXPECT_GT(jt["tiled"]["tiles"].get<int>(), 2);
    EXPECT_EQ(jt["tiled"]["passes"].get<int>(), 2);  // i16: the sums, then the scores
    EXPECT_TRUE(jt["input"]["windowed"].get<bool>());
    EXPECT_EQ(jw["explained_variance_ratio"], jt["explained_variance_ratio"]);
    EXPECT_TRUE(cubes_identical(read_cube(dir / "whole.npy"), read_cube(dir / "tiled.npy")));
    // The scores were written tile by tile into tiled.npy, put in place after the model.
    ASSERT_EQ(jt["outputs"].size(), 2u);
    EXPECT_EQ(jt["outputs"][1]["path"], (dir / "tiled.npy").string());
    EXPECT_TRUE(jt["outputs"][1].value("streamed", false));
    EXPECT_EQ(jt["outputs"][1]["role"], "components");
    EXPECT_EQ(testing::read_text(dir / "whole.npy"), testing::read_text(dir / "tiled.npy"));
    // ENVI too, with the scene's map information kept.
    const auto whole_envi = testing::run_cli("pca " + in + " " + testing::q(dir / "whole.hdr") + " -k 2 --backend cpu --quiet");
    ASSERT_EQ(whole_envi.exit_code, 0) << whole_envi.err;
    const auto tiled_envi = testing::run_cli("pca " + in + " " + testing::q(dir / "tiled.hdr") + " -k 2 --backend cpu --tile-size 9x7 --quiet");
    ASSERT_EQ(tiled_envi.exit_code, 0) << tiled_envi.err;
    for (const char* ext : {".hdr", ".img"})
        EXPECT_EQ(testing::read_text(dir / (std::string("whole") + ext)), testing::read_text(dir / (std::string("tiled") + ext))) << ext;
}

}  // namespace
}  // namespace cubekit
