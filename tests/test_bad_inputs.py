"""The bad-input corpus (tools/make_bad_corpus.py) mixed with good images, through the CLI and the viewer."""

from __future__ import annotations

import csv
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO
from PIL import Image
from PySide6.QtCore import QSettings

sys.path.insert(0, str(REPO / "tools"))
from make_bad_corpus import make_corpus

from app.ui.main_window import MainWindow


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "dump"
    return folder, make_corpus(folder)


def test_cli_on_the_corpus(models, corpus, tmp_path):
    folder, expected = corpus
    assert len(expected) >= 30
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "app.cli", "run", str(models("rgb_classes")), str(folder),
                           "--out", str(out), "--save", "mask,overlay", "--device", "cpu"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "Warning" not in done.stderr
    with open(out / "seglens_report.csv", newline="", encoding="utf-8") as handle:
        rows = {r["path"]: r for r in csv.DictReader(handle)}
    for name, problem in expected.items():
        row = rows[str(folder / name)]
        if problem is None:
            assert row["status"] == "ok", (name, row["error"])
            stem = (out / name).with_suffix("")
            mask = np.asarray(Image.open(stem.with_name(stem.name + "_mask.png")))
            assert mask.shape == (int(row["height"]), int(row["width"]))
        else:
            assert row["status"] == "error", name
            assert name.split("/")[-1] in row["error"] and problem in row["error"] and "\n" not in row["error"]
            assert f"{name}: " in done.stderr or name in done.stderr
    assert not list(out.rglob("*.tmp")) and not list(out.rglob("*.partial"))


def test_viewer_on_the_corpus(qtbot, models, corpus, tmp_path):
    folder, expected = corpus
    window = MainWindow(settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat),
                        model_path=models("rgb_classes"), device="cpu")
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.model_changed, timeout=20_000):
        window.open_model()
    window.add_paths([folder])
    assert len(window.files.paths()) == len(expected)
    with qtbot.waitSignal(window.run_all_finished, timeout=120_000):
        window.run_all(tmp_path / "export")
    for name, problem in expected.items():
        status = window.files.status(str(folder / name))
        assert status == ("done" if problem is None else "error"), name
    bad = next(n for n, p in expected.items() if p == "empty file")
    with qtbot.waitSignal(window.image_failed, timeout=20_000):
        window.files.setCurrentRow(window.files.paths().index(str(folder / bad)))
    good = next(n for n, p in expected.items() if p is None)
    with qtbot.waitSignal(window.overlay_shown, timeout=20_000):  # still responsive, still working
        window.files.setCurrentRow(window.files.paths().index(str(folder / good)))
    window.close()
