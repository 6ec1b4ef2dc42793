#pragma once
// Helpers the benchmarks share.
#include "cubekit/cube.hpp"

namespace cubekit::bench {

// Mirror-tiles `scene` (its first `bands` bands) to width × height: the seams are reflected so the
// tiled cube has no artificial steps.
inline Cube tile_scene(const Cube& scene, int width, int height, int bands, DType dtype) {
    Cube out(width, height, bands, dtype, Layout::BSQ);
    auto mirror = [](int v, int n) {
        const int period = 2 * n, m = v % period;
        return m < n ? m : period - 1 - m;
    };
    for (int b = 0; b < bands; ++b)
        for (int y = 0; y < height; ++y)
            for (int x = 0; x < width; ++x)
                out.set_value(x, y, b, scene.value(mirror(x, scene.width()), mirror(y, scene.height()), b));
    return out;
}

}  // namespace cubekit::bench
