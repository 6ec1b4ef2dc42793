"""Timing shared by the peer scripts: CUDA events on the current stream, or the host clock."""
import time

import numpy as np


def times_ms(fn, runs, warmup=3, torch=None):
    """Milliseconds of each of `runs` calls of fn(), after `warmup` untimed calls. With `torch`
    (a torch module with a CUDA device) each call is timed by CUDA events on the current stream,
    else by the host clock."""
    for _ in range(warmup):
        fn()
    times = []
    if torch is not None:
        torch.cuda.synchronize()
        for _ in range(runs):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
    else:
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return times


def median_min(times):
    return float(np.median(times)), float(np.min(times))
