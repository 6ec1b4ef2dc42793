#pragma once
// Python arrays as cube views, without copying when the memory already fits:
//   NumPy (and anything np.asarray takes): the buffer's pointer and byte strides;
//   CuPy, PyTorch CUDA tensors, Numba, ...: __cuda_array_interface__ (v2/v3);
//   anything else with __dlpack__ (JAX, ...): a DLPack capsule, kept alive with the view.
// Axes follow the .npy convention: (H, W) is a one-band image, (H, W, B) a cube; element strides
// may be anything NumPy allows (slices, transposes, Fortran order, negative steps).
// Conversions (a copy, documented in the module): bool → u8 (a reinterpretation, no copy),
// int8 → i16, float16 → f32, non-native byte order → native; int64/uint64, complex and
// object arrays raise ValueError naming the argument.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "cubekit/cube.hpp"

namespace cubekit::python {

namespace py = pybind11;

/// An input array as a view, with what keeps its memory alive (the array, a converted copy, a
/// DLPack tensor).
struct ArrayView {
    CubeView view;
    int ndim = 0;          ///< 2 or 3
    py::object owner;      ///< the array or its converted copy
    std::shared_ptr<void> dlpack;  ///< a DLPack tensor, released when the last copy goes
};

/// A writable output array (NumPy with the writeable flag, CuPy, torch): no conversion, ever.
struct MutableArrayView {
    MutableCubeView view;
    int ndim = 0;
};

/// `obj` as a read-only cube view; `name` is the argument's name for error messages
/// ("rcmg: cube has dtype int64; ...").
ArrayView array_view(py::handle obj, const char* function, const char* name);

/// `obj` as a writable view of exactly the array's dtype; ValueError when read-only or when its
/// dtype is not a cube element type.
MutableArrayView mutable_array_view(py::handle obj, const char* function, const char* name);

/// True for objects that live in CUDA memory (__cuda_array_interface__, or a DLPack device other
/// than the CPU).
bool is_device_array(py::handle obj);

/// A host cube as a NumPy array sharing its memory (the array owns the cube): (H, W) when
/// `squeeze` and the cube has one band, else (H, W, B), strides from the cube's layout.
py::array to_numpy(Cube&& cube, bool squeeze = true);

/// The NumPy dtype of a cube element type.
py::dtype numpy_dtype(DType t);

/// A new NumPy array of `shape` holding a copy of `v` (row-major).
template <class T>
py::array_t<T> array_of(const std::vector<T>& v, std::vector<py::ssize_t> shape) {
    py::array_t<T> a(shape);
    std::copy(v.begin(), v.end(), a.mutable_data());
    return a;
}

}  // namespace cubekit::python
