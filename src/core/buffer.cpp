#include "cubekit/buffer.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "cubekit/error.hpp"

namespace cubekit {

namespace {
constexpr std::size_t kHostAlignment = 64;  // a cache line; also enough for AVX-512 loads
}

void HostBuffer::Free::operator()(std::byte* p) const { std::free(p); }

HostBuffer::HostBuffer(std::size_t bytes) : size_(bytes) {
    if (bytes == 0) return;
    const std::size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    void* p = std::aligned_alloc(kHostAlignment, rounded);
    if (!p) throw std::bad_alloc();
    data_.reset(static_cast<std::byte*>(p));
}

HostBuffer HostBuffer::clone() const {
    HostBuffer copy(size_);
    if (size_) std::memcpy(copy.data(), data(), size_);
    return copy;
}

}  // namespace cubekit
