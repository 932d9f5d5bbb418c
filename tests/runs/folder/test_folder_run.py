"""The one folder-run seam (issue 25): RunPlan checked once with the CLI's one-line refusals, run_folder giving
what `seglens-cli run` gives, the viewer's scores-only run writing nothing, and no circle inside app.cli."""

from __future__ import annotations

import ast
import csv
import json
from dataclasses import asdict
from pathlib import Path

import pytest
from conftest import stripes
from PIL import Image

from app.cli import main
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.runs.folder.plan import Callbacks
from app.runs.folder.run import LocalRunner, PlanRefused, RunPlan, plan_run, run_folder
from app.runs.folder.volumes import VolumeOptions

REPO = Path(__file__).resolve().parents[3]


def folder_of(root: Path, count: int = 3) -> Path:
    root.mkdir()
    for i in range(count):
        Image.fromarray(stripes(30 + i, 40 + i)).save(root / f"img{i}.png")
    (root / "broken.png").write_bytes(b"not a png")
    return root


def without_timings(report: Path) -> list[dict[str, str]]:
    with report.open(newline="") as handle:
        return [{k: v for k, v in row.items() if not k.endswith("_ms")} for row in csv.DictReader(handle)]


def test_run_folder_gives_what_the_cli_gives(models, tmp_path, capsys):
    model, folder = models("rgb_classes"), folder_of(tmp_path / "in")
    assert main(["run", str(model), str(folder), "--out", str(tmp_path / "cli"), "--device", "cpu"]) == 1
    capsys.readouterr()
    spec = load_spec(model)
    plan = plan_run(spec, [folder], out=tmp_path / "seam")
    run = run_folder(plan, LocalRunner(open_session(spec, "cpu")))
    assert (run.summary.ok, run.summary.failed) == (3, 1)
    assert run.report == tmp_path / "seam" / "seglens_report.csv"
    assert without_timings(run.report) == without_timings(tmp_path / "cli" / "seglens_report.csv")
    assert sorted(p.name for p in (tmp_path / "seam").glob("*.png")) == \
        sorted(p.name for p in (tmp_path / "cli").glob("*.png"))
    from app.runs.outputs.provenance import record_path

    record = json.loads(record_path(run.report).read_text())
    assert run.identity is not None and record == json.loads(json.dumps(asdict(run.identity)))
    assert record == json.loads(record_path(tmp_path / "cli" / "seglens_report.csv").read_text())


def test_a_plan_without_a_folder_scores_and_writes_nothing(models, tmp_path):
    model, folder = models("rgb_classes"), folder_of(tmp_path / "in")
    spec = load_spec(model)
    from app.io.discover import discover

    seen = []
    plan = RunPlan(spec=spec, inputs=tuple(discover([folder])), out=None, save=())
    run = run_folder(plan, LocalRunner(open_session(spec, "cpu")),
                     progress=Callbacks(outcome=lambda outcome, _summary: seen.append(outcome.error is None)))
    assert (run.summary.ok, run.summary.failed) == (3, 1) and seen == [False, True, True, True]
    assert run.report is None and run.identity is None
    assert sorted(p.name for p in folder.iterdir()) == ["broken.png", "img0.png", "img1.png", "img2.png"]


def test_per_slice_with_resume_is_refused_in_the_cli_s_words(models, tmp_path):
    spec = load_spec(models("rgb_classes"))
    with pytest.raises(PlanRefused) as refused:
        RunPlan(spec=spec, inputs=(), out=tmp_path, resume=True, volumes=VolumeOptions(per_slice=True))
    assert str(refused.value) == ("--per-slice with --resume is not supported: a carried volume would lose its slice "
                                  "rows; run again without --resume")


@pytest.mark.parametrize(("options", "line"), [
    ({}, "no images found in: "),
    ({"ray": True, "reference": "refs"}, "--reference with --ray is not supported"),
    ({"exports": ("source",)}, "--export source writes the source series de-identified: it needs --anonymize"),
])
def test_plan_run_refuses_in_one_line(models, tmp_path, options, line):
    spec = load_spec(models("rgb_classes"))
    empty = tmp_path / "empty"
    empty.mkdir()
    paths = [empty] if not options else [folder_of(tmp_path / "in")]
    if "reference" in options:
        (tmp_path / "refs").mkdir()
        options = {**options, "reference": tmp_path / "refs"}
    with pytest.raises(PlanRefused) as refused:
        plan_run(spec, paths, out=tmp_path / "out", **options)
    assert str(refused.value).startswith(line) and "\n" not in str(refused.value)
    assert not (tmp_path / "out").exists()  # nothing written before the plan holds


def test_the_cli_has_no_import_circle():
    """cli/cluster.py once imported cli/run.py's private helpers while cli/run.py imported it, and run, cluster and
    report imported app.cli, which imports them: progress and summaries live in cli/console.py, the shared options
    in cli/options.py, and every import inside app.cli goes one way (imports inside functions counted)."""
    folder = REPO / "app" / "cli"
    names = {p.stem: "app.cli" if p.stem == "__init__" else f"app.cli.{p.stem}" for p in folder.glob("*.py")}
    modules = set(names.values())
    graph: dict[str, set[str]] = {}
    for stem, module in names.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse((folder / f"{stem}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
        graph[module] = (found & modules) - {module}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                if nxt == goal:
                    return True
                seen.add(nxt)
                todo.append(nxt)
        return False

    assert [(a, b) for a in sorted(graph) for b in sorted(graph[a]) if reaches(b, a)] == []
    assert graph["app.cli.cluster"] == {"app.cli.options"}


def test_a_refusal_naming_an_undecodable_folder_is_escaped_once(models, tmp_path, capsys):
    """A folder name with a byte that is not UTF-8 reads `caf\\xe9` on the terminal, as everywhere: the plan's
    refusal is escaped where it is printed, not before as well (that printed `caf\\\\xe9`)."""
    import os

    empty = Path(os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9"))
    empty.mkdir()
    assert main(["run", str(models("rgb_classes")), str(empty), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: no images found in: {tmp_path}/caf\\xe9\n"


@pytest.mark.parametrize(("kind", "options", "line"), [
    ("embedded_argmax", {"threshold": 0.5, "min_confidence": 0.5},
     "--threshold: embedded_argmax.onnx outputs a label map, so no scores are kept to threshold; run it without "
     "--threshold"),
    ("classifier", {"threshold": 0.5},
     "--threshold: classifier.onnx is a classification model; --threshold is a segmentation model's pixel "
     "threshold; run it without --threshold"),
])
def test_an_option_the_model_cannot_honour_is_refused_not_ignored(models, tmp_path, kind, options, line):
    """A label-map model (2D or 3D) once ran with --threshold silently ignored, and the provenance even claimed
    "min_confidence 0.5": a threshold the model cannot honour is refused in one line."""
    spec = load_spec(models(kind))
    with pytest.raises(PlanRefused) as refused:
        plan_run(spec, [folder_of(tmp_path / "in")], out=tmp_path / "out", **options)
    assert str(refused.value) == line
    assert not (tmp_path / "out").exists()


def test_a_3d_label_volume_model_refuses_threshold(tmp_path):
    from spec3d_models import FIXED, labels3d

    spec = load_spec(labels3d(tmp_path / "labels3d.onnx", shape=FIXED))
    with pytest.raises(PlanRefused) as refused:
        plan_run(spec, [folder_of(tmp_path / "in")], out=tmp_path / "out", threshold=0.6, min_confidence=0.6)
    assert str(refused.value).startswith("--threshold: labels3d.onnx outputs a label map")
