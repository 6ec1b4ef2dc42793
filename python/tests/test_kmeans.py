"""cubekit.kmeans / apply_palette / quantize against `cubekit cluster` and `cubekit quantize` (bit
for bit: the same library code and the CLI's painting rules), every dtype, non-contiguous inputs,
named errors, pickling; device arrays on the GPU (same seed ⇒ same result on CPU and GPU)."""
import json
import pickle

import numpy as np
import pytest

import cubekit
from conftest import cupy_or_skip, gpu, torch_cuda_or_skip


def _blobs(rng, shape=(24, 31, 4), dtype=np.float32, scale=40.0):
    """Pixels drawn around 4 well separated centres (never constant)."""
    centres = rng.uniform(0, 200, size=(4, shape[2]))
    which = rng.integers(0, 4, size=shape[:2])
    a = centres[which] + rng.normal(scale=scale / 10, size=shape)
    return np.clip(a, 0, 250).astype(dtype)


def _cluster_cli(cli, tmp_path, path, *args):
    out = tmp_path / "labels.npy"
    j = json.loads(cli("cluster", path, out, "--backend", "cpu", "--json", "--quiet", *args).stdout)
    labels = np.load(out).astype(np.int64)
    labels[labels == (65535 if labels.max() == 65535 else -1)] = -1
    return j, labels, json.loads((tmp_path / "labels.centroids.json").read_text())


def _assert_same_as_cluster(r, j, labels, centroids_json):
    np.testing.assert_array_equal(r.labels, labels)
    spectra = np.array([c["spectrum"] for c in centroids_json["centroids"]], dtype=np.float64)
    np.testing.assert_array_equal(r.centroids.astype(np.float64), spectra)
    assert r.counts.tolist() == j["counts"]
    for key in ("k", "k_effective", "inertia", "iterations", "converged", "valid_pixels", "winner", "restarts",
                "mode", "implementation", "warnings"):
        assert getattr(r, key) == j[key], key
    assert r.history.tolist() == j["history"]
    assert r.centroid_type == centroids_json["centroid_type"]
    for key, value in r.parameters.items():
        assert j["parameters"][key] == value, key


def test_kmeans_matches_cli_cluster_on_samson(cli, tmp_path, samson):
    cube = samson[0]
    r = cubekit.kmeans(cube, k=5, seed=3, n_init=2)
    j, labels, cj = _cluster_cli(cli, tmp_path, cubekit.data_path("samson"), "-k", "5", "--seed", "3", "--n-init", "2")
    _assert_same_as_cluster(r, j, labels, cj)
    assert r.labels.shape == (95, 95) and r.labels.dtype == np.int32 and r.centroids.shape == (5, 156)
    assert len(set(r.labels.ravel().tolist())) == 5 and r.inertia > 0


def test_kmeans_default_k_is_the_cluster_command_s(cli, tmp_path, rng):
    a = _blobs(rng)
    np.save(tmp_path / "a.npy", a)
    j, labels, cj = _cluster_cli(cli, tmp_path, tmp_path / "a.npy")
    r = cubekit.kmeans(a)
    assert r.k == 10
    _assert_same_as_cluster(r, j, labels, cj)


def test_kmeans_mask_matches_cli(cli, tmp_path, rng):
    a = _blobs(rng)
    mask = (rng.uniform(size=a.shape[:2]) > 0.3).astype(np.uint8)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "m.npy", mask)
    j, labels, cj = _cluster_cli(cli, tmp_path, tmp_path / "a.npy", "-k", "4", "--mask", tmp_path / "m.npy")
    r = cubekit.kmeans(a, k=4, mask=mask.astype(bool))
    _assert_same_as_cluster(r, j, labels, cj)
    assert (r.labels[mask == 0] == -1).all() and (r.labels[mask == 1] >= 0).all()
    assert r.valid_pixels == int(mask.sum())


def test_explicit_centroids_and_apply_match_cli(cli, tmp_path, rng):
    a = _blobs(rng, dtype=np.uint16)
    np.save(tmp_path / "a.npy", a)
    start = a[[0, 5, 9], [1, 7, 20]].astype(np.float64)
    (tmp_path / "c.json").write_text(json.dumps({"centroids": [{"spectrum": s.tolist()} for s in start]}))
    j, labels, cj = _cluster_cli(cli, tmp_path, tmp_path / "a.npy", "--init", "explicit", "--centroids-in",
                                 tmp_path / "c.json", "--max-iter", "3")
    r = cubekit.kmeans(a, init_centroids=start, max_iter=3)
    _assert_same_as_cluster(r, j, labels, cj)
    assert r.parameters["init"] == "explicit" and r.k == 3
    np.testing.assert_array_equal(cubekit.kmeans(a, init=start, max_iter=3).labels, r.labels)  # init=array
    # without --init explicit the given spectra are applied: the final pass alone
    j, labels, cj = _cluster_cli(cli, tmp_path, tmp_path / "a.npy", "--centroids-in", tmp_path / "c.json")
    applied = cubekit.apply_palette(a, start)
    np.testing.assert_array_equal(applied.labels, labels)
    assert applied.mode == "apply" and applied.counts.tolist() == j["counts"] and applied.inertia == j["inertia"]
    # a fit's centroids classify its own image exactly as the fit did
    fit = cubekit.kmeans(a, k=4, seed=2)
    np.testing.assert_array_equal(cubekit.apply_palette(a, fit).labels, fit.labels)


def _quantize_cli(cli, tmp_path, path, *args, out="q.npy"):
    j = json.loads(cli("quantize", path, tmp_path / out, "--backend", "cpu", "--json", "--quiet", *args).stdout)
    stem = out.rsplit(".", 1)[0]
    return j, cubekit.imread(tmp_path / out), json.loads((tmp_path / f"{stem}.palette.json").read_text())


def _palette_of(pj, channels):
    key = "rgb" if channels == 3 else "value" if channels == 1 else "values"
    return np.array([e[key] for e in pj["palette"]], dtype=np.float64).reshape(len(pj["palette"]), channels)


def _assert_same_as_quantize(q, j, image, pj):
    np.testing.assert_array_equal(q.image, image)
    assert q.image.dtype == image.dtype
    np.testing.assert_array_equal(q.palette.astype(np.float64), _palette_of(pj, q.channels))
    assert q.counts.tolist() == [e["count"] for e in pj["palette"]]
    assert q.fractions.tolist() == [e["fraction"] for e in pj["palette"]]
    if "centroid" in pj["palette"][0]:
        np.testing.assert_array_equal(q.centroids.astype(np.float64), [e["centroid"] for e in pj["palette"]])
    else:
        assert q.centroids is None
    for key in ("k", "k_effective", "inertia", "iterations", "converged", "valid_pixels", "winner", "restarts",
                "mode", "palette_size", "implementation", "warnings"):
        assert getattr(q, key) == j[key], key
    for key in ("channels", "dtype", "colorspace", "dither"):
        assert getattr(q, key) == pj[key], key
    for key, value in q.parameters.items():
        assert j["parameters"][key] == value, key
    # the labels index the palette: painting them gives the image (valid pixels)
    valid = q.labels >= 0
    colour = q.image if q.image.ndim == 2 else q.image[..., :q.channels]
    np.testing.assert_array_equal(q.palette[q.labels[valid]].reshape(colour[valid].shape), colour[valid])


def test_quantize_matches_cli_on_chelsea(cli, tmp_path):
    photo = cubekit.imread(cubekit.data_path("chelsea"))
    q = cubekit.quantize(photo, k=8, seed=7, n_init=2)
    j, image, pj = _quantize_cli(cli, tmp_path, cubekit.data_path("chelsea"), "-k", "8", "--seed", "7", "--n-init", "2")
    _assert_same_as_quantize(q, j, image, pj)
    assert q.image.shape == photo.shape and q.palette.shape == (8, 3) and q.palette.dtype == np.uint8
    # the indexed PNG the CLI writes holds the same labels
    indexed = cubekit.imread(tmp_path / "q.indexed.png")
    np.testing.assert_array_equal(indexed, q.palette[q.labels])
    # the palette applied again (like --palette-in with its JSON) paints the same image
    again = cubekit.quantize(photo, palette=q)
    np.testing.assert_array_equal(again.image, q.image)
    np.testing.assert_array_equal(again.labels, q.labels)


@pytest.mark.parametrize("args,keywords", [
    (("--colorspace", "lab"), {"colorspace": "lab"}),
    (("--dither", "floyd-steinberg"), {"dither": "floyd-steinberg"}),
    (("--colorspace", "lab", "--dither", "floyd-steinberg"), {"colorspace": "lab", "dither": "floyd-steinberg"}),
    (("--legacy", "--max-iter", "4"), {"legacy": True, "max_iter": 4}),
    (("--empty", "keep", "--init", "random"), {"empty": "keep", "init": "random"}),
])
def test_quantize_modes_match_cli(cli, tmp_path, args, keywords):
    photo = np.ascontiguousarray(cubekit.imread(cubekit.data_path("chelsea"))[::3, ::3])
    cubekit.write(tmp_path / "p.png", photo)
    j, image, pj = _quantize_cli(cli, tmp_path, tmp_path / "p.png", "-k", "6", "--seed", "1", *args)
    _assert_same_as_quantize(cubekit.quantize(photo, k=6, seed=1, **keywords), j, image, pj)


def test_quantize_mask_alpha_and_given_palette_match_cli(cli, tmp_path, rng):
    rgba = _blobs(rng, shape=(30, 40, 4), dtype=np.uint8)
    cubekit.write(tmp_path / "a.png", rgba)
    j, image, pj = _quantize_cli(cli, tmp_path, tmp_path / "a.png", "-k", "5", out="q.png")
    q = cubekit.quantize(rgba, k=5, alpha=True)
    _assert_same_as_quantize(q, j, image, pj)
    np.testing.assert_array_equal(q.image[..., 3], rgba[..., 3])
    rgb = np.ascontiguousarray(rgba[..., :3])
    mask = (rng.uniform(size=rgb.shape[:2]) > 0.25).astype(np.uint8)
    np.save(tmp_path / "m.npy", mask)
    np.save(tmp_path / "rgb.npy", rgb)
    j, image, pj = _quantize_cli(cli, tmp_path, tmp_path / "rgb.npy", "-k", "5", "--mask", tmp_path / "m.npy")
    q = cubekit.quantize(rgb, k=5, mask=mask)
    _assert_same_as_quantize(q, j, image, pj)
    np.testing.assert_array_equal(q.image[mask == 0], rgb[mask == 0])  # excluded pixels copied
    assert (q.labels[mask == 0] == -1).all()
    # --palette-in: applied (apply mode), then as the start of a fit (--init explicit)
    other = np.ascontiguousarray(rgb[::-1])
    np.save(tmp_path / "o.npy", other)
    for extra, keywords in (((), {}), (("--init", "explicit", "--max-iter", "2"), {"init": "explicit", "max_iter": 2})):
        j, image, pj2 = _quantize_cli(cli, tmp_path, tmp_path / "o.npy", "--palette-in", tmp_path / "q.palette.json",
                                      *extra, out="o_q.npy")
        _assert_same_as_quantize(cubekit.quantize(other, palette=q, **keywords), j, image, pj2)


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int16", "uint32", "int32", "float32", "float64"])
def test_every_cube_dtype_matches_cli(cli, tmp_path, rng, dtype):
    a = _blobs(rng, shape=(16, 21, 3), dtype=dtype)
    np.save(tmp_path / "a.npy", a)
    j, labels, cj = _cluster_cli(cli, tmp_path, tmp_path / "a.npy", "-k", "3", "--seed", "5")
    _assert_same_as_cluster(cubekit.kmeans(a, k=3, seed=5), j, labels, cj)
    j, image, pj = _quantize_cli(cli, tmp_path, tmp_path / "a.npy", "-k", "3", "--seed", "5")
    _assert_same_as_quantize(cubekit.quantize(a, k=3, seed=5), j, image, pj)


@pytest.mark.parametrize("dtype,same", [("bool", "uint8"), ("int8", "int16"), ("float16", "float32")])
def test_converted_dtypes_match_their_conversion(rng, dtype, same):
    a = (_blobs(rng, shape=(16, 21, 3)) > 100) if dtype == "bool" else _blobs(rng, shape=(16, 21, 3)) - 100
    a = a.astype(dtype)
    r, expected = cubekit.kmeans(a, k=3), cubekit.kmeans(a.astype(same), k=3)
    np.testing.assert_array_equal(r.labels, expected.labels)
    np.testing.assert_array_equal(r.centroids, expected.centroids)
    q = cubekit.quantize(a, k=3)
    assert q.image.dtype == np.dtype(same)
    np.testing.assert_array_equal(q.image, cubekit.quantize(a.astype(same), k=3).image)


def test_non_contiguous_views_give_the_copy_result(rng):
    a = _blobs(rng, shape=(40, 30, 6))
    for view in (a[5:30, 3:25, 1:5], a[::2, ::-1, ::2], np.asfortranarray(a), a.transpose(1, 0, 2)):
        copy = np.ascontiguousarray(view)
        r, e = cubekit.kmeans(view, k=4, seed=1), cubekit.kmeans(copy, k=4, seed=1)
        np.testing.assert_array_equal(r.labels, e.labels)
        np.testing.assert_array_equal(r.centroids, e.centroids)
        assert r.inertia == e.inertia
        q, qe = cubekit.quantize(view, k=4), cubekit.quantize(copy, k=4)
        np.testing.assert_array_equal(q.image, qe.image)
        np.testing.assert_array_equal(q.labels, qe.labels)


def test_two_dimensional_is_one_band_and_out(rng):
    a = _blobs(rng, shape=(20, 20, 1))[:, :, 0]
    r = cubekit.kmeans(a, k=3)
    np.testing.assert_array_equal(r.labels, cubekit.kmeans(a[:, :, None], k=3).labels)
    assert r.centroids.shape == (3, 1)
    out = np.full(a.shape, np.nan, np.float32)
    q = cubekit.quantize(a, k=3, out=out)
    assert q.image is out and np.isfinite(out).all()
    np.testing.assert_array_equal(out, cubekit.quantize(a, k=3).image)
    assert len(np.unique(out)) == 3


def test_bad_input_raises_named_errors(rng):
    a = _blobs(rng, shape=(8, 9, 3))
    cases = [
        (ValueError, "k = 0", dict(k=0)), (ValueError, "k = 100", dict(k=100)),
        (ValueError, "init", dict(init="best")), (ValueError, "tol", dict(tol=-1.0)),
        (ValueError, "n_init", dict(n_init=0)), (ValueError, "empty", dict(empty="drop")),
        (ValueError, "max_iter", dict(max_iter=-1)), (ValueError, "seed", dict(seed=1.5)),
        (ValueError, "mask", dict(mask=np.ones((8, 8)))), (ValueError, "mask", dict(mask=np.zeros((8, 9)))),
        (ValueError, "init_centroids", dict(init_centroids=np.ones((3, 2)))),
        (ValueError, "init_centroids", dict(init_centroids=[[1, 2, np.nan]])),
        (ValueError, "k = 4 disagrees with init_centroids", dict(k=4, init_centroids=np.ones((3, 3)))),
        (ValueError, "init = 'explicit' needs init_centroids", dict(init="explicit")),
        (ValueError, "legacy", dict(legacy=True)),
        (TypeError, "unexpected keyword argument 'clusters'", dict(clusters=3)),
    ]
    for error, match, keywords in cases:
        with pytest.raises(error, match=match):
            cubekit.kmeans(a, **keywords)
    with pytest.raises(ValueError, match="int64"):
        cubekit.kmeans(a.astype(np.int64))
    with pytest.raises(ValueError, match="dimensions"):
        cubekit.kmeans(np.ones(5))
    with pytest.raises(ValueError, match="palette"):
        cubekit.apply_palette(a, np.ones((2, 4)))
    with pytest.raises(TypeError, match="unexpected keyword argument 'k'"):
        cubekit.apply_palette(a, np.ones((2, 3)), k=2)
    u8 = a.astype(np.uint8)
    for match, keywords in (("colorspace = 'hsv'", dict(colorspace="hsv")), ("dither", dict(dither="ordered")),
                            ("8-bit RGB", dict(colorspace="lab", k=2)), ("palette", dict(palette=np.ones((2, 2)))),
                            ("k = 3 disagrees with palette", dict(k=3, palette=np.ones((2, 3)))),
                            ("init = 'explicit' needs palette", dict(init="explicit"))):
        with pytest.raises(ValueError, match=match):
            cubekit.quantize(u8 if "8-bit" not in match else a, **keywords)
    with pytest.raises(ValueError, match="out is"):
        cubekit.quantize(u8, k=2, out=np.zeros((8, 9, 3), np.float32))
    with pytest.raises(TypeError, match="alpha"):
        cubekit.quantize(u8, alpha="yes")


def test_results_pickle(rng):
    a = _blobs(rng, shape=(12, 10, 3), dtype=np.uint8)
    for r in (cubekit.kmeans(a, k=3, n_init=2), cubekit.apply_palette(a, np.array([[0, 0, 0], [200, 200, 200.0]])),
              cubekit.quantize(a, k=3)):
        back = pickle.loads(pickle.dumps(r))
        assert type(back) is type(r) and repr(back) == repr(r)
        for name, value in vars(r).items():
            if isinstance(value, np.ndarray):
                np.testing.assert_array_equal(getattr(back, name), value)
            else:
                assert getattr(back, name) == value, name


def test_progress_is_called(rng):
    a = _blobs(rng, shape=(64, 64, 3))
    seen = []
    cubekit.kmeans(a, k=4, progress=lambda done, total: seen.append((done, total)))
    assert seen


def test_docstrings_and_signatures():
    import inspect
    for f in (cubekit.kmeans, cubekit.quantize, cubekit.apply_palette):
        assert "Example" in f.__doc__
    assert inspect.signature(cubekit.kmeans).parameters["k"].default == 10
    assert inspect.signature(cubekit.quantize).parameters["k"].default == 16
    assert "mask" in inspect.signature(cubekit.quantize).parameters


# ---- GPU: same seed, same result ------------------------------------------------------------------

@gpu
def test_numpy_with_backend_cuda_matches_cpu(samson):
    cube = samson[0]
    r, e = cubekit.kmeans(cube, k=6, seed=2, backend="cuda"), cubekit.kmeans(cube, k=6, seed=2)
    np.testing.assert_array_equal(r.labels, e.labels)
    np.testing.assert_array_equal(r.centroids, e.centroids)
    assert r.iterations == e.iterations and r.counts.tolist() == e.counts.tolist()
    photo = cubekit.imread(cubekit.data_path("chelsea"))
    np.testing.assert_array_equal(cubekit.quantize(photo, k=8, backend="cuda").image, cubekit.quantize(photo, k=8).image)


@gpu
def test_cupy_in_cupy_out(samson):
    cp = cupy_or_skip()
    cube = samson[0]
    r, e = cubekit.kmeans(cp.asarray(cube), k=6, seed=2), cubekit.kmeans(cube, k=6, seed=2)
    assert isinstance(r.labels, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(r.labels), e.labels)
    np.testing.assert_array_equal(r.centroids, e.centroids)
    photo = cubekit.imread(cubekit.data_path("chelsea"))
    mask = np.ones(photo.shape[:2], np.uint8)
    mask[:50] = 0
    q, qe = cubekit.quantize(cp.asarray(photo), k=8, mask=cp.asarray(mask)), cubekit.quantize(photo, k=8, mask=mask)
    assert isinstance(q.image, cp.ndarray) and isinstance(q.labels, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(q.image), qe.image)
    np.testing.assert_array_equal(cp.asnumpy(q.labels), qe.labels)
    out = cp.zeros_like(cp.asarray(photo))
    assert cubekit.quantize(cp.asarray(photo), k=8, out=out).image is out
    applied = cubekit.quantize(cp.asarray(photo), palette=qe)  # the general path, copied into device outputs
    np.testing.assert_array_equal(cp.asnumpy(applied.image), cubekit.quantize(photo, palette=qe).image)


@gpu
def test_torch_in_torch_out(samson):
    torch = torch_cuda_or_skip()
    cube = samson[0]
    t = torch.as_tensor(cube, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        r = cubekit.kmeans(t, k=5, seed=4)
    s.synchronize()
    assert isinstance(r.labels, torch.Tensor) and r.labels.is_cuda
    np.testing.assert_array_equal(r.labels.cpu().numpy(), cubekit.kmeans(cube, k=5, seed=4).labels)
