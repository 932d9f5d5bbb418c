"""An nnU-Net model imported into SegLens beside nnU-Net's own `nnUNetPredictor`, on the same volume and checkpoint,
CPU, mirroring on, end to end (reading the NIfTI, preprocessing, inference, writing the mask NIfTI), in one run.

    uv run python benchmarks/nnunet_vs_predictor.py --nnunet-python /tmp/nnv/bin/python
        [--threads 2] [--rounds 3] [--shape 150 300 300] [--spacing 2.0 0.75 0.75] [--before] [--work DIR] [--keep]

Needs a Python with nnunetv2 (2.8.1) and the CPU torch: the project's venv after .ci/run's nnunetv2 step, or a
second venv (`python3 -m venv /tmp/nnv`, nnunetv2 installed with a constraint pinning torch==2.13.0 and wheels from
--find-links /opt/wheels, else pip pulls a CUDA build). That interpreter plans the model and runs
nnU-Net's predictor; this file runs in both (its modes `_prepare` and `_nnunet` are that child's side, `_seglens`
the project venv's). Every figure is measured, none asserted (not a test).

model: nnU-Net's DEFAULT plans (ExperimentPlanner, `nnUNetPlans`, 3d_fullres) of a CT-like dataset planned by
  nnU-Net's own fingerprint and planner: 10 phantoms of about 120 × 256 × 256 voxels at about 2.5 × 0.8 × 0.8 mm
  (models/training/nnunet_fixtures.py's ct_case, drawn to fill the field: air −1000 HU around a body, a liver, a
  spine, noise), labels background, liver, bone. The checkpoint is UNTRAINED: nnUNetTrainer's own initialize()
  (its network builder, He init, torch seed 0) and save_checkpoint() into fold_0/checkpoint_final.pth — the time
  does not depend on the weights. Made once per --work.
volume: a phantom of --shape at --spacing (default 150 × 300 × 300 at 2.0 × 0.75 × 0.75 mm: a spacing other than
  the plans', so both sides resample it in and the logits back out), one NIfTI (.nii.gz).
SegLens: `seglens-cli import nnunet FOLDER --folds 0 --out M.onnx` once (not timed), then, timed as a whole
  process, `seglens-cli run M.onnx VOLUME --out DIR --device cpu --tta --save none --export nifti --no-progress
  --runtime intra_op_threads=T` (the CLI's own `main`, run in a child with predict_nnunet wrapped to keep its
  VolumePrediction.timings: preprocess = crop + normalise + resample, inference = the sliding window, session =
  the ORT runs inside it, postprocess = logits back + softmax/argmax + un-crop).
nnU-Net: `nnUNetPredictor(tile_step_size=0.5, use_gaussian=True, use_mirroring=True,
  perform_everything_on_device=False, device=cpu)` with `predict_from_files_sequential` (predict_from_files's
  steps in one process: its worker processes would only split the peak memory over processes for one case),
  `torch.set_num_threads(T)`, timed as a whole process; its stages by wrapping its own functions: the
  preprocessor's run_case (reading + crop + normalise + resample), predict_logits_from_preprocessed_data (the
  sliding window), export_prediction_from_logits (logits back + argmax + writing the NIfTI).
--before: also SegLens as it ran before a window's mirror passes were batched by size and a 3D run's warm-up was
  dropped (all 8 passes in one ORT run, the session warmed up with a whole patch), patched in its child.
Both use T threads (--threads, default: the machine's cores): ORT's intra-op threads and torch's. Peak memory is
each child's RSS high-water mark (os.wait4's ru_maxrss). Medians over --rounds; the order of the two sides is
reversed every other round.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATASET_ID, DATASET = 951, "Dataset951_CTBench"
TRAIN_SHAPE, TRAIN_SPACING, CASES = (120, 256, 256), (2.5, 0.8, 0.8), 10
FILL = 0.25  # the phantom's mm scale: ct_case's body (~40 mm) drawn on a quarter of the real spacing fills the field
TRAINER, PLANS, CONFIGURATION = "nnUNetTrainer", "nnUNetPlans", "3d_fullres"


# ------------------------------------------------------------------ the child's side (the nnU-Net interpreter)

def _phantom(seed: int, shape: tuple[int, ...], spacing: tuple[float, ...], path: Path,
             labels: Path | None = None) -> None:
    sys.path.insert(0, str(REPO))
    import numpy as np

    from models.training.nnunet_fixtures import _write_nifti, ct_case

    image, truth = ct_case(np.random.default_rng(seed), shape, tuple(s * FILL for s in spacing))
    _write_nifti(image.astype(np.float32), spacing, path)
    if labels is not None:
        _write_nifti(truth, spacing, labels)


def child_prepare(work: Path, shape: tuple[int, ...], spacing: tuple[float, ...]) -> dict[str, Any]:
    """The dataset, nnU-Net's default plans, an untrained fold-0 checkpoint and the benchmark volume, once."""
    import numpy as np

    folder = work / "results" / DATASET / f"{TRAINER}__{PLANS}__{CONFIGURATION}"
    checkpoint = folder / "fold_0" / "checkpoint_final.pth"
    volume = work / f"volume_{'x'.join(map(str, shape))}_{'x'.join(map(str, spacing))}.nii.gz"
    raw = work / "raw" / DATASET
    if not (raw / "dataset.json").exists():
        for sub in ("imagesTr", "labelsTr"):
            (raw / sub).mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(DATASET_ID)
        for case in range(CASES):
            case_shape = tuple(int(n + rng.integers(-8, 9)) for n in TRAIN_SHAPE)
            case_spacing = tuple(float(s * rng.uniform(0.93, 1.07)) for s in TRAIN_SPACING)
            _phantom(case, case_shape, case_spacing, raw / "imagesTr" / f"case_{case:03d}_0000.nii.gz",
                     raw / "labelsTr" / f"case_{case:03d}.nii.gz")
        dataset = {"channel_names": {"0": "CT"}, "labels": {"background": 0, "liver": 1, "bone": 2},
                   "numTraining": CASES, "file_ending": ".nii.gz", "name": DATASET}
        (raw / "dataset.json").write_text(json.dumps(dataset, indent=2))
    if not checkpoint.exists():
        _plan_and_checkpoint(work, folder, checkpoint)
    if not volume.exists():
        _phantom(7, shape, spacing, volume)
    plans = json.loads((folder / "plans.json").read_text())["configurations"][CONFIGURATION]
    return {"folder": str(folder), "volume": str(volume), "patch": plans["patch_size"],
            "spacing": plans["spacing"], "features": plans["architecture"]["arch_kwargs"]["features_per_stage"],
            "network": plans["architecture"]["network_class_name"].rsplit(".", 1)[-1]}


def _plan_and_checkpoint(work: Path, folder: Path, checkpoint: Path) -> None:
    import torch
    from nnunetv2.experiment_planning.plan_and_preprocess_api import extract_fingerprints, plan_experiments
    from nnunetv2.training.nnUNetTrainer import nnUNetTrainer as trainer_module
    from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer

    preprocessed = work / "preprocessed" / DATASET
    if not (preprocessed / f"{PLANS}.json").exists():
        extract_fingerprints([DATASET_ID], num_processes=2, check_dataset_integrity=True, clean=True)
        plan_experiments([DATASET_ID])
    plans = json.loads((preprocessed / f"{PLANS}.json").read_text())
    plans["continue_training"] = False  # as nnU-Net's run_training sets it
    dataset = json.loads((preprocessed / "dataset.json").read_text())
    trainer_module.infer_dataset_class = lambda folder: None  # the training data's loader: never preprocessed here
    torch.manual_seed(0)
    trainer = nnUNetTrainer(plans, CONFIGURATION, 0, dataset, device=torch.device("cpu"))
    trainer.initialize()
    trainer.configure_rotation_dummyDA_mirroring_and_inital_patch_size()
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    trainer.save_checkpoint(str(checkpoint))
    shutil.copy(preprocessed / f"{PLANS}.json", folder / "plans.json")
    for name in ("dataset.json", "dataset_fingerprint.json"):
        shutil.copy(preprocessed / name, folder / name)


def child_nnunet(folder: Path, volume: Path, out: Path, threads: int) -> dict[str, Any]:
    """nnUNetPredictor on the volume (fold 0, mirroring on), its stages timed by wrapping its own functions."""
    started = time.perf_counter()
    import torch
    from nnunetv2.inference import predict_from_raw_data as module
    from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor

    torch.set_num_threads(threads)
    stages: dict[str, float] = {}

    def timed(name: str, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            begin = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                stages[name] = stages.get(name, 0.0) + (time.perf_counter() - begin) * 1000
        return wrapper

    imported = time.perf_counter()
    predictor = nnUNetPredictor(tile_step_size=0.5, use_gaussian=True, use_mirroring=True,
                                perform_everything_on_device=False, device=torch.device("cpu"), allow_tqdm=False)
    predictor.initialize_from_trained_model_folder(str(folder), use_folds=(0,), checkpoint_name="checkpoint_final.pth")
    preprocessor = predictor.configuration_manager.preprocessor_class
    preprocessor.run_case = timed("preprocess", preprocessor.run_case)
    predictor.predict_logits_from_preprocessed_data = timed("inference",
                                                            predictor.predict_logits_from_preprocessed_data)
    predictor.predict_sliding_window_return_logits = timed("sliding window",
                                                           predictor.predict_sliding_window_return_logits)
    module.export_prediction_from_logits = timed("export", module.export_prediction_from_logits)
    loaded = time.perf_counter()
    predictor.predict_from_files_sequential([[str(volume)]], [str(out / "volume")], save_probabilities=False,
                                            overwrite=True)
    finished = time.perf_counter()
    stages.update({"startup": (loaded - started) * 1000, "imports": (imported - started) * 1000,
                   "total": (finished - started) * 1000})
    return {"stages": stages, "threads": torch.get_num_threads(), "torch": torch.__version__,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def child_seglens(model: Path, volume: Path, out: Path, threads: int, before: bool) -> dict[str, Any]:
    """`seglens-cli run`'s own main on the volume, predict_nnunet wrapped to keep its timings. `before`: as it ran
    before the mirror passes were batched by size and the 3D warm-up dropped (8 passes per run, warmed up)."""
    started = time.perf_counter()
    sys.path.insert(0, str(REPO))
    import app.inference.runtime.session as session_module
    import app.inference.volume3d.nnunet.predict as volume_predict
    import app.inference.volume3d.nnunet.window as window_module
    from app.cli import main

    if before:
        window_module.BATCH_VOXELS = 1 << 40
        opener = session_module.open_session
        session_module.open_session = lambda *a, **k: opener(*a, **{**k, "warm_up": True})  # type: ignore

    kept: dict[str, float] = {}
    original = volume_predict.predict_nnunet

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        begin = time.perf_counter()
        prediction = original(*args, **kwargs)
        kept.update(prediction.timings)
        kept["predict_nnunet"] = (time.perf_counter() - begin) * 1000
        kept["patches"] = prediction.patches
        kept["runs"] = prediction.runs
        return prediction

    volume_predict.predict_nnunet = wrapped  # type: ignore[assignment]
    imported = time.perf_counter()
    code = main(["run", str(model), str(volume), "--out", str(out), "--device", "cpu", "--tta", "--save", "none",
                 "--export", "nifti", "--no-progress", "--runtime", f"intra_op_threads={threads}"])
    if code != 0:
        raise SystemExit(f"seglens-cli run exited {code}")
    finished = time.perf_counter()
    kept.update({"imports": (imported - started) * 1000, "total": (finished - started) * 1000})
    return {"stages": kept, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def child_main(argv: list[str]) -> None:
    mode, *rest = argv
    if mode == "_prepare":
        for variable, sub in (("nnUNet_raw", "raw"), ("nnUNet_preprocessed", "preprocessed"),
                              ("nnUNet_results", "results")):
            os.environ[variable] = str(Path(rest[0]) / sub)
            (Path(rest[0]) / sub).mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("nnUNet_compile", "false")
        answer = child_prepare(Path(rest[0]), tuple(int(v) for v in rest[1].split(",")),
                               tuple(float(v) for v in rest[2].split(",")))
    elif mode == "_nnunet":
        answer = child_nnunet(Path(rest[0]), Path(rest[1]), Path(rest[2]), int(rest[3]))
    else:
        answer = child_seglens(Path(rest[0]), Path(rest[1]), Path(rest[2]), int(rest[3]), rest[4] == "before")
    print(json.dumps(answer))


# ------------------------------------------------------------------ the benchmark (the project's venv)

def last_json(output: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


def child(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, dict[str, Any]]:
    """Wall seconds, peak RSS (MiB, os.wait4's ru_maxrss of that process) and its last JSON line."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr, text=True, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        stdout.seek(0)
        stderr.seek(0)
        out, err = stdout.read(), stderr.read()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command[:3])} … failed ({process.returncode}):\n{err[-3000:]}")
    return seconds, usage.ru_maxrss / 1024, last_json(out)


def load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def run(args: argparse.Namespace, work: Path) -> None:
    shape, spacing = ",".join(map(str, args.shape)), ",".join(map(str, args.spacing))
    started = time.perf_counter()
    _, _, prepared = child([args.nnunet_python, __file__, "_prepare", str(work), shape, spacing])
    print(f"prepared in {time.perf_counter() - started:.0f} s: {prepared}", flush=True)
    model = work / "imported.onnx"
    if not model.exists():
        cli = Path(sys.executable).parent / "seglens-cli"
        subprocess.run([str(cli), "import", "nnunet", prepared["folder"], "--folds", "0", "--out", str(model)],
                       check=True, capture_output=True, text=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    commands = {
        "SegLens": [sys.executable, __file__, "_seglens", str(model), prepared["volume"], str(work / "out_seglens"),
                    str(args.threads), "now"],
        "nnU-Net": [args.nnunet_python, __file__, "_nnunet", prepared["folder"], prepared["volume"],
                    str(work / "out_nnunet"), str(args.threads)],
    }
    if args.before:
        commands["SegLens before"] = [*commands["SegLens"][:-3], str(work / "out_before"), str(args.threads),
                                      "before"]
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load()}, {os.cpu_count()} CPUs;"
          f" volume {args.shape} at {args.spacing} mm, {args.threads} threads, {args.rounds} rounds", flush=True)
    walls: dict[str, list[float]] = {name: [] for name in commands}
    peaks: dict[str, list[float]] = {name: [] for name in commands}
    stages: dict[str, list[dict[str, float]]] = {name: [] for name in commands}
    for round_ in range(args.rounds):
        for name in (commands if round_ % 2 == 0 else list(commands)[::-1]):
            target = Path(commands[name][-3 if name.startswith("SegLens") else -2])
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
            seconds, peak, answer = child(commands[name], env)
            walls[name].append(seconds)
            peaks[name].append(peak)
            stages[name].append(answer["stages"])
            print(f"round {round_ + 1} {name}: {seconds:.1f} s, peak RSS {peak:.0f} MiB, stages "
                  + ", ".join(f"{k} {v / 1000:.1f} s" if k not in ("patches", "runs") else f"{k} {v:.0f}"
                              for k, v in answer["stages"].items())
                  + f"; load {load()}", flush=True)
    report(walls, peaks, stages, agreement(work))


def agreement(work: Path) -> str:
    """Dice per label of the two masks (the untrained network's labels: a check that both ran the same)."""
    import nibabel as nib
    import numpy as np

    ours = [p for p in (work / "out_seglens").rglob("*.nii.gz") if "score" not in p.name]
    theirs = sorted((work / "out_nnunet").glob("*.nii.gz"))
    if len(ours) != 1 or len(theirs) != 1:
        return f"masks not found ({len(ours)} SegLens, {len(theirs)} nnU-Net)"
    a = np.asarray(nib.load(ours[0]).dataobj)
    b = np.asarray(nib.load(theirs[0]).dataobj)
    if a.shape != b.shape:
        return f"mask shapes differ: {a.shape} vs {b.shape}"
    scores = []
    for label in range(int(max(a.max(), b.max())) + 1):
        x, y = a == label, b == label
        if x.any() or y.any():
            scores.append(f"{label}: {2 * float((x & y).sum()) / float(x.sum() + y.sum()):.4f}")
    return "Dice per label " + ", ".join(scores)


def report(walls: dict[str, list[float]], peaks: dict[str, list[float]],
           stages: dict[str, list[dict[str, float]]], agree: str) -> None:
    print(f"\nend: load average {load()}; masks: {agree}\n")
    print("| side | end to end, s (median) | rounds | peak RSS, MiB (median) |")
    print("|---|---|---|---|")
    for name, values in walls.items():
        print(f"| {name} | **{median(values):.1f}** | {', '.join(f'{v:.1f}' for v in values)} |"
              f" {median(peaks[name]):.0f} |")
    print(f"\nnnU-Net ÷ SegLens, end to end: {median(walls['nnU-Net']) / median(walls['SegLens']):.2f}×")
    for name, rows in stages.items():
        keys = list(dict.fromkeys(k for row in rows for k in row))
        print(f"{name} stages (medians): " + ", ".join(
            f"{k} {median([row[k] for row in rows if k in row]) / (1 if k in ('patches', 'runs') else 1000):.1f}"
            + ("" if k in ("patches", "runs") else " s") for k in keys))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("_prepare", "_nnunet", "_seglens"):
        child_main(sys.argv[1:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nnunet-python", required=True, help="a Python interpreter with nnunetv2 and torch (CPU)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="ORT intra-op threads and torch threads (default: the machine's cores)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shape", type=int, nargs=3, default=[150, 300, 300], help="the volume, D H W voxels")
    parser.add_argument("--spacing", type=float, nargs=3, default=[2.0, 0.75, 0.75], help="its spacing, mm")
    parser.add_argument("--work", type=Path, help="working folder (default: a temporary one); the plans, the "
                        "checkpoint and the volumes made there are reused by later runs")
    parser.add_argument("--keep", action="store_true", help="keep the working folder")
    parser.add_argument("--before", action="store_true",
                        help="also SegLens as it ran before (all 8 mirror passes in one run, the session warmed up)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="seglens-nnunet-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        run(args, work)
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
