"""Synthetic chest-CT phantom in 3D (numpy + OpenCV, no torch): a volume in Hounsfield units at an anisotropic
native spacing, its labels, and the exact (analytic) anatomy behind them.

Each volume draws its own anatomy (``volume_params``, all sizes in mm, so the phantom is the same body whatever
the voxel grid): an elliptic-cylinder body (soft tissue 25-55 HU, a thin fat layer, air -1000 HU outside) that
narrows a little towards both ends, two lungs (elliptical cross-sections, -880 to -820 HU) whose size follows a
smooth profile along z (small at the apex, largest mid-chest, small at the base, absent above and below), a
vertebral column (a cylinder with a marrow core and a spinous process on the posterior midline) and ribs (hoops
just inside the body wall, broken in front and behind the spine), all bone 600-800 HU, and 2-4 spherical
"lesions" (soft tissue 10-60 HU) of known centre and radius, each wholly inside a lung.

Labels (the ``ct3d_demo`` classes): 0 background (air and soft tissue), 1 lung, 2 bone, 3 lesion.

Grid: the native array is ``[k, row, col]`` = (D, H, W), SegLens's convention: ``spacing`` = (slice step, row
spacing, column spacing) mm, 2.5-3 mm slices and 0.7-0.9 mm pixels, varying per volume. Patient frame (mm, LPS as
in DICOM): x = column direction (to the patient's left), y = row direction (posterior), z = slice direction
(superior); voxel (k, row, col) sits at ``origin + (col, row, k) * spacing``.

The image is rendered at voxel centres (point sampling along z, a slight in-plane blur for the scanner's
point-spread, Gaussian noise); ``labels_at`` gives the class at any points, so a training target can be computed
on the model's own grid (``coverage``: the fraction of each voxel that each class covers).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from . import synth

AIR = -1000.0
FOV_MM = 150.0  # in-plane field of view (the body is 116-136 mm wide)
CLASSES = ("background", "lung", "bone", "lesion")
LUNG, BONE, LESION = 1, 2, 3


@dataclass(frozen=True)
class Lesion:
    center: tuple[float, float, float]  # (x, y, z) mm in the patient frame
    radius: float  # mm

    @property
    def volume_mm3(self) -> float:
        return 4.0 / 3.0 * np.pi * self.radius**3


@dataclass(frozen=True)
class Phantom:
    hu: np.ndarray  # int16 [D, H, W]
    labels: np.ndarray  # uint8 [D, H, W] (the class at each voxel centre)
    spacing: tuple[float, float, float]  # mm along D, H, W
    origin: tuple[float, float, float]  # (x, y, z) mm of voxel (0, 0, 0)
    lesions: tuple[Lesion, ...]
    params: dict


def volume_params(rng: np.random.Generator) -> dict:
    """The anatomy of one phantom (mm, radians); lesions are placed by ``place_lesions``."""
    ax, by = rng.uniform(58, 68), rng.uniform(44, 52)
    length = rng.uniform(120, 150)  # lungs' extent along z
    return {
        "cx": rng.uniform(-5, 5), "cy": rng.uniform(-5, 5), "ax": ax, "by": by, "rot": np.radians(rng.uniform(-6, 6)),
        "z_lo": -length / 2, "z_hi": length / 2,
        "lung_dx": rng.uniform(0.44, 0.48) * ax, "lung_dy": -rng.uniform(0.06, 0.12) * by,
        "lung_a": rng.uniform(0.34, 0.38) * ax, "lung_b": rng.uniform(0.56, 0.62) * by,
        "lung_asym": rng.uniform(0.88, 1.0), "lung_power": rng.uniform(0.5, 0.8),
        "vert_r": rng.uniform(11, 14), "vert_dy": rng.uniform(0.64, 0.7) * by,
        "rib_r": rng.uniform(0.86, 0.89), "rib_w": rng.uniform(5.0, 7.0), "rib_h": rng.uniform(7.0, 10.0),
        "rib_pitch": rng.uniform(19.0, 24.0), "rib_phase": rng.uniform(0, 1),
        "rib_front": np.radians(rng.uniform(25, 40)), "rib_tilt": rng.uniform(0.05, 0.15),
        "tissue": rng.uniform(25, 55), "fat": rng.uniform(-120, -80), "lung": rng.uniform(-880, -820),
        "bone": rng.uniform(600, 800), "marrow": rng.uniform(250, 400), "noise": rng.uniform(10, 20),
        "lesions": [],
    }


def _t(p: dict, z: np.ndarray) -> np.ndarray:
    return (z - p["z_lo"]) / (p["z_hi"] - p["z_lo"])


def lung_scale(p: dict, z: np.ndarray) -> np.ndarray:
    """Relative lung size at height z: 0 outside the lungs, small at apex and base, 1 mid-chest."""
    t = _t(p, np.asarray(z, np.float64))
    inside = (t > 0) & (t < 1)
    return np.where(inside, np.abs(np.sin(np.pi * np.clip(t, 0, 1))) ** p["lung_power"], 0.0)


def _body_frame(p: dict, x: np.ndarray, y: np.ndarray, z: np.ndarray):
    c, s = np.cos(p["rot"]), np.sin(p["rot"])
    u = (x - p["cx"]) * c + (y - p["cy"]) * s  # u: to the patient's left, v: posterior
    v = -(x - p["cx"]) * s + (y - p["cy"]) * c
    scale = 0.92 + 0.08 * np.sin(np.pi * np.clip(_t(p, z), 0, 1))
    return u, v, p["ax"] * scale, p["by"] * scale, scale


def _lungs(p: dict, u, v, z) -> np.ndarray:
    ls = lung_scale(p, z)
    out = np.zeros(np.broadcast(u, v, z).shape, bool)
    for side, k in ((-1, 1.0), (1, p["lung_asym"])):
        a = np.maximum(p["lung_a"] * ls * k, 1e-3)
        b = np.maximum(p["lung_b"] * (0.35 + 0.65 * ls) * k, 1e-3)
        out |= (((u - side * p["lung_dx"]) / a) ** 2 + ((v - p["lung_dy"]) / b) ** 2 <= 1.0) & (ls > 0.05)
    return out


def _bone(p: dict, u, v, z, ax, by, scale) -> tuple[np.ndarray, np.ndarray]:
    """(bone, marrow) masks: ribs, the vertebral body (marrow inside its cortex) and the spinous process."""
    r_body = np.sqrt((u / ax) ** 2 + (v / by) ** 2)
    ring = np.abs(r_body - p["rib_r"]) * np.minimum(ax, by) <= p["rib_w"] / 2
    ang = np.arctan2(u, -v)  # 0 = anterior midline
    front = np.abs(ang) > p["rib_front"]
    # hoops tilted a little (lower at the front), one every rib_pitch mm
    zz = (z - p["rib_tilt"] * v) / p["rib_pitch"] + p["rib_phase"]
    band = np.abs(zz - np.round(zz)) * p["rib_pitch"] <= p["rib_h"] / 2
    in_lungs = (_t(p, z) > 0.04) & (_t(p, z) < 0.96)
    ribs = ring & front & band & in_lungs & (v < 0.8 * by)
    vy = p["vert_dy"] * scale
    rv = np.sqrt(u**2 + (v - vy) ** 2)
    vert = rv <= p["vert_r"]
    spinous = (np.abs(u) <= 3.5) & (v > vy) & (v < vy + p["vert_r"] + 10)
    return ribs | vert | spinous, vert & (rv <= p["vert_r"] - 3.0)


def _lesions(p: dict, x, y, z) -> np.ndarray:
    out = np.zeros(np.broadcast(x, y, z).shape, bool)
    for les in p["lesions"]:
        (lx, ly, lz), r = les.center, les.radius
        out |= (x - lx) ** 2 + (y - ly) ** 2 + (z - lz) ** 2 <= r * r
    return out


def labels_at(p: dict, x, y, z) -> np.ndarray:
    """The class (uint8) at points (x, y, z) mm, broadcast together."""
    u, v, ax, by, scale = _body_frame(p, x, y, z)
    body = (u / ax) ** 2 + (v / by) ** 2 <= 1.0
    lab = np.where(_lungs(p, u, v, z), LUNG, 0).astype(np.uint8)
    bone, _ = _bone(p, u, v, z, ax, by, scale)
    lab[bone & body] = BONE
    lab[_lesions(p, x, y, z)] = LESION
    return lab


def _hu_at(p: dict, x, y, z) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(noise-free HU, labels, body mask) at points."""
    u, v, ax, by, scale = _body_frame(p, x, y, z)
    r2 = (u / ax) ** 2 + (v / by) ** 2
    body = r2 <= 1.0
    shape = np.broadcast(x, y, z).shape
    hu = np.full(shape, AIR, np.float32)
    hu[body] = p["tissue"]
    hu[body & (r2 > 0.93**2)] = p["fat"]
    lab = np.zeros(shape, np.uint8)
    lungs = _lungs(p, u, v, z)
    lab[lungs], hu[lungs] = LUNG, p["lung"]
    bone, marrow = _bone(p, u, v, z, ax, by, scale)
    bone &= body
    lab[bone], hu[bone] = BONE, p["bone"]
    hu[marrow & body] = p["marrow"]
    for les in p["lesions"]:
        (lx, ly, lz), r = les.center, les.radius
        m = (x - lx) ** 2 + (y - ly) ** 2 + (z - lz) ** 2 <= r * r
        lab[m], hu[m] = LESION, les.hu
    return hu, lab, body


@dataclass(frozen=True)
class _PlacedLesion(Lesion):
    hu: float = 40.0


def place_lesions(p: dict, rng: np.random.Generator, n: int, radius=(7.0, 12.0)) -> list[_PlacedLesion]:
    """``n`` non-overlapping spheres, each wholly inside a lung with a 2 mm margin (checked on 200 surface points
    at r + 2 mm, so a lesion touches neither a rib nor the lung's edge); a radius is drawn, then up to 60 centres
    are tried for it (so big lesions are not crowded out by small ones); fewer lesions when the lungs have no room."""
    dirs = synth.rng_for(0, 0, "sphere").normal(size=(200, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    span = p["z_hi"] - p["z_lo"]
    c, s = np.cos(p["rot"]), np.sin(p["rot"])
    placed: list[_PlacedLesion] = []
    for _ in range(8 * n):
        if len(placed) == n:
            break
        r = float(rng.uniform(*radius))
        for _ in range(60):
            side = rng.choice((-1, 1))
            z = rng.uniform(p["z_lo"] + 0.25 * span, p["z_hi"] - 0.25 * span)
            ls = float(lung_scale(p, np.array(z)))
            a, b = p["lung_a"] * ls, p["lung_b"] * (0.35 + 0.65 * ls)
            u = side * p["lung_dx"] + rng.uniform(-0.5, 0.5) * a
            v = p["lung_dy"] + rng.uniform(-0.5, 0.5) * b
            x, y = p["cx"] + u * c - v * s, p["cy"] + u * s + v * c
            pts = np.array([x, y, z]) + (r + 2.0) * dirs
            if not np.all(labels_at(p, pts[:, 0], pts[:, 1], pts[:, 2]) == LUNG):
                continue
            if any(np.linalg.norm(np.subtract((x, y, z), q.center)) < r + q.radius + 4 for q in placed):
                continue
            placed.append(_PlacedLesion((float(x), float(y), float(z)), r, float(rng.uniform(10, 60))))
            break
    return placed


def grid_shape(spacing: tuple[float, float, float], p: dict, rng: np.random.Generator) -> tuple[int, int, int]:
    """Slices covering the lungs plus 10-25 mm above and below; a square FOV_MM field in-plane."""
    extent = p["z_hi"] - p["z_lo"] + rng.uniform(20, 50)
    n = int(round(FOV_MM / spacing[1]))
    return int(round(extent / spacing[0])), n, n


def centres(shape, spacing, origin) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, y, z) of the voxel centres of a native grid, as broadcastable [1,1,W], [1,H,1], [D,1,1] arrays."""
    d, h, w = shape
    x = origin[0] + np.arange(w) * spacing[2]
    y = origin[1] + np.arange(h) * spacing[1]
    z = origin[2] + np.arange(d) * spacing[0]
    return x[None, None, :], y[None, :, None], z[:, None, None]


def phantom(seed: int, index: int, *, shape: tuple[int, int, int] | None = None,
            spacing: tuple[float, float, float] | None = None) -> Phantom:
    """Phantom ``index`` of data set ``seed``: its anatomy, spacing and grid drawn from the seed (``shape`` and
    ``spacing`` override the drawn grid, e.g. for the bundled sample)."""
    rng = synth.rng_for(seed, index, "ct_phantom3d")
    p = volume_params(rng)
    p["lesions"] = place_lesions(p, rng, int(rng.integers(2, 5)))
    if spacing is None:
        pix = float(rng.uniform(0.7, 0.9))
        spacing = (float(rng.uniform(2.5, 3.0)), pix, pix)
    shape = shape or grid_shape(spacing, p, rng)
    origin = (-(shape[2] - 1) / 2 * spacing[2], -(shape[1] - 1) / 2 * spacing[1],
              -(shape[0] - 1) / 2 * spacing[0] + rng.uniform(-5, 5))
    x, y, z = centres(shape, spacing, origin)
    hu, lab, body = _hu_at(p, x, y, z)
    sigma = 0.6 / spacing[1]  # the scanner's in-plane point-spread, ~0.6 mm
    hu = np.stack([cv2.GaussianBlur(s, (0, 0), sigma) for s in hu])
    noise = rng.normal(0, p["noise"], hu.shape).astype(np.float32)
    noise[lab == LUNG] *= 1.5
    hu = np.where(body, hu + noise, AIR)
    lesions = tuple(Lesion(q.center, q.radius) for q in p["lesions"])
    return Phantom(np.rint(hu).astype(np.int16), lab, tuple(map(float, spacing)), origin, lesions, p)


def model_grid(native_shape, native_spacing, target_spacing) -> tuple[int, int, int]:
    """The grid a model at ``target_spacing`` runs on: round(size * spacing / target) per axis, at least 1."""
    return tuple(max(1, int(round(n * s / t))) for n, s, t in zip(native_shape, native_spacing, target_spacing))


def _model_axes(ph: Phantom, shape, offset: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[float]]:
    """(x, y, z) of the centres (shifted by ``offset`` voxels) of a grid of ``shape`` over the native field, mapped
    as a half-pixel linear resampling maps it (voxel m of M sits at native index (m + 0.5) * N / M - 0.5), and
    its voxel size in mm along D, H, W."""
    native = ph.hu.shape
    step = [n / m * s for n, m, s in zip(native, shape, ph.spacing)]
    first = [(0.5 * n / m - 0.5) * s for n, m, s in zip(native, shape, ph.spacing)]  # mm from voxel 0 centre
    z = ph.origin[2] + first[0] + (np.arange(shape[0]) + offset) * step[0]
    y = ph.origin[1] + first[1] + (np.arange(shape[1]) + offset) * step[1]
    x = ph.origin[0] + first[2] + (np.arange(shape[2]) + offset) * step[2]
    return x[None, None, :], y[None, :, None], z[:, None, None], step


def lesion_ramp(ph: Phantom, shape: tuple[int, int, int]) -> np.ndarray:
    """The lesion target [D', H', W'] on the model grid: 0.5 + (r' - d) / (2 g) clipped to [0, 1] (d the distance
    to the lesion's centre, g the voxel size), a ramp one voxel wide on each side of the surface.

    Why not the coverage: SegLens interpolates the probabilities linearly back to the native grid and takes the
    argmax, so the surface is where the interpolated target crosses 0.5. A ramp in d is linear across the surface
    (two neighbours straddling it are both on the ramp), so it crosses 0.5 on the sphere; the coverage is not, and
    its 0.5 level sits inside a convex surface (-2 to -4 % of a lesion's volume). Linear interpolation of the convex
    d still overestimates it by g²/(6r) on average (g²/12 times the curvature 1/r, in two tangent directions), so
    r' = r + g²/(6r); with it, the ideal model's lesions are within the native grid's own ~2 % of 4/3·π·r³."""
    x, y, z, step = _model_axes(ph, shape)
    g = float(np.mean(step))
    out = np.zeros(shape, np.float32)
    for les in ph.lesions:
        (lx, ly, lz), r = les.center, les.radius
        d = np.sqrt((x - lx) ** 2 + (y - ly) ** 2 + (z - lz) ** 2)
        out = np.maximum(out, np.clip(0.5 + (r + g * g / (6 * r) - d) / (2 * g), 0, 1))
    return out


def targets(ph: Phantom, shape: tuple[int, int, int]) -> np.ndarray:
    """Soft targets [4, D', H', W'] float32 on the model grid: the coverage of background, lung and bone, the lesion
    ramp (``lesion_ramp``) taken from the lung around it (a lesion lies 2 mm inside a lung, so within its ramp
    lung + lesion = 1)."""
    cov = coverage(ph, shape)
    ramp = lesion_ramp(ph, shape)
    cov[1] = np.clip(cov[1] + cov[3] - ramp, 0, 1)
    cov[3] = ramp
    return cov / cov.sum(0, keepdims=True)


def coverage(ph: Phantom, shape: tuple[int, int, int], sub: int = 2) -> np.ndarray:
    """Soft targets [4, D', H', W'] float32 on a grid of ``shape`` over the same field as the native grid, mapped
    as a half-pixel linear resampling maps it (voxel m of M covers native index (m + 0.5) * N / M - 0.5): the
    fraction of each voxel covered by each class, from ``sub``³ points per voxel."""
    counts = np.zeros((len(CLASSES), *shape), np.float32)
    for oz in (np.arange(sub) + 0.5) / sub - 0.5:
        for oy in (np.arange(sub) + 0.5) / sub - 0.5:
            for ox in (np.arange(sub) + 0.5) / sub - 0.5:
                x, _, _, _ = _model_axes(ph, shape, ox)
                _, y, _, _ = _model_axes(ph, shape, oy)
                _, _, z, _ = _model_axes(ph, shape, oz)
                lab = labels_at(ph.params, x, y, z)
                for c in range(len(CLASSES)):
                    counts[c] += lab == c
    return counts / sub**3
