#pragma once
/// Context: where and how cubekit runs — backend, CUDA device and stream, host threads,
/// progress and cancellation, logging. Every algorithm takes one; there is no global state.
///
///     cubekit::Context cpu({.backend = cubekit::Backend::Cpu, .threads = 4});
///     cubekit::Context gpu({.backend = cubekit::Backend::Cuda, .device = 0});  // throws DeviceError if none
#include <atomic>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "cubekit/options.hpp"

namespace cubekit {

/// Auto = the CUDA device (ContextOptions::device, default 0) when the library was built with
/// CUDA and such a device exists, else the CPU. Cuda never falls back to the CPU.
enum class Backend { Auto, Cpu, Cuda };

template <>
struct EnumNames<Backend> {
    static constexpr EnumName<Backend> names[] = {{Backend::Auto, "auto"}, {Backend::Cpu, "cpu"}, {Backend::Cuda, "cuda"}};
    static constexpr EnumName<Backend> aliases[] = {{Backend::Cuda, "gpu"}};
};

struct ContextOptions {
    /// Which implementation runs.
    Backend backend = Backend::Auto;
    /// CUDA device index; -1 = default (0). An explicit index with Backend::Auto requires that
    /// device (DeviceError when it does not exist), as a user who names a device expects.
    int device = -1;
    /// OpenMP threads of the CPU backend; 0 = OpenMP's default.
    int threads = 0;
    /// Called with (done, total) as long work advances; may be empty. Called from one thread at a
    /// time (Context::progress serialises the calls), not necessarily the caller's; cubekit's own
    /// loops report from one thread and end with done == total. It must not call back into the
    /// same Context's progress. It may set the cancellation flag (or throw: the work stops and the
    /// exception reaches the caller).
    std::function<void(std::size_t done, std::size_t total)> progress;
    /// Checked between work items; when it becomes true the work throws Cancelled.
    const std::atomic<bool>* cancel = nullptr;
    /// Receives one-line diagnostics ("rcmg: cuda backend, ..."); may be empty.
    std::function<void(std::string_view)> log;
    /// A caller's cudaStream_t (e.g. CuPy's or PyTorch's current stream) on `device`: work is
    /// queued on it, and the context neither creates nor destroys a stream. nullptr = the
    /// context creates its own non-blocking stream. Ignored by the CPU backend.
    void* stream = nullptr;
};

/// Host ↔ device copies made through a context (copy_cube, DeviceCube::upload/download, the families'
/// own uploads of host inputs and downloads of host outputs): counts, bytes, and the host wall time
/// each took to complete (a download is timed from the moment the work queued before it is done).
struct TransferTotals {
    std::uint64_t uploads = 0, upload_bytes = 0, downloads = 0, download_bytes = 0;
    double upload_ms = 0, download_ms = 0;
};

/// The declarations of ContextOptions' fields (options.hpp); the callbacks and the stream are no flags.
template <class O, class V>
    requires std::same_as<std::remove_const_t<O>, ContextOptions>
void visit_fields(O& o, V&& visit) {
    visit(o.backend, Field{.name = "backend", .doc = "auto (CUDA device if any, else CPU), cpu, or cuda (never falls back)"});
    visit(o.device, Field{.name = "device", .doc = "CUDA device index (naming one requires it)", .min = 0,
                          .automatic = -1});
    visit(o.threads, Field{.name = "threads", .doc = "CPU threads (0 = all cores)", .min = 0, .max = 4096});
}

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
    /// Bytes of memory free on this context's device now (cudaMemGetInfo); 0 on the CPU backend. A
    /// front end compares it with a call's need to tile a scene that would not fit.
    std::size_t device_free_bytes() const;
    /// True when CUBEKIT_SYNC=1 was set at construction: every launch is followed by a sync.
    bool debug_sync() const { return debug_sync_; }

    /// The host ↔ device copies made through this context so far (see TransferTotals).
    TransferTotals transfer_totals() const;
    /// Adds one copy to the totals (the core's copy paths call it).
    void count_transfer(bool upload, std::size_t bytes, double ms) const;

    void log(std::string_view message) const;
    /// Calls ContextOptions::progress, one call at a time (under a mutex) whatever the thread.
    void progress(std::size_t done, std::size_t total) const;
    /// Throws Cancelled("<where>: cancelled") when the cancellation flag is set. Never call it
    /// inside an OpenMP parallel region (an exception leaving one ends the program): loops use
    /// detail::parallel_for (src/core/parallel.hpp), which checks cancel_requested() instead.
    void check_cancelled(std::string_view where) const;
    /// True when the cancellation flag is set; never throws.
    bool cancel_requested() const noexcept {
        return options_.cancel && options_.cancel->load(std::memory_order_relaxed);
    }

    /// Number of CUDA devices visible (0 when built without CUDA or without a driver).
    static int cuda_device_count();
    /// True when this library was compiled with its CUDA backend.
    static bool built_with_cuda();
    /// The CUDA device whose memory holds `pointer` (device or managed memory), or -1 for host
    /// memory, an unknown pointer or a build without CUDA. For front ends that wrap a caller's
    /// pointer whose device they are not told (a DLPack or __cuda_array_interface__ producer).
    static int device_of_pointer(const void* pointer);

private:
    ContextOptions options_;
    bool cuda_ = false;
    int device_ = 0;
    int threads_ = 1;
    bool debug_sync_ = false;
    std::string device_name_;
    void* stream_ = nullptr;
    bool owns_stream_ = false;
    mutable std::mutex progress_mutex_;  // serialises progress callbacks; each Context has its own (not moved)
    mutable std::mutex transfer_mutex_;  // guards transfers_ (copies may run on several threads); not moved
    mutable TransferTotals transfers_;
};

}  // namespace cubekit
