// Zernike moments on views, CPU (issue 12, item 1): a window, a BIP cube and one band of it are
// read where they are and give bit for bit what the owned BSQ cube gives (the reference converts
// each sample to double where it loads it, whatever the strides); a dense BSQ input costs no host
// buffer; the _into calls write any strided host output; bad outputs are rejected naming `out`.
#include <gtest/gtest.h>

#include <complex>
#include <cstring>
#include <string>
#include <vector>

#include "cubekit/buffer.hpp"
#include "cubekit/error.hpp"
#include "cubekit/zernike.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;

::testing::AssertionResult same_moments(const ZernikeMoments& a, const ZernikeMoments& b) {
    if (a.indices != b.indices || a.values.size() != b.values.size() || a.images != b.images)
        return ::testing::AssertionFailure() << "shapes differ";
    for (std::size_t i = 0; i < a.values.size(); ++i)
        if (std::memcmp(&a.values[i], &b.values[i], sizeof(std::complex<double>)) != 0)
            return ::testing::AssertionFailure() << "value " << i << ": " << a.values[i] << " vs " << b.values[i];
    return ::testing::AssertionSuccess();
}

ZernikeOptions with(ZernikeMethod method, bool symmetry) {
    ZernikeOptions o;
    o.method = method;
    o.symmetry = symmetry;
    return o;
}

TEST(ZernikeViews, WindowBipAndOneBandGiveTheOwnedCubesResult) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Cube whole = testing::random_cube(41, 36, 4, DType::I16, seed, -500, 500);
    const Cube bip = whole.to_layout(Layout::BIP);
    for (ZernikeMethod m : {ZernikeMethod::Kintner, ZernikeMethod::QRecursive, ZernikeMethod::Direct})
        for (bool sym : {true, false}) {
            const ZernikeOptions o = with(m, sym);
            SCOPED_TRACE(std::string(zernike_method_name(m)) + (sym ? " sym" : " plain"));
            const Cube crop = whole.crop(6, 3, 29, 29);
            EXPECT_TRUE(same_moments(zernike_set(cpu_context(), crop, 14, o),
                                     zernike_set(cpu_context(), whole.view().window(6, 3, 29, 29), 14, o)))
                << "window";
            EXPECT_TRUE(same_moments(zernike_set(cpu_context(), whole, 14, o), zernike_set(cpu_context(), bip, 14, o)))
                << "BIP cube";
            EXPECT_TRUE(same_moments(zernike_order(cpu_context(), whole.select_bands({2}), 9, o),
                                     zernike_order(cpu_context(), bip.view().band_range(2, 1), 9, o)))
                << "band 2 of the BIP cube";
            EXPECT_TRUE(same_moments(zernike_set(cpu_context(), crop.to_layout(Layout::BIP), 14, o),
                                     zernike_set(cpu_context(), bip.view().window(6, 3, 29, 29), 14, o)))
                << "window of the BIP cube";
        }
}

// A dense BSQ host cube is read where it is: neither the plain call nor the _into call allocates
// a host buffer (the only allocations are the small std::vectors of sums and tables).
TEST(ZernikeViews, DenseBsqInputMakesNoHostCopy) {
    const Cube cube = testing::random_cube(96, 96, 3, DType::F32, testing::test_seed(), 0.0, 1.0);
    MemoryCounters before = memory_counters();
    const ZernikeMoments z = zernike_set(cpu_context(), cube, 10);
    EXPECT_EQ(memory_counters().host_allocations, before.host_allocations) << "zernike_set";
    Cube out(int(z.count()), 3, 2, DType::F64, Layout::BIP);
    before = memory_counters();
    zernike_set_into(cpu_context(), cube.view().window(0, 0, 96, 96), 10, out);
    EXPECT_EQ(memory_counters().host_allocations, before.host_allocations) << "zernike_set_into";
}

// The _into calls on the CPU write host outputs of any strides: the same values as the plain call.
TEST(ZernikeViews, IntoWritesAnyStridedHostOutput) {
    const Cube img = testing::random_cube(33, 30, 2, DType::F64, testing::test_seed(), 0.0, 1.0);
    const ZernikeMoments want = zernike_order(cpu_context(), img, 12);
    const int M = int(want.count());
    Cube planes(M, 2, 2, DType::F64, Layout::BSQ);  // real parts, then imaginary parts
    const ZernikeMomentsInfo info = zernike_order_into(cpu_context(), img, 12, planes);
    EXPECT_EQ(info.indices, want.indices);
    EXPECT_EQ(info.method, want.method);
    Cube big(M + 3, 5, 2, DType::F64, Layout::BIP);
    zernike_order_into(cpu_context(), img, 12, big.mutable_view().window(1, 2, M, 2));
    for (int i = 0; i < 2; ++i)
        for (int k = 0; k < M; ++k) {
            const std::complex<double> a = want.image(i)[k];
            EXPECT_EQ(planes.at<double>(k, i, 0), a.real());
            EXPECT_EQ(planes.at<double>(k, i, 1), a.imag());
            EXPECT_EQ(big.at<double>(k + 1, i + 2, 0), a.real());
            EXPECT_EQ(big.at<double>(k + 1, i + 2, 1), a.imag());
        }
    EXPECT_EQ(big.at<double>(0, 0, 0), 0.0);  // outside the window: untouched

    // Reconstruction into a BIP output equals the plain call's BSQ cube; the error reads views.
    const ZernikeMoments z = zernike_set(cpu_context(), img, 12);
    const Cube rebuilt = zernike_reconstruct(cpu_context(), z);
    Cube rebuilt_bip(33, 30, 2, DType::F64, Layout::BIP);
    for (int x = 0; x < 33; ++x) rebuilt_bip.at<double>(x, 0, 1) = 7.0;  // must be overwritten (0 outside the disk)
    zernike_reconstruct_into(cpu_context(), z, z.disk, rebuilt_bip);
    EXPECT_TRUE(testing::cubes_identical(rebuilt, rebuilt_bip.to_layout(Layout::BSQ)));
    EXPECT_EQ(zernike_reconstruction_error(img, rebuilt, z.disk),
              zernike_reconstruction_error(img.to_layout(Layout::BIP), rebuilt_bip, z.disk));
}

TEST(ZernikeViews, BadOutputsAreRejectedNamingOut) {
    const Cube img = testing::random_cube(16, 16, 2, DType::F32, 1, 0.0, 1.0);
    const int M = int(zernike_set_size(4));
    auto expect_out = [](auto&& call, const char* what) {
        try {
            call();
            ADD_FAILURE() << what << ": no exception";
        } catch (const InvalidInput& e) {
            EXPECT_NE(std::string(e.what()).find("out"), std::string::npos) << what << ": " << e.what();
        }
    };
    Cube wrong_count(M + 1, 2, 2, DType::F64, Layout::BIP), wrong_images(M, 3, 2, DType::F64, Layout::BIP);
    Cube wrong_type(M, 2, 2, DType::F32, Layout::BIP), one_part(M, 2, 1, DType::F64);
    expect_out([&] { zernike_set_into(cpu_context(), img, 4, wrong_count); }, "count");
    expect_out([&] { zernike_set_into(cpu_context(), img, 4, wrong_images); }, "images");
    expect_out([&] { zernike_set_into(cpu_context(), img, 4, wrong_type); }, "type");
    expect_out([&] { zernike_set_into(cpu_context(), img, 4, one_part); }, "re/im");
    Cube small_image(15, 16, 2, DType::F64);
    const ZernikeMoments z = zernike_set(cpu_context(), img, 4);
    expect_out([&] { zernike_reconstruct_into(cpu_context(), z, z.disk, small_image); }, "reconstruction size");
    // A device output on the CPU backend (never dereferenced: the check comes first).
    double dummy[2 * 9 * 2] = {};
    const MutableCubeView device_out = MutableCubeView::device(dummy, 0, M, 2, 2, DType::F64,
                                                               dense_strides(M, 2, 2, Layout::BIP));
    expect_out([&] { zernike_set_into(cpu_context(), img, 4, device_out); }, "device memory");
    EXPECT_EQ(M, 9);
}

}  // namespace
}  // namespace cubekit
