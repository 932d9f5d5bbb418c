"""A label volume of millions of components (a noisy model's speckle) is counted cheaply and refused in one line
over the cap, never a Python record per component: 2D (one slice) and 3D, at both connectivities, and through the
report's path (app.runs.folder.lesions), where the volume rules then fail closed."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from app.inference.decide import lesions as lesions_module
from app.inference.decide.lesions import TooManyComponents, lesions
from app.io.volumes import SliceRef, Volume
from app.runs.folder.lesions import volume_components


def speckle(depth: int, side: int) -> np.ndarray:
    """Isolated voxels on every other row, column and slice: each its own component at any connectivity."""
    labels = np.zeros((depth, side, side), np.uint8)
    labels[::2, ::2, ::2] = 1
    return labels


@pytest.mark.parametrize("connectivity", [6, 26])
@pytest.mark.parametrize("depth", [1, 9])  # one slice (2D), a volume (3D)
def test_over_the_cap_is_one_line_and_no_records(depth: int, connectivity: int) -> None:
    labels = speckle(depth, 64)
    count = int(labels.sum())  # 1024 per kept slice
    with pytest.raises(TooManyComponents) as caught:
        lesions(labels, voxel_ml=0.001, connectivity=connectivity, most=1000)
    assert str(caught.value) == (f"class 1 has {count} components ({connectivity}-connected), over the 1000 that "
                                 "are listed: no lesion list")
    assert len(lesions(labels, voxel_ml=0.001, connectivity=connectivity, most=count)) == count  # at the cap: all


def test_too_many_pieces_are_refused_before_they_are_joined(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_PIECES 2D pieces (summed slice by slice as OpenCV counts them) nothing is joined or kept."""
    monkeypatch.setattr(lesions_module, "MAX_PIECES", 5000)
    labels = speckle(19, 64)  # 10 slices of 1024 pieces
    with pytest.raises(TooManyComponents) as caught:
        lesions(labels, voxel_ml=None, connectivity=26, most=10)
    assert str(caught.value) == ("class 1 has over 5000 pieces in its slices (26-connected), over the 10 components "
                                 "that are listed: no lesion list")


def test_a_million_components_cost_no_record_each() -> None:
    labels = speckle(40, 512)  # 20 slices × 65,536 isolated voxels = 1,310,720 components
    tracemalloc.start()
    try:
        with pytest.raises(TooManyComponents, match=r"^class 1 has over \d+ pieces in its slices \(26-connected\)"):
            lesions(labels, voxel_ml=0.001, connectivity=26)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200 << 20  # a Lesion per component was ~1 GB


def test_the_report_path_says_why_and_has_no_list(tmp_path: Path) -> None:
    labels = speckle(3, 256)  # 2 × 16,384 components: over the default cap
    volume = Volume("nifti", tmp_path / "v.nii.gz", "v", "v", tuple(SliceRef(tmp_path / "v.nii.gz", k) for k in
                                                                    range(3)), 256, 256, (1.0, 1.0, 1.0), np.eye(4))
    found, why = volume_components(volume, labels)
    assert found is None
    assert why == (f"class 1 has {2 * 128 * 128} components (26-connected), over the "
                   f"{lesions_module.MAX_COMPONENTS} that are listed: no lesion list")


def test_a_run_over_a_speckled_volume_says_so_once_and_fails_its_volume_rule_closed(ct_model, tmp_path: Path,
                                                                                    capsys) -> None:
    import csv

    import nibabel as nib

    from app.cli import main

    ct_model.with_suffix(".yaml").write_text(ct_model.with_suffix(".yaml").read_text()
                                             + "verdict:\n  fail_if:\n    - {min_component_ml: 0.5, class: disc}\n")
    data = np.zeros((220, 220, 3), np.int16)
    data[::2, ::2, ::2] = 100  # 110 × 110 × 2 isolated voxels the model calls disc
    nib.save(nib.Nifti1Image(data, np.diag([0.9, 1.1, 3.0, 1.0])), str(tmp_path / "speckle.nii.gz"))
    out = tmp_path / "out"
    main(["run", str(ct_model), str(tmp_path / "speckle.nii.gz"), "--out", str(out)])
    why = "class 1 has 24200 components (26-connected), over the 10000 that are listed: no lesion list"
    with open(out / "seglens_report.csv", newline="", encoding="utf-8") as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["status"], row["verdict"], row["components_disc"], row["largest_ml_disc"]) == ("ok", "ng", "", "")
    assert row["verdict_reason"] == f"no volume to judge a disc component of >= 0.5 mL (26-connected, in 3D) by ({why})"
    assert capsys.readouterr().err.count(why) == 1
