"""The viewer's whole-volume count: after the shown slice, the rest of the volume is run a few slices at a time
(batched when the model allows) so the legend can show each class's volume in mL.

Qt-free and stepwise: the worker calls `step()` between the reader's requests (a slice the reader asks for is
never queued behind a whole volume), hands in slices it has already run (`add`), and drops the fill when the
volume, the model or the threshold changes.
"""

from __future__ import annotations

import numpy as np

from app.inference import pipeline
from app.inference.session import ModelSession
from app.io.volumes import Volume, read_slice

CHUNK = 8  # slices per step: about a quarter of a second of work on two CPU cores for a small 512² model


class VolumeFill:
    """Per-slice label counts of one volume under one model and threshold."""

    def __init__(self, model: ModelSession, volume: Volume, *, min_confidence: float | None = None,
                 chunk: int = CHUNK) -> None:
        self.model, self.volume, self.min_confidence = model, volume, min_confidence
        self.chunk = max(1, chunk)
        self._counts: dict[int, np.ndarray] = {}
        self.errors: dict[int, str] = {}  # slice → why it has no count (the legend says the total is partial)

    @property
    def total(self) -> int:
        return self.volume.depth

    @property
    def done(self) -> int:
        return len(self._counts) + len(self.errors)

    @property
    def complete(self) -> bool:
        return self.done >= self.total

    def add(self, k: int, mask: np.ndarray) -> None:
        """A slice already run (the one the reader looks at): counted without running it again."""
        self._counts[k] = np.bincount(mask.ravel(), minlength=256)

    def missing(self) -> list[int]:
        return [k for k in range(self.total) if k not in self._counts and k not in self.errors]

    def step(self) -> int:
        """Run up to `chunk` missing slices; how many were counted (0 once complete)."""
        todo = self.missing()[: self.chunk]
        prepared = []
        for k in todo:
            try:
                image = read_slice(self.volume, k)
                prepared.append((k, pipeline.prepare(self.model.spec, image)))
            except Exception as exc:  # one unreadable slice leaves the rest of the volume to count
                self.errors[k] = " ".join(str(exc).split())[:200]
        for group in self._groups(prepared):
            for k, result in zip([k for k, _ in group], self._run(group), strict=True):
                if result.mask is not None:
                    self.add(k, result.mask)
        return len(todo)

    def totals(self) -> np.ndarray:
        """Voxels per label value over the slices counted so far."""
        return np.sum(list(self._counts.values()), axis=0) if self._counts else np.zeros(256, np.int64)

    def millilitres(self) -> np.ndarray | None:
        """mL per label value over the slices counted so far (mean per time point for 4D), None without spacing."""
        return self.volume.millilitres(self.totals())

    def _groups(self, prepared: list) -> list[list]:
        """Slices that can share one session run: same tensor shape, model with a dynamic batch axis."""
        if not pipeline.batchable(self.model):
            return [[p] for p in prepared]
        groups: list[list] = []
        for item in prepared:
            tiled = item[1].tiled
            if groups and not tiled and not groups[-1][0][1].tiled and \
                    groups[-1][0][1].tensor.shape == item[1].tensor.shape:
                groups[-1].append(item)
            else:
                groups.append([item])
        return groups

    def _run(self, group: list) -> list:
        model = self.model
        if len(group) == 1:
            output, ms = pipeline.infer(model, group[0][1])
            outputs = [output]
        else:
            batched = model.run(np.concatenate([p.tensor for _, p in group]))
            outputs = [pipeline.batch_row(batched, i) for i in range(len(group))]
            ms = 0.0
        results = [pipeline.to_result(model, p, out, ms) for (_, p), out in zip(group, outputs, strict=True)]
        if self.min_confidence is not None:
            results = [pipeline.relabel(r, spec=model.spec, min_confidence=self.min_confidence) for r in results]
        return results
