"""Zernike moments of images and cube bands, reconstruction, invariants (spec: zernike.md)."""
from __future__ import annotations

import numpy as np

from . import _cubekit, _runtime


class ZernikeResult:
    """Moments of a batch of images: the bands of the input, one row each.

    values: complex128 (images, count) — row i holds A(n, m) of image i for the (n, m) of
        ``indices`` (m >= 0; A(n, -m) is the conjugate); NumPy for NumPy input, CuPy/torch for
        device input.
    indices: list of (n, m); width, height, images; ndim (2 for an (H, W) input);
    method, precision, symmetric: what ran; disk: mapping, normalization, center, radius,
        pixel_count, symmetric, denominator; warnings; parameters (the options); backend.
    """

    tiled = None  #: the groups (tile keywords): {"tiles", "tile_height" (images a group), "peak_bytes", ...}

    def __init__(self, values, info, ndim):
        self.values = values
        self.ndim = ndim
        for key, value in info.items():
            setattr(self, key, value)
        self.indices = [tuple(i) for i in self.indices]

    def at(self, n: int, m: int, image: int = 0) -> complex:
        """A(n, m) of one image; m < 0 gives the conjugate of A(n, -m)."""
        try:
            k = self.indices.index((n, abs(m)))
        except ValueError:
            raise ValueError(f"A({n},{m}) was not computed") from None
        a = complex(_runtime.to_host(self.values)[image, k])
        return a.conjugate() if m < 0 else a

    def invariants(self):
        """|A(n, m)|: invariant to rotation, (images, count) float64."""
        return abs(self.values)

    def __repr__(self):
        return (f"ZernikeResult({self.images} image(s) {self.width}x{self.height}, {len(self.indices)} moments, "
                f"method={self.method!r}, backend={self.backend!r})")


def _request(max_order, order, moment, moments):
    given = [x is not None for x in (max_order, order, moment, moments)]
    if sum(given) != 1:
        raise ValueError("zernike_moments: give exactly one of max_order (a whole set n <= N), order (every "
                         "repetition of one order), moment ((n, m)) or moments (a list of (n, m))")
    if max_order is not None:
        return "set", int(max_order), 0, []
    if order is not None:
        return "order", int(order), 0, []
    if moment is not None:
        n, m = moment
        return "moment", int(n), int(m), []
    return "moments", 0, 0, [(int(n), int(m)) for n, m in moments]


def _count(kind, a, b, items):
    if kind == "set":
        return _cubekit.zernike_set_size(a)
    if kind == "order":
        return a // 2 + 1 if a >= 0 else 0  # a bad order is named by the library
    return 1 if kind == "moment" else len(items)


def _device_out(kind_of_array, images, rows, count):
    """A float64 (rows, count, 2) output of the input's kind, and its complex128 (rows, count) view."""
    out = _runtime.empty(kind_of_array, images, (rows, count, 2), "float64")
    if kind_of_array == "torch":
        import torch
        return out, torch.view_as_complex(out)
    return out, out.view("complex128").reshape(rows, count)


def zernike_moments(images, max_order=None, **keywords):
    order = keywords.pop("order", None)
    moment = keywords.pop("moment", None)
    moments = keywords.pop("moments", None)
    tiles = _runtime.pop_tile_keywords(keywords)
    if tiles:
        if _runtime.is_path(images):
            raise ValueError("zernike_moments: give an array (cubekit.read(path)); the tile keywords group its images")
        req = _request(max_order, order, moment, moments)
        ctx, progress = _runtime.begin_tiled(images, keywords, tiles, "zernike_moments")
        values, info = _cubekit.zernike_moments_tiled(ctx, images, *req, keywords, tiles, progress)
        return ZernikeResult(values, info, len(images.shape))
    backend, device, threads, _, progress = _runtime.split_common(keywords, out=False)
    ctx, kind = _runtime.context(images, backend, device, threads)
    req = _request(max_order, order, moment, moments)
    ndim = len(images.shape)
    out = view = None
    if kind != "numpy":
        rows = images.shape[2] if ndim == 3 else 1
        out, view = _device_out(kind, images, rows, _count(*req))
    values, info = _cubekit.zernike_moments(ctx, images, out, *req, keywords, progress)
    return ZernikeResult(values if out is None else view, info, ndim)


_DECLARATIONS = _cubekit.zernike_declarations()
_runtime.declare(zernike_moments, ["images", "max_order"], _DECLARATIONS, """
Zernike moments A(n, m) of an image, or of every band of a cube (one image per band: a batch of
same-size images is a cube), on the unit disk inscribed in the image (``mapping``).

Ask for exactly one of: ``max_order=N`` (every A(n, m), n <= N, m >= 0, in canonical order: n
ascending, then m), ``order=n`` (every repetition of order n), ``moment=(n, m)``, or
``moments=[(n, m), ...]`` (in the order given). The method by default is the one the spec picks
for what is asked (Kintner for a set, q-recursive for an order, direct for one moment).

Parameters
----------
images : array (H, W) or (H, W, B) — NumPy, CuPy or PyTorch CUDA, any dtype and strides.
memory_limit, device_memory_limit : int or str, optional
    Budgets (bytes, "512M") that compute the images in groups (NumPy input): each group staged,
    computed and its rows written, on the CPU or streamed through the GPUs; the same values bit for
    bit as the whole call on that backend (``.tiled`` reports the groups).
devices : list of int or "all", optional
    CUDA devices to deal the groups to (implies backend='cuda').
tile_size : (int, int), optional
    (any width, N): force groups of N images (testing).

Returns
-------
ZernikeResult with ``values`` complex128 (images, count) of the input's kind, ``indices``, the disk
and what ran; ``result.at(n, m)``, ``result.invariants()``; ``zernike_reconstruct(result)``.

Example
-------
>>> import numpy as np, cubekit
>>> img = np.zeros((64, 64)); img[20:44, 28:36] = 1          # a bar
>>> z = cubekit.zernike_moments(img, max_order=8)
>>> len(z.indices), z.at(0, 0).real > 0
(25, True)
>>> rebuilt = cubekit.zernike_reconstruct(z)                  # (64, 64) float64
>>> g = cubekit.zernike_moments(np.dstack([img, img.T]), max_order=8, tile_size=(1, 1))   # groups of 1
>>> bool((g.values[0] == z.values[0]).all()), g.tiled["tiles"]
(True, 2)
""", out=False)
zernike_moments.__signature__ = zernike_moments.__signature__.replace(parameters=[
    *list(zernike_moments.__signature__.parameters.values())[:2],
    *[_runtime.inspect.Parameter(n, _runtime.inspect.Parameter.KEYWORD_ONLY, default=None)
      for n in ("order", "moment", "moments")],
    *list(zernike_moments.__signature__.parameters.values())[2:]])
_runtime.with_tile_keywords(zernike_moments)


def zernike_reconstruct(result: ZernikeResult, max_order: int = -1, *, backend=None, device=None, threads=0, out=None):
    """The images back from their moments: f = sum over n <= max_order (-1: the highest complete order
    present) of A(n,0) R(n,0) + 2 sum_{m>0} Re(A(n,m) R(n,m) e^{jm theta}), on the pixels of the disk
    (0 outside). Every (n, m) with n <= max_order must be in the result.

    Returns float64 (H, W) for a 2-D input, else (H, W, images); NumPy (computed on the CPU unless
    backend='cuda'), or ``out`` (an array of that shape, filled in place, host or device).

    >>> z = cubekit.zernike_moments(img, max_order=20)
    >>> err = cubekit.zernike_reconstruction_error(img, cubekit.zernike_reconstruct(z), z)
    """
    values = _runtime.to_host(result.values)
    probe = out if out is not None else np.empty((1, 1))
    ctx, _ = _runtime.context(probe, backend, device, threads)
    target = out
    if out is not None and len(out.shape) == 2:
        target = out[:, :, None]  # (H, W) → (H, W, 1): the same memory
    image = _cubekit.zernike_reconstruct(ctx, values, result.indices, result.width, result.height, max_order,
                                         target, _flag_parameters(result))
    if out is not None:
        return out
    return image[:, :, 0] if result.ndim == 2 and image.shape[2] == 1 else image


def zernike_reconstruction_error(original, reconstruction, result: ZernikeResult):
    """||f_hat - f|| / ||f|| inside the result's disk, one value per image (host arrays)."""
    return _cubekit.zernike_reconstruction_error(original, reconstruction, result.width, result.height,
                                                 _flag_parameters(result))


def _flag_parameters(result):
    """The options a result was computed with, as keywords (center as a tuple)."""
    return {k: (tuple(v) if isinstance(v, list) else v) for k, v in result.parameters.items()}
