#pragma once
// One sample of a host view of any element type, as double: for the host-side loops that are not
// hot enough to be templated on the element type (metrics, error reports).
#include "cubekit/dtype.hpp"
#include "cubekit/view.hpp"

namespace cubekit::detail {

/// Sample (x, y, b) of a host view as double (exact for every element type).
inline double sample_as_double(const CubeView& view, int x, int y, int b) {
    return visit_dtype(view.dtype(), [&](auto tag) {
        using T = decltype(tag);
        return double(view.typed<T>()(x, y, b));
    });
}

}  // namespace cubekit::detail
