"""One-line messages that say what is true: a FIFO model is no missing file, a size over the limit reads as over
it, articles and escapes as written, a FIFO named DICOMDIR gets its row, a NIfTI's own problem wherever it is read."""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from conftest import stripes
from PIL import Image

from app.cli import main
from app.errors import ImageError, ModelError, SidecarError
from app.inference.model.builder import load_spec

fifo_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")


@fifo_only
def test_a_fifo_model_is_said_to_be_a_named_pipe_not_missing(tmp_path, capsys):
    model = tmp_path / "m.onnx"
    os.mkfifo(model)
    with pytest.raises(ModelError, match=r"m\.onnx: not a regular file: a named pipe \(FIFO\)$"):
        load_spec(model)
    assert main(["info", str(model)]) == 2
    assert "not a regular file: a named pipe (FIFO)" in capsys.readouterr().err


def test_a_missing_model_is_still_not_found(tmp_path):
    with pytest.raises(ModelError, match=r"gone\.onnx: model file not found$"):
        load_spec(tmp_path / "gone.onnx")


def test_a_size_just_over_the_limit_reads_as_over_it(tmp_path, monkeypatch):
    from app.io.images import read_image

    Image.fromarray(np.zeros((1024, 1024), np.uint8)).save(tmp_path / "x.png")
    with pytest.raises(ImageError, match=r"x\.png: image too large \(1024×1024 = 1\.05 megapixels; the limit is 1\)"):
        read_image(tmp_path / "x.png", max_pixels=1_000_000)
    with pytest.raises(ImageError, match=r"\(1024×1024 = 1 megapixels; the limit is 0\.5\)"):
        read_image(tmp_path / "x.png", max_pixels=500_000)


def test_megapixels_are_whole_from_ten_and_as_precise_as_the_limit_needs():
    from app.io.limits import megapixels

    assert [megapixels(n) for n in (9_000_000, 250_000_000, 500_000, 1_048_576, 3_600_000_000)] == [
        "9", "250", "0.5", "1", "3600"]
    assert megapixels(1_048_576, beside=1_000_000) == "1.05"
    assert megapixels(250_400_000, beside=250_000_000) == "250.4"


def test_an_identifying_kind_takes_its_article():
    from app.runs.privacy.check import Identifying, leak

    found = Identifying.of([("accession number", "ACC88123X")])
    assert leak([], found, root=Path("/out"), cells=["x ACC88123X"]) == "an accession number in the report row"
    assert leak([], Identifying.of([("patient name", "DOE^JANE")]), root=Path("/out"), cells=["doe"]) == (
        "a patient name in the report row")


def test_a_control_character_in_a_class_name_is_spelt_with_one_backslash(models):
    path = models("rgb_classes")
    path.with_suffix(".yaml").write_text('classes: [red, "lu\\x1bng", blue]\n')
    with pytest.raises(SidecarError) as caught:
        load_spec(path)
    assert "got \\x1b in 'lu\\x1bng'" in str(caught.value), str(caught.value)


@fifo_only
def test_a_fifo_named_dicomdir_gets_an_error_row(models, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    Image.fromarray(stripes()).save(folder / "a.png")
    os.mkfifo(folder / "DICOMDIR")
    (folder / "sub").mkdir()
    (folder / "sub" / "DICOMDIR").write_bytes(b"not a dicom index at all")
    out = tmp_path / "out"
    assert main(["run", str(models("rgb_classes")), str(folder), "--out", str(out)]) == 1
    with open(out / "seglens_report.csv", newline="", encoding="utf-8") as handle:
        rows = {row["path"]: row for row in csv.DictReader(handle)}
    assert rows[str(folder / "a.png")]["status"] == "ok"
    assert rows[str(folder / "DICOMDIR")]["error"] == f"{folder / 'DICOMDIR'}: not a regular file: a named pipe (FIFO)"
    assert rows[str(folder / "sub" / "DICOMDIR")]["error"] == (
        f"{folder / 'sub' / 'DICOMDIR'}: not a DICOM file (no DICM marker), so no DICOMDIR")


def test_a_tab_or_esc_in_a_file_name_never_reaches_the_report_raw(models, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    Image.fromarray(stripes()).save(folder / "a\tb\x1bc.png")
    out = tmp_path / "out"
    assert main(["run", str(models("rgb_classes")), str(folder), "--out", str(out)]) == 0
    text = (out / "seglens_report.csv").read_text(encoding="utf-8")
    assert "\t" not in text and "\x1b" not in text and f"{folder}/a\\x09b\\x1bc.png" in text


def test_the_viewer_and_the_cli_say_the_same_of_a_nifti_that_declares_too_much(tmp_path):
    """The viewer decodes a listed file by its path (app.io.images.read_image): a NIfTI whose header declares 9 M
    slices was 'not an image, or a format that cannot be read' there, '9000000 slices declared' in the CLI."""
    from app.io.images import read_image

    header = nib.Nifti1Header()
    header.set_data_shape((1, 1, 3000, 3000))
    header.set_data_dtype(np.uint8)
    (tmp_path / "tiny.nii").write_bytes(header.binaryblock + b"\0" * 20)
    with pytest.raises(ImageError) as caught:
        read_image(tmp_path / "tiny.nii")
    assert str(caught.value) == f"{tmp_path / 'tiny.nii'}: 9000000 slices declared; the limit is 100000"


def test_a_good_nifti_read_by_its_path_gives_its_slice(tmp_path):
    from app.io.images import read_image

    data = np.arange(4 * 5 * 3, dtype=np.int16).reshape(4, 5, 3)
    nib.save(nib.Nifti1Image(data, np.eye(4)), str(tmp_path / "v.nii.gz"))
    image = read_image(tmp_path / "v.nii.gz", frame=1)
    assert image.source_mode == "NIfTI" and image.raw is not None and image.info["Slice"] == "2 / 3"


if sys.platform == "win32":  # pragma: no cover - names with TAB/ESC and FIFOs are POSIX matters
    pytestmark = pytest.mark.skip("POSIX file names")


@pytest.mark.parametrize(("noun", "said"), [
    ("accession number", "an accession number"), ("patient name", "a patient name"), ("MR", "an MR"), ("CT", "a CT"),
    ("US", "a US"), ("anomaly output", "an anomaly output"), ("8-bit PNG", "an 8-bit PNG"),
    ("scores output", "a scores output")])
def test_with_article(noun, said):
    from app.errors import with_article

    assert with_article(noun) == said


def test_an_mr_scan_and_an_anomaly_component_take_an(models):
    from app.inference.image.fit import ImageFacts, fit_problems
    from app.inference.model.rules import AreaRule

    path = models("rgb_classes")
    path.with_suffix(".yaml").write_text("input:\n  modality: MR\n")
    (problem,) = fit_problems(load_spec(path), ImageFacts("PNG", True, None, False))
    assert problem.endswith("not an MR scan")
    assert AreaRule("anomaly", (1,), 50).describe() == "an anomaly component of >= 50 px"
