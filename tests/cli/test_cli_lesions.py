"""seglens-cli run on volumes with a volume rule: the report's component columns (connectivity, count and largest
mL per class, from the assembled label volume) and the volume's verdict by `min_component_ml`, on a DICOM series
(tests/dicom_factory.py), a NIfTI volume with known lesions, and a plain PNG in the same run."""

from __future__ import annotations

import csv
from pathlib import Path

import cv2
import numpy as np
import pytest

from app.cli import main
from tests.dicom_factory import disc_slice, write_series

RULE = "verdict:\n  fail_if:\n    - {class: disc, min_component_ml: 0.5}\n"


def _rows(report: Path) -> list[dict]:
    with open(report, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def write_lesions(path: Path) -> None:
    """A NIfTI (i, j, k) = 24 × 20 × 10 at 0.9 × 1.1 × 3 mm (2.97 mm³ a voxel): a block of 48 voxels, and a block of
    144 with a 4-voxel block touching it at one corner (one component of 148 at 26-connectivity)."""
    import nibabel as nib

    data = np.zeros((24, 20, 10), np.int16)
    data[2:6, 2:6, 1:4] = 100
    data[10:16, 10:16, 5:9] = 100
    data[16:18, 16:18, 9:10] = 100
    affine = np.array([[-0.9, 0, 0, 10.0], [0, 1.1, 0, -20.0], [0, 0, 3.0, 5.0], [0, 0, 0, 1]])
    nib.save(nib.Nifti1Image(data, affine), str(path))


def test_component_columns_and_the_volume_rule_in_the_report(ct_model, tmp_path):
    ct_model.with_suffix(".yaml").write_text(ct_model.with_suffix(".yaml").read_text() + RULE)
    inputs = tmp_path / "in"
    paths = write_series(inputs / "ct", slices=6)  # nested discs growing with k: one cone-shaped component
    write_lesions(inputs / "lesions.nii.gz")
    cv2.imwrite(str(inputs / "plain.png"), np.full((16, 16), 200, np.uint8))
    out = tmp_path / "out"
    assert main(["run", str(ct_model), str(inputs), "--out", str(out), "--per-slice", "--export", "nifti"]) == 0

    rows = _rows(out / "seglens_report.csv")
    assert {"connectivity", "components_disc", "largest_ml_disc"} <= set(rows[0])
    assert "components_background" not in rows[0]
    import pydicom

    uid = str(pydicom.dcmread(paths[0]).SeriesInstanceUID)
    series = next(r for r in rows if r["path"].endswith(uid))
    cone = int(sum((disc_slice(k, 32, 32) > 0).sum() for k in range(6)))
    ml = cone * 2.5 * 0.7 * 0.8 / 1000
    assert (series["connectivity"], series["components_disc"]) == ("26", "1")
    assert series["largest_ml_disc"] == f"{ml:.3f}" == series["ml_disc"]
    assert (series["verdict"], series["verdict_reason"]) == (
        "ng", f"disc component {ml:.3g} mL >= 0.5 mL (26-connected, {cone} voxels)")

    nifti = next(r for r in rows if r["path"].endswith("lesions.nii.gz"))
    assert (nifti["connectivity"], nifti["components_disc"]) == ("26", "2")
    assert nifti["largest_ml_disc"] == f"{148 * 2.97 / 1000:.3f}"  # 0.440 mL: under the limit
    assert (nifti["verdict"], nifti["verdict_reason"]) == ("ok", "")

    slices = [r for r in rows if r["slice"]]
    assert len(slices) == 16
    assert {(r["verdict"], r["connectivity"], r["components_disc"], r["largest_ml_disc"]) for r in slices} == \
        {("", "", "", "")}  # no rule judges one slice; the components are the volume's

    plain = next(r for r in rows if r["path"].endswith("plain.png"))
    assert (plain["verdict"], plain["verdict_reason"]) == (
        "ng", "no volume to judge a disc component of >= 0.5 mL (26-connected, in 3D) by (one 2D image or slice)")
    assert plain["connectivity"] == plain["components_disc"] == ""


def test_the_columns_without_a_rule_and_without_lesions(ct_model, tmp_path):
    import nibabel as nib

    nib.save(nib.Nifti1Image(np.zeros((8, 8, 4), np.int16), np.diag([1.0, 1.0, 2.0, 1.0])),
             str(tmp_path / "empty.nii.gz"))
    assert main(["run", str(ct_model), str(tmp_path / "empty.nii.gz"), "--out", str(tmp_path / "out")]) == 0
    (row,) = _rows(tmp_path / "out" / "seglens_report.csv")
    assert (row["connectivity"], row["components_disc"], row["largest_ml_disc"]) == ("26", "0", "0.000")
    assert row["verdict"] == row["verdict_reason"] == ""


@pytest.mark.parametrize("limit", [0.4, 0.439])
def test_the_rule_fires_at_and_above_its_limit_on_the_nifti(ct_model, tmp_path, limit):
    ct_model.with_suffix(".yaml").write_text(ct_model.with_suffix(".yaml").read_text()
                                             + RULE.replace("0.5", str(limit)))
    write_lesions(tmp_path / "lesions.nii.gz")
    assert main(["run", str(ct_model), str(tmp_path / "lesions.nii.gz"), "--out", str(tmp_path / "out")]) == 0
    (row,) = _rows(tmp_path / "out" / "seglens_report.csv")
    assert (row["verdict"], row["verdict_reason"]) == (
        "ng", f"disc component 0.44 mL >= {limit:g} mL (26-connected, 148 voxels)")
