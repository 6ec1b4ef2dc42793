"""Pixel-wise classification of dask arrays with a trained model (cubekit.dask re-exports it): each
pixel's class depends on its own spectrum only, so every chunk is predicted on its own."""
from __future__ import annotations

import numpy as np

from . import _runtime


def _predict_chunk(block, model, keywords):
    classes = model.predict(block, **keywords)
    if _runtime.array_kind(block) == "cupy":  # the chunk's own kind of array
        import cupy
        return cupy.asarray(classes)
    return classes


def predict(model, cube, **keywords):
    """The class of every pixel of a dask array (H, W, B) with a :class:`cubekit.ClassifierModel`
    (trained by cubekit.train_classifier or read by cubekit.load_classifier): a lazy (H, W) int32
    array equal to ``model.predict(cube.compute())`` exactly. The bands are rechunked into one chunk;
    the spatial chunks are predicted in parallel (NumPy or CuPy chunks; the model is pickled whole to
    each worker). Keywords: backend, device, threads (per chunk).

    >>> import dask.array as da, numpy as np, cubekit, cubekit.dask
    >>> cube = np.zeros((8, 8, 2), np.float32); cube[:, 4:] = (5, 1); cube[:, :4] = (1, 5)
    >>> train = np.zeros((8, 8), np.int32); train[0, 0] = 3; train[0, 7] = 7
    >>> m = cubekit.train_classifier(cube, train, classifier="sam")
    >>> lazy = cubekit.dask.predict(m, da.from_array(cube, chunks=(3, 5, 1)))
    >>> bool((lazy.compute() == m.predict(cube)).all())
    True
    """
    da = _runtime.dask_array()
    cube = da.asarray(cube)
    if cube.ndim != 3 or cube.shape[2] != model.bands:
        raise ValueError(f"cubekit.dask.predict: cube has shape {cube.shape}; expected (H, W, {model.bands}), "
                         "the model's bands")
    for key in keywords:
        if key not in ("backend", "device", "threads"):
            raise TypeError(f"cubekit.dask.predict() got an unexpected keyword argument '{key}'; its options are "
                            "backend, device, threads")
    cube = cube.rechunk({2: -1})
    return cube.map_blocks(_predict_chunk, model, keywords, drop_axis=2, dtype=np.int32)
