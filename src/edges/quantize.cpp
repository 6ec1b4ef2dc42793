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

template <typename T>
Range finite_range(const StridedView<const T>& v, int b) {
    Range r;
    for (int y = 0; y < v.height; ++y)
        for (int x = 0; x < v.width; ++x) {
            const double s = double(v(x, y, b));
            if (!std::isfinite(s)) continue;
            r.lo = std::min(r.lo, s);
            r.hi = std::max(r.hi, s);
        }
    return r;
}

template <typename T>
void quantize_typed(const Context& ctx, const StridedView<const T>& in, const StridedView<std::uint8_t>& out,
                    Quantize mode) {
    const int W = in.width, H = in.height, B = in.bands;
    std::vector<Range> ranges(std::size_t(B), Range{});
#pragma omp parallel for schedule(dynamic) num_threads(ctx.threads())
    for (int b = 0; b < B; ++b) ranges[std::size_t(b)] = finite_range(in, b);
    if (mode == Quantize::Global) {
        Range all;
        for (const Range& r : ranges) all.add(r);
        std::fill(ranges.begin(), ranges.end(), all);
    }
    const std::int64_t rows = std::int64_t(H) * B;
#pragma omp parallel for schedule(static) num_threads(ctx.threads()) if (rows * W >= 32768)
    for (std::int64_t row = 0; row < rows; ++row) {
        const int b = int(row / H), y = int(row % H);
        const Range& r = ranges[std::size_t(b)];
        for (int x = 0; x < W; ++x) out(x, y, b) = edges::quantize_value(double(in(x, y, b)), r.lo, r.hi);
    }
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

Cube quantize_to_u8_cpu(const Context& ctx, const CubeView& cube, Quantize mode) {
    Cube out(cube.width(), cube.height(), cube.bands(), DType::U8, Layout::BSQ);
    quantize_cpu(ctx, cube, out, mode);
    return out;
}

}  // namespace detail

void quantize_to_u8_into(const Context& ctx, const CubeView& cube, const MutableCubeView& out, Quantize mode) {
    if (cube.empty()) throw InvalidInput("quantize: the cube is empty");
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
    if (cube.empty()) throw InvalidInput("quantize: the cube is empty");
    return detail::host_result(ctx, {cube.width(), cube.height(), cube.bands(), DType::U8, Layout::BSQ},
                               [&](const MutableCubeView& out) { quantize_to_u8_into(ctx, cube, out, mode); });
}

}  // namespace cubekit
