// cubekit info's per-band statistics against the plain loop they replaced (min, max and a double
// sum in the order y, x of each band, NaN counted apart): the same doubles, bit for bit, for every
// element type and layout and any thread count. Covers the exact integer sums over chunks (lane
// tails, BIL rows, BSQ runs), the float path (NaN, infinities, 0 and -0: min/max keep the first of
// equals) and the u32 band whose sum may pass 2^53, which is summed again in the old order.
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "io_test_helpers.hpp"

namespace fs = std::filesystem;
using namespace cubekit;
using namespace cubekit::io_test;
using namespace cubekit::testing;

namespace {

struct Expected {
    double min = std::numeric_limits<double>::infinity();
    double max = -std::numeric_limits<double>::infinity();
    double mean = 0;
    std::size_t nan = 0;
};

/// The loop `cubekit info` ran before it was made parallel.
std::vector<Expected> oracle(const Cube& cube) {
    std::vector<Expected> out;
    for (int b = 0; b < cube.bands(); ++b) {
        Expected e;
        double sum = 0;
        std::size_t n = 0;
        for (int y = 0; y < cube.height(); ++y)
            for (int x = 0; x < cube.width(); ++x) {
                const double v = cube.value(x, y, b);
                if (std::isnan(v)) {
                    ++e.nan;
                    continue;
                }
                e.min = std::min(e.min, v);
                e.max = std::max(e.max, v);
                sum += v;
                ++n;
            }
        e.mean = n ? sum / double(n) : std::nan("");
        out.push_back(e);
    }
    return out;
}

/// `cubekit info --json` of the file agrees with the oracle bit for bit (JSON null for non-finite).
void expect_info_matches(const fs::path& file, const Cube& cube, int threads) {
    const auto r = run_cli("info '" + file.string() + "' --json --quiet --backend cpu --threads " + std::to_string(threads));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    const std::vector<Expected> want = oracle(cube);
    ASSERT_EQ(j["band_stats"].size(), want.size());
    auto same = [](const nlohmann::json& got, double v) {
        if (!std::isfinite(v)) return got.is_null();
        const double g = got.get<double>();
        return g == v && std::signbit(g) == std::signbit(v);
    };
    for (std::size_t b = 0; b < want.size(); ++b) {
        const nlohmann::json& row = j["band_stats"][b];
        EXPECT_TRUE(same(row["min"], want[b].min)) << "band " << b << ": " << row.dump() << " min " << want[b].min;
        EXPECT_TRUE(same(row["max"], want[b].max)) << "band " << b << ": " << row.dump() << " max " << want[b].max;
        EXPECT_TRUE(same(row["mean"], want[b].mean)) << "band " << b << ": " << row.dump() << " mean " << want[b].mean;
        EXPECT_EQ(row.value("nan_count", std::size_t(0)), want[b].nan) << "band " << b;
    }
}

/// NaN, infinities and signed zeros in a float cube: band 0 starts with 0 then has -0 (min and max
/// stay +0), band 1 the reverse, band 2 has a NaN and +inf, band 3 is all NaN.
void add_float_specials(Cube& c) {
    const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
    for (int y = 0; y < c.height(); ++y)
        for (int x = 0; x < c.width(); ++x) {
            c.set_value(x, y, 0, (x + y) % 2 ? -0.0 : 0.0);
            c.set_value(x, y, 1, (x + y) % 2 ? 0.0 : -0.0);
            c.set_value(x, y, 3, nan);
        }
    c.set_value(3, 2, 2, nan);
    c.set_value(4, 2, 2, inf);
    c.set_value(1, 1, 4, -inf);
}

}  // namespace

TEST(CliInfoStats, EveryTypeAndLayoutAsTheOldLoop) {
    const fs::path dir = temp_dir("info-stats");
    for (DType t : kAllTypes)
        for (Layout l : kAllLayouts) {
            // 203 pixels a row: lane rows end in a partial pixel group; 6 bands: lanes of 48 samples.
            Cube c = sample_cube(203, 31, 6, t, l, 11);
            if (t == DType::F32 || t == DType::F64) add_float_specials(c);
            SCOPED_TRACE(c.shape().describe());
            const fs::path file = dir / ("c_" + std::string(dtype_name(t)) + "_" + std::string(layout_name(l)) + ".hdr");
            write_cube(c, file);
            for (int threads : {1, 3}) expect_info_matches(file, c, threads);
        }
}

TEST(CliInfoStats, ManyBandsAndLargeSums) {
    const fs::path dir = temp_dir("info-large");
    // 102 u8 bands, BIP (the 80 MB cube's shape, smaller): lanes of 816 samples.
    const Cube many = sample_cube(97, 41, 102, DType::U8, Layout::BIP, 3);
    write_cube(many, dir / "many.npy");
    expect_info_matches(dir / "many.npy", many, 4);
    // A u32 band of 2.4 million pixels near 4e9: its sum passes 2^53, where the old double sum
    // rounded; that band is summed again in the old order.
    Cube big = random_cube(1600, 1500, 1, DType::U32, 9, 3.9e9, 4e9, Layout::BSQ);
    write_cube(big, dir / "big.hdr");
    expect_info_matches(dir / "big.hdr", big, 2);
    // i32 of both signs over 2^21 pixels: |sum| stays bounded only by n * max|v|.
    Cube signed_big = random_cube(1600, 1400, 2, DType::I32, 10, -2.1e9, 2.1e9, Layout::BIL);
    write_cube(signed_big, dir / "sbig.hdr");
    expect_info_matches(dir / "sbig.hdr", signed_big, 3);
}
