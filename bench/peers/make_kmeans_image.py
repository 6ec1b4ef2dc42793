"""Builds the k-means benchmark image: 3840x2160 RGB u8 with millions of distinct colours.

astronaut.png (512x512) upscaled bicubically with OpenCV (cv2.INTER_CUBIC; cv2 reads BGR, converted
to RGB), plus seeded uniform integer noise in -2..+2 per channel (numpy Generator PCG64(seed)),
clipped to 0..255. (Measured: seed 0 gives 829 685 distinct colours, not the 2 million hoped for;
astronaut's colours fill a small volume of the RGB cube, so +-2 noise adds few new ones. --noise A
changes the amplitude for experiments: about +-20 is needed to pass 2 million.) Saved as an (H, W, 3) = (2160, 3840, 3) uint8 C-order .npy. Prints one JSON
line: {"path", "width", "height", "distinct_colours"}; warns (stderr, exit 0) if the image has
fewer than 2 million distinct RGB triples.

Usage: /usr/bin/python3 make_kmeans_image.py OUT.npy [--seed 0] [--noise 2] [--src astronaut.png]
The source defaults to $CUBEKIT_SHARED_DATA/rgb/astronaut.png when that variable is set, else to
../shared/data/rgb/astronaut.png relative to the repository root.
"""
import argparse
import json
import os
import sys
from pathlib import Path

import cv2
import numpy as np

WIDTH, HEIGHT = 3840, 2160
MIN_DISTINCT = 2_000_000


def default_source():
    shared = os.environ.get("CUBEKIT_SHARED_DATA")
    if shared:
        return Path(shared) / "rgb" / "astronaut.png"
    repo = Path(__file__).resolve().parents[2]
    return repo.parent / "shared" / "data" / "rgb" / "astronaut.png"


def make_image(src, seed, amplitude=2):
    bgr = cv2.imread(str(src), cv2.IMREAD_COLOR)
    if bgr is None:
        sys.exit(f"make_kmeans_image: cannot read {src}")
    rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    big = cv2.resize(rgb, (WIDTH, HEIGHT), interpolation=cv2.INTER_CUBIC)  # dsize is (width, height)
    rng = np.random.Generator(np.random.PCG64(seed))
    noise = rng.integers(-amplitude, amplitude + 1, size=big.shape, dtype=np.int16)  # -2..+2 inclusive
    img = np.clip(big.astype(np.int16) + noise, 0, 255).astype(np.uint8)
    return np.ascontiguousarray(img)


def distinct_colours(img):
    packed = (img[..., 0].astype(np.uint32) << 16) | (img[..., 1].astype(np.uint32) << 8) | img[..., 2]
    return int(np.unique(packed).size)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="output .npy, (2160, 3840, 3) uint8")
    ap.add_argument("--seed", type=int, default=0, help="seed of the noise (PCG64), default 0")
    ap.add_argument("--noise", type=int, default=2, help="noise amplitude A: uniform -A..+A (default 2)")
    ap.add_argument("--src", default=None, help="source image (default: shared data astronaut.png)")
    args = ap.parse_args()

    src = Path(args.src) if args.src else default_source()
    img = make_image(src, args.seed, args.noise)
    assert img.shape == (HEIGHT, WIDTH, 3) and img.dtype == np.uint8
    np.save(args.out, img)
    n = distinct_colours(img)
    if n < MIN_DISTINCT:
        print(f"make_kmeans_image: WARNING only {n} distinct colours (< {MIN_DISTINCT})", file=sys.stderr)
    print(json.dumps({"path": str(args.out), "width": WIDTH, "height": HEIGHT, "distinct_colours": n}))


if __name__ == "__main__":
    main()
