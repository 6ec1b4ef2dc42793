#pragma once
// Device helpers shared by the CUDA k-means translation units (cuda.cu, prepare_cuda.cu,
// kmeanspp_cuda.cu): the block size, the pixel accessor of a pass and typed pointers into buffers
// (the helpers other families share too are in core/cuda_helpers.cuh).
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.hpp"
#include "core/cuda_helpers.cuh"
#include "cubekit/buffer.hpp"
#include "kmeans/kmeans_math.hpp"

namespace cubekit::detail {
namespace {

using km::i128;
using u64 = unsigned long long;

constexpr int kBlock = 256;

template <typename X>
X* typed(DeviceBuffer& b) { return static_cast<X*>(b.data()); }
template <typename X>
const X* typed(const DeviceBuffer& b) { return static_cast<const X*>(b.data()); }

// div_up, sm_count, atomic_add_i128, read_i128, block_sum: core/cuda_helpers.cuh.

// Pixel i of a pass over a dense BIP image: raster index idx[i] when some pixels are excluded,
// else i itself.
template <typename T>
struct Pixels {
    const T* x;
    const std::int64_t* idx;
    int m;
    __device__ const T* operator()(std::int64_t i) const { return x + (idx ? idx[i] : i) * m; }
    __device__ std::int64_t raster(std::int64_t i) const { return idx ? idx[i] : i; }
};

}  // namespace
}  // namespace cubekit::detail
