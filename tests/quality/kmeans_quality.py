"""k-means quality against the peers (spec kmeans.md, section 5, oracle 13, acceptance bar).

For each image in {chelsea, astronaut} and k in {16, 64}:
  cubekit  `cubekit quantize IMAGE OUT.png -k K --max-iter 10 --n-init 8 --backend cpu --json --quiet`,
           top-level "inertia" of its JSON (squared RGB distances to the final centroids, 0..255 units);
  sklearn  KMeans(n_clusters=K, n_init=8, max_iter=10, random_state=0) on float64 pixels;
  cv2      cv2.kmeans, 8 attempts, (TERM_CRITERIA_MAX_ITER, 10, 0), KMEANS_PP_CENTERS, float32 pixels.
The peers' inertia is recomputed in float64 as the sum over pixels of the squared distance to the
nearest final centre (what cubekit reports; sklearn's inertia_ and cv2's compactness use the labels
of their last assignment instead). Pass when cubekit <= 1.01 x min(sklearn, cv2).
Cross-check that the reported number is the real one: the quantized OUT.png must have at most K
colours and its squared error to the input must equal the reported inertia within 2 % + 0.75 per
pixel (the palette is the centroids rounded to integers: at most 0.5 per channel).

Usage: /usr/bin/python3 kmeans_quality.py --cli build/cubekit --data ../shared/data/rgb
       /usr/bin/python3 kmeans_quality.py --peers-only [--data DIR]     (peer inertias only)
Exit: 0 pass, 1 failure, 77 skipped (numpy/sklearn/cv2 missing, or the data missing).
Run it with /usr/bin/python3: the Debian packages of scripts/install-deps live there.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SKIP = 77
IMAGES = ("chelsea", "astronaut")
KS = (16, 64)
ITERS, N_INIT, TOLERANCE = 10, 8, 1.01

try:
    import numpy as np
    import cv2
    from sklearn.cluster import KMeans
except ImportError as e:
    print(f"kmeans_quality: SKIP: {sys.executable} lacks {e.name} (scripts/install-deps installs "
          f"python3-numpy python3-sklearn python3-opencv for /usr/bin/python3)")
    sys.exit(SKIP)


def default_data_dir():
    shared = os.environ.get("CUBEKIT_SHARED_DATA")
    if shared:
        return Path(shared) / "rgb"
    return Path(__file__).resolve().parents[3] / "shared" / "data" / "rgb"


def load_rgb(path):
    """(N, 3) float64 RGB pixels, 0..255."""
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise RuntimeError(f"cannot read {path}")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB).reshape(-1, 3).astype(np.float64)


def nearest_inertia(x, centres):
    """Sum over pixels of the squared distance to the nearest centre, float64, exact differences."""
    best = np.full(x.shape[0], np.inf)
    for c in np.asarray(centres, dtype=np.float64):
        np.minimum(best, ((x - c) ** 2).sum(1), out=best)
    return float(best.sum())


def sklearn_inertia(x, k):
    km = KMeans(n_clusters=k, n_init=N_INIT, max_iter=ITERS, random_state=0).fit(x)
    return nearest_inertia(x, km.cluster_centers_)


def cv2_inertia(x, k):
    cv2.setRNGSeed(0)
    criteria = (cv2.TERM_CRITERIA_MAX_ITER, ITERS, 0)
    _, _, centres = cv2.kmeans(x.astype(np.float32), k, None, criteria, N_INIT, cv2.KMEANS_PP_CENTERS)
    return nearest_inertia(x, centres)


def cubekit_inertia(cli, image, k, tmp):
    out = Path(tmp) / f"{image.stem}_k{k}.png"
    cmd = [str(cli), "quantize", str(image), str(out), "-k", str(k), "--max-iter", str(ITERS),
           "--n-init", str(N_INIT), "--backend", "cpu", "--json", "--quiet"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()[-500:]}")
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError as e:
        raise RuntimeError(f"{' '.join(cmd)}: stdout is not one JSON object ({e}): {r.stdout[:300]!r}")
    if not isinstance(doc, dict) or not isinstance(doc.get("inertia"), (int, float)):
        raise RuntimeError(f"{' '.join(cmd)}: no numeric top-level \"inertia\" in the JSON")
    return float(doc["inertia"]), out


def check_quantized(x, out, k, inertia):
    """The quantized PNG agrees with the reported inertia; returns its squared error to the input."""
    q = load_rgb(out)
    if q.shape != x.shape:
        raise RuntimeError(f"{out}: {q.shape[0]} pixels, the input has {x.shape[0]}")
    colours = np.unique(q.astype(np.uint32) @ np.array([65536, 256, 1], dtype=np.uint32)).size
    if colours > k:
        raise RuntimeError(f"{out}: {colours} colours > k = {k}")
    sse = float(((x - q) ** 2).sum())
    if abs(sse - inertia) > 0.02 * inertia + 0.75 * x.shape[0]:
        raise RuntimeError(f"{out}: squared error {sse:.6g} does not match the reported inertia {inertia:.6g}")
    return sse


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", help="the cubekit executable")
    ap.add_argument("--data", help="folder holding chelsea.png and astronaut.png "
                    "(default $CUBEKIT_SHARED_DATA/rgb, else ../shared/data/rgb)")
    ap.add_argument("--tolerance", type=float, default=TOLERANCE,
                    help=f"pass when cubekit <= TOLERANCE x min(peers) (default {TOLERANCE}, the spec's bar)")
    ap.add_argument("--peers-only", action="store_true", help="print the peers' inertias; do not run cubekit")
    args = ap.parse_args()
    if not args.peers_only and not args.cli:
        ap.error("--cli is required unless --peers-only")

    data = Path(args.data) if args.data else default_data_dir()
    missing = [f"{name}.png" for name in IMAGES if not (data / f"{name}.png").is_file()]
    if missing:
        print(f"kmeans_quality: SKIP: {', '.join(missing)} not found in {data}")
        return SKIP
    if not args.peers_only and not Path(args.cli).is_file():
        print(f"kmeans_quality: FAIL: cubekit executable {args.cli} not found")
        return 1

    t_start = time.perf_counter()
    header = f"{'image':<10} {'k':>3} {'sklearn':>14} {'cv2':>14}"
    if not args.peers_only:
        header += f" {'cubekit':>14} {'cubekit/best':>12}  result"
    print(header, flush=True)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="cubekit-kmq-") as tmp:
        for name in IMAGES:
            image = data / f"{name}.png"
            x = load_rgb(image)
            for k in KS:
                j_sk = sklearn_inertia(x, k)
                j_cv = cv2_inertia(x, k)
                line = f"{name:<10} {k:>3} {j_sk:>14.6g} {j_cv:>14.6g}"
                if not args.peers_only:
                    try:
                        j_ck, out = cubekit_inertia(args.cli, image, k, tmp)
                        check_quantized(x, out, k, j_ck)
                        ratio = j_ck / min(j_sk, j_cv)
                        ok = ratio <= args.tolerance
                        line += f" {j_ck:>14.6g} {ratio:>12.4f}  {'pass' if ok else 'FAIL'}"
                    except (RuntimeError, subprocess.TimeoutExpired) as e:
                        ok = False
                        line += f" {'-':>14} {'-':>12}  FAIL: {e}"
                    failures += not ok
                print(line, flush=True)
    print(f"kmeans_quality: {time.perf_counter() - t_start:.1f} s", end="")
    if args.peers_only:
        print(", peers only")
        return 0
    print(f"; {failures} failure(s); bar: cubekit <= {args.tolerance} x min(sklearn, cv2)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
