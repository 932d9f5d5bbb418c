"""seglens-cli prompt: a click or a box → a mask with a prompt model (a SAM/SAM2 pair by its sidecar, or grabcut);
`--boxes boxes.csv` turns a detector's boxes into masks for a whole folder (the loop is app.runs.prompts.boxes).
`seglens-cli info PAIR.yaml` shows the pair (cmd_prompt_info). Masks: PNG, value = the class (1 for a single mask).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.options import EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE, device
from app.cli.options import shown as _shown
from app.spelling import counted

if TYPE_CHECKING:
    from app.inference.prompt.request import PromptModel
    from app.io.volumes import Volume

MODEL_HELP = "the prompt model: its sidecar (.yaml with a prompt: section naming the encoder and decoder), or grabcut"


def add_prompt_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `prompt` on the subcommand parser."""
    prompt = commands.add_parser("prompt", help="points or a box → a mask with a SAM-family model (or grabcut); "
                                                "--boxes: a detector's boxes → masks for a folder")
    prompt.add_argument("model", metavar="PROMPT_MODEL", help=MODEL_HELP)
    prompt.add_argument("image", type=Path, metavar="IMAGE",
                        help="the image; with --boxes, the folder the CSV's file names are relative to")
    prompt.add_argument("--point", action="append", default=[], type=_point, metavar="X,Y[,LABEL]",
                        help="a click in image pixels, label 1 positive (default) or 0 negative; repeatable")
    prompt.add_argument("--box", type=_box, metavar="X0,Y0,X1,Y1", help="a box in image pixels (x0 ≤ x < x1)")
    prompt.add_argument("--boxes", type=Path, metavar="BOXES.csv",
                        help="rows file,x0,y0,x1,y1[,class] (a header optional): one mask per file under --out")
    prompt.add_argument("--slice", type=int, metavar="K",
                        help="a volume's slice to prompt (a DICOM series folder, a multi-frame DICOM or a NIfTI "
                             "file), or a multi-page picture's page (a TIFF stack): 1 to their number, as the viewer "
                             "numbers them")
    prompt.add_argument("--propagate", choices=("both", "up", "down"),
                        help="carry the slice's mask to the next slices (down: towards the last, up: towards the "
                             "first) until the object ends")
    prompt.add_argument("--out", required=True, type=Path, metavar="MASK.png | MASK.nii.gz | DIR",
                        help="the mask PNG (0 background, 1 the object); for a volume a NIfTI label volume with its "
                             "geometry (.nii.gz or .nii); with --boxes a folder: <stem>_mask.png, value = the row's "
                             "class")
    prompt.add_argument("--device", default="auto", type=device, help="auto | cpu | cuda | cuda:N (default auto)")
    prompt.add_argument("--json", action="store_true", help="machine-readable summary")
    prompt.set_defaults(handler=cmd_prompt)


def _numbers(text: str, count: tuple[int, ...], what: str) -> list[float]:
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) not in count or len(parts) != len(values):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return values


def _point(text: str) -> tuple[float, float, int]:
    values = _numbers(text, (2, 3), "X,Y or X,Y,LABEL (label 1 or 0)")
    label = 1 if len(values) == 2 else values[2]
    if label not in (0, 1):
        raise argparse.ArgumentTypeError(f"a point's label is 1 (positive) or 0 (negative), got {text!r}")
    return values[0], values[1], int(label)


def _box(text: str) -> tuple[float, float, float, float]:
    x0, y0, x1, y1 = _numbers(text, (4,), "X0,Y0,X1,Y1")
    return x0, y0, x1, y1


def cmd_prompt(args: argparse.Namespace) -> int:
    from app.inference.prompt.model import load_prompt_model

    if args.boxes is not None and (args.point or args.box):
        print("error: --boxes takes its boxes from the CSV: give it without --point and --box", file=sys.stderr)
        return EXIT_USAGE
    if args.boxes is None and not (args.point or args.box):
        print("error: no prompt: give --point X,Y (repeatable), --box X0,Y0,X1,Y1 or --boxes BOXES.csv",
              file=sys.stderr)
        return EXIT_USAGE
    if args.boxes is not None and (args.slice is not None or args.propagate):
        print("error: --boxes prompts 2-D images: give it without --slice and --propagate", file=sys.stderr)
        return EXIT_USAGE
    if args.boxes is None and _same_file(args.out, args.image):
        print(f"error: {_shown(f'--out {args.out} is the input image: it would be replaced; choose another file')}",
              file=sys.stderr)
        return EXIT_USAGE
    volume = None if args.boxes is not None else _volume_of(args)
    if volume is None and args.boxes is None and args.out.suffix.lower() != ".png":  # PNG bytes under any name
        volume = f"--out {args.out}: the mask of a picture is a PNG (0 background, 1 the object): name it .png"
    if isinstance(volume, str):  # a refusal, said in one line
        print(f"error: {_shown(volume)}", file=sys.stderr)
        return EXIT_USAGE
    model = load_prompt_model(args.model, args.device)
    _note_device(model)
    if volume is not None:
        from app.cli.prompt_volume import volume_prompt

        return volume_prompt(args, model, volume)
    return _folder(args, model) if args.boxes is not None else _single(args, model)


def _same_file(out: Path, image: Path) -> bool:
    """Whether `--out` names the input itself (by another spelling or a link too): the mask would replace it."""
    try:
        return out.exists() and image.exists() and os.path.samefile(out, image)
    except OSError:
        return False


def _volume_of(args: argparse.Namespace) -> Volume | str | None:
    """IMAGE as a volume (a DICOM series folder, a multi-frame DICOM, a NIfTI file), None for one picture, or the
    line refusing what was asked of it."""
    from app.cli.prompt_volume import find_volume

    volume = find_volume(args.image)
    if isinstance(volume, str):
        return volume
    if volume is None:  # --slice of a multi-page picture (a TIFF's pages) is _single's
        for option, value in (("--propagate", args.propagate),):
            if value is not None:
                return (f"{args.image}: {option} is for a volume (a DICOM series folder, a multi-frame DICOM or a "
                        "NIfTI file); IMAGE is one picture")
        return None
    if args.slice is None:
        return f"{args.image}: a volume of {volume.depth} slices: give --slice K (1 to {volume.depth})"
    if not args.out.name.lower().endswith((".nii", ".nii.gz")):
        return (f"--out {args.out}: a volume's mask is a label volume with the volume's geometry: name it .nii.gz "
                "or .nii")
    folder = Path(os.path.realpath(volume.source))
    if volume.kind == "dicom" and folder in Path(os.path.realpath(args.out)).parents:
        return (f"--out {args.out} is inside the series' folder {volume.source}: the next time it is opened it "
                "would hold two volumes; choose a file outside it")
    return volume


def _note_device(model: PromptModel) -> None:
    if (reason := model.device_warning()) is not None:
        print(f"note: the prompt model runs on the CPU ({reason})", file=sys.stderr)


def _single(args: argparse.Namespace, model: PromptModel) -> int:
    from app.inference.prompt.model import Box, Point
    from app.io.files import atomic_write, encode_png
    from app.io.images import read_image

    decoded = read_image(args.image)
    pages = decoded.frame_count
    if (args.slice is None and pages > 1) or (args.slice is not None and not 1 <= args.slice <= pages):
        what = f"a picture of {pages} pages: give --slice K (1 to {pages})" if pages > 1 else \
            "--slice is for a volume (a DICOM series folder, a multi-frame DICOM or a NIfTI file) or a picture's " \
            "pages; IMAGE is one picture"
        print(f"error: {_shown(args.image)}: {what}", file=sys.stderr)
        return EXIT_USAGE
    if args.slice is not None and args.slice > 1:
        decoded = read_image(args.image, frame=args.slice - 1)
    pixels = decoded.display()
    points = [Point(x, y, label) for x, y, label in args.point]
    box = Box(*args.box) if args.box else None
    proposal = model.decode(model.embed(pixels), points, box=box)
    atomic_write(args.out, encode_png(proposal.mask.astype("uint8")))  # its folder made, an OSError one line
    area = int(proposal.mask.sum())
    h, w = proposal.mask.shape
    summary = {"out": str(args.out), "pixels": area, "image_size": [w, h],
               "iou_predicted": None if proposal.iou != proposal.iou else round(proposal.iou, 4)}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        iou = "no predicted IoU (grabcut)" if summary["iou_predicted"] is None else \
            f"predicted IoU {summary['iou_predicted']:.3f}"
        print(_shown(f"{args.out}: {area} pixels ({100 * area / (h * w):.1f} % of {w}×{h}), {iou}"))
    return EXIT_OK


def _folder(args: argparse.Namespace, model: PromptModel) -> int:
    from app.runs.prompts.boxes import run_boxes

    if not args.image.is_dir():
        print(f"error: {_shown(args.image)}: with --boxes, IMAGE is the folder the CSV's file names are relative "
              "to", file=sys.stderr)
        return EXIT_USAGE
    if os.path.lexists(args.out) and not args.out.is_dir():
        print(f"error: --out {_shown(args.out)}: with --boxes, --out is a folder (the masks go in it), and this is "
              "a file", file=sys.stderr)
        return EXIT_USAGE
    result = run_boxes(model, args.boxes, args.image, args.out,
                       on_line=None if args.json else lambda line: print(f"error: {_shown(line)}", file=sys.stderr))
    if args.json:
        print(json.dumps({"written": [str(p) for p in result.written], "boxes": result.boxes_done,
                          "problems": list(result.problems), "classes": result.class_names}, indent=2))
    else:
        names = ", ".join(f"{value} {name}" for name, value in result.class_names.items())
        print(_shown(f"{counted(len(result.written), 'mask')} from {counted(result.boxes_done, 'box', 'boxes')} in "
                     f"{args.out}" + (f"; {counted(len(result.problems), 'problem')}" if result.problems else "")
                     + (f"; classes: {names}" if names else "")))
    return EXIT_SOME_FAILED if result.problems else EXIT_OK


def cmd_prompt_info(args: argparse.Namespace) -> int:
    """`seglens-cli info PAIR.yaml`: the pair, each value with its source; the sessions unless --no-session."""
    from app.inference.prompt.model import load_prompt_spec, open_prompt_session

    spec = load_prompt_spec(args.model)
    lines = [spec.describe()]
    where = {}
    if not args.no_session:
        session = open_prompt_session(spec, args.device)
        for half, info in (("encoder", session.info), ("decoder", session.decoder_info)):
            where[half] = {"provider": info.provider_label, "fallback_reason": info.fallback_reason,
                           "load_ms": round(info.load_ms, 1)}
            # the label says "CPU (no NVIDIA GPU)" itself: the reason once
            said = info.fallback_reason and info.fallback_reason not in info.provider_label
            reason = f" ({info.fallback_reason})" if said else ""
            lines.append(f"  {half + ' runs':<15} {info.provider_label}{reason}, loaded in {info.load_ms:.0f} ms")
    if args.json:
        print(json.dumps({"prompt_model": spec.name, "layout": spec.layout, "encoder": str(spec.encoder),
                          "decoder": str(spec.decoder), "input_size": spec.input_size, "resize": spec.resize,
                          "mean": spec.mean, "std": spec.std, "mask_threshold": spec.mask_threshold,
                          "sources": spec.sources, "sessions": where}, indent=2))
    else:
        print(_shown("\n".join(lines)))
    return EXIT_OK
