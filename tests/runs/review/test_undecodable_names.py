"""File names that are not UTF-8 (Linux bytes such as b'caf\\xe9.png', spelt 'caf\\udce9.png' by Python) in what
SegLens writes: the review report, PNG text, JSON records."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from app.io.files import encode_png, png_text, png_with_text
from app.runs.review.html import ReportItem, write_review_report
from app.runs.review.log import Review

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="file names are bytes on Linux only")
NAME = os.fsdecode(b"lot 7/caf\xe9.png")


def test_the_review_report_of_a_file_whose_name_is_not_utf8_is_written(tmp_path):
    review = Review(NAME, "rejected", note="burr", model_sha256="a" * 64)
    path = write_review_report(tmp_path / "report.html", [ReportItem(NAME, None, review=review)],
                               model_name=os.fsdecode(b"m\xff.onnx"), model_sha256="a" * 64,
                               seglens_version="0")  # was UnicodeEncodeError
    page = path.read_bytes().decode("utf-8")
    assert "caf\\xe9" in page and "m\\xff.onnx" in page and "\\udc" not in page


def test_png_text_holds_a_name_that_is_not_utf8(tmp_path):
    png = png_with_text(encode_png(np.zeros((2, 2), np.uint8)), {"SegLens": json.dumps({"model": NAME},
                                                                                       ensure_ascii=False)})
    assert json.loads(png_text(png)["SegLens"])["model"] == NAME  # JSON's \\udce9: the name it was


def test_the_cli_runs_a_model_and_an_image_whose_paths_are_not_utf8(models, tmp_path, capsys):
    from conftest import stripes
    from PIL import Image

    from app.cli import main

    folder = tmp_path / os.fsdecode(b"lot \xe9")
    folder.mkdir()
    model = folder / "m.onnx"
    model.write_bytes(models("rgb_classes").read_bytes())  # ONNX Runtime refused the path (not UTF-8)
    Image.fromarray(stripes()).save(folder / os.fsdecode(b"caf\xe9.png"))
    assert main(["run", str(model), str(folder), "--out", str(tmp_path / "out"), "--device", "cpu",
                 "--no-progress"]) == 0
    report = (tmp_path / "out" / "seglens_report.csv").read_bytes().decode("utf-8")
    assert "lot \\xe9/caf\\xe9.png,ok" in report
    assert (tmp_path / "out" / os.fsdecode(b"caf\xe9.png_mask.png")).is_file()
