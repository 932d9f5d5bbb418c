"""What a class *is*, in a coding scheme a PACS understands: the sidecar's per-class `code:`, the segmented
property category and type a DICOM SEG describes each segment with (SNOMED CT codes, usually).

    classes:
    - background
    - name: lung
      code: {category: [SCT, 91723000, Anatomical Structure], type: [SCT, 39607008, Lung]}

A class without `code:` gets DEFAULT_CODE (SNOMED CT "Tissue" as category and type; its segment label carries the
class name): SegLens cannot tell what a model's free-text class name means, so it claims nothing more. Plain data
only: app.runs.exports.seg makes highdicom's coded concepts of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from app.inference.model.validators import shown

_PARTS = ("category", "type")
_SCHEME = re.compile(r"[A-Za-z0-9_.\-]{1,16}")  # a Coding Scheme Designator is an SH value (16 characters)
_MAX_VALUE, _MAX_MEANING = 64, 64  # a long code value becomes LongCodeValue (UC); Code Meaning is LO (64)


@dataclass(frozen=True)
class Coded:
    """One coded concept: (coding scheme designator, code value, code meaning), e.g. (SCT, 39607008, Lung)."""

    scheme: str
    value: str
    meaning: str

    def text(self) -> str:
        return f"{self.scheme} {self.value} {self.meaning}"


@dataclass(frozen=True)
class ClassCode:
    """A class's DICOM SEG segmented property category (CID 7150) and type (CID 7151 and others)."""

    category: Coded
    type: Coded

    def text(self) -> str:
        """`Anatomical Structure / Lung (SCT 39607008)`, for `info` and reports."""
        return f"{self.category.meaning} / {self.type.meaning} ({self.type.scheme} {self.type.value})"


TISSUE = Coded("SCT", "85756007", "Tissue")
DEFAULT_CODE = ClassCode(category=TISSUE, type=TISSUE)


class CodeError(ValueError):
    """A refused `code:` value, with the part it is in (`category`, `type`) for the key in the message."""

    def __init__(self, part: str, problem: str) -> None:
        super().__init__(problem)
        self.part = part


def parse_class_code(value: Any) -> ClassCode:
    """`{category: [scheme, value, meaning], type: [scheme, value, meaning]}` as a ClassCode; raises CodeError
    ("must be …, got …") naming the part, or ValueError for the mapping itself."""
    if not isinstance(value, dict):
        raise ValueError(f"must be {{category: [scheme, value, meaning], type: [scheme, value, meaning]}}, "
                         f"got {shown(value)}")
    unknown = sorted(str(k) for k in set(value) - set(_PARTS))
    if unknown:
        raise ValueError(f"has unknown key '{unknown[0][:40]}' (expected category, type)")
    missing = [part for part in _PARTS if part not in value]
    if missing:
        raise ValueError(f"needs {' and '.join(missing)} (a DICOM SEG segment has both a category and a type)")
    return ClassCode(category=_coded("category", value["category"]), type=_coded("type", value["type"]))


def _coded(part: str, value: Any) -> Coded:
    example = "[SCT, 39607008, Lung]" if part == "type" else "[SCT, 91723000, Anatomical Structure]"
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise CodeError(part, f"must be [scheme, value, meaning], e.g. {example}, got {shown(value)}")
    scheme, code, meaning = (_text(item) for item in value)
    if not _SCHEME.fullmatch(scheme):
        raise CodeError(part, f"scheme must be a coding scheme designator such as SCT (letters, digits, up to 16), "
                              f"got {shown(value[0])}")
    if not code or len(code) > _MAX_VALUE or not code.isprintable():
        raise CodeError(part, f"value must be a code of 1 to {_MAX_VALUE} printable characters, got {shown(value[1])}")
    if scheme == "SCT" and not (code.isdigit() and 6 <= len(code) <= 18):
        raise CodeError(part, f"value must be a SNOMED CT identifier (6 to 18 digits) for scheme SCT, "
                              f"got {shown(value[1])}")
    if not meaning or len(meaning) > _MAX_MEANING or not meaning.isprintable():
        raise CodeError(part, f"meaning must be a text of 1 to {_MAX_MEANING} printable characters, "
                              f"got {shown(value[2])}")
    return Coded(scheme, code, meaning)


def _text(item: Any) -> str:
    # YAML reads an unquoted SNOMED CT identifier as an int: take it as its digits; a bool or float is no code
    if isinstance(item, int) and not isinstance(item, bool):
        return str(item)
    return item.strip() if isinstance(item, str) else ""
