"""Output names are a function of the input alone, and --resume trusts only an input's own outputs."""

from __future__ import annotations

import csv
from pathlib import Path

from conftest import stripes
from PIL import Image

from app.cli import main
from app.io.discover import InputFile, output_stems


def _report(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _folder(root: Path, names: tuple[str, ...]) -> Path:
    root.mkdir(parents=True)
    for name in names:
        Image.fromarray(stripes()).save(root / name, format="JPEG" if name.endswith(".jpg") else "PNG")
    return root


def test_an_inputs_output_stem_does_not_depend_on_its_siblings():
    """x.png beside x_png.png named x_png's outputs x_png_png_…; alone, x_png.png's were x_png_…: the name x.png's
    had beside it."""
    together = output_stems([InputFile(Path(p), Path(p)) for p in ("x.png", "x.jpg", "x_png.png", "x_jpg.png")])
    alone = output_stems([InputFile(Path("x_png.png"), Path("x_png.png"))])
    assert [s.as_posix() for s in together] == ["x.png", "x.jpg", "x_png.png", "x_jpg.png"]
    assert [s.as_posix() for s in alone] == ["x_png.png"]


def test_resume_of_a_subset_runs_an_input_whose_own_output_is_missing_and_keeps_the_other_rows(models, tmp_path):
    """The audit's repro: the four inputs run together, x_png.png's overlay removed, then x_png.png alone with
    --resume said '1 done by an earlier run' (x.png's overlay stood under x_png.png's alone-name) and rewrote the
    report to its one row."""
    folder = _folder(tmp_path / "in", ("x.jpg", "x.png", "x_jpg.png", "x_png.png"))
    model, out = models("rgb_classes"), tmp_path / "o"
    assert main(["run", str(model), str(folder), "--out", str(out), "--save", "overlay"]) == 0
    assert sorted(p.name for p in out.glob("*_overlay.png")) == [
        "x.jpg_overlay.png", "x.png_overlay.png", "x_jpg.png_overlay.png", "x_png.png_overlay.png"]
    before = {row["path"]: row for row in _report(out / "seglens_report.csv")}
    (out / "x_png.png_overlay.png").unlink()

    done = main(["run", str(model), str(folder / "x_png.png"), "--out", str(out), "--save", "overlay", "--resume"])
    assert done == 0
    assert (out / "x_png.png_overlay.png").is_file()  # run again: its own overlay was missing
    after = {row["path"]: row for row in _report(out / "seglens_report.csv")}
    assert set(after) == set(before)  # the rows of inputs not in this run are kept, never lost
    for path in before:
        if not path.endswith("x_png.png"):
            assert after[path] == before[path]


def test_two_inputs_with_one_output_name_the_second_is_an_error_row(models, tmp_path):
    """`run a/x.png b/x.png`: both would write x.png_mask.png; the second is refused by name, not renamed by
    whichever sibling came first (a later run of b alone would name it otherwise)."""
    a = _folder(tmp_path / "a", ("x.png",))
    b = _folder(tmp_path / "b", ("x.png",))
    model, out = models("rgb_classes"), tmp_path / "o"
    assert main(["run", str(model), str(a / "x.png"), str(b / "x.png"), "--out", str(out)]) == 1
    rows = _report(out / "seglens_report.csv")
    assert [row["status"] for row in rows] == ["ok", "error"]
    assert rows[1]["error"] == (f"{b / 'x.png'}: its outputs would be named as those of {a / 'x.png'} "
                                "(x.png_…): run it into another --out")
    assert sorted(p.name for p in out.glob("*.png")) == ["x.png_mask.png"]


def test_resume_of_the_images_of_a_run_with_a_volume_keeps_the_volumes_row(models, tmp_path):
    """The earlier report has the volume columns; a run of its image alone had not, so the whole earlier report
    was set aside (its columns differ) and rewritten with the image's row only."""
    import nibabel as nib
    import numpy as np

    folder = _folder(tmp_path / "in", ("a.png",))
    nib.save(nib.Nifti1Image(np.zeros((8, 8, 2), np.int16), np.eye(4)), str(folder / "v.nii.gz"))
    model, out = models("binary_logits"), tmp_path / "o"
    assert main(["run", str(model), str(folder), "--out", str(out), "--save", "mask"]) == 0
    before = {row["path"]: row for row in _report(out / "seglens_report.csv")}
    assert set(before) == {str(folder / "a.png"), str(folder / "v.nii.gz")}
    (out / "a.png_mask.png").unlink()
    assert main(["run", str(model), str(folder / "a.png"), "--out", str(out), "--save", "mask", "--resume"]) == 0
    after = {row["path"]: row for row in _report(out / "seglens_report.csv")}
    assert after[str(folder / "v.nii.gz")] == before[str(folder / "v.nii.gz")] and (out / "a.png_mask.png").is_file()
