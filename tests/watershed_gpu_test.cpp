// Watershed, CUDA backend against the CPU reference (spec gradient-watershed.md §B5: "CPU = GPU
// exactly (labels and R), also between synchronous, block-asynchronous ... schedules"). Built
// everywhere; every test skips (GTEST_SKIP, saying so) where no CUDA device exists; scripts/gpu-check
// runs them on the H100, and under compute-sanitizer on fewer and smaller cases (watershed_testing's
// quick()).
//
// Every case of tests/watershed_testing.hpp (the cases watershed_test.cpp checks the CPU on) runs
// with each schedule — Synchronous, BlockAsync, Auto — and must give labels identical to the CPU's,
// sample for sample, and the same R. Beyond them: the hand-computed answers, lines of thousands of
// pixels (descent and plateau paths across many tiles), repeated calls (a race shows as a difference),
// the device-resident call into a poisoned output, windows and BIP cubes on the device, device
// markers and masks, and the errors.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cubekit/error.hpp"
#include "cubekit/watershed.hpp"
#include "testing.hpp"
#include "watershed_testing.hpp"

namespace cubekit {
namespace {

using namespace watershed_testing;
using testing::cpu_context;
using testing::cubes_identical;

const WatershedSchedule kSchedules[] = {WatershedSchedule::Synchronous, WatershedSchedule::BlockAsync, WatershedSchedule::Auto};

std::string schedule_name(WatershedSchedule s) { return std::string(enum_name(s)); }

// The case on the CPU, then on the GPU with every schedule: identical labels, the same R.
void expect_gpu_equals_cpu(const Context& gpu, const Case& c, bool print_time = false) {
    SCOPED_TRACE(c.name);
    const WatershedResult ref = watershed(cpu_context(), c.height, c.options, c.inputs());
    for (WatershedSchedule s : kSchedules) {
        SCOPED_TRACE(schedule_name(s));
        WatershedOptions o = c.options;
        o.schedule = s;
        const auto t0 = std::chrono::steady_clock::now();
        const WatershedResult g = watershed(gpu, c.height, o, c.inputs());
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (print_time) std::cout << "  " << c.name << ", " << schedule_name(s) << ": " << ms << " ms (host relief, with copies)\n";
        EXPECT_EQ(g.regions, ref.regions);
        EXPECT_TRUE(cubes_identical(ref.labels, g.labels));
    }
}

void expect_family(const Context& gpu, const std::vector<Case>& cases, bool print_time = false) {
    for (const Case& c : cases) {
        expect_gpu_equals_cpu(gpu, c, print_time);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

#define SEEDED()                                           \
    const std::uint64_t seed = testing::test_seed();       \
    SCOPED_TRACE("seed " + std::to_string(seed))

TEST(WatershedGpu, RandomTiesU8EverySizeAndSchedule) {
    REQUIRE_GPU();
    SEEDED();
    expect_family(gpu, tie_cases(seed));
}

TEST(WatershedGpu, DistinctF32EverySizeAndSchedule) {
    REQUIRE_GPU();
    SEEDED();
    expect_family(gpu, distinct_cases(seed));
}

TEST(WatershedGpu, EveryElementType) {  // u8, u16, i16, u32, i32, f32, f64 (with −0.0)
    REQUIRE_GPU();
    SEEDED();
    expect_family(gpu, type_cases(seed));
}

TEST(WatershedGpu, TwoCones) {
    REQUIRE_GPU();
    expect_family(gpu, cone_cases());
}

TEST(WatershedGpu, LargePlateausStaircasesAndSerpentines) {  // 1000×700 staircases, 2000×1500 plateau
    REQUIRE_GPU();
    SEEDED();
    expect_family(gpu, plateau_cases(seed, true), true);
}

TEST(WatershedGpu, Markers) {
    REQUIRE_GPU();
    SEEDED();
    expect_family(gpu, marker_cases(seed));
}

TEST(WatershedGpu, Masks) {
    REQUIRE_GPU();
    SEEDED();
    expect_family(gpu, mask_cases(seed));
}

TEST(WatershedGpu, LevelsAndHMinima) {
    REQUIRE_GPU();
    SEEDED();
    expect_family(gpu, filter_cases(seed));
}

TEST(WatershedGpu, Volumes) {
    REQUIRE_GPU();
    SEEDED();
    expect_family(gpu, volume_cases(seed));
}

TEST(WatershedGpu, HandComputedAnswers) {
    REQUIRE_GPU();
    for (const HandCase& h : hand_cases()) {
        SCOPED_TRACE(h.c.name);
        for (WatershedSchedule s : kSchedules) {
            SCOPED_TRACE(schedule_name(s));
            WatershedOptions o = h.c.options;
            o.schedule = s;
            const WatershedResult w = watershed(gpu, h.c.height, o, h.c.inputs());
            EXPECT_EQ(w.regions, h.regions);
            const std::int32_t* l = w.labels.data<std::int32_t>();
            EXPECT_EQ(std::vector<std::int32_t>(l, l + w.labels.num_elements()), h.labels);
        }
    }
}

TEST(WatershedGpu, LongLinesOneByNAndNByOne) {
    // Descent and plateau paths thousands of pixels long along one axis, crossing many tiles.
    REQUIRE_GPU();
    SEEDED();
    const int n = quick() ? 700 : 5001;
    std::vector<Case> cases;
    for (int conn : {4, 8}) {
        const std::string c = " c" + std::to_string(conn);
        cases.push_back(make_case("ramp 1x" + std::to_string(n) + c, ramp({n, 1}, DType::U16), conn));
        Cube col(1, n, 1, DType::U16);  // a descending column: the minimum at the bottom
        for (int y = 0; y < n; ++y) col.at<std::uint16_t>(0, y, 0) = std::uint16_t(n - y);
        cases.push_back(make_case("descending column " + std::to_string(n) + "x1" + c, std::move(col), conn));
        Cube line = constant({n, 1}, DType::U8, 5);  // one plateau, minima at both ends
        line.at<std::uint8_t>(0, 0, 0) = 1;
        line.at<std::uint8_t>(n - 1, 0, 0) = 1;
        cases.push_back(make_case("plateau line" + c, std::move(line), conn));
        Cube tall = constant({1, n}, DType::F32, 5);  // one plateau, one pit at the top
        tall.at<float>(0, 0, 0) = 0;
        cases.push_back(make_case("plateau column" + c, std::move(tall), conn));
        cases.push_back(make_case("ties 1xN" + c, ties({n, 1}, seed + conn), conn));
        cases.push_back(make_case("ties Nx1" + c, ties({1, n}, seed + 10 + conn), conn));
        cases.push_back(make_case("markers on a line" + c, distinct_f32({n, 1}, seed + 20 + conn), conn,
                                  random_markers({n, 1}, seed + 30 + conn, 9, true)));
    }
    expect_family(gpu, cases);
}

TEST(WatershedGpu, RepeatedCallsGiveTheSameLabels) {
    // A race in a block-asynchronous schedule shows as a run-to-run difference.
    REQUIRE_GPU();
    SEEDED();
    const Size s = quick() ? Size{200, 150} : Size{1024, 768};
    std::vector<Case> cases;
    cases.push_back(make_case("huge plateau", huge_plateau(s, seed), 8));
    cases.push_back(make_case("u8 ties", ties(s, seed + 1), 4));
    cases.push_back(make_case("serpentine", serpentine({s.w / 4, s.h / 4}), 8));
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        const WatershedResult ref = watershed(cpu_context(), c.height, c.options);
        for (WatershedSchedule sch : kSchedules) {
            WatershedOptions o = c.options;
            o.schedule = sch;
            for (int k = 0; k < (quick() ? 2 : 5); ++k) {
                const WatershedResult g = watershed(gpu, c.height, o);
                ASSERT_EQ(g.regions, ref.regions) << schedule_name(sch) << " run " << k;
                ASSERT_TRUE(cubes_identical(ref.labels, g.labels)) << schedule_name(sch) << " run " << k;
            }
        }
    }
}

// ---- The device-resident call -------------------------------------------------------------------

// A device cube whose every byte is 0x7F (i32 0x7F7F7F7F), so that an element left unwritten shows.
DeviceCube poisoned(const Context& gpu, const CubeShape& shape) {
    DeviceCube d(gpu, shape);
    d.buffer().fill_bytes(gpu, 0x7F);
    return d;
}

TEST(WatershedGpu, DeviceResidentCallIntoAPoisonedOutput) {
    REQUIRE_GPU();
    SEEDED();
    std::vector<Case> cases;
    cases.push_back(make_case("u8 ties 129x67", ties({129, 67}, seed), 8));
    cases.push_back(make_case("f32 65x63 c4", distinct_f32({65, 63}, seed + 1), 4));
    cases.push_back(make_case("markers + mask 97x70", smooth({97, 70}, seed + 2, DType::U16, 800), 8,
                              random_markers({97, 70}, seed + 3, 20, true), random_mask({97, 70}, seed + 4)));
    cases.push_back(make_case("volume 33x31x6", ties({33, 31, 6}, seed + 5), 26));
    Case l = make_case("levels + h_min f64", smooth({80, 60}, seed + 6, DType::F64, 100), 8);
    l.options.levels = 20;
    l.options.h_min = 1;
    cases.push_back(std::move(l));
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        const WatershedResult ref = watershed(cpu_context(), c.height, c.options, c.inputs());
        const DeviceCube d_height = DeviceCube::upload(gpu, c.height);
        std::optional<DeviceCube> d_markers, d_mask;
        CubeView mv, kv;
        WatershedInputs in;
        if (c.markers) {
            d_markers = DeviceCube::upload(gpu, *c.markers);
            mv = d_markers->view();
            in.markers = &mv;
        }
        if (c.mask) {
            d_mask = DeviceCube::upload(gpu, *c.mask);
            kv = d_mask->view();
            in.mask = &kv;
        }
        for (WatershedSchedule s : kSchedules) {
            SCOPED_TRACE(schedule_name(s));
            WatershedOptions o = c.options;
            o.schedule = s;
            DeviceCube out = poisoned(gpu, {c.height.width(), c.height.height(), c.height.bands(), DType::I32, Layout::BSQ});
            const std::int64_t regions = watershed_into(gpu, d_height, out.mutable_view(), o, in);
            gpu.synchronize();
            EXPECT_EQ(regions, ref.regions);
            EXPECT_TRUE(cubes_identical(ref.labels, out.download(gpu)));
            // Device markers/mask with a host relief, and host markers/mask with a device relief.
            EXPECT_TRUE(cubes_identical(ref.labels, watershed(gpu, c.height, o, in).labels));
            EXPECT_TRUE(cubes_identical(ref.labels, watershed(gpu, d_height, o, c.inputs()).labels));
        }
    }
}

TEST(WatershedGpu, DeviceWindowsBipVolumesAndStridedOutputs) {
    REQUIRE_GPU();
    SEEDED();
    // A window of a larger device relief (strided input) into a window of a larger poisoned
    // device output (strided output): the labels of the cropped relief, the rest untouched.
    const Cube big = ties({150, 90}, seed);
    const Cube crop = big.crop(11, 7, 101, 67);
    const Cube big_markers = random_markers({150, 90}, seed + 1, 30, true), big_mask = random_mask({150, 90}, seed + 2);
    const Cube crop_markers = big_markers.crop(11, 7, 101, 67), crop_mask = big_mask.crop(11, 7, 101, 67);
    const DeviceCube d_big = DeviceCube::upload(gpu, big), d_big_markers = DeviceCube::upload(gpu, big_markers),
                     d_big_mask = DeviceCube::upload(gpu, big_mask);
    const CubeView win = d_big.view().window(11, 7, 101, 67), win_markers = d_big_markers.view().window(11, 7, 101, 67),
                   win_mask = d_big_mask.view().window(11, 7, 101, 67);
    const CubeView cm = crop_markers.view(), ck = crop_mask.view();
    for (int conn : {4, 8}) {
        WatershedOptions base;
        base.connectivity = conn;
        const WatershedResult ref = watershed(cpu_context(), crop, base);
        const WatershedResult ref_marked = watershed(cpu_context(), crop, base, {.markers = &cm, .mask = &ck});
        for (WatershedSchedule s : kSchedules) {
            SCOPED_TRACE("c" + std::to_string(conn) + " " + schedule_name(s));
            WatershedOptions o = base;
            o.schedule = s;
            DeviceCube out = poisoned(gpu, {120, 80, 1, DType::I32, Layout::BSQ});
            const std::int64_t regions = watershed_into(gpu, win, out.mutable_view().window(5, 9, 101, 67), o);
            gpu.synchronize();
            EXPECT_EQ(regions, ref.regions);
            const Cube host = out.download(gpu);
            EXPECT_TRUE(cubes_identical(ref.labels, Cube::from_view(host.view().window(5, 9, 101, 67), Layout::BSQ)));
            std::size_t untouched = 0;
            for (int y = 0; y < 80; ++y)
                for (int x = 0; x < 120; ++x)
                    if (!(x >= 5 && x < 106 && y >= 9 && y < 76)) untouched += host.at<std::int32_t>(x, y, 0) == 0x7F7F7F7F;
            EXPECT_EQ(untouched, 120u * 80u - 101u * 67u) << "samples outside the output window were written";
            // Windows of device markers and mask too.
            const WatershedResult w = watershed(gpu, win, o, {.markers = &win_markers, .mask = &win_mask});
            EXPECT_EQ(w.regions, ref_marked.regions);
            EXPECT_TRUE(cubes_identical(ref_marked.labels, w.labels));
        }
    }
    // A volume in BIP and BIL on the device (the relief's bands are z-slices), and into a band
    // range of a BIP i32 output.
    const Size vs{37, 29, 7};
    const Cube vol = ties(vs, seed + 3);
    WatershedOptions o;
    o.connectivity = 26;
    o.volume = true;
    const WatershedResult ref = watershed(cpu_context(), vol, o);
    for (Layout l : {Layout::BIP, Layout::BIL}) {
        SCOPED_TRACE(std::string(layout_name(l)));
        const DeviceCube d_vol = DeviceCube::from_view(gpu, vol, l);
        EXPECT_TRUE(cubes_identical(ref.labels, watershed(gpu, d_vol, o).labels));
        DeviceCube out = poisoned(gpu, {vs.w, vs.h, vs.d + 2, DType::I32, Layout::BIP});
        EXPECT_EQ(watershed_into(gpu, d_vol, out.mutable_view().band_range(1, vs.d), o), ref.regions);
        gpu.synchronize();
        const Cube host = out.download(gpu);
        EXPECT_TRUE(cubes_identical(ref.labels, Cube::from_view(host.view().band_range(1, vs.d), Layout::BSQ)));
        EXPECT_EQ(host.at<std::int32_t>(3, 4, 0), 0x7F7F7F7F);
        EXPECT_EQ(host.at<std::int32_t>(3, 4, vs.d + 1), 0x7F7F7F7F);
    }
    // One band of a BIP device cube (x stride = bands) as a 2-D relief.
    const Cube bip = ties({60, 40, 3}, seed + 4).to_layout(Layout::BIP);
    const DeviceCube d_bip = DeviceCube::upload(gpu, bip);
    const WatershedResult band_ref = watershed(cpu_context(), Cube::from_view(bip.view().band_range(2, 1), Layout::BSQ));
    EXPECT_TRUE(cubes_identical(band_ref.labels, watershed(gpu, d_bip.view().band_range(2, 1)).labels));
}

TEST(WatershedGpu, BoundaryAndLevelsOfDeviceLabels) {
    REQUIRE_GPU();
    SEEDED();
    const Cube h = smooth({90, 70}, seed, DType::F32, 50);
    const WatershedResult ref = watershed(cpu_context(), h);
    DeviceCube d_labels = poisoned(gpu, {90, 70, 1, DType::I32, Layout::BSQ});
    watershed_into(gpu, DeviceCube::upload(gpu, h), d_labels.mutable_view());
    gpu.synchronize();
    for (int conn : {4, 8})
        EXPECT_TRUE(cubes_identical(watershed_boundary(cpu_context(), ref.labels, conn), watershed_boundary(gpu, d_labels, conn)));
    EXPECT_TRUE(cubes_identical(quantize_levels(cpu_context(), h, 17), quantize_levels(gpu, DeviceCube::upload(gpu, h), 17)));
}

TEST(WatershedGpu, ErrorsAreTheCpusErrors) {
    REQUIRE_GPU();
    Cube f(5, 4, 1, DType::F32);
    f.at<float>(2, 1, 0) = std::nanf("");
    const DeviceCube d_f = DeviceCube::upload(gpu, f);
    for (WatershedSchedule s : kSchedules) {
        WatershedOptions o;
        o.schedule = s;
        for (const CubeView& v : {CubeView(f.view()), d_f.view()}) {
            const std::string m = invalid_input_message([&] { watershed(gpu, v, o); });
            EXPECT_NE(m.find("NaN"), std::string::npos) << m;
            EXPECT_NE(m.find("x 2"), std::string::npos) << m;
            EXPECT_NE(m.find("y 1"), std::string::npos) << m;
        }
    }
    // NaN outside the mask: the backends must agree (both refuse, or both ignore it: outside pixels
    // are "not part of the relief"). As first written the CPU refused every NaN while the CUDA
    // range/NaN scan skipped outside pixels.
    {
        Cube g = distinct_f32({9, 7}, 5);
        Cube mask = constant({9, 7}, DType::U8, 1);
        g.at<float>(3, 2, 0) = std::nanf("");
        mask.at<std::uint8_t>(3, 2, 0) = 0;
        const CubeView kv = mask.view();
        for (std::int64_t levels : {0, 6}) {
            WatershedOptions o;
            o.levels = levels;
            const std::string cpu_error = invalid_input_message([&] { watershed(cpu_context(), g, o, {.mask = &kv}); });
            const std::string gpu_error = invalid_input_message([&] { watershed(gpu, g, o, {.mask = &kv}); });
            const bool cpu_threw = cpu_error.find("NaN") != std::string::npos, gpu_threw = gpu_error.find("NaN") != std::string::npos;
            EXPECT_EQ(cpu_threw, gpu_threw) << "levels " << levels << "; CPU: " << cpu_error << "; GPU: " << gpu_error;
            if (!cpu_threw && !gpu_threw) {
                EXPECT_TRUE(cubes_identical(watershed(cpu_context(), g, o, {.mask = &kv}).labels, watershed(gpu, g, o, {.mask = &kv}).labels));
            }
        }
    }
    const Cube h = ties({6, 5}, 1);
    const DeviceCube d_h = DeviceCube::upload(gpu, h);
    const DeviceCube d_float_markers = DeviceCube::upload(gpu, Cube(6, 5, 1, DType::F32));
    const DeviceCube d_u16_mask = DeviceCube::upload(gpu, Cube(6, 5, 1, DType::U16));
    const CubeView fm = d_float_markers.view(), um = d_u16_mask.view();
    EXPECT_NE(invalid_input_message([&] { watershed(gpu, d_h, {}, {.markers = &fm}); }).find("markers"), std::string::npos);
    EXPECT_NE(invalid_input_message([&] { watershed(gpu, d_h, {}, {.mask = &um}); }).find("mask"), std::string::npos);
    // A host output with a CUDA context is refused (the labels go where the context computes).
    Cube host_labels(6, 5, 1, DType::I32);
    EXPECT_NE(invalid_input_message([&] { watershed_into(gpu, d_h, host_labels.mutable_view()); }).find("labels"), std::string::npos);
}


TEST(WatershedGpu, MinAreaMatchesCpu) {
    REQUIRE_GPU();
    SEEDED();
    // The merge runs on the host for both contexts (on a CUDA one after downloading the labels and
    // the relief): every min_area case (ties, levels, h-minima, masks, volumes) gives the CPU's labels
    // and R' with every schedule.
    expect_family(gpu, min_area_cases(seed));
    // The device-resident call: a window of a device relief and mask into a window of a poisoned
    // device output; the rest of the output untouched.
    const Cube big = smooth({150, 90}, seed + 5, DType::F32, 60), big_mask = random_mask({150, 90}, seed + 6);
    const Cube crop = big.crop(11, 7, 101, 67), crop_mask = big_mask.crop(11, 7, 101, 67);
    const DeviceCube d_big = DeviceCube::upload(gpu, big), d_big_mask = DeviceCube::upload(gpu, big_mask);
    const CubeView win = d_big.view().window(11, 7, 101, 67), win_mask = d_big_mask.view().window(11, 7, 101, 67);
    const CubeView ck = crop_mask.view();
    for (std::int64_t min_area : {3, 25}) {
        WatershedOptions o;
        o.min_area = min_area;
        o.levels = min_area == 3 ? 0 : 32;
        const WatershedResult ref = watershed(cpu_context(), crop, o, {.mask = &ck});
        SCOPED_TRACE("min_area " + std::to_string(min_area));
        DeviceCube out = poisoned(gpu, {120, 80, 1, DType::I32, Layout::BSQ});
        EXPECT_EQ(watershed_into(gpu, win, out.mutable_view().window(5, 9, 101, 67), o, {.mask = &win_mask}), ref.regions);
        gpu.synchronize();
        const Cube host = out.download(gpu);
        EXPECT_TRUE(cubes_identical(ref.labels, Cube::from_view(host.view().window(5, 9, 101, 67), Layout::BSQ)));
        std::size_t untouched = 0;
        for (int y = 0; y < 80; ++y)
            for (int x = 0; x < 120; ++x)
                if (!(x >= 5 && x < 106 && y >= 9 && y < 76)) untouched += host.at<std::int32_t>(x, y, 0) == 0x7F7F7F7F;
        EXPECT_EQ(untouched, 120u * 80u - 101u * 67u) << "samples outside the output window were written";
    }
    // Markers with min_area: the CPU's error.
    const Cube h = ties({6, 5}, 1), markers = constant({6, 5}, DType::I32, 1);
    const CubeView mv = markers.view();
    WatershedOptions o;
    o.min_area = 4;
    EXPECT_EQ(invalid_input_message([&] { watershed(gpu, h, o, {.markers = &mv}); }),
              invalid_input_message([&] { watershed(cpu_context(), h, o, {.markers = &mv}); }));
}

}  // namespace
}  // namespace cubekit
