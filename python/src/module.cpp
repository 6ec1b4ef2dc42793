// The extension module cubekit._cubekit: exceptions, the context, and each family's bindings
// (bind_*.cpp). The public functions, their signatures and docstrings are in python/cubekit/.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "cubekit/buffer.hpp"
#include "cubekit/error.hpp"

namespace py = pybind11;
using namespace cubekit;
using namespace cubekit::python;

#ifndef CUBEKIT_VERSION
#define CUBEKIT_VERSION "0.0.0"
#endif

void cubekit::python::check_out(const char* function, const MutableArrayView& out, int width, int height, int bands,
                                DType dtype) {
    const MutableCubeView& v = out.view;
    const std::string want = "(" + std::to_string(height) + ", " + std::to_string(width) +
                             (bands == 1 ? "" : ", " + std::to_string(bands)) + ") " + std::string(dtype_name(dtype));
    if (v.width() != width || v.height() != height || v.bands() != bands || v.dtype() != dtype ||
        (bands != 1 && out.ndim != 3))
        throw InvalidInput(std::string(function) + ": out is (" + std::to_string(v.height()) + ", " +
                           std::to_string(v.width()) + (out.ndim == 3 ? ", " + std::to_string(v.bands()) : "") + ") " +
                           std::string(dtype_name(v.dtype())) + "; expected " + want);
}

void cubekit::python::bind_core(py::module_& m) {
    py::class_<PyContext>(m, "Context")
        .def(py::init<const std::string&, int, int, std::uintptr_t>(), py::arg("backend") = "auto",
             py::arg("device") = -1, py::arg("threads") = 0, py::arg("stream") = 0)
        .def_property_readonly("backend", [](const PyContext& c) { return std::string(c.context().backend_name()); })
        .def_property_readonly("device", [](const PyContext& c) { return c.context().device(); })
        .def_property_readonly("device_name", [](const PyContext& c) { return c.context().device_name(); })
        .def_property_readonly("threads", [](const PyContext& c) { return c.context().threads(); })
        .def("last_timings", &PyContext::last_timings)
        .def("synchronize", [](const PyContext& c) {
            py::gil_scoped_release release;
            c.context().synchronize();
        });
    m.def("cuda_device_count", &Context::cuda_device_count);
    m.def("built_with_cuda", &Context::built_with_cuda);
    m.def("device_of_pointer", [](std::uintptr_t p) { return Context::device_of_pointer(reinterpret_cast<void*>(p)); });
    m.def("is_device_array", [](py::handle obj) { return is_device_array(obj); });
    // Buffers the library allocated so far (tests and benchmarks: a call that copies an image
    // allocates its size).
    m.def("memory_counters", [] {
        const MemoryCounters c = memory_counters();
        py::dict d;
        d["host_allocations"] = c.host_allocations;
        d["host_bytes"] = c.host_bytes;
        d["device_allocations"] = c.device_allocations;
        d["device_bytes"] = c.device_bytes;
        d["pinned_allocations"] = c.pinned_allocations;
        d["pinned_bytes"] = c.pinned_bytes;
        return d;
    });
}

PYBIND11_MODULE(_cubekit, m) {
    m.doc() = "cubekit's compiled core; use the functions of the cubekit package";
    m.attr("__version__") = CUBEKIT_VERSION;
    // cubekit.DeviceError: a CUDA device failed or is missing (the CLI's exit code 4). A bare
    // PyObject* (never destroyed): the same code on pybind11 2.10 and 3.x.
    static PyObject* device_error = PyErr_NewException("cubekit.DeviceError", PyExc_RuntimeError, nullptr);
    m.add_object("DeviceError", py::handle(device_error));
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const InvalidInput& e) {
            PyErr_SetString(PyExc_ValueError, e.what());
        } catch (const IoError& e) {
            PyErr_SetString(PyExc_OSError, e.what());
        } catch (const Cancelled& e) {
            PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
        } catch (const DeviceError& e) {
            PyErr_SetString(device_error, e.what());
        }
    });
    bind_core(m);
    bind_io(m);
    bind_gradient(m);
    bind_kmeans(m);
    bind_edges(m);
    bind_labels(m);
    bind_pca(m);
    bind_zernike(m);
    bind_detect(m);
    bind_detect_classical(m);
    bind_detect_train(m);
    bind_classify(m);
    bind_watershed(m);
}
