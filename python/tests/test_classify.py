"""Spectral-spatial classification from Python (cubekit/_classify.py): plumbing (shapes, dtypes,
keywords, named errors), the same maps and scores as the CLI, the docstring examples. The numerics
are tested once, in C++ (tests/classify_test.cpp, classify_svm_test.cpp)."""
import doctest
import inspect
import json

import numpy as np
import pytest

import cubekit
from conftest import SHARED


def blocks(seed=0, h=24, w=30, bands=4):
    """Four noisy blocky classes (labels 2, 3, 5, 8), training labels every 4th pixel, test the rest."""
    r = np.random.default_rng(seed)
    k = (np.arange(w)[None, :] >= w // 2).astype(int) + 2 * (np.arange(h)[:, None] >= h // 2)
    means = np.array([[10, 20, 30, 40], [40, 30, 20, 10], [25, 25, 60, 25], [60, 10, 10, 60]], np.float64)[:, :bands]
    cube = (means[k] + 3 * r.standard_normal((h, w, bands))).astype(np.float32)
    truth = np.array([2, 3, 5, 8])[k]
    train = np.where((np.arange(h)[:, None] + np.arange(w)[None, :]) % 4 == 0, truth, 0)
    return cube, train, np.where(train == 0, truth, 0)


def test_classify_mindist_sam_svm_shapes_and_accuracy():
    cube, train, test = blocks()
    for classifier in ("mindist", "sam", "svm"):
        r = cubekit.classify(cube, train, classifier=classifier, cv_folds=3)
        assert r["classes"].shape == (24, 30) and r["classes"].dtype == np.int32
        assert r["pixelwise"].dtype == np.int32 and r["regions"] is None and r["vote"] is None
        assert r["model"]["classifier"] == classifier
        assert r["model"]["classes"] == [2, 3, 5, 8]
        s = cubekit.classification_scores(r["classes"], test)
        assert s["oa"] > 0.9, classifier
    r = cubekit.classify(cube, train, svm_c=10, svm_gamma=0.5)
    assert r["model"]["c"] == 10 and r["model"]["gamma"] == 0.5 and r["model"]["grid"] == []


def test_classify_with_watershed_segmentation():
    cube, train, _test = blocks(1)
    r = cubekit.classify(cube, train, classifier="mindist", segment="watershed", tau=0.5)
    assert r["regions"].shape == (24, 30) and r["regions"].dtype == np.int32 and r["regions"].min() >= 1
    assert set(r["vote"]) == {"regions", "relabelled", "ties", "no_voters", "below_tau", "changed_pixels"}
    again = cubekit.region_vote(r["regions"], r["pixelwise"], tau=0.5)
    np.testing.assert_array_equal(again, r["classes"])


@pytest.mark.parametrize("classifier", ["svm", "sam"])
def test_classify_in_tiles_equals_whole(classifier):
    """The tile keywords: prediction, RCMG and watershed in tiles give the whole call's maps and vote."""
    cube, train, _test = blocks(2)
    keywords = {"classifier": classifier, "segment": "watershed", "cv_folds": 3}
    whole = cubekit.classify(cube, train, **keywords)
    for tiles in ({"tile_size": (7, 5)}, {"memory_limit": "4K"}):
        got = cubekit.classify(cube, train, **keywords, **tiles)
        for key in ("classes", "pixelwise", "regions"):
            np.testing.assert_array_equal(got[key], whole[key])
        assert got["vote"] == whole["vote"] and got["model"]["classes"] == whole["model"]["classes"]


def test_classify_in_tiles_on_every_device():
    cp = pytest.importorskip("cupy")
    cube, train, _test = blocks(3)
    whole = cubekit.classify(cube, train, classifier="mindist", segment="watershed")
    got = cubekit.classify(cube, train, classifier="mindist", segment="watershed",
                           devices=list(range(cp.cuda.runtime.getDeviceCount())), tile_size=(11, 6))
    for key in ("classes", "pixelwise", "regions"):
        np.testing.assert_array_equal(got[key], whole[key])


def test_region_vote_stats_and_dtypes():
    regions = np.array([[1, 1, 1, 2, 2, 2, 3, 3]], np.uint16)
    classes = np.array([[5, 5, 7, 4, 6, 0, 0, 0]], np.float64)  # a MATLAB map
    voted, stats = cubekit.region_vote(regions, classes, return_stats=True)
    assert voted.dtype == np.int32 and voted.shape == (1, 8)
    assert voted.tolist() == [[5, 5, 5, 4, 6, 0, 0, 0]]
    assert stats == {"regions": 3, "relabelled": 1, "ties": 1, "no_voters": 1, "below_tau": 0, "changed_pixels": 1}


def test_scores_and_split():
    s = cubekit.classification_scores(np.array([[1, 2, 2, 2]]), np.array([[1, 1, 2, 2]]))
    assert s["confusion"].dtype == np.int64 and s["confusion"].shape == (2, 2)
    assert s["classes"].tolist() == [1, 2] and s["total"] == 4 and s["correct"] == 3
    truth = np.repeat(np.array([[1, 2, 3, 0]]), 10, axis=0)
    train, test = cubekit.stratified_split(truth, train_fraction=0.3, seed=4)
    assert train.dtype == np.int32 and train.shape == truth.shape
    assert [(train == c).sum() for c in (1, 2, 3)] == [3, 3, 3]
    np.testing.assert_array_equal(train + test, truth)
    again, _ = cubekit.stratified_split(truth, train_fraction=0.3, seed=4)
    np.testing.assert_array_equal(train, again)


def test_named_errors():
    cube, train, _test = blocks()
    cases = [
        (lambda: cubekit.classify(cube, train[:10]), ValueError, "train"),
        (lambda: cubekit.classify(cube, train, classifier="knn"), ValueError, "classifier"),
        (lambda: cubekit.classify(cube, train, segment="quadtree"), ValueError, "segment"),
        (lambda: cubekit.classify(cube, train, tau=2), ValueError, "tau"),
        (lambda: cubekit.classify(cube, train, cv_folds=1), ValueError, "cv_folds"),
        (lambda: cubekit.classify(cube, train, nonsense=1), TypeError, "nonsense"),
        (lambda: cubekit.classify(cube, np.where(train == 2, 2, 0)), ValueError, "at least 2"),
        (lambda: cubekit.region_vote(train, -train), ValueError, "class_map"),
        (lambda: cubekit.classification_scores(train, np.zeros_like(train)), ValueError, "no labelled pixel"),
        (lambda: cubekit.stratified_split(train, train_fraction=0), ValueError, "train_fraction"),
    ]
    for i, (call, error, match) in enumerate(cases):
        with pytest.raises(error, match=match):
            call()
            pytest.fail(f"case {i} did not raise")


def test_same_scores_as_the_cli(cli, tmp_path):
    cube, train, test = blocks(2)
    np.save(tmp_path / "cube.npy", cube)
    np.save(tmp_path / "train.npy", train.astype(np.int32))
    np.save(tmp_path / "test.npy", test.astype(np.int32))
    r = cli("classify", tmp_path / "cube.npy", tmp_path / "map.npy", "--train", tmp_path / "train.npy", "--test",
            tmp_path / "test.npy", "--classifier", "sam", "--segment", "watershed", "--json")
    j = json.loads(r.stdout)
    py = cubekit.classify(cube, train, classifier="sam", segment="watershed")
    np.testing.assert_array_equal(np.load(tmp_path / "map.npy"), py["classes"])
    assert j["regions"]["oa"] == cubekit.classification_scores(py["classes"], test)["oa"]
    assert j["pixelwise"]["kappa"] == cubekit.classification_scores(py["pixelwise"], test)["kappa"]


def test_salinas_a_split_runs():
    path = SHARED / "classification" / "salinas_a"
    if not (path / "SalinasA_corrected.mat").exists():
        pytest.skip(f"{path}/SalinasA_corrected.mat is absent (see ../shared/data/README.md)")
    import scipy.io
    cube = scipy.io.loadmat(path / "SalinasA_corrected.mat")["salinasA_corrected"]
    truth = scipy.io.loadmat(path / "SalinasA_gt.mat")["salinasA_gt"]
    train, test = cubekit.stratified_split(truth, train_fraction=0.05, seed=1)
    r = cubekit.classify(cube, train, classifier="mindist")
    assert cubekit.classification_scores(r["classes"], test)["total"] == 5348 - 268


def test_signatures_and_docstring_examples():
    p = inspect.signature(cubekit.classify).parameters
    assert p["tau"].default == 0.0 and p["svm_c"].default is None and p["cv_folds"].default == 5
    assert p["connectivity"].default == 8 and "volume" not in p
    assert inspect.signature(cubekit.stratified_split).parameters["train_fraction"].default == 0.05
    for f in (cubekit.classify, cubekit.region_vote, cubekit.classification_scores, cubekit.stratified_split):
        assert "Example" in f.__doc__, f.__name__
        for t in doctest.DocTestFinder().find(f, globs={"cubekit": cubekit}):
            runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
            runner.run(t)
            assert runner.summarize(verbose=False).failed == 0, f.__name__


@pytest.mark.parametrize("classifier", ["svm", "sam", "mindist"])
def test_trained_model_predicts_as_classify(classifier, tmp_path):
    """train_classifier + predict = classify's pixel-wise map; in tiles, from a file and after a pickle
    the same map; saved and loaded, the class means exactly and the SVM's model numbers."""
    import pickle
    cube, train, _test = blocks(3)
    whole = cubekit.classify(cube, train, classifier=classifier, cv_folds=3)
    m = cubekit.train_classifier(cube, train, classifier=classifier, cv_folds=3)
    assert m.classifier == classifier and m.classes == [2, 3, 5, 8] and m.bands == 4
    np.testing.assert_equal(m.info, whole["model"])
    np.testing.assert_array_equal(m.predict(cube), whole["pixelwise"])
    np.testing.assert_array_equal(m.predict(cube, tile_size=(7, 5)), whole["pixelwise"])
    cubekit.write(tmp_path / "c.npy", cube)
    np.testing.assert_array_equal(m.predict(tmp_path / "c.npy", memory_limit="4K"), whole["pixelwise"])
    np.testing.assert_array_equal(m.predict(str(tmp_path / "c.npy")), whole["pixelwise"])
    # Trained from the file (the training pixels' rows read a strip at a time): the same model.
    from_file = cubekit.train_classifier(tmp_path / "c.npy", train, classifier=classifier, cv_folds=3, memory_limit="1K")
    np.testing.assert_equal(from_file.info, m.info)
    np.testing.assert_array_equal(from_file.predict(cube), whole["pixelwise"])
    again = pickle.loads(pickle.dumps(m))
    np.testing.assert_equal(again.info, m.info)
    assert repr(again) == repr(m)
    np.testing.assert_array_equal(again.predict(cube), whole["pixelwise"])
    m.save(tmp_path / "model")
    loaded = cubekit.load_classifier(tmp_path / "model")
    assert loaded.classifier == classifier and loaded.classes == m.classes
    if classifier == "svm":
        assert (tmp_path / "model.scaling.json").exists()
        assert loaded.info["c"] == m.info["c"] and loaded.info["gamma"] == m.info["gamma"]
    else:
        np.testing.assert_array_equal(loaded.predict(cube), whole["pixelwise"])
        np.testing.assert_equal(loaded.info, m.info)


def test_trained_model_refusals(tmp_path):
    cube, train, _test = blocks(4)
    m = cubekit.train_classifier(cube, train, classifier="sam")
    with pytest.raises(ValueError, match="band"):
        m.predict(cube[:, :, :3])
    with pytest.raises(ValueError, match="classifier"):
        cubekit.train_classifier(cube, train, classifier="nearest")
    with pytest.raises(TypeError, match="tau"):
        cubekit.train_classifier(cube, train, classifier="sam", tau=0.5)
    with pytest.raises(TypeError, match="unexpected"):
        m.predict(cube, tau=0.5)
    with pytest.raises(OSError):
        cubekit.load_classifier(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{\"format\": \"something else\"}")
    with pytest.raises(ValueError):
        cubekit.load_classifier(tmp_path / "bad.json")
    assert "Example" not in (m.predict.__doc__ or "") and ">>>" in cubekit.ClassifierModel.__doc__
    for t in doctest.DocTestFinder().find(cubekit.ClassifierModel, globs={"cubekit": cubekit}):
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
        runner.run(t)
        assert runner.summarize(verbose=False).failed == 0
