"""The nnU-Net v2 reference fixtures (tests/data/nnunet): tiny nnU-Net models trained here by nnU-Net itself, and
its own predictions on held-out volumes, so SegLens's import of an nnU-Net folder is compared with the real thing.

Two synthetic datasets, written in nnU-Net's raw layout (`imagesTr/<case>_<channel>.nii.gz`, `labelsTr`,
`dataset.json`):

- Dataset901_CTPhantom: CT-like phantoms in HU (air -1000 outside an elliptic body of ~40 HU, a contrast-enhanced
  liver-like blob of ~115 HU, a spine-like bone cylinder of ~700 HU, noise), about 24 x 64 x 64 voxels at an
  anisotropic spacing of about 3.0 x 0.8 x 0.8 mm that differs per case (so nnU-Net resamples, with its separate
  thick axis); one channel "CT" (CT normalisation from the fingerprint); labels background, liver, bone.
- Dataset902_MRTwo: two channels "T1" and "T2" (each z-scored on the non-zero mask: the head sits inside zero
  background); label 1 ("enhancing") is bright in both, label 2 ("edema") bright in T2 only and label 0 includes
  blobs bright in T1 only, so no single channel decides.

Then nnU-Net's own steps, through its Python API: fingerprint, plan (ExperimentPlanner), a copy of the plans named
`nnUNetPlansTiny` whose networks are narrowed (features per stage 4, 8, 16, 16, ... and smaller batches; the planner's
patch sizes, strides, kernels and spacings are kept), preprocessing with those plans, and training
`nnUNetTrainer_1epoch` (nnU-Net's own short variant: one epoch of 250 iterations) on the CPU, folds 0 and 1, for
3d_fullres and 2d. The result folders are copied with only what nnUNetPredictor reads (plans.json, dataset.json,
dataset_fingerprint.json, fold_*/checkpoint_final.pth).

Held-out volumes (other sizes and spacings) and nnUNetPredictor's segmentations of them are written beside them:
every configuration, fold 0 alone and folds (0, 1), with and without mirroring. For the torch-free network test,
one preprocessed input patch per configuration and the network's logits (PyTorch, eval, no deep supervision) are
stored as .npy.

Needs nnunetv2 (2.8.1) and torch (the CPU build) — not SegLens's environment; the recipe is in
tests/data/nnunet/README.md:

    python models/training/nnunet_fixtures.py --work /tmp/nnunet_work [--out tests/data/nnunet] [--datasets 901 902]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
TRAINER = "nnUNetTrainer_1epoch"
PLANS = "nnUNetPlansTiny"
CONFIGURATIONS = ("3d_fullres", "2d")
FOLDS = (0, 1)
FEATURES = (4, 8, 16)  # per stage, the last repeated
BATCH = {"3d_fullres": 2, "2d": 8}
KEEP = ("plans.json", "dataset.json", "dataset_fingerprint.json")
TIMES: dict[str, float] = {}


# ------------------------------------------------------------------------------------------------ the phantoms
def _grid(shape: tuple[int, int, int], spacing: tuple[float, float, float]) -> tuple[np.ndarray, ...]:
    """Voxel-centre coordinates in mm, centred on the volume: (z, y, x) arrays of `shape`."""
    axes = [(np.arange(n) - (n - 1) / 2) * s for n, s in zip(shape, spacing, strict=True)]
    return tuple(np.meshgrid(*axes, indexing="ij"))


def _ellipsoid(z: np.ndarray, y: np.ndarray, x: np.ndarray, centre: np.ndarray, radii: np.ndarray) -> np.ndarray:
    return (((z - centre[0]) / radii[0]) ** 2 + ((y - centre[1]) / radii[1]) ** 2
            + ((x - centre[2]) / radii[2]) ** 2) <= 1.0


def ct_case(rng: np.random.Generator, shape: tuple[int, int, int],
            spacing: tuple[float, float, float]) -> tuple[np.ndarray, np.ndarray]:
    """A CT-like phantom (HU, float32) and its labels (0 background, 1 liver, 2 bone), arrays [z, y, x]."""
    z, y, x = _grid(shape, spacing)
    body = ((y / rng.uniform(14, 17)) ** 2 + (x / rng.uniform(19, 22)) ** 2) <= 1.0
    liver = body & _ellipsoid(z, y, x, np.array([rng.uniform(-6, 6), rng.uniform(-4, 0), rng.uniform(3, 8)]),
                              np.array([rng.uniform(18, 26), rng.uniform(5, 7), rng.uniform(7, 10)]))
    spine = body & (((y - rng.uniform(8, 10)) ** 2 + (x - rng.uniform(-1.5, 1.5)) ** 2) <= rng.uniform(3, 4.5) ** 2)
    image = np.full(shape, -1000.0)
    image[body] = rng.uniform(30, 50)
    image[liver] = rng.uniform(100, 130)  # contrast-enhanced (portal venous phase)
    image[spine] = rng.uniform(600, 800)
    image += rng.normal(0, 15, shape)
    labels = np.zeros(shape, np.uint8)
    labels[liver] = 1
    labels[spine] = 2
    return image.astype(np.float32), labels


def mr_case(rng: np.random.Generator, shape: tuple[int, int, int],
            spacing: tuple[float, float, float]) -> tuple[list[np.ndarray], np.ndarray]:
    """A two-channel MR-like phantom ([T1, T2], float32, zero outside the head) and its labels (0 background,
    1 enhancing: bright in T1 and T2, 2 edema: bright in T2 only; a blob bright in T1 only is background)."""
    z, y, x = _grid(shape, spacing)
    extent = np.array(shape) * np.array(spacing) / 2
    head = _ellipsoid(z, y, x, np.zeros(3), extent * rng.uniform(0.6, 0.7, 3))
    t1 = np.where(head, rng.uniform(90, 110), 0.0)
    t2 = np.where(head, rng.uniform(40, 60), 0.0)
    labels = np.zeros(shape, np.uint8)
    for bright_t1, bright_t2, label in ((True, True, 1), (False, True, 2), (True, False, 0)):
        centre = rng.uniform(-0.25, 0.25, 3) * extent
        blob = head & _ellipsoid(z, y, x, centre, extent * rng.uniform(0.22, 0.3, 3))
        t1[blob] = 180 if bright_t1 else 100
        t2[blob] = 150 if bright_t2 else 50
        labels[blob] = label
    t1[head] += rng.normal(0, 6, int(head.sum()))
    t2[head] += rng.normal(0, 6, int(head.sum()))
    return [t1.astype(np.float32), t2.astype(np.float32)], labels


DATASETS = {
    901: {"name": "Dataset901_CTPhantom", "channels": {"0": "CT"},
          "labels": {"background": 0, "liver": 1, "bone": 2}, "make": ct_case,
          "shape": (24, 64, 64), "spacing": (3.0, 0.8, 0.8),
          "held_out": (((20, 72, 60), (3.6, 0.7, 0.9)), ((30, 56, 70), (2.5, 0.85, 0.75)),
                       ((24, 64, 64), (3.0, 0.8, 0.8)))},
    902: {"name": "Dataset902_MRTwo", "channels": {"0": "T1", "1": "T2"},
          "labels": {"background": 0, "enhancing": 1, "edema": 2}, "make": mr_case,
          "shape": (32, 48, 48), "spacing": (1.5, 1.0, 1.0),
          "held_out": (((28, 52, 44), (1.7, 0.9, 1.1)), ((36, 44, 50), (1.3, 1.1, 0.95)))},
}
N_TRAIN = 8


def _write_nifti(array: np.ndarray, spacing: tuple[float, float, float], path: Path) -> None:
    """`array` [z, y, x] with `spacing` (z, y, x) mm as NIfTI (SimpleITK: spacing in x, y, z order)."""
    import SimpleITK as sitk

    image = sitk.GetImageFromArray(array)
    image.SetSpacing(tuple(float(s) for s in spacing[::-1]))
    sitk.WriteImage(image, str(path), useCompression=True)


def _channels(image: np.ndarray | list[np.ndarray]) -> list[np.ndarray]:
    return image if isinstance(image, list) else [image]


def write_raw(dataset_id: int, raw: Path, held_out: Path) -> None:
    """The raw dataset (training cases with jittered shapes and spacings) and its held-out volumes."""
    spec = DATASETS[dataset_id]
    root = raw / spec["name"]
    for sub in ("imagesTr", "labelsTr"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    held_out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(dataset_id)
    for case in range(N_TRAIN):
        shape = tuple(int(n + rng.integers(-2, 3) * (2 if n > 30 else 1)) for n in spec["shape"])
        spacing = tuple(float(s * rng.uniform(0.93, 1.07)) for s in spec["spacing"])
        image, labels = spec["make"](rng, shape, spacing)
        for channel, array in enumerate(_channels(image)):
            _write_nifti(array, spacing, root / "imagesTr" / f"case_{case:03d}_{channel:04d}.nii.gz")
        _write_nifti(labels, spacing, root / "labelsTr" / f"case_{case:03d}.nii.gz")
    for index, (shape, spacing) in enumerate(spec["held_out"]):
        image, labels = spec["make"](np.random.default_rng(1000 * dataset_id + index), shape, spacing)
        for channel, array in enumerate(_channels(image)):
            _write_nifti(array, spacing, held_out / f"heldout_{index:03d}_{channel:04d}.nii.gz")
        _write_nifti(labels, spacing, held_out / f"heldout_{index:03d}_truth.nii.gz")
    dataset = {"channel_names": spec["channels"], "labels": spec["labels"], "numTraining": N_TRAIN,
               "file_ending": ".nii.gz", "name": spec["name"],
               "description": "SegLens synthetic fixture (models/training/nnunet_fixtures.py)"}
    (root / "dataset.json").write_text(json.dumps(dataset, indent=2))


# ------------------------------------------------------------------------------------------------ nnU-Net's steps
def plan(dataset_id: int, preprocessed: Path) -> None:
    """Fingerprint and plan with nnU-Net's own ExperimentPlanner, then the narrowed copy `nnUNetPlansTiny`."""
    from nnunetv2.experiment_planning.plan_and_preprocess_api import extract_fingerprints, plan_experiments

    extract_fingerprints([dataset_id], num_processes=2, check_dataset_integrity=True, clean=True)
    plan_experiments([dataset_id])
    folder = preprocessed / DATASETS[dataset_id]["name"]
    plans = json.loads((folder / "nnUNetPlans.json").read_text())
    plans["plans_name"] = PLANS
    for name, configuration in plans["configurations"].items():
        kwargs = configuration.get("architecture", {}).get("arch_kwargs")
        if kwargs is None:
            continue
        stages = kwargs["n_stages"]
        kwargs["features_per_stage"] = [FEATURES[min(i, len(FEATURES) - 1)] for i in range(stages)]
        configuration["batch_size"] = min(configuration["batch_size"], BATCH.get(name, 2))
        configuration["data_identifier"] = f"{PLANS}_{name}"
    (folder / f"{PLANS}.json").write_text(json.dumps(plans, indent=4))


def preprocess(dataset_id: int) -> None:
    from nnunetv2.experiment_planning.plan_and_preprocess_api import preprocess as nn_preprocess

    nn_preprocess([dataset_id], plans_identifier=PLANS, configurations=CONFIGURATIONS, num_processes=(2, 2))


def train(dataset_id: int, configuration: str, fold: int) -> None:
    import torch
    from nnunetv2.run.run_training import run_training

    run_training(str(dataset_id), configuration, fold, trainer_class_name=TRAINER, plans_identifier=PLANS,
                 device=torch.device("cpu"))


def result_name(configuration: str) -> str:
    return f"{TRAINER}__{PLANS}__{configuration}"


def copy_result(dataset_id: int, configuration: str, results: Path, out: Path) -> Path:
    """The trained folder with only what nnUNetPredictor reads."""
    source = results / DATASETS[dataset_id]["name"] / result_name(configuration)
    target = out / DATASETS[dataset_id]["name"] / result_name(configuration)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name in KEEP:
        shutil.copy2(source / name, target / name)
    for fold in FOLDS:
        (target / f"fold_{fold}").mkdir()
        shutil.copy2(source / f"fold_{fold}" / "checkpoint_final.pth", target / f"fold_{fold}" / "checkpoint_final.pth")
    return target


def predict(folder: Path, held_out: Path, out: Path, dataset_id: int) -> None:
    """nnUNetPredictor's segmentations of the held-out volumes: fold 0 and folds (0, 1), mirroring on and off."""
    import torch
    from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor

    channels = len(DATASETS[dataset_id]["channels"])
    cases = sorted({p.name.rsplit("_", 1)[0] for p in held_out.glob("heldout_*_0000.nii.gz")})
    inputs = [[str(held_out / f"{case}_{c:04d}.nii.gz") for c in range(channels)] for case in cases]
    for folds in ((0,), FOLDS):
        for mirroring in (True, False):
            predictor = nnUNetPredictor(tile_step_size=0.5, use_gaussian=True, use_mirroring=mirroring,
                                        perform_everything_on_device=False, device=torch.device("cpu"),
                                        allow_tqdm=False)
            predictor.initialize_from_trained_model_folder(str(folder), use_folds=folds,
                                                           checkpoint_name="checkpoint_final.pth")
            tag = f"folds{''.join(map(str, folds))}_{'mirror' if mirroring else 'nomirror'}"
            target = out / tag
            target.mkdir(parents=True, exist_ok=True)
            predictor.predict_from_files_sequential(inputs, [str(target / case) for case in cases],
                                                    save_probabilities=False, overwrite=True)
            for extra in ("dataset.json", "plans.json", "predict_from_raw_data_args.json"):
                (target / extra).unlink(missing_ok=True)


def network_patch(folder: Path, held_out: Path, out: Path, dataset_id: int, configuration: str) -> None:
    """One preprocessed input patch (the first held-out volume, nnU-Net's own preprocessing) and fold 0's logits
    on it (the network nnU-Net builds, eval, deep supervision off), as .npy."""
    import torch
    from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor

    predictor = nnUNetPredictor(use_mirroring=False, perform_everything_on_device=False, device=torch.device("cpu"),
                                allow_tqdm=False)
    predictor.initialize_from_trained_model_folder(str(folder), use_folds=(0,), checkpoint_name="checkpoint_final.pth")
    channels = len(DATASETS[dataset_id]["channels"])
    files = [str(held_out / f"heldout_000_{c:04d}.nii.gz") for c in range(channels)]
    preprocessor = predictor.configuration_manager.preprocessor_class(verbose=False)
    data, _, _ = preprocessor.run_case(files, None, predictor.plans_manager, predictor.configuration_manager,
                                       predictor.dataset_json)
    arch = predictor.configuration_manager.network_arch_init_kwargs
    multiple = [int(np.prod([s[a] for s in arch["strides"]])) for a in range(len(arch["strides"][0]))]
    want = [8, 32, 32] if configuration != "2d" else [32, 32]
    size = [m * max(1, -(-w // m)) for m, w in zip(multiple, want, strict=True)]
    if configuration == "2d":
        data = data[:, data.shape[1] // 2]
    patch = np.zeros((data.shape[0], *size), np.float32)
    region = tuple(slice(0, min(a, b)) for a, b in zip(size, data.shape[1:], strict=True))
    patch[(slice(None), *region)] = data[(slice(None), *region)]
    network = predictor.network
    network.load_state_dict(predictor.list_of_parameters[0])
    network.eval()
    with torch.no_grad():
        logits = network(torch.from_numpy(patch[None])).numpy()
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / f"{configuration}_input.npy", patch[None])
    np.save(out / f"{configuration}_logits.npy", logits.astype(np.float32))


# ------------------------------------------------------------------------------------------------ the run
def timed(label: str, step, *args) -> None:
    start = time.perf_counter()
    step(*args)
    TIMES[label] = round(time.perf_counter() - start, 1)
    print(f"[nnunet_fixtures] {label}: {TIMES[label]} s", flush=True)


def run(work: Path, out: Path, datasets: list[int], configurations: list[str]) -> None:
    for dataset_id in datasets:
        name = DATASETS[dataset_id]["name"]
        held_out = out / name / "heldout"
        timed(f"{name} raw", write_raw, dataset_id, work / "raw", held_out)
        timed(f"{name} plan", plan, dataset_id, work / "preprocessed")
        timed(f"{name} preprocess", preprocess, dataset_id)
        for configuration in configurations:
            for fold in FOLDS:
                timed(f"{name} train {configuration} fold {fold}", train, dataset_id, configuration, fold)
            folder = copy_result(dataset_id, configuration, work / "results", out)
            timed(f"{name} predict {configuration}", predict, folder, held_out,
                  out / name / "predictions" / configuration, dataset_id)
            timed(f"{name} network {configuration}", network_patch, folder, held_out, out / name / "network",
                  dataset_id, configuration)
        timings = out / "timings.json"
        known = json.loads(timings.read_text()) if timings.exists() else {}
        timings.write_text(json.dumps({**known, **TIMES}, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True,
                        help="scratch folder for nnU-Net's raw/preprocessed/results")
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "data" / "nnunet")
    parser.add_argument("--datasets", type=int, nargs="+", default=sorted(DATASETS))
    parser.add_argument("--configurations", nargs="+", default=list(CONFIGURATIONS))
    args = parser.parse_args()
    folders = (("nnUNet_raw", "raw"), ("nnUNet_preprocessed", "preprocessed"), ("nnUNet_results", "results"))
    for variable, sub in folders:
        os.environ[variable] = str(args.work / sub)
        (args.work / sub).mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("nnUNet_n_proc_DA", "1")
    os.environ.setdefault("nnUNet_compile", "false")
    sys.setrecursionlimit(10000)
    run(args.work, args.out, args.datasets, args.configurations)


if __name__ == "__main__":
    main()
