"""Typed records between the window and the prompt worker (the Smart tool's thread, app.ui.workers.prompt_worker).

Frozen, so a record handed to another thread cannot change under its reader; Qt-free and numpy-free at run time
(the core's types are named for the type checker only), as app.ui.state.messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from app.inference.prompt.request import Box, Point
    from app.io.volumes import Volume
    from app.runs.prompts.propagate import PropagatedSlice, PropagationEnd

Window = tuple[float, float]  # display window (center, width), as app.ui.state.messages.Window


@dataclass(frozen=True)
class PromptKey:
    """Which pixels the encoder saw: a file's frame (a volume's slice) through a display window (None: the pixels
    as decoded, 8-bit). The embeddings cache is keyed by it: the same key is the same encoder input."""

    path: str
    frame: int = 0
    window: Window | None = None


@dataclass(frozen=True)
class PromptImage:
    """The picture as the reader sees it: its display pixels and, for real values (DICOM, 16-bit), the raw values
    the worker puts through `key.window` when it must encode them (never when the key is cached)."""

    key: PromptKey
    pixels: np.ndarray  # uint8 gray or RGB, image size
    raw: np.ndarray | None = None  # float32 real values, image size
    invert: bool = False  # MONOCHROME1

    def encoder_pixels(self) -> np.ndarray:
        """The pixels the encoder sees: the raw values through the key's window (as the display thread draws them),
        else the display pixels as they are."""
        if self.raw is not None and self.key.window is not None:
            from app.io.window import apply_window

            return apply_window(self.raw, *self.key.window, invert=self.invert)
        return self.pixels


@dataclass(frozen=True)
class PromptLoad:
    """Open a prompt model on the worker: "prompt_demo" (a bundled pair's name), a sidecar path or "grabcut"."""

    request_id: int
    model: str
    device: str = "cpu"


@dataclass(frozen=True)
class PromptReady:
    """The prompt model the worker holds now; `note`: one line when it is not the one asked for (grabCut after a
    model that failed to load), else ""."""

    request_id: int
    model: str  # what PromptLoad asked for
    name: str  # shown in the panel
    points: bool  # points work (a model); False: boxes only (grabCut)
    note: str = ""
    where: str = ""  # the device it really runs on ("CPU", "CUDA (GPU 0)"); "" for grabCut


@dataclass(frozen=True)
class PromptFailed:
    request_id: int
    message: str


@dataclass(frozen=True)
class DecodeRequest:
    """One prompt on one picture: every point so far and the box (image pixels). Newest wins: the worker skips a
    request that is no longer the latest. `pressed`: time.perf_counter() of the mouse press it answers."""

    request_id: int
    image: PromptImage
    points: tuple[Point, ...] = ()
    box: Box | None = None
    pressed: float = 0.0


@dataclass(frozen=True)
class ProposalReady:
    """The decoder's answer: the mask at image size, its predicted IoU (nan for grabCut), the low-res logits, and
    the time the encoder (0 when the embedding was cached) and the decoder took."""

    request_id: int
    key: PromptKey
    mask: np.ndarray  # bool HxW
    iou: float
    low_res: np.ndarray  # float32 [256, 256]
    encode_ms: float
    decode_ms: float
    pressed: float = 0.0  # the request's


@dataclass(frozen=True)
class ProposalFailed:
    """A prompt the model refused or could not run on: one line (a click outside the image, a decoder failure)."""

    request_id: int
    key: PromptKey
    message: str


@dataclass(frozen=True)
class PrefetchImage:
    """A picture to encode ahead: a file's frame, or a volume's slice. `window`: the reader's window for a slice of
    the volume shown (slices share it); `own_window`: a new file, shown first through its own window."""

    path: str
    frame: int = 0
    volume: Volume | None = None
    window: Window | None = None
    own_window: bool = True


@dataclass(frozen=True)
class PrefetchRequest:
    """Encode these pictures at low priority (a newer prefetch replaces this one; a foreground request cancels it);
    `first`: the picture being edited, already decoded, before them."""

    request_id: int
    images: tuple[PrefetchImage, ...]
    first: PromptImage | None = None


@dataclass(frozen=True)
class Prefetched:
    """A picture encoded ahead (`encode_ms` 0: it was cached already), or given up (`message`: why, one line)."""

    request_id: int
    key: PromptKey | None
    encode_ms: float
    message: str = ""


@dataclass(frozen=True)
class PropagateRequest:
    """Carry an accepted mask from slice `start` through a volume, `step` +1 (next) or −1, at most `count` slices;
    the slices' pixels as the viewer displays them through `window`."""

    request_id: int
    path: str
    volume: Volume
    start: int
    mask: np.ndarray  # bool HxW
    low_res: np.ndarray | None
    step: int
    count: int
    window: Window | None = None


@dataclass(frozen=True)
class SlicePropagated:
    request_id: int
    path: str
    slice: PropagatedSlice


@dataclass(frozen=True)
class PropagationDone:
    request_id: int
    path: str
    end: PropagationEnd
