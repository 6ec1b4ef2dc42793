// The module's Context (context.hpp).
#include "context.hpp"

#include <algorithm>
#include <exception>

#include "cubekit/options.hpp"

namespace cubekit::python {

PyContext::PyContext(const std::string& backend, int device, int threads, std::uintptr_t stream) {
    ContextOptions o;
    o.backend = parse_enum<Backend>(backend, "backend");
    o.device = device;
    o.threads = threads;
    o.stream = reinterpret_cast<void*>(stream);
    o.cancel = &cancel_;
    o.progress = [this](std::size_t done, std::size_t total) { on_progress(done, total); };
    check_fields(o, "context");
    ctx_.emplace(std::move(o));
}

PyContext::Call::Call(PyContext& self, py::object progress)
    : c(self), start(std::chrono::steady_clock::now()), before(self.ctx_->transfer_totals()) {
    c.progress_ = std::move(progress);
    c.cancel_ = false;
    c.interrupted_ = false;
}

PyContext::Call::~Call() {
    c.last_total_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const TransferTotals after = c.ctx_->transfer_totals();
    c.last_transfers_ = {.uploads = after.uploads - before.uploads,
                         .upload_bytes = after.upload_bytes - before.upload_bytes,
                         .downloads = after.downloads - before.downloads,
                         .download_bytes = after.download_bytes - before.download_bytes,
                         .upload_ms = after.upload_ms - before.upload_ms,
                         .download_ms = after.download_ms - before.download_ms};
    c.progress_ = py::object();
    // A Ctrl-C seen by a progress check after the last cancellation point: raise it now.
    if (c.interrupted_ && std::uncaught_exceptions() == 0) PyErr_SetInterrupt();
}

py::dict PyContext::last_timings() const {
    const TransferTotals& t = last_transfers_;
    py::dict d;
    d["total_ms"] = last_total_ms_;
    d["upload_ms"] = t.upload_ms;
    d["compute_ms"] = std::max(0.0, last_total_ms_ - t.upload_ms - t.download_ms);
    d["download_ms"] = t.download_ms;
    d["upload_bytes"] = t.upload_bytes;
    d["download_bytes"] = t.download_bytes;
    d["backend"] = std::string(ctx_->backend_name());
    return d;
}

// Called by the library (one thread at a time, without the GIL): Ctrl-C → cancel; then the
// caller's callback, whose exception stops the work and reaches the caller.
void PyContext::on_progress(std::size_t done, std::size_t total) {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) {
        PyErr_Clear();  // re-raised as KeyboardInterrupt: Cancelled, or PyErr_SetInterrupt in ~Call
        interrupted_ = true;
        cancel_ = true;
        return;
    }
    if (progress_ && !progress_.is_none()) progress_(done, total);
}

}  // namespace cubekit::python
