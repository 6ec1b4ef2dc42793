// Device runtime pieces of the core: device discovery, streams and DeviceBuffer.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda_backend.hpp"
#include "core/cuda_check.hpp"
#include "core/memory_counters.hpp"
#include "cubekit/buffer.hpp"
#include "cubekit/context.hpp"

namespace cubekit {
namespace detail {

int cuda_device_count_impl() {
    int count = 0;
    // No driver or no device is not an error here: the caller decides (Auto → CPU).
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return count;
}

void keep_pool_memory(const Context& ctx, std::size_t bytes) {
    cudaMemPool_t pool = nullptr;
    CUBEKIT_CUDA_CHECK(cudaDeviceGetMemPool(&pool, ctx.device()));
    std::uint64_t threshold = 0, used = 0;
    CUBEKIT_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    CUBEKIT_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
    if (threshold >= used + bytes) return;
    threshold = used + bytes;  // what others hold now, plus this call's scratch
    CUBEKIT_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
}

std::size_t device_free_bytes(int device) {
    CUBEKIT_CUDA_CHECK(cudaSetDevice(device));
    std::size_t free = 0, total = 0;
    CUBEKIT_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    // CUBEKIT_DEVICE_FREE_BYTES=N caps what is reported (tests of the paths taken when a scene does not
    // fit a device, without filling an 80 GB GPU).
    static const std::size_t cap = [] {
        const char* text = std::getenv("CUBEKIT_DEVICE_FREE_BYTES");
        return text ? std::size_t(std::strtoull(text, nullptr, 10)) : std::size_t(0);
    }();
    return cap > 0 && cap < free ? cap : free;
}

int device_of_pointer_impl(const void* pointer) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, pointer) != cudaSuccess) {
        (void)cudaGetLastError();  // an unregistered host pointer on old drivers: not an error here
        return -1;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ? a.device : -1;
}

bool is_page_locked(const void* pointer) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, pointer) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return a.type == cudaMemoryTypeHost;
}

namespace {
// cudaGetDeviceProperties queries every attribute (slow: it is called for each Context, and the tile
// runners make a Context per worker and pass); the name is read once per device.
std::string device_name_of(int device) {
    static std::mutex mutex;
    static std::map<int, std::string> names;
    const std::lock_guard lock(mutex);
    if (const auto it = names.find(device); it != names.end()) return it->second;
    cudaDeviceProp prop{};
    CUBEKIT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    return names[device] = prop.name;
}
}  // namespace

void* open_cuda_stream(int device, std::string& device_name, void* borrowed) {
    CUBEKIT_CUDA_CHECK(cudaSetDevice(device));
    device_name = device_name_of(device);
    if (borrowed) return borrowed;
    cudaStream_t stream = nullptr;
    CUBEKIT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    return stream;
}

void close_cuda_stream(void* stream, int device) noexcept {
    cudaSetDevice(device);
    cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
    cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}

void synchronize_stream(void* stream) {
    CUBEKIT_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

}  // namespace detail

namespace {
// "cannot allocate 1.23 GB (1234567890 bytes) on device 0: 0.80 GB of 79.20 GB free".
std::string out_of_device_memory(std::size_t bytes, int device) {
    const auto gb = [](std::size_t b) {
        char s[32];
        std::snprintf(s, sizeof s, "%.2f GB", double(b) / 1e9);
        return std::string(s);
    };
    std::string said = "cannot allocate " + gb(bytes) + " (" + std::to_string(bytes) + " bytes) on device " + std::to_string(device);
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) == cudaSuccess)
        said += ": " + gb(free) + " of " + gb(total) + " free";
    else
        (void)cudaGetLastError();
    return said;
}
}  // namespace

DeviceBuffer::DeviceBuffer(const Context& ctx, std::size_t bytes) {
    if (!ctx.is_cuda()) throw DeviceError("DeviceBuffer: the context runs on the CPU backend");
    device_ = ctx.device();
    stream_ = ctx.cuda_stream();
    if (bytes == 0) return;
    CUBEKIT_CUDA_CHECK(cudaSetDevice(device_));
    const cudaError_t err = detail::device_allocation_must_fail()
                                ? cudaErrorMemoryAllocation
                                : cudaMallocAsync(&data_, bytes, static_cast<cudaStream_t>(stream_));
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        data_ = nullptr;
        if (err == cudaErrorMemoryAllocation) throw OutOfMemory(out_of_device_memory(bytes, device_));
        detail::throw_cuda_error(err, "cudaMallocAsync");
    }
    size_ = bytes;
    detail::count_allocation(detail::MemoryKind::Device, bytes);
}

DeviceBuffer DeviceBuffer::borrow(void* data, std::size_t bytes, int device) {
    DeviceBuffer b;
    b.data_ = data;
    b.size_ = bytes;
    b.device_ = device;
    b.owned_ = false;
    return b;
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      stream_(other.stream_), device_(other.device_), owned_(other.owned_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        stream_ = other.stream_;
        device_ = other.device_;
        owned_ = other.owned_;
    }
    return *this;
}

void DeviceBuffer::release() noexcept {
    if (data_ && owned_) {
        cudaSetDevice(device_);
        cudaFreeAsync(data_, static_cast<cudaStream_t>(stream_));
    }
    data_ = nullptr;
    size_ = 0;
    owned_ = true;
}

void DeviceBuffer::upload(const Context& ctx, const void* host, std::size_t bytes) {
    const auto t0 = std::chrono::steady_clock::now();
    upload_async(ctx, host, bytes);
    ctx.synchronize();
    ctx.count_transfer(true, bytes, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

namespace {
// Small read-backs (flags, counts, thresholds) go through pinned buffers: a pageable copy makes the
// driver stage it synchronously, which cost the public calls 10–50 µs each (bench/results/
// 2026-11-25-h100.md). The buffers are lent from one process-wide pool, so their number is the most
// read-backs ever in flight at once (a buffer per thread, as before, pinned 64 KiB for every worker
// thread the tile runners ever started: hundreds in a test process).
constexpr std::size_t kSmallReadback = 64 * 1024;

class ReadbackPool {
public:
    std::byte* take() {
        {
            const std::lock_guard lock(mutex_);
            if (!idle_.empty()) {
                std::byte* p = idle_.back();
                idle_.pop_back();
                return p;
            }
        }
        void* p = nullptr;
        if (cudaMallocHost(&p, kSmallReadback) != cudaSuccess) {
            (void)cudaGetLastError();
            return nullptr;  // pinned memory refused: pageable copies
        }
        return static_cast<std::byte*>(p);
    }
    void give_back(std::byte* p) {
        const std::lock_guard lock(mutex_);
        idle_.push_back(p);
    }

private:
    std::mutex mutex_;
    std::vector<std::byte*> idle_;  // kept for the process: freeing at exit races the runtime's teardown
};

ReadbackPool& readback_pool() {
    static ReadbackPool* pool = new ReadbackPool;  // never destroyed (see above)
    return *pool;
}
}  // namespace

bool detail::read_small(const Context& ctx, const void* device, void* host, std::size_t bytes) {
    if (bytes > kSmallReadback) return false;
    std::byte* staging = readback_pool().take();
    if (!staging) return false;
    struct Lent {
        std::byte* p;
        ~Lent() { readback_pool().give_back(p); }
    } lent{staging};
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(staging, device, bytes, cudaMemcpyDeviceToHost, detail::stream_of(ctx)));
    ctx.synchronize();
    std::memcpy(host, staging, bytes);
    return true;
}

void DeviceBuffer::download(const Context& ctx, void* host, std::size_t bytes) const {
    ctx.synchronize();  // timed from when the work queued before it is done
    const auto t0 = std::chrono::steady_clock::now();
    if (bytes > size_) throw InvalidInput("DeviceBuffer::download: " + std::to_string(bytes) + " bytes from a buffer of " + std::to_string(size_));
    CUBEKIT_CUDA_CHECK(cudaSetDevice(device_));
    if (bytes == 0 || detail::read_small(ctx, data_, host, bytes)) {
        // done
    } else {
        download_async(ctx, host, bytes);
        ctx.synchronize();
    }
    ctx.count_transfer(false, bytes, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

void DeviceBuffer::upload_async(const Context& ctx, const void* host, std::size_t bytes) {
    if (bytes > size_) throw InvalidInput("DeviceBuffer::upload: " + std::to_string(bytes) + " bytes into a buffer of " + std::to_string(size_));
    if (bytes == 0) return;
    CUBEKIT_CUDA_CHECK(cudaSetDevice(device_));
    detail::upload_flat(ctx, data_, host, bytes);
}

void DeviceBuffer::download_async(const Context& ctx, void* host, std::size_t bytes) const {
    if (bytes > size_) throw InvalidInput("DeviceBuffer::download: " + std::to_string(bytes) + " bytes from a buffer of " + std::to_string(size_));
    if (bytes == 0) return;
    CUBEKIT_CUDA_CHECK(cudaSetDevice(device_));  // the stream's device: another device's stream is refused
    CUBEKIT_CUDA_CHECK(cudaMemcpyAsync(host, data_, bytes, cudaMemcpyDeviceToHost, detail::stream_of(ctx)));
}

PinnedBuffer::PinnedBuffer(std::size_t bytes) {
    if (bytes == 0) return;
    void* p = nullptr;
    const cudaError_t err = detail::device_allocation_must_fail() ? cudaErrorMemoryAllocation : cudaMallocHost(&p, bytes);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        if (err == cudaErrorMemoryAllocation)
            throw OutOfMemory("PinnedBuffer: cannot page-lock " + std::to_string(bytes) + " bytes of host memory");
        detail::throw_cuda_error(err, "cudaMallocHost");
    }
    data_ = static_cast<std::byte*>(p);
    size_ = bytes;
    detail::count_allocation(detail::MemoryKind::Pinned, bytes);
}

PinnedBuffer::~PinnedBuffer() { release(); }

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

void PinnedBuffer::release() noexcept {
    if (data_) cudaFreeHost(data_);
    data_ = nullptr;
    size_ = 0;
}

void DeviceBuffer::fill_bytes(const Context& ctx, unsigned char value) {
    if (size_ == 0) return;
    CUBEKIT_CUDA_CHECK(cudaMemsetAsync(data_, value, size_, detail::stream_of(ctx)));
}

}  // namespace cubekit
