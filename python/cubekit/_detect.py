"""Target detection with networks (spec detect.md; cubekit/detect.hpp, detect_models.hpp,
detect_train.hpp, synth.hpp): the RBF-network pixel detector, the multi-resolution quad-tree
detector, their model files and training, and the synthetic scenes; and the helpers the classical
detectors (_classical.py: ``rx``, ``matched_filter``, ``ace``, ``cem``, ``sam``, their statistics and
the scoring of a map) share. Each is the CLI's ``cubekit detect ...`` / ``train`` / ``synth``: the
same library code, the same numbers.

Models are given as a path, JSON text, or a dict with the model file's fields (what
``read_model`` returns; NumPy arrays are accepted in it); the library validates them and names the
offending field.
"""
from __future__ import annotations

import inspect
import json
import os

import numpy as np

from . import _cubekit, _runtime
from ._kmeans import _as_input, _shape

#: One row per detected object of ``detect_rbfn``: named as the CLI's <stem>.objects.json. Box
#: [x0, x0 + width) x [y0, y0 + height) (x = column, y = row); centroid = mean pixel coordinates.
OBJECT_DTYPE = np.dtype([("label", "<i8"), ("area", "<i8"), ("x0", "<i8"), ("y0", "<i8"), ("width", "<i8"),
                         ("height", "<i8"), ("centroid_x", "<f8"), ("centroid_y", "<f8"), ("peak_score", "<f8"),
                         ("peak_x", "<i8"), ("peak_y", "<i8"), ("mean_score", "<f8")])


# ---- helpers ----------------------------------------------------------------------------------------

def _json_default(x):
    if hasattr(x, "tolist"):  # NumPy arrays and scalars
        return x.tolist()
    raise TypeError(f"{type(x).__name__} is not a JSON value")


def _non_finite(value, path: str):
    """The path ("weights[1]", "ann1.b1[0]") of the first non-finite number in a model dict, or None."""
    if isinstance(value, dict):
        for k, v in value.items():
            found = _non_finite(v, f"{path}.{k}" if path else str(k))
            if found:
                return found
        return None
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _non_finite(v, f"{path}[{i}]")
            if found:
                return found
        return None
    if isinstance(value, float) and not np.isfinite(value):
        return f"{path} = {value!r}"
    return None


def _model_text(model, function: str, name: str = "model"):
    """(JSON text, source, type) of a model given as a path, JSON text or a dict."""
    if isinstance(model, dict):
        bad = _non_finite(model, "")
        if bad:
            raise ValueError(f"{name}: {bad} is not finite")  # JSON has no NaN: named here, as the library would
        try:
            text = json.dumps(model, default=_json_default, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{function}: {name}: {e}") from None
        source, parsed = name, model
    elif isinstance(model, (str, bytes, os.PathLike)):
        s = os.fsdecode(model) if isinstance(model, bytes) else os.fspath(model)
        if s.lstrip().startswith("{"):
            text, source = s, name
        else:
            with open(s, encoding="utf-8") as f:  # OSError naming the file when it cannot be read
                text = f.read()
            source = s
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{source}: not a JSON model file: {e}") from None
    else:
        raise TypeError(f"{function}: {name} is a {type(model).__name__}; expected a path, JSON text or a dict with "
                        "the model file's fields (read_model)")
    kind = parsed.get("type") if isinstance(parsed, dict) else None
    if not isinstance(kind, str):
        raise ValueError(f"{source}: type is missing (expected \"rbfn\" or \"multires\")")
    return text, source, kind


def _to_kind(a, kind: str, like):
    """A host NumPy array (or None) as an array of the input's kind, on the input's device."""
    if a is None or kind == "numpy":
        return a
    if kind == "torch":
        import torch
        return torch.as_tensor(a, device=like.device)
    import cupy
    device = like.device.id if kind == "cupy" else None
    if device is None:
        return cupy.asarray(a)
    with cupy.cuda.Device(device):
        return cupy.asarray(a)


def _declarations(raw, keep=None):
    """The compiled declarations with 'auto' defaults shown as None (the keyword's None means the
    automatic value), optionally only the fields named in ``keep``."""
    out = []
    for name, default, doc, choices in raw:
        if default == "auto" and not isinstance(choices, list):
            default = None
        if keep is None or name in keep:
            out.append((name, default, doc, choices))
    return out


def _check_keywords(keywords: dict, declarations, function: str, extra=()):
    allowed = [d[0] for d in declarations] + list(extra)
    for key in keywords:
        if key not in allowed:
            raise TypeError(f"{function}() got an unexpected keyword argument '{key}'; its options are "
                            + ", ".join(allowed))


def _declare(function, params, declarations, doc: str, out: bool = True, common: bool = True):
    """Signature and docstring: ``params`` = [(name, default or inspect.Parameter.empty)], then the
    option keywords, then the common ones."""
    pos = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d) for n, d in params]
    extra = _runtime.common_parameters(out) if common else []
    function.__signature__ = inspect.Signature(pos + _runtime.option_parameters(declarations) + extra)
    text = doc.rstrip()
    if declarations:
        text += "\n\nOptions\n-------\n" + _runtime.option_docs(declarations)
    if common:
        text += "\n\nCommon\n------\n" + _runtime.COMMON_DOC
    function.__doc__ = text + "\n"
    return function


def _pop_flag(keywords: dict, name: str, function: str) -> bool:
    v = keywords.pop(name, False)
    if not isinstance(v, (bool, np.bool_)):
        raise ValueError(f"{function}: {name} = {v!r}; expected True or False")
    return bool(v)


def _host_mask(m):
    """A host mask; 64-bit integers (NumPy's default) as uint8 0/1 (nonzero = set)."""
    m = _runtime.to_host(m)
    if m.dtype.kind in "iu" and m.dtype.itemsize == 8:
        m = (m != 0).astype(np.uint8)
    return m


def _object_table(columns: dict) -> np.ndarray:
    n = len(columns["label"])
    t = np.zeros(n, OBJECT_DTYPE)
    for name in OBJECT_DTYPE.names:
        t[name] = columns[name]
    return t


# ---- models -----------------------------------------------------------------------------------------

def read_model(path):
    text, source, kind = _model_text(path, "read_model")
    return json.loads(_cubekit.model_json(text, source, kind))


def write_model(model, path):
    text, source, kind = _model_text(model, "write_model")
    _cubekit.write_model(text, source, kind, os.fspath(path))


# ---- RBF network: pixel level -------------------------------------------------------------------------

def detect_rbfn(cube, model, **keywords):
    ctx, kind, out, progress = _runtime.begin(cube, keywords, "detect_rbfn")
    cube = _as_input(cube, kind)
    text, source, _ = _model_text(model, "detect_rbfn")
    if out is None and kind != "numpy":
        h, w, _b = _shape(cube, "detect_rbfn", "cube")
        out = _runtime.empty(kind, cube, (h, w), "float32")
    d = _cubekit.detect_rbfn(ctx, cube, out, text, source, keywords, progress)
    d["objects"] = _object_table(d["objects"])
    d["mask"] = _to_kind(d["mask"], kind, cube)
    d["labels"] = _to_kind(d["labels"], kind, cube)
    return d


def rbfn_scores(cube, models, **keywords):
    tiles = _runtime.pop_tile_keywords(keywords)
    if tiles or _runtime.is_path(cube):
        return _rbfn_scores_tiled(cube, models, keywords, tiles)
    ctx, kind, out, progress = _runtime.begin(cube, keywords, "rbfn_scores")
    _check_keywords(keywords, _SCORE_DECLARATIONS, "rbfn_scores")
    cube = _as_input(cube, kind)
    single = isinstance(models, (dict, str, bytes, os.PathLike))
    listed = [models] if single else list(models)
    parsed = [_model_text(m, "rbfn_scores", "model" if single else f"models[{j}]") for j, m in enumerate(listed)]
    if out is None:
        h, w, _b = _shape(cube, "rbfn_scores", "cube")
        out = _runtime.new_output(kind, cube, (h, w) if single else (h, w, len(listed)), "float32")
    return _cubekit.rbfn_scores(ctx, cube, out, [p[0] for p in parsed], [p[1] for p in parsed], keywords, progress)


def _rbfn_scores_tiled(cube, models, keywords, tiles):
    """The tiled path of rbfn_scores: a NumPy array or a file path (ENVI/.npy read by windows); NumPy out."""
    path = _runtime.is_path(cube)
    ctx, progress = _runtime.begin_tiled(cube, keywords, tiles, "rbfn_scores")
    _check_keywords(keywords, _SCORE_DECLARATIONS, "rbfn_scores")
    single = isinstance(models, (dict, str, bytes, os.PathLike))
    listed = [models] if single else list(models)
    parsed = [_model_text(m, "rbfn_scores", "model" if single else f"models[{j}]") for j, m in enumerate(listed)]
    scores, _run = _cubekit.rbfn_scores_tiled(ctx, os.fspath(cube) if path else cube, [p[0] for p in parsed],
                                              [p[1] for p in parsed], keywords, tiles, progress)
    return scores[:, :, 0] if single else scores


# ---- multi-resolution ----------------------------------------------------------------------------------

def _begin_no_out(x, keywords, function):
    backend, device, threads, _out, progress = _runtime.split_common(keywords, out=False)
    ctx, kind = _runtime.context(x, backend, device, threads)
    return ctx, kind, progress


def detect_multires(cube, model, **keywords):
    tiles = _runtime.pop_tile_keywords(keywords)
    if tiles or _runtime.is_path(cube):  # the block sums in tiles (a NumPy array or a file read by windows)
        ctx, progress = _runtime.begin_tiled(cube, keywords, tiles, "detect_multires")
        text, source, _ = _model_text(model, "detect_multires")
        result, _run = _cubekit.detect_multires_tiled(ctx, _runtime.fspath_or(cube), text, source, keywords, tiles, progress)
        return result
    ctx, kind, progress = _begin_no_out(cube, keywords, "detect_multires")
    cube = _as_input(cube, kind)
    text, source, _ = _model_text(model, "detect_multires")
    return _cubekit.detect_multires(ctx, cube, text, source, keywords, progress)


def window_features(cube, block=8, level=0, **keywords):
    return_counts = _pop_flag(keywords, "return_counts", "window_features")
    ctx, kind, progress = _begin_no_out(cube, keywords, "window_features")
    _check_keywords(keywords, [], "window_features", ["return_counts"])
    for name, v in (("block", block), ("level", level)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"window_features: {name} = {v!r}; expected an integer")
    features, counts = _cubekit.window_features(ctx, _as_input(cube, kind), int(block), int(level), progress)
    return (features, counts) if return_counts else features


# ---- training and synthetic scenes ----------------------------------------------------------------------

def _labels_u8(labels, function, name):
    a = np.asarray(labels)
    if a.dtype.kind in "iu" and a.dtype != np.uint8:
        if a.size and not np.isin(a, (0, 1, 255)).all():
            raise ValueError(f"{function}: {name} holds values other than 0, 1 and 255 "
                             "(1 target, 0 background, 255 ignore)")
        a = a.astype(np.uint8)
    return a


def _training_data(cubes, labels, function):
    single = hasattr(cubes, "shape")
    cubes = [cubes] if single else list(cubes)
    labels = [labels] if hasattr(labels, "shape") else list(labels)
    host = [_runtime.to_host(c) for c in cubes]  # training reads host views
    names = ["labels" if len(labels) == 1 else f"labels[{i}]" for i in range(len(labels))]
    return host, [_labels_u8(_runtime.to_host(m), function, n) for m, n in zip(labels, names)]


def _train(function, binding, cubes, labels, keywords, *extra):
    return_report = _pop_flag(keywords, "return_report", function)
    backend, device, threads, _out, progress = _runtime.split_common(keywords, out=False)
    cubes, labels = _training_data(cubes, labels, function)
    ctx, _kind = _runtime.context(cubes[0] if cubes else np.zeros((1, 1)), backend, device, threads)
    model_json, report_json, more = binding(ctx, cubes, labels, *extra, keywords, progress)
    model = json.loads(model_json)
    if not return_report:
        return model
    report = json.loads(report_json)
    report["seconds"] = more["seconds"]
    return model, report


def train_rbfn(cubes, labels, **keywords):
    target_name = keywords.pop("target_name", "")
    if not isinstance(target_name, str):
        raise ValueError(f"train_rbfn: target_name = {target_name!r}; expected a string")
    return _train("train_rbfn", _cubekit.train_rbfn, cubes, labels, keywords, target_name)


def train_multires(cubes, labels, **keywords):
    return _train("train_multires", _cubekit.train_multires, cubes, labels, keywords)


def _synth(scene, seed, keywords):
    function = "synth_" + scene
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2 ** 64:
        raise ValueError(f"{function}: seed = {seed!r}; expected an integer 0..2**64-1")
    return _cubekit.synth(scene, int(seed), keywords)


def synth_castaways(seed=0, **keywords):
    return _synth("castaways", seed, keywords)


def synth_leaves(seed=0, **keywords):
    return _synth("leaves", seed, keywords)


# ---- signatures and docstrings ----------------------------------------------------------------------------

_PIXEL_DECLARATIONS = _declarations(_cubekit.detect_rbfn_declarations())
_SCORE_DECLARATIONS = _declarations(_cubekit.detect_rbfn_declarations(), ("mapping", "chunk_pixels"))
_MULTIRES_DECLARATIONS = _declarations(_cubekit.detect_multires_declarations())
_EMPTY = inspect.Parameter.empty

_MODEL_EXAMPLE = """>>> import numpy as np, cubekit
>>> cube = np.zeros((32, 32, 3), np.float32); cube[8:12, 20:26] = (0.1, 0.5, 0.9)
>>> model = {"type": "rbfn", "bands": 3, "hidden": 1, "centres": [[0.1, 0.5, 0.9]],
...          "sigma": [0.2], "weights": [1], "bias": 0, "threshold": 0.5}"""

_declare(read_model, [("path", _EMPTY)], [], """
A model file (JSON, spec detect.md 0.4) as a dict with the file's fields, validated, every field
written (the library's canonical form: what ``cubekit train`` writes and ``write_model`` takes).
A JSON text or a dict is accepted too. Raises ValueError naming the file and the field
("m.json: sigma[2] = -1; expected > 0"), OSError when the file cannot be read.

Example
-------
>>> import cubekit, json, os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "one.json")
>>> cubekit.write_model({"type": "rbfn", "bands": 2, "hidden": 1, "centres": [[0, 1]], "sigma": [0.5],
...                      "weights": [1], "bias": 0}, path)
>>> m = cubekit.read_model(path)
>>> m["type"], m["centres"], m["threshold"]
('rbfn', [[0.0, 1.0]], 0.5)
""", common=False)

_declare(write_model, [("model", _EMPTY), ("path", _EMPTY)], [], """
Writes a model (a dict with the model file's fields, JSON text or a path) as a model file, after
validating it; atomically (nothing half-written). NumPy arrays in the dict are written as lists.
""", common=False)

_declare(detect_rbfn, [("cube", _EMPTY), ("model", _EMPTY)], _PIXEL_DECLARATIONS, """
Pixel-level detection with an RBF network, as ``cubekit detect rbfn``: the score of every pixel,
y = sum_i w_i exp(-|x' - u_i|^2 / (2 sigma_i^2)) + bias with x' = gain (x - offset), in float32;
detected pixels (score > threshold) form 8-connected objects.

Parameters
----------
cube : array (H, W) or (H, W, B), B = the model's bands
    NumPy, CuPy or PyTorch CUDA; any dtype of bool, (u)int8/16/32, float16/32/64; any strides.
model : a path, JSON text, or a dict with the model file's fields (``read_model``)

Returns
-------
dict: ``score`` (H, W) float32 of the input's kind (``out=`` if given; NaN where a band is not
finite), ``mask`` (H, W) uint8 and ``labels`` (H, W) int32 of the input's kind (None with
objects=False), ``objects`` a structured array (OBJECT_DTYPE: label, area, x0, y0, width, height,
centroid_x, centroid_y, peak_score, peak_x, peak_y, mean_score), ``threshold`` used,
``non_finite`` pixels (None for a device ``out`` with objects=False: the call then stays on the
device), ``detected`` pixels.

Example
-------
""" + _MODEL_EXAMPLE + """
>>> r = cubekit.detect_rbfn(cube, model)
>>> r["detected"], r["objects"][["x0", "y0", "width", "height"]].tolist()
(24, [(20, 8, 6, 4)])
>>> float(r["score"][10, 22]), r["mask"].dtype.name
(1.0, 'uint8')
""")

_declare(rbfn_scores, [("cube", _EMPTY), ("models", _EMPTY)], _SCORE_DECLARATIONS, """
The score maps of several RBF networks from one pass over the cube (one read, one map each): the
scores of ``detect_rbfn`` without the objects.

Parameters
----------
cube : array (H, W) or (H, W, B); every model takes B bands; or a file path (computed in tiles,
    ENVI/.npy read by windows)
models : one model (a path, JSON text or dict), or a list of them
memory_limit, device_memory_limit, devices, tile_size : optional
    Compute in tiles within these budgets / over these GPUs (as cubekit.rcmg); bit-identical scores.

Returns
-------
float32 of the input's kind: (H, W) for one model, (H, W, J) for a list of J (band j = model j);
``out=`` if given.

Example
-------
""" + _MODEL_EXAMPLE + """
>>> s = cubekit.rbfn_scores(cube, [model, dict(model, sigma=[0.4])])
>>> s.shape, float(s[10, 22, 1])
((32, 32, 2), 1.0)
""")
_runtime.with_tile_keywords(rbfn_scores)

_STEP_EXAMPLE = """>>> import numpy as np, cubekit
>>> def step(c):      # positive iff the first band's window std > c (spec B.6 hand-set networks)
...     return {"type": "mlp", "inputs": 1, "hidden": 1, "W1": [[1000.0]], "b1": [-1000.0 * c],
...             "w2": [1.0], "b2": 0.0, "in_min": [-1.0], "in_max": [1.0]}
>>> model = {"type": "multires", "block": 8, "min_window": 8, "ann1": step(0.01), "ann2": step(0.4)}
>>> cube = np.zeros((128, 128), np.float32); cube[48:64, 48:64] = 1"""

_declare(detect_multires, [("cube", _EMPTY), ("model", _EMPTY)], _MULTIRES_DECLARATIONS, """
Multi-resolution detection, as ``cubekit detect multires``: a quad-tree of windows from the whole
image down to the model's min_window; at each window ANN-1 ("a target inside?") and ANN-2 ("the
right scale?") judge the per-band standard deviation; accepted windows are the detections.

Parameters
----------
cube : array (H, W) or (H, W, B), B = the networks' inputs; NumPy, CuPy or PyTorch CUDA; or a file
    path (ENVI/.npy read by windows)
model : a path, JSON text, or a dict with the model file's fields (type "multires")
memory_limit, device_memory_limit, devices, tile_size : optional
    Compute the block sums in tiles cut at block edges within these budgets / over these GPUs (as
    cubekit.rcmg), then one search: the same result. NumPy array or path only.

Returns
-------
dict with the CLI's JSON names: ``detections`` (a list of windows sorted by (y0, x0), each a dict
x0, y0, width, height, level, y1, y2 (None when ANN-2 was not evaluated), at_min_scale, outcome),
``trace`` (every evaluated window, with trace=True), ``levels`` (per level, coarsest first:
level, evaluated, positive, accepted, split), ``skipped_samples``, ``block``, ``min_window``,
``top_level``, ``implementation``.

Example
-------
""" + _STEP_EXAMPLE + """
>>> r = cubekit.detect_multires(cube, model)
>>> [(w["x0"], w["y0"], w["width"], w["height"]) for w in r["detections"]]
[(32, 32, 32, 32)]
>>> sum(level["evaluated"] for level in r["levels"])
9
""", out=False)
_runtime.with_tile_keywords(detect_multires)

_declare(window_features, [("cube", _EMPTY), ("block", 8), ("level", 0)],
         [("return_counts", False, "also return the finite-sample counts per node and band", None)], """
The multi-resolution detector's window feature, the per-band standard deviation (float64, from
the same block-sum pyramid detection uses), of every quad-tree node at ``level`` (side
block * 2**level, clipped to the image).

Returns
-------
(gy, gx, B) float64 NumPy, node (j, i) covering rows j*s.. and columns i*s.. (s = block * 2**level);
with return_counts=True also the (gy, gx, B) int64 counts of finite samples per node and band.

Example
-------
>>> import numpy as np, cubekit
>>> cube = np.zeros((16, 16, 2), np.float32); cube[:8, :8, 0] = 1
>>> f = cubekit.window_features(cube, block=8, level=1)
>>> f.shape, float(f[0, 0, 0]), float(f[0, 0, 1])
((1, 1, 2), 0.4330127018922193, 0.0)
""", out=False)

_declare(train_rbfn, [("cubes", _EMPTY), ("labels", _EMPTY)],
         _declarations(_cubekit.train_rbfn_declarations()) +
         [("target_name", "", "the model's target_name", None),
          ("return_report", False, "also return the training report (a dict; its 'seconds' is the wall time)", None)],
         """
Trains an RBF network for ``detect_rbfn`` (spec detect.md A.4), as ``cubekit train rbfn``: the
same inputs and seed give the same model, bit for bit. Runs on the CPU (the k-means of the
centres on the GPU with backend='cuda', which gives the same centres).

Parameters
----------
cubes : one array (H, W, B) or a list of them (same B); device arrays are brought to the host
labels : one (H, W) label image per cube: 1 target, 0 background, 255 ignore (uint8, bool, or
    integers holding only those values)

Returns
-------
The model as a dict with the model file's fields (``write_model`` writes it; its "training"
object holds the provenance); with return_report=True, ``(model, report)``.

Example
-------
>>> import cubekit
>>> s = cubekit.synth_castaways(7, width=96, height=96, bands=8, targets=2, buoys=1, boats=0)
>>> model = cubekit.train_rbfn(s["cube"], s["truth"], hidden=4, seed=1)
>>> model["type"], model["bands"], len(model["sigma"])
('rbfn', 8, 4)
>>> r = cubekit.detect_rbfn(s["cube"], model)
>>> len(r["objects"]) >= 2
True
""", out=False)

_declare(train_multires, [("cubes", _EMPTY), ("labels", _EMPTY)],
         _declarations(_cubekit.train_multires_declarations()) +
         [("return_report", False, "also return the training report (a dict; its 'seconds' is the wall time)", None)],
         """
Trains ANN-1 and ANN-2 of the multi-resolution detector (spec detect.md B.4), as ``cubekit train
multires``: windows of every quad-tree level (and shifted grids), their std feature, Levenberg-
Marquardt with MATLAB trainlm's defaults and early stopping; deterministic from the seed.

Parameters
----------
cubes, labels : as ``train_rbfn``

Returns
-------
The model as a dict (type "multires"); with return_report=True, ``(model, report)``; the report's
end_to_end runs the detector on every training cube.

Example
-------
>>> import cubekit
>>> s = cubekit.synth_castaways(3, width=128, height=128, bands=4, targets=3, buoys=1, boats=0)
>>> model, report = cubekit.train_multires(s["cube"], s["truth"], seed=2, return_report=True)
>>> model["type"], model["ann1"]["inputs"], [n["name"] for n in report["networks"]]
('multires', 4, ['ann1', 'ann2'])
""", out=False)

_SYNTH = _declarations(_cubekit.synth_declarations())
_SYNTH_RETURNS = """
Returns
-------
dict of NumPy arrays: ``cube`` (H, W, bands) float32 (wavelengths 400..1000 nm), ``truth`` (H, W)
uint8 (1 on target pixels, coverage >= 0.5), ``objects`` (H, W) int32 (the id of the object
there, 0 none), ``coverage`` (H, W) float32; ``placed`` (one dict per object: id, kind, target,
cx, cy, half_length, half_width, angle, amplitude, radius, area, x0, y0, width, height),
``wavelengths``, ``seed``, ``options`` (resolved), ``scene``. Deterministic: the same seed and
options give the same scene on every run.
"""
_declare(synth_castaways, [("seed", 0)], _SYNTH, """
The synthetic sea scene of spec detect.md C.3 (``cubekit synth castaways``): castaways (the
targets), buoys and boats on a rippled sea, 1024 x 1024 x 64 by default.
""" + _SYNTH_RETURNS + """
Example
-------
>>> import cubekit
>>> s = cubekit.synth_castaways(1, width=256, height=192, bands=16, targets=2, buoys=1, boats=1)
>>> s["cube"].shape, s["cube"].dtype.name, [o["kind"] for o in s["placed"]]
((192, 256, 16), 'float32', ['castaway', 'castaway', 'buoy', 'boat'])
>>> int(s["truth"].sum()) == sum(o["area"] for o in s["placed"] if o["target"])
True
""", common=False)

_declare(synth_leaves, [("seed", 0)], _SYNTH, """
The synthetic leaves scene of spec detect.md C.3 (``cubekit synth leaves``): leaves (the targets)
on paper, 1024 x 256 x 64 by default; no distractors (buoys and boats must stay unset or 0).
""" + _SYNTH_RETURNS + """
Example
-------
>>> import cubekit
>>> s = cubekit.synth_leaves(2, width=256, height=128, bands=8, targets=3)
>>> s["cube"].shape, len(s["placed"])
((128, 256, 8), 3)
""", common=False)
