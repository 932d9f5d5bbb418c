"""Tiled images in folder runs and the CLI: --tile / --no-tile, stopping mid-image leaves nothing half-written."""

from __future__ import annotations

import csv

import cv2
import numpy as np
from PIL import Image

from app.cli import main
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.io.discover import discover
from app.runs.folder.batch import run_inputs
from app.runs.folder.plan import Callbacks, RunPlan
from app.runs.outputs.report import ReportWriter


def spots_image(path, size=1024, count=20):
    image = np.zeros((size, size), np.uint8)
    for i in range(count):
        y, x = 40 + (i * 97) % (size - 80), 40 + (i * 53) % (size - 80)
        image[y: y + 3, x: x + 3] = 255
    Image.fromarray(image).save(path)
    return count


def components(path) -> int:
    return cv2.connectedComponents(np.asarray(Image.open(path)), connectivity=8)[0] - 1


def rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_tile_and_no_tile_override_the_sidecar_for_one_run(models, tmp_path):
    model = models("fixed_bright_spots")
    count = spots_image(tmp_path / "a.png")
    assert main(["run", str(model), str(tmp_path / "a.png"), "--out", str(tmp_path / "plain"), "--device", "cpu"]) == 0
    assert components(tmp_path / "plain" / "a.png_mask.png") == 0  # stretched to 256²: the spots vanish
    assert main(["run", str(model), str(tmp_path / "a.png"), "--out", str(tmp_path / "tiled"), "--tile",
                 "--batch", "3"]) == 0
    assert components(tmp_path / "tiled" / "a.png_mask.png") == count
    model.with_suffix(".yaml").write_text("input:\n  resize: tile\n")
    assert main(["run", str(model), str(tmp_path / "a.png"), "--out", str(tmp_path / "off"), "--no-tile"]) == 0
    assert components(tmp_path / "off" / "a.png_mask.png") == 0


def test_tile_refused_for_a_model_that_cannot_be_tiled(models, tmp_path, capsys):
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "a.png")
    code = main(["run", str(models("embedded_argmax")), str(tmp_path / "a.png"), "--out", str(tmp_path / "o"),
                 "--tile"])
    assert code == 2 and "cannot be tiled" in capsys.readouterr().err


def test_stopping_mid_image_writes_nothing_for_it_and_lists_it(models, tmp_path):
    path = models("fixed_bright_spots")
    path.with_suffix(".yaml").write_text("input:\n  resize: tile\n")
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a", "b", "c"):
        spots_image(folder / f"{name}.png", size=700)
    model = open_session(load_spec(path), "cpu")
    tiles_seen = []

    def stop() -> bool:  # asked before each image and each tile batch: stop inside the second image
        return len(tiles_seen) > 20

    out = tmp_path / "out"
    with ReportWriter(out / "report.csv", model.spec) as report:
        plan = RunPlan(spec=model.spec, inputs=tuple(discover([folder])), out=out)
        summary = run_inputs(model, plan, report=report, should_stop=stop,
                             progress=Callbacks(tiles=lambda done, total: tiles_seen.append((done, total))))
    assert summary.cancelled and summary.ok == 1
    assert sorted(p.name for p in out.iterdir()) == ["a.png_mask.png", "report.csv"]  # no b_mask, no temporaries
    assert [r["status"] for r in rows(out / "report.csv")] == ["ok", "skipped", "skipped"]
    assert tiles_seen[:16][-1] == (16, 16) and tiles_seen[-1][0] < 16  # 4 × 4 tiles of 700², stopped in b


def test_bench_runs_a_tiled_model_raw_and_through_the_pipeline(models, capsys):
    model = models("fixed_bright_spots")
    model.with_suffix(".yaml").write_text("input:\n  resize: tile\n  tile: {batch: 2}\n")
    assert main(["bench", str(model), "--size", "300x400", "--runs", "2", "--save", "none", "--json"]) == 0
    assert "pipeline_over_raw" in capsys.readouterr().out
