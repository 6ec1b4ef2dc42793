#pragma once
// What every family's bindings share: the argument conversions and the calling pattern.
//
// A binding takes (context, arrays..., out or None, keywords as a dict, progress or None). The
// Python layer (python/cubekit/_runtime.py) picks the context from the input (a NumPy array: the
// CPU unless backend="cuda"; a CuPy array or a torch CUDA tensor: its device and current stream)
// and allocates `out` for device inputs with the input's own library, so results come back as the
// same kind of array; NumPy results are host cubes returned without a copy (to_numpy).
#include <pybind11/pybind11.h>

#include <string>

#include "arrays.hpp"
#include "context.hpp"
#include "cubekit/cube.hpp"
#include "options.hpp"

#include <optional>

#include "cubekit/io.hpp"
#include "cubekit/linalg.hpp"
#include "cubekit/tiles.hpp"

namespace cubekit::python {

namespace py = pybind11;

/// True when `out` can be written by a `_into` call on this context (device memory of its device
/// for CUDA, host memory for the CPU).
inline bool in_context_memory(const Context& ctx, const MutableCubeView& out) {
    return ctx.is_cuda() ? out.on_device() && out.device() == ctx.device() : !out.on_device();
}

/// Throws ValueError unless `out` is (H, W) or (H, W, bands) as `ndim` says, of `dtype`.
void check_out(const char* function, const MutableArrayView& out, int width, int height, int bands, DType dtype);

/// Runs `into(ctx, out_view)` when `out` lives where the context computes, else `host(ctx)` (a host
/// Cube) and copies that into `out`. Returns `out`.
template <class Into, class Host>
py::object run_into(PyContext& c, py::object progress, const MutableArrayView& out, py::object out_obj, Into&& into,
                    Host&& host) {
    if (in_context_memory(c.context(), out.view)) {
        c.run(std::move(progress), [&](const Context& ctx) { into(ctx, out.view); });
    } else {
        c.run(std::move(progress), [&](const Context& ctx) {
            const Cube result = host(ctx);
            copy_cube(ctx, result, out.view);
            ctx.synchronize();
        });
    }
    return out_obj;
}

/// The tile options of a dict {memory_limit, device_memory_limit (int bytes or "64M"), devices (list of
/// ints), tile_size ((width, height)), lanes}; ValueError naming the key otherwise.
TileOptions tile_options_from(const py::dict& tiles);
/// {"tiles", "tile_width", "tile_height", "peak_bytes", "device_peak_bytes", "devices"}.
py::dict tiled_dict(const TiledRun& run);
/// The input of a tiled call: a NumPy array (host memory) or a file path (read by windows).
struct TiledInput {
    std::optional<CubeFile> file;
    std::optional<ArrayView> array;
    int width() const { return file ? file->shape().width : array->view.width(); }
    int height() const { return file ? file->shape().height : array->view.height(); }
    int bands() const { return file ? file->shape().bands : array->view.bands(); }
};
TiledInput tiled_input(py::handle cube, const char* function);

/// The pieces' sums of pca_piece_sums (tuples that pickle) merged exactly (bind_pca.cpp); InvalidInput
/// naming `function` when there is none.
PcaPieceSums merged_pca_sums(const py::list& parts, const char* function);

void bind_core(py::module_& m);
void bind_io(py::module_& m);
void bind_gradient(py::module_& m);
void bind_kmeans(py::module_& m);
void bind_edges(py::module_& m);
void bind_labels(py::module_& m);
void bind_pca(py::module_& m);
void bind_zernike(py::module_& m);
void bind_detect(py::module_& m);
void bind_detect_classical(py::module_& m);
void bind_detect_train(py::module_& m);
void bind_classify(py::module_& m);
void bind_watershed(py::module_& m);

}  // namespace cubekit::python
