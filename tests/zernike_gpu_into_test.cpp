// Zernike moments on the GPU through the device-resident calls and views (issue 12, items 1–2):
// zernike_*_into and zernike_reconstruct_into write into device outputs poisoned with 0xFF (NaN),
// so an unwritten value shows; inputs are random images of awkward sizes, a window of a device
// cube, a BIP device cube and one band of it, all read where they are. The moments are compared
// with the CPU reference within the tolerance of zernike_gpu_test_helpers.hpp; a view and the
// dense cube it shows run the same arithmetic on the device, so they must agree bit for bit, and
// the reconstruction (shared per-pixel code, no sums across pixels) must equal the CPU's bitwise.
#include <gtest/gtest.h>

#include <cstdint>
#include <complex>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "cubekit/buffer.hpp"
#include "cubekit/zernike.hpp"
#include "testing.hpp"
#include "zernike_gpu_test_helpers.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using namespace zernike_gpu_test;

DeviceCube poisoned(const Context& gpu, const CubeShape& shape) {
    DeviceCube d(gpu, shape);
    d.buffer().fill_bytes(gpu, 0xFF);
    return d;
}

// The moments of an _into call: the info and the output, brought to the host.
ZernikeMoments fetch(const Context& gpu, const ZernikeMomentsInfo& info, const CubeView& d_out) {
    ZernikeMoments m;
    static_cast<ZernikeMomentsInfo&>(m) = info;
    m.values.resize(info.count() * std::size_t(info.images));
    const CubeShape s = zernike_moments_shape(info.images, int(info.count()));
    copy_cube(gpu, d_out,
              MutableCubeView::host(m.values.data(), s.width, s.height, 2, DType::F64, dense_strides(s.width, s.height, 2, s.layout)));
    return m;
}

// The four _into calls with the request of their plain twin, into a poisoned dense output.
struct IntoCase {
    std::string name;
    std::vector<ZernikeIndex> wanted;
    std::function<ZernikeMomentsInfo(const Context&, const CubeView&, const MutableCubeView&)> into;
    ImageRun plain;
};

std::vector<IntoCase> into_cases(const ZernikeOptions& o) {
    const std::vector<ZernikeIndex> list = {{34, 18}, {0, 0}, {7, 3}, {20, 20}, {2, 0}};
    return {
        {"set 20", zernike_set_indices(20),
         [o](const Context& c, const CubeView& v, const MutableCubeView& out) { return zernike_set_into(c, v, 20, out, o); },
         [o](const Context& c, const Cube& i) { return zernike_set(c, i, 20, o); }},
        {"order 21", zernike_order_indices(21),
         [o](const Context& c, const CubeView& v, const MutableCubeView& out) { return zernike_order_into(c, v, 21, out, o); },
         [o](const Context& c, const Cube& i) { return zernike_order(c, i, 21, o); }},
        {"moment A(25,13)", {{25, 13}},
         [o](const Context& c, const CubeView& v, const MutableCubeView& out) { return zernike_moment_into(c, v, 25, 13, out, o); },
         [o](const Context& c, const Cube& i) { return zernike_moment(c, i, 25, 13, o); }},
        {"list", list,
         [o, list](const Context& c, const CubeView& v, const MutableCubeView& out) { return zernike_moments_into(c, v, list, out, o); },
         [o, list](const Context& c, const Cube& i) { return zernike_moments(c, i, list, o); }},
    };
}

// The _into result on `view` (device) with a poisoned output.
ZernikeMoments run_into(const Context& gpu, const IntoCase& k, const CubeView& view) {
    DeviceCube d_out = poisoned(gpu, zernike_moments_shape(view.bands(), int(k.wanted.size())));
    const ZernikeMomentsInfo info = k.into(gpu, view, d_out);
    EXPECT_EQ(info.indices, k.wanted);
    return fetch(gpu, info, d_out);
}

TEST(ZernikeGpuInto, PoisonedOutputsMatchTheCpuOnAwkwardSizes) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    struct Shape {
        int w, h, b;
    };
    std::vector<Shape> shapes = {{1, 1, 1}, {17, 5, 3}, {31, 9, 2}, {45, 44, 3}, {64, 64, 2}, {127, 130, 1}};
    if (sanitized()) shapes.resize(3);
    for (const Shape& s : shapes)
        for (bool sym : {true, false})
            for (ZernikePrecision p : {ZernikePrecision::Double, ZernikePrecision::Float}) {
                const Cube img = testing::random_cube(s.w, s.h, s.b, DType::F32, seed, -1.0, 1.0);
                const DeviceCube d_img = DeviceCube::upload(gpu, img);
                for (const IntoCase& k : into_cases(with(ZernikeMethod::Auto, sym, p))) {
                    SCOPED_TRACE(k.name + (sym ? " sym " : " plain ") + std::string(zernike_precision_name(p)) + " " +
                                 img.shape().describe());
                    const ZernikeMoments g = run_into(gpu, k, d_img);
                    EXPECT_TRUE(agree(k.plain(cpu_context(), img), g, img));
                    EXPECT_TRUE(identical(k.plain(gpu, img), g)) << "the plain call is the _into call";
                }
            }
}

// A window of a device BSQ cube is read where it is: bitwise the GPU result of the dense crop.
TEST(ZernikeGpuInto, WindowOfADeviceCube) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube whole = testing::random_cube(70, 61, 4, DType::U16, seed, 0, 4000);
    const DeviceCube d_whole = DeviceCube::upload(gpu, whole);
    struct Window {
        int x, y, w, h;
    };
    for (const Window& w : {Window{7, 5, 33, 33}, Window{0, 0, 70, 1}, Window{12, 9, 41, 38}, Window{69, 60, 1, 1}}) {
        const Cube crop = whole.crop(w.x, w.y, w.w, w.h);
        const DeviceCube d_crop = DeviceCube::upload(gpu, crop);
        const CubeView window = d_whole.view().window(w.x, w.y, w.w, w.h);
        for (const IntoCase& k : into_cases(ZernikeOptions{})) {
            SCOPED_TRACE(k.name + " window " + window.describe());
            const ZernikeMoments g = run_into(gpu, k, window);
            EXPECT_TRUE(identical(run_into(gpu, k, d_crop), g));
            EXPECT_TRUE(agree(k.plain(cpu_context(), crop), g, crop));
        }
    }
}

// A BIP device cube (strides: bands 1, x B) and one band of it are read where they are: bitwise
// the GPU result of the BSQ cube and of its band.
TEST(ZernikeGpuInto, BipDeviceCubeAndOneOfItsBands) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube bsq = testing::random_cube(53, 47, 5, DType::F64, seed, -2.0, 3.0);
    const DeviceCube d_bsq = DeviceCube::upload(gpu, bsq), d_bip = DeviceCube::upload(gpu, bsq.to_layout(Layout::BIP));
    for (bool sym : {true, false})
        for (const IntoCase& k : into_cases(with(ZernikeMethod::Auto, sym))) {
            SCOPED_TRACE(k.name + (sym ? " sym" : " plain"));
            EXPECT_TRUE(identical(run_into(gpu, k, d_bsq), run_into(gpu, k, d_bip))) << "BIP cube";
            const ZernikeMoments band = run_into(gpu, k, d_bip.view().band_range(3, 1));
            EXPECT_TRUE(identical(run_into(gpu, k, d_bsq.view().band_range(3, 1)), band)) << "band 3 of the BIP cube";
            EXPECT_TRUE(agree(k.plain(cpu_context(), bsq.select_bands({3})), band, bsq.select_bands({3})));
        }
}

// Outputs with any strides: a window of a larger poisoned output (the rest stays poisoned) and
// an output with the real and imaginary parts as two planes (BSQ).
TEST(ZernikeGpuInto, StridedOutputs) {
    REQUIRE_GPU();
    const Cube img = testing::random_cube(40, 40, 3, DType::F32, testing::test_seed(), 0.0, 1.0);
    const std::vector<ZernikeIndex> wanted = zernike_set_indices(12);
    const int M = int(wanted.size());
    DeviceCube dense = poisoned(gpu, zernike_moments_shape(3, M));
    const ZernikeMoments want = fetch(gpu, zernike_set_into(gpu, img, 12, dense), dense);

    DeviceCube big = poisoned(gpu, {M + 5, 3 + 4, 2, DType::F64, Layout::BIP});
    const MutableCubeView part = big.mutable_view().window(2, 3, M, 3);
    EXPECT_TRUE(identical(want, fetch(gpu, zernike_set_into(gpu, img, 12, part), part)));
    const Cube all = big.download(gpu);
    for (int y = 0; y < all.height(); ++y)
        for (int x = 0; x < all.width(); ++x)
            for (int c = 0; c < 2; ++c) {
                const bool inside = x >= 2 && x < 2 + M && y >= 3 && y < 6;
                std::uint64_t bits;
                std::memcpy(&bits, &all.at<double>(x, y, c), sizeof bits);
                EXPECT_EQ(inside, bits != ~std::uint64_t(0)) << "written (or poisoned) wrongly at (" << x << ", " << y
                                                             << ", " << c << ")";
            }

    DeviceCube planes = poisoned(gpu, {M, 3, 2, DType::F64, Layout::BSQ});
    EXPECT_TRUE(identical(want, fetch(gpu, zernike_set_into(gpu, img, 12, planes), planes)));
}

// zernike_reconstruct_into: every sample written (0 outside the disk), bitwise the CPU's, into a
// poisoned dense BSQ output and a BIP window of a larger one.
TEST(ZernikeGpuInto, ReconstructionIntoPoisonedOutputs) {
    REQUIRE_GPU();
    const Cube img = testing::random_cube(45, 38, 2, DType::F64, testing::test_seed(), 0.0, 1.0);
    const ZernikeMoments z = zernike_set(cpu_context(), img, 16);
    const Cube cpu = zernike_reconstruct(cpu_context(), z);
    DeviceCube dense = poisoned(gpu, cpu.shape());
    zernike_reconstruct_into(gpu, z, z.disk, dense);
    EXPECT_TRUE(testing::cubes_identical(cpu, dense.download(gpu)));
    DeviceCube big = poisoned(gpu, {50, 41, 2, DType::F64, Layout::BIP});
    const MutableCubeView part = big.mutable_view().window(3, 2, 45, 38);
    zernike_reconstruct_into(gpu, z, z.disk, part);
    Cube got(45, 38, 2, DType::F64);
    copy_cube(gpu, part, got);
    EXPECT_TRUE(testing::cubes_identical(cpu, got));
}

// A device input makes no host copy: no host buffer is allocated by the device-resident call.
TEST(ZernikeGpuInto, DeviceInputMakesNoHostCopy) {
    REQUIRE_GPU();
    const Cube img = testing::random_cube(256, 256, 4, DType::F32, testing::test_seed(), 0.0, 1.0);
    const DeviceCube d_img = DeviceCube::upload(gpu, img);
    DeviceCube d_out(gpu, zernike_moments_shape(4, int(zernike_set_size(20))));
    const MemoryCounters before = memory_counters();
    zernike_set_into(gpu, d_img.view().window(3, 3, 250, 250), 20, d_out);
    gpu.synchronize();
    const MemoryCounters after = memory_counters();
    EXPECT_EQ(after.host_allocations, before.host_allocations);
    EXPECT_EQ(after.pinned_allocations, before.pinned_allocations);
}

// In groups of images on the device (the zernike_*_tiled calls): every request gives the plain call's
// device moments bit for bit, for groups of 1 and 3 images, a device budget, the device listed twice
// (two workers each) and a stack read by a caller's reader; the CPU's within the spec tolerance is
// checked by the plain calls' own tests.
TEST(ZernikeGpuInto, GroupsOfImagesEqualThePlainCall) {
    REQUIRE_GPU();
    const Cube images = testing::random_cube(67, 61, 7, DType::U16, testing::test_seed(), 0, 4000, Layout::BIP);
    const ImageStack read_by_caller{67, 61, 7, DType::U16, [&](int first, int count, const MutableCubeView& dst) {
                                        copy_cube(cpu_context(), images.view().band_range(first, count), dst);
                                    }};
    const std::vector<ZernikeIndex> list = {{34, 18}, {0, 0}, {7, 3}};
    using Call = std::function<ZernikeTiled(const ImageStack&, const MutableCubeView&, const TileOptions&)>;
    const std::vector<std::tuple<std::string, Call, ZernikeMoments>> cases = {
        {"set 20", [&](auto& s, auto& o, auto& t) { return zernike_set_tiled(gpu, s, 20, o, {}, t); }, zernike_set(gpu, images, 20)},
        {"order 21", [&](auto& s, auto& o, auto& t) { return zernike_order_tiled(gpu, s, 21, o, {}, t); },
         zernike_order(gpu, images, 21)},
        {"moment A(25,13)", [&](auto& s, auto& o, auto& t) { return zernike_moment_tiled(gpu, s, 25, 13, o, {}, t); },
         zernike_moment(gpu, images, 25, 13)},
        {"list", [&](auto& s, auto& o, auto& t) { return zernike_moments_tiled(gpu, s, list, o, {}, t); },
         zernike_moments(gpu, images, list)}};
    for (const auto& [name, call, plain] : cases) {
        const CubeShape s = zernike_moments_shape(7, int(plain.count()));
        for (const TileOptions& t : {TileOptions{.tile_height = 1}, TileOptions{.lanes = 2, .tile_height = 3},
                                     TileOptions{.device_memory_limit = 600 << 10},
                                     TileOptions{.devices = testing::devices_twice_or_all(), .tile_height = 2}}) {
            SCOPED_TRACE(::testing::Message() << name << " group " << t.tile_height << " budget " << t.device_memory_limit
                                              << " devices " << t.devices.size());
            std::vector<std::complex<double>> got(plain.values.size(), {-1.0, 2.0});
            const MutableCubeView out = MutableCubeView::host(got.data(), s.width, s.height, 2, DType::F64,
                                                              dense_strides(s.width, s.height, 2, s.layout));
            const ZernikeTiled r = call(t.lanes == 2 ? read_by_caller : image_stack(images), out, t);
            EXPECT_GT(r.run.tiles, 1u);
            EXPECT_EQ(r.info.method, plain.method);
            EXPECT_EQ(0, std::memcmp(got.data(), plain.values.data(), got.size() * sizeof(got[0])));
        }
    }
}

}  // namespace
}  // namespace cubekit
