"""The region table (cubekit.region_statistics) of dask arrays (cubekit.dask re-exports it): the same
table as the whole-array call, bit for bit.

The integer columns (area, box, coordinate sums) are exact, so every row strip computes its own and
the client merges them. The means are float64 sums divided by the area; cubekit adds each region's
values in raster order, and a float sum depends on the order of its additions, so the strips add to
running sums one after another (a chain of tasks, one per strip: the graph grows with the strips,
not with the pixels), each in raster order: ``np.bincount`` adds its weights one after another in
the order given, and the running sums go first, so every region's sum is the raster-order chain."""
from __future__ import annotations

import numpy as np

from . import _runtime, _watershed

_MOMENTS = ("area", "x0", "y0", "x1", "y1", "sum_x", "sum_y")


def _strip_moments(labels, y0):
    """Per-label integer moments of one row strip: {label: [area, x0, y0, x1, y1, sum_x, sum_y]}."""
    labels = np.asarray(labels)
    ys, xs = np.nonzero(labels > 0)
    values = labels[ys, xs]
    ys = ys.astype(np.int64) + y0
    xs = xs.astype(np.int64)
    # Pixels grouped by label (a stable sort keeps raster order inside a label): exact integer
    # reductions per group.
    order = np.argsort(values, kind="stable")
    present, first, area = np.unique(values[order], return_index=True, return_counts=True)
    out = np.zeros((len(present), 7), np.int64)
    if len(present):
        xs, ys = xs[order], ys[order]
        out[:, 0] = area
        out[:, 1], out[:, 2] = np.minimum.reduceat(xs, first), np.minimum.reduceat(ys, first)
        out[:, 3], out[:, 4] = np.maximum.reduceat(xs, first), np.maximum.reduceat(ys, first)
        out[:, 5], out[:, 6] = np.add.reduceat(xs, first), np.add.reduceat(ys, first)
    return present, out


def _merge_moments(parts):
    labels = np.unique(np.concatenate([p[0] for p in parts])) if parts else np.zeros(0, np.int32)
    table = np.zeros((len(labels), 7), np.int64)
    table[:, 1:3] = np.iinfo(np.int64).max
    table[:, 3:5] = -1
    for present, m in parts:
        at = np.searchsorted(labels, present)
        table[at, 0] += m[:, 0]
        table[at, 1:3] = np.minimum(table[at, 1:3], m[:, 1:3])
        table[at, 3:5] = np.maximum(table[at, 3:5], m[:, 3:5])
        table[at, 5:7] += m[:, 5:7]
    return labels, table


def _add_strip(sums, labels, values, regions):
    """sums (bands, R) float64 plus one strip's values (rows, W, bands), region by region in raster
    order: one np.bincount per band over [the running sums, then the strip's pixels]."""
    labels = np.asarray(labels)
    values = np.asarray(values)
    inside = labels.ravel() > 0
    n = sums.shape[1]
    slots = np.concatenate([np.arange(n), np.searchsorted(regions, labels.ravel()[inside])])
    flat = values.reshape(-1, values.shape[-1])[inside]
    out = np.empty_like(sums)
    for b in range(sums.shape[0]):
        # bincount starts every bin at 0.0 and adds in the given order: 0.0 + running sum (exact),
        # then the strip's values in raster order.
        out[b] = np.bincount(slots, weights=np.concatenate([sums[b], flat[:, b].astype(np.float64)]), minlength=n)
    return out


def _strips(array, rows, width):
    """The row strips of a dask array (H, W[, B]) as delayed NumPy blocks, the first axis cut at `rows`."""
    chunks = (rows, (width,)) + tuple((s,) for s in array.shape[2:])
    return array.rechunk(chunks).to_delayed().ravel().tolist()


def region_statistics(labels, cube=None, gradient=None):
    """cubekit.region_statistics of dask arrays: labels (H, W) int32, cube (H, W) or (H, W, B) and
    gradient (H, W) optional, of the same size (NumPy chunks; CuPy chunks are read back). Computes
    and returns the NumPy structured table (``cubekit.region_dtype(B)``), equal to
    ``cubekit.region_statistics(labels.compute(), cube.compute(), gradient.compute())`` bit for bit.
    The labels' row chunks cut the strips; the mean spectra and gradients are added strip after strip.

    >>> import dask.array as da, numpy as np, cubekit, cubekit.dask
    >>> rng = np.random.default_rng(4)
    >>> l = rng.integers(0, 5, (30, 20)).astype(np.int32); c = rng.random((30, 20, 3)); g = rng.random((30, 20))
    >>> t = cubekit.dask.region_statistics(da.from_array(l, chunks=(7, 8)), da.from_array(c, chunks=(9, 20, 3)),
    ...                                    da.from_array(g, chunks=(10, 10)))
    >>> bool((t == cubekit.region_statistics(l, c, g)).all())
    True
    """
    da = _runtime.dask_array()
    import dask
    labels = da.asarray(labels)
    if labels.ndim != 2:
        raise ValueError(f"cubekit.dask.region_statistics: labels has shape {labels.shape}; expected (H, W)")
    h, w = labels.shape
    rows = labels.chunks[0]
    for name, a in (("cube", cube), ("gradient", gradient)):
        if a is not None and tuple(a.shape[:2]) != (h, w):
            raise ValueError(f"cubekit.dask.region_statistics: {name} has shape {tuple(a.shape)}; expected (H, W) = {(h, w)}")
    starts = np.concatenate([[0], np.cumsum(rows)[:-1]]).tolist()
    label_strips = _strips(labels.map_blocks(_runtime.to_host, dtype=labels.dtype), rows, w)
    parts = dask.compute(*[dask.delayed(_strip_moments)(s, y0) for s, y0 in zip(label_strips, starts)])
    regions, m = _merge_moments(list(parts))
    area = m[:, 0]
    columns = {"label": regions, "area": area, "x0": m[:, 1], "y0": m[:, 2], "x1": m[:, 3], "y1": m[:, 4],
               "centroid_x": m[:, 5].astype(np.float64) / area.astype(np.float64),
               "centroid_y": m[:, 6].astype(np.float64) / area.astype(np.float64),
               "mean_gradient": np.full(len(regions), np.nan)}
    bands = 0
    chains = {}
    if gradient is not None:
        chains["mean_gradient"] = (da.asarray(gradient)[:, :, None], 1)
    if cube is not None:
        c = da.asarray(cube)
        c = c[:, :, None] if c.ndim == 2 else c
        bands = int(c.shape[2])
        chains["mean_spectrum"] = (c, bands)
    for key, (values, n) in chains.items():
        sums = dask.delayed(np.zeros((n, len(regions)), np.float64))
        for s, v in zip(label_strips, _strips(values.map_blocks(_runtime.to_host, dtype=values.dtype), rows, w)):
            sums = dask.delayed(_add_strip)(sums, s, v, regions)
        means = sums.compute() / area.astype(np.float64)
        columns[key] = means[0] if key == "mean_gradient" else means.T
    if cube is None:
        columns["mean_spectrum"] = np.zeros((len(regions), 0))
    return _watershed._table(columns, bands)
