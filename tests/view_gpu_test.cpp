// Views on the device: copies between host and device views of any strides, borrowed device
// memory, a caller's stream, pinned buffers, and RCMG reading a device window and a device BIP
// cube with the same result as the CPU reference. Skips without a CUDA device (scripts/gpu-check).
#include <gtest/gtest.h>
#ifdef CUBEKIT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <cstdint>
#include <cstring>
#include <thread>
#include <algorithm>
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

// Poisoned device cube (0xFF bytes: NaN for floats, max for integers).
DeviceCube poisoned(const Context& gpu, const CubeShape& shape) {
    DeviceCube d(gpu, shape);
    d.buffer().fill_bytes(gpu, 0xFF);
    return d;
}

TEST(ViewGpu, HostDeviceCopiesBetweenAnyStrides) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (DType t : {DType::U8, DType::I16, DType::F32, DType::F64})
        for (Layout from : kLayouts) {
            const Cube src = testing::random_cube(19, 13, 5, t, seed, 0, 100, from);
            const Cube expected = src.crop(3, 2, 11, 9);
            for (Layout to : kLayouts) {
                SCOPED_TRACE(std::string(dtype_name(t)) + " " + std::string(layout_name(from)) + " -> " +
                             std::string(layout_name(to)));
                // host window → dense device → host
                DeviceCube d = poisoned(gpu, CubeShape{11, 9, 5, t, to});
                copy_cube(gpu, src.view().window(3, 2, 11, 9), d);
                EXPECT_TRUE(cubes_identical(d.download(gpu), expected.to_layout(to)));
                // device window → host window of a larger cube (pitched on both sides)
                const DeviceCube whole = DeviceCube::from_view(gpu, src, from);
                Cube back(21, 15, 5, t, to);
                copy_cube(gpu, whole.view().window(3, 2, 11, 9), back.mutable_view().window(1, 1, 11, 9));
                EXPECT_TRUE(cubes_identical(back.crop(1, 1, 11, 9), expected.to_layout(to)));
                // device → device, reordered
                DeviceCube reordered = poisoned(gpu, CubeShape{11, 9, 5, t, to});
                copy_cube(gpu, whole.view().window(3, 2, 11, 9), reordered);
                EXPECT_TRUE(cubes_identical(reordered.download(gpu), expected.to_layout(to)));
            }
        }
}

TEST(ViewGpu, StridesNoCopyEngineTakesAreGatheredOnTheHost) {
    REQUIRE_GPU();
    std::vector<float> image(5 * 4);
    for (std::size_t i = 0; i < image.size(); ++i) image[i] = float(i) + 0.5f;
    const CubeView flipped = CubeView::host(image.data() + 19, 5, 4, 1, DType::F32, {-1, -5, 1});
    const DeviceCube d = DeviceCube::from_view(gpu, flipped, Layout::BSQ);
    EXPECT_TRUE(cubes_identical(d.download(gpu), Cube::from_view(flipped, Layout::BSQ)));
}

#ifdef CUBEKIT_HAVE_CUDA  // the test itself calls the CUDA runtime
TEST(ViewGpu, BorrowedDeviceMemoryAndACallersStream) {
    REQUIRE_GPU();
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    {
        const Context ctx({.backend = Backend::Cuda, .device = gpu.device(), .stream = stream});
        EXPECT_EQ(ctx.cuda_stream(), static_cast<void*>(stream));
        void* raw = nullptr;
        ASSERT_EQ(cudaMalloc(&raw, 7 * 5 * 3 * sizeof(float)), cudaSuccess);
        const Cube host = testing::random_cube(7, 5, 3, DType::F32, 4, -1, 1, Layout::BSQ);
        const MemoryCounters before = memory_counters();
        DeviceCube borrowed = DeviceCube::borrow(
            MutableCubeView::device(raw, gpu.device(), 7, 5, 3, DType::F32, dense_strides(7, 5, 3, Layout::BSQ)));
        EXPECT_EQ(memory_counters().device_allocations, before.device_allocations);
        copy_cube(ctx, host, borrowed);
        EXPECT_TRUE(cubes_identical(borrowed.download(ctx), host));
        { DeviceCube gone = std::move(borrowed); }  // frees nothing: the caller's memory stays valid
        EXPECT_EQ(cudaFree(raw), cudaSuccess);
    }
    // The context did not destroy the caller's stream.
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}
#endif

TEST(ViewGpu, PinnedBufferAsyncRoundTrip) {
    REQUIRE_GPU();
    const std::size_t n = 1 << 20;
    PinnedBuffer in(n), out(n);
    for (std::size_t i = 0; i < n; ++i) in.data()[i] = std::byte(i * 7 % 251);
    DeviceBuffer d(gpu, n);
    d.upload_async(gpu, in.data(), n);
    d.download_async(gpu, out.data(), n);
    gpu.synchronize();
    EXPECT_EQ(std::memcmp(in.data(), out.data(), n), 0);
}

// Pageable uploads of 16 MiB and more go through the pinned ring (src/core/staged_copy.cpp): the bytes
// arrive intact for a size that is no multiple of the chunk, the source may be overwritten as soon as
// upload_async returns, contexts on other streams reuse the ring at once, and two threads uploading
// together (one takes the ring, the other the plain copy) both arrive intact.
TEST(ViewGpu, LargePageableUploadsThroughThePinnedRing) {
    REQUIRE_GPU();
    const std::size_t n = (std::size_t(41) << 20) + 12345;
    const auto pattern = [n](unsigned seed) {
        std::vector<std::uint8_t> v(n);
        for (std::size_t i = 0; i < n; ++i) v[i] = std::uint8_t((i * 2654435761u + seed) >> 13);
        return v;
    };
    const std::vector<std::uint8_t> a = pattern(1), b = pattern(2);
    std::vector<std::uint8_t> source = a, back(n);
    DeviceBuffer d(gpu, n);
    d.upload_async(gpu, source.data(), n);
    std::fill(source.begin(), source.end(), std::uint8_t(0xEE));  // the copy must not read it any more
    d.download(gpu, back.data(), n);
    EXPECT_TRUE(back == a);
    const Context other({.backend = Backend::Cuda});
    DeviceBuffer e(other, n);
    e.upload(other, b.data(), n);
    e.download(other, back.data(), n);
    EXPECT_TRUE(back == b);
    std::vector<std::uint8_t> back_a(n), back_b(n);
    std::thread t1([&] { d.upload(gpu, b.data(), n); });
    std::thread t2([&] { e.upload(other, a.data(), n); });
    t1.join();
    t2.join();
    d.download(gpu, back_b.data(), n);
    e.download(other, back_a.data(), n);
    EXPECT_TRUE(back_b == b);
    EXPECT_TRUE(back_a == a);
    // A cube through DeviceCube::upload (the families' front door) and back.
    Cube cube(610, 340, 103, DType::F32);
    for (std::size_t i = 0; i < cube.num_elements(); ++i) cube.data<float>()[i] = float(i % 9973) * 0.25f - 7.0f;
    EXPECT_TRUE(cubes_identical(cube, DeviceCube::upload(gpu, cube).download(gpu)));
}

// RCMG on a device window (read in place: no device allocation) and on a device BIP cube
// (reordered once on the device) equals the CPU reference bit for bit (both add the same squares
// in band order without contraction).
TEST(ViewGpu, RcmgReadsADeviceWindowInPlace) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube bsq = testing::random_cube(71, 53, 17, DType::F32, seed, -1, 1, Layout::BSQ);
    const DeviceCube d_bsq = DeviceCube::from_view(gpu, bsq, Layout::BSQ);
    for (RcmgPartition partition : {RcmgPartition::Auto, RcmgPartition::Spectral, RcmgPartition::Spatial})
        for (int connectivity : {4, 8}) {
            const RcmgOptions options{.connectivity = connectivity, .partition = partition};
            SCOPED_TRACE("connectivity " + std::to_string(connectivity) + " partition " +
                         std::to_string(int(partition)));
            const Cube expected = rcmg(cpu_context(), bsq.view().window(6, 5, 41, 33), options);
            DeviceCube d_out = poisoned(gpu, CubeShape{41, 33, 1, DType::F32, Layout::BSQ});
            const MemoryCounters before = memory_counters();
            rcmg_into(gpu, d_bsq.view().window(6, 5, 41, 33), d_out, options);
            gpu.synchronize();
            EXPECT_EQ(memory_counters().device_allocations, before.device_allocations);
            if (partition == RcmgPartition::Spatial) EXPECT_TRUE(testing::cubes_close(d_out.download(gpu), expected, 1e-12));
            else EXPECT_TRUE(cubes_identical(d_out.download(gpu), expected));
        }
}

TEST(ViewGpu, RcmgOfADeviceBipCubeAndIntoAStridedOutput) {
    REQUIRE_GPU();
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube bip = testing::random_cube(33, 31, 12, DType::U16, seed, 0, 4095, Layout::BIP);
    const Cube expected = rcmg(cpu_context(), bip);
    const DeviceCube d_bip = DeviceCube::from_view(gpu, bip, Layout::BIP);
    EXPECT_TRUE(cubes_identical(rcmg(gpu, d_bip), expected));
    // Output: band 2 of a 3-band device BIP cube (x stride 3): computed densely, then scattered.
    DeviceCube d_out = poisoned(gpu, CubeShape{33, 31, 3, DType::F32, Layout::BIP});
    rcmg_into(gpu, d_bip, d_out.mutable_view().band_range(2, 1));
    const Cube out = d_out.download(gpu);
    for (int y = 0; y < 31; ++y)
        for (int x = 0; x < 33; ++x) ASSERT_EQ(out.at<float>(x, y, 2), expected.at<float>(x, y, 0)) << x << "," << y;
    // A host output for a CUDA context is refused, naming the reason.
    Cube host_out(33, 31, 1, DType::F32);
    EXPECT_THROW(rcmg_into(gpu, d_bip, host_out), InvalidInput);
}

}  // namespace
}  // namespace cubekit
