// Colour quantization in tiles (issue 17) on the CPU backend: quantize_image_tiled's painted image,
// labels, palette, centroids and counts equal quantize_image_into's bit for bit (the inertia within
// 1e-12 relative: f64 sums per tile) for u8 RGB, RGBA with alpha, u16 grey and f32 images, masks
// and tile sizes down to one pixel; a file read by windows under a memory budget; the runs that need
// the whole image are refused by name; `cubekit quantize` under a memory limit writes the same files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "cubekit/quantize_image.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;
using testing::cubes_identical;

struct QuantizeOutputs {
    Cube out, labels;
    QuantizedImage q;
};

// Poisoned outputs of the image's shape (BIP painted image, i32 labels).
QuantizeOutputs poisoned_outputs(const CubeShape& s) {
    QuantizeOutputs o{Cube(s.width, s.height, s.bands, s.dtype, Layout::BIP), Cube(s.width, s.height, 1, DType::I32), {}};
    std::memset(o.out.bytes(), 0xCD, o.out.num_bytes());
    std::memset(o.labels.bytes(), 0xAB, o.labels.num_bytes());
    return o;
}

QuantizeOutputs whole_run(const Cube& image, const QuantizeImageOptions& o) {
    QuantizeOutputs w = poisoned_outputs(image.shape());
    w.q = quantize_image_into(cpu_context(), image, w.out.mutable_view(), w.labels.mutable_view(), o);
    return w;
}

void expect_same(const QuantizeOutputs& whole, const QuantizeOutputs& tiled) {
    EXPECT_TRUE(cubes_identical(whole.out, tiled.out));
    EXPECT_TRUE(cubes_identical(whole.labels, tiled.labels));
    EXPECT_EQ(whole.q.palette, tiled.q.palette);
    EXPECT_EQ(whole.q.centroids, tiled.q.centroids);
    EXPECT_EQ(whole.q.counts, tiled.q.counts);
    EXPECT_EQ(whole.q.channels, tiled.q.channels);
    EXPECT_EQ(whole.q.kmeans.iterations, tiled.q.kmeans.iterations);
    EXPECT_EQ(whole.q.kmeans.k_effective, tiled.q.kmeans.k_effective);
    EXPECT_EQ(whole.q.kmeans.valid_pixels, tiled.q.kmeans.valid_pixels);
    const double a = whole.q.kmeans.inertia, b = tiled.q.kmeans.inertia;
    EXPECT_LE(std::fabs(a - b), 1e-12 * std::max(std::fabs(a), std::fabs(b))) << a << " vs " << b;
    EXPECT_TRUE(tiled.q.image.empty());
    EXPECT_TRUE(tiled.q.labels.empty());
}

TEST(QuantizeTiles, PlainFitEqualsTheWholeImage) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    struct Case {
        std::string name;
        Cube image;
        bool alpha;
    };
    std::vector<Case> cases;
    cases.push_back({"u8 rgb", testing::random_levels_cube(29, 19, 3, DType::U8, seed, 12, Layout::BIP), false});
    cases.push_back({"u8 rgba", testing::random_levels_cube(29, 19, 4, DType::U8, seed + 1, 9, Layout::BIP), true});
    cases.push_back({"u16 grey", testing::random_levels_cube(29, 19, 1, DType::U16, seed + 2, 40), false});
    cases.push_back({"f32 rgb", testing::random_cube(29, 19, 3, DType::F32, seed + 3, 0.0, 1.0, Layout::BSQ), false});
    std::vector<std::uint8_t> mask(29 * 19);
    for (std::size_t p = 0; p < mask.size(); ++p) mask[p] = (p * 5 + p / 29) % 7 != 0;
    int compared = 0;
    for (const Case& c : cases)
        for (bool masked : {false, true}) {
            QuantizeImageOptions o{.kmeans = {.k = 6, .seed = seed, .init_sample = 200, .max_iter = 25}, .alpha = c.alpha};
            if (masked) o.kmeans.mask = mask;
            const QuantizeOutputs whole = whole_run(c.image, o);
            for (auto [tw, th] : std::vector<std::pair<int, int>>{{1, 1}, {29, 2}, {6, 7}}) {
                SCOPED_TRACE(::testing::Message() << c.name << " mask " << masked << " tiles " << tw << "x" << th);
                QuantizeOutputs t = poisoned_outputs(c.image.shape());
                QuantizeTiled r = quantize_image_tiled(cpu_context(), c.image, t.out.mutable_view(),
                                                             t.labels.mutable_view(), o, {.tile_width = tw, .tile_height = th});
                t.q = std::move(r.q);
                EXPECT_GT(r.run.tiles, 1u);
                EXPECT_GE(r.passes, 4);
                expect_same(whole, t);
                ++compared;
            }
        }
    EXPECT_EQ(compared, 4 * 2 * 3);
}

TEST(QuantizeTiles, FileReadByWindowsUnderABudget) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const Cube image = testing::random_cube(150, 110, 3, DType::U8, seed, 0, 255, Layout::BIP);
    const auto path = testing::temp_dir("quantize_tiles") / "photo.npy";
    write_cube(image, path);
    const QuantizeImageOptions o{.kmeans = {.k = 16, .seed = seed, .max_iter = 15}};
    const QuantizeOutputs whole = whole_run(image, o);
    QuantizeOutputs t = poisoned_outputs(image.shape());
    QuantizeTiled r = quantize_image_tiled(cpu_context(), CubeFile(path), t.out.mutable_view(), t.labels.mutable_view(),
                                                 o, {.memory_limit = 96 << 10});
    t.q = std::move(r.q);
    EXPECT_GE(r.run.tiles, 4u);
    EXPECT_LE(r.run.peak_bytes, std::size_t(96) << 10);
    expect_same(whole, t);
}

TEST(QuantizeTiles, RunsThatNeedTheWholeImageAreRefusedByName) {
    const Cube image = testing::random_levels_cube(12, 9, 3, DType::U8, 4, 20, Layout::BIP);
    const auto refused = [&](const QuantizeImageOptions& o, const std::string& name) {
        QuantizeOutputs t = poisoned_outputs(image.shape());
        try {
            quantize_image_tiled(cpu_context(), image, t.out.mutable_view(), t.labels.mutable_view(), o, {.tile_width = 4, .tile_height = 4});
            ADD_FAILURE() << name << " accepted";
        } catch (const InvalidInput& e) {
            EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
        }
    };
    refused({.colorspace = Colorspace::Lab}, "colorspace = lab");
    refused({.dither = Dither::FloydSteinberg}, "dither");
    refused({.palette = {0, 0, 0, 255, 255, 255}}, "palette");
    refused({.kmeans = {.legacy = true}}, "legacy");
    const auto path = testing::temp_dir("quantize_tiles_bad") / "photo.npy";
    write_cube(image, path);
    QuantizeOutputs t = poisoned_outputs(image.shape());
    EXPECT_THROW(quantize_image_tiled(cpu_context(), CubeFile(path), t.out.mutable_view(), t.labels.mutable_view(),
                                      {.alpha = true}),
                 InvalidInput);
    Cube small(12, 8, 3, DType::U8);
    try {
        quantize_image_tiled(cpu_context(), image, small.mutable_view(), t.labels.mutable_view());
        ADD_FAILURE() << "a wrong out accepted";
    } catch (const InvalidInput& e) {
        EXPECT_NE(std::string(e.what()).find("out is"), std::string::npos) << e.what();
    }
}

// `cubekit quantize` in tiles writes the same image, indexed PNG and palette as the whole run; the
// refused combinations exit 2 naming the flag, with nothing written.
TEST(QuantizeTilesCli, UnderAMemoryLimitWritesTheSameFiles) {
    const auto dir = testing::temp_dir("quantize_tiles_cli");
    const Cube photo = testing::random_cube(120, 90, 3, DType::U8, 8, 0, 255, Layout::BIP);
    write_cube(photo, dir / "photo.png");
    const std::string in = testing::q(dir / "photo.png");
    const std::string flags = " -k 12 --max-iter 10 --seed 3 --json --quiet";
    const auto whole = testing::run_cli("quantize " + in + " " + testing::q(dir / "whole.png") + flags + " --backend cpu");
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    const auto tiled = testing::run_cli("quantize " + in + " " + testing::q(dir / "tiled.png") + flags + " --memory-limit 64K");
    ASSERT_EQ(tiled.exit_code, 0) << tiled.err;
    const auto jw = nlohmann::json::parse(whole.out), jt = nlohmann::json::parse(tiled.out);
    EXPECT_GT(jt["tiled"]["tiles"].get<int>(), 2);
    EXPECT_GT(jt["tiled"]["passes"].get<int>(), 4);
    EXPECT_FALSE(jw.contains("tiled"));
    EXPECT_EQ(jw["palette"], jt["palette"]);
    EXPECT_EQ(jw["iterations"], jt["iterations"]);
    EXPECT_TRUE(cubes_identical(read_cube(dir / "whole.png"), read_cube(dir / "tiled.png")));
    EXPECT_TRUE(cubes_identical(read_cube(dir / "whole.indexed.png"), read_cube(dir / "tiled.indexed.png")));
    EXPECT_TRUE(cubes_identical(read_cube(dir / "whole.palette.png"), read_cube(dir / "tiled.palette.png")));
    const auto bad = testing::run_cli("quantize " + in + " " + testing::q(dir / "bad.png") + " --dither floyd-steinberg --memory-limit 64K");
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
    EXPECT_NE(bad.err.find("--dither"), std::string::npos) << bad.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "bad.png"));
    const auto size = testing::run_cli("quantize " + in + " " + testing::q(dir / "bad.png") + " --tile-size 5");
    EXPECT_EQ(size.exit_code, 2) << size.err;
    EXPECT_NE(size.err.find("--tile-size"), std::string::npos) << size.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "bad.png"));
}

}  // namespace
}  // namespace cubekit
