"""compare on volumes (issue 24 §5): a DICOM series is compared slice by slice and measured as one volume (IoU /
Dice per class over every voxel, the disagreement counts summed), with the picture of its slice where A and B
disagree most; was an error row ("volumes are not supported by compare"). The viewer's Compare all:
tests/ui/test_compare_all_volumes.py."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from test_cli import read_report

from app.cli import main
from app.io.render import DISAGREEMENT_COLORS
from tests.dicom_factory import disc_slice, write_series

SLICES = 4
DISC_VOXELS = sum(int((disc_slice(k, 32, 32) > 0).sum()) for k in range(SLICES))


@pytest.fixture
def ct_blind(models):
    """The ct_model's network windowed so high that the +60 HU disc is background: it finds nothing."""
    path = models("binary_logits", "ct_blind")
    path.with_suffix(".yaml").write_text("input:\n  window: [300, 400]\nclasses:\n  - background\n  - {name: disc, "
                                         "color: '#ff0000'}\n")
    return path


def test_compare_measures_a_series_as_one_volume(ct_model, ct_blind, tmp_path, capsys):
    write_series(tmp_path / "in" / "ct", slices=SLICES)
    out = tmp_path / "out"
    assert main(["compare", str(ct_model), str(ct_blind), str(tmp_path / "in"), "--out", str(out),
                 "--no-progress"]) == 0
    (row,) = read_report(out / "seglens_compare.csv")
    assert row["status"] == "ok" and row["error"] == ""
    assert (row["width"], row["height"]) == ("32", "32")
    assert (row["only_a_pixels"], row["only_b_pixels"], row["different_pixels"]) == (str(DISC_VOXELS), "0", "0")
    assert row["iou"] == row["dice"] == "0.000000"  # B misses every disc voxel of A
    (picture,) = out.rglob("*_disagreement.png")
    pixels = np.asarray(Image.open(picture))
    assert tuple(pixels[16, 16]) == DISAGREEMENT_COLORS[1]  # only A, at the disc's centre
    radius = 4 + 2 * (SLICES - 1)  # the slice shown is the one where they disagree most: the biggest disc
    assert tuple(pixels[16, 16 + radius - 1]) == DISAGREEMENT_COLORS[1]
    said = capsys.readouterr()
    assert "1 input: 1 ok, 0 failed" in said.out and "volumes are not supported" not in said.err


def test_a_series_against_itself_is_identical(ct_model, tmp_path, capsys):
    write_series(tmp_path / "in" / "ct", slices=SLICES)
    assert main(["compare", str(ct_model), str(ct_model), str(tmp_path / "in"), "--out", str(tmp_path / "out"),
                 "--no-progress"]) == 0
    (row,) = read_report(tmp_path / "out" / "seglens_compare.csv")
    assert row["iou"] == row["dice"] == "1.000000" and row["only_a_pixels"] == "0"
    assert "all identical (IoU 1.000)" in capsys.readouterr().out
