#pragma once
// Reading a cube file a strip of whole rows at a time, top to bottom, within a memory budget: for the
// passes that need every pixel in raster order but not the whole cube at once (a region table's f64
// sums, a classifier's training pixels).
#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include "cubekit/context.hpp"
#include "cubekit/cube.hpp"
#include "cubekit/error.hpp"
#include "cubekit/io.hpp"

namespace cubekit::detail {

/// Calls visit(y0, rows) for the strips of `file`, top to bottom, each read into one buffer of at most
/// `memory_limit` bytes (0 = 256 MiB) in the file's layout; a strip that want(y0, height) declines is
/// not read. Checks cancellation and reports progress (rows done) through ctx. InvalidInput naming
/// `where` when the budget holds no row.
template <class Want, class Visit>
void read_in_strips(const Context& ctx, const CubeFile& file, std::size_t memory_limit, std::string_view where, Want&& want,
                    Visit&& visit) {
    const CubeShape& s = file.shape();
    const std::size_t row_bytes = std::size_t(s.width) * std::size_t(s.bands) * dtype_size(s.dtype);
    const std::size_t budget = memory_limit ? memory_limit : std::size_t(256) << 20;
    if (row_bytes > budget)
        throw InvalidInput(std::string(where) + ": memory_limit = " + std::to_string(budget) + " bytes holds no row of the cube (" +
                           std::to_string(row_bytes) + " bytes a row); raise it");
    const int strip = int(std::min<std::size_t>(std::size_t(s.height), budget / row_bytes));
    Cube rows = Cube::uninitialized(s.width, strip, s.bands, s.dtype, s.layout);
    for (int y0 = 0; y0 < s.height; y0 += strip) {
        const int h = std::min(strip, s.height - y0);
        if (want(y0, h)) {
            const MutableCubeView window = rows.mutable_view().window(0, 0, s.width, h);
            file.read_window(0, y0, s.width, h, window);
            visit(y0, CubeView(window));
        }
        ctx.check_cancelled(where);
        ctx.progress(std::size_t(y0 + h), std::size_t(s.height));
    }
}

}  // namespace cubekit::detail
