// E1 (spec edges.md §3.1): any cube to 0..255 per band (or globally) by min-max, on the CPU; the
// front door of quantize_to_u8.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

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

template <typename T>
Range finite_range(const T* v, std::size_t n) {
    Range r;
    for (std::size_t i = 0; i < n; ++i) {
        const double x = double(v[i]);
        if (!std::isfinite(x)) continue;
        r.lo = std::min(r.lo, x);
        r.hi = std::max(r.hi, x);
    }
    return r;
}

}  // namespace

Cube quantize_to_u8_cpu(const Context& ctx, const Cube& cube, Quantize mode) {
    const Cube converted = cube.layout() == Layout::BSQ ? Cube() : cube.to_layout(Layout::BSQ);
    const Cube& bsq = cube.layout() == Layout::BSQ ? cube : converted;
    Cube out(cube.width(), cube.height(), cube.bands(), DType::U8, Layout::BSQ);
    const std::size_t plane = bsq.shape().num_pixels();
    const int B = bsq.bands();
    if (bsq.dtype() == DType::U8) {
        std::memcpy(out.bytes(), bsq.bytes(), bsq.num_bytes());
        return out;
    }
    visit_dtype(bsq.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* in = bsq.data<T>();
        std::uint8_t* q = out.data<std::uint8_t>();
        std::vector<Range> ranges(std::size_t(B), Range{});
#pragma omp parallel for schedule(dynamic) num_threads(ctx.threads())
        for (int b = 0; b < B; ++b) ranges[std::size_t(b)] = finite_range(in + std::size_t(b) * plane, plane);
        if (mode == Quantize::Global) {
            Range all;
            for (const Range& r : ranges) all.add(r);
            std::fill(ranges.begin(), ranges.end(), all);
        }
        const std::int64_t total = std::int64_t(plane) * B;
#pragma omp parallel for schedule(static) num_threads(ctx.threads()) if (total >= 32768)
        for (std::int64_t i = 0; i < total; ++i) {
            const Range& r = ranges[std::size_t(i / std::int64_t(plane))];
            q[i] = edges::quantize_value(double(in[i]), r.lo, r.hi);
        }
    });
    return out;
}

}  // namespace detail

Cube quantize_to_u8(const Context& ctx, const Cube& cube, Quantize mode) {
    if (cube.empty()) throw InvalidInput("quantize: the cube is empty");
    return ctx.is_cuda() ? detail::quantize_to_u8_cuda(ctx, cube, mode) : detail::quantize_to_u8_cpu(ctx, cube, mode);
}

}  // namespace cubekit
