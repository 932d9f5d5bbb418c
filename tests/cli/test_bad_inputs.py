"""The bad-input corpus (tools/make_bad_corpus.py) mixed with good images, through the CLI (no Qt here: the
viewer's half is tests/ui/test_bad_inputs_viewer.py)."""

from __future__ import annotations

import csv
import subprocess
import sys

import numpy as np
from conftest import REPO
from PIL import Image


def test_cli_on_the_corpus(models, bad_corpus, tmp_path):
    folder, expected = bad_corpus
    assert len(expected) >= 30
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "app.cli", "run", str(models("rgb_classes")), str(folder),
                           "--out", str(out), "--save", "mask,overlay", "--device", "cpu"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "Warning" not in done.stderr
    with open(out / "seglens_report.csv", newline="", encoding="utf-8") as handle:
        rows = {r["path"]: r for r in csv.DictReader(handle)}
    printed = done.stderr.splitlines()
    for name, problem in expected.items():
        row = rows[str(folder / name)]
        if problem is None:
            assert row["status"] == "ok", (name, row["error"])
            mask = np.asarray(Image.open(out / f"{name}_mask.png"))
            assert mask.shape == (int(row["height"]), int(row["width"]))
        else:
            assert row["status"] == "error", name
            assert name.split("/")[-1] in row["error"] and problem in row["error"] and "\n" not in row["error"]
            assert f"error: {row['error']}" in printed, name  # the report's line, on the terminal as it stands
    assert not list(out.rglob("*.tmp")) and not list(out.rglob("*.partial"))
