"""CLI wording a newcomer reads: bench says which figures are latency and which throughput, one flag "applies",
one input is "1 input"."""

from __future__ import annotations

import numpy as np
from conftest import stripes
from PIL import Image

from app.cli import main
from app.runs.bench.pipeline import BenchReport, Stats, format_report


def test_bench_text_names_latency_and_throughput():
    raw, piped = Stats(6, 12.3, 15.1, 12.9, 80.2), Stats(6, 20.3, 25.1, 21.9, 60.2)
    lines = format_report(BenchReport("m.onnx", "CPU", None, 1, "96×64", 15.0, raw, piped, ("mask",)), 3.2).split("\n")
    assert lines[2].split() == ["latency:", "ms", "per", "image", "│", "throughput"]
    assert lines[3].split() == ["p50", "p95", "mean", "│", "images/s"]
    assert lines[4].split() == ["raw", "12.3", "15.1", "12.9", "│", "80.20"]
    assert lines[5].split() == ["pipeline", "20.3", "25.1", "21.9", "│", "60.20"]
    assert "  GPU ÷ CPU raw speed-up: 3.2× (raw throughput)" in lines
    assert any(line.startswith("  latency: one image's time") for line in lines)
    assert any(line.startswith("  throughput: images ÷ wall-clock time") for line in lines)


def test_bench_on_a_machine_without_a_gpu_does_not_repeat_the_reason():
    stats = Stats(1, 1.0, 1.0, 1.0, 1.0)
    text = format_report(BenchReport("m.onnx", "CPU (no NVIDIA GPU)", "no NVIDIA GPU", 1, "8×8", 1.0, stats, stats,
                                     ()))
    assert text.startswith("m.onnx on CPU (no NVIDIA GPU);") and "not on GPU" not in text


def test_one_volume_flag_applies_and_one_input_is_singular(models, tmp_path, capsys):
    (tmp_path / "in").mkdir()
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(tmp_path / "in" / "a.png")
    assert main(["run", str(models("binary_logits")), str(tmp_path / "in"), "--out", str(tmp_path / "out"),
                 "--export", "dicom-seg", "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    assert "note: --export applies to volumes (DICOM series, multi-frame DICOM, NIfTI)" in captured.err
    assert captured.out.startswith("1 input: 1 ok, 0 failed;")


def test_compare_of_identical_models_says_so(models, tmp_path, capsys):
    Image.fromarray(stripes()).save(tmp_path / "x.png")
    model = models("rgb_classes")
    assert main(["compare", str(model), str(model), str(tmp_path / "x.png"), "--out", str(tmp_path / "o"),
                 "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 input: 1 ok, 0 failed; B = rgb_classes.onnx")
    assert "  all identical (IoU 1.000)\n" in out and "worst IoU" not in out


def test_extras_are_installed_the_way_this_copy_was(monkeypatch):
    import app.paths

    assert app.paths.install_kind() == "checkout" and app.paths.extra_command("ray") == "uv sync --extra ray"
    monkeypatch.setattr(app.paths, "install_kind", lambda: "installed")
    assert app.paths.extra_command("ray") == "pip install 'seglens[ray]'"
    monkeypatch.setattr(app.paths, "install_kind", lambda: "frozen")
    assert app.paths.extra_command("ray") is None


def test_run_help_says_what_the_default_export_is():
    """`none (default: nifti)` read as "none, whose default is nifti": the default and `none` each get their words."""
    import argparse

    from app.cli import build_parser

    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    text = " ".join(subparsers.choices["run"].format_help().split())
    assert "none (default" not in text
    assert "default: nifti where the volume has a geometry; none: no volume export" in text
