"""Provenance from `seglens-cli run`: the run record beside the report, the `SegLens` text chunk in every PNG."""

from __future__ import annotations

import hashlib
import json

import pytest
from conftest import stripes
from PIL import Image

from app.cli import main

KINDS = ("mask", "overlay", "heatmap", "scores")


@pytest.fixture
def images(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(2):
        Image.fromarray(stripes()).save(folder / f"a{i}.png")
    return folder


def _run(model, images, out, *extra):
    return main(["run", str(model), str(images), "--out", str(out), "--device", "cpu", "--no-progress", *extra])


def _chunk(path) -> dict:
    return json.loads(Image.open(path).text["SegLens"])


@pytest.mark.parametrize(("extra", "threshold"), [((), 0.5), (("--threshold", "0.3"), 0.3)])
def test_every_png_carries_the_short_model_sha_and_the_threshold_used(models, images, tmp_path, capsys, extra,
                                                                       threshold):
    model, out = models("binary_logits"), tmp_path / "out"
    assert _run(model, images, out, "--save", ",".join(KINDS), *extra) == 0
    short = hashlib.sha256(model.read_bytes()).hexdigest()[:12]
    record = json.loads((out / "seglens_report.csv.run.json").read_text())
    for kind in KINDS:
        image = Image.open(out / f"a0.png_{kind}.png")
        assert image.text["Software"].startswith("SegLens ")
        chunk = json.loads(image.text["SegLens"])
        assert chunk["model_sha256"] == short and chunk["thresholds"] == {"threshold": threshold}
        assert chunk["provider"] == "CPU" and chunk["settings_sha256"] == record[
            "settings_sha256"][:12]
    assert _chunk(out / "a0.png_mask.png")["classes"] == ["background", "class 1"]
    assert record["provider"] == "CPU" and record["requested_device"] == "cpu"
    assert record["thresholds"] == {"threshold": threshold} and record["fallback_reason"] is None
    said = capsys.readouterr().out
    assert f"provenance: model {model.name} sha256 {short}" in said and f"threshold {threshold:g}" in said
    assert "seglens_report.csv.run.json" in said


def test_a_multi_class_threshold_is_recorded_as_the_minimum_confidence(models, images, tmp_path):
    model, out = models("rgb_classes"), tmp_path / "out"
    assert _run(model, images, out, "--threshold", "0.6") == 0
    assert _chunk(out / "a0.png_mask.png")["thresholds"] == {"min_confidence": 0.6}
    record = json.loads((out / "seglens_report.csv.run.json").read_text())
    assert record["thresholds"] == {"min_confidence": 0.6} and record["threshold"] == 0.6


def test_resume_ignores_the_provider_but_not_the_settings_hash(models, images, tmp_path, capsys):
    model, out = models("rgb_classes"), tmp_path / "out"
    assert _run(model, images, out) == 0
    path = out / "seglens_report.csv.run.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "provider": "CUDA (GPU 0)"}))  # an earlier run on a GPU
    assert _run(model, images, out, "--resume") == 0
    assert "(2 done by an earlier run)" in capsys.readouterr().out
    path.write_text(json.dumps({**record, "settings_sha256": "0" * 64}))
    assert _run(model, images, out, "--resume") == 2
    assert "effective-settings hash" in capsys.readouterr().err


def test_an_old_record_without_the_new_keys_still_resumes(models, images, tmp_path, capsys):
    model, out = models("rgb_classes"), tmp_path / "out"
    assert _run(model, images, out) == 0
    path = out / "seglens_report.csv.run.json"
    old_keys = ("model", "model_sha256", "sidecar", "sidecar_sha256", "seglens", "threshold")
    path.write_text(json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k in old_keys}))
    assert _run(model, images, out, "--resume") == 0
    assert "(2 done by an earlier run)" in capsys.readouterr().out


def test_info_on_an_output_png_shows_its_provenance(models, images, tmp_path, capsys):
    model, out = models("binary_logits"), tmp_path / "out"
    assert _run(model, images, out, "--threshold", "0.3") == 0
    capsys.readouterr()
    assert main(["info", str(out / "a0.png_mask.png")]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["SegLens"]["thresholds"] == {"threshold": 0.3} and shown["SegLens"]["model"] == model.name
    assert main(["info", str(images / "a0.png")]) == 0  # a PNG SegLens did not write: says so
    assert "no text chunks" in capsys.readouterr().out
    (tmp_path / "junk.png").write_bytes(b"junk")
    assert main(["info", str(tmp_path / "junk.png")]) == 2
    assert "not a readable PNG" in capsys.readouterr().err
