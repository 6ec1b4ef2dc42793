// Connected components on views (issue 12): a window of a larger cube and a strided view (BIP
// where BSQ is read) give the owned BSQ cube's labels, statistics and cleaned maps, read without
// a copy (memory counters); the _into calls write a caller's outputs (any strides), clean in
// place, and refuse wrong outputs, naming them.
#include <gtest/gtest.h>

#include <string>

#include "cubekit/buffer.hpp"
#include "cubekit/error.hpp"
#include "cubekit/labels.hpp"
#include "edges_views_test_helpers.hpp"
#include "labels_test_helpers.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using labels_test::random_binary;
using labels_test::random_label_image;
using labels_test::same_components;
using testing::cpu_context;
using testing::cubes_identical;
using edges_views::invalid_input_message;

TEST(LabelsViews, WindowAndBipViewsAreReadWithoutACopy) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube image = random_label_image(29, 23, 3, DType::U16, seed);
    const Cube mask = random_binary(29, 23, 3, 0.45, seed);
    const std::uint64_t labels_bytes = 29 * 23 * 3 * 4, mask_bytes = 29 * 23 * 3;
    for (int connectivity : {4, 8}) {
        const Components expected = label_components(cpu_context(), image, connectivity);
        const Cube expected_clean = remove_small_components(cpu_context(), mask, 4, connectivity);
        for (Layout layout : {Layout::BSQ, Layout::BIL, Layout::BIP}) {
            SCOPED_TRACE(std::string(layout_name(layout)) + " connectivity " + std::to_string(connectivity));
            const edges_views::HostWindow w = edges_views::host_window(image, layout, seed, 0, 3);
            const edges_views::HostWindow m = edges_views::host_window(mask, layout, seed, 0, 1);
            const Cube whole = image.to_layout(layout);
            MemoryCounters before = memory_counters();
            EXPECT_TRUE(same_components(expected, label_components(cpu_context(), w.view, connectivity)));
            EXPECT_TRUE(same_components(expected, label_components(cpu_context(), whole, connectivity)));
            EXPECT_EQ(memory_counters().host_bytes - before.host_bytes, 2 * labels_bytes);  // the outputs only
            before = memory_counters();
            EXPECT_TRUE(cubes_identical(expected_clean, remove_small_components(cpu_context(), m.view, 4, connectivity)));
            EXPECT_EQ(memory_counters().host_bytes - before.host_bytes, mask_bytes);
        }
    }
}

TEST(LabelsViews, IntoStridedOutputsAndInPlace) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube image = random_label_image(19, 17, 2, DType::I32, seed);
    const Components expected = label_components(cpu_context(), image);
    // Labels into bands 1..2 of a 3-band BIP cube (x stride 3), poisoned first.
    Cube labels = edges_views::poisoned_host({19, 17, 3, DType::I32, Layout::BIP});
    const MemoryCounters before = memory_counters();
    const ComponentStats stats = label_components_into(cpu_context(), image, labels.mutable_view().band_range(1, 2));
    EXPECT_EQ(memory_counters().host_allocations, before.host_allocations);
    EXPECT_TRUE(same_components(expected, Components{Cube::from_view(labels.view().band_range(1, 2), Layout::BSQ), stats}));
    EXPECT_EQ(labels.at<std::int32_t>(5, 5, 0), -1);  // untouched

    // A mask with two foreground values (the equal-value rule), cleaned in place in a window.
    Cube mask = random_label_image(19, 17, 2, DType::U8, seed + 1);
    const Cube expected_clean = remove_small_components(cpu_context(), mask, 3, 8);
    edges_views::HostWindow w = edges_views::host_window(mask, Layout::BIP, seed, 0, 200);
    const MutableCubeView in_place = w.whole.mutable_view().window(edges_views::kMargin, edges_views::kMargin, 19, 17);
    remove_small_components_into(cpu_context(), in_place, in_place, 3, 8);
    EXPECT_TRUE(cubes_identical(expected_clean, Cube::from_view(in_place, Layout::BSQ)));
    // min_size ≤ 1 copies.
    Cube copy = edges_views::poisoned_host({19, 17, 2, DType::U8, Layout::BIL});
    remove_small_components_into(cpu_context(), mask, copy, 1, 4);
    EXPECT_TRUE(cubes_identical(mask, copy.to_layout(Layout::BSQ)));
}

TEST(LabelsViews, BadOutputsNameTheOutput) {
    const Cube mask = random_binary(9, 8, 2, 0.5, 1);
    Cube u8_labels(9, 8, 2, DType::U8), small(9, 8, 1, DType::I32), labels(9, 8, 2, DType::I32);
    EXPECT_NE(invalid_input_message([&] { label_components_into(cpu_context(), mask, u8_labels); }).find("expected 9x8x2 i32"),
              std::string::npos);
    EXPECT_NE(invalid_input_message([&] { label_components_into(cpu_context(), mask, small); }).find("label_components_into"),
              std::string::npos);
    EXPECT_NE(invalid_input_message([&] { remove_small_components_into(cpu_context(), mask, labels, 3); }).find("u8"),
              std::string::npos);
    std::vector<std::int32_t> storage(9 * 8 * 2);
    const auto on_device = MutableCubeView::device(storage.data(), 0, 9, 8, 2, DType::I32, dense_strides(9, 8, 2, Layout::BSQ));
    EXPECT_NE(invalid_input_message([&] { label_components_into(cpu_context(), mask, on_device); }).find("device memory"),
              std::string::npos);
    EXPECT_NE(invalid_input_message([&] { label_components_into(cpu_context(), mask, labels, 6); }).find("connectivity = 6"),
              std::string::npos);
}

}  // namespace
}  // namespace cubekit
