#pragma once
// Checks for CUDA runtime calls and kernel launches (CUDA translation units only).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/cuda_backend.hpp"  // keep_pool_memory, device_free_bytes
#include "cubekit/context.hpp"
#include "cubekit/error.hpp"

namespace cubekit::detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* what) {
    (void)cudaGetLastError();  // a failed call leaves its error for the next launch check to misreport
    const std::string message = std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
    if (err == cudaErrorMemoryAllocation) throw OutOfMemory(message);
    throw DeviceError(message);
}

inline void check_launch(const Context& ctx, const char* kernel, dim3 grid, dim3 block) {
    cudaError_t err = cudaPeekAtLastError();
    if (err == cudaSuccess && ctx.debug_sync()) {
        ctx.log(std::string("launch ") + kernel);
        err = cudaStreamSynchronize(static_cast<cudaStream_t>(ctx.cuda_stream()));
    }
    if (err != cudaSuccess) {
        (void)cudaGetLastError();  // clear a sticky launch error so later calls report their own
        const std::string where = std::string(kernel) + ": launch failed (grid " + std::to_string(grid.x) + "x" +
                                  std::to_string(grid.y) + "x" + std::to_string(grid.z) + ", block " +
                                  std::to_string(block.x) + "x" + std::to_string(block.y) + "x" +
                                  std::to_string(block.z) + ")";
        throw_cuda_error(err, where.c_str());
    }
}

inline cudaStream_t stream_of(const Context& ctx) { return static_cast<cudaStream_t>(ctx.cuda_stream()); }

/// Copies `bytes` (≤ 64 KiB) of device memory to `host` through a per-thread pinned buffer and waits
/// for the context's stream; returns false (nothing copied) for larger sizes or when pinned memory
/// is refused. For flags, counts and other small read-backs.
bool read_small(const Context& ctx, const void* device, void* host, std::size_t bytes);


}  // namespace cubekit::detail

/// Throws DeviceError (OutOfMemory for allocation failures) naming the call when it fails.
#define CUBEKIT_CUDA_CHECK(call)                                                   \
    do {                                                                           \
        const cudaError_t cubekit_err_ = (call);                                   \
        if (cubekit_err_ != cudaSuccess) ::cubekit::detail::throw_cuda_error(cubekit_err_, #call); \
    } while (0)

/// After every launch: turns cudaPeekAtLastError() into a DeviceError naming kernel, grid and
/// block; with CUBEKIT_SYNC=1 also synchronizes so a fault names its kernel.
#define CUBEKIT_CHECK_LAUNCH(ctx, kernel, grid, block) ::cubekit::detail::check_launch((ctx), (kernel), (grid), (block))
