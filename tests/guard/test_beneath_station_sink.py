"""The station's folder sink writes its NG copy beneath --out by descriptor: a folder on the way swapped for a
symlink after `copy_path` proved the path (the sink's check) gets nothing written through it (issue 36, audit
finding 2). The swap is made deterministic by wrapping `copy_path`: it proves the path, then the folder is
swapped, exactly between the check and the write."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import app.runs.station.sinks.folder as folder_sink
from app.inference.model.builder import load_spec
from app.runs.station.sinks import StationVerdict
from app.runs.station.sinks.folder import FolderSink, Pictures
from app.runs.station.sinks.options import FolderSinkOptions

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX descriptors (dir_fd) and symlinks")


def test_the_ng_copy_is_not_written_through_a_folder_swapped_for_a_link_after_the_check(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    (out / "ng" / "line1").mkdir(parents=True)
    elsewhere.mkdir()
    real = folder_sink.copy_path

    def proved_then_swapped(*args: object) -> Path | None:
        target = real(*args)  # type: ignore[arg-type]
        os.rename(out / "ng" / "line1", out / "ng" / "moved")
        os.symlink(elsewhere, out / "ng" / "line1")
        return target

    monkeypatch.setattr(folder_sink, "copy_path", proved_then_swapped)
    sink = FolderSink(out, load_spec(REPO / "models" / "surface_anomaly.onnx"), FolderSinkOptions(save=()))
    verdict = StationVerdict(station="line-1", frame_id="line1/0", time=1.0, verdict="NG", score=0.9, reason="",
                             latency_ms=1.0)
    sink.publish_pictures(verdict, Pictures(None, np.full((8, 8, 3), 10, np.uint8), None))
    assert list(elsewhere.iterdir()) == []
    assert sink.lost == 1
    assert sink.problem is not None and "line1: refused to write through a symbolic link" in sink.problem
