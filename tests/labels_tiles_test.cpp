// Connected components in tiles (issue 17) on the CPU backend: labels and statistics equal
// label_components' exactly over element types, layouts, both connectivities, binary and
// multi-valued images, and tile sizes down to one pixel; the removal of small components likewise;
// the piece API on an uneven grid; a file read by windows; bad pieces. (CUDA: labels_tiles_gpu_test.cpp.)
#include <gtest/gtest.h>

#include <vector>

#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "labels_tiles_testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using testing::cubes_identical;
using testing::label_test_image;
using testing::poisoned_labels;
using testing::same_stats;

const std::vector<std::pair<int, int>> kTileSizes = {{1, 1}, {2, 3}, {5, 1}, {1, 4}, {7, 5}, {31, 2}, {4, 22}};

TEST(LabelsTiles, TiledEqualsWholeOnTheCpu) {
    const Context& cpu = cpu_context();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const DType types[] = {DType::U8, DType::U16, DType::I16, DType::U32, DType::I32};
    const Layout layouts[] = {Layout::BSQ, Layout::BIP, Layout::BIL};
    int compared = 0;
    for (int i = 0; i < 5; ++i) {
        const int bands = 1 + i % 3, values = i % 2 ? 3 : 1, percent = 35 + 10 * i;
        const Cube image = label_test_image(31, 22, bands, types[i], layouts[i % 3], percent, values, seed + std::uint64_t(i));
        for (int connectivity : {4, 8}) {
            const Components whole = label_components(cpu, image, connectivity);
            for (auto [tw, th] : kTileSizes) {
                SCOPED_TRACE(::testing::Message() << dtype_name(types[i]) << " conn " << connectivity << " tiles " << tw
                                                  << "x" << th);
                Cube out = poisoned_labels(31, 22, bands);
                const ComponentsTiled t = label_components_tiled(cpu, image, out.mutable_view(), connectivity,
                                                                 {.tile_width = tw, .tile_height = th});
                EXPECT_GT(t.run.tiles, 1u);
                ASSERT_TRUE(cubes_identical(whole.labels, out));
                ASSERT_TRUE(same_stats(whole.per_band, t.per_band));
                ++compared;
            }
        }
    }
    EXPECT_EQ(compared, 5 * 2 * int(kTileSizes.size()));
}

TEST(LabelsTiles, RemovalTiledEqualsWholeOnTheCpu) {
    const Context& cpu = cpu_context();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    for (int values : {1, 3}) {
        const Cube mask = label_test_image(29, 23, 2, DType::U8, values == 1 ? Layout::BSQ : Layout::BIP, 40, values, seed);
        for (int connectivity : {4, 8})
            for (std::int64_t min_size : {0, 2, 5, 40}) {
                const Cube whole = remove_small_components(cpu, mask, min_size, connectivity);
                for (auto [tw, th] : kTileSizes) {
                    SCOPED_TRACE(::testing::Message() << values << " values, conn " << connectivity << " min " << min_size
                                                      << " tiles " << tw << "x" << th);
                    Cube out(29, 23, 2, DType::U8);
                    const TiledRun r = remove_small_components_tiled(cpu, mask, out.mutable_view(), min_size, connectivity,
                                                                     {.tile_width = tw, .tile_height = th});
                    EXPECT_GT(r.tiles, 1u);
                    ASSERT_TRUE(cubes_identical(whole, out));
                }
            }
        // In place: the output is the mask.
        const Cube whole = remove_small_components(cpu, mask, 6, 8);
        Cube in_place = mask.clone();
        remove_small_components_tiled(cpu, in_place, in_place.mutable_view(), 6, 8, {.tile_width = 6, .tile_height = 4});
        EXPECT_TRUE(cubes_identical(whole, in_place));
    }
}

// A budget picks the tiles; a file is read by windows; the budget holds.
TEST(LabelsTiles, BudgetAndFile) {
    const Context& cpu = cpu_context();
    const Cube image = label_test_image(120, 90, 2, DType::U16, Layout::BIL, 50, 2, testing::test_seed());
    const Components whole = label_components(cpu, image, 8);
    Cube out = poisoned_labels(120, 90, 2);
    const ComponentsTiled t = label_components_tiled(cpu, image, out.mutable_view(), 8, {.memory_limit = 16 << 10});
    EXPECT_GT(t.run.tiles, 4u);
    EXPECT_LE(t.run.peak_bytes, std::size_t(16) << 10);
    EXPECT_TRUE(cubes_identical(whole.labels, out));
    EXPECT_TRUE(same_stats(whole.per_band, t.per_band));

    const auto dir = testing::temp_dir("labels_tiles_file");
    write_cube(image, dir / "image.hdr");
    Cube from_file = poisoned_labels(120, 90, 2);
    const ComponentsTiled f = label_components_tiled(cpu, CubeFile(dir / "image.hdr"), from_file.mutable_view(), 8,
                                                     {.memory_limit = 32 << 10});
    EXPECT_GT(f.run.tiles, 1u);
    EXPECT_TRUE(cubes_identical(whole.labels, from_file));
    const Cube mask = label_test_image(120, 90, 1, DType::U8, Layout::BSQ, 45, 1, testing::test_seed() + 1);
    write_cube(mask, dir / "mask.hdr");
    Cube cleaned(120, 90, 1, DType::U8);
    remove_small_components_tiled(cpu, CubeFile(dir / "mask.hdr"), cleaned.mutable_view(), 4, 8, {.memory_limit = 8 << 10});
    EXPECT_TRUE(cubes_identical(remove_small_components(cpu, mask, 4, 8), cleaned));
}

TEST(LabelsTiles, RefusesBadInput) {
    const Context& cpu = cpu_context();
    const Cube f(4, 4, 1, DType::F32);
    Cube out = poisoned_labels(4, 4, 1);
    EXPECT_THROW(label_components_tiled(cpu, f, out.mutable_view()), InvalidInput);
    const Cube m = label_test_image(4, 4, 1, DType::U8, Layout::BSQ, 50, 1, 1);
    EXPECT_THROW(label_components_tiled(cpu, m, out.mutable_view(), 6), InvalidInput);
    Cube wrong(4, 3, 1, DType::I32);
    EXPECT_THROW(label_components_tiled(cpu, m, wrong.mutable_view()), InvalidInput);
    const Cube u16(4, 4, 1, DType::U16);
    Cube o8(4, 4, 1, DType::U8);
    EXPECT_THROW(remove_small_components_tiled(cpu, u16, o8.mutable_view(), 3), InvalidInput);
}

// The piece API (what cubekit.dask calls): an uneven grid of windows labelled in any order and
// merged gives the whole labels; pieces that do not tile the scene are refused.
TEST(LabelsTiles, PiecesMergeToTheWholeLabels) {
    const Context& cpu = cpu_context();
    for (int connectivity : {4, 8}) {
        const Cube image = label_test_image(23, 17, 2, DType::I32, Layout::BSQ, 55, 2, testing::test_seed());
        const Components whole = label_components(cpu, image, connectivity);
        const std::vector<std::array<int, 4>> cells = {{10, 6, 13, 11}, {0, 0, 10, 6}, {10, 0, 13, 6}, {0, 6, 10, 11}};
        std::vector<LabelPiece> pieces;
        std::vector<Cube> local;
        for (const auto& [x0, y0, w, h] : cells) {
            local.emplace_back(w, h, 2, DType::I32);
            pieces.push_back(label_piece(cpu, image.view().window(x0, y0, w, h), x0, y0, local.back().mutable_view(), connectivity));
        }
        const LabelMerge m = merge_label_pieces(pieces, 23, 17, connectivity);
        EXPECT_TRUE(same_stats(whole.per_band, m.per_band));
        for (std::size_t i = 0; i < cells.size(); ++i) {
            const auto& [x0, y0, w, h] = cells[i];
            for (int b = 0; b < 2; ++b)
                for (int y = 0; y < h; ++y)
                    for (int x = 0; x < w; ++x)
                        ASSERT_EQ(whole.labels.at<std::int32_t>(x0 + x, y0 + y, b),
                                  m.relabel[i][std::size_t(b)][std::size_t(local[i].at<std::int32_t>(x, y, b))]);
        }
        std::vector<LabelPiece> missing(pieces.begin(), pieces.begin() + 3);
        EXPECT_THROW(merge_label_pieces(missing, 23, 17, connectivity), InvalidInput);
        std::vector<LabelPiece> twice = pieces;
        twice.push_back(pieces[0]);
        EXPECT_THROW(merge_label_pieces(twice, 23, 17, connectivity), InvalidInput);
        EXPECT_THROW(merge_label_pieces(pieces, 24, 17, connectivity), InvalidInput);  // not the scene's size
        std::vector<LabelPiece> bad = pieces;
        bad[1].edge_labels[0][0] = 100000;
        EXPECT_THROW(merge_label_pieces(bad, 23, 17, connectivity), InvalidInput);
    }
}

}  // namespace
}  // namespace cubekit
