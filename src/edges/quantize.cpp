// E1 (spec edges.md §3.1): any cube to 0..255 per band (or globally) by min-max, on the CPU, read
// through the view's strides; the front doors of quantize_to_u8 and quantize_to_u8_into.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/outputs.hpp"
#include "cubekit/edges.hpp"
#include "cubekit/error.hpp"
#include "edges/edges_internal.hpp"

namespace cubekit {
namespace detail {

namespace {

struct Range {
    double lo = std::numeric_limits<double>::infinity();
    double hi = -std::numeric_limits<double>::infinity();
    void add(const Range& o) { lo = std::min(lo, o.lo), hi = std::max(hi, o.hi); }
};

// The finite range of each band, from the samples in raster order; the loops run in the view's
// memory order (spectra contiguous: across the bands, one running range per band; rows contiguous:
// along the row). Each range is exact: a minimum or maximum does not round.
template <typename T>
void add_row_ranges(const StridedView<const T>& v, int y, Range* r) {
    const int W = v.width, B = v.bands;
    if (v.strides.b == 1 && v.strides.x != 1) {
        for (int x = 0; x < W; ++x) {
            const T* s = &v(x, y, 0);
            for (int b = 0; b < B; ++b) {
                // Non-finite samples take the value that changes nothing: no branch in the loop.
                const double d = double(s[b]);
                const bool finite = edges::is_finite(d);
                const double lo = finite ? d : r[b].lo, hi = finite ? d : r[b].hi;
                r[b].lo = std::min(r[b].lo, lo);
                r[b].hi = std::max(r[b].hi, hi);
            }
        }
        return;
    }
    for (int b = 0; b < B; ++b) {
        Range& rb = r[b];
        for (int x = 0; x < W; ++x) {
            const double d = double(v(x, y, b));
            if (!edges::is_finite(d)) continue;
            rb.lo = std::min(rb.lo, d);
            rb.hi = std::max(rb.hi, d);
        }
    }
}

// Per band (or, Global, the whole cube's, in every band). Chunks of rows in parallel, each with its
// own ranges, merged in row order: the same values as one scan in raster order.
template <typename T>
std::vector<Range> band_ranges(const Context& ctx, const StridedView<const T>& in, Quantize mode) {
    const int H = in.height, B = in.bands;
    const int chunks = std::max(1, std::min(H, 4 * std::max(ctx.threads(), 1)));
    std::vector<Range> part(std::size_t(chunks) * std::size_t(B), Range{});
    const bool parallel = std::int64_t(in.width) * H * B >= 32768;
#pragma omp parallel for schedule(dynamic) num_threads(ctx.threads()) if (parallel)
    for (int k = 0; k < chunks; ++k)
        for (int y = int(std::int64_t(H) * k / chunks); y < int(std::int64_t(H) * (k + 1) / chunks); ++y)
            add_row_ranges(in, y, &part[std::size_t(k) * std::size_t(B)]);
    std::vector<Range> ranges(part.begin(), part.begin() + B);
    for (int k = 1; k < chunks; ++k)
        for (int b = 0; b < B; ++b) ranges[std::size_t(b)].add(part[std::size_t(k) * std::size_t(B) + std::size_t(b)]);
    if (mode == Quantize::Global) {
        Range all;
        for (const Range& r : ranges) all.add(r);
        std::fill(ranges.begin(), ranges.end(), all);
    }
    return ranges;
}

// edges::quantize_value(v, lo, hi), written so that the loops over samples vectorise (a select
// between two values with an arithmetic operation in one arm is not if-converted under
// -ftrapping-math): a sample that maps to 0 (not finite, or a band without lo < hi) is replaced by
// the band's `lo` before the arithmetic, whose result is then 0.5; else the same operations in the
// same order, span = hi − lo. A finite sample lies in [lo, hi] (the band's finite extremes), so
// t ≥ 0.5 and the conversion's truncation is the floor.
inline std::uint8_t quantize_sample(double v, double lo, double span, bool in_range) {
    const bool use = in_range & (v - v == 0.0);  // v − v = 0 exactly when v is finite
    const double u = use ? v : lo;
    const double t = (u - lo) * 255.0 / span + 0.5;
    return std::uint8_t(int(t));
}

// Per band: lo, span and in_range = hi > lo; a band without lo < hi gets lo = 0 and span = 1 (any
// finite lo and positive span make its replaced samples 0).
struct BandScale {
    std::vector<double> lo, span;
    std::vector<std::uint8_t> in_range;
    explicit BandScale(const std::vector<Range>& r) {
        for (const Range& b : r) {
            const bool ok = b.hi > b.lo;
            lo.push_back(ok ? b.lo : 0.0), span.push_back(ok ? b.hi - b.lo : 1.0), in_range.push_back(ok);
        }
    }
};

// Row y of every band, in the input's memory order.
template <typename T>
void quantize_row(const StridedView<const T>& in, const StridedView<std::uint8_t>& out, const BandScale& k, int y) {
    const int W = in.width, B = in.bands;
    const double *lo = k.lo.data(), *span = k.span.data();
    const std::uint8_t* ok = k.in_range.data();
    if (in.strides.b == 1 && in.strides.x != 1) {  // spectra contiguous: along the bands
        const std::int64_t ob = out.strides.b;
        for (int x = 0; x < W; ++x) {
            const T* s = &in(x, y, 0);
            std::uint8_t* o = &out(x, y, 0);
            if (ob == 1)
                for (int b = 0; b < B; ++b) o[b] = quantize_sample(double(s[b]), lo[b], span[b], ok[b]);
            else
                for (int b = 0; b < B; ++b) o[b * ob] = quantize_sample(double(s[b]), lo[b], span[b], ok[b]);
        }
        return;
    }
    const std::int64_t ix = in.strides.x, ox = out.strides.x;
    for (int b = 0; b < B; ++b) {
        const T* s = &in(0, y, b);
        std::uint8_t* o = &out(0, y, b);
        const double l = lo[b], d = span[b];
        const bool r = ok[b];
        if (ix == 1 && ox == 1)
            for (int x = 0; x < W; ++x) o[x] = quantize_sample(double(s[x]), l, d, r);
        else
            for (int x = 0; x < W; ++x) o[x * ox] = quantize_sample(double(s[x * ix]), l, d, r);
    }
}

template <typename T>
void quantize_typed(const Context& ctx, const StridedView<const T>& in, const StridedView<std::uint8_t>& out,
                    Quantize mode) {
    quantize_scaled(ctx, in, out, BandScale(band_ranges(ctx, in, mode)));
}

template <typename T>
void quantize_scaled(const Context& ctx, const StridedView<const T>& in, const StridedView<std::uint8_t>& out,
                     const BandScale& scale) {
#pragma omp parallel for schedule(static) num_threads(ctx.threads()) if (std::int64_t(in.width) * in.height * in.bands >= 32768)
    for (int y = 0; y < in.height; ++y) quantize_row(in, out, scale, y);
}

void check_quantize_output(const Context& ctx, const CubeView& cube, const MutableCubeView& out) {
    check_output_memory(ctx, out, "quantize_to_u8_into: out is");
    check_output_shape(out, cube.width(), cube.height(), cube.bands(), DType::U8, "quantize_to_u8_into: out is");
}

}  // namespace

void quantize_cpu(const Context& ctx, const CubeView& cube, const MutableCubeView& out, Quantize mode) {
    if (cube.dtype() == DType::U8) {  // used as it is (spec §3.1)
        copy_cube(ctx, cube, out);
        return;
    }
    visit_dtype(cube.dtype(), [&](auto tag) { quantize_typed(ctx, cube.typed<decltype(tag)>(), out.typed<std::uint8_t>(), mode); });
}

void band_ranges_cpu(const Context& ctx, const CubeView& cube, std::vector<double>& lo, std::vector<double>& hi) {
    visit_dtype(cube.dtype(), [&](auto tag) {
        const std::vector<Range> r = band_ranges(ctx, cube.typed<decltype(tag)>(), Quantize::PerBand);
        lo.clear(), hi.clear();
        for (const Range& b : r) lo.push_back(b.lo), hi.push_back(b.hi);
    });
}

void quantize_with_ranges_cpu(const Context& ctx, const CubeView& cube, const MutableCubeView& out,
                              const std::vector<double>& lo, const std::vector<double>& hi) {
    std::vector<Range> r(lo.size());
    for (std::size_t b = 0; b < lo.size(); ++b) r[b] = {lo[b], hi[b]};
    const BandScale scale(r);
    visit_dtype(cube.dtype(), [&](auto tag) { quantize_scaled(ctx, cube.typed<decltype(tag)>(), out.typed<std::uint8_t>(), scale); });
}

Cube quantize_to_u8_cpu(const Context& ctx, const CubeView& cube, Quantize mode) {
    Cube out(cube.width(), cube.height(), cube.bands(), DType::U8, Layout::BSQ);
    quantize_cpu(ctx, cube, out, mode);
    return out;
}

}  // namespace detail

void quantize_to_u8_into(const Context& ctx, const CubeView& cube, const MutableCubeView& out, Quantize mode) {
    if (cube.empty()) throw InvalidInput("quantize_to_u8_into: the cube is empty");
    detail::check_quantize_output(ctx, cube, out);
    if (ctx.is_cuda()) {
        const CubeInLayout in(ctx, cube, Layout::BSQ, Memory::Device);
        detail::quantize_cuda(ctx, in.view(), out, mode);  // a converted copy is freed stream-ordered
        return;
    }
    std::optional<CubeInLayout> host;
    if (cube.on_device()) host.emplace(ctx, cube, Layout::BSQ, Memory::Host);
    detail::quantize_cpu(ctx, host ? host->view() : cube, out, mode);
}

Cube quantize_to_u8(const Context& ctx, const CubeView& cube, Quantize mode) {
    if (cube.empty()) throw InvalidInput("quantize_to_u8: the cube is empty");
    return detail::host_result(ctx, {cube.width(), cube.height(), cube.bands(), DType::U8, Layout::BSQ},
                               [&](const MutableCubeView& out) { quantize_to_u8_into(ctx, cube, out, mode); });
}

}  // namespace cubekit
