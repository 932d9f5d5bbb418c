"""The HTML review report of a review folder with a DICOM series among its inputs, from `seglens-cli report` and
the viewer's rows (app.runs.review.items): a series has its overlay and figures (was "not processed: …/<SeriesUID>:
file not found"), the header says what made the results, paths are relative, --anonymize names nobody."""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import dicom_factory
import numpy as np
import pytest
from PIL import Image

from app.cli import main
from app.io.discover import discover
from app.io.files import file_sha256
from app.runs.review.log import ReviewLog

REPO = Path(__file__).resolve().parents[3]
CT_DEMO = REPO / "models" / "ct_demo.onnx"
CT_SAMPLE = REPO / "resources" / "samples" / "ct"
PATIENT = ("DOE^JANE", "PID-0042")
KEY = "0123456789abcdef" * 4


class Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.sources = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.sources.append(dict(attrs)["src"])


def images(path: Path) -> list[str]:
    """The `src` of every image of the page, in order."""
    parser = Images()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.sources


def plain(html: str) -> str:
    """The text a reader sees: no style sheet, no tags (a line-break chance is no space), whitespace collapsed."""
    html = re.sub(r"<style>.*?</style>", " ", html, flags=re.S).replace("<wbr>", "")
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def text(path: Path) -> str:
    return plain(path.read_text(encoding="utf-8"))


def rows(path: Path) -> list[str]:
    """The text of each row of the report's table."""
    body = path.read_text(encoding="utf-8").split("<tbody>", 1)[1]
    return [plain(row) for row in body.split('<tr class="s-')[1:]]


@pytest.fixture
def review_folder(tmp_path: Path) -> Path:
    """`pacs/` holding the CT sample (32 slices) under a patient-named folder and a PNG, and its review folder
    with a review of the series."""
    inputs = tmp_path / "pacs"
    series = inputs / "DOE^JANE_PID-0042" / "ACC88123X"
    shutil.copytree(CT_SAMPLE, series)
    Image.fromarray(np.full((40, 48), 90, np.uint8)).save(inputs / "photo.png")
    review = tmp_path / "pacs_review"
    log = ReviewLog.open(review, file_sha256(CT_DEMO))
    volume_rel = next(item.rel.as_posix() for item in discover([inputs]) if item.volume is not None)
    log.set(volume_rel, "accepted", "lungs look right")
    return review


def test_a_series_in_the_report_has_its_overlay_and_the_volumes_figures(review_folder: Path, tmp_path: Path):
    out = tmp_path / "report.html"
    assert main(["report", str(review_folder), "--model", "ct_demo", "--out", str(out), "--device", "cpu"]) == 0
    shown = text(out)
    assert "not processed" not in shown and "file not found" not in shown
    assert len(images(out)) == 2 and all(src.startswith("data:image/jpeg;base64,") for src in images(out))
    series_row = next(row for row in rows(out) if "ACC88123X" in row)
    assert "slices 32" in series_row
    lung = float(re.search(r"mL lung\s+([0-9.]+)", series_row).group(1))
    bone = float(re.search(r"mL bone\s+([0-9.]+)", series_row).group(1))
    assert lung > 100 and bone > 10  # a chest phantom: two lungs, a spine and ribs
    assert "result correct" in series_row and "lungs look right" in series_row


def test_the_series_overlay_is_its_slice_with_the_most_foreground(review_folder: Path, tmp_path: Path):
    import base64

    import cv2

    out = tmp_path / "report.html"
    assert main(["report", str(review_folder), "--model", "ct_demo", "--out", str(out), "--device", "cpu"]) == 0
    series_row = next(row for row in rows(out) if "ACC88123X" in row)
    shown = int(re.search(r"shown slice (\d+) \(most foreground\)", series_row).group(1))
    assert 1 <= shown <= 32
    picture = images(out)[next(i for i, row in enumerate(rows(out)) if "ACC88123X" in row)]
    jpeg = cv2.imdecode(np.frombuffer(base64.b64decode(picture.split(",", 1)[1]), np.uint8), cv2.IMREAD_COLOR)
    blue = (jpeg[..., 0].astype(int) - jpeg[..., 2]) > 60  # lung #4aa3ff blended over gray: blue above red
    assert blue.mean() > 0.02


def test_the_header_carries_the_runs_thresholds_sidecar_hash_and_provider(review_folder: Path, tmp_path: Path):
    out = tmp_path / "report.html"
    assert main(["report", str(review_folder), "--model", str(CT_DEMO), "--out", str(out), "--device", "cpu",
                 "--threshold", "0.7"]) == 0
    html = out.read_text(encoding="utf-8")
    header = text(out)
    assert f"Sidecar ct_demo.yaml sha256 {file_sha256(CT_DEMO.with_suffix('.yaml'))[:12]}" in header
    assert f"sha256 {file_sha256(CT_DEMO)[:12]}" in header
    assert "Thresholds min_confidence 0.7" in header
    assert re.search(r"Provider CPU\b", header) and "ExecutionProvider" not in header  # as every other line says it
    assert file_sha256(CT_DEMO.with_suffix(".yaml")) in html  # the whole hash, in the title


def test_paths_in_the_report_are_relative_never_absolute(review_folder: Path, tmp_path: Path):
    (tmp_path / "pacs" / "deep" / "er").mkdir(parents=True)
    (tmp_path / "pacs" / "deep" / "er" / "broken.png").write_bytes(b"not a picture")
    out = review_folder / "report.html"
    assert main(["report", str(review_folder), "--model", "ct_demo", "--out", str(out), "--device", "cpu"]) == 1
    html = out.read_text(encoding="utf-8")
    assert str(tmp_path) not in html
    broken = next(row for row in rows(out) if "broken" in row)
    assert "not processed: deep/er/broken.png: " in broken
    assert "Inputs ../pacs" in text(out)


def test_anonymize_names_no_patient_and_no_folder(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", KEY)
    inputs = tmp_path / "pacs_export"
    dicom_factory.write_series(inputs / "DOE^JANE_PID-0042" / "ACC88123X", slices=4, patient=PATIENT)
    Image.fromarray(np.full((40, 48), 90, np.uint8)).save(inputs / "DOE^JANE_PID-0042" / "jane_doe_photo.png")
    (inputs / "DOE^JANE_PID-0042" / "jane_doe_broken.png").write_bytes(b"broken")
    review = tmp_path / "pacs_export_review"
    review.mkdir()
    out = review / "report.html"
    assert main(["report", str(review), "--model", "ct_demo", "--out", str(out), "--device", "cpu",
                 "--anonymize"]) == 1
    html = out.read_text(encoding="utf-8")
    for secret in ("DOE", "JANE", "PID-0042", "ACC88123X", "pacs_export", "jane_doe", str(tmp_path)):
        assert secret.lower() not in html.lower(), secret
    shown = text(out)
    assert re.search(r"anon-[0-9a-f]{12}/", shown) and "images/img-" in shown, shown
    assert "not processed" in shown and "slices 4" in shown


def test_a_folder_that_is_no_review_folder_is_one_line(tmp_path: Path, capsys):
    lonely = tmp_path / "somewhere"
    lonely.mkdir()
    assert main(["report", str(lonely), "--model", "ct_demo"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: {lonely}: not a review folder beside its inputs (<inputs>_review); give the input "
                   "folder with --inputs")
