"""Fill the measured numbers into the model card (models/README.md) from models/training/results.json.

Each model's section holds a block between ``<!-- results:NAME -->`` and ``<!-- /results:NAME -->``;
evaluate.py, bench.py and train.py results are rendered there as a table (the rest of the card is prose).
"""

from __future__ import annotations

import re

from . import common

README = common.MODELS_DIR / "README.md"


def _fmt(v, unit=""):
    return "not measured yet" if v is None else f"{v}{unit}"


def block(name: str, res: dict) -> str:
    r = res.get(name, {})
    rows = []
    if name == "surface_defects" and "iou" in r:
        iou = r["iou"]
        rows.append(("Held-out mean IoU (scratch, pit, stain)",
                     f"**{r['mean_iou']:.3f}** (scratch {iou['scratch']:.3f}, pit {iou['pit']:.3f}, "
                     f"stain {iou['stain']:.3f}); {r['eval_images']} images, seed {r['eval_seed']}"))
    if name == "nuclei" and "iou" in r:
        rows.append(("Held-out foreground IoU / Dice",
                     f"**{r['iou']:.3f}** / {r['dice']:.3f}; {r['eval_images']} fields, seed {r['eval_seed']}"))
    if name == "nuclei_fp16" and "iou" in r:
        rows.append(("Held-out foreground IoU", f"**{r['iou']:.3f}**; {r['eval_images']} fields"))
        rows.append(("Mask agreement with `nuclei` (IoU)", f"**{r['agreement_iou_vs_fp32']:.4f}**"))
    if name == "defect_type" and "accuracy" in r:
        c = r["confusion"]
        rows.append(("Held-out top-1 accuracy", f"**{r['accuracy']:.3f}**; {r['eval_images']} crops, "
                     f"seed {r['eval_seed']}"))
        rows.append(("Confusion (rows truth OK/scratch/pit/stain)", " / ".join(" ".join(map(str, x)) for x in c)))
    if name == "ct_demo" and "iou" in r:
        iou = r["iou"]
        rows.append(("Held-out IoU (lung, bone)",
                     f"**lung {iou['lung']:.3f}**, bone {iou['bone']:.3f} (mean {r['mean_iou']:.3f}); "
                     f"{r['eval_volumes']} phantom volumes x 32 slices, seed {r['eval_seed']}"))
    if name == "surface_anomaly" and "auroc" in r:
        rows.append(("Held-out image AUROC (defective vs clean)",
                     f"**{r['auroc']:.3f}**; {r['eval_defective']} defective + {r['eval_clean']} clean frames, "
                     f"seed {r['eval_seed']}"))
        rows.append((f"Verdict at the image threshold {r['image_threshold']}",
                     f"clean frames OK {100 * r['clean_ok_rate']:.0f} %, defective frames NG "
                     f"{100 * r['defective_ng_rate']:.0f} % (highest clean score {r['clean_score_max']:.3f}, "
                     f"median defective score {r['defective_score_median']:.3f})"))
        rows.append((f"Pixel IoU of map >= {r['threshold']} vs the defect masks",
                     f"**{r['pixel_iou']:.3f}** over the defective frames"))
    if name == "surface_anomaly" and "map_scale" in r:
        rows.append(("Calibration (held-out clean frames)",
                     f"{r['calib_images']} frames, seed {r['calib_seed']}: map scale {r['map_scale']:.4g}, pixel "
                     f"threshold {r['threshold']} (99.99th percentile of clean pixels), image threshold "
                     f"{r['image_threshold']} (highest clean score {r['calib_clean_score_max']} + 0.01)"))
    if name == "surface_instances" and "mask_ap50" in r:
        m, b = r["mask_ap50"], r["box_ap50"]
        rows.append((f"Held-out mask AP50 (scratch, pit, stain), at the sidecar's conf {r['conf']}, NMS IoU {r['iou']}",
                     f"**{r['mask_ap50_mean']:.3f}** (scratch {m['scratch']:.3f}, pit {m['pit']:.3f}, stain "
                     f"{m['stain']:.3f}); {r['eval_images']} frames, seed {r['eval_seed']}"))
        rows.append(("Held-out box AP50", f"**{r['box_ap50_mean']:.3f}** (scratch {b['scratch']:.3f}, pit "
                     f"{b['pit']:.3f}, stain {b['stain']:.3f})"))
        rows.append(("Held-out mask AP50:95", f"{r['mask_ap50_95_mean']:.3f}"))
        t, f = r["instances_truth"], r["instances_found"]
        rows.append(("Objects in the held-out frames / instances found", ", ".join(f"{k} {t[k]} / {f[k]}" for k in t)))
        if "defaults" in r:
            d = r["defaults"]
            dm = d["mask_ap50"]
            rows.append(("The same at Ultralytics' defaults (conf 0.25, NMS IoU 0.7)",
                         f"mask AP50 {d['mask_ap50_mean']:.3f} (scratch {dm['scratch']:.3f}, pit {dm['pit']:.3f}, "
                         f"stain {dm['stain']:.3f}), box AP50 {d['box_ap50_mean']:.3f}; found "
                         + ", ".join(f"{k} {v}" for k, v in d["instances_found"].items())))
    if "eval_backend" in r:
        rows.append(("Evaluated through", "the app pipeline (`app.inference`)" if r["eval_backend"] == "app"
                     else "SegLens's own pipeline (`app.inference.image.pipeline.run_image`), scored by "
                     "`app.runs.labels.metrics` (COCOeval's AP)" if r["eval_backend"] == "app-yolo"
                     else "ONNX Runtime directly, slices windowed by the app's `apply_window` (HU arrays, no decode)"
                     if name == "ct_demo" else
                     "ONNX Runtime directly (sidecar preprocessing re-implemented in models/training)"))
    if "latency_ms_median" in r:
        rows.append((f"CPU latency, median of {r['latency_runs']} ({r['latency_image']} image)",
                     f"**{r['latency_ms_median']} ms** inference, {r['latency_total_ms_median']} ms with pre/post "
                     f"({r['latency_cpu']}, {r['latency_backend']})"))
    if "train_minutes" in r:
        cpu = f", {r['train_cpu_minutes']} CPU-min" if "train_cpu_minutes" in r else ""
        note = f"; {r['train_note']}" if r.get("train_note") else ""
        rows.append(("Training from scratch (data + training + export)",
                     f"**{r['train_minutes']} min** wall{cpu} ({r['train_threads']} threads, {r['train_steps']} "
                     f"steps){note}"))
    path = common.MODELS_DIR / f"{name}.onnx"
    if path.exists():
        rows.append(("File", f"`{name}.onnx` {path.stat().st_size / 1e6:.2f} MB + `{name}.yaml`"))
    if not rows:
        return "_not measured yet_"
    return "| | |\n|---|---|\n" + "\n".join(f"| {a} | {b} |" for a, b in rows)


def update() -> None:
    if not README.exists():
        return
    res = common.load_results()
    text = README.read_text()
    for name in ("surface_defects", "nuclei", "nuclei_fp16", "defect_type", "surface_anomaly", "ct_demo",
                 "surface_instances"):
        pat = re.compile(rf"(<!-- results:{name} -->\n).*?(\n<!-- /results:{name} -->)", re.S)
        text = pat.sub(lambda m, n=name: m.group(1) + block(n, res) + m.group(2), text)
    README.write_text(text)


if __name__ == "__main__":
    update()
