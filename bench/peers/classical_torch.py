"""Classical detectors the way a PyTorch user writes them (the peer of bench/classical_bench.cpp).

Global RX on a 1024x1024x200 float32 cube on the GPU (deterministic random, the background model
of classical_bench: 500 + 100 c + 20 u_b + 3 b), in f32 and in f64: mean, torch.cov, then
torch.linalg.pinv, then the Mahalanobis form by einsum ("fit+apply"); and the apply step alone
(statistics given). Local RX (5, 21) in f64 on 100x100x205 (abu-airport-2.mat through
$CUBEKIT_SHARED_DATA when scipy and the file are there, else random) with unfold: the 21x21 windows
of every pixel at once, the inner 5x5 masked out, batched covariances and torch.linalg.solve; SPy's
shifted windows at the borders (the window start is clamped to the image), as cubekit does.

Timed with CUDA events (peer_timing.py): median and minimum of 20 runs after 3 warm-ups (local RX:
5 runs after 1), data already on the device.

Usage: python3 classical_torch.py [--json]
"""
import argparse
import json
import os

import numpy as np
import torch
from peer_timing import median_min, times_ms


def random_cube(H, W, B, seed, dev):
    g = torch.Generator(device=dev).manual_seed(seed)
    common = torch.rand(H * W, 1, generator=g, device=dev) * 2 - 1
    noise = torch.rand(H * W, B, generator=g, device=dev) * 2 - 1
    return 500 + 100 * common + 20 * noise + 3 * torch.arange(B, device=dev, dtype=torch.float32)


def global_rx(x):
    mu = x.mean(0)
    cov = torch.cov(x.T, correction=0)
    inv = torch.linalg.pinv(cov, hermitian=True)
    y = x - mu
    return torch.einsum("pi,ij,pj->p", y, inv, y)


def rx_apply(x, mu, inv):
    y = x - mu
    return torch.einsum("pi,ij,pj->p", y, inv, y)


def window_index(n, size, length, dev):
    """Start of SPy's shifted window for each of n positions (clamped to stay inside)."""
    s = torch.arange(n, device=dev) - size // 2
    return s.clamp(0, length - size)


def local_rx(cube, inner, outer):
    """cube: (H, W, B) float64 on the device."""
    H, W, B = cube.shape
    dev = cube.device
    oy, ox = window_index(H, outer, H, dev), window_index(W, outer, W, dev)
    iy, ix = window_index(H, inner, H, dev), window_index(W, inner, W, dev)
    d = torch.arange(outer, device=dev)
    out = torch.empty(H, W, dtype=cube.dtype, device=dev)
    for y in range(H):  # one image row of pixels at a time: W windows of outer² spectra
        rows = (oy[y] + d)[:, None]                     # outer
        cols = ox[:, None] + d[None, :]                 # W × outer
        win = cube[rows[None, :, :], cols[:, None, :]]  # W × outer × outer × B
        yy = (oy[y] + d)[None, :, None]
        xx = cols[:, None, :]
        inside = (yy >= iy[y]) & (yy < iy[y] + inner) & (xx >= ix[:, None, None]) & (xx < ix[:, None, None] + inner)
        keep = ~inside.reshape(W, outer * outer)
        samples = win.reshape(W, outer * outer, B)[keep].reshape(W, -1, B)
        mu = samples.mean(1, keepdim=True)
        c = samples - mu
        cov = c.transpose(1, 2) @ c / samples.shape[1]
        r = (cube[y] - mu[:, 0]).unsqueeze(-1)
        out[y] = (r * torch.linalg.solve(cov, r)).sum((1, 2))
    return out


def airport(dev):
    root = os.environ.get("CUBEKIT_SHARED_DATA", os.path.join(os.path.dirname(__file__), "../../../shared/data"))
    path = os.path.join(root, "anomaly_abu/abu-airport-2.mat")
    try:
        import scipy.io
        data = scipy.io.loadmat(path)["data"]
        return torch.from_numpy(np.ascontiguousarray(data, dtype=np.float64)).to(dev), "abu-airport-2"
    except Exception:  # no scipy or no file
        return random_cube(100, 100, 205, 2, dev).reshape(100, 100, 205).double(), "random"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    dev = torch.device("cuda")
    results = {}

    def run(name, fn, runs=20, warmup=3):
        with torch.no_grad():
            med, best = median_min(times_ms(fn, runs, warmup, torch))
        results[name] = {"median_ms": med, "min_ms": best}
        print(f"{name}: median {med:.3f} ms, min {best:.3f} ms")

    x32 = random_cube(1024, 1024, 200, 1, dev)
    for dtype, name in ((torch.float32, "f32"), (torch.float64, "f64")):
        x = x32 if dtype == torch.float32 else x32.double()
        with torch.no_grad():
            mu = x.mean(0)
            inv = torch.linalg.pinv(torch.cov(x.T, correction=0), hermitian=True)
        run(f"global RX fit+apply {name} 1024x1024x200 (cov, pinv, einsum)", lambda: global_rx(x))
        run(f"global RX apply {name} (einsum, statistics given)", lambda: rx_apply(x, mu, inv))
        del x
    del x32
    torch.cuda.empty_cache()
    cube, what = airport(dev)
    H, W, B = cube.shape
    run(f"local RX (5,21) f64 {H}x{W}x{B} {what} (gather, batched cov, solve)", lambda: local_rx(cube, 5, 21), runs=5, warmup=1)
    if a.json:
        print(json.dumps({"peer": "classical_torch", "device": torch.cuda.get_device_name(), "results": results}))


if __name__ == "__main__":
    main()
