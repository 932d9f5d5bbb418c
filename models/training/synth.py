"""Synthetic data generators for the bundled demo models (numpy + OpenCV only, no torch).

Every generator is deterministic: it takes a ``numpy.random.Generator`` and draws everything from it, so
``image(seed, index)`` helpers give the same picture on every machine and in any order.

* ``surface_image``  - brushed-metal / moulded-plastic surfaces under uneven light, with scratches, pits and
  stains; returns an RGB uint8 image and a label map (0 background, 1 scratch, 2 pit, 3 stain).
* ``nuclei_image``   - widefield fluorescence (DAPI-like) grayscale field of touching, blurred nuclei under
  uneven illumination; returns a uint8 image and a 0/1 foreground mask.
* ``defect_crop``    - a 224x224 surface crop showing exactly one defect type (or none) for the classifier.

Sizes of features are given for a 1920-pixel-wide reference image and scaled by ``px`` (pixels per reference
pixel), so the same generator makes a full inspection frame or a close-up crop.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

SURFACE_CLASSES = ["background", "scratch", "pit", "stain"]
DEFECT_TYPES = ["OK", "scratch", "pit", "stain"]

# ------------------------------------------------------------------------------------------------ helpers


def rng_for(seed: int, index: int, stream: str = "") -> np.random.Generator:
    """Independent, order-free random stream for item ``index`` of data set ``seed``."""
    tag = sum(ord(c) * 131**i for i, c in enumerate(stream)) % (2**31)
    return np.random.default_rng([int(seed), int(index), tag])


def smooth_noise(rng: np.random.Generator, h: int, w: int, cell: float) -> np.ndarray:
    """Band-limited noise with features about ``cell`` pixels across, zero mean, unit std (float32)."""
    cell = max(float(cell), 1.0)
    gh, gw = int(math.ceil(h / cell)) + 3, int(math.ceil(w / cell)) + 3
    g = rng.standard_normal((gh, gw)).astype(np.float32)
    big = cv2.resize(g, (int(gw * cell), int(gh * cell)), interpolation=cv2.INTER_CUBIC)
    oy, ox = int(rng.integers(0, max(1, big.shape[0] - h))), int(rng.integers(0, max(1, big.shape[1] - w)))
    out = big[oy : oy + h, ox : ox + w]
    if out.shape != (h, w):  # tiny images
        out = cv2.resize(big, (w, h), interpolation=cv2.INTER_LINEAR)
    s = float(out.std()) or 1.0
    return (out - float(out.mean())) / s


def fine_noise(rng: np.random.Generator, h: int, w: int, sigma: float) -> np.ndarray:
    n = rng.standard_normal((h, w), dtype=np.float32)
    if sigma > 0.3:
        n = cv2.GaussianBlur(n, (0, 0), sigma)
    s = float(n.std()) or 1.0
    return n / s


def smoothstep(x: np.ndarray, e0: float, e1: float) -> np.ndarray:
    t = np.clip((x - e0) / max(e1 - e0, 1e-6), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def wobbly_polygon(rng, cx, cy, rx, ry, angle, rough=0.12, n=48):
    """Closed outline of an irregular ellipse (random low-order radial harmonics)."""
    phi = np.linspace(0, 2 * np.pi, n, endpoint=False)
    r = np.ones(n)
    for k in range(2, 6):
        r += rough / k * rng.standard_normal() * np.cos(k * phi + rng.uniform(0, 2 * np.pi))
    x, y = rx * r * np.cos(phi), ry * r * np.sin(phi)
    ca, sa = math.cos(angle), math.sin(angle)
    return np.stack([cx + ca * x - sa * y, cy + sa * x + ca * y], 1)


def fill_poly_aa(shape, pts, shift=4):
    """Anti-aliased polygon coverage in [0, 1] (float32)."""
    m = np.zeros(shape, np.uint8)
    cv2.fillPoly(m, [np.round(pts * (1 << shift)).astype(np.int32)], 255, cv2.LINE_AA, shift)
    return m.astype(np.float32) / 255.0


def to_uint8(x: np.ndarray) -> np.ndarray:
    return np.clip(x * 255.0 + 0.5, 0, 255).astype(np.uint8)


# ------------------------------------------------------------------------------------------------ surfaces

PLASTIC_COLORS = [
    (0.13, 0.13, 0.14),  # black ABS
    (0.30, 0.31, 0.33),  # dark grey
    (0.62, 0.63, 0.62),  # light grey
    (0.80, 0.76, 0.66),  # beige / ivory
    (0.22, 0.33, 0.55),  # blue
    (0.50, 0.13, 0.11),  # red
]
METAL_TINTS = [
    (0.93, 0.96, 1.00),  # stainless steel
    (1.00, 1.00, 0.99),  # aluminium
    (1.00, 0.93, 0.80),  # anodised champagne
]
STAIN_TINTS = [
    (0.62, 0.50, 0.36),  # dried coffee / oil residue
    (0.55, 0.55, 0.57),  # grease (darkens)
    (0.80, 0.50, 0.33),  # rust bloom
    (0.45, 0.42, 0.36),  # dirt
]


def _brushed(rng, h, w, px):
    """Brushed-metal luminance texture: long streaks along a (nearly) axis-aligned direction."""
    vertical = rng.random() < 0.35
    hh, ww = (w, h) if vertical else (h, w)
    angle = rng.normal(0, 1.5) if rng.random() < 0.8 else rng.uniform(-20, 20)
    pad = int(abs(math.sin(math.radians(angle))) * ww / 2) + 4
    H, W = hh + 2 * pad, ww + 2 * pad
    tex = np.zeros((H, W), np.float32)
    for length, amp in ((rng.uniform(150, 400) * px, 1.0), (rng.uniform(25, 60) * px, 0.8), (8 * px, 0.35)):
        n = rng.standard_normal((H, W), dtype=np.float32)
        n = cv2.GaussianBlur(n, (0, 0), sigmaX=max(length / 3, 1.0), sigmaY=0.5 * max(px, 0.6))
        tex += amp * n / (float(n.std()) + 1e-6)
    # a few deeper single grooves of the brushing (part of the texture, not defects)
    tex += 0.3 * cv2.GaussianBlur(
        (rng.random((H, 1)) < 0.02).astype(np.float32) * rng.standard_normal((H, 1)).astype(np.float32),
        (0, 0),
        0.6,
    )
    if abs(angle) > 0.05:
        m = cv2.getRotationMatrix2D((W / 2, H / 2), angle, 1.0)
        tex = cv2.warpAffine(tex, m, (W, H), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
    tex = tex[pad : pad + hh, pad : pad + ww]
    if vertical:
        tex = np.ascontiguousarray(tex.T)
    tex /= float(tex.std()) + 1e-6
    return tex, vertical


def _lighting(rng, h, w, px, metal, vertical):
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    xx /= max(w, h)
    yy /= max(w, h)
    gx, gy = rng.normal(0, 0.35, 2)
    light = 1.0 + gx * (xx - xx.mean()) + gy * (yy - yy.mean())
    # broad hotspot from a ring light / window
    cx, cy = rng.uniform(-0.1, 1.1) * w / max(w, h), rng.uniform(-0.1, 1.1) * h / max(w, h)
    s = rng.uniform(0.25, 0.7)
    light += rng.uniform(0.05, 0.35) * np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * s * s))
    if metal:  # anisotropic specular band across the brushing direction
        u = (xx if not vertical else yy) - rng.uniform(0.1, 0.9) * (w if not vertical else h) / max(w, h)
        light += rng.uniform(0.1, 0.45) * np.exp(-((u / rng.uniform(0.06, 0.25)) ** 2))
    # vignetting of the lens
    r2 = ((xx - 0.5 * w / max(w, h)) ** 2 + (yy - 0.5 * h / max(w, h)) ** 2) / 0.35
    light *= 1.0 - rng.uniform(0.0, 0.25) * r2
    return np.clip(light, 0.35, 2.0)


def _scratch(rng, h, w, px, width_ref=None):
    """Coverage (float32, anti-aliased) of one curved scratch, plus its ground-truth mask."""
    length = rng.uniform(0.12, 0.55) * 1920 * px
    x0, y0 = rng.uniform(0.05, 0.95) * w, rng.uniform(0.05, 0.95) * h
    a = rng.uniform(0, 2 * np.pi)
    x2, y2 = x0 + length * math.cos(a), y0 + length * math.sin(a)
    bend = rng.normal(0, 0.22) * length
    x1, y1 = (x0 + x2) / 2 - bend * math.sin(a), (y0 + y2) / 2 + bend * math.cos(a)
    n = max(int(length / (3 * max(px, 0.3))), 24)
    t = np.linspace(0, 1, n)
    px_ = (1 - t) ** 2 * x0 + 2 * (1 - t) * t * x1 + t**2 * x2
    py_ = (1 - t) ** 2 * y0 + 2 * (1 - t) * t * y1 + t**2 * y2
    # slight tremble of the tool
    jit = smooth_noise(rng, 1, n + 8, max(n / 6, 2))[0, :n] * rng.uniform(0, 2.0) * px
    px_ += -math.sin(a) * jit
    py_ += math.cos(a) * jit
    w0 = (width_ref if width_ref is not None else rng.uniform(6.5, 13.0)) * px
    taper = np.clip(np.minimum(t, 1 - t) / rng.uniform(0.08, 0.25), 0, 1) ** 0.5
    wid = w0 * (0.45 + 0.55 * taper) * (1 + 0.15 * smooth_noise(rng, 1, n + 8, max(n / 8, 2))[0, :n])
    m = int(w0 + 6 * px + 6)
    x0, x1 = int(max(min(px_.min(), w) - m, 0)), int(min(max(px_.max(), 0) + m, w))
    y0, y1 = int(max(min(py_.min(), h) - m, 0)), int(min(max(py_.max(), 0) + m, h))
    if x1 - x0 < 2 or y1 - y0 < 2:
        return None
    px_, py_ = px_ - x0, py_ - y0
    cov = np.zeros((y1 - y0, x1 - x0), np.uint8)
    shift = 3
    pts = np.round(np.stack([px_, py_], 1) * (1 << shift)).astype(np.int64)
    for i in range(n - 1):
        th = max(int(round(wid[i])), 1)
        cv2.line(cov, tuple(pts[i]), tuple(pts[i + 1]), 255, th, cv2.LINE_AA, shift)
    cov = cov.astype(np.float32) / 255.0
    return (y0, y1, x0, x1), cov, cov >= 0.5, (math.cos(a), math.sin(a))


def _pit(rng, h, w, px, center=None):
    r = rng.uniform(9.0, 22.0) * px
    cx, cy = center if center is not None else (rng.uniform(0.03, 0.97) * w, rng.uniform(0.03, 0.97) * h)
    pts = wobbly_polygon(rng, cx, cy, r * rng.uniform(0.8, 1.2), r * rng.uniform(0.8, 1.2), rng.uniform(0, 6.3),
                         rough=0.25)
    m = int(r * 1.6 + 12 * px + 8)
    x0, x1 = int(max(cx - m, 0)), int(min(cx + m, w))
    y0, y1 = int(max(cy - m, 0)), int(min(cy + m, h))
    cov = fill_poly_aa((y1 - y0, x1 - x0), pts - [x0, y0])
    return (y0, y1, x0, x1), cov, cov >= 0.5


def _stain(rng, h, w, px, center=None, rmax=None):
    R = rng.uniform(40, 140 if rmax is None else rmax) * px
    cx, cy = center if center is not None else (rng.uniform(0.0, 1.0) * w, rng.uniform(0.0, 1.0) * h)
    x0, x1 = int(max(cx - 1.6 * R, 0)), int(min(cx + 1.6 * R, w))
    y0, y1 = int(max(cy - 1.6 * R, 0)), int(min(cy + 1.6 * R, h))
    if x1 - x0 < 4 or y1 - y0 < 4:
        return None
    yy, xx = np.mgrid[y0:y1, x0:x1].astype(np.float32)
    ex = rng.uniform(0.6, 1.4)
    ang = rng.uniform(0, np.pi)
    ca, sa = math.cos(ang), math.sin(ang)
    u, v = (xx - cx) * ca + (yy - cy) * sa, -(xx - cx) * sa + (yy - cy) * ca
    d = np.sqrt((u / ex) ** 2 + (v * ex) ** 2) / R
    f = 1.0 - d + 0.2 * smooth_noise(rng, y1 - y0, x1 - x0, R / 2.2) + 0.05 * smooth_noise(
        rng, y1 - y0, x1 - x0, R / 7
    )
    edge = rng.uniform(0.06, 0.16)  # soft edge, relative to R
    return (y0, y1, x0, x1), smoothstep(f, 0.3 - edge, 0.3 + edge), f > 0.3


def surface_image(rng: np.random.Generator, h: int = 1080, w: int = 1920, px: float | None = None,
                  defects: dict | None = None, material: str | None = None, instances: list | None = None):
    """Render one inspection image. Returns (rgb uint8 HxWx3, label uint8 HxW).

    ``defects``: {'scratch': n, 'pit': n, 'stain': n}; None draws a random mix (about 10 % clean).
    ``instances``: a list that receives each defect drawn as ``(label, (y0, y1, x0, x1), mask)``, its whole mask
    inside that window (a later defect painted over it in ``label`` does not cut it); the draws are the same
    whether it is given or not, so the image and the label map are too.
    """
    if px is None:
        px = w / 1920 * rng.uniform(0.8, 1.25)
    if material is None:
        material = "metal" if rng.random() < 0.6 else "plastic"
    metal = material == "metal"
    if defects is None:
        if rng.random() < 0.1:
            defects = {"scratch": 0, "pit": 0, "stain": 0}
        else:
            defects = {
                "scratch": int(rng.choice([0, 1, 1, 2, 3])),
                "pit": int(rng.choice([0, 0, 1, 3, 5, 8])),
                "stain": int(rng.choice([0, 0, 1, 1, 2])),
            }

    # --- albedo / luminance
    if metal:
        tex, vertical = _brushed(rng, h, w, px)
        base = rng.uniform(0.42, 0.68)
        lum = base * (1 + rng.uniform(0.05, 0.12) * tex + 0.05 * smooth_noise(rng, h, w, 250 * px))
        tint = np.array(METAL_TINTS[rng.integers(len(METAL_TINTS))], np.float32)
    else:
        vertical = False
        col = np.array(PLASTIC_COLORS[rng.integers(len(PLASTIC_COLORS))], np.float32)
        base = 1.0
        tint = np.clip(col * rng.uniform(0.9, 1.1, 3), 0.05, 0.95).astype(np.float32)
        lum = 1 + 0.025 * fine_noise(rng, h, w, 0.9 * px) + 0.015 * smooth_noise(rng, h, w, 9 * px) \
            + 0.03 * smooth_noise(rng, h, w, 200 * px)
    lum = lum.astype(np.float32)
    label = np.zeros((h, w), np.uint8)
    stain_mul = np.ones((h, w, 3), np.float32)

    # --- stains: change the colour of the surface, soft edges, often a darker "tide line"
    for _ in range(defects.get("stain", 0)):
        r = _stain(rng, h, w, px)
        if r is None:
            continue
        (y0, y1, x0, x1), alpha, gt = r
        st = np.array(STAIN_TINTS[rng.integers(len(STAIN_TINTS))], np.float32)
        strength = rng.uniform(0.45, 0.75) if metal else rng.uniform(0.4, 0.7)
        if material == "plastic" and tint.mean() < 0.2:
            st = np.array((1.7, 1.6, 1.5), np.float32)  # whitish residue on black plastic
        mott = 1 + 0.25 * smooth_noise(rng, y1 - y0, x1 - x0, 25 * px)
        ring = rng.uniform(0.4, 1.2) * 4 * alpha * (1 - alpha)
        a = np.clip(alpha * strength * mott + ring * strength * 0.5, 0, 1)[..., None]
        stain_mul[y0:y1, x0:x1] *= 1 - a + a * st
        label[y0:y1, x0:x1][gt] = 3
        _keep(instances, 3, (y0, y1, x0, x1), gt)

    # --- pits: dark cavities with a bright rim on the lit side
    light_dir = np.array([math.cos(a := rng.uniform(0, 2 * np.pi)), math.sin(a)], np.float32)
    for _ in range(defects.get("pit", 0)):
        (y0, y1, x0, x1), c, gt = _pit(rng, h, w, px)
        if c.size == 0:
            continue
        depth = rng.uniform(0.45, 0.8)
        soft = cv2.GaussianBlur(c, (0, 0), 1.2 * px + 0.3)
        gy, gx = np.gradient(cv2.GaussianBlur(c, (0, 0), 2.5 * px + 0.5))
        rim = -(gx * light_dir[0] + gy * light_dir[1]) * (6.0 * px)
        lum[y0:y1, x0:x1] = lum[y0:y1, x0:x1] * (1 - depth * soft) + 0.5 * base * np.clip(rim, -1, 1) * rng.uniform(
            0.4, 1.0
        )
        label[y0:y1, x0:x1][gt] = 2
        _keep(instances, 2, (y0, y1, x0, x1), gt)

    # --- scratches: grooves that catch the light (bright) or shadow (dark); they cut the texture
    for _ in range(defects.get("scratch", 0)):
        r = _scratch(rng, h, w, px)
        if r is None:
            continue
        (y0, y1, x0, x1), cov, gt, (dx, dy) = r
        if metal:
            contrast = rng.uniform(0.35, 0.7) * (1 if rng.random() < 0.6 else -1)
        else:  # stress-whitened groove on plastic, sometimes a dark one
            contrast = rng.uniform(0.25, 0.5) * (1 if rng.random() < 0.7 else -1) * (0.6 if tint.mean() > 0.5 else 1)
        along = 1 + 0.25 * smooth_noise(rng, y1 - y0, x1 - x0, 30 * px)
        soft = cv2.GaussianBlur(cov, (0, 0), 0.5 * px + 0.2)
        lum[y0:y1, x0:x1] += base * contrast * soft * along
        # a thin dark shadow along one flank
        shadow = cv2.GaussianBlur(np.roll(cov, (int(round(2 * px * dx)), int(round(-2 * px * dy))), (1, 0)),
                                  (0, 0), 1.0 * px)
        lum[y0:y1, x0:x1] -= 0.15 * base * np.clip(shadow - soft, 0, 1)
        label[y0:y1, x0:x1][gt] = 1
        _keep(instances, 1, (y0, y1, x0, x1), gt)

    # --- light, colour, camera
    light = _lighting(rng, h, w, px, metal, vertical)
    img = (lum * light)[..., None] * tint[None, None, :] * stain_mul
    img *= rng.uniform(0.85, 1.1)
    blur = rng.uniform(0.0, 1.1) * px
    if blur > 0.35:
        img = cv2.GaussianBlur(img, (0, 0), blur)
    noise_sigma = rng.uniform(0.004, 0.018)
    img += noise_sigma * rng.standard_normal((h, w, 1), dtype=np.float32)  # sensor noise
    return to_uint8(img), label


def _keep(instances: list | None, label: int, window: tuple[int, int, int, int], mask: np.ndarray) -> None:
    if instances is not None and mask.any():
        instances.append((label, window, mask.copy()))


def defect_crop(rng: np.random.Generator, kind: int, size: int = 224):
    """A size x size crop showing one defect type (index into DEFECT_TYPES; 0 = OK)."""
    px = rng.uniform(0.5, 1.0)
    big = 2 * size  # render a larger field, then crop around the defect
    d = {"scratch": 0, "pit": 0, "stain": 0}
    name = DEFECT_TYPES[kind]
    if name == "OK":
        img, _ = surface_image(rng, big, big, px=px, defects=d)
        y, x = rng.integers(0, big - size + 1, 2)
        return np.ascontiguousarray(img[y : y + size, x : x + size])
    if name == "scratch":
        d["scratch"] = 1
    elif name == "pit":
        d["pit"] = int(rng.integers(1, 4))
    else:
        d["stain"] = 1
    lo = {"scratch": 0.006, "pit": 0.002, "stain": 0.05}[name]
    hi = {"scratch": 1.0, "pit": 1.0, "stain": 0.85}[name]
    best = None
    for _ in range(12):
        img, label = surface_image(rng, big, big, px=px, defects=d)
        ys, xs = np.nonzero(label == kind)
        if len(ys) == 0:
            continue
        i = rng.integers(len(ys))
        cy = int(ys[i] + rng.normal(0, size / 8)) - size // 2
        cx = int(xs[i] + rng.normal(0, size / 8)) - size // 2
        y, x = int(np.clip(cy, 0, big - size)), int(np.clip(cx, 0, big - size))
        crop = np.ascontiguousarray(img[y : y + size, x : x + size])
        frac = float((label[y : y + size, x : x + size] == kind).mean())
        if lo <= frac <= hi:
            return crop
        if best is None or abs(frac - lo) < best[0]:
            best = (abs(frac - lo), crop)
    return best[1] if best is not None else img[:size, :size]


# ------------------------------------------------------------------------------------------------ nuclei


def nuclei_image(rng: np.random.Generator, size: int = 512, scale: float | None = None, n: int | None = None,
                 empty: bool = False):
    """Widefield DAPI-like field. Returns (gray uint8 HxW, mask uint8 HxW in {0,1}).

    ``scale``: nucleus size in pixels relative to a 512-pixel field (default: random 0.8-1.25 x size/512).
    """
    h = w = int(size)
    if scale is None:
        scale = size / 512 * rng.uniform(0.8, 1.25)
    if n is None:
        n = 0 if empty else int(rng.integers(15, 90) * (size / 512) ** 2 / scale**2)
    sig = np.zeros((h, w), np.float32)
    mask = np.zeros((h, w), np.uint8)
    # nuclei come in clusters (colonies) with touching neighbours
    n_clusters = max(1, int(rng.integers(1, 6)))
    centers = rng.uniform(0.1, 0.9, (n_clusters, 2)) * [w, h]
    placed = []
    tries = 0
    while len(placed) < n and tries < n * 30:
        tries += 1
        if rng.random() < 0.7:
            c = centers[rng.integers(n_clusters)] + rng.normal(0, 0.11 * size, 2)
        else:
            c = rng.uniform(0, 1, 2) * [w, h]
        r = rng.uniform(9, 17) * scale
        mitotic = rng.random() < 0.05
        if mitotic:
            r *= 0.6
        ok = all(math.hypot(c[0] - p[0], c[1] - p[1]) > 0.8 * (r + p[2]) for p in placed)
        if not ok:
            continue
        placed.append((c[0], c[1], r))
        ecc = rng.uniform(0.7, 1.0)
        pts = wobbly_polygon(rng, c[0], c[1], r, r * ecc, rng.uniform(0, np.pi), rough=0.1, n=64)
        x0, y0 = np.floor(pts.min(0)).astype(int) - 3
        x1, y1 = np.ceil(pts.max(0)).astype(int) + 4
        x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, w), min(y1, h)
        if x1 - x0 < 3 or y1 - y0 < 3:
            continue
        cov = fill_poly_aa((y1 - y0, x1 - x0), pts - [x0, y0])
        # chromatin texture, darker nucleoli, slightly brighter rim (nuclear envelope)
        tex = 1 + 0.18 * fine_noise(rng, y1 - y0, x1 - x0, 1.2 * scale) + 0.1 * smooth_noise(
            rng, y1 - y0, x1 - x0, 5 * scale
        )
        inner = cv2.GaussianBlur(cov, (0, 0), 2.0 * scale)
        rim = np.clip(cov - inner, 0, 1)
        for _ in range(int(rng.integers(0, 3))):
            ny, nx = rng.uniform(0.3, 0.7) * (y1 - y0), rng.uniform(0.3, 0.7) * (x1 - x0)
            yy, xx = np.mgrid[0 : y1 - y0, 0 : x1 - x0]
            tex -= 0.3 * np.exp(-((yy - ny) ** 2 + (xx - nx) ** 2) / (2 * (1.8 * scale) ** 2))
        bright = rng.lognormal(0, 0.3) * (2.2 if mitotic else 1.0)
        sig[y0:y1, x0:x1] += bright * cov * np.clip(tex + 0.25 * rim, 0.2, 2)
        mask[y0:y1, x0:x1] |= (cov >= 0.5).astype(np.uint8)
    # debris / small bright specks (not nuclei)
    for _ in range(int(rng.integers(0, 8))):
        y, x = rng.integers(0, h), rng.integers(0, w)
        cv2.circle(sig, (int(x), int(y)), int(rng.integers(1, 3)), float(rng.uniform(0.4, 1.2)), -1, cv2.LINE_AA)
    # optics: in-focus PSF + out-of-focus haze
    psf = rng.uniform(0.8, 2.0) * scale
    img = cv2.GaussianBlur(sig, (0, 0), psf)
    img += rng.uniform(0.05, 0.25) * cv2.GaussianBlur(sig, (0, 0), 8 * scale)
    # uneven illumination (vignetting + tilt)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32) / size
    cx, cy = rng.uniform(0.2, 0.8, 2)
    illum = 1 - rng.uniform(0.2, 0.55) * ((xx - cx) ** 2 + (yy - cy) ** 2) / 0.5
    illum *= 1 + rng.normal(0, 0.15) * (xx - 0.5) + rng.normal(0, 0.15) * (yy - 0.5)
    gain = rng.uniform(0.35, 0.75)
    bg = rng.uniform(0.02, 0.08) * (1 + 0.3 * smooth_noise(rng, h, w, 80 * scale))
    img = (img * gain + bg) * illum
    # shot + read noise
    photons = rng.uniform(150, 600)
    img = rng.poisson(np.clip(img, 0, None) * photons).astype(np.float32) / photons
    img += rng.normal(0, rng.uniform(0.003, 0.012), img.shape).astype(np.float32)
    return to_uint8(np.clip(img, 0, 1)), mask
