"""A DICOM's value tags are checked where they are decoded (app.io.dicom): a RescaleSlope or RescaleIntercept that
is NaN, infinite or absurd is one line naming the file and the tag (it made every pixel NaN or inf: a model saw
garbage, a 3D model blamed 'the volume'); a window of NaN falls back to the automatic one."""

from __future__ import annotations

import numpy as np
import pytest
from test_dicom import write_dicom

from app.errors import ImageError
from app.io.images import read_image


@pytest.mark.parametrize(("slope", "intercept", "says"), [
    (float("nan"), 0.0, "RescaleSlope nan is not a usable scale"),
    (1e306, 0.0, "RescaleSlope 1e+306 is not a usable scale"),
    (1.0, float("inf"), "RescaleIntercept inf is not a usable offset"),
])
def test_an_unusable_rescale_is_one_line_naming_the_file_and_the_tag(tmp_path, slope, intercept, says) -> None:
    path = write_dicom(tmp_path / "ct.dcm", np.full((8, 8), 100, np.int16), slope=slope, intercept=intercept)
    with pytest.raises(ImageError) as caught:
        read_image(path)
    assert str(caught.value) == f"{path}: {says}: the pixel values cannot be read from it"


def test_a_nan_window_falls_back_to_the_automatic_one(tmp_path) -> None:
    frame = np.arange(64, dtype=np.int16).reshape(8, 8)
    path = write_dicom(tmp_path / "ct.dcm", frame, window=(float("nan"), 400.0))
    image = read_image(path)
    assert np.isfinite(image.window).all() and image.info["Window"].endswith("(auto)")
    assert image.pixels.min() == 0 and image.pixels.max() == 255
