"""3D sliding-window inference (issue 26): a synthetic CT through a 3D model, SegLens beside MONAI in one run.

    uv run python benchmarks/volume3d_bench.py [--size 300 512 512] [--model models/ct3d_demo.onnx]
                                               [--threads 0] [--json OUT.json]

The CT (D × H × W at 2.5 × 0.8 × 0.8 mm, int16 HU: air, a body, lungs, a spine and a few bright lesions) goes
through the model described by its sidecar (default: a factory 3D model made here, Conv3d 1→8 3³ + ReLU + Conv3d
8→3 + Softmax, dynamic D/H/W, patch 64 × 128 × 128, CT normalisation, no resampling; `--model` for the demo model,
whose sidecar may resample). Two child processes, so each peak RSS (getrusage ru_maxrss) is that engine's alone,
open the same model with the same session options (app.inference.runtime.session.open_session, CPU):
- SegLens: `predict_volume` — normalise + resample + orient, the Gaussian sliding window, the probabilities back on
  the native grid (float16) and the labels;
- MONAI 1.6.1: SegLens's `model_input` (the same tensor), MONAI's `sliding_window_inference` (mode and overlap of
  the sidecar, sigma_scale 0.125, its predictor wrapping the same `session.run` and activation), then SegLens's
  `native_outputs` to bring it back (so both end with the same kept outputs).
Mirroring TTA is off for both (MONAI's window has none). "session.run" is the sum of the raw runs inside each
pipeline; "session share" = that sum ÷ the pipeline's wall time (target ≥ 0.85 for SegLens); "isolated raw" is
the median of separate session.run calls on a random patch × the runs made. The two outputs are compared on 200,000
sampled voxels.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from app.inference.model.builder import load_spec  # noqa: E402
from app.inference.model.spec import ModelSpec  # noqa: E402
from app.inference.runtime.session import open_session  # noqa: E402
from app.inference.volume3d.predict import model_input, native_outputs, predict_volume, with_tta  # noqa: E402

SPACING = (2.5, 0.8, 0.8)
AFFINE = np.diag([-0.8, -0.8, 2.5, 1.0])  # an axial series: columns → L, rows → P, slices → S
SAMPLES = 200_000
FACTORY_SIDECAR = """\
input:
  patch: [64, 128, 128]
  normalize: {kind: ct, clip: [-1000, 1000], mean: 0, std: 500}
  tile: {overlap: 0.5, blend: gaussian, batch: 1}
"""


def synthetic_ct(shape: tuple[int, int, int], seed: int = 0) -> np.ndarray:
    """int16 HU: air around an elliptic body (40 HU), two lungs (−850), a spine (700), a few lesions (60)."""
    import cv2

    rng = np.random.default_rng(seed)
    d, h, w = shape
    plane = np.full((h, w), -1000, np.int16)
    cv2.ellipse(plane, (w // 2, h // 2), (int(w * 0.42), int(h * 0.32)), 0, 0, 360, 40, -1)
    for side in (-1, 1):
        cv2.ellipse(plane, (w // 2 + side * w // 6, h // 2 - h // 20), (w // 9, h // 6), 0, 0, 360, -850, -1)
    cv2.circle(plane, (w // 2, h // 2 + h // 5), max(2, w // 25), 700, -1)
    volume = np.repeat(plane[None], d, axis=0)
    for _ in range(4):
        k, y, x = int(rng.integers(0, d)), int(rng.integers(h // 3, 2 * h // 3)), int(rng.integers(w // 4, 3 * w // 4))
        radius = max(2, w // 40)
        for dk in range(-radius // 3, radius // 3 + 1):
            if 0 <= k + dk < d:
                cv2.circle(volume[k + dk], (x, y), radius, 60, -1)
    noise = rng.normal(0, 15, (h, w)).astype(np.int16)
    volume += noise  # the same noise pattern on every slice: cheap, and a model does not care
    return volume


def factory_model(folder: Path) -> Path:
    """Conv3d 1→8 (3³, ReLU) → Conv3d 8→3 (1³) → Softmax over channels; [N, 1, D, H, W] → [N, 3, D, H, W]."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    first = rng.normal(0, 0.3, (8, 1, 3, 3, 3)).astype(np.float32)
    second = rng.normal(0, 0.5, (3, 8, 1, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["image", "w1"], ["c1"], pads=[1] * 6, kernel_shape=[3, 3, 3]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], kernel_shape=[1, 1, 1]),
             helper.make_node("Softmax", ["c2"], ["scores"], axis=1)]
    graph = helper.make_graph(
        nodes, "ct3d_factory", [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, "D", "H", "W"])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 3, "D", "H", "W"])],
        [numpy_helper.from_array(first, "w1"), numpy_helper.from_array(second, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="volume3d_bench")
    model.ir_version = 8
    path = folder / "ct3d_factory.onnx"
    onnx.save(model, str(path))
    path.with_suffix(".yaml").write_text(FACTORY_SIDECAR)
    return path


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kB


def _current_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _sample(probabilities: np.ndarray, path: Path) -> None:
    rng = np.random.default_rng(7)
    flat = probabilities.reshape(probabilities.shape[0], -1)
    picks = rng.integers(0, flat.shape[1], min(SAMPLES, flat.shape[1]))
    np.save(path, flat[:, picks].astype(np.float32))


def _isolated_raw_s(model, spec: ModelSpec, runs: int) -> float:
    """Median of 3 separate session.run calls on a random batch of patches, × the runs made."""
    assert spec.volume is not None
    shape = (spec.volume.tile.batch, spec.input.channels, *spec.volume.patch)
    tensor = np.random.default_rng(3).normal(0, 1, shape).astype(np.float32)
    times = []
    for _ in range(3):
        started = time.perf_counter()
        model.run(tensor)
        times.append(time.perf_counter() - started)
    return float(np.median(times)) * runs


def child(engine: str, model_path: Path, size: tuple[int, int, int], threads: int, sample: Path) -> dict:
    if engine == "monai":  # imported before the clock starts: torch's import is no part of MONAI's run
        import monai.inferers  # noqa: F401
    ct = synthetic_ct(size)
    spec = with_tta(load_spec(model_path), ())
    model = open_session(spec, "cpu", runtime={"intra_op_threads": threads} if threads else None)
    baseline = _current_rss_mb()
    started = time.perf_counter()
    if engine == "seglens":
        prediction = predict_volume(ct, spacing=SPACING, affine=AFFINE, spec=spec, run_raw=model.run)
        wall = time.perf_counter() - started
        t = prediction.timings
        row = {"preprocess_s": t["preprocess"] / 1000, "window_s": t["inference"] / 1000,
               "back_s": t["postprocess"] / 1000, "session_s": t["session"] / 1000, "patches": prediction.patches,
               "runs": prediction.runs, "model_shape": list(prediction.model_shape)}
        probabilities = prediction.probabilities
    else:
        row, probabilities = _monai(ct, spec, model, threads)
        wall = time.perf_counter() - started
    row.update(engine=engine, wall_s=wall, peak_rss_mb=_rss_mb(), baseline_rss_mb=baseline)
    row["isolated_raw_s"] = _isolated_raw_s(model, spec, row["runs"])
    _sample(probabilities, sample)
    return row


def _monai(ct: np.ndarray, spec: ModelSpec, model, threads: int) -> tuple[dict, np.ndarray]:
    import torch
    from monai.inferers import sliding_window_inference

    if threads:
        torch.set_num_threads(threads)
    assert spec.volume is not None
    tile, activation = spec.volume.tile, spec.output.activation
    session_s, runs, patches = [0.0], [0], [0]

    def predictor(batch: torch.Tensor) -> torch.Tensor:
        started = time.perf_counter()
        raw = model.run(batch.numpy())
        session_s[0] += time.perf_counter() - started
        runs[0] += 1
        patches[0] += len(batch)
        out = torch.from_numpy(np.asarray(raw[0] if isinstance(raw, tuple) else raw, np.float32))
        if activation == "softmax":
            return torch.softmax(out, dim=1)
        return torch.sigmoid(out) if activation == "sigmoid" else out.clamp(0, 1)

    started = time.perf_counter()
    tensor = model_input(ct, spacing=SPACING, affine=AFFINE, spec=spec)
    prepared = time.perf_counter()
    with torch.no_grad():
        blended = sliding_window_inference(torch.from_numpy(tensor[None]), roi_size=spec.volume.patch,
                                           sw_batch_size=tile.batch, predictor=predictor, overlap=tile.overlap,
                                           mode=tile.blend, sigma_scale=tile.sigma_scale)
    del tensor
    windowed = time.perf_counter()
    probabilities, _ = native_outputs(blended[0].numpy(), native_shape=ct.shape, spacing=SPACING, affine=AFFINE,
                                      spec=spec)
    done = time.perf_counter()
    return ({"preprocess_s": prepared - started, "window_s": windowed - prepared, "back_s": done - windowed,
             "session_s": session_s[0], "patches": patches[0], "runs": runs[0]}, probabilities)


def table(rows: dict[str, dict], args: argparse.Namespace, model_name: str, spec: ModelSpec,
          difference: float, labels_agree: float) -> str:
    assert spec.volume is not None
    tile = spec.volume.tile
    d, h, w = args.size
    lines = [f"3D sliding window: synthetic CT {d}×{h}×{w} at {' × '.join(map(str, SPACING))} mm, model "
             f"{model_name} (patch {'×'.join(map(str, spec.volume.patch))}, overlap {tile.overlap}, {tile.blend}, "
             f"batch {tile.batch}), model grid {'×'.join(map(str, rows['seglens']['model_shape']))}, CPU",
             f"{'':28}{'SegLens':>12}{'MONAI 1.6.1':>14}"]

    def line(label: str, key: str, form: str = "{:.3f}") -> None:
        lines.append(f"{label:28}" + "".join(f"{form.format(rows[e][key]):>{n}}"
                                             for e, n in (("seglens", 12), ("monai", 14))))

    line("preprocess (s)", "preprocess_s")
    line("sliding window (s)", "window_s")
    line("back to native (s)", "back_s")
    line("pipeline wall (s)", "wall_s")
    line("session.run, summed (s)", "session_s")
    line("isolated raw × runs (s)", "isolated_raw_s")
    line("patches", "patches", "{}")
    for row in rows.values():
        row["share"] = row["session_s"] / row["wall_s"]
    line("session share (≥ 0.85)", "share", "{:.3f}")
    line("peak RSS (MB)", "peak_rss_mb", "{:.0f}")
    line("RSS before the run (MB)", "baseline_rss_mb", "{:.0f}")
    for row in rows.values():
        row["run_rss_mb"] = row["peak_rss_mb"] - row["baseline_rss_mb"]
    line("peak − before (MB)", "run_rss_mb", "{:.0f}")
    lines.append(f"max |Δ probability| on {SAMPLES} voxels: {difference:.1e} (both kept float16); "
                 f"labels agree on {labels_agree * 100:.3f} %")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, nargs=3, default=[300, 512, 512], metavar=("D", "H", "W"))
    parser.add_argument("--model", type=Path, default=None, help="a 3D model with its sidecar (default: factory)")
    parser.add_argument("--threads", type=int, default=0, help="ORT intra-op (and torch) threads; 0: default")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--child", choices=["seglens", "monai"], help=argparse.SUPPRESS)
    parser.add_argument("--sample", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    size = (args.size[0], args.size[1], args.size[2])
    if args.child:
        print(json.dumps(child(args.child, args.model, size, args.threads, args.sample)))
        return
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        model_path = args.model or factory_model(folder)
        rows: dict[str, dict] = {}
        for engine in ("seglens", "monai"):
            command = [sys.executable, __file__, "--child", engine, "--model", str(model_path), "--size",
                       *map(str, size), "--threads", str(args.threads), "--sample", str(folder / f"{engine}.npy")]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode:
                sys.exit(f"{engine} child failed:\n{done.stderr[-3000:]}")
            rows[engine] = json.loads(done.stdout.strip().splitlines()[-1])
        ours, theirs = np.load(folder / "seglens.npy"), np.load(folder / "monai.npy")
        spec = load_spec(model_path)
    difference = float(np.abs(ours - theirs).max())
    agree = float(np.mean(ours.argmax(0) == theirs.argmax(0))) if len(ours) > 1 else float(
        np.mean((ours[0] > 0.5) == (theirs[0] > 0.5)))
    print(table(rows, args, model_path.name if args.model else "factory (Conv3d 1→8→3, softmax)", spec,
                difference, agree))
    if args.json:
        args.json.write_text(json.dumps({"size": size, "rows": rows, "max_difference": difference,
                                         "labels_agree": agree}, indent=2))


if __name__ == "__main__":
    main()
