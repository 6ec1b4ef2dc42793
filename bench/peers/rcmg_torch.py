"""RCMG the way a PyTorch user writes it (the peer of bench/gradient_bench.cpp).

Pairwise distances of the neighbourhood vectors (torch.cdist over each pixel's window), reject
the farthest pair (both vectors), take the maximum of what remains. Replicated borders, float32
as a user would keep the cube. Timed with CUDA events: median of 20 runs after 3 warm-ups, cube
already on the device.

Usage: python3 rcmg_torch.py CUBE.npy   (CUBE: (H, W, B) float32, as gradient_bench --write-cube writes)
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F
from peer_timing import times_ms

CROSS = [(-1, 0), (0, -1), (0, 0), (0, 1), (1, 0)]
SQUARE = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)]


def rcmg_torch(cube, offsets):
    """cube: (B, H, W) float32 on the GPU. Returns (H, W)."""
    B, H, W = cube.shape
    padded = F.pad(cube[None], (1, 1, 1, 1), mode="replicate")[0]
    # (H*W, n, B): each pixel's window vectors
    win = torch.stack([padded[:, 1 + dy:1 + dy + H, 1 + dx:1 + dx + W] for dy, dx in offsets], 0)
    win = win.permute(2, 3, 0, 1).reshape(H * W, len(offsets), B)
    d = torch.cdist(win, win)  # (H*W, n, n) Euclidean distances
    n = len(offsets)
    far = d.reshape(H * W, n * n).argmax(1)
    i, j = far // n, far % n
    keep = torch.ones(H * W, n, dtype=torch.bool, device=cube.device)
    keep[torch.arange(H * W, device=cube.device), i] = False
    keep[torch.arange(H * W, device=cube.device), j] = False
    pair_ok = keep[:, :, None] & keep[:, None, :]
    return torch.where(pair_ok, d, torch.zeros_like(d)).amax(dim=(1, 2)).reshape(H, W)


def rcmg_torch_pairs(cube, offsets):
    """The same, with the pair distances written out: one ((v_i - v_j)^2).sum over bands per pair."""
    B, H, W = cube.shape
    padded = F.pad(cube[None], (1, 1, 1, 1), mode="replicate")[0]
    v = [padded[:, 1 + dy:1 + dy + H, 1 + dx:1 + dx + W] for dy, dx in offsets]
    n = len(offsets)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    d = torch.stack([((v[i] - v[j]) ** 2).sum(0) for i, j in pairs])  # (pairs, H, W)
    far = d.argmax(0)  # first maximal pair, lexicographic order as in cubekit
    pi = torch.tensor([p[0] for p in pairs], device=cube.device)
    pj = torch.tensor([p[1] for p in pairs], device=cube.device)
    ri, rj = pi[far], pj[far]  # the rejected vertices, (H, W)
    ok = (pi[:, None, None] != ri) & (pi[:, None, None] != rj) & (pj[:, None, None] != ri) & (pj[:, None, None] != rj)
    return torch.where(ok, d, torch.zeros_like(d)).amax(0).sqrt()


def time_ms(fn, runs=20, warmup=3):
    return float(np.median(times_ms(fn, runs, warmup, torch)))


def main():
    hwb = np.load(sys.argv[1]).astype(np.float32)
    cube = torch.from_numpy(np.ascontiguousarray(hwb.transpose(2, 0, 1))).cuda()
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}; cube {tuple(hwb.shape)} float32")
    for name, offsets in (("4-conn", CROSS), ("8-conn", SQUARE)):
        ms = time_ms(lambda: rcmg_torch(cube, offsets))
        print(f"torch rcmg {name} r=1 f32 (cdist): median {ms:.3f} ms")
        ms = time_ms(lambda: rcmg_torch_pairs(cube, offsets))
        print(f"torch rcmg {name} r=1 f32 (pair differences): median {ms:.3f} ms")
    # A sanity check the peer computes the same function as cubekit (f32 vs f64 sums: close).
    g = rcmg_torch(cube, SQUARE).cpu().numpy()
    g2 = rcmg_torch_pairs(cube, SQUARE).cpu().numpy()
    print(f"torch cdist vs pair-difference versions: max |diff| = {abs(g - g2).max():.3g}")
    np.save("/tmp/rcmg_torch_8.npy", g)
    print(f"torch 8-conn gradient: max {g.max():.4f} mean {g.mean():.4f}")


if __name__ == "__main__":
    main()
