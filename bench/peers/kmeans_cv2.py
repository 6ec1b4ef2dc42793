"""k-means the way an OpenCV user writes it: cv2.kmeans on the CPU (a peer of the cubekit benchmark).

float32 pixels, k-means++ centres (cv2.KMEANS_PP_CENTERS), criteria (TERM_CRITERIA_MAX_ITER, iters, 0),
--attempts restarts, cv2.setNumThreads(--threads). Timed once with a wall clock (cv2.kmeans includes
its k-means++ initialisation); the RNG is seeded (cv2.setRNGSeed) so runs repeat.

Input: an .npy of shape (H, W, 3) u8 (make_kmeans_image.py), (H, W, B) or (H, W); values as they are.

Usage: /usr/bin/python3 kmeans_cv2.py IMAGE.npy [--k 16] [--iters 10] [--attempts 1] [--threads N]
Prints one JSON line: {"peer": "cv2-kmeans", "k", "iters", "attempts", "threads", "ms", "inertia"}
(inertia = cv2's compactness: squared distances of the pixels to the final centres of their labels).
"""
import argparse
import json
import os
import sys
import time

import cv2
import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("image", help=".npy, (H, W, 3) u8 or (H, W, B)")
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--attempts", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="default: all CPUs")
    ap.add_argument("--seed", type=int, default=0, help="cv2.setRNGSeed")
    args = ap.parse_args()

    a = np.load(args.image)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3:
        sys.exit(f"kmeans_cv2: {args.image}: expected (H, W) or (H, W, B), got shape {a.shape}")
    data = np.ascontiguousarray(a.reshape(-1, a.shape[2]).astype(np.float32))

    cv2.setNumThreads(args.threads)
    cv2.setRNGSeed(args.seed)
    criteria = (cv2.TERM_CRITERIA_MAX_ITER, args.iters, 0)
    t0 = time.perf_counter()
    compactness, _labels, _centres = cv2.kmeans(data, args.k, None, criteria, args.attempts, cv2.KMEANS_PP_CENTERS)
    ms = (time.perf_counter() - t0) * 1e3
    print(json.dumps({"peer": "cv2-kmeans", "k": args.k, "iters": args.iters, "attempts": args.attempts,
                      "threads": cv2.getNumThreads(), "ms": round(ms, 3), "inertia": float(compactness)}))


if __name__ == "__main__":
    main()
