"""What a folder run is asked to do (RunPlan, checked once) and what it tells its face as it goes (Progress): the
records app.runs.folder.run.run_folder and the stages below it (app.runs.folder.batch, the writer, Ray's actors) share.
Only app.errors at import: app.cli.console imports this for every command."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.errors import SegLensError

if TYPE_CHECKING:
    from app.inference.model.spec import ModelSpec
    from app.io.discover import InputFile
    from app.runs.folder.volumes import VolumeOptions
    from app.runs.folder.writer import RunSummary

DEFAULT_REPORT_NAME = "seglens_report.csv"


class PlanRefused(SegLensError):
    """A run that cannot go ahead as asked: its one line (seglens-cli prints `error: <line>`, exit code 2)."""


@dataclass(frozen=True)
class RunPlan:
    """Everything a folder run is asked to do. `spec`: the model as loaded (--config, --tile and --threshold
    applied; `min_confidence` the multi-class minimum --threshold gave). `out` None: scores and verdicts only,
    nothing written (the viewer's Run on all without a folder). `volumes`: how volumes are written, and under
    `anonymize` the pseudonym key (None: a run without volumes or --anonymize). `reference`: the ground-truth
    folder (metric columns, seglens_metrics.csv). `started`: temporaries in `out` older than this are a killed
    run's and are removed (None: left alone)."""

    spec: ModelSpec
    inputs: tuple[InputFile, ...]
    out: Path | None
    report_path: Path | None = None  # None: `out`/seglens_report.csv
    save: tuple[str, ...] = ("mask",)
    threshold: float | None = None
    min_confidence: float | None = None
    volumes: VolumeOptions | None = None
    reference: Path | None = None
    resume: bool = False
    batch: int = 1
    started: float | None = None

    def __post_init__(self) -> None:
        # (the viewer may ask for the source copy without De-identify: the volume's notice says it is not written)
        refused = option_problem(resume=self.resume, per_slice=self.volumes is not None and self.volumes.per_slice,
                                 exports=None, anonymize=self.anonymize)
        if refused:
            raise PlanRefused(refused)

    @property
    def anonymize(self) -> bool:
        """--anonymize (the viewer's De-identify): every output names an input by its pseudonymous name."""
        return self.volumes is not None and self.volumes.anonymize

    @property
    def key(self) -> bytes:
        """The pseudonym key under --anonymize, else none (app.runs.privacy.names)."""
        return self.volumes.pseudonym_key if self.volumes is not None and self.anonymize else b""

    @property
    def report(self) -> Path | None:
        """Where the report goes (None: nothing is written)."""
        if self.out is None:
            return None
        return self.report_path or self.out / DEFAULT_REPORT_NAME


def option_problem(*, resume: bool, per_slice: bool, exports: Sequence[str] | None, anonymize: bool) -> str | None:
    """Why these options cannot go together (one line), None when they can."""
    if per_slice and resume:
        return ("--per-slice with --resume is not supported: a carried volume would lose its slice rows; run again "
                "without --resume")
    if exports and "source" in exports and not anonymize:
        return "--export source writes the source series de-identified: it needs --anonymize"
    return None



class Progress:
    """What a run tells its face as it goes; each method says nothing unless a face overrides it. `outcome` gets
    a finished input (app.runs.folder.writer.Outcome, or a Ray run's RayProgress) and the running summary."""

    def outcome(self, outcome: Any, summary: RunSummary) -> None:
        """An input finished (or failed)."""

    def tiles(self, done: int, total: int) -> None:
        """A tiled image's progress in tiles."""

    def slices(self, done: int, total: int) -> None:
        """A volume's progress in slices."""

    def patches(self, done: int, total: int) -> None:
        """A 3D model's progress through a volume, in patches (TTA passes included)."""

    def note(self, line: str) -> None:
        """One line worth saying now (a killed run's temporaries removed)."""


class Callbacks(Progress):
    """A Progress made of plain functions, each optional (a benchmark's latency count, a test's list)."""

    def __init__(self, *, outcome: Callable[[Any, RunSummary], None] | None = None,
                 tiles: Callable[[int, int], None] | None = None,
                 slices: Callable[[int, int], None] | None = None,
                 patches: Callable[[int, int], None] | None = None) -> None:
        self._outcome, self._tiles, self._slices, self._patches = outcome, tiles, slices, patches

    def outcome(self, outcome: Any, summary: RunSummary) -> None:
        """Told to the `outcome` function."""
        if self._outcome is not None:
            self._outcome(outcome, summary)

    def tiles(self, done: int, total: int) -> None:
        """Told to the `tiles` function."""
        if self._tiles is not None:
            self._tiles(done, total)

    def slices(self, done: int, total: int) -> None:
        """Told to the `slices` function."""
        if self._slices is not None:
            self._slices(done, total)

    def patches(self, done: int, total: int) -> None:
        """Told to the `patches` function."""
        if self._patches is not None:
            self._patches(done, total)
