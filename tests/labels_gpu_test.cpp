// Connected-component labelling: CUDA backend against the CPU reference (which labels_test.cpp
// checks against a flood fill). Built everywhere; every test skips (and says so) where no CUDA
// device exists. scripts/gpu-check runs them on the H100.
//
// Exactness: labels, per-band sizes and boxes, and removed maps must be equal, sample for
// sample. The shapes straddle the device's 32×32 tiles (31, 32, 33, 63, 65, ...), include a
// 2048×2048 plane and more planes than a grid's y dimension (65535).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "cubekit/buffer.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "cubekit/labels.hpp"
#include "edges_views_test_helpers.hpp"
#include "labels/labels_internal.hpp"
#include "labels_test_helpers.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using labels_test::random_binary;
using labels_test::same_components;
using labels_test::random_label_image;
using testing::cpu_context;
using testing::cubes_identical;
using testing::test_seed;

// Under compute-sanitizer (scripts/gpu-check runs memcheck, initcheck and racecheck on these
// tests, racecheck at ~100x the time) the same kernels and shapes run on fewer and smaller
// inputs; the full set runs in the plain GPU test run. CUBEKIT_TEST_QUICK=1 asks for it too.
bool sanitized() {
    static const bool quick = std::getenv("NV_SANITIZER_INJECTION_PORT_BASE") != nullptr ||
                              std::getenv("NV_SANITIZER_INJECTION_TRANSPORT_TYPE") != nullptr ||
                              std::getenv("CUBEKIT_TEST_QUICK") != nullptr;
    return quick;
}
// The first `quick` items under sanitizers, else all.
template <typename T>
std::vector<T> pick(std::vector<T> all, std::size_t quick) {
    if (sanitized() && all.size() > quick) all.resize(quick);
    return all;
}

// ---- Inputs ---------------------------------------------------------------------------------------

// Edge-detector-like maps: the 2-pixel-wide boundaries of random discs (a pixel is on when its
// 3×3 window is not uniform), plus isolated noise pixels and small clusters.
Cube stroke_maps(int W, int H, int B, std::uint64_t seed) {
    Cube c(W, H, B, DType::U8);
    std::mt19937_64 rng(seed);
    std::vector<std::uint8_t> f(std::size_t(W) * H);
    for (int b = 0; b < B; ++b) {
        std::fill(f.begin(), f.end(), std::uint8_t(0));
        const int discs = std::max(1, W * H / 2500);
        for (int d = 0; d < discs; ++d) {
            const int cx = int(rng() % unsigned(W)), cy = int(rng() % unsigned(H)), r = 2 + int(rng() % 40);
            for (int y = std::max(0, cy - r); y <= std::min(H - 1, cy + r); ++y)
                for (int x = std::max(0, cx - r); x <= std::min(W - 1, cx + r); ++x)
                    if ((x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r) f[std::size_t(y) * W + x] ^= 1;
        }
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                bool edge = false;
                for (int dy = -1; dy <= 1; ++dy)
                    for (int dx = -1; dx <= 1; ++dx) {
                        const int qx = std::clamp(x + dx, 0, W - 1), qy = std::clamp(y + dy, 0, H - 1);
                        edge |= f[std::size_t(qy) * W + qx] != f[std::size_t(y) * W + x];
                    }
                if (rng() % 50 == 0) edge = true;  // noise: single pixels and, where they touch, small clusters
                c.at<std::uint8_t>(x, y, b) = edge ? 1 : 0;
            }
    }
    return c;
}

Cube serpentine(int W, int H) {
    Cube c(W, H, 1, DType::U8);
    for (int y = 0; y < H; y += 2) {
        for (int x = 0; x < W; ++x) c.at<std::uint8_t>(x, y, 0) = 1;
        if (y + 1 < H) c.at<std::uint8_t>((y / 2) % 2 == 0 ? W - 1 : 0, y + 1, 0) = 1;
    }
    return c;
}

Cube checkerboard(int W, int H) {
    Cube c(W, H, 1, DType::U8);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) c.at<std::uint8_t>(x, y, 0) = (x + y) % 2 == 0 ? 1 : 0;
    return c;
}

// A spiral of one-pixel-wide wall (8-connected and 4-connected), the worst case for merge chains.
Cube spiral(int n) {
    Cube c(n, n, 1, DType::U8);
    int x0 = 0, y0 = 0, x1 = n - 1, y1 = n - 1;
    while (x0 <= x1 && y0 <= y1) {
        for (int x = x0; x <= x1; ++x) c.at<std::uint8_t>(x, y0, 0) = 1;
        for (int y = y0; y <= y1; ++y) c.at<std::uint8_t>(x1, y, 0) = 1;
        for (int x = x0; x <= x1; ++x) c.at<std::uint8_t>(x, y1, 0) = 1;
        for (int y = y0 + 2; y <= y1; ++y) c.at<std::uint8_t>(x0, y, 0) = 1;
        if (x0 + 1 <= x1) c.at<std::uint8_t>(x0 + 1, y0 + 2, 0) = 1;
        x0 += 2, y0 += 2, x1 -= 2, y1 -= 2;
    }
    return c;
}

// ---- Comparisons --------------------------------------------------------------------------------

Cube cpu_internal_removal(const Cube& mask, std::int64_t min_size, int connectivity) {
    Cube out = mask.to_layout(Layout::BSQ);
    detail::remove_small_components_cpu(cpu_context(), out.data<std::uint8_t>(), out.width(), out.height(), out.bands(),
                                        min_size, connectivity);
    return out;
}

// The internal device function: upload, run, download.
Cube gpu_internal_removal(const Context& gpu, const Cube& mask, std::int64_t min_size, int connectivity) {
    Cube out = mask.to_layout(Layout::BSQ);
    DeviceBuffer d(gpu, out.num_bytes());
    d.upload(gpu, out.bytes(), out.num_bytes());
    detail::remove_small_components_device(gpu, static_cast<std::uint8_t*>(d.data()), out.width(), out.height(),
                                           out.bands(), min_size, connectivity);
    d.download(gpu, out.bytes(), out.num_bytes());
    return out;
}

// Every comparison of one binary mask: labels + statistics, public and internal removal.
void expect_backends_agree(const Context& gpu, const Cube& mask, int connectivity, std::vector<std::int64_t> limits) {
    SCOPED_TRACE("connectivity " + std::to_string(connectivity));
    ASSERT_TRUE(same_components(label_components(cpu_context(), mask, connectivity), label_components(gpu, mask, connectivity)));
    for (std::int64_t L : limits) {
        SCOPED_TRACE("L = " + std::to_string(L));
        const Cube cpu = remove_small_components(cpu_context(), mask, L, connectivity);
        ASSERT_TRUE(cubes_identical(cpu, remove_small_components(gpu, mask, L, connectivity)));
        ASSERT_TRUE(cubes_identical(cpu, cpu_internal_removal(mask, L, connectivity)));
        ASSERT_TRUE(cubes_identical(cpu, gpu_internal_removal(gpu, mask, L, connectivity)));
    }
}

struct Shape { int w, h, b; };
std::string shape_name(const Shape& s) { return std::to_string(s.w) + "x" + std::to_string(s.h) + "x" + std::to_string(s.b); }

// ---- Tests -----------------------------------------------------------------------------------------

TEST(LabelsGpu, RandomBinaryMatchesCpu) {
    REQUIRE_GPU();
    const std::vector<Shape> shapes = pick<Shape>({{1, 1, 1},   {1, 100, 3}, {100, 1, 3}, {2, 2, 2},   {33, 33, 2},
                                                   {63, 65, 3}, {31, 31, 2}, {32, 32, 2}, {64, 64, 1}, {97, 61, 5},
                                                   {257, 129, 2}, {300, 200, 2}}, 5);
    for (const Shape& s : shapes)
        for (double d : pick<double>({0.59, 0.05, 0.95, 0.2, 0.4, 0.5, 0.7}, 2)) {
            const std::uint64_t seed = test_seed();
            SCOPED_TRACE(shape_name(s) + " density " + std::to_string(d) + " seed " + std::to_string(seed));
            const Cube mask = random_binary(s.w, s.h, s.b, d, seed);
            for (int c : {4, 8}) expect_backends_agree(gpu, mask, c, {2, 5, 30});
        }
}

TEST(LabelsGpu, LabelImagesMatchCpu) {
    REQUIRE_GPU();
    for (DType t : {DType::U8, DType::U16, DType::I16, DType::U32, DType::I32})
        for (const Shape& s : pick<Shape>({{1, 1, 1}, {33, 31, 3}, {45, 1, 2}, {1, 45, 2}, {130, 70, 2}, {500, 300, 1}}, 2)) {
            const std::uint64_t seed = test_seed();
            const Cube image = random_label_image(s.w, s.h, s.b, t, seed);
            for (int c : {4, 8}) {
                SCOPED_TRACE(shape_name(s) + " " + std::string(dtype_name(t)) + " c=" + std::to_string(c) + " seed " +
                             std::to_string(seed));
                ASSERT_TRUE(same_components(label_components(cpu_context(), image, c), label_components(gpu, image, c)));
                if (t != DType::U8) continue;
                for (std::int64_t L : {2, 4, 9}) {  // a non-binary mask: equal-value rule, through labelling
                    ASSERT_TRUE(cubes_identical(remove_small_components(cpu_context(), image, L, c),
                                                remove_small_components(gpu, image, L, c)));
                }
            }
        }
}

TEST(LabelsGpu, ManyPlanes) {
    REQUIRE_GPU();
    // The second has more planes than a grid's y dimension (the kernels loop over the rest).
    for (const Shape& s : sanitized() ? std::vector<Shape>{{37, 29, 40}} : std::vector<Shape>{{37, 29, 300}, {3, 2, 70000}}) {
        const std::uint64_t seed = test_seed();
        SCOPED_TRACE(shape_name(s) + " seed " + std::to_string(seed));
        const Cube mask = random_binary(s.w, s.h, s.b, 0.45, seed);
        for (int c : {4, 8}) expect_backends_agree(gpu, mask, c, {2, 4});
    }
}

TEST(LabelsGpu, LargePlane2048) {
    REQUIRE_GPU();
    const int n = sanitized() ? 600 : 2048;
    for (double d : pick<double>({0.59, 0.41}, 1)) {  // near the 4- and 8-connected percolation thresholds
        const std::uint64_t seed = test_seed();
        SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(n) + " density " + std::to_string(d) + " seed " + std::to_string(seed));
        const Cube mask = random_binary(n, n, 1, d, seed);
        for (int c : {4, 8}) expect_backends_agree(gpu, mask, c, {3, 100000});
    }
}

TEST(LabelsGpu, WorstCaseShapes) {
    REQUIRE_GPU();
    const int n = sanitized() ? 160 : 1024;
    Cube ones(n, n, 1, DType::U8);
    std::fill(ones.data<std::uint8_t>(), ones.data<std::uint8_t>() + ones.num_elements(), std::uint8_t(1));
    const std::vector<std::pair<std::string, Cube>> cases = [&] {
        std::vector<std::pair<std::string, Cube>> v;
        v.emplace_back("all ones", ones.clone());
        v.emplace_back("checkerboard", checkerboard(n - 23, n - 25));
        v.emplace_back("serpentine", serpentine(n, n - 1));
        v.emplace_back("serpentine 1x777", serpentine(1, 777));
        v.emplace_back("serpentine 777x1", serpentine(777, 1));
        v.emplace_back("spiral", spiral(n / 2 - 1));
        v.emplace_back("spiral 64", spiral(64));
        v.emplace_back("all zero (no components)", Cube(70, 40, 3, DType::U8));
        return v;
    }();
    for (const auto& [name, mask] : cases) {
        SCOPED_TRACE(name);
        for (int c : {4, 8}) expect_backends_agree(gpu, mask, c, {2, 1000, std::int64_t(mask.num_elements())});
    }
}

TEST(LabelsGpu, EdgeLikeStrokesMatchCpu) {
    REQUIRE_GPU();
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube maps = stroke_maps(1096, 715, sanitized() ? 1 : 6, seed);
    for (int c : {4, 8}) expect_backends_agree(gpu, maps, c, {3, 10, 50});
}

// Back-to-back calls on the stream without synchronising: the pool hands the second call the
// first one's scratch, full of stale parents and sizes, which must not leak into its result.
TEST(LabelsGpu, RepeatedCallsIgnoreStaleScratch) {
    REQUIRE_GPU();
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube a = random_binary(300, 200, 7, 0.55, seed), b = random_binary(300, 200, 7, 0.3, seed + 1);
    Cube ga = a.clone(), gb = b.clone();
    DeviceBuffer da(gpu, a.num_bytes()), db(gpu, b.num_bytes());
    da.upload(gpu, a.bytes(), a.num_bytes());
    db.upload(gpu, b.bytes(), b.num_bytes());
    auto* pa = static_cast<std::uint8_t*>(da.data());
    auto* pb = static_cast<std::uint8_t*>(db.data());
    detail::remove_small_components_device(gpu, pa, 300, 200, 7, 10, 8);
    detail::remove_small_components_device(gpu, pb, 300, 200, 7, 10, 8);
    detail::remove_small_components_device(gpu, pa, 300, 200, 7, 10, 8);  // idempotent
    detail::remove_small_components_device(gpu, pb, 300, 200, 7, 4, 4);
    da.download(gpu, ga.bytes(), ga.num_bytes());
    db.download(gpu, gb.bytes(), gb.num_bytes());
    EXPECT_TRUE(cubes_identical(cpu_internal_removal(a, 10, 8), ga));
    EXPECT_TRUE(cubes_identical(cpu_internal_removal(cpu_internal_removal(b, 10, 8), 4, 4), gb));
}

// Masks from real scenes: a few bands of every shared scene thresholded at their median.
TEST(LabelsGpu, RealSceneMasksMatchCpu) {
    REQUIRE_GPU();
    const auto scenes = testing::hyperspectral_scenes();
    for (const testing::SceneFile& s : scenes) {
        SCOPED_TRACE(s.path.string());
        const Cube scene = read_cube(s.path, {.var = s.var});
        const int B = scene.bands();
        std::vector<int> bands = {0, B / 3, B / 2, B - 1};
        bands.erase(std::unique(bands.begin(), bands.end()), bands.end());
        Cube mask(scene.width(), scene.height(), int(bands.size()), DType::U8);
        std::vector<double> v(std::size_t(scene.width()) * scene.height());
        for (std::size_t k = 0; k < bands.size(); ++k) {
            for (int y = 0; y < scene.height(); ++y)
                for (int x = 0; x < scene.width(); ++x) v[std::size_t(y) * scene.width() + x] = scene.value(x, y, bands[k]);
            std::vector<double> sorted = v;
            std::nth_element(sorted.begin(), sorted.begin() + std::ptrdiff_t(sorted.size() / 2), sorted.end());
            const double median = sorted[sorted.size() / 2];
            for (int y = 0; y < scene.height(); ++y)
                for (int x = 0; x < scene.width(); ++x)
                    mask.at<std::uint8_t>(x, y, int(k)) = v[std::size_t(y) * scene.width() + x] > median ? 1 : 0;
        }
        for (int c : {4, 8}) expect_backends_agree(gpu, mask, c, {3, 10, 50});
    }
    RecordProperty("scenes_compared", int(scenes.size()));
}

TEST(LabelsGpu, BadInputs) {
    REQUIRE_GPU();
    DeviceBuffer d(gpu, 16);
    auto* p = static_cast<std::uint8_t*>(d.data());
    EXPECT_THROW(detail::remove_small_components_device(gpu, p, 4, 4, 1, 3, 6), InvalidInput);
    EXPECT_THROW(detail::remove_small_components_device(gpu, p, 65536, 65536, 1, 3, 8), InvalidInput);
    EXPECT_THROW(detail::remove_small_components_device(cpu_context(), p, 4, 4, 1, 3, 8), DeviceError);
    EXPECT_THROW(label_components(gpu, Cube(3, 3, 1, DType::F32), 8), InvalidInput);
    EXPECT_THROW(label_components(gpu, Cube(3, 3, 1, DType::U8), 6), InvalidInput);
    // min_size ≤ 1 and empty planes are no-ops on device memory too.
    detail::remove_small_components_device(gpu, p, 4, 4, 1, 1, 8);
    detail::remove_small_components_device(gpu, p, 4, 4, 0, 5, 8);
    gpu.synchronize();
}

// Not a check: the time of the internal device function on the spec's workload shape (Pavia
// Centre, 102 bands of 1096×715, ~20 % edge pixels), for the log. Benchmarks measure it properly.
TEST(LabelsGpu, PaviaSizedRemovalTime) {
    REQUIRE_GPU();
    const Cube one = stroke_maps(1096, 715, 4, 12345);
    const int bands = sanitized() ? 4 : 102;
    Cube maps(1096, 715, bands, DType::U8);
    const std::size_t plane = one.num_elements() / 4;
    for (int b = 0; b < bands; ++b)
        std::copy_n(one.data<std::uint8_t>() + std::size_t(b % 4) * plane, plane, maps.data<std::uint8_t>() + std::size_t(b) * plane);
    const double density = double(std::count(maps.data<std::uint8_t>(), maps.data<std::uint8_t>() + maps.num_elements(), 1)) /
                           double(maps.num_elements());
    DeviceBuffer d(gpu, maps.num_bytes());
    DeviceBuffer work(gpu, maps.num_bytes());
    d.upload(gpu, maps.bytes(), maps.num_bytes());
    double best_ms = 1e30;
    for (int rep = 0; rep < (sanitized() ? 2 : 6); ++rep) {
        work.upload(gpu, maps.bytes(), maps.num_bytes());  // fresh maps each time (waits)
        const auto t0 = std::chrono::steady_clock::now();
        detail::remove_small_components_device(gpu, static_cast<std::uint8_t*>(work.data()), 1096, 715, bands, 10, 8);
        gpu.synchronize();
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (rep > 0) best_ms = std::min(best_ms, ms);  // the first call warms the pool up
    }
    Cube out = maps.clone();
    work.download(gpu, out.bytes(), out.num_bytes());
    EXPECT_TRUE(cubes_identical(cpu_internal_removal(maps, 10, 8), out));
    std::cout << "remove_small_components_device, " << bands << "x1096x715, " << std::lround(100 * density)
              << "% foreground, L=10, 8-conn: " << best_ms << " ms (host wall clock incl. launch)\n";
    RecordProperty("removal_ms", std::to_string(best_ms));
}

// ---- The device-resident calls (issue 12): poisoned device outputs, windows, BIP, strides --------

// label_components_into on the device into a poisoned output; labels downloaded.
Components device_labels(const Context& gpu, const CubeView& d_image, int connectivity) {
    DeviceCube labels = edges_views::poisoned(gpu, {d_image.width(), d_image.height(), d_image.bands(), DType::I32, Layout::BSQ});
    Components c;
    c.per_band = label_components_into(gpu, d_image, labels, connectivity);
    c.labels = labels.download(gpu);
    return c;
}
Cube device_removal(const Context& gpu, const CubeView& d_mask, std::int64_t L, int connectivity) {
    DeviceCube out = edges_views::poisoned(gpu, {d_mask.width(), d_mask.height(), d_mask.bands(), DType::U8, Layout::BSQ});
    remove_small_components_into(gpu, d_mask, out, L, connectivity);
    return out.download(gpu);
}

TEST(LabelsGpu, IntoPoisonedOutputsOnAwkwardShapes) {
    REQUIRE_GPU();
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Shape& s : pick<Shape>({{1, 1, 1}, {1, 17, 3}, {17, 1, 2}, {31, 33, 2}, {65, 63, 3}, {97, 70, 2}}, 4))
        for (int c : {4, 8}) {
            SCOPED_TRACE(shape_name(s) + " c=" + std::to_string(c));
            const Cube mask = random_binary(s.w, s.h, s.b, 0.5, seed);
            const Cube image = random_label_image(s.w, s.h, s.b, DType::I16, seed);
            const Cube several = random_label_image(s.w, s.h, s.b, DType::U8, seed + 1);  // equal-value rule
            const DeviceCube d_mask = DeviceCube::upload(gpu, mask), d_image = DeviceCube::upload(gpu, image);
            const DeviceCube d_several = DeviceCube::upload(gpu, several);
            EXPECT_TRUE(same_components(label_components(cpu_context(), image, c), device_labels(gpu, d_image, c)));
            EXPECT_TRUE(same_components(label_components(cpu_context(), mask, c), device_labels(gpu, d_mask, c)));
            for (std::int64_t L : {1, 3, 8}) {
                EXPECT_TRUE(cubes_identical(remove_small_components(cpu_context(), mask, L, c), device_removal(gpu, d_mask, L, c)));
                EXPECT_TRUE(cubes_identical(remove_small_components(cpu_context(), several, L, c),
                                            device_removal(gpu, d_several, L, c)));
            }
        }
}

// A window of a device BSQ cube (the labelling converts it once, the removal's first pass reads it
// in place), a device BIP cube (reordered once), outputs into a window of a larger device cube and
// into a band range of a BIP device cube (each through one copy), and removal in place in a window.
TEST(LabelsGpu, DeviceWindowBipCubeAndStridedOutputs) {
    REQUIRE_GPU();
    const std::uint64_t seed = test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube image = random_label_image(70, 45, 3, DType::U8, seed);
    const Cube mask = random_binary(70, 45, 3, 0.45, seed + 2);
    const edges_views::DeviceWindow w_image = edges_views::device_window(gpu, image, Layout::BSQ, seed, 0, 3);
    const edges_views::DeviceWindow w_mask = edges_views::device_window(gpu, mask, Layout::BSQ, seed, 0, 1);
    const DeviceCube bip_image = DeviceCube::from_view(gpu, image, Layout::BIP);
    for (int c : {4, 8}) {
        SCOPED_TRACE("c=" + std::to_string(c));
        const Components expected = label_components(cpu_context(), image, c);
        EXPECT_TRUE(same_components(expected, device_labels(gpu, w_image.view, c)));
        EXPECT_TRUE(same_components(expected, device_labels(gpu, bip_image, c)));
        // Into a window of a larger poisoned i32 cube, and into bands 1..3 of a 4-band BIP cube.
        DeviceCube big = edges_views::poisoned(gpu, {80, 50, 3, DType::I32, Layout::BSQ});
        const ComponentStats s1 = label_components_into(gpu, w_image.view, big.mutable_view().window(4, 2, 70, 45), c);
        const Cube big_host = big.download(gpu);
        EXPECT_TRUE(same_components(expected, Components{Cube::from_view(big_host.view().window(4, 2, 70, 45), Layout::BSQ), s1}));
        EXPECT_EQ(big_host.at<std::int32_t>(0, 0, 1), -1);  // outside the window: untouched
        DeviceCube bip_out = edges_views::poisoned(gpu, {70, 45, 4, DType::I32, Layout::BIP});
        const ComponentStats s2 = label_components_into(gpu, bip_image, bip_out.mutable_view().band_range(1, 3), c);
        const Cube bip_host = bip_out.download(gpu);
        EXPECT_TRUE(same_components(expected, Components{Cube::from_view(bip_host.view().band_range(1, 3), Layout::BSQ), s2}));

        const Cube clean = remove_small_components(cpu_context(), mask, 5, c);
        EXPECT_TRUE(cubes_identical(clean, device_removal(gpu, w_mask.view, 5, c)));
        edges_views::DeviceWindow in_place = edges_views::device_window(gpu, mask, Layout::BSQ, seed, 0, 1);
        const MutableCubeView target = in_place.whole.mutable_view().window(edges_views::kMargin, edges_views::kMargin, 70, 45);
        remove_small_components_into(gpu, target, target, 5, c);
        const Cube whole = in_place.whole.download(gpu);
        EXPECT_TRUE(cubes_identical(clean, Cube::from_view(whole.view().window(edges_views::kMargin, edges_views::kMargin, 70, 45),
                                                           Layout::BSQ)));
        DeviceCube bip_clean = edges_views::poisoned(gpu, {70, 45, 3, DType::U8, Layout::BIP});
        remove_small_components_into(gpu, w_mask.view, bip_clean, 5, c);
        EXPECT_TRUE(cubes_identical(clean, bip_clean.download(gpu).to_layout(Layout::BSQ)));
    }
    Cube host_labels(70, 45, 3, DType::I32);
    EXPECT_THROW(label_components_into(gpu, w_image.view, host_labels), InvalidInput);  // host output, CUDA context
}

}  // namespace
}  // namespace cubekit
