"""PyTorch -> ONNX export of the demo models, with an automatic ONNX Runtime parity check.

    python -m models.training.export surface_defects      # re-export from models/training/runs/<name>.pt

Exports with the dynamo exporter (``torch.onnx.export(..., dynamo=True)``, needs onnxscript), opset 17,
dynamic batch (and H/W for fully convolutional models), one self-contained file (``external_data=False``).
Class names go into ``metadata_props['classes']`` (JSON list) and the sidecar ``<name>.yaml`` is written
next to the model. The parity check compares ONNX Runtime (CPU) with PyTorch on several input sizes and
raises ``ParityError`` (exit code 1 from the command line) when max |diff| exceeds the tolerance
(1e-4 for float32; 2e-2 on probabilities for the float16 model, whose masks must also agree).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import torch
import yaml

from . import common, nets

OPSET = 17
MAX_BYTES = 5 * 1024 * 1024
FP32_TOL = 1e-4
FP16_TOL = 2e-2


class ParityError(RuntimeError):
    pass


def _rename_dims(model: onnx.ModelProto, names: dict[int, str]) -> None:
    """Give the dynamic axes of the graph inputs/outputs readable names (batch, height, width)."""
    mapping = {}
    for vi in list(model.graph.input) + list(model.graph.output):
        for i, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.dim_param and i in names:
                mapping.setdefault(d.dim_param, names[i])
    for vi in list(model.graph.input) + list(model.graph.output) + list(model.graph.value_info):
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param in mapping:
                d.dim_param = mapping[d.dim_param]


def export_onnx(model: torch.nn.Module, path: Path, *, in_ch: int, example_hw: tuple[int, int], dynamic_hw: bool,
                classes: list[str], output_name: str | list[str], title: str, half: bool = False) -> Path:
    """Export ``model`` (eval mode) to one self-contained ONNX file at ``path`` (``output_name``: one name, or
    a list for a model with several outputs)."""
    model = model.eval()
    dtype = torch.float16 if half else torch.float32
    x = torch.zeros(1, in_ch, *example_hw, dtype=dtype)
    dims = {0: torch.export.Dim.DYNAMIC}
    if dynamic_hw:
        dims.update({2: torch.export.Dim.DYNAMIC, 3: torch.export.Dim.DYNAMIC})
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, (x,), str(path), opset_version=OPSET, dynamo=True, external_data=False,
            input_names=["input"], output_names=[output_name] if isinstance(output_name, str) else list(output_name),
            dynamic_shapes={"x": dims}, verbose=False,
        )
    return finish_export(path, {0: "batch", 2: "height", 3: "width"} if dynamic_hw else {0: "batch"},
                         classes=classes, title=title)


def finish_export(path: Path, dims: dict[int, str], *, classes: list[str], title: str) -> Path:
    """The exported file at `path` made a bundled model: dynamic axes named (`dims`), class names and title in
    its metadata, the opset checked, one self-contained file within the 5 MB budget (the 2D and 3D recipes)."""
    m = onnx.load(str(path))
    _rename_dims(m, dims)
    del m.metadata_props[:]
    for k, v in {"classes": json.dumps(classes), "name": title, "source": "seglens models/training"}.items():
        p = m.metadata_props.add()
        p.key, p.value = k, v
    m.doc_string = f"{title}; trained on synthetic data by seglens models/training (see models/README.md)"
    opset = {o.domain: o.version for o in m.opset_import}.get("", None)
    if opset != OPSET:
        raise RuntimeError(f"{path.name}: exported with opset {opset}, expected {OPSET} (version conversion failed)")
    onnx.checker.check_model(m)
    onnx.save(m, str(path))
    data = path.with_name(path.name + ".data")
    if data.exists():
        raise RuntimeError(f"exporter wrote external data {data}; expected one self-contained file")
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise RuntimeError(f"{path.name} is {size / 1e6:.1f} MB, over the 5 MB budget for bundled models")
    return path


def ort_session(path: Path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def check_parity(model: torch.nn.Module, path: Path, inputs: list[np.ndarray], tol: float, half: bool = False,
                 binary: bool = False) -> float:
    """Max |ONNX Runtime - PyTorch| over ``inputs`` (float32 NCHW arrays); raises ParityError above tol."""
    sess = ort_session(path)
    name = sess.get_inputs()[0].name
    worst = 0.0
    model = model.eval()
    for x in inputs:
        xt = torch.from_numpy(x)
        with torch.no_grad():
            refs = model.float()(xt)  # the float32 reference, also for the float16 export
        refs = [r.numpy() for r in (refs if isinstance(refs, tuple) else (refs,))]
        feed = x.astype(np.float16) if half else x
        outs = sess.run(None, {name: feed})
        if len(outs) != len(refs):
            raise ParityError(f"{path.name}: {len(outs)} outputs, PyTorch gives {len(refs)}")
        diff = 0.0
        for out, ref in zip(outs, refs):
            if out.shape != ref.shape:
                raise ParityError(f"{path.name}: output shape {out.shape} != PyTorch {ref.shape} for input "
                                  f"{x.shape}")
            diff = max(diff, float(np.abs(out.astype(np.float32) - ref).max()))
        out, ref = outs[0], refs[0]
        msg = f"  parity {path.name} input {tuple(x.shape)}: max|diff| = {diff:.2e} (tol {tol:g})"
        if binary:
            a, b = out.astype(np.float32) > 0.5, ref > 0.5
            iou = (a & b).sum() / max((a | b).sum(), 1)
            msg += f", mask IoU {iou:.4f} (informative; evaluate.py checks IoU on the held-out set)"
        print(msg, flush=True)
        worst = max(worst, diff)
        if not np.isfinite(diff) or diff > tol:
            raise ParityError(
                f"PARITY FAILED for {path.name}: ONNX Runtime output differs from PyTorch by {diff:.3g} "
                f"(> {tol:g}) for input shape {tuple(x.shape)}"
            )
    return worst


def parity_inputs(name: str, n_random: int = 1) -> list[np.ndarray]:
    """Realistic preprocessed inputs (from the generators, PARITY_SEED) plus random ones, several sizes."""
    rng = np.random.default_rng(common.PARITY_SEED)
    from . import synth

    if name == "surface_defects":
        img, _ = common.surface_item(common.PARITY_SEED, 0)
        x = common.preprocess(img, name)[None]  # 1x3x544x960, the working size
        small = common.normalize(
            synth.surface_image(synth.rng_for(common.PARITY_SEED, 1), 96, 160)[0], common.SIDECARS[name]["input"]
        )[None]
        rnd = [rng.standard_normal((2, 3, 128, 224)).astype(np.float32) for _ in range(n_random)]
        return [x, small, *rnd, rng.standard_normal((1, 3, 64, 64)).astype(np.float32)]
    if name in ("nuclei", "nuclei_fp16"):
        xs = [common.preprocess(common.nuclei_item(common.PARITY_SEED, i, 512)[0], "nuclei") for i in range(3)]
        return [np.stack(xs[:1]), np.stack(xs), *(rng.standard_normal((2, 1, 256, 256)).astype(np.float32)
                                                   for _ in range(n_random))]
    if name == "surface_anomaly":
        clean, _ = common.anomaly_item(common.PARITY_SEED, 0, defective=False)
        bad, _ = common.anomaly_item(common.PARITY_SEED, 1, defective=True)
        x = np.stack([common.preprocess(clean, name), common.preprocess(bad, name)])  # 2x3x288x512
        small = common.normalize(synth.surface_image(synth.rng_for(common.PARITY_SEED, 2), 96, 160)[0],
                                 common.SIDECARS[name]["input"])[None]
        rnd = [rng.uniform(0, 1, (2, 3, 128, 224)).astype(np.float32) for _ in range(n_random)]
        return [x, small, *rnd, rng.uniform(0, 1, (1, 3, 64, 64)).astype(np.float32)]
    if name == "ct_demo":
        from . import phantom

        hu, _ = phantom.volume(common.PARITY_SEED, 0, n_slices=3)
        x = np.stack([common.normalize(w, common.SIDECARS[name]["input"]) for w in phantom.windowed(hu)])
        return [x, x[1:2, :, :128, :192], *(rng.standard_normal((2, 1, 96, 160)).astype(np.float32)
                                              for _ in range(n_random))]
    xs = [common.preprocess(common.crop_item(common.PARITY_SEED, i)[0], name) for i in range(4)]
    return [np.stack(xs[:1]), np.stack(xs), *(rng.standard_normal((3, 3, 224, 224)).astype(np.float32)
                                              for _ in range(n_random))]


class _SidecarDumper(yaml.SafeDumper):
    """Block style for sections; flow style for lists of numbers and for each class entry."""

    def represent_list(self, data):
        flow = all(not isinstance(v, (list, dict)) for v in data)
        return self.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)

    def represent_dict(self, data):
        flow = "name" in data and len(data) <= 2 and "task" not in data
        return self.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=flow)


_SidecarDumper.add_representer(list, _SidecarDumper.represent_list)
_SidecarDumper.add_representer(dict, _SidecarDumper.represent_dict)


def write_sidecar(name: str, out_dir: Path) -> Path:
    p = out_dir / f"{name}.yaml"
    body = yaml.dump(common.SIDECARS[name], Dumper=_SidecarDumper, sort_keys=False, width=110)
    p.write_text(f"# Sidecar of {name}.onnx, written by models/training/export.py (see models/README.md)\n{body}")
    return p


def export_named(name: str, model: torch.nn.Module, out_dir: Path = common.MODELS_DIR) -> list[Path]:
    """Export one trained demo model (and for ``nuclei`` also ``nuclei_fp16``), check parity, write sidecars."""
    out_dir = Path(out_dir)
    if name == "surface_instances":  # a YOLOv8-seg layout with Ultralytics' metadata: its own exporter
        from . import instances_export

        return instances_export.export_model(model, out_dir)
    sc = common.SIDECARS[name]
    classes = common.class_names(name)
    in_ch = 1 if sc["input"]["color"] == "gray" else 3
    seg_dynamic = name in ("surface_defects", "surface_anomaly", "ct_demo")
    hw = (64, 96) if seg_dynamic else tuple(sc["input"]["size"])
    out_name = {"surface_defects": "logits", "ct_demo": "logits", "nuclei": "probability", "defect_type": "logits",
                "surface_anomaly": ["anomaly_map", "pred_score"]}[name]
    written = []
    if name == "surface_anomaly":  # the map scale (in the graph) and the sidecar thresholds
        calibrate_anomaly(model)
    path = export_onnx(model, out_dir / f"{name}.onnx", in_ch=in_ch, example_hw=hw, dynamic_hw=seg_dynamic,
                       classes=classes, output_name=out_name, title=sc["name"])
    worst = check_parity(model, path, parity_inputs(name), FP32_TOL)
    print(f"{path.name}: parity OK (max|diff| {worst:.2e}), {path.stat().st_size / 1e6:.2f} MB", flush=True)
    written += [path, write_sidecar(name, out_dir)]
    if name == "nuclei":
        half = copy.deepcopy(model).eval().half()
        p16 = export_onnx(half, out_dir / "nuclei_fp16.onnx", in_ch=1, example_hw=hw, dynamic_hw=False,
                          classes=classes, output_name=out_name, title=common.SIDECARS["nuclei_fp16"]["name"],
                          half=True)
        m16 = onnx.load(str(p16))
        types = {m16.graph.input[0].type.tensor_type.elem_type, m16.graph.output[0].type.tensor_type.elem_type}
        if types != {onnx.TensorProto.FLOAT16}:
            raise RuntimeError("nuclei_fp16.onnx: inputs/outputs are not float16")
        worst = check_parity(model, p16, parity_inputs("nuclei_fp16"), FP16_TOL, half=True, binary=True)
        print(f"{p16.name}: parity OK vs float32 PyTorch (max|diff| {worst:.2e}), "
              f"{p16.stat().st_size / 1e6:.2f} MB", flush=True)
        written += [p16, write_sidecar("nuclei_fp16", out_dir)]
    return written


# ------------------------------------------------------------------------------------------------ anomaly model

# Held-out clean frames for the calibration of the map scale and the two thresholds: never trained on (training
# uses TRAIN_SEED), and not the evaluation set (evaluate.py uses EVAL_SEED).
CALIB_SEED = common.TRAIN_SEED + 100
# The map scale puts the MAP_QUANTILE of clean pixels' error at 0.5 on the map; the pixel threshold is the
# PIXEL_QUANTILE of clean map pixels (a few specks per clean frame at most); the image threshold sits
# IMAGE_MARGIN above the highest clean image score (the maximum of its map).
MAP_QUANTILE = 0.999
PIXEL_QUANTILE = 0.9999
IMAGE_MARGIN = 0.01


def anomaly_errors(model, imgs: np.ndarray, batch: int = 8) -> np.ndarray:
    """Smoothed reconstruction error maps [N,H,W] (before normalisation) of uint8 frames at the working size."""
    inp = common.SIDECARS["surface_anomaly"]["input"]
    out = []
    with torch.no_grad():
        for i in range(0, len(imgs), batch):
            x = torch.from_numpy(np.stack([common.normalize(im, inp) for im in imgs[i : i + batch]]))
            out.append(model.error(x)[:, 0].numpy())
    return np.concatenate(out)


def calibrate_anomaly(model, n_full: int = 20, n_direct: int = 40) -> dict:
    """Set ``model.scale`` and the sidecar's ``output.threshold`` / ``output.image_threshold`` from held-out
    clean frames (20 full-resolution renders resized as the app does, 40 rendered at the working size)."""
    from .train import data_anomaly

    imgs, _ = data_anomaly(n_full, n_direct, seed=CALIB_SEED)
    e = anomaly_errors(model.eval(), imgs)
    scale = float(np.quantile(e, MAP_QUANTILE))
    model.scale.fill_(scale)
    amap = e / (e + scale)
    scores = amap.reshape(len(amap), -1).max(1)
    cal = {"calib_images": len(imgs), "calib_seed": CALIB_SEED, "map_scale": round(scale, 6),
           "threshold": round(float(np.quantile(amap, PIXEL_QUANTILE)), 4),
           "image_threshold": round(float(min(scores.max() + IMAGE_MARGIN, 0.999)), 4),
           "calib_clean_score_max": round(float(scores.max()), 4)}
    common.SIDECARS["surface_anomaly"]["output"].update(threshold=cal["threshold"],
                                                        image_threshold=cal["image_threshold"])
    common.save_results({"surface_anomaly": cal})
    print(f"surface_anomaly: calibrated on {len(imgs)} held-out clean frames: {cal}", flush=True)
    return cal


def load_checkpoint(name: str) -> torch.nn.Module:
    ckpt = common.RUNS_DIR / f"{name}.pt"
    if not ckpt.exists():
        raise SystemExit(f"no checkpoint {ckpt}; train first: python -m models.training.train {name}")
    model = nets.build_model(name)
    model.load_state_dict(torch.load(ckpt, map_location="cpu", weights_only=True))
    return model.eval()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="+",
                    choices=["surface_defects", "nuclei", "defect_type", "surface_anomaly", "ct_demo"])
    ap.add_argument("--out", type=Path, default=common.MODELS_DIR)
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    try:
        for name in args.names:
            export_named(name, load_checkpoint(name), args.out)
    except ParityError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
