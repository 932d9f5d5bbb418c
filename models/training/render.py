"""Render model predictions blended over the sample images, for a human to look at (not committed).

    .venv/bin/python -m models.training.render [--out /tmp/seglens_overlays]

Each output PNG shows the sample (left) and the prediction overlay (right), downscaled to at most 1400 px wide.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np

from . import common
from .pipeline import open_model


def _hex(c: str):
    c = c.lstrip("#")
    return [int(c[i : i + 2], 16) for i in (0, 2, 4)]


def overlay(img: np.ndarray, mask: np.ndarray, classes: list[dict], alpha: float = 0.55) -> np.ndarray:
    rgb = img if img.ndim == 3 else cv2.cvtColor(img, cv2.COLOR_GRAY2RGB)
    lut = np.zeros((256, 3), np.float32)
    for k, c in enumerate(classes):
        if k and "color" in c:
            lut[k] = _hex(c["color"])
    col = lut[mask]
    on = (mask > 0)[..., None]
    out = np.where(on, (1 - alpha) * rgb + alpha * col, rgb).astype(np.uint8)
    # outline the regions so thin ones stay visible
    edges = cv2.morphologyEx((mask > 0).astype(np.uint8), cv2.MORPH_GRADIENT, np.ones((3, 3), np.uint8)) > 0
    out[edges] = lut[mask][edges].astype(np.uint8) if edges.any() else out[edges]
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("/tmp/seglens_overlays"))
    ap.add_argument("--backend", choices=["auto", "app", "ort"], default="auto")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    runners = {}
    for p in sorted(q for q in common.SAMPLES_DIR.rglob("*") if q.is_file()):
        name = ("surface_defects" if p.name.startswith("surface") else "nuclei" if p.name.startswith("nuclei")
                else "defect_type")
        r = runners.setdefault(name, open_model(name, args.backend))
        bgr = cv2.imread(str(p), cv2.IMREAD_UNCHANGED)
        img = bgr if bgr.ndim == 2 else cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        mask, topk, ms = r.run(img)
        spec = common.SIDECARS[name]
        if mask is not None:
            ov = overlay(img, mask, spec["classes"])
            found = {spec["classes"][k]["name"]: int((mask == k).sum()) for k in np.unique(mask) if k}
            label = f"{name}: {found or 'nothing found'}"
        else:
            ov = (img if img.ndim == 3 else cv2.cvtColor(img, cv2.COLOR_GRAY2RGB)).copy()
            label = " ".join(f"{n} {s:.2f}" for _, n, s in topk)
        left = img if img.ndim == 3 else cv2.cvtColor(img, cv2.COLOR_GRAY2RGB)
        both = np.concatenate([left, ov], 1)
        s = min(1.0, 1400 / both.shape[1])
        if s < 1:
            both = cv2.resize(both, None, fx=s, fy=s, interpolation=cv2.INTER_AREA)
        if both.shape[0] < 300:
            both = cv2.resize(both, None, fx=2, fy=2, interpolation=cv2.INTER_NEAREST)
        both = np.concatenate([np.zeros((28, both.shape[1], 3), np.uint8), both], 0)
        cv2.putText(both, label[:140], (6, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.55, (255, 255, 255), 1, cv2.LINE_AA)
        cv2.imwrite(str(args.out / (p.stem + ".png")), cv2.cvtColor(both, cv2.COLOR_RGB2BGR))
        print(f"{p.name}: {label} ({ms['inference']:.0f} ms)")


if __name__ == "__main__":
    main()
