"""cubekit.read / write: every format's round trip, metadata, errors with nothing written."""
import os

import numpy as np
import pytest

import cubekit


def test_read_samson_metadata(samson):
    cube, meta = samson
    assert cube.shape == (95, 95, 156) and cube.dtype == np.int16
    assert len(meta["wavelengths"]) == 156 and meta["format"] == "envi"
    assert meta["wavelengths"][0] < meta["wavelengths"][-1]


@pytest.mark.parametrize("name", ["x.npy", "x.hdr", "x.bil", "x.bip"])
def test_round_trip_keeps_samples_and_metadata(name, samson, tmp_path):
    cube, meta = samson
    part = cube[3:40, 7:50, 20:30]
    sub = {"wavelengths": meta["wavelengths"][20:30], "wavelength_units": meta["wavelength_units"],
           "map_info": "UTM, 1, 1, 500000, 4000000, 30, 30, 13, North, WGS-84"}
    cubekit.write(tmp_path / name, part, metadata=sub)
    back, m = cubekit.read(tmp_path / name)
    np.testing.assert_array_equal(back, part)
    if name != "x.npy":
        np.testing.assert_allclose(m["wavelengths"], sub["wavelengths"], rtol=1e-6)
        assert m["map_info"].replace(" ", "") == sub["map_info"].replace(" ", "")


@pytest.mark.parametrize("shape,dtype", [((20, 30), np.uint8), ((20, 30, 3), np.uint8), ((20, 30, 4), np.uint16)])
def test_png_round_trip(shape, dtype, rng, tmp_path):
    a = rng.integers(0, np.iinfo(dtype).max, size=shape).astype(dtype)
    cubekit.imsave(tmp_path / "a.png", a)
    np.testing.assert_array_equal(cubekit.imread(tmp_path / "a.png"), a)


def test_cli_reads_what_python_wrote(cli, rng, tmp_path):
    a = rng.normal(size=(9, 11, 5)).astype(np.float32)
    cubekit.write(tmp_path / "a.hdr", a)
    cli("convert", tmp_path / "a.hdr", tmp_path / "b.npy", "--quiet")
    np.testing.assert_array_equal(np.load(tmp_path / "b.npy"), a)


def test_errors_name_the_file_and_leave_nothing(tmp_path):
    with pytest.raises(OSError, match="missing.hdr"):
        cubekit.read(tmp_path / "missing.hdr")
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"not a numpy file")
    with pytest.raises(ValueError, match="bad.npy"):
        cubekit.read(bad)
    with pytest.raises(ValueError):
        cubekit.write(tmp_path / "f.png", np.zeros((4, 4), np.float32) + 1)
    assert not (tmp_path / "f.png").exists()
    assert sorted(os.listdir(tmp_path)) == ["bad.npy"]
    with pytest.raises(ValueError, match="metadata key 'wavelength'"):
        cubekit.write(tmp_path / "g.hdr", np.ones((2, 2, 2), np.uint8), metadata={"wavelength": [1, 2]})


@pytest.mark.parametrize("level", ["fast", "default", "small"])
def test_png_compression_levels_decode_alike(level, rng, tmp_path):
    a = np.repeat(rng.integers(0, 255, size=(64, 8, 3)).astype(np.uint8), 8, axis=1)  # runs and noise
    cubekit.write(tmp_path / "a.png", a, png_compression=level)
    np.testing.assert_array_equal(cubekit.imread(tmp_path / "a.png"), a)
    with pytest.raises(ValueError, match="png_compression"):
        cubekit.write(tmp_path / "b.png", a, png_compression="tiny")
    assert not (tmp_path / "b.png").exists()


def test_gdal_is_loaded_only_for_a_file_that_needs_it(tmp_path):
    """GDAL (~70 libraries, ~35 ms of start-up) stays out of the process until a file no other
    reader takes is opened (the plugin libcubekit_gdal.so)."""
    import subprocess
    import sys
    from conftest import SHARED
    tif = SHARED / "multispectral" / "L7_ETMs.tif"
    code = f"""
import cubekit
maps = lambda: open('/proc/self/maps').read()
cubekit.imread(cubekit.data_path('chelsea')); cubekit.read(cubekit.data_path('samson'))
print('gdal after png/envi:', 'libgdal' in maps())
if {str(tif)!r} and __import__('os').path.exists({str(tif)!r}) and cubekit.gdal_available():
    a, m = cubekit.read({str(tif)!r})
    print('gdal after tif:', 'libgdal' in maps(), a.shape, m['format'])
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "gdal after png/envi: False" in r.stdout
    if "gdal after tif" in r.stdout:
        assert "gdal after tif: True" in r.stdout and r.stdout.rstrip().endswith(" gdal")


@pytest.mark.skipif(not cubekit.gdal_available(), reason="GDAL not available")
def test_geotiff_written_with_its_georeference(tmp_path):
    x = (np.random.default_rng(3).random((21, 34, 2)) * 1000).astype(np.int16)
    wkt = ('GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563]],PRIMEM["Greenwich",0],'
           'UNIT["degree",0.0174532925199433]]')
    cubekit.write(tmp_path / "a.tif", x, metadata={"coordinate_system": wkt, "extra": {"geotransform": "5, 0.25, 0, 45, 0, -0.25"}})
    y, meta = cubekit.read(tmp_path / "a.tif")
    assert np.array_equal(x, y)
    assert "WGS" in meta["coordinate_system"]
    assert [float(v) for v in meta["extra"]["geotransform"].split(",")] == [5, 0.25, 0, 45, 0, -0.25]
    # Its ENVI copy stays georeferenced (map info made from the geotransform).
    cubekit.write(tmp_path / "a.hdr", y, metadata=meta)
    assert cubekit.read(tmp_path / "a.hdr")[1]["map_info"].startswith("Arbitrary, 1, 1, 5, 45, 0.25, 0.25")


def _envi_pair(tmp_path, data: bytes, extra_header: str = ""):
    (tmp_path / "x.hdr").write_text("ENVI\nsamples = 6\nlines = 4\nbands = 2\nheader offset = 0\n"
                                    "data type = 12\ninterleave = bsq\nbyte order = 0\n" + extra_header)
    (tmp_path / "x.img").write_bytes(data)
    return tmp_path / "x.hdr"


def test_envi_data_longer_than_the_header_is_read_with_a_warning(tmp_path):
    cube = (np.arange(48, dtype=np.uint16) * 97 + 5).reshape(2, 4, 6)  # bands, lines, samples
    hdr = _envi_pair(tmp_path, cube.tobytes() + b"\0\0\0\0\0")
    with pytest.warns(UserWarning, match="5 bytes after the 96"):
        array, meta = cubekit.read(hdr)
    np.testing.assert_array_equal(array, np.moveaxis(cube, 0, -1))
    assert len(meta["warnings"]) == 1
    cubekit.write(tmp_path / "y.npy", array, metadata=meta)  # the warnings are not written (nor refused)


def test_gzip_envi_data_is_read(tmp_path):
    import gzip
    cube = (np.arange(48, dtype=np.uint16) * 131 + 3).reshape(2, 4, 6)
    hdr = _envi_pair(tmp_path, gzip.compress(cube.tobytes()), "file compression = 1\n")
    array, meta = cubekit.read(hdr)
    np.testing.assert_array_equal(array, np.moveaxis(cube, 0, -1))
    assert meta["warnings"] == []
