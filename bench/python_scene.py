#!/usr/bin/env python3
"""One scene from Python (issue 14, item 6): NumPy in, NumPy out, and CuPy in, CuPy out.

Usage (GPU machine, scripts/gpu-check python): python3 bench/python_scene.py [OUT.md]

Inputs as bench/cli_wall.py builds them, from the shipped Samson scene: cube80 = 1096×715×102 u8
(entropy_edges, default options) and pavia86 = 610×340×103 f32 (rcmg, default options), (H, W, B) C order.
Rows: the first call of the process on that backend (CUDA context made before, not timed), then the
median of 7 calls. Beside them: what the host ↔ device copies alone cost at the pinned rate (55 GB/s),
and a pageable torch copy of the same array (torch.from_numpy(a).cuda()), the copy a PyTorch user pays.
Targets: edges ≤ 10 ms, rcmg ≤ 5 ms from NumPy arrays in memory.
"""
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import cubekit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_wall import mirror_tile  # noqa: E402


def timed(fn, sync=None, repeat=7):
    t0 = time.perf_counter()
    fn()
    if sync:
        sync()
    first = (time.perf_counter() - t0) * 1e3
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        runs.append((time.perf_counter() - t0) * 1e3)
    return first, statistics.median(runs), min(runs)


def inputs():
    s = cubekit.read(cubekit.data_path("samson"))[0].astype(np.float32)  # (95, 95, 156)
    lo, hi = s.min(axis=(0, 1)), s.max(axis=(0, 1))
    s8 = np.round((s - lo) / np.where(hi > lo, hi - lo, 1) * 255).astype(np.uint8)
    return mirror_tile(s8[:, :, :102], 715, 1096), mirror_tile(s[:, :, :103], 340, 610)


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else None
    cube80, pavia86 = inputs()
    work = [("entropy_edges", cube80, lambda a, **k: cubekit.entropy_edges(a, **k), 10.0, 1096 * 715),
            ("rcmg", pavia86, lambda a, **k: cubekit.rcmg(a, **k), 5.0, 610 * 340 * 4)]
    lines = ["| call | input | in → out | first ms | median ms | min ms | copies at 55 GB/s ms | target ms |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    notes = []
    for name, a, fn, target, out_bytes in work:
        floor = (a.nbytes + out_bytes) / 55e6
        label = f"{a.shape} {a.dtype} ({a.nbytes / 1e6:.1f} MB)"
        f, med, mn = timed(lambda: fn(a, backend="cpu"), repeat=3)
        lines.append(f"| {name} | {label} | NumPy → NumPy, cpu | {f:.1f} | {med:.1f} | {mn:.1f} | | |")
        if cubekit.cuda_device_count() == 0:
            continue
        f, med, mn = timed(lambda: fn(a, backend="cuda"))
        lines.append(f"| {name} | {label} | NumPy → NumPy, cuda | {f:.1f} | {med:.1f} | {mn:.1f} | {floor:.2f} | "
                     f"{target:g} ({'met' if med <= target else 'missed'}) |")
        t = cubekit.last_timings()
        notes.append(f"{name} NumPy on cuda, last call: " + ", ".join(
            f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in t.items()) +
            (f" (upload at {t['upload_bytes'] / t['upload_ms'] / 1e6:.1f} GB/s)" if t.get("upload_ms") else ""))
        try:
            import cupy as cp
            d = cp.asarray(a)
            sync = cp.cuda.get_current_stream().synchronize
            f, med, mn = timed(lambda: fn(d), sync=sync)
            lines.append(f"| {name} | {label} | CuPy → CuPy | {f:.2f} | {med:.2f} | {mn:.2f} | | |")
        except ImportError as e:
            notes.append(f"CuPy rows skipped: {e}")
        try:
            import torch
            f, med, mn = timed(lambda: torch.from_numpy(a).cuda(), sync=torch.cuda.synchronize)
            notes.append(f"torch.from_numpy(a).cuda() of the {name} input: median {med:.2f} ms "
                         f"({a.nbytes / med / 1e6:.1f} GB/s), min {mn:.2f} ms")
        except ImportError as e:
            notes.append(f"torch reference skipped: {e}")
    text = "\n".join(lines + [""] + [f"- {n}" for n in notes]) + "\n"
    print(text)
    if out_path:
        Path(out_path).write_text(text)


if __name__ == "__main__":
    main()
