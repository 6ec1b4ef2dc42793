"""The RBF-kernel SVM prediction the way a PyTorch user writes it (the peer of the SVM rows of
bench/watershed_bench.cpp).

Reads LIBSVM's model file (as cubekit's write_svm_model writes it: the model, and MODEL.scaling.json
with the per-band min/max of svm-scale's rule) and an (H, W, B) cube. On the GPU, in f64 like
cubekit and LIBSVM: scale every band to [-1, 1], K = exp(-gamma * cdist(x, SV)^2), the one-against-one
decision values (pair (i, j): SVs of class i weighted by coef[j-1], of class j by coef[i], minus rho)
as one matmul per coefficient row, votes, arg-max (first maximum). Timed with CUDA events: median of
10 runs after 3 warm-ups, cube already on the device. With --classes (cubekit's class map) it reports
the pixels whose labels differ (LIBSVM stores the SVs with 8 digits, so a few near-ties may flip).

Usage: python3 svm_torch.py CUBE.npy MODEL [--classes CUBEKIT_CLASSES.npy] [--json]
"""
import argparse
import json

import numpy as np
import torch
from peer_timing import median_min, times_ms


def read_libsvm_model(path):
    header, sv_lines = {}, []
    with open(path) as f:
        for line in f:
            if line.strip() == "SV":
                break
            key, *vals = line.split()
            header[key] = vals
        sv_lines = [l.split() for l in f if l.strip()]
    k = int(header["nr_class"][0])
    coef = np.array([[float(v) for v in l[: k - 1]] for l in sv_lines]).T  # (K-1, n)
    bands = max(int(t.split(":")[0]) for l in sv_lines for t in l[k - 1:])
    sv = np.zeros((len(sv_lines), bands))
    for i, l in enumerate(sv_lines):
        for t in l[k - 1:]:
            j, v = t.split(":")
            sv[i, int(j) - 1] = float(v)
    return {
        "gamma": float(header["gamma"][0]), "rho": np.array([float(v) for v in header["rho"]]),
        "labels": np.array([int(v) for v in header["label"]]), "nr_sv": np.array([int(v) for v in header["nr_sv"]]),
        "coef": coef, "sv": sv,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cube")
    ap.add_argument("model")
    ap.add_argument("--classes")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    m = read_libsvm_model(a.model)
    scaling = json.load(open(a.model + ".scaling.json"))
    hwb = np.load(a.cube)
    H, W, B = hwb.shape
    dev = torch.device("cuda")
    x = torch.from_numpy(hwb.reshape(H * W, B).astype(np.float64)).to(dev)
    lo = torch.tensor(scaling["min"], dtype=torch.float64, device=dev)
    hi = torch.tensor(scaling["max"], dtype=torch.float64, device=dev)
    sv = torch.tensor(m["sv"], dtype=torch.float64, device=dev)
    coef = torch.tensor(m["coef"], dtype=torch.float64, device=dev)
    rho = torch.tensor(m["rho"], dtype=torch.float64, device=dev)
    K = len(m["labels"])
    start = np.concatenate([[0], np.cumsum(m["nr_sv"])])
    pairs = [(i, j) for i in range(K) for j in range(i + 1, K)]
    span = (hi - lo).clamp_min(1e-300)

    def predict():
        xs = torch.where(hi == lo, torch.zeros_like(x), -1.0 + 2.0 * (x - lo) / span)
        kv = torch.exp(-m["gamma"] * torch.cdist(xs, sv) ** 2)  # (N, n)
        dec = torch.empty((x.shape[0], len(pairs)), dtype=torch.float64, device=dev)
        for p, (i, j) in enumerate(pairs):
            si, sj = slice(start[i], start[i + 1]), slice(start[j], start[j + 1])
            dec[:, p] = kv[:, si] @ coef[j - 1, si] + kv[:, sj] @ coef[i, sj] - rho[p]
        votes = torch.zeros((x.shape[0], K), dtype=torch.int32, device=dev)
        for p, (i, j) in enumerate(pairs):
            win = torch.where(dec[:, p] > 0, i, j)
            votes.scatter_add_(1, win[:, None], torch.ones_like(win[:, None], dtype=torch.int32))
        return votes.argmax(1)  # first maximum

    ms = times_ms(predict, 10, warmup=3, torch=torch)
    med, best = median_min(ms)
    labels = m["labels"][predict().cpu().numpy()].reshape(H, W)
    out = {"peer": "torch-svm-f64", "shape": [H, W, B], "svs": int(m["sv"].shape[0]), "classes": K,
           "ms_median": round(med, 3), "ms_min": round(best, 3), "runs": 10,
           "timing": "CUDA events, cube resident on the device, scaling + cdist + exp + pair sums + votes"}
    if a.classes:
        ours = np.load(a.classes).reshape(H, W)
        out["labels_differ_from_cubekit"] = int((ours != labels).sum())
    print(json.dumps(out) if a.json else out)


if __name__ == "__main__":
    main()
