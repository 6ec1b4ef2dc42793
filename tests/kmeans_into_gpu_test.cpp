// k-means' device-resident call (issue 12, item 2) against the CPU reference: kmeans_into() on
// device images — dense BIP, a window, a BSQ cube — with poisoned device outputs (dense and
// strided), masks and NaN; the device first pass against the host one; no copy of a dense BIP
// device image. Every test skips (and says so) where no CUDA device exists; scripts/gpu-check
// runs them on the H100 (suite KmeansGpu, as its filter names it). What must be identical:
// kmeans_gpu_test_helpers.hpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cubekit/buffer.hpp"
#include "cubekit/kmeans.hpp"
#include "kmeans/kmeans_internal.hpp"
#include "kmeans_gpu_test_helpers.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using namespace kmeans_test;

constexpr unsigned char kLabelPoison = 0x5A;  // 0x5A5A5A5A: no label (−1 included) looks like it
constexpr unsigned char kPaintPoison = 0xA5;

// kmeans_into() on the device with poisoned dense outputs, downloaded into a result shaped like
// kmeans()'s (labels and painted image filled in).
KmeansResult gpu_into(const Context& gpu, const CubeView& d_image, const KmeansOptions& o) {
    const int W = d_image.width(), H = d_image.height();
    DeviceCube labels(gpu, CubeShape{W, H, 1, DType::I32, Layout::BSQ});
    labels.buffer().fill_bytes(gpu, kLabelPoison);
    DeviceCube painted;
    if (o.paint) {
        painted = DeviceCube(gpu, CubeShape{W, H, d_image.bands(), d_image.dtype(), Layout::BIP});
        painted.buffer().fill_bytes(gpu, kPaintPoison);
    }
    KmeansResult r = kmeans_into(gpu, d_image, labels, o, o.paint ? painted.mutable_view() : MutableCubeView());
    EXPECT_TRUE(r.labels.empty());
    EXPECT_TRUE(r.quantized.empty());
    r.labels.resize(std::size_t(W) * std::size_t(H));
    labels.buffer().download(gpu, r.labels.data(), r.labels.size() * sizeof(std::int32_t));
    if (o.paint) r.quantized = painted.download(gpu);
    return r;
}

// The CPU reference on `host` against kmeans_into on `device` (the same samples).
void compare_into(const Context& gpu, const CubeView& host, const CubeView& device, const KmeansOptions& o,
                  const std::string& note) {
    SCOPED_TRACE(host.describe() + " / " + device.describe() + " k=" + std::to_string(o.k) + " init=" +
                 std::string(kmeans_init_name(o.init)) + " seed=" + std::to_string(o.seed) + (o.mask.empty() ? "" : " masked") +
                 " (" + note + ")");
    const KmeansResult cpu = kmeans(cpu_context(), host, o);
    const KmeansResult gpu_result = gpu_into(gpu, device, o);
    EXPECT_TRUE(same_result(cpu, gpu_result));
}

struct Size {
    int w, h;
};

TEST(KmeansGpu, IntoPoisonedDeviceOutputsMatchCpu) {
    REQUIRE_GPU();
    const Size sizes[] = {{1, 1}, {1, 300}, {300, 1}, {997, 13}, {61, 67}};
    for (DType t : kTypes)
        for (int m : {1, 3, 103})
            for (const Size& s : sizes) {
                const std::uint64_t seed = testing::test_seed();
                const auto [lo, hi] = data_range(t);
                const Cube img = testing::random_cube(s.w, s.h, m, t, seed, lo, hi, Layout::BIP);
                const DeviceCube d_img = DeviceCube::upload(gpu, img);
                for (int k : {1, 4, 13})
                    for (KmeansInit init : {KmeansInit::KmeansPlusPlus, KmeansInit::Random}) {
                        if (k > s.w * s.h) continue;
                        const KmeansOptions o{.k = k, .init = init, .seed = seed, .init_sample = 2000, .max_iter = 8};
                        ASSERT_NO_FATAL_FAILURE(compare_into(gpu, img, d_img, o, "dense BIP"));
                    }
            }
}

TEST(KmeansGpu, IntoMaskedAndNaNPixels) {
    REQUIRE_GPU();
    for (DType t : {DType::U8, DType::I32, DType::F32, DType::F64}) {
        const std::uint64_t seed = testing::test_seed();
        const auto [img, mask] = masked_image(333, 77, 4, t, seed);
        const DeviceCube d_img = DeviceCube::upload(gpu, img);
        for (KmeansInit init : {KmeansInit::KmeansPlusPlus, KmeansInit::Random, KmeansInit::BoxDiagonal}) {
            KmeansOptions o{.k = 11, .init = init, .seed = seed, .init_sample = 4000, .max_iter = 10, .mask = mask};
            ASSERT_NO_FATAL_FAILURE(compare_into(gpu, img, d_img, o, "mask"));
            o.mask.clear();
            ASSERT_NO_FATAL_FAILURE(compare_into(gpu, img, d_img, o, "NaN only"));
        }
        // Only k pixels left: every one its own cluster; relocation with zero distances.
        std::vector<std::uint8_t> few(mask.size(), 0);
        for (std::size_t p = 5; p < few.size(); p += few.size() / 7) few[p] = 1;
        const int kept = int(std::count(few.begin(), few.end(), 1));
        if (!dtype_is_float(t)) {
            ASSERT_NO_FATAL_FAILURE(compare_into(gpu, img, d_img, {.k = kept, .seed = seed, .max_iter = 5, .mask = few}, "k pixels"));
        }
    }
}

TEST(KmeansGpu, IntoWindowOfADeviceImage) {
    REQUIRE_GPU();
    for (DType t : {DType::U8, DType::U16, DType::F32}) {
        const std::uint64_t seed = testing::test_seed();
        const auto [lo, hi] = data_range(t);
        for (int m : {3, 5}) {
            const Cube big = testing::random_cube(211, 97, m, t, seed, lo, hi, Layout::BIP);
            const DeviceCube d_big = DeviceCube::upload(gpu, big);
            const CubeView host = big.view().window(13, 7, 150, 61), device = d_big.view().window(13, 7, 150, 61);
            std::vector<std::uint8_t> mask(150 * 61, 1);
            for (std::size_t p = 0; p < mask.size(); p += 3) mask[p] = 0;
            ASSERT_NO_FATAL_FAILURE(compare_into(gpu, host, device, {.k = 9, .seed = seed, .max_iter = 12}, "window"));
            ASSERT_NO_FATAL_FAILURE(
                compare_into(gpu, host, device, {.k = 9, .seed = seed, .max_iter = 12, .mask = mask}, "masked window"));
        }
    }
}

TEST(KmeansGpu, IntoBsqAndBilDeviceCubes) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    for (Layout layout : {Layout::BSQ, Layout::BIL}) {
        const Cube rgb = testing::random_cube(640, 480, 3, DType::U8, seed, 0, 255, layout);
        ASSERT_NO_FATAL_FAILURE(compare_into(gpu, rgb, DeviceCube::upload(gpu, rgb), {.k = 16, .seed = seed, .max_iter = 10},
                                             std::string(layout_name(layout))));
        const Cube hs = testing::random_cube(97, 41, 103, DType::I16, seed + 1, 0, 10000, layout);
        ASSERT_NO_FATAL_FAILURE(compare_into(gpu, hs, DeviceCube::upload(gpu, hs), {.k = 9, .seed = seed, .max_iter = 5},
                                             std::string(layout_name(layout))));
    }
}

// Labels into one band of a device i32 BIP cube (x stride 3), the painted image into a device BSQ
// cube: every pixel written, nothing beside it.
TEST(KmeansGpu, IntoStridedDeviceOutputs) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    for (bool masked : {false, true}) {
        SCOPED_TRACE("seed=" + std::to_string(seed) + (masked ? " masked" : ""));
        const Cube img = testing::random_cube(123, 45, 3, DType::F32, seed, -5, 5, Layout::BIP);
        KmeansOptions o{.k = 7, .seed = seed, .max_iter = 10};
        if (masked) {
            o.mask.assign(123 * 45, 1);
            for (std::size_t p = 0; p < o.mask.size(); p += 4) o.mask[p] = 0;
        }
        const KmeansResult cpu = kmeans(cpu_context(), img, o);
        DeviceCube planes(gpu, CubeShape{123, 45, 3, DType::I32, Layout::BIP});
        DeviceCube painted(gpu, CubeShape{123, 45, 3, DType::F32, Layout::BSQ});
        planes.buffer().fill_bytes(gpu, kLabelPoison);
        painted.buffer().fill_bytes(gpu, kPaintPoison);
        const KmeansResult r = kmeans_into(gpu, DeviceCube::upload(gpu, img), planes.mutable_view().band_range(2, 1), o, painted);
        EXPECT_EQ(r.centroids, cpu.centroids);
        EXPECT_EQ(r.counts, cpu.counts);
        const Cube h_planes = planes.download(gpu);
        for (int y = 0; y < 45; ++y)
            for (int x = 0; x < 123; ++x) {
                ASSERT_EQ(h_planes.at<std::int32_t>(x, y, 2), cpu.labels[std::size_t(y) * 123 + x]) << x << "," << y;
                ASSERT_EQ(h_planes.at<std::int32_t>(x, y, 0), 0x5A5A5A5A) << "band 0 written at " << x << "," << y;
            }
        EXPECT_TRUE(testing::cubes_identical(cpu.quantized, painted.download(gpu).to_layout(Layout::BIP)));
    }
}

// A dense BIP image on the device is read where it is: the call allocates far less device memory
// than the image (k-sized scratch only, with explicit init and no excluded pixel) and no host buffer.
TEST(KmeansGpu, IntoDenseBipDeviceImageIsNotCopied) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    const Cube img = testing::random_cube(512, 512, 3, DType::U8, seed, 0, 255, Layout::BIP);
    const DeviceCube d_img = DeviceCube::upload(gpu, img);
    DeviceCube labels(gpu, CubeShape{512, 512, 1, DType::I32, Layout::BSQ});
    std::vector<double> init;
    for (int j = 0; j < 8; ++j)
        for (int b = 0; b < 3; ++b) init.push_back(img.value(j * 60, j * 60, b));
    const KmeansOptions o{.k = 8, .init = KmeansInit::Explicit, .max_iter = 5, .init_centroids = init};
    const MemoryCounters before = memory_counters();
    kmeans_into(gpu, d_img, labels, o);
    gpu.synchronize();
    const MemoryCounters after = memory_counters();
    EXPECT_LT(after.device_bytes - before.device_bytes, img.num_bytes() / 4);
    EXPECT_EQ(after.host_allocations, before.host_allocations);
}

TEST(KmeansGpu, IntoRejectsHostOutputsOnACudaContext) {
    REQUIRE_GPU();
    const Cube img = testing::random_cube(16, 9, 3, DType::U8, 1, 0, 255, Layout::BIP);
    Cube host_labels(16, 9, 1, DType::I32);
    try {
        kmeans_into(gpu, img, host_labels, {.k = 2});
        ADD_FAILURE() << "host labels accepted on a CUDA context";
    } catch (const InvalidInput& e) {
        EXPECT_NE(std::string(e.what()).find("labels"), std::string::npos) << e.what();
    }
}

// The device first pass (valid set, min/max, fixed point, tolerance) gives the host's plan bit
// for bit: every type, 1 to 1100 bands (past the shared-memory pre-reduction), masks and NaN.
TEST(KmeansGpu, DeviceFirstPassMatchesHost) {
    REQUIRE_GPU();
    for (DType t : kTypes)
        for (int m : {1, 3, 103, 1100})
            for (bool masked : {false, true}) {
                const std::uint64_t seed = testing::test_seed();
                SCOPED_TRACE(str(t) + " m=" + std::to_string(m) + (masked ? " masked" : "") + " seed=" + std::to_string(seed));
                std::mt19937_64 rng(seed);
                const int W = 71, H = 23;
                const auto [lo, hi] = data_range(t);
                Cube img = testing::random_cube(W, H, m, t, seed, lo, hi, Layout::BIP);
                if (dtype_is_float(t))
                    for (int i = 0; i < 40; ++i) img.set_value(int(rng() % W), int(rng() % H), int(rng() % m), NAN);
                KmeansOptions o{.k = 3, .tol = 1e-3};
                if (masked) {
                    o.mask.assign(std::size_t(W) * H, 1);
                    for (auto& v : o.mask) v = rng() % 5 != 0;
                }
                std::vector<std::int64_t> valid;
                const detail::KmeansPlan host = detail::prepare_kmeans(cpu_context(), img, o, valid);
                detail::DeviceValidSet d_valid;
                const detail::KmeansPlan dev = detail::prepare_kmeans_cuda(gpu, DeviceCube::upload(gpu, img), o, d_valid);
                EXPECT_EQ(dev.valid, host.valid);
                EXPECT_EQ(d_valid.valid, std::int64_t(valid.size()));
                EXPECT_EQ(dev.e, host.e);
                EXPECT_EQ(dev.e_d, host.e_d);
                EXPECT_TRUE(same_bits(dev.tol_abs, host.tol_abs)) << dev.tol_abs << " vs " << host.tol_abs;
                EXPECT_EQ(dev.lo, host.lo);
                EXPECT_EQ(dev.hi, host.hi);
                std::vector<std::int64_t> index(valid.size());
                if (d_valid.index.empty()) std::iota(index.begin(), index.end(), std::int64_t(0));
                else d_valid.index.download(gpu, index.data(), index.size() * sizeof(std::int64_t));
                EXPECT_EQ(index, valid);
                EXPECT_EQ(d_valid.flags.empty(), std::int64_t(valid.size()) == W * H);
            }
}

}  // namespace
}  // namespace cubekit
