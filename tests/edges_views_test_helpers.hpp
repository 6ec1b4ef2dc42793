#pragma once
// What the view tests of the edges, labels and PCA families share (CPU and GPU): a cube embedded
// as a window of a larger one whose margins hold other values (so a read outside the window
// changes the result), poisoned outputs, the message of a refused call.
#include <cstdint>
#include <string>

#include "cubekit/cube.hpp"
#include "cubekit/error.hpp"
#include "testing.hpp"

namespace cubekit::edges_views {

constexpr int kMargin = 3;

/// A larger cube in `layout` (margins random from `seed`, in [lo, hi]) holding `cube` at
/// (kMargin, kMargin), and the window view of it. Moving the struct keeps the view valid.
struct HostWindow {
    Cube whole;
    CubeView view;
};
inline HostWindow host_window(const Cube& cube, Layout layout, std::uint64_t seed, double lo, double hi) {
    HostWindow w;
    w.whole = testing::random_cube(cube.width() + 2 * kMargin, cube.height() + 2 * kMargin, cube.bands(), cube.dtype(),
                                   seed ^ 0x5eedu, lo, hi, layout);
    copy_cube(testing::cpu_context(), cube, w.whole.mutable_view().window(kMargin, kMargin, cube.width(), cube.height()));
    w.view = w.whole.view().window(kMargin, kMargin, cube.width(), cube.height());
    return w;
}

/// The same on the device: a BSQ (or `layout`) device cube with random margins, and the window.
struct DeviceWindow {
    DeviceCube whole;
    CubeView view;
};
inline DeviceWindow device_window(const Context& gpu, const Cube& cube, Layout layout, std::uint64_t seed, double lo,
                                  double hi) {
    const HostWindow h = host_window(cube, layout, seed, lo, hi);
    DeviceWindow d;
    d.whole = DeviceCube::from_view(gpu, h.whole, layout);
    d.view = d.whole.view().window(kMargin, kMargin, cube.width(), cube.height());
    return d;
}

/// A device cube of `shape` whose every byte is 0xFF (NaN for floats, 255 for u8, −1 for i32),
/// so that an element a call leaves unwritten shows.
inline DeviceCube poisoned(const Context& gpu, const CubeShape& shape) {
    DeviceCube d(gpu, shape);
    d.buffer().fill_bytes(gpu, 0xFF);
    return d;
}

/// A host cube of `shape` filled with 0xFF bytes.
inline Cube poisoned_host(const CubeShape& shape) {
    Cube c(shape.width, shape.height, shape.bands, shape.dtype, shape.layout);
    std::byte* p = c.bytes();
    for (std::size_t i = 0; i < c.num_bytes(); ++i) p[i] = std::byte{0xFF};
    return c;
}

/// The message of the InvalidInput that f() throws, or "(no InvalidInput thrown)".
template <class F>
std::string invalid_input_message(F&& f) {
    try {
        f();
    } catch (const InvalidInput& e) {
        return e.what();
    }
    return "(no InvalidInput thrown)";
}

}  // namespace cubekit::edges_views
