#pragma once
// A host vector's copy in device memory (small parameter arrays of the CUDA backends).
#include <algorithm>
#include <vector>

#include "cubekit/buffer.hpp"

namespace cubekit::detail {

/// A device buffer holding `v` (at least one element's room, so an empty vector still gives a valid
/// pointer); waits for the copy.
template <typename T>
DeviceBuffer upload_vector(const Context& ctx, const std::vector<T>& v) {
    DeviceBuffer b(ctx, std::max<std::size_t>(1, v.size()) * sizeof(T));
    if (!v.empty()) b.upload(ctx, v.data(), v.size() * sizeof(T));
    return b;
}

}  // namespace cubekit::detail
