"""A series' shared display window when its middle slice, which chooses it, is a colour picture."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pydicom

from app.io.discover import discover
from app.io.images import read_slice
from app.io.window import apply_window, auto_window
from tests.dicom_factory import disc_slice, write_series


def _colour_middle_series(folder: Path) -> list[Path]:
    """Three CT slices without a window in their headers; the middle one rewritten as an RGB picture."""
    paths = write_series(folder, slices=3)
    for path in paths:
        ds = pydicom.dcmread(path)
        del ds.WindowCenter, ds.WindowWidth
        ds.save_as(path, enforce_file_format=True)
    ds = pydicom.dcmread(paths[1])
    for keyword in ("RescaleSlope", "RescaleIntercept", "RescaleType"):
        delattr(ds, keyword)
    ds.SamplesPerPixel, ds.PhotometricInterpretation, ds.PlanarConfiguration = 3, "RGB", 0
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 8, 8, 7, 0
    ds.PixelData = np.full((ds.Rows, ds.Columns, 3), 90, np.uint8).tobytes()
    ds.save_as(paths[1], enforce_file_format=True)
    return paths


def test_a_grey_slice_of_a_series_whose_middle_slice_is_colour_gets_its_own_automatic_window(tmp_path):
    # The middle slice's window is shared by the series; a colour middle slice has none, and the grey slices were
    # then read with no window at all (TypeError: 'NoneType' object is not subscriptable).
    _colour_middle_series(tmp_path / "series")
    (item,) = discover([tmp_path / "series"])
    volume = item.volume
    assert volume is not None and volume.depth == 3 and volume.window is None

    image = read_slice(volume, 0)

    raw = (disc_slice(0, 32, 32)).astype(np.float32)
    np.testing.assert_array_equal(image.raw, raw)
    assert image.window == auto_window(raw)
    np.testing.assert_array_equal(image.pixels, apply_window(raw, *auto_window(raw)))
    assert image.info["Window"].endswith("(auto)")
