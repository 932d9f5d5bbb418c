"""The video source (app.io.sources.video) on real files written by OpenCV's own VideoWriter (FFV1, lossless).

Timing is never asserted (the machine is shared): how long a realtime playback took is printed (`-s` shows it);
order, the drop count and the pixels are asserted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt
import pytest

from app.io.sources import Frame, SourceError
from app.io.sources.video import VideoSource
from tests.station_fixtures import mjpeg_camera

FRAMES, FPS, WIDTH, HEIGHT = 60, 30.0, 64, 48


def picture(number: int) -> npt.NDArray[np.uint8]:
    """Frame `number` as RGB: the number in the red channel, other values in the others, the number drawn."""
    rgb = np.empty((HEIGHT, WIDTH, 3), np.uint8)
    rgb[..., 0], rgb[..., 1], rgb[..., 2] = number, 255 - number, (number * 7) % 256
    cv2.putText(rgb, str(number), (4, 40), cv2.FONT_HERSHEY_SIMPLEX, 1.0, (255, 255, 255), 2)
    return rgb


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 numbered frames at 30 fps (2 s), FFV1 in AVI: decoded back exactly."""
    path = tmp_path_factory.mktemp("video") / "numbered.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"FFV1"), FPS, (WIDTH, HEIGHT))
    assert writer.isOpened()
    for number in range(FRAMES):
        writer.write(cv2.cvtColor(picture(number), cv2.COLOR_RGB2BGR))
    writer.release()
    return path


def assert_is_frame(frame: Frame) -> None:
    assert frame.path is None and frame.pixels is not None
    assert frame.pixels.dtype == np.uint8 and frame.pixels.shape == (HEIGHT, WIDTH, 3)
    np.testing.assert_array_equal(frame.pixels, picture(int(frame.id)))  # the id is the frame's own number


def test_realtime_plays_at_the_files_rate_and_counts_what_a_slow_consumer_missed(video: Path) -> None:
    received: list[Frame] = []
    started = time.monotonic()
    with VideoSource(video) as source:
        for frame in source:
            received.append(frame)
            time.sleep(0.07)  # a station judging a frame in 70 ms: slower than 30 fps
        elapsed = time.monotonic() - started
        dropped, ended = source.dropped, source.ended
    ids = [int(frame.id) for frame in received]
    print(f"\nrealtime: {len(ids)} of {FRAMES} frames received, {dropped} dropped, in {elapsed:.2f} s "
          f"(the video lasts {FRAMES / FPS:.2f} s)")
    assert ids == sorted(set(ids)) and len(ids) < FRAMES  # increasing, and the slow consumer missed some
    assert ids[-1] == FRAMES - 1  # the newest wins: the last frame is never the one dropped
    assert dropped == FRAMES - len(ids)
    assert ended == f"{video}: end of the video ({FRAMES} frames)"
    assert not source.stalled
    for frame in received:
        assert_is_frame(frame)
    times = [frame.timestamp for frame in received]
    assert times == sorted(times)


def test_offline_yields_every_frame_in_order_with_its_pixels(video: Path) -> None:
    with VideoSource(video, realtime=False) as source:
        frames = list(source)
        assert source.dropped == 0
        assert source.ended == f"{video}: end of the video ({FRAMES} frames)"
    assert [frame.id for frame in frames] == [str(n) for n in range(FRAMES)]
    for frame in frames:
        assert_is_frame(frame)


def test_close_from_another_thread_ends_a_realtime_playback(video: Path) -> None:
    source = VideoSource(video)
    received: list[str] = []
    timer = threading.Timer(0.3, source.close)
    timer.start()
    for frame in source:
        received.append(frame.id)
    timer.join()
    assert 0 < len(received) < FRAMES
    assert source.ended is None  # closed, not ended by itself


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "absent.avi"
    with pytest.raises(SourceError) as caught:
        VideoSource(missing)
    assert str(caught.value) == f"{missing}: no such video file"


def test_a_file_that_is_no_video_is_one_line(tmp_path: Path) -> None:
    text = tmp_path / "notes.avi"
    text.write_text("not a video")
    with pytest.raises(SourceError) as caught:
        VideoSource(text)
    assert str(caught.value) == f"{text}: not a video OpenCV can read (FFmpeg cannot open it)"


def test_a_bad_url_is_one_line_without_its_password(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SourceError) as caught:
        VideoSource("rtsp://operator:secret@127.0.0.1:1/line1", open_timeout_s=2)
    assert str(caught.value) == ("rtsp://***@127.0.0.1:1/line1: cannot open the stream (refused, not found, "
                                 "or no answer within 2 s)")
    assert capfd.readouterr().err == ""  # FFmpeg's own 'Connection refused' line kept off the terminal


def test_an_absent_camera_is_one_line(capfd: pytest.CaptureFixture[str]) -> None:
    index = next(n for n in range(64) if not Path(f"/dev/video{n}").exists())
    with pytest.raises(SourceError) as caught:
        VideoSource(index)
    assert str(caught.value) == f"camera {index}: cannot open the camera (no such device, or in use by another program)"
    assert capfd.readouterr().err == ""  # OpenCV's own warnings too


def test_frames_over_the_pixel_limit_are_refused_before_a_frame_is_read(
        video: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEGLENS_MAX_MEGAPIXELS", "0.001")  # 1,000 pixels: a 64×48 frame is 3,072
    with pytest.raises(SourceError) as caught:
        VideoSource(video)
    assert str(caught.value) == f"{video}: frames too large (64×48 = 0.003 megapixels; the limit is 0.001)"


@pytest.fixture
def stream_that_stops() -> Iterator[str]:
    """An MJPEG stream over HTTP on loopback (as an IP camera serves one): 30 frames at 20 fps, then silence with
    the connection kept open (a camera that hangs, not one that hangs up)."""
    frames = [cv2.cvtColor(picture(number), cv2.COLOR_RGB2BGR) for number in range(30)]
    with mjpeg_camera(frames, gap_s=0.05, hold_s=30) as url:
        yield url


def test_a_stream_that_stops_sending_ends_stalled(stream_that_stops: str) -> None:
    with VideoSource(stream_that_stops, stall_s=1.0) as source:
        ids = [int(frame.id) for frame in source]
        assert source.stalled
        assert source.ended == f"{stream_that_stops}: no frame for 1 s: the stream stalled"
        assert ids == sorted(set(ids)) and ids[-1] == 29
        assert source.dropped == 30 - len(ids)


def damaged(path: Path, *, frames: int = 30, broken: tuple[int, ...] = (10, 11)) -> Path:
    """A Motion-JPEG AVI of `frames` frames whose frames `broken` are zeroed out (each JPEG's bytes): FFmpeg cannot
    decode those, and reads the ones after them."""
    rng = np.random.default_rng(0)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), FPS, (WIDTH, HEIGHT))
    for _ in range(frames):
        writer.write(rng.integers(0, 255, (HEIGHT, WIDTH, 3), dtype=np.uint8))
    writer.release()
    data = bytearray(path.read_bytes())
    starts = [i for i in range(len(data) - 2) if data[i:i + 3] == b"\xff\xd8\xff"]  # each frame's JPEG
    assert len(starts) == frames
    for number in broken:
        data[starts[number]:starts[number + 1] - 8] = bytes(starts[number + 1] - 8 - starts[number])
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("realtime", [False, True])
def test_a_damaged_frame_is_counted_and_the_frames_after_it_still_come(tmp_path: Path, realtime: bool,
                                                                       capfd: pytest.CaptureFixture[str]) -> None:
    # it ended at the first frame FFmpeg could not decode: `end of the video (10 frames)`, 20 frames never judged
    # nor counted, and `watch` exited 0 as for a video played to its end
    path = damaged(tmp_path / "damaged.avi")
    with VideoSource(path, realtime=realtime) as source:
        ids = [frame.id for frame in source]
        ended, dropped = source.ended, source.dropped
    assert ended == f"{path}: end of the video (30 frames, 2 of them unreadable)"
    assert len(ids) + dropped == 28 and sorted(ids, key=int) == ids
    assert not {"10", "11"} & set(ids) and (realtime or ids == [str(n) for n in range(30) if n not in (10, 11)])
    assert source.unreadable == 2
    assert "@ 0x" not in capfd.readouterr().err  # FFmpeg's own `[mjpeg @ 0x…] …` lines kept off the terminal


def test_a_file_of_random_bytes_named_mp4_is_one_line_and_ffmpeg_says_nothing(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "part.mp4"
    path.write_bytes(np.random.default_rng(1).integers(0, 255, 100_000, dtype=np.uint8).tobytes())
    with pytest.raises(SourceError) as caught:
        VideoSource(path)
    assert str(caught.value) == f"{path}: not a video OpenCV can read (FFmpeg cannot open it)"
    assert capfd.readouterr().err == ""  # was `[mov,mp4,m4a,3gp,3g2,mj2 @ 0x…] moov atom not found`
