"""k-means the way a PyTorch user writes it (the peer of the cubekit k-means benchmark).

Two versions of Lloyd's algorithm in float32, both from the same fixed initialisation (the first k
pixels of a seeded random permutation), both running exactly --iters iterations (no convergence
test) followed by a final assignment with the final centroids:
  torch-careful: distances as one matmul, ||x||^2 - 2 x.c^T + ||c||^2, argmin; per-cluster sums by a
                 weighted torch.bincount per channel, counts by torch.bincount, then divide.
  torch-cdist:   torch.cdist + argmin; sums and counts with index_add_.
An empty cluster keeps its previous centroid. Timed with CUDA events (median and minimum of
--repeat runs after 3 warm-ups) over the whole run, data already on the device. Inertia (sum of
squared distances of every pixel to its assigned final centroid, input units) is computed
afterwards in float64.

Input: an .npy of shape (H, W, 3) u8 (the RGB benchmark image of make_kmeans_image.py), (H, W, B)
of any numeric type (a hyperspectral cube, e.g. 610x340x103 with --k 9 --iters 50) or (H, W).
Values are converted to float32 as they are (no scaling).

Usage: python3 kmeans_torch.py IMAGE.npy [--k 16] [--iters 10] [--repeat 20] [--seed 0] [--json]
Prints one JSON line per version on stdout:
  {"peer": "torch-careful"|"torch-cdist", "k", "iters", "ms_median", "ms_min", "inertia", "device"}
Without --json, a readable line per version goes to stdout too; with it, only the JSON lines do.
Runs on the CPU (slowly, wall-clock timing) when there is no CUDA device.
"""
import argparse
import json
import sys

import numpy as np
import torch
from peer_timing import median_min, times_ms


def load_pixels(path):
    """(N, m) float32 numpy array of the pixels in raster order."""
    a = np.load(path)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3:
        sys.exit(f"kmeans_torch: {path}: expected (H, W) or (H, W, B), got shape {a.shape}")
    return np.ascontiguousarray(a.reshape(-1, a.shape[2]).astype(np.float32))


def initial_centroids(x_np, k, seed):
    """The first k pixels of a seeded random permutation (same for both versions)."""
    perm = np.random.Generator(np.random.PCG64(seed)).permutation(x_np.shape[0])
    return x_np[perm[:k]].copy()


# ---- torch-careful: matmul distances, bincount sums ------------------------------------------
def assign_matmul(x, xx, c):
    d = xx - 2.0 * (x @ c.T) + (c * c).sum(1)[None, :]  # (N, k)
    return d.argmin(1)


def kmeans_careful(x, c0, iters):
    k, m = c0.shape
    xx = (x * x).sum(1, keepdim=True)  # (N, 1)
    c = c0.clone()
    for _ in range(iters):
        labels = assign_matmul(x, xx, c)
        counts = torch.bincount(labels, minlength=k).to(x.dtype)
        sums = torch.stack([torch.bincount(labels, weights=x[:, b], minlength=k).to(x.dtype) for b in range(m)], 1)
        c = torch.where(counts[:, None] > 0, sums / counts.clamp(min=1)[:, None], c)
    return c, assign_matmul(x, xx, c)


# ---- torch-cdist: cdist distances, index_add_ sums ---------------------------------------------
def kmeans_cdist(x, c0, iters):
    k, m = c0.shape
    ones = torch.ones(x.shape[0], dtype=x.dtype, device=x.device)
    c = c0.clone()
    for _ in range(iters):
        labels = torch.cdist(x, c).argmin(1)
        sums = torch.zeros(k, m, dtype=x.dtype, device=x.device).index_add_(0, labels, x)
        counts = torch.zeros(k, dtype=x.dtype, device=x.device).index_add_(0, labels, ones)
        c = torch.where(counts[:, None] > 0, sums / counts.clamp(min=1)[:, None], c)
    return c, torch.cdist(x, c).argmin(1)


# ---- timing and inertia ------------------------------------------------------------------------
def time_ms(fn, device, runs, warmup=3):
    return median_min(times_ms(fn, runs, warmup, torch if device.type == "cuda" else None))


def inertia(x, c, labels):
    """Sum of squared distances to the assigned centroids, in float64."""
    return float(((x.double() - c.double()[labels]) ** 2).sum().item())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("image", help=".npy, (H, W, 3) u8 or (H, W, B) cube")
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0, help="seed of the initial permutation (PCG64)")
    ap.add_argument("--json", action="store_true", help="stdout holds only the JSON lines")
    args = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    x_np = load_pixels(args.image)
    n, m = x_np.shape
    if not 1 <= args.k <= n:
        sys.exit(f"kmeans_torch: --k {args.k} out of range 1..{n}")
    x = torch.from_numpy(x_np).to(device)
    c0 = torch.from_numpy(initial_centroids(x_np, args.k, args.seed)).to(device)
    dev_name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    info = sys.stderr if args.json else sys.stdout
    print(f"torch {torch.__version__} on {dev_name}; {n} pixels x {m} bands float32, "
          f"k={args.k}, {args.iters} iterations + final assignment", file=info)

    for peer, fn in (("torch-careful", kmeans_careful), ("torch-cdist", kmeans_cdist)):
        ms_median, ms_min = time_ms(lambda: fn(x, c0, args.iters), device, args.repeat)
        c, labels = fn(x, c0, args.iters)
        j = inertia(x, c, labels)
        print(f"{peer}: median {ms_median:.3f} ms, min {ms_min:.3f} ms, inertia {j:.6g}", file=info)
        print(json.dumps({"peer": peer, "k": args.k, "iters": args.iters, "ms_median": round(ms_median, 4),
                          "ms_min": round(ms_min, 4), "inertia": j, "device": dev_name}), flush=True)


if __name__ == "__main__":
    main()
