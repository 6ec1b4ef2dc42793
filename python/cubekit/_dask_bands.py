"""Families whose bands are processed each on its own, on Dask arrays (cubekit.dask re-exports them):
a chunk that holds whole bands gives the whole call's maps for those bands."""
from __future__ import annotations

import numpy as np

from . import _cubekit, _edges, _runtime

_COMMON = ("backend", "device", "threads", "progress")



def _baseline_chunk(chunk, keywords):
    return _edges.baseline_edges(chunk, **keywords).edges


def baseline_edges(cube, **keywords):
    """cubekit.baseline_edges over a dask array, band by band: every band is quantised to 8 bits and
    processed on its own (MATLAB's edge() rules), so chunks holding whole bands give the whole call's
    maps bit for bit. The spatial axes are rechunked into one chunk (a band is the unit of work); the
    bands keep their chunks, which Dask computes in parallel. Returns a lazy uint8 (0/1) array of the
    input's shape; the thresholds per band are not returned (cubekit.baseline_edges on a band gives them).

    >>> import dask.array as da, numpy as np, cubekit, cubekit.dask
    >>> x = np.random.default_rng(1).random((40, 30, 4)).astype(np.float32); x[10:30, 8:20] += 2
    >>> lazy = cubekit.dask.baseline_edges(da.from_array(x, chunks=(16, 16, 1)), method="sobel")
    >>> bool((lazy.compute() == cubekit.baseline_edges(x, method="sobel").edges).all())
    True
    """
    da = _runtime.dask_array()
    if keywords.get("out") is not None:
        raise ValueError("cubekit.dask.baseline_edges: 'out' cannot be given (each chunk makes its own map)")
    allowed = [d[0] for d in _cubekit.baseline_edges_declarations()] + list(_COMMON)
    unknown = sorted(k for k in keywords if k not in allowed)
    if unknown:
        raise TypeError(f"cubekit.dask.baseline_edges: unknown keyword(s) {unknown}; its options are " + ", ".join(allowed))
    keywords = {k: v for k, v in keywords.items() if k != "progress"}  # per chunk, a progress bar would repeat
    a = da.asarray(cube)
    if a.ndim not in (2, 3):
        raise ValueError(f"cube has {a.ndim} dimensions; expected (H, W) or (H, W, B)")
    a = a.rechunk({0: -1, 1: -1})
    meta = da.utils.meta_from_array(a, ndim=a.ndim, dtype=np.uint8)
    return a.map_blocks(_baseline_chunk, keywords, dtype=np.uint8, meta=meta)
