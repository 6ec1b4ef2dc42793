// k-means: CUDA backend against the CPU backend (spec kmeans.md §5 oracle 1). Built everywhere;
// every test skips (and says so) where no CUDA device exists. scripts/gpu-check runs them on the H100.
// What must be identical and what may differ: kmeans_gpu_test_helpers.hpp. The device-resident
// call on device views: kmeans_into_gpu_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "cubekit/io.hpp"
#include "cubekit/kmeans.hpp"
#include "kmeans_gpu_test_helpers.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using testing::cubes_identical;

using kmeans_test::compare;
using kmeans_test::data_range;
using kmeans_test::kTypes;
using kmeans_test::same_result;

struct Size { int w, h; };

TEST(KmeansGpu, EveryTypeBandCountAndSize) {
    REQUIRE_GPU();
    // 1×1, a row, a column, a prime-ish 997×13 and 61×67 = 4087 (not a multiple of any block size).
    const Size sizes[] = {{1, 1}, {1, 300}, {300, 1}, {997, 13}, {61, 67}};
    for (DType t : kTypes)
        for (int m : {1, 3, 4, 103})
            for (const Size& s : sizes) {
                const std::uint64_t seed = testing::test_seed();
                const auto [lo, hi] = data_range(t);
                const Cube img = testing::random_cube(s.w, s.h, m, t, seed, lo, hi);
                for (int k : {1, 3, 13}) {
                    if (k > s.w * s.h) continue;
                    ASSERT_NO_FATAL_FAILURE(compare(gpu, img, {.k = k, .seed = seed, .max_iter = 10}));
                }
            }
}

TEST(KmeansGpu, ManyTiesLevelsData) {
    REQUIRE_GPU();
    // Few distinct values: exact distance ties everywhere (lowest index must win on both).
    for (DType t : {DType::U8, DType::I16, DType::F32, DType::F64}) {
        const std::uint64_t seed = testing::test_seed();
        const Cube img = testing::random_levels_cube(251, 37, 3, t, seed, 4);
        for (int k : {3, 16, 64})
            ASSERT_NO_FATAL_FAILURE(compare(gpu, img, {.k = k, .init = KmeansInit::Random, .seed = seed, .max_iter = 20}));
        ASSERT_NO_FATAL_FAILURE(compare(gpu, img, {.k = 100, .seed = seed, .max_iter = 20}, "k > distinct vectors"));
    }
}

TEST(KmeansGpu, ClusterCountSweep) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    const int ks[] = {1, 2, 3, 12, 13, 16, 255, 256, 1000};
    {
        const Cube rgb = testing::random_cube(997, 13, 3, DType::U8, seed, 0, 255);
        for (int k : ks) ASSERT_NO_FATAL_FAILURE(compare(gpu, rgb, {.k = k, .seed = seed, .max_iter = 6}));
    }
    {
        const Cube f4 = testing::random_cube(61, 67, 4, DType::F32, seed + 1, -5, 5);
        for (int k : ks) ASSERT_NO_FATAL_FAILURE(compare(gpu, f4, {.k = k, .seed = seed, .max_iter = 6}));
    }
    {
        const Cube g1 = testing::random_cube(997, 13, 1, DType::U16, seed + 2, 0, 65535);
        for (int k : ks) ASSERT_NO_FATAL_FAILURE(compare(gpu, g1, {.k = k, .seed = seed, .max_iter = 6}));
    }
    {
        const Cube hs = testing::random_cube(97, 41, 103, DType::I16, seed + 3, 0, 10000);
        for (int k : {12, 13, 255, 256})
            ASSERT_NO_FATAL_FAILURE(compare(gpu, hs, {.k = k, .seed = seed, .max_iter = 3}));
    }
}

TEST(KmeansGpu, EveryInitAndEmptyPolicy) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    std::mt19937_64 rng(seed);
    // Random data, and levels data with only 5^3 = 125 distinct colours (k = 200 forces empty
    // clusters under every policy; relocation then finds D = 0).
    const Cube rnd = testing::random_cube(61, 67, 3, DType::U8, seed, 0, 255);
    const Cube lev = testing::random_levels_cube(61, 67, 3, DType::U8, seed + 1, 5);
    const Cube f4 = testing::random_cube(61, 67, 4, DType::F32, seed + 2, 0, 1);
    struct Data { const Cube* img; int k; };
    for (const Data& d : {Data{&rnd, 16}, Data{&rnd, 256}, Data{&lev, 200}, Data{&lev, 40}, Data{&f4, 24}}) {
        const Cube& img = *d.img;
        const int m = img.bands(), N = img.width() * img.height();
        // Explicit init: pixels drawn with replacement (duplicates → empty clusters at once).
        std::vector<double> init;
        std::uniform_int_distribution<int> pick(0, N - 1);
        for (int j = 0; j < d.k; ++j) {
            const int p = pick(rng);
            for (int b = 0; b < m; ++b) init.push_back(img.value(p % img.width(), p / img.width(), b));
        }
        for (KmeansInit init_kind : {KmeansInit::KmeansPlusPlus, KmeansInit::Random, KmeansInit::BoxDiagonal, KmeansInit::Explicit})
            for (EmptyPolicy e : {EmptyPolicy::Relocate, EmptyPolicy::Keep, EmptyPolicy::LegacyZero}) {
                KmeansOptions o{.k = d.k, .init = init_kind, .seed = rng(), .init_sample = 700, .max_iter = 15, .empty = e};
                if (init_kind == KmeansInit::Explicit) o.init_centroids = init;
                ASSERT_NO_FATAL_FAILURE(compare(gpu, img, o));
                o.tol = 0;
                o.init_sample = 0;
                ASSERT_NO_FATAL_FAILURE(compare(gpu, img, o, "tol 0, whole-image init"));
            }
    }
}

// The hand-made relocation cases of the CPU tests (kmeans_test.cpp, oracle 9), on both backends
// and with several max_iter: an empty cluster in the first iteration of a long run.
TEST(KmeansGpu, HandMadeRelocationCases) {
    REQUIRE_GPU();
    Cube rgb(7, 1, 3, DType::U8, Layout::BIP);
    const double px[] = {10, 10, 10, 12, 10, 10, 8, 10, 10, 200, 50, 50, 202, 50, 50, 198, 50, 50, 120, 240, 30};
    for (int i = 0; i < 21; ++i) rgb.set_value(i / 3, 0, i % 3, px[i]);
    Cube grey(7, 1, 1, DType::U8, Layout::BIP);
    const double g[] = {80, 20, 50, 50, 50, 49, 51};
    for (int i = 0; i < 7; ++i) grey.set_value(i, 0, 0, g[i]);
    for (int max_iter : {1, 2, 3, 17, 100})
        for (EmptyPolicy e : {EmptyPolicy::Relocate, EmptyPolicy::Keep, EmptyPolicy::LegacyZero}) {
            const std::string note = "max_iter " + std::to_string(max_iter);
            ASSERT_NO_FATAL_FAILURE(compare(gpu, rgb,
                                            {.k = 3, .init = KmeansInit::Explicit, .max_iter = max_iter, .tol = 0, .empty = e,
                                             .init_centroids = {10, 10, 10, 10, 10, 10, 200, 50, 50}},
                                            note));
            ASSERT_NO_FATAL_FAILURE(compare(gpu, grey,
                                            {.k = 3, .init = KmeansInit::Explicit, .max_iter = max_iter, .tol = 0, .empty = e,
                                             .init_centroids = {50, 50, 50}},
                                            note));
        }
    // Relocation needed again and again: random data, k = 64, every initial centroid the same pixel.
    const std::uint64_t seed = testing::test_seed();
    const Cube img = testing::random_cube(97, 71, 3, DType::U8, seed, 0, 255);
    std::vector<double> same;
    for (int j = 0; j < 64; ++j) same.insert(same.end(), {img.value(5, 5, 0), img.value(5, 5, 1), img.value(5, 5, 2)});
    for (int max_iter : {1, 5, 40})
        ASSERT_NO_FATAL_FAILURE(compare(gpu, img, {.k = 64, .init = KmeansInit::Explicit, .max_iter = max_iter, .tol = 0, .init_centroids = same},
                                        "64 identical initial centroids"));
}

TEST(KmeansGpu, RestartsPickTheSameWinner) {
    REQUIRE_GPU();
    for (DType t : {DType::U8, DType::U16, DType::F32, DType::F64}) {
        const std::uint64_t seed = testing::test_seed();
        const auto [lo, hi] = data_range(t);
        const Cube img = testing::random_cube(211, 89, 3, t, seed, lo, hi);
        for (KmeansInit init : {KmeansInit::KmeansPlusPlus, KmeansInit::Random})
            ASSERT_NO_FATAL_FAILURE(compare(gpu, img, {.k = 9, .init = init, .seed = seed, .init_sample = 3000, .max_iter = 8, .n_init = 3}));
    }
}

TEST(KmeansGpu, MaskAndNaN) {
    REQUIRE_GPU();
    for (DType t : {DType::F32, DType::F64, DType::U8, DType::I32}) {
        const std::uint64_t seed = testing::test_seed();
        const auto [img, mask] = kmeans_test::masked_image(333, 77, 4, t, seed);
        for (KmeansInit init : {KmeansInit::KmeansPlusPlus, KmeansInit::Random, KmeansInit::BoxDiagonal}) {
            const KmeansOptions o{.k = 11, .init = init, .seed = seed, .init_sample = 4000, .max_iter = 10, .mask = mask};
            const KmeansResult c = compare(gpu, img, o);
            // Excluded pixels are −1 on the CPU side (and so on the GPU side, compared above).
            for (std::size_t p = 0; p < mask.size(); ++p)
                if (!mask[p]) {
                    ASSERT_EQ(c.labels[p], -1) << "masked pixel " << p;
                }
            KmeansOptions nomask = o;
            nomask.mask.clear();
            if (dtype_is_float(t)) {
                ASSERT_NO_FATAL_FAILURE(compare(gpu, img, nomask, "NaN only (the outliers take part)"));
            }
        }
    }
}

TEST(KmeansGpu, LargeKTimesBandsUsesTiledKernel) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    const KmeansOptions big{.k = 512, .seed = seed, .max_iter = 3};
    const CubeShape shape{64, 40, 103, DType::F32, Layout::BIP};
    EXPECT_EQ(kmeans_implementation(gpu, shape, big), "cuda-tiled");
    EXPECT_EQ(kmeans_implementation(gpu, shape, {.k = 16}), "cuda-shared");
    EXPECT_EQ(kmeans_implementation(gpu, CubeShape{640, 480, 3, DType::U8, Layout::BIP}, {.k = 16}), "cuda-shared");
    EXPECT_EQ(kmeans_implementation(cpu_context(), shape, big), "cpu");
    const Cube f = testing::random_cube(64, 40, 103, DType::F32, seed, 0, 1);
    ASSERT_NO_FATAL_FAILURE(compare(gpu, f, big));
    const Cube u = testing::random_cube(64, 40, 103, DType::U16, seed + 1, 0, 10000);
    ASSERT_NO_FATAL_FAILURE(compare(gpu, u, big));
    const Cube d = testing::random_cube(37, 29, 200, DType::F64, seed + 2, -1, 1);
    ASSERT_NO_FATAL_FAILURE(compare(gpu, d, {.k = 700, .init = KmeansInit::Random, .seed = seed, .max_iter = 2}));
}

TEST(KmeansGpu, LegacyExplicitAndApplyPalette) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    std::mt19937_64 rng(seed);
    const Cube img = testing::random_cube(257, 129, 3, DType::U8, seed, 0, 120, Layout::BIP);
    const int N = 257 * 129;
    std::vector<double> init;
    for (int j = 0; j < 12; ++j) {
        const int p = int(rng() % N);
        for (int b = 0; b < 3; ++b) init.push_back(img.value(p % 257, p / 257, b));
    }
    for (int b = 0; b < 3; ++b) init[3 * 9 + b] = init[3 * 4 + b];  // duplicate → empty cluster
    for (int b = 0; b < 3; ++b) init[3 * 11 + b] = 255;              // far away → empty → black
    for (int n : {1, 10})
        ASSERT_NO_FATAL_FAILURE(compare(gpu, img, {.k = 12, .init = KmeansInit::Explicit, .max_iter = n, .tol = 0, .legacy = true, .init_centroids = init}));
    ASSERT_NO_FATAL_FAILURE(compare(gpu, img, {.k = 12, .init = KmeansInit::Explicit, .max_iter = 0, .init_centroids = init}, "max_iter 0"));
    // apply_palette on both backends, with and without a mask.
    std::vector<double> palette;
    for (int i = 0; i < 20 * 3; ++i) palette.push_back(double(rng() % 256) + 0.25);
    std::vector<std::uint8_t> mask(std::size_t(N), 1);
    for (int i = 0; i < N; i += 7) mask[i] = 0;
    for (const auto& mk : {std::vector<std::uint8_t>{}, mask}) {
        SCOPED_TRACE(mk.empty() ? "apply_palette" : "apply_palette masked");
        const KmeansResult c = apply_palette(cpu_context(), img, palette, mk), g = apply_palette(gpu, img, palette, mk);
        EXPECT_EQ(c.labels, g.labels);
        EXPECT_EQ(c.counts, g.counts);
        EXPECT_TRUE(cubes_identical(c.quantized, g.quantized));
    }
    // f64 palette mapping on hyperspectral-like data.
    const Cube d = testing::random_cube(101, 23, 50, DType::F64, seed + 1, -1, 1);
    std::vector<double> p64;
    for (int i = 0; i < 30 * 50; ++i) p64.push_back(std::uniform_real_distribution<double>(-1, 1)(rng));
    const KmeansResult c = apply_palette(cpu_context(), d, p64), g = apply_palette(gpu, d, p64);
    EXPECT_EQ(c.labels, g.labels);
    EXPECT_TRUE(cubes_identical(c.quantized, g.quantized));
}

TEST(KmeansGpu, ExactConvergenceSameIterations) {
    REQUIRE_GPU();
    for (DType t : {DType::U8, DType::F32}) {
        const std::uint64_t seed = testing::test_seed();
        const Cube img = testing::random_cube(320, 200, 3, t, seed, 0, 255);
        const KmeansResult c = compare(gpu, img, {.k = 10, .seed = seed, .max_iter = 300, .tol = 0});
        EXPECT_TRUE(c.converged) << c.iterations;
    }
}

// Blobs around `blobs` centres with small noise, and one pixel in 10 on the midpoint of two
// centres (a tie in exact arithmetic): long runs where the bounded passes skip most pixels and
// the midpoints sit just beside the pruning test's margin.
Cube blob_cube(int W, int H, int m, DType t, int blobs, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> centre(20.0, 230.0), noise(-6.0, 6.0);
    std::vector<double> c(std::size_t(blobs) * m);
    for (double& v : c) v = centre(rng);
    Cube img(W, H, m, t, Layout::BIP);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const auto j = std::size_t(rng() % blobs), j2 = std::size_t(rng() % blobs);
            const bool mid = rng() % 10 == 0;
            for (int b = 0; b < m; ++b) {
                double v = mid ? 0.5 * (c[j * m + b] + c[j2 * m + b]) : c[j * m + b] + noise(rng);
                if (!dtype_is_float(t)) v = std::round(v);
                img.set_value(x, y, b, v);
            }
        }
    return img;
}

TEST(KmeansGpu, BoundedPassesOnClusteredData) {
    REQUIRE_GPU();
    for (DType t : {DType::U8, DType::U16, DType::F32, DType::F64})
        for (int m : {4, 7}) {  // (the bounded passes serve m > 3)
            const std::uint64_t seed = testing::test_seed();
            const Cube img = blob_cube(301, 157, m, t, 8, seed);
            for (int k : {8, 12}) {
                ASSERT_NO_FATAL_FAILURE(compare(gpu, img, {.k = k, .seed = seed, .max_iter = 100, .tol = 0}));
                ASSERT_NO_FATAL_FAILURE(compare(gpu, img, {.k = k, .seed = seed, .max_iter = 40, .empty = EmptyPolicy::Keep}));
            }
            // Random starts leave clusters empty: relocations (a rescan after each) inside long runs.
            ASSERT_NO_FATAL_FAILURE(
                compare(gpu, img, {.k = 24, .init = KmeansInit::Random, .seed = seed, .max_iter = 100, .tol = 0}));
        }
}

// The colour path (colour_kernels.cuh): u8 images of 1–3 bands with 2^(8m) ≤ 8·N and at most
// N/2 distinct colours run their passes over the colours. 2048×1024 RGB is the smallest image
// size where RGB qualifies. Few levels (exact ties), blobs, a real photo tiled up, random
// starts that empty clusters (the relocation ranks pixels), keep, restarts, a mask, palettes.
Cube tiled_photo(const Cube& photo, int W, int H, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    Cube img(W, H, 3, DType::U8, Layout::BIP);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x)
            for (int b = 0; b < 3; ++b) {
                const double v = photo.value(x % photo.width(), y % photo.height(), b) + double(rng() % 3) - 1.0;
                img.set_value(x, y, b, std::clamp(v, 0.0, 255.0));
            }
    return img;
}

TEST(KmeansGpu, ColourPathMatchesCpu) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    const int W = 2048, H = 1024;
    std::vector<Cube> images;
    images.push_back(testing::random_levels_cube(W, H, 3, DType::U8, seed, 24, Layout::BIP));
    images.push_back(blob_cube(W, H, 3, DType::U8, 12, seed + 1));
    if (const auto photo = testing::shared_data_path("rgb/astronaut.png"))
        images.push_back(tiled_photo(read_cube(*photo), W, H, seed + 2));
    else
        std::cerr << "note: shared/data/rgb/astronaut.png absent: the real photo case is skipped\n";
    for (const Cube& img : images) {
        ASSERT_NO_FATAL_FAILURE(compare(gpu, img, {.k = 16, .seed = seed, .max_iter = 10}));
        ASSERT_NO_FATAL_FAILURE(compare(gpu, img, {.k = 256, .seed = seed, .max_iter = 5}));
        ASSERT_NO_FATAL_FAILURE(compare(gpu, img, {.k = 40, .init = KmeansInit::Random, .seed = seed, .max_iter = 30, .tol = 0}));
        ASSERT_NO_FATAL_FAILURE(
            compare(gpu, img, {.k = 40, .init = KmeansInit::Random, .seed = seed, .max_iter = 30, .empty = EmptyPolicy::Keep}));
        ASSERT_NO_FATAL_FAILURE(compare(gpu, img, {.k = 9, .seed = seed, .init_sample = 5000, .max_iter = 8, .n_init = 3}));
        KmeansOptions masked{.k = 12, .seed = seed, .max_iter = 10};
        masked.mask.assign(std::size_t(W) * H, 1);
        for (std::size_t p = 0; p < masked.mask.size(); p += 7) masked.mask[p] = 0;
        ASSERT_NO_FATAL_FAILURE(compare(gpu, img, masked, "every 7th pixel masked"));
        KmeansOptions palette{.k = 8, .init = KmeansInit::Explicit, .max_iter = 0};
        for (int j = 0; j < 8; ++j)
            for (int b = 0; b < 3; ++b) palette.init_centroids.push_back(j * 32 + b * 5);
        ASSERT_NO_FATAL_FAILURE(compare(gpu, img, palette, "apply a palette"));
    }
}

// Grey and two-band images qualify from 2^5 and 2^13 pixels (small enough for racecheck).
TEST(KmeansGpu, ColourPathGreyAndTwoBands) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    for (int m : {1, 2}) {
        const Cube img = testing::random_levels_cube(301, 157, m, DType::U8, seed + 3, 50, Layout::BIP);
        ASSERT_NO_FATAL_FAILURE(compare(gpu, img, {.k = 7, .seed = seed, .max_iter = 20}));
        ASSERT_NO_FATAL_FAILURE(compare(gpu, img, {.k = 30, .init = KmeansInit::Random, .seed = seed, .max_iter = 20}));
        ASSERT_NO_FATAL_FAILURE(compare(gpu, img, {.k = 5, .seed = seed, .max_iter = 10, .n_init = 2}));
    }
}

TEST(KmeansGpu, DefaultsAndLayouts) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    const Cube img = testing::random_cube(640, 480, 3, DType::U8, seed, 0, 255, Layout::BSQ);
    KmeansOptions o{.seed = seed, .max_iter = 10};  // k = 16, k-means++, init_sample 2^20
    for (Layout l : {Layout::BSQ, Layout::BIL, Layout::BIP}) {
        const Cube x = img.to_layout(l);
        const KmeansResult g = kmeans(gpu, x, o);
        EXPECT_TRUE(same_result(kmeans(cpu_context(), img, o), g)) << layout_name(l);
    }
    o.paint = false;
    o.history = false;
    ASSERT_NO_FATAL_FAILURE(compare(gpu, img, o, "no paint, no history"));
}

// Real photos: every RGB image of shared/data/rgb.
TEST(KmeansGpu, RgbImagesMatchCpu) {
    REQUIRE_GPU();
    const auto dir = testing::shared_data_path("rgb");
    if (!dir) GTEST_SKIP() << "shared/data/rgb absent";
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(*dir)) {
        const std::string ext = e.path().extension().string();
        if (ext == ".png" || ext == ".jpg" || ext == ".jpeg") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    ASSERT_FALSE(files.empty());
    for (const auto& f : files) {
        SCOPED_TRACE(f.filename().string());
        const Cube photo = read_cube(f);
        for (int k : {16, 64}) ASSERT_NO_FATAL_FAILURE(compare(gpu, photo, {.k = k, .seed = 7, .max_iter = 10}));
    }
    RecordProperty("images_compared", int(files.size()));
}

// Hyperspectral scenes, k = 9 (spectral classes), 20 iterations.
TEST(KmeansGpu, HyperspectralScenesMatchCpu) {
    REQUIRE_GPU();
    struct Scene { std::string path, var; };
    const Scene scenes[] = {{"envi/jasper_ridge/jasperRidge2_R198.hdr", ""},
                            {"envi/samson/samson_1.img.hdr", ""},
                            {"target_detection/Sandiego.mat", "data"},
                            {"target_detection/HYDICE.mat", "data"}};
    int compared = 0;
    for (const Scene& s : scenes) {
        const auto p = testing::shared_data_path(s.path);
        if (!p) {
            std::cerr << "note: " << s.path << " absent (see shared/data/README.md)\n";
            continue;
        }
        SCOPED_TRACE(s.path);
        const Cube scene = read_cube(*p, {.var = s.var});
        ASSERT_NO_FATAL_FAILURE(compare(gpu, scene, {.k = 9, .seed = 3, .max_iter = 20}));
        ASSERT_NO_FATAL_FAILURE(compare(gpu, scene, {.k = 9, .init = KmeansInit::BoxDiagonal, .max_iter = 20}));
        ++compared;
    }
    if (compared == 0) GTEST_SKIP() << "no hyperspectral scene in shared/data";
    RecordProperty("scenes_compared", compared);
}

}  // namespace
}  // namespace cubekit
