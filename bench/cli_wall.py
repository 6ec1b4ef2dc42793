"""Process wall time of every cubekit subcommand on realistic inputs, CPU and CUDA backends (issue 14).

Builds the inputs from the packed real scenes (no benchmark binary needed):
  cube80.npy   1096x715x102 u8 (H, W, B): Samson's first 102 bands, min-max scaled to 0..255 per band,
               mirror-tiled (Pavia Centre's size, 80 MB) -- the edges input
  pavia86.npy  610x340x103 f32 (H, W, B): Samson mirror-tiled to Pavia University's size (86 MB) -- rcmg,
               cluster, pca, convert
  photo4k.png  3840x2160 RGB: astronaut bicubically upscaled (bench/peers/make_kmeans_image.py) -- quantize,
               edges-baseline, info
  gray2k.png   2048x2048 grey: camera.png bicubically upscaled -- zernike
  small/       the same families on tiny and medium inputs, for the auto rule's crossover

Each command runs once untimed (page cache, driver), then REPEAT times, with --backend cpu, cuda and auto (the
default: "auto → cpu" says what it ran on); the table gives the median and the minimum wall time (fork to exit,
measured here) and the median of the --json timings_ms steps.

Usage: python3 cli_wall.py --cli CUBEKIT --data DATA_DIR --work DIR [--out FILE.md] [--json FILE.json]
                           [--repeat 5] [--only edges,rcmg] [--lib DIR]
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def mirror_tile(a, h, w):
    """(H0, W0, B) -> (h, w, B), mirrored at the seams."""
    reps_y = -(-h // a.shape[0]) + 1
    reps_x = -(-w // a.shape[1]) + 1
    rows = [a if i % 2 == 0 else a[::-1] for i in range(reps_y)]
    col = np.concatenate(rows, axis=0)
    cols = [col if j % 2 == 0 else col[:, ::-1] for j in range(reps_x)]
    return np.ascontiguousarray(np.concatenate(cols, axis=1)[:h, :w])


def make_inputs(cli, data, work):
    import cv2
    work.mkdir(parents=True, exist_ok=True)
    samson = work / "samson.npy"
    subprocess.run([cli, "convert", str(data / "envi/samson/samson_1.img"), str(samson), "--quiet"], check=True, env=ENV)
    s = np.load(samson)  # (H, W, B) f32
    s = s[:, :, :103].astype(np.float32)
    lo, hi = s.min(axis=(0, 1)), s.max(axis=(0, 1))
    s8 = np.round((s - lo) / np.where(hi > lo, hi - lo, 1) * 255).astype(np.uint8)
    inputs = {
        "cube80": (work / "cube80.npy", mirror_tile(s8[:, :, :102], 715, 1096)),
        "pavia86": (work / "pavia86.npy", mirror_tile(s, 340, 610)),
        "cube_small": (work / "cube_small.npy", mirror_tile(s8[:, :, :16], 64, 64)),
        "cube_medium": (work / "cube_medium.npy", mirror_tile(s8[:, :, :32], 256, 256)),
        "pavia_small": (work / "pavia_small.npy", mirror_tile(s[:, :, :16], 64, 64)),
        "pavia_medium": (work / "pavia_medium.npy", mirror_tile(s[:, :, :32], 256, 256)),
    }
    for path, arr in inputs.values():
        np.save(path, arr)
    astro = cv2.imread(str(data / "rgb/astronaut.png"), cv2.IMREAD_COLOR)
    cv2.imwrite(str(work / "photo4k.png"), cv2.resize(astro, (3840, 2160), interpolation=cv2.INTER_CUBIC))
    cv2.imwrite(str(work / "photo_small.png"), cv2.resize(astro, (128, 128), interpolation=cv2.INTER_AREA))
    cam = cv2.imread(str(data / "gray/camera.png"), cv2.IMREAD_GRAYSCALE)
    cv2.imwrite(str(work / "gray2k.png"), cv2.resize(cam, (2048, 2048), interpolation=cv2.INTER_CUBIC))
    cv2.imwrite(str(work / "gray_small.png"), cv2.resize(cam, (128, 128), interpolation=cv2.INTER_AREA))
    return {k: v[0] for k, v in inputs.items()}


def commands(w):
    """(name, input label, argv after `cubekit`) for every subcommand; w = the work folder."""
    o = w / "out"
    return [
        ("info", "photo4k.png", ["info", w / "photo4k.png"]),
        ("info", "cube80.npy", ["info", w / "cube80.npy"]),
        ("edges", "cube80.npy", ["edges", w / "cube80.npy", o / "edges.png"]),
        ("rcmg", "pavia86.npy", ["rcmg", w / "pavia86.npy", o / "rcmg.npy"]),
        ("quantize", "photo4k.png", ["quantize", w / "photo4k.png", o / "q.png", "-k", "16"]),
        ("cluster", "pavia86.npy", ["cluster", w / "pavia86.npy", o / "labels.npy", "-k", "9"]),
        ("pca", "pavia86.npy", ["pca", w / "pavia86.npy", o / "pca.npy"]),
        ("edges-baseline", "photo4k.png", ["edges-baseline", w / "photo4k.png", o / "canny.png", "--bands", "1"]),
        ("edges-score", "edges.png", ["edges-score", o / "edges.png", o / "edges.png"]),
        ("zernike", "gray2k.png", ["zernike", w / "gray2k.png", "-o", o / "z.json"]),
        ("zernike-reconstruct", "z.json", ["zernike-reconstruct", o / "z.json", o / "zr.png"]),
        ("convert", "pavia86.npy", ["convert", w / "pavia86.npy", o / "pavia.hdr"]),
        # the auto rule's crossover: small and medium inputs
        ("edges", "cube_small.npy", ["edges", w / "cube_small.npy", o / "es.png"]),
        ("edges", "cube_medium.npy", ["edges", w / "cube_medium.npy", o / "em.png"]),
        ("rcmg", "pavia_small.npy", ["rcmg", w / "pavia_small.npy", o / "rs.npy"]),
        ("rcmg", "pavia_medium.npy", ["rcmg", w / "pavia_medium.npy", o / "rm.npy"]),
        ("quantize", "photo_small.png", ["quantize", w / "photo_small.png", o / "qs.png", "-k", "16"]),
        ("cluster", "pavia_medium.npy", ["cluster", w / "pavia_medium.npy", o / "ls.npy", "-k", "9"]),
        ("pca", "pavia_medium.npy", ["pca", w / "pavia_medium.npy", o / "ps.npy"]),
        ("zernike", "gray_small.png", ["zernike", w / "gray_small.png", "-o", o / "zs.json"]),
    ]


CPU_ONLY = {"edges-score"}  # no --backend, --quiet: scoring runs on the CPU


ENV = dict(os.environ)


def run_one(cli, argv, backend):
    cmd = [cli] + [str(a) for a in argv] + ["--json"]
    if argv[0] not in CPU_ONLY:
        cmd += ["--quiet", "--backend", backend]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    wall = (time.perf_counter() - t0) * 1e3
    if p.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
    j = json.loads(p.stdout)
    return wall, j.get("timings_ms", {}), j.get("backend", "")


def module_loading(cli, w, repeat):
    """What loading cubekit's kernels costs: a tiny edges run on CUDA with the driver's lazy loading (the
    default: each kernel's module on its first launch) and with CUDA_MODULE_LOADING=EAGER (every module of
    the library at context creation)."""
    lines = ["| CUDA_MODULE_LOADING | edges 64×64×16, cuda: wall ms | context ms | edges step ms |", "|---|---:|---:|---:|"]
    for mode in ("LAZY", "EAGER"):
        ENV["CUDA_MODULE_LOADING"] = mode
        try:
            runs = [run_one(cli, ["edges", w / "cube_small.npy", w / "out" / "ml.png"], "cuda") for _ in range(repeat)]
        except RuntimeError as e:
            lines.append(f"| {mode} | failed: {e} | | |")
            continue
        finally:
            ENV.pop("CUDA_MODULE_LOADING", None)
        med = lambda k: statistics.median(r[1].get(k, 0.0) for r in runs)
        lines.append(f"| {mode} | {statistics.median(r[0] for r in runs):.1f} | {med('context'):.1f} | {med('edges'):.1f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--out")
    ap.add_argument("--json")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default="")
    ap.add_argument("--lib", help="LD_LIBRARY_PATH for cubekit alone (the packed libraries), not for this Python")
    a = ap.parse_args()
    if a.lib:
        ENV["LD_LIBRARY_PATH"] = a.lib
    make_inputs(a.cli, a.data, a.work)
    (a.work / "out").mkdir(exist_ok=True)
    only = set(filter(None, a.only.split(",")))
    rows, records = [], []
    for name, label, argv in commands(a.work):
        if only and name not in only:
            continue
        for backend in ("cpu",) if name in CPU_ONLY else ("cpu", "cuda", "auto"):
            try:
                run_one(a.cli, argv, backend)  # warm the page cache and the driver
                runs = [run_one(a.cli, argv, backend) for _ in range(a.repeat)]
            except RuntimeError as e:
                print(f"cli_wall: {e}", file=sys.stderr)
                rows.append(f"| {name} | {label} | {backend} | failed | | |")
                continue
            walls = [r[0] for r in runs]
            keys = sorted({k for r in runs for k in r[1]})
            steps = {k: statistics.median(r[1].get(k, 0.0) for r in runs) for k in keys}
            med = statistics.median(walls)
            shown = ", ".join(f"{k} {v:.1f}" for k, v in steps.items() if k != "total")
            ran = runs[-1][2]
            shown_backend = f"auto → {ran}" if backend == "auto" else backend
            rows.append(f"| {name} | {label} | {shown_backend} | {med:.1f} | {min(walls):.1f} | {shown} |")
            records.append({"command": name, "input": label, "backend": backend, "ran_on": ran, "wall_ms_median": med,
                            "wall_ms_min": min(walls), "timings_ms_median": steps, "argv": [str(x) for x in argv]})
            print(rows[-1], flush=True)
    text = ["| command | input | backend | wall ms (median) | min | timings_ms (median) |",
            "|---|---|---|---:|---:|---|"] + rows
    if not only or "edges" in only:
        text += ["", module_loading(a.cli, a.work, a.repeat)]
    if a.out:
        Path(a.out).write_text("\n".join(text) + "\n")
    if a.json:
        Path(a.json).write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
