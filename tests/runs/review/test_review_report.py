"""The HTML review report (app.runs.review.html): self-contained, escaped, totals, other models' reviews hidden."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path

import cv2
import numpy as np
import pytest

from app.io.files import encode_png
from app.io.render import blend_overlay
from app.runs.review import html as review_report
from app.runs.review.html import THUMBNAIL_SIDE, ReportItem, write_review_report
from app.runs.review.log import Review

SHA = "3481e429bb1e0f7828ed8c23f62ecc77d6efcaf6e631f8ba355c9752b8a1bc77"
OTHER = "f" * 64


class Colored:
    def __init__(self, color):
        self.color = color


def overlay_png(height: int = 600, width: int = 900) -> bytes:
    image = np.full((height, width, 3), 120, np.uint8)
    mask = np.zeros((height, width), np.uint8)
    mask[100:300, 200:500] = 1
    return encode_png(blend_overlay(image, mask, [Colored(None), Colored((255, 59, 48))]))


def review(rel: str, state: str, note: str = "", model: str = SHA) -> Review:
    return Review(rel, state, note, "inspector", "2026-12-01T10:00:00Z", model)


def write(tmp_path: Path, items: list[ReportItem], **kwargs) -> str:
    path = write_review_report(tmp_path / "report.html", items, model_name="surface <defects>.onnx",
                               model_sha256=SHA, seglens_version="0.1.0", **kwargs)
    assert path == tmp_path / "report.html"
    return path.read_text(encoding="utf-8")


class Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.attrs, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs

    def handle_data(self, data):
        self.text.append(data)


def parsed(page: str) -> Collect:
    collect = Collect()
    collect.feed(page)
    return collect


def test_user_text_is_escaped_everywhere(tmp_path: Path):
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    items = [ReportItem(f"dir/{evil}.png", overlay_png(), "ng", f"reason {evil}", {f"m{evil}": 1.0},
                        review(f"dir/{evil}.png", "rejected", f"note {evil}\nline 2"))]
    page = write(tmp_path, items, title=f"title {evil}")
    collect = parsed(page)
    assert "script" not in collect.tags and collect.tags.count("img") == 1  # only the thumbnail is an image
    assert not any(name.startswith("on") for name, _value in collect.attrs)
    text = "".join(collect.text)
    assert f"note {evil}\nline 2" in text and f"reason {evil}" in text and "surface <defects>.onnx" in text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page


def test_nothing_is_fetched_from_anywhere(tmp_path: Path):
    items = [ReportItem("a.png", overlay_png(), "ok", "", None, review("a.png", "accepted", "see http://x.test")),
             ReportItem("b.png", None)]
    page = write(tmp_path, items)
    page_without_notes = page.replace("see http://x.test", "")
    assert "http://" not in page_without_notes and "https://" not in page_without_notes
    sources = re.findall(r"""(?:src|href)\s*=\s*["']?([^"'\s>]*)""", page, flags=re.IGNORECASE)
    assert sources and all(source.startswith("data:image/") for source in sources)
    assert "@import" not in page and "url(" not in page and "<link" not in page and "<script" not in page


def test_thumbnails_are_embedded_and_scaled_down(tmp_path: Path):
    page = write(tmp_path, [ReportItem("a.png", overlay_png(600, 900)), ReportItem("small.png", overlay_png(40, 30)),
                            ReportItem("bad.png", b"not a png"), ReportItem("none.png", None)])
    encoded = re.findall(r'src="data:image/jpeg;base64,([^"]+)"', page)
    shapes = [cv2.imdecode(np.frombuffer(base64.b64decode(data), np.uint8), cv2.IMREAD_COLOR).shape for data in encoded]
    assert shapes == [(213, THUMBNAIL_SIDE, 3), (40, 30, 3)]  # long side 320, a small one never enlarged
    assert "unreadable overlay" in page and "no overlay" in page


def test_totals_per_state_and_verdict(tmp_path: Path):
    items = [ReportItem("a.png", None, "ok", review=review("a.png", "accepted")),
             ReportItem("b.png", None, "ng", "scratch 412 px", review=review("b.png", "accepted")),
             ReportItem("c.png", None, "NG", review=review("c.png", "rejected")),
             ReportItem("d.png", None, "ng", review=review("d.png", "corrected")),
             ReportItem("e.png", None, "", review=None),
             ReportItem("f.png", None, "ok", review=review("f.png", "unreviewed"))]
    page = write(tmp_path, items)
    totals = dict((name, int(count)) for count, name in
                  re.findall(r'<div class="count [^"]+"><b>(\d+)</b><span>([^<]+)</span>', page))
    assert totals == {"images": 6, "result correct": 2, "result wrong": 1, "mask corrected": 1, "not reviewed": 2,
                      "OK": 2, "NG": 3}  # the reviewer judged the model's result, not the part
    assert '<span class="pill s-accepted">result correct</span>' in page and "Review of the result" in page
    assert page.count('<tr class="s-accepted">') == 2 and page.count('<tr class="s-unreviewed">') == 2


def test_a_review_made_with_another_model_is_not_shown(tmp_path: Path):
    items = [ReportItem("a.png", None, review=review("a.png", "rejected", "old model's note", model=OTHER))]
    page = write(tmp_path, items)
    assert "old model's note" not in page and '<tr class="s-unreviewed">' in page and 'pill s-rejected' not in page


def test_header_names_the_model_version_and_reviewer(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(review_report.getpass, "getuser", lambda: "qa-lead")
    page = write(tmp_path, [ReportItem("a.png", None, metrics={"iou": 0.81234, "dice": float("nan"), "n": 3.0})])
    assert "surface &lt;defects&gt;.onnx" in page and SHA[:12] in page and f'title="{SHA}"' in page
    assert "0.1.0" in page and "qa-lead" in page and re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ UTC", page)
    assert "0.812" in page and "<td>3</td>" in page and "<td>—</td>" in page


@pytest.mark.parametrize("count", [0, 1])
def test_the_report_is_written_atomically(tmp_path: Path, monkeypatch, count: int):
    written = []
    real = review_report.atomic_write
    monkeypatch.setattr(review_report, "atomic_write", lambda path, data: (written.append(path), real(path, data)))
    page = write(tmp_path, [ReportItem("a.png", None)] * count)
    assert written == [tmp_path / "report.html"] and page.startswith("<!DOCTYPE html>")
    assert ("No images." in page) == (count == 0)
