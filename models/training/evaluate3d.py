"""Held-out evaluation of the 3D demo model (ct3d_demo): whole phantom volumes, sliding window at the model's
spacing, the probabilities resampled back to the native grid, then Dice per class and each lesion's volume.

    .venv/bin/python -m models.training.evaluate3d             # ORT sliding window (+ SegLens's, when importable)
    .venv/bin/python -m models.training.evaluate3d --backend ort

Targets (exit 1 when one is missed): Dice >= 0.95 for lung, bone and lesion on every held-out volume's mean
(N_EVAL volumes of EVAL_SEED, never trained on), and every lesion's volume (the predicted connected component,
26-connectivity, that holds the lesion's centre, counted at native spacing) within 5 % of 4/3·π·r³.

Two backends on the same ONNX file and volumes: ``ort`` is this script's own sliding window (numpy + ONNX Runtime:
the volume resampled linearly to 1.5 mm, CT-normalised, 64³ patches at step 32 with the last one shifted inside,
Gaussian weights σ = patch/8 as MONAI's, softmax probabilities blended, resampled back linearly, argmax); ``app``
is SegLens's ``app.inference.volume3d.predict.predict_volume`` with the sidecar as the app reads it. No torch.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from . import common, common3d, phantom3d

DICE_TARGET = 0.95
VOLUME_TOLERANCE = 0.05
FOREGROUND = (1, 2, 3)


def gaussian_importance(patch, sigma_scale: float = 0.125) -> np.ndarray:
    """MONAI's compute_importance_map(mode='gaussian'): a separable Gaussian, σ = patch × sigma_scale, max 1,
    zeros raised to the smallest non-zero weight."""
    g = np.ones((1, 1, 1), np.float64)
    for axis, n in enumerate(patch):
        x = np.arange(n) - (n - 1) / 2
        shape = [1, 1, 1]
        shape[axis] = n
        g = g * np.exp(-0.5 * (x / (n * sigma_scale)) ** 2).reshape(shape)
    g /= g.max()
    g = np.maximum(g, g[g > 0].min())
    return g.astype(np.float32)


def window_starts(size: int, patch: int, overlap: float) -> list[int]:
    """MONAI's positions: step = patch × (1 − overlap), the last window shifted inside."""
    if size <= patch:
        return [0]
    step = max(1, int(patch * (1 - overlap)))
    n = -(-(size - patch) // step) + 1
    return sorted({min(i * step, size - patch) for i in range(n)})


def softmax(x: np.ndarray, axis: int = 1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sliding_window_ort(sess, image: np.ndarray, patch, overlap: float = 0.5, pad_value: float = 0.0,
                       logit_offset: np.ndarray | None = None) -> np.ndarray:
    """[K, D, H, W] blended softmax probabilities of a normalised [D, H, W] image (padded to the patch);
    ``logit_offset`` [K] is subtracted from each patch's logits first (calibrate3d's search)."""
    shape = image.shape
    padded = np.pad(image, [(0, max(0, p - n)) for n, p in zip(shape, patch)], constant_values=pad_value)
    weight = gaussian_importance(patch)
    name = sess.get_inputs()[0].name
    acc, norm = None, np.zeros(padded.shape, np.float32)
    for d in window_starts(padded.shape[0], patch[0], overlap):
        for h in window_starts(padded.shape[1], patch[1], overlap):
            for w in window_starts(padded.shape[2], patch[2], overlap):
                win = (slice(d, d + patch[0]), slice(h, h + patch[1]), slice(w, w + patch[2]))
                logits = sess.run(None, {name: padded[win][None, None]})[0]
                if logit_offset is not None:
                    logits = logits - logit_offset.reshape(1, -1, 1, 1, 1)
                prob = softmax(logits)[0]
                if acc is None:
                    acc = np.zeros((prob.shape[0], *padded.shape), np.float32)
                acc[(slice(None), *win)] += prob * weight
                norm[win] += weight
    out = acc / norm
    return out[:, : shape[0], : shape[1], : shape[2]]


def ort_session(path):
    """A one-thread CPU ONNX Runtime session (the machine is shared; the figures are not latencies)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.log_severity_level = 1, 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def predict_ort(sess, hu: np.ndarray, spacing, logit_offset: np.ndarray | None = None) -> np.ndarray:
    """Native labels [D, H, W] uint8 of a native HU volume: resample, normalise, slide, resample back, argmax."""
    norm = common3d.SIDECAR["input"]["normalize"]
    shape = phantom3d.model_grid(hu.shape, spacing, common3d.TARGET_SPACING)
    x = common3d.normalize(common3d.resample_linear(hu.astype(np.float32), shape), norm["mean"], norm["std"])
    air = (common3d.CLIP[0] - norm["mean"]) / norm["std"]
    prob = sliding_window_ort(sess, x, common3d.PATCH, common3d.SIDECAR["input"]["tile"]["overlap"], air,
                              logit_offset)
    return np.argmax(common3d.resample_linear(prob, hu.shape), axis=0).astype(np.uint8)


def predict_app(model_path, hu: np.ndarray, spacing, cache: dict) -> np.ndarray:
    """Native labels through SegLens's own 3D inference (app.inference.volume3d.predict.predict_volume)."""
    from app.inference.model.builder import load_spec
    from app.inference.runtime.session import open_session
    from app.inference.volume3d.predict import predict_volume

    if "session" not in cache:
        cache["session"] = open_session(load_spec(model_path), "cpu")
    session = cache["session"]
    pred = predict_volume(hu.astype(np.float32), spacing=tuple(spacing), affine=None, spec=session.spec,
                          run_raw=session.run)
    return np.asarray(pred.labels, np.uint8)


def dice(pred: np.ndarray, truth: np.ndarray, c: int) -> float:
    a, b = pred == c, truth == c
    denom = int(a.sum()) + int(b.sum())
    return 1.0 if denom == 0 else 2.0 * int((a & b).sum()) / denom


def lesion_volumes(pred: np.ndarray, ph: phantom3d.Phantom) -> list[dict]:
    """Each analytic lesion's predicted volume: the 26-connected lesion component holding its centre voxel."""
    from scipy import ndimage

    comps, _ = ndimage.label(pred == phantom3d.LESION, structure=np.ones((3, 3, 3)))
    voxel = float(np.prod(ph.spacing))
    rows = []
    for les in ph.lesions:
        x, y, z = les.center
        k = int(round((z - ph.origin[2]) / ph.spacing[0]))
        r = int(round((y - ph.origin[1]) / ph.spacing[1]))
        c = int(round((x - ph.origin[0]) / ph.spacing[2]))
        comp = comps[k, r, c]
        got = float((comps == comp).sum() * voxel) if comp else 0.0
        rows.append({"radius_mm": round(les.radius, 2), "analytic_ml": round(les.volume_mm3 / 1000, 4),
                     "predicted_ml": round(got / 1000, 4), "error": round(got / les.volume_mm3 - 1, 4)})
    return rows


def evaluate(backend: str, n: int = common3d.N_EVAL, models_dir=common.MODELS_DIR) -> dict:
    model = models_dir / f"{common3d.NAME}.onnx"
    if backend == "ort":
        sess = ort_session(model)
        sess_opts_note = "ORT CPU"
        predict = lambda hu, sp: predict_ort(sess, hu, sp)  # noqa: E731
    else:
        cache: dict = {}
        sess_opts_note = "app.inference.volume3d.predict.predict_volume"
        predict = lambda hu, sp: predict_app(model, hu, sp, cache)  # noqa: E731
    per_volume, lesions, extra = [], [], 0
    t0 = time.time()
    for i in range(n):
        ph = phantom3d.phantom(common.EVAL_SEED, i)
        pred = predict(ph.hu, ph.spacing)
        d = {name: dice(pred, ph.labels, c) for c, name in enumerate(common3d.class_names())}
        per_volume.append(d)
        rows = lesion_volumes(pred, ph)
        lesions += rows
        from scipy import ndimage

        _, found = ndimage.label(pred == phantom3d.LESION, structure=np.ones((3, 3, 3)))
        extra += max(0, found - len(ph.lesions))
        print(f"  volume {i} {ph.hu.shape} spacing {tuple(round(s, 3) for s in ph.spacing)}: "
              + ", ".join(f"{k} {v:.4f}" for k, v in d.items())
              + "; lesion volume errors " + ", ".join(f"{r['error']:+.3f} (r {r['radius_mm']})" for r in rows),
              flush=True)
    names = common3d.class_names()
    mean = {k: round(float(np.mean([d[k] for d in per_volume])), 4) for k in names}
    res = {"eval_backend": backend, "eval_through": sess_opts_note, "eval_seed": common.EVAL_SEED,
           "eval_volumes": n, "dice": mean,
           "dice_min": {k: round(float(min(d[k] for d in per_volume)), 4) for k in names},
           "lesions": len(lesions), "lesion_volume_error_max": round(max(abs(r["error"]) for r in lesions), 4),
           "lesion_volume_error_mean": round(float(np.mean([r["error"] for r in lesions])), 4),
           "lesion_volume_errors": [r["error"] for r in lesions],
           "lesion_radius_mm": [min(r["radius_mm"] for r in lesions), max(r["radius_mm"] for r in lesions)],
           "lesions_missed": sum(r["predicted_ml"] == 0 for r in lesions), "lesion_false_components": extra,
           "eval_seconds": round(time.time() - t0, 1)}
    print(f"ct3d_demo ({backend}): Dice {mean}; lesion volume |error| max {res['lesion_volume_error_max']:.3f} "
          f"over {len(lesions)} lesions; {extra} extra components", flush=True)
    return res


def check_targets(res: dict) -> list[str]:
    fails = [f"{k} Dice {res['dice'][k]} < {DICE_TARGET}" for k in ("lung", "bone", "lesion")
             if res["dice"][k] < DICE_TARGET]
    if res["lesion_volume_error_max"] > VOLUME_TOLERANCE:
        fails.append(f"a lesion volume is off by {res['lesion_volume_error_max']:.1%} (> 5 %)")
    return fails


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["ort", "app", "both"], default="both")
    ap.add_argument("--volumes", type=int, default=common3d.N_EVAL)
    ap.add_argument("--models-dir", type=Path, default=common.MODELS_DIR, help="where ct3d_demo.onnx/.yaml are")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    common3d.load_sidecar_normalize(args.models_dir)
    backends = ["ort", "app"] if args.backend == "both" else [args.backend]
    if args.backend == "both":
        try:
            import app.inference.volume3d.predict  # noqa: F401
        except ImportError:
            print("app.inference.volume3d.predict is not importable: the ORT sliding window only", flush=True)
            backends = ["ort"]
    out, fails = {}, []
    for b in backends:
        res = evaluate(b, args.volumes, args.models_dir)
        out["eval" if b == "ort" else "eval_app"] = res
        fails += [f"{b}: {f}" for f in check_targets(res)]
    if not args.no_save and args.volumes == common3d.N_EVAL and args.models_dir == common.MODELS_DIR:
        common.save_results({common3d.NAME: out})
        from . import card3d

        card3d.update()
    for f in fails:
        print(f"TARGET MISSED: {f}", file=sys.stderr)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
