#!/usr/bin/env python3
"""Binding overhead of the Python module per call, and a device-resident chain (issue 13).

Usage (GPU machine, scripts/gpu-check python): python3 bench/python_overhead.py OUT.md
Needs the module on PYTHONPATH; CuPy and PyTorch for the device rows (skipped rows say why).

Overhead per call: a tiny input (8×8×3 float32, RCMG), so that the work is negligible and what is
timed is the call itself. Each row is the median over 7 repeats of the mean of N calls:
  - library: rcmg_into called N times in a C++ loop (the library's own per-call cost: option
    checks, view checks, the kernel launch), from cubekit._cubekit._time_rcmg_into;
  - compiled binding: cubekit._cubekit.rcmg(ctx, cube, out, {}, None) — the pybind11 layer
    (argument conversion, array protocol, GIL release) on top of the library;
  - public function: cubekit.rcmg(cube, out=out) — plus the Python layer (kind of array, cached
    context for the current stream, keyword split);
  - overhead = public function − library.
Device rows queue work on the stream and synchronise once at the end of the N calls, so they
measure what the host spends per call while the GPU keeps up. References in the same run: the
CuPy → torch and torch → CuPy hand-offs (torch.as_tensor / cupy.asarray of a device array).

Chain: the Samson scene as a CuPy cube → cubekit.rcmg → cubekit.entropy_edges → cubekit.label,
all on the device; the library's host allocations during the chain (memory_counters) show that no
image-sized host copy is made.
"""
import statistics
import sys
import time

import numpy as np

import cubekit
from cubekit import _cubekit


def per_call(fn, n, sync=None, repeats=7):
    fn()
    if sync:
        sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if sync:
            sync()
        times.append((time.perf_counter() - t0) / n)
    return statistics.median(times) * 1e6


def host_rows(rows):
    a = np.random.default_rng(1).random((8, 8, 3), dtype=np.float32)
    out = np.empty((8, 8), np.float32)
    ctx = _cubekit.Context("cpu", -1, 1, 0)
    lib = statistics.median(_cubekit._time_rcmg_into(ctx, a, out, 20000) for _ in range(7)) * 1e6
    raw = per_call(lambda: _cubekit.rcmg(ctx, a, out, {}, None), 20000)
    pub = per_call(lambda: cubekit.rcmg(a, out=out, threads=1), 20000)
    new = per_call(lambda: cubekit.rcmg(a, threads=1), 20000)
    rows.append(("NumPy, CPU (1 thread)", lib, raw, pub, pub - lib, f"without out=: {new:.2f} µs"))


def device_rows(rows, notes):
    try:
        import cupy as cp
    except ImportError as e:
        notes.append(f"CuPy rows skipped: {e}")
        return
    a = cp.asarray(np.random.default_rng(1).random((8, 8, 3), dtype=np.float32))
    out = cp.empty((8, 8), cp.float32)
    sync = cp.cuda.get_current_stream().synchronize
    ctx, _ = cubekit._runtime.context(a, None, None, 0)
    lib = statistics.median(_cubekit._time_rcmg_into(ctx, a, out, 20000) for _ in range(7)) * 1e6
    raw = per_call(lambda: _cubekit.rcmg(ctx, a, out, {}, None), 20000, sync)
    pub = per_call(lambda: cubekit.rcmg(a, out=out), 20000, sync)
    new = per_call(lambda: cubekit.rcmg(a), 20000, sync)
    rows.append(("CuPy, CUDA", lib, raw, pub, pub - lib, f"without out= (CuPy allocates): {new:.2f} µs"))
    try:
        import torch
    except ImportError as e:
        notes.append(f"torch rows skipped: {e}")
        return
    t = torch.as_tensor(a, device="cuda")
    tout = torch.empty((8, 8), dtype=torch.float32, device="cuda")
    tsync = torch.cuda.synchronize
    tctx, _ = cubekit._runtime.context(t, None, None, 0)
    tlib = statistics.median(_cubekit._time_rcmg_into(tctx, t, tout, 20000) for _ in range(7)) * 1e6
    traw = per_call(lambda: _cubekit.rcmg(tctx, t, tout, {}, None), 20000, tsync)
    tpub = per_call(lambda: cubekit.rcmg(t, out=tout), 20000, tsync)
    rows.append(("torch, CUDA", tlib, traw, tpub, tpub - tlib, ""))
    c2t = per_call(lambda: torch.as_tensor(a, device="cuda"), 20000)
    t2c = per_call(lambda: cp.asarray(t), 20000)
    notes.append(f"Reference hand-offs in this run: CuPy → torch (torch.as_tensor) {c2t:.2f} µs, "
                 f"torch → CuPy (cupy.asarray) {t2c:.2f} µs per call.")


def chain(notes):
    try:
        import cupy as cp
    except ImportError as e:
        notes.append(f"chain skipped: {e}")
        return
    if not all(hasattr(cubekit, f) for f in ("entropy_edges", "label")):
        notes.append("chain skipped: entropy_edges/label not in this build")
        return
    cube = cubekit.read(cubekit.data_path("samson"))[0]
    d = cp.asarray(cube)

    def run():
        g = cubekit.rcmg(d)
        e = cubekit.entropy_edges(g)
        labels = cubekit.label(e.edges)
        return g, e, labels
    run()
    cp.cuda.get_current_stream().synchronize()
    before = _cubekit.memory_counters()
    t0 = time.perf_counter()
    g, e, labels = run()
    cp.cuda.get_current_stream().synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    after = _cubekit.memory_counters()
    host = after["host_bytes"] - before["host_bytes"]
    kinds = {type(x).__module__.split(".")[0] for x in (g, e.edges, labels)}
    notes.append(f"Chain CuPy Samson 95×95×156 i16 → rcmg → entropy_edges → label: {ms:.2f} ms wall "
                 f"(second run), outputs {sorted(kinds)}; library host allocations during the chain: "
                 f"{after['host_allocations'] - before['host_allocations']} totalling {host} bytes "
                 f"(the cube is {cube.nbytes} bytes, the gradient {95 * 95 * 4}), device allocations "
                 f"{after['device_allocations'] - before['device_allocations']}.")


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else None
    rows, notes = [], []
    host_rows(rows)
    if cubekit.cuda_device_count() > 0:
        device_rows(rows, notes)
        chain(notes)
    else:
        notes.append("no CUDA device: device rows and the chain skipped")
    lines = ["| input | library µs/call | compiled binding µs/call | cubekit.rcmg µs/call | overhead µs | note |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r[0]} | {r[1]:.2f} | {r[2]:.2f} | {r[3]:.2f} | {r[4]:.2f} | {r[5]} |" for r in rows]
    text = "\n".join(lines + [""] + [f"- {n}" for n in notes]) + "\n"
    print(text)
    if out_path:
        with open(out_path, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
