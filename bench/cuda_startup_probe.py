"""What a CUDA process pays before and after its work (issue 14): the driver calls one by one, through
ctypes on libcuda (no toolkit, no build), and the exit with a live context, measured from a parent.

  python3 cuda_startup_probe.py            # parent: runs the child variants, prints a table
  python3 cuda_startup_probe.py child MODE # MODE: plain | release | _exit | reset | reset_while_writing | none

Child: times dlopen(libcuda), cuInit, cuDeviceGet, cuDevicePrimaryCtxRetain, cuCtxSetCurrent, cuStreamCreate,
cuMemAllocAsync of 1 MiB + free, then ends by MODE: plain (return; the driver's own teardown at exit),
release (cuDevicePrimaryCtxRelease timed, then return), reset (cudaDeviceReset and the driver
release timed), reset_while_writing (the same in a thread during a 100 ms sleep), _exit (os._exit: no atexit handlers), none (no CUDA
at all: the Python baseline). Parent: the child's wall time from fork to reaped, minus what the child
reports, is its exit cost.
"""
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time


def child(mode):
    t = {}
    t0 = time.perf_counter()
    if mode == "none":
        print(json.dumps({"mode": mode, "steps_ms": {}, "in_child_ms": 0.0}), flush=True)
        return
    cu = ctypes.CDLL("libcuda.so.1")
    t["dlopen"] = time.perf_counter() - t0

    def timed(name, f, *args):
        s = time.perf_counter()
        r = f(*args)
        t[name] = time.perf_counter() - s
        if r != 0:
            raise SystemExit(f"{name}: CUresult {r}")

    timed("cuInit", cu.cuInit, 0)
    dev = ctypes.c_int()
    timed("cuDeviceGet", cu.cuDeviceGet, ctypes.byref(dev), 0)
    ctx = ctypes.c_void_p()
    timed("cuDevicePrimaryCtxRetain", cu.cuDevicePrimaryCtxRetain, ctypes.byref(ctx), dev)
    timed("cuCtxSetCurrent", cu.cuCtxSetCurrent, ctx)
    stream = ctypes.c_void_p()
    timed("cuStreamCreate", cu.cuStreamCreate, ctypes.byref(stream), 1)
    ptr = ctypes.c_uint64()
    timed("cuMemAllocAsync", cu.cuMemAllocAsync, ctypes.byref(ptr), ctypes.c_size_t(1 << 20), stream)
    timed("cuMemFreeAsync+sync", lambda: cu.cuMemFreeAsync(ptr, stream) or cu.cuStreamSynchronize(stream))
    timed("cuStreamDestroy", cu.cuStreamDestroy_v2, stream)
    # The runtime's calls cubekit makes after the driver is up (libcudart from the toolkit, if found).
    for lib in ("libcudart.so", "/usr/local/cuda/lib64/libcudart.so"):
        try:
            rt = ctypes.CDLL(lib)
            break
        except OSError:
            rt = None
    if rt is not None:
        timed("cudaSetDevice", rt.cudaSetDevice, 0)
        props = ctypes.create_string_buffer(8192)
        get_props = getattr(rt, "cudaGetDeviceProperties_v2", None) if hasattr(rt, "cudaGetDeviceProperties_v2") else rt.cudaGetDeviceProperties
        timed("cudaGetDeviceProperties", get_props, props, 0)
        value = ctypes.c_int()
        timed("cudaDeviceGetAttribute", rt.cudaDeviceGetAttribute, ctypes.byref(value), 16, 0)
    if mode == "release":
        timed("cuDevicePrimaryCtxRelease", cu.cuDevicePrimaryCtxRelease_v2, dev)
    if mode == "reset":  # the runtime's reset, then the driver's last reference
        timed("cudaDeviceReset", rt.cudaDeviceReset)
        timed("cuDevicePrimaryCtxRelease", cu.cuDevicePrimaryCtxRelease_v2, dev)
    if mode == "reset_while_writing":  # the same in a thread while the main thread "writes" for 100 ms
        import threading
        th = threading.Thread(target=lambda: (rt.cudaDeviceReset(), cu.cuDevicePrimaryCtxRelease_v2(dev)))
        s = time.perf_counter()
        th.start()
        time.sleep(0.1)
        w = time.perf_counter()
        th.join()
        t["join after 100 ms of writing"] = time.perf_counter() - w
        t["write+reset"] = time.perf_counter() - s
    total = (time.perf_counter() - t0) * 1e3
    print(json.dumps({"mode": mode, "steps_ms": {k: v * 1e3 for k, v in t.items()}, "in_child_ms": total}), flush=True)
    if mode == "_exit":
        sys.stdout.flush()
        os._exit(0)


def parent(repeat=5):
    rows = {}
    for mode in ("none", "plain", "release", "_exit", "reset", "reset_while_writing"):
        for _ in range(repeat):
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, __file__, "child", mode], capture_output=True, text=True)
            wall = (time.perf_counter() - t0) * 1e3
            if p.returncode:
                print(f"{mode}: exit {p.returncode}: {p.stderr[-300:]}")
                break
            r = json.loads(p.stdout)
            rows.setdefault(mode, []).append((wall, r))
    base = statistics.median(w for w, _ in rows.get("none", [(0, None)]))
    print(f"python start+exit without CUDA: {base:.1f} ms (median of {repeat})")
    for mode, runs in rows.items():
        if mode == "none":
            continue
        walls = [w for w, _ in runs]
        inside = [r["in_child_ms"] for _, r in runs]
        steps = {k: statistics.median(r["steps_ms"][k] for _, r in runs) for k in runs[0][1]["steps_ms"]}
        print(f"{mode:8s} wall {statistics.median(walls):7.1f} ms, CUDA calls {statistics.median(inside):7.1f} ms, "
              f"exit beyond python's {statistics.median(walls) - statistics.median(inside) - base:7.1f} ms; " +
              ", ".join(f"{k} {v:.1f}" for k, v in steps.items()))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "child":
        child(sys.argv[2])
    else:
        parent()
