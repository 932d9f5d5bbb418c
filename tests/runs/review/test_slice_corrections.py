"""Per-slice corrections (issue 28): each slice of a volume keeps its own corrected mask in the review folder
(`<name>_slice0007_mask.png` for frame 6), a one-frame picture keeps `<name>_mask.png`, and the ground truth of a
slice is that slice's correction, never another slice's nor the volume's older single file."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from app.inference.model.builder import load_spec
from app.io.files import png_text
from app.runs.review.ground_truth import GroundTruth, References
from app.runs.review.log import (
    MASK_FRAME,
    MASK_MARK,
    Correction,
    corrected_mask_path,
    find_corrected_mask,
    picture_frame,
    review_folder,
    save_corrected_mask,
)

SERIES = "ct/1.2.840.99"  # a series' rel: <folder>/<SeriesInstanceUID>


def _mask(value: int, shape=(4, 5)) -> np.ndarray:
    mask = np.zeros(shape, np.uint8)
    mask[:, :value] = 1
    return mask


def test_two_slices_corrections_are_both_kept(tmp_path):
    folder = tmp_path / "data_review"
    fifth = save_corrected_mask(folder, SERIES, _mask(1), frame=4)
    sixth = save_corrected_mask(folder, SERIES, _mask(3), frame=5)
    assert (fifth.name, sixth.name) == ("1.2.840.99_slice0005_mask.png", "1.2.840.99_slice0006_mask.png")
    assert fifth.parent == sixth.parent == folder / "ct"
    assert (np.array(Image.open(fifth)) == _mask(1)).all() and (np.array(Image.open(sixth)) == _mask(3)).all()
    assert find_corrected_mask(folder, SERIES, 4) == fifth and find_corrected_mask(folder, SERIES, 5) == sixth
    assert find_corrected_mask(folder, SERIES, 6) is None  # a slice never corrected has none
    assert find_corrected_mask(folder, SERIES) is None  # nor has the volume as a whole
    assert png_text(sixth) == {MASK_MARK: SERIES, MASK_FRAME: "6"}
    assert save_corrected_mask(folder, SERIES, _mask(2), frame=4) == fifth  # ours: replaced in place
    assert (np.array(Image.open(fifth)) == _mask(2)).all() and (np.array(Image.open(sixth)) == _mask(3)).all()


def test_a_one_frame_picture_keeps_todays_name(tmp_path):
    assert corrected_mask_path(tmp_path, "sub/x.png") == tmp_path / "sub" / "x.png_mask.png"
    assert corrected_mask_path(tmp_path, "sub/x.png", 0) == tmp_path / "sub" / "x.png_slice0001_mask.png"
    assert picture_frame(0, 1) is None and picture_frame(0, 32) == 0 and picture_frame(31, 32) == 31
    written = Correction(tmp_path, "x.png").save(_mask(2))
    assert written == tmp_path / "x.png_mask.png" and png_text(written) == {MASK_MARK: "x.png"}
    assert Correction(tmp_path, "x.png").find() == written


def test_a_volumes_older_single_correction_is_no_slices(tmp_path):
    """Before issue 28 every slice was saved as `<name>_mask.png`: which slice it was drawn on is unknown."""
    old = save_corrected_mask(tmp_path, SERIES, _mask(1))
    assert find_corrected_mask(tmp_path, SERIES, 4) is None
    save_corrected_mask(tmp_path, SERIES, _mask(2), frame=4)
    assert old.is_file()  # a slice's save leaves it alone (it is no older name of that slice)


def test_a_slice_is_refused_where_a_picture_is(tmp_path):
    inputs = tmp_path / "inputs"
    with pytest.raises(Exception, match="refusing to write a corrected mask inside the input folder"):
        save_corrected_mask(inputs, SERIES, _mask(1), input_root=inputs, frame=2)


@pytest.fixture
def spec(models):
    return load_spec(models("fixed_bright_spots"))


def test_a_slice_is_measured_against_its_own_correction(spec, tmp_path):
    inputs, truth = tmp_path / "inputs", tmp_path / "truth"
    (inputs / "ct").mkdir(parents=True)
    truth.mkdir()
    Image.fromarray(_mask(5)).save(truth / "1.2.840.99_mask.png")  # a reference folder's match by stem
    folder = review_folder(inputs)
    fifth = save_corrected_mask(folder, SERIES, _mask(1), input_root=inputs, frame=4)
    save_corrected_mask(folder, SERIES, _mask(4), input_root=inputs, frame=5)
    references, where = References(), GroundTruth(inputs, truth)
    scored, _ = references.compare(inputs / SERIES, _mask(1), spec, where, frame=4)
    assert scored is not None and scored.reference == str(fifth) and scored.metrics.iou == pytest.approx(1.0)
    scored, reference = references.compare(inputs / SERIES, _mask(1), spec, where, frame=5)
    assert scored is not None and scored.metrics.iou == pytest.approx(0.25) and np.array_equal(reference, _mask(4))
    assert references.compare(inputs / SERIES, _mask(1), spec, where, frame=6) == (None, None)
    scored, _ = references.compare(inputs / SERIES, _mask(1), spec, where)  # a one-frame picture: the folder's
    assert scored is not None and scored.reference == str(truth / "1.2.840.99_mask.png")


def test_the_report_row_of_a_volume_measures_its_corrected_slices(ct_model, tmp_path):
    """The review log marks the volume corrected once (its rel); the HTML report's row names the slices corrected
    and measures each against its own correction (the mean over them)."""
    from app.inference.image import pipeline
    from app.inference.runtime.session import open_session
    from app.io.discover import discover
    from app.io.images import read_slice
    from app.runs.review.items import Naming, corrected_metrics, report_items
    from tests.dicom_factory import write_series

    write_series(tmp_path / "ct", slices=6)
    spec = load_spec(ct_model)
    model = open_session(spec, "cpu")
    (item,) = [i for i in discover([tmp_path]) if i.volume is not None]
    masks = [pipeline.run_image(model, read_slice(item.volume, k)).mask for k in (2, 4)]
    assert all(m is not None and m.any() for m in masks)
    folder = review_folder(tmp_path)
    save_corrected_mask(folder, item.rel.as_posix(), masks[0], frame=2)  # slice 3: the model was right
    save_corrected_mask(folder, item.rel.as_posix(), np.zeros_like(masks[1]), frame=4)  # slice 5: nothing there
    save_corrected_mask(folder, item.rel.as_posix(), np.ones_like(masks[1]))  # an older single file: no slice's
    (row,) = report_items(model, [item], spec=spec, reviews={}, naming=Naming(tmp_path),
                          metrics=corrected_metrics(folder, spec))
    assert ("corrected slices", "3, 5") in row.figures
    assert row.metrics is not None and row.metrics["iou"] == pytest.approx((1.0 + 0.0) / 2)
