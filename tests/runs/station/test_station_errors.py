"""A frame the model could not judge is kept (app.runs.station.sinks.folder's error/): a camera's pixel frame that
fails in
a model refusing its size is an ERROR line, and its pixels are out/error/<id>.png."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np

from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.io.sources import Frame
from app.runs.station.run import Station
from app.runs.station.sinks.folder import FolderSink
from app.runs.station.sinks.log import LogSink
from app.runs.station.sinks.options import FolderSinkOptions
from tests import onnx_factory

# a UNet-like model that fails unless H and W divide by 8, told not to pad (size_divisor 1): a 37×53 frame fails
SIDECAR = """task: segmentation
classes: [red, green, blue]
input: {size_divisor: 1}
verdict: {fail_if: [{class: blue, min_area_px: 1}]}
"""


class _Camera:
    """A camera-like source: the pixel frames it is given, then its end."""

    def __init__(self, frames: list[np.ndarray]) -> None:
        self.frames = frames

    def __iter__(self) -> Iterator[Frame]:
        for number, pixels in enumerate(self.frames):
            yield Frame(str(number), time.time(), pixels=pixels)

    def close(self) -> None:
        pass

    dropped = 0
    ended = "camera ended"
    stalled = False
    root = None


def test_a_camera_frame_the_model_cannot_judge_is_kept_under_error(tmp_path: Path) -> None:
    model_path = onnx_factory.needs_divisor(tmp_path / "needs_divisor.onnx")
    model_path.with_suffix(".yaml").write_text(SIDECAR)
    model = open_session(load_spec(model_path), "cpu")
    good, bad = np.zeros((32, 48, 3), np.uint8), np.full((37, 53, 3), 90, np.uint8)
    out = tmp_path / "out"
    out.mkdir()
    station = Station(name="cam", model=model, open_source=lambda _done: _Camera([good, bad]), out=out,
                      sinks=[LogSink(out), FolderSink(out, model.spec, FolderSinkOptions(save=()))])
    stats = station.run()
    lines = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert [(line["id"], line["verdict"]) for line in lines] == [("0", "OK"), ("1", "ERROR")]
    assert stats.counts["ERROR"] == 1 and stats.sink_problems == ()
    kept = cv2.imread(str(out / "error" / "1.png"))
    assert kept.shape == (37, 53, 3) and int(kept[0, 0, 0]) == 90  # the frame as it came
    assert not (out / "error" / "0.png").exists() and not (out / "ng").exists()


def test_what_the_station_asks_of_a_source_and_a_sink_are_members(tmp_path: Path) -> None:
    from app.io.sources.capture import CapturedSource
    from app.io.sources.watch import WatchSource

    watched = tmp_path / "in"
    watched.mkdir()
    source = WatchSource(watched, polling=True)
    try:
        assert source.root == watched.absolute() and source.stalled is False  # a quiet folder is no fault
    finally:
        source.close()
    assert CapturedSource.root.fget(None) is None  # type: ignore[attr-defined]  # a camera's frames are not files
    out = tmp_path / "out"
    out.mkdir()
    sink = LogSink(out)
    assert sink.lost == 0
    sink.close()
