"""seglens-cli: outputs, report rows, exit codes and one-line errors."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, expected_stripes, stripes
from onnx_factory import class_metadata
from PIL import Image
from waiting import until

from app.cli import main


@pytest.fixture
def folder(tmp_path):
    """Two good images (one nested), a corrupt one and a text file that is skipped."""
    root = tmp_path / "images"
    (root / "sub").mkdir(parents=True)
    Image.fromarray(stripes()).save(root / "one.png")
    Image.fromarray(stripes(40, 60)).save(root / "sub" / "two.png")
    (root / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    (root / "notes.txt").write_text("not an image")
    return root


def read_report(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_run_writes_masks_overlays_and_report(models, folder, tmp_path, capsys):
    model = models("rgb_classes", metadata=class_metadata(["bg", "green", "blue"]))
    out = tmp_path / "out"
    code = main(["run", str(model), str(folder), "--out", str(out), "--save", "mask,overlay", "--device", "cpu"])
    assert code == 1  # one input failed, the others were written
    mask = np.asarray(Image.open(out / "one.png_mask.png"))
    np.testing.assert_array_equal(mask, expected_stripes())
    assert np.asarray(Image.open(out / "sub" / "two.png_mask.png")).shape == (40, 60)
    overlay = np.asarray(Image.open(out / "one.png_overlay.png"))
    assert overlay.shape == (37, 53, 3) and not np.array_equal(overlay, stripes())
    np.testing.assert_array_equal(overlay[:, :10], stripes()[:, :10])  # background is not painted
    rows = read_report(out / "seglens_report.csv")
    assert [r["path"].split("images/")[1] for r in rows] == ["broken.png", "one.png", "sub/two.png"]
    broken, one = rows[0], rows[1]
    assert broken["status"] == "error" and "broken.png" in broken["error"] and "image" in broken["error"]
    assert one["status"] == "ok" and one["provider"] == "CPUExecutionProvider"
    assert (one["width"], one["height"]) == ("53", "37")
    assert (one["pixels_bg"], one["pixels_green"], one["pixels_blue"]) == (str(37 * 17), str(37 * 18), str(37 * 18))
    assert float(one["inference_ms"]) > 0
    err = capsys.readouterr().err
    assert "error:" in err and "broken.png" in err and "Traceback" not in err
    assert not list(out.rglob("*.tmp")) and not list(out.rglob("*.partial"))


def test_classification_writes_top_k_and_no_mask(models, tmp_path):
    model = models("classifier", metadata=class_metadata(["red", "green", "blue"]))
    image = np.zeros((50, 50, 3), np.uint8)
    image[..., 2] = 255
    Image.fromarray(image).save(tmp_path / "blue.png")
    out, report = tmp_path / "out", tmp_path / "report.csv"
    assert main(["run", str(model), str(tmp_path / "blue.png"), "--out", str(out), "--report", str(report)]) == 0
    row = read_report(report)[0]
    assert (row["task"], row["top1"], row["top2"]) == ("classification", "blue", "red")
    assert float(row["top1_score"]) > 0.99
    assert not list(out.glob("*_mask.png"))


def test_all_good_exits_zero(models, tmp_path):
    Image.fromarray(stripes()).save(tmp_path / "a.png")
    assert main(["run", str(models("rgb_classes")), str(tmp_path / "a.png"), "--out", str(tmp_path / "o")]) == 0


def cli(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "app.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("case", ["text_model", "corrupt", "missing", "bad_sidecar"])
def test_model_problems_exit_2_with_one_line(models, tmp_path, case):
    if case == "text_model":
        model = models("text_model")
    elif case == "corrupt":
        model = tmp_path / "corrupt.onnx"
        model.write_bytes(b"\x00\x01 definitely not onnx" * 20)
    elif case == "missing":
        model = tmp_path / "missing.onnx"
    else:
        model = models("rgb_classes")
        model.with_suffix(".yaml").write_text("input:\n  mean: [1, 2]\n")
    Image.fromarray(stripes()).save(tmp_path / "a.png")
    for command in (["info", model], ["run", model, tmp_path / "a.png", "--out", tmp_path / "o"]):
        done = cli(*command)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and model.stem in lines[0], done.stderr
        assert "Traceback" not in done.stderr


def test_info_json_reports_spec_sources_and_truthful_session(models):
    done = cli("info", models("binary_logits"), "--json", "--device", "cuda")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["task"] == "segmentation" and data["output"]["kind"] == "binary"
    assert data["output"]["activation"] == "sigmoid" and data["sources"]["output.activation"] == "detected"
    session = data["session"]
    assert session["requested"] == "cuda"
    if session["provider"] == "CPUExecutionProvider":  # no GPU here: say so, and why
        assert session["fallback_reason"]
    else:  # a GPU: the provider that really runs it, and nothing to explain
        assert session["provider"] == "CUDAExecutionProvider" and session["fallback_reason"] is None


def test_run_with_cuda_on_cpu_machine_warns_with_reason(models, tmp_path):
    Image.fromarray(stripes()).save(tmp_path / "a.png")
    done = cli("run", models("rgb_classes"), tmp_path / "a.png", "--out", tmp_path / "o", "--device", "cuda")
    assert done.returncode == 0, done.stderr
    row = read_report(tmp_path / "o" / "seglens_report.csv")[0]
    if row["provider"] == "CPUExecutionProvider":
        assert "CUDA was requested but rgb_classes.onnx runs on the CPU:" in done.stderr
        assert "provider CPU" in done.stdout
    else:
        assert row["provider"] == "CUDAExecutionProvider" and "CUDA was requested" not in done.stderr


def test_info_text_lists_sources(models):
    done = cli("info", models("rgb_classes"), "--no-session")
    assert done.returncode == 0
    assert "size_divisor  32  [detected]" in done.stdout and "background" in done.stdout


def test_usage_errors_exit_2(models, tmp_path):
    assert cli("run", models("rgb_classes"), tmp_path, "--out", tmp_path / "o", "--save", "masks").returncode == 2
    assert cli("info", models("rgb_classes"), "--device", "tpu").returncode == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    done = cli("run", models("rgb_classes"), empty, "--out", tmp_path / "o")
    assert done.returncode == 2 and "no images found" in done.stderr


def test_output_folder_inside_the_inputs_is_skipped_and_the_input_folder_itself_refused(models, folder):
    model = models("rgb_classes")
    out = folder / "results"
    for _ in range(2):  # a rerun must not feed on its own masks
        assert main(["run", str(model), str(folder), "--out", str(out), "--save", "mask,overlay"]) == 1
    rows = read_report(out / "seglens_report.csv")
    assert len(rows) == 3 and not any("results" in r["path"] for r in rows)
    done = cli("run", model, folder, "--out", folder)
    assert done.returncode == 2 and "is the input folder" in done.stderr
    assert not list(folder.glob("*_mask.png"))


def test_unexpected_model_behaviour_is_one_line_per_image(models, tmp_path):
    Image.fromarray(stripes()).save(tmp_path / "a.png")
    done = cli("run", models("shape_liar"), tmp_path / "a.png", "--out", tmp_path / "o")
    # its answer is checked against the graph's declared output (app.guard.answers) from the warm-up on: one line
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr == "error: shape_liar.onnx: output 'labels' has shape 1×1×512×512; declared ?×?×?\n"


def test_classification_report_has_no_more_top_columns_than_classes(models, tmp_path):
    Image.fromarray(stripes()).save(tmp_path / "a.png")
    report = tmp_path / "r.csv"
    assert main(["run", str(models("classifier")), str(tmp_path / "a.png"), "--out", str(tmp_path / "o"),
                 "--report", str(report)]) == 0
    header = report.read_text().splitlines()[0]
    assert "top3_score" in header and "top4" not in header


def test_sigkill_then_resume_finishes_with_every_output_complete_once(models, tmp_path):
    import signal

    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(60):
        image = np.zeros((600, 800, 3), np.uint8)
        image[:, : 10 + i * 10, 0] = 200
        Image.fromarray(image).save(folder / f"frame_{i:02d}.png")
    model, out = models("rgb_classes"), tmp_path / "out"
    command = [sys.executable, "-m", "app.cli", "run", str(model), str(folder), "--out", str(out),
               "--save", "mask,overlay", "--device", "cpu"]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    partial = out / "seglens_report.csv.partial"
    until(lambda: process.poll() is not None or (partial.exists() and len(partial.read_text().splitlines()) > 8),
          what="8 rows in the partial report", within_s=120)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (out / "seglens_report.csv").exists()  # a killed run never looks finished

    done = cli("run", model, folder, "--out", out, "--save", "mask,overlay", "--device", "cpu", "--resume")
    assert done.returncode == 0, done.stderr
    assert "done by an earlier run" in done.stdout
    rows = read_report(out / "seglens_report.csv")
    assert sorted(r["path"] for r in rows) == sorted(str(p) for p in folder.glob("*.png"))  # each exactly once
    assert all(r["status"] == "ok" for r in rows)
    for i in range(60):
        mask = np.asarray(Image.open(out / f"frame_{i:02d}.png_mask.png"))  # complete, decodable
        assert mask.shape == (600, 800) and (mask[:, : 10 + i * 10] == 0).all()
        Image.open(out / f"frame_{i:02d}.png_overlay.png").load()
    assert not list(out.rglob("*.tmp")) and not list(out.glob("*.partial"))


def test_run_on_real_dicom_files(models, tmp_path):
    from pydicom.data import get_testdata_file

    folder = tmp_path / "dicom"
    folder.mkdir()
    for name in ("CT_small.dcm", "MR_small.dcm"):
        (folder / name).write_bytes(Path(get_testdata_file(name)).read_bytes())
    model = models("binary_logits")
    model.with_suffix(".yaml").write_text("input:\n  window: [40, 400]\n")
    assert main(["run", str(model), str(folder), "--out", str(tmp_path / "o")]) == 0
    assert np.asarray(Image.open(tmp_path / "o" / "CT_small.dcm_mask.png")).shape == (128, 128)
    assert np.asarray(Image.open(tmp_path / "o" / "MR_small.dcm_mask.png")).shape == (64, 64)


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _image_beside_a_user_mask(tmp_path: Path) -> tuple[Path, bytes]:
    """`imgs/a.png` and the user's own `imgs/a.png_mask.png` (exactly where a's mask would go); its bytes."""
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    Image.fromarray(stripes()).save(imgs / "a.png")
    Image.fromarray(np.full((8, 8), 7, np.uint8)).save(imgs / "a.png_mask.png")
    return imgs, (imgs / "a.png_mask.png").read_bytes()


def test_files_named_one_by_one_with_out_their_folder_are_refused_and_nothing_is_replaced(models, tmp_path):
    """The audit's repro: `run M imgs/*.png --out imgs` with a user's own `a.png_mask.png` beside `a.png`."""
    imgs, before = _image_beside_a_user_mask(tmp_path)
    done = cli("run", models("rgb_classes"), imgs / "a.png", imgs / "a.png_mask.png", "--out", imgs)
    assert done.returncode == 2 and done.stderr.startswith("error: --out ") and "is the input folder" in done.stderr
    assert (imgs / "a.png_mask.png").read_bytes() == before and _tree(imgs) == {"a.png", "a.png_mask.png"}


def test_an_output_that_would_replace_an_input_is_an_error_row_not_a_write(models, tmp_path):
    """Below the CLI's folder check: the writer itself never writes over one of its inputs."""
    from app.inference.model.builder import load_spec
    from app.inference.runtime.session import open_session
    from app.io.discover import discover
    from app.runs.folder.batch import run_inputs
    from app.runs.folder.plan import Callbacks, RunPlan

    imgs, before = _image_beside_a_user_mask(tmp_path)
    model = open_session(load_spec(models("rgb_classes")), "cpu")
    outcomes = []
    plan = RunPlan(spec=model.spec, inputs=tuple(discover([imgs / "a.png", imgs / "a.png_mask.png"])), out=imgs)
    run_inputs(model, plan, progress=Callbacks(outcome=lambda outcome, _summary: outcomes.append(outcome)))
    assert (imgs / "a.png_mask.png").read_bytes() == before
    assert outcomes[0].error and "is one of the inputs, and would be replaced" in outcomes[0].error
    assert outcomes[1].error is None and (imgs / "a.png_mask.png_mask.png").is_file()


def test_every_output_stays_inside_out_whatever_the_file_names(models, tmp_path):
    """`..png` has the stem `.`: its mask used to land beside the output folder. Long names must fit too."""
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    names = ["..png", ".png", "a\u2215b.png", "x" * 250 + ".png", "ok.png"]
    for name in names:
        Image.fromarray(stripes()).save(imgs / name, format="PNG")
    out = tmp_path / "work" / "out"
    done = cli("run", models("rgb_classes"), *[imgs / n for n in names], "--out", out)
    assert done.returncode == 0, done.stderr
    assert not list(out.parent.glob("*.png")) and sorted(p.name for p in out.parent.iterdir()) == ["out"]
    assert _tree(imgs) == set(names)  # nothing written beside the inputs either
    rows = read_report(out / "seglens_report.csv")
    assert [Path(r["path"]).name for r in rows] == names and {r["status"] for r in rows} == {"ok"}
    masks = sorted(p.name for p in out.glob("*_mask.png"))
    assert len(masks) == 5 and "..png_mask.png" in masks and all(len(m.encode()) <= 255 for m in masks)


def test_control_characters_in_file_names_reach_the_terminal_escaped(models, tmp_path):
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    evil = "x\x1b]0;owned\x07\x1b[2J.png"
    (imgs / evil).write_bytes(b"not a png")
    done = cli("run", models("rgb_classes"), imgs, "--out", tmp_path / "out")
    assert done.returncode == 1
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert "x\\x1b]0;owned\\x07\\x1b[2J.png" in done.stderr


def test_resume_refuses_rows_made_by_another_model_or_sidecar(models, tmp_path):
    """The audit: --resume skipped work done with a different model (the report recorded no model identity)."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        Image.fromarray(stripes()).save(folder / f"a{i}.png")
    model, out = models("rgb_classes"), tmp_path / "out"
    assert cli("run", model, folder, "--out", out).returncode == 0
    record = json.loads((out / "seglens_report.csv.run.json").read_text())
    assert record["model"] == model.name and len(record["model_sha256"]) == 64 and record["sidecar"] is None
    assert "done by an earlier run (3" not in cli("run", model, folder, "--out", out).stdout  # no --resume: all
    again = cli("run", model, folder, "--out", out, "--resume")
    assert again.returncode == 0 and "(3 done by an earlier run)" in again.stdout

    model.with_suffix(".yaml").write_text("postprocess:\n  min_area: 5\n")  # an edited sidecar
    edited = cli("run", model, folder, "--out", out, "--resume")
    assert edited.returncode == 2 and "another sidecar" in edited.stderr and "without --resume" in edited.stderr
    model.with_suffix(".yaml").unlink()
    import onnx

    retrained_model = onnx.load(str(model))
    retrained_model.doc_string = "retrained"  # the same name and graph, other bytes
    onnx.save(retrained_model, str(model))
    retrained = cli("run", model, folder, "--out", out, "--resume")
    assert retrained.returncode == 2 and "another model file" in retrained.stderr
    assert read_report(out / "seglens_report.csv")  # the earlier report is untouched by a refused run


def test_a_file_name_that_is_not_utf8_gets_its_row_and_the_run_goes_on(models, tmp_path):
    folder = tmp_path / "odd"
    folder.mkdir()
    for name in (b"a.png", b"b\xe9.png", b"c.png"):
        Image.fromarray(stripes()).save(os.fsencode(folder) + b"/" + name, format="PNG")
    model, out = models("rgb_classes"), tmp_path / "out"
    done = cli("run", model, folder, "--out", out, "--device", "cpu")
    assert done.returncode == 0, done.stderr
    rows = read_report(out / "seglens_report.csv")
    assert [r["path"] for r in rows] == [f"{folder}/a.png", f"{folder}/b\\xe9.png", f"{folder}/c.png"]
    assert all(r["status"] == "ok" for r in rows)
    assert os.path.isfile(os.fsencode(out) + b"/b\xe9.png_mask.png")
    again = cli("run", model, folder, "--out", out, "--device", "cpu", "--resume")
    assert again.returncode == 0 and "(3 done by an earlier run)" in again.stdout, again.stdout + again.stderr
    assert read_report(out / "seglens_report.csv") == rows


def test_a_file_name_that_looks_like_a_formula_is_neutralised_and_resumed(models, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name = '=HYPERLINK("evil.example","y").png'
    Image.fromarray(stripes()).save(tmp_path / name)
    model = str(models("rgb_classes"))
    assert main(["run", model, name, "--out", "out", "--device", "cpu"]) == 0
    rows = read_report(tmp_path / "out" / "seglens_report.csv")
    assert [r["path"] for r in rows] == ["'" + name]
    assert main(["run", model, name, "--out", "out", "--device", "cpu", "--resume"]) == 0
    assert read_report(tmp_path / "out" / "seglens_report.csv") == rows


def test_resume_reruns_an_input_whose_mask_was_truncated(models, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a.png", "b.png"):
        Image.fromarray(stripes()).save(folder / name)
    model, out = models("rgb_classes"), tmp_path / "out"
    assert main(["run", str(model), str(folder), "--out", str(out)]) == 0
    (out / "b.png_mask.png").write_bytes((out / "b.png_mask.png").read_bytes()[:20])
    done = cli("run", model, folder, "--out", out, "--resume")
    assert done.returncode == 0 and "(1 done by an earlier run)" in done.stdout, done.stdout + done.stderr
    np.testing.assert_array_equal(np.asarray(Image.open(out / "b.png_mask.png")), expected_stripes())


def test_ng_images_are_a_result_not_an_error(models, tmp_path):
    model = models("rgb_classes")
    model.with_suffix(".yaml").write_text("classes: [bg, green, blue]\n"
                                          "verdict:\n  fail_if:\n    - {class: green, min_total_fraction: 0.25}\n")
    for name, green in (("a.png", 0), ("b.png", 30)):
        image = np.zeros((30, 30, 3), np.uint8)
        image[..., 0] = 200
        image[:, :green] = (0, 200, 0)
        Image.fromarray(image).save(tmp_path / name)
    done = cli("run", model, tmp_path / "a.png", tmp_path / "b.png", "--out", tmp_path / "o")
    assert done.returncode == 0, done.stderr  # an NG image is not a failed input
    assert "verdict: 1 OK, 1 NG" in done.stdout
    rows = read_report(tmp_path / "o" / "seglens_report.csv")
    assert [(r["verdict"], r["verdict_reason"]) for r in rows] == [("ok", ""), ("ng", "green covers 100 % >= 25 %")]


@pytest.mark.parametrize("batch", ["1", "2"])  # 2: each of the map and score outputs is split per image
def test_anomaly_model_run_fills_score_and_verdict(models, tmp_path, batch):
    model = models("anomaly_named")
    model.with_suffix(".yaml").write_text("input:\n  scale: 0.00390625\n")
    images = tmp_path / "parts"
    images.mkdir()
    good, bad = np.zeros((8, 8), np.uint8), np.zeros((8, 8), np.uint8)
    bad[2:4, 2:4] = 200
    Image.fromarray(good).save(images / "good.png")
    Image.fromarray(bad).save(images / "bad.png")
    out = tmp_path / "out"
    done = cli("run", model, images, "--out", out, "--save", "mask", "--device", "cpu", "--batch", batch)
    assert done.returncode == 0, done.stderr
    rows = {Path(r["path"]).name: r for r in read_report(out / "seglens_report.csv")}
    assert (rows["good.png"]["verdict"], rows["bad.png"]["verdict"]) == ("ok", "ng")
    assert float(rows["bad.png"]["score"]) == pytest.approx(200 / 256, abs=1e-6)
    assert rows["bad.png"]["verdict_reason"] == "score 0.7812 >= 0.5"
    mask = np.asarray(Image.open(out / "bad.png_mask.png"))
    assert mask.shape == (8, 8) and np.count_nonzero(mask) == 4
    assert not np.asarray(Image.open(out / "good.png_mask.png")).any()


def _with_node_column(report: Path) -> None:
    """The report as a `--ray` run writes it: a `node` column after the per-task ones, before the timings."""
    with open(report, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    at = rows[0].index("decode_ms")
    for n, row in enumerate(rows):
        row.insert(at, "node" if n == 0 else "10.0.0.7")
    with open(report, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)


def test_a_local_resume_carries_the_rows_of_a_ray_report_with_its_node_column(models, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a.png", "b.png"):
        Image.fromarray(stripes()).save(folder / name)
    model, out = models("rgb_classes"), tmp_path / "out"
    assert main(["run", str(model), str(folder), "--out", str(out), "--save", "mask"]) == 0
    before = read_report(out / "seglens_report.csv")
    _with_node_column(out / "seglens_report.csv")
    masks = {p.name: p.stat().st_mtime_ns for p in out.glob("*_mask.png")}
    done = cli("run", model, folder, "--out", out, "--save", "mask", "--resume")
    assert done.returncode == 0 and "(2 done by an earlier run)" in done.stdout, done.stdout + done.stderr
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*_mask.png")} == masks  # nothing run again
    assert read_report(out / "seglens_report.csv") == before  # this report's columns: no node, same cells


def test_a_ray_resume_carries_a_local_report_leaving_node_empty(models, tmp_path):
    from app.inference.model.builder import load_spec
    from app.runs.folder.resume import finished_rows
    from app.runs.outputs.report import report_columns

    spec = load_spec(models("rgb_classes"))
    local = report_columns(spec)
    row = ["a.png", "ok", *[str(n) for n in range(len(local) - 2)]]
    with open(tmp_path / "r.csv", "w", newline="") as handle:
        csv.writer(handle).writerows([local, row])
    ray = report_columns(spec, ["node"])
    carried = finished_rows(tmp_path / "r.csv", ray, lambda p: [])["a.png"]
    assert dict(zip(ray, carried, strict=True)) == {**dict(zip(local, row, strict=True)), "node": ""}
    other = report_columns(load_spec(models("binary_logits")))  # other class columns: never carried
    assert finished_rows(tmp_path / "r.csv", other, lambda p: []) == {}
