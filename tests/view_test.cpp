// Views and borrowed memory (include/cubekit/view.hpp, cube.hpp): strides, windows, dense and
// pitched layouts, copies between any strides, borrowing, and a family (RCMG) reading a window
// and a strided view where they are, with the same result as the owned cube.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cubekit/buffer.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/gradient.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using testing::cubes_identical;

constexpr Layout kLayouts[] = {Layout::BSQ, Layout::BIL, Layout::BIP};

TEST(View, DenseStridesOfEachLayout) {
    EXPECT_EQ(dense_strides(4, 3, 2, Layout::BSQ), (Strides{1, 4, 12}));
    EXPECT_EQ(dense_strides(4, 3, 2, Layout::BIL), (Strides{1, 8, 4}));
    EXPECT_EQ(dense_strides(4, 3, 2, Layout::BIP), (Strides{2, 8, 1}));
    for (Layout l : kLayouts) {
        const Cube c(4, 3, 2, DType::U16, l);
        const CubeView v = c;
        EXPECT_TRUE(v.is_dense(l));
        EXPECT_EQ(v.dense_layout(), l);
        EXPECT_EQ(v.data(), c.bytes());
        EXPECT_EQ(v.nearest_layout(), l);
        for (int b = 0; b < 2; ++b)
            for (int y = 0; y < 3; ++y)
                for (int x = 0; x < 4; ++x) EXPECT_EQ(std::size_t(v.offset(x, y, b)), c.shape().offset(x, y, b));
    }
}

TEST(View, OneBandIsDenseInEveryLayout) {
    const Cube c(5, 4, 1, DType::F32, Layout::BIP);
    for (Layout l : kLayouts) EXPECT_TRUE(c.view().is_dense(l));
}

TEST(View, WindowIsAnOffsetWithTheSameStrides) {
    const Cube c = testing::random_cube(9, 7, 3, DType::I16, 11, -50, 50, Layout::BSQ);
    const CubeView w = c.view().window(2, 3, 4, 2);
    EXPECT_EQ(w.strides(), c.view().strides());
    EXPECT_EQ(w.data(), c.bytes() + c.shape().offset(2, 3, 0) * 2);
    EXPECT_FALSE(w.is_dense(Layout::BSQ));
    EXPECT_TRUE(w.is_pitched(Layout::BSQ));
    EXPECT_FALSE(w.is_pitched(Layout::BIP));
    const StridedView<const std::int16_t> t = w.typed<std::int16_t>();
    for (int b = 0; b < 3; ++b)
        for (int y = 0; y < 2; ++y)
            for (int x = 0; x < 4; ++x) EXPECT_EQ(t(x, y, b), c.at<std::int16_t>(x + 2, y + 3, b));
    EXPECT_NE(w.describe().find("window of bsq"), std::string::npos) << w.describe();
}

TEST(View, BadWindowBandRangeOrTypeIsRefused) {
    const Cube c(6, 5, 4, DType::U8);
    EXPECT_THROW(c.view().window(3, 0, 4, 1), InvalidInput);
    EXPECT_THROW(c.view().window(-1, 0, 1, 1), InvalidInput);
    EXPECT_THROW(c.view().band_range(2, 3), InvalidInput);
    EXPECT_THROW(c.view().typed<float>(), InvalidInput);
    EXPECT_THROW(CubeView::host(nullptr, 2, 2, 1, DType::U8, {1, 2, 4}), InvalidInput);
    EXPECT_THROW(CubeView::host(c.bytes(), -1, 2, 1, DType::U8, {1, 2, 4}), InvalidInput);
}

TEST(View, BandOfABipCubeIsAStridedImage) {
    const Cube c = testing::random_cube(8, 5, 6, DType::F32, 3, 0, 1, Layout::BIP);
    const CubeView band = c.view().band_range(4, 1);
    EXPECT_EQ(band.strides().x, 6);
    EXPECT_FALSE(band.dense_layout().has_value());
    const Cube copy = Cube::from_view(band, Layout::BSQ);
    for (int y = 0; y < 5; ++y)
        for (int x = 0; x < 8; ++x) EXPECT_EQ(copy.at<float>(x, y, 0), c.at<float>(x, y, 4));
}

TEST(View, CopyBetweenAnyStridesKeepsEverySample) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (DType t : {DType::U8, DType::I16, DType::F32, DType::F64})
        for (Layout from : kLayouts) {
            const Cube src = testing::random_cube(11, 7, 5, t, seed, 0, 100, from);
            for (Layout to : kLayouts) {
                Cube dst(4, 3, 5, t, to);
                copy_cube(cpu_context(), src.view().window(5, 2, 4, 3), dst);
                EXPECT_TRUE(cubes_identical(dst, src.crop(5, 2, 4, 3).to_layout(to)));
            }
        }
}

TEST(View, NegativeStridesReadAFlippedArray) {
    // A NumPy a[::-1, ::-1] of a 3×4 single-band image: data points at the last sample.
    std::vector<float> image(12);
    for (int i = 0; i < 12; ++i) image[std::size_t(i)] = float(i);
    const CubeView flipped = CubeView::host(image.data() + 11, 4, 3, 1, DType::F32, {-1, -4, 1});
    const Cube c = Cube::from_view(flipped, Layout::BSQ);
    EXPECT_EQ(c.at<float>(0, 0, 0), 11.0f);
    EXPECT_EQ(c.at<float>(3, 2, 0), 0.0f);
    EXPECT_FALSE(flipped.is_pitched(Layout::BSQ));
}

TEST(View, BorrowedCubeWrapsTheCallersMemory) {
    std::vector<std::uint16_t> samples(6 * 4 * 3, 7);
    const MemoryCounters before = memory_counters();
    const Cube c = Cube::borrow(MutableCubeView::host(samples.data(), 6, 4, 3, DType::U16,
                                                      dense_strides(6, 4, 3, Layout::BIP)));
    EXPECT_EQ(memory_counters().host_allocations, before.host_allocations);
    EXPECT_TRUE(c.borrowed());
    EXPECT_EQ(c.layout(), Layout::BIP);
    EXPECT_EQ(static_cast<const void*>(c.bytes()), static_cast<const void*>(samples.data()));
    samples[1] = 9;  // (x 0, y 0, b 1)
    EXPECT_EQ(c.at<std::uint16_t>(0, 0, 1), 9);
    const Cube window = Cube::from_view(c.view().window(1, 1, 2, 2), Layout::BIP);
    EXPECT_FALSE(window.borrowed());
    EXPECT_THROW(Cube::borrow_const(c.view().window(1, 1, 2, 2)), InvalidInput);  // not dense
}

TEST(View, LayoutRequestCopiesOnlyWhenItMust) {
    const Cube bsq = testing::random_cube(7, 6, 4, DType::F32, 5, -1, 1, Layout::BSQ);
    const CubeInLayout same(cpu_context(), bsq, Layout::BSQ, Memory::Host);
    EXPECT_FALSE(same.copied());
    EXPECT_EQ(same.view().data(), bsq.view().data());
    const CubeInLayout other(cpu_context(), bsq, Layout::BIP, Memory::Host);
    EXPECT_TRUE(other.copied());
    EXPECT_TRUE(cubes_identical(other.host(), bsq.to_layout(Layout::BIP)));
    EXPECT_THROW(CubeInLayout(cpu_context(), bsq, Layout::BSQ, Memory::Device), InvalidInput);
}

// Issue 12, "done when": a window view and a strided (BIP where RCMG reads BSQ) view are processed
// without a copy of the input — the only host buffer allocated is the output — and give the
// same result as the owned cube.
TEST(View, RcmgReadsAWindowAndAStridedViewWithoutACopy) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube bsq = testing::random_cube(37, 29, 9, DType::F32, seed, -1, 1, Layout::BSQ);
    const Cube bip = bsq.to_layout(Layout::BIP);
    const Cube owned_window = bsq.crop(5, 3, 20, 17);
    const Cube expected_window = rcmg(cpu_context(), owned_window);
    const Cube expected_whole = rcmg(cpu_context(), bsq);
    const std::uint64_t output_bytes = 20 * 17 * sizeof(float), whole_bytes = 37 * 29 * sizeof(float);

    for (const Cube* source : {&bsq, &bip}) {
        SCOPED_TRACE(std::string(layout_name(source->layout())));
        MemoryCounters before = memory_counters();
        const Cube window = rcmg(cpu_context(), source->view().window(5, 3, 20, 17));
        EXPECT_EQ(memory_counters().host_bytes - before.host_bytes, output_bytes);
        EXPECT_TRUE(cubes_identical(window, expected_window));

        before = memory_counters();
        const Cube whole = rcmg(cpu_context(), *source);
        EXPECT_EQ(memory_counters().host_bytes - before.host_bytes, whole_bytes);
        EXPECT_TRUE(cubes_identical(whole, expected_whole));
    }
}

TEST(View, RcmgIntoAStridedHostOutput) {
    // The output is band 1 of a 3-band BIP cube: x stride 3.
    const Cube cube = testing::random_cube(13, 11, 4, DType::U16, 9, 0, 4000, Layout::BIL);
    Cube out(13, 11, 3, DType::F32, Layout::BIP);
    rcmg_into(cpu_context(), cube, out.mutable_view().band_range(1, 1));
    const Cube expected = rcmg(cpu_context(), cube);
    for (int y = 0; y < 11; ++y)
        for (int x = 0; x < 13; ++x) {
            ASSERT_EQ(out.at<float>(x, y, 1), expected.at<float>(x, y, 0)) << x << "," << y;
            ASSERT_EQ(out.at<float>(x, y, 0), 0.0f);
        }
    Cube wrong(12, 11, 1, DType::F32);
    EXPECT_THROW(rcmg_into(cpu_context(), cube, wrong), InvalidInput);
}

}  // namespace
}  // namespace cubekit
