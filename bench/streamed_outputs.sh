#!/usr/bin/env bash
# Outputs written tile by tile on the GPU machine (issue 17): a large .npy cube read by windows, the
# result written into its .npy OUT as the tiles finish (CubeFileWriter), compared byte for byte with
# the CPU backend's file, and the process wall time of each run (file in, file out).
#   bench/streamed_outputs.sh BIN_DIR WORK_DIR [SIDE] [BANDS] [DEVICES]
# BIN_DIR holds `cubekit`; WORK_DIR gets the cube (SIDE² × BANDS i16, default 2048² × 32 = 256 MiB)
# and the outputs. With DEVICES (e.g. 0,1) the GPU runs are repeated over those devices (--devices) and
# their files compared with the one-GPU files. Needs /usr/bin/env python3 with NumPy to make the cube.
# Exit status 1 on a mismatch.
set -uo pipefail
bin=${1:?usage: bench/streamed_outputs.sh BIN_DIR WORK_DIR [SIDE] [BANDS]}
work=${2:?usage: bench/streamed_outputs.sh BIN_DIR WORK_DIR [SIDE] [BANDS]}
side=${3:-2048}
bands=${4:-32}
devices=${5:-}
mkdir -p "$work"
python3 - "$work/cube.npy" "$side" "$bands" <<'EOF'
import sys
import numpy as np
side, bands = int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(17)
# Smooth regions plus noise, so the edges and the gradient are not trivial.
y, x = np.mgrid[0:side, 0:side]
base = ((x // 97 + y // 61) % 7 * 400).astype(np.int16)
cube = base[:, :, None] + rng.integers(0, 300, (side, side, bands), dtype=np.int16)
np.save(sys.argv[1], cube)
EOF
status=0
wall() {  # wall NAME ARGS...: runs cubekit, prints the wall time and the JSON's tiled/outputs keys
  local name=$1; shift
  local t0 t1
  t0=$(date +%s%N)
  "$bin/cubekit" "$@" --json --quiet > "$work/$name.json" || { echo "$name: exit $?"; status=1; return; }
  t1=$(date +%s%N)
  python3 - "$work/$name.json" "$name" "$(( (t1 - t0) / 1000000 ))" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
t = j.get("tiled", {})
tiles = t.get("tiles", t.get("watershed", {}).get("tiles", "-")) if t else "whole"
streamed = [o["path"].rsplit("/", 1)[-1] for o in j.get("outputs", []) if o.get("streamed")]
print(f"| {sys.argv[2]} | {j.get('backend', '-')} | {sys.argv[3]} | {tiles} | {t.get('peak_bytes', '-')} | "
      f"{t.get('device_peak_bytes', '-')} | {', '.join(streamed) or '-'} |")
EOF
}
same() {
  if cmp -s "$work/$1" "$work/$2"; then echo "  $1 = $2 (bytes)"; else echo "  MISMATCH $1 $2"; status=1; fi
}
echo "cube: ${side}x${side}x${bands} i16 ($(du -h "$work/cube.npy" | cut -f1))"
echo "| run | backend | wall ms | tiles | host peak bytes | device peak bytes | streamed |"
echo "|---|---|---|---|---|---|---|"
wall rcmg_gpu rcmg "$work/cube.npy" "$work/g_gpu.npy" --backend cuda --device-memory-limit 128M
wall rcmg_cpu rcmg "$work/cube.npy" "$work/g_cpu.npy" --backend cpu
wall edges_gpu edges "$work/cube.npy" "$work/e_gpu.npy" --fusion none --backend cuda --device-memory-limit 128M
wall edges_cpu edges "$work/cube.npy" "$work/e_cpu.npy" --fusion none --backend cpu
wall pca_gpu pca "$work/cube.npy" "$work/p_gpu.npy" -k 4 --backend cuda --device-memory-limit 128M
wall pca_cpu pca "$work/cube.npy" "$work/p_cpu.npy" -k 4 --backend cpu
same g_gpu.npy g_cpu.npy
same e_gpu.npy e_cpu.npy
same p_gpu.npy p_cpu.npy
if [[ -n $devices ]]; then
  wall rcmg_multi rcmg "$work/cube.npy" "$work/g_multi.npy" --devices "$devices" --device-memory-limit 128M
  wall edges_multi edges "$work/cube.npy" "$work/e_multi.npy" --fusion none --devices "$devices" --device-memory-limit 128M
  wall pca_multi pca "$work/cube.npy" "$work/p_multi.npy" -k 4 --devices "$devices" --device-memory-limit 128M
  same g_multi.npy g_gpu.npy
  same e_multi.npy e_gpu.npy
  same p_multi.npy p_gpu.npy
fi
exit $status
