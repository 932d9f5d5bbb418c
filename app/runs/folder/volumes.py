"""Volumes in a folder run: the 2D model on every slice (batch.py feeds them like images, batched when the model
allows), the slices' masks assembled here, in order, into one label volume; then the exports
(app.runs.exports.formats), one report row for the volume (voxels and mL per class) and, with `per_slice`, one per
slice.

A 3D model's volume (app.runs.folder.volume3d) is handed over whole instead (VolumeAssembler.add_volume: each slice's
Result and the kept probabilities at once), written the same way, plus the probabilities under --save scores.

A volume is all or nothing: a slice that cannot be read or run makes the volume's row an error naming that
slice, and nothing is exported for it (a half-filled label volume would look like a real result).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from app.errors import SegLensError
from app.inference.decide.verdict import Verdict, image_score, uncertainty
from app.inference.decide.volume import combined, slice_verdict
from app.inference.image.pipeline import STAGES, Result
from app.inference.model.spec import ModelSpec
from app.io.images import DecodedImage
from app.io.volumes import Volume
from app.runs.exports.formats import EXPORTS, Algorithm
from app.runs.folder.lesions import (
    component_cells,
    component_columns,
    components_notice,
    components_verdict,
    volume_components,
)
from app.runs.outputs.images import write_result_images
from app.runs.outputs.report import ReportWriter, unique_names
from app.runs.privacy.pseudonyms import pseudonym_key as pseudonym_key  # re-exported: the faces import it from here
from app.runs.privacy.pseudonyms import pseudonym_of

if TYPE_CHECKING:
    from app.inference.decide.lesions import Lesion
    from app.inference.image.postprocess import Prediction
    from app.runs.privacy.deidentify import VolumePrivacy

DEFAULT_EXPORTS = ("nifti",)  # a volume's "mask", when no --export is given and the volume has a geometry


@dataclass(frozen=True)
class VolumeOptions:
    """How volumes are written: which exports, per-slice rows and PNGs, the Secondary Capture's opacity, and
    whether patients are named in the report (`anonymize`: a stable pseudonym instead, see `pseudonym`)."""

    exports: tuple[str, ...] | None = None  # None: DEFAULT_EXPORTS
    per_slice: bool = False
    opacity: float = 0.5
    anonymize: bool = False
    pseudonym_key: bytes = b""


@dataclass(frozen=True)
class SliceRow:
    """What is kept of one slice for the report: its counts, score, verdict and timings."""

    number: int  # 1-based
    path: str
    counts: np.ndarray  # pixels per label value (segmentation)
    predictions: tuple[Prediction, ...]  # top-k (classification)
    score: float | None
    verdict: Verdict | None
    timings: Mapping[str, float]
    position_mm: float | None
    warnings: tuple[str, ...] = ()  # why the slice does not fit the model (app.inference.image.fit)


@dataclass(frozen=True)
class VolumeResult:
    volume: Volume
    task: str
    provider: str
    counts: np.ndarray  # voxels per label value 0..255, the whole volume
    slices: tuple[SliceRow, ...]
    exports: tuple[Path, ...]
    notices: tuple[str, ...]  # an export that does not apply to this volume, one line each
    components: tuple[Lesion, ...] | None = None  # the label volume's 3D components (app.runs.folder.lesions);
    # None: not counted (a classifier, a 4D NIfTI)
    components_verdict: Verdict | None = None  # the volume rules (min_component_ml) on them; None: no such rules

    @property
    def timings(self) -> dict[str, float]:
        return {stage: sum(s.timings.get(stage, 0.0) for s in self.slices) for stage in STAGES}

    @property
    def score(self) -> float | None:
        """The highest slice score (binary: the most certain foreground anywhere), None without scores."""
        scores = [s.score for s in self.slices if s.score is not None]
        return max(scores) if scores else None

    @property
    def warnings(self) -> tuple[str, ...]:
        """Why the volume's slices do not fit the model (app.inference.image.fit), each reason once."""
        return tuple(dict.fromkeys(w for s in self.slices for w in s.warnings))

    @property
    def verdict(self) -> Verdict | None:
        """NG when any slice is NG (the first one says why), else when a volume rule fired on the volume's
        components (its reason), OK when all are OK, None without rules."""
        return combined([(s.number, s.verdict) for s in self.slices if s.verdict is not None],
                        self.components_verdict)  # REVIEW slices after every NG (app.inference.decide.volume.combined)


def volume_columns(spec: ModelSpec) -> list[str]:
    """The report's volume columns (only when a run has volumes): slices, the slice a row is about, where it
    lies, the series, the patient (or pseudonym), mL per class, and the classes' 3D components
    (app.runs.folder.lesions: the connectivity, the count and the largest's mL per class)."""
    ml = unique_names([f"ml_{name}" for name in spec.class_names], reserved={"ml_other"}) \
        if spec.task == "segmentation" else []
    return ["slices", "slice", "position_mm", "series", "patient", *ml, *component_columns(spec)]


def pseudonym(volume: Volume, key: bytes) -> str:
    """A stable pseudonym for the volume's patient: HMAC-SHA-256 of PatientID (+ name) under this installation's
    key (app.runs.privacy.pseudonyms), so the same patient gets the same pseudonym in every report from this
    workstation, and nobody without the key can test a guess."""
    return pseudonym_of(volume.info, key)


def patient_text(volume: Volume, options: VolumeOptions) -> str:
    if options.anonymize:
        return pseudonym(volume, options.pseudonym_key)
    name, ident = volume.info.get("Patient", ""), volume.info.get("Patient ID", "")
    return f"{name} ({ident})" if name and ident else name or ident


def series_text(volume: Volume, options: VolumeOptions) -> str:
    """The report's `series`: the SeriesInstanceUID (a NIfTI file's name), under --anonymize the de-identified UID
    its outputs carry (app.runs.privacy.names)."""
    if not options.anonymize:
        return volume.key
    from app.runs.privacy.names import series_id

    return series_id(volume, options.pseudonym_key)


def volume_cells(spec: ModelSpec, vr: VolumeResult, options: VolumeOptions,
                 row: SliceRow | None = None) -> list[Any]:
    """The volume columns' values for the volume's row (`row` None) or one slice's row."""
    per_class = []
    if spec.task == "segmentation":  # counts hold all 256 label values (class_pixel_counts)
        n = len(spec.class_names)
        ml = vr.volume.millilitres((vr.counts if row is None else row.counts)[:n], whole=row is None)
        per_class = [""] * n if ml is None else [f"{v:.3f}" for v in ml]
    position = "" if row is None or row.position_mm is None else f"{row.position_mm:.2f}"
    return [vr.volume.depth if row is None else "", "" if row is None else row.number, position,
            series_text(vr.volume, options), patient_text(vr.volume, options), *per_class,
            *component_cells(spec, vr.components, volume_row=row is None)]


def write_volume_rows(report: ReportWriter, spec: ModelSpec, path: Path | str, vr: VolumeResult,
                      options: VolumeOptions, extra_after: Sequence[str] = ()) -> None:
    """The volume's row, then (per_slice, or always for a classifier) one row per slice."""
    hw = (vr.volume.rows, vr.volume.columns)
    values = report.count_values(vr.counts) if spec.task == "segmentation" else report.prediction_values(())
    report.add_counts(path, task=vr.task, provider=vr.provider, hw=hw, score=vr.score, verdict=vr.verdict,
                      values=values, extra=[*volume_cells(spec, vr, options), *extra_after], timings=vr.timings,
                      warning="; ".join(vr.warnings))
    if not (options.per_slice or spec.task != "segmentation"):
        return
    for row in vr.slices:
        values = report.count_values(row.counts) if spec.task == "segmentation" \
            else report.prediction_values(row.predictions)
        uncertain = uncertainty(row.predictions, spec)  # a classifier's slice without verdict rules
        shown = f"{path}#{row.number}" if options.anonymize else row.path  # no source file name under --anonymize
        report.add_counts(shown, task=vr.task, provider=vr.provider, hw=hw, score=row.score,
                          verdict=row.verdict, values=values, reason=uncertain.reason if uncertain else "",
                          extra=[*volume_cells(spec, vr, options, row), *extra_after], timings=row.timings,
                          warning="; ".join(row.warnings))


class VolumeAssembler:
    """Collects a volume's slices as the writer stage finishes them, in order, and finishes the volume."""

    def __init__(self, spec: ModelSpec, options: VolumeOptions, *, algorithm: Algorithm,
                 texts: Mapping[str, Mapping[str, str]] | None = None, out_dir: Path | None = None) -> None:
        self.spec, self.options, self.algorithm, self.texts = spec, options, algorithm, texts
        self.out_dir = out_dir  # what the last check of --anonymize names files relative to
        self._privacy: VolumePrivacy | None = None  # of the volume being exported (DICOM)
        self._written: list[Path] = []  # per-slice PNGs of the volume
        self._index: int | None = None
        self._labels: np.ndarray | None = None
        self._display: list[np.ndarray | None] = []
        self._rows: list[SliceRow] = []
        self._error: str | None = None
        self._scores: np.ndarray | None = None  # a 3D model's kept probabilities, for --save scores (NIfTI)

    def add(self, index: int, volume: Volume, k: int, result: Result | None, error: str | None, *,
            image: DecodedImage | None = None, slice_stem: Path | None = None, save: Sequence[str] = ()) -> bool:
        """Slice `k` of input `index` (its result, or the error that stopped it), `image` as decoded (for
        per-slice overlays under `slice_stem` and the Secondary Capture); True when it was the last slice."""
        if self._index != index:
            self._start(index, volume)
        if self._error is None and error is not None:
            self._error = error
        if self._error is None and result is not None:
            self._keep(volume, k, result, image, slice_stem, save)
        return k == volume.depth - 1

    def add_volume(self, index: int, volume: Volume, results: Iterable[Result], *, scores: np.ndarray | None = None,
                   image: Callable[[int], DecodedImage | None] = lambda _: None,
                   slice_stem: Callable[[int], Path | None] = lambda _: None, save: Sequence[str] = ()) -> None:
        """A 3D model's volume at once: one Result per slice (app.runs.folder.volume3d.slice_results), in order;
        `scores` the kept probabilities [K, D, H, W] to export as NIfTI (None: not asked for)."""
        self._start(index, volume)
        for k, result in enumerate(results):
            self._keep(volume, k, result, image(k), slice_stem(k), save)
        self._scores = scores

    def finish(self, volume: Volume, stem: Path | None, provider: str) -> VolumeResult:
        """The assembled volume, exported under `stem` (None: no outputs). Raises SegLensError with the first
        slice's error, or when an export fails (nothing half-written: each export is atomic)."""
        try:
            if self._error is not None:
                raise SegLensError(self._error)
            # the slices' own counts, summed: a bincount of the whole label volume would widen it to int64 first
            # (400 MB for 200 slices of 512²: docs/PERFORMANCE.md, "Volumes")
            counts = np.sum([row.counts for row in self._rows if row.counts.size], axis=0) \
                if self._labels is not None else np.zeros(256, np.int64)
            found, why_not = volume_components(volume, self._labels) if self.spec.task == "segmentation" \
                else (None, "")
            exports, notices = self._export_whole(volume, stem) if stem is not None else ((), ())
            notices = (*notices, *filter(None, [components_notice(volume, found, why_not)]))  # too many: one line
            result = VolumeResult(volume, self.spec.task, provider, counts, tuple(self._rows), tuple(exports),
                                  tuple(notices), found, components_verdict(self.spec, found, why_not))
            if self.options.anonymize and stem is not None:
                self._last_check(result, stem)
            return result
        finally:
            self._index, self._labels, self._display, self._rows = None, None, [], []
            self._privacy, self._written, self._scores = None, [], None

    def _last_check(self, vr: VolumeResult, stem: Path) -> None:
        """--anonymize: nothing of the source's identity in any file, name or report cell of the volume, or its
        files are removed and the volume is an error (app.runs.privacy.check)."""
        from app.runs.outputs.segments import segments_of
        from app.runs.privacy.check import own_words, remove_outputs, volume_leak

        rows = [None, *vr.slices] if self.options.per_slice or self.spec.task != "segmentation" else [None]
        cells = [str(cell) for row in rows for cell in volume_cells(self.spec, vr, self.options, row)]
        files = [*vr.exports, *self._written]
        found = volume_leak(files, facts=self._privacy.facts if self._privacy else None, info=vr.volume.info,
                            root=self.out_dir or stem.parent, cells=[*cells, stem.as_posix()],
                            own=own_words(segments_of(self.spec.classes), self.algorithm))
        if found:
            remove_outputs(files)
            raise SegLensError(f"de-identification check failed: {found}; the volume's outputs were removed")

    def _start(self, index: int, volume: Volume) -> None:
        self._index, self._error, self._rows = index, None, []
        self._labels, self._privacy, self._written = None, None, []
        self._display = [None] * volume.depth if "sc" in self._exports(volume) else []

    def _keep(self, volume: Volume, k: int, result: Result, image: DecodedImage | None, slice_stem: Path | None,
              save: Sequence[str]) -> None:
        if result.mask is not None:
            if self._labels is None:
                self._labels = np.zeros((volume.depth, *result.mask.shape), np.uint8)
            if result.mask.shape != self._labels.shape[1:]:
                raise SegLensError(f"{volume.slices[k].path}: slice {k + 1} is {result.mask.shape[1]}×"
                                   f"{result.mask.shape[0]}, the volume's first slice "
                                   f"{self._labels.shape[2]}×{self._labels.shape[1]}")
            self._labels[k] = result.mask
            if self._display and image is not None:
                self._display[k] = image.display()
        if slice_stem is not None and save:
            self._written += write_result_images(result, self.spec, slice_stem, save,
                                                 None if image is None else image.pixels, texts=self.texts,
                                                 root=self.out_dir)
        self._rows.append(SliceRow(k + 1, slice_path(volume, k), result.class_pixels(), result.predictions,
                                   image_score(result),
                                   slice_verdict(self.spec, result), dict(result.timings),
                                   volume.slice_position_mm(k),
                                   result.warnings))

    def _exports(self, volume: Volume) -> tuple[str, ...]:
        return chosen_exports(self.spec, volume, self.options.exports)

    def _export(self, volume: Volume, stem: Path) -> tuple[list[Path], list[str]]:
        from app.runs.exports import formats as ex

        written: list[Path] = []
        notices: list[str] = []
        segments = ex.segments_of(self.spec.classes)
        kinds = self._exports(volume)
        privacy = self._privacy = self._volume_privacy(volume, kinds)
        labels = cast(np.ndarray, self._labels)  # exports are chosen for a segmentation volume: it has labels
        display = cast(Callable[[int], np.ndarray], self._display.__getitem__)  # "sc" kept every slice's
        for kind in kinds:
            problem = export_problem(kind, volume) or (
                "the source series is written only de-identified (--anonymize)"
                if kind == "source" and not self.options.anonymize else None)
            if problem:
                notices.append(f"{volume.source}: no {kind} export ({problem})")
                continue
            if kind == "nifti":
                written.append(ex.write_nifti_labels(volume, labels, stem.with_name(stem.name + "_mask.nii.gz"),
                                                     scrub=self.options.anonymize))
            elif kind in ("dicom-seg", "rtstruct"):  # the same arguments, one file each
                write = ex.write_dicom_seg if kind == "dicom-seg" else ex.write_rtstruct
                written.append(write(volume, labels, segments, export_paths([kind], stem)[0], algorithm=self.algorithm,
                                     privacy=privacy))
            elif kind == "sc":
                written += ex.write_secondary_capture(volume, labels, segments, stem.with_name(stem.name + "_sc"),
                                                      display=display, opacity=self.options.opacity,
                                                      algorithm=self.algorithm, privacy=privacy)
            elif kind == "source":
                written += ex.write_source_copy(volume, stem.with_name(stem.name + "_source"), privacy=privacy)
        if self._scores is not None:  # a 3D model's --save scores
            written += self._export_scores(volume, stem, notices)
        return written, notices

    def _export_scores(self, volume: Volume, stem: Path, notices: list[str]) -> list[Path]:
        from app.runs.folder.volume3d import SCORES_SUFFIX, write_nifti_scores

        if volume.affine is None:
            notices.append(f"{volume.source}: no scores NIfTI (the files carry no geometry)")
            return []
        return [write_nifti_scores(volume, cast(np.ndarray, self._scores), stem.with_name(stem.name + SCORES_SUFFIX),
                                   scrub=self.options.anonymize)]

    def _export_whole(self, volume: Volume, stem: Path) -> tuple[list[Path], list[str]]:
        """The exports; under --anonymize one that fails takes those written before it along (a SEG must not
        stay behind claiming to be de-identified when its Secondary Capture was refused)."""
        if not self.options.anonymize:
            return self._export(volume, stem)
        from app.runs.privacy.check import remove_outputs

        try:
            return self._export(volume, stem)
        except BaseException:
            planned = export_paths(self._exports(volume), stem)
            remove_outputs([*(p for p in planned if p.exists()), *self._written])
            raise

    def _volume_privacy(self, volume: Volume, kinds: Sequence[str]) -> VolumePrivacy | None:
        """The volume's VolumePrivacy (its source headers read once): under --anonymize, or to carry an already
        de-identified source's status into its SEG and Secondary Capture."""
        from app.runs.privacy.deidentify import volume_privacy

        if not (self.options.anonymize or {"dicom-seg", "sc", "rtstruct"} & set(kinds)):
            return None
        return volume_privacy(volume, anonymize=self.options.anonymize, key=self.options.pseudonym_key)


def chosen_exports(spec: ModelSpec, volume: Volume, exports: Sequence[str] | None) -> tuple[str, ...]:
    """The exports asked for a volume (None: DEFAULT_EXPORTS where it has a geometry); none for a classifier."""
    if spec.task != "segmentation":
        return ()
    if exports is None:
        return DEFAULT_EXPORTS if volume.affine is not None else ()
    return tuple(exports)


def volume_outputs(volume: Volume, spec: ModelSpec, stem: Path, exports: Sequence[str] | None) -> list[Path]:
    """The files a finished volume has under its output stem (what --resume checks): the exports that apply."""
    kinds = [k for k in chosen_exports(spec, volume, exports) if export_problem(k, volume) is None]
    return export_paths(kinds, stem)


def export_problem(kind: str, volume: Volume) -> str | None:
    """Why `kind` cannot be written for `volume` (one line), None when it can."""
    if kind not in EXPORTS:
        return f"unknown export {kind!r}"
    if kind in ("dicom-seg", "sc", "rtstruct") and not volume.kind.startswith("dicom"):
        return "DICOM SEG, Secondary Capture and RTSTRUCT need a DICOM source; this is NIfTI"
    if kind == "source" and not volume.kind.startswith("dicom"):
        return "a source copy is of a DICOM source; this is NIfTI"
    if kind in ("nifti", "dicom-seg", "rtstruct") and volume.affine is None:
        return "the files carry no geometry (ImagePositionPatient / ImageOrientationPatient)"
    return None


def export_paths(kinds: Sequence[str], stem: Path) -> list[Path]:
    """Where each export of a volume with output stem `stem` goes (what --resume checks)."""
    names = {"nifti": "_mask.nii.gz", "dicom-seg": "_seg.dcm", "sc": "_sc", "source": "_source",
             "rtstruct": "_rtstruct.dcm"}
    return [stem.with_name(stem.name + names[k]) for k in kinds if k in names]


def slice_path(volume: Volume, k: int) -> str:
    """How a slice is named in the report: its own file, or `<file>#<slice>` when one file holds them all."""
    ref = volume.slices[k]
    return str(ref.path) if volume.kind == "dicom" else f"{ref.path}#{k + 1}"
