#include "cubekit/context.hpp"

#include <omp.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "core/cuda_backend.hpp"
#include "cubekit/error.hpp"

namespace cubekit {

Context::Context(ContextOptions options) : options_(std::move(options)) {
    if (options_.threads < 0)
        throw InvalidInput("context: threads = " + std::to_string(options_.threads) + "; expected 0 (default) or more");
    threads_ = options_.threads > 0 ? options_.threads : omp_get_max_threads();
    const char* sync = std::getenv("CUBEKIT_SYNC");
    debug_sync_ = sync && std::string(sync) == "1";

    const bool explicit_device = options_.device >= 0;
    const bool want_cuda = options_.backend == Backend::Cuda || (options_.backend == Backend::Auto && explicit_device);
    device_ = explicit_device ? options_.device : 0;
    if (options_.backend == Backend::Cpu) {
        device_name_ = "CPU (" + std::to_string(threads_) + " threads)";
        return;
    }
    const int count = cuda_device_count();
    if (device_ >= count) {
        if (want_cuda) {
            const std::string why = built_with_cuda() ? std::to_string(count) + " CUDA device(s) visible"
                                                      : "this cubekit was built without CUDA";
            if (explicit_device)
                throw DeviceError("context: device " + std::to_string(device_) + " is not available (" + why + ")");
            throw DeviceError("context: backend cuda: no usable CUDA device (" + why + "); cuda never falls back to the CPU");
        }
        device_name_ = "CPU (" + std::to_string(threads_) + " threads)";
        return;  // Auto without a device: the CPU
    }
    stream_ = detail::open_cuda_stream(device_, device_name_, options_.stream);
    owns_stream_ = options_.stream == nullptr;
    cuda_ = true;
}

Context::~Context() {
    if (stream_ && owns_stream_) detail::close_cuda_stream(stream_, device_);
}

Context::Context(Context&& other) noexcept
    : options_(std::move(other.options_)), cuda_(other.cuda_), device_(other.device_), threads_(other.threads_),
      debug_sync_(other.debug_sync_), device_name_(std::move(other.device_name_)),
      stream_(std::exchange(other.stream_, nullptr)), owns_stream_(other.owns_stream_),
      transfers_(other.transfer_totals()) {}

Context& Context::operator=(Context&& other) noexcept {
    if (this != &other) {
        if (stream_ && owns_stream_) detail::close_cuda_stream(stream_, device_);
        options_ = std::move(other.options_);
        owns_stream_ = other.owns_stream_;
        cuda_ = other.cuda_;
        device_ = other.device_;
        threads_ = other.threads_;
        debug_sync_ = other.debug_sync_;
        device_name_ = std::move(other.device_name_);
        stream_ = std::exchange(other.stream_, nullptr);
        transfers_ = other.transfer_totals();
    }
    return *this;
}

void Context::synchronize() const {
    if (stream_) detail::synchronize_stream(stream_);
}

TransferTotals Context::transfer_totals() const {
    const std::lock_guard<std::mutex> lock(transfer_mutex_);
    return transfers_;
}

void Context::count_transfer(bool upload, std::size_t bytes, double ms) const {
    const std::lock_guard<std::mutex> lock(transfer_mutex_);
    if (upload) ++transfers_.uploads, transfers_.upload_bytes += bytes, transfers_.upload_ms += ms;
    else ++transfers_.downloads, transfers_.download_bytes += bytes, transfers_.download_ms += ms;
}

void Context::log(std::string_view message) const {
    if (options_.log) options_.log(message);
}

void Context::progress(std::size_t done, std::size_t total) const {
    if (!options_.progress) return;
    const std::lock_guard<std::mutex> lock(progress_mutex_);
    options_.progress(done, total);
}

void Context::check_cancelled(std::string_view where) const {
    if (cancel_requested()) throw Cancelled(std::string(where) + ": cancelled");
}

int Context::cuda_device_count() { return detail::cuda_device_count_impl(); }

std::size_t Context::device_free_bytes() const { return cuda_ ? detail::device_free_bytes(device_) : 0; }
int Context::device_of_pointer(const void* pointer) { return detail::device_of_pointer_impl(pointer); }

bool Context::built_with_cuda() {
#ifdef CUBEKIT_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

}  // namespace cubekit
