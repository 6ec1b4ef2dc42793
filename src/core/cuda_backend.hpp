#pragma once
// The few device-runtime entry points the core needs. Implemented in cuda_runtime.cpp (built
// with CUDA) or cuda_stub.cpp (CPU-only build, where they report that CUDA is absent).
#include <string>

namespace cubekit::detail {

int cuda_device_count_impl();
/// Selects `device`, creates a non-blocking stream; returns it and fills the device name.
void* open_cuda_stream(int device, std::string& device_name);
void close_cuda_stream(void* stream, int device) noexcept;
void synchronize_stream(void* stream);

}  // namespace cubekit::detail
