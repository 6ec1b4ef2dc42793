"""cubekit on Dask arrays: the same results as the whole-array call, for scenes and mosaics that do
not fit one machine's memory or that many workers (one per GPU) share.

Each function takes a ``dask.array`` (NumPy or CuPy chunks; spatial chunks of any size, the bands
in one chunk or rechunked into one) and returns a lazy ``dask.array``. Local families run through
Dask's overlap with the family's halo (RCMG: 1 pixel); each chunk is computed by the cubekit
function on the chunk's own kind of array (CuPy chunks on their GPU), so a ``distributed`` cluster
with one worker pinned to each GPU spreads the work over the GPUs.

>>> import dask.array as da, numpy as np, cubekit, cubekit.dask
>>> cube = da.from_array(np.random.default_rng(0).random((300, 200, 8), np.float32), chunks=(64, 64, 8))
>>> g = cubekit.dask.rcmg(cube)              # lazy (300, 200) float32, chunks (64, 64)
>>> bool((g.compute() == cubekit.rcmg(cube.compute())).all())
True
"""
from __future__ import annotations

import numpy as np

from . import _gradient

__all__ = ["rcmg", "RCMG_HALO"]

#: Pixels each RCMG chunk reads beyond its own (the 3x3 window; the 5-pixel cross needs no more).
RCMG_HALO = 1


def _dask_array():
    try:
        import dask.array as da
    except ImportError as e:  # pragma: no cover - dask is optional
        raise ImportError("cubekit.dask needs Dask (Debian: python3-dask; pip: dask[array])") from e
    return da


def _local(array, halo, function, dtype):
    """function over the chunks of a (H, W) or (H, W, B) array with `halo` pixels of overlap on both
    spatial axes, returning (H, W) of `dtype`. No padding at the array's outer edges: there each
    chunk is at the scene's border, where the cubekit function applies its own border rule, so the
    result equals the whole-array call."""
    da = _dask_array()
    a = da.asarray(array)
    if a.ndim not in (2, 3):
        raise ValueError(f"cube has {a.ndim} dimensions; expected (H, W) or (H, W, B)")
    if a.ndim == 3 and a.numblocks[2] != 1:
        a = a.rechunk({2: -1})  # every pixel's spectrum whole in one chunk
    # A chunk thinner than the halo cannot lend its neighbours the rows they need.
    small = [axis for axis in (0, 1) if min(a.chunks[axis]) < halo and a.shape[axis] > halo]
    if small:
        a = a.rechunk({axis: max(halo, max(a.chunks[axis])) for axis in small})
    depth = {0: halo, 1: halo}
    if a.ndim == 3:
        depth[2] = 0
    grown = da.overlap.overlap(a, depth=depth, boundary="none")
    meta = da.utils.meta_from_array(a, ndim=2, dtype=dtype)
    blocks = grown.map_blocks(function, drop_axis=2 if a.ndim == 3 else [], dtype=dtype, meta=meta)
    return da.overlap.trim_internal(blocks, {0: halo, 1: halo}, boundary="none")


def rcmg(cube, **keywords):
    """cubekit.rcmg over the chunks of a dask array (halo 1); keywords as cubekit.rcmg's.

    Returns a lazy (H, W) array (float32, or float64 with out_type='f64') equal to
    ``cubekit.rcmg(cube.compute(), **keywords)`` bit for bit.
    """
    if "out" in keywords:
        raise ValueError("cubekit.dask.rcmg: 'out' cannot be given (each chunk gets its own output)")
    dtype = np.float64 if keywords.get("out_type", "f32") == "f64" else np.float32
    return _local(cube, RCMG_HALO, lambda block: _gradient.rcmg(block, **keywords), dtype)
