// Python arrays ↔ cube views (arrays.hpp).
#include "arrays.hpp"

#include <dlpack/dlpack.h>

#include <cstdint>
#include <string>

#include "cubekit/context.hpp"
#include "cubekit/error.hpp"

namespace cubekit::python {

namespace {

std::string who(const char* function, const char* name) { return std::string(function) + ": " + name; }

// A cube element type from a NumPy-style kind and size ('u', 1) or what to do instead.
enum class Convert { None, ToU8View, ToI16, ToF32, Refuse };
struct TypeRule {
    DType dtype = DType::U8;
    Convert convert = Convert::Refuse;
};

TypeRule type_rule(char kind, std::size_t size) {
    switch (kind) {
        case 'b': return size == 1 ? TypeRule{DType::U8, Convert::ToU8View} : TypeRule{};
        case 'u':
            if (size == 1) return {DType::U8, Convert::None};
            if (size == 2) return {DType::U16, Convert::None};
            if (size == 4) return {DType::U32, Convert::None};
            return {};
        case 'i':
            if (size == 1) return {DType::I16, Convert::ToI16};
            if (size == 2) return {DType::I16, Convert::None};
            if (size == 4) return {DType::I32, Convert::None};
            return {};
        case 'f':
            if (size == 2) return {DType::F32, Convert::ToF32};
            if (size == 4) return {DType::F32, Convert::None};
            if (size == 8) return {DType::F64, Convert::None};
            return {};
        default: return {};
    }
}

[[noreturn]] void refuse_type(const char* function, const char* name, const std::string& type) {
    throw InvalidInput(who(function, name) + " has dtype " + type +
                       "; expected bool, uint8, uint16, uint32, int8, int16, int32, float16, float32 or float64 "
                       "(convert 64-bit integers explicitly, e.g. a.astype(np.int32) after checking the range)");
}

struct Geometry {
    int width = 0, height = 0, bands = 1, ndim = 0;
    Strides strides;  // elements
};

// (H, W[, B]) shape and byte strides → cube geometry; ValueError on the wrong rank or a stride
// that is not a whole number of elements (the caller converts those first).
Geometry geometry(const char* function, const char* name, int ndim, const std::int64_t* shape,
                  const std::int64_t* byte_strides, std::size_t itemsize) {
    if (ndim != 2 && ndim != 3)
        throw InvalidInput(who(function, name) + " has " + std::to_string(ndim) +
                           " dimensions; expected (H, W) or (H, W, B)");
    for (int i = 0; i < ndim; ++i)
        if (shape[i] > (std::int64_t(1) << 31) - 1)
            throw InvalidInput(who(function, name) + " axis " + std::to_string(i) + " has " +
                               std::to_string(shape[i]) + " elements; at most 2^31 - 1 per axis");
    Geometry g;
    g.ndim = ndim;
    g.height = int(shape[0]);
    g.width = int(shape[1]);
    g.bands = ndim == 3 ? int(shape[2]) : 1;
    const auto elems = [&](int axis) { return byte_strides[axis] / std::int64_t(itemsize); };
    g.strides = {elems(1), elems(0), ndim == 3 ? elems(2) : std::int64_t(g.width) * g.height};
    return g;
}

bool whole_elements(int ndim, const std::int64_t* byte_strides, std::size_t itemsize) {
    for (int i = 0; i < ndim; ++i)
        if (byte_strides[i] % std::int64_t(itemsize) != 0) return false;
    return true;
}

ArrayView numpy_view(py::handle obj, const char* function, const char* name) {
    py::module_ np = py::module_::import("numpy");
    py::array a = py::isinstance<py::array>(obj) ? py::reinterpret_borrow<py::array>(obj)
                                                   : py::array(np.attr("asarray")(obj));
    py::dtype dt = a.dtype();
    const char kind = dt.kind();
    const TypeRule rule = type_rule(kind, std::size_t(dt.itemsize()));
    if (rule.convert == Convert::Refuse) refuse_type(function, name, std::string(py::str(dt)));
    const bool swapped = dt.attr("byteorder").cast<std::string>() == ">";  // '=', '|' and '<' are native here
    if (rule.convert == Convert::ToI16 || rule.convert == Convert::ToF32 || swapped)
        a = py::array(a.attr("astype")(numpy_dtype(rule.dtype)));
    const int ndim = int(a.ndim());
    std::int64_t shape[3] = {}, strides[3] = {};
    for (int i = 0; i < ndim && i < 3; ++i) {
        shape[i] = a.shape(i);
        strides[i] = a.strides(i);
    }
    const std::size_t itemsize = dtype_size(rule.dtype);
    if (ndim >= 2 && ndim <= 3 && !whole_elements(ndim, strides, itemsize)) {
        a = py::array(np.attr("ascontiguousarray")(a));
        for (int i = 0; i < ndim; ++i) strides[i] = a.strides(i);
    }
    const Geometry g = geometry(function, name, ndim, shape, strides, itemsize);
    ArrayView out;
    out.view = CubeView::host(a.data(), g.width, g.height, g.bands, rule.dtype, g.strides);
    out.ndim = g.ndim;
    out.owner = a;
    return out;
}

// __cuda_array_interface__ (versions 2 and 3): typestr such as "<f4", data (pointer, read-only),
// shape, strides in bytes or None (C order).
ArrayView cuda_interface_view(py::handle obj, const char* function, const char* name, bool writable) {
    const py::dict cai = obj.attr("__cuda_array_interface__");
    const std::string typestr = cai["typestr"].cast<std::string>();
    if (typestr.size() < 3) throw InvalidInput(who(function, name) + " has typestr '" + typestr + "'");
    const TypeRule rule = type_rule(typestr[1], std::size_t(std::stoul(typestr.substr(2))));
    if (typestr[0] == '>' || rule.convert == Convert::Refuse || rule.convert == Convert::ToI16 ||
        rule.convert == Convert::ToF32)
        throw InvalidInput(who(function, name) + " is a device array of type '" + typestr +
                           "'; device arrays are used in place and must be bool, uint8, uint16, uint32, int16, "
                           "int32, float32 or float64 (convert it first, e.g. x.astype('float32'))");
    const py::tuple data = cai["data"];
    const auto pointer = data[0].cast<std::uintptr_t>();
    if (writable && data[1].cast<bool>()) throw InvalidInput(who(function, name) + " is read-only");
    const py::tuple shape_t = cai["shape"];
    const int ndim = int(shape_t.size());
    std::int64_t shape[3] = {}, strides[3] = {};
    const std::size_t itemsize = dtype_size(rule.dtype);
    for (int i = 0; i < ndim && i < 3; ++i) shape[i] = shape_t[std::size_t(i)].cast<std::int64_t>();
    const py::object s = cai.contains("strides") ? py::object(cai["strides"]) : py::none();
    if (s.is_none()) {
        std::int64_t step = std::int64_t(itemsize);
        for (int i = std::min(ndim, 3) - 1; i >= 0; --i) {
            strides[i] = step;
            step *= shape[i];
        }
    } else {
        const py::tuple st = s;
        for (int i = 0; i < ndim && i < 3; ++i) strides[i] = st[std::size_t(i)].cast<std::int64_t>();
    }
    if (ndim >= 2 && ndim <= 3 && !whole_elements(ndim, strides, itemsize))
        throw InvalidInput(who(function, name) + " has strides that are not whole elements");
    const Geometry g = geometry(function, name, ndim, shape, strides, itemsize);
    void* p = reinterpret_cast<void*>(pointer);
    const int device = Context::device_of_pointer(p);
    ArrayView out;
    out.view = CubeView::device(p, device < 0 ? 0 : device, g.width, g.height, g.bands, rule.dtype, g.strides);
    out.ndim = g.ndim;
    out.owner = py::reinterpret_borrow<py::object>(obj);
    return out;
}

// A PyTorch CUDA tensor read through its own C++-bound accessors (data_ptr, shape, stride,
// dtype): torch's __cuda_array_interface__ is a Python property that builds a dict, which cost
// ~15 µs per call on the H100 machine (bench/python_overhead.py) against ~5 µs for CuPy's.
bool is_torch_cuda(py::handle obj) {
    const py::handle type = reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr()));
    return py::str(type.attr("__module__")).cast<std::string>().rfind("torch", 0) == 0 &&
           py::hasattr(obj, "is_cuda") && obj.attr("is_cuda").cast<bool>();
}

ArrayView torch_view(py::handle obj, const char* function, const char* name, bool writable) {
    std::string t = py::str(obj.attr("dtype"));  // "torch.float32"
    if (t.rfind("torch.", 0) == 0) t = t.substr(6);
    static const std::pair<const char*, const char*> typestrs[] = {
        {"uint8", "|u1"}, {"bool", "|b1"}, {"int16", "<i2"}, {"uint16", "<u2"}, {"int32", "<i4"},
        {"uint32", "<u4"}, {"float32", "<f4"}, {"float64", "<f8"}};
    std::string typestr;
    for (const auto& [n, ts] : typestrs)
        if (t == n) typestr = ts;
    if (typestr.empty())
        throw InvalidInput(who(function, name) + " is a torch." + t +
                           " CUDA tensor; device arrays are used in place and must be bool, uint8, uint16, uint32, "
                           "int16, int32, float32 or float64 (convert it first, e.g. t.float())");
    if (writable && obj.attr("requires_grad").cast<bool>())
        throw InvalidInput(who(function, name) + " requires grad; give a tensor without autograd history");
    const TypeRule rule = type_rule(typestr[1], std::size_t(typestr[2] - '0'));
    const py::tuple shape_t = py::tuple(obj.attr("shape"));
    const py::tuple stride_t = py::tuple(obj.attr("stride")());
    const int ndim = int(shape_t.size());
    std::int64_t shape[3] = {}, strides[3] = {};
    const std::size_t itemsize = dtype_size(rule.dtype);
    for (int i = 0; i < ndim && i < 3; ++i) {
        shape[i] = shape_t[std::size_t(i)].cast<std::int64_t>();
        strides[i] = stride_t[std::size_t(i)].cast<std::int64_t>() * std::int64_t(itemsize);
    }
    const Geometry g = geometry(function, name, ndim, shape, strides, itemsize);
    void* p = reinterpret_cast<void*>(obj.attr("data_ptr")().cast<std::uintptr_t>());
    const int device = obj.attr("get_device")().cast<int>();
    ArrayView out;
    out.view = CubeView::device(p, device, g.width, g.height, g.bands, rule.dtype, g.strides);
    out.ndim = g.ndim;
    out.owner = py::reinterpret_borrow<py::object>(obj);
    return out;
}

// A DLPack producer (JAX, a CPU torch tensor, ...): the capsule is consumed and the tensor kept
// until the view's last copy goes.
ArrayView dlpack_view(py::handle obj, const char* function, const char* name) {
    py::capsule cap = obj.attr("__dlpack__")();
    if (std::string(cap.name() ? cap.name() : "") != "dltensor")
        throw InvalidInput(who(function, name) + ": __dlpack__ returned a used or versioned capsule");
    auto* managed = static_cast<DLManagedTensor*>(cap.get_pointer());
    PyCapsule_SetName(cap.ptr(), "used_dltensor");  // ours now: we call the deleter
    std::shared_ptr<void> keep(managed, [](void* p) {
        auto* m = static_cast<DLManagedTensor*>(p);
        if (m->deleter) m->deleter(m);
    });
    const DLTensor& t = managed->dl_tensor;
    char kind = '?';
    switch (t.dtype.code) {
        case kDLInt: kind = 'i'; break;
        case kDLUInt: kind = 'u'; break;
        case kDLFloat: kind = 'f'; break;
        case 6: kind = 'b'; break;  // kDLBool (DLPack ≥ 0.8)
        default: break;
    }
    const TypeRule rule = type_rule(kind, std::size_t(t.dtype.bits / 8));
    if (t.dtype.lanes != 1 || rule.convert == Convert::Refuse || rule.convert == Convert::ToI16 ||
        rule.convert == Convert::ToF32)
        refuse_type(function, name, "code " + std::to_string(t.dtype.code) + ", " + std::to_string(t.dtype.bits) + " bits");
    const int ndim = t.ndim;
    std::int64_t shape[3] = {}, strides[3] = {};
    const std::size_t itemsize = dtype_size(rule.dtype);
    for (int i = 0; i < ndim && i < 3; ++i) shape[i] = t.shape[i];
    std::int64_t step = 1;
    for (int i = std::min(ndim, 3) - 1; i >= 0; --i) {
        strides[i] = (t.strides ? t.strides[i] : step) * std::int64_t(itemsize);  // DLPack strides count elements
        step *= shape[i];
    }
    const Geometry g = geometry(function, name, ndim, shape, strides, itemsize);
    std::byte* p = static_cast<std::byte*>(t.data) + t.byte_offset;
    ArrayView out;
    const bool device = t.device.device_type == kDLCUDA || t.device.device_type == kDLCUDAManaged;
    if (!device && t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost)
        throw InvalidInput(who(function, name) + " lives on DLPack device type " +
                           std::to_string(int(t.device.device_type)) + "; expected the CPU or a CUDA device");
    out.view = device ? CubeView::device(p, t.device.device_id, g.width, g.height, g.bands, rule.dtype, g.strides)
                      : CubeView::host(p, g.width, g.height, g.bands, rule.dtype, g.strides);
    out.ndim = g.ndim;
    out.owner = py::reinterpret_borrow<py::object>(obj);
    out.dlpack = std::move(keep);
    return out;
}

}  // namespace

py::dtype numpy_dtype(DType t) {
    switch (t) {
        case DType::U8: return py::dtype("uint8");
        case DType::U16: return py::dtype("uint16");
        case DType::I16: return py::dtype("int16");
        case DType::U32: return py::dtype("uint32");
        case DType::I32: return py::dtype("int32");
        case DType::F32: return py::dtype("float32");
        case DType::F64: return py::dtype("float64");
    }
    return py::dtype("float64");
}

bool is_device_array(py::handle obj) {
    return py::hasattr(obj, "__cuda_array_interface__");
}

ArrayView array_view(py::handle obj, const char* function, const char* name) {
    if (obj.is_none()) throw InvalidInput(who(function, name) + " is None; expected an array");
    if (py::isinstance<py::array>(obj)) return numpy_view(obj, function, name);
    if (is_torch_cuda(obj)) return torch_view(obj, function, name, false);
    if (py::hasattr(obj, "__cuda_array_interface__")) return cuda_interface_view(obj, function, name, false);
    if (py::hasattr(obj, "__dlpack__") && !py::hasattr(obj, "__array_interface__") && !py::hasattr(obj, "__array__"))
        return dlpack_view(obj, function, name);
    return numpy_view(obj, function, name);
}

MutableArrayView mutable_array_view(py::handle obj, const char* function, const char* name) {
    MutableArrayView out;
    if (is_torch_cuda(obj) || py::hasattr(obj, "__cuda_array_interface__")) {
        const ArrayView v = is_torch_cuda(obj) ? torch_view(obj, function, name, true)
                                               : cuda_interface_view(obj, function, name, true);
        const CubeView& c = v.view;
        out.view = MutableCubeView::device(const_cast<std::byte*>(c.data()), c.device(), c.width(), c.height(),
                                           c.bands(), c.dtype(), c.strides());
        out.ndim = v.ndim;
        return out;
    }
    if (!py::isinstance<py::array>(obj))
        throw InvalidInput(who(function, name) + " must be a NumPy, CuPy or PyTorch CUDA array");
    py::array a = py::reinterpret_borrow<py::array>(obj);
    if (!a.writeable()) throw InvalidInput(who(function, name) + " is read-only");
    py::dtype dt = a.dtype();
    const TypeRule rule = type_rule(dt.kind(), std::size_t(dt.itemsize()));
    if (rule.convert != Convert::None || dt.attr("byteorder").cast<std::string>() == ">")
        throw InvalidInput(who(function, name) + " has dtype " + std::string(py::str(dt)) +
                           "; an output must have exactly the result's dtype");
    const int ndim = int(a.ndim());
    std::int64_t shape[3] = {}, strides[3] = {};
    for (int i = 0; i < ndim && i < 3; ++i) {
        shape[i] = a.shape(i);
        strides[i] = a.strides(i);
    }
    if (ndim >= 2 && ndim <= 3 && !whole_elements(ndim, strides, dtype_size(rule.dtype)))
        throw InvalidInput(who(function, name) + " has strides that are not whole elements");
    const Geometry g = geometry(function, name, ndim, shape, strides, dtype_size(rule.dtype));
    out.view = MutableCubeView::host(a.mutable_data(), g.width, g.height, g.bands, rule.dtype, g.strides);
    out.ndim = g.ndim;
    return out;
}

py::array to_numpy(Cube&& cube, bool squeeze) {
    auto* owned = new Cube(std::move(cube));
    py::capsule free_when_done(owned, [](void* p) { delete static_cast<Cube*>(p); });
    const CubeView v = *owned;
    const std::int64_t e = std::int64_t(dtype_size(v.dtype()));
    const Strides& s = v.strides();
    if (squeeze && v.bands() == 1)
        return py::array(numpy_dtype(v.dtype()), std::vector<py::ssize_t>{v.height(), v.width()},
                         std::vector<py::ssize_t>{s.y * e, s.x * e}, v.data(), free_when_done);
    return py::array(numpy_dtype(v.dtype()), std::vector<py::ssize_t>{v.height(), v.width(), v.bands()},
                     std::vector<py::ssize_t>{s.y * e, s.x * e, s.b * e}, v.data(), free_when_done);
}

}  // namespace cubekit::python
