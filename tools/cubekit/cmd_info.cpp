// cubekit info: shape, type, layout, per-band statistics and wavelengths of a cube or image.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <numeric>
#include <type_traits>
#include <vector>

#include <omp.h>

#include "cli_common.hpp"
#include "commands.hpp"
#include "cubekit/io.hpp"

namespace cubekit::cli {
namespace {

struct BandStats {
    double min = std::numeric_limits<double>::infinity();
    double max = -std::numeric_limits<double>::infinity();
    double mean = 0;
    std::size_t nan = 0;
};

// ---- per-band statistics ------------------------------------------------------------------------
//
// The printed mean has always been a double sum taken in the order y, x of each band, divided by
// the count. Integer samples: that double sum is exact while no partial sum passes 2^53 in
// magnitude, which n * max(|min|, |max|) <= 2^53 guarantees; an exact integer sum then gives the
// same digits in any order, so chunks of the cube are summed in parallel. A band that could pass
// 2^53 (u32/i32 with more than 2^21 pixels) is summed again in the old order. Float samples: the
// rounding depends on the order, and min/max keep the first of equal values (0 and -0), so each
// band is walked in the old order, the bands in parallel.

/// Element strides of (x, y, b) in the cube's layout.
struct Strides {
    std::size_t x, y, b;
};
Strides strides_of(const Cube& cube) {
    const std::size_t W = std::size_t(cube.width()), H = std::size_t(cube.height()), B = std::size_t(cube.bands());
    switch (cube.layout()) {
        case Layout::BSQ: return {1, W, W * H};
        case Layout::BIL: return {1, B * W, W};
        case Layout::BIP: break;
    }
    return {B, W * B, 1};
}

/// Adds sample v to a band's statistics, as the old loop did (min/max keep the first of equals).
void add_sample(BandStats& st, double& sum, double v) {
    if (std::isnan(v)) {
        ++st.nan;
        return;
    }
    st.min = std::min(st.min, v);
    st.max = std::max(st.max, v);
    sum += v;
}
void finish(BandStats& st, double sum, std::size_t pixels) {
    const std::size_t n = pixels - st.nan;
    st.mean = n ? sum / double(n) : std::nan("");
}

/// The old per-band loop, in the old order (y, then x), for bands [b0, b1); any element type.
/// BIP walks the pixels once with the group's bands inside (one pass over memory); BSQ and BIL
/// walk each band's rows, which are contiguous. `sums` has one slot per band of the group.
template <typename T>
void ordered_stats(const Cube& cube, int b0, int b1, BandStats* out, double* sums) {
    const T* data = cube.data<T>();
    const Strides s = strides_of(cube);
    const std::size_t W = std::size_t(cube.width()), H = std::size_t(cube.height()), nb = std::size_t(b1 - b0);
    std::fill_n(out, nb, BandStats{});
    std::fill_n(sums, nb, 0.0);
    if (cube.layout() == Layout::BIP) {
        for (std::size_t i = 0; i < W * H; ++i)
            for (std::size_t k = 0; k < nb; ++k) add_sample(out[k], sums[k], double(data[i * s.x + std::size_t(b0) + k]));
    } else {
        for (std::size_t k = 0; k < nb; ++k)
            for (std::size_t y = 0; y < H; ++y) {
                const T* row = data + y * s.y + (std::size_t(b0) + k) * s.b;
                for (std::size_t x = 0; x < W; ++x) add_sample(out[k], sums[k], double(row[x]));
            }
    }
    for (std::size_t k = 0; k < nb; ++k) finish(out[k], sums[k], W * H);
}

/// Exact integer totals of one band (or of a part of it).
struct IntTotals {
    std::int64_t sum = 0;
    std::int64_t min = std::numeric_limits<std::int64_t>::max();
    std::int64_t max = std::numeric_limits<std::int64_t>::min();
    void add(const IntTotals& o) {
        sum += o.sum;
        min = std::min(min, o.min);
        max = std::max(max, o.max);
    }
};

/// Lane sums: 32 bits for 8/16-bit samples (flushed every kBlockRows rows: 2^15 * 2^16 < 2^32,
/// and 2^15 * 2^15 for i16 < 2^31), 64 bits for 32-bit samples.
template <typename T>
using LaneSum = std::conditional_t<(sizeof(T) > 2), std::int64_t,
                                   std::conditional_t<std::is_signed_v<T>, std::int32_t, std::uint32_t>>;
constexpr std::size_t kLanes = 128;  // samples reduced side by side (vectorised) in a run
constexpr std::size_t kBlockRows = std::size_t(1) << 15;

/// Per-thread scratch of reduce_run: one sum, min and max per lane.
template <typename T>
struct Lanes {
    std::vector<LaneSum<T>> sum;
    std::vector<T> min, max;
    explicit Lanes(std::size_t width) : sum(width), min(width), max(width) {}
};
/// Lanes per row: a whole number of pixels, a multiple of 16 (no scalar remainder in the vector
/// loop), at least kLanes.
std::size_t lane_width(std::size_t period) {
    const std::size_t base = period * (16 / std::gcd(period, std::size_t(16)));
    return base * ((kLanes + base - 1) / base);
}

/// Adds `npix` pixels of `period` interleaved samples (a run of BIP pixels, or of one band with
/// period 1) to tot[0..period). The samples are laid out as rows of `width` lanes (a whole number
/// of pixels), reduced column by column so that the compiler vectorises the inner loop; lane j
/// belongs to band j % period.
template <typename T>
void reduce_run(const T* p, std::size_t npix, std::size_t period, Lanes<T>& l, IntTotals* tot) {
    const std::size_t width = lane_width(period), rows = npix * period / width;
    LaneSum<T>* __restrict sum = l.sum.data();
    T* __restrict mn = l.min.data();
    T* __restrict mx = l.max.data();
    std::fill_n(mn, width, std::numeric_limits<T>::max());
    std::fill_n(mx, width, std::numeric_limits<T>::lowest());
    for (std::size_t r0 = 0; r0 < rows; r0 += kBlockRows) {
        std::fill_n(sum, width, LaneSum<T>(0));
        for (std::size_t r = r0; r < std::min(rows, r0 + kBlockRows); ++r) {
            const T* __restrict row = p + r * width;
            for (std::size_t j = 0; j < width; ++j) {
                sum[j] += LaneSum<T>(row[j]);
                mn[j] = std::min(mn[j], row[j]);
                mx[j] = std::max(mx[j], row[j]);
            }
        }
        for (std::size_t j = 0; j < width; ++j) tot[j % period].sum += std::int64_t(sum[j]);
    }
    if (rows > 0)
        for (std::size_t j = 0; j < width; ++j) {
            IntTotals& t = tot[j % period];
            t.min = std::min<std::int64_t>(t.min, mn[j]);
            t.max = std::max<std::int64_t>(t.max, mx[j]);
        }
    for (std::size_t i = rows * width; i < npix * period; ++i) {  // the pixels after the last whole row
        IntTotals& t = tot[i % period];
        t.sum += std::int64_t(p[i]);
        t.min = std::min<std::int64_t>(t.min, p[i]);
        t.max = std::max<std::int64_t>(t.max, p[i]);
    }
}

/// Exact totals of every band: the cube is cut into tasks (runs of BIP pixels, runs of one BSQ
/// band, or whole BIL rows), each adding to its own slots; the slots are merged afterwards.
template <typename T>
std::vector<IntTotals> int_totals(const Context& ctx, const Cube& cube) {
    const std::size_t W = std::size_t(cube.width()), H = std::size_t(cube.height()), B = std::size_t(cube.bands());
    if (W * H == 0) return std::vector<IntTotals>(B);
    const T* data = cube.data<T>();
    const int threads = std::max(1, ctx.threads());
    const bool bsq = cube.layout() == Layout::BSQ, bil = cube.layout() == Layout::BIL;
    // Runs of about 256 KiB (whole rows for BIL): enough tasks to balance the threads, few enough
    // that merging costs nothing.
    const std::size_t run = std::max<std::size_t>(1, (std::size_t(1) << 18) / (sizeof(T) * (bsq ? 1 : B)));
    const std::size_t chunk = bil ? std::max<std::size_t>(1, run / W) * W : run;
    const std::size_t chunks = (W * H + chunk - 1) / chunk, tasks = bsq ? chunks * B : chunks;
    const std::size_t slots = bsq ? 1 : B;  // totals per task
    std::vector<IntTotals> part(tasks * slots);
    std::vector<Lanes<T>> lanes(std::size_t(threads), Lanes<T>(lane_width(bsq || bil ? 1 : B)));
#pragma omp parallel for schedule(dynamic) num_threads(threads)
    for (std::size_t t = 0; t < tasks; ++t) {
        Lanes<T>& l = lanes[std::size_t(omp_get_thread_num())];
        IntTotals* tot = &part[t * slots];
        const std::size_t first = (bsq ? t % chunks : t) * chunk, n = std::min(chunk, W * H - first);
        if (bsq) {
            reduce_run(data + (t / chunks) * W * H + first, n, 1, l, tot);
        } else if (bil) {
            for (std::size_t y = first / W; y < (first + n) / W; ++y)
                for (std::size_t b = 0; b < B; ++b) reduce_run(data + (y * B + b) * W, W, 1, l, &tot[b]);
        } else {
            reduce_run(data + first * B, n, B, l, tot);
        }
    }
    std::vector<IntTotals> total(B);
    for (std::size_t t = 0; t < tasks; ++t)
        for (std::size_t k = 0; k < slots; ++k) total[bsq ? t / chunks : k].add(part[t * slots + k]);
    return total;
}

template <typename T>
std::vector<BandStats> int_stats(const Context& ctx, const Cube& cube) {
    const std::vector<IntTotals> total = int_totals<T>(ctx, cube);
    std::vector<BandStats> stats(total.size());
    const std::size_t n = std::size_t(cube.width()) * std::size_t(cube.height());
    for (std::size_t b = 0; b < stats.size(); ++b) {
        const IntTotals& t = total[b];
        if (n == 0) {
            stats[b].mean = std::nan("");
            continue;
        }
        // Every partial sum is an integer of magnitude <= n * largest |sample|; up to 2^53 all are
        // doubles, so the old sum was exact. Beyond, it may have rounded: redo it in its order.
        const auto largest = std::uint64_t(std::max(std::abs(t.min), std::abs(t.max)));
        if (largest > (std::uint64_t(1) << 53) / n) {
            double sum = 0;
            ordered_stats<T>(cube, int(b), int(b) + 1, &stats[b], &sum);
            continue;
        }
        stats[b] = {double(t.min), double(t.max), double(t.sum) / double(n), 0};
    }
    return stats;
}

/// Float samples: bands split into one contiguous range per thread, each walked in the old order.
template <typename T>
std::vector<BandStats> float_stats(const Context& ctx, const Cube& cube) {
    const int B = cube.bands(), groups = std::max(1, std::min(B, ctx.threads()));
    std::vector<BandStats> stats(static_cast<std::size_t>(B));
    std::vector<double> sums(static_cast<std::size_t>(B));
#pragma omp parallel for schedule(dynamic) num_threads(groups)
    for (int g = 0; g < groups; ++g) {
        const int b0 = int(std::int64_t(B) * g / groups), b1 = int(std::int64_t(B) * (g + 1) / groups);
        ordered_stats<T>(cube, b0, b1, &stats[std::size_t(b0)], &sums[std::size_t(b0)]);
    }
    return stats;
}

std::vector<BandStats> band_stats(const Context& ctx, const Cube& cube) {
    return visit_dtype(cube.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_floating_point_v<T>) return float_stats<T>(ctx, cube);
        else return int_stats<T>(ctx, cube);
    });
}

/// The --json summary: format, shape, metadata and one row of statistics per band.
nlohmann::json info_json(const std::string& input, FileFormat format, const Cube& cube,
                         const std::vector<BandStats>& stats) {
    const Metadata& meta = cube.metadata();
    nlohmann::json j = {{"command", "info"}, {"input", input}, {"format", std::string(format_name(format))}};
    j.update(shape_json(cube.shape()));
    if (!meta.wavelength_units.empty()) j["wavelength_units"] = meta.wavelength_units;
    if (!meta.map_info.empty()) j["map_info"] = meta.map_info;
    nlohmann::json bands = nlohmann::json::array();
    for (int b = 0; b < cube.bands(); ++b) {
        const BandStats& s = stats[std::size_t(b)];
        nlohmann::json row = {{"band", b}};
        auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
        row["min"] = num(s.min);
        row["max"] = num(s.max);
        row["mean"] = num(s.mean);
        if (s.nan) row["nan_count"] = s.nan;
        if (std::size_t(b) < meta.wavelengths.size()) row["wavelength"] = meta.wavelengths[std::size_t(b)];
        if (std::size_t(b) < meta.band_names.size()) row["name"] = meta.band_names[std::size_t(b)];
        bands.push_back(row);
    }
    j["band_stats"] = bands;
    return j;
}

/// The human-readable table on stdout.
void print_info(const std::string& input, FileFormat format, const Cube& cube, const std::vector<BandStats>& stats) {
    const Metadata& meta = cube.metadata();
    std::printf("%s: %s, %d x %d pixels x %d bands, %s, %s\n", input.c_str(), std::string(format_name(format)).c_str(),
                cube.width(), cube.height(), cube.bands(), std::string(dtype_name(cube.dtype())).c_str(),
                std::string(layout_name(cube.layout())).c_str());
    if (!meta.map_info.empty()) std::printf("map info: %s\n", meta.map_info.c_str());
    const bool wl = !meta.wavelengths.empty();
    std::printf("%6s %14s %14s %14s%s\n", "band", "min", "max", "mean",
                wl ? (" wavelength" + (meta.wavelength_units.empty() ? "" : " (" + meta.wavelength_units + ")")).c_str() : "");
    for (int b = 0; b < cube.bands(); ++b) {
        const BandStats& s = stats[std::size_t(b)];
        std::printf("%6d %14.6g %14.6g %14.6g", b, s.min, s.max, s.mean);
        if (wl && std::size_t(b) < meta.wavelengths.size()) std::printf(" %g", meta.wavelengths[std::size_t(b)]);
        if (s.nan) std::printf("  (%zu NaN)", s.nan);
        std::printf("\n");
    }
}

void info_command(CommonOptions common, const std::string& input) {
    // The statistics run on the CPU. Without --backend cuda or --device no CUDA context is made
    // (its start-up, ~0.4 s on the GPU machine, was most of `cubekit info`'s time); with either,
    // the context is made and checks them, so a named device that does not exist is an error.
    if (common.context.backend == Backend::Auto && common.context.device < 0) common.context.backend = Backend::Cpu;
    Timings timings;
    Context ctx = timings.time("context", [&] { return make_context(common, "info"); });
    FileFormat format = FileFormat::Auto;
    const Cube cube = timings.time("read", [&] {
        format = detect_format(input);
        return read_input(input, common).cube;
    });
    const std::vector<BandStats> stats = timings.time("stats", [&] { return band_stats(ctx, cube); });
    if (!common.json) return print_info(input, format, cube, stats);
    nlohmann::json j = info_json(input, format, cube, stats);
    emit_json(common, j, timings);
}

}  // namespace

Action add_info(CLI::App& root) {
    struct Args {
        CommonOptions common;
        std::string input;
    };
    auto args = std::make_shared<Args>();
    CLI::App* app = root.add_subcommand("info", "Show shape, element type, layout, per-band min/max/mean and wavelengths");
    app->footer("Example: cubekit info data/samson/samson_1.img\n         cubekit info scene.mat --var data --json");
    app->add_option("IN", args->input, "cube or image (ENVI, .npy, .mat, PNG, PGM/PPM, JPEG, GDAL formats)")->required();
    add_common_flags(*app, args->common);
    return [args] { info_command(args->common, args->input); };
}

}  // namespace cubekit::cli
