"""Instance data of the surface_instances demo model: inspection frames from the surface generator with each
scratch, pit and stain as its own object (class, whole mask), letterboxed to the working size as Ultralytics'
predictor and SegLens's YOLO path letterbox them (one scale, grey 114 padding, bilinear resize).

An item is ``(image uint8 HxWx3 RGB, [Obj, ...])`` at the working size; an object's mask is kept inside its own
window (``y0, x0`` and a bool array), never at the frame's size. The held-out set (``eval_item``) is the
frame at its native size with its objects at that size: the evaluation runs SegLens's pipeline on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from . import common, synth

NAMES = ("scratch", "pit", "stain")  # class index = the generator's label - 1
IMGSZ = (544, 960)  # H, W: 1920x1080 fits at exactly 1/2 (960x540, 2 grey rows above and below)
STRIDES = (8, 16, 32)
PAD_VALUE = 114
MIN_PIXELS = 4  # an object smaller than this at the working size is not one (a sliver cut by a crop)


@dataclass(frozen=True)
class Obj:
    """One object: class index into NAMES, the top-left of its window and its mask (bool) there."""

    cls: int
    y0: int
    x0: int
    mask: np.ndarray

    def box(self) -> tuple[float, float, float, float]:
        """x0, y0, x1, y1 (end-exclusive pixel bounds of the mask)."""
        ys, xs = np.nonzero(self.mask)
        return (float(self.x0 + xs.min()), float(self.y0 + ys.min()), float(self.x0 + xs.max() + 1),
                float(self.y0 + ys.max() + 1))


def render(rng: np.random.Generator, h: int, w: int, px: float | None = None, **kw):
    """(rgb, [Obj]) of one generated frame at h x w (objects at that size)."""
    found: list = []
    img, _ = synth.surface_image(rng, h, w, px=px, instances=found, **kw)
    objs = [Obj(label - 1, y0, x0, m) for label, (y0, _, x0, _), m in found]
    return img, objs


def fit(hw: tuple[int, int]) -> tuple[tuple[int, int], int, int]:
    """(resized h, w), top, left of a frame of size `hw` letterboxed into IMGSZ (Ultralytics' rounding)."""
    h, w = hw
    r = min(IMGSZ[0] / h, IMGSZ[1] / w)
    nh, nw = max(round(h * r), 1), max(round(w * r), 1)
    return (nh, nw), round((IMGSZ[0] - nh) / 2 - 0.1), round((IMGSZ[1] - nw) / 2 - 0.1)


def letterbox(img: np.ndarray, objs: list[Obj]) -> tuple[np.ndarray, list[Obj]]:
    """The frame and its objects letterboxed to IMGSZ (masks resized as coverage, then >= 0.5)."""
    (nh, nw), top, left = fit(img.shape[:2])
    sy, sx = nh / img.shape[0], nw / img.shape[1]
    out = np.full((*IMGSZ, 3), PAD_VALUE, np.uint8)
    out[top:top + nh, left:left + nw] = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR) \
        if (nh, nw) != img.shape[:2] else img
    moved = []
    for o in objs:
        h, w = o.mask.shape
        y0, x0 = int(np.floor(o.y0 * sy)), int(np.floor(o.x0 * sx))
        y1, x1 = int(np.ceil((o.y0 + h) * sy)), int(np.ceil((o.x0 + w) * sx))
        cov = cv2.resize(o.mask.astype(np.float32), (x1 - x0, y1 - y0), interpolation=cv2.INTER_AREA) \
            if (sy, sx) != (1.0, 1.0) else o.mask.astype(np.float32)
        m = cov >= 0.5
        if m.sum() >= MIN_PIXELS:
            moved.append(Obj(o.cls, y0 + top, x0 + left, m))
    return out, moved


def train_item(seed: int, index: int, full_res: bool):
    """One training frame at the working size: rendered at a native size then letterboxed (full_res), or
    rendered directly at its letterboxed size (cheaper; px scaled as if downsampled)."""
    rng = synth.rng_for(seed, index, "instances")
    h, w = common.SURFACE_SIZES[int(rng.integers(len(common.SURFACE_SIZES)))]
    if full_res:
        return letterbox(*render(rng, h, w))
    (nh, nw), _, _ = fit((h, w))
    return letterbox(*render(rng, nh, nw, px=nw / 1920 * rng.uniform(0.8, 1.25)))


def eval_item(seed: int, index: int):
    """(rgb at its native size, [Obj] at that size) of the held-out set: mostly 1920x1080 frames."""
    rng = synth.rng_for(seed, index, "instances-eval")
    h, w = common.SURFACE_SIZES[int(rng.integers(len(common.SURFACE_SIZES)))]
    return render(rng, h, w)


def crop(img: np.ndarray, objs: list[Obj], y: int, x: int, size: int) -> tuple[np.ndarray, list[Obj]]:
    """A size x size window of a working-size frame and the parts of its objects inside it."""
    out = []
    for o in objs:
        h, w = o.mask.shape
        a, b = max(o.y0, y), min(o.y0 + h, y + size)
        c, d = max(o.x0, x), min(o.x0 + w, x + size)
        if a >= b or c >= d:
            continue
        m = o.mask[a - o.y0:b - o.y0, c - o.x0:d - o.x0]
        if m.sum() >= MIN_PIXELS:
            out.append(Obj(o.cls, a - y, c - x, m))
    return img[y:y + size, x:x + size], out


def augment(rng: np.random.Generator, img: np.ndarray, objs: list[Obj]) -> tuple[np.ndarray, list[Obj]]:
    """The same random flip and 90-degree rotation of a square crop and its objects."""
    size = img.shape[0]
    full = [np.zeros((size, size), bool) for _ in objs]
    for f, o in zip(full, objs):
        f[o.y0:o.y0 + o.mask.shape[0], o.x0:o.x0 + o.mask.shape[1]] = o.mask
    k, flip = int(rng.integers(4)), rng.random() < 0.5

    def move(a):
        a = np.rot90(a, k, axes=(0, 1))
        return np.ascontiguousarray(a[:, ::-1] if flip else a)

    out = []
    for o, f in zip(objs, full):
        f = move(f)
        ys, xs = np.nonzero(f)
        out.append(Obj(o.cls, int(ys.min()), int(xs.min()), f[ys.min():ys.max() + 1, xs.min():xs.max() + 1]))
    return move(img), out
