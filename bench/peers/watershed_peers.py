"""The watershed peers of cubekit's benchmark (issue 16, item 5), timed on the same u8 reliefs.

Reads the reliefs that watershed_images.py wrote into a folder: every 2-D uint8 NAME.npy there
(noise, smooth, rcmg_*; NAME_f32.npy files are not NPP input, see --f32), or only those named by
--images. For each image and each connectivity (4 and 8, or --connectivity) it times:

  npp       NVIDIA NPP's watershed, nppiSegmentWatershed_8u_C1IR_Ctx, called through ctypes on
            libnppif (found at run time, see "Finding NPP"), buffers allocated with CuPy on one
            non-blocking CuPy stream that is also the NppStreamContext's stream. connectivity 8 ->
            eNorm = nppiNormInf (0), 4 -> nppiNormL1 (1) (the header: "nppiNormInf will use 8 way
            connectivity and nppiNormL1 will use 4 way connectivity"); segment boundaries
            NPP_WATERSHED_SEGMENT_BOUNDARIES_NONE (0); marker labels output requested (Npp32u image,
            line step W*4 bytes). NPP works in place (the u8 image is overwritten by the segmented
            grey image), so before every run the u8 image is copied afresh from a device-resident
            original, OUTSIDE the timing (copy, stream synchronised, then: start event, the NPP call,
            end event). Scratch buffer from nppiSegmentWatershedGetBufferSize_8u_C1R, allocated once.
            ms_* = CUDA-event time of the call alone, median and minimum of --repeat runs (default 20)
            after --warmup untimed runs (default 3); ms_median_wall = host perf_counter around the
            call up to the end event's completion (what a caller waits, NPP's host work included);
            ms_median_no_labels = the same call with pMarkerLabels = NULL (NPP's note: asking for the
            labels may slow it slightly). regions = number of distinct values in NPP's label image
            (not consecutive: NVIDIA's sample compresses them afterwards with
            nppiCompressMarkerLabelsUF; not done here), saved as LABELS_DIR/npp_NAME_cC.npy (uint32,
            (H, W), about 20 MB at 2440x2040) unless --no-save.
  npp-16u   the same with nppiSegmentWatershed_16u_C1IR_Ctx on the same relief widened to uint16
            (values 0..255), for completeness; same_labels_as_8u tells whether its labels equal npp's.
  skimage   scikit-image, the spec's oracle 9: markers = the regional minima,
            skimage.morphology.local_minima(h, connectivity=c, allow_borders=True) labelled by
            scipy.ndimage.label with the same connectivity, then
            skimage.segmentation.watershed(h, markers, connectivity=c), with c = 1 for 4 and 2 for 8.
            ms_* = host wall time (perf_counter) of the whole chain (minima + label + watershed),
            median and minimum of --cpu-repeat runs (default 3) after --cpu-warmup (default 1);
            ms_median_markers and ms_median_watershed_only split it. regions = number of markers
            (= distinct labels). Labels saved as LABELS_DIR/skimage_NAME_cC.npy (int32).
            With --f32 scikit-image also runs on every NAME_f32.npy beside the u8 images.

Output: one JSON line per (image, peer, connectivity) on stdout, and the same lines in --json-out FILE:
  {"image", "peer", "connectivity", "ms_median", "ms_min", "runs", "regions", ...extra}
A peer that cannot run prints {"peer": NAME, "skipped": REASON} once (or per image when a call fails)
and the script goes on; readable lines go to stderr. Exit status 0, or 2 on bad input.

Finding NPP: --npp-lib PATH, else $CUBEKIT_NPPIF, else the loader's libnppif (ctypes.util.find_library),
else the first that loads of: /usr/local/cuda*/lib64, /usr/local/cuda*/targets/*/lib, $CUDA_HOME and
$CUDA_PATH (lib64, targets/*/lib), the $LD_LIBRARY_PATH folders, /usr/lib/x86_64-linux-gnu, /usr/lib64,
and the pip wheels (site-packages/nvidia/{npp,cu13,cu12,*}/lib), highest soname version first.
libcudart.so.* and libnppc.so.* of the same folder (or of the pip runtime folder) are loaded first
with RTLD_GLOBAL so that libnppif resolves them without LD_LIBRARY_PATH.

The NPP declarations used (CUDA 13.0 headers nppi_filtering_functions.h and nppdefs.h; NVIDIA's NPP
documentation, "Watershed Segmentation" and "NppStreamContext"):
  NppStatus nppiSegmentWatershedGetBufferSize_8u_C1R(NppiSize oSizeROI, size_t *hpDeviceMemoryBufferSize);
  NppStatus nppiSegmentWatershedGetBufferSize_16u_C1R(NppiSize oSizeROI, size_t *hpDeviceMemoryBufferSize);
  NppStatus nppiSegmentWatershed_8u_C1IR_Ctx(Npp8u *pSrcDst, Npp32s nSrcDstStep, Npp32u *pMarkerLabels,
      Npp32s nMarkerLabelsStep, NppiNorm eNorm, NppiWatershedSegmentBoundaryType eSegmentBoundaryType,
      NppiSize oSizeROI, Npp8u *pDeviceMemoryBuffer, NppStreamContext nppStreamCtx);
  NppStatus nppiSegmentWatershed_16u_C1IR_Ctx(Npp16u *pSrcDst, ... same ...);
  typedef struct { int width; int height; } NppiSize;
  typedef enum { nppiNormInf = 0, nppiNormL1 = 1, nppiNormL2 = 2 } NppiNorm;
  typedef enum { NPP_WATERSHED_SEGMENT_BOUNDARIES_NONE, _BLACK, _WHITE, _CONTRAST, _ONLY } NppiWatershedSegmentBoundaryType;
  typedef struct { cudaStream_t hStream; int nCudaDeviceId; int nMultiProcessorCount;
      int nMaxThreadsPerMultiProcessor; int nMaxThreadsPerBlock; size_t nSharedMemPerBlock;
      int nCudaDevAttrComputeCapabilityMajor; int nCudaDevAttrComputeCapabilityMinor;
      unsigned int nStreamFlags; int nReserved0; } NppStreamContext;   (48 bytes; nReserved0 = 0,
      newer NPP calls it hWorkspace, same storage, 0 = no workspace)
CUDA 11 / early 12 NPP declared the buffer size as int *; the size is read into a zeroed 8-byte
integer, which is right for both on little-endian machines.

Usage: python3 watershed_peers.py DIR [--images noise,smooth] [--connectivity 4 8] [--repeat 20]
         [--warmup 3] [--cpu-repeat 3] [--cpu-warmup 1] [--no-npp] [--no-npp16] [--no-skimage] [--f32]
         [--npp-lib PATH] [--pitched] [--labels-dir DIR] [--no-save] [--json-out FILE]
"""
import argparse
import ctypes
import ctypes.util
import glob
import importlib.util
import json
import os
import re
import site
import sys
import time

import numpy as np
from peer_timing import median_min

NPP_NORM = {8: 0, 4: 1}  # nppiNormInf: 8-way; nppiNormL1: 4-way
NPP_BOUNDARIES_NONE = 0  # NPP_WATERSHED_SEGMENT_BOUNDARIES_NONE
CUDA_STREAM_NON_BLOCKING = 1  # cudaStreamNonBlocking (driver_types.h): the flags of our CuPy stream
# cudaDeviceAttr values (driver_types.h), the fields NppStreamContext wants
CUDA_ATTR = {"MaxThreadsPerBlock": 1, "MaxSharedMemoryPerBlock": 8, "MultiProcessorCount": 16,
             "MaxThreadsPerMultiProcessor": 39, "ComputeCapabilityMajor": 75, "ComputeCapabilityMinor": 76}


def bad_input(msg):
    print(f"watershed_peers: {msg}", file=sys.stderr)
    sys.exit(2)


def info(msg):
    print(msg, file=sys.stderr, flush=True)


def r4(x):
    return round(float(x), 4)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "cpu")
    except OSError:
        model = "cpu"
    return f"{model} ({os.cpu_count()} CPUs)"


class Emitter:
    """One JSON line per record on stdout and, with --json-out, in that file."""

    def __init__(self, path):
        self.f = open(path, "w") if path else None

    def __call__(self, rec):
        line = json.dumps(rec)
        print(line, flush=True)
        if self.f:
            self.f.write(line + "\n")
            self.f.flush()
        if "skipped" in rec:
            where = f" {rec['image']} c{rec['connectivity']}" if "image" in rec else ""
            info(f"{rec['peer']}{where}: skipped ({rec['skipped']})")
        else:
            info(f"{rec['peer']} {rec['image']} c{rec['connectivity']}: median {rec['ms_median']:.3f} ms, "
                 f"min {rec['ms_min']:.3f} ms, {rec['runs']} runs, {rec['regions']} regions")


# ---- NPP through ctypes -------------------------------------------------------------------------
class NppiSize(ctypes.Structure):
    _fields_ = [("width", ctypes.c_int), ("height", ctypes.c_int)]


class NppStreamContext(ctypes.Structure):
    _fields_ = [("hStream", ctypes.c_void_p),
                ("nCudaDeviceId", ctypes.c_int),
                ("nMultiProcessorCount", ctypes.c_int),
                ("nMaxThreadsPerMultiProcessor", ctypes.c_int),
                ("nMaxThreadsPerBlock", ctypes.c_int),
                ("nSharedMemPerBlock", ctypes.c_size_t),
                ("nCudaDevAttrComputeCapabilityMajor", ctypes.c_int),
                ("nCudaDevAttrComputeCapabilityMinor", ctypes.c_int),
                ("nStreamFlags", ctypes.c_uint),
                ("nReserved0", ctypes.c_int)]  # hWorkspace in newer NPP: same storage, 0 = none


assert ctypes.sizeof(NppStreamContext) == 48 and ctypes.sizeof(NppiSize) == 8  # the C layouts on x86-64


class NppLibraryVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("build", ctypes.c_int)]


class NppError(RuntimeError):
    pass


def _site_dirs():
    dirs = list(sys.path)
    try:
        dirs += site.getsitepackages() + [site.getusersitepackages()]
    except AttributeError:  # virtualenvs of old Pythons
        pass
    return [d for d in dict.fromkeys(dirs)
            if d and os.path.basename(d.rstrip(os.sep)) in ("site-packages", "dist-packages") and os.path.isdir(d)]


def npp_search_patterns():
    pats = ["/usr/local/cuda*/lib64/libnppif.so*", "/usr/local/cuda*/targets/*/lib/libnppif.so*"]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            pats += [os.path.join(os.environ[var], "lib64", "libnppif.so*"),
                     os.path.join(os.environ[var], "targets", "*", "lib", "libnppif.so*")]
    pats += [os.path.join(d, "libnppif.so*") for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    pats += ["/usr/lib/x86_64-linux-gnu/libnppif.so*", "/usr/lib64/libnppif.so*"]
    for d in _site_dirs():
        pats += [os.path.join(d, "nvidia", sub, "lib", "libnppif.so*") for sub in ("npp", "cu13", "cu12", "*")]
    return list(dict.fromkeys(pats))


def _soname_major(path):
    m = re.search(r"\.so\.(\d+)", os.path.basename(path))
    return int(m.group(1)) if m else -1


def npp_candidates(explicit):
    """Paths or loader names of libnppif to try, most wanted first, and the patterns searched."""
    first = [p for p in (explicit, os.environ.get("CUBEKIT_NPPIF")) if p]
    name = ctypes.util.find_library("nppif")
    if name:
        first.append(name)
    pats = npp_search_patterns()
    found = []
    for pat in pats:
        found += glob.glob(pat)
    seen, files = set(), []
    for f in sorted(found, key=lambda p: (-_soname_major(p), p)):  # highest version first, .so last
        real = os.path.realpath(f)
        if real not in seen:
            seen.add(real)
            files.append(f)
    return first + files, pats


def _preload_deps(lib_path):
    """Load libcudart and libnppc from libnppif's folder (or the pip runtime folder) with RTLD_GLOBAL."""
    if os.sep not in lib_path:
        return None
    d = os.path.dirname(lib_path)
    major = _soname_major(lib_path)
    nppc = None
    for dep in ("libcudart.so*", "libnppc.so*"):
        cands = glob.glob(os.path.join(d, dep))
        if dep.startswith("libcudart"):
            cands += glob.glob(os.path.join(d, "..", "..", "cuda_runtime", "lib", dep))
        cands.sort(key=lambda p: (_soname_major(p) != major, -_soname_major(p), p))
        for c in cands:
            try:
                h = ctypes.CDLL(c, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                continue
            if dep.startswith("libnppc"):
                nppc = h
            break
    return nppc


def load_npp(explicit):
    """(libnppif, libnppc or None, path) or raises NppError with the reason."""
    cands, pats = npp_candidates(explicit)
    if not cands:
        raise NppError("libnppif not found", pats)
    errors = []
    for c in cands:
        nppc = _preload_deps(c)
        try:
            lib = ctypes.CDLL(c, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            errors.append(f"{c}: {e}")
            continue
        if nppc is None:
            try:
                nppc = ctypes.CDLL(re.sub(r"libnppif", "libnppc", c), mode=ctypes.RTLD_GLOBAL)
            except OSError:
                nppc = None
        return lib, nppc, c
    raise NppError("libnppif found but not loadable: " + "; ".join(errors)[:400], pats)


def bind(lib, name, argtypes):
    f = getattr(lib, name)  # AttributeError when the symbol is missing
    f.argtypes = argtypes
    f.restype = ctypes.c_int
    return f


class NppWatershed:
    """NPP's in-place watershed of one dtype (8u or 16u) on CuPy buffers."""

    def __init__(self, lib, cp, kind, stream):
        self.cp, self.kind, self.stream = cp, kind, stream
        self.get_size = bind(lib, f"nppiSegmentWatershedGetBufferSize_{kind}_C1R",
                             [NppiSize, ctypes.POINTER(ctypes.c_uint64)])
        self.fn = bind(lib, f"nppiSegmentWatershed_{kind}_C1IR_Ctx",
                       [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                        ctypes.c_int, NppiSize, ctypes.c_void_p, NppStreamContext])
        self.dtype = cp.uint8 if kind == "8u" else cp.uint16
        dev = cp.cuda.runtime.getDevice()  # cudaGetDevice

        def attr(a):  # cudaDeviceGetAttribute
            return int(cp.cuda.runtime.deviceGetAttribute(a, dev))
        self.ctx = NppStreamContext(
            hStream=stream.ptr, nCudaDeviceId=dev, nMultiProcessorCount=attr(CUDA_ATTR["MultiProcessorCount"]),
            nMaxThreadsPerMultiProcessor=attr(CUDA_ATTR["MaxThreadsPerMultiProcessor"]),
            nMaxThreadsPerBlock=attr(CUDA_ATTR["MaxThreadsPerBlock"]),
            nSharedMemPerBlock=attr(CUDA_ATTR["MaxSharedMemoryPerBlock"]),
            nCudaDevAttrComputeCapabilityMajor=attr(CUDA_ATTR["ComputeCapabilityMajor"]),
            nCudaDevAttrComputeCapabilityMinor=attr(CUDA_ATTR["ComputeCapabilityMinor"]),
            nStreamFlags=CUDA_STREAM_NON_BLOCKING, nReserved0=0)

    def buffer_size(self, H, W):
        n = ctypes.c_uint64(0)
        st = self.get_size(NppiSize(W, H), ctypes.byref(n))
        if st < 0:
            raise NppError(f"nppiSegmentWatershedGetBufferSize_{self.kind}_C1R returned NppStatus {st}")
        return int(n.value)

    def prepare(self, host_u8, pitched):
        """Device original, work image (pitched rows when asked), labels and scratch for one image."""
        cp = self.cp
        H, W = host_u8.shape
        esize = np.dtype(self.dtype).itemsize
        self.H, self.W = H, W
        with self.stream:
            self.orig = cp.asarray(host_u8).astype(self.dtype)
            row = -(-W * esize // 512) * 512 if pitched else W * esize  # nppiMalloc-like 512-byte rows
            self.work_full = cp.empty((H, row // esize), dtype=self.dtype)
            self.work = self.work_full[:, :W]
            self.step = row
            self.labels = cp.empty((H, W), dtype=cp.uint32)
            self.scratch = cp.empty(max(1, self.buffer_size(H, W)), dtype=cp.uint8)
        self.stream.synchronize()

    def call(self, with_labels=True):
        st = self.fn(self.work.data.ptr, self.step, self.labels.data.ptr if with_labels else None,
                     self.W * 4 if with_labels else 0, self.norm, NPP_BOUNDARIES_NONE,
                     NppiSize(self.W, self.H), self.scratch.data.ptr, self.ctx)
        if st < 0:
            raise NppError(f"nppiSegmentWatershed_{self.kind}_C1IR_Ctx returned NppStatus {st}")
        return st

    def time(self, connectivity, runs, warmup, with_labels=True):
        """CUDA-event and wall milliseconds of the call; the fresh copy of the input stays outside."""
        cp = self.cp
        self.norm = NPP_NORM[connectivity]
        ev, wall, statuses = [], [], set()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        for i in range(warmup + runs):
            with self.stream:
                self.work[...] = self.orig
            self.stream.synchronize()
            t0 = time.perf_counter()
            start.record(self.stream)
            statuses.add(self.call(with_labels))
            end.record(self.stream)
            end.synchronize()
            t1 = time.perf_counter()
            if i >= warmup:
                ev.append(cp.cuda.get_elapsed_time(start, end))
                wall.append((t1 - t0) * 1e3)
        return ev, wall, sorted(statuses)


def npp_setup(args, emit):
    """The two NppWatershed objects (8u, 16u or None) and common fields, or None after a skip line."""
    try:
        lib, nppc, path = load_npp(args.npp_lib)
    except NppError as e:
        rec = {"peer": "npp", "skipped": e.args[0]}
        if len(e.args) > 1 and e.args[0] == "libnppif not found":
            rec["searched"] = e.args[1]
        emit(rec)
        return None
    try:
        import cupy as cp
    except ImportError as e:
        emit({"peer": "npp", "skipped": f"cupy not installed ({e})", "library": path})
        return None
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
        stream = cp.cuda.Stream(non_blocking=True)
        w8 = NppWatershed(lib, cp, "8u", stream)
    except AttributeError as e:
        emit({"peer": "npp", "skipped": f"symbol missing in {path}: {e}"})
        return None
    except Exception as e:  # no device, driver too old, ...
        emit({"peer": "npp", "skipped": f"CUDA/CuPy not usable: {type(e).__name__}: {e}"[:300], "library": path})
        return None
    w16 = None
    if not args.no_npp16:
        try:
            w16 = NppWatershed(lib, cp, "16u", stream)
        except AttributeError as e:
            emit({"peer": "npp-16u", "skipped": f"symbol missing in {path}: {e}"})
    version = None
    if nppc is not None and hasattr(nppc, "nppGetLibVersion"):
        nppc.nppGetLibVersion.restype = ctypes.POINTER(NppLibraryVersion)
        v = nppc.nppGetLibVersion().contents
        version = f"{v.major}.{v.minor}.{v.build}"
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    common = {"device": name, "npp_version": version, "library": path, "cupy": cp.__version__,
              "timing": "CUDA events around the call only; input copied fresh from a device original before each run, "
                        "outside the timing"}
    return w8, w16, common


def npp_peer(npp, name, img, conn, args, emit, labels_dir):
    w8, w16, common = npp
    H, W = img.shape
    base = {"image": name, "connectivity": conn, "shape": [H, W], "dtype": "uint8", "pitched": args.pitched}
    labels8 = None
    for peer, w in (("npp", w8), ("npp-16u", w16)):
        if w is None:
            continue
        try:
            w.prepare(img, args.pitched)
            ev, wall, statuses = w.time(conn, args.repeat, args.warmup, with_labels=True)
            labels = w.cp.asnumpy(w.labels)
            ev_nl, _, _ = w.time(conn, args.repeat, args.warmup, with_labels=False)
        except Exception as e:  # a failing call must not stop the others
            emit({"peer": peer, **base, "skipped": f"failed: {type(e).__name__}: {e}"[:300]})
            continue
        med, mn = median_min(ev)
        med_nl, mn_nl = median_min(ev_nl)
        rec = {"peer": peer, **base, "ms_median": r4(med), "ms_min": r4(mn), "runs": args.repeat,
               "regions": int(np.unique(labels).size), "ms_median_wall": r4(np.median(wall)),
               "ms_median_no_labels": r4(med_nl), "ms_min_no_labels": r4(mn_nl), "warmup": args.warmup,
               "npp_status": statuses, "labels_zero_pixels": int(np.count_nonzero(labels == 0)),
               "labels_max": int(labels.max()), "scratch_bytes": int(w.scratch.size),
               "norm": "nppiNormInf" if conn == 8 else "nppiNormL1", **common}
        if peer == "npp":
            labels8 = labels
            if labels_dir:
                path = os.path.join(labels_dir, f"npp_{name}_c{conn}.npy")
                np.save(path, labels)
                rec["labels_path"] = path
        elif labels8 is not None:
            rec["same_labels_as_8u"] = bool(np.array_equal(labels, labels8))
        emit(rec)
        del w.orig, w.work, w.work_full, w.labels, w.scratch


# ---- scikit-image -------------------------------------------------------------------------------
def skimage_peer(name, img, conn, args, emit, labels_dir):
    import skimage
    from scipy import ndimage
    from skimage.morphology import local_minima
    from skimage.segmentation import watershed
    c = 1 if conn == 4 else 2
    structure = ndimage.generate_binary_structure(2, c)
    t_mark, t_ws, out = [], [], None
    for i in range(args.cpu_warmup + args.cpu_repeat):
        t0 = time.perf_counter()
        markers, n = ndimage.label(local_minima(img, connectivity=c, allow_borders=True), structure=structure)
        t1 = time.perf_counter()
        labels = watershed(img, markers=markers, connectivity=c)
        t2 = time.perf_counter()
        if i >= args.cpu_warmup:
            t_mark.append((t1 - t0) * 1e3)
            t_ws.append((t2 - t1) * 1e3)
        out = (labels, n)
    labels, n = out
    total = [a + b for a, b in zip(t_mark, t_ws)]
    med, mn = median_min(total)
    rec = {"peer": "skimage", "image": name, "connectivity": conn, "ms_median": r4(med), "ms_min": r4(mn),
           "runs": args.cpu_repeat, "regions": int(n), "shape": list(img.shape), "dtype": str(img.dtype),
           "ms_median_markers": r4(np.median(t_mark)), "ms_median_watershed_only": r4(np.median(t_ws)),
           "ms_min_watershed_only": r4(np.min(t_ws)), "warmup": args.cpu_warmup,
           "distinct_labels": int(np.unique(labels).size), "device": cpu_name(), "skimage": skimage.__version__,
           "timing": "perf_counter, local_minima + ndimage.label + watershed (single-threaded)"}
    if labels_dir:
        path = os.path.join(labels_dir, f"skimage_{name}_c{conn}.npy")
        np.save(path, labels.astype(np.int32, copy=False))
        rec["labels_path"] = path
    emit(rec)


# ---- driver -------------------------------------------------------------------------------------
def find_images(folder, names, f32):
    """[(name, array)] of the 2-D uint8 NAME.npy in folder (and NAME_f32.npy with f32), sorted by name."""
    if names:
        stems = names
    else:
        stems = sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(folder, "*.npy"))
                       if not p.endswith("_f32.npy"))
    u8, fl = [], []
    for stem in stems:
        path = os.path.join(folder, stem + ".npy")
        try:
            a = np.load(path, allow_pickle=False, mmap_mode="r")
        except (OSError, ValueError) as e:
            if names:
                bad_input(f"{path}: cannot read .npy: {e}")
            continue
        if a.ndim != 2 or a.dtype != np.uint8 or 0 in a.shape:
            if names:
                bad_input(f"{path}: must be a 2-D uint8 relief, got {a.shape} {a.dtype}")
            info(f"watershed_peers: {path} is not a 2-D uint8 relief ({a.shape} {a.dtype}), left out")
            continue
        u8.append((stem, np.ascontiguousarray(a)))
        fpath = os.path.join(folder, stem + "_f32.npy")
        if f32 and os.path.exists(fpath):
            b = np.load(fpath, allow_pickle=False)
            if b.ndim == 2 and b.dtype == np.float32:
                fl.append((stem + "_f32", np.ascontiguousarray(b)))
    return u8, fl


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", help="folder of the reliefs written by watershed_images.py")
    ap.add_argument("--images", help="comma-separated names (NAME.npy in the folder); default: every 2-D uint8 .npy")
    ap.add_argument("--connectivity", type=int, nargs="+", choices=(4, 8), default=[4, 8])
    ap.add_argument("--repeat", type=int, default=20, help="timed NPP runs (default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed NPP runs first (default 3)")
    ap.add_argument("--cpu-repeat", type=int, default=3, help="timed scikit-image runs (default 3)")
    ap.add_argument("--cpu-warmup", type=int, default=1, help="untimed scikit-image runs first (default 1)")
    ap.add_argument("--no-npp", action="store_true", help="leave NPP out")
    ap.add_argument("--no-npp16", action="store_true", help="leave NPP's 16u variant out")
    ap.add_argument("--no-skimage", action="store_true", help="leave scikit-image out")
    ap.add_argument("--f32", action="store_true", help="scikit-image also on NAME_f32.npy")
    ap.add_argument("--npp-lib", help="path of libnppif.so.* (default: searched)")
    ap.add_argument("--pitched", action="store_true",
                    help="NPP image rows padded to 512 bytes like nppiMalloc (default: contiguous, step = W bytes)")
    ap.add_argument("--labels-dir", help="where label images go (default FOLDER/labels)")
    ap.add_argument("--no-save", action="store_true", help="do not save label images")
    ap.add_argument("--json-out", help="also write the JSON lines to this file")
    args = ap.parse_args()
    if min(args.repeat, args.cpu_repeat) < 1 or min(args.warmup, args.cpu_warmup) < 0:
        bad_input("--repeat and --cpu-repeat must be >= 1, --warmup and --cpu-warmup >= 0")
    if not os.path.isdir(args.folder):
        bad_input(f"{args.folder}: not a folder")
    names = [n.strip() for n in args.images.split(",") if n.strip()] if args.images else None
    u8, fl = find_images(args.folder, names, args.f32)
    if not u8:
        bad_input(f"{args.folder}: no 2-D uint8 .npy relief found")
    labels_dir = None
    if not args.no_save:
        labels_dir = args.labels_dir or os.path.join(args.folder, "labels")
        os.makedirs(labels_dir, exist_ok=True)
    emit = Emitter(args.json_out)
    info(f"watershed peers: {', '.join(f'{n} {a.shape[1]}x{a.shape[0]}' for n, a in u8)} (W x H), "
         f"connectivity {args.connectivity}")

    if not args.no_npp:
        npp = npp_setup(args, emit)
        if npp is not None:
            for name, img in u8:
                for conn in args.connectivity:
                    npp_peer(npp, name, img, conn, args, emit, labels_dir)
    if not args.no_skimage:
        if importlib.util.find_spec("skimage") is None:
            emit({"peer": "skimage", "skipped": "skimage not installed"})
        else:
            for name, img in u8 + fl:
                for conn in args.connectivity:
                    try:
                        skimage_peer(name, img, conn, args, emit, labels_dir)
                    except Exception as e:  # a failing peer must not stop the others
                        emit({"peer": "skimage", "image": name, "connectivity": conn,
                              "skipped": f"failed: {type(e).__name__}: {e}"[:300]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
