// Core types: Cube layouts and conversions, band lists, element types, Context.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/error.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

TEST(Cube, OffsetsFollowEachLayout) {
    const CubeShape bsq{4, 3, 2, DType::U8, Layout::BSQ}, bil{4, 3, 2, DType::U8, Layout::BIL}, bip{4, 3, 2, DType::U8, Layout::BIP};
    // sample (x=1, y=2, b=1)
    EXPECT_EQ(bsq.offset(1, 2, 1), std::size_t((1 * 3 + 2) * 4 + 1));
    EXPECT_EQ(bil.offset(1, 2, 1), std::size_t((2 * 2 + 1) * 4 + 1));
    EXPECT_EQ(bip.offset(1, 2, 1), std::size_t((2 * 4 + 1) * 2 + 1));
}

TEST(Cube, LayoutConversionsRoundTripForEveryType) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (DType t : {DType::U8, DType::U16, DType::I16, DType::U32, DType::I32, DType::F32, DType::F64})
        for (Layout from : {Layout::BSQ, Layout::BIL, Layout::BIP}) {
            const Cube c = testing::random_cube(7, 5, 3, t, seed, 0, 200, from);
            for (Layout to : {Layout::BSQ, Layout::BIL, Layout::BIP}) {
                const Cube d = c.to_layout(to);
                ASSERT_EQ(d.layout(), to);
                for (int b = 0; b < 3; ++b)
                    for (int y = 0; y < 5; ++y)
                        for (int x = 0; x < 7; ++x) ASSERT_EQ(c.value(x, y, b), d.value(x, y, b));
                EXPECT_TRUE(testing::cubes_identical(c, d.to_layout(from)));
            }
        }
}

TEST(Cube, DtypeConversionRoundsAndSaturates) {
    Cube c(5, 1, 1, DType::F64);
    const double v[5] = {-3.5, 2.5, 300.7, std::nan(""), 254.49};
    for (int x = 0; x < 5; ++x) c.set_value(x, 0, 0, v[x]);
    const Cube u8 = c.to_dtype(DType::U8);
    EXPECT_EQ(u8.at<std::uint8_t>(0, 0, 0), 0);    // saturated
    EXPECT_EQ(u8.at<std::uint8_t>(1, 0, 0), 3);    // ties away from zero
    EXPECT_EQ(u8.at<std::uint8_t>(2, 0, 0), 255);  // saturated
    EXPECT_EQ(u8.at<std::uint8_t>(3, 0, 0), 0);    // NaN
    EXPECT_EQ(u8.at<std::uint8_t>(4, 0, 0), 254);
    const Cube i16 = c.to_dtype(DType::I16);
    EXPECT_EQ(i16.at<std::int16_t>(0, 0, 0), -4);
    Cube big(1, 1, 1, DType::I32);
    big.at<std::int32_t>(0, 0, 0) = -70000;
    EXPECT_EQ(big.to_dtype(DType::I16).at<std::int16_t>(0, 0, 0), std::numeric_limits<std::int16_t>::min());
    EXPECT_EQ(big.to_dtype(DType::F64).at<double>(0, 0, 0), -70000.0);
}

TEST(Cube, SelectBandsAndCropKeepMetadata) {
    Cube c = testing::random_cube(6, 4, 5, DType::I16, 3, -100, 100);
    c.metadata().wavelengths = {400, 500, 600, 700, 800};
    c.metadata().band_names = {"a", "b", "c", "d", "e"};
    c.metadata().map_info = "UTM, 1, 1";
    const Cube s = c.select_bands({4, 0, 2});
    ASSERT_EQ(s.bands(), 3);
    EXPECT_EQ(s.metadata().wavelengths, (std::vector<double>{800, 400, 600}));
    EXPECT_EQ(s.metadata().band_names, (std::vector<std::string>{"e", "a", "c"}));
    EXPECT_EQ(s.metadata().map_info, "UTM, 1, 1");
    EXPECT_EQ(s.value(3, 2, 0), c.value(3, 2, 4));
    const Cube k = c.crop(2, 1, 3, 2);
    ASSERT_EQ(k.width(), 3);
    ASSERT_EQ(k.height(), 2);
    EXPECT_EQ(k.value(0, 0, 1), c.value(2, 1, 1));
    EXPECT_EQ(k.value(2, 1, 4), c.value(4, 2, 4));
    EXPECT_THROW(c.crop(4, 0, 3, 1), InvalidInput);
    EXPECT_THROW(c.select_bands({5}), InvalidInput);
}

TEST(Cube, BandListParsing) {
    EXPECT_EQ(parse_band_list("0-3,7,5", 10), (std::vector<int>{0, 1, 2, 3, 7, 5}));
    EXPECT_EQ(parse_band_list("9", 10), (std::vector<int>{9}));
    for (const char* bad : {"10", "a", "3-1", "", "1,,2", "-1", "0-"}) {
        try {
            parse_band_list(bad, 10, "--bands");
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const InvalidInput& e) {
            EXPECT_NE(std::string(e.what()).find("--bands"), std::string::npos) << e.what();
        }
    }
}

TEST(Cube, TypedAccessChecksTheType) {
    Cube c(2, 2, 1, DType::U16);
    EXPECT_THROW(c.data<float>(), InvalidInput);
    EXPECT_NO_THROW(c.data<std::uint16_t>());
}

TEST(DType, NamesRoundTrip) {
    for (DType t : {DType::U8, DType::U16, DType::I16, DType::U32, DType::I32, DType::F32, DType::F64})
        EXPECT_EQ(parse_dtype(dtype_name(t)), t);
    EXPECT_EQ(parse_dtype("float32"), DType::F32);
    EXPECT_THROW(parse_dtype("c64", "--out-type"), InvalidInput);
}

TEST(Context, CpuBackendAndCancellation) {
    std::atomic<bool> cancel{false};
    Context ctx({.backend = Backend::Cpu, .threads = 3, .cancel = &cancel});
    EXPECT_FALSE(ctx.is_cuda());
    EXPECT_EQ(ctx.threads(), 3);
    EXPECT_NO_THROW(ctx.check_cancelled("test"));
    cancel = true;
    EXPECT_THROW(ctx.check_cancelled("test"), Cancelled);
    EXPECT_THROW(Context({.threads = -1}), InvalidInput);
}

TEST(Context, CudaNeverFallsBackToCpu) {
    if (Context::cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device exists; covered by the GPU tests";
    EXPECT_THROW(Context({.backend = Backend::Cuda}), DeviceError);
    EXPECT_THROW(Context({.device = 7}), DeviceError);  // naming a device requires it
    Context automatic(ContextOptions{});
    EXPECT_FALSE(automatic.is_cuda());
}

}  // namespace
}  // namespace cubekit
