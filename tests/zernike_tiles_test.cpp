// Zernike moments in groups of images (issue 17) on the CPU backend: the zernike_*_tiled calls equal the
// plain call of the same request bit for bit (zernike_set, zernike_order, zernike_moment,
// zernike_moments) for group sizes down to one image, budgets, symmetric and plain disks, element
// types, an ImageStack read from files; refusals; `cubekit zernike` in groups writes the same table.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cubekit/error.hpp"
#include "cubekit/io.hpp"
#include "cubekit/zernike.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using testing::cpu_context;

// A tiled call (one of the four) into `out`.
using TiledCall = std::function<ZernikeTiled(const ImageStack&, const MutableCubeView& out, const ZernikeOptions&,
                                             const TileOptions&)>;

// The tiled call's values, from a poisoned output.
std::vector<std::complex<double>> tiled_values(const CubeView& images, std::size_t count, const TiledCall& call,
                                               const ZernikeOptions& o, const TileOptions& t, ZernikeTiled* info = nullptr) {
    std::vector<std::complex<double>> v(std::size_t(images.bands()) * count, {-7.5, 3.25});
    const CubeShape s = zernike_moments_shape(images.bands(), int(count));
    const MutableCubeView out =
        MutableCubeView::host(v.data(), s.width, s.height, s.bands, s.dtype, dense_strides(s.width, s.height, s.bands, s.layout));
    ZernikeTiled r = call(image_stack(images), out, o, t);
    if (info) *info = std::move(r);
    return v;
}

// Bit for bit: the same doubles (NaN never expected).
bool same(const std::vector<std::complex<double>>& a, const std::vector<std::complex<double>>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
}

TEST(ZernikeTiles, GroupsEqualThePlainCalls) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const Cube plain = testing::random_cube(37, 29, 7, DType::U8, seed, 0, 255, Layout::BIP);  // no symmetry
    const Cube square = testing::random_cube(32, 32, 5, DType::F32, seed + 1, -1, 1, Layout::BSQ);  // 8-fold
    int compared = 0;
    for (const Cube* images : {&plain, &square}) {
        const CubeView v = images->view();
        struct Request {
            std::string name;
            TiledCall call;
            ZernikeMoments whole;
        };
        const Context& cpu = cpu_context();
        const std::vector<ZernikeIndex> list = {{3, 1}, {8, 4}, {0, 0}};
        // Requests whose automatic method differs by call: a set of order 0, an order of one moment.
        const std::vector<Request> requests = {
            {"set 10", [&](auto& s, auto& o, auto& op, auto& t) { return zernike_set_tiled(cpu, s, 10, o, op, t); },
             zernike_set(cpu, v, 10)},
            {"set 0", [&](auto& s, auto& o, auto& op, auto& t) { return zernike_set_tiled(cpu, s, 0, o, op, t); },
             zernike_set(cpu, v, 0)},
            {"order 7", [&](auto& s, auto& o, auto& op, auto& t) { return zernike_order_tiled(cpu, s, 7, o, op, t); },
             zernike_order(cpu, v, 7)},
            {"order 1", [&](auto& s, auto& o, auto& op, auto& t) { return zernike_order_tiled(cpu, s, 1, o, op, t); },
             zernike_order(cpu, v, 1)},
            {"moment 6,2", [&](auto& s, auto& o, auto& op, auto& t) { return zernike_moment_tiled(cpu, s, 6, 2, o, op, t); },
             zernike_moment(cpu, v, 6, 2)},
            {"list", [&](auto& s, auto& o, auto& op, auto& t) { return zernike_moments_tiled(cpu, s, list, o, op, t); },
             zernike_moments(cpu, v, list)}};
        for (const Request& r : requests)
            for (int group : {1, 2, 3, 100}) {
                SCOPED_TRACE(::testing::Message() << images->shape().describe() << " " << r.name << " groups of " << group);
                ZernikeTiled info;
                EXPECT_TRUE(same(r.whole.values, tiled_values(v, r.whole.count(), r.call, {}, {.tile_height = group}, &info)));
                EXPECT_EQ(info.info.method, r.whole.method);
                EXPECT_EQ(info.info.indices, r.whole.indices);
                EXPECT_EQ(info.info.symmetric, r.whole.symmetric);
                EXPECT_EQ(info.info.images, images->bands());
                const int per_group = std::min(group, images->bands());
                EXPECT_EQ(info.run.tiles, std::size_t((images->bands() + per_group - 1) / per_group));
                ++compared;
            }
    }
    EXPECT_EQ(compared, 2 * 6 * 4);
}

TEST(ZernikeTiles, AHostBudgetAndAStackOfFiles) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const Cube images = testing::random_cube(24, 20, 9, DType::U16, seed, 0, 4000, Layout::BSQ);
    const ZernikeOptions o{.mapping = ZernikeMapping::Circumscribed};
    const ZernikeMoments whole = zernike_set(cpu_context(), images, 12, o);
    ZernikeTiled info;
    // A copy of the staged group is held (2 bytes a sample): 3 images of 480 pixels per 3 KiB.
    const TiledCall set12 = [](auto& s, auto& out, auto& op, auto& t) { return zernike_set_tiled(cpu_context(), s, 12, out, op, t); };
    EXPECT_TRUE(same(whole.values, tiled_values(images, whole.count(), set12, o, {.memory_limit = 3 << 10}, &info)));
    EXPECT_EQ(info.run.tiles, 3u);
    EXPECT_LE(info.run.peak_bytes, std::size_t(3) << 10);
    // The stack reads the images one file each, from several threads.
    const auto dir = testing::temp_dir("zernike_tiles");
    for (int b = 0; b < 9; ++b) write_cube(images.select_bands({b}), dir / ("i" + std::to_string(b) + ".npy"));
    const ImageStack stack{24, 20, 9, DType::U16, [&](int first, int count, const MutableCubeView& dst) {
                               for (int i = 0; i < count; ++i) {
                                   const Cube one = read_cube(dir / ("i" + std::to_string(first + i) + ".npy"));
                                   copy_cube(cpu_context(), one, dst.band_range(i, 1));
                               }
                           }};
    std::vector<std::complex<double>> got(whole.values.size());
    const CubeShape s = zernike_moments_shape(9, int(whole.count()));
    zernike_set_tiled(cpu_context(), stack, 12,
                          MutableCubeView::host(got.data(), s.width, s.height, s.bands, s.dtype,
                                                dense_strides(s.width, s.height, s.bands, s.layout)),
                          o, {.tile_height = 4});
    EXPECT_TRUE(same(whole.values, got));
}

TEST(ZernikeTiles, RefusalsNameTheReason) {
    const Cube images = testing::random_cube(16, 16, 3, DType::F32, 2, 0, 1);
    const auto message = [&](const MutableCubeView& out, const TileOptions& t, const std::vector<ZernikeIndex>& wanted) {
        try {
            zernike_moments_tiled(cpu_context(), image_stack(images), wanted, out, {}, t);
        } catch (const InvalidInput& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    const int count = int(zernike_set_size(4));
    Cube out(count, 3, 2, DType::F64, Layout::BIP), wrong(count, 2, 2, DType::F64, Layout::BIP);
    EXPECT_NE(message(wrong.mutable_view(), {}, zernike_set_indices(4)).find("out is"), std::string::npos);
    EXPECT_NE(message(out.mutable_view(), {.memory_limit = 512}, zernike_set_indices(4)).find("less than one 16x16 image"),
              std::string::npos);
    EXPECT_NE(message(out.mutable_view(), {}, {{3, 2}}).find("A(3,2)"), std::string::npos);
    EXPECT_THROW(zernike_moments_tiled(cpu_context(), ImageStack{16, 16, 3, DType::F32, {}}, zernike_set_indices(4),
                                       out.mutable_view()),
                 InvalidInput);
}

// `cubekit zernike` over a folder in groups: the same CSV as the whole batch; --reconstruct refused.
TEST(ZernikeTilesCli, GroupsWriteTheSameTable) {
    const auto dir = testing::temp_dir("zernike_tiles_cli");
    std::filesystem::create_directories(dir / "shapes");
    for (int i = 0; i < 5; ++i)
        write_cube(testing::random_cube(30, 26, 1 + i % 3, DType::U8, 40 + std::uint64_t(i), 0, 255, Layout::BSQ),
                   dir / "shapes" / ("s" + std::to_string(i) + ".png"));
    const std::string in = testing::q(dir / "shapes");
    const auto text = [](const std::filesystem::path& p) {
        std::ifstream f(p);
        return std::string(std::istreambuf_iterator<char>(f), {});
    };
    for (const std::string what : {"--max-order 9", "--order 6", "--moment 5,1"}) {
        SCOPED_TRACE(what);
        const auto whole = testing::run_cli("zernike " + in + " " + what + " -o " + testing::q(dir / "whole.csv") + " --quiet");
        ASSERT_EQ(whole.exit_code, 0) << whole.err;
        const auto tiled = testing::run_cli("zernike " + in + " " + what + " -o " + testing::q(dir / "tiled.csv") +
                                            " --memory-limit 3K --json --quiet");
        ASSERT_EQ(tiled.exit_code, 0) << tiled.err;
        EXPECT_EQ(text(dir / "whole.csv"), text(dir / "tiled.csv"));
        const auto j = nlohmann::json::parse(tiled.out);
        EXPECT_GT(j["tiled"]["tiles"].get<int>(), 2);
        EXPECT_EQ(j["input"]["images"].get<int>(), 5);
    }
    // A cube file read a group of bands at a time (CubeFile::read_bands), beside a file of another type
    // (the batch stacked in f64): the same table.
    write_cube(testing::random_cube(30, 26, 7, DType::I16, 48, -500, 500, Layout::BIP), dir / "cube.hdr", {.envi_keep_layout = true});
    write_cube(testing::random_cube(30, 26, 2, DType::F32, 49, 0, 1, Layout::BIP), dir / "two.npy");
    const std::string files = testing::q(dir / "cube.hdr") + " " + testing::q(dir / "two.npy");
    const auto whole = testing::run_cli("zernike " + files + " --max-order 8 -o " + testing::q(dir / "w2.csv") + " --quiet");
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    const auto tiled = testing::run_cli("zernike " + files + " --max-order 8 -o " + testing::q(dir / "t2.csv") +
                                        " --tile-size 1x3 --json --quiet");
    ASSERT_EQ(tiled.exit_code, 0) << tiled.err;
    EXPECT_EQ(text(dir / "w2.csv"), text(dir / "t2.csv"));
    EXPECT_EQ(nlohmann::json::parse(tiled.out)["tiled"]["tiles"].get<int>(), 3);
    const auto bad = testing::run_cli("zernike " + in + " --tile-size 1x2 --reconstruct " + testing::q(dir / "r.png"));
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
    EXPECT_NE(bad.err.find("--reconstruct"), std::string::npos) << bad.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "r.png"));
}

}  // namespace
}  // namespace cubekit
