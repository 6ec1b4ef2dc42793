"""Target detection from Python (cubekit/_detect.py) against the CLI (the same library code: bit for
bit), independent NumPy references (the RBFN score in float32 within the spec's tolerance, window
features, CEM, SAM, AUC), the spec's hand-set multi-resolution cases (detect.md B.6), and Spectral
Python's rx / matched_filter / ace; named errors for bad keywords and models; device arrays on the
GPU (skipped where there is none)."""
import doctest
import json

import numpy as np
import pytest

import cubekit
from conftest import cupy_or_skip, gpu, torch_cuda_or_skip


# ---- fixtures and references --------------------------------------------------------------------------

def random_rbfn(bands, hidden, seed, lo=0.0, hi=1.0, spread=0.3, norm=False):
    """As tests/detect_testing.hpp random_rbfn: centres in the data range, scores spread over (0, 1)."""
    r = np.random.default_rng(seed)
    m = {"type": "rbfn", "bands": bands, "hidden": hidden,
         "centres": lo + (hi - lo) * r.uniform(size=(hidden, bands)),
         "sigma": spread * np.sqrt(bands) * (hi - lo) * (0.5 + r.uniform(size=hidden)),
         "weights": 2 * r.uniform(size=hidden) - 0.5, "bias": 0.1 * (r.uniform() - 0.5), "threshold": 0.3}
    if norm:
        m["input_offset"] = r.uniform(-0.2, 0.2, size=bands)
        m["input_gain"] = r.uniform(0.5, 2.0, size=bands)
    return m


def rbfn_reference(cube, m):
    """The score of spec A.3 in float32 (NumPy's summation order): x' = gain (x - offset),
    d_i = sum_b (x'_b - u_ib)^2, y = sum_i w_i exp(-gamma_i d_i) + bias, gamma_i = 1/(2 sigma_i^2)
    computed in float64 and rounded."""
    x = np.asarray(cube, np.float32)
    x = x[:, :, None] if x.ndim == 2 else x
    f = np.float32
    if m.get("input_offset") is not None:
        x = (np.asarray(m["input_gain"], f) * (x - np.asarray(m["input_offset"], f))).astype(f)
    u = np.asarray(m["centres"], f)
    gamma = (1.0 / (2.0 * np.asarray(m["sigma"], np.float64) ** 2)).astype(f)
    d = ((x[:, :, None, :] - u) ** 2).sum(axis=-1, dtype=f)
    y = (np.asarray(m["weights"], f) * np.exp(-gamma * d)).sum(axis=-1, dtype=f) + f(m["bias"])
    return y.astype(f)


def rbfn_tolerance(m):
    """Spec A.2: 1e-5 (1 + m/64) (|bias| + sum |w_i|)."""
    return 1e-5 * (1 + m["bands"] / 64) * (abs(m["bias"]) + np.abs(m["weights"]).sum())


def step_net(bands, c, hidden=2):
    """Spec B.6's hand-set network (tests/detect_testing.hpp step_net): positive iff sigma_1 > c;
    identity normalisation, U_11 = 1000, b_1 = -1000 c, w_1 = 1, b_0 = 0, t = (0, 1), theta 0.5."""
    W1 = np.zeros((hidden, bands))
    W1[0, 0] = 1000
    b1 = np.zeros(hidden)
    b1[0] = -1000 * c
    w2 = np.zeros(hidden)
    w2[0] = 1
    return {"type": "mlp", "inputs": bands, "hidden": hidden, "W1": W1, "b1": b1, "w2": w2, "b2": 0.0,
            "in_min": -np.ones(bands), "in_max": np.ones(bands)}


def step_multires(bands, c1=0.01, c2=0.4):
    return {"type": "multires", "block": 8, "min_window": 8, "ann1": step_net(bands, c1), "ann2": step_net(bands, c2)}


def square_target(width, height, bands, x0, y0, x1, y1):
    c = np.zeros((height, width, bands), np.float32)
    c[y0:y1, x0:x1] = 1
    return c


def boxes(result):
    return [(w["x0"], w["y0"], w["width"], w["height"]) for w in result["detections"]]


def evaluations(result):
    return sum(level["evaluated"] for level in result["levels"])


@pytest.fixture(scope="module")
def scene():
    """A small castaway scene (deterministic) and an RBFN trained on it."""
    s = cubekit.synth_castaways(5, width=160, height=128, bands=12, targets=3, buoys=2, boats=0)
    return s


# ---- RBFN pixel detector --------------------------------------------------------------------------------

def test_detect_rbfn_matches_cli(cli, tmp_path, rng):
    cube = rng.uniform(0, 1, size=(37, 53, 7)).astype(np.float32)
    cube[3, 4, 2] = np.nan
    m = random_rbfn(7, 5, seed=1)
    np.save(tmp_path / "c.npy", cube)
    cubekit.write_model(m, tmp_path / "m.json")
    j = json.loads(cli("detect", "rbfn", tmp_path / "c.npy", tmp_path / "s.npy", "--model", tmp_path / "m.json",
                       "--backend", "cpu", "--json", "--quiet").stdout)
    r = cubekit.detect_rbfn(cube, tmp_path / "m.json")
    np.testing.assert_array_equal(r["score"], np.load(tmp_path / "s.npy").reshape(37, 53))
    assert r["score"].dtype == np.float32 and r["score"].shape == (37, 53)
    assert r["threshold"] == j["threshold"] == 0.3
    assert r["non_finite"] == j["non_finite_pixels"] == 1 and np.isnan(r["score"][3, 4])
    assert r["detected"] == j["detected_pixels"] > 0
    table = json.loads((tmp_path / "s.objects.json").read_text())["objects"]
    assert len(r["objects"]) == len(table) > 0
    for row, expected in zip(r["objects"], table):
        for name in cubekit.OBJECT_DTYPE.names:
            assert row[name] == expected[name], name
    # the same model as a dict and as JSON text
    np.testing.assert_array_equal(cubekit.detect_rbfn(cube, m)["score"], r["score"])
    np.testing.assert_array_equal(cubekit.detect_rbfn(cube, (tmp_path / "m.json").read_text())["score"], r["score"])


@pytest.mark.parametrize("bands,hidden,norm", [(1, 1, False), (3, 4, True), (64, 4, False), (300, 17, True)])
def test_scores_equal_a_float32_numpy_reference(rng, bands, hidden, norm):
    cube = rng.uniform(0, 1, size=(19, 23, bands)).astype(np.float32)
    m = random_rbfn(bands, hidden, seed=bands + hidden, norm=norm)
    r = cubekit.detect_rbfn(cube, m)
    expected = rbfn_reference(cube, m)
    np.testing.assert_allclose(r["score"], expected, rtol=0, atol=rbfn_tolerance(m))
    assert r["score"].std() > 1e-3  # the scores spread: the test sees the network


def test_mask_labels_and_objects_are_consistent(rng):
    cube = rng.uniform(0, 1, size=(40, 50, 3)).astype(np.float32)
    m = random_rbfn(3, 3, seed=7)
    r = cubekit.detect_rbfn(cube, m, threshold=0.5, min_area=3, connectivity=4)
    score, mask, labels, objects = r["score"], r["mask"], r["labels"], r["objects"]
    assert r["threshold"] == 0.5 and mask.dtype == np.uint8 and labels.dtype == np.int32
    np.testing.assert_array_equal(mask, (labels > 0).astype(np.uint8))
    assert (score[mask == 1] > 0.5).all() and r["detected"] == int(mask.sum())
    raw = cubekit.label((score > 0.5).astype(np.uint8), connectivity=4)
    assert len(objects) == sum(int((raw == i).sum()) >= 3 for i in range(1, raw.max() + 1))
    for o in objects:
        pix = labels == o["label"]
        ys, xs = np.nonzero(pix)
        assert o["area"] == pix.sum() >= 3
        assert (o["x0"], o["y0"], o["width"], o["height"]) == (xs.min(), ys.min(), np.ptp(xs) + 1, np.ptp(ys) + 1)
        assert o["centroid_x"] == pytest.approx(xs.mean()) and o["centroid_y"] == pytest.approx(ys.mean())
        assert o["peak_score"] == score[pix].max() == score[o["peak_y"], o["peak_x"]]
        assert o["mean_score"] == pytest.approx(score[pix].astype(np.float64).mean())
    only = cubekit.detect_rbfn(cube, m, objects=False)
    assert only["mask"] is None and only["labels"] is None and len(only["objects"]) == 0
    np.testing.assert_array_equal(only["score"], score)


def test_layouts_dtypes_and_out(rng):
    cube = rng.integers(0, 4096, size=(21, 17, 6)).astype(np.uint16)
    m = random_rbfn(6, 3, seed=2, hi=4096)
    r = cubekit.detect_rbfn(cube, m)
    bsq = np.ascontiguousarray(cube.transpose(2, 0, 1)).transpose(1, 2, 0)
    for view in (np.asfortranarray(cube), cube.astype(np.float64), bsq):
        np.testing.assert_array_equal(cubekit.detect_rbfn(view, m)["score"], r["score"])
    out = np.full((21, 17), np.nan, np.float32)
    d = cubekit.detect_rbfn(cube, m, out=out)
    assert d["score"] is out and d["non_finite"] == 0 and d["detected"] == r["detected"]
    np.testing.assert_array_equal(out, r["score"])
    window = cube[3:15, 2:11]
    np.testing.assert_array_equal(cubekit.detect_rbfn(window, m)["score"], r["score"][3:15, 2:11])


def test_rbfn_scores_several_models_in_one_pass(rng):
    cube = rng.uniform(0, 1, size=(16, 24, 5)).astype(np.float32)
    models = [random_rbfn(5, k, seed=k) for k in (1, 3, 4)]
    s = cubekit.rbfn_scores(cube, models)
    assert s.shape == (16, 24, 3) and s.dtype == np.float32
    for j, m in enumerate(models):
        np.testing.assert_array_equal(s[:, :, j], cubekit.detect_rbfn(cube, m)["score"])
    one = cubekit.rbfn_scores(cube, models[1])
    assert one.shape == (16, 24)
    np.testing.assert_array_equal(one, s[:, :, 1])
    out = np.zeros((16, 24, 3), np.float32)
    assert cubekit.rbfn_scores(cube, models, out=out) is out
    np.testing.assert_array_equal(out, s)
    out2 = np.zeros((3, 16, 24), np.float32).transpose(1, 2, 0)  # band-major output, written in place
    cubekit.rbfn_scores(cube, models, out=out2, mapping="neuron")
    np.testing.assert_array_equal(out2, s)


# ---- models -----------------------------------------------------------------------------------------------

def test_models_read_write_round_trip(tmp_path):
    m = random_rbfn(4, 2, seed=3, norm=True)
    m["target_name"] = "castaway"
    cubekit.write_model(m, tmp_path / "m.json")
    back = cubekit.read_model(tmp_path / "m.json")
    assert back["type"] == "rbfn" and back["target_name"] == "castaway" and back["training"] == {}
    for key in ("centres", "sigma", "weights", "input_offset", "input_gain"):
        np.testing.assert_array_equal(np.array(back[key]), m[key], err_msg=key)  # 17 digits: bit for bit
    assert back == cubekit.read_model(json.dumps(back))
    cubekit.write_model(back, tmp_path / "again.json")
    assert (tmp_path / "again.json").read_text() == (tmp_path / "m.json").read_text()
    mr = step_multires(3)
    cubekit.write_model(mr, tmp_path / "mr.json")
    back = cubekit.read_model(tmp_path / "mr.json")
    assert back["type"] == "multires" and back["ann1"]["W1"][0][0] == 1000 and back["ann2"]["hidden_act"] == "tansig"


@pytest.mark.parametrize("change,match", [
    ({"sigma": [-1.0, 1.0]}, r"sigma\[0\]"),
    ({"sigma": [1.0, 0.0]}, r"sigma\[1\]"),
    ({"centres": [[0.0, 1.0]]}, "centres"),
    ({"weights": [1.0, float("nan")]}, "weights"),
    ({"bands": 3}, "centres|bands"),
    ({"type": "mlp"}, "type"),
])
def test_bad_models_name_the_field(change, match):
    m = {"type": "rbfn", "bands": 2, "hidden": 2, "centres": [[0.0, 1.0], [1.0, 0.0]], "sigma": [1.0, 1.0],
         "weights": [1.0, 1.0], "bias": 0.0}
    cube = np.zeros((4, 4, 2), np.float32)
    with pytest.raises(ValueError, match=match):
        cubekit.detect_rbfn(cube, {**m, **change})


def test_model_errors(tmp_path):
    cube = np.zeros((4, 4, 3), np.float32)
    with pytest.raises(ValueError, match="bands"):
        cubekit.detect_rbfn(cube, random_rbfn(2, 1, seed=0))
    with pytest.raises(ValueError, match="type is missing"):
        cubekit.detect_rbfn(cube, {"bands": 3})
    with pytest.raises(OSError):
        cubekit.read_model(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text('{"type": "rbfn", "bands": 1, "hidden": 1, "centres": [[0]], "sigma": [0]')
    with pytest.raises(ValueError, match="bad.json"):
        cubekit.read_model(tmp_path / "bad.json")
    (tmp_path / "bad.json").write_text('{"type": "rbfn", "bands": 1, "hidden": 1, "centres": [[0]], "sigma": [0],'
                                       ' "weights": [1], "bias": 0}')
    with pytest.raises(ValueError, match=r"bad.json: sigma\[0\]"):
        cubekit.read_model(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="type"):
        cubekit.detect_multires(cube, random_rbfn(3, 1, seed=0))
    with pytest.raises(TypeError, match="model is a list"):
        cubekit.detect_rbfn(cube, [1, 2])


# ---- multi-resolution ---------------------------------------------------------------------------------------

def test_multires_spec_case_1_one_box():
    """128x128, one 16x16 target at [48, 64)^2: one box (32, 32, 32x32) after 1 + 4 + 4 evaluations."""
    r = cubekit.detect_multires(square_target(128, 128, 2, 48, 48, 64, 64), step_multires(2), trace=True)
    assert boxes(r) == [(32, 32, 32, 32)] and evaluations(r) == 9 and len(r["trace"]) == 9
    w = r["detections"][0]
    assert w["level"] == 2 and not w["at_min_scale"] and w["outcome"] == "accepted" and w["y1"] > 0.5 < w["y2"]
    assert r["block"] == 8 and r["min_window"] == 8 and r["top_level"] == 4 and r["skipped_samples"] == 0
    assert [level["level"] for level in r["levels"]][0] == 4


def test_multires_spec_case_2_straddling_target():
    r = cubekit.detect_multires(square_target(128, 128, 1, 56, 56, 72, 72), step_multires(1))
    assert boxes(r) == [(48, 48, 16, 16), (64, 48, 16, 16), (48, 64, 16, 16), (64, 64, 16, 16)]
    assert evaluations(r) == 37 and r["trace"] == []


def test_multires_spec_case_3_forced_minimum_box():
    cube = square_target(64, 64, 3, 10, 10, 12, 12)
    r = cubekit.detect_multires(cube, step_multires(3))
    assert boxes(r) == [(8, 8, 8, 8)] and r["detections"][0]["at_min_scale"] and evaluations(r) == 13
    assert cubekit.detect_multires(cube, step_multires(3), keep_min_level=False)["detections"] == []


def test_multires_spec_case_4_non_square():
    """1024x256, a 16x16 target at x in [600, 616), y in [100, 116): the root splits into two
    512x256 children; worked by hand with the same rules (sigma = sqrt(f (1 - f)))."""
    r = cubekit.detect_multires(square_target(1024, 256, 1, 600, 100, 616, 116), step_multires(1))
    assert boxes(r) == [(592, 96, 16, 16), (608, 96, 16, 16), (600, 112, 8, 8), (608, 112, 8, 8)]
    assert [level["evaluated"] for level in r["levels"]] == [1, 2, 2, 4, 4, 4, 8, 8]


def test_multires_matches_cli(cli, tmp_path, scene):
    cube = scene["cube"][:, :, ::-1]  # 1000 nm first: the step networks look at band 0
    model = step_multires(12, c1=0.02, c2=0.2)
    np.save(tmp_path / "c.npy", cube)
    cubekit.write_model(model, tmp_path / "m.json")
    cli("detect", "multires", tmp_path / "c.npy", tmp_path / "w.json", "--model", tmp_path / "m.json",
        "--backend", "cpu", "--quiet")
    expected = json.loads((tmp_path / "w.json").read_text())["detections"]
    r = cubekit.detect_multires(cube, model, trace=True)
    assert r["detections"] == expected and len(expected) > 0
    assert {o["id"] for o in scene["placed"]} == {  # every object (castaways and buoys) is covered by a box
        int(i) for w in expected for i in np.unique(scene["objects"][w["y0"]:w["y0"] + w["height"],
                                                                     w["x0"]:w["x0"] + w["width"]]) if i}


def test_window_features_equal_a_direct_std(rng):
    cube = rng.uniform(-3, 5, size=(37, 45, 4))
    for level in (0, 1, 2):
        f, n = cubekit.window_features(cube, block=4, level=level, return_counts=True)
        s = 4 << level
        assert f.shape == n.shape == (-(-37 // s), -(-45 // s), 4)
        for j in range(f.shape[0]):
            for i in range(f.shape[1]):
                w = cube[j * s:(j + 1) * s, i * s:(i + 1) * s].reshape(-1, 4)
                np.testing.assert_allclose(f[j, i], w.std(axis=0), rtol=1e-12, atol=1e-12 * 5)
                assert (n[j, i] == len(w)).all()
    ints = rng.integers(0, 4096, size=(16, 16, 2)).astype(np.float32)
    g = cubekit.window_features(ints, block=8, level=1)  # integer samples: the sums are exact
    x = ints.astype(np.float64).reshape(-1, 2)
    s1, s2 = x.sum(axis=0), (x ** 2).sum(axis=0)
    np.testing.assert_array_equal(g[0, 0], np.sqrt(np.maximum(0, (s2 - s1 * s1 / 256) / 256)))
    with pytest.raises(ValueError, match="level"):
        cubekit.window_features(ints, block=8, level=5)
    with pytest.raises(ValueError, match="block"):
        cubekit.window_features(ints, block=6)


# ---- training and synthetic scenes -------------------------------------------------------------------------

def test_synth_matches_cli(cli, tmp_path):
    s = cubekit.synth_leaves(4, width=192, height=96, bands=8, targets=3)
    cli("synth", "leaves", tmp_path / "l.npy", "--seed", 4, "--width", 192, "--height", 96, "--bands", 8,
        "--targets", 3, "--objects", tmp_path / "o.npy", "--quiet")
    np.testing.assert_array_equal(s["cube"], np.load(tmp_path / "l.npy"))
    np.testing.assert_array_equal(s["truth"], np.load(tmp_path / "l.truth.npy").reshape(96, 192))
    np.testing.assert_array_equal(s["objects"], np.load(tmp_path / "o.npy").reshape(96, 192))
    assert s["cube"].shape == (96, 192, 8) and s["options"]["targets"] == 3 and s["scene"] == "leaves"
    assert [o["id"] for o in s["placed"]] == [1, 2, 3] and all(o["kind"] == "leaf" for o in s["placed"])
    np.testing.assert_allclose(s["wavelengths"], 400 + 600 * np.arange(8) / 7)
    assert set(np.unique(s["coverage"] * 16)) <= set(range(17))
    again = cubekit.synth_leaves(4, width=192, height=96, bands=8, targets=3)
    np.testing.assert_array_equal(again["cube"], s["cube"])


def test_train_rbfn_matches_cli_and_finds_the_castaways(cli, tmp_path, scene):
    np.save(tmp_path / "c.npy", scene["cube"])
    np.save(tmp_path / "t.npy", scene["truth"])
    cli("train", "rbfn", tmp_path / "c.npy", "--labels", tmp_path / "t.npy", "-o", tmp_path / "m.json", "--seed", 3,
        "--hidden", 4, "--backend", "cpu", "--quiet")
    model, report = cubekit.train_rbfn(scene["cube"], scene["truth"], seed=3, hidden=4, return_report=True)
    assert model == json.loads((tmp_path / "m.json").read_text())
    assert report["networks"][0]["name"] == "rbfn" and report["seconds"] >= 0
    assert cubekit.train_rbfn([scene["cube"]], [scene["truth"].astype(np.int32)], seed=3, hidden=4) == model
    r = cubekit.detect_rbfn(scene["cube"], model)
    for o in (p for p in scene["placed"] if p["target"]):
        assert r["mask"][scene["objects"] == o["id"]].any(), o


def test_train_multires_matches_cli(cli, tmp_path, scene):
    np.save(tmp_path / "c.npy", scene["cube"])
    np.save(tmp_path / "t.npy", scene["truth"])
    cli("train", "multires", tmp_path / "c.npy", "--labels", tmp_path / "t.npy", "-o", tmp_path / "m.json", "--seed", 1,
        "--max-windows", 2000, "--backend", "cpu", "--quiet")
    model = cubekit.train_multires(scene["cube"], scene["truth"], seed=1, max_windows=2000)
    assert model == json.loads((tmp_path / "m.json").read_text())
    assert model["type"] == "multires" and model["ann1"]["inputs"] == 12


# ---- classical detectors -------------------------------------------------------------------------------------

def correlated(rng, shape=(30, 26, 6)):
    sources = rng.normal(size=shape[:2] + (3,))
    return sources @ rng.normal(size=(3, shape[2])) * 5 + rng.normal(size=shape) + 10


def test_rx_equals_spectral_python(rng):
    spectral = pytest.importorskip("spectral")
    cube = correlated(rng)
    n = cube.shape[0] * cube.shape[1]
    spy = spectral.rx(cube)
    np.testing.assert_allclose(cubekit.rx(cube, ddof=1), spy, rtol=1e-6)
    np.testing.assert_allclose(cubekit.rx(cube), spy * n / (n - 1), rtol=1e-6)  # divisor N (the default)
    stats = spectral.calc_stats(cube[:10])  # SPy's own statistics of another tile
    np.testing.assert_allclose(cubekit.rx(cube, background=stats), spectral.rx(cube, background=stats), rtol=1e-6)
    np.testing.assert_allclose(cubekit.rx(cube.astype(np.float32), ddof=1, precision="f32", out_type="f32"), spy,
                               rtol=1e-4)


def test_local_rx_equals_spectral_python(rng, monkeypatch):
    spectral = pytest.importorskip("spectral")
    monkeypatch.setitem(np.__dict__, "bool", bool)  # SPy 0.22.4's window code still spells np.bool
    cube = correlated(rng, shape=(14, 12, 3))
    spy = spectral.rx(cube, window=(3, 7))  # SPy returns float32
    np.testing.assert_allclose(cubekit.rx(cube, window=(3, 7), ddof=1), spy, rtol=2e-5)


def test_matched_filter_and_ace_equal_spectral_python(rng):
    spectral = pytest.importorskip("spectral")
    cube = correlated(rng)
    t = cube[4, 5] + 3
    np.testing.assert_allclose(cubekit.matched_filter(cube, t), spectral.matched_filter(cube, t), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(cubekit.ace(cube, t), spectral.ace(cube, t), rtol=1e-6, atol=1e-12)
    stats = spectral.calc_stats(cube)
    np.testing.assert_allclose(cubekit.ace(cube, t, stats), spectral.ace(cube, t, stats), rtol=1e-6, atol=1e-12)


def test_cem_sam_and_target_mask_equal_numpy(rng):
    cube = correlated(rng)
    x = cube.reshape(-1, 6)
    mask = np.zeros(cube.shape[:2], np.uint8)
    mask[3:5, 7:9] = 1
    t = cube[3:5, 7:9].reshape(-1, 6).mean(axis=0)
    R = x.T @ x / len(x)
    w = np.linalg.solve(R, t) / (t @ np.linalg.solve(R, t))
    np.testing.assert_allclose(cubekit.cem(cube, t), (x @ w).reshape(cube.shape[:2]), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(cubekit.cem(cube, target_mask=mask), cubekit.cem(cube, t), rtol=1e-12, atol=1e-12)
    cos = x @ t / (np.linalg.norm(x, axis=1) * np.linalg.norm(t))
    np.testing.assert_allclose(cubekit.sam(cube, t), cos.reshape(cube.shape[:2]), rtol=1e-12)
    assert cubekit.sam(cube, t, out_type="f32").dtype == np.float32


def test_classical_matches_cli(cli, tmp_path, rng):
    cube = correlated(rng).astype(np.float32)
    np.save(tmp_path / "c.npy", cube)
    t = cube[2, 3].astype(np.float64) + 1
    (tmp_path / "t.csv").write_text("\n".join(repr(float(v)) for v in t) + "\n")
    for name, function in (("rx", cubekit.rx), ("mf", cubekit.matched_filter), ("ace", cubekit.ace),
                           ("cem", cubekit.cem), ("sam", cubekit.sam)):
        extra = [] if name == "rx" else ["--target", tmp_path / "t.csv"]
        cli("detect", name, tmp_path / "c.npy", tmp_path / f"{name}.npy", "--backend", "cpu", "--quiet", *extra)
        got = function(cube) if name == "rx" else function(cube, t)
        np.testing.assert_array_equal(got, np.load(tmp_path / f"{name}.npy").reshape(got.shape), err_msg=name)
    cli("detect", "rx", tmp_path / "c.npy", tmp_path / "l.npy", "--window", "3,9", "--backend", "cpu", "--quiet")
    np.testing.assert_array_equal(cubekit.rx(cube, window=(3, 9)), np.load(tmp_path / "l.npy").reshape(30, 26))


def test_background_stats_reuse_and_files(tmp_path, rng):
    cube = correlated(rng)
    cube[:, :, 4] = 7.0  # a constant band: dropped
    s = cubekit.background_stats(cube, ddof=1)
    assert s["kept_bands"].tolist() == [0, 1, 2, 3, 5] and s["dropped"] == [{"band": 4, "reason": "constant"}]
    kept = cube[:, :, [0, 1, 2, 3, 5]].reshape(-1, 5)
    np.testing.assert_allclose(s["mean"], kept.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(s["covariance"], np.cov(kept, rowvar=False), rtol=1e-10)
    assert s["samples"] == 30 * 26 and s["ddof"] == 1 and s["bands"] == 6
    np.testing.assert_array_equal(cubekit.rx(cube, background=s), cubekit.rx(cube, ddof=1))
    mask = np.zeros((30, 26), bool)
    mask[:10] = True
    part = cubekit.background_stats(cube, mask)
    assert part["samples"] == 260
    np.testing.assert_allclose(part["mean"], cube[:10][:, :, [0, 1, 2, 3, 5]].reshape(-1, 5).mean(axis=0), rtol=1e-12)
    for ext in ("json", "npz"):
        cubekit.write_background_stats(part, tmp_path / f"s.{ext}")
        back = cubekit.read_background_stats(tmp_path / f"s.{ext}")
        np.testing.assert_array_equal(back["covariance"], part["covariance"])
        np.testing.assert_array_equal(cubekit.rx(cube, background=tmp_path / f"s.{ext}"),
                                      cubekit.rx(cube, background=part))
    t = cube[0, 0] + 1
    np.testing.assert_array_equal(cubekit.matched_filter(cube[10:], t, part),
                                  cubekit.matched_filter(cube, t, part)[10:])  # the same statistics on a tile


def test_background_stats_from_a_file_in_strips(tmp_path, rng):
    cube = correlated(rng).astype(np.float32)
    cube[:, :, 4] = 7.0  # a constant band: dropped
    np.save(tmp_path / "c.npy", cube)
    mask = np.zeros((30, 26), bool)
    mask[3:21:2] = True
    for ddof in (0, 1):
        for m in (None, mask):
            want = cubekit.background_stats(cube, m, ddof=ddof)
            for limit in (26 * 6 * 4 + 26 * 5 * 8, "4K", None):  # one row a strip, a few rows, the whole file
                got = cubekit.background_stats(tmp_path / "c.npy", m, memory_limit=limit, ddof=ddof)
                assert got["dropped"] == want["dropped"] and got["samples"] == want["samples"]
                for key in ("kept_bands", "mean", "covariance", "eigenvalues", "eigenvectors"):
                    np.testing.assert_array_equal(got[key], want[key], err_msg=f"{key} {ddof} {limit}")
    with pytest.raises(ValueError, match="memory_limit"):
        cubekit.background_stats(cube, memory_limit="4K")


def test_classical_detectors_in_tiles_and_from_files(tmp_path, rng):
    cube = correlated(rng).astype(np.float32)
    cube[:, :, 4] = 7.0  # a constant band: dropped by the scene's screening
    cube[3, 5, 1] = np.nan
    np.save(tmp_path / "c.npy", cube)
    t = cube[10, 10].astype(np.float64) + 1
    mask = np.zeros((30, 26), np.uint8)
    mask[7, 3] = mask[20, 12] = 1
    stats = cubekit.background_stats(cube)
    for source in (cube, tmp_path / "c.npy", str(tmp_path / "c.npy")):
        for tiles in ({"memory_limit": "6K"}, {"tile_size": (7, 4)}, {}):
            if not tiles and not isinstance(source, (str, type(tmp_path))):
                continue  # an array without tile keywords is the whole call
            for name, call in (("rx", lambda c, **k: cubekit.rx(c, **k)),
                               ("rx stats", lambda c, **k: cubekit.rx(c, background=stats, **k)),
                               ("local rx", lambda c, **k: cubekit.rx(c, window=(3, 9), **k)),
                               ("mf", lambda c, **k: cubekit.matched_filter(c, t, **k)),
                               ("ace mask", lambda c, **k: cubekit.ace(c, target_mask=mask, ddof=1, **k)),
                               ("cem", lambda c, **k: cubekit.cem(c, t, **k)),
                               ("sam", lambda c, **k: cubekit.sam(c, t, **k))):
                # Local RX's tiles carry a halo of 8: a 6K budget cannot hold one (refused by name).
                keys = {"memory_limit": "64K"} if name == "local rx" and "memory_limit" in tiles else tiles
                got = call(source, **keys)
                assert isinstance(got, np.ndarray) and got.shape == (30, 26)
                np.testing.assert_array_equal(got, call(cube), err_msg=f"{name} {tiles} {type(source).__name__}")
    with pytest.raises(ValueError, match="halo"):
        cubekit.rx(tmp_path / "c.npy", window=(3, 9), memory_limit="6K")
    out = np.lib.format.open_memmap(tmp_path / "s.npy", mode="w+", dtype=np.float64, shape=(30, 26))
    assert cubekit.ace(tmp_path / "c.npy", target_mask=mask, ddof=1, memory_limit="6K", out=out) is out
    out.flush()
    np.testing.assert_array_equal(np.load(tmp_path / "s.npy"), cubekit.ace(cube, target_mask=mask, ddof=1))
    with pytest.raises(ValueError, match="out"):
        cubekit.rx(cube, memory_limit="6K", out=np.empty((30, 26), np.float32))  # f64 scores
    with pytest.raises(ValueError, match="background"):
        cubekit.rx(tmp_path / "c.npy", window=(3, 9), background=stats)


def test_target_spectrum_files(tmp_path):
    wl = np.array([410.0, 455.5, 600.0, 712.25])
    pairs = np.array([[400, 0.1], [500, 0.4], [650, 0.2], [800, 0.9]])
    (tmp_path / "t.csv").write_text("".join(f"{a},{b}\n" for a, b in pairs))
    np.testing.assert_allclose(cubekit.read_target_spectrum(tmp_path / "t.csv", wl), np.interp(wl, *pairs.T),
                               rtol=1e-12)
    (tmp_path / "t.json").write_text(json.dumps([0.5, 0.25, 0.125]))
    assert cubekit.read_target_spectrum(tmp_path / "t.json", bands=3).tolist() == [0.5, 0.25, 0.125]
    with pytest.raises(ValueError, match="4 bands|values"):
        cubekit.read_target_spectrum(tmp_path / "t.json", bands=4)
    with pytest.raises(ValueError, match="900"):
        cubekit.read_target_spectrum(tmp_path / "t.csv", [450.0, 900.0])


def test_detect_score_matches_cli_and_numpy_auc(cli, tmp_path, rng):
    mask = np.zeros((40, 40), np.uint8)
    mask[5:8, 5:9] = 1
    mask[30:32, 20:22] = 1
    scores = rng.normal(size=(40, 40)) + 3 * mask
    scores[30:32, 20:22] -= 3.5
    np.save(tmp_path / "s.npy", scores)
    np.save(tmp_path / "m.npy", mask)
    j = json.loads(cli("detect-score", tmp_path / "s.npy", tmp_path / "m.npy", "--far", "0.02").stdout)
    r = cubekit.detect_score(scores, mask, far=0.02)
    roc = r.pop("roc")
    for key in j:
        assert (list(map(list, (b["box"] for b in r[key]))) == [b["box"] for b in j[key]]) if key == "blob_list" \
            else r[key] == j[key], key
    tgt, bg = scores[mask == 1], scores[mask == 0]
    auc = ((tgt[:, None] > bg).sum() + 0.5 * (tgt[:, None] == bg).sum()) / (len(tgt) * len(bg))
    assert r["auc"] == pytest.approx(auc, abs=1e-12) == cubekit.roc_auc(scores, mask)
    assert r["blobs"] == 2 and roc["far"][0] == 0 and roc["pd"][-1] == 1 and (np.diff(roc["threshold"]) < 0).all()
    with pytest.raises(ValueError, match="mask"):
        cubekit.detect_score(scores, mask[:, :30])


# ---- errors ------------------------------------------------------------------------------------------------------

def test_keyword_errors_name_the_keyword(rng):
    cube = correlated(rng, shape=(12, 12, 3))
    m = random_rbfn(3, 2, seed=0)
    cases = [
        (lambda: cubekit.detect_rbfn(cube, m, connectivity=6), ValueError, "connectivity = 6"),
        (lambda: cubekit.detect_rbfn(cube, m, min_area=0), ValueError, "min_area"),
        (lambda: cubekit.detect_rbfn(cube, m, mapping="warp"), ValueError, "mapping"),
        (lambda: cubekit.detect_rbfn(cube, m, threshold="high"), ValueError, "threshold"),
        (lambda: cubekit.detect_rbfn(cube, m, radius=2), TypeError, "unexpected keyword argument 'radius'"),
        (lambda: cubekit.detect_rbfn(cube, m, out=np.zeros((12, 11), np.float32)), ValueError, "out is"),
        (lambda: cubekit.rbfn_scores(cube, m, threshold=0.2), TypeError, "'threshold'"),
        (lambda: cubekit.detect_multires(cube, step_multires(3), trace="yes"), ValueError, "trace"),
        (lambda: cubekit.detect_multires(cube, step_multires(3), out=cube), TypeError, "'out'"),
        (lambda: cubekit.rx(cube, ddof=2), ValueError, "ddof"),
        (lambda: cubekit.rx(cube, window=(4, 9)), ValueError, "window"),
        (lambda: cubekit.rx(cube, window=(3,)), ValueError, "window"),
        (lambda: cubekit.rx(np.repeat(cube, 4, axis=2), window=(1, 3)), ValueError, "window"),  # 8 samples, 12 bands
        (lambda: cubekit.rx(cube, rcond=2), ValueError, "rcond"),
        (lambda: cubekit.rx(cube, precision="f16"), ValueError, "precision"),
        (lambda: cubekit.rx(cube, out_type="u8"), ValueError, "out_type"),
        (lambda: cubekit.rx(cube, background={"mean": [0]}), ValueError, "background"),
        (lambda: cubekit.rx(cube, window=(3, 7), background=cubekit.background_stats(cube)), ValueError, "background"),
        (lambda: cubekit.matched_filter(cube), ValueError, "target"),
        (lambda: cubekit.ace(cube, [1.0, 2.0]), ValueError, "target"),
        (lambda: cubekit.ace(cube, np.ones((2, 3))), ValueError, "target"),
        (lambda: cubekit.sam(cube, [1, 2, 3], ddof=1), TypeError, "'ddof'"),
        (lambda: cubekit.cem(cube, target_mask=np.zeros((12, 12), np.uint8)), ValueError, "target mask"),
        (lambda: cubekit.cem(cube, target_mask=np.ones((12, 11), np.uint8)), ValueError, "target mask"),
        (lambda: cubekit.background_stats(cube, np.ones((11, 12), np.uint8)), ValueError, "mask"),
        (lambda: cubekit.background_stats(cube, rcond=0.1), TypeError, "'rcond'"),
        (lambda: cubekit.train_rbfn(cube, np.zeros((12, 12), np.uint8), hidden=0), ValueError, "hidden"),
        (lambda: cubekit.train_rbfn(cube, np.full((12, 12), 3), hidden=2), ValueError, "labels"),
        (lambda: cubekit.train_rbfn([cube, cube], [np.zeros((12, 12), np.uint8)]), ValueError, "labels"),
        (lambda: cubekit.train_multires(cube, np.zeros((12, 12), np.uint8), rho=0), ValueError, "rho"),
        (lambda: cubekit.train_multires(cube, np.zeros((12, 12), np.uint8), optimizer="bfgs"), ValueError, "optimizer"),
        (lambda: cubekit.synth_castaways(1, width=-5), ValueError, "width"),
        (lambda: cubekit.synth_castaways(1, width=20), ValueError, "width"),
        (lambda: cubekit.synth_castaways(-1), ValueError, "seed"),
        (lambda: cubekit.synth_leaves(1, boats=2), ValueError, "boats"),
        (lambda: cubekit.synth_castaways(1, depth=2), TypeError, "'depth'"),
        (lambda: cubekit.detect_score(cube[:, :, 0], np.zeros((12, 12)), far=2), ValueError, "far"),
        (lambda: cubekit.window_features(cube, block=8, level=0, out=1), TypeError, "'out'"),
    ]
    for i, (call, error, match) in enumerate(cases):
        with pytest.raises(error, match=match):
            call()
            pytest.fail(f"case {i} did not raise")


def test_docstring_examples_run():
    for f in (cubekit.detect_rbfn, cubekit.rbfn_scores, cubekit.detect_multires, cubekit.window_features,
              cubekit.read_model, cubekit.write_model, cubekit.train_rbfn, cubekit.train_multires,
              cubekit.synth_castaways, cubekit.synth_leaves, cubekit.rx, cubekit.matched_filter, cubekit.ace,
              cubekit.cem, cubekit.sam, cubekit.background_stats, cubekit.read_background_stats,
              cubekit.write_background_stats, cubekit.read_target_spectrum, cubekit.detect_score, cubekit.roc_auc):
        assert "Example" in f.__doc__ or f in (cubekit.write_model, cubekit.read_background_stats), f.__name__
        for t in doctest.DocTestFinder().find(f, globs={"cubekit": cubekit}):
            runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
            runner.run(t)
            assert runner.summarize(verbose=False).failed == 0, f.__name__


def test_signatures_come_from_the_declarations():
    import inspect
    p = inspect.signature(cubekit.detect_rbfn).parameters
    assert list(p)[:2] == ["cube", "model"] and p["threshold"].default is None and p["connectivity"].default == 8
    assert "out" in p and "progress" in p
    p = inspect.signature(cubekit.rx).parameters
    assert list(p)[:3] == ["cube", "background", "window"] and p["ddof"].default == 0
    assert list(inspect.signature(cubekit.matched_filter).parameters)[:3] == ["cube", "target", "background"]
    assert "seed" in inspect.signature(cubekit.train_rbfn).parameters
    assert "out" not in inspect.signature(cubekit.detect_multires).parameters


def test_progress_is_called(rng):
    cube = rng.uniform(size=(128, 128, 8)).astype(np.float32)
    seen = []
    cubekit.rx(cube, progress=lambda done, total: seen.append((done, total)))
    cubekit.detect_rbfn(cube, random_rbfn(8, 4, seed=1), progress=lambda done, total: seen.append((done, total)))
    assert all(0 <= d <= t for d, t in seen)


# ---- GPU ------------------------------------------------------------------------------------------------------------

@gpu
def test_numpy_with_backend_cuda_matches_cpu(scene):
    cube = scene["cube"]
    m = random_rbfn(12, 4, seed=9, lo=0, hi=0.6)
    d, h = cubekit.detect_rbfn(cube, m, backend="cuda"), cubekit.detect_rbfn(cube, m)
    np.testing.assert_allclose(d["score"], h["score"], rtol=0, atol=rbfn_tolerance(m))
    for mapping in ("neuron", "synapse"):
        np.testing.assert_allclose(cubekit.detect_rbfn(cube, m, backend="cuda", mapping=mapping)["score"], h["score"],
                                   rtol=0, atol=rbfn_tolerance(m))
    model = step_multires(12, c1=0.02, c2=0.2)
    cube = cube[:, :, ::-1]
    md, mh = cubekit.detect_multires(cube, model, backend="cuda"), cubekit.detect_multires(cube, model)
    assert boxes(md) == boxes(mh) and md["implementation"] == "cuda"
    np.testing.assert_array_equal(cubekit.window_features(cube, 8, 2, backend="cuda"),
                                  cubekit.window_features(cube, 8, 2))
    t = cube[5, 5].astype(np.float64) + 0.1
    for f in (cubekit.rx, lambda c, **k: cubekit.ace(c, t, **k), lambda c, **k: cubekit.cem(c, t, **k)):
        np.testing.assert_allclose(f(cube, backend="cuda"), f(cube), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(cubekit.rx(cube[:40, :40], window=(3, 9), backend="cuda"),
                               cubekit.rx(cube[:40, :40], window=(3, 9)), rtol=1e-6)


@gpu
def test_cupy_in_cupy_out(scene):
    cp = cupy_or_skip()
    cube = scene["cube"]
    d = cp.asarray(cube)
    m = random_rbfn(12, 4, seed=9, lo=0, hi=0.6)
    host = cubekit.detect_rbfn(cube, m)
    r = cubekit.detect_rbfn(d, m)
    assert all(isinstance(r[k], cp.ndarray) for k in ("score", "mask", "labels"))
    np.testing.assert_allclose(cp.asnumpy(r["score"]), host["score"], rtol=0, atol=rbfn_tolerance(m))
    out = cp.full(cube.shape[:2], cp.nan, cp.float32)
    q = cubekit.detect_rbfn(d, m, out=out, objects=False)  # device-resident: no host round trip
    assert q["score"] is out and q["non_finite"] is None and q["mask"] is None
    s = cubekit.rbfn_scores(d[10:90, 5:100], [m, random_rbfn(12, 2, seed=3)])
    assert isinstance(s, cp.ndarray) and s.shape == (80, 95, 2)
    np.testing.assert_allclose(cp.asnumpy(s[:, :, 0]), host["score"][10:90, 5:100], rtol=0, atol=rbfn_tolerance(m))
    y = cubekit.rx(d)
    assert isinstance(y, cp.ndarray) and y.dtype == cp.float64
    np.testing.assert_allclose(cp.asnumpy(y), cubekit.rx(cube), rtol=1e-6)
    y32 = cp.zeros(cube.shape[:2], cp.float32)
    assert cubekit.ace(d, cube[3, 3] + 0.5, out=y32, out_type="f32") is y32
    model = step_multires(12, c1=0.02, c2=0.2)
    assert boxes(cubekit.detect_multires(d, model)) == boxes(cubekit.detect_multires(cube, model))


@gpu
def test_torch_in_torch_out(scene):
    torch = torch_cuda_or_skip()
    cube = scene["cube"]
    t = torch.as_tensor(cube, device="cuda")
    m = random_rbfn(12, 4, seed=9, lo=0, hi=0.6)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        r = cubekit.detect_rbfn(t, m)
        y = cubekit.matched_filter(t, cube[7, 7] + 0.2)
    s.synchronize()
    assert isinstance(r["score"], torch.Tensor) and r["score"].is_cuda and isinstance(r["mask"], torch.Tensor)
    np.testing.assert_allclose(r["score"].cpu().numpy(), cubekit.detect_rbfn(cube, m)["score"], rtol=0,
                               atol=rbfn_tolerance(m))
    np.testing.assert_allclose(y.cpu().numpy(), cubekit.matched_filter(cube, cube[7, 7] + 0.2), rtol=1e-6, atol=1e-9)
