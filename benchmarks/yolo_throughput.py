"""Instance segmentation throughput: `seglens-cli run` beside Ultralytics' own predictor, on the same YOLO export and
the same images, in one run.

    uv run python benchmarks/yolo_throughput.py --ultralytics-python /path/to/venv/bin/python
        [--images 50] [--rounds 3] [--save mask,overlay,none] [--spinning] [--model X.onnx] [--work DIR]
        [--keep]

Needs a Python with Ultralytics installed (AGPL-3.0: never a SegLens dependency, only a test-only reference):
the project's venv after `bash .ci/torchvision_cpu.sh .venv/bin/python` (what CI runs), or a second venv, e.g.
`python3 -m venv /tmp/ulv && /tmp/ulv/bin/pip install torch torchvision ultralytics onnx onnxruntime onnxslim`.
That interpreter builds the export and runs Ultralytics' predictor; this file runs in both (its modes
`_export`, `_predict` and `_ort` are the child's side). Every figure is measured, none asserted (not a test).

images: 1280×720 JPEG q92 frames of the project's surface generator (models/training/synth.py, seed 4242, stream
  "yolo-bench"), --images of them; the first 10 also in a folder of their own.
model (unless --model): yolov8n-seg from Ultralytics' own YAML, 3 classes, exported at imgsz 640 with random
  weights (torch seed 0), its batch norms' statistics taken from the benchmark frames, and each class's last bias
  set so that about --target anchors per image score above conf 0.25 on them: tens of instances per image after
  NMS, with masks (a trained model's count; random weights left as they are give none or thousands).
SegLens: `seglens-cli run MODEL FOLDER --out DIR --device cpu --save KIND --no-progress` (the report CSV always;
  KIND: mask = the CLI's default, the instances' label PNG; overlay = outlines drawn on the picture; none = the
  report alone), ONNX Runtime as the product sets it (intra-op threads = ORT's default, one per core; spinning off).
Ultralytics: `YOLO(model, task="segment").predict(source=FOLDER, retina_masks=True, stream=True, device="cpu",
  imgsz=640, conf=0.25, iou=0.7, verbose=False)`, every result consumed (boxes, scores, classes and the masks as
  numpy arrays); ONNX Runtime with Ultralytics' own session (default SessionOptions: one thread per core,
  spinning on), torch with its default threads.
--spinning: also SegLens's first --save kind with `--runtime allow_spinning=true` (ORT's default, which
  Ultralytics' session keeps; SegLens turns it off so the decode and write threads get the idle cores).
Ultralytics save=True: the same, also writing its own annotated pictures (boxes, labels, masks: the counterpart
  of SegLens's overlay).
Throughput = (images − 10) ÷ (wall of the --images run − wall of the 10-image run), so process start, imports,
  model load and warm-up cancel; both are whole processes. Medians over rounds; the order of the runs is reversed
  every other round. "ORT alone" is a bare `InferenceSession.run` on one 640×640 input in each interpreter (the two
  venvs may hold different onnxruntime versions): the part of any difference that is not the pipeline's.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SMALL = 10  # images of the short run whose time is subtracted
SEED = 4242
IMGSZ = 640
CONF, IOU = 0.25, 0.7
STAGES = ("decode_ms", "preprocess_ms", "inference_ms", "postprocess_ms")


# ------------------------------------------------------------------ the child's side (the Ultralytics interpreter)

def child_export(out: Path, frames: Path, target: int, arch: str) -> None:
    """Export `arch` (an Ultralytics model YAML, 3 classes) at 640 to `out`, random weights shaped as the module
    docstring says."""
    import cv2
    import numpy as np
    import torch
    from ultralytics import YOLO
    from ultralytics.nn.tasks import yaml_model_load
    from ultralytics.utils import YAML

    pictures = sorted(frames.glob("*.jpg"))[:16]
    batch = np.stack([cv2.resize(cv2.imread(str(p))[:, :, ::-1], (IMGSZ, IMGSZ)) for p in pictures])
    tensor = torch.from_numpy(batch.astype(np.float32) / 255).permute(0, 3, 1, 2).contiguous()
    config = yaml_model_load(f"{arch}.yaml")
    config["nc"] = 3
    config.pop("yaml_file", None)
    yaml_path = out / f"{arch}.yaml"
    YAML.save(yaml_path, config)
    torch.manual_seed(0)
    model = YOLO(str(yaml_path), task="segment")
    net = model.model
    for norm in (m for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d)):
        norm.reset_running_stats()
        norm.momentum = None  # a plain average over the frames
    net.train()
    with torch.no_grad():
        net(tensor)
    net.eval()
    head = net.model[-1]
    for level in head.cv3:
        torch.nn.init.zeros_(level[-1].bias)
    with torch.no_grad():
        output = net(tensor)
    while isinstance(output, (tuple, list)):
        output = output[0]
    scores = output[:, 4:7, :].clamp(1e-7, 1 - 1e-7)
    logits = torch.log(scores / (1 - scores))
    quantile = 1 - target / 3 / logits.shape[-1]
    bias = torch.tensor([float(torch.logit(torch.tensor(CONF)) - torch.quantile(logits[:, c].flatten(), quantile))
                         for c in range(3)])
    for level in head.cv3:
        with torch.no_grad():
            level[-1].bias.copy_(bias)
    exported = Path(model.export(format="onnx", imgsz=IMGSZ, verbose=False))
    exported.rename(out / "bench-seg.onnx")


def child_predict(model: Path, folder: Path, save: Path | None) -> dict[str, Any]:
    """Ultralytics' predictor over the folder, every result consumed; its own per-stage ms (medians). With `save`:
    its own annotated pictures written there (save=True: boxes, labels and masks drawn, as SegLens's overlay)."""
    from ultralytics import YOLO

    started = time.perf_counter()
    images = instances = 0
    speeds: dict[str, list[float]] = {}
    saving = {"save": True, "project": str(save), "name": "predict", "exist_ok": True} if save else {}
    results = YOLO(str(model), task="segment").predict(source=str(folder), retina_masks=True, stream=True,
                                                       device="cpu", imgsz=IMGSZ, conf=CONF, iou=IOU, verbose=False,
                                                       **saving)
    for result in results:
        boxes = result.boxes
        boxes.xyxy.numpy(), boxes.conf.numpy(), boxes.cls.numpy()
        if result.masks is not None:
            result.masks.data.numpy()
        images += 1
        instances += len(boxes)
        for stage, ms in result.speed.items():
            speeds.setdefault(stage, []).append(float(ms))
    return {"images": images, "instances": instances, "seconds": time.perf_counter() - started,
            "speed": {stage: statistics.median(v) for stage, v in speeds.items()}}


def child_ort(model: Path, runs: int) -> dict[str, Any]:
    """A bare ONNX Runtime session (default options) on one 640×640 input: median ms per run."""
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    tensor = np.random.default_rng(0).random((1, 3, IMGSZ, IMGSZ), dtype=np.float32)
    session.run(None, {name: tensor})
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        session.run(None, {name: tensor})
        times.append((time.perf_counter() - started) * 1000)
    return {"ms": statistics.median(times), "version": ort.__version__}


def child_main(argv: list[str]) -> None:
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_VERBOSE", "False")
    mode, *rest = argv
    if mode == "_export":
        child_export(Path(rest[0]), Path(rest[1]), int(rest[2]), rest[3])
    elif mode == "_predict":
        print(json.dumps(child_predict(Path(rest[0]), Path(rest[1]), Path(rest[2]) if len(rest) > 2 else None)))
    else:
        print(json.dumps(child_ort(Path(rest[0]), int(rest[1]))))


# ------------------------------------------------------------------ the benchmark (the project's venv)

def write_frames(folder: Path, count: int) -> list[Path]:
    sys.path.insert(0, str(REPO))
    from PIL import Image

    from models.training import synth

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        image, _ = synth.surface_image(synth.rng_for(SEED, i, "yolo-bench"), 720, 1280)
        path = folder / f"frame_{i:03d}.jpg"
        Image.fromarray(image).save(path, quality=92)
        paths.append(path)
    return paths


def last_json(output: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


def seglens(model: Path, folder: Path, save: str, out: Path, *, spinning: bool = False,
            ) -> tuple[float, list[dict[str, str]]]:
    """Wall seconds of one `seglens-cli run` process, and its report's rows."""
    shutil.rmtree(out, ignore_errors=True)
    cli = Path(sys.executable).parent / "seglens-cli"
    command = [str(cli), "run", str(model), str(folder), "--out", str(out), "--device", "cpu", "--save", save,
               "--no-progress", *(["--runtime", "allow_spinning=true"] if spinning else [])]
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    with open(out / "seglens_report.csv", newline="") as f:
        return seconds, list(csv.DictReader(f))


def ultralytics(python: str, model: Path, folder: Path, save: Path | None) -> tuple[float, dict[str, Any]]:
    if save is not None:
        shutil.rmtree(save, ignore_errors=True)
    started = time.perf_counter()
    done = subprocess.run([python, __file__, "_predict", str(model), str(folder), *([str(save)] if save else [])],
                          check=True, capture_output=True, text=True)
    return time.perf_counter() - started, last_json(done.stdout)


def per_second(big: float, small: float, images: int) -> float:
    """Images per second of the images beyond the short run's; nan when the long run was not longer (noise: use
    more --images)."""
    return (images - SMALL) / (big - small) if big > small else float("nan")


def median(values: list[float]) -> float:
    kept = [v for v in values if v == v]
    return statistics.median(kept) if kept else float("nan")


def load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def run(args: argparse.Namespace, work: Path) -> None:
    frames, small = work / "frames", work / "small"
    paths = write_frames(frames, args.images)
    small.mkdir(exist_ok=True)
    for path in paths[:SMALL]:
        shutil.copy(path, small / path.name)
    model = args.model
    if model is None:
        subprocess.run([args.ultralytics_python, __file__, "_export", str(work), str(frames), str(args.target),
                        args.arch], check=True, capture_output=True, text=True)
        model = work / "bench-seg.onnx"
    saves = [s for s in args.save.split(",") if s]
    names = [f"seglens --save {s}" for s in saves] + ["ultralytics", "ultralytics save=True"]
    if args.spinning:
        names.insert(len(saves), f"seglens --save {saves[0]} --runtime allow_spinning=true")
    rates: dict[str, list[float]] = {name: [] for name in names}
    stages: dict[str, list[float]] = {stage: [] for stage in STAGES}
    counts: dict[str, int] = {}
    speeds: list[dict[str, float]] = []
    ort_ms: dict[str, list[float]] = {"seglens": [], "ultralytics": []}
    versions: dict[str, str] = {}
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load()}, {os.cpu_count()} CPUs;"
          f" {args.images} images, {args.rounds} rounds, model {model}", flush=True)
    for round_ in range(args.rounds):
        order = names if round_ % 2 == 0 else names[::-1]
        for name in order:
            if name.startswith("ultralytics"):
                save_to = work / "out" if name.endswith("save=True") else None
                small_s, _ = ultralytics(args.ultralytics_python, model, small, save_to)
                big_s, answer = ultralytics(args.ultralytics_python, model, frames, save_to)
                counts[name] = int(answer["instances"])
                if save_to is None:
                    speeds.append(answer["speed"])
            else:
                save, spinning = name.split()[2], name.endswith("allow_spinning=true")
                small_s, _ = seglens(model, small, save, work / "out", spinning=spinning)
                big_s, rows = seglens(model, frames, save, work / "out", spinning=spinning)
                counts[name] = sum(int(v) for row in rows for k, v in row.items() if k.startswith("count_") and v)
                if not spinning:
                    for stage in STAGES:
                        stages[stage].append(statistics.median(float(row[stage]) for row in rows))
            rates[name].append(per_second(big_s, small_s, args.images))
            print(f"round {round_ + 1} {name}: {rates[name][-1]:.2f} images/s ({big_s:.1f} s − {small_s:.1f} s),"
                  f" {counts[name]} instances, load {load()}", flush=True)
        for side, python in (("seglens", sys.executable), ("ultralytics", args.ultralytics_python)):
            done = subprocess.run([python, __file__, "_ort", str(model), "10"], check=True, capture_output=True,
                                  text=True)
            answer = last_json(done.stdout)
            ort_ms[side].append(float(answer["ms"]))
            versions[side] = str(answer["version"])
    report(args, names, rates, stages, counts, speeds, ort_ms, versions)


def report(args: argparse.Namespace, names: list[str], rates: dict[str, list[float]],
           stages: dict[str, list[float]], counts: dict[str, int], speeds: list[dict[str, float]],
           ort_ms: dict[str, list[float]], versions: dict[str, str]) -> None:
    reference = median(rates["ultralytics"])
    print(f"\nend: load average {load()}\n")
    print("| run | images/s (median) | rounds | ÷ Ultralytics | instances |")
    print("|---|---|---|---|---|")
    for name in names:
        values = rates[name]
        spread = ", ".join(f"{v:.2f}" for v in values)
        print(f"| {name} | **{median(values):.2f}** | {spread} | {median(values) / reference:.2f}× |"
              f" {counts[name]} |")
    if "seglens --save overlay" in rates:
        print(f"\nseglens --save overlay ÷ ultralytics save=True: "
              f"{median(rates['seglens --save overlay']) / median(rates['ultralytics save=True']):.2f}×")
    print("\nSegLens per image, report columns (medians of the per-run medians), ms: "
          + ", ".join(f"{s.removesuffix('_ms')} {statistics.median(v):.1f}" for s, v in stages.items()))
    keys = sorted({k for s in speeds for k in s})
    print("Ultralytics per image, its result.speed (medians), ms: "
          + ", ".join(f"{k} {statistics.median(s[k] for s in speeds):.1f}" for k in keys))
    print("ORT alone, one 640×640 run, median ms: "
          + ", ".join(f"{side} (onnxruntime {versions[side]}) {statistics.median(v):.1f}"
                      for side, v in ort_ms.items()))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("_export", "_predict", "_ort"):
        child_main(sys.argv[1:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ultralytics-python", required=True,
                        help="a Python interpreter with Ultralytics (and onnxruntime) installed")
    parser.add_argument("--images", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--save", default="mask,overlay,none", help="SegLens --save kinds to time, comma-separated")
    parser.add_argument("--spinning", action="store_true",
                        help="also SegLens's first --save kind with ORT's threads spinning, as Ultralytics' session")
    parser.add_argument("--model", type=Path, help="a YOLO segment export (default: built, see above)")
    parser.add_argument("--arch", default="yolov8n-seg", help="Ultralytics model YAML of the built export")
    parser.add_argument("--target", type=int, default=40, help="anchors per image above conf (the built export)")
    parser.add_argument("--work", type=Path, help="working folder (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the working folder")
    args = parser.parse_args()
    if args.images <= SMALL:
        parser.error(f"--images must be more than {SMALL}")
    work = args.work or Path(tempfile.mkdtemp(prefix="seglens-yolo-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        run(args, work)
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
