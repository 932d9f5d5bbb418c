"""Where a run may write: never over one of its inputs, never outside its output folder.

Checked twice: the output folder as a whole before a run starts (the CLI refuses it, the viewer's Run on all
too), then every output file before it is written (an input given by name can sit where an output would go:
`a.png` and a user's own `a.png_mask.png`, both passed with `--out` their folder).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from app.io.discover import InputFile


def planned_outputs(out_stem: Path, save: Sequence[str]) -> list[Path]:
    """The files a result writes for `save` ("mask", "overlay"): `<stem>_<kind>.png` (the run's label exports,
    "coco" and "yolo", are no file of one image's)."""
    return [out_stem.with_name(f"{out_stem.name}_{kind}.png") for kind in save if kind not in ("coco", "yolo")]


def input_folders(inputs: Sequence[InputFile]) -> set[Path]:
    """The folders inputs were found in (a dropped or named folder) and the folders of files named one by one."""
    folders = set()
    for item in inputs:
        depth = len(item.rel.parts)
        folders.add(Path(os.path.realpath(Path(*item.path.parts[: len(item.path.parts) - depth]) or Path("."))))
        folders.add(Path(os.path.realpath(item.path.parent)))
    return folders


def output_folder_problem(out: Path, inputs: Sequence[InputFile], *, inside_ok: bool) -> str | None:
    """Why `out` must not take this run's outputs, in one line, or None. `inside_ok`: a sub-folder of an input
    folder is allowed (the CLI leaves it out of the inputs it lists); the viewer refuses it too."""
    target = Path(os.path.realpath(out))
    for folder in sorted(input_folders(inputs)):
        if target == folder:
            return (f"{out} is the input folder {folder}: outputs would mix with (and could overwrite) the "
                    "inputs; choose another folder")
        if not inside_ok and folder in target.parents:
            return (f"{out} is inside the input folder {folder}: its masks would be listed as images the next "
                    "time that folder is opened; choose a folder outside it")
    return None


class OutputGuard:
    """Checks each output file of a run before it is written."""

    def __init__(self, out_dir: Path, inputs: Sequence[InputFile]) -> None:
        self.out_dir = Path(os.path.realpath(out_dir))
        self.inputs = {os.path.realpath(item.path) for item in inputs}

    def problem(self, path: Path) -> str | None:
        """Why `path` must not be written (one line), or None."""
        real = Path(os.path.realpath(path))
        if self.out_dir not in real.parents:
            return f"not written: {path} would be outside the output folder {self.out_dir}"
        if str(real) in self.inputs:
            return f"not written: {path} is one of the inputs, and would be replaced"
        return None
