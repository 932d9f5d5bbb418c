"""The output-folder sink (app.runs.station.sinks.folder): NG/REVIEW copies kept when a frame id comes again."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np

from app.inference.model.builder import load_spec
from app.runs.station.sinks import StationVerdict
from app.runs.station.sinks.folder import FolderSink, Pictures, copy_path
from app.runs.station.sinks.options import FolderSinkOptions

REPO = Path(__file__).resolve().parents[4]


def verdict(frame_id: str, state: str = "NG") -> StationVerdict:
    return StationVerdict(station="line-1", frame_id=frame_id, time=1.0, verdict=state, score=0.9, reason="",
                          latency_ms=1.0)


def frame(value: int) -> np.ndarray:
    return np.full((8, 8, 3), value, np.uint8)


def test_a_frame_id_that_comes_again_keeps_the_earlier_copy_beside_the_new(tmp_path):
    # a camera's ids start at 0 at every start, a watched name may be written again: the NG copy of the earlier
    # part was overwritten by the later one, the evidence of a rejected part lost
    spec = load_spec(REPO / "models" / "surface_anomaly.onnx")
    sink = FolderSink(tmp_path, spec, FolderSinkOptions(save=(), keep_files=10))
    for second, value in enumerate((10, 20, 30)):
        sink.publish_pictures(verdict("0"), Pictures(None, frame(value), None))
        os.utime(tmp_path / "ng" / "0.png", (second, second))  # their order, whatever the clock's grain
    assert sink.problem is None
    kept = {path.name: int(cv2.imread(str(path))[0, 0, 0]) for path in (tmp_path / "ng").iterdir()}
    assert kept == {"0.png": 30, "0_2.png": 10, "0_3.png": 20}  # the newest where the viewer looks for it
    # the retention counts them all, oldest first
    again = FolderSink(tmp_path, spec, FolderSinkOptions(save=(), keep_files=2))
    assert sorted(path.name for path in (tmp_path / "ng").iterdir()) == ["0.png", "0_3.png"]
    again.publish_pictures(verdict("sub/part.png", "REVIEW"), Pictures(None, frame(40), None))
    assert sorted(path.name for path in (tmp_path / "ng").iterdir()) == ["0.png"]


def test_an_output_folder_gone_is_the_sinks_problem_and_not_made_again(tmp_path):
    # the sink made it again (mkdir parents): a share unmounted under it would be filled in its place, as the log
    # sink refuses to
    spec = load_spec(REPO / "models" / "surface_anomaly.onnx")
    out = tmp_path / "share" / "out"
    out.mkdir(parents=True)
    sink = FolderSink(out, spec, FolderSinkOptions(save=()))
    out.rmdir()
    sink.publish_pictures(verdict("0"), Pictures(None, frame(10), None))
    assert not out.exists() and sink.lost == 1
    assert sink.problem == ("folder: cannot write the pictures of a frame (the output folder is gone (removed or "
                            "unmounted): not made again)")
    out.mkdir()  # back (mounted again): the next frame is written
    sink.publish_pictures(verdict("1"), Pictures(None, frame(20), None))
    assert (out / "ng" / "1.png").is_file() and sink.problem is None


def test_a_long_names_copy_is_valid_utf8_with_its_extension(tmp_path):
    # a name cut to fit (app.io.discover.safe_name) was cut inside a UTF-8 character (the copy's name no valid UTF-8:
    # a lone surrogate in Python, mojibake for every other program) and lost its extension; two such names that
    # differ only at their end stay apart
    spec = load_spec(REPO / "models" / "surface_anomaly.onnx")
    sink = FolderSink(tmp_path, spec, FolderSinkOptions(save=()))
    names = ["é" * 120 + "-cam1.png", "é" * 120 + "-cam2.png"]  # 245 bytes each in UTF-8
    for number, name in enumerate(names):
        sink.publish_pictures(verdict(f"line/{name}"), Pictures(None, frame(number), None))
    assert sink.problem is None and sink.lost == 0
    copies = sorted((tmp_path / "ng" / "line").iterdir())
    assert len(copies) == 2 and all(len(path.name.encode()) <= 255 for path in copies)  # strict UTF-8
    assert all(path.name.endswith(".png.png") for path in copies)  # a camera frame's copy: <id>.png


def test_an_error_frames_input_is_kept_under_error_as_ng_is(tmp_path):
    # an ERROR frame's input was kept nowhere (only NG/REVIEW were copied): a camera frame the model could not judge
    # was lost, and the operator could not see what came
    spec = load_spec(REPO / "models" / "surface_anomaly.onnx")
    out = tmp_path / "out"
    out.mkdir()
    broken = tmp_path / "in" / "cam1" / "part-9.png"
    broken.parent.mkdir(parents=True)
    sink = FolderSink(out, spec, FolderSinkOptions(keep_files=3))
    for second, data in enumerate((b"\x89PNG broken once", b"\x89PNG broken again")):
        broken.write_bytes(data)
        sink.publish_pictures(verdict("cam1/part-9.png", "ERROR"), Pictures(broken, None, None))
        os.utime(out / "error" / "cam1" / "part-9.png", (second, second))
    sink.publish_pictures(verdict("7", "ERROR"), Pictures(None, frame(70), None))  # a camera frame: its pixels
    sink.publish_pictures(verdict("8", "ERROR"), Pictures(None, None, None))  # nothing came: nothing to keep
    assert sink.problem is None and sink.lost == 0
    assert (out / "error" / "cam1" / "part-9.png").read_bytes() == b"\x89PNG broken again"
    assert (out / "error" / "cam1" / "part-9_2.png").read_bytes() == b"\x89PNG broken once"  # moved aside
    assert int(cv2.imread(str(out / "error" / "7.png"))[0, 0, 0]) == 70
    assert sorted(p.name for p in (out / "error").rglob("*") if p.is_file()) == ["7.png", "part-9.png", "part-9_2.png"]
    assert copy_path(out, verdict("7", "ERROR"), Pictures(None, frame(70), None)) == out / "error" / "7.png"
    assert copy_path(out, verdict("8", "ERROR"), Pictures(None, None, None)) is None
    # the retention counts them with the others, oldest first
    again = FolderSink(out, spec, FolderSinkOptions(keep_files=2))
    assert sorted(p.name for p in (out / "error").rglob("*") if p.is_file()) == ["7.png", "part-9.png"]
    broken.unlink()  # gone before its copy was made (the line took it away): no copy, and no alarm
    again.publish_pictures(verdict("cam1/gone.png", "ERROR"), Pictures(broken, None, None))
    assert again.problem is None and again.lost == 0 and not (out / "error" / "cam1" / "gone.png").exists()


def test_retention_removes_the_folders_it_empties_and_never_through_a_link(tmp_path):
    spec = load_spec(REPO / "models" / "surface_anomaly.onnx")
    outside = tmp_path / "outside"
    (outside / "empty").mkdir(parents=True)
    out = tmp_path / "out"
    out.mkdir()
    sink = FolderSink(out, spec, FolderSinkOptions(save=(), keep_files=1))
    sink.publish_pictures(verdict("a/deep/x"), Pictures(None, frame(1), None))
    (out / "ng" / "a" / "link").symlink_to(outside / "empty", target_is_directory=True)
    sink.publish_pictures(verdict("b/y"), Pictures(None, frame(2), None))
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == \
        ["ng", "ng/a", "ng/a/link", "ng/b", "ng/b/y.png"]  # a/deep emptied and gone; a holds the link still
    assert (outside / "empty").is_dir()
