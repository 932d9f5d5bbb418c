"""Turn the paths a user gives (files and folders) into an ordered list of inputs.

Folders are walked recursively (symlinked folders followed once, loops cut), keeping image extensions only,
in natural order (img2 before img10). Files named explicitly are kept whatever their extension: the user
asked for them, so a wrong one gets an error row rather than silence.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

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
    volume: object | None = None  # app.io.volumes.Volume (not imported here: see above)


def natural_key(text: str) -> tuple:
    return tuple(int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text))


def discover(paths: list[str | Path], *, exclude: list[str | Path] = ()) -> list[InputFile]:
    """Expand files and folders into inputs, each file once, in the order given then natural order.

    Folders in `exclude` (an output folder inside an input folder) are not walked, so a rerun does not feed
    on its own masks.
    """
    found: list[InputFile] = []
    seen: set[str] = set()
    skipped = {os.path.realpath(p) for p in exclude}
    for raw in paths:
        root = Path(raw)
        items = _walk(root, skipped) if root.is_dir() else [InputFile(root, Path(root.name))]
        for item in items:
            key = os.path.realpath(item.path) if item.path.exists() else str(item.path)
            if key not in seen:
                seen.add(key)
                found.append(item)
    return found


def _walk(root: Path, skipped: set[str]) -> list[InputFile]:
    files: list[InputFile] = []
    visited: set[str] = set()

    def unreadable(error: OSError) -> None:  # os.walk skips such a folder silently: say so in the report instead
        folder = Path(error.filename or root)
        rel = folder.relative_to(root) if folder != root and root in folder.parents else Path(folder.name)
        reason = error.strerror or type(error).__name__
        files.append(InputFile(folder, rel, f"cannot list this folder ({reason}): the images in it were not read"))

    for folder, dirs, names in os.walk(root, followlinks=True, onerror=unreadable):
        real = os.path.realpath(folder)
        if real in visited or (real in skipped and real != os.path.realpath(root)):  # a loop, or outputs
            dirs[:] = []
            continue
        visited.add(real)
        dirs.sort(key=natural_key)
        for name in sorted(names, key=natural_key):
            path = Path(folder) / name
            if is_image_path(path):
                files.append(InputFile(path, path.relative_to(root)))
    return sorted(files, key=lambda f: natural_key(f.rel.as_posix()))


NAME_MAX = 255  # bytes in one file name on Linux, macOS and Windows alike
# room after a stem: the longest output suffix, a de-duplication suffix, and what the temporary file an output is
# written through adds to its name (a prefix and a random part: io/files.py)
_SUFFIX_ROOM = len("_overlay.png") + len("_jpeg_999") + 40


def safe_name(name: str) -> str:
    """`name` as one output file name part that stays where it is put: `.`/`..` (the stem of `..png` is `.`)
    and empty names are spelt out, and a name too long for an output suffix is cut, keeping it distinct with
    a hash of the whole."""
    if name in ("", ".", ".."):
        return {"": "unnamed", ".": "dot", "..": "dotdot"}[name]
    encoded = os.fsencode(name)
    limit = NAME_MAX - _SUFFIX_ROOM
    if len(encoded) <= limit:
        return name
    digest = hashlib.sha256(encoded).hexdigest()[:10]
    return os.fsdecode(encoded[: limit - len(digest) - 1]) + "_" + digest


def output_stems(inputs: list[InputFile]) -> list[Path]:
    """A distinct relative output stem per input: `sub/name`, then `sub/name_jpg`, `sub/name_jpg_2`…; every
    part made safe (`safe_name`), so `<out>/<stem>_mask.png` is always inside `<out>`."""
    taken: set[str] = set()
    stems: list[Path] = []
    for item in inputs:
        stem = item.rel.name[:-7] if item.rel.name.lower().endswith(".nii.gz") else item.rel.stem
        base = Path(*(safe_name(part) for part in item.rel.parent.parts), safe_name(stem))
        candidate, n = base, 1
        while candidate.as_posix().lower() in taken:
            suffix = item.rel.suffix.lstrip(".").lower() or "file"
            candidate = base.with_name(f"{base.name}_{suffix}" + (f"_{n}" if n > 1 else ""))
            n += 1
        taken.add(candidate.as_posix().lower())
        stems.append(candidate)
    return stems
