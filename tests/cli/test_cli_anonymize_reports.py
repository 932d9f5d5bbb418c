"""--anonymize in every report a run writes (issue 24 §1, the leftovers): with `--reference`, the report's reference
cells and notices, seglens_metrics_images.csv and the run record carry only pseudonymous relative names (they
carried the inputs' and the reference's absolute paths, patient folders included); `compare --anonymize` names its
rows and pictures the same way. The inputs are a PACS export: a series and a key image under patient folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_cli import read_report
from test_cli_anonymize import KEY, NEEDLES, identified_series

from app.cli import main

pytest.importorskip("dicognito")
pytest.importorskip("highdicom")


def pacs_export_with_images(tmp_path: Path) -> tuple[Path, Path]:
    """(the input folder, a reference folder named for the patient too) with a series, a key image that has a
    reference and one that has none, all under pacs_export/DOE^JANE_PID-0042/."""
    source, _ = identified_series(tmp_path / "in")
    patient = source / "DOE^JANE_PID-0042"
    for name in ("key_image_jane.png", "orphan_jane.png"):
        Image.fromarray(np.full((32, 32), 60, np.uint8)).save(patient / name)
    reference = tmp_path / "DOE_ground_truth" / "DOE^JANE_PID-0042"
    reference.mkdir(parents=True)
    Image.fromarray(np.zeros((32, 32), np.uint8)).save(reference / "key_image_jane.png")
    return source, tmp_path / "DOE_ground_truth"


def leaks(out: Path, tmp_path: Path) -> list[str]:
    """Every file or folder under `out` whose name or bytes hold a needle, the inputs' names or a tmp path."""
    needles = {*NEEDLES, "key_image", "orphan", "ground_truth", str(tmp_path)}
    found = []
    for path in out.rglob("*"):
        name = path.relative_to(out).as_posix().lower()
        found += [f"name {name}: {n}" for n in needles if n.lower() in name]
        if path.is_file():
            data = path.read_bytes().lower()
            found += [f"{name}: {n}" for n in needles if n.lower().encode() in data]
    return found


def test_run_with_reference_under_anonymize_writes_no_input_or_reference_name(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", KEY)
    source, reference = pacs_export_with_images(tmp_path)
    out = tmp_path / "OUT"
    code = main(["run", "ct_demo", str(source), "--out", str(out), "--export", "nifti", "--anonymize",
                 "--reference", str(reference), "--no-progress"])
    assert code == 0
    assert leaks(out, tmp_path) == []
    rows = {row["path"]: row for row in read_report(out / "seglens_report.csv")}
    images = sorted(name for name in rows if name.startswith("images/img-"))
    assert len(rows) == 3 and len(images) == 2
    scored = [rows[name] for name in images if rows[name]["iou"]]
    unscored = [rows[name] for name in images if not rows[name]["iou"]]
    assert len(scored) == len(unscored) == 1
    assert scored[0]["reference"].startswith("reference/ref-")  # a keyed name of the reference file
    assert unscored[0]["reference"] == f"{unscored[0]['path']}: no reference found; no metrics"
    details = read_report(out / "seglens_metrics_images.csv")
    assert details and {row["path"] for row in details} <= set(images)
    record = json.loads((out / "seglens_report.csv.run.json").read_text(encoding="utf-8"))
    assert record["reference"].startswith("reference-folder-")
    said = capsys.readouterr()
    assert f"note: {unscored[0]['reference']}" in said.err.splitlines()  # the terminal says it as the report does
    assert "worst IoU: images/img-" in said.out and "ground_truth" not in said.out


def test_run_with_reference_without_anonymize_names_the_reference(tmp_path, monkeypatch):
    source, reference = pacs_export_with_images(tmp_path)
    out = tmp_path / "OUT"
    assert main(["run", "ct_demo", str(source), "--out", str(out), "--reference", str(reference),
                 "--no-progress"]) == 0
    record = json.loads((out / "seglens_report.csv.run.json").read_text(encoding="utf-8"))
    assert record["reference"] == str(reference)
    rows = read_report(out / "seglens_report.csv")
    assert any(row["reference"].endswith("DOE^JANE_PID-0042/key_image_jane.png") for row in rows)


def test_compare_under_anonymize_names_rows_and_pictures_by_their_pseudonyms(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", KEY)
    source, _ = pacs_export_with_images(tmp_path)
    (source / "DOE^JANE_PID-0042" / "broken_jane.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    out = tmp_path / "OUT"
    assert main(["compare", "ct_demo", "ct_demo", str(source), "--out", str(out), "--anonymize",
                 "--no-progress"]) == 1  # the broken image
    assert leaks(out, tmp_path) == []
    rows = read_report(out / "seglens_compare.csv")
    assert sorted(row["status"] for row in rows) == ["error", "ok", "ok", "ok"]
    assert sum(row["path"].startswith("images/img-") for row in rows) == 3
    assert sum(row["path"].startswith("anon-") for row in rows) == 1  # the series, measured as a volume
    assert len(list(out.rglob("*_disagreement.png"))) == 3
    said = capsys.readouterr()
    assert "jane" not in said.out.lower() and "broken_jane" not in said.err


def test_compare_under_anonymize_with_an_unusable_key_is_one_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", "short")
    source, _ = pacs_export_with_images(tmp_path)
    assert main(["compare", "ct_demo", "ct_demo", str(source), "--out", str(tmp_path / "OUT"), "--anonymize",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "SEGLENS_PSEUDONYM_KEY is not a usable key" in err[0]
    assert not (tmp_path / "OUT" / "seglens_compare.csv").exists()


def test_an_image_only_run_under_anonymize_names_its_images_by_pseudonyms(tmp_path, monkeypatch, capsys):
    """A PACS export of key images (no series among them): --anonymize was a note ('applies to volumes') and the
    report carried every image's absolute path, patient folders included."""
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", KEY)
    _, reference = pacs_export_with_images(tmp_path)
    images = tmp_path / "in" / "pacs_export" / "DOE^JANE_PID-0042"
    out = tmp_path / "OUT"
    assert main(["run", "ct_demo", str(images / "key_image_jane.png"), str(images / "orphan_jane.png"), "--out",
                 str(out), "--anonymize", "--save", "mask", "--reference", str(reference), "--no-progress"]) == 0
    assert leaks(out, tmp_path) == []
    rows = read_report(out / "seglens_report.csv")
    assert len(rows) == 2 and all(row["path"].startswith("images/img-") for row in rows)
    assert len(list(out.rglob("*_mask.png"))) == 2
    assert "applies to volumes" not in capsys.readouterr().err
