// k-means on views (issue 12, item 1): the CPU reference reads windows, other layouts and other
// strides where they are — same results as on the owned dense BIP cube, and no copy of the image
// (memory_counters) — and kmeans_into() writes the caller's label and painted views, of any
// strides. Also the colour helpers on views. Shared helpers: kmeans_test_helpers.hpp. Runs in CI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cubekit/buffer.hpp"
#include "cubekit/kmeans_color.hpp"
#include "kmeans_test_helpers.hpp"

namespace cubekit {
namespace {

using namespace kmeans_test;

// A W×H×m BIP cube with a margin around the wanted window, a mask and (float types) NaN pixels.
struct Scene {
    Cube big;                        // (W + 7) × (H + 5), BIP
    CubeView window;                 // the W×H window at (4, 3)
    Cube owned;                      // a dense BIP copy of the window
    std::vector<std::uint8_t> mask;  // W×H, about one pixel in 7 excluded
};

Scene make_scene(int W, int H, int m, DType t, std::uint64_t seed) {
    Scene s;
    const auto [lo, hi] = data_range(t);
    s.big = testing::random_cube(W + 7, H + 5, m, t, seed, lo, hi, Layout::BIP);
    std::mt19937_64 rng(seed);
    if (dtype_is_float(t))
        for (int i = 0; i < 9; ++i) s.big.set_value(4 + int(rng() % W), 3 + int(rng() % H), int(rng() % m), NAN);
    s.window = s.big.view().window(4, 3, W, H);
    s.owned = Cube::from_view(s.window, Layout::BIP);
    s.mask.assign(std::size_t(W) * H, 1);
    for (auto& v : s.mask) v = rng() % 7 != 0;
    return s;
}

std::vector<KmeansOptions> option_sets(std::uint64_t seed, const std::vector<std::uint8_t>& mask) {
    std::vector<KmeansOptions> sets = {
        {.k = 5, .seed = seed, .max_iter = 8},
        {.k = 7, .init = KmeansInit::Random, .seed = seed, .init_sample = 300, .max_iter = 8, .n_init = 2},
        {.k = 4, .init = KmeansInit::BoxDiagonal, .max_iter = 8, .mask = mask},
        {.k = 6, .seed = seed, .init_sample = 500, .max_iter = 8, .mask = mask},
    };
    return sets;
}

TEST(KmeansViews, WindowBsqBilAndFlippedViewsMatchTheOwnedCube) {
    for (DType t : {DType::U8, DType::I16, DType::F32, DType::F64})
        for (int m : {1, 3, 5}) {
            const std::uint64_t seed = test_seed();
            SCOPED_TRACE(str(t) + " m=" + std::to_string(m) + " seed=" + std::to_string(seed));
            const Scene s = make_scene(37, 29, m, t, seed);
            const Cube bsq = s.owned.to_layout(Layout::BSQ), bil = s.owned.to_layout(Layout::BIL);
            // Rows upside down: a view with a negative row stride over a flipped copy.
            Cube flipped(37, 29, m, t, Layout::BIP);
            for (int y = 0; y < 29; ++y)
                for (int x = 0; x < 37; ++x)
                    for (int b = 0; b < m; ++b) flipped.set_value(x, 28 - y, b, s.owned.value(x, y, b));
            const CubeView unflipped = CubeView::host(flipped.bytes() + std::size_t(28) * 37 * m * dtype_size(t), 37, 29, m,
                                                      t, Strides{m, -37 * m, 1});
            for (const KmeansOptions& o : option_sets(seed, s.mask)) {
                SCOPED_TRACE("init " + std::string(kmeans_init_name(o.init)));
                const KmeansResult gold = run(s.owned, o);
                expect_identical_results(gold, kmeans(cpu_context(), s.window, o), "window of a BIP cube");
                expect_identical_results(gold, kmeans(cpu_context(), bsq, o), "BSQ cube");
                expect_identical_results(gold, kmeans(cpu_context(), bil, o), "BIL cube");
                expect_identical_results(gold, kmeans(cpu_context(), unflipped, o), "negative row stride");
                expect_identical_results(gold, kmeans(cpu_context(), bsq.view().window(0, 0, 37, 29), o), "BSQ window");
            }
        }
}

// The CPU reads a dense BIP image, a window and a BSQ cube where they are: kmeans() allocates no
// host buffer but its own painted image, kmeans_into() with no painted image none at all.
TEST(KmeansViews, NoCopyOfTheImage) {
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed=" + std::to_string(seed));
    const Cube bip = testing::random_cube(300, 200, 3, DType::U8, seed, 0, 255, Layout::BIP);
    const Cube bsq = bip.to_layout(Layout::BSQ);
    const Cube big = testing::random_cube(320, 230, 3, DType::U8, seed + 1, 0, 255, Layout::BIP);
    const KmeansOptions o{.k = 8, .seed = seed, .max_iter = 5};
    std::vector<std::int32_t> labels(300 * 200);
    const auto h_labels = MutableCubeView::host(labels.data(), 300, 200, 1, DType::I32, dense_strides(300, 200, 1, Layout::BSQ));
    for (const CubeView& view : {bip.view(), bsq.view(), big.view().window(10, 20, 300, 200)}) {
        SCOPED_TRACE(view.describe());
        const MemoryCounters before = memory_counters();
        kmeans_into(cpu_context(), view, h_labels, o);
        const MemoryCounters after = memory_counters();
        EXPECT_EQ(after.host_allocations, before.host_allocations) << "kmeans_into allocated a host buffer";
        KmeansOptions painted = o;
        const MemoryCounters b2 = memory_counters();
        const KmeansResult r = kmeans(cpu_context(), view, painted);
        const MemoryCounters a2 = memory_counters();
        EXPECT_EQ(a2.host_allocations - b2.host_allocations, 1u) << "only the painted image";
        EXPECT_EQ(a2.host_bytes - b2.host_bytes, bip.num_bytes());
        EXPECT_EQ(r.labels, labels);
    }
}

// kmeans_into on the CPU writes a strided label view (one band of an i32 BIP cube) and a BSQ
// painted image, every element (they are poisoned first), as kmeans() returns them.
TEST(KmeansInto, CpuWritesStridedCallerViews) {
    for (bool masked : {false, true}) {
        const std::uint64_t seed = test_seed();
        SCOPED_TRACE("seed=" + std::to_string(seed) + (masked ? " masked" : ""));
        const Scene s = make_scene(41, 23, 3, DType::F32, seed);
        KmeansOptions o{.k = 6, .seed = seed, .max_iter = 10};
        if (masked) o.mask = s.mask;
        const KmeansResult gold = run(s.owned, o);
        Cube label_planes(41, 23, 3, DType::I32, Layout::BIP);
        Cube painted(41, 23, 3, DType::F32, Layout::BSQ);
        std::fill(label_planes.data<std::int32_t>(), label_planes.data<std::int32_t>() + label_planes.num_elements(), 0x5A5A5A5A);
        std::fill(painted.data<float>(), painted.data<float>() + painted.num_elements(), -12345.0f);
        const KmeansResult r = kmeans_into(cpu_context(), s.window, label_planes.mutable_view().band_range(1, 1), o, painted);
        EXPECT_TRUE(r.labels.empty());
        EXPECT_TRUE(r.quantized.empty());
        EXPECT_EQ(r.centroids, gold.centroids);
        EXPECT_EQ(r.counts, gold.counts);
        EXPECT_EQ(r.iterations, gold.iterations);
        for (int y = 0; y < 23; ++y)
            for (int x = 0; x < 41; ++x) {
                ASSERT_EQ(label_planes.at<std::int32_t>(x, y, 1), gold.labels[std::size_t(y) * 41 + x]) << x << "," << y;
                ASSERT_EQ(label_planes.at<std::int32_t>(x, y, 0), 0x5A5A5A5A) << "a neighbouring band was written";
            }
        EXPECT_TRUE(cubes_identical(gold.quantized, painted.to_layout(Layout::BIP)));
    }
}

TEST(KmeansInto, RejectsOutputsOfTheWrongShapeTypeOrMemory) {
    const Cube img = testing::random_cube(16, 9, 3, DType::U8, 1, 0, 255, Layout::BIP);
    Cube labels(16, 9, 1, DType::I32), wrong_type(16, 9, 1, DType::U16), wrong_size(9, 16, 1, DType::I32);
    Cube painted(16, 9, 3, DType::U8), painted_f32(16, 9, 3, DType::F32);
    std::int32_t fake = 0;
    const auto on_device = MutableCubeView::device(&fake, 0, 16, 9, 1, DType::I32, dense_strides(16, 9, 1, Layout::BSQ));
    auto expect_named = [&](const MutableCubeView& l, const MutableCubeView& q, const std::string& name) {
        try {
            kmeans_into(cpu_context(), img, l, {.k = 2}, q);
            ADD_FAILURE() << "no exception for " << name;
        } catch (const InvalidInput& e) {
            EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
        }
    };
    expect_named(wrong_type, {}, "labels");
    expect_named(wrong_size, {}, "labels");
    expect_named(MutableCubeView(), {}, "labels");
    expect_named(on_device, {}, "labels");
    expect_named(labels, painted_f32, "quantized");
    expect_named(labels, painted.mutable_view().band_range(0, 2), "quantized");
    EXPECT_NO_THROW(kmeans_into(cpu_context(), img, labels, {.k = 2}, painted));
}

TEST(KmeansColorViews, LabAndDitherReadViewsWhereTheyAre) {
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed=" + std::to_string(seed));
    const Cube big = testing::random_cube(40, 30, 3, DType::U8, seed, 0, 255, Layout::BSQ);
    const CubeView window = big.view().window(3, 2, 31, 21);
    const Cube owned = Cube::from_view(window, Layout::BIP);
    EXPECT_TRUE(cubes_identical(rgb_u8_to_lab(owned), rgb_u8_to_lab(window)));
    const std::vector<double> palette = {0, 0, 0, 255, 255, 255, 200, 30, 90, 20, 180, 40};
    std::vector<std::uint8_t> mask(31 * 21, 1);
    for (std::size_t i = 0; i < mask.size(); i += 5) mask[i] = 0;
    EXPECT_EQ(dither_floyd_steinberg(owned, palette, mask), dither_floyd_steinberg(window, palette, mask));
    EXPECT_EQ(dither_floyd_steinberg(owned, palette), dither_floyd_steinberg(owned.to_layout(Layout::BSQ), palette));
}

}  // namespace
}  // namespace cubekit
