#pragma once
// The module's Context: a cubekit::Context (backend, device, the caller's CUDA stream, threads)
// that the Python layer caches per thread, plus what one call brings: a progress callback, and
// Ctrl-C turned into cancellation. Every computation runs through run(), which releases the GIL.
#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <optional>

#include "cubekit/context.hpp"

namespace cubekit::python {

namespace py = pybind11;

class PyContext {
public:
    /// backend "auto" | "cpu" | "cuda"; device -1 = default; stream: a cudaStream_t as an integer
    /// (0 = the context's own stream; pass cudaStreamLegacy (1) for the legacy default stream).
    PyContext(const std::string& backend, int device, int threads, std::uintptr_t stream);

    const Context& context() const { return *ctx_; }

    /// Where the last run() spent its time (ms): total (the library call, without the GIL), upload and
    /// download (host ↔ device copies of this call, Context::transfer_totals), compute = the rest, and the
    /// bytes copied each way. For device arrays the call returns when the work is queued: host times.
    py::dict last_timings() const;

    /// Runs f(context) without the GIL, with `progress` (a callable(done, total) or None) called
    /// as the work advances; Ctrl-C cancels (KeyboardInterrupt). Not re-entrant: the Python layer
    /// keeps one PyContext per thread.
    template <class F>
    auto run(py::object progress, F&& f) {
        Call call(*this, std::move(progress));
        py::gil_scoped_release release;
        return f(*ctx_);
    }

private:
    struct Call {
        PyContext& c;
        std::chrono::steady_clock::time_point start;
        TransferTotals before;
        Call(PyContext& self, py::object progress);
        ~Call();
    };
    void on_progress(std::size_t done, std::size_t total);

    std::optional<Context> ctx_;
    py::object progress_;  // the current call's callback; set and cleared with the GIL held
    std::atomic<bool> cancel_{false};
    bool interrupted_ = false;
    double last_total_ms_ = 0;
    TransferTotals last_transfers_;  // of the last call alone
};

}  // namespace cubekit::python
