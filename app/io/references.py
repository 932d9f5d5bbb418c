"""Ground-truth masks for `seglens-cli run --reference DIR`: find the one that belongs to an input, read it.

Matching (first hit wins), for an input found as `a/b/x.jpg` (its path relative to the folder it was found in):
  1. by relative path, the name with its extension first: `REF/a/b/x.jpg_mask.png` (as the review folder names a
     correction), `REF/a/b/x.jpg.png`…, then the stem: `REF/a/b/x.png`, `REF/a/b/x_mask.png`, `REF/a/b/x.tif`,
     `REF/a/b/x.tiff`, `REF/a/b/x_mask.tif` (in that order) — a stem match only when no other input beside it
     shares the stem (`a/b/x.png` and `a/b/x.jpg`: which one is `x_mask.png` for?), else a one-line notice;
  2. by stem anywhere under REF (a flat folder of masks): the one file named `x.png` / `x_mask.png` / `x.tif`…
     — only when exactly one reference has that stem *and* exactly one input has it, since otherwise the
     pairing would be a guess. Several candidates are a notice naming them, never a silent pick.
A reference that is the input file itself (REF = the image folder, masks beside images) is skipped.

Reading: 8- or 16-bit gray, palette PNGs (their indices, not their colours), 1-bit, or RGB whose channels are
equal; value = class index. For a binary model (2 classes) a 0/255 mask is read as 0/1. A value above the
model's last class is a one-line ImageError naming the file.

A DICOM SEG or RTSTRUCT is a reference too, for the slices of the series it was made over: `derived_source` names
that series, `derived_labels` reads it back as a label volume over the series' slices (the PACS retrieve's).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from app.errors import ImageError
from app.guard.untrusted import INPUT_FILE_LIMIT, NotRegularFile, open_untrusted
from app.io.images import check_size, pillow_guard, pixel_limit
from app.io.limits import megapixels

if TYPE_CHECKING:
    from app.io.volumes import Volume

SUFFIXES = (".png", "_mask.png", ".tif", ".tiff", "_mask.tif")


class ReferenceIndex:
    """Where each input's reference is, under one reference folder."""

    def __init__(self, root: Path, input_rels: Sequence[Path] = ()) -> None:
        self.root = Path(root)
        self._by_stem: dict[str, list[Path]] = defaultdict(list)
        for folder, _dirs, names in os.walk(self.root, followlinks=True):
            for name in names:
                key = _stem_key(name)
                if key is not None:
                    self._by_stem[key.lower()].append(Path(folder) / name)
        self._input_stems: dict[str, int] = defaultdict(int)
        self._input_names: dict[str, int] = defaultdict(int)
        self._siblings: dict[tuple[str, str], list[str]] = defaultdict(list)  # (folder, stem) → its inputs' names
        for rel in input_rels:
            self._input_stems[rel.stem.lower()] += 1
            self._input_names[rel.name.lower()] += 1
            self._siblings[(rel.parent.as_posix(), rel.stem.lower())].append(rel.name)

    def find(self, rel: Path, input_path: Path | None = None) -> tuple[Path | None, str | None]:
        """(the reference of the input found as `rel`, None) or (None, why there is none: one line)."""
        for name in (rel.name, rel.stem):  # `x.jpg_mask.png` is x.jpg's alone; `x_mask.png` may be x.png's too
            for suffix in SUFFIXES:
                candidate = self.root / rel.parent / (name + suffix)
                if candidate.is_file() and not _same_file(candidate, input_path):
                    shared = self._stem_shared(rel, input_path) if name != rel.name else []
                    return (None, _ambiguous(candidate, rel, shared)) if shared else (candidate, None)
        exact = self._flat(rel.name, self._input_names, input_path)
        if exact:
            return exact[0], None
        found = self._flat(rel.stem, self._input_stems, input_path, unique=False)
        if len(found) == 1 and self._input_stems.get(rel.stem.lower(), 1) == 1:
            return found[0], None
        if len(found) > 1 or (found and self._input_stems.get(rel.stem.lower(), 1) > 1):
            names = ", ".join(str(p.relative_to(self.root)) for p in sorted(found)[:3])
            return None, f"no unambiguous reference under {self.root} (stem shared: {names})"
        return None, f"no reference under {self.root} ({(rel.parent / (rel.stem + '.png')).as_posix()} or alike)"

    def _flat(self, key: str, inputs: dict[str, int], input_path: Path | None, *, unique: bool = True) -> list[Path]:
        """References named `key` + a suffix anywhere under the root; with `unique`, only one for one input."""
        found = [p for p in self._by_stem.get(key.lower(), []) if not _same_file(p, input_path)]
        if unique and (len(found) != 1 or inputs.get(key.lower(), 1) != 1):
            return []
        return found

    def _stem_shared(self, rel: Path, input_path: Path | None) -> list[str]:
        """The names of the inputs beside `rel` with its stem (`x.png`, `x.jpg`), itself included; [] when it is
        alone. The inputs given, else (the viewer) the image files beside `input_path` on disk."""
        names = set(self._siblings.get((rel.parent.as_posix(), rel.stem.lower()), []))
        if not names and input_path is not None:
            names = _same_stem_on_disk(Path(input_path))
        names.add(rel.name)
        return sorted(names) if len(names) > 1 else []


def _same_stem_on_disk(path: Path) -> set[str]:
    from app.io.discover import is_image_path

    try:
        with os.scandir(path.parent) as entries:
            return {e.name for e in entries if Path(e.name).stem.lower() == path.stem.lower()
                    and is_image_path(Path(e.name))}
    except OSError:
        return set()


def _ambiguous(candidate: Path, rel: Path, shared: list[str]) -> str:
    names = " and ".join((rel.parent / name).as_posix() for name in shared)
    return f"ambiguous reference {candidate}: inputs {names} share the stem {rel.stem} (name it {rel.name}_mask.png)"


def _stem_key(name: str) -> str | None:
    """The input stem a reference file name stands for (`x_mask.png` → `x`), or None for another file."""
    lower = name.lower()
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if lower.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return None


def _same_file(path: Path, other: Path | None) -> bool:
    if other is None:
        return False
    try:
        return os.path.samefile(path, other)
    except OSError:
        return False


def read_reference(path: Path, n_classes: int, *, max_pixels: int | None = None) -> np.ndarray:
    """The reference at `path` as a uint8 label map; ImageError (one line, naming the file) if it is not one.
    As for an input image: only a regular file is opened (a FIFO never blocks), and its size is read from the
    header and checked against `max_pixels` (default: --max-megapixels) before a pixel is decoded."""
    max_pixels = max_pixels or pixel_limit()
    pillow_guard(max_pixels)
    try:
        with open_untrusted(path, limit=INPUT_FILE_LIMIT) as handle, Image.open(handle) as img:
            check_size(path, img.size, max_pixels)
            values = _label_values(path, img)
    except ImageError:
        raise
    except NotRegularFile as exc:
        raise ImageError(f"{path}: cannot read the reference mask ({exc.strerror})") from exc
    except Image.DecompressionBombError as exc:
        raise ImageError(f"{path}: image too large (over twice the limit of {megapixels(max_pixels)} "
                         f"megapixels)") from exc
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError) as exc:
        raise ImageError(f"{path}: cannot read the reference mask ({type(exc).__name__})") from exc
    return check_labels(path, values, n_classes)


def _label_values(path: Path, img: Image.Image) -> np.ndarray:
    if img.mode in ("P", "L", "1") or img.mode.startswith("I"):
        values = np.asarray(img)  # a palette image gives its indices
    elif img.mode in ("RGB", "RGBA"):
        rgb = np.asarray(img)[..., :3]
        if not ((rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 1] == rgb[..., 2]).all()):
            raise ImageError(f"{path}: a colour reference mask; expected class indices (gray or palette PNG)")
        values = rgb[..., 0]
    else:
        raise ImageError(f"{path}: reference mask of mode {img.mode}; expected class indices (gray or palette)")
    if values.ndim != 2:
        raise ImageError(f"{path}: reference mask of shape {values.shape}; expected one channel")
    return values


def check_labels(path: Path, values: np.ndarray, n_classes: int) -> np.ndarray:
    """`values` as uint8 class indices: 0/255 → 0/1 for a binary model; anything above the last class refused."""
    values = values.astype(np.int64, copy=False) if values.dtype == bool else values
    top = int(values.max(initial=0))
    if n_classes == 2 and top == 255 and np.isin(values, (0, 255)).all():
        values, top = (values == 255), 1
    if int(values.min(initial=0)) < 0 or top > n_classes - 1:
        raise ImageError(f"{path}: reference value {top} but the model has {n_classes} classes "
                         f"(0–{n_classes - 1}{'; or a 0/255 mask' if n_classes == 2 else ''})")
    return values.astype(np.uint8)


def derived_source(folder: Path) -> str | None:
    """The SeriesInstanceUID of the series a DICOM SEG or RTSTRUCT in `folder` was made over (a SEG's
    ReferencedSeriesSequence, an RTSTRUCT's ReferencedFrameOfReferenceSequence → RTReferencedStudySequence →
    RTReferencedSeriesSequence: what app/runs/exports writes), read without pixels through the untrusted gate;
    None when no file there names one."""
    from pydicom import dcmread
    from pydicom.errors import InvalidDicomError

    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        try:
            with open_untrusted(path, limit=INPUT_FILE_LIMIT) as handle:
                ds = dcmread(handle, stop_before_pixels=True)
        except (OSError, NotRegularFile, InvalidDicomError, ValueError):
            continue
        for item in ds.get("ReferencedSeriesSequence", []):
            if item.get("SeriesInstanceUID"):
                return str(item.SeriesInstanceUID)
        for frame in ds.get("ReferencedFrameOfReferenceSequence", []):
            for study in frame.get("RTReferencedStudySequence", []):
                for series in study.get("RTReferencedSeriesSequence", []):
                    if series.get("SeriesInstanceUID"):
                        return str(series.SeriesInstanceUID)
    return None


def derived_labels(folder: Path, volume: Volume) -> np.ndarray:
    """The DICOM SEG or RTSTRUCT in `folder` as a label volume over `volume`'s slices ([D, H, W] uint8, the volume's
    slice order; value = the segment or ROI number: SegLens numbers them by class, app.runs.exports). A SEG's frame
    goes on the slice whose SOPInstanceUID it names (DerivationImageSequence → SourceImageSequence; fractional:
    above 0); an RTSTRUCT's contours are filled on the slice each names (ContourImageSequence), the pixel centres
    inside by parity (a contour inside another cuts it out: how SegLens writes holes). ImageError in one line when
    there is neither, or nothing of it lands on a slice of `volume`."""
    ds = _read_derived(folder)
    labels = _seg_labels(ds, volume) if str(ds.Modality).upper() == "SEG" else _rtstruct_labels(ds, volume)
    if not labels.any():
        raise ImageError(f"nothing of the {ds.Modality} lands on a slice of the series")
    return labels


def _read_derived(folder: Path) -> Any:
    """The first DICOM SEG or RTSTRUCT in `folder`, pixels and all, read through the untrusted gate."""
    from pydicom import dcmread
    from pydicom.errors import InvalidDicomError

    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        try:
            with open_untrusted(path, limit=INPUT_FILE_LIMIT) as handle:
                ds = dcmread(handle)
        except (OSError, NotRegularFile, InvalidDicomError, ValueError):
            continue
        if str(ds.get("Modality", "")).upper() in ("SEG", "RTSTRUCT"):
            return ds
    raise ImageError("no DICOM SEG or RTSTRUCT in the retrieved series")


def _seg_labels(seg: Any, volume: Volume) -> np.ndarray:
    frames = np.asarray(seg.pixel_array)
    frames = frames[None] if frames.ndim == 2 else frames
    if frames.shape[1:] != (volume.rows, volume.columns):
        raise ImageError(f"the SEG's frames are {frames.shape[2]}×{frames.shape[1]}, the series' slices "
                         f"{volume.columns}×{volume.rows}")
    slice_of = {ref.sop_instance_uid: k for k, ref in enumerate(volume.slices) if ref.sop_instance_uid}
    labels = np.zeros((len(volume.slices), volume.rows, volume.columns), np.uint8)
    shared = (seg.get("SharedFunctionalGroupsSequence") or [None])[0]  # one segment for all frames: said there
    for frame, groups in zip(frames, seg.get("PerFrameFunctionalGroupsSequence", []), strict=False):
        number, source = _frame_segment(groups, shared)
        k = slice_of.get(source) if source else None
        if k is not None and 0 < number < 256:
            labels[k][frame > 0] = number
    return labels


def _rtstruct_labels(rt: Any, volume: Volume) -> np.ndarray:
    """Each ROI's contours filled on their slices, by parity, the ROI's number as the value."""
    if volume.affine is None:
        raise ImageError("the series has no geometry to place the RTSTRUCT's contours on")
    lps = np.diag([-1.0, -1.0, 1.0]) @ np.asarray(volume.affine, np.float64)[:3, :3]
    to_pixels = np.linalg.pinv(lps[:, :2])  # LPS mm from a slice's origin → (column, row)
    slice_of = {ref.sop_instance_uid: k for k, ref in enumerate(volume.slices) if ref.sop_instance_uid}
    labels = np.zeros((len(volume.slices), volume.rows, volume.columns), np.uint8)
    for roi in rt.get("ROIContourSequence", []):
        number = int(roi.get("ReferencedROINumber", 0) or 0)
        filled: dict[int, np.ndarray] = {}
        for contour in roi.get("ContourSequence", []):
            k = _contour_slice(contour, slice_of)
            data = contour.get("ContourData")
            if k is None or not data or len(data) < 9 or volume.slices[k].position is None:
                continue
            xyz = np.asarray(data, np.float64).reshape(-1, 3) - np.asarray(volume.slices[k].position, np.float64)
            inside = _inside(xyz @ to_pixels.T, volume.rows, volume.columns)
            filled[k] = filled[k] ^ inside if k in filled else inside
        if 0 < number < 256:
            for k, mask in filled.items():
                labels[k][mask] = number
    return labels


def _contour_slice(contour: Any, slice_of: dict[str, int]) -> int | None:
    for image in contour.get("ContourImageSequence", []):
        if image.get("ReferencedSOPInstanceUID"):
            return slice_of.get(str(image.ReferencedSOPInstanceUID))
    return None


def _inside(points: np.ndarray, rows: int, columns: int) -> np.ndarray:
    """The pixel centres (column, row) inside the closed polygon `points`, by the even-odd rule."""
    mask = np.zeros((rows, columns), bool)
    c0, r0 = (max(int(np.floor(v)), 0) for v in points.min(axis=0))
    c1, r1 = min(int(np.ceil(points[:, 0].max())), columns - 1), min(int(np.ceil(points[:, 1].max())), rows - 1)
    if c1 < c0 or r1 < r0:
        return mask
    y, x = (a.astype(np.float64) for a in np.mgrid[r0:r1 + 1, c0:c1 + 1])
    inside = np.zeros(x.shape, bool)
    for (ax, ay), (bx, by) in zip(points, np.roll(points, -1, axis=0), strict=True):
        if ay == by:
            continue  # a horizontal edge crosses no row of centres
        crosses = (ay > y) != (by > y)
        inside ^= crosses & (x < ax + (y - ay) * (bx - ax) / (by - ay))
    mask[r0:r1 + 1, c0:c1 + 1] = inside
    return mask


def _frame_segment(groups: Any, shared: Any) -> tuple[int, str | None]:
    """(the segment number, the source SOPInstanceUID) of one SEG frame: its own functional groups, else the
    shared ones (a SEG of one segment, or of one source image, says it once for every frame)."""
    number, source = 0, None
    for group in (shared, groups):  # the frame's own last: it wins
        if group is None:
            continue
        for item in group.get("SegmentIdentificationSequence", []):
            number = int(item.get("ReferencedSegmentNumber", 0) or 0)
        for derivation in group.get("DerivationImageSequence", []):
            for image in derivation.get("SourceImageSequence", []):
                if image.get("ReferencedSOPInstanceUID"):
                    source = str(image.ReferencedSOPInstanceUID)
    return number, source
