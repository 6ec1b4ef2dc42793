// PCA on views (issue 12): a window of a larger cube and strided views (BIL, BIP where the sums
// and scores read BSQ) give the owned BSQ cube's model and scores bit for bit, read without a
// copy (memory counters); pca_transform_into and pca_into write a caller's scores (any strides)
// and refuse wrong ones, naming them.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cubekit/buffer.hpp"
#include "cubekit/error.hpp"
#include "cubekit/linalg.hpp"
#include "edges_views_test_helpers.hpp"
#include "pca_test_helpers.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using pca_test::correlated_cube;
using pca_test::models_identical;
using testing::cpu_context;
using testing::cubes_identical;
using edges_views::invalid_input_message;

TEST(PcaViews, WindowAndStridedViewsAreReadWithoutACopy) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (DType t : {DType::U8, DType::I16, DType::F32}) {
        const Cube owned = correlated_cube(37, 21, 5, t, seed);
        const PcaResult expected = pca(cpu_context(), owned, {.components = 3});
        const std::uint64_t scores_bytes = 37 * 21 * 3 * sizeof(double);
        for (Layout layout : {Layout::BSQ, Layout::BIL, Layout::BIP}) {
            SCOPED_TRACE(std::string(dtype_name(t)) + " " + std::string(layout_name(layout)));
            double lo = 0, hi = 0;
            pca_test::type_range(t, lo, hi);
            const edges_views::HostWindow w = edges_views::host_window(owned, layout, seed, lo, hi);
            const Cube whole = owned.to_layout(layout);
            for (const CubeView& view : {w.view, whole.view()}) {
                MemoryCounters before = memory_counters();
                const PcaModel model = pca_fit(cpu_context(), view, {.components = 3});
                EXPECT_EQ(memory_counters().host_allocations, before.host_allocations);
                EXPECT_TRUE(models_identical(expected.model, model));
                before = memory_counters();
                const PcaResult r = pca(cpu_context(), view, {.components = 3});
                EXPECT_EQ(memory_counters().host_bytes - before.host_bytes, scores_bytes);  // the scores only
                EXPECT_TRUE(models_identical(expected.model, r.model));
                EXPECT_TRUE(cubes_identical(expected.scores, r.scores));
                EXPECT_TRUE(cubes_identical(expected.scores, pca_transform(cpu_context(), view, expected.model)));
            }
        }
    }
}

TEST(PcaViews, ScoresIntoAStridedOutput) {
    const Cube cube = correlated_cube(13, 11, 4, DType::U16, testing::test_seed(), Layout::BIP);
    const PcaResult expected = pca(cpu_context(), cube, {.components = 2});
    // Scores into bands 1..2 of a 4-band BIP cube (x stride 4), poisoned first (0xFF: NaN).
    Cube out = edges_views::poisoned_host({13, 11, 4, DType::F64, Layout::BIP});
    const MemoryCounters before = memory_counters();
    pca_transform_into(cpu_context(), cube, expected.model, out.mutable_view().band_range(1, 2));
    const PcaModel m = pca_into(cpu_context(), cube, out.mutable_view().band_range(1, 2), {.components = 2});
    EXPECT_EQ(memory_counters().host_allocations, before.host_allocations);
    EXPECT_TRUE(models_identical(expected.model, m));
    EXPECT_TRUE(cubes_identical(expected.scores, Cube::from_view(out.view().band_range(1, 2), Layout::BSQ)));
    EXPECT_TRUE(std::isnan(out.at<double>(3, 3, 0)));  // untouched
    EXPECT_EQ(expected.scores.metadata().band_names, (std::vector<std::string>{"PC1", "PC2"}));
}

TEST(PcaViews, BadScoresNameTheOutput) {
    const Cube cube = correlated_cube(9, 8, 4, DType::U8, 2);
    const PcaModel model = pca_fit(cpu_context(), cube, {.components = 2});
    Cube f32(9, 8, 2, DType::F32), three(9, 8, 3, DType::F64);
    EXPECT_NE(invalid_input_message([&] { pca_transform_into(cpu_context(), cube, model, f32); }).find("expected 9x8x2 f64"),
              std::string::npos);
    EXPECT_NE(invalid_input_message([&] { pca_into(cpu_context(), cube, three, {.components = 2}); }).find("pca_into: scores"),
              std::string::npos);
    std::vector<double> storage(9 * 8 * 2);
    const auto on_device = MutableCubeView::device(storage.data(), 0, 9, 8, 2, DType::F64, dense_strides(9, 8, 2, Layout::BSQ));
    EXPECT_NE(invalid_input_message([&] { pca_transform_into(cpu_context(), cube, model, on_device); }).find("device memory"),
              std::string::npos);
    EXPECT_NE(invalid_input_message([&] { pca_transform_into(cpu_context(), cube.view().band_range(0, 3), model, three); })
                  .find("fitted on 4"),
              std::string::npos);
}

}  // namespace
}  // namespace cubekit
