"""seglens-cli run --threshold and --save heatmap,scores: decisions and pictures from the kept probabilities."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from test_cli import cli

from app.cli import main
from app.inference.image.pipeline import run_image
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.io.render import HEATMAP_LUT


def ramp(folder):
    """A gray ramp (column x has value x) saved as `ramp.png`; binary_logits sees logit 20 (x/255 − 0.5)."""
    folder.mkdir(exist_ok=True)
    image = np.tile(np.arange(256, dtype=np.uint8), (4, 1))
    Image.fromarray(image).save(folder / "ramp.png")
    return image


def decoded(path) -> np.ndarray:
    return np.asarray(Image.open(path))


def test_binary_threshold_heatmap_and_scores(models, tmp_path):
    model = models("binary_logits")
    image = ramp(tmp_path / "in")
    out = tmp_path / "out"
    assert main(["run", str(model), str(tmp_path / "in"), "--out", str(out), "--threshold", "0.9",
                 "--save", "mask,heatmap,scores", "--device", "cpu"]) == 0
    # p(155) = 0.896, p(156) = 0.903: the default 0.5 would start at 128
    np.testing.assert_array_equal(decoded(out / "ramp.png_mask.png"), (image >= 156).astype(np.uint8))
    scores = decoded(out / "ramp.png_scores.png")
    assert scores.dtype == np.uint16 and scores.shape == (4, 256)
    probability = 1 / (1 + np.exp(-20 * (image / 255 - 0.5)))
    # float16 keeps ~11 significant bits: within 2^-11 of p, plus the 16-bit rounding
    assert np.all(np.abs(scores / 65535 - probability) <= probability * 2.0 ** -11 + 2 / 65535)
    kept = run_image(open_session(load_spec(model), "cpu"), image).scores[0].astype(np.float64)
    assert np.abs(scores.astype(np.float64) - np.rint(kept * 65535)).max() <= 2  # exactly the kept scores
    heat = decoded(out / "ramp.png_heatmap.png")
    assert heat.shape == (4, 256, 3)
    np.testing.assert_array_equal(heat, HEATMAP_LUT[np.rint(kept * 255).astype(int)])


def test_multiclass_threshold_is_a_minimum_confidence(models, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    image = np.zeros((6, 8, 3), np.uint8)
    image[:, :4, 1] = 200  # green, sure: p = e^0.78 / (e^0.78 + 2) = 0.52
    image[:, 4:, 1], image[:, 4:, 2] = 100, 90  # green, unsure: p ≈ 0.37
    Image.fromarray(image).save(folder / "two.png")
    out = tmp_path / "out"
    args = ["run", str(models("rgb_classes")), str(folder), "--save", "mask,heatmap", "--device", "cpu"]
    assert main([*args, "--out", str(out)]) == 0
    assert (decoded(out / "two.png_mask.png") == 1).all()
    assert main([*args, "--out", str(tmp_path / "sure"), "--threshold", "0.45"]) == 0
    expected = np.zeros((6, 8), np.uint8)
    expected[:, :4] = 1
    np.testing.assert_array_equal(decoded(tmp_path / "sure" / "two.png_mask.png"), expected)
    winning = np.exp(200 / 255) / (np.exp(200 / 255) + 2)
    heat = decoded(out / "two.png_heatmap.png")  # the winning class's probability, not rescaled
    assert heat[0, 0].tolist() == HEATMAP_LUT[round(winning * 255)].tolist()


def test_models_without_scores_write_no_heatmap_or_scores_and_say_so(models, tmp_path, capsys):
    ramp(tmp_path / "in")
    out = tmp_path / "out"
    for kind, what in (("embedded_argmax", "outputs a label map"), ("classifier", "is a classification model")):
        assert main(["run", str(models(kind)), str(tmp_path / "in"), "--out", str(out / kind),
                     "--save", "mask,heatmap,scores", "--device", "cpu"]) == 0
        assert (f"note: --save heatmap,scores: {kind}.onnx {what}, with no per-pixel scores: heatmap and scores "
                "are not written") in capsys.readouterr().err  # said, not silently skipped
    assert (out / "embedded_argmax" / "ramp.png_mask.png").exists()
    assert not list(out.rglob("*_heatmap.png")) and not list(out.rglob("*_scores.png"))


@pytest.mark.parametrize("value", ["0", "1", "1.5", "-0.2", "nan", "half"])
def test_threshold_outside_zero_one_is_a_one_line_usage_error(models, tmp_path, value):
    ramp(tmp_path / "in")
    done = cli("run", models("binary_logits"), tmp_path / "in", "--out", tmp_path / "out", "--threshold", value)
    assert done.returncode == 2
    assert "--threshold: must be a number between 0 and 1" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_both_still_means_mask_and_overlay(models, tmp_path):
    ramp(tmp_path / "in")
    assert main(["run", str(models("binary_logits")), str(tmp_path / "in"), "--out", str(tmp_path / "out"),
                 "--save", "both", "--device", "cpu"]) == 0
    assert sorted(p.name for p in (tmp_path / "out").glob("*.png")) == ["ramp.png_mask.png", "ramp.png_overlay.png"]


def test_resume_refuses_rows_made_with_another_threshold(models, tmp_path):
    ramp(tmp_path / "in")
    args = ["run", models("binary_logits"), tmp_path / "in", "--out", tmp_path / "out", "--device", "cpu"]
    assert cli(*args, "--threshold", "0.9").returncode == 0
    assert cli(*args, "--threshold", "0.9", "--resume").returncode == 0
    refused = cli(*args, "--threshold", "0.2", "--resume")
    assert refused.returncode == 2 and "another --threshold (0.9, now 0.2)" in refused.stderr
    assert cli(*args, "--resume").returncode == 2  # none now
