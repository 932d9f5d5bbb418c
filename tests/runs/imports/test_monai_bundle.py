"""`seglens-cli import monai-bundle BUNDLE --out MODEL.onnx` on a real MONAI bundle made here: a small 3D
monai.networks.nets.UNet trained a few dozen steps on CT-like phantoms (weights saved with torch.save), its
inference.json written by MONAI's own ConfigParser (LoadImaged, EnsureChannelFirstd, Orientationd, Spacingd,
ScaleIntensityRanged, SlidingWindowInferer, Activationsd softmax, Invertd, AsDiscreted argmax, SaveImaged) and
run by MONAI's own bundle runner (monai.bundle.run, CPU) as the reference; `seglens-cli run` of the imported model
on the same NIfTI gives the same labels (Dice ≥ 0.99 per class). Each untranslatable or unsafe bundle is one line
with nothing written.

PyTorch and MONAI are test-only here (.ci/run installs them): without them these tests skip locally and fail in CI.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import nibabel as nib
import numpy as np
import pytest
from volume3d_models import require

from app.cli import main
from app.inference.model.builder import load_spec

INSTALL = "pip install torch==2.13.0 monai==1.6.1 onnxscript (the 'import' extra, as .ci/run does)"
NETWORK = {"_target_": "UNet", "spatial_dims": 3, "in_channels": 1, "out_channels": 3, "channels": [8, 16, 32],
           "strides": [2, 2], "num_res_units": 1, "norm": "batch"}
CLASSES = {"0": "background", "1": "organ", "2": "lesion"}
PREPROCESSING = [
    {"_target_": "LoadImaged", "keys": "image", "image_only": True},
    {"_target_": "EnsureChannelFirstd", "keys": "image"},
    {"_target_": "Orientationd", "keys": "image", "axcodes": "RAS"},
    {"_target_": "Spacingd", "keys": "image", "pixdim": [1.5, 1.5, 2.0], "mode": "bilinear"},
    {"_target_": "ScaleIntensityRanged", "keys": "image", "a_min": -100, "a_max": 250, "b_min": 0.0, "b_max": 1.0,
     "clip": True},
    {"_target_": "EnsureTyped", "keys": "image"},
]
INFERER = {"_target_": "SlidingWindowInferer", "roi_size": [32, 32, 16], "sw_batch_size": 2, "overlap": 0.5,
           "mode": "gaussian"}
POSTPROCESSING = [
    {"_target_": "Activationsd", "keys": "pred", "softmax": True},
    {"_target_": "Invertd", "keys": "pred", "transform": "@preprocessing", "orig_keys": "image",
     "nearest_interp": False, "to_tensor": True},
    {"_target_": "AsDiscreted", "keys": "pred", "argmax": True},
    {"_target_": "SaveImaged", "keys": "pred", "output_dir": "@output_dir", "output_postfix": "seg",
     "separate_folder": False, "resample": False, "print_log": False},
]


def inference_config(**changes: Any) -> dict[str, Any]:
    """An inference.json as a MONAI Model Zoo bundle writes one (spleen_ct_segmentation's shape), its evaluator
    replaced by a few expressions that need no pytorch-ignite: read, infer, post-process one `image_file`."""
    config: dict[str, Any] = {
        "imports": ["$import torch"],
        "bundle_root": ".",
        "image_file": "",
        "output_dir": "",
        "device": "$torch.device('cpu')",
        "network_def": copy.deepcopy(NETWORK),
        "network": "$@network_def.to(@device)",
        "preprocessing": {"_target_": "Compose", "transforms": copy.deepcopy(PREPROCESSING)},
        "inferer": dict(INFERER),
        "postprocessing": {"_target_": "Compose", "transforms": copy.deepcopy(POSTPROCESSING)},
        "data": "$@preprocessing({'image': @image_file})",
        "pred": "$@inferer(@data['image'][None].to(@device), @network)[0]",
        "result": "$@postprocessing(dict(@data, pred=@pred))",
        "initialize": ["$torch.set_grad_enabled(False)",
                       "$@network.load_state_dict(torch.load(@bundle_root + '/models/model.pt', weights_only=True))",
                       "$@network.eval()"],
        "run": ["$@result"],
    }
    config.update(changes)
    return config


def metadata(**changes: Any) -> dict[str, Any]:
    return {"name": "tiny_ct_phantoms", "version": "0.1.0", "monai_version": "1.6.1",
            "network_data_format": {
                "inputs": {"image": {"type": "image", "format": "hounsfield", "modality": "CT", "num_channels": 1,
                                     "spatial_shape": INFERER["roi_size"], "dtype": "float32"}},
                "outputs": {"pred": {"type": "image", "format": "segmentation", "num_channels": 3,
                                     "spatial_shape": INFERER["roi_size"], "dtype": "float32",
                                     "channel_def": dict(CLASSES)}}},
            **changes}


def phantom(rng: np.random.Generator, shape: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """A CT-like volume (HU, voxel axes i, j, k) with an organ (an ellipsoid of ~60 HU) holding a lesion (~160 HU),
    and its labels."""
    grid = np.indices(shape, dtype=np.float32)
    centre = np.array(shape, np.float32)[:, None, None, None] * rng.uniform(0.4, 0.6, (3, 1, 1, 1))
    radii = np.array(shape, np.float32)[:, None, None, None] * rng.uniform(0.22, 0.32, (3, 1, 1, 1))
    organ = (((grid - centre) / radii) ** 2).sum(0) <= 1.0
    lesion = (((grid - centre - radii * 0.25) / (radii * 0.4)) ** 2).sum(0) <= 1.0
    labels = organ.astype(np.uint8) + (organ & lesion).astype(np.uint8)
    volume = np.where(labels == 2, 160.0, np.where(labels == 1, 60.0, -80.0)) + rng.normal(0, 8, shape)
    return volume.astype(np.float32), labels


def trained_weights(torch: Any, nets: Any, steps: int = 80) -> dict[str, Any]:
    """The UNet trained on phantoms at the model's spacing (already scaled as ScaleIntensityRanged does)."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    network = nets.UNet(**{k: v for k, v in NETWORK.items() if k != "_target_"})
    optimiser = torch.optim.Adam(network.parameters(), lr=0.02)
    for _ in range(steps):
        pairs = [phantom(rng, (32, 32, 16)) for _ in range(2)]
        images = np.stack([np.clip((v + 100) / 350, 0, 1)[None] for v, _ in pairs])
        labels = np.stack([lab for _, lab in pairs]).astype(np.int64)
        loss = torch.nn.functional.cross_entropy(network(torch.from_numpy(images)), torch.from_numpy(labels))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return {k: v.detach().clone() for k, v in network.state_dict().items()}


def write_bundle(folder: Path, weights: dict[str, Any], *, config: dict[str, Any] | None = None,
                 meta: dict[str, Any] | None = None) -> Path:
    """A bundle folder: configs/inference.json (MONAI's ConfigParser writes it), configs/metadata.json,
    models/model.pt (torch.save of the state dict)."""
    import torch
    from monai.bundle import ConfigParser

    (folder / "configs").mkdir(parents=True)
    (folder / "models").mkdir()
    ConfigParser.export_config_file(config if config is not None else inference_config(),
                                    str(folder / "configs" / "inference.json"), indent=2)
    (folder / "configs" / "metadata.json").write_text(json.dumps(meta if meta is not None else metadata()))
    torch.save(weights, folder / "models" / "model.pt")
    return folder


def ct_nifti(path: Path, *, seed: int, shape: tuple[int, int, int], zooms: tuple[float, float, float],
             flips: tuple[int, int, int] = (-1, -1, 1)) -> Path:
    """A phantom saved as NIfTI with `zooms` and an affine whose axes point along `flips` (LPS-like by default,
    so Orientationd has something to do)."""
    volume, _ = phantom(np.random.default_rng(seed), shape)
    affine = np.diag([f * z for f, z in zip(flips, zooms, strict=True)] + [1.0])
    affine[:3, 3] = [-20.0, 15.0, -30.0]
    nib.save(nib.Nifti1Image(volume.astype(np.int16), affine), path)
    return path


@pytest.fixture(scope="module")
def torch_monai():
    torch = require("torch", INSTALL)
    require("monai.bundle", INSTALL)
    from monai.networks import nets

    return torch, nets


@pytest.fixture(scope="module")
def weights(torch_monai):
    torch, nets = torch_monai
    return trained_weights(torch, nets)


@pytest.fixture(scope="module")
def imported(weights, tmp_path_factory):
    folder = tmp_path_factory.mktemp("bundle")
    bundle = write_bundle(folder / "tiny_ct_phantoms", weights)
    out = folder / "out" / "tiny.onnx"
    out.parent.mkdir()
    assert main(["import", "monai-bundle", str(bundle), "--out", str(out)]) == 0
    return bundle, out


def monai_labels(bundle: Path, image: Path, output_dir: Path) -> np.ndarray:
    """MONAI's own bundle inference (monai.bundle.run of the bundle's config, CPU) on `image`: its saved labels."""
    from monai.bundle import run

    output_dir.mkdir(exist_ok=True)
    run(run_id="run", init_id="initialize", meta_file=str(bundle / "configs" / "metadata.json"),
        config_file=str(bundle / "configs" / "inference.json"), bundle_root=str(bundle), image_file=str(image),
        output_dir=str(output_dir))
    saved = next(output_dir.glob("*_seg.nii.gz"))
    return np.asarray(nib.load(saved).dataobj).squeeze().astype(np.uint8)


def seglens_labels(model: Path, image: Path, out: Path) -> np.ndarray:
    assert main(["run", str(model), str(image), "--out", str(out), "--save", "mask"]) == 0
    saved = next(p for p in out.rglob("*.nii.gz"))
    return np.asarray(nib.load(saved).dataobj).astype(np.uint8)


def dice(a: np.ndarray, b: np.ndarray, label: int) -> float:
    x, y = a == label, b == label
    total = int(x.sum() + y.sum())
    return 1.0 if total == 0 else 2.0 * int((x & y).sum()) / total


# --- the import ------------------------------------------------------------------------------------------------

def test_sidecar_maps_the_pipeline(imported):
    _, out = imported
    spec = load_spec(out)
    volume = spec.volume
    assert volume is not None
    assert volume.patch == (32, 32, 16) and volume.spacing == (1.5, 1.5, 2.0) and volume.axes == "RAS"
    normalize = volume.normalize  # ScaleIntensityRanged -100..250 → 0..1 with a clip: (clip(x) + 100) / 350
    assert normalize.kind == "ct" and normalize.clip == (-100.0, 250.0)
    assert normalize.mean == pytest.approx(-100.0) and normalize.std == pytest.approx(350.0)
    assert (volume.tile.overlap, volume.tile.blend, volume.tile.batch) == (0.5, "gaussian", 2)
    assert spec.output.activation == "softmax"
    assert [c.name for c in spec.classes] == ["background", "organ", "lesion"]
    text = out.with_suffix(".yaml").read_text()
    assert "# monai configs/inference.json preprocessing#transforms#3 pixdim" in text
    assert (volume.grid, volume.activate) == ("corner", "after_blend")  # Spacingd's grid; Activationsd, Invertd
    assert "not yet exact: resampling" not in text and "not yet exact: blending" not in text


def test_info_says_where_it_came_from(imported, capsys):
    bundle, out = imported
    assert main(["info", str(out), "--no-session"]) == 0
    text = capsys.readouterr().out
    assert f"from {bundle.resolve()}" in text
    assert "MONAI bundle tiny_ct_phantoms 0.1.0, weights models/model.pt, network UNet" in text
    assert "source of     input.spacing: monai configs/inference.json preprocessing#transforms#3 pixdim" in text
    assert "not exact     intensity clip: MONAI clips after resampling" in text
    assert "volumes are resampled to it, on MONAI's Spacing grid: the first voxel's centre kept" in text
    assert "softmax of the blended raw outputs, before they are resampled back (output.activate)" in text


def test_equals_monai_bundle_inference(imported, tmp_path):
    """The volume at the model's spacing (Spacingd does nothing), oriented LPS-like (Orientationd flips two axes):
    the labels are MONAI's, voxel for voxel."""
    bundle, out = imported
    image = ct_nifti(tmp_path / "case.nii.gz", seed=7, shape=(48, 40, 22), zooms=(1.5, 1.5, 2.0))
    theirs = monai_labels(bundle, image, tmp_path / "monai")
    ours = seglens_labels(out, image, tmp_path / "seglens")
    assert ours.shape == theirs.shape == (48, 40, 22)
    assert set(np.unique(theirs)) == {0, 1, 2}  # the reference found both structures
    np.testing.assert_array_equal(ours, theirs)


@pytest.fixture(scope="module")
def resampled_case(imported, tmp_path_factory) -> tuple[np.ndarray, np.ndarray]:
    """SegLens's and MONAI's labels of a volume Spacingd resamples (1.1 × 1.3 × 2.6 mm into 1.5 × 1.5 × 2.0)."""
    bundle, out = imported
    folder = tmp_path_factory.mktemp("resampled")
    image = ct_nifti(folder / "case.nii.gz", seed=8, shape=(50, 44, 20), zooms=(1.1, 1.3, 2.6))
    return seglens_labels(out, image, folder / "seglens"), monai_labels(bundle, image, folder / "monai")


def test_resampled_volume_close_to_monai(resampled_case):
    """A volume Spacingd resamples: the labels agree (the guard below the exact test)."""
    ours, theirs = resampled_case
    assert set(np.unique(theirs)) == {0, 1, 2}
    assert (ours == theirs).mean() >= 0.995
    assert dice(ours, theirs, 0) >= 0.99 and dice(ours, theirs, 1) >= 0.98


def test_resampled_volume_equals_monai(resampled_case):
    """input.grid: corner resamples onto Spacingd's grid and back as Invertd does, output.activate: after_blend
    takes the softmax of the blended raw outputs as the bundle does: every class's Dice ≥ 0.99 (0 of 44,000 voxels
    differed when written; 101 with half-voxel centres and per-patch softmax: lesion Dice 0.95)."""
    ours, theirs = resampled_case
    assert all(dice(ours, theirs, label) >= 0.99 for label in (0, 1, 2))
    assert (ours != theirs).sum() <= 5  # the clip before resampling (a gap printed) may move a voxel or two


def test_invertd_before_activations_activates_on_the_volumes_grid(weights, tmp_path):
    """A bundle whose Invertd comes before Activationsd: the raw blend is mapped back, then activated."""
    config = inference_config()
    post = config["postprocessing"]["transforms"]
    post[0], post[1] = post[1], post[0]
    bundle = write_bundle(tmp_path / "b", weights, config=config)
    out = tmp_path / "late.onnx"
    assert main(["import", "monai-bundle", str(bundle), "--out", str(out)]) == 0
    assert load_spec(out).volume.activate == "after_resample"
    assert "postprocessing#transforms#1, after Invertd" in out.with_suffix(".yaml").read_text()


# --- refusals: one line, nothing written ---------------------------------------------------------------------------

def refused(bundle: Path, tmp_path: Path, capsys) -> str:
    out = tmp_path / "refused" / "model.onnx"
    out.parent.mkdir()
    assert main(["import", "monai-bundle", str(bundle), "--out", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert list(out.parent.iterdir()) == []
    return lines[0]


def with_transform(index: int, transform: dict[str, Any]) -> dict[str, Any]:
    config = inference_config()
    config["preprocessing"]["transforms"].insert(index, transform)
    return config


def test_untranslatable_transform_is_refused(weights, tmp_path, capsys):
    noise = {"_target_": "RandGaussianNoised", "keys": "image", "prob": 1.0}
    line = refused(write_bundle(tmp_path / "b", weights, config=with_transform(5, noise)), tmp_path, capsys)
    assert "configs/inference.json preprocessing#transforms#5" in line
    assert "RandGaussianNoised is not one SegLens translates" in line


def test_custom_target_is_refused(weights, tmp_path, capsys):
    custom = {"_target_": "my_hospital.transforms.Denoise", "keys": "image"}
    line = refused(write_bundle(tmp_path / "b", weights, config=with_transform(2, custom)), tmp_path, capsys)
    assert "preprocessing#transforms#2#_target_" in line and "not one of MONAI's classes" in line


def test_expression_is_refused_and_never_run(weights, tmp_path, capsys):
    marker = tmp_path / "ran"
    config = inference_config()
    config["inferer"]["roi_size"] = f"$__import__('pathlib').Path({str(marker)!r}).touch() or [32, 32, 16]"
    line = refused(write_bundle(tmp_path / "b", weights, config=config), tmp_path, capsys)
    assert "inferer#roi_size" in line and "Python expression" in line
    assert not marker.exists()


def test_crop_foreground_is_refused(weights, tmp_path, capsys):
    crop = {"_target_": "CropForegroundd", "keys": "image", "source_key": "image"}
    line = refused(write_bundle(tmp_path / "b", weights, config=with_transform(5, crop)), tmp_path, capsys)
    assert "CropForegroundd crops each volume" in line


def test_missing_metadata_is_refused(weights, tmp_path, capsys):
    bundle = write_bundle(tmp_path / "b", weights)
    (bundle / "configs" / "metadata.json").unlink()
    assert "configs/metadata.json: missing" in refused(bundle, tmp_path, capsys)


def test_torchscript_only_is_refused(weights, tmp_path, capsys):
    bundle = write_bundle(tmp_path / "b", weights)
    (bundle / "models" / "model.pt").rename(bundle / "models" / "model.ts")
    assert "TorchScript model is code that runs when it is loaded" in refused(bundle, tmp_path, capsys)


class _Planted:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.marker}",)


def test_weights_with_a_non_tensor_pickle_are_refused(weights, tmp_path, capsys):
    import torch

    bundle = write_bundle(tmp_path / "b", weights)
    marker = tmp_path / "ran"
    torch.save({"model": _Planted(marker)}, bundle / "models" / "model.pt")
    line = refused(bundle, tmp_path, capsys)
    assert "models/model.pt" in line
    assert not marker.exists()


def test_weights_not_fitting_the_network_are_refused(weights, tmp_path, capsys):
    config = inference_config()
    config["network_def"]["channels"] = [8, 16, 64]
    line = refused(write_bundle(tmp_path / "b", weights, config=config), tmp_path, capsys)
    assert "network_def: UNet" in line and "models/model.pt" in line


def test_yaml_config_with_a_reference(weights, tmp_path):
    """inference.yaml (through SegLens's one YAML loader) whose roi_size is a reference `@roi`."""
    import yaml

    bundle = write_bundle(tmp_path / "b", weights)
    config = inference_config(roi=[32, 32, 16])
    config["inferer"]["roi_size"] = "@roi"
    (bundle / "configs" / "inference.json").unlink()
    (bundle / "configs" / "inference.yaml").write_text(yaml.safe_dump(config))
    out = tmp_path / "yaml.onnx"
    assert main(["import", "monai-bundle", str(bundle), "--out", str(out)]) == 0
    assert load_spec(out).volume.patch == (32, 32, 16)


def test_without_pytorch_the_line_names_the_extra(weights, tmp_path, capsys, monkeypatch):
    """Where PyTorch is not installed (the frozen build, a plain install), the import stops with need_extra's line."""
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else found(name, *a))
    line = refused(write_bundle(tmp_path / "b", weights), tmp_path, capsys)
    assert "import monai-bundle" in line and "'import' extra" in line


def test_without_orientation_the_graph_takes_the_file_axes(weights, tmp_path):
    """No Orientationd: MONAI's network sees the file's voxel axes (i, j, k); the graph transposes SegLens's
    [k, j, i] itself (a wrong axis order would swap most labels). Voxel for voxel since the raw outputs are blended
    as MONAI blends them (output.activate: after_blend; 2 of 34,560 voxels differed with per-patch softmax)."""
    config = inference_config()
    del config["preprocessing"]["transforms"][2]
    bundle = write_bundle(tmp_path / "b", weights, config=config)
    out = tmp_path / "native.onnx"
    assert main(["import", "monai-bundle", str(bundle), "--out", str(out)]) == 0
    volume = load_spec(out).volume
    assert volume.axes == "native" and volume.patch == (16, 32, 32) and volume.spacing == (2.0, 1.5, 1.5)
    image = ct_nifti(tmp_path / "case.nii.gz", seed=9, shape=(40, 36, 24), zooms=(1.5, 1.5, 2.0), flips=(1, 1, 1))
    theirs = monai_labels(bundle, image, tmp_path / "monai")
    assert set(np.unique(theirs)) == {0, 1, 2}
    ours = seglens_labels(out, image, tmp_path / "seglens")
    np.testing.assert_array_equal(ours, theirs)
