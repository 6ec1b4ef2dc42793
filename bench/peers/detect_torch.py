"""The RBF-network detector the way a PyTorch user writes it (the peer of bench/detect_bench.cpp).

scores = exp(-cdist(x, U)^2 * gamma) @ w + bias over every pixel of an (H, W, B) float32 cube on
the GPU (torch.cdist, then the Gaussian and the output layer), and the same with the distances
expanded (|x|^2 - 2 x.U + |U|^2, one matmul). Timed with CUDA events: median of 20 runs after 3
warm-ups, cube already on the device. Also checks the scores against cubekit's (--scores).

Usage: python3 detect_torch.py CUBE.npy MODEL.json [--scores CUBEKIT_SCORES.npy] [--json]
"""
import argparse
import json

import numpy as np
import torch
from peer_timing import median_min, times_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cube")
    ap.add_argument("model")
    ap.add_argument("--scores")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    hwb = np.load(a.cube).astype(np.float32)
    m = json.load(open(a.model))
    H, W, B = hwb.shape
    dev = torch.device("cuda")
    x = torch.from_numpy(hwb.reshape(H * W, B)).to(dev)
    U = torch.tensor(m["centres"], dtype=torch.float32, device=dev)
    gamma = torch.tensor([1.0 / (2 * s * s) for s in m["sigma"]], dtype=torch.float32, device=dev)
    w = torch.tensor(m["weights"], dtype=torch.float32, device=dev)
    bias = float(m["bias"])

    def cdist_form():
        d = torch.cdist(x, U) ** 2
        return torch.exp(-d * gamma) @ w + bias

    def matmul_form():
        d = (x * x).sum(1, keepdim=True) - 2 * (x @ U.T) + (U * U).sum(1)
        return torch.exp(-d.clamp_min(0) * gamma) @ w + bias

    results = {}
    for name, fn in (("torch cdist+exp", cdist_form), ("torch matmul form", matmul_form)):
        with torch.no_grad():
            med, best = median_min(times_ms(fn, 20, 3, torch))
            y = fn().reshape(H, W).cpu().numpy()
        entry = {"median_ms": med, "min_ms": best}
        if a.scores:
            ref = np.load(a.scores).reshape(H, W).astype(np.float64)
            entry["max_abs_diff_vs_cubekit"] = float(np.nanmax(np.abs(ref - y)))
        results[name] = entry
        print(f"{name}: median {med:.3f} ms, min {best:.3f} ms" +
              (f", max |diff| vs cubekit {entry['max_abs_diff_vs_cubekit']:.2e}" if a.scores else ""))
    if a.json:
        print(json.dumps({"peer": "detect_torch", "cube": list(hwb.shape), "results": results}))


if __name__ == "__main__":
    main()
