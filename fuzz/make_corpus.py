#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/ (committed; rerun to
regenerate): small files of every variant each reader handles, the headers of the real scenes with
their dimensions shrunk, and the small real files of ../shared/data when it is there."""
import gzip
import io
import pathlib
import re
import struct
import sys
import zlib

import numpy as np
import scipy.io

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = ROOT.parent / "shared" / "data"
rng = np.random.default_rng(18)


def out(target, name, data):
    d = HERE / "corpus" / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def envi_seeds():
    types = {1: np.uint8, 2: np.int16, 3: np.int32, 4: np.float32, 5: np.float64, 12: np.uint16, 13: np.uint32}
    for code, t in types.items():
        for il in ("bsq", "bil", "bip"):
            a = (rng.random((2, 3, 4)) * 100).astype(t)
            head = (f"ENVI\ndescription = {{seed}}\nsamples = 4\nlines = 3\nbands = 2\nheader offset = 0\n"
                    f"file type = ENVI Standard\ndata type = {code}\ninterleave = {il}\nbyte order = {code % 2}\n"
                    "wavelength units = Nanometers\nwavelength = {450.5, 550.25}\nband names = {a, b}\n"
                    "map info = {UTM, 1, 1, 500000, 4000000, 30, 30, 13, North, WGS-84}\n")
            out("envi", f"t{code}_{il}", head + "\n@@\n" + a.tobytes().decode("latin-1"))
    a = np.arange(24, dtype=np.uint8).tobytes()
    out("envi", "gzip", "ENVI\nsamples = 4\nlines = 3\nbands = 2\ndata type = 1\nfile compression = 1\n\n@@\n"
        + gzip.compress(a).decode("latin-1"))
    out("envi", "offset", "ENVI\nsamples = 4\nlines = 3\nbands = 2\ndata type = 1\nheader offset = 5\n\n@@\n"
        + "HEAD!" + a.decode("latin-1"))
    for hdr in sorted(SHARED.glob("envi/*/*.hdr")) + [ROOT / "data/samson/samson_1.img.hdr"]:
        if not hdr.exists():
            continue
        text = hdr.read_text(errors="replace")
        text = re.sub(r"samples\s*=\s*\d+", "samples = 2", text)
        text = re.sub(r"lines\s*=\s*\d+", "lines = 2", text)
        bands = int(re.search(r"bands\s*=\s*(\d+)", text).group(1))
        size = {1: 1, 2: 2, 4: 4, 12: 2}.get(int(re.search(r"data type\s*=\s*(\d+)", text).group(1)), 2)
        out("envi", "real_" + hdr.stem.replace(".", "_"), text + "\n@@\n" + bytes(range(256)).decode("latin-1")[: 4 * bands * size % 256] * (1 + 4 * bands * size // 256))


def npy_seeds():
    for t in ("u1", "<u2", "<i2", "<i4", "<u4", "<f4", "<f8", ">f4", ">i2", "|b1"):
        for shape in ((3, 4), (3, 4, 2)):
            for order in ("C", "F"):
                buf = io.BytesIO()
                np.save(buf, np.asarray(rng.random(shape) * 50, dtype=t, order=order))
                out("npy", f"{t.strip('<>|')}_{len(shape)}d_{order}", buf.getvalue())


def mat_seeds():
    arrays = {"u8": np.arange(12, dtype=np.uint8).reshape(3, 4), "f32": rng.random((3, 4, 2)).astype(np.float32),
              "i16": np.arange(-6, 6, dtype=np.int16).reshape(3, 4), "cube": rng.random((2, 3, 4))}
    for name, a in arrays.items():
        for compress in (False, True):
            buf = io.BytesIO()
            scipy.io.savemat(buf, {name: a, "note": "text"}, do_compression=compress)
            out("mat", f"v5_{name}_{int(compress)}", buf.getvalue())
        if a.ndim == 2:
            buf = io.BytesIO()
            scipy.io.savemat(buf, {name: a.astype(np.float64)}, format="4")
            out("mat", f"v4_{name}", buf.getvalue())
    for f in sorted(SHARED.glob("classification/*/*.mat")):
        if f.stat().st_size <= 4096:
            out("mat", "real_" + f.stem, f.read_bytes())


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_seeds():
    import cv2
    for name, a in {"gray8": rng.integers(0, 255, (5, 7), dtype=np.uint8),
                    "rgb8": rng.integers(0, 255, (5, 7, 3), dtype=np.uint8),
                    "rgba8": rng.integers(0, 255, (5, 7, 4), dtype=np.uint8),
                    "gray16": rng.integers(0, 65535, (5, 7), dtype=np.uint16),
                    "rgb16": rng.integers(0, 65535, (5, 7, 3), dtype=np.uint16)}.items():
        ok, enc = cv2.imencode(".png", a)
        out("png", name, enc.tobytes())
        ok, enc = cv2.imencode(".jpg", a.astype(np.uint8) if a.dtype == np.uint8 and a.ndim == 2 or (a.ndim == 3 and a.shape[2] == 3) else a[..., :3].astype(np.uint8) if a.ndim == 3 else a.astype(np.uint8))
        out("jpeg", name, enc.tobytes())
    # Palette with transparency, 2-bit, interlaced (Adam7): chunks written by hand.
    sig = b"\x89PNG\r\n\x1a\n"
    rows = b"".join(b"\0" + bytes([0b00011011, 0b11100100]) for _ in range(3))
    out("png", "palette2_trns", sig + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 3, 2, 3, 0, 0, 0))
        + png_chunk(b"PLTE", bytes([0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255])) + png_chunk(b"tRNS", b"\0\x80")
        + png_chunk(b"IDAT", zlib.compress(rows)) + png_chunk(b"IEND", b""))
    raw = bytes(range(64))
    passes = b""
    for (x0, y0, dx, dy) in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)):
        for y in range(y0, 8, dy):
            line = bytes(raw[y * 8 + x] for x in range(x0, 8, dx))
            if line:
                passes += b"\0" + line
    out("png", "gray8_adam7", sig + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 0, 0, 0, 1))
        + png_chunk(b"IDAT", zlib.compress(passes)) + png_chunk(b"IEND", b""))


def pnm_seeds():
    out("pnm", "p5", b"P5\n4 3\n255\n" + bytes(range(12)))
    out("pnm", "p5_16", b"P5\n# comment\n2 2\n65535\n" + bytes(range(8)))
    out("pnm", "p6", b"P6 2 2 255 " + bytes(range(12)))
    out("pnm", "p2", b"P2\n3 2\n15\n0 1 2\n3 4 15\n")
    out("pnm", "p3", b"P3\n2 1\n255\n255 0 0  0 255 0\n")


def text_seeds():
    rbfn = {"type": "rbfn", "version": 1, "bands": 3, "centers": [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]],
            "widths": [0.5, 0.7], "weights": [1.0, -0.5], "bias": 0.1, "threshold": 0.5}
    import json
    out("model", "rbfn", json.dumps(rbfn))
    mr = {"type": "multires", "version": 1, "block": 8, "ann1": {"layers": [4, 3, 1], "weights": [[0.1] * 15, [0.2] * 4]},
          "ann2": {"layers": [4, 2, 1], "weights": [[0.3] * 10, [0.1] * 3]}, "threshold": 0.5}
    out("model", "multires", json.dumps(mr))
    stats = {"bands": 3, "kept_bands": [0, 1, 2], "samples": 10, "ddof": 0, "mean": [1, 2, 3],
             "covariance": [1, 0, 0, 0, 1, 0, 0, 0, 1], "dropped": []}
    out("detector_files", "stats", "\0" + json.dumps(stats))
    out("detector_files", "target_pairs", "\1" + json.dumps({"wavelengths": [400, 500, 600, 700, 800], "values": [1, 2, 3, 4, 5]}))
    out("detector_files", "target_list", "\1[0.1, 0.2, 0.3, 0.4]")
    out("detector_files", "target_map", "\1" + json.dumps({"400": 1, "800": 2}))
    out("detector_files", "target_csv", "\2wavelength,value\n400,1\n500,2\n600,3\n700,4\n800,5\n")
    means = {"format": "cubekit-class-means", "classifier": "sam", "bands": 2, "classes": [1, 2], "counts": [5, 6],
             "means": [[0.1, 0.2], [0.3, 0.4]]}
    out("classify_models", "means", "\0" + json.dumps(means))
    svm = ("svm_type c_svc\nkernel_type rbf\ngamma 0.5\nnr_class 2\ntotal_sv 2\nrho 0.1\nlabel 1 2\nnr_sv 1 1\nSV\n"
           "1 1:0.5 2:0.25\n-1 1:-0.5 2:0.75\n")
    scaling = {"format": "cubekit-svm-scaling", "bands": 2, "min": [0, 0], "max": [1, 1], "c": 10}
    out("classify_models", "svm", "\1" + svm + "\n@@\n" + json.dumps(scaling))
    for i, s in enumerate(["0", "0-9,20", "3,3,1", "0-2", "5-1", "a", ""]):
        out("band_list", f"s{i}", bytes([30]) + s.encode())
    # palettes: bare triples, entries with values and centroids, a grey palette
    out("palette", "rgb", "\2" + json.dumps({"palette": [[255, 0, 0], [0, 128, 255]]}))
    out("palette", "entries", "\2" + json.dumps({"palette": [{"values": [1, 2, 3], "centroid": [1.5, 2.5, 3.5]},
                                                               {"values": [9, 8, 7]}]}))
    out("palette", "grey", "\0" + json.dumps({"palette": [[0], [64], [255]]}))
    # moment files: CSV with and without the image column, a JSON file
    out("moments", "csv", "\0band,n,m,re,im,abs\n0,0,0,1.5,0,1.5\n0,1,1,0.25,-0.5,0.559\n0,2,0,0.1,0,0.1\n")
    out("moments", "batch_csv", "\0image,band,n,m,re,im,abs\na.png,0,0,0,1,0,1\nb.png,0,0,0,2,0,2\n")
    out("moments", "json", "\1" + json.dumps({"width": 8, "height": 8, "mapping": "inscribed", "center_x": 3.5,
                                              "center_y": 3.5, "radius": 4, "normalization": "pixelcount",
                                              "max_order": 2, "dtype": "u8",
                                              "moments": [{"band": 0, "n": 0, "m": 0, "re": 1, "im": 0, "abs": 1},
                                                          {"band": 0, "n": 2, "m": 2, "re": 0.1, "im": 0.2, "abs": 0.22}]}))
    # argument syntaxes: byte 0 picks crop, WxH, bytes, devices, the tile flags
    for i, (kind, t) in enumerate([(0, "10,20,8,4"), (0, "0,0,40,30"), (0, "1,2,3"), (1, "64x64"), (1, "0x8"),
                                   (2, "12M"), (2, "1.5G"), (2, "30"), (3, "0,1"), (3, "all"), (3, "0,0"),
                                   (4, "64M|1G|0,1|32x16"), (4, "||all|")]):
        out("arguments", f"a{i}", bytes([kind]) + t.encode())


def cli_seeds():
    """Model, statistics and class-model files as cubekit writes them (needs the CLI: CUBEKIT_CLI)."""
    import os
    import subprocess
    import tempfile
    cli = os.environ.get("CUBEKIT_CLI")
    if not cli:
        print("make_corpus: CUBEKIT_CLI not set; the written model files are not added", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as d:
        p = pathlib.Path(d)
        run = lambda *a: subprocess.run([cli, *map(str, a), "--quiet"], check=True)
        run("synth", "castaways", p / "s.npy", "--width", 256, "--height", 256, "--bands", 8)
        run("train", "rbfn", p / "s.npy", "--labels", p / "s.truth.npy", "-o", p / "rbfn.json")
        run("train", "multires", p / "s.npy", "--labels", p / "s.truth.npy", "-o", p / "mr.json")
        run("detect", "rx", p / "s.npy", p / "rx.npy", "--stats-out", p / "st.json")
        np.save(p / "tr.npy", (np.load(p / "s.truth.npy") > 0).astype(np.uint8) + 1)
        run("classify", p / "s.npy", p / "c.npy", "--train", p / "tr.npy", "--classifier", "svm", "--model-out", p / "m.svm")
        run("classify", p / "s.npy", p / "c2.npy", "--train", p / "tr.npy", "--classifier", "sam", "--model-out", p / "sam.json")
        out("model", "written_rbfn", (p / "rbfn.json").read_bytes())
        out("model", "written_multires", (p / "mr.json").read_bytes())
        out("detector_files", "written_stats", b"\0" + (p / "st.json").read_bytes())
        out("classify_models", "written_means", b"\0" + (p / "sam.json").read_bytes())
        run("quantize", ROOT / "data" / "photos" / "chelsea.png", p / "q.png", "-k", 4, "--palette-out", p / "q.palette.json")
        out("palette", "written", b"\2" + (p / "q.palette.json").read_bytes())
        run("zernike", ROOT / "data" / "samson" / "samson_1.img", "--bands", 40, "--max-order", 6, "-o", p / "z.csv")
        run("zernike", ROOT / "data" / "samson" / "samson_1.img", "--bands", 40, "--max-order", 6, "-o", p / "z.json")
        out("moments", "written_csv", b"\0" + (p / "z.csv").read_bytes())
        out("moments", "written_json", b"\1" + (p / "z.json").read_bytes())
        out("classify_models", "written_svm", b"\1" + (p / "m.svm").read_bytes() + b"\n@@\n" + (p / "m.svm.scaling.json").read_bytes())


def gdal_seeds():
    """Small GeoTIFFs as cubekit writes them through GDAL (needs a CLI built with GDAL: CUBEKIT_CLI), and a
    georeferenced window of the Landsat scene when ../shared/data is there."""
    import os
    import subprocess
    import tempfile
    cli = os.environ.get("CUBEKIT_CLI")
    if not cli:
        return
    with tempfile.TemporaryDirectory() as d:
        p = pathlib.Path(d)
        run = lambda *a: subprocess.run([cli, *map(str, a), "--quiet"], check=True)
        samson = ROOT / "data" / "samson" / "samson_1.img"
        for name, extra in [("i16_3", ["--bands", "0-2"]), ("u8_1", ["--bands", "5", "--out-type", "u8"]),
                            ("f32_2", ["--bands", "7,9", "--out-type", "f32"]), ("f64_1", ["--bands", "1", "--out-type", "f64"])]:
            run("convert", samson, p / f"{name}.tif", "--crop", "0,0,8,6", *extra)
            out("gdal", name, (p / f"{name}.tif").read_bytes())
        landsat = SHARED / "multispectral" / "L7_ETMs.tif"
        if landsat.exists():
            run("convert", landsat, p / "landsat.tif", "--crop", "10,10,8,8")
            out("gdal", "landsat_window", (p / "landsat.tif").read_bytes())


if __name__ == "__main__":
    envi_seeds(); npy_seeds(); mat_seeds(); png_seeds(); pnm_seeds(); text_seeds(); cli_seeds(); gdal_seeds()
    print("corpora:", {d.name: len(list(d.iterdir())) for d in sorted((HERE / "corpus").iterdir())}, file=sys.stderr)
