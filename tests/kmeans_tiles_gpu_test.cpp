// k-means in tiles on CUDA (issue 17): every pass of the engine over tiles streamed through one or
// several devices gives the CPU whole-scene result bit for bit (labels, counts, centroids, palette,
// quantized image, iterations), the inertia within 1e-9 relative (the CUDA passes sum their f64
// partials per block, the CPU per 4096-pixel chunk: the contract between backends). Every element
// type, initialisation and empty-cluster policy, masks, NaN pixels, many bands, tile sizes down to a
// few pixels, a real scene from a file under a device budget. Skips without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "cubekit/io.hpp"
#include "cubekit/kmeans.hpp"
#include "cubekit/quantize_image.hpp"
#include "kmeans_test_helpers.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using kmeans_test::same_bits;
using testing::cpu_context;
using testing::cubes_identical;

bool near(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b)); }

void expect_tiled_equals(const KmeansResult& whole, const KmeansTiled& t, const Cube& labels, const Cube& quantized) {
    const KmeansResult& r = t.result;
    ASSERT_EQ(whole.labels.size(), labels.num_elements());
    EXPECT_EQ(0, std::memcmp(whole.labels.data(), labels.data<std::int32_t>(), labels.num_bytes())) << "labels differ";
    EXPECT_EQ(whole.counts, r.counts);
    ASSERT_EQ(whole.centroids.size(), r.centroids.size());
    for (std::size_t i = 0; i < r.centroids.size(); ++i) ASSERT_TRUE(same_bits(whole.centroids[i], r.centroids[i])) << i;
    for (std::size_t i = 0; i < r.palette.size(); ++i) ASSERT_TRUE(same_bits(whole.palette[i], r.palette[i])) << i;
    if (!quantized.empty()) {
        EXPECT_TRUE(cubes_identical(whole.quantized, quantized));
    }
    EXPECT_EQ(whole.iterations, r.iterations);
    EXPECT_EQ(whole.converged, r.converged);
    EXPECT_EQ(whole.k_effective, r.k_effective);
    EXPECT_EQ(whole.winner, r.winner);
    EXPECT_TRUE(near(whole.inertia, r.inertia)) << whole.inertia << " vs " << r.inertia;
    ASSERT_EQ(whole.history.size(), r.history.size());
    for (std::size_t i = 0; i < r.history.size(); ++i) EXPECT_TRUE(near(whole.history[i], r.history[i])) << i;
}

TEST(KmeansGpu, TiledEqualsCpuWhole) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const std::vector<int> devices = testing::devices_twice_or_all();
    struct Case {
        DType t;
        int m;
        KmeansOptions o;
    };
    std::vector<Case> cases = {
        {DType::U8, 3, {.k = 6, .seed = seed, .init_sample = 900, .max_iter = 30}},
        {DType::I16, 9, {.k = 7, .init = KmeansInit::Random, .seed = seed, .init_sample = 500, .max_iter = 25, .n_init = 2}},
        {DType::F32, 5, {.k = 5, .seed = seed, .init_sample = 0, .max_iter = 40, .empty = EmptyPolicy::Keep}},
        {DType::F64, 4, {.k = 4, .init = KmeansInit::BoxDiagonal, .max_iter = 30, .tol = 0}},
        {DType::U16, 2, {.k = 6, .seed = seed, .max_iter = 20}},
    };
    // Three equal explicit centroids: two clusters empty at once and are relocated.
    KmeansOptions e{.k = 5, .init = KmeansInit::Explicit, .max_iter = 15};
    for (int j = 0; j < 5; ++j)
        for (int b = 0; b < 3; ++b) e.init_centroids.push_back(j < 3 ? 3.0 : 2.0 * j + b);
    cases.push_back({DType::U32, 3, e});
    int i = 0;
    for (Case& c : cases) {
        ++i;
        const int W = 97, H = 61;
        Cube image = testing::random_levels_cube(W, H, c.m, c.t, seed + std::uint64_t(i), 9, Layout::BIL);
        if (c.t == DType::F32) image.set_value(5, 7, 1, std::numeric_limits<double>::quiet_NaN());
        c.o.mask.assign(std::size_t(W) * H, 1);
        for (std::size_t p = 0; p < c.o.mask.size(); p += 13) c.o.mask[p] = 0;
        const KmeansResult whole = kmeans(cpu_context(), image, c.o);
        struct Run { int tw, th; std::vector<int> devices; };
        for (const Run& run : std::vector<Run>{{97, 8, {}}, {13, 11, {}}, {5, 3, {}}, {97, 5, devices}}) {
            SCOPED_TRACE(::testing::Message() << dtype_name(c.t) << " m " << c.m << " tiles " << run.tw << "x" << run.th
                                              << " devices " << run.devices.size());
            Cube labels(W, H, 1, DType::I32), quantized(W, H, c.m, c.t, Layout::BIP);
            std::memset(labels.bytes(), 0xAB, labels.num_bytes());
            const KmeansTiled t = kmeans_tiled(gpu, image, labels.mutable_view(), c.o,
                                               {.devices = run.devices, .tile_width = run.tw, .tile_height = run.th},
                                               quantized.mutable_view());
            EXPECT_GT(t.run.tiles, 1u);
            expect_tiled_equals(whole, t, labels, quantized);
        }
    }
}

// A small tiled run for the sanitizers (scripts/gpu-check): sampling, relocation of emptied
// clusters, a mask, NaN, 3 and 9 bands, tiles of a few pixels.
TEST(KmeansGpu, TiledSmallForSanitizers) {
    REQUIRE_GPU();
    KmeansOptions e{.k = 5, .init = KmeansInit::Explicit, .max_iter = 6};
    for (int j = 0; j < 5; ++j)
        for (int b = 0; b < 3; ++b) e.init_centroids.push_back(j < 3 ? 3.0 : 2.0 * j + b);
    const std::vector<std::pair<Cube, KmeansOptions>> cases = [&] {
        std::vector<std::pair<Cube, KmeansOptions>> c;
        c.emplace_back(testing::random_levels_cube(23, 17, 3, DType::U8, 3, 9, Layout::BIL), e);
        Cube f = testing::random_cube(19, 13, 9, DType::F32, 4, -5, 5, Layout::BSQ);
        f.set_value(2, 3, 4, std::numeric_limits<double>::quiet_NaN());
        KmeansOptions o{.k = 4, .seed = 2, .init_sample = 60, .max_iter = 8};
        o.mask.assign(19 * 13, 1);
        o.mask[7] = o.mask[40] = 0;
        c.emplace_back(std::move(f), o);
        return c;
    }();
    for (const auto& c : cases) {
        const Cube& image = c.first;
        const KmeansOptions& o = c.second;
        const KmeansResult whole = kmeans(cpu_context(), image, o);
        Cube labels(image.width(), image.height(), 1, DType::I32),
            quantized(image.width(), image.height(), image.bands(), image.dtype(), Layout::BIP);
        const KmeansTiled t = kmeans_tiled(gpu, image, labels.mutable_view(), o, {.tile_width = 7, .tile_height = 4},
                                           quantized.mutable_view());
        expect_tiled_equals(whole, t, labels, quantized);
    }
}

TEST(KmeansGpu, TiledRealSceneFromAFileUnderADeviceBudget) {
    REQUIRE_GPU();
    const auto path = testing::source_path("data/samson/samson_1.img");
    const Cube scene = read_cube(path);
    const KmeansOptions o{.k = 8, .seed = 5, .max_iter = 40};
    const KmeansResult whole = kmeans(cpu_context(), scene, o);
    Cube labels(scene.width(), scene.height(), 1, DType::I32);
    const KmeansTiled t = kmeans_tiled(gpu, CubeFile(path), labels.mutable_view(), o, {.device_memory_limit = 2 << 20});
    EXPECT_GT(t.run.tiles, 2u);
    expect_tiled_equals(whole, t, labels, Cube());
}

// cubekit quantize in tiles on the device (quantize_image_tiled): the CPU's whole-image painting,
// labels, palette and counts bit for bit (the inertia within 1e-9: f64 sums per tile on the device),
// for the real photo under a device budget and for a small RGBA image with alpha and a mask.
TEST(KmeansGpu, QuantizeTiledEqualsCpuWhole) {
    REQUIRE_GPU();
    const Cube photo = read_cube(testing::source_path("data/photos/chelsea.png"));
    Cube rgba = testing::random_levels_cube(37, 21, 4, DType::U8, 6, 11, Layout::BIP);
    std::vector<std::uint8_t> mask(37 * 21, 1);
    for (std::size_t p = 0; p < mask.size(); p += 5) mask[p] = 0;
    const std::vector<std::tuple<const Cube*, QuantizeImageOptions, TileOptions>> cases = {
        {&photo, {.kmeans = {.k = 16, .seed = 3, .max_iter = 20}}, {.device_memory_limit = 512 << 10}},
        {&rgba, {.kmeans = {.k = 6, .seed = 4, .init_sample = 300, .max_iter = 15, .mask = mask}, .alpha = true},
         {.lanes = 2, .tile_width = 9, .tile_height = 5}}};
    for (const auto& [image, o, tiles] : cases) {
        SCOPED_TRACE(image->shape().describe());
        Cube out(image->width(), image->height(), image->bands(), image->dtype(), Layout::BIP), whole_out = out.clone();
        Cube labels(image->width(), image->height(), 1, DType::I32), whole_labels = labels.clone();
        const QuantizedImage whole = quantize_image_into(cpu_context(), *image, whole_out.mutable_view(),
                                                         whole_labels.mutable_view(), o);
        const QuantizeTiled t = quantize_image_tiled(gpu, *image, out.mutable_view(), labels.mutable_view(), o, tiles);
        EXPECT_GT(t.run.tiles, 2u);
        EXPECT_TRUE(cubes_identical(whole_out, out));
        EXPECT_TRUE(cubes_identical(whole_labels, labels));
        EXPECT_EQ(whole.palette, t.q.palette);
        EXPECT_EQ(whole.counts, t.q.counts);
        EXPECT_EQ(whole.kmeans.iterations, t.q.kmeans.iterations);
        EXPECT_LE(std::fabs(whole.kmeans.inertia - t.q.kmeans.inertia), 1e-9 * whole.kmeans.inertia);
    }
}

// KmeansPieces with every piece's part computed on the device (cubekit.dask.kmeans with CuPy chunks):
// device pieces in BSQ and host pieces on a CUDA context, labels into device and host views; the CPU
// whole-scene result bit for bit (the inertia within 1e-9).
TEST(KmeansGpu, PiecesOnTheDeviceEqualCpuWhole) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const int W = 41, H = 29, m = 5;
    const Cube image = testing::random_levels_cube(W, H, m, DType::U16, seed, 9, Layout::BIP);
    KmeansOptions o{.k = 6, .seed = seed, .init_sample = 700, .max_iter = 20};
    o.mask.assign(std::size_t(W) * H, 1);
    for (std::size_t i = 0; i < o.mask.size(); i += 7) o.mask[i] = 0;
    struct Piece {
        int x0, y0, w, h;
        bool on_device;
    };
    std::vector<Piece> pieces;
    for (const auto& rows : {std::pair{0, 13}, std::pair{13, 16}})
        for (const auto& cols : {std::pair{0, 17}, std::pair{17, 24}})
            pieces.push_back({cols.first, rows.first, cols.second, rows.second, pieces.size() % 2 == 0});
    std::vector<DeviceCube> on_device;
    for (const Piece& p : pieces)
        on_device.push_back(DeviceCube::upload(gpu, Cube::from_view(image.view().window(p.x0, p.y0, p.w, p.h), Layout::BSQ)));
    const auto mask_of = [&](const Piece& p) {
        std::vector<std::uint8_t> cut;
        for (int y = p.y0; y < p.y0 + p.h; ++y)
            for (int x = p.x0; x < p.x0 + p.w; ++x) cut.push_back(o.mask[std::size_t(y) * W + x]);
        return cut;
    };
    const auto piece_view = [&](std::size_t i) {
        const Piece& p = pieces[i];
        return p.on_device ? on_device[i].view() : image.view().window(p.x0, p.y0, p.w, p.h);
    };
    KmeansPieces run(cpu_context(), W, H, m, DType::U16, o);
    while (auto request = run.next()) {
        std::vector<std::string> parts;
        for (std::size_t i = 0; i < pieces.size(); ++i)
            parts.push_back(kmeans_piece(gpu, piece_view(i), pieces[i].x0, pieces[i].y0, mask_of(pieces[i]), *request));
        run.feed(std::move(parts));
    }
    KmeansResult r = run.result();
    Cube labels(W, H, 1, DType::I32);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        const Piece& p = pieces[i];
        const MutableCubeView target = labels.mutable_view().window(p.x0, p.y0, p.w, p.h);
        if (p.on_device) {
            DeviceCube d(gpu, CubeShape{p.w, p.h, 1, DType::I32, Layout::BSQ});
            kmeans_piece_labels(gpu, piece_view(i), p.x0, p.y0, mask_of(p), run.labelling(), d.mutable_view());
            copy_cube(gpu, d.view(), target);
            gpu.synchronize();
        } else {
            kmeans_piece_labels(gpu, piece_view(i), p.x0, p.y0, mask_of(p), run.labelling(), target);
        }
    }
    KmeansOptions no_paint = o;
    no_paint.paint = false;
    const KmeansResult whole = kmeans(cpu_context(), image, no_paint);
    KmeansTiled t;
    t.result = std::move(r);
    expect_tiled_equals(whole, t, labels, Cube());
}

}  // namespace
}  // namespace cubekit
