"""The TotalSegmentator-layout reference fixture (tests/data/nnunet/totalseg): TotalSegmentator's `total` task in
miniature — five nnU-Net v2 part-models trained here by nnU-Net itself, in the folders TotalSegmentator downloads
(`Dataset291_TotalSegmentator_part1_organs_1559subj/nnUNetTrainerNoMirroring__<plans>__3d_fullres/fold_0/…` …
`Dataset295_TotalSegmentator_part5_ribs_1559subj/…`), and nnUNetPredictor's segmentation of held-out volumes by
each part, so SegLens's import of the whole task is compared with what TotalSegmentator's CLI would paint.

The phantoms are CT-like torsos at about 1.5 mm (TotalSegmentator's resolution), in HU: air -1000, fat around
-100, a spleen-like and a liver-like organ, a heart-like contrast-filled blob, the paraspinal muscles either side of
a spine-like bone, a sternum-like plate, noise. Every part-model sees the same images; each learns its own
TotalSegmentator classes (dataset.json labels are TotalSegmentator's names, as its own conversion script writes
them: background first, then the part's classes in class_map_5_parts order):

    291 organs     spleen, liver            292 vertebrae  vertebrae_L1        293 cardiac  heart
    294 muscles    autochthon_left, autochthon_right                           295 ribs     sternum

Each part has its own fingerprint (CTNormalization's statistics come from its own foreground, so they differ per
part) and its own plans (the same images give the same patch and spacing). nnU-Net's steps as in
nnunet_fixtures.py, with TotalSegmentator's trainer `nnUNetTrainerNoMirroring` (no mirroring in training or
inference) run for one epoch or `--epochs` (`num_epochs` set on the trainer, as nnUNetTrainer_1epoch sets it; the
committed parts' epochs are in tests/data/nnunet/totalseg/README.md), fold 0 only
(TotalSegmentator's folds [0]), plans narrowed to features 4, 8, 8, … (`nnUNetPlansTiny`). nnUNetPredictor runs
with TotalSegmentator's settings for the `total` task: tile_step_size 0.8, Gaussian, no mirroring.

Needs nnunetv2 (2.8.1) and torch (CPU), as nnunet_fixtures.py (tests/data/nnunet/README.md has the venv recipe):

    python models/training/totalseg_fixtures.py --work /tmp/totalseg_work [--out tests/data/nnunet/totalseg]
        [--parts 291 293] [--epochs 3]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nnunet_fixtures import _ellipsoid, _grid, _write_nifti  # the sibling recipe's helpers

REPO = Path(__file__).resolve().parents[2]
TRAINER = "nnUNetTrainerNoMirroring"
PLANS = "nnUNetPlansTiny"
CONFIGURATION = "3d_fullres"
FOLD = 0
FEATURES = (4, 8, 8)  # per stage, the last repeated: checkpoints of ~0.2 MB
BATCH = 2
STEP = 0.8  # TotalSegmentator's tile_step_size for its total tasks (nnunet.py: step_size 0.8)
KEEP = ("plans.json", "dataset.json", "dataset_fingerprint.json")
PARTS = {  # dataset id: (TotalSegmentator's folder name, the part's classes in class_map_5_parts order)
    291: ("Dataset291_TotalSegmentator_part1_organs_1559subj", ("spleen", "liver")),
    292: ("Dataset292_TotalSegmentator_part2_vertebrae_1532subj", ("vertebrae_L1",)),
    293: ("Dataset293_TotalSegmentator_part3_cardiac_1559subj", ("heart",)),
    294: ("Dataset294_TotalSegmentator_part4_muscles_1559subj", ("autochthon_left", "autochthon_right")),
    295: ("Dataset295_TotalSegmentator_part5_ribs_1559subj", ("sternum",)),
}
SHAPE, SPACING = (40, 56, 56), (1.5, 1.5, 1.5)
HELD_OUT = (((36, 60, 52), (1.7, 1.4, 1.6)), ((44, 52, 60), (1.35, 1.6, 1.45)))
N_TRAIN = 8
TIMES: dict[str, float] = {}


# ------------------------------------------------------------------------------------------------ the phantoms
def torso(rng: np.random.Generator, shape: tuple[int, int, int],
          spacing: tuple[float, float, float]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """A CT-like torso (HU, float32, [z, y, x]; y grows to the back, x to the patient's left) and each class's
    mask by TotalSegmentator name."""
    z, y, x = _grid(shape, spacing)
    body = ((y / rng.uniform(30, 34)) ** 2 + (x / rng.uniform(36, 40)) ** 2) <= 1.0
    spine_y, spine_x = rng.uniform(16, 19), rng.uniform(-1.5, 1.5)
    masks = {
        "liver": _ellipsoid(z, y, x, np.array([rng.uniform(-14, -8), rng.uniform(-4, 2), rng.uniform(-22, -16)]),
                            np.array([rng.uniform(14, 18), rng.uniform(12, 15), rng.uniform(11, 14)])),
        "spleen": _ellipsoid(z, y, x, np.array([rng.uniform(-12, -6), rng.uniform(4, 8), rng.uniform(19, 23)]),
                             np.array([rng.uniform(9, 12), rng.uniform(6, 8), rng.uniform(5, 7)])),
        "heart": _ellipsoid(z, y, x, np.array([rng.uniform(14, 20), rng.uniform(-10, -6), rng.uniform(2, 7)]),
                            np.array([rng.uniform(10, 13), rng.uniform(9, 11), rng.uniform(10, 13)])),
        "vertebrae_L1": ((y - spine_y) ** 2 + (x - spine_x) ** 2) <= rng.uniform(5, 6.5) ** 2,
        "sternum": (np.abs(x) <= rng.uniform(5, 7)) & (np.abs(y + rng.uniform(24, 26)) <= 2.5) & (z > -10),
    }
    for side, sign in (("left", 1.0), ("right", -1.0)):
        masks[f"autochthon_{side}"] = _ellipsoid(
            z, y, x, np.array([0.0, spine_y + rng.uniform(1, 3), spine_x + sign * rng.uniform(11, 13)]),
            np.array([60.0, rng.uniform(6, 8), rng.uniform(4.5, 6)]))
    masks = {name: mask & body for name, mask in masks.items()}
    for side in ("left", "right"):  # the organs lie in front of the muscles
        masks[f"autochthon_{side}"] &= ~masks["liver"] & ~masks["spleen"]
    image = np.full(shape, -1000.0)
    image[body] = rng.uniform(-110, -90)  # fat
    for name, low, high in (("autochthon_left", 45, 60), ("autochthon_right", 45, 60), ("liver", 100, 130),
                            ("spleen", 75, 95), ("heart", 220, 280), ("vertebrae_L1", 600, 800),
                            ("sternum", 450, 550)):
        image[masks[name]] = rng.uniform(low, high)
    image += rng.normal(0, 15, shape)
    return image.astype(np.float32), masks


def part_labels(masks: dict[str, np.ndarray], classes: tuple[str, ...]) -> np.ndarray:
    labels = np.zeros(next(iter(masks.values())).shape, np.uint8)
    for value, name in enumerate(classes, start=1):
        labels[masks[name]] = value
    return labels


def write_raw(raw: Path, held_out: Path) -> None:
    """Every part's raw dataset (the same torsos, the part's labels) and the held-out torsos (+ their truth per
    part, by TotalSegmentator name)."""
    rng = np.random.default_rng(291)
    cases = []
    for _ in range(N_TRAIN):
        shape = tuple(int(n + rng.integers(-2, 3) * 2) for n in SHAPE)
        spacing = tuple(float(s * rng.uniform(0.93, 1.07)) for s in SPACING)
        cases.append((spacing, *torso(rng, shape, spacing)))
    for name, classes in PARTS.values():
        root = raw / name
        for sub in ("imagesTr", "labelsTr"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        for case, (spacing, image, masks) in enumerate(cases):
            _write_nifti(image, spacing, root / "imagesTr" / f"case_{case:03d}_0000.nii.gz")
            _write_nifti(part_labels(masks, classes), spacing, root / "labelsTr" / f"case_{case:03d}.nii.gz")
        labels = {"background": 0, **{c: i for i, c in enumerate(classes, start=1)}}
        dataset = {"channel_names": {"0": "CT"}, "labels": labels, "numTraining": N_TRAIN, "file_ending": ".nii.gz",
                   "name": name, "description": "SegLens synthetic fixture (models/training/totalseg_fixtures.py)"}
        (root / "dataset.json").write_text(json.dumps(dataset, indent=4))
    held_out.mkdir(parents=True, exist_ok=True)
    for index, (shape, spacing) in enumerate(HELD_OUT):
        image, masks = torso(np.random.default_rng(29100 + index), shape, spacing)
        _write_nifti(image, spacing, held_out / f"heldout_{index:03d}_0000.nii.gz")
        every = tuple(name for _, classes in PARTS.values() for name in classes)
        _write_nifti(part_labels(masks, every), spacing, held_out / f"heldout_{index:03d}_truth.nii.gz")
    (held_out / "truth_classes.json").write_text(json.dumps(["background", *every]) + "\n")


# ------------------------------------------------------------------------------------------------ nnU-Net's steps
def plan(dataset_id: int, preprocessed: Path) -> None:
    """Fingerprint and plan with nnU-Net's own ExperimentPlanner, then the narrowed copy `nnUNetPlansTiny`."""
    from nnunetv2.experiment_planning.plan_and_preprocess_api import extract_fingerprints, plan_experiments

    extract_fingerprints([dataset_id], num_processes=2, check_dataset_integrity=True, clean=True)
    plan_experiments([dataset_id])
    folder = preprocessed / PARTS[dataset_id][0]
    plans = json.loads((folder / "nnUNetPlans.json").read_text())
    plans["plans_name"] = PLANS
    for name, configuration in plans["configurations"].items():
        kwargs = configuration.get("architecture", {}).get("arch_kwargs")
        if kwargs is None:
            continue
        kwargs["features_per_stage"] = [FEATURES[min(i, len(FEATURES) - 1)] for i in range(kwargs["n_stages"])]
        configuration["batch_size"] = min(configuration["batch_size"], BATCH)
        configuration["data_identifier"] = f"{PLANS}_{name}"
    (folder / f"{PLANS}.json").write_text(json.dumps(plans, indent=4))


def preprocess(dataset_id: int) -> None:
    from nnunetv2.experiment_planning.plan_and_preprocess_api import preprocess as nn_preprocess

    nn_preprocess([dataset_id], plans_identifier=PLANS, configurations=(CONFIGURATION,), num_processes=(2,))


def train(dataset_id: int, epochs: int) -> None:
    """TotalSegmentator's trainer, nnUNetTrainerNoMirroring, for `epochs` epochs of 250 iterations (run_training's
    steps, the epoch count set on the trainer before it runs; the final validation left out: not needed here)."""
    import torch
    from nnunetv2.run.run_training import get_trainer_from_args, maybe_load_checkpoint

    trainer = get_trainer_from_args(str(dataset_id), CONFIGURATION, FOLD, TRAINER, PLANS, device=torch.device("cpu"))
    trainer.num_epochs = epochs
    maybe_load_checkpoint(trainer, False, False, None)
    trainer.run_training()


def result_name() -> str:
    return f"{TRAINER}__{PLANS}__{CONFIGURATION}"


def copy_result(dataset_id: int, results: Path, out: Path) -> Path:
    """The trained folder with only what nnUNetPredictor reads."""
    source = results / PARTS[dataset_id][0] / result_name()
    target = out / PARTS[dataset_id][0] / result_name()
    if target.exists():
        shutil.rmtree(target)
    (target / f"fold_{FOLD}").mkdir(parents=True)
    for name in KEEP:
        shutil.copy2(source / name, target / name)
    shutil.copy2(source / f"fold_{FOLD}" / "checkpoint_final.pth", target / f"fold_{FOLD}" / "checkpoint_final.pth")
    return target


def _predictor(folder: Path):  # nnunetv2's nnUNetPredictor (not imported at module level)
    import torch
    from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor

    predictor = nnUNetPredictor(tile_step_size=STEP, use_gaussian=True, use_mirroring=False,
                                perform_everything_on_device=False, device=torch.device("cpu"), allow_tqdm=False)
    predictor.initialize_from_trained_model_folder(str(folder), use_folds=(FOLD,),
                                                   checkpoint_name="checkpoint_final.pth")
    return predictor


def predict(folder: Path, held_out: Path, out: Path) -> None:
    """nnUNetPredictor's segmentation of every held-out volume by this part (TotalSegmentator's settings)."""
    cases = sorted(p.name.removesuffix("_0000.nii.gz") for p in held_out.glob("heldout_*_0000.nii.gz"))
    out.mkdir(parents=True, exist_ok=True)
    _predictor(folder).predict_from_files_sequential(
        [[str(held_out / f"{case}_0000.nii.gz")] for case in cases], [str(out / case) for case in cases],
        save_probabilities=False, overwrite=True)
    for extra in ("dataset.json", "plans.json", "predict_from_raw_data_args.json"):
        (out / extra).unlink(missing_ok=True)


def network_patch(folder: Path, held_out: Path, out: Path, dataset_id: int) -> None:
    """A patch of the first held-out volume preprocessed by this part (its own CT normalisation) and the part's
    network's logits on it (torch, eval, deep supervision off), as .npy: a patch at the
    volume's centre: twice the strides' multiple (the deepest stage then keeps 2 voxels a side; InstanceNorm
    needs more than one)"""
    import torch

    predictor = _predictor(folder)
    preprocessor = predictor.configuration_manager.preprocessor_class(verbose=False)
    data, _, _ = preprocessor.run_case([str(held_out / "heldout_000_0000.nii.gz")], None, predictor.plans_manager,
                                       predictor.configuration_manager, predictor.dataset_json)
    strides = predictor.configuration_manager.network_arch_init_kwargs["strides"]
    size = [2 * int(np.prod([s[a] for s in strides])) for a in range(3)]
    start = [max(0, (n - s) // 2) for n, s in zip(data.shape[1:], size, strict=True)]
    patch = np.zeros((1, *size), np.float32)
    region = tuple(slice(b, b + min(s, n - b)) for b, s, n in zip(start, size, data.shape[1:], strict=True))
    patch[(slice(None), *(slice(0, r.stop - r.start) for r in region))] = data[(slice(0, 1), *region)]
    network = predictor.network
    network.load_state_dict(predictor.list_of_parameters[0])
    network.eval()
    with torch.no_grad():
        logits = network(torch.from_numpy(patch[None])).numpy()
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / f"{dataset_id}_input.npy", patch[None])
    np.save(out / f"{dataset_id}_logits.npy", logits.astype(np.float32))


# ------------------------------------------------------------------------------------------------ the run
def timed(label: str, step, *args) -> None:
    start = time.perf_counter()
    step(*args)
    TIMES[label] = round(time.perf_counter() - start, 1)
    print(f"[totalseg_fixtures] {label}: {TIMES[label]} s", flush=True)


def run(work: Path, out: Path, parts: list[int], epochs: int) -> None:
    held_out = out / "heldout"
    timed("raw", write_raw, work / "raw", held_out)
    for dataset_id in parts:
        timed(f"{dataset_id} plan", plan, dataset_id, work / "preprocessed")
        timed(f"{dataset_id} preprocess", preprocess, dataset_id)
        timed(f"{dataset_id} train ({epochs} epochs)", train, dataset_id, epochs)
        folder = copy_result(dataset_id, work / "results", out / "results")
        timed(f"{dataset_id} predict", predict, folder, held_out, out / "predictions" / str(dataset_id))
        timed(f"{dataset_id} network", network_patch, folder, held_out, out / "network", dataset_id)
        timings = out / "timings.json"
        known = json.loads(timings.read_text()) if timings.exists() else {}
        timings.write_text(json.dumps({**known, **TIMES}, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True,
                        help="scratch folder for nnU-Net's raw/preprocessed/results")
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "data" / "nnunet" / "totalseg")
    parser.add_argument("--parts", type=int, nargs="+", default=sorted(PARTS))
    parser.add_argument("--epochs", type=int, default=1, help="epochs of 250 iterations (default 1)")
    args = parser.parse_args()
    for variable, sub in (("nnUNet_raw", "raw"), ("nnUNet_preprocessed", "preprocessed"),
                          ("nnUNet_results", "results")):
        os.environ[variable] = str(args.work / sub)
        (args.work / sub).mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("nnUNet_n_proc_DA", "1")
    os.environ.setdefault("nnUNet_compile", "false")
    sys.setrecursionlimit(10000)
    run(args.work, args.out, args.parts, args.epochs)


if __name__ == "__main__":
    main()
