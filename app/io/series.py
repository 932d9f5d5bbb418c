"""DICOM series: headers read without pixels, grouped by SeriesInstanceUID, split where slices differ in size or
orientation, ordered along the slice normal, checked for gaps and duplicates; multi-frame files and DICOMDIRs.

A single-frame series of one slice stays a plain image, as does a file whose header cannot be read (its error row
comes later, from the decoder). During a folder walk, files that hold no image (DICOMDIR, SEG, RT structures and
plans, SR, presentation states) are left out; named explicitly they stay inputs and get an error row.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from app.errors import ImageError
from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted
from app.io.decoded import DecodedImage
from app.io.dicom import INFO_FIELDS, file_window, header_text, quiet_pydicom, read_dicom
from app.io.geometry import (
    RefusedTags,
    dicom_affine,
    orientation_problem,
    plane_normal,
    position_problem,
    spacing_problem,
)
from app.io.limits import MAX_SLICES
from app.io.order import natural_key
from app.io.volumes import SliceRef, Volume
from app.io.window import apply_window, auto_window

if TYPE_CHECKING:
    from pydicom import Dataset

DICOMDIR_CLASS = "1.2.840.10008.1.3.10"
_NOT_IMAGES = ("1.2.840.10008.5.1.4.1.1.66.",  # segmentation, registration, fiducials…
               "1.2.840.10008.5.1.4.1.1.481.3", "1.2.840.10008.5.1.4.1.1.481.5", "1.2.840.10008.5.1.4.1.1.481.8",
               "1.2.840.10008.5.1.4.1.1.88.", "1.2.840.10008.5.1.4.1.1.11.", DICOMDIR_CLASS)
_TAGS = ["SOPClassUID", "SOPInstanceUID", "StudyInstanceUID", "SeriesInstanceUID", "FrameOfReferenceUID",
         "SeriesNumber", "InstanceNumber", "Rows", "Columns", "NumberOfFrames", "ImagePositionPatient",
         "ImageOrientationPatient", "PixelSpacing", "SliceThickness", "WindowCenter", "WindowWidth",
         "PerFrameFunctionalGroupsSequence", "SharedFunctionalGroupsSequence", *INFO_FIELDS]
_GAP = 1.5  # a step this many times the median step: a slice is probably missing
_SAME = 1e-3  # mm: two slices this close are one position
_windows: dict[tuple[Any, ...], tuple[float, float] | None] = {}
_lock = threading.Lock()
_NO_GEOMETRY = "the volume is read without geometry (no spacing, so no mL)"


@dataclass(frozen=True)
class _Slice:
    path: Path
    frame: int
    position: tuple[float, float, float] | None
    instance_number: int | None
    sop_instance_uid: str | None

    @property
    def name(self) -> str:
        return self.path.name if self.frame == 0 else f"{self.path.name} frame {self.frame + 1}"


def scan_dicom(paths: Sequence[Path], *, explicit: bool = False) -> list[tuple[Path, Volume | Path | Refused]]:
    """Group DICOM files into inputs: (the first of its files in the order given, a Volume or a plain file path),
    in that order. `explicit`: the user named the files, so non-images stay (as paths) and a DICOMDIR expands to
    the files it references under its folder (a Refused for any leading out)."""
    found: list[tuple[int, Volume | Path | Refused]] = []
    series: dict[str, list[tuple[int, Dataset]]] = {}
    for index, path, ds in _headers(paths, explicit=explicit):
        if ds is None or not _is_image(ds):
            if ds is None or explicit or not _known_non_image(ds):  # a damaged file gets its error row
                found.append((index, path))
        elif (_int(ds.get("NumberOfFrames")) or 0) > MAX_SLICES:
            found.append((index, path))  # before a record per frame is made: the decoder's error row says why
        elif (_int(ds.get("NumberOfFrames")) or 0) > 1:
            found.append((index, _multiframe_volume(cast(Path, path), ds)))  # a Refused comes without a header
        elif not ds.get("SeriesInstanceUID"):
            found.append((index, path))
        else:
            series.setdefault(str(ds.SeriesInstanceUID), []).append((index, ds))
    for uid, members in series.items():
        found.extend(_series_items(uid, members))
    origins = list(paths)
    return [(origins[index], item) for index, item in sorted(found, key=lambda pair: pair[0])]


@dataclass(frozen=True)
class Refused:
    """A DICOM file named explicitly that is not read, and why (one line, said after its path)."""

    path: Path
    problem: str


def _headers(paths: Sequence[Path], *, explicit: bool) -> Iterator[tuple[int, Path | Refused, Dataset | None]]:
    """(index of the path given, file, header or None when unreadable); an explicit DICOMDIR gives its files, and
    a Refused for the references that lead out of its folder."""
    for index, path in enumerate(paths):
        ds = _read_header(path)
        if explicit and ds is not None and _sop_class(ds) == DICOMDIR_CLASS:
            inside, outside = dicomdir_references(path)
            referenced = [(ref, _read_header(ref)) for ref in inside]
            referenced = [(ref, rds) for ref, rds in referenced if rds is not None and _is_image(rds)]
            yield from ((index, ref, rds) for ref, rds in referenced)
            if outside:
                yield index, Refused(path, f"references files outside its folder (a '..', absolute or linked "
                                           f"path): {outside} not read"), None
            if referenced or outside:
                continue
        yield index, path, ds


def dicomdir_references(path: Path) -> tuple[list[Path], int]:
    """(the files a DICOMDIR references — ReferencedFileID relative to its folder —, existing ones, in its order;
    how many references lead out of that folder). A `..` or absolute component, or a link that resolves outside
    the folder, would run another folder's series (another patient's): such a reference is counted, never read."""
    import pydicom

    try:  # through the untrusted gate's handle: a regular file, within the input limit
        with open_untrusted(path, limit=INPUT_FILE_LIMIT) as handle:
            ds = pydicom.dcmread(handle)
    except Exception:  # an unreadable DICOMDIR references nothing; the file itself gets the error row
        return [], 0
    base = path.parent.resolve()
    files: list[Path] = []
    outside: set[Path] = set()
    for record in ds.get("DirectoryRecordSequence", []):
        parts = record.get("ReferencedFileID")
        if parts:
            parts = [parts] if isinstance(parts, str) else list(parts)
            candidate = path.parent.joinpath(*[str(p) for p in parts])
            if not candidate.resolve().is_relative_to(base):
                outside.add(candidate)
            elif candidate.is_file() and candidate not in files:
                files.append(candidate)
    return files, len(outside)


def read_dicom_slice(volume: Volume, index: int, *, max_pixels: int) -> DecodedImage:
    """Slice `index` of a DICOM volume as a DecodedImage, displayed through the volume's shared window."""

    ref = volume.slices[index]
    if not ref.path.is_file():
        raise ImageError(f"{ref.path}: file not found (slice {index + 1} of the series; moved or deleted?)")
    pixels, raw, _, invert, info, _ = read_dicom(ref.path, frame=ref.frame, max_pixels=max_pixels)
    if raw is None:  # colour: no window to share
        return DecodedImage(ref.path, pixels, "DICOM", None, None, False, info, 1)
    window = volume.window or _auto_window(volume, max_pixels=max_pixels)
    if window is None:  # the middle slice is colour and this one is not: no shared window, this slice's own
        window = auto_window(raw)
    info["Window"] = f"C {window[0]:g} / W {window[1]:g}" + (" (from the file)" if volume.window else " (auto)")
    info["Slices"] = str(volume.depth)
    return DecodedImage(ref.path, apply_window(raw, *window, invert=invert), "DICOM", raw, window, invert, info,
                        1)


def _auto_window(volume: Volume, *, max_pixels: int) -> tuple[float, float] | None:
    """The middle slice's automatic window, computed once per volume (None when that slice is colour)."""
    key = (volume.kind, str(volume.source), volume.key, volume.slices[0].path, volume.depth)
    with _lock:
        if key in _windows:
            return _windows[key]
    middle = volume.slices[volume.depth // 2]
    _, raw, window, *_ = read_dicom(middle.path, frame=middle.frame, max_pixels=max_pixels)
    window = auto_window(raw) if raw is not None else window
    with _lock:
        _windows[key] = window
    return window


def _series_items(uid: str, members: list[tuple[int, Dataset]]) -> list[tuple[int, Volume | Path]]:
    groups: dict[tuple[Any, ...], list[tuple[int, Dataset]]] = {}
    for index, ds in members:
        orientation = _floats(ds.get("ImageOrientationPatient"), 6)
        shape_key = (_int(ds.get("Rows")), _int(ds.get("Columns")),
                     None if orientation is None else tuple(round(v, 3) for v in orientation))
        groups.setdefault(shape_key, []).append((index, ds))
    warnings: tuple[str, ...] = ()
    if len(groups) > 1:
        warnings = (f"series {uid} has slices of {len(groups)} sizes/orientations: split into {len(groups)} "
                    f"volumes",)
    items: list[tuple[int, Volume | Path]] = []
    for group in groups.values():
        if len(group) == 1:
            items.append((group[0][0], Path(group[0][1].filename)))
        else:  # the parts of a split series need distinct keys: they name the inputs and their outputs
            key = uid if not any(isinstance(item, Volume) for _, item in items) else f"{uid}_{len(items) + 1}"
            items.append((min(i for i, _ in group), _series_volume(uid, key, [ds for _, ds in group], warnings)))
    return items


def _series_volume(uid: str, key: str, headers: list[Dataset], warnings: tuple[str, ...]) -> Volume:
    headers = sorted(headers, key=lambda ds: natural_key(str(ds.filename)))
    refused = RefusedTags(_NO_GEOMETRY)
    entries = [_Slice(Path(ds.filename), 0, _point(refused.numbers(ds.get("ImagePositionPatient"), _name(ds),
                                                                    "ImagePositionPatient", position_problem)),
                      _int(ds.get("InstanceNumber")), _text(ds.get("SOPInstanceUID"))) for ds in headers]
    orientations = [refused.numbers(ds.get("ImageOrientationPatient"), _name(ds), "ImageOrientationPatient",
                                    orientation_problem) for ds in headers]
    orientation = orientations[0] if all(o is not None for o in orientations) else None
    spacing = refused.numbers(headers[0].get("PixelSpacing"), _name(headers[0]), "PixelSpacing", spacing_problem)
    return _build("dicom", Path(headers[0].filename).parent, key, headers, entries, orientation, spacing,
                  [*warnings, *refused.lines()])


def _name(ds: Dataset) -> str:
    return Path(str(ds.filename)).name


def _multiframe_volume(path: Path, ds: Dataset) -> Volume:
    frames = _int(ds.get("NumberOfFrames")) or 0  # more than one: scan_dicom's test
    shared = _first_item(ds, "SharedFunctionalGroupsSequence")
    per_frame = list(ds.get("PerFrameFunctionalGroupsSequence", []) or [])
    refused = RefusedTags(_NO_GEOMETRY)
    orientation = refused.numbers(_nested(shared, "PlaneOrientationSequence", "ImageOrientationPatient")
                                  or _nested(per_frame[0] if per_frame else None, "PlaneOrientationSequence",
                                             "ImageOrientationPatient"), path.name, "ImageOrientationPatient",
                                  orientation_problem)
    spacing = refused.numbers(_nested(shared, "PixelMeasuresSequence", "PixelSpacing")
                              or _nested(per_frame[0] if per_frame else None, "PixelMeasuresSequence", "PixelSpacing"),
                              path.name, "PixelSpacing", spacing_problem)
    positions: list[tuple[float, float, float] | None] = [
        _point(refused.numbers(_nested(item, "PlanePositionSequence", "ImagePositionPatient"),
                               f"{path.name} frame {f + 1}", "ImagePositionPatient", position_problem))
        for f, item in enumerate(per_frame)]
    if len(positions) != frames or any(p is None for p in positions):
        positions = [None] * frames
    uid = _text(ds.get("SOPInstanceUID"))
    entries = [_Slice(path, f, positions[f], None, uid) for f in range(frames)]
    key = _text(ds.get("SeriesInstanceUID")) or uid or path.name
    return _build("dicom-multiframe", path, key, [ds], entries, orientation, spacing, refused.lines())


def _build(kind: str, source: Path, key: str, headers: list[Dataset], entries: list[_Slice],
           orientation: tuple[float, ...] | None, pixel_spacing: tuple[float, ...] | None,
           warnings: list[str]) -> Volume:
    entries, ordered_by = _order(kind, entries, orientation, warnings)
    step = None
    if ordered_by == "position":
        assert orientation is not None  # _order orders by position only with an orientation
        entries, step = _check_steps(entries, plane_normal(orientation), warnings)
    by_path = {str(ds.filename): ds for ds in headers}
    middle = by_path.get(str(entries[len(entries) // 2].path), headers[0])
    affine = spacing = None
    if step is not None and pixel_spacing is not None:  # ordered by position: orientation and positions known
        assert orientation is not None and entries[0].position is not None
        affine = dicom_affine(orientation, entries[0].position, step=step, pixel_spacing=pixel_spacing)
        spacing = (step, pixel_spacing[0], pixel_spacing[1])
    return Volume(
        kind=kind, source=source, key=key, label=_label(middle, len(entries)),
        slices=tuple(SliceRef(e.path, e.frame, e.position, e.sop_instance_uid, e.instance_number) for e in entries),
        rows=_int(middle.get("Rows")) or 0, columns=_int(middle.get("Columns")) or 0,
        spacing=spacing, affine=affine,
        window=file_window(middle),
        info={label: header_text(middle.get(tag)) for tag, label in INFO_FIELDS.items()
              if middle.get(tag) not in (None, "")} | {"Slices": str(len(entries))},
        series={tag: _text(middle.get(tag)) for tag in ("StudyInstanceUID", "SeriesInstanceUID",
                                                          "FrameOfReferenceUID", "Modality", "SeriesNumber",
                                                          "SeriesDescription")},
        warnings=tuple(warnings), ordered_by=ordered_by,
    )


def _order(kind: str, entries: list[_Slice], orientation: tuple[float, ...] | None,
           warnings: list[str]) -> tuple[list[_Slice], str]:
    """Along the normal when every slice has a position; else by InstanceNumber; else as the files come."""
    if orientation is not None and all(e.position is not None for e in entries):
        normal = plane_normal(orientation)
        return sorted(entries, key=lambda e: float(np.dot(_known(e.position), normal))), "position"
    if kind == "dicom-multiframe":
        return entries, "file"
    if all(e.instance_number is not None for e in entries):
        refused = any(_NO_GEOMETRY in line for line in warnings)  # a geometry tag's own line says which
        why = "their positions cannot be used" if refused else "the files carry no ImagePositionPatient"
        warnings.append(f"ordered by InstanceNumber: {why}")
        return sorted(entries, key=lambda e: e.instance_number or 0), "instance number"  # none is None here
    warnings.append("ordered by file name: the files carry neither ImagePositionPatient nor InstanceNumber")
    return entries, "file name"


def _check_steps(entries: list[_Slice], normal: np.ndarray, warnings: list[str]) -> tuple[list[_Slice], float]:
    """Drop slices at an already-seen position, warn about gaps; returns the kept slices and the median step."""
    kept = [entries[0]]
    for entry in entries[1:]:
        if abs(float(np.dot(np.subtract(_known(entry.position), _known(kept[-1].position)), normal))) < _SAME:
            warnings.append(f"{entry.name} is at the same position as {kept[-1].name}: skipped as a duplicate")
        else:
            kept.append(entry)
    places = np.array([float(np.dot(_known(e.position), normal)) for e in kept])
    steps = np.diff(places)
    if steps.size == 0:
        return kept, 1.0
    median = float(np.median(steps))
    for i, step in enumerate(steps):
        if step > _GAP * median:
            warnings.append(f"gap between slices {i + 1} and {i + 2}: {step:.1f} mm where the series steps "
                            f"{median:.1f} mm (a slice may be missing)")
    return kept, median


def _label(ds: Dataset, count: int) -> str:
    parts = [header_text(ds.get(tag)) for tag in ("Modality", "StudyDescription", "SeriesDescription")]
    noun = "slice" if count == 1 else "slices"
    return " · ".join(p for p in parts if p.strip()) + f" ({count} {noun})"


def _read_header(path: Path) -> Dataset | None:
    import pydicom

    quiet_pydicom()
    if not path.is_file():  # a FIFO named `x.dcm` would block pydicom's open; its error row comes from the decoder
        return None
    try:  # through the untrusted gate's handle (a file that turns into a FIFO after is_file() is refused at once)
        with open_untrusted(path, limit=INPUT_FILE_LIMIT) as handle:
            ds = pydicom.dcmread(handle, stop_before_pixels=True, specific_tags=_TAGS,
                                 force=path.suffix.lower() in (".dcm", ".dicom"))
    except Exception:  # pydicom raises many kinds on damaged files; the decoder's error row says which
        return None
    if not _sop_class(ds) and "Rows" not in ds:  # a forced read of something that is not DICOM
        return None
    return ds


def _sop_class(ds: Dataset) -> str:
    """The SOP class; a DICOMDIR names it only in its file meta information."""
    meta = getattr(ds, "file_meta", None)
    return str(ds.get("SOPClassUID") or (meta.get("MediaStorageSOPClassUID") if meta is not None else "") or "")


def _known_non_image(ds: Dataset) -> bool:
    """A SEG, RT plan/structures, SR, presentation state or DICOMDIR: left out of a folder's images, silently."""
    return any(_sop_class(ds).startswith(prefix) for prefix in _NOT_IMAGES)


def _is_image(ds: Dataset) -> bool:
    return not _known_non_image(ds) and "Rows" in ds and "Columns" in ds


def _first_item(ds: Any, keyword: str) -> Any:  # a Dataset or a sequence item (a Dataset too), or None
    sequence = ds.get(keyword) if ds is not None else None
    return sequence[0] if sequence else None


def _nested(item: Any, sequence: str, keyword: str) -> Any:
    inner = _first_item(item, sequence)
    return None if inner is None else inner.get(keyword)


def _point(numbers: tuple[float, ...] | None) -> tuple[float, float, float] | None:
    """A checked position (x, y, z) in mm (RefusedTags.numbers with position_problem), None without one."""
    return None if numbers is None or len(numbers) != 3 else (numbers[0], numbers[1], numbers[2])


def _known(position: tuple[float, float, float] | None) -> tuple[float, float, float]:
    """A slice position its caller has checked is there (ordered by position)."""
    assert position is not None
    return position


def _floats(value: Any, count: int) -> tuple[float, ...] | None:
    try:
        numbers = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        return None
    return numbers if len(numbers) == count and all(np.isfinite(numbers)) else None


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _text(value: Any) -> str | None:
    return None if value in (None, "") else header_text(value)
