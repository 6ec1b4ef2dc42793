#pragma once
/// Host and device memory owned by RAII types. No raw cudaMalloc/free outside these.
#include <cstddef>
#include <memory>

namespace cubekit {

class Context;

/// Host memory, 64-byte aligned, uninitialised on allocation. Movable, not copyable
/// (use clone()).
class HostBuffer {
public:
    HostBuffer() = default;
    explicit HostBuffer(std::size_t bytes);
    HostBuffer(HostBuffer&&) noexcept = default;
    HostBuffer& operator=(HostBuffer&&) noexcept = default;

    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    std::byte* data() { return data_.get(); }
    const std::byte* data() const { return data_.get(); }
    HostBuffer clone() const;

private:
    struct Free {
        void operator()(std::byte* p) const;
    };
    std::unique_ptr<std::byte[], Free> data_;
    std::size_t size_ = 0;
};

/// Device memory on the Context's device, allocated and freed stream-ordered on its stream.
/// Throws OutOfMemory (naming the size) when the device has too little, DeviceError when the
/// library was built without CUDA.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    DeviceBuffer(const Context& ctx, std::size_t bytes);
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    void* data() { return data_; }
    const void* data() const { return data_; }

    /// Copies `bytes` from host to this buffer / from this buffer to host, on the context's
    /// stream, and waits for the copy.
    void upload(const Context& ctx, const void* host, std::size_t bytes);
    void download(const Context& ctx, void* host, std::size_t bytes) const;
    /// Fills every byte with `value` (tests poison outputs with 0xFF: NaN for floats).
    void fill_bytes(const Context& ctx, unsigned char value);

private:
    void release() noexcept;
    void* data_ = nullptr;
    std::size_t size_ = 0;
    void* stream_ = nullptr;  // cudaStream_t it was allocated on
    int device_ = 0;
};

}  // namespace cubekit
