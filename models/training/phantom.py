"""Synthetic chest-CT phantom (numpy + OpenCV, no torch): axial 256x256 slices in Hounsfield units + labels.

Each volume draws its own anatomy (``volume_params``): an elliptical body (soft tissue ~40 HU with a thin
subcutaneous fat layer, air -1000 HU outside), two lungs (ellipses ~-850 HU with a few vessel dots) whose size
follows a smooth profile along z (small at the apex, largest mid-chest, small at the base, absent above and
below), a vertebra (a bone disc, posterior midline) and the ribs (a thin elliptical ring broken into segments),
all bone ~+700 HU. Body size, lung size, position (+-10 px) and a small rotation vary per volume.

Labels (the ``ct_demo`` classes): 0 background (air and soft tissue), 1 lung, 2 bone.

Geometry: image rows go posterior (row index grows towards the back, as in an axial DICOM slice with
ImageOrientationPatient 1\\0\\0\\0\\1\\0); columns go to the patient's left.
"""

from __future__ import annotations

import cv2
import numpy as np

from . import synth

SIZE = 256
AIR = -1000.0
WINDOW = (-300.0, 1800.0)  # (center, width): lung-friendly wide window; the ct_demo sidecar's input.window
T_RANGE = (-0.1, 1.1)  # lung profile parameter t: lungs exist for t in (LUNG_T0, LUNG_T1)
LUNG_T0, LUNG_T1 = 0.02, 0.98


def volume_params(rng: np.random.Generator) -> dict:
    """The anatomy of one phantom volume (all sizes in pixels, angles in radians)."""
    ax, by = rng.uniform(92, 116), rng.uniform(70, 88)
    return {
        "cx": SIZE / 2 + rng.uniform(-10, 10), "cy": SIZE / 2 + rng.uniform(-10, 10),
        "ax": ax, "by": by, "rot": np.radians(rng.uniform(-6, 6)),
        "lung_dx": rng.uniform(0.42, 0.48) * ax, "lung_dy": -rng.uniform(0.06, 0.14) * by,
        "lung_a": rng.uniform(0.28, 0.34) * ax, "lung_b": rng.uniform(0.52, 0.62) * by,
        "lung_asym": rng.uniform(0.85, 1.0),  # the patient's left lung (image right) is a little smaller: heart
        "lung_power": rng.uniform(0.5, 0.8),  # shape of the apex-to-base size profile
        "vert_r": rng.uniform(10, 14), "vert_dy": rng.uniform(0.62, 0.7) * by,
        "rib_r": rng.uniform(0.88, 0.92), "rib_w": rng.uniform(2.5, 4.0), "ribs": int(rng.integers(7, 11)),
        "rib_phase": rng.uniform(0, 2 * np.pi), "rib_gap": rng.uniform(0.2, 0.45),
        "tissue": rng.uniform(25, 55), "fat": rng.uniform(-120, -80), "lung": rng.uniform(-880, -820),
        "bone": rng.uniform(600, 800), "marrow": rng.uniform(250, 400), "noise": rng.uniform(10, 20),
    }


def lung_scale(p: dict, t: float) -> float:
    """Relative lung size at profile position t: 0 outside the lungs, small at apex/base, 1 mid-chest."""
    if not LUNG_T0 < t < LUNG_T1:
        return 0.0
    u = (t - LUNG_T0) / (LUNG_T1 - LUNG_T0)
    return float(np.sin(np.pi * u) ** p["lung_power"])


def render_slice(p: dict, t: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(HU float32 256x256, label uint8 256x256) of the volume ``p`` at profile position ``t``."""
    yy, xx = np.mgrid[:SIZE, :SIZE].astype(np.float32)
    c, s = np.cos(p["rot"]), np.sin(p["rot"])
    u = (xx - p["cx"]) * c + (yy - p["cy"]) * s  # body frame: u to the patient's left, v posterior
    v = -(xx - p["cx"]) * s + (yy - p["cy"]) * c
    body_scale = 0.92 + 0.08 * np.sin(np.pi * np.clip(t, 0, 1))  # the chest is a little narrower at the ends
    ax, by = p["ax"] * body_scale, p["by"] * body_scale
    r_body = (u / ax) ** 2 + (v / by) ** 2
    body = r_body <= 1.0
    label = np.zeros((SIZE, SIZE), np.uint8)
    hu = np.full((SIZE, SIZE), AIR, np.float32)
    hu[body] = p["tissue"]
    hu[body & (r_body > 0.93**2)] = p["fat"]

    ls = lung_scale(p, t)
    if ls > 0:
        for side, k in ((-1, 1.0), (1, p["lung_asym"])):
            lu, lv = u - side * p["lung_dx"], v - p["lung_dy"]
            a, b = p["lung_a"] * ls * k, p["lung_b"] * (0.35 + 0.65 * ls) * k
            if a < 2 or b < 2:
                continue
            lung = (lu / a) ** 2 + (lv / b) ** 2 <= 1.0
            label[lung] = 1
            hu[lung] = p["lung"]
            ys, xs = np.nonzero(lung)  # vessels: small soft-tissue dots inside the lung (still lung)
            for _ in range(int(rng.integers(4, 16)) if len(ys) > 50 else 0):
                j = int(rng.integers(len(ys)))
                cv2.circle(hu, (int(xs[j]), int(ys[j])), int(rng.integers(1, 3)), float(rng.uniform(-80, 40)), -1)

    # ribs: a thin elliptical ring just inside the body wall, broken into ``ribs`` segments
    ring = np.abs(np.sqrt(r_body) - p["rib_r"]) * min(ax, by) <= p["rib_w"] / 2
    ang = np.arctan2(v / by, u / ax)
    on = np.cos(p["ribs"] * ang + p["rib_phase"] + 6 * t) > -1 + 2 * p["rib_gap"]
    ribs = ring & on & (v < 0.85 * by)  # no ribs right behind the spine
    # vertebra: a disc on the posterior midline (cortical rim + marrow), with a spinous process behind it
    rv = np.sqrt(u**2 + (v - p["vert_dy"] * body_scale) ** 2)
    vert = rv <= p["vert_r"]
    spinous = (np.abs(u) <= 3) & (v > p["vert_dy"] * body_scale) & (v < p["vert_dy"] * body_scale + p["vert_r"] + 9)
    bone = (ribs | vert | spinous) & body
    label[bone] = 2
    hu[bone] = p["bone"]
    hu[vert & (rv <= p["vert_r"] - 2.5)] = p["marrow"]

    hu = cv2.GaussianBlur(hu, (0, 0), 0.7)  # scanner point-spread function
    noise = rng.normal(0, p["noise"], hu.shape).astype(np.float32)
    noise[label == 1] *= 1.5
    hu = np.where(body, hu + noise, AIR)
    return hu, label


def volume(seed: int, index: int, n_slices: int = 32, t_range=(-0.06, 1.06)) -> tuple[np.ndarray, np.ndarray]:
    """(HU int16 [Z,256,256], labels uint8 [Z,256,256]) of phantom ``index`` of data set ``seed``; slices evenly
    spaced in t (head to feet), the first and last ones above/below the lungs."""
    rng = synth.rng_for(seed, index, "ct_phantom")
    p = volume_params(rng)
    hus, labs = zip(*(render_slice(p, t, rng) for t in np.linspace(*t_range, n_slices)))
    return np.rint(np.stack(hus)).astype(np.int16), np.stack(labs)


def random_slices(seed: int, index: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` slices of phantom ``index`` at random positions t (training/evaluation pools)."""
    rng = synth.rng_for(seed, index, "ct_slices")
    p = volume_params(rng)
    hus, labs = zip(*(render_slice(p, float(rng.uniform(*T_RANGE)), rng) for _ in range(n)))
    return np.rint(np.stack(hus)).astype(np.int16), np.stack(labs)


def windowed(hu: np.ndarray) -> np.ndarray:
    """uint8 grey levels the model sees: the app's own window function with the sidecar's input.window."""
    from app.io.window import apply_window

    return apply_window(hu, *WINDOW)
