"""What every function shares: which kind of array came in, which context runs it, where the
output goes, and the signatures and docstrings built from the option declarations.

Rules (the README's Python section and each docstring state them for users):
- NumPy input (or anything ``numpy.asarray`` takes): computed on the CPU unless ``backend="cuda"``
  (then uploaded, computed on the GPU, and the result brought back); the result is NumPy.
- CuPy arrays, PyTorch CUDA tensors and other ``__cuda_array_interface__`` / DLPack device arrays:
  computed on the array's device, on the library's *current stream* (CuPy's or PyTorch's), without
  copying; the result is the same kind of array, allocated by that library, and the call returns
  as soon as the work is queued (like CuPy and PyTorch).
"""
from __future__ import annotations

import inspect
import os
import threading

from . import _cubekit

_local = threading.local()

# cudaStreamLegacy: what CuPy's and PyTorch's default (null) stream is; cubekit's context treats
# a stream handle of 0 as "make your own", so the null stream is passed as this handle.
_LEGACY_STREAM = 1


def array_kind(x) -> str:
    """'numpy', 'cupy', 'torch' (CUDA tensor), 'cuda' (another __cuda_array_interface__ array) or
    'dlpack' (another device array with __dlpack__)."""
    module = type(x).__module__
    if module.startswith("cupy"):
        return "cupy"
    if module.startswith("torch") and getattr(x, "is_cuda", False):
        return "torch"
    if hasattr(x, "__cuda_array_interface__"):
        return "cuda"
    if hasattr(x, "__dlpack_device__") and not hasattr(x, "__array__"):
        kind, _ = x.__dlpack_device__()
        if kind in (2, 13):  # kDLCUDA, kDLCUDAManaged
            return "dlpack"
    return "numpy"


def _cupy_stream(cupy, device: int) -> int:
    """The raw pointer of CuPy's current stream on ``device``."""
    try:
        return cupy.cuda.get_current_stream(device).ptr  # CuPy >= 12: no Device context switch
    except TypeError:
        with cupy.cuda.Device(device):
            return cupy.cuda.get_current_stream().ptr


def _torch_stream(torch, device: int) -> int:
    """The raw pointer of PyTorch's current stream on ``device``: the raw accessor (what Triton
    uses) skips building a torch.cuda.Stream object per call; the public call is the fallback."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device) if raw is not None else torch.cuda.current_stream(device).cuda_stream


def _device_and_stream(x, kind: str) -> tuple[int, int]:
    # Called on every call with a device array: the binding-overhead benchmark
    # (bench/python_overhead.py) measures what this costs.
    if kind == "cupy":
        import cupy
        device = x.device.id
        return device, _cupy_stream(cupy, device) or _LEGACY_STREAM
    if kind == "torch":
        import torch
        device = x.get_device()
        return device, _torch_stream(torch, device) or _LEGACY_STREAM
    if kind == "dlpack":
        return x.__dlpack_device__()[1], _LEGACY_STREAM
    ptr = x.__cuda_array_interface__["data"][0]
    return max(_cubekit.device_of_pointer(ptr), 0), _LEGACY_STREAM


def context(x, backend, device, threads):
    """The (cached, per thread) context for input ``x`` and the array kind of ``x``."""
    kind = array_kind(x)
    stream = 0
    if kind == "numpy":
        backend = backend or "cpu"
        if device is not None and backend == "cpu":
            raise ValueError(f"device = {device} needs backend='cuda' for NumPy input")
        dev = -1 if device is None else device
    else:
        if backend not in (None, "auto", "cuda", "gpu"):
            raise ValueError(f"backend = {backend!r}: this input lives on a CUDA device (a {type(x).__name__}); "
                             "use backend='cuda' or bring it to the host first (e.g. cupy.asnumpy(x))")
        backend = "cuda"
        dev, stream = _device_and_stream(x, kind)
        if device is not None and device != dev:
            raise ValueError(f"device = {device}, but the input lives on device {dev}")
    key = (backend, dev, threads, stream)
    cache = getattr(_local, "contexts", None)
    if cache is None:
        cache = _local.contexts = {}
    ctx = cache.get(key)
    if ctx is None:
        ctx = cache[key] = _cubekit.Context(backend, dev, threads, stream)
    _local.last = ctx
    return ctx, kind


def last_timings() -> dict:
    """Where the last cubekit call of this thread spent its time, in ms: ``total_ms`` (the library
    call), ``upload_ms`` and ``download_ms`` (its host ↔ device copies: NumPy input on
    backend='cuda'), ``compute_ms`` (the rest), ``upload_bytes``, ``download_bytes`` and ``backend``.
    For CuPy/PyTorch input the call returns once the work is queued, so these are host times.
    Empty before the first call.

    >>> import numpy as np, cubekit
    >>> g = cubekit.rcmg(np.ones((64, 64, 8), np.float32))
    >>> sorted(cubekit.last_timings())[:3]
    ['backend', 'compute_ms', 'download_bytes']
    """
    ctx = getattr(_local, "last", None)
    return {} if ctx is None else dict(ctx.last_timings())


def empty(kind: str, like, shape, dtype):
    """An uninitialised output array of the input's kind on the input's device, or None for NumPy
    input (the compiled function then returns a new NumPy array)."""
    if kind == "numpy":
        return None
    if kind == "cupy":
        import cupy
        with cupy.cuda.Device(like.device.id):
            return cupy.empty(shape, dtype=dtype)
    if kind == "torch":
        import torch
        return torch.empty(shape, dtype=getattr(torch, _torch_name(dtype)), device=like.device)
    import cupy  # other device arrays: CuPy holds the output
    return cupy.empty(shape, dtype=dtype)


def new_output(kind: str, like, shape, dtype):
    """A new output array of the input's kind: NumPy for NumPy input, else as ``empty``; None when
    ``dtype`` is None (a type the compiled call will refuse, naming the argument)."""
    if dtype is None:
        return None
    if kind == "numpy":
        import numpy as np
        return np.empty(shape, dtype)
    return empty(kind, like, shape, dtype)


def to_host(x):
    """``x`` as a NumPy array: itself (or ``numpy.asarray``) for host data, a copy for CuPy/torch."""
    if hasattr(x, "get") and type(x).__module__.startswith("cupy"):
        return x.get()
    if type(x).__module__.startswith("torch"):
        return x.detach().cpu().numpy()
    if array_kind(x) != "numpy":  # another device array: through CuPy
        import cupy
        return cupy.asnumpy(cupy.asarray(x))
    import numpy as np
    return np.asarray(x)


_NUMPY_NAMES = {"u8": "uint8", "u16": "uint16", "i16": "int16", "u32": "uint32", "i32": "int32", "f32": "float32",
                "f64": "float64"}


def numpy_dtype(name) -> str:
    """The NumPy name of a cube element type given as cubekit ('f32') or NumPy ('float32') spelling."""
    import numpy as np
    return _NUMPY_NAMES.get(str(name), None) or np.dtype(name).name


def _torch_name(dtype) -> str:
    import numpy as np
    return {"uint8": "uint8", "uint16": "uint16", "int16": "int16", "uint32": "uint32", "int32": "int32",
            "float32": "float32", "float64": "float64", "bool": "bool"}[np.dtype(dtype).name]


def check_out_kind(out, kind: str, function: str) -> None:
    if out is None:
        return
    out_kind = array_kind(out)
    if (out_kind == "numpy") != (kind == "numpy"):
        raise ValueError(f"{function}: out is a {type(out).__name__} but the input is a "
                         f"{'host' if kind == 'numpy' else 'device'} array; give an out of the input's kind")


# ---- signatures and docstrings from the option declarations -------------------------------------

def option_parameters(declarations) -> list[inspect.Parameter]:
    """Keyword-only parameters (name, default) of one options struct, in declaration order."""
    return [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
            for name, default, _doc, _choices in declarations]


def option_docs(declarations) -> str:
    """The 'Options' section of a docstring: one line per field, its default and what it accepts."""
    lines = []
    for name, default, doc, choices in declarations:
        accepts = ""
        if isinstance(choices, list):
            accepts = " (" + " | ".join(repr(c) for c in choices) + ")"
        elif isinstance(choices, str):
            accepts = f" ({choices})"
        lines.append(f"    {name} = {default!r}{accepts}\n        {doc}")
    return "\n".join(lines)


COMMON_DOC = """    backend = None ('cpu' | 'cuda' | 'auto')
        None: the CPU for NumPy input, the input's device for CuPy/PyTorch CUDA input.
    device = None
        CUDA device index for NumPy input with backend='cuda' (device arrays use their own).
    threads = 0
        CPU threads (0 = all cores).
    progress = None
        A callable progress(done, total) called as long work advances; Ctrl-C cancels
        (KeyboardInterrupt)."""


def common_parameters(out: bool = True) -> list[inspect.Parameter]:
    kw = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("backend", kw, default=None), inspect.Parameter("device", kw, default=None),
              inspect.Parameter("threads", kw, default=0)]
    if out:
        params.append(inspect.Parameter("out", kw, default=None))
    params.append(inspect.Parameter("progress", kw, default=None))
    return params


def declare(function, positional: list[str], declarations, doc: str, out: bool = True):
    """Gives ``function`` (which takes ``*positional, **keywords``) the signature and docstring a
    user sees: its positional arguments, every option keyword with its default, the common ones."""
    pos = [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in positional]
    function.__signature__ = inspect.Signature(pos + option_parameters(declarations) + common_parameters(out))
    function.__doc__ = doc.rstrip() + "\n\nOptions\n-------\n" + option_docs(declarations) + "\n\nCommon\n------\n" + \
        COMMON_DOC + "\n"
    return function


def begin(x, keywords: dict, function: str):
    """The start of every public function: pops the common keywords, picks the context for input
    ``x`` and checks that ``out`` is of the input's kind. Returns (context, kind, out, progress)."""
    backend, device, threads, out, progress = split_common(keywords)
    ctx, kind = context(x, backend, device, threads)
    check_out_kind(out, kind, function)
    return ctx, kind, out, progress


TILE_KEYWORDS = ("memory_limit", "device_memory_limit", "devices", "tile_size")


def pop_tile_keywords(keywords: dict) -> dict:
    """Pops the tile keywords (memory_limit, device_memory_limit, devices, tile_size); the given ones."""
    popped = {k: keywords.pop(k, None) for k in TILE_KEYWORDS}
    return {k: v for k, v in popped.items() if v is not None}


def is_path(x) -> bool:
    return isinstance(x, (str, os.PathLike))


def fspath_or(x):
    """A path as a string (what the tiled bindings take), anything else as it is."""
    return os.fspath(x) if is_path(x) else x


def begin_tiled(cube, keywords: dict, tiles: dict, function: str, takes_out: bool = False):
    """The start of a tiled call (NumPy array or file path in, NumPy out): refuses device arrays, lets
    ``devices`` imply the CUDA backend, and refuses ``out`` unless ``takes_out`` (then ``out`` must be a
    writeable host NumPy array, e.g. a ``numpy.memmap`` for a result larger than memory, which the tiles
    fill in place). Returns (context, progress, out or None)."""
    out = keywords.get("out")
    if out is not None:
        import numpy
        if not takes_out:
            raise ValueError(f"{function}: 'out' cannot be combined with memory_limit, device_memory_limit, devices, "
                             "tile_size or a file path (the tiled path returns a new NumPy array)")
        if not isinstance(out, numpy.ndarray) or not out.flags.writeable:
            raise ValueError(f"{function}: out must be a writeable NumPy array (or numpy.memmap) in the tiled path; "
                             f"got a {type(out).__name__}")
    if not is_path(cube) and array_kind(cube) != "numpy":
        raise ValueError(f"{function}: the tiled path takes a NumPy array or a file path; this array is on a CUDA "
                         "device already")
    if tiles.get("devices") is not None and keywords.get("backend") in (None, "auto"):
        keywords["backend"] = "cuda"
    import numpy
    probe = numpy.empty((1, 1), numpy.float32) if is_path(cube) else cube
    keywords.pop("out", None)
    ctx, _kind, _out, progress = begin(probe, keywords, function)
    return (ctx, progress, out) if takes_out else (ctx, progress)


def with_tile_keywords(function):
    """Adds the tile keywords to the signature a user sees (they are popped before the options reach
    the library)."""
    params = list(function.__signature__.parameters.values())
    function.__signature__ = function.__signature__.replace(parameters=params + [
        inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=None) for k in TILE_KEYWORDS])
    return function


def split_common(keywords: dict, out: bool = True):
    """Pops the common keywords; returns (backend, device, threads, out, progress)."""
    backend = keywords.pop("backend", None)
    device = keywords.pop("device", None)
    threads = keywords.pop("threads", 0)
    target = keywords.pop("out", None) if out else None
    progress = keywords.pop("progress", None)
    return backend, device, threads, target, progress


def dask_array():
    """dask.array, or an ImportError saying how to install Dask (cubekit.dask and its modules)."""
    try:
        import dask.array as da
    except ImportError as e:  # pragma: no cover - dask is optional
        raise ImportError("cubekit.dask needs Dask (Debian: python3-dask; pip: dask[array])") from e
    return da
