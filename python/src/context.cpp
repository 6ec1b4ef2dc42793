// The module's Context (context.hpp).
#include "context.hpp"

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

PyContext::Call::Call(PyContext& self, py::object progress) : c(self) {
    c.progress_ = std::move(progress);
    c.cancel_ = false;
    c.interrupted_ = false;
}

PyContext::Call::~Call() {
    c.progress_ = py::object();
    // A Ctrl-C seen by a progress check after the last cancellation point: raise it now.
    if (c.interrupted_ && std::uncaught_exceptions() == 0) PyErr_SetInterrupt();
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
