"""What a volume export says the segmentation is: the model's classes as segments and the algorithm that made
them. Records below the writers (app.runs.exports.seg, secondary_capture) and app.runs.exports.formats, which calls
them: none of the writers imports the module that calls it, not even for a type.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app import __version__
from app.inference.model.codes import ClassCode
from app.inference.model.spec import ClassInfo
from app.io.files import file_sha256
from app.io.render import class_colors


@dataclass(frozen=True)
class Segment:
    """One class of the model as a segment: its label value in `labels`, name, display colour (RGB) and what it is
    (the sidecar's `code:`; None: app.inference.model.codes.DEFAULT_CODE)."""

    value: int
    name: str
    color: tuple[int, int, int]
    code: ClassCode | None = None


@dataclass(frozen=True)
class Algorithm:
    """What produced the segmentation (DICOM SEG's algorithm identification)."""

    name: str  # the model file's stem
    version: str  # the model's SHA-256 (first 16 hex digits)
    sha256: str
    software_version: str  # SegLens's version


def segments_of(classes: Sequence[ClassInfo]) -> tuple[Segment, ...]:
    """The model's classes (app.inference.model.spec.ClassInfo: name, colour or None) as segments: every label value
    >= 1 (0 is the background), each in the colour the viewer paints it (app.io.render.class_colors)."""
    colors, _painted = class_colors(classes)
    return tuple(
        Segment(value=value, name=info.name,
                color=(int(colors[value][0]), int(colors[value][1]), int(colors[value][2])),
                code=info.code)
        for value, info in enumerate(classes[:256]) if value >= 1
    )


def algorithm_of(model_path: Path, *, remote: bool = False) -> Algorithm:
    """The model as DICOM's algorithm identification: its file name and SHA-256 (a `remote` model, no file here:
    its name and a hash of "remote host:port/model", its path)."""
    if remote:
        sha = hashlib.sha256(str(model_path).encode("utf-8")).hexdigest()
        return Algorithm(name=model_path.name, version=sha[:16], sha256=sha, software_version=__version__)
    sha = file_sha256(model_path)  # through app.guard.untrusted: a FIFO or device refused, never waited on
    return Algorithm(name=model_path.stem, version=sha[:16], sha256=sha, software_version=__version__)
