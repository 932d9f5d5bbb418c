"""`seglens-cli import nnunet FOLDER --out MODEL.onnx` on hand-made nnU-Net v2 trained-model folders (plans.json,
dataset.json and dataset_fingerprint.json written as nnU-Net writes them, checkpoints saved by torch.save of a small
dynamic_network_architectures PlainConvUNet in nnUNetTrainer's layout): the ONNX and its sidecar open in SegLens
with the patch, spacing, normalisation, mirroring and class names mapped; the graph equals the module (one fold;
two folds: the mean of their logits); it runs on a small NIfTI volume; each malformed folder is one line with
nothing written.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import nibabel as nib
import numpy as np
import onnxruntime as ort
import pytest
from test_nnunet_network import INSTALL, architecture, torch_network
from volume3d_models import require

from app.cli import main
from app.inference.model.builder import load_spec

NAME = "nnUNetTrainer__nnUNetPlans__3d_fullres"
CT_PROPERTIES = {"max": 1800.0, "mean": 60.5, "median": 55.0, "min": -1024.0, "percentile_00_5": -150.25,
                 "percentile_99_5": 320.75, "std": 48.125}
LABELS = {"background": 0, "liver": 1, "tumour": 2}


def plans(arch: dict[str, Any]) -> dict[str, Any]:
    """A plans.json as nnU-Net's ExperimentPlanner writes it (3d_fullres, with a 3d_lowres inheriting from it)."""
    resampling = {"resampling_fn_data": "resample_data_or_seg_to_shape",
                  "resampling_fn_seg": "resample_data_or_seg_to_shape",
                  "resampling_fn_data_kwargs": {"is_seg": False, "order": 3, "order_z": 0, "force_separate_z": None},
                  "resampling_fn_seg_kwargs": {"is_seg": True, "order": 1, "order_z": 0, "force_separate_z": None},
                  "resampling_fn_probabilities": "resample_data_or_seg_to_shape",
                  "resampling_fn_probabilities_kwargs": {"is_seg": False, "order": 1, "order_z": 0,
                                                         "force_separate_z": None}}
    return {
        "dataset_name": "Dataset042_TinyLiver", "plans_name": "nnUNetPlans",
        "original_median_spacing_after_transp": [3.0, 0.8, 0.8], "original_median_shape_after_transp": [20, 64, 64],
        "image_reader_writer": "SimpleITKIO", "transpose_forward": [0, 1, 2], "transpose_backward": [0, 1, 2],
        "configurations": {
            "3d_fullres": {"data_identifier": "nnUNetPlans_3d_fullres", "preprocessor_name": "DefaultPreprocessor",
                           "batch_size": 2, "patch_size": [8, 32, 32], "median_image_size_in_voxels": [20, 64, 64],
                           "spacing": [3.0, 0.8, 0.8], "normalization_schemes": ["CTNormalization"],
                           "use_mask_for_norm": [False], **resampling, "architecture": arch, "batch_dice": False},
            "3d_lowres": {"inherits_from": "3d_fullres", "data_identifier": "nnUNetPlans_3d_lowres",
                          "spacing": [3.0, 1.6, 1.6], "next_stage": "3d_cascade_fullres"},
        },
        "experiment_planner_used": "ExperimentPlanner", "label_manager": "LabelManager",
        "foreground_intensity_properties_per_channel": {"0": CT_PROPERTIES},
    }


def dataset(**changes: Any) -> dict[str, Any]:
    return {"channel_names": {"0": "CT"}, "labels": LABELS, "numTraining": 4, "file_ending": ".nii.gz", **changes}


def small_architecture() -> dict[str, Any]:
    return architecture("PlainConvUNet", 3, n_stages=3, strides=[[1, 1, 1], [1, 2, 2], [2, 2, 2]],
                        kernel_sizes=[[1, 3, 3], [3, 3, 3], [3, 3, 3]], features_per_stage=[4, 8, 12],
                        n_conv_per_stage=[2, 2, 2], n_conv_per_stage_decoder=[1, 1])


def save_checkpoint(path: Path, network: Any, *, fold: int, configuration: str = "3d_fullres",
                    mirroring: tuple[int, ...] = (0, 1, 2)) -> None:
    """torch.save of what nnUNetTrainer.save_checkpoint saves (optimizer state and logging kept small)."""
    torch = require("torch", INSTALL)
    path.parent.mkdir(parents=True, exist_ok=True)
    content = {"network_weights": network.state_dict(), "optimizer_state": {"state": {}, "param_groups": []},
               "grad_scaler_state": None, "logging": {"train_losses": [np.float64(0.5)]}, "_best_ema": 0.8,
               "current_epoch": 3, "init_args": {"configuration": configuration, "fold": fold},
               "trainer_name": "nnUNetTrainer", "inference_allowed_mirroring_axes": mirroring}
    torch.save(content, path)


def make_folder(root: Path, *, folds: int = 1, name: str = NAME, labels: dict[str, Any] | None = None,
                outputs: int = 3) -> tuple[Path, list[Any]]:
    """A trained-model folder and the torch modules of its folds (random weights, a different seed each)."""
    torch = require("torch", INSTALL)
    require("dynamic_network_architectures", INSTALL)
    folder = root / name
    folder.mkdir(parents=True)
    arch = small_architecture()
    (folder / "plans.json").write_text(json.dumps(plans(arch), indent=4))
    (folder / "dataset.json").write_text(json.dumps(dataset(**labels or {}), indent=4))
    (folder / "dataset_fingerprint.json").write_text(json.dumps(
        {"foreground_intensity_properties_per_channel": {"0": CT_PROPERTIES}, "spacings": [[3.0, 0.8, 0.8]]}))
    networks = []
    for fold in range(folds):
        torch.manual_seed(fold)
        network = torch_network(arch, in_channels=1, num_classes=outputs)
        with torch.no_grad():
            for parameter in network.parameters():
                parameter.copy_(torch.randn_like(parameter) * 0.3)
        save_checkpoint(folder / f"fold_{fold}" / "checkpoint_final.pth", network, fold=fold)
        networks.append(network)
    return folder, networks


def logits(network: Any, x: np.ndarray) -> np.ndarray:
    torch = require("torch", INSTALL)
    with torch.no_grad():
        result: np.ndarray = network(torch.from_numpy(x)).numpy()
    return result


def test_a_folder_imports_into_a_model_seglens_opens_with_the_values_mapped(tmp_path, capsys):
    folder, networks = make_folder(tmp_path)
    out = tmp_path / "models" / "liver.onnx"
    assert main(["import", "nnunet", str(folder), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "not yet exact" not in captured.err  # every step is nnU-Net's own (the nnunet: recipe)
    assert f"wrote {out}" in captured.out
    spec = load_spec(out)
    assert spec.volume is not None
    assert spec.volume.patch == (8, 32, 32)
    assert spec.volume.spacing == (3.0, 0.8, 0.8)
    assert spec.volume.axes == "native"
    recipe = spec.volume.nnunet
    assert recipe is not None
    (norm,) = recipe.channels
    assert (norm.scheme, norm.clip, norm.mean, norm.std, norm.source) == ("ct", (-150.25, 320.75), 60.5, 48.125, 0)
    assert (recipe.resample.order, recipe.resample.order_z, recipe.resample_back.order) == (3, 0, 1)
    assert (recipe.crop_nonzero, recipe.step, recipe.slice_spacing) == (True, 0.5, "model")
    assert spec.volume.tta == (0, 1, 2)
    assert [c.name for c in spec.classes] == ["background", "liver", "tumour"]
    assert spec.output.activation == "softmax"
    assert spec.sources["input.patch"] == "sidecar"
    assert spec.metadata["seglens.import.folds"] == "0"
    assert spec.metadata["seglens.imported_from"] == str(folder.resolve())
    sources = json.loads(spec.metadata["seglens.import.sources"])
    assert sources["input.patch"] == "nnunet plans.json configurations.3d_fullres.patch_size"
    text = out.with_suffix(".yaml").read_text()
    assert "# not yet exact" not in text
    assert "resample: {\"order\": 3, \"order_z\": 0, \"force_separate_z\": null}  # nnunet plans.json " \
           "configurations.3d_fullres.resampling_fn_data_kwargs" in text
    assert "patch: [8, 32, 32]  # nnunet plans.json configurations.3d_fullres.patch_size" in text
    x = np.random.default_rng(0).standard_normal((1, 1, 8, 32, 32)).astype(np.float32)
    ours = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    np.testing.assert_allclose(ours, logits(networks[0], x), rtol=1e-4, atol=1e-4)
    assert main(["info", str(out), "--no-session"]) == 0
    shown = capsys.readouterr().out
    assert "imported" in shown and str(folder.resolve()) in shown


def test_two_folds_are_one_graph_averaging_their_logits(tmp_path, capsys):
    folder, networks = make_folder(tmp_path, folds=2)
    out = tmp_path / "two.onnx"
    assert main(["import", "nnunet", str(folder), "--out", str(out), "--folds", "0,1"]) == 0
    assert "folds 0, 1" in capsys.readouterr().out
    x = np.random.default_rng(1).standard_normal((1, 1, 16, 64, 32)).astype(np.float32)
    ours = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    expected = (logits(networks[0], x) + logits(networks[1], x)) / 2
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-4)
    assert load_spec(out).metadata["seglens.import.folds"] == "0,1"


def test_transpose_forward_is_applied_inside_the_graph_and_the_values_follow_the_volume_axes(tmp_path, capsys):
    folder, networks = make_folder(tmp_path)
    document = json.loads((folder / "plans.json").read_text())
    document["transpose_forward"], document["transpose_backward"] = [2, 0, 1], [1, 2, 0]
    (folder / "plans.json").write_text(json.dumps(document))
    out = tmp_path / "t.onnx"
    assert main(["import", "nnunet", str(folder), "--out", str(out)]) == 0
    assert "transpose" not in capsys.readouterr().err  # not a gap: the graph does it
    spec = load_spec(out)
    assert spec.volume is not None
    assert (spec.volume.patch, spec.volume.spacing) == ((32, 32, 8), (0.8, 0.8, 3.0))
    assert spec.metadata["seglens.spatial_multiple"] == "4,4,2"
    x = np.random.default_rng(3).standard_normal((1, 1, 32, 64, 16)).astype(np.float32)  # the volume's own axes
    ours = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    theirs = logits(networks[0], np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3))).transpose(0, 1, 3, 4, 2)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)


def test_a_2d_configuration_runs_its_network_on_every_slice(tmp_path, capsys):
    torch = require("torch", INSTALL)
    folder = tmp_path / "nnUNetTrainer__nnUNetPlans__2d"
    folder.mkdir()
    arch = architecture("PlainConvUNet", 2, n_stages=3, strides=[[1, 1], [2, 2], [2, 2]],
                        kernel_sizes=[[3, 3]] * 3, features_per_stage=[4, 8, 12], n_conv_per_stage=[2, 2, 2],
                        n_conv_per_stage_decoder=[1, 1])
    document = plans(small_architecture())
    document["configurations"]["2d"] = {**document["configurations"]["3d_fullres"], "patch_size": [32, 32],
                                        "spacing": [0.8, 0.8], "architecture": arch}
    (folder / "plans.json").write_text(json.dumps(document))
    (folder / "dataset.json").write_text(json.dumps(dataset()))
    torch.manual_seed(5)
    network = torch_network(arch, in_channels=1, num_classes=3)
    save_checkpoint(folder / "fold_all" / "checkpoint_final.pth", network, fold=0, configuration="2d",
                    mirroring=(0, 1))
    out = tmp_path / "slices.onnx"
    assert main(["import", "nnunet", str(folder), "--out", str(out)]) == 0
    assert "not yet exact" not in capsys.readouterr().err
    spec = load_spec(out)
    assert spec.volume is not None and spec.volume.nnunet is not None
    assert (spec.volume.patch, spec.volume.spacing, spec.volume.tta) == ((1, 32, 32), (3.0, 0.8, 0.8), (1, 2))
    assert spec.volume.nnunet.slice_spacing == "volume"  # each volume keeps its own slice spacing, as nnU-Net
    x = np.random.default_rng(4).standard_normal((1, 1, 5, 32, 64)).astype(np.float32)
    ours = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    theirs = np.stack([logits(network, np.ascontiguousarray(x[:, :, k])) for k in range(5)], axis=2)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
    volume = tmp_path / "in" / "ct.nii.gz"
    volume.parent.mkdir()
    hu = np.random.default_rng(2).normal(60, 80, (4, 40, 36)).astype(np.int16)
    nib.save(nib.Nifti1Image(hu.transpose(2, 1, 0), np.diag([0.8, 0.8, 3.0, 1.0])), str(volume))
    assert main(["run", str(out), str(volume.parent), "--out", str(tmp_path / "o"), "--export", "nifti",
                 "--device", "cpu"]) == 0, capsys.readouterr().err


def test_region_based_labels_import_as_regions_painted_in_their_order(tmp_path, capsys):
    regions = {"labels": {"background": 0, "whole tumour": [1, 2], "core": [2]}, "regions_class_order": [1, 2]}
    folder, _ = make_folder(tmp_path, labels=regions, outputs=2)
    out = tmp_path / "regions.onnx"
    assert main(["import", "nnunet", str(folder), "--out", str(out)]) == 0
    assert "not yet exact" not in capsys.readouterr().err
    spec = load_spec(out)
    assert [c.name for c in spec.classes] == ["background", "whole tumour", "core"]  # by the label each paints
    assert spec.volume is not None and spec.volume.nnunet is not None
    assert spec.volume.nnunet.regions == ((1, 2), (2,))
    assert spec.volume.nnunet.regions_class_order == (1, 2)
    assert spec.output.activation == "sigmoid"


def test_the_imported_model_runs_on_a_small_volume(tmp_path, capsys):
    folder, _ = make_folder(tmp_path)
    model = tmp_path / "liver.onnx"
    assert main(["import", "nnunet", str(folder), "--out", str(model)]) == 0
    hu = np.random.default_rng(2).normal(60, 80, (10, 40, 36)).astype(np.int16)  # native [slice, row, column]
    inputs = tmp_path / "in"
    inputs.mkdir()
    nib.save(nib.Nifti1Image(hu.transpose(2, 1, 0), np.diag([0.8, 0.8, 3.0, 1.0])), str(inputs / "ct.nii.gz"))
    out = tmp_path / "out"
    code = main(["run", str(model), str(inputs), "--out", str(out), "--export", "nifti", "--device", "cpu"])
    assert code == 0, capsys.readouterr().err
    labels = np.asarray(nib.load(str(out / "ct.nii.gz_mask.nii.gz")).dataobj)
    assert labels.shape == (36, 40, 10)
    assert set(np.unique(labels)) <= {0, 1, 2}


# --- malformed folders: one line each, nothing written -------------------------------------------------------

def _no_plans(folder: Path) -> list[str]:
    (folder / "plans.json").unlink()
    return []


def _missing_fold(folder: Path) -> list[str]:
    return ["--folds", "0,3"]


def _unknown_architecture(folder: Path) -> list[str]:
    document = json.loads((folder / "plans.json").read_text())
    document["configurations"]["3d_fullres"]["architecture"]["network_class_name"] = "my.nets.MyNet"
    (folder / "plans.json").write_text(json.dumps(document))
    return []


class _Payload:
    def __reduce__(self) -> tuple[Any, ...]:
        return os.system, ("touch SEGLENS_PWNED",)


def _pickle_with_code(folder: Path) -> list[str]:
    torch = require("torch", INSTALL)
    path = folder / "fold_0" / "checkpoint_final.pth"
    content = torch.load(path, weights_only=False)
    content["extra"] = _Payload()
    torch.save(content, path)
    return []


def _configuration_not_in_plans(folder: Path) -> list[str]:
    document = json.loads((folder / "plans.json").read_text())
    del document["configurations"]["3d_fullres"]
    (folder / "plans.json").write_text(json.dumps(document))
    return []


def _channels_disagree(folder: Path) -> list[str]:
    (folder / "dataset.json").write_text(json.dumps(dataset(channel_names={"0": "CT", "1": "PET"})))
    return []


def _labels_not_consecutive(folder: Path) -> list[str]:
    (folder / "dataset.json").write_text(json.dumps(dataset(labels={"background": 0, "liver": 1, "tumour": 3})))
    return []


def _transposes_disagree(folder: Path) -> list[str]:
    document = json.loads((folder / "plans.json").read_text())
    document["transpose_forward"], document["transpose_backward"] = [2, 0, 1], [2, 0, 1]
    (folder / "plans.json").write_text(json.dumps(document))
    return []


def _broken_json(folder: Path) -> list[str]:
    (folder / "dataset.json").write_text('{"labels": {"background": 0,')
    return []


def _checkpoint_outside(folder: Path) -> list[str]:
    target = folder.parent / "elsewhere.pth"
    shutil.move(folder / "fold_0" / "checkpoint_final.pth", target)
    (folder / "fold_0" / "checkpoint_final.pth").symlink_to(target)
    return []


MALFORMED = {
    "no plans.json": (_no_plans, "plans.json: missing"),
    "a missing fold": (_missing_fold, "fold 3 is missing (found: 0)"),
    "an unknown architecture": (_unknown_architecture, "architecture 'my.nets.MyNet' is not one SegLens imports"),
    "a pickle with code": (_pickle_with_code, "refused: the pickle asks for the global"),
    "a configuration not in the plans": (_configuration_not_in_plans, "the configuration '3d_fullres' is not in the "
                                                                      "plans (they have: 3d_lowres)"),
    "channels that disagree": (_channels_disagree, "normalises 1 channels, but dataset.json names 2"),
    "labels not consecutive": (_labels_not_consecutive, "nnU-Net's are consecutive from 0"),
    "transposes that disagree": (_transposes_disagree, "transpose_backward [2, 0, 1] does not undo "
                                                       "transpose_forward [2, 0, 1]"),
    "broken JSON": (_broken_json, "dataset.json: invalid JSON at line 1"),
    "a checkpoint linked from outside": (_checkpoint_outside, "checkpoint_final.pth: "),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_folder_is_one_line_and_nothing_is_written(tmp_path, capsys, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    folder, _ = make_folder(tmp_path / "results")
    change, expected = MALFORMED[case]
    extra = change(folder)
    out = tmp_path / "out"
    out.mkdir()
    code = main(["import", "nnunet", str(folder), "--out", str(out / "model.onnx"), *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and expected in err, err
    assert list(out.iterdir()) == []
    assert not (tmp_path / "SEGLENS_PWNED").exists()


def test_a_cascade_stage_is_refused_in_one_line(tmp_path, capsys):
    folder, _ = make_folder(tmp_path)
    document = json.loads((folder / "plans.json").read_text())
    document["configurations"]["3d_fullres"]["previous_stage"] = "3d_lowres"
    (folder / "plans.json").write_text(json.dumps(document))
    assert main(["import", "nnunet", str(folder), "--out", str(tmp_path / "m.onnx")]) == 2
    assert "a cascade's second stage" in capsys.readouterr().err
    assert not (tmp_path / "m.onnx").exists()
