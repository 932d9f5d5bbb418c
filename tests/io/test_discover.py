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
    assert [s.as_posix() for s in output_stems(inputs)] == ["a.png", "a.jpg", "A.tif", "sub/a.png"]


def test_a_folder_that_cannot_be_listed_is_an_input_with_its_problem(tmp_path, monkeypatch):
    """os.walk skips an unreadable sub-folder silently; its images would vanish from the report unnoticed."""
    import os

    from PIL import Image

    root = tmp_path / "in"
    (root / "locked").mkdir(parents=True)
    Image.new("RGB", (4, 4)).save(root / "a.png")
    Image.new("RGB", (4, 4)).save(root / "locked" / "b.png")
    real_scandir = os.scandir

    def scandir(path="."):
        if os.fspath(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)  # as root in CI, chmod 000 would not stop the walk
    found = discover([root])
    assert [(f.rel.as_posix(), f.problem) for f in found] == [
        ("a.png", None),
        ("locked", "cannot list this folder (Permission denied): the images in it were not read"),
    ]


def test_a_long_name_is_cut_between_characters_and_keeps_its_extension():
    # the cut fell inside a 2-byte UTF-8 character (a lone surrogate in the name) and took the extension with it
    from app.io.discover import safe_name

    first, second = safe_name("é" * 120 + "-cam1.png"), safe_name("é" * 120 + "-cam2.png")
    assert first != second and first.endswith(".png") and second.endswith(".png")
    assert len(first.encode("utf-8")) <= 255 - len("_disagreement.png") - 40  # strict: no surrogate in it
    assert first.startswith("é" * 80)
    assert safe_name("short.png") == "short.png" and safe_name("..") == "dotdot"
