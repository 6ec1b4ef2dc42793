// Entropy edge detector on views (issue 12): a window of a larger cube and a strided view (BIP
// where the detector wants BSQ) give the owned BSQ cube's results; a dense BSQ input is read with
// no host buffer allocated beyond the outputs; entropy_edges_into writes a caller's outputs (any
// strides) and refuses wrong ones, naming them; entropy_band_thresholds and quantize_to_u8_into.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cubekit/buffer.hpp"
#include "cubekit/edges.hpp"
#include "cubekit/error.hpp"
#include "edges_views_test_helpers.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using testing::cubes_identical;
using edges_views::invalid_input_message;
using edges_views::host_window;

constexpr EdgeFusion kFusions[] = {EdgeFusion::None,     EdgeFusion::BandMean,      EdgeFusion::PcaMean,
                                   EdgeFusion::EdgeVote, EdgeFusion::BinaryVote,    EdgeFusion::ThresholdMean,
                                   EdgeFusion::PcaEdgeVote, EdgeFusion::PcaBinaryVote};

EntropyEdgeOptions all_outputs(EdgeFusion f) {
    EntropyEdgeOptions o;
    o.fusion = f;
    o.min_component = 3;
    o.pca_components = 2;
    o.keep_band_edges = true;
    o.keep_binary = true;
    return o;
}

::testing::AssertionResult same_result(const EntropyEdgeResult& e, const EntropyEdgeResult& a) {
    if (auto r = cubes_identical(e.edges, a.edges); !r) return r << " (edges)";
    if (auto r = cubes_identical(e.band_edges, a.band_edges); !r) return r << " (band edges)";
    if (auto r = cubes_identical(e.binary, a.binary); !r) return r << " (binary)";
    if (auto r = cubes_identical(e.vote_count, a.vote_count); !r) return r << " (vote count)";
    if (e.band_thresholds != a.band_thresholds) return ::testing::AssertionFailure() << "band thresholds differ";
    if (e.derived_thresholds.size() != a.derived_thresholds.size())
        return ::testing::AssertionFailure() << "derived thresholds differ in number";
    for (std::size_t i = 0; i < e.derived_thresholds.size(); ++i)
        if (e.derived_thresholds[i].name != a.derived_thresholds[i].name ||
            e.derived_thresholds[i].thresholds != a.derived_thresholds[i].thresholds)
            return ::testing::AssertionFailure() << "derived thresholds " << e.derived_thresholds[i].name << " differ";
    if (e.votes_needed != a.votes_needed || e.pca_components_used != a.pca_components_used ||
        e.explained_variance_ratio != a.explained_variance_ratio)
        return ::testing::AssertionFailure() << "votes needed, components or variance ratios differ";
    return ::testing::AssertionSuccess();
}

TEST(EdgesViews, WindowAndBipViewsGiveTheOwnedCubesResults) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (DType t : {DType::U8, DType::U16, DType::F32}) {
        const Cube owned = testing::random_levels_cube(23, 19, 4, t, seed, 7);
        for (Layout layout : {Layout::BSQ, Layout::BIP}) {
            const edges_views::HostWindow w = host_window(owned, layout, seed, 0, 200);
            const Cube whole_layout = owned.to_layout(layout);
            for (EdgeFusion f : kFusions) {
                SCOPED_TRACE(std::string(dtype_name(t)) + " " + std::string(layout_name(layout)) + " " +
                             std::string(fusion_name(f)));
                const EntropyEdgeResult expected = entropy_edges(cpu_context(), owned, all_outputs(f));
                EXPECT_TRUE(same_result(expected, entropy_edges(cpu_context(), w.view, all_outputs(f)))) << "window";
                EXPECT_TRUE(same_result(expected, entropy_edges(cpu_context(), whole_layout, all_outputs(f)))) << "layout";
            }
            EXPECT_EQ(entropy_band_thresholds(cpu_context(), w.view),
                      entropy_edges(cpu_context(), owned, {.fusion = EdgeFusion::None}).band_thresholds);
            EXPECT_TRUE(cubes_identical(quantize_to_u8(cpu_context(), w.view), quantize_to_u8(cpu_context(), owned)));
        }
    }
}

// Issue 12: a dense BSQ input is read where it is; the only host buffers are the outputs (none
// at all with entropy_edges_into, which writes the caller's).
TEST(EdgesViews, DenseBsqInputIsNotCopied) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (DType t : {DType::U8, DType::I16}) {
        const Cube cube = testing::random_levels_cube(41, 29, 6, t, seed, 9);
        for (EdgeFusion f : {EdgeFusion::None, EdgeFusion::EdgeVote, EdgeFusion::PcaBinaryVote}) {
            SCOPED_TRACE(std::string(dtype_name(t)) + " " + std::string(fusion_name(f)));
            EntropyEdgeOptions o;
            o.fusion = f;
            o.min_component = 4;
            const EntropyEdgeBands n = entropy_edges_bands(cube.bands(), o);
            const std::uint64_t output_bytes = 41 * 29 * (std::uint64_t(n.edges) + 2 * std::uint64_t(n.vote_count));
            MemoryCounters before = memory_counters();
            const EntropyEdgeResult r = entropy_edges(cpu_context(), cube, o);
            EXPECT_EQ(memory_counters().host_bytes - before.host_bytes, output_bytes);

            Cube edges(41, 29, n.edges, DType::U8);
            Cube count(41, 29, 1, DType::U16);
            EntropyEdgeExtras extras;
            if (n.vote_count) extras.vote_count = count;
            before = memory_counters();
            const EntropyEdgeSummary s = entropy_edges_into(cpu_context(), cube, edges, o, extras);
            EXPECT_EQ(memory_counters().host_allocations, before.host_allocations);
            EXPECT_TRUE(cubes_identical(r.edges, edges));
            if (n.vote_count) EXPECT_TRUE(cubes_identical(r.vote_count, count));
            EXPECT_EQ(s.band_thresholds, r.band_thresholds);
        }
    }
}

// Outputs of any strides: each output is one band of a BIP cube (x stride 2 or 3), poisoned first.
TEST(EdgesViews, IntoStridedHostOutputs) {
    const Cube cube = testing::random_levels_cube(17, 13, 5, DType::U8, testing::test_seed(), 6);
    for (EdgeFusion f : {EdgeFusion::None, EdgeFusion::EdgeVote, EdgeFusion::BinaryVote, EdgeFusion::PcaMean}) {
        SCOPED_TRACE(std::string(fusion_name(f)));
        const EntropyEdgeOptions o = all_outputs(f);
        const EntropyEdgeBands n = entropy_edges_bands(5, o);
        const EntropyEdgeResult expected = entropy_edges(cpu_context(), cube, o);
        Cube edges = edges_views::poisoned_host({17, 13, n.edges + 1, DType::U8, Layout::BIP});
        Cube band_edges = edges_views::poisoned_host({17, 13, n.band_edges + 1, DType::U8, Layout::BIP});
        Cube binary = edges_views::poisoned_host({17, 13, n.binary + 1, DType::U8, Layout::BIP});
        Cube count = edges_views::poisoned_host({17, 13, 2, DType::U16, Layout::BIP});
        EntropyEdgeExtras extras;
        if (n.band_edges) extras.band_edges = band_edges.mutable_view().band_range(1, n.band_edges);
        extras.binary = binary.mutable_view().band_range(1, n.binary);
        if (n.vote_count) extras.vote_count = count.mutable_view().band_range(1, 1);
        const EntropyEdgeSummary s = entropy_edges_into(cpu_context(), cube, edges.mutable_view().band_range(1, n.edges), o, extras);
        EXPECT_EQ(s.band_thresholds, expected.band_thresholds);
        EXPECT_TRUE(cubes_identical(expected.edges, Cube::from_view(edges.view().band_range(1, n.edges), Layout::BSQ)));
        EXPECT_TRUE(cubes_identical(expected.binary, Cube::from_view(binary.view().band_range(1, n.binary), Layout::BSQ)));
        if (n.band_edges)
            EXPECT_TRUE(cubes_identical(expected.band_edges,
                                        Cube::from_view(band_edges.view().band_range(1, n.band_edges), Layout::BSQ)));
        if (n.vote_count)
            EXPECT_TRUE(cubes_identical(expected.vote_count, Cube::from_view(count.view().band_range(1, 1), Layout::BSQ)));
        EXPECT_EQ(edges.at<std::uint8_t>(4, 4, 0), 0xFF);  // the band before the view is untouched
    }
}

TEST(EdgesViews, OutputBandsOfEachFusion) {
    EntropyEdgeOptions o;
    EXPECT_EQ(entropy_edges_bands(1, o).edges, 1);  // auto: none for one band
    EXPECT_EQ(entropy_edges_bands(1, o).binary, 1);
    EXPECT_EQ(entropy_edges_bands(7, o).vote_count, 1);  // auto: vote-edges for more
    EXPECT_EQ(entropy_edges_bands(7, o).band_edges, 7);
    o.fusion = EdgeFusion::PcaBinaryVote;
    o.pca_components = 9;  // clamped to the bands
    const EntropyEdgeBands n = entropy_edges_bands(7, o);
    EXPECT_EQ(n.edges, 1);
    EXPECT_EQ(n.band_edges, 7);
    EXPECT_EQ(n.binary, 1);
    EXPECT_EQ(n.vote_count, 1);
    o.fusion = EdgeFusion::ThresholdMean;
    EXPECT_EQ(entropy_edges_bands(7, o).band_edges, 0);
    EXPECT_EQ(entropy_edges_bands(7, o).vote_count, 0);
}

TEST(EdgesViews, BadOutputsNameTheOutput) {
    const Cube cube = testing::random_cube(9, 8, 3, DType::U8, 3, 0, 255);
    Cube edges(9, 8, 1, DType::U8), wrong(9, 7, 1, DType::U8), u8_count(9, 8, 1, DType::U8);
    const EntropyEdgeOptions vote{.fusion = EdgeFusion::EdgeVote};
    EXPECT_NE(invalid_input_message([&] { entropy_edges_into(cpu_context(), cube, wrong, vote); }).find("edges is 9x7x1"),
              std::string::npos);
    EXPECT_NE(invalid_input_message([&] { entropy_edges_into(cpu_context(), cube, edges, {.fusion = EdgeFusion::None}); })
                  .find("expected 9x8x3 u8"),
              std::string::npos);
    EXPECT_NE(invalid_input_message([&] { entropy_edges_into(cpu_context(), cube, edges, vote, {.vote_count = u8_count}); })
                  .find("extras.vote_count"),
              std::string::npos);
    EXPECT_NE(invalid_input_message([&] {
                  entropy_edges_into(cpu_context(), cube, edges, {.fusion = EdgeFusion::BandMean}, {.vote_count = u8_count});
              }).find("no such output"),
              std::string::npos);
    std::vector<std::uint8_t> storage(9 * 8);
    const auto on_device = MutableCubeView::device(storage.data(), 0, 9, 8, 1, DType::U8, dense_strides(9, 8, 1, Layout::BSQ));
    EXPECT_NE(invalid_input_message([&] { entropy_edges_into(cpu_context(), cube, on_device, vote); }).find("device memory"),
              std::string::npos);
    EXPECT_NE(invalid_input_message([&] { quantize_to_u8_into(cpu_context(), cube, wrong); }).find("out is 9x7x1"),
              std::string::npos);
    EXPECT_THROW(entropy_edges_into(cpu_context(), cube, MutableCubeView(), vote), InvalidInput);
}

TEST(EdgesViews, QuantizeIntoAStridedOutput) {
    const Cube cube = testing::random_cube(11, 7, 3, DType::F32, testing::test_seed(), -5, 5, Layout::BIL);
    for (Quantize q : {Quantize::PerBand, Quantize::Global}) {
        Cube out = edges_views::poisoned_host({11, 7, 3, DType::U8, Layout::BIP});
        quantize_to_u8_into(cpu_context(), cube, out, q);
        EXPECT_TRUE(cubes_identical(quantize_to_u8(cpu_context(), cube.to_layout(Layout::BSQ), q), out.to_layout(Layout::BSQ)));
    }
}

}  // namespace
}  // namespace cubekit
