"""The calibrate example of the README and docs/cli.md runs on what ships: the folders it names are made by the
command printed beside it (the anomaly demo's own synthetic surfaces, models/training/calibration_set.py), and
calibrate runs on what that command writes."""

from __future__ import annotations

import re
import shlex

import pytest

from app.cli import main
from tests.calibrate_fixtures import REPO, copy_demo

MAKER = "python -m models.training.calibration_set"


def _blocks(page: str) -> list[str]:
    """The ```bash blocks of `page` that run `seglens-cli calibrate` on the bundled anomaly model."""
    text = (REPO / page).read_text(encoding="utf-8")
    return [b for b in re.findall(r"```bash\n(.*?)```", text, re.S) if "seglens-cli calibrate surface_anomaly" in b]


@pytest.mark.parametrize("page", ["README.md", "docs/cli.md"])
def test_the_calibrate_example_names_folders_its_own_block_makes(page):
    blocks = _blocks(page)
    assert blocks, f"{page}: no calibrate example on the bundled anomaly model"
    for block in blocks:
        made = [shlex.split(line.partition("#")[0])[-1] for line in block.splitlines() if MAKER in line]
        assert made, f"{page}: the calibrate example's folders are made by no command beside it:\n{block}"
        line = next(line for line in block.splitlines() if "seglens-cli calibrate" in line)
        words = shlex.split(line.partition("#")[0])
        ok, ng = words[words.index("--ok") + 1], words[words.index("--ng") + 1]
        assert (ok.rstrip("/"), ng.rstrip("/")) == (f"{made[0]}/ok", f"{made[0]}/ng"), block


def test_calibrate_runs_on_what_the_maker_writes(tmp_path, capsys):
    from models.training import calibration_set

    assert calibration_set.main([str(tmp_path / "calib"), "--ok-count", "4", "--ng-count", "4"]) == 0
    ok, ng = tmp_path / "calib" / "ok", tmp_path / "calib" / "ng"
    assert len(list(ok.glob("*.png"))) == len(list(ng.glob("*.png"))) == 4
    capsys.readouterr()
    demo = copy_demo(tmp_path)
    assert main(["calibrate", str(demo), "--ok", str(ok), "--ng", str(ng), "--device", "cpu"]) == 0
    said = capsys.readouterr().out
    assert said.startswith("calibrate: Surface anomaly (demo, trained on clean surfaces) on 4 OK and 4 NG images")
