"""A volume's slice is measured against its own correction in the viewer (issue 28): a slice's view says
frame_count 1 (read_slice), so the worker looked for the series' one `<name>_mask.png` for every slice; and a
retune (the difference layer) of that slice measures it the same way."""

from __future__ import annotations

import numpy as np
import pytest

from app.runs.review.log import review_folder, save_corrected_mask

TIMEOUT = 20_000
DEPTH, SIDE = 8, 32


@pytest.fixture
def volume_window(qtbot, make_main_window, models, tmp_path):
    import nibabel as nib

    values = np.zeros((DEPTH, SIDE, SIDE), np.int16)
    values[:, :, 16:] = 200  # the binary test model's mask: the right half
    data = tmp_path / "data"
    data.mkdir()
    path = data / "ball.nii.gz"
    nib.save(nib.Nifti1Image(values.transpose(2, 1, 0), np.eye(4)), str(path))
    window = make_main_window(models("binary_logits"))
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([data])
    return window, str(path), data


def _show(qtbot, window, path: str, frame: int):
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.show_path(path, frame)
    return window.state.shown


def test_each_slice_is_measured_against_its_own_correction(qtbot, volume_window):
    window, path, data = volume_window
    folder = review_folder(data)
    model_mask = _show(qtbot, window, path, 0).result.mask
    assert model_mask is not None and model_mask[:, 16:].all() and not model_mask[:, :16].any()
    half = model_mask.copy()
    half[:, 24:] = 0  # half of the model's foreground
    fifth = save_corrected_mask(folder, "ball.nii.gz", model_mask, frame=4)
    sixth = save_corrected_mask(folder, "ball.nii.gz", half, frame=5)
    save_corrected_mask(folder, "ball.nii.gz", np.zeros_like(model_mask))  # an older single file: no slice's
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        window.tuner.tune(references=window.state.tuning.references + 1)  # as a saved correction does
    view = _show(qtbot, window, path, 4)
    assert view.scored is not None and view.scored.reference == str(fifth)
    assert view.scored.metrics.iou == pytest.approx(1.0)
    view = _show(qtbot, window, path, 5)
    assert view.scored is not None and view.scored.reference == str(sixth)
    assert view.scored.metrics.iou == pytest.approx(0.5)
    with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
        window.panel.decision.set_layer("difference")  # a retune of slice 6: still its own
    assert window.state.shown.scored.reference == str(sixth)
    assert _show(qtbot, window, path, 6).scored is None  # no correction of slice 7, and the older file is none
