from __future__ import annotations

import os
from pathlib import Path

from app.io.discover import InputFile, discover, output_stems


def test_folders_are_recursive_image_only_and_naturally_sorted(tmp_path):
    for name in ("img10.png", "img2.png", "img1.jpg", "notes.txt", "sub/deeper/x.tif", "sub/a.PNG"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    found = [f.rel.as_posix() for f in discover([tmp_path])]
    assert found == ["img1.jpg", "img2.png", "img10.png", "sub/a.PNG", "sub/deeper/x.tif"]


def test_explicit_files_kept_and_duplicates_dropped(tmp_path):
    (tmp_path / "a.png").write_bytes(b"x")
    (tmp_path / "readme.txt").write_bytes(b"x")
    found = discover([tmp_path / "readme.txt", tmp_path, tmp_path / "a.png"])
    assert [f.path.name for f in found] == ["readme.txt", "a.png"]


def test_symlink_loop_does_not_hang(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.png").write_bytes(b"x")
    os.symlink(tmp_path, tmp_path / "d" / "loop")
    assert [f.path.name for f in discover([tmp_path])] == ["a.png"]


def test_output_stems_are_distinct():
    inputs = [InputFile(Path(p), Path(p)) for p in ("a.png", "a.jpg", "A.tif", "sub/a.png")]
    assert [s.as_posix() for s in output_stems(inputs)] == ["a", "a_jpg", "A_tif", "sub/a"]
