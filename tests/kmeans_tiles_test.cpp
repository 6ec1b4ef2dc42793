// k-means in tiles (issue 17) on the CPU backend: labels, centroids, counts, palette, quantized image,
// iterations and restarts equal kmeans()'s bit for bit for every element type, every initialisation
// and empty-cluster policy, masks, NaN pixels, legacy mode, restarts and tile sizes down to one pixel;
// a file read by windows under a memory budget; bad outputs. The inertia and the history are summed
// per tile, then the tiles in order: compared within 1e-12 relative (they are f64 sums of the same
// terms in another order; exact integer sums decide everything else).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cubekit/io.hpp"
#include "cubekit/kmeans.hpp"
#include "kmeans_test_helpers.hpp"
#include "testing.hpp"

namespace cubekit {
namespace {

using kmeans_test::same_bits;
using testing::cpu_context;
using testing::cubes_identical;

bool close(double a, double b) { return std::fabs(a - b) <= 1e-12 * std::max(std::fabs(a), std::fabs(b)); }

// The tiled call, its labels and quantized image filled in (both poisoned first), in a KmeansResult.
KmeansResult tiled(const Cube& image, const KmeansOptions& o, const TileOptions& t, KmeansTiled* info = nullptr) {
    Cube labels(image.width(), image.height(), 1, DType::I32);
    Cube quantized(image.width(), image.height(), image.bands(), image.dtype(), Layout::BIP);
    std::memset(labels.bytes(), 0xAB, labels.num_bytes());
    std::memset(quantized.bytes(), 0xCD, quantized.num_bytes());
    KmeansTiled r = kmeans_tiled(cpu_context(), image, labels.mutable_view(), o, t,
                                 o.paint ? quantized.mutable_view() : MutableCubeView());
    if (info) info->run = r.run, info->passes = r.passes;
    r.result.labels.assign(labels.data<std::int32_t>(), labels.data<std::int32_t>() + labels.num_elements());
    if (o.paint) r.result.quantized = std::move(quantized);
    return std::move(r.result);
}

void expect_same(const KmeansResult& a, const KmeansResult& b) {
    EXPECT_EQ(a.labels, b.labels);
    EXPECT_EQ(a.counts, b.counts);
    ASSERT_EQ(a.centroids.size(), b.centroids.size());
    for (std::size_t i = 0; i < a.centroids.size(); ++i) ASSERT_TRUE(same_bits(a.centroids[i], b.centroids[i])) << "centroid " << i;
    ASSERT_EQ(a.palette.size(), b.palette.size());
    for (std::size_t i = 0; i < a.palette.size(); ++i) ASSERT_TRUE(same_bits(a.palette[i], b.palette[i])) << "palette " << i;
    EXPECT_TRUE(cubes_identical(a.quantized, b.quantized));
    EXPECT_EQ(a.valid_pixels, b.valid_pixels);
    EXPECT_EQ(a.iterations, b.iterations);
    EXPECT_EQ(a.converged, b.converged);
    EXPECT_EQ(a.k_effective, b.k_effective);
    EXPECT_EQ(a.winner, b.winner);
    EXPECT_EQ(a.warnings, b.warnings);
    EXPECT_TRUE(close(a.inertia, b.inertia)) << a.inertia << " vs " << b.inertia;
    ASSERT_EQ(a.history.size(), b.history.size());
    for (std::size_t i = 0; i < a.history.size(); ++i) EXPECT_TRUE(close(a.history[i], b.history[i])) << "history " << i;
    ASSERT_EQ(a.restarts.size(), b.restarts.size());
    for (std::size_t r = 0; r < a.restarts.size(); ++r) {
        EXPECT_EQ(a.restarts[r].iterations, b.restarts[r].iterations) << "restart " << r;
        EXPECT_EQ(a.restarts[r].k_effective, b.restarts[r].k_effective) << "restart " << r;
        EXPECT_TRUE(close(a.restarts[r].inertia, b.restarts[r].inertia)) << "restart " << r;
    }
}

// The option sets every type runs: each initialisation, each empty-cluster policy, a mask, restarts.
std::vector<std::pair<std::string, KmeansOptions>> option_sets(int W, int H, int m, std::uint64_t seed) {
    std::vector<std::pair<std::string, KmeansOptions>> sets;
    sets.push_back({"kmeans++ sampled", {.k = 6, .seed = seed, .init_sample = 150, .max_iter = 30}});
    sets.push_back({"kmeans++ all, 3 restarts", {.k = 5, .seed = seed, .init_sample = 0, .max_iter = 20, .n_init = 3}});
    sets.push_back({"random, keep", {.k = 7, .init = KmeansInit::Random, .seed = seed, .init_sample = 100,
                                     .max_iter = 25, .empty = EmptyPolicy::Keep}});
    sets.push_back({"box-diagonal, tol 0", {.k = 4, .init = KmeansInit::BoxDiagonal, .max_iter = 40, .tol = 0}});
    // Three equal explicit centroids: two clusters empty at once and are relocated (ties by index).
    KmeansOptions e{.k = 5, .init = KmeansInit::Explicit, .max_iter = 15};
    std::vector<double> c;
    for (int j = 0; j < 5; ++j)
        for (int b = 0; b < m; ++b) c.push_back(j < 3 ? 10.0 : 40.0 * j + b);
    e.init_centroids = c;
    sets.push_back({"explicit, relocate", e});
    e.empty = EmptyPolicy::LegacyZero;
    sets.push_back({"explicit, legacy-zero", e});
    KmeansOptions masked{.k = 4, .seed = seed + 1, .init_sample = 60, .max_iter = 20};
    masked.mask.resize(std::size_t(W) * H);
    for (std::size_t p = 0; p < masked.mask.size(); ++p) masked.mask[p] = (p * 7 + p / W) % 5 != 0;
    sets.push_back({"masked", masked});
    return sets;
}

TEST(KmeansTiles, TiledEqualsWholeOnTheCpu) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const int W = 23, H = 17, m = 3;
    const Layout layouts[] = {Layout::BSQ, Layout::BIP, Layout::BIL};
    int i = 0, compared = 0;
    for (DType t : kmeans_test::kTypes) {
        // Few levels: ties between centroids, clusters that empty, exact midpoints.
        Cube image = testing::random_levels_cube(W, H, m, t, seed + std::uint64_t(i), 9, layouts[i % 3]);
        ++i;
        for (const auto& [name, o] : option_sets(W, H, m, seed)) {
            const KmeansResult whole = kmeans(cpu_context(), image, o);
            for (auto [tw, th] : std::vector<std::pair<int, int>>{{1, 1}, {2, 3}, {23, 1}, {7, 5}, {5, 17}}) {
                SCOPED_TRACE(::testing::Message() << dtype_name(t) << ", " << name << ", tiles " << tw << "x" << th);
                KmeansTiled info;
                const KmeansResult r = tiled(image, o, {.tile_width = tw, .tile_height = th}, &info);
                EXPECT_GT(info.run.tiles, 1u);
                EXPECT_GE(info.passes, 4);
                expect_same(whole, r);
                ++compared;
            }
        }
    }
    EXPECT_EQ(compared, 7 * 7 * 5);
}

TEST(KmeansTiles, NanPixelsManyBandsAndLegacy) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    // f32 spectra with NaN pixels (excluded, painted with their own samples) and 9 bands.
    Cube spectra = testing::random_cube(31, 12, 9, DType::F32, seed, -50, 50, Layout::BIL);
    spectra.set_value(4, 3, 2, std::numeric_limits<double>::quiet_NaN());
    spectra.set_value(30, 11, 8, std::numeric_limits<double>::quiet_NaN());
    const KmeansOptions o{.k = 5, .seed = seed, .init_sample = 200, .max_iter = 50};
    const KmeansResult whole = kmeans(cpu_context(), spectra, o);
    EXPECT_EQ(whole.valid_pixels, 31 * 12 - 2);
    for (auto [tw, th] : std::vector<std::pair<int, int>>{{3, 2}, {31, 2}, {8, 12}}) {
        SCOPED_TRACE(::testing::Message() << "tiles " << tw << "x" << th);
        expect_same(whole, tiled(spectra, o, {.tile_width = tw, .tile_height = th}));
    }
    // The seed program's mode: u8 RGB, truncated centroids, no sort.
    const Cube rgb = testing::random_levels_cube(20, 15, 3, DType::U8, seed + 5, 12, Layout::BIP);
    KmeansOptions legacy{.k = 6, .seed = seed, .max_iter = 8, .legacy = true};
    const KmeansResult lw = kmeans(cpu_context(), rgb, legacy);
    expect_same(lw, tiled(rgb, legacy, {.tile_width = 6, .tile_height = 4}));
    // Labels only (no painting).
    legacy.paint = false;
    expect_same(kmeans(cpu_context(), rgb, legacy), tiled(rgb, legacy, {.tile_width = 20, .tile_height = 1}));
}

TEST(KmeansTiles, FileReadByWindowsUnderABudget) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const int W = 160, H = 120, m = 4;
    const Cube image = testing::random_cube(W, H, m, DType::U16, seed, 0, 4000, Layout::BIP);
    const auto path = testing::temp_dir("kmeans_tiles") / "scene.npy";
    write_cube(image, path);
    const KmeansOptions o{.k = 8, .seed = seed, .init_sample = 5000, .max_iter = 20};
    const KmeansResult whole = kmeans(cpu_context(), image, o);
    Cube labels(W, H, 1, DType::I32), quantized(W, H, m, DType::U16, Layout::BIP);
    const CubeFile file(path);
    KmeansTiled r = kmeans_tiled(cpu_context(), file, labels.mutable_view(), o, {.memory_limit = 256 << 10},
                                       quantized.mutable_view());
    EXPECT_GE(r.run.tiles, 4u);
    EXPECT_LE(r.run.peak_bytes, std::size_t(256) << 10);
    KmeansResult got = std::move(r.result);
    got.labels.assign(labels.data<std::int32_t>(), labels.data<std::int32_t>() + labels.num_elements());
    got.quantized = std::move(quantized);
    expect_same(whole, got);
}

TEST(KmeansTiles, BadOutputsAndArgumentsAreNamed) {
    const Cube image = testing::random_cube(10, 8, 3, DType::U8, 1, 0, 255);
    Cube labels(10, 8, 1, DType::I32), wrong(10, 7, 1, DType::I32), f32(10, 8, 1, DType::F32);
    const auto message = [&](auto&& call) {
        try {
            call();
        } catch (const InvalidInput& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(message([&] { kmeans_tiled(cpu_context(), image, wrong.mutable_view(), {.k = 2}); }).find("labels is"),
              std::string::npos);
    EXPECT_NE(message([&] { kmeans_tiled(cpu_context(), image, f32.mutable_view(), {.k = 2}); }).find("i32"),
              std::string::npos);
    Cube q(10, 8, 2, DType::U8);
    EXPECT_NE(message([&] { kmeans_tiled(cpu_context(), image, labels.mutable_view(), {.k = 2}, {}, q.mutable_view()); })
                  .find("quantized is"),
              std::string::npos);
    EXPECT_NE(message([&] { kmeans_tiled(cpu_context(), image, labels.mutable_view(), {.k = 81}); }).find("k = 81"),
              std::string::npos);
    KmeansOptions none{.k = 2};
    none.mask.assign(80, 0);
    EXPECT_NE(message([&] { kmeans_tiled(cpu_context(), image, labels.mutable_view(), none, {.tile_width = 3, .tile_height = 3}); })
                  .find("no valid pixel"),
              std::string::npos);
}

// KmeansPieces over an irregular grid of pieces answered in shuffled order equals kmeans(); an
// abandoned run stops; bytes that are no request are refused.
TEST(KmeansTiles, PiecesMergeToTheWholeResult) {
    const std::uint64_t seed = testing::test_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const int W = 23, H = 17, m = 3;
    const Cube image = testing::random_levels_cube(W, H, m, DType::I16, seed, 7, Layout::BIL);
    // Not structured bindings: clang 16 cannot capture those in a lambda with OpenMP on.
    for (const auto& set : option_sets(W, H, m, seed)) {
        const KmeansOptions& o = set.second;
        SCOPED_TRACE(set.first);
        struct Piece {
            int x0, y0, w, h;
        };
        std::vector<Piece> pieces;
        for (auto [y0, h] : {std::pair{0, 6}, {6, 11}})
            for (auto [x0, w] : {std::pair{0, 10}, {10, 4}, {14, 9}}) pieces.push_back({x0, y0, w, h});
        const auto mask_of = [&](const Piece& p) {
            std::vector<std::uint8_t> cut;
            for (int y = p.y0; y < p.y0 + p.h && !o.mask.empty(); ++y)
                for (int x = p.x0; x < p.x0 + p.w; ++x) cut.push_back(o.mask[std::size_t(y) * W + x]);
            return cut;
        };
        KmeansPieces run(cpu_context(), W, H, m, DType::I16, o);
        int passes = 0;
        while (auto request = run.next()) {
            std::vector<std::string> parts;
            for (std::size_t i = 0; i < pieces.size(); ++i) {
                const Piece& p = pieces[(i * 5 + std::size_t(passes)) % pieces.size()];  // any order
                parts.push_back(kmeans_piece(cpu_context(), image.view().window(p.x0, p.y0, p.w, p.h), p.x0, p.y0,
                                             mask_of(p), *request));
            }
            run.feed(std::move(parts));
            ++passes;
        }
        KmeansResult r = run.result();
        Cube labels(W, H, 1, DType::I32);
        for (const Piece& p : pieces)
            kmeans_piece_labels(cpu_context(), image.view().window(p.x0, p.y0, p.w, p.h), p.x0, p.y0, mask_of(p),
                                run.labelling(), labels.mutable_view().window(p.x0, p.y0, p.w, p.h));
        r.labels.assign(labels.data<std::int32_t>(), labels.data<std::int32_t>() + labels.num_elements());
        KmeansResult w = kmeans(cpu_context(), image, [&] {
            KmeansOptions no_paint = o;
            no_paint.paint = false;
            return no_paint;
        }());
        expect_same(w, r);
        EXPECT_GE(passes, 3);
    }
    {
        KmeansPieces abandoned(cpu_context(), W, H, m, DType::I16, {.k = 3});
        ASSERT_TRUE(abandoned.next().has_value());
        EXPECT_THROW(abandoned.result(), InvalidInput);
    }  // destroyed mid-run: its thread stops
    EXPECT_THROW(kmeans_piece(cpu_context(), image, 0, 0, {}, "not a request"), InvalidInput);
    EXPECT_THROW(KmeansPieces(cpu_context(), W, H, m, DType::I16, {.k = 0}), InvalidInput);
}

// The CLI's tiled cluster writes the same labels, class map and centroids as the whole-scene run; a
// bad tile flag is named, and nothing is written.
TEST(KmeansTilesCli, ClusterUnderAMemoryLimitWritesTheSameFiles) {
    const auto dir = testing::temp_dir("kmeans_tiles_cli");
    const std::string in = testing::q(testing::source_path("data/samson/samson_1.img"));
    const std::string flags = " -k 5 --max-iter 12 --seed 3 --json --quiet";
    const auto whole = testing::run_cli("cluster " + in + " " + testing::q(dir / "whole.npy") + flags + " --backend cpu");
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    const auto tiled = testing::run_cli("cluster " + in + " " + testing::q(dir / "tiled.npy") + flags + " --memory-limit 200K");
    ASSERT_EQ(tiled.exit_code, 0) << tiled.err;
    const auto jw = nlohmann::json::parse(whole.out), jt = nlohmann::json::parse(tiled.out);
    EXPECT_GT(jt["tiled"]["tiles"].get<int>(), 2);
    EXPECT_GT(jt["tiled"]["passes"].get<int>(), 12);
    EXPECT_TRUE(jt["input"]["windowed"].get<bool>());
    EXPECT_EQ(jw["counts"], jt["counts"]);
    EXPECT_EQ(jw["iterations"], jt["iterations"]);
    EXPECT_TRUE(cubes_identical(read_cube(dir / "whole.npy"), read_cube(dir / "tiled.npy")));
    EXPECT_TRUE(cubes_identical(read_cube(dir / "whole.png"), read_cube(dir / "tiled.png")));
    const auto text = [](const std::filesystem::path& p) {
        std::ifstream f(p);
        return std::string(std::istreambuf_iterator<char>(f), {});
    };
    EXPECT_EQ(text(dir / "whole.centroids.csv"), text(dir / "tiled.centroids.csv"));
    const auto bad = testing::run_cli("cluster " + in + " " + testing::q(dir / "bad.npy") + " --tile-size 0x3");
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
    EXPECT_NE(bad.err.find("--tile-size"), std::string::npos) << bad.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "bad.npy"));
}

}  // namespace
}  // namespace cubekit
