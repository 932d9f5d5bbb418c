"""The viewer's whole-volume count (app.runs.volume_fill): batched steps, slices already run are not run again, an
unreadable slice is left out and said so."""

from __future__ import annotations

import numpy as np

from app.inference.session import open_session
from app.inference.spec import load_spec
from app.io.discover import discover
from app.runs.volume_fill import VolumeFill
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


def test_an_unreadable_slice_is_left_out_and_named(models, tmp_path):
    volume, session, paths = _volume_and_model(models, tmp_path, 4)
    paths[2].unlink()
    fill = VolumeFill(session, volume)
    fill.step()
    assert fill.complete and list(fill.errors) == [2] and paths[2].name in fill.errors[2]
    assert int(fill.totals()[1]) == sum(int((disc_slice(k, 32, 32) > 0).sum()) for k in (0, 1, 3))
