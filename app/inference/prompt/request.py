"""A prompt as the user gives it (points and a box in image pixels), checked against the image in one line each,
and the result a prompt model proposes."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from app.errors import InferenceError
from app.inference.prompt.cache import Embedding

POSITIVE, NEGATIVE = 1, 0
BOX_TOP_LEFT, BOX_BOTTOM_RIGHT, PADDING = 2, 3, -1  # SAM's point labels for box corners and "not a point"


class PromptError(InferenceError):
    """A prompt that cannot be used on this image: outside it, a box of zero area, no prompt at all."""


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    label: int = POSITIVE  # 1 positive, 0 negative


@dataclass(frozen=True)
class Box:
    """A box by its pixel edges: x0 ≤ x < x1, y0 ≤ y < y1 (a detector's xyxy)."""

    x0: float
    y0: float
    x1: float
    y1: float


@dataclass(frozen=True)
class Proposal:
    """What a prompt model proposes: the mask at image size, its predicted IoU (nan where the method has none,
    grabCut), and the low-res logits [256, 256] to give back as the next `mask_input`."""

    mask: np.ndarray  # bool [H, W]
    iou: float
    low_res: np.ndarray  # float32 [256, 256]


@dataclass(frozen=True)
class PromptAbout:
    """What a face says of a prompt model once it is loaded: its name, where it runs and why not on the GPU asked
    for."""

    name: str
    where: str = ""  # "CUDA (GPU 0)", "CPU"; "" where no model runs (grabCut)
    note: str = ""  # why not on the GPU asked for; "" where it runs where asked


class PromptModel(Protocol):
    """What the editor, the CLI and the folder run need of a prompt model: a PromptSession (an encoder and a
    decoder, app.inference.prompt.model) or grabCut (no model, app.inference.prompt.grabcut). Used from the thread
    that made it; the faces call these members and never ask which one they hold."""

    @property
    def model_free(self) -> bool:
        """True where no model runs (grabCut): nothing is worth encoding ahead, and a propagated slice's prompt
        needs no point at its centre (a box is what grabCut takes)."""

    def about(self) -> PromptAbout:
        """Its name, where it runs and why not on the GPU asked for: what the Smart tool's panel says."""

    def warm_up(self) -> None:
        """One encoder and decoder run on a blank picture (the runtime's first run allocates), not counted as an
        image's; nothing where no model runs."""

    def embed(self, image: np.ndarray, *, key: Hashable | None = None, run_options: Any | None = None) -> Embedding:
        """The image's embedding (from the cache when `key` was encoded before); HxW or HxWx3. `run_options`: an
        onnxruntime RunOptions whose `terminate` another thread may set to end the encoder run (encoding ahead);
        not used where no model runs."""

    def decode(self, embedding: Embedding, points: Sequence[Point] = (), box: Box | None = None,
               mask_input: np.ndarray | None = None) -> Proposal:
        """The proposal for one prompt on an embedded image (`mask_input`: an earlier proposal's low-res logits)."""

    def cached(self, key: Hashable) -> bool:
        """Whether the image under `key` is embedded already (a prefetch skips it, the editor sends its pixels
        as they are); always False where nothing is kept (grabCut)."""

    def device_warning(self) -> str | None:
        """Why the model does not run on the GPU asked for, when that is news worth a warning
        (SessionInfo.fallback_warns); None where it runs where asked, or runs no model (grabCut)."""


def prompt_image_shape(shape: tuple[int, ...]) -> bool:
    """Whether an image of `shape` can be encoded: HxW, or HxWx1/3/4 (gray, RGB, RGBA whose alpha is dropped); two
    channels or five have no RGB reading."""
    return len(shape) in (2, 3) and min(shape[:2]) >= 1 and (len(shape) == 2 or shape[2] in (1, 3, 4))


def check_prompt(points: Sequence[Point], box: Box | None, image_hw: tuple[int, int]) -> Box | None:
    """Refuse, in one line, a prompt that cannot be used on an image of `image_hw`; returns the box clipped to
    the image (a detector's box may overhang it by a pixel)."""
    h, w = image_hw
    if not points and box is None:
        raise PromptError("no prompt: give at least one point or a box")
    for point in points:
        if not (math.isfinite(point.x) and math.isfinite(point.y)):
            raise PromptError(f"point ({_n(point.x)}, {_n(point.y)}) is not a number")
        if point.label not in (POSITIVE, NEGATIVE):
            raise PromptError(f"point ({_n(point.x)}, {_n(point.y)}) has label {point.label}: a point's label is 1 "
                              "(positive) or 0 (negative)")
        if not (0 <= point.x < w and 0 <= point.y < h):
            raise PromptError(f"point ({_n(point.x)}, {_n(point.y)}) is outside the image ({w}×{h} pixels: x from "
                              f"0 to {w - 1}, y from 0 to {h - 1})")
    return None if box is None else _checked_box(box, w, h)


def _checked_box(box: Box, w: int, h: int) -> Box:
    corners = (box.x0, box.y0, box.x1, box.y1)
    shown = ", ".join(_n(v) for v in corners)
    if not all(math.isfinite(v) for v in corners):
        raise PromptError(f"box ({shown}) is not four numbers")
    if box.x1 <= box.x0 or box.y1 <= box.y0:
        raise PromptError(f"box ({shown}) has zero area: x1 must be above x0 and y1 above y0")
    clipped = Box(max(box.x0, 0.0), max(box.y0, 0.0), min(box.x1, float(w)), min(box.y1, float(h)))
    if clipped.x1 <= clipped.x0 or clipped.y1 <= clipped.y0:
        raise PromptError(f"box ({shown}) lies outside the image ({w}×{h} pixels)")
    return clipped


def _n(value: float) -> str:
    """A coordinate as a person wrote it: 5, 12.5, nan, 1e+308 (not the 309 digits of int(1e308))."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"
