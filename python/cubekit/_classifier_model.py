"""A trained pixel-wise classifier as a Python object (classify.hpp's ClassifierModel): trained once,
then applied to any scene of the same bands (whole, in tiles, from a file, or chunk by chunk with
cubekit.dask.predict), saved as ``cubekit classify --model-out`` writes it and read back. It pickles
exactly, so a Dask cluster's workers receive it whole."""
from __future__ import annotations

import os

from . import _cubekit, _runtime
from ._classify import _begin, _labels
from ._detect import _check_keywords, _declarations
from ._kmeans import _as_input

_TRAIN = _declarations(_cubekit.train_declarations())


class ClassifierModel:
    """A trained pixel-wise classifier: the RBF-kernel SVM (``classifier == "svm"``) or the class
    means of the spectral-angle (``"sam"``) or minimum-distance (``"mindist"``) classifiers.

    Made by :func:`train_classifier` or :func:`load_classifier`; ``info`` holds what ``classify``
    reports as its ``model`` (classes, C, gamma, cross-validation accuracy, support vectors; or the
    means). Pickling keeps every number (a saved LIBSVM file keeps 8 digits of the support vectors).

    >>> import numpy as np, cubekit
    >>> cube = np.zeros((8, 8, 2), np.float32); cube[:, 4:] = (5, 1); cube[:, :4] = (1, 5)
    >>> train = np.zeros((8, 8), np.int32); train[0, 0] = 3; train[0, 7] = 7
    >>> m = cubekit.train_classifier(cube, train, classifier="mindist")
    >>> m.classifier, m.classes, m.bands
    ('mindist', [3, 7], 2)
    >>> m.predict(cube)[4].tolist()
    [3, 3, 3, 3, 7, 7, 7, 7]
    """

    def __init__(self, native):
        self._native = native

    @property
    def classifier(self) -> str:
        return self._native.classifier

    @property
    def classes(self) -> list:
        return list(self._native.classes)

    @property
    def bands(self) -> int:
        return int(self._native.bands)

    @property
    def info(self) -> dict:
        return self._native.info()

    def predict(self, cube, **keywords):
        """The class of every pixel of ``cube`` ((H, W, B) with the model's B bands, any dtype; or the
        path of a cube file, read by windows in tiles): (H, W) int32 NumPy, 0 where a band is not
        finite. Keywords: backend, device, threads, progress, and the tile keywords (memory_limit,
        device_memory_limit, devices, tile_size): the same map, each tile predicted on its own."""
        tiles = _runtime.pop_tile_keywords(keywords)
        path = _runtime.is_path(cube)
        if tiles or path:
            if not path and _runtime.array_kind(cube) != "numpy":
                raise ValueError("predict: the tile keywords take a NumPy cube; this one is on a CUDA device already")
            if tiles.get("devices") is not None and keywords.get("backend") in (None, "auto"):
                keywords["backend"] = "cuda"
        ctx, kind, progress = _begin(None if path else cube, keywords, "predict")
        _check_keywords(keywords, [], "predict")
        source = os.fspath(cube) if path else _as_input(cube, kind)
        return _cubekit.predict_classifier(ctx, self._native, source, tiles, progress)

    def save(self, path) -> None:
        """Writes the model as ``cubekit classify --model-out`` does: svm: LIBSVM's model file and
        ``path + ".scaling.json"``; sam, mindist: JSON. :func:`load_classifier` reads it back."""
        self._native.save(os.fspath(path))

    def __getstate__(self):
        return self._native.__getstate__()

    def __setstate__(self, state):
        self._native = _cubekit.NativeClassifierModel.__new__(_cubekit.NativeClassifierModel)
        self._native.__setstate__(state)

    def __repr__(self) -> str:
        return f"ClassifierModel({self.classifier!r}, classes={self.classes}, bands={self.bands})"


def train_classifier(cube, train, classifier="svm", memory_limit=None, **keywords) -> ClassifierModel:
    """Trains a pixel-wise classifier on the labelled pixels of ``train`` ((H, W), 0 = unlabelled), as
    ``cubekit classify`` does: classifier='svm' an RBF-kernel C-SVC (LIBSVM) with C and gamma chosen
    by ``cv_folds``-fold cross-validation (seeded by ``seed``) unless ``svm_c``/``svm_gamma`` are
    given; 'sam' or 'mindist' the class mean spectra. Pixels with a non-finite band are left out.
    ``cube`` may be the path of a cube file (ENVI, .npy, GeoTIFF) larger than memory: the rows that
    hold training pixels are read a strip at a time (``memory_limit`` bytes or "512M" a strip; None =
    256 MiB) and the model is the one the whole cube gives. Keywords: cv_folds, svm_c, svm_gamma,
    seed, backend, device, threads, progress. Returns a :class:`ClassifierModel` (see its example)."""
    path = _runtime.is_path(cube)
    ctx, kind, progress = _begin(None if path else cube, keywords, "train_classifier")
    _check_keywords(keywords, _TRAIN, "train_classifier")
    if not isinstance(classifier, str):
        raise ValueError(f"train_classifier: classifier = {classifier!r}; expected 'svm', 'sam' or 'mindist'")
    train = _labels(train, "train_classifier", "train")
    source = os.fspath(cube) if path else _as_input(cube, kind)
    return ClassifierModel(_cubekit.train_classifier(ctx, source, train, classifier, keywords, progress, memory_limit))


def load_classifier(path) -> ClassifierModel:
    """Reads a model saved by :meth:`ClassifierModel.save` or ``cubekit classify --model-out``: a
    class-means JSON file, or a LIBSVM model file with its ``.scaling.json`` beside it."""
    return ClassifierModel(_cubekit.read_classifier_model(os.fspath(path)))
