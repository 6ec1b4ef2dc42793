#pragma once
/// Host and device memory owned by RAII types. No raw cudaMalloc/free outside these.
/// A buffer may also borrow a caller's memory (borrow()): it then frees nothing.
#include <cstddef>
#include <cstdint>
#include <memory>

namespace cubekit {

class Context;

/// Process-wide counters of the buffers allocated since the start (borrowed ones excluded), so a
/// test or a curious user can see that a call made no copy of its input.
struct MemoryCounters {
    std::uint64_t host_allocations = 0, host_bytes = 0;
    std::uint64_t device_allocations = 0, device_bytes = 0;
    std::uint64_t pinned_allocations = 0, pinned_bytes = 0;
};
MemoryCounters memory_counters();

namespace detail {
/// HostBuffer's deleter: frees owned memory, leaves borrowed memory alone.
struct HostFree {
    bool owned = true;
    void operator()(std::byte* p) const;
};
}  // namespace detail

/// Host memory, 64-byte aligned, uninitialised on allocation. Movable, not copyable
/// (use clone()).
class HostBuffer {
public:
    HostBuffer() = default;
    explicit HostBuffer(std::size_t bytes);
    HostBuffer(HostBuffer&&) noexcept = default;
    HostBuffer& operator=(HostBuffer&&) noexcept = default;
    /// A buffer over a caller's memory; nothing is freed.
    static HostBuffer borrow(void* data, std::size_t bytes);

    bool borrowed() const { return data_ && !data_.get_deleter().owned; }
    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    std::byte* data() { return data_.get(); }
    const std::byte* data() const { return data_.get(); }
    HostBuffer clone() const;

private:
    using Free = detail::HostFree;
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
    /// A buffer over a caller's device memory on `device`; nothing is freed.
    static DeviceBuffer borrow(void* data, std::size_t bytes, int device);

    bool borrowed() const { return !owned_; }
    int device() const { return device_; }
    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    void* data() { return data_; }
    const void* data() const { return data_; }

    /// Copies `bytes` from host to this buffer / from this buffer to host, on the context's
    /// stream, and waits for the copy.
    void upload(const Context& ctx, const void* host, std::size_t bytes);
    void download(const Context& ctx, void* host, std::size_t bytes) const;
    /// The same without waiting: the host memory must stay valid (and, for a download, unread)
    /// until the stream reaches the copy (ctx.synchronize()). Asynchronous with the host only
    /// for pinned memory (PinnedBuffer); pageable memory makes the copy synchronous.
    void upload_async(const Context& ctx, const void* host, std::size_t bytes);
    void download_async(const Context& ctx, void* host, std::size_t bytes) const;
    /// Fills every byte with `value` (tests poison outputs with 0xFF: NaN for floats).
    void fill_bytes(const Context& ctx, unsigned char value);

private:
    void release() noexcept;
    void* data_ = nullptr;
    std::size_t size_ = 0;
    void* stream_ = nullptr;  // cudaStream_t it was allocated on
    int device_ = 0;
    bool owned_ = true;
};

/// Page-locked host memory (cudaMallocHost): host↔device copies from it run at full PCIe speed
/// (≈ 55 GB/s on the H100 machine against ≈ 15 for pageable memory) and asynchronously.
/// Throws OutOfMemory when the system refuses, DeviceError when built without CUDA.
class PinnedBuffer {
public:
    PinnedBuffer() = default;
    explicit PinnedBuffer(std::size_t bytes);
    ~PinnedBuffer();
    PinnedBuffer(PinnedBuffer&& other) noexcept;
    PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;

    std::size_t size() const { return size_; }
    std::byte* data() { return data_; }
    const std::byte* data() const { return data_; }

private:
    void release() noexcept;
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace cubekit
