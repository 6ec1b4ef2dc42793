"""The entropy edge detector's stages the way Python users do them today (peers of the cubekit edges benchmark).

Peers (B bands of an (H, W, B) u8 cube; per-band maps/bands are made contiguous outside the timing):
  torch-bincount-loop:   the B band histograms, torch.bincount(band, minlength=256) in a Python loop over bands,
                         then torch.stack to (B, 256). The cube sits on the device as (B, H, W), converted to int64
                         once beforehand (the figure: what a user who converts once pays); extra fields time the
                         same loop including the int64 conversion, and on the u8 cube directly.
                         Reference: 12.8 ms on an H100 for Pavia Centre (715x1096x102).
  torch-bincount-offset: the careful one-call version: (u8 cube + band*256 as int64) promotes to an int64 index in
                         one elementwise kernel (timed), then one bincount of B*256 bins, viewed as (B, 256).
  cv2-canny-loop:        cv2.Canny(band, 50, 150) (fixed thresholds, aperture 3, L1 gradient) per band on the CPU,
                         sequential Python loop, cv2.setNumThreads(--threads). Reference: 184 ms, 16 cores.
  cv2-canny-pool:        the same calls mapped over bands by a ThreadPoolExecutor(--threads) (OpenCV releases the
                         GIL); OpenCV's own threads set to 1 in the pool to avoid oversubscription, the figure with
                         them left at --threads comes as an extra field.
  cv2-ccl:               cv2.connectedComponentsWithStats(map, connectivity=8) per band (CCL_DEFAULT, int32 labels),
                         all bands and per band. Reference: 2.65 ms per 1096x715 band.
  skimage-remove-small-objects: remove_small_objects(map.astype(bool), min_size=5, connectivity=2) per band, the
                         astype included; skimage >= 0.26 spells it max_size=4 (same objects kept, no warning).
                         Reference: 17 ms per band.
The CCL peers read EDGES.npy (cubekit's (H, W, B) 0/1 per-band edge maps); without it the maps are v > the band's
median ("input": "median-threshold": large blobs, not edge-like, so CCL times differ from real edge maps).

Timing: GPU peers with CUDA events around the call (3 warm-ups, torch.cuda.synchronize before; median and min of
--repeat runs, default 20), cube already on the device, no transfers. CPU peers with time.perf_counter (1 warm-up,
median and min of --repeat runs, default 5). Without CUDA the torch peers run on the CPU with perf_counter.

Usage: python3 edges_peers.py CUBE.npy [--edges EDGES.npy] [--repeat N] [--threads 16] [--json]
Prints one JSON line per peer on stdout:
  {"peer", "ms_median", "ms_min", "repeat", "device", "note", ...extra}  or  {"peer", "skipped": reason}
Without --json a readable line per peer goes to stdout too; with it, readable lines go to stderr.
A peer whose library (torch, cv2, skimage) is missing, or which fails, is skipped; exit status 0, or 2 on bad input.
"""
import argparse
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from peer_timing import median_min, times_ms

CANNY_LO, CANNY_HI, MIN_SIZE = 50, 150, 5


def bad_input(msg):
    print(f"edges_peers: {msg}", file=sys.stderr)
    sys.exit(2)


def load_u8(path, what):
    try:
        a = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        bad_input(f"{path}: cannot read {what} .npy: {e}")
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3 or a.dtype not in (np.uint8, np.bool_) or 0 in a.shape:
        bad_input(f"{path}: {what} must be (H, W, B) uint8, got shape {a.shape} {a.dtype}")
    return a.astype(np.uint8, copy=False)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "cpu")
    except OSError:
        model = "cpu"
    return f"{model} ({os.cpu_count()} CPUs)"


def time_cpu(fn, runs, warmup=1):
    return median_min(times_ms(fn, runs, warmup))


def time_torch(torch, fn, runs, warmup=3):
    if not torch.cuda.is_available():
        return time_cpu(fn, runs, warmup)
    return median_min(times_ms(fn, runs, warmup, torch))


def r4(x):
    return round(x, 4)


# ---- GPU peers: band histograms ---------------------------------------------------------------
def torch_peers(cube_hwb, repeat):
    import torch
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev_name = torch.cuda.get_device_name() if dev.type == "cuda" else f"cpu (no CUDA): {cpu_name()}"
    runs = repeat or 20
    u8 = torch.from_numpy(cube_hwb).to(dev).permute(2, 0, 1).contiguous()  # (B, H, W), not timed
    B = u8.shape[0]
    c64 = u8.long()  # a user converts once

    def loop(c):
        return torch.stack([torch.bincount(c[b].view(-1), minlength=256) for b in range(B)])

    offs = torch.arange(B, device=dev, dtype=torch.int64).mul_(256).view(B, 1, 1)

    def offset():
        return torch.bincount((u8 + offs).view(-1), minlength=B * 256).view(B, 256)

    med, mn = time_torch(torch, lambda: loop(c64), runs)
    med_c, mn_c = time_torch(torch, lambda: loop(u8.long()), runs)
    try:
        med_u8 = r4(time_torch(torch, lambda: loop(u8), runs)[0])
    except RuntimeError as e:  # bincount on u8 not supported by this build
        med_u8 = f"unsupported: {e}"[:120]
    h_loop = loop(c64)
    ok_sum = bool((h_loop.sum(1) == u8.shape[1] * u8.shape[2]).all().item())
    common = {"repeat": runs, "device": dev_name, "torch": torch.__version__, "bands": B}
    yield {"peer": "torch-bincount-loop", "ms_median": r4(med), "ms_min": r4(mn), **common,
           "note": "cube on device as (B,H,W) int64, converted once (not timed); loop of B bincounts + stack",
           "ms_median_incl_int64_conversion": r4(med_c), "ms_min_incl_int64_conversion": r4(mn_c),
           "ms_median_u8_input": med_u8, "hist_sums_ok": ok_sum}
    med, mn = time_torch(torch, offset, runs)
    same = bool(torch.equal(offset(), h_loop))
    yield {"peer": "torch-bincount-offset", "ms_median": r4(med), "ms_min": r4(mn), **common,
           "note": "u8 (B,H,W) cube + band*256 int64 offsets (promotion to int64 timed), one bincount of B*256 bins",
           "bins": B * 256, "matches_loop": same}


# ---- CPU peers: Canny, connected components, small-object removal ----------------------------
def canny_peers(bands, threads, repeat):
    import cv2
    runs = repeat or 5
    cv2.setNumThreads(threads)
    canny = lambda band: cv2.Canny(band, CANNY_LO, CANNY_HI, apertureSize=3, L2gradient=False)
    out = [canny(b) for b in bands]
    frac = float(np.mean([np.count_nonzero(e) / e.size for e in out]))
    common = {"repeat": runs, "device": cpu_name(), "cv2": cv2.__version__, "bands": len(bands),
              "thresholds": [CANNY_LO, CANNY_HI], "aperture": 3, "L2gradient": False, "edge_fraction": round(frac, 5)}
    med, mn = time_cpu(lambda: [canny(b) for b in bands], runs)
    yield {"peer": "cv2-canny-loop", "ms_median": r4(med), "ms_min": r4(mn), **common,
           "threads": cv2.getNumThreads(), "note": f"cv2.Canny(band, {CANNY_LO}, {CANNY_HI}) per band, sequential loop"}
    with ThreadPoolExecutor(max_workers=threads) as pool:
        run = lambda: list(pool.map(canny, bands))
        med_n, _ = time_cpu(run, runs)  # OpenCV's threads left at --threads
        cv2.setNumThreads(1)
        med, mn = time_cpu(run, runs)
        cv2.setNumThreads(threads)
    yield {"peer": "cv2-canny-pool", "ms_median": r4(med), "ms_min": r4(mn), **common, "workers": threads,
           "cv2_threads_in_pool": 1, "ms_median_cv2_threads_default": r4(med_n),
           "note": f"ThreadPoolExecutor({threads}).map(cv2.Canny) over bands, cv2.setNumThreads(1) inside"}


def ccl_peer(maps, threads, repeat, source):
    import cv2
    runs = repeat or 5
    cv2.setNumThreads(threads)
    ccl = lambda m: cv2.connectedComponentsWithStats(m, connectivity=8, ltype=cv2.CV_32S)
    ncomp = float(np.mean([ccl(m)[0] - 1 for m in maps]))
    med, mn = time_cpu(lambda: [ccl(m) for m in maps], runs)
    B = len(maps)
    yield {"peer": "cv2-ccl", "ms_median": r4(med), "ms_min": r4(mn), "repeat": runs, "device": cpu_name(),
           "note": "cv2.connectedComponentsWithStats(map, connectivity=8) per band, sequential loop, all bands",
           "ms_per_band_median": r4(med / B), "ms_per_band_min": r4(mn / B), "bands": B, "input": source,
           "threads": cv2.getNumThreads(), "components_per_band_mean": round(ncomp, 1), "cv2": cv2.__version__}


def skimage_peer(maps, repeat, source):
    import inspect
    import skimage
    from skimage.morphology import remove_small_objects
    runs = repeat or 5
    if "max_size" in inspect.signature(remove_small_objects).parameters:  # skimage >= 0.26
        kw, arg = {"max_size": MIN_SIZE - 1}, f"max_size={MIN_SIZE - 1}"
    else:
        kw, arg = {"min_size": MIN_SIZE}, f"min_size={MIN_SIZE}"
    rso = lambda m: remove_small_objects(m.astype(bool), connectivity=2, **kw)
    kept = sum(int(np.count_nonzero(rso(m))) for m in maps)
    total = sum(int(np.count_nonzero(m)) for m in maps)
    med, mn = time_cpu(lambda: [rso(m) for m in maps], runs)
    B = len(maps)
    yield {"peer": "skimage-remove-small-objects", "ms_median": r4(med), "ms_min": r4(mn), "repeat": runs,
           "device": cpu_name(), "note": f"remove_small_objects(map.astype(bool), {arg}, connectivity=2) per band, "
           "sequential loop, all bands", "ms_per_band_median": r4(med / B), "ms_per_band_min": r4(mn / B),
           "bands": B, "input": source, "skimage": skimage.__version__, "size_arg": arg,
           "kept_fraction": round(kept / total, 5) if total else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cube", help=".npy, (H, W, B) uint8")
    ap.add_argument("--edges", help=".npy, (H, W, B) uint8 0/1 per-band edge maps (cubekit's output)")
    ap.add_argument("--repeat", type=int, help="timed runs per peer (default 20 GPU, 5 CPU)")
    ap.add_argument("--threads", type=int, default=16, help="cv2.setNumThreads and pool workers (default 16)")
    ap.add_argument("--json", action="store_true", help="stdout holds only the JSON lines")
    args = ap.parse_args()
    if args.repeat is not None and args.repeat < 1 or args.threads < 1:
        bad_input("--repeat and --threads must be >= 1")

    cube = load_u8(args.cube, "cube")
    H, W, B = cube.shape
    if args.edges:
        e = load_u8(args.edges, "edges")
        if e.shape != cube.shape:
            bad_input(f"{args.edges}: edges shape {e.shape} differs from the cube's {cube.shape}")
        maps, source = [np.ascontiguousarray(e[:, :, b] != 0, dtype=np.uint8) for b in range(B)], "edges-file"
    else:
        med = np.median(cube.reshape(-1, B), axis=0)
        maps, source = [np.ascontiguousarray(cube[:, :, b] > med[b], dtype=np.uint8) for b in range(B)], "median-threshold"
    bands = [np.ascontiguousarray(cube[:, :, b]) for b in range(B)]
    info = sys.stderr if args.json else sys.stdout
    print(f"edges peers: cube {H}x{W}x{B} uint8 ({args.cube}), CCL input {source}, threads {args.threads}", file=info)

    peers = [(("torch-bincount-loop", "torch-bincount-offset"), lambda: torch_peers(cube, args.repeat)),
             (("cv2-canny-loop", "cv2-canny-pool"), lambda: canny_peers(bands, args.threads, args.repeat)),
             (("cv2-ccl",), lambda: ccl_peer(maps, args.threads, args.repeat, source)),
             (("skimage-remove-small-objects",), lambda: skimage_peer(maps, args.repeat, source))]
    for names, make in peers:
        done = set()
        try:
            for rec in make():
                done.add(rec["peer"])
                extra = f", {rec['ms_per_band_median']:.3f} ms per band" if "ms_per_band_median" in rec else ""
                print(f"{rec['peer']}: median {rec['ms_median']:.3f} ms, min {rec['ms_min']:.3f} ms{extra} "
                      f"({rec['repeat']} runs, {rec['device']})", file=info)
                print(json.dumps(rec), flush=True)
        except ImportError as ex:
            reason = f"{ex.name or 'module'} not installed"
        except Exception as ex:  # a failing peer must not stop the others
            reason = f"failed: {type(ex).__name__}: {ex}"[:300]
        else:
            continue
        for name in names:
            if name not in done:
                print(f"{name}: skipped ({reason})", file=info)
                print(json.dumps({"peer": name, "skipped": reason}), flush=True)


if __name__ == "__main__":
    main()
