"""Typed records that cross the thread boundary between the window and its worker threads.

Frozen, so a record handed to another thread cannot change under its reader. Qt-free and numpy-free at run time:
the core's types (and QImage) are named for the type checker only, so importing this costs the window's start-up
nothing and `tests/ui/test_view_state.py` needs no Qt.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np
    from PySide6.QtGui import QImage

    from app.inference.decide.lesions import Lesion
    from app.inference.decide.metrics import ImageMetrics
    from app.inference.decide.tuning import Judgement
    from app.inference.decide.verdict import Verdict
    from app.inference.image.pipeline import Result
    from app.inference.model.session import SessionInfo
    from app.inference.model.spec import ModelSpec
    from app.io.discover import InputFile
    from app.io.volumes import Volume
    from app.runs.folder.metrics import Scored
    from app.runs.folder.volumes import VolumeOptions
    from app.runs.folder.writer import Outcome, RunSummary
    from app.runs.review.log import Review

Window = tuple[float, float]  # display window (center, width) in the image's real values (HU, 16-bit counts)


@dataclass(frozen=True)
class ViewKey:
    """Which picture is meant: a file and, in a multi-frame file or a volume, a frame (slice). The cache, the
    stale-result filter and the window rule work on whole keys and on `image`."""

    path: str
    frame: int = 0

    @property
    def image(self) -> str:
        """What "the same image" means for the display window: frames (later slices, tiles) of one file share it."""
        return self.path


@dataclass(frozen=True)
class Tuning:
    """How the worker decides and draws from a result's kept scores (app.inference.decide.tuning): the reader's pixel
    threshold (binary/anomaly) or minimum confidence (multi-class), the image-score limit of the verdict, and the
    picture beside the mask ("mask", "probability", "uncertainty"; class None = the winning class). None = the
    model's own setting."""

    threshold: float | None = None
    score_limit: float | None = None
    layer: str = "mask"  # or "probability", "uncertainty", "difference" (against the reference)
    class_index: int | None = None
    # ground truth: the inputs' folder (its review folder's corrected masks are references first) and a folder of
    # reference masks; `references` counts saved corrections, so a new one makes every view compare again
    input_root: str | None = None
    reference_root: str | None = None
    references: int = 0


@dataclass(frozen=True)
class ViewRequest:
    """The window asks the inference worker for one picture, for the model of `generation`."""

    request_id: int
    key: ViewKey
    generation: int = 0
    tuning: Tuning = Tuning()
    volume: Volume | None = None  # when `key` is a volume's slice (key.frame = the slice)


@dataclass(frozen=True)
class RetuneRequest:
    """Decide and draw a shown result again with another Tuning, from its kept scores (no model run)."""

    request_id: int
    view: ViewResult
    tuning: Tuning


@dataclass(frozen=True)
class ModelSummary:
    """The model the worker loaded, and where it really runs."""

    spec: ModelSpec
    info: SessionInfo
    sha256: str = ""  # of the model file, hashed on the worker: what the reader's settings and reviews are kept by
    generation: int = 0  # the LoadRequest's it answers (model B: 0)


@dataclass(frozen=True)
class ViewResult:
    """What the window needs to show one picture: the result, and display-sized pixels and mask."""

    key: ViewKey
    result: Result  # full resolution
    display_pixels: np.ndarray  # uint8 gray or RGB, at most MAX_DISPLAY_SIDE (views.py) on the long side
    display_mask: np.ndarray | None  # uint8 labels at the display size; None for classification
    display_scale: float  # full-resolution pixels per display pixel (1.0 unless downscaled)
    display_raw: np.ndarray | None = None  # float32 real values at the display size (DICOM, 16-bit): window/level
    window: Window | None = None  # the image's own display window
    invert: bool = False  # MONOCHROME1: high values are dark
    info: dict[str, str] | None = None  # patient/study fields, frames
    frame_count: int = 1
    generation: int = 0  # the model generation that made it
    tuning: Tuning = Tuning()  # what decided its mask and verdict, and drew `display_levels`
    display_levels: np.ndarray | None = None  # uint8 0–255 = 0–1 of the tuning's layer at the display size
    judgement: Judgement | None = None  # image score and verdict at the tuning's limits (verdict None: no rules)
    scored: Scored | None = None  # against its reference (app.runs.folder.metrics.Scored); None: no reference
    display_codes: np.ndarray | None = None  # difference layer: metrics.difference_map codes at the display size
    # model B (Model ▸ Compare with another model): its result, its mask at the display size, its agreement with A
    # (B measured against A as the reference: app.inference.decide.metrics.ImageMetrics)
    result_b: Result | None = None
    display_mask_b: np.ndarray | None = None
    agreement: ImageMetrics | None = None
    error_b: str = ""  # model B failed on this picture (a NaN output): B's one line; A's result is still shown
    full_pixels: np.ndarray | None = None  # big images: the full-resolution pixels for the detail tiles
    # pixels per label value 0..255 at the image's size (the legend): exact, or estimated from `display_mask` when
    # the display is downscaled and the image-sized mask was not made (views.display_labels)
    class_counts: np.ndarray | None = None
    request_id: int = 0  # the ViewRequest (or RetuneRequest) it answers

    @property
    def nbytes(self) -> int:
        """Memory the cached result holds (its arrays), for the cache's byte budget."""
        arrays = (self.display_pixels, self.display_mask, self.display_raw, self.display_levels, self.display_codes,
                  self.display_mask_b, self.full_pixels, self.result.scores, self.class_counts)
        labels = (self.result.labels, self.result_b.labels if self.result_b is not None else None)
        return sum(a.nbytes for a in arrays if a is not None) + sum(m.nbytes for m in labels if m is not None)

    @property
    def path(self) -> Path:
        return Path(self.key.path)

    @property
    def frame(self) -> int:
        return self.key.frame

    @property
    def verdict(self) -> Verdict | None:
        return self.judgement.verdict if self.judgement is not None else None

    @property
    def high_range(self) -> bool:
        """Real values beyond 8 bits are kept, so the display window can change."""
        return self.display_raw is not None


@dataclass(frozen=True)
class WindowRequest:
    """Display-window work for the display thread: `raw` through `window`; None = an automatic window."""

    request_id: int
    key: ViewKey
    raw: np.ndarray
    window: Window | None
    invert: bool = False


@dataclass(frozen=True)
class WindowedImage:
    """The display thread's answer: the window it applied and the pixels as a QImage that owns its memory."""

    request_id: int
    key: ViewKey
    window: Window
    image: QImage


@dataclass(frozen=True)
class PathChecked:
    """File ▸ Open recent: whether a listed path exists, asked off the GUI thread (a dead share may never answer)."""

    path: str
    exists: bool


@dataclass(frozen=True)
class ListedInput:
    """One input of the file list, for work over the whole list (Export review report, Compare all): its path,
    its name relative to the input folder (what its review is kept by) and, for a DICOM series, multi-frame DICOM
    or NIfTI file, its volume."""

    path: str
    rel: str
    volume: Volume | None = None


@dataclass(frozen=True)
class ReportRequest:
    """The window asks the worker for the HTML review report of `entries`, written to `report_path`, with the
    reader's tuning, the reviews by relative name and the model's identity for the header. `anonymize`: rows
    named by their pseudonyms, with no patient, folder or file name (as `seglens-cli report --anonymize`)."""

    entries: tuple[ListedInput, ...]
    report_path: str
    tuning: Tuning
    reviews: Mapping[str, Review | None]  # read only: the worker reads it while the window reviews on
    model_name: str
    model_sha256: str
    seglens_version: str
    anonymize: bool = False


@dataclass(frozen=True)
class FillRequest:
    """The window asks the worker to count every slice of the volume shown (the legend's whole-volume mL), at
    the reader's `threshold` (None = the model's own); a 3D model runs over it once first (VolumeProgress)."""

    path: str
    volume: Volume
    threshold: float | None = None


@dataclass(frozen=True)
class VolumeCount:
    """The worker's whole-volume count so far: `done` of `total` slices, the voxels per label value and their
    mL (None: the files carry no voxel size)."""

    path: str
    done: int
    total: int
    voxels: np.ndarray
    millilitres: np.ndarray | None = None
    labels: np.ndarray | None = None  # the whole label volume [D, H, W] uint8 once every slice is counted (the
    # three-plane view's mask); the worker no longer writes to it
    lesions: tuple[Lesion, ...] | None = None  # its 3D components (VOLUME_CONNECTIVITY), once it is whole
    lesions_why: str = ""  # why there are none to list (a 4D NIfTI), "" otherwise


@dataclass(frozen=True)
class VolumeProgress:
    """A 3D model's run over the volume `path` (a FillRequest's): `done` of `total` slices read (`stage`
    "reading") or patches run ("patches"); its end: "done" (in `seconds`) or "stopped" (it has no result)."""

    path: str
    stage: str
    done: int = 0
    total: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class VolumeCountFailed:
    """The whole-volume count stopped at a slice that failed: `why` is `slice 3 of 40 failed: …`."""

    path: str
    why: str


# -- the model: loading it (and model B) ---------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadRequest:
    """The window asks the worker to build the session for the model at `model_path` on `device`; `runtime`:
    "KEY=VALUE;KEY=VALUE" (as --runtime). `generation` is the request's id: the answer (a ModelSummary or a
    ModelFailed) carries it, and the window ignores an answer for a model it has since replaced."""

    generation: int
    model_path: str
    device: str
    runtime: str = ""


@dataclass(frozen=True)
class ModelFailed:
    """The model of `generation` could not be loaded: the one-line `message`."""

    generation: int
    message: str


@dataclass(frozen=True)
class ModelBRequest:
    """Compare with a second model (Model ▸ Compare with another model): its path ("" = stop comparing)."""

    model_path: str
    device: str
    runtime: str = ""


@dataclass(frozen=True)
class ModelBFailed:
    """Model B could not be loaded, or cannot be compared with A: the one-line `message`."""

    message: str


# -- a picture's failure or skip, and a tiled image's progress -----------------------------------------------------
@dataclass(frozen=True)
class BarePicture:
    """A picture's display copy without a result (its run failed, or waits on a server): what the canvas shows
    under the line that says why."""

    key: ViewKey
    pixels: np.ndarray  # 8-bit, the display size (a big image's downscaled copy, as a ViewResult's)
    image_hw: tuple[int, int]  # the image's own (height, width)


@dataclass(frozen=True)
class ViewFailed:
    """A ViewRequest or RetuneRequest failed: the path (a str, never a QString) and the one-line message;
    `picture`: its pixels when they were decoded before the failure (the canvas keeps them)."""

    request_id: int
    path: str
    message: str
    picture: BarePicture | None = None


@dataclass(frozen=True)
class ViewSkipped:
    """A ViewRequest dropped unprocessed: the window had moved on to another picture."""

    request_id: int
    path: str


@dataclass(frozen=True)
class TileProgress:
    """A tiled image (input.resize: tile): `done` of its `total` tiles run."""

    path: str
    done: int
    total: int


@dataclass(frozen=True)
class WindowFailed:
    """The display thread could not window a WindowRequest's pixels: the one-line message."""

    request_id: int
    message: str


# -- work over the whole list: Run on all, the review report, Compare all ------------------------------------------
@dataclass(frozen=True)
class RunAllRequest:
    """Run on all: every listed input through the CLI's folder run at the reader's `tuning`, exporting `save`
    ("mask", "overlay", …) into `out_dir` ("" = the scores and verdicts only, nothing written); `volumes`: the
    dialog's volume exports (None: the CLI's defaults)."""

    inputs: tuple[InputFile, ...]
    out_dir: str = ""
    save: tuple[str, ...] = ()
    tuning: Tuning | None = None
    volumes: VolumeOptions | None = None


@dataclass(frozen=True)
class BatchProgress:
    """One input of Run on all finished: its outcome, the run's summary so far (a copy) and the reader's
    decision on its result (None: it failed)."""

    outcome: Outcome
    summary: RunSummary
    judgement: Judgement | None = None


@dataclass(frozen=True)
class BatchFinished:
    """Run on all ended: its summary, and the CSV report written (`report_path`, "" when nothing was written) or
    why the run could not start or stopped (`error`)."""

    summary: RunSummary
    report_path: str = ""
    error: str = ""


@dataclass(frozen=True)
class ReportFinished:
    """The review report was written to `report_path`, or not, and `error` says why."""

    report_path: str = ""
    error: str = ""

    @property
    def written(self) -> bool:
        return not self.error


@dataclass(frozen=True)
class CompareAllRequest:
    """Compare on all: both models on every listed input (a volume over every voxel)."""

    entries: tuple[ListedInput, ...]


@dataclass(frozen=True)
class AgreementMeasured:
    """Compare on all measured one input: model B's mean IoU against A, `done` of `total`."""

    path: str
    iou: float
    done: int
    total: int


@dataclass(frozen=True)
class CompareFinished:
    """Compare on all ended (`completed`: not cancelled nor refused), with its one-line summary or why it stopped."""

    completed: bool
    message: str
