#!/usr/bin/python3
"""Classical detectors of the cubekit CLI against an independent NumPy f64 reference and against
Spectral Python itself (Debian python3-spectral 0.22.4), on the ABU anomaly scenes.

Checks (tolerances and why):
- RX AUC on airport-1, beach-3, HYDICE, San Diego equals SPy's rx AUC (and the values measured in
  issue 15) to 1e-4;
- global RX/MF/ACE/CEM/SAM scores equal the NumPy reference (divisor N, pseudo-inverse by eigh)
  within 1e-6 relative to the score scale (max |score|): both sides invert covariances with
  condition numbers up to ~4e8 in f64, so each carries ~cond*eps ~ 1e-7 of rounding;
- --ddof 1 RX/MF/ACE equal SPy's rx/matched_filter/ace within the same tolerance;
- local RX --window 3,9 (--ddof 1) on a crop equals SPy's rx(window=(3, 9)) within 1e-6 (SPy returns
  float32 there, so its own rounding is ~6e-8 relative);
- detect-score's AUC equals the Mann-Whitney AUC computed here to 1e-12.
Exit 77 (skip) without numpy/scipy/spectral or without the scenes.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import scipy.io as sio
    from scipy.stats import rankdata
    import spectral
except ImportError as e:  # pragma: no cover
    print("skip: %s" % e)
    sys.exit(77)

SCENES = {"abu-airport-1.mat": 0.8221, "abu-beach-3.mat": 0.9998, "hydice.mat": 0.9932, "sandiego.mat": 0.8885}
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def auc(scores, mask):
    s = np.nan_to_num(scores.ravel().astype(np.float64), nan=-np.inf)
    m = mask.ravel() != 0
    r = rankdata(s)
    npos, nneg = m.sum(), (~m).sum()
    return (r[m].sum() - npos * (npos + 1) / 2) / (npos * nneg)


def screened(X):
    """Bands kept by cubekit's default screening: finite, not all-zero, not constant."""
    finite = np.isfinite(X).all(axis=(0, 1))
    const = X.max(axis=(0, 1)) == X.min(axis=(0, 1))
    return np.flatnonzero(finite & ~const)


def pinv_whitening(C):
    w, V = np.linalg.eigh(C)
    keep = w > C.shape[0] * 2.0**-52 * w.max()
    return (V[:, keep] / np.sqrt(w[keep])).T


def reference(X, det, t, ddof=0):
    """The header's formulas in NumPy f64."""
    P = X.reshape(-1, X.shape[-1]).astype(np.float64)
    mu = P.mean(axis=0)
    Y = P - mu
    C = Y.T @ Y / (len(P) - ddof)
    if det == "sam":
        return (P @ t) / (np.linalg.norm(t) * np.linalg.norm(P, axis=1))
    if det == "cem":
        R = P.T @ P / len(P)
        W = pinv_whitening(R)
        u = W.T @ (W @ t)
        return P @ (u / (t @ u))
    W = pinv_whitening(C)
    Z = Y @ W.T
    if det == "rx":
        return (Z * Z).sum(axis=1)
    s = W @ (t - mu)
    if det == "mf":
        return Z @ s / (s @ s)
    return np.clip((Z @ s) ** 2 / ((s @ s) * (Z * Z).sum(axis=1)), 0, 1)


def run(cli, *args):
    r = subprocess.run([cli, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("cubekit %s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr))
    return r.stdout


def close(a, b, rel):
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    scale = np.abs(b).max()
    err = np.abs(a - b).max() / scale
    return err <= rel, err


def cubekit_scores(cli, tmp, path, det, *flags):
    out = os.path.join(tmp, det + ".npy")
    run(cli, "detect", det, path, out, "--var", "data", "--backend", "cpu", "--quiet", *flags)
    return np.load(out)


def scene_checks(cli, tmp, path, expected):
    d = sio.loadmat(path)
    X, m = d["data"].astype(np.float64), d["map"]
    kept = screened(X)
    Xk = X[:, :, kept]
    name = os.path.basename(path)
    rx = cubekit_scores(cli, tmp, path, "rx")
    spy_auc = auc(spectral.rx(X), m)
    check(abs(auc(rx, m) - spy_auc) <= 1e-4 and abs(spy_auc - expected) <= 1e-4,
          "%s: RX AUC %.6f, SPy %.6f, issue %.4f" % (name, auc(rx, m), spy_auc, expected))
    np.save(os.path.join(tmp, "map.npy"), m.astype(np.uint8))
    out = json.loads(run(cli, "detect-score", os.path.join(tmp, "rx.npy"), path + ":map"))
    check(abs(out["auc"] - auc(rx, m)) <= 1e-12, "%s: detect-score AUC %.12f" % (name, out["auc"]))
    t = Xk[m != 0].mean(axis=0)
    for det in ("rx", "mf", "ace", "cem", "sam"):
        flags = () if det == "rx" else ("--target-mask", path + ":map")
        got = rx if det == "rx" else cubekit_scores(cli, tmp, path, det, *flags)
        ok, err = close(got, reference(Xk, det, t), 1e-6)
        check(ok, "%s: %s vs NumPy reference, max error %.2e of the scale" % (name, det, err))
    bg = spectral.calc_stats(Xk)
    spy = {"rx": spectral.rx(Xk, background=bg), "mf": spectral.matched_filter(Xk, t, background=bg),
           "ace": spectral.ace(Xk, t, background=bg)}
    for det, want in spy.items():
        flags = ("--ddof", "1") + (() if det == "rx" else ("--target-mask", path + ":map"))
        ok, err = close(cubekit_scores(cli, tmp, path, det, *flags), want, 1e-6)
        check(ok, "%s: %s --ddof 1 vs SPy, max error %.2e of the scale" % (name, det, err))


def local_check(cli, tmp, path):
    X = sio.loadmat(path)["data"][:24, :20, :40].astype(np.float64)
    crop = os.path.join(tmp, "crop.npy")
    np.save(crop, X)
    out = os.path.join(tmp, "local.npy")
    run(cli, "detect", "rx", crop, out, "--window", "3,9", "--ddof", "1", "--backend", "cpu", "--quiet")
    if not hasattr(np, "bool"):
        np.bool = bool  # SPy 0.22.4's window masks use np.bool, removed in NumPy 1.24
    want = spectral.rx(X, window=(3, 9))
    ok, err = close(np.load(out), want, 1e-6)
    check(ok, "local RX (3,9) vs SPy on a 24x20x40 crop, max error %.2e of the scale" % err)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--data", required=True, help="folder of the ABU scenes")
    a = ap.parse_args()
    if not all(os.path.exists(os.path.join(a.data, s)) for s in SCENES):
        print("skip: ABU scenes not found under " + a.data)
        return 77
    np.seterr(all="ignore")
    with tempfile.TemporaryDirectory() as tmp:
        for scene, expected in SCENES.items():
            scene_checks(a.cli, tmp, os.path.join(a.data, scene), expected)
        local_check(a.cli, tmp, os.path.join(a.data, "abu-airport-1.mat"))
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
