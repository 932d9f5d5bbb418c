"""`seglens-cli info` and `models` on a 3D model: patch, spacing, axes, normalisation, tiling, TTA and classes, each
with its source (app/inference/describe/info.py and bundled.py)."""

from __future__ import annotations

from spec3d_models import FIXED, scores3d, sigmoid3d, with_sidecar

from app.cli import main
from app.inference.describe.bundled import bundled_summary
from app.inference.describe.info import spec_dict, spec_text
from app.inference.model.builder import load_spec


def test_info_shows_a_3d_model_with_the_source_of_each_value(tmp_path, capsys):
    model = with_sidecar(sigmoid3d(tmp_path / "lesions.onnx"), """\
input:
  patch: [16, 32, 32]
  spacing: [2.5, 0.7, 0.7]
  normalize: {kind: ct, clip: [-100, 300], mean: 80, std: 60}
  tile: {overlap: 0.25}
  tta: {mirror: [1, 2]}
classes: [lesion]
""")
    assert main(["info", str(model), "--no-session"]) == 0
    text = capsys.readouterr().out
    expected = [
        "  task          segmentation (3D: a volume, in patches)  [detected]",
        "  tensor        volume[N,1,D,H,W] float32 (NCDHW, 1 channel, dynamic D×H×W ?×?×?)",
        "  patch         16×32×32 (D×H×W)  [sidecar]",
        "  spacing       2.5 × 0.7 × 0.7 mm (D×H×W; volumes are resampled to it)  [sidecar]",
        "  axes          native (the volume's array as stored: slice, row, column)  [default]",
        "  normalize     ct: clip to [-100, 300], then (x − 80) / 60 (the training set's statistics)  [sidecar]",
        "  tiling        patches of 16×32×32, overlap 0.25, gaussian (σ 0.125 × patch), batch 1  [sidecar]",
        "  tta           mirror over H, W (4 passes averaged)  [sidecar]",
        "  size_divisor  16 (a whole-volume run pads each side to a multiple)  [detected]",
        "  tensor        prob[N,1,D,H,W] float32: binary probability per voxel (threshold)",
        "  activation    none  [detected]",
        "  threshold     0.5 (foreground where the probability >= it)  [default]",
        "classes  [sidecar]",
        "    1  lesion",
    ]
    lines = text.splitlines()
    for line in expected:
        assert any(shown.startswith(line) for shown in lines), line
    assert "resize" not in text and "postprocess" not in text


def test_info_json_has_the_volume(tmp_path):
    spec = load_spec(scores3d(tmp_path / "f.onnx", shape=FIXED))
    volume = spec_dict(spec, None)["volume"]
    assert volume == {"patch": [16, 32, 32], "spacing": None, "axes": "native",
                      "normalize": {"kind": "scale", "clip": None, "mean": 0.0, "std": 1.0, "nonzero": False,
                                    "scale": 1.0},
                      "tile": {"overlap": 0.5, "blend": "gaussian", "batch": 1, "sigma_scale": 0.125, "pad": "zeros"},
                      "tta": [], "whole": False, "size_divisor": 1, "nnunet": None, "grid": "centre",
                      "activate": "each_patch"}
    assert "labels volume" not in spec_text(spec, None)




def test_models_lists_a_3d_model_by_its_patch(tmp_path):
    row = bundled_summary(scores3d(tmp_path / "organs.onnx", shape=FIXED, classes=3))
    assert (row.task, row.input, row.error) == ("segmentation", "gray 3D 16×32×32", None)


def test_info_writes_a_negative_ct_mean_as_a_plus(tmp_path, capsys):
    """The bundled CT model's mean is -655.39 HU (mostly air): was `(x − -655.39) / 501.95`."""
    model = with_sidecar(sigmoid3d(tmp_path / "ct.onnx"), "input:\n  patch: [16, 32, 32]\n  normalize: {kind: ct, "
                                                          "clip: [-1000, 1000], mean: -655.39, std: 501.95}\n")
    assert main(["info", str(model), "--no-session"]) == 0
    assert ("  normalize     ct: clip to [-1000, 1000], then (x + 655.39) / 501.95 (the training set's statistics)"
            "  [sidecar]") in capsys.readouterr().out.splitlines()
