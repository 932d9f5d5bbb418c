"""seglens-cli prompt on a volume: `--slice K` prompted, `--propagate both|up|down` carried through the slices
(app.runs.prompts.volume), written as a NIfTI label volume with the volume's geometry (app.runs.exports.formats).
One summary line per direction with the reason it ended, then one for the label volume."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.options import EXIT_OK
from app.cli.options import shown as _shown
from app.spelling import counted

if TYPE_CHECKING:
    from app.inference.prompt.request import PromptModel
    from app.io.volumes import Volume
    from app.runs.prompts.volume import DirectionEnd, VolumePrompt


def find_volume(path: Path) -> Volume | str | None:
    """`path` as one volume: a folder holding one DICOM series (or one NIfTI file), a multi-frame DICOM, a NIfTI
    file; None for anything else (one picture: the 2-D prompt reads it and says what is wrong with it); a line
    refusing a folder that holds no volume or several."""
    from app.io.discover import discover
    from app.io.volumes import is_volume_file

    if path.is_file() and is_volume_file(path):
        from app.io.nifti import nifti_volume

        return nifti_volume(path)  # a damaged header: its own ImageError line
    if not path.exists():
        return None  # said by the 2-D prompt's reader, as before
    items = discover([path])
    volumes = [item.volume for item in items if item.volume is not None]
    if len(volumes) == 1:
        return volumes[0]
    if path.is_file():
        return None  # a single-frame DICOM: one picture
    if volumes:
        return f"{path}: holds {len(volumes)} volumes: give one series' folder or one file"
    return (f"{path}: no DICOM series or NIfTI volume in this folder (IMAGE is an image or a volume; a folder of "
            "images takes --boxes)")


def volume_prompt(args: argparse.Namespace, model: PromptModel, volume: Volume) -> int:
    """The label volume of `--slice K`'s prompt, propagated as asked, written to `--out`; the summary printed."""
    from app.inference.prompt.request import Box, Point
    from app.runs.exports.formats import write_nifti_labels
    from app.runs.prompts.volume import prompt_volume

    points = [Point(x, y, label) for x, y, label in args.point]
    box = Box(*args.box) if args.box else None
    result = prompt_volume(model, volume, start=args.slice - 1, points=points, box=box, propagate_to=args.propagate)
    write_nifti_labels(volume, result.labels, args.out)  # atomic_write: its folder made, an OSError one line
    if args.json:
        print(json.dumps(_summary(args.out, volume, result), indent=2))
        return EXIT_OK
    for direction in result.directions:
        print(_shown(_direction_line(direction)))
    print(_shown(_volume_line(args.out, volume, result)))
    return EXIT_OK


def _direction_line(direction: DirectionEnd) -> str:
    """`down: slices 17 to 28 (12), the object ended at slice 29 (area 3 px < 20)` (slices 1-based)."""
    given = direction.slices
    if not given:
        return f"{direction.direction}: no slice, {direction.end.reason}"
    count = f"{len(given)} slice{'s' * (len(given) != 1)}"
    span = f"slice {given[0] + 1}" if len(given) == 1 else f"slices {given[0] + 1} to {given[-1] + 1}"
    return f"{direction.direction}: {span} ({count}), {direction.end.reason}"


def _volume_line(out: Path, volume: Volume, result: VolumePrompt) -> str:
    slices = result.slices
    voxels = int(result.labels.sum())
    if not slices:
        return f"{out}: 0 voxels: the prompt on slice {result.start + 1} gave an empty mask"
    iou = "no predicted IoU (grabcut)" if result.iou != result.iou else f"predicted IoU {result.iou:.3f}"
    span = f"slice {slices[0] + 1}" if len(slices) == 1 else f"slices {slices[0] + 1} to {slices[-1] + 1}"
    return (f"{out}: {voxels} voxels on {len(slices)} of {counted(volume.depth, 'slice')} ({span}), {iou} on slice "
            f"{result.start + 1}")


def _summary(out: Path, volume: Volume, result: VolumePrompt) -> dict[str, object]:
    return {"out": str(out), "voxels": int(result.labels.sum()), "depth": volume.depth, "slice": result.start + 1,
            "iou_predicted": None if result.iou != result.iou else round(result.iou, 4),
            "slices": [k + 1 for k in result.slices],
            "directions": {d.direction: {"slices": [k + 1 for k in d.slices], "last": d.end.last + 1,
                                         "reason": d.end.reason} for d in result.directions}}
