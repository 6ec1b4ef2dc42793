"""Robust Color Morphological Gradient (spec: gradient-watershed.md, Part A)."""
from __future__ import annotations

from . import _cubekit, _runtime


def rcmg(cube, **keywords):
    tiles = _runtime.pop_tile_keywords(keywords)
    if tiles or _runtime.is_path(cube):
        return _rcmg_tiled(cube, keywords, tiles)
    return _rcmg(cube, keywords)


def _rcmg_tiled(cube, keywords, tiles):
    """The tiled path: a NumPy array or a file path (ENVI/.npy read by windows); NumPy out."""
    ctx, progress, out = _runtime.begin_tiled(cube, keywords, tiles, "rcmg", takes_out=True)
    gradient, _run = _cubekit.rcmg_tiled(ctx, _runtime.fspath_or(cube), keywords, tiles, progress, out)
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
out : optional
    In tiles: a writeable (H, W) NumPy array of the output type, e.g. a ``numpy.memmap``, filled in
    place (a gradient larger than memory never has to be held whole).

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

_runtime.with_tile_keywords(rcmg)
