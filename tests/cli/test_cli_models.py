"""Bundled models by name: `seglens-cli models`, a name wherever MODEL is asked, and a path that beats a name."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import REPO

from app.cli import main
from app.errors import ModelError
from app.inference.describe.bundled import bundled_models, bundled_names, resolve_model

# the prompt pair's two halves (named by models/prompt_demo.yaml's prompt: section) are no image models of their own
PROMPT_PAIR = {"prompt_demo_encoder", "prompt_demo_decoder"}
BUNDLED = sorted(p.stem for p in (REPO / "models").glob("*.onnx") if p.stem not in PROMPT_PAIR)
SAMPLE = REPO / "resources" / "samples" / "surface" / "surface_01_scratches.jpg"


# --- resolve_model ------------------------------------------------------------------------------------

def test_bundled_models_are_the_onnx_files_in_models():
    assert bundled_names() == BUNDLED and "surface_defects" in BUNDLED
    assert all(p.parent == REPO / "models" and p.suffix == ".onnx" for p in bundled_models())


@pytest.mark.parametrize("text", ["surface_defects", "surface_defects.onnx", Path("surface_defects")])
def test_a_bundled_name_resolves_with_or_without_onnx(text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_model(text) == REPO / "models" / "surface_defects.onnx"


def test_an_existing_file_beats_a_bundled_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nuclei.onnx").write_bytes(b"not checked here")
    (tmp_path / "nuclei").write_bytes(b"a file named like the model")
    assert resolve_model("nuclei.onnx") == Path("nuclei.onnx")
    assert resolve_model("./nuclei.onnx") == Path("nuclei.onnx")
    assert resolve_model("nuclei") == Path("nuclei")


def test_a_folder_does_not_hide_a_bundled_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nuclei").mkdir()  # the user's images, in a folder named like the model
    assert resolve_model("nuclei") == REPO / "models" / "nuclei.onnx"
    (tmp_path / "mine").mkdir()
    assert resolve_model("mine") == Path("mine")  # not a name: the spec loader says what is wrong with a folder


def test_an_unknown_name_is_one_line_with_the_bundled_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelError) as caught:
        resolve_model("xyz")
    message = str(caught.value)
    assert message.startswith("unknown model 'xyz': not a file, and not a bundled model (")
    assert all(name in message for name in BUNDLED) and "\n" not in message


@pytest.mark.parametrize(("text", "nearest"), [("ct_dem", "ct_demo"), ("CT_Demo", "ct_demo"), ("nucleus", "nuclei"),
                                               ("surface_anomaly_v2.onnx", "surface_anomaly")])
def test_a_mistyped_name_suggests_the_nearest_bundled_one(text, nearest, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelError) as caught:
        resolve_model(text)
    assert str(caught.value) == (f"no model '{text}': not a file, and no bundled model of that name — "
                                 f"did you mean {nearest}?")


@pytest.mark.parametrize("text", ["xyz/m.onnx", "m.onnx", "./surface_defects"])
def test_a_missing_path_is_file_not_found(text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelError, match=r"file not found \(bundled models: ct3d_demo, ct_demo, "):
        resolve_model(text)


# --- seglens-cli models -------------------------------------------------------------------------------

def test_models_lists_every_bundled_model(capsys):
    assert main(["models"]) == 0
    lines = capsys.readouterr().out.partition("bundled prompt model")[0].splitlines()[:-1]
    assert str(REPO / "models") in lines[0]
    assert [line.split()[0] for line in lines[1:]] == BUNDLED
    nuclei = next(line for line in lines if line.startswith("nuclei "))
    assert "segmentation" in nuclei and "gray 256×256" in nuclei and "2 classes: background, nucleus" in nuclei
    assert "MB" in nuclei and "nuclei.yaml" in nuclei
    assert "classification" in next(line for line in lines if line.startswith("defect_type "))
    assert next(line for line in lines if line.startswith("surface_anomaly ")).split()[1] == "anomaly"


def test_models_json(capsys):
    assert main(["models", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in rows] == BUNDLED
    for row in rows:
        assert {"name", "task", "input", "classes", "size_mb", "sidecar", "path"} <= set(row)
        assert Path(row["path"]) == REPO / "models" / f"{row['name']}.onnx" and row["error"] is None
        assert row["size_mb"] > 0 and row["classes"] and row["task"] in ("segmentation", "classification", "anomaly",
                                                                          "instances")
    tasks = {row["name"]: row["task"] for row in rows}
    assert (tasks["surface_anomaly"], tasks["surface_defects"], tasks["defect_type"], tasks["surface_instances"]) == \
        ("anomaly", "segmentation", "classification", "instances")
    instances = next(row for row in rows if row["name"] == "surface_instances")
    assert instances["classes"] == ["scratch", "pit", "stain"] and instances["input"] == "rgb 544×960"
    surface = next(row for row in rows if row["name"] == "surface_defects")
    assert surface["input"] == "rgb 540×960" and surface["sidecar"] == "surface_defects.yaml"
    assert surface["classes"][:2] == ["background", "scratch"]


def test_models_opens_no_session(monkeypatch, capsys):
    import app.inference.runtime.session as session

    def refuse(*_args, **_kwargs):
        raise AssertionError("models opened a session")

    monkeypatch.setattr(session, "open_session", refuse)
    assert main(["models"]) == 0


# --- a name wherever MODEL is asked ---------------------------------------------------------------------

def test_run_by_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    assert main(["run", "surface_defects", str(SAMPLE), "--out", str(out), "--device", "cpu"]) == 0
    assert (out / "surface_01_scratches.jpg_mask.png").is_file()
    assert "1 input: 1 ok" in capsys.readouterr().out


def test_info_by_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["info", "nuclei.onnx", "--no-session", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert Path(data["model"]) == REPO / "models" / "nuclei.onnx" and data["task"] == "segmentation"


def test_bench_by_name(capsys):
    assert main(["bench", "nuclei", "--size", "64x64", "--runs", "2", "--save", "none", "--device", "cpu",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["raw"]["runs"] == 2


def test_compare_by_names(tmp_path, capsys):
    sample = REPO / "resources" / "samples" / "nuclei" / "nuclei_01.png"
    assert main(["compare", "nuclei", "nuclei_fp16", str(sample), "--out", str(tmp_path / "out"),
                 "--device", "cpu"]) == 0
    assert "A = nuclei.onnx" in capsys.readouterr().out


def test_a_file_in_the_cwd_beats_the_bundled_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the classifier copied under the segmentation model's name
    shutil.copy(REPO / "models" / "defect_type.onnx", tmp_path / "nuclei.onnx")
    shutil.copy(REPO / "models" / "defect_type.yaml", tmp_path / "nuclei.yaml")
    for given in ("./nuclei.onnx", "nuclei.onnx"):
        assert main(["info", given, "--no-session", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["task"] == "classification" and data["classes"][0]["name"] == "OK"
        assert Path(data["model"]).resolve() == tmp_path / "nuclei.onnx"
    assert main(["info", "nuclei", "--no-session", "--json"]) == 0  # no file named `nuclei`: the bundled one
    assert json.loads(capsys.readouterr().out)["task"] == "segmentation"


@pytest.mark.parametrize("command", [["info"], ["bench"], ["run", "x.png", "--out", "o"],
                                     ["compare", "nuclei", "x.png", "--out", "o"]])
def test_an_unknown_name_exits_2_with_the_list(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = [*command[:1], "xyz", *command[1:]] if command[0] != "compare" else [*command[:2], "xyz", *command[2:]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown model 'xyz': not a file, and not a bundled model "
                          "(ct3d_demo, ct_demo, defect_type")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_info_still_reads_a_png_provenance(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "nuclei", str(REPO / "resources" / "samples" / "nuclei" / "nuclei_01.png"), "--out", str(out),
                 "--device", "cpu"]) == 0
    capsys.readouterr()
    assert main(["info", str(out / "nuclei_01.png_mask.png")]) == 0
    assert "nuclei" in capsys.readouterr().out


def test_viewer_model_unknown_name_exits_2_before_any_window(tmp_path, monkeypatch, capsys):
    from app.ui.app import main as viewer_main

    monkeypatch.chdir(tmp_path)
    assert viewer_main(["--model", "xyz"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown model 'xyz'") and len(err.strip().splitlines()) == 1


def test_viewer_model_by_name(monkeypatch):
    import app.logs
    import app.ui.app as viewer

    parsed = []
    parse = viewer.parse_args
    monkeypatch.setattr(viewer, "parse_args", lambda argv: parsed.append(parse(argv)) or parsed[-1])

    def stop():  # the next step after resolving: no QApplication, no window in this test
        raise SystemExit(0)

    monkeypatch.setattr(app.logs, "hold_records", stop)  # the viewer's logging, its first step after that
    with pytest.raises(SystemExit):
        viewer.main(["--model", "nuclei_fp16"])
    assert parsed[0].model == REPO / "models" / "nuclei_fp16.onnx"


def test_models_lists_the_bundled_prompt_pair_apart(capsys):
    """`seglens-cli prompt prompt_demo …` and the Smart tool take the bundled pair by name, and `models` did not
    list it: it is listed apart (not a MODEL for run), with both halves' size."""
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    listing, _, prompts = out.partition("bundled prompt model")
    assert "prompt_demo" not in listing
    row = next(line for line in prompts.splitlines() if line.startswith("prompt_demo "))
    size = sum((REPO / "models" / f"prompt_demo_{half}.onnx").stat().st_size for half in ("encoder", "decoder"))
    assert "prompt" in row and "SAM2 1024²" in row and f"{round(size / 2**20, 2):.1f} MB" in row
    assert main(["models", "--json"]) == 0  # the JSON stays the image models (each a MODEL for run)
    assert [r["name"] for r in json.loads(capsys.readouterr().out)] == BUNDLED
