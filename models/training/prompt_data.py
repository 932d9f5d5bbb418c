"""Objects to prompt for the demo prompt model (prompt_demo): synthetic scenes, their objects, the clicks.

A *scene* is one synthetic image (surface frame, nuclei field or CT phantom slice) with a list of *objects*
(boolean masks, one connected region each): a scratch, pit or stain; a single nucleus (touching clusters are
left out: the semantic nuclei mask cannot say which nucleus of a cluster a click means); a lung, a bone or the
body on a CT slice. The network works on the encoder's 1024-pixel input frame shrunk 4x (256x256, the grid of
SAM's low-res masks), so training scenes are fitted into 256 pixels as the pre-processing does (longest side,
pad bottom/right). numpy + OpenCV only.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from . import common, phantom, synth

GRID = 256  # internal working grid = the 256x256 low-res mask grid (1024 frame / 4)
FRAME = 1024  # the encoder's input frame (SAM's)
DOMAINS = ("surface", "nuclei", "ct")
# the exported pair's files, here (torch-free) so that the evaluation and the tests read them without torch
NAME = "prompt_demo"
ENCODER = common.MODELS_DIR / f"{NAME}_encoder.onnx"
DECODER = common.MODELS_DIR / f"{NAME}_decoder.onnx"
SIDECAR = common.MODELS_DIR / f"{NAME}.yaml"


@dataclass(frozen=True)
class Scene:
    """One image (RGB uint8 HxWx3) and its objects (bool HxW masks)."""

    domain: str
    image: np.ndarray
    objects: list[np.ndarray]
    kinds: list[str]


def _components(mask: np.ndarray, min_area: int) -> list[np.ndarray]:
    n, lab, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    return [lab == i for i in range(1, n) if stats[i, cv2.CC_STAT_AREA] >= min_area]


def _solidity(m: np.ndarray) -> float:
    cnts, _ = cv2.findContours(m.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    hull = cv2.convexHull(np.concatenate(cnts))
    return float(m.sum()) / max(float(cv2.contourArea(hull)), 1.0)


def render(domain: str, rng: np.random.Generator, *, native: bool) -> Scene:
    """A scene at its native size (``native``: what a user opens) or directly at the internal grid scale."""
    if domain == "surface":
        if native:
            img, lab = synth.surface_image(rng, 384, 512, px=float(rng.uniform(0.9, 1.4)))
        else:
            img, lab = synth.surface_image(rng, GRID, GRID, px=float(rng.uniform(0.45, 0.8)))
        s = img.shape[0] * img.shape[1] / GRID**2
        objs, kinds = [], []
        for c, name in ((1, "scratch"), (2, "pit"), (3, "stain")):
            got = _components(lab == c, int(40 * s))
            objs += got
            kinds += [name] * len(got)
        return Scene(domain, img, objs, kinds)
    if domain == "nuclei":
        size = 512 if native or rng.random() < 0.5 else GRID
        gray, mask = synth.nuclei_image(rng, size)
        s = (size / GRID) ** 2
        objs = [m for m in _components(mask > 0, int(25 * s)) if _solidity(m) >= 0.93]
        return Scene(domain, np.repeat(gray[..., None], 3, 2), objs, ["nucleus"] * len(objs))
    p = phantom.volume_params(rng)
    hu, lab = phantom.render_slice(p, float(rng.uniform(0.1, 0.9)), rng)
    gray = phantom.windowed(hu)
    objs, kinds = [], []
    for c, name, area in ((1, "lung", 120), (2, "bone", 80)):
        got = _components(lab == c, area)
        objs += got
        kinds += [name] * len(got)
    body = _components(hu > -500, 2000)
    objs += body[:1]
    kinds += ["body"] * len(body[:1])
    return Scene(domain, np.repeat(gray[..., None], 3, 2), objs, kinds)


def fit(image: np.ndarray, size: int) -> tuple[np.ndarray, float]:
    """Resize the longest side to ``size`` (as SAM's pre-processing does); (resized image, scale)."""
    h, w = image.shape[:2]
    scale = size / max(h, w)
    nh, nw = int(h * scale + 0.5), int(w * scale + 0.5)  # segment-anything's ResizeLongestSide
    interp = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
    return cv2.resize(image, (nw, nh), interpolation=interp), scale


def fit_mask(mask: np.ndarray, size: int) -> np.ndarray:
    """An object's mask on the grid the image was fitted to (area-weighted, >= 0.5)."""
    small, _ = fit(mask.astype(np.float32), size)
    return small >= 0.5


def farthest_point(mask: np.ndarray) -> tuple[int, int]:
    """(x, y) of the mask's interior point farthest from its border (the first one-click protocol point)."""
    padded = np.pad(mask.astype(np.uint8), 1)
    dist = cv2.distanceTransform(padded, cv2.DIST_L2, 5)[1:-1, 1:-1]
    y, x = np.unravel_index(int(np.argmax(dist)), dist.shape)
    return int(x), int(y)


def correction_click(pred: np.ndarray, truth: np.ndarray) -> tuple[int, int, int] | None:
    """The next click of the interactive protocol: at the point farthest from the border of the largest error
    region (false negative -> positive click, false positive -> negative click); (x, y, label) or None."""
    best: tuple[float, int, int, int] | None = None
    for err, label in ((truth & ~pred, 1), (pred & ~truth, 0)):
        if not err.any():
            continue
        padded = np.pad(err.astype(np.uint8), 1)
        dist = cv2.distanceTransform(padded, cv2.DIST_L2, 5)[1:-1, 1:-1]
        i = int(np.argmax(dist))
        if best is None or dist.flat[i] > best[0]:
            y, x = np.unravel_index(i, dist.shape)
            best = (float(dist.flat[i]), int(x), int(y), label)
    return None if best is None else best[1:]


def pool(seed: int, n_per_domain: int) -> list[Scene]:
    """Training scenes fitted to the internal grid (objects that vanish at that scale dropped)."""
    scenes = []
    for d in DOMAINS:
        for i in range(n_per_domain):
            rng = synth.rng_for(seed, i, "prompt_" + d)
            sc = render(d, rng, native=d == "surface" and i % 4 == 0)
            img, _ = fit(sc.image, GRID)
            objs = [fit_mask(m, GRID) for m in sc.objects]
            keep = [k for k, m in enumerate(objs) if m.sum() >= 12]
            if keep:
                scenes.append(Scene(d, img, [objs[k] for k in keep], [sc.kinds[k] for k in keep]))
    return scenes


def eval_objects(seed: int, n: int = 20) -> list[tuple[Scene, int]]:
    """``n`` held-out (scene at native size, object index) pairs, one per scene, domains in turn; in each scene a
    kind of object at random, then one object of that kind."""
    out: list[tuple[Scene, int]] = []
    i = 0
    while len(out) < n:
        d = DOMAINS[len(out) % len(DOMAINS)]
        rng = synth.rng_for(seed, i, "prompt_eval_" + d)
        i += 1
        sc = render(d, rng, native=True)
        ok = [k for k, m in enumerate(sc.objects) if fit_mask(m, GRID).sum() >= 12]
        if ok:  # a kind first (else a CT slice's many rib pieces would crowd out its lungs and body)
            kinds = sorted({sc.kinds[k] for k in ok})
            kind = kinds[int(rng.integers(len(kinds)))]
            ok = [k for k in ok if sc.kinds[k] == kind]
            out.append((sc, int(ok[int(rng.integers(len(ok)))])))
    return out
