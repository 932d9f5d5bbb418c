"""The viewer's Compare on all as a loop in app.runs (issue 25: it was a second loop in the ui's worker beside
app.runs.compare.agreement): B's IoU against A per input as it goes, an unreadable input counted, Cancel between
inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.io.discover import InputFile
from app.runs.compare.on_all import compare_all, compare_summary


def _inputs(tmp_path: Path) -> list[InputFile]:
    image = np.zeros((32, 32), np.uint8)
    image[8:16, 8:16] = 255
    Image.fromarray(image).save(tmp_path / "a.png")
    (tmp_path / "b.png").write_bytes(b"not a png")
    return [InputFile(tmp_path / name, Path(name)) for name in ("a.png", "b.png")]


def test_each_input_is_measured_and_an_unreadable_one_counted(models, tmp_path):
    model = open_session(load_spec(models("fixed_bright_spots", size=32)), "cpu")
    seen: list[tuple[str, float, int]] = []
    outcome = compare_all(model, model, _inputs(tmp_path),
                          measured=lambda item, iou, done: seen.append((item.path.name, iou, done)))
    assert seen == [("a.png", 1.0, 1)]  # the same model agrees with itself everywhere
    assert (outcome.completed, outcome.message) == (True, "1 image compared, 1 could not be read")


def test_cancel_stops_before_the_next_input(models, tmp_path):
    model = open_session(load_spec(models("fixed_bright_spots", size=32)), "cpu")
    seen: list[str] = []
    outcome = compare_all(model, model, _inputs(tmp_path), measured=lambda item, *_: seen.append(item.path.name),
                          should_stop=lambda: bool(seen))
    assert seen == ["a.png"] and (outcome.completed, outcome.message) == (False, "cancelled after 1 of 2 images")


def test_the_summary_names_the_first_failure():
    assert compare_summary(3, 0, 1, "b.onnx: non-finite") == "2 images compared, 1 failed: b.onnx: non-finite"
    assert compare_summary(4, 1, 2, "x") == "1 image compared, 1 could not be read, 2 failed (the first: x)"
