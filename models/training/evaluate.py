"""Metrics of the bundled models on a held-out synthetic set (seed common.EVAL_SEED, never used in training).

    .venv/bin/python -m models.training.evaluate            # all models, through the app pipeline
    .venv/bin/python -m models.training.evaluate nuclei --backend ort

Images go through ``app.inference`` (decode-free: the generated uint8 arrays) exactly as the app runs them:
sidecar preprocessing, the ONNX model, postprocessing, mask resized back to the image size. IoU is computed
at the image's own resolution and accumulated over the whole set (sum of intersections / sum of unions).

* surface_defects: IoU per defect class and their mean (targets: mean >= 0.80), 40 images, mostly 1920x1080
* nuclei: foreground IoU (>= 0.85), 60 fields of 256-768 px; nuclei_fp16: the same, plus agreement of its
  masks with the float32 model's masks (IoU >= 0.98)
* defect_type: top-1 accuracy (>= 0.95) on 400 crops, 100 per class, and the confusion matrix
* ct_demo: IoU of lung and bone (target: lung >= 0.90) over 10 synthetic chest phantoms x 32 slices, through
  ONNX Runtime with the app's window function (the app pipeline takes decoded images, not HU arrays)
* surface_instances: mask AP50 per class and its mean (>= 0.50), box AP50, mask AP50:95, 60 frames mostly
  1920x1080, through SegLens's YOLO path (instances_eval)
* surface_anomaly: image-level AUROC of the image score, defective vs clean frames (>= 0.95), 40 + 40 frames
  mostly 1920x1080; the verdict (score >= image threshold) on both; pixel IoU of the thresholded map (map >=
  output.threshold) vs the union of the defect masks, over the defective frames

Results go to models/training/results.json and into the model card (models/README.md). Exit code 1 when a
target is missed.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from . import card, common
from .pipeline import open_model

TARGETS = {"surface_defects": 0.80, "nuclei": 0.85, "nuclei_fp16_agreement": 0.98, "defect_type": 0.95,
           "surface_anomaly": 0.95, "ct_demo": 0.90, "surface_instances": 0.50}


def _iou(inter, union):
    return float(inter / union) if union else float("nan")


def eval_surface(n: int, backend: str) -> dict:
    r = open_model("surface_defects", backend)
    inter, union = np.zeros(4), np.zeros(4)
    for i in range(n):
        img, lab = common.surface_item(common.EVAL_SEED, i)
        mask, _, _ = r.run(img)
        for k in range(1, 4):
            a, b = mask == k, lab == k
            inter[k] += np.logical_and(a, b).sum()
            union[k] += np.logical_or(a, b).sum()
    per = {c: round(_iou(inter[k], union[k]), 4) for k, c in enumerate(common.class_names("surface_defects"))
           if k}
    res = {"eval_images": n, "iou": per, "mean_iou": round(float(np.mean(list(per.values()))), 4),
           "eval_backend": r.backend, "eval_seed": common.EVAL_SEED}
    print(f"surface_defects: IoU {per}, mean {res['mean_iou']:.4f} ({r.backend})")
    return {"surface_defects": res}


def eval_nuclei(n: int, backend: str) -> dict:
    r32, r16 = open_model("nuclei", backend), open_model("nuclei_fp16", backend)
    acc = np.zeros((3, 2))  # rows: fp32 vs GT, fp16 vs GT, fp16 vs fp32; cols: inter, union
    dice_num = dice_den = 0.0
    for i in range(n):
        img, gt = common.nuclei_item(common.EVAL_SEED, i)
        m32 = r32.run(img)[0] > 0
        m16 = r16.run(img)[0] > 0
        g = gt > 0
        for row, (a, b) in enumerate(((m32, g), (m16, g), (m16, m32))):
            acc[row] += (np.logical_and(a, b).sum(), np.logical_or(a, b).sum())
        dice_num += 2 * np.logical_and(m32, g).sum()
        dice_den += m32.sum() + g.sum()
    res32 = {"eval_images": n, "iou": round(_iou(*acc[0]), 4), "dice": round(dice_num / max(dice_den, 1), 4),
             "eval_backend": r32.backend, "eval_seed": common.EVAL_SEED}
    res16 = {"eval_images": n, "iou": round(_iou(*acc[1]), 4), "agreement_iou_vs_fp32": round(_iou(*acc[2]), 4),
             "eval_backend": r16.backend, "eval_seed": common.EVAL_SEED}
    print(f"nuclei: IoU {res32['iou']:.4f}, Dice {res32['dice']:.4f}; nuclei_fp16: IoU {res16['iou']:.4f}, "
          f"agreement with float32 masks {res16['agreement_iou_vs_fp32']:.4f} ({r32.backend})")
    return {"nuclei": res32, "nuclei_fp16": res16}


def eval_defect_type(n: int, backend: str) -> dict:
    r = open_model("defect_type", backend)
    conf = np.zeros((4, 4), int)
    for i in range(n):
        img, y = common.crop_item(common.EVAL_SEED, i)
        _, topk, _ = r.run(img)
        conf[y, topk[0][0]] += 1
    acc = float(np.trace(conf) / conf.sum())
    res = {"eval_images": n, "accuracy": round(acc, 4), "confusion": conf.tolist(), "eval_backend": r.backend,
           "eval_seed": common.EVAL_SEED}
    print(f"defect_type: accuracy {acc:.4f} ({r.backend}); confusion (rows = truth OK/scratch/pit/stain):")
    print("\n".join("   " + " ".join(f"{v:4d}" for v in row) for row in conf))
    return {"defect_type": res}


def auroc(scores, labels) -> float:
    """Area under the ROC curve (probability that a positive scores above a negative; ties count half)."""
    s, y = np.asarray(scores, float), np.asarray(labels, bool)
    pos, neg = s[y][:, None], s[~y][None, :]
    return float(((pos > neg) + 0.5 * (pos == neg)).mean())


def eval_anomaly(n: int, backend: str) -> dict:
    """n clean + n defective held-out frames (EVAL_SEED, full resolution, mostly 1920x1080)."""
    import yaml

    r = open_model("surface_anomaly", backend)
    out = yaml.safe_load((common.MODELS_DIR / "surface_anomaly.yaml").read_text())["output"]
    scores, labels = [], []
    inter = union = inter_all = union_all = 0
    for defective in (False, True):
        for i in range(n):
            img, gt = common.anomaly_item(common.EVAL_SEED, i, defective)
            mask, _, _ = r.run(img)
            scores.append(r.score)
            labels.append(defective)
            a, b = mask > 0, gt > 0
            inter_all += np.logical_and(a, b).sum()
            union_all += np.logical_or(a, b).sum()
            if defective:
                inter += np.logical_and(a, b).sum()
                union += np.logical_or(a, b).sum()
    s, y = np.asarray(scores), np.asarray(labels)
    ng = s >= out["image_threshold"]
    res = {"eval_images": 2 * n, "eval_clean": n, "eval_defective": n, "auroc": round(auroc(s, y), 4),
           "pixel_iou": round(_iou(inter, union), 4), "pixel_iou_all": round(_iou(inter_all, union_all), 4),
           "clean_ok_rate": round(float((~ng[~y]).mean()), 4), "defective_ng_rate": round(float(ng[y].mean()), 4),
           "clean_score_max": round(float(s[~y].max()), 4), "defective_score_median": round(float(np.median(s[y])), 4),
           "threshold": out["threshold"], "image_threshold": out["image_threshold"],
           "eval_backend": r.backend, "eval_seed": common.EVAL_SEED}
    print(f"surface_anomaly: AUROC {res['auroc']:.4f}; at image threshold {out['image_threshold']}: clean OK "
          f"{res['clean_ok_rate']:.3f}, defective NG {res['defective_ng_rate']:.3f}; pixel IoU at "
          f"{out['threshold']} {res['pixel_iou']:.4f} ({r.backend})")
    return {"surface_anomaly": res}


def eval_ct(n: int, backend: str) -> dict:
    """Held-out phantom volumes (32 slices each, head to feet): each slice windowed with the app's own
    apply_window (input.window) and run through ONNX Runtime at 256x256 (the slices are already the working
    size, so the app's resize is the identity); IoU per class over all slices."""
    from . import export, phantom

    sess = export.ort_session(common.MODELS_DIR / "ct_demo.onnx")
    inp = common.SIDECARS["ct_demo"]["input"]
    inter, union = np.zeros(3), np.zeros(3)
    for i in range(n):
        hu, lab = phantom.volume(common.EVAL_SEED, i)
        x = np.stack([common.normalize(w, inp) for w in phantom.windowed(hu)])
        mask = sess.run(None, {sess.get_inputs()[0].name: x})[0].argmax(1)
        for k in range(1, 3):
            a, b = mask == k, lab == k
            inter[k] += np.logical_and(a, b).sum()
            union[k] += np.logical_or(a, b).sum()
    per = {c: round(_iou(inter[k], union[k]), 4) for k, c in enumerate(common.class_names("ct_demo")) if k}
    res = {"eval_volumes": n, "eval_slices": 32 * n, "iou": per,
           "mean_iou": round(float(np.mean(list(per.values()))), 4), "eval_backend": "ort",
           "eval_seed": common.EVAL_SEED}
    print(f"ct_demo: IoU {per}, mean {res['mean_iou']:.4f} (ort)")
    return {"ct_demo": res}


def eval_instances(n: int, backend: str) -> dict:
    """Through SegLens's YOLO path whatever the backend (the file is a YOLOv8-seg export): instances_eval."""
    from . import instances_eval

    return instances_eval.evaluate(n)


def check_targets(res: dict) -> list[str]:
    fails = []
    if "surface_defects" in res and res["surface_defects"].get("mean_iou", 0) < TARGETS["surface_defects"]:
        fails.append(f"surface_defects mean IoU {res['surface_defects']['mean_iou']} < 0.80")
    if "nuclei" in res and res["nuclei"].get("iou", 0) < TARGETS["nuclei"]:
        fails.append(f"nuclei IoU {res['nuclei']['iou']} < 0.85")
    if "nuclei_fp16" in res and res["nuclei_fp16"].get("agreement_iou_vs_fp32", 0) < 0.98:
        fails.append(f"nuclei_fp16 agreement {res['nuclei_fp16']['agreement_iou_vs_fp32']} < 0.98")
    if "defect_type" in res and res["defect_type"].get("accuracy", 0) < TARGETS["defect_type"]:
        fails.append(f"defect_type accuracy {res['defect_type']['accuracy']} < 0.95")
    if "surface_anomaly" in res and res["surface_anomaly"].get("auroc", 0) < TARGETS["surface_anomaly"]:
        fails.append(f"surface_anomaly AUROC {res['surface_anomaly']['auroc']} < 0.95")
    if "ct_demo" in res and res["ct_demo"].get("iou", {}).get("lung", 0) < TARGETS["ct_demo"]:
        fails.append(f"ct_demo lung IoU {res['ct_demo']['iou']['lung']} < 0.90")
    if "surface_instances" in res and res["surface_instances"].get("mask_ap50_mean", 0) < TARGETS["surface_instances"]:
        fails.append(f"surface_instances mask AP50 {res['surface_instances']['mask_ap50_mean']} < 0.50")
    return fails


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*",
                    help="surface_defects, nuclei, defect_type, surface_anomaly, ct_demo, surface_instances "
                         "(default: all)")
    ap.add_argument("--backend", choices=["auto", "app", "ort"], default="auto")
    ap.add_argument("--n", type=int, default=None, help="number of held-out images (default per model)")
    ap.add_argument("--no-card", action="store_true", help="do not write results.json / README.md")
    args = ap.parse_args(argv)
    fns = {"surface_defects": (eval_surface, 40), "nuclei": (eval_nuclei, 60), "defect_type": (eval_defect_type, 400),
           "surface_anomaly": (eval_anomaly, 40), "ct_demo": (eval_ct, 10), "surface_instances": (eval_instances, 60)}
    res = {}
    names = args.names or list(fns)
    unknown = set(names) - set(fns)
    if unknown:
        ap.error(f"unknown model(s) {sorted(unknown)}; choose from {list(fns)}")
    for name in names:
        t = time.time()
        fn, n = fns[name]
        res.update(fn(args.n or n, args.backend))
        print(f"  ({time.time() - t:.0f} s)")
    if not args.no_card and args.n is None:
        common.save_results(res)
        card.update()
    fails = check_targets(res)
    for f in fails:
        print(f"TARGET MISSED: {f}", file=sys.stderr)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
