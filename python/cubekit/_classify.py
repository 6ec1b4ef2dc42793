"""Spectral-spatial classification (spec gradient-watershed.md part C; cubekit/classify.hpp): a
pixel-wise classifier (an RBF-kernel SVM trained with LIBSVM, the spectral angle or the Euclidean
distance to the class means), the majority vote inside watershed regions (Decision C-1), the scores
(OA, AA, Cohen's kappa, confusion matrix) and seeded stratified splits. Each is ``cubekit classify``'s
library code: the same numbers. The classification runs on the CPU (device arrays are brought to
the host); results are NumPy arrays.

Label images are (H, W) arrays of whole numbers 0..2**31-1 of any dtype (a MATLAB map read as
float64 included); 0 means unlabelled, no prediction or no region. Classes are the label values
themselves.
"""
from __future__ import annotations

import inspect

import numpy as np

from . import _cubekit, _runtime
from ._detect import _check_keywords, _declarations, _declare, _pop_flag
from ._kmeans import _as_input

_EMPTY = inspect.Parameter.empty
_CLASSIFY = _declarations(_cubekit.classify_declarations())
_VOTE = _declarations(_cubekit.region_vote_declarations())
_SPLIT = _declarations(_cubekit.split_declarations())


def _labels(a, function, name):
    """A host label image; 64-bit integers (NumPy's default) as int32 when they fit (the library
    reads every cube dtype but 64-bit integers)."""
    a = _runtime.to_host(a)
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.dtype.kind in "iu" and a.dtype.itemsize == 8:
        if a.size and (a.min() < 0 or a.max() > np.iinfo(np.int32).max):
            raise ValueError(f"{function}: {name} holds values outside 0..2**31-1")
        a = a.astype(np.int32)
    elif a.dtype == np.bool_:
        a = a.astype(np.uint8)
    return a


def _begin(x, keywords, function):
    backend, device, threads, _out, progress = _runtime.split_common(keywords, out=False)
    ctx, kind = _runtime.context(x, backend or "cpu", device, threads)
    return ctx, kind, progress


def classify(cube, train, classifier="svm", segment=None, **keywords):
    tiles = _runtime.pop_tile_keywords(keywords)
    if tiles:
        if _runtime.array_kind(cube) != "numpy":
            raise ValueError("classify: the tile keywords take a NumPy cube; this one is on a CUDA device already")
        if tiles.get("devices") is not None and keywords.get("backend") in (None, "auto"):
            keywords["backend"] = "cuda"
    ctx, kind, progress = _begin(cube, keywords, "classify")
    _check_keywords(keywords, _CLASSIFY, "classify")
    if not isinstance(classifier, str):
        raise ValueError(f"classify: classifier = {classifier!r}; expected 'svm', 'sam' or 'mindist'")
    if segment is not None and not isinstance(segment, str):
        raise ValueError(f"classify: segment = {segment!r}; expected 'watershed' or None")
    train = _labels(train, "classify", "train")
    return _cubekit.classify(ctx, _as_input(cube, kind), train, classifier, segment or "none", keywords, progress, tiles)


def region_vote(regions, class_map, **keywords):
    return_stats = _pop_flag(keywords, "return_stats", "region_vote")
    ctx, _kind, _progress = _begin(regions, keywords, "region_vote")
    _check_keywords(keywords, _VOTE, "region_vote")
    classes, stats = _cubekit.region_vote(ctx, _labels(regions, "region_vote", "regions"),
                                         _labels(class_map, "region_vote", "class_map"), keywords)
    return (classes, stats) if return_stats else classes


def classification_scores(predicted, truth, **keywords):
    ctx, _kind, _progress = _begin(predicted, keywords, "classification_scores")
    _check_keywords(keywords, [], "classification_scores")
    return _cubekit.classification_scores(ctx, _labels(predicted, "classification_scores", "predicted"),
                                          _labels(truth, "classification_scores", "truth"))


def stratified_split(truth, **keywords):
    ctx, _kind, _progress = _begin(truth, keywords, "stratified_split")
    _check_keywords(keywords, _SPLIT, "stratified_split")
    return _cubekit.stratified_split(ctx, _labels(truth, "stratified_split", "truth"), keywords)


_declare(classify, [("cube", _EMPTY), ("train", _EMPTY), ("classifier", "svm"), ("segment", None)], _CLASSIFY, """
Spectral-spatial classification, as ``cubekit classify``: a pixel-wise classifier trained on the
labelled pixels of ``train``, then with segment='watershed' the majority vote inside the regions of
the watershed of the cube's RCMG (a region keeps its pixel-wise classes when two classes tie, when
none of its pixels has a class, or when the winner holds less than ``tau`` of its pixels).

classifier='svm': an RBF-kernel C-SVC (LIBSVM, one-against-one) on inputs scaled per band to
[-1, 1] with the training pixels' min and max; C and gamma by ``cv_folds``-fold cross-validation
(LIBSVM's, folds seeded by ``seed``) over C in {1, 10, 100, 1000, 10000} and gamma in
{1/16, 1/4, 1, 4, 16}/B unless ``svm_c`` / ``svm_gamma`` are given; prediction by cubekit's own f64
twin of LIBSVM's decision function. 'sam': the smallest spectral angle to the class means;
'mindist': the nearest class mean (Euclidean). Ties go to the lowest class.

Parameters
----------
cube : array (H, W, B), any dtype; NumPy (device arrays are brought to the host)
train : (H, W) training labels (0 = unlabelled)
classifier : 'svm' | 'sam' | 'mindist'
segment : None | 'watershed'
memory_limit, device_memory_limit, devices, tile_size : optional
    The prediction, the RCMG and the watershed in tiles (NumPy cube; ``devices`` implies the GPU):
    the same maps, exactly. Training reads the labelled pixels of the whole cube.

Returns
-------
dict: ``classes`` (H, W) int32, the final map (the vote's with a segmentation, else the pixel-wise
map); ``pixelwise`` (H, W) int32 (0 where a band is not finite); ``regions`` (H, W) int32 watershed
labels or None; ``vote`` (regions, relabelled, ties, no_voters, below_tau, changed_pixels) or None;
``model`` (classifier, classes; svm: c, gamma, cv_accuracy, support_vectors, training_pixels, grid
as (c, gamma, accuracy) tuples; sam/mindist: counts, means (K, B)).

Example
-------
>>> import numpy as np, cubekit
>>> cube = np.zeros((8, 8, 2), np.float32); cube[:, 4:] = (5, 1); cube[:, :4] = (1, 5)
>>> train = np.zeros((8, 8), np.int32); train[0, 0] = 3; train[0, 7] = 7
>>> r = cubekit.classify(cube, train, classifier="mindist")
>>> r["classes"][4].tolist()
[3, 3, 3, 3, 7, 7, 7, 7]
>>> t = cubekit.classify(cube, train, classifier="mindist", segment="watershed", tile_size=(3, 3))
>>> bool((t["classes"] == cubekit.classify(cube, train, classifier="mindist", segment="watershed")["classes"]).all())
True
""", out=False)
_runtime.with_tile_keywords(classify)

_declare(region_vote, [("regions", _EMPTY), ("class_map", _EMPTY)],
         _VOTE + [("return_stats", False, "also return the vote's counts (a dict)", None)], """
Majority vote inside regions (spec part C step 4, Decision C-1): every pixel of a region receives
the class most of its pixels have (pixels of class 0 do not vote); a region keeps its pixel-wise
classes when two classes tie for the most votes, when none of its pixels votes, or when the winner
holds less than ``tau`` of the region's pixels. Pixels of region 0 keep their class. Exact integer
counts: deterministic.

Parameters
----------
regions : (H, W) region labels (0 = no region), e.g. ``watershed`` labels
class_map : (H, W) pixel-wise classes (0 = no prediction)

Returns
-------
(H, W) int32 NumPy; with return_stats=True ``(classes, stats)``, stats a dict: regions, relabelled,
ties, no_voters, below_tau, changed_pixels.

Example
-------
>>> import numpy as np, cubekit
>>> regions = np.array([[1, 1, 1, 2, 2, 2, 3, 3]])
>>> classes = np.array([[5, 5, 7, 4, 6, 0, 0, 0]])
>>> cubekit.region_vote(regions, classes).tolist()
[[5, 5, 5, 4, 6, 0, 0, 0]]
""", out=False)

_declare(classification_scores, [("predicted", _EMPTY), ("truth", _EMPTY)], [], """
Scores of a class map on the labelled pixels of ``truth`` (truth 0 = not scored), as spec part C
step 5: OA = correct / total; AA = the mean of the per-class accuracies; Cohen's kappa =
(p_o - p_e) / (1 - p_e), p_o = OA, p_e = sum_c row_c col_c / total**2 (NaN when p_e = 1).

Returns
-------
dict: ``oa``, ``aa``, ``kappa`` (floats), ``confusion`` (K, K) int64 (rows truth, columns
predicted), ``classes`` (K,) int32 (the truth classes and every value predicted on a scored pixel,
0 included when some scored pixel has no prediction), ``per_class_accuracy`` (K,) float64 (NaN for
a class without truth pixels), ``counts`` (K,) int64 (truth pixels per class), ``total``, ``correct``.

Example
-------
>>> import numpy as np, cubekit
>>> s = cubekit.classification_scores(np.array([[1, 2, 2, 2]]), np.array([[1, 1, 2, 2]]))
>>> s["oa"], s["aa"], s["kappa"], s["confusion"].tolist()
(0.75, 0.75, 0.5, [[1, 1], [0, 2]])
""", out=False)

_declare(stratified_split, [("truth", _EMPTY)], _SPLIT, """
Seeded stratified split of a truth map: class c (n_c pixels) gets max(1, round(train_fraction n_c))
training pixels drawn by a SplitMix64 stream (seed), the other labelled pixels are the test set.

Returns
-------
(train, test): two (H, W) int32 NumPy label images (0 elsewhere).

Example
-------
>>> import numpy as np, cubekit
>>> truth = np.array([[1, 1, 1, 1, 2, 2, 0, 0]])
>>> train, test = cubekit.stratified_split(truth, train_fraction=0.5, seed=1)
>>> int((train == 1).sum()), int((train == 2).sum()), int((test > 0).sum())
(2, 1, 3)
""", out=False)
