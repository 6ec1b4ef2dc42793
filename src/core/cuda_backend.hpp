#pragma once
// The few device-runtime entry points the core needs. Implemented in cuda_runtime.cpp (built
// with CUDA) or cuda_stub.cpp (CPU-only build, where they report that CUDA is absent).
#include <string>

#include "cubekit/view.hpp"

namespace cubekit {
class Context;
}

namespace cubekit::detail {

int cuda_device_count_impl();
int device_of_pointer_impl(const void* pointer);
/// Selects `device`, creates a non-blocking stream (or takes the caller's `borrowed` one); returns
/// it and fills the device name.
void* open_cuda_stream(int device, std::string& device_name, void* borrowed = nullptr);
void close_cuda_stream(void* stream, int device) noexcept;
void synchronize_stream(void* stream);
/// Bytes of device memory free on `device` now (cudaMemGetInfo); 0 in a CPU-only build.
std::size_t device_free_bytes(int device);

/// The stream-ordered pool returns memory to the driver at every synchronisation once it holds
/// more than its release threshold (default 0); keeping a call's scratch size lets a caller that
/// synchronises between calls (a benchmark, a loop over scenes, a pass over tiles) reuse it instead of
/// re-mapping it. Nothing in a CPU-only build.
void keep_pool_memory(const Context& ctx, std::size_t bytes);

/// Whether `pointer` is page-locked host memory known to CUDA (cudaMallocHost, cudaHostRegister, a
/// CuPy or PyTorch pinned buffer): the copy engines read and write it directly. False in a CPU build.
bool is_page_locked(const void* pointer);

/// Host ↔ host copy between any strides (OpenMP).
void copy_cube_host(const CubeView& src, const MutableCubeView& dst);
/// Copies where at least one side is in device memory (same shape and type, checked by the
/// caller); complete on return. CPU-only build: throws DeviceError.
void copy_cube_cuda(const Context& ctx, const CubeView& src, const MutableCubeView& dst);

/// Host → device copy of `bytes` contiguous bytes on ctx's stream (CUDA builds only; staged_copy.cpp):
/// large pageable sources go through a ring of pinned chunks filled by ctx.threads() threads. Returns
/// when the source may be reused; the device side completes in stream order.
void upload_flat(const Context& ctx, void* dst, const void* src, std::size_t bytes);

}  // namespace cubekit::detail
