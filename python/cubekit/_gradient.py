"""Robust Color Morphological Gradient (spec: gradient-watershed.md, Part A)."""
from __future__ import annotations

import inspect
import os

import numpy as _np

from . import _cubekit, _runtime


_TILE_KEYWORDS = ("memory_limit", "device_memory_limit", "devices", "tile_size")


def rcmg(cube, **keywords):
    tiles = {k: keywords.pop(k) for k in _TILE_KEYWORDS if keywords.get(k) is not None}
    for k in _TILE_KEYWORDS:
        keywords.pop(k, None)
    if tiles or isinstance(cube, (str, os.PathLike)):
        return _rcmg_tiled(cube, keywords, tiles)
    return _rcmg(cube, keywords)


def _rcmg_tiled(cube, keywords, tiles):
    """The tiled path: a NumPy array or a file path (ENVI/.npy read by windows); NumPy out."""
    if "out" in keywords and keywords["out"] is not None:
        raise ValueError("rcmg: 'out' cannot be combined with memory_limit, device_memory_limit, devices, tile_size "
                         "or a file path (the tiled path returns a new NumPy array)")
    if not isinstance(cube, (str, os.PathLike)) and _runtime.array_kind(cube) != "numpy":
        raise ValueError("rcmg: the tiled path takes a NumPy array or a file path; this array is on a CUDA device already")
    if tiles.get("devices") is not None and keywords.get("backend") in (None, "auto"):
        keywords["backend"] = "cuda"
    probe = cube if not isinstance(cube, (str, os.PathLike)) else _np.empty((1, 1), _np.float32)
    ctx, _kind, _out, progress = _runtime.begin(probe, keywords, "rcmg")
    gradient, _run = _cubekit.rcmg_tiled(ctx, cube, keywords, tiles, progress)
    return gradient


def _rcmg(cube, keywords):
    ctx, kind, out, progress = _runtime.begin(cube, keywords, "rcmg")
    if out is None and kind != "numpy":
        out_type = keywords.get("out_type", _DEFAULTS["out_type"])
        out = _runtime.empty(kind, cube, cube.shape[:2], _runtime.numpy_dtype(out_type))
    return _cubekit.rcmg(ctx, cube, out, keywords, progress)


_DECLARATIONS = _cubekit.rcmg_declarations()
_DEFAULTS = {name: default for name, default, _doc, _choices in _DECLARATIONS}

_runtime.declare(rcmg, ["cube"], _DECLARATIONS, """
Robust Color Morphological Gradient of an image or cube: at each pixel, the largest spectral
distance between two pixels of its 3x3 (or cross) window after rejecting the ``reject`` most
distant pairs (outliers). Edges of colour and spectral changes, robust to noise.

Parameters
----------
cube : array (H, W) or (H, W, B), or a file path
    NumPy, CuPy or PyTorch CUDA; any dtype of bool, (u)int8/16/32, float16/32/64; any strides.
    A path (ENVI, .npy: read by windows; other formats whole) is computed in tiles.
memory_limit, device_memory_limit : int or str, optional
    Host working-memory and per-GPU budgets in bytes ("512M", "2G"): the scene runs in tiles with a
    1-pixel halo that fit them, bit-identical to the whole call (NumPy or path input).
devices : list of int, optional
    CUDA devices to deal the tiles to (implies backend='cuda').
tile_size : (int, int), optional
    Force tiles of (width, height) pixels (testing).

Returns
-------
(H, W) float32 array (float64 with out_type='f64'), of the input's kind.

Example
-------
>>> import numpy as np, cubekit
>>> cube = np.zeros((64, 64, 3), np.float32); cube[:, 32:] = 1
>>> g = cubekit.rcmg(cube)                 # CPU; cubekit.rcmg(cupy.asarray(cube)) runs on the GPU
>>> float(g[10, 31]), float(g[10, 10])
(1.7320508075688772, 0.0)
>>> bool((cubekit.rcmg(cube, memory_limit="16K") == g).all())   # in tiles within 16 KiB
True
""")

# The tile keywords (popped before the options reach the library) in the signature a user sees.
rcmg.__signature__ = rcmg.__signature__.replace(parameters=list(rcmg.__signature__.parameters.values()) + [
    inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=None) for k in _TILE_KEYWORDS])
