"""Ground-truth masks for `seglens-cli run --reference DIR`: find the one that belongs to an input, read it.

Matching (first hit wins), for an input found as `a/b/x.jpg` (its path relative to the folder it was found in):
  1. by relative path: `REF/a/b/x.png`, `REF/a/b/x_mask.png`, `REF/a/b/x.tif`, `REF/a/b/x.tiff`,
     `REF/a/b/x_mask.tif` (in that order);
  2. by stem anywhere under REF (a flat folder of masks): the one file named `x.png` / `x_mask.png` / `x.tif`…
     — only when exactly one reference has that stem *and* exactly one input has it, since otherwise the
     pairing would be a guess. Several candidates are a notice naming them, never a silent pick.
A reference that is the input file itself (REF = the image folder, masks beside images) is skipped.

Reading: 8- or 16-bit gray, palette PNGs (their indices, not their colours), 1-bit, or RGB whose channels are
equal; value = class index. For a binary model (2 classes) a 0/255 mask is read as 0/1. A value above the
model's last class is a one-line ImageError naming the file.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from app.errors import ImageError

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
        for rel in input_rels:
            self._input_stems[rel.stem.lower()] += 1

    def find(self, rel: Path, input_path: Path | None = None) -> tuple[Path | None, str | None]:
        """(the reference of the input found as `rel`, None) or (None, why there is none: one line)."""
        for suffix in SUFFIXES:
            candidate = self.root / rel.parent / (rel.stem + suffix)
            if candidate.is_file() and not _same_file(candidate, input_path):
                return candidate, None
        found = [p for p in self._by_stem.get(rel.stem.lower(), []) if not _same_file(p, input_path)]
        if len(found) == 1 and self._input_stems.get(rel.stem.lower(), 1) == 1:
            return found[0], None
        if len(found) > 1 or (found and self._input_stems.get(rel.stem.lower(), 1) > 1):
            names = ", ".join(str(p.relative_to(self.root)) for p in sorted(found)[:3])
            return None, f"no unambiguous reference under {self.root} (stem shared: {names})"
        return None, f"no reference under {self.root} ({(rel.parent / (rel.stem + '.png')).as_posix()} or alike)"


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


def read_reference(path: Path, n_classes: int) -> np.ndarray:
    """The reference at `path` as a uint8 label map; ImageError (one line, naming the file) if it is not one."""
    try:
        with Image.open(path) as img:
            values = _label_values(path, img)
    except ImageError:
        raise
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
