"""Builds the watershed benchmark reliefs (issue 16, item 5) as .npy files in one folder.

Every relief is 2440 wide and 2040 high, i.e. an array of shape (2040, 2440) (H, W), C order, made
from seeded noise (numpy Generator PCG64(--seed), default 0), so the same command gives the same
bytes on every machine. --scale S multiplies both sides (and the radii of the smooth scene's disks)
for quick tests, keeping the smoothing lengths in pixels so that the per-pixel character of each relief
(basin sizes, plateau widths) stays the same; the benchmark uses --scale 1.

Each relief is written twice:
  NAME_f32.npy  the unquantised gradient magnitude, float32 (what cubekit's f32 runs read);
  NAME.npy      its u8 quantisation h' = round((h - min) / (max - min) * 255) computed in f64 from the
                stored f32 values, rounding half away from zero (the spec's `levels` rule, B2), so
                `cubekit watershed NAME_f32.npy --levels 256` segments exactly the relief of NAME.npy.
                NPP, scikit-image and cubekit's u8 run all read NAME.npy.

The reliefs:
  noise   A noisy gradient: i.i.d. standard normal noise, smoothed by a Gaussian of sigma 1 px (scipy
          gaussian_filter, mode reflect) so that it looks like a sensor-noise image rather than white
          noise, then its Sobel gradient magnitude hypot(sobel_x, sobel_y) (scipy.ndimage.sobel,
          mode reflect). Nearly every pixel sits in a tiny basin: very many small regional minima,
          short descent paths and small plateaus, like the gradient of a noisy real image. This is the
          "2440x2040 noise gradient" of the research measurements (NPP: 1.86 ms, 8-connectivity).
  smooth  A smooth scene's gradient: standard normal noise smoothed by a Gaussian of sigma 24 px
          and normalised to unit standard deviation, plus 6 flat disks (radius
          (60..250 px) x --scale, heights +-1.5..3) and one vertical step of height 2 at x = 0.7 W, the whole
          scene blurred by sigma 1 px (a camera's point spread), then the Sobel gradient magnitude.
          The disk and step edges give strong ridges; the scene between them varies slowly, so after
          the u8 quantisation (whose scale is set by the strong edges) most of the image falls into
          large plateaus of equal value (0, 1, 2, ...) with few regional minima: the case where a
          cellular-automaton watershed needs many rounds (plateau distances, long descent paths).
          The "smooth gradient" of the research measurements (NPP: 5.0 ms).
  rcmg_*  (only with --rcmg FILE.npy, repeatable) an RCMG relief that cubekit computed from a tiled
          real scene (given by the lead): written as rcmg_<stem>_f32.npy (the input as float32; a
          (H, W, 1) array is squeezed) and rcmg_<stem>.npy (its u8 quantisation, same rule as above).
          NAME=FILE.npy chooses the name instead (NAME.npy, NAME_f32.npy).

--gradient morph replaces the Sobel magnitude by the 3x3 morphological gradient (max - min over the
8-neighbourhood and the pixel: the RCMG of a one-band image without rejection), for experiments.

Prints one JSON line per file written, on stdout:
  {"image", "path", "shape", "dtype", "min", "max", "distinct_values", "minima_4", "minima_8"}
minima_4 / minima_8 = number of regional minima (plateau-aware) with 4- / 8-connectivity:
skimage.morphology.local_minima(h, connectivity=1|2, allow_borders=True), then scipy.ndimage.label
with the same connectivity (the spec's oracle 5: the watershed gives exactly this many regions).
--no-minima skips the counting (and the scikit-image import).

Usage: /usr/bin/python3 watershed_images.py OUT_DIR [--seed 0] [--scale 1] [--gradient sobel|morph]
                                             [--rcmg [NAME=]FILE.npy ...] [--no-minima]
Exit status 0, or 2 on bad arguments or an unreadable --rcmg file.
"""
import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
from scipy import ndimage

WIDTH, HEIGHT = 2440, 2040


def bad_input(msg):
    print(f"watershed_images: {msg}", file=sys.stderr)
    sys.exit(2)


def gradient(img, kind):
    img = np.asarray(img, dtype=np.float64)
    if kind == "morph":
        return ndimage.maximum_filter(img, size=3, mode="nearest") - ndimage.minimum_filter(img, size=3, mode="nearest")
    return np.hypot(ndimage.sobel(img, axis=1, mode="reflect"), ndimage.sobel(img, axis=0, mode="reflect"))


def noise_relief(rng, H, W, kind):
    field = ndimage.gaussian_filter(rng.standard_normal((H, W)), sigma=1.0, mode="reflect")
    return gradient(field, kind).astype(np.float32)


def smooth_relief(rng, H, W, scale, kind):
    field = ndimage.gaussian_filter(rng.standard_normal((H, W)), sigma=24.0, mode="reflect")
    field /= field.std()
    yy, xx = np.mgrid[0:H, 0:W]
    for _ in range(6):
        cy, cx = rng.uniform(0, H), rng.uniform(0, W)
        r = rng.uniform(60, 250) * scale
        height = rng.uniform(1.5, 3.0) * rng.choice((-1.0, 1.0))
        field[(yy - cy) ** 2 + (xx - cx) ** 2 <= r * r] += height
    field[:, int(0.7 * W):] += 2.0
    field = ndimage.gaussian_filter(field, sigma=1.0, mode="reflect")
    return gradient(field, kind).astype(np.float32)


def quantise_u8(h):
    """round((h - min) / (max - min) * 255) in f64, half away from zero (values are >= 0); 0 if flat."""
    h = np.asarray(h, dtype=np.float64)
    lo, hi = float(h.min()), float(h.max())
    if hi == lo:
        return np.zeros(h.shape, np.uint8)
    return np.floor((h - lo) / (hi - lo) * 255.0 + 0.5).astype(np.uint8)


def count_minima(h, connectivity):
    """Regional minima with connectivity 4 or 8 (plateaus count once), allow_borders=True."""
    from skimage.morphology import local_minima
    c = 1 if connectivity == 4 else 2
    mask = local_minima(h, connectivity=c, allow_borders=True)
    return int(ndimage.label(mask, structure=ndimage.generate_binary_structure(2, c))[1])


def load_rcmg(spec):
    name, path = None, spec
    if "=" in spec and "/" not in spec.split("=", 1)[0]:
        name, path = spec.split("=", 1)
    try:
        a = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        bad_input(f"{path}: cannot read .npy: {e}")
    a = np.squeeze(a)
    if a.ndim != 2 or a.size == 0 or a.dtype.kind not in "uif":
        bad_input(f"{path}: an RCMG relief must be a 2-D (or (H, W, 1)) numeric array, got {a.shape} {a.dtype}")
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        bad_input(f"{path}: the relief has NaN or infinite values")
    if name is None:
        name = "rcmg_" + "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in Path(path).stem)
    return name, np.ascontiguousarray(a, dtype=np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", help="folder for the .npy files (created if missing)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the noise (PCG64), default 0")
    ap.add_argument("--scale", type=float, default=1.0, help="size factor, e.g. 0.25 for a quick test (default 1)")
    ap.add_argument("--gradient", choices=("sobel", "morph"), default="sobel", help="gradient operator (default sobel)")
    ap.add_argument("--rcmg", action="append", default=[], metavar="[NAME=]FILE.npy",
                    help="an RCMG relief to quantise beside the synthetic ones (repeatable)")
    ap.add_argument("--no-minima", action="store_true", help="skip counting the regional minima")
    args = ap.parse_args()
    if not 0 < args.scale <= 4:
        bad_input("--scale must be in (0, 4]")
    H, W = max(8, round(HEIGHT * args.scale)), max(8, round(WIDTH * args.scale))
    rcmgs = [load_rcmg(s) for s in args.rcmg]
    out = Path(args.out_dir)
    os.makedirs(out, exist_ok=True)

    # Both synthetic reliefs come from one generator in a fixed order: noise, then smooth.
    rng = np.random.Generator(np.random.PCG64(args.seed))
    reliefs = [("noise", noise_relief(rng, H, W, args.gradient)),
               ("smooth", smooth_relief(rng, H, W, args.scale, args.gradient))] + rcmgs
    for name, f32 in reliefs:
        for image, arr, path in ((name, quantise_u8(f32), out / f"{name}.npy"),
                                 (name + "_f32", f32, out / f"{name}_f32.npy")):
            np.save(path, arr)
            rec = {"image": image, "path": str(path), "shape": list(arr.shape), "dtype": str(arr.dtype),
                   "min": arr.min().item(), "max": arr.max().item(), "distinct_values": int(np.unique(arr).size)}
            if image in ("noise", "smooth", "noise_f32", "smooth_f32"):
                rec.update({"seed": args.seed, "scale": args.scale, "gradient": args.gradient})
            if not args.no_minima:
                rec["minima_4"] = count_minima(arr, 4)
                rec["minima_8"] = count_minima(arr, 8)
            print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
