"""The docs' pictures are made by tools/screenshots.py from the code as it is: every PNG a page shows is in
docs/screenshots.json (and every entry is shown by a page), each entry's hash of the sources that draw it matches
the tree, and each PNG is the one the tool wrote. A viewer module changed without the pictures made again fails here
(and in `.ci/run`'s docs step), naming the stale pictures."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "screenshots.py"


def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("screenshots_tool", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_every_picture_a_page_shows_is_in_the_manifest_and_every_entry_is_shown():
    screenshots = tool()
    shown = set(screenshots.shown_pictures())
    manifest = set(json.loads((REPO / "docs" / "screenshots.json").read_text(encoding="utf-8"))["pictures"])
    assert shown, "no page shows a picture: the link pattern no longer matches the pages"
    assert sorted(shown - manifest) == [], "shown by a page but not made by tools/screenshots.py"
    assert sorted(manifest - shown) == [], "in docs/screenshots.json but no page shows it"
    assert manifest <= {shot.file for shot in screenshots.SHOTS}, "an entry the tool cannot make"


def test_the_manifest_says_each_pictures_screen_size_and_state():
    screenshots = tool()
    pictures = json.loads((REPO / "docs" / "screenshots.json").read_text(encoding="utf-8"))["pictures"]
    for name, entry in pictures.items():
        width, height = screenshots.png_size(REPO / "docs" / name)
        assert entry["size"] == [width, height], name
        screen_w, screen_h = (int(v) for v in entry["screen"].split("x"))
        assert width <= screen_w and height <= screen_h, f"{name} is larger than the screen it was taken on"
        assert entry["state"] and entry["sources"], name


def test_no_picture_is_older_than_the_code_that_draws_it():
    done = subprocess.run([sys.executable, str(TOOL), "--check"], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_changed_source_or_a_png_changed_by_hand_is_named_stale(tmp_path, monkeypatch):
    screenshots = tool()
    (shot, *_) = screenshots.SHOTS
    docs = tmp_path / "docs"
    (docs / Path(shot.file).parent).mkdir(parents=True, exist_ok=True)
    (docs / shot.file).write_bytes((REPO / "docs" / shot.file).read_bytes())
    recorded = json.loads((REPO / "docs" / "screenshots.json").read_text(encoding="utf-8"))["pictures"][shot.file]
    recorded = {**recorded, "sources_sha256": screenshots.sources_hash(shot)}  # fresh, whatever the tree holds
    monkeypatch.setattr(screenshots, "DOCS", docs)
    assert screenshots._stale(shot.file, recorded, shot) == []
    assert "stale" in screenshots._stale(shot.file, {**recorded, "sources_sha256": "0" * 64}, shot)[0]
    (docs / shot.file).write_bytes((docs / shot.file).read_bytes() + b"\0")
    assert "changed by hand" in screenshots._stale(shot.file, recorded, shot)[0]
    (docs / shot.file).unlink()
    assert screenshots._stale(shot.file, recorded, shot) == [f"docs/{shot.file}: missing"]


def test_the_sources_hash_follows_a_viewer_module_and_not_its_bytecode(tmp_path, monkeypatch):
    screenshots = tool()
    for folder in screenshots.VIEWER:
        (tmp_path / folder / "__pycache__").mkdir(parents=True)
        (tmp_path / folder / "part.py").write_text("x = 1\n")
    monkeypatch.setattr(screenshots, "REPO", tmp_path)
    shot = screenshots.Shot("x.png", (1280, 720), "a state", "main_window")
    before = screenshots.sources_hash(shot)
    (tmp_path / "app/ui/__pycache__/part.cpython-311.pyc").write_bytes(b"compiled")
    assert screenshots.sources_hash(shot) == before
    (tmp_path / "app/ui/part.py").write_text("x = 2\n")
    assert screenshots.sources_hash(shot) != before
