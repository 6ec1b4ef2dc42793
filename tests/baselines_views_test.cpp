// E6 baselines and the edge scores on views, CPU (issue 12, item 1): a window, a BIP cube and one
// band of it are read where they are and give exactly the owned BSQ cube's maps and thresholds;
// a dense BSQ u8 input costs no host buffer and no other input a buffer of the cube's size;
// baseline_edges_into writes any strided host output; bad outputs are rejected naming `edges`.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cubekit/buffer.hpp"
#include "cubekit/edge_baselines.hpp"
#include "cubekit/error.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;

const BaselineMethod kAll[] = {BaselineMethod::Sobel, BaselineMethod::Prewitt, BaselineMethod::Roberts,
                               BaselineMethod::LoG, BaselineMethod::Canny};

BaselineOptions method(BaselineMethod m) {
    BaselineOptions o;
    o.method = m;
    return o;
}

void expect_same(const BaselineResult& want, const BaselineResult& got, const std::string& what) {
    EXPECT_TRUE(testing::cubes_identical(want.edges, got.edges)) << what;
    ASSERT_EQ(want.thresholds.size(), got.thresholds.size()) << what;
    for (std::size_t b = 0; b < want.thresholds.size(); ++b) {
        EXPECT_EQ(want.thresholds[b].high, got.thresholds[b].high) << what << ", band " << b;
        EXPECT_EQ(want.thresholds[b].low, got.thresholds[b].low) << what << ", band " << b;
    }
}

TEST(BaselineViews, WindowBipAndOneBandGiveTheOwnedCubesMaps) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (DType t : {DType::U8, DType::F32}) {
        const Cube whole = testing::random_cube(47, 39, 3, t, seed, 0, 255);
        const Cube bip = whole.to_layout(Layout::BIP);
        const Cube crop = whole.crop(5, 4, 31, 27);
        for (BaselineMethod m : kAll) {
            const BaselineOptions o = method(m);
            const std::string what = std::string(baseline_name(m)) + " " + std::string(dtype_name(t));
            const BaselineResult owned = baseline_edges_with_thresholds(cpu_context(), whole, o);
            expect_same(owned, baseline_edges_with_thresholds(cpu_context(), bip, o), what + " BIP cube");
            expect_same(baseline_edges_with_thresholds(cpu_context(), crop, o),
                        baseline_edges_with_thresholds(cpu_context(), whole.view().window(5, 4, 31, 27), o), what + " window");
            expect_same(baseline_edges_with_thresholds(cpu_context(), crop, o),
                        baseline_edges_with_thresholds(cpu_context(), bip.view().window(5, 4, 31, 27), o),
                        what + " window of the BIP cube");
            expect_same(baseline_edges_with_thresholds(cpu_context(), whole.select_bands({1}), o),
                        baseline_edges_with_thresholds(cpu_context(), bip.view().band_range(1, 1), o),
                        what + " band 1 of the BIP cube");
        }
    }
}

// A dense BSQ u8 cube is read where it is (E1 leaves 8-bit samples as they are): no host buffer at
// all with a caller's output. Other types are quantised one band at a time into a reused W·H
// scratch plane, never into a copy of the cube.
TEST(BaselineViews, DenseBsqInputMakesNoCopyOfTheCube) {
    const std::uint64_t seed = testing::test_seed();
    for (BaselineMethod m : kAll) {
        SCOPED_TRACE(baseline_name(m));
        const Cube u8 = testing::random_cube(80, 60, 4, DType::U8, seed, 0, 255);
        Cube edges(80, 60, 4, DType::U8, Layout::BSQ);
        MemoryCounters before = memory_counters();
        baseline_edges_into(cpu_context(), u8, edges, method(m));
        EXPECT_EQ(memory_counters().host_allocations, before.host_allocations) << "u8";

        const Cube f32 = testing::random_cube(80, 60, 4, DType::F32, seed, -1.0, 1.0);
        before = memory_counters();
        baseline_edges_into(cpu_context(), f32, edges, method(m));
        EXPECT_LT(memory_counters().host_bytes - before.host_bytes, f32.num_bytes() / 4) << "f32";
    }
}

// baseline_edges_into writes host outputs of any strides (a BIP cube, a window of a larger one).
TEST(BaselineViews, IntoWritesAnyStridedHostOutput) {
    const Cube cube = testing::random_cube(36, 29, 3, DType::U16, testing::test_seed(), 0, 4000);
    for (BaselineMethod m : kAll) {
        SCOPED_TRACE(baseline_name(m));
        const BaselineResult want = baseline_edges_with_thresholds(cpu_context(), cube, method(m));
        Cube bip(36, 29, 3, DType::U8, Layout::BIP);
        const std::vector<BaselineThreshold> t = baseline_edges_into(cpu_context(), cube, bip, method(m));
        EXPECT_TRUE(testing::cubes_identical(want.edges, bip.to_layout(Layout::BSQ)));
        ASSERT_EQ(t.size(), 3u);
        for (int b = 0; b < 3; ++b) EXPECT_EQ(t[std::size_t(b)].high, want.thresholds[std::size_t(b)].high);
        Cube big(40, 31, 3, DType::U8, Layout::BSQ);
        for (std::size_t i = 0; i < big.num_elements(); ++i) big.data<std::uint8_t>()[i] = 0xFF;
        baseline_edges_into(cpu_context(), cube, big.mutable_view().window(2, 1, 36, 29), method(m));
        EXPECT_TRUE(testing::cubes_identical(want.edges, big.crop(2, 1, 36, 29)));
        EXPECT_EQ(big.at<std::uint8_t>(0, 0, 0), 0xFF);
        EXPECT_EQ(big.at<std::uint8_t>(39, 30, 2), 0xFF);
    }
}

TEST(BaselineViews, BadOutputsAreRejectedNamingEdges) {
    const Cube cube = testing::random_cube(12, 10, 2, DType::U8, 3, 0, 255);
    auto expect_edges = [](auto&& call, const char* what) {
        try {
            call();
            ADD_FAILURE() << what << ": no exception";
        } catch (const InvalidInput& e) {
            EXPECT_NE(std::string(e.what()).find("edges is"), std::string::npos) << what << ": " << e.what();
        }
    };
    Cube wrong_size(12, 9, 2, DType::U8), wrong_bands(12, 10, 1, DType::U8), wrong_type(12, 10, 2, DType::F32);
    expect_edges([&] { baseline_edges_into(cpu_context(), cube, wrong_size); }, "size");
    expect_edges([&] { baseline_edges_into(cpu_context(), cube, wrong_bands); }, "bands");
    expect_edges([&] { baseline_edges_into(cpu_context(), cube, wrong_type); }, "type");
    std::uint8_t dummy[12 * 10 * 2] = {};
    const MutableCubeView device_out =
        MutableCubeView::device(dummy, 0, 12, 10, 2, DType::U8, dense_strides(12, 10, 2, Layout::BSQ));
    expect_edges([&] { baseline_edges_into(cpu_context(), cube, device_out); }, "device memory");
}

// score_edges reads one band of any host view: a band of a BIP cube scores as the owned band.
TEST(BaselineViews, ScoresReadBandsOfStridedCubes) {
    const Cube maps = testing::random_levels_cube(30, 25, 3, DType::U8, testing::test_seed(), 2);
    const Cube bip = maps.to_layout(Layout::BIP);
    const EdgeScore want = score_edges(maps.select_bands({0}), maps.select_bands({2}), 1.5);
    const EdgeScore got = score_edges(bip.view().band_range(0, 1), bip.view().band_range(2, 1), 1.5);
    EXPECT_EQ(want.fom, got.fom);
    EXPECT_EQ(want.f, got.f);
    EXPECT_EQ(want.predicted, got.predicted);
    EXPECT_EQ(want.reference, got.reference);
}

}  // namespace
}  // namespace cubekit
