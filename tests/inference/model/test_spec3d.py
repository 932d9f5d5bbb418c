"""3D models: a 5-D [N, C, D, H, W] input with [N, K, D, H, W] scores or an [N, D, H, W] label volume is a 3D
segmentation model (app.inference.model.spec3d); its sidecar keys are validated, each refusal one line naming the key.
`info` on it: test_info3d.py; its session: test_session3d.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from onnx_factory import UINT8
from spec3d_models import (
    DYNAMIC,
    FIXED,
    classifier3d,
    identity5d,
    labels3d,
    scores3d,
    sigmoid3d,
    with_sidecar,
)

from app.errors import ModelError, SidecarError
from app.inference.decide.tuning import tunable, with_threshold
from app.inference.model.builder import load_spec
from app.inference.model.spec import Normalize3D, Tile3D
from app.runs.outputs.provenance import effective_thresholds

# --- detection ------------------------------------------------------------------------------------------------

def test_a_fixed_5d_scores_model_is_a_3d_segmentation_model(tmp_path):
    spec = load_spec(scores3d(tmp_path / "fixed.onnx", shape=FIXED))
    assert spec.is_3d and spec.task == "segmentation"
    assert (spec.input.layout, spec.input.channels, spec.input.model_hw) == ("NCDHW", 1, (32, 32))
    assert (spec.output.kind, spec.output.channel_axis, spec.output.activation) == ("scores", 1, "softmax")
    assert spec.class_names == ("background", "class 1")
    volume = spec.volume
    assert volume is not None and volume.patch == (16, 32, 32) and volume.size_divisor == 1
    assert (volume.spacing, volume.axes, volume.tta, volume.whole) == (None, "native", (), False)
    assert volume.normalize == Normalize3D("scale") and volume.tile == Tile3D()
    assert {k: spec.sources[k] for k in ("input.patch", "input.spacing", "input.axes", "input.normalize",
                                         "input.tile.overlap", "input.tta", "input.size_divisor", "task")} == {
        "input.patch": "detected", "input.spacing": "default", "input.axes": "default",
        "input.normalize": "default", "input.tile.overlap": "default", "input.tta": "default",
        "input.size_divisor": "detected", "task": "detected"}


def test_a_2d_model_has_no_volume(models):
    spec = load_spec(models("rgb_classes"))
    assert spec.volume is None and not spec.is_3d


def test_a_dynamic_model_takes_its_patch_and_every_3d_key_from_the_sidecar(tmp_path):
    model = with_sidecar(scores3d(tmp_path / "dyn.onnx", classes=3), """\
input:
  patch: [24, 64, 48]
  spacing: [3.0, 0.8, 0.8]
  axes: lps
  normalize: {kind: ct, clip: [-1000, 400], mean: -200.5, std: 310}
  tile: {overlap: 0.25, blend: constant, batch: 4, pad: edge}
  tta: {mirror: [2, 0]}
""")
    spec = load_spec(model)
    volume = spec.volume
    assert volume is not None
    assert (volume.patch, volume.spacing, volume.axes, volume.tta) == ((24, 64, 48), (3.0, 0.8, 0.8), "LPS", (0, 2))
    assert volume.normalize == Normalize3D("ct", clip=(-1000.0, 400.0), mean=-200.5, std=310.0)
    assert volume.tile == Tile3D(overlap=0.25, blend="constant", batch=4, pad="edge")
    assert volume.size_divisor == 8 and spec.sources["input.size_divisor"] == "detected"  # 24 = 8 × 3
    assert spec.input.model_hw == (64, 48)
    assert all(spec.sources[k] == "sidecar" for k in ("input.patch", "input.spacing", "input.axes", "input.normalize",
                                                      "input.tile.overlap", "input.tile.blend", "input.tile.batch",
                                                      "input.tile.pad", "input.tta"))
    assert spec.class_names == ("background", "class 1", "class 2")


def test_tta_mirror_means_every_axis_and_zscore_over_non_zero_voxels(tmp_path):
    model = with_sidecar(scores3d(tmp_path / "m.onnx"), "input:\n  patch: [32, 32, 32]\n  tta: mirror\n"
                                                       "  normalize: {kind: zscore, nonzero: true}\n")
    volume = load_spec(model).volume
    assert volume is not None and volume.tta == (0, 1, 2) and volume.size_divisor == 32
    assert volume.normalize == Normalize3D("zscore", nonzero=True)


def test_plain_scale_mean_std_become_a_scale_normalisation(tmp_path):
    model = with_sidecar(scores3d(tmp_path / "s.onnx", shape=FIXED), "input:\n  scale: 0.001\n  mean: 0.2\n  std: 2\n")
    spec = load_spec(model)
    assert spec.volume is not None and spec.volume.normalize == Normalize3D("scale", mean=0.2, std=2.0, scale=0.001)
    assert spec.sources["input.normalize"] == "sidecar"


def test_a_multi_channel_and_a_partly_fixed_input(tmp_path):
    spec = load_spec(with_sidecar(scores3d(tmp_path / "mr.onnx", shape=["N", 4, 20, "H", "W"]),
                                  "input:\n  patch: [20, 64, 64]\n  mean: 10\n"))
    assert spec.input.channels == 4 and spec.input.mean == (10.0,) * 4 and spec.volume is not None
    assert spec.volume.patch == (20, 64, 64) and spec.volume.size_divisor == 4  # dynamic H/W: 20 = 4 × 5
    model = with_sidecar(tmp_path / "mr.onnx", "input:\n  patch: [24, 64, 64]\n")
    with pytest.raises(SidecarError) as caught:
        load_spec(model)
    assert str(caught.value) == (f"{model.with_suffix('.yaml')}: 'input.patch' is [24, 64, 64], but the model's "
                                 "input is fixed at 20×?×? (D×H×W)")


def test_the_grid_and_where_outputs_are_activated(tmp_path):
    """input.grid (centre by default) and output.activate (each_patch by default) from the sidecar, with sources."""
    spec = load_spec(scores3d(tmp_path / "default.onnx", shape=FIXED))
    assert spec.volume is not None and (spec.volume.grid, spec.volume.activate) == ("centre", "each_patch")
    assert (spec.sources["input.grid"], spec.sources["output.activate"]) == ("default", "default")
    model = with_sidecar(scores3d(tmp_path / "monai.onnx", shape=FIXED),
                         "input:\n  grid: corner\noutput:\n  activate: after_resample\n")
    spec = load_spec(model)
    assert spec.volume is not None and (spec.volume.grid, spec.volume.activate) == ("corner", "after_resample")
    assert (spec.sources["input.grid"], spec.sources["output.activate"]) == ("sidecar", "sidecar")


@pytest.mark.parametrize("text, message", [
    ("input:\n  grid: edge\n", "'input.grid' must be one of centre \\| corner, got 'edge'"),
    ("output:\n  activate: later\n",
     "'output.activate' must be one of each_patch \\| after_blend \\| after_resample, got 'later'")])
def test_a_bad_grid_or_activate_is_refused(tmp_path, text, message):
    model = with_sidecar(scores3d(tmp_path / "m.onnx", shape=FIXED), text)
    with pytest.raises(SidecarError, match=message):
        load_spec(model)


def test_a_label_volume_has_nothing_to_activate_after_the_blend(tmp_path):
    model = with_sidecar(labels3d(tmp_path / "labels.onnx", shape=FIXED, classes=3),
                         "output:\n  activate: after_blend\n")
    with pytest.raises(SidecarError) as caught:
        load_spec(model)
    assert str(caught.value) == (f"{model.with_suffix('.yaml')}: 'output.activate' is after_blend, but the model's "
                                 "output is a label volume (its patches vote; there is nothing to activate)")


def test_a_label_volume_output(tmp_path):
    spec = load_spec(labels3d(tmp_path / "labels.onnx", shape=FIXED, classes=3))
    assert spec.is_3d and (spec.output.kind, spec.output.channel_axis, spec.output.activation) == ("labels", None,
                                                                                                   "none")
    assert spec.class_names == ("background", "class 1", "class 2")  # from the ArgMax's reduced axis


@pytest.mark.parametrize("ends_in_sigmoid, activation", [(True, "none"), (False, "sigmoid")])
def test_a_one_channel_output_is_a_binary_3d_model(tmp_path, ends_in_sigmoid, activation):
    spec = load_spec(sigmoid3d(tmp_path / "binary.onnx", end_with_sigmoid=ends_in_sigmoid, shape=FIXED))
    assert (spec.output.kind, spec.output.activation, spec.output.threshold) == ("binary", activation, 0.5)
    assert spec.output.channel_axis == 1 and spec.class_names == ("background", "class 1")


def test_a_binary_3d_models_threshold_is_tuned_like_a_2d_ones(tmp_path):
    spec = load_spec(sigmoid3d(tmp_path / "binary.onnx", shape=FIXED))
    tuned, min_confidence = with_threshold(spec, 0.3)  # --threshold, the viewer's slider
    assert (tunable(spec), tuned.output.threshold, min_confidence) == ("threshold", 0.3, None)
    assert effective_thresholds(tuned) == {"threshold": 0.3}  # what the run record says made the mask


def test_a_binary_3d_models_one_class_name_gets_a_background(tmp_path):
    model = with_sidecar(sigmoid3d(tmp_path / "lesion.onnx", shape=FIXED), "classes: [lesion]\noutput:\n"
                                                                         "  threshold: 0.3\n")
    spec = load_spec(model)
    assert spec.class_names == ("background", "lesion") and spec.output.threshold == 0.3


# --- refused models -------------------------------------------------------------------------------------------

def _model_error(path: Path) -> str:
    with pytest.raises(ModelError) as caught:
        load_spec(path)
    assert not isinstance(caught.value, SidecarError)
    return str(caught.value)


def test_a_dynamic_model_without_a_sidecar_asks_for_input_patch(tmp_path):
    path = scores3d(tmp_path / "dyn.onnx")
    assert _model_error(path) == (
        f"{path}: the model's input is dynamic along D×H×W (?×?×?): SegLens needs the patch it was trained with; "
        "give input.patch: [D, H, W] in a sidecar (inputs: volume[N,1,D,H,W] float32; outputs: "
        "scores[N,2,D,H,W] float32)")


def test_a_5d_classifier_is_refused_naming_its_output(tmp_path):
    path = classifier3d(tmp_path / "cls.onnx")
    assert _model_error(path) == (
        f"{path}: not a 3D segmentation model: its first output must be [N, K, D, H, W] scores or an [N, D, H, W] "
        "label volume (inputs: volume[N,1,D,H,W] float32; outputs: score[N,1] float32)")


def test_a_downsampled_5d_output_is_refused(tmp_path):
    path = identity5d(tmp_path / "pool.onnx", shape=FIXED, out_shape=[1, 1, 8, 16, 16], op="MaxPool")
    assert _model_error(path) == (
        f"{path}: not a 3D segmentation model SegLens can run: the output's D×H×W 8×16×16 differs from the input's "
        "16×32×32 (SegLens needs one score per input voxel) (inputs: volume[1,1,16,32,32] float32; outputs: "
        "out[1,1,8,16,16] float32)")


def test_a_channels_last_or_uint8_5d_input_is_refused(tmp_path):
    last = identity5d(tmp_path / "last.onnx", shape=[1, 32, 32, 32, 1], out_shape=[1, 32, 32, 32, 1])
    assert "the 5-D input looks channels-last [N, D, H, W, C]; SegLens takes 3D models channels-first " \
           "[N, C, D, H, W] (inputs" in _model_error(last)
    raw = identity5d(tmp_path / "raw.onnx", shape=FIXED, out_shape=FIXED, elem=UINT8)
    assert "a 3D model's input must be float32 or float16 [N, C, D, H, W], got uint8 (" in _model_error(raw)


def test_a_fixed_batch_over_one_is_refused(tmp_path):
    path = scores3d(tmp_path / "b2.onnx", shape=[2, 1, 16, 32, 32])
    assert "the model's batch size is fixed at 2; SegLens runs one patch at a time unless the batch axis is " \
           "dynamic" in _model_error(path)


# --- the sidecar, one bad key at a time -----------------------------------------------------------------------

BAD_KEYS = [  # (model: fixed or dynamic, sidecar, the message after "<sidecar>: ")
    ("dynamic", "input:\n  patch: [0, 32, 32]\n",
     "'input.patch' must be [D, H, W] in voxels (1 to 2048 each), got [0, 32, 32]"),
    ("dynamic", "input:\n  patch: [16, 32]\n",
     "'input.patch' must be [D, H, W] in voxels (1 to 2048 each), got [16, 32]"),
    ("dynamic", "input:\n  patch: big\n", "'input.patch' must be [D, H, W] in voxels (1 to 2048 each), got 'big'"),
    ("dynamic", "input:\n  axes: RAS\n",
     "'input.patch' is missing: the model's input is dynamic along D×H×W (?×?×?): SegLens needs the patch it was "
     "trained with, as [D, H, W]"),
    ("fixed", "input:\n  patch: [16, 32, 64]\n",
     "'input.patch' is [16, 32, 64], but the model's input is fixed at 16×32×32 (D×H×W)"),
    ("dynamic", "input:\n  patch: [16, 32, 40]\n  size_divisor: 16\n",
     "'input.size_divisor' is 16, but the patch [16, 32, 40] is not a multiple of it"),
    ("fixed", "input:\n  axes: RAX\n", "'input.axes' must be native or a 3-letter orientation code with each of "
                                       "R/L, A/P and S/I once (RAS, LPS, SPL, ...), got 'RAX'"),
    ("fixed", "input:\n  axes: RLS\n", "'input.axes' must be native or a 3-letter orientation code with each of "
                                       "R/L, A/P and S/I once (RAS, LPS, SPL, ...), got 'RLS'"),
    ("fixed", "input:\n  axes: 3\n", "'input.axes' must be native or a 3-letter orientation code with each of "
                                     "R/L, A/P and S/I once (RAS, LPS, SPL, ...), got 3"),
    ("fixed", "input:\n  spacing: [0, 1, 1]\n",
     "'input.spacing' must be [d, h, w] in mm, each above 0 and at most 1000, got [0, 1, 1]"),
    ("fixed", "input:\n  spacing: [1, 1]\n",
     "'input.spacing' must be [d, h, w] in mm (or null: the volume's own), got [1, 1]"),
    ("fixed", "input:\n  spacing: [1, x, 1]\n", "'input.spacing' must be a number, got str"),
    ("fixed", "input:\n  tile: {overlap: 1.0}\n",
     "'input.tile.overlap' must be at least 0 and below 1 (the share of a patch overlapping its neighbour), got 1.0"),
    ("fixed", "input:\n  tile: {overlap: -0.1}\n",
     "'input.tile.overlap' must be at least 0 and below 1 (the share of a patch overlapping its neighbour), got -0.1"),
    ("fixed", "input:\n  tile: {blend: linear}\n",
     "'input.tile.blend' is linear, but a 3D model's patches blend gaussian | constant"),
    ("fixed", "input:\n  tile: {blend: cubic}\n",
     "'input.tile.blend' must be one of gaussian | linear | constant, got 'cubic'"),
    ("fixed", "input:\n  tile: {batch: 2}\n",
     "'input.tile.batch' is 2, but the model's batch axis is fixed at 1 (export it with a dynamic batch axis to "
     "run patches in batches)"),
    ("fixed", "input:\n  tile: {batch: 0}\n", "'input.tile.batch' must be a whole number from 1 to 256, got 0"),
    ("fixed", "input:\n  tta: {mirror: [0, 3]}\n",
     "'input.tta' must mirror 1 to 3 different axes among 0 (D), 1 (H), 2 (W), got [0, 3]"),
    ("fixed", "input:\n  tta: {mirror: [1, 1]}\n",
     "'input.tta' must mirror 1 to 3 different axes among 0 (D), 1 (H), 2 (W), got [1, 1]"),
    ("fixed", "input:\n  tta: flip\n", "'input.tta' must be mirror or {mirror: [axes]} (0 = D, 1 = H, 2 = W), "
                                       "got 'flip'"),
    ("fixed", "input:\n  normalize: {kind: mri}\n", "'input.normalize.kind' must be one of ct | zscore, got 'mri'"),
    ("fixed", "input:\n  normalize: {kind: ct, clip: [400, -1000], mean: 0, std: 1}\n",
     "'input.normalize.clip' must be [lo, hi] with low < high, got [400, -1000]"),
    ("fixed", "input:\n  normalize: {kind: ct, clip: [5, 5], mean: 0, std: 1}\n",
     "'input.normalize.clip' must be [lo, hi] with low < high, got [5, 5]"),
    ("fixed", "input:\n  normalize: {kind: ct, mean: 0, std: 0}\n",
     "'input.normalize.std' must be a number above 0, got 0"),
    ("fixed", "input:\n  normalize: {kind: ct, mean: 0, std: -2}\n",
     "'input.normalize.std' must be a number above 0, got -2"),
    ("fixed", "input:\n  normalize: {kind: ct, std: 100}\n",
     "'input.normalize.mean' is missing: kind ct needs the training set's mean intensity (after the clip)"),
    ("fixed", "input:\n  normalize: {kind: zscore, mean: 3}\n",
     "'input.normalize.mean' applies to kind ct (zscore uses each volume's own mean and std)"),
    ("fixed", "input:\n  normalize: {kind: ct, mean: 0, std: 1, nonzero: true}\n",
     "'input.normalize.nonzero' applies to kind zscore (ct uses the training set's statistics)"),
    ("fixed", "input:\n  normalize: {nonzero: true}\n",
     "'input.normalize.kind' is missing: ct (clip, then the training set's mean and std) or zscore (each volume's "
     "own mean and std)"),
    ("fixed", "input:\n  normalize: {kind: zscore}\n  mean: 0.5\n",
     "'input.normalize' and 'input.mean' both given: use one"),
    ("fixed", "input:\n  mean: [0.1, 0.2, 0.3]\n",
     "'input.mean' has 3 values, but a 3D model's input is normalised with one: (x * scale - mean) / std"),
    ("fixed", "input:\n  std: -1\n", "'input.std' must be above 0 for a 3D model, got -1.0"),
    ("fixed", "input:\n  resize: letterbox\n", "'input.resize' is letterbox, but a 3D model runs on patches of the "
                                               "volume (input.patch, input.tile), never resized as a whole"),
    ("fixed", "input:\n  size: [32, 32]\n", "'input.size' applies to 2D models: a 3D model's patch is input.patch: "
                                            "[D, H, W]"),
    ("fixed", "input:\n  tile: {size: [32, 32]}\n", "'input.tile.size' applies to 2D models: a 3D model's patch is "
                                                    "input.patch: [D, H, W]"),
    ("fixed", "input:\n  window: [40, 400]\n", "'input.window' applies to 2D models: a 3D model's intensities are "
                                               "set by input.normalize: {kind: ct, clip: [lo, hi], mean, std}"),
    ("fixed", "input:\n  color: rgb\n", "'input.color' applies to 2D models: a 3D model's input is a volume's "
                                        "intensities, not colours"),
    ("fixed", "input:\n  tile: {pad: reflect}\n", "'input.tile.pad' must be one of zeros | edge, got 'reflect'"),
    ("fixed", "postprocess:\n  min_area: 20\n", "'postprocess.min_area' is 20, but it cleans a 2D mask in pixels "
     "and a 3D model's labels are not cleaned: judge its 3D components with a verdict rule, "
     "fail_if: {min_component_ml: …}"),
    ("dynamic", "input:\n  patch: [16, 32, 32]\npostprocess:\n  close_kernel: 3\n", "'postprocess.close_kernel' "
     "is 3, but it cleans a 2D mask in pixels and a 3D model's labels are not cleaned: judge its 3D components "
     "with a verdict rule, fail_if: {min_component_ml: …}"),
]


@pytest.mark.parametrize("kind, text, message", BAD_KEYS, ids=[f"{i}" for i in range(len(BAD_KEYS))])
def test_a_bad_3d_sidecar_key_is_refused_in_one_line_naming_it(tmp_path, kind, text, message):
    model = with_sidecar(scores3d(tmp_path / "m.onnx", shape=FIXED if kind == "fixed" else DYNAMIC), text)
    with pytest.raises(SidecarError) as caught:
        load_spec(model)
    assert str(caught.value) == f"{model.with_suffix('.yaml')}: {message}"


@pytest.mark.parametrize("text, key", [("input:\n  patch: [16, 32, 32]\n", "input.patch"),
                                       ("input:\n  spacing: [1, 1, 1]\n", "input.spacing"),
                                       ("input:\n  tta: mirror\n", "input.tta"),
                                       ("input:\n  tile: {pad: edge}\n", "input.tile.pad"),
                                       ("input:\n  normalize: {kind: zscore}\n", "input.normalize.kind"),
                                       ("input:\n  grid: corner\n", "input.grid"),
                                       ("output:\n  activate: after_blend\n", "output.activate")])
def test_a_3d_key_on_a_2d_model_is_refused(models, text, key):
    model = with_sidecar(models("rgb_classes"), text)
    with pytest.raises(SidecarError) as caught:
        load_spec(model)
    assert str(caught.value) == (f"{model.with_suffix('.yaml')}: '{key}' applies to 3D models (a 5-D "
                                 "[N, C, D, H, W] input), but this model's input is 4-D")


def test_a_2d_tile_overlap_keeps_its_cap(models):
    model = with_sidecar(models("fixed_bright_spots"), "input:\n  resize: tile\n  tile: {overlap: 0.95}\n")
    with pytest.raises(SidecarError, match=r"'input.tile.overlap' must be at least 0 and at most 0.9 "):
        load_spec(model)
