"""Decisions fail closed on Ray too: an input whose model output is NaN is an error row (as locally), never OK."""

from __future__ import annotations

import csv
import logging
import os

import numpy as np
import pytest
from PIL import Image

from app.cli import main

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow  # a local Ray instance per module: seconds to start, ~40 s in all


@pytest.fixture(scope="module")
def cluster():
    os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = "0"  # workers use this environment as it is
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
             _node_ip_address="127.0.0.1")
    yield
    ray.shutdown()


def test_a_nan_output_is_an_error_row_on_ray(cluster, models, tmp_path):
    model = models("nan_when_dark_classifier")
    model.with_suffix(".yaml").write_text("classes: [good, scratch, pit]\noutput:\n  min_confidence: 0.2\n"
                                          "verdict:\n  fail_if:\n    - {top1_in: [scratch, pit]}\n")
    folder = tmp_path / "in"
    folder.mkdir()
    Image.fromarray(np.full((32, 32, 3), 200, np.uint8)).save(folder / "bright.png")
    Image.fromarray(np.full((32, 32, 3), 10, np.uint8)).save(folder / "dark.png")
    assert main(["run", str(model), str(folder), "--out", str(tmp_path / "out"), "--ray", "--ray-actors", "1"]) == 1
    with open(tmp_path / "out" / "seglens_report.csv", newline="", encoding="utf-8") as handle:
        rows = {row["path"].rsplit("/", 1)[-1]: row for row in csv.DictReader(handle)}
    assert (rows["bright.png"]["status"], rows["bright.png"]["verdict"]) == ("ok", "ok")
    dark = rows["dark.png"]
    assert (dark["status"], dark["verdict"]) == ("error", "")
    assert "dark.png" in dark["error"] and "non-finite model output 'logits': 3 NaN of 3 values" in dark["error"]
