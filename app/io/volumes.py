"""Volumes: a DICOM series (one file per slice, or one multi-frame file) or a NIfTI file, as an ordered stack of
2D slices with its geometry. The 2D model runs slice by slice; exports (DICOM SEG, NIfTI, Secondary Capture) and
volumes in mL need the geometry kept here.

Conventions (one for every kind, so the rest of SegLens never asks which kind it has):
- a slice is shown and given to the model as rows × columns: DICOM as stored; NIfTI slice k is `data[:, :, k].T`
  (rows = the j axis, columns = the i axis), so the label volume `labels[k, row, col]` is `nifti[col, row, k]`;
- `affine` maps (column i, row j, slice k) to RAS+ millimetres (NIfTI's convention; DICOM's LPS is converted:
  x and y negated), so voxel (0, 0, 0) is the first slice's ImagePositionPatient in RAS;
- slices are ordered along the slice normal (row cosines × column cosines), first = index 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from app.errors import ImageError
from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted

if TYPE_CHECKING:
    from pydicom import Dataset


@dataclass(frozen=True)
class SliceRef:
    """Where slice k of a volume comes from."""

    path: Path  # the file holding the slice
    frame: int = 0  # the frame within that file (multi-frame DICOM; NIfTI: the slice index k)
    position: tuple[float, float, float] | None = None  # DICOM ImagePositionPatient (LPS mm) of this slice
    sop_instance_uid: str | None = None  # DICOM: the source instance (a SEG references it per frame)
    instance_number: int | None = None


@dataclass(frozen=True)
class Channel:
    """One input channel of a case: a volume (time point `time` of a 4D NIfTI whose volumes are the channels) and
    the model's name for the channel ("" when the model names none)."""

    volume: Volume
    time: int = 0
    name: str = ""


@dataclass(frozen=True)
class Volume:
    kind: str  # "dicom" (one file per slice), "dicom-multiframe", "nifti"
    source: Path  # the series' folder / the multi-frame file / the .nii(.gz) file
    key: str  # identity: SeriesInstanceUID (DICOM; "<uid>_2"… for further parts of a split series), the file's
    # stem without .nii(.gz) (NIfTI)
    label: str  # one line for lists: "CT · CHEST · Axial 2.5 mm (120 slices)" (no patient name or ID)
    slices: tuple[SliceRef, ...]  # along the slice normal
    rows: int
    columns: int
    spacing: tuple[float, float, float] | None  # mm between slices, rows, columns; None: no geometry in the files
    affine: np.ndarray | None  # 4×4 float64, (i, j, k) → RAS+ mm; None without geometry
    window: tuple[float, float] | None = None  # (center, width) shared by every slice: the file's, else automatic
    info: dict[str, str] = field(default_factory=dict)  # patient / study / series fields for the info panel
    # (not for logs)
    series: dict[str, str | None] = field(default_factory=dict)  # DICOM identity: StudyInstanceUID, SeriesInstanceUID,
    # FrameOfReferenceUID, Modality, SeriesNumber, SeriesDescription
    warnings: tuple[str, ...] = ()  # one line each: a gap, ordered by InstanceNumber, a split series
    ordered_by: str = "position"  # "position" | "instance number" | "file name" | "file" (NIfTI, multi-frame)
    time_points: int = 1  # NIfTI 4D: the slices are (t, k) pairs, t-major; shapes and exports keep the 4th axis
    channels: tuple[Channel, ...] = ()  # a case of several input channels (app.io.channels), in the model's order;
    # empty: this volume is the one channel

    def __post_init__(self) -> None:
        """A geometry no scanner writes (a voxel side of 0 or 1e306 mm, a NaN in the affine) is refused here, whatever
        decoder made the volume: it is read without geometry, one line in its warnings saying why, so no mL, mm or
        export is ever computed from it (a NIfTI's pixdim of 0 gave 0 mL; DICOM tags are refused by name earlier)."""
        problem = geometry_problem(self.spacing, self.affine)
        if problem:
            object.__setattr__(self, "spacing", None)
            object.__setattr__(self, "affine", None)
            tag = "pixdim / the affine" if self.kind == "nifti" else "the slice positions"
            object.__setattr__(self, "warnings", (*self.warnings, f"{self.source.name}: {tag}: {problem}; the volume "
                                                                  "is read without geometry (no spacing, so no mL)"))

    @property
    def depth(self) -> int:
        return len(self.slices)

    @property
    def voxel_ml(self) -> float | None:
        """One voxel's volume in millilitres (mm³ / 1000), None without geometry."""
        return None if self.spacing is None else float(np.prod(self.spacing)) / 1000.0

    def millilitres(self, voxels: np.ndarray, *, whole: bool = True) -> np.ndarray | None:
        """mL of voxel counts (per label value): of the whole volume (`whole`: a 4D NIfTI's are the mean per time
        point), or of one slice; None without geometry."""
        ml = self.voxel_ml
        if ml is None:
            return None
        return np.asarray(voxels, np.float64) * (ml / (max(1, self.time_points) if whole else 1))

    def slice_position_mm(self, index: int) -> float | None:
        """Slice `index`'s position along the normal in mm (what the viewer shows beside the slice number)."""
        from app.io.geometry import position_along

        if self.affine is None or not 0 <= index < self.depth:
            return None
        position = self.slices[index].position
        if position is not None:  # DICOM: ImagePositionPatient · normal (LPS → RAS keeps the dot product)
            point = np.asarray(position, float) * np.array([-1.0, -1.0, 1.0])
        else:  # NIfTI: the k-th voxel centre; 4D slices are (t, k) pairs, t-major
            k = index % max(1, self.depth // max(1, self.time_points))
            point = (self.affine @ np.array([0.0, 0.0, float(k), 1.0]))[:3]
        return position_along(point, self.affine[:3, 2])

    def orientation_labels(self) -> dict[str, str] | None:
        """The patient directions at the screen's edges for a slice shown as rows × columns:
        {"left": "R", "right": "L", "top": "A", "bottom": "P"} for a standard axial DICOM slice (radiological
        convention: the patient's right on the screen's left). Oblique: the two strongest letters ("LP").
        None without geometry."""
        from app.io.geometry import edge_labels

        return None if self.affine is None else edge_labels(self.affine)


def geometry_problem(spacing: tuple[float, float, float] | None, affine: np.ndarray | None) -> str:
    """Why a volume's spacing (mm along slices, rows, columns) or affine cannot be used, or "" (none is fine)."""
    from app.io.geometry import affine_problem, numbers_text, spacing_problem

    if spacing is not None:
        problem = spacing_problem(spacing, 3)
        if problem:
            return f"the voxel size {numbers_text(spacing)} mm {problem}"
    if affine is not None:
        problem = affine_problem(affine)
        if problem:
            return f"the voxel-to-mm affine {problem}"
    return ""


def is_volume_file(path: Path) -> bool:
    """`.nii` / `.nii.gz` by name (a DICOM file is recognised by content: app.io.dicom.is_dicom)."""
    name = path.name.lower()
    return name.endswith(".nii") or name.endswith(".nii.gz")


DICOM_KINDS = ("dicom", "dicom-multiframe")


def source_datasets(volume: Volume) -> list[Dataset]:
    """The header of each slice's source file, in the volume's order (a multi-frame file is read once).

    Pixel data is not read: highdicom takes the geometry and UIDs from the headers only.
    """
    import pydicom

    read: dict[Path, Dataset] = {}
    for ref in volume.slices:
        if ref.path not in read:
            try:
                with open_untrusted(ref.path, limit=INPUT_FILE_LIMIT) as handle:  # a FIFO swapped in: refused
                    read[ref.path] = pydicom.dcmread(handle, stop_before_pixels=True)
            except Exception as exc:  # pydicom raises many types for a damaged file
                raise ImageError(f"{ref.path}: cannot read the source DICOM ({exc})") from exc
    return [read[ref.path] for ref in volume.slices]
