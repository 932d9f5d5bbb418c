"""The viewer's whole-volume count (app.runs.view.fill): batched steps, slices already run are not run again, an
unreadable slice is left out and said so."""

from __future__ import annotations

import numpy as np
import pytest

from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.io.discover import discover
from app.runs.view.fill import VolumeFill
from tests.dicom_factory import disc_slice, write_series


def _volume_and_model(models, tmp_path, slices: int):
    paths = write_series(tmp_path / "ct", slices=slices)
    model = models("binary_logits")
    model.with_suffix(".yaml").write_text("input:\n  window: [40, 400]\n")
    session = open_session(load_spec(model), "cpu", warm_up=False)
    (item,) = discover([tmp_path / "ct"])
    return item.volume, session, paths


def test_steps_count_every_slice_in_batches_and_skip_what_the_viewer_ran(models, tmp_path, model_runs):
    volume, session, _ = _volume_and_model(models, tmp_path, 10)
    fill = VolumeFill(session, volume, chunk=4)
    fill.add(0, (disc_slice(0, 32, 32) > 0).astype(np.uint8))  # the slice on screen: counted, not run again
    while not fill.complete:
        fill.step()
    assert [shape[0] for shape in model_runs] == [4, 4, 1]  # 9 slices left: two batches of 4, then 1
    expected = sum(int((disc_slice(k, 32, 32) > 0).sum()) for k in range(10))
    assert int(fill.totals()[1]) == expected and fill.done == fill.total == 10
    assert np.isclose(fill.millilitres()[1], expected * 2.5 * 0.7 * 0.8 / 1000)


def test_an_unreadable_slice_fails_the_count_naming_it(models, tmp_path):
    """Was: the slice was left out and the other three summed as the volume's figure (the legend said "all 4
    slices"). A whole-volume count without one of its slices is not the volume's: the count failed."""
    volume, session, paths = _volume_and_model(models, tmp_path, 4)
    paths[2].unlink()
    fill = VolumeFill(session, volume)
    fill.step()
    assert fill.complete and fill.failure is not None and fill.failure[0] == 2
    assert fill.failure_line().startswith("slice 3 of 4 failed: ") and paths[2].name in fill.failure_line()


def _bright_series_with_a_dark_slice(models, tmp_path, slices: int, dark: int):
    """A series the `nan_where_dark` model runs finite on (input.range maps air and tissue to white), but for
    slice `dark`, below the range: black, so the model's logits there are NaN."""
    import pydicom

    paths = write_series(tmp_path / "ct", slices=slices)
    ds = pydicom.dcmread(paths[dark])
    ds.PixelData = np.full((32, 32), -200, np.int16).tobytes()  # -1224 HU, below the range: black
    ds.save_as(paths[dark])
    model = models("nan_where_dark")
    model.with_suffix(".yaml").write_text("classes: [background, lesion]\ninput:\n  range: [-1100, -1050]\n")
    session = open_session(load_spec(model), "cpu", warm_up=False)
    (item,) = discover([tmp_path / "ct"])
    return item.volume, session


@pytest.mark.parametrize("chunk", [1, 4])
def test_a_nan_slice_fails_the_count_naming_that_slice_and_the_model_error(models, tmp_path, chunk):
    """Was: the worker's step raised, the count stopped with a log warning and the legend kept the slices counted
    so far as if they were the volume's. Batched or not, the slice named is the NaN one."""
    volume, session = _bright_series_with_a_dark_slice(models, tmp_path, 5, dark=2)
    fill = VolumeFill(session, volume, chunk=chunk)
    fill.add(0, np.ones((32, 32), np.uint8))  # the slice on screen
    steps = 0
    while not fill.complete:
        fill.step()
        steps += 1
    assert fill.failure is not None and fill.failure[0] == 2
    assert fill.failure_line() == ("slice 3 of 5 failed: nan_where_dark.onnx: non-finite model output 'logits': "
                                   "1024 NaN of 1024 values; the model is broken, so no decision is made from it")
    assert fill.step() == 0  # nothing more is run once the count has failed
    assert steps <= 3


def test_a_volume_without_failures_has_no_failure_line(models, tmp_path):
    volume, session = _bright_series_with_a_dark_slice(models, tmp_path, 3, dark=0)
    fill = VolumeFill(session, volume)
    fill.add(0, np.ones((32, 32), np.uint8))  # the dark slice was "run" by the viewer: its mask is given
    while not fill.complete:
        fill.step()
    assert fill.failure is None and fill.failure_line() == "" and int(fill.totals()[1]) == 3 * 32 * 32


def test_the_whole_label_volume_once_every_slice_is_counted(models, tmp_path):
    """The three-plane view shows the fill's masks as one label volume [D, H, W]: none before the last slice,
    the slice the viewer ran in its place, each slice's disc at its k."""
    volume, session, _ = _volume_and_model(models, tmp_path, 5)
    fill = VolumeFill(session, volume, chunk=2)
    fill.add(3, (disc_slice(3, 32, 32) > 0).astype(np.uint8))
    fill.step()
    assert fill.labels() is None  # 3 of 5 slices: not the volume yet
    while not fill.complete:
        fill.step()
    labels = fill.labels()
    assert labels is not None and labels.shape == (5, 32, 32) and labels.dtype == np.uint8
    for k in range(5):
        assert np.array_equal(labels[k], (disc_slice(k, 32, 32) > 0).astype(np.uint8))
