"""Fill the ct3d_demo numbers into its model card (models/README.md, the block between ``<!-- results:ct3d_demo -->``
and ``<!-- /results:ct3d_demo -->``) from models/training/results.json; evaluate3d.py calls it after saving.

    .venv/bin/python -m models.training.card3d
"""

from __future__ import annotations

import re

from . import common, common3d

README = common.MODELS_DIR / "README.md"


def _eval_rows(r: dict, label: str) -> list[tuple[str, str]]:
    d, lo = r["dice"], r["dice_min"]
    fg = ("lung", "bone", "lesion")
    return [
        (f"Held-out Dice, mean of {r['eval_volumes']} volumes ({label})",
         ", ".join(f"{'**' if k == 'lesion' else ''}{k} {d[k]:.3f}{'**' if k == 'lesion' else ''}" for k in fg)
         + " (worst volume: " + ", ".join(f"{k} {lo[k]:.3f}" for k in fg) + f"); seed {r['eval_seed']}"),
        (f"Lesion volumes vs 4/3·π·r³ ({label})",
         f"**max absolute error {r['lesion_volume_error_max']:.1%}**, mean error {r['lesion_volume_error_mean']:+.1%}; "
         f"{r['lesions']} lesions of radius {r['lesion_radius_mm'][0]:.1f}–{r['lesion_radius_mm'][1]:.1f} mm, "
         f"{r['lesions_missed']} missed, {r['lesion_false_components']} extra components"),
    ]


def block(res: dict) -> str:
    r = res.get(common3d.NAME, {})
    rows: list[tuple[str, str]] = []
    if "eval" in r:
        rows += _eval_rows(r["eval"], "the recipe's ORT sliding window")
    if "eval_app" in r:
        rows += _eval_rows(r["eval_app"], "SegLens's `predict_volume`")
    if "lesion_logit_offset" in r:
        rows.append(("Lesion calibration (`calibrate3d.py`)",
                     f"lesion logit offset {r['lesion_logit_offset']} fitted on {r['calib_volumes']} calibration "
                     f"volumes (seed {r['calib_seed']}, {r['calib_lesions']} lesions): mean volume error "
                     f"{r['calib_volume_error_mean_before']:+.1%} before, {r['calib_volume_error_mean_after']:+.1%} "
                     "after"))
    if "train_minutes" in r:
        rows.append(("Training from scratch (data + training + export)",
                     f"**{r['train_minutes']} min** wall, {r['train_cpu_minutes']} CPU-min ({r['train_threads']} "
                     f"thread, {r['train_steps']} steps of {r['train_batch']} x {r['train_crop'][0]}³ crops, "
                     f"{r['train_volumes']} volumes)"))
    onnx = common.MODELS_DIR / f"{common3d.NAME}.onnx"
    if onnx.exists():
        rows.append(("File", f"`{onnx.name}` {onnx.stat().st_size / 1e6:.2f} MB + `{common3d.NAME}.yaml`"))
    return "\n".join(["| | |", "|---|---|", *(f"| {a} | {b} |" for a, b in rows)])


def update() -> None:
    if not README.exists():
        return
    name = common3d.NAME
    pat = re.compile(rf"(<!-- results:{name} -->\n).*?(\n<!-- /results:{name} -->)", re.S)
    text = README.read_text()
    README.write_text(pat.sub(lambda m: m.group(1) + block(common.load_results()) + m.group(2), text))


if __name__ == "__main__":
    update()
