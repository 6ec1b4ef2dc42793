#pragma once
/// Context: where and how cubekit runs — backend, CUDA device and stream, host threads,
/// progress and cancellation, logging. Every algorithm takes one; there is no global state.
///
///     cubekit::Context cpu({.backend = cubekit::Backend::Cpu, .threads = 4});
///     cubekit::Context gpu({.backend = cubekit::Backend::Cuda, .device = 0});  // throws DeviceError if none
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace cubekit {

/// Auto = the CUDA device (ContextOptions::device, default 0) when the library was built with
/// CUDA and such a device exists, else the CPU. Cuda never falls back to the CPU.
enum class Backend { Auto, Cpu, Cuda };

std::string_view backend_name(Backend b);                            ///< "auto", "cpu", "cuda"
Backend parse_backend(std::string_view name, std::string_view what = "--backend");

struct ContextOptions {
    /// Which implementation runs.
    Backend backend = Backend::Auto;
    /// CUDA device index; -1 = default (0). An explicit index with Backend::Auto requires that
    /// device (DeviceError when it does not exist), as a user who names a device expects.
    int device = -1;
    /// OpenMP threads of the CPU backend; 0 = OpenMP's default.
    int threads = 0;
    /// Called with (done, total) as long work advances; may be empty.
    std::function<void(std::size_t done, std::size_t total)> progress;
    /// Checked between work items; when it becomes true the work throws Cancelled.
    const std::atomic<bool>* cancel = nullptr;
    /// Receives one-line diagnostics ("rcmg: cuda backend, ..."); may be empty.
    std::function<void(std::string_view)> log;
};

class Context {
public:
    /// Throws DeviceError when Backend::Cuda (or an explicit device) is asked for and no usable
    /// device exists, naming the device index and the number of devices.
    explicit Context(ContextOptions options = {});
    ~Context();
    Context(Context&&) noexcept;
    Context& operator=(Context&&) noexcept;
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    bool is_cuda() const { return cuda_; }
    Backend backend() const { return cuda_ ? Backend::Cuda : Backend::Cpu; }
    std::string_view backend_name() const { return cuda_ ? "cuda" : "cpu"; }
    /// CUDA device index (meaningful when is_cuda()).
    int device() const { return device_; }
    /// "NVIDIA H100 80GB HBM3", or "CPU (N threads)".
    const std::string& device_name() const { return device_name_; }
    /// OpenMP thread count the CPU backend uses (resolved, ≥ 1).
    int threads() const { return threads_; }
    /// The cudaStream_t of this context (nullptr on the CPU backend).
    void* cuda_stream() const { return stream_; }
    /// Waits for all work queued on the stream; throws DeviceError on a device fault.
    void synchronize() const;
    /// True when CUBEKIT_SYNC=1 was set at construction: every launch is followed by a sync.
    bool debug_sync() const { return debug_sync_; }

    void log(std::string_view message) const;
    void progress(std::size_t done, std::size_t total) const;
    /// Throws Cancelled("<where>: cancelled") when the cancellation flag is set.
    void check_cancelled(std::string_view where) const;

    /// Number of CUDA devices visible (0 when built without CUDA or without a driver).
    static int cuda_device_count();
    /// True when this library was compiled with its CUDA backend.
    static bool built_with_cuda();

private:
    ContextOptions options_;
    bool cuda_ = false;
    int device_ = 0;
    int threads_ = 1;
    bool debug_sync_ = false;
    std::string device_name_;
    void* stream_ = nullptr;
};

}  // namespace cubekit
