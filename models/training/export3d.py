"""PyTorch -> ONNX export of the 3D demo model (ct3d_demo), with the ONNX Runtime parity check and its sidecar.

    .venv/bin/python -m models.training.export3d        # re-export models/training/runs/ct3d_demo.pt

The dynamo exporter (onnxscript), opset 17, dynamic batch, D, H and W, one self-contained file
(``external_data=False``), input ``[N,1,D,H,W]`` float32 -> logits ``[N,4,D,H,W]``. The sidecar
``ct3d_demo.yaml`` carries the 3D keys (input.patch, spacing, axes, normalize, tile) with the training set's
mean/std. Parity: max |ONNX Runtime - PyTorch| <= 1e-4 on a real phantom patch and on random inputs of several
sizes, else ParityError (exit code 1).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
import yaml

from . import common, common3d, nets3d
from .export import FP32_TOL, OPSET, ParityError, _SidecarDumper, finish_export, ort_session

__all__ = ["ParityError", "export_ct3d", "export_onnx3d"]


def export_onnx3d(model: torch.nn.Module, path: Path, *, classes: list[str], title: str) -> Path:
    """Export ``model`` (eval mode) with dynamic N, D, H, W; class names in metadata_props['classes']."""
    model = model.eval()
    x = torch.zeros(1, 1, 32, 48, 40)
    dyn = torch.export.Dim.DYNAMIC
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), str(path), opset_version=OPSET, dynamo=True, external_data=False,
                          input_names=["input"], output_names=["logits"],
                          dynamic_shapes={"x": {0: dyn, 2: dyn, 3: dyn, 4: dyn}}, verbose=False)
    return finish_export(path, {0: "batch", 2: "depth", 3: "height", 4: "width"}, classes=classes, title=title)


def parity_inputs(mean: float, std: float) -> list[np.ndarray]:
    """A 64³ patch of a real phantom (PARITY_SEED, normalised as the sidecar says) and random inputs."""
    hu, _, _ = common3d.model_item(common.PARITY_SEED, 0)
    d, h, w = (max(0, (n - 64) // 2) for n in hu.shape)
    x = common3d.normalize(hu[d:d + 64, h:h + 64, w:w + 64], mean, std)[None, None]
    rng = np.random.default_rng(common.PARITY_SEED)
    return [x, rng.standard_normal((2, 1, 16, 40, 24)).astype(np.float32),
            rng.standard_normal((1, 1, 48, 32, 56)).astype(np.float32)]


def check_parity(model: torch.nn.Module, path: Path, inputs: list[np.ndarray], tol: float = FP32_TOL) -> float:
    sess = ort_session(path)
    name = sess.get_inputs()[0].name
    worst = 0.0
    for x in inputs:
        with torch.no_grad():
            ref = model.eval()(torch.from_numpy(x)).numpy()
        out = sess.run(None, {name: x})[0]
        if out.shape != ref.shape:
            raise ParityError(f"{path.name}: output shape {out.shape} != PyTorch {ref.shape} for input {x.shape}")
        diff = float(np.abs(out - ref).max())
        print(f"  parity {path.name} input {tuple(x.shape)}: max|diff| = {diff:.2e} (tol {tol:g})", flush=True)
        if not np.isfinite(diff) or diff > tol:
            raise ParityError(f"PARITY FAILED for {path.name}: ONNX Runtime differs from PyTorch by {diff:.3g} "
                              f"(> {tol:g}) for input shape {tuple(x.shape)}")
        worst = max(worst, diff)
    return worst


def write_sidecar(out_dir: Path) -> Path:
    p = out_dir / f"{common3d.NAME}.yaml"
    body = yaml.dump(common3d.SIDECAR, Dumper=_SidecarDumper, sort_keys=False, width=110)
    p.write_text(f"# Sidecar of {common3d.NAME}.onnx, written by models/training/export3d.py "
                 f"(see models/README.md)\n{body}")
    return p


def export_ct3d(model: torch.nn.Module, out_dir: Path = common.MODELS_DIR) -> list[Path]:
    """Export, check parity, write the sidecar (the normalisation's mean/std must already be in SIDECAR)."""
    norm = common3d.SIDECAR["input"]["normalize"]
    path = export_onnx3d(model, Path(out_dir) / f"{common3d.NAME}.onnx", classes=common3d.class_names(),
                         title=common3d.SIDECAR["name"])
    worst = check_parity(model, path, parity_inputs(norm["mean"], norm["std"]))
    print(f"{path.name}: parity OK (max|diff| {worst:.2e}), {path.stat().st_size / 1e6:.2f} MB", flush=True)
    return [path, write_sidecar(Path(out_dir))]


def load_checkpoint() -> torch.nn.Module:
    ckpt = common.RUNS_DIR / f"{common3d.NAME}.pt"
    if not ckpt.exists():
        raise SystemExit(f"no checkpoint {ckpt}; train first: python -m models.training.train3d")
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    model = nets3d.UNet3D()
    model.load_state_dict(state["state"])
    common3d.SIDECAR["input"]["normalize"].update(mean=state["mean"], std=state["std"])
    return model.eval()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=common.MODELS_DIR)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    try:
        export_ct3d(load_checkpoint(), args.out)
    except ParityError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
