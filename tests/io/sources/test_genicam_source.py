"""The GenICam source (app.io.sources.genicam) against Viky, the GenTL camera simulator the `genicam` package ships
(400×400 RGBa8 or Mono8 at 20 fps, a bouncing ball). Skipped where the genicam extra is not installed.

Timing is never asserted: order, the drop count, the pixels' shape and the one-line refusals are.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from app.io.sources import Frame, SourceError
from app.io.sources.genicam import GenICamSource, simulator_cti

pytest.importorskip("harvesters.core")
SIMULATOR = simulator_cti()
pytestmark = pytest.mark.skipif(SIMULATOR is None, reason="the genicam package's Viky simulator is not installed")


def take(source: GenICamSource, *, seconds: float, pause_s: float) -> list[Frame]:
    """Frames from `source` for about `seconds`, `pause_s` spent on each (a station judging it), then close."""
    timer = threading.Timer(seconds, source.close)
    timer.start()
    received = []
    for frame in source:
        received.append(frame)
        time.sleep(pause_s)
    timer.join()
    return received


def test_frames_come_rgb_and_a_slow_consumer_loses_the_older_ones_counted() -> None:
    assert SIMULATOR is not None
    source = GenICamSource(SIMULATOR)
    received = take(source, seconds=1.5, pause_s=0.12)  # slower than the simulator's 20 fps
    ids = [int(frame.id) for frame in received]
    print(f"\nGenICam (Viky): {len(ids)} frames received, {source.dropped} dropped of {source.frames_read} read")
    assert ids == sorted(set(ids)) and len(ids) >= 2
    assert source.dropped > 0
    # every frame read was either taken or dropped, but the one left in the mailbox at close
    assert source.frames_read - len(ids) - source.dropped in (0, 1)
    assert source.ended is None and not source.stalled
    for frame in received:
        assert frame.pixels is not None and frame.pixels.dtype == np.uint8 and frame.pixels.shape == (400, 400, 3)
    assert len(np.unique(received[-1].pixels)) > 1  # a picture (the ball on its background), not a blank buffer


def test_mono8_is_set_before_acquisition_and_comes_grey_as_rgb() -> None:
    assert SIMULATOR is not None
    received = take(GenICamSource(SIMULATOR, device="1", features={"PixelFormat": "Mono8"}), seconds=0.5, pause_s=0)
    pixels = received[-1].pixels
    assert pixels is not None and pixels.shape == (400, 400, 3)
    assert (pixels[..., 0] == pixels[..., 1]).all() and (pixels[..., 1] == pixels[..., 2]).all()


def test_refusals_are_one_line(tmp_path: Path) -> None:
    assert SIMULATOR is not None
    missing, fake = tmp_path / "vendor.cti", tmp_path / "fake.cti"
    fake.write_text("not a producer")
    cases = {
        missing: f"{missing}: no such GenTL producer file",
        fake: f"{fake}: no camera found through this GenTL producer",
    }
    for cti, line in cases.items():
        with pytest.raises(SourceError) as caught:
            GenICamSource(cti)
        assert str(caught.value) == line
    with pytest.raises(SourceError) as caught:
        GenICamSource(SIMULATOR, device=7)
    assert str(caught.value) == f"{SIMULATOR}: no camera 7: 3 found (0 to 2)"
    with pytest.raises(SourceError) as caught:
        GenICamSource(SIMULATOR, device="SN-42")
    assert str(caught.value) == f"{SIMULATOR}: no camera with serial number 'SN-42' (found: 0, 1, 2)"


def test_frames_over_the_pixel_limit_are_refused_before_acquisition(monkeypatch: pytest.MonkeyPatch) -> None:
    assert SIMULATOR is not None
    monkeypatch.setenv("SEGLENS_MAX_MEGAPIXELS", "0.1")  # 100,000 pixels: Viky's frames are 160,000
    with pytest.raises(SourceError) as caught:
        GenICamSource(SIMULATOR)
    assert str(caught.value) == f"{SIMULATOR} camera 0: frames too large (400×400 = 0.2 megapixels; the limit is 0.1)"


def test_a_camera_without_frames_for_stall_s_ends_the_source_stalled() -> None:
    assert SIMULATOR is not None
    source = GenICamSource(SIMULATOR, features={"AcquisitionFrameRate": 1.0}, stall_s=0.4)  # its first in 1 s
    assert list(source) == []
    assert source.stalled
    assert source.ended == f"{SIMULATOR} camera 0: no frame for 0.4 s: the camera stalled"
    source.close()


def test_a_feature_not_there_or_refused_is_one_line() -> None:
    assert SIMULATOR is not None
    with pytest.raises(SourceError) as caught:
        GenICamSource(SIMULATOR, features={"Gamma": 2.2})
    assert str(caught.value) == f"{SIMULATOR} camera 0: the camera has no feature Gamma"
    with pytest.raises(SourceError) as caught:
        GenICamSource(SIMULATOR, features={"PixelFormat": "BayerRG12"})
    assert str(caught.value).startswith(f"{SIMULATOR} camera 0: cannot set PixelFormat to 'BayerRG12' (")
