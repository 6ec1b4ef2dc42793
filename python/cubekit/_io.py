"""Reading and writing cubes and images with their metadata (cubekit/io.hpp)."""
from __future__ import annotations

import os
import warnings
from pathlib import Path

from . import _cubekit

_DATA = Path(__file__).with_name("data")


def read(path, *, var: str | None = None, format: str = "auto"):
    """Reads a cube or image and its metadata.

    Formats: ENVI (.hdr + data), NumPy .npy, MATLAB .mat (v5 and v7.3), PNG, PGM/PPM, JPEG, and
    GeoTIFF and other GDAL formats when cubekit was built with GDAL (``cubekit.gdal_available()``).

    Returns ``(array, metadata)``: the array is (H, W) for one band, else (H, W, B), in the stored
    element type, sharing the file's interleave as strides (``np.ascontiguousarray`` gives C order);
    ``metadata`` is a dict with ``wavelengths`` (list, one per band, or empty), ``wavelength_units``,
    ``band_names``, ``map_info`` (ENVI 'map info', or GDAL's georeferencing), ``coordinate_system``,
    ``description``, ``extra`` (other ENVI header fields), ``warnings`` (what the reader accepted
    but noticed, e.g. bytes after the samples an ENVI header describes; each is also issued as a
    Python warning) and ``format`` (the format read).

    Raises OSError when the file cannot be opened, ValueError when its content is invalid.

    >>> cube, meta = cubekit.read("scene.hdr")                  # ENVI
    >>> cube, meta = cubekit.read("scene.mat", var="data")      # MATLAB variable (H = rows)
    >>> meta["wavelengths"][:3], meta["map_info"]
    """
    options = {} if var is None else {"var": var}
    array, metadata, used = _cubekit.read(os.fspath(path), options, format)
    metadata["format"] = used
    for said in metadata["warnings"]:
        warnings.warn(said, stacklevel=2)
    return array, metadata


def imread(path, *, var: str | None = None):
    """The array of ``read(path)`` alone (like ``skimage.io.imread``).

    >>> photo = cubekit.imread("photo.png")    # (H, W, 3) uint8
    """
    return read(path, var=var)[0]


def write(path, array, *, metadata: dict | None = None, format: str = "auto", layout: str | None = None,
          png_compression: str | None = None):
    """Writes an (H, W) or (H, W, B) array, atomically: a temporary file renamed when complete, so a
    failure leaves nothing behind.

    Format from the extension (.hdr/.img/.dat/.raw/.bsq/.bil/.bip → ENVI, .npy, .png, .pgm/.ppm, and
    .tif → GeoTIFF through GDAL when ``cubekit.gdal_available()``, with ``coordinate_system`` and the
    geotransform of ``extra["geotransform"]`` or ``map_info``);
    PNG and PNM take uint8 or uint16 with 1–4 (PNG) or 1/3 (PNM) bands. ``metadata`` takes the keys
    ``read`` returns (``format`` and ``warnings`` are ignored); ENVI writes wavelengths, band names and map info into
    its header. ``layout`` ('bsq', 'bil', 'bip') picks the ENVI interleave (default: the array's).
    ``png_compression`` (None: the library's default, 'fast'): 'fast' (zlib level 1: a 4K photo in
    ~0.3 s), 'default' (libpng's level 6: ~15× slower, ~15 % smaller on photos, ~35 % on flat
    images) or 'small' (level 9).

    >>> cube, meta = cubekit.read("scene.hdr")
    >>> cubekit.write("copy.hdr", cube[:, :, 10:20], metadata={**meta, "wavelengths": meta["wavelengths"][10:20]})
    >>> scene, meta = cubekit.read("L7_ETMs.tif")
    >>> cubekit.write("band4.tif", scene[:, :, 3], metadata=meta)   # on the same map (QGIS, rasterio)
    """
    meta = dict(metadata or {})
    meta.pop("format", None)
    meta.pop("warnings", None)
    options = {} if png_compression is None else {"png_compression": png_compression}
    _cubekit.write(os.fspath(path), array, meta, format, layout or "", options)


def imsave(path, array):
    """``write(path, array)`` without metadata (like ``skimage.io.imsave``)."""
    write(path, array)


def mat_variables(path) -> list[str]:
    """Names and shapes of the numeric variables of a MATLAB file: ['data: 100x100x224 int16', ...]."""
    return _cubekit.mat_variables(os.fspath(path))


def data_path(name: str = "samson") -> str:
    """Path of a file shipped with cubekit: 'samson' (95×95×156 ENVI scene, int16, with wavelengths)
    or 'chelsea' (an RGB photo of a cat, PNG).

    >>> cube, meta = cubekit.read(cubekit.data_path("samson"))
    """
    files = {"samson": _DATA / "samson" / "samson_1.img", "chelsea": _DATA / "photos" / "chelsea.png"}
    if name not in files:
        raise ValueError(f"data_path: name = {name!r}; expected one of {', '.join(sorted(files))}")
    return str(files[name])
