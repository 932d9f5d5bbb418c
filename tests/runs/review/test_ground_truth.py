"""Which reference applies to an image (app.runs.review.ground_truth, moved down from app/ui/workers in issue 25): a
correction saved in the inputs' review folder first, else the reference folder's mask matched by relative path and
stem; every problem a one-line notice, never an exception."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from app.inference.model.builder import load_spec
from app.io.discover import InputFile
from app.runs.review.ground_truth import GroundTruth, References
from app.runs.review.log import review_folder, save_corrected_mask


@pytest.fixture
def spec(models):
    return load_spec(models("fixed_bright_spots"))


def _mask(rows: slice, cols: slice, shape=(4, 5)) -> np.ndarray:
    mask = np.zeros(shape, np.uint8)
    mask[rows, cols] = 1
    return mask


@pytest.fixture
def folders(tmp_path):
    """(inputs, references): x.png under inputs, a reference x_mask.png whose left half is foreground."""
    inputs, references = tmp_path / "inputs", tmp_path / "truth"
    inputs.mkdir()
    references.mkdir()
    Image.fromarray(np.zeros((4, 5), np.uint8)).save(inputs / "x.png")
    Image.fromarray(_mask(slice(None), slice(0, 2))).save(references / "x_mask.png")
    return inputs, references


def test_the_reference_folder_mask_is_measured_by_stem(spec, folders):
    inputs, references = folders
    scored, reference = References().compare(inputs / "x.png", _mask(slice(None), slice(0, 1)), spec,
                                             GroundTruth(inputs, references))
    assert scored.reference == str(references / "x_mask.png") and scored.notice is None
    assert scored.metrics.iou == pytest.approx(0.5)  # 4 of the reference's 8 pixels, none outside it
    assert np.array_equal(reference, _mask(slice(None), slice(0, 2)))


def test_a_saved_correction_comes_before_the_reference_folder(spec, folders):
    inputs, references = folders
    corrected = save_corrected_mask(review_folder(inputs), "x.png", _mask(slice(None), slice(0, 1)),
                                    input_root=inputs)
    scored, _ = References().compare(inputs / "x.png", _mask(slice(None), slice(0, 1)), spec,
                                     GroundTruth(inputs, references))
    assert scored.reference == str(corrected) and scored.metrics.iou == pytest.approx(1.0)


def test_no_reference_and_a_misfit_are_one_line_notices(spec, folders):
    inputs, references = folders
    Image.fromarray(np.zeros((4, 5), np.uint8)).save(inputs / "y.png")
    scored, reference = References().compare(inputs / "y.png", _mask(slice(None), slice(0, 1)), spec,
                                             GroundTruth(inputs, references))
    assert scored.metrics is None and reference is None and scored.notice.startswith("y.png: ")
    scored, reference = References().compare(inputs / "x.png", _mask(slice(None), slice(0, 1), (3, 3)), spec,
                                             GroundTruth(inputs, references))
    assert (scored.notice, reference) == ("reference x_mask.png is 5×4, the image 3×3", None)


def test_nothing_is_looked_for_outside_the_inputs_or_without_a_folder(spec, folders, tmp_path):
    inputs, references = folders
    mask = _mask(slice(None), slice(0, 1))
    assert References().compare(tmp_path / "elsewhere.png", mask, spec, GroundTruth(inputs, references)) == \
        (None, None)
    assert References().compare(inputs / "x.png", mask, spec, GroundTruth(None, references)) == (None, None)
    assert References().compare(inputs / "x.png", mask, spec, GroundTruth(inputs)) == (None, None)


def test_the_report_metrics_give_iou_and_dice_or_none(spec, folders):
    inputs, references = folders
    measure = References().metrics(spec, GroundTruth(inputs, references))
    found = measure(InputFile(inputs / "x.png", inputs.parent / "x.png"), _mask(slice(None), slice(0, 2)))
    assert found == {"iou": pytest.approx(1.0), "dice": pytest.approx(1.0)}
    assert measure(InputFile(inputs / "y.png", inputs.parent / "y.png"), _mask(slice(None), slice(0, 2))) is None
