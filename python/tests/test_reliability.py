"""Reliability through the Python module (issue 18, items 3 and 5): bad writes raise the named
exception and leave nothing behind; every family called from 8 Python threads at once (the GIL is
released while cubekit computes) gives the serial results; two processes writing the same output
path leave one complete file."""
import dataclasses
import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import cubekit
from conftest import REPO


def digest(value) -> str:
    """A hash of every array, number and string inside a result (arrays: dtype, shape and bytes)."""
    h = hashlib.sha256()

    def feed(v):
        if isinstance(v, np.ndarray):
            h.update(f"{v.dtype}{v.shape}".encode())
            h.update(np.ascontiguousarray(v).tobytes())
        elif dataclasses.is_dataclass(v):
            for f in dataclasses.fields(v):
                h.update(f.name.encode())
                feed(getattr(v, f.name))
        elif isinstance(v, dict):
            for k in sorted(v):
                h.update(str(k).encode())
                feed(v[k])
        elif isinstance(v, (list, tuple)):
            for x in v:
                feed(x)
        elif hasattr(v, "__dict__"):
            feed(vars(v))
        else:
            h.update(repr(v).encode())
    feed(value)
    return h.hexdigest()


def families(threads=1):
    """One call of each family on fixed random inputs, with `threads` CPU threads."""
    r = np.random.default_rng(1801)
    cube = r.random((40, 48, 6)).astype(np.float32)
    photo = (r.random((48, 64, 3)) * 255).astype(np.uint8)
    gray = r.random((40, 40))
    mask = (r.random((40, 50)) > 0.5).astype(np.uint8)
    t = threads
    return {
        "rcmg": lambda: cubekit.rcmg(cube, threads=t),
        "kmeans": lambda: cubekit.kmeans(photo, k=6, seed=3, threads=t),
        "entropy_edges": lambda: cubekit.entropy_edges(cube, threads=t),
        "pca": lambda: cubekit.pca(cube, threads=t),
        "zernike": lambda: cubekit.zernike_moments(gray, max_order=12, threads=t),
        "label": lambda: cubekit.label(mask, threads=t),
        "watershed": lambda: cubekit.watershed(gray, threads=t),
        "rx": lambda: cubekit.rx(cube, threads=t),
        "local_rx": lambda: cubekit.rx(cube, window=(3, 9), threads=t),
    }


def test_eight_threads_give_the_serial_results():
    fams = families()
    names = sorted(fams)
    want = {n: digest(fams[n]()) for n in names}
    wrong, errors = [], []

    def worker(t):
        for k in range(12):
            n = names[(t * 3 + k) % len(names)]
            try:
                got = digest(fams[n]())
            except Exception as e:  # noqa: BLE001 - every failure is reported below
                errors.append(f"{n}: {e!r}")
                continue
            if got != want[n]:
                wrong.append(f"{n} in thread {t}, call {k}")
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert not wrong, wrong[:3]


def test_results_are_identical_run_to_run_and_across_thread_counts():
    one = {n: digest(call()) for n, call in families(1).items()}
    for threads in (1, 2, 3, 0):
        for n, call in families(threads).items():
            assert digest(call()) == one[n], f"{n} with threads={threads}"


def _bad_writes(tmp: Path):
    """(what, call, exception, text the message must contain) for cubekit's writers."""
    a = np.arange(4 * 5 * 3, dtype=np.float32).reshape(4, 5, 3) + 1
    img = (np.arange(20, dtype=np.uint8).reshape(4, 5) + 1)
    (tmp / "afile").write_text("x")
    (tmp / "adir.npy").mkdir()
    stats = cubekit.background_stats(np.random.default_rng(2).random((6, 7, 3)))
    model_path = tmp / "model.json"
    model_path.write_bytes((REPO / "fuzz" / "corpus" / "model" / "written_rbfn").read_bytes())  # as cubekit train writes it
    model = cubekit.read_model(model_path)
    return [
        ("missing folder", lambda: cubekit.write(tmp / "nodir" / "a.npy", a), OSError, "nodir"),
        ("folder is a file", lambda: cubekit.write(tmp / "afile" / "a.npy", a), OSError, "afile"),
        ("target is a folder", lambda: cubekit.write(tmp / "adir.npy", a), OSError, "adir.npy"),
        ("unknown extension", lambda: cubekit.write(tmp / "a.xyz", a), ValueError, "a.xyz"),
        ("read-only format", lambda: cubekit.write(tmp / "a.jpg", img), ValueError, "a.jpg"),
        ("float PNG", lambda: cubekit.write(tmp / "f.png", a), ValueError, "f.png"),
        ("PNG of 5 bands", lambda: cubekit.write(tmp / "b5.png", np.ones((4, 4, 5), np.uint8)), ValueError, "b5.png"),
        ("complex samples", lambda: cubekit.write(tmp / "c.npy", np.ones((3, 3), np.complex64)), (TypeError, ValueError), "complex"),
        ("object samples", lambda: cubekit.write(tmp / "o.npy", np.array([[object()]])), (TypeError, ValueError), ""),
        ("bad metadata key", lambda: cubekit.write(tmp / "m.hdr", a, metadata={"wavelength": [1, 2]}), ValueError, "wavelength"),
        ("png_compression", lambda: cubekit.write(tmp / "p.png", img, png_compression="tiny"), ValueError, "png_compression"),
        ("layout", lambda: cubekit.write(tmp / "l.hdr", a, layout="zig"), ValueError, "zig"),
        ("stats extension", lambda: cubekit.write_background_stats(stats, tmp / "s.txt"), ValueError, "s.txt"),
        ("stats missing folder", lambda: cubekit.write_background_stats(stats, tmp / "nodir" / "s.json"), OSError, "nodir"),
        ("model missing folder", lambda: cubekit.write_model(model, tmp / "nodir" / "m.json"), OSError, "nodir"),
        ("model not a model", lambda: cubekit.write_model({"type": "nothing"}, tmp / "m2.json"), ValueError, "type"),
    ]


BAD_WRITE_NAMES = ["missing folder", "folder is a file", "target is a folder", "unknown extension", "read-only format",
                   "float PNG", "PNG of 5 bands", "complex samples", "object samples", "bad metadata key",
                   "png_compression", "layout", "stats extension", "stats missing folder", "model missing folder",
                   "model not a model"]


@pytest.mark.parametrize("what", BAD_WRITE_NAMES)
def test_bad_writes_raise_and_leave_nothing(what, tmp_path):
    rows = {r[0]: r for r in _bad_writes(tmp_path)}
    assert sorted(rows) == sorted(BAD_WRITE_NAMES)
    _, call, exception, text = rows[what]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(exception) as info:
        call()
    assert text in str(info.value), str(info.value)
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert after == before, f"left behind: {set(after) - set(before)}"


def test_two_processes_writing_one_path_leave_one_complete_file(tmp_path):
    """Each process writes a different array to the same .npy, 20 times over; at the end the file is
    one of the two arrays, whole, and no temporary is left."""
    script = (
        "import sys, numpy as np, cubekit\n"
        "v = int(sys.argv[2])\n"
        "a = np.full((256, 256, 8), v, np.float32)\n"
        "for _ in range(20): cubekit.write(sys.argv[1], a)\n"
    )
    out = tmp_path / "same.npy"
    env = dict(os.environ)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(out), str(v)], env=env) for v in (1, 2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    got = np.load(out)
    assert got.shape == (256, 256, 8)
    assert np.all(got == got.flat[0]) and got.flat[0] in (1, 2), "a mixture of the two writers"
    assert sorted(os.listdir(tmp_path)) == ["same.npy"], os.listdir(tmp_path)
