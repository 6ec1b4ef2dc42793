// Connected-component labelling, CPU reference, against an independent breadth-first flood fill
// written here and the spec's oracles (edges.md §5.1 item 6). Runs in CI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "cubekit/error.hpp"
#include "cubekit/labels.hpp"
#include "edges_views_test_helpers.hpp"
#include "labels/labels_internal.hpp"
#include "labels_test_helpers.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using edges_views::invalid_input_message;
using labels_test::random_binary;
using labels_test::same_components;
using labels_test::random_label_image;
using testing::cpu_context;
using testing::cubes_identical;
using testing::test_seed;

// ---- Independent reference: breadth-first flood fill from each unlabelled pixel in raster order.

/// The flood fill's result, in the library's own shape.
using Reference = Components;

Reference flood_fill(const Cube& image, int connectivity) {
    const int W = image.width(), H = image.height(), B = image.bands();
    Reference ref{Cube(W, H, B, DType::I32), std::vector<std::vector<ComponentInfo>>(std::size_t(B))};
    const int dx8[] = {-1, 0, 1, -1, 1, -1, 0, 1}, dy8[] = {-1, -1, -1, 0, 0, 1, 1, 1};
    const int dx4[] = {0, -1, 1, 0}, dy4[] = {-1, 0, 0, 1};
    const int* dx = connectivity == 8 ? dx8 : dx4;
    const int* dy = connectivity == 8 ? dy8 : dy4;
    for (int b = 0; b < B; ++b) {
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                const double v = image.value(x, y, b);
                if (v == 0 || ref.labels.at<std::int32_t>(x, y, b) != 0) continue;
                const int label = int(ref.per_band[std::size_t(b)].size()) + 1;
                ComponentInfo info{0, x, y, x, y};
                std::deque<std::pair<int, int>> queue{{x, y}};
                ref.labels.at<std::int32_t>(x, y, b) = label;
                while (!queue.empty()) {
                    const auto [px, py] = queue.front();
                    queue.pop_front();
                    ++info.size;
                    info.x0 = std::min(info.x0, px), info.x1 = std::max(info.x1, px);
                    info.y0 = std::min(info.y0, py), info.y1 = std::max(info.y1, py);
                    for (int k = 0; k < connectivity; ++k) {
                        const int qx = px + dx[k], qy = py + dy[k];
                        if (qx < 0 || qy < 0 || qx >= W || qy >= H) continue;
                        if (image.value(qx, qy, b) != v || ref.labels.at<std::int32_t>(qx, qy, b) != 0) continue;
                        ref.labels.at<std::int32_t>(qx, qy, b) = label;
                        queue.push_back({qx, qy});
                    }
                }
                ref.per_band[std::size_t(b)].push_back(info);
            }
    }
    return ref;
}

// The mask with every component (equal-value rule) of fewer than min_size pixels cleared.
Cube reference_removal(const Cube& mask, std::int64_t min_size, int connectivity) {
    const Reference ref = flood_fill(mask, connectivity);
    Cube out = mask.to_layout(Layout::BSQ);
    for (int b = 0; b < mask.bands(); ++b)
        for (int y = 0; y < mask.height(); ++y)
            for (int x = 0; x < mask.width(); ++x) {
                const int l = ref.labels.at<std::int32_t>(x, y, b);
                if (l != 0 && ref.per_band[std::size_t(b)][std::size_t(l - 1)].size < min_size) out.at<std::uint8_t>(x, y, b) = 0;
            }
    return out;
}

// ---- Inputs ---------------------------------------------------------------------------------------

// One long 4-connected path: every other row full, joined alternately at the right and left ends.
Cube serpentine(int W, int H) {
    Cube c(W, H, 1, DType::U8);
    for (int y = 0; y < H; y += 2) {
        for (int x = 0; x < W; ++x) c.at<std::uint8_t>(x, y, 0) = 1;
        if (y + 1 < H) c.at<std::uint8_t>((y / 2) % 2 == 0 ? W - 1 : 0, y + 1, 0) = 1;
    }
    return c;
}

std::int64_t serpentine_size(int W, int H) { return std::int64_t((H + 1) / 2) * W + H / 2; }

Cube checkerboard(int W, int H) {
    Cube c(W, H, 1, DType::U8);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) c.at<std::uint8_t>(x, y, 0) = (x + y) % 2 == 0 ? 1 : 0;
    return c;
}

// remove_small_components_cpu on a copy of a BSQ u8 cube.
Cube internal_removal(const Cube& mask, std::int64_t min_size, int connectivity) {
    Cube out = mask.to_layout(Layout::BSQ);
    detail::remove_small_components_cpu(cpu_context(), out.data<std::uint8_t>(), out.width(), out.height(), out.bands(),
                                        min_size, connectivity);
    return out;
}

struct Shape { int w, h, b; };
const Shape kShapes[] = {{1, 1, 1}, {1, 37, 2}, {37, 1, 2}, {2, 2, 3}, {5, 3, 3}, {31, 17, 4},
                         {33, 33, 2}, {64, 64, 2}, {97, 61, 3}, {200, 150, 1}};
const double kDensities[] = {0.05, 0.2, 0.4, 0.5, 0.59, 0.7, 0.95};

std::string shape_name(const Shape& s) { return std::to_string(s.w) + "x" + std::to_string(s.h) + "x" + std::to_string(s.b); }

// ---- Against the flood fill ----------------------------------------------------------------------

TEST(LabelsCpu, RandomBinaryMatchesFloodFill) {
    int cases = 0;
    for (const Shape& s : kShapes)
        for (double d : kDensities) {
            const std::uint64_t seed = test_seed();
            const Cube mask = random_binary(s.w, s.h, s.b, d, seed);
            for (int c : {4, 8}) {
                SCOPED_TRACE(shape_name(s) + " density " + std::to_string(d) + " c=" + std::to_string(c) + " seed " +
                             std::to_string(seed));
                ASSERT_TRUE(same_components(flood_fill(mask, c), label_components(cpu_context(), mask, c)));
                for (std::int64_t L : {2, 3, 5, 10}) {
                    const Cube expected = reference_removal(mask, L, c);
                    ASSERT_TRUE(cubes_identical(expected, remove_small_components(cpu_context(), mask, L, c))) << "L=" << L;
                    ASSERT_TRUE(cubes_identical(expected, internal_removal(mask, L, c))) << "internal, L=" << L;
                }
                ++cases;
            }
        }
    RecordProperty("cases", cases);
}

TEST(LabelsCpu, LabelImagesMatchFloodFill) {
    for (DType t : {DType::U8, DType::U16, DType::I16, DType::U32, DType::I32})
        for (const Shape& s : {Shape{1, 1, 1}, Shape{23, 1, 2}, Shape{1, 23, 2}, Shape{45, 38, 3}, Shape{130, 70, 2}}) {
            const std::uint64_t seed = test_seed();
            const Cube image = random_label_image(s.w, s.h, s.b, t, seed);
            for (int c : {4, 8}) {
                SCOPED_TRACE(shape_name(s) + " " + std::string(dtype_name(t)) + " c=" + std::to_string(c) + " seed " +
                             std::to_string(seed));
                ASSERT_TRUE(same_components(flood_fill(image, c), label_components(cpu_context(), image, c)));
            }
        }
}

TEST(LabelsCpu, NonBinaryMaskUsesTheEqualValueRule) {
    for (const Shape& s : {Shape{40, 30, 2}, Shape{77, 9, 1}}) {
        const std::uint64_t seed = test_seed();
        const Cube mask = random_label_image(s.w, s.h, s.b, DType::U8, seed);  // values 0, 1, 2, 200
        for (int c : {4, 8})
            for (std::int64_t L : {2, 3, 4, 8}) {
                SCOPED_TRACE(shape_name(s) + " c=" + std::to_string(c) + " L=" + std::to_string(L) + " seed " + std::to_string(seed));
                ASSERT_TRUE(cubes_identical(reference_removal(mask, L, c), remove_small_components(cpu_context(), mask, L, c)));
            }
    }
    // A 2-pixel run of 1 touching a 3-pixel run of 2: with L = 3 only the 1s go.
    Cube m(5, 1, 1, DType::U8);
    const std::uint8_t row[] = {1, 1, 2, 2, 2};
    std::copy(row, row + 5, m.data<std::uint8_t>());
    const Cube out = remove_small_components(cpu_context(), m, 3, 8);
    const std::uint8_t expected[] = {0, 0, 2, 2, 2};
    EXPECT_TRUE(std::equal(expected, expected + 5, out.data<std::uint8_t>()));
}

TEST(LabelsCpu, BinaryMaskOfOtherValueAndLayouts) {
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube mask = random_binary(47, 29, 3, 0.45, seed, 255);
    const Cube bip = mask.to_layout(Layout::BIP), bil = mask.to_layout(Layout::BIL);
    for (int c : {4, 8}) {
        const Components a = label_components(cpu_context(), mask, c);
        EXPECT_TRUE(same_components(flood_fill(mask, c), a));
        EXPECT_TRUE(cubes_identical(a.labels, label_components(cpu_context(), bip, c).labels));
        EXPECT_TRUE(cubes_identical(a.labels, label_components(cpu_context(), bil, c).labels));
        const Cube r = remove_small_components(cpu_context(), bip, 4, c);
        EXPECT_EQ(r.layout(), Layout::BSQ);
        EXPECT_TRUE(cubes_identical(reference_removal(mask, 4, c), r));
    }
}

// ---- Spec oracles (edges.md §5.1 item 6) ---------------------------------------------------------

TEST(LabelsCpu, DiagonalPixelsJoinOnlyWith8Connectivity) {
    Cube m(4, 4, 1, DType::U8);
    m.at<std::uint8_t>(1, 1, 0) = 1;
    m.at<std::uint8_t>(2, 2, 0) = 1;
    const Components c8 = label_components(cpu_context(), m, 8);
    ASSERT_EQ(c8.per_band[0].size(), 1u);
    EXPECT_EQ(c8.per_band[0][0].size, 2);
    const Components c4 = label_components(cpu_context(), m, 4);
    ASSERT_EQ(c4.per_band[0].size(), 2u);
    EXPECT_EQ(c4.per_band[0][0].size, 1);
    EXPECT_EQ(c4.per_band[0][1].size, 1);
    EXPECT_EQ(c4.labels.at<std::int32_t>(1, 1, 0), 1);
    EXPECT_EQ(c4.labels.at<std::int32_t>(2, 2, 0), 2);
    // The anti-diagonal too (the NE neighbour).
    Cube a(3, 3, 1, DType::U8);
    a.at<std::uint8_t>(2, 0, 0) = 1;
    a.at<std::uint8_t>(1, 1, 0) = 1;
    EXPECT_EQ(label_components(cpu_context(), a, 8).per_band[0].size(), 1u);
    EXPECT_EQ(label_components(cpu_context(), a, 4).per_band[0].size(), 2u);
}

TEST(LabelsCpu, ComponentOfSizeSSurvivesIffSAtLeastL) {
    // Horizontal runs of length s = 1..12 on every other row, one band per connectivity check.
    const int max_s = 12;
    Cube m(max_s + 2, 2 * max_s, 1, DType::U8);
    for (int s = 1; s <= max_s; ++s)
        for (int x = 0; x < s; ++x) m.at<std::uint8_t>(x + 1, 2 * (s - 1), 0) = 1;
    for (int c : {4, 8})
        for (std::int64_t L = 0; L <= max_s + 1; ++L) {
            const Cube out = remove_small_components(cpu_context(), m, L, c);
            EXPECT_TRUE(cubes_identical(out, internal_removal(m, L, c)));
            for (int s = 1; s <= max_s; ++s)
                EXPECT_EQ(out.at<std::uint8_t>(1, 2 * (s - 1), 0), s >= L ? 1 : 0) << "s=" << s << " L=" << L << " c=" << c;
        }
}

TEST(LabelsCpu, RemovalIsIdentityIdempotentMonotoneAndASubset) {
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube mask = random_binary(83, 71, 3, 0.35, seed);
    for (int c : {4, 8}) {
        for (std::int64_t L : {-5, 0, 1}) {
            EXPECT_TRUE(cubes_identical(mask, remove_small_components(cpu_context(), mask, L, c))) << "L=" << L;
            EXPECT_TRUE(cubes_identical(mask, internal_removal(mask, L, c))) << "L=" << L;
        }
        Cube previous = mask.clone();
        for (std::int64_t L : {2, 3, 5, 8, 10, 30, 50, 1000000}) {
            const Cube out = remove_small_components(cpu_context(), mask, L, c);
            EXPECT_TRUE(cubes_identical(out, remove_small_components(cpu_context(), out, L, c))) << "idempotent, L=" << L;
            const std::uint8_t* o = out.data<std::uint8_t>();
            const std::uint8_t* in = mask.data<std::uint8_t>();
            const std::uint8_t* prev = previous.data<std::uint8_t>();
            for (std::size_t i = 0; i < out.num_elements(); ++i) {
                ASSERT_TRUE(o[i] == 0 || o[i] == in[i]) << "output not a subset of the input at " << i << ", L=" << L;
                ASSERT_LE(o[i], prev[i]) << "not monotone in L at " << i << ", L=" << L;
            }
            previous = out.clone();
        }
        EXPECT_EQ(std::count(previous.data<std::uint8_t>(), previous.data<std::uint8_t>() + previous.num_elements(), 0),
                  std::ptrdiff_t(previous.num_elements()))
            << "L beyond the image clears everything";
    }
}

// ---- Worst cases ------------------------------------------------------------------------------------

TEST(LabelsCpu, AllOnesIsOneComponent) {
    Cube m(123, 77, 2, DType::U8);
    std::fill(m.data<std::uint8_t>(), m.data<std::uint8_t>() + m.num_elements(), std::uint8_t(1));
    for (int c : {4, 8}) {
        const Components r = label_components(cpu_context(), m, c);
        for (int b = 0; b < 2; ++b) {
            ASSERT_EQ(r.per_band[std::size_t(b)].size(), 1u);
            const ComponentInfo& i = r.per_band[std::size_t(b)][0];
            EXPECT_EQ(i.size, 123 * 77);
            EXPECT_EQ(i.x0, 0);
            EXPECT_EQ(i.y0, 0);
            EXPECT_EQ(i.x1, 122);
            EXPECT_EQ(i.y1, 76);
        }
        EXPECT_TRUE(cubes_identical(m, remove_small_components(cpu_context(), m, 123 * 77, c)));
        EXPECT_EQ(remove_small_components(cpu_context(), m, 123 * 77 + 1, c).value(5, 5, 1), 0.0);
    }
}

TEST(LabelsCpu, Checkerboard) {
    for (const Shape& s : {Shape{1, 1, 1}, Shape{8, 8, 1}, Shape{65, 33, 1}}) {
        const Cube m = checkerboard(s.w, s.h);
        const std::int64_t on = (std::int64_t(s.w) * s.h + 1) / 2;
        const Components c8 = label_components(cpu_context(), m, 8);
        ASSERT_EQ(c8.per_band[0].size(), 1u) << shape_name(s);
        EXPECT_EQ(c8.per_band[0][0].size, on);
        const Components c4 = label_components(cpu_context(), m, 4);
        EXPECT_EQ(std::int64_t(c4.per_band[0].size()), on) << shape_name(s);
        EXPECT_TRUE(same_components(flood_fill(m, 4), c4));
        EXPECT_TRUE(cubes_identical(Cube(s.w, s.h, 1, DType::U8), remove_small_components(cpu_context(), m, 2, 4)));
    }
}

TEST(LabelsCpu, SerpentineIsOneLongComponentWithoutRecursion) {
    for (const Shape& s : {Shape{7, 9, 1}, Shape{64, 63, 1}, Shape{2000, 1999, 1}}) {
        const Cube m = serpentine(s.w, s.h);
        for (int c : {4, 8}) {
            const Components r = label_components(cpu_context(), m, c);
            ASSERT_EQ(r.per_band[0].size(), 1u) << shape_name(s);
            EXPECT_EQ(r.per_band[0][0].size, serpentine_size(s.w, s.h));
            EXPECT_TRUE(cubes_identical(m, internal_removal(m, serpentine_size(s.w, s.h), c)));
            EXPECT_EQ(internal_removal(m, serpentine_size(s.w, s.h) + 1, c).value(0, 0, 0), 0.0);
        }
        if (s.w < 100) {
            EXPECT_TRUE(same_components(flood_fill(m, 8), label_components(cpu_context(), m, 8)));
        }
    }
}

TEST(LabelsCpu, AllZeroHasNoComponents) {
    const Cube m(19, 7, 2, DType::U16);
    const Components r = label_components(cpu_context(), m, 8);
    ASSERT_EQ(r.per_band.size(), 2u);
    EXPECT_TRUE(r.per_band[0].empty() && r.per_band[1].empty());
    EXPECT_TRUE(cubes_identical(Cube(19, 7, 2, DType::I32), r.labels));
}

TEST(LabelsCpu, ThreadCountDoesNotChangeResults) {
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube mask = random_binary(60, 50, 9, 0.5, seed);
    const Context one({.backend = Backend::Cpu, .threads = 1});
    const Context four({.backend = Backend::Cpu, .threads = 4});
    EXPECT_TRUE(same_components(flood_fill(mask, 8), label_components(four, mask, 8)));
    EXPECT_TRUE(cubes_identical(remove_small_components(one, mask, 6, 8), remove_small_components(four, mask, 6, 8)));
}

// ---- Bad inputs -------------------------------------------------------------------------------------

TEST(LabelsCpu, BadInputsNameTheParameter) {
    const Cube mask = random_binary(9, 9, 1, 0.5, 7);
    EXPECT_NE(invalid_input_message([&] { label_components(cpu_context(), mask, 6); }).find("connectivity = 6"), std::string::npos);
    EXPECT_NE(invalid_input_message([&] { remove_small_components(cpu_context(), mask, 3, 0); }).find("connectivity"),
              std::string::npos);
    const Cube floats(4, 4, 1, DType::F32);
    EXPECT_NE(invalid_input_message([&] { label_components(cpu_context(), floats, 8); }).find("element type is f32"),
              std::string::npos);
    EXPECT_NE(invalid_input_message([&] { label_components(cpu_context(), Cube(4, 4, 1, DType::F64), 8); }).find("f64"),
              std::string::npos);
    const Cube u16(4, 4, 1, DType::U16);
    EXPECT_NE(invalid_input_message([&] { remove_small_components(cpu_context(), u16, 3, 8); }).find("mask element type is u16"),
              std::string::npos);
    EXPECT_NE(invalid_input_message([&] { label_components(cpu_context(), Cube(), 8); }).find("image is 0x0x0"),
              std::string::npos);
    EXPECT_NE(invalid_input_message([&] { remove_small_components(cpu_context(), Cube(3, 0, 1, DType::U8), 3, 8); })
                  .find("mask is 3x0x1"),
              std::string::npos);
    std::uint8_t pixel = 1;
    EXPECT_NE(invalid_input_message([&] { detail::remove_small_components_cpu(cpu_context(), &pixel, 1, 1, 1, 3, 5); })
                  .find("connectivity = 5"),
              std::string::npos);
    EXPECT_NE(invalid_input_message([&] { detail::remove_small_components_cpu(cpu_context(), &pixel, 65536, 65536, 1, 3, 8); })
                  .find("2^31"),
              std::string::npos);
}

}  // namespace
}  // namespace cubekit
