# cubekit.dask.region_statistics and region_vote on a 3000×3000 label image with 90,000 regions (NumPy chunks of
# 500 rows, threaded scheduler), against the whole-array calls; checks the tables and maps are equal.
# Usage: PYTHONPATH=build/python /usr/bin/python3 bench/dask_regions_bench.py
import time, numpy as np, dask, dask.array as da, cubekit, cubekit.dask
dask.config.set(scheduler="threads")
rng = np.random.default_rng(1)
H, W = 3000, 3000
labels = (np.arange(H)[:, None] // 10 * 300 + np.arange(W)[None, :] // 10 + 1).astype(np.int32)  # 90k regions
cube = rng.random((H, W, 4)).astype(np.float32)
classes = rng.integers(0, 6, (H, W)).astype(np.int32)
L, C = da.from_array(labels, chunks=(500, W)), da.from_array(cube, chunks=(500, W, 4))
t = time.perf_counter(); s = cubekit.dask.region_statistics(L, C); t1 = time.perf_counter() - t
whole_t = time.perf_counter(); w = cubekit.region_statistics(labels, cube); whole_t = time.perf_counter() - whole_t
print(f"dask.region_statistics {H}x{W}x4, 90k regions: {t1*1e3:.0f} ms (whole call {whole_t*1e3:.0f} ms), equal {all(np.array_equal(s[n], w[n], equal_nan=s[n].dtype.kind == 'f') for n in s.dtype.names)}")
t = time.perf_counter(); v, st = cubekit.dask.region_vote(L, da.from_array(classes, chunks=(500, W)), return_stats=True); v = v.compute(); t2 = time.perf_counter() - t
wv, wst = cubekit.region_vote(labels, classes, return_stats=True)
print(f"dask.region_vote same labels: {t2*1e3:.0f} ms, equal {bool((v == wv).all()) and st == wst}")
