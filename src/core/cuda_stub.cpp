// CPU-only build: the device entry points report that CUDA is absent.
#include "core/cuda_backend.hpp"
#include "cubekit/buffer.hpp"
#include "cubekit/error.hpp"

namespace cubekit {
namespace detail {

int cuda_device_count_impl() { return 0; }
int device_of_pointer_impl(const void*) { return -1; }
void* open_cuda_stream(int, std::string&, void*) { throw DeviceError("context: this cubekit was built without CUDA"); }
void close_cuda_stream(void*, int) noexcept {}
void synchronize_stream(void*) {}
std::size_t device_free_bytes(int) { return 0; }
bool is_page_locked(const void*) { return false; }
void keep_pool_memory(const Context&, std::size_t) {}
void copy_cube_cuda(const Context&, const CubeView&, const MutableCubeView&) {
    throw DeviceError("copy_cube: device memory needs CUDA; this cubekit was built without it");
}

}  // namespace detail

DeviceBuffer::DeviceBuffer(const Context&, std::size_t) {
    throw DeviceError("DeviceBuffer: this cubekit was built without CUDA");
}
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&&) noexcept = default;
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&&) noexcept = default;
void DeviceBuffer::release() noexcept {}
void DeviceBuffer::upload(const Context&, const void*, std::size_t) {
    throw DeviceError("DeviceBuffer: this cubekit was built without CUDA");
}
void DeviceBuffer::download(const Context&, void*, std::size_t) const {
    throw DeviceError("DeviceBuffer: this cubekit was built without CUDA");
}
DeviceBuffer DeviceBuffer::borrow(void*, std::size_t, int) {
    throw DeviceError("DeviceBuffer: this cubekit was built without CUDA");
}
void DeviceBuffer::upload_async(const Context&, const void*, std::size_t) {
    throw DeviceError("DeviceBuffer: this cubekit was built without CUDA");
}
void DeviceBuffer::download_async(const Context&, void*, std::size_t) const {
    throw DeviceError("DeviceBuffer: this cubekit was built without CUDA");
}
PinnedBuffer::PinnedBuffer(std::size_t) { throw DeviceError("PinnedBuffer: this cubekit was built without CUDA"); }
PinnedBuffer::~PinnedBuffer() = default;
PinnedBuffer::PinnedBuffer(PinnedBuffer&&) noexcept = default;
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&&) noexcept = default;
void PinnedBuffer::release() noexcept {}
void DeviceBuffer::fill_bytes(const Context&, unsigned char) {
    throw DeviceError("DeviceBuffer: this cubekit was built without CUDA");
}

}  // namespace cubekit
