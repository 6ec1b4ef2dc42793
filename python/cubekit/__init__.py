"""cubekit: GPU analysis of image cubes — hyperspectral and multispectral scenes, RGB photos and
grayscale images — with a CPU reference for every algorithm.

Arrays in, arrays out: NumPy arrays shaped (H, W) or (H, W, B) are computed on the CPU (or on the
GPU with ``backend="cuda"``); CuPy arrays and PyTorch CUDA tensors are computed on their own
device and stream without copying and come back as the same kind of array.

>>> import numpy as np, cubekit
>>> cube, meta = cubekit.read(cubekit.data_path("samson"))       # the shipped Samson scene
>>> cube.shape, meta["wavelengths"][:2]
((95, 95, 156), [401.46, 404.64])
>>> g = cubekit.rcmg(cube)                                        # (95, 95) float32

Where a call spent its time (copies to and from the GPU, computing): ``cubekit.last_timings()``.

Errors: ValueError for invalid input (the CLI's exit code 2), OSError when the operating system
refuses (3), cubekit.DeviceError for the GPU (4).
"""
from ._cubekit import DeviceError, __version__, built_with_cuda, cuda_device_count, gdal_available
from ._gradient import rcmg
from ._io import data_path, imread, imsave, mat_variables, read, write
from ._runtime import last_timings
# -- k-means and PCA (_kmeans.py, _pca.py) --
from ._kmeans import KMeansResult, QuantizeResult, apply_palette, kmeans, quantize
from ._pca import PCAResult, pca, pca_transform
# -- edges, baselines, scores, connected components (_edges.py, _labels.py) --
from ._edges import (BaselineResult, EdgeScore, EdgesResult, baseline_edges, canny, edge_score, entropy_band_thresholds,
                     entropy_edges, quantize_to_u8)
from ._labels import COMPONENT_DTYPE, Components, label, label_components, remove_small_objects
# -- Zernike moments (_zernike.py) --
from ._zernike import ZernikeResult, zernike_moments, zernike_reconstruct, zernike_reconstruction_error
# -- target detection: networks, models, training, synthetic scenes (_detect.py) --
from ._detect import (OBJECT_DTYPE, detect_multires, detect_rbfn, rbfn_scores, read_model, synth_castaways, synth_leaves,
                      train_multires, train_rbfn, window_features, write_model)
# -- the classical detectors, their statistics and the scoring against a mask (_classical.py) --
from ._classical import (ace, background_stats, cem, detect_score, matched_filter, read_background_stats,
                         read_target_spectrum, roc_auc, rx, sam, write_background_stats)
# -- watershed and segmentation (_watershed.py) --
from ._watershed import SegmentResult, region_dtype, region_statistics, segment, watershed, watershed_boundary
# -- spectral-spatial classification: classifiers, region vote, scores, splits (_classify.py) --
from ._classify import classification_scores, classify, region_vote, stratified_split
from ._classifier_model import ClassifierModel, load_classifier, train_classifier

__all__ = [
    "DeviceError", "__version__", "built_with_cuda", "cuda_device_count", "gdal_available",
    "rcmg",
    "data_path", "imread", "imsave", "mat_variables", "read", "write", "last_timings",
    # -- k-means and PCA --
    "KMeansResult", "QuantizeResult", "apply_palette", "kmeans", "quantize",
    "PCAResult", "pca", "pca_transform",
    # -- edges, baselines, scores, connected components --
    "BaselineResult", "EdgeScore", "EdgesResult", "baseline_edges", "canny", "edge_score", "entropy_band_thresholds",
    "entropy_edges", "quantize_to_u8",
    "COMPONENT_DTYPE", "Components", "label", "label_components", "remove_small_objects",
    # -- Zernike moments --
    "ZernikeResult", "zernike_moments", "zernike_reconstruct", "zernike_reconstruction_error",
    # -- target detection --
    "OBJECT_DTYPE", "detect_rbfn", "rbfn_scores", "detect_multires", "window_features", "read_model", "write_model",
    "train_rbfn", "train_multires", "synth_castaways", "synth_leaves",
    "rx", "matched_filter", "ace", "cem", "sam", "background_stats", "read_background_stats", "write_background_stats",
    "read_target_spectrum", "detect_score", "roc_auc",
    # -- watershed and segmentation --
    "SegmentResult", "region_dtype", "region_statistics", "segment", "watershed", "watershed_boundary",
    # -- spectral-spatial classification --
    "classify", "region_vote", "classification_scores", "stratified_split", "ClassifierModel", "train_classifier",
    "load_classifier",
]
