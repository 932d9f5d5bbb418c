"""The viewer's whole-volume count: after the shown slice, the rest of the volume is run a few slices at a time
(batched when the model allows) so the legend can show each class's volume in mL.

Qt-free and stepwise: the worker calls `step()` between the reader's requests (a slice the reader asks for is
never queued behind a whole volume), hands in slices it has already run (`add`), and drops the fill when the
volume, the model or the threshold changes.

All or nothing, as a volume's row in a run (app.runs.folder.volumes): a slice that cannot be read or run (a model
output with NaN in it) fails the count, naming that slice and why (`failure_line`), and nothing more is run. The
slices counted before it are not the volume's figure and must not be shown as if they were.

The masks themselves are kept too (one uint8 per voxel): once every slice is counted, `labels()` is the whole
label volume the three-plane view shows.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from app.errors import one_line
from app.inference.image import pipeline
from app.inference.model.session import ModelSession
from app.io.images import read_slice
from app.io.volumes import Volume

CHUNK = 8  # slices per step: about a quarter of a second of work on two CPU cores for a small 512² model


class VolumeFill:
    """Per-slice label counts of one volume under one model and threshold."""

    def __init__(self, model: ModelSession, volume: Volume, *, min_confidence: float | None = None,
                 chunk: int = CHUNK) -> None:
        self.model, self.volume, self.min_confidence = model, volume, min_confidence
        self.chunk = max(1, chunk)
        self._counts: dict[int, np.ndarray] = {}
        self._masks: dict[int, np.ndarray] = {}  # slice → its labels, for the whole label volume (`labels`)
        self._stacked: np.ndarray | None = None  # `labels()` made once: the viewer asks on every count it shows
        self.errors: dict[int, str] = {}  # slice → why it has no count: any one fails the whole count

    @property
    def total(self) -> int:
        return self.volume.depth

    @property
    def done(self) -> int:
        return len(self._counts) + len(self.errors)

    @property
    def complete(self) -> bool:
        """Nothing more to run: every slice counted, or the count failed."""
        return self.done >= self.total or bool(self.errors)

    @property
    def failure(self) -> tuple[int, str] | None:
        """(slice index, why) of the first slice that could not be read or run; None while none failed."""
        return min(self.errors.items()) if self.errors else None

    def failure_line(self) -> str:
        """`slice 3 of 40 failed: model.onnx: non-finite model output …` (1-based, as the slice bar), or ""."""
        if self.failure is None:
            return ""
        k, why = self.failure
        return f"slice {k + 1} of {self.total} failed: {why}"

    def fail(self, k: int, exc: BaseException) -> None:
        """Slice `k` could not be read or run: the count has failed (the worker's own errors come here too)."""
        self.errors[k] = one_line(exc, most=300)

    def add(self, k: int, mask: np.ndarray) -> None:
        """A slice already run (the one the reader looks at): counted without running it again."""
        self._counts[k] = np.bincount(mask.ravel(), minlength=256)
        if k not in self._masks:  # a slice shown again: the same model and threshold, the same mask
            self._masks[k] = mask
            self._stacked = None

    def labels(self) -> np.ndarray | None:
        """The label volume `[D, H, W]` uint8 (`labels[k, row, col]`) once every slice is counted; None before,
        after a failure, or when the slices' sizes differ (no one volume holds them)."""
        if self.failure is not None or len(self._masks) < self.total:
            return None
        if self._stacked is None:
            masks = [self._masks[k] for k in range(self.total)]
            if any(mask.shape != masks[0].shape or mask.ndim != 2 for mask in masks):
                return None
            self._stacked = np.stack(masks).astype(np.uint8, copy=False)
            self._masks = {k: self._stacked[k] for k in range(self.total)}  # views: the masks held once
        return self._stacked

    def missing(self) -> list[int]:
        return [k for k in range(self.total) if k not in self._counts and k not in self.errors]

    def step(self) -> int:
        """Run up to `chunk` missing slices; how many were tried (0 once complete or failed). A slice that fails
        is recorded (`failure`), never raised: the caller shows why the count failed."""
        if self.complete:
            return 0
        todo = self.missing()[: self.chunk]
        prepared: list[_Slice] = []
        for k in todo:
            try:
                image = read_slice(self.volume, k)
                prepared.append((k, pipeline.prepare(self.model.spec, image)))
            except Exception as exc:  # the count fails; the slices already read are still run, then it stops
                self.fail(k, exc)
        for group in self._groups(prepared):
            for k, outcome in self._run(group):
                if isinstance(outcome, BaseException):
                    self.fail(k, outcome)
                elif outcome.mask is not None:
                    self.add(k, outcome.mask)
        return len(todo)

    def totals(self) -> np.ndarray:
        """Voxels per label value over the slices counted so far."""
        return np.sum(list(self._counts.values()), axis=0) if self._counts else np.zeros(256, np.int64)

    def millilitres(self) -> np.ndarray | None:
        """mL per label value over the slices counted so far (mean per time point for 4D), None without spacing."""
        return self.volume.millilitres(self.totals())

    def _groups(self, prepared: list[_Slice]) -> list[list[_Slice]]:
        """Slices that can share one session run: same tensor shape, model with a dynamic batch axis."""
        if not pipeline.batchable(self.model):
            return [[p] for p in prepared]
        groups: list[list[_Slice]] = []
        for item in prepared:
            tiled = item[1].tiled
            if groups and not tiled and not groups[-1][0][1].tiled and \
                    _tensor(groups[-1][0][1]).shape == _tensor(item[1]).shape:
                groups[-1].append(item)
            else:
                groups.append([item])
        return groups

    def _run(self, group: list[_Slice]) -> list[tuple[int, pipeline.Result | Exception]]:
        """(slice, Result or the exception that slice raised) for each slice of `group`: a batch row's own
        failure (a non-finite output, checked in to_result) is that slice's, a failed session run the first's."""
        model = self.model
        try:
            outputs: list[pipeline.Output | pipeline.TiledOutput]
            if len(group) == 1:
                output, ms = pipeline.infer(model, group[0][1])
                outputs = [output]
            else:
                batched = model.run(np.concatenate([_tensor(p) for _, p in group]))
                outputs = [pipeline.batch_row(batched, i) for i in range(len(group))]
                ms = 0.0
        except Exception as exc:
            return [(group[0][0], exc)]
        done: list[tuple[int, pipeline.Result | Exception]] = []
        for (k, prepared), out in zip(group, outputs, strict=True):
            result: pipeline.Result | Exception
            try:
                result = pipeline.to_result(model, prepared, out, ms)
                if self.min_confidence is not None:
                    result = pipeline.relabel(result, spec=model.spec, min_confidence=self.min_confidence)
            except Exception as exc:
                result = exc
            done.append((k, result))
        return done


_Slice = tuple[int, pipeline.Prepared]  # (slice index, its prepared image)


def _tensor(prepared: pipeline.Prepared) -> np.ndarray:
    """The tensor of a slice batched with others: those are not tiled, so they have one."""
    return cast(np.ndarray, prepared.tensor)

