"""The committed nnU-Net v2 reference fixtures (tests/data/nnunet, made by models/training/nnunet_fixtures.py with
nnU-Net's own planner, trainer and predictor) are complete and small, and SegLens's torch-free reading of them
computes what nnU-Net's network computed: each trained folder's fold-0 checkpoint, read by app.io.checkpoint and
emitted by app.runs.imports.nnunet.network, run with onnxruntime on the stored preprocessed patch, equals the logits
PyTorch gave on it when the fixtures were made.

Needs neither torch nor nnunetv2.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from app.io.checkpoint import network_weights, read_checkpoint
from app.runs.imports.nnunet.network import network_graph

FIXTURES = Path(__file__).resolve().parents[2] / "data" / "nnunet"
FOLDER_LIMIT = 5 << 20
FOLDS = (0, 1)
TRAINED = sorted(FIXTURES.glob("Dataset*/*__*__*"))


def configuration(folder: Path) -> str:
    return folder.name.rsplit("__", 1)[1]


def folder_size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def test_both_datasets_and_both_configurations_are_there():
    names = {(folder.parent.name, configuration(folder)) for folder in TRAINED}
    assert names >= {("Dataset901_CTPhantom", "3d_fullres"), ("Dataset901_CTPhantom", "2d")}
    assert {dataset for dataset, _ in names} >= {"Dataset901_CTPhantom"}


@pytest.mark.parametrize("folder", TRAINED, ids=lambda f: f"{f.parent.name}-{f.name}")
def test_a_trained_folder_holds_what_the_predictor_reads(folder):
    plans = json.loads((folder / "plans.json").read_text())
    dataset = json.loads((folder / "dataset.json").read_text())
    fingerprint = json.loads((folder / "dataset_fingerprint.json").read_text())
    config = plans["configurations"][configuration(folder)]
    assert config["architecture"]["network_class_name"].endswith(".PlainConvUNet")
    assert plans["plans_name"] == folder.name.split("__")[1]
    assert len(config["normalization_schemes"]) == len(dataset["channel_names"])
    assert len(fingerprint["spacings"]) == dataset["numTraining"]
    for fold in FOLDS:
        assert (folder / f"fold_{fold}" / "checkpoint_final.pth").is_file()
    assert folder_size(folder) <= FOLDER_LIMIT


def test_the_ct_set_is_resampled_on_its_thick_axis():
    plans = json.loads((FIXTURES / "Dataset901_CTPhantom" / "nnUNetTrainer_1epoch__nnUNetPlansTiny__3d_fullres"
                        / "plans.json").read_text())
    fingerprint = json.loads((FIXTURES / "Dataset901_CTPhantom" / "nnUNetTrainer_1epoch__nnUNetPlansTiny__3d_fullres"
                              / "dataset_fingerprint.json").read_text())
    spacing = plans["configurations"]["3d_fullres"]["spacing"]
    assert spacing[0] / spacing[2] > 3  # anisotropic: nnU-Net's separate-z resampling applies
    assert len({tuple(s) for s in fingerprint["spacings"]}) == len(fingerprint["spacings"])  # every case differs
    assert plans["configurations"]["3d_fullres"]["normalization_schemes"] == ["CTNormalization"]


def test_every_trained_folder_has_its_predictions():
    for folder in TRAINED:
        cases = sorted((folder.parent / "heldout").glob("heldout_*_0000.nii.gz"))
        assert cases
        for tag in ("folds0_mirror", "folds0_nomirror", "folds01_mirror", "folds01_nomirror"):
            predictions = folder.parent / "predictions" / configuration(folder) / tag
            assert len(list(predictions.glob("heldout_*.nii.gz"))) == len(cases), predictions


@pytest.mark.parametrize("folder", TRAINED, ids=lambda f: f"{f.parent.name}-{f.name}")
def test_the_checkpoint_read_without_torch_computes_nnunets_logits(folder):
    config = configuration(folder)
    plans = json.loads((folder / "plans.json").read_text())
    dataset = json.loads((folder / "dataset.json").read_text())
    weights = network_weights(read_checkpoint(folder / "fold_0" / "checkpoint_final.pth"))
    model = network_graph(plans["configurations"][config]["architecture"], weights,
                          in_channels=len(dataset["channel_names"]), num_classes=len(dataset["labels"]),
                          dims=2 if config == "2d" else 3)
    patch = np.load(folder.parent / "network" / f"{config}_input.npy")
    reference = np.load(folder.parent / "network" / f"{config}_logits.npy")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (ours,) = session.run(None, {"input": patch})
    assert ours.shape == reference.shape
    assert np.abs(ours - reference).max() <= 1e-4 * max(1.0, float(np.abs(reference).max()))
    assert len(np.unique(reference.argmax(1))) > 1  # the trained network tells classes apart on this patch
