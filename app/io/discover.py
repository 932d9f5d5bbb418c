"""Turn the paths a user gives (files and folders) into an ordered list of inputs.

Folders are walked recursively (symlinked folders followed once, loops cut), keeping image extensions, DICOM
files (by content: `IM0001`, `.IMA` and UID-named files too) and NIfTI files, in natural order (img2 before img10).
DICOM files are grouped into series volumes and NIfTI files read as volumes (app.io.series, app.io.nifti, imported
only when such a file is found). Files named explicitly are kept whatever their extension: the user
asked for them, so a wrong one gets an error row rather than silence.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.io.dicom import DICOM_EXTENSIONS, has_dicom_marker
from app.io.order import natural_key as natural_key  # the viewer's file list sorts with it too

if TYPE_CHECKING:  # for the type checker only: importing them would bring numpy (see below)
    from app.io.series import Refused
    from app.io.volumes import Volume

# No numpy or Pillow here: the viewer lists a dropped folder on its GUI thread, which must not pay ~0.5 s of
# imports (nor hold the GIL and the import lock while the worker loads the model).
IMAGE_EXTENSIONS = frozenset(
    {".png", ".jpg", ".jpeg", ".jpe", ".bmp", ".tif", ".tiff", ".webp", ".gif", ".pgm", ".ppm", ".pbm",
     ".pnm", ".jp2", ".j2k", ".tga", ".dib", ".dcm", ".dicom"}
)


def is_image_path(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_EXTENSIONS


@dataclass(frozen=True)
class InputFile:
    path: Path
    rel: Path  # path relative to the folder it was found in (or just the name), used to name outputs
    problem: str | None = None  # a folder that could not be listed: listed as an input so that it gets a row
    # A DICOM series, multi-frame DICOM or NIfTI file run slice by slice (app.io.volumes). For a series of files,
    # `path` is `<folder>/<SeriesInstanceUID>` (not a file: it names the series in reports) and `rel` likewise.
    volume: Volume | None = None  # app.io.volumes.Volume (imported for the type checker only: see above)


def discover(paths: Sequence[str | Path], *, exclude: Sequence[str | Path] = ()) -> list[InputFile]:
    """Expand files and folders into inputs, each file once, in the order given then natural order.

    DICOM files (recognised by content, whatever their extension) are grouped into series volumes, and NIfTI files
    become volumes (app.io.volumes); several DICOM files of one series named together make one volume.
    Folders in `exclude` (an output folder inside an input folder) are not walked, so a rerun does not feed
    on its own masks.
    """
    slots: list[list[InputFile]] = []
    seen: set[str] = set()
    explicit_dicom: dict[Path, int] = {}  # DICOM files named explicitly → their slot, scanned together below
    skipped = {os.path.realpath(p) for p in exclude}
    for raw in paths:
        root = Path(raw)
        if not root.is_dir() and root.is_file() and _looks_like_dicom(root):
            key = os.path.realpath(root)
            if key not in seen:
                seen.add(key)
                explicit_dicom[root] = len(slots)
                slots.append([])
            continue
        items = _walk(root, skipped) if root.is_dir() else [_explicit_file(root)]
        for item in items:
            key = os.path.realpath(item.path) if item.path.exists() else str(item.path)
            if key not in seen:
                seen.add(key)
                slots.append([item])
    if explicit_dicom:
        from app.io.series import scan_dicom

        for first, found in scan_dicom(list(explicit_dicom), explicit=True):
            base = first.parent  # a DICOMDIR's files are named relative to its folder

            def relative(path: Path, base: Path = base) -> Path:
                return path.relative_to(base) if base in path.parents else Path(path.name)

            slots[explicit_dicom[first]].append(_dicom_input(found, relative))
    return [item for slot in slots for item in slot]


def _explicit_file(path: Path) -> InputFile:
    if _is_nifti_name(path) and path.is_file():
        return _nifti_input(path, Path(path.name))
    return InputFile(path, Path(path.name))


def _walk(root: Path, skipped: set[str]) -> list[InputFile]:
    files: list[tuple[tuple[Any, ...], InputFile]] = []
    dicom: list[Path] = []
    visited: set[str] = set()

    def unreadable(error: OSError) -> None:  # os.walk skips such a folder silently: say so in the report instead
        folder = Path(error.filename or root)
        rel = folder.relative_to(root) if folder != root and root in folder.parents else Path(folder.name)
        reason = error.strerror or type(error).__name__
        problem = f"cannot list this folder ({reason}): the images in it were not read"
        files.append((natural_key(rel.as_posix()), InputFile(folder, rel, problem)))

    for folder, dirs, names in os.walk(root, followlinks=True, onerror=unreadable):
        real = os.path.realpath(folder)
        if real in visited or (real in skipped and real != os.path.realpath(root)):  # a loop, or outputs
            dirs[:] = []
            continue
        visited.add(real)
        dirs.sort(key=natural_key)
        for name in sorted(names, key=natural_key):
            path = Path(folder) / name
            rel = path.relative_to(root)
            if _is_nifti_name(path):
                files.append((natural_key(rel.as_posix()), _nifti_input(path, rel)))
            elif is_image_path(path) and path.suffix.lower() not in DICOM_EXTENSIONS:
                files.append((natural_key(rel.as_posix()), InputFile(path, rel)))
            elif _looks_like_dicom(path):
                dicom.append(path)
            elif name.upper() == "DICOMDIR":  # named as a DICOM index: said when it is none (a FIFO, a text)
                files.append((natural_key(rel.as_posix()), InputFile(path, rel, problem=_not_a_dicomdir(path))))
    if dicom:
        files.extend(_scan_folder_dicom(root, sorted(dicom, key=lambda p: natural_key(p.relative_to(root).as_posix()))))
    return [item for _, item in sorted(files, key=lambda pair: pair[0])]


def _scan_folder_dicom(root: Path, paths: list[Path]) -> list[tuple[tuple[Any, ...], InputFile]]:
    """Series, multi-frame volumes and single images, each placed where its first file sorts."""
    from app.io.series import scan_dicom

    return [(natural_key(first.relative_to(root).as_posix()), _dicom_input(item, lambda p: p.relative_to(root)))
            for first, item in scan_dicom(paths)]


def _dicom_input(item: Volume | Path | Refused, relative: Callable[[Path], Path]) -> InputFile:
    """A plain DICOM file, a multi-frame volume (the file), or a series (`<folder>/<SeriesInstanceUID>`, the folder
    of its first file); `relative` gives a path's `rel`."""
    from app.io.series import Refused

    if isinstance(item, Path):
        return InputFile(item, relative(item))
    if isinstance(item, Refused):  # a DICOMDIR leading out of its folder: its row says so, nothing is read there
        return InputFile(item.path, relative(item.path), problem=item.problem)
    path = item.source / item.key if item.kind == "dicom" else item.source
    return InputFile(path, relative(path), volume=item)


def _nifti_input(path: Path, rel: Path) -> InputFile:
    from app.errors import ImageError
    from app.io.nifti import nifti_volume

    try:
        return InputFile(path, rel, volume=nifti_volume(path))
    except ImageError as exc:  # `problem` is said after the path (as for a folder that cannot be listed)
        message = str(exc)
        return InputFile(path, rel, problem=message.removeprefix(f"{path}: "))




def _is_nifti_name(path: Path) -> bool:
    name = path.name.lower()
    return name.endswith(".nii") or name.endswith(".nii.gz")


def _looks_like_dicom(path: Path) -> bool:
    """A DICOM extension, or 'DICM' after the 128-byte preamble in a file without an image extension (a photo
    is not opened to look)."""
    if path.suffix.lower() in DICOM_EXTENSIONS:
        return True
    return not is_image_path(path) and has_dicom_marker(path)


def _not_a_dicomdir(path: Path) -> str:
    from app.guard.untrusted import untrusted_problem

    return untrusted_problem(path) or "not a DICOM file (no DICM marker), so no DICOMDIR"


NAME_MAX = 255  # bytes in one file name on Linux, macOS and Windows alike
# room after a stem: the longest output suffix and what the temporary file an output is written through adds to
# its name (a prefix and a random part: io/files.py)
_SUFFIX_ROOM = len("_disagreement.png") + 40


def safe_name(name: str) -> str:
    """`name` as one output file name part that stays where it is put: `.`/`..` and empty names are spelt out,
    and a name too long for an output suffix is cut, keeping it distinct with a hash of the whole, its extension
    (up to 16 bytes) kept, the cut between two UTF-8 characters (never a half character in a name)."""
    if name in ("", ".", ".."):
        return {"": "unnamed", ".": "dot", "..": "dotdot"}[name]
    encoded = os.fsencode(name)
    limit = NAME_MAX - _SUFFIX_ROOM
    if len(encoded) <= limit:
        return name
    digest = hashlib.sha256(encoded).hexdigest()[:10]
    dot = encoded.rfind(b".")
    suffix = encoded[dot:] if dot > 0 and len(encoded) - dot <= 16 else b""
    cut = limit - len(digest) - 1 - len(suffix)
    while cut > 0 and encoded[cut] & 0xC0 == 0x80:  # a UTF-8 continuation byte: back to the character's start
        cut -= 1
    return os.fsdecode(encoded[:cut]) + "_" + digest + os.fsdecode(suffix)


def output_stems(inputs: list[InputFile]) -> list[Path]:
    """Each input's relative output stem (`output_stem`), in order."""
    return [output_stem(item) for item in inputs]


def output_stem(item: InputFile) -> Path:
    """Where an input's outputs go under `--out`, a function of the input alone: its relative folder and its whole
    name, extension kept (`sub/x.png` → `sub/x.png`, so `sub/x.png_mask.png`; a series `<folder>/<SeriesUID>`).

    Never of its siblings: a name made unique against the other inputs of a run (`x_png` for x.png beside x.jpg)
    is another input's name in a run without them, and --resume then took that input's outputs for this one's.
    Every part made safe (`safe_name`), so `<out>/<stem>_mask.png` is always inside `<out>`.
    """
    return Path(*(safe_name(part) for part in item.rel.parent.parts), safe_name(item.rel.name))


def refuse_clashes(inputs: list[InputFile]) -> list[InputFile]:
    """`inputs`, where one's outputs would be named as an earlier one's (`a/x.png` and `b/x.png` named one by one,
    or two folders' `x.png`: both `x.png_…`) given a problem, so it is an error row rather than written over the
    first's outputs or renamed after whichever sibling came first. Compared without case (a macOS or Windows
    `--out` folds it)."""
    first: dict[str, InputFile] = {}
    kept: list[InputFile] = []
    for item in inputs:
        key = output_stem(item).as_posix().lower()
        other = first.setdefault(key, item)
        if other is not item and not item.problem:
            item = replace(item, problem=f"its outputs would be named as those of {other.path} "
                                         f"({output_stem(item).name}_…): run it into another --out")
        kept.append(item)
    return kept
