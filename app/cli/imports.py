"""seglens-cli import: another framework's trained model compiled into an ONNX file and its sidecar
(app.runs.imports). `import nnunet FOLDER --out MODEL.onnx` reads an nnU-Net v2 trained-model folder;
`import monai-bundle BUNDLE --out MODEL.onnx` a MONAI bundle (PyTorch and MONAI: the `import` extra)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli.options import EXIT_OK
from app.cli.options import shown as _shown


def add_import_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `import` (with its framework subcommands) on the subcommand parser."""
    command = commands.add_parser("import", help="compile another framework's trained model into an ONNX file and "
                                                 "its sidecar (nnU-Net v2 folders, MONAI bundles)")
    frameworks = command.add_subparsers(dest="framework", metavar="FRAMEWORK", required=True)
    nnunet = frameworks.add_parser(
        "nnunet", help="an nnU-Net v2 trained-model folder (<Trainer>__<Plans>__<configuration>/ with plans.json, "
                       "dataset.json and fold_N/checkpoint_final.pth), or the part-models of a TotalSegmentator "
                       "task merged into one model, read without PyTorch")
    nnunet.add_argument("folder", type=Path, nargs="+", metavar="FOLDER",
                        help="the trained-model folder; or a folder of nnU-Net datasets (DatasetNNN_*/<Trainer>__"
                             "<Plans>__<configuration>/) holding a TotalSegmentator task's part-models, or those "
                             "folders one by one: imported as one model with TotalSegmentator's merged label map")
    nnunet.add_argument("--out", required=True, type=Path, metavar="MODEL.onnx",
                        help="the ONNX file to write; its sidecar MODEL.yaml is written beside it")
    nnunet.add_argument("--folds", type=_folds, metavar="0,1,...",
                        help="the folds to import (default: every fold_N found); several: one graph averaging "
                             "their logits, as nnU-Net's predictor does")
    nnunet.add_argument("--checkpoint", choices=("final", "best"), default="final",
                        help="checkpoint_final.pth (default) or checkpoint_best.pth")
    nnunet.set_defaults(handler=cmd_import_nnunet)
    bundle = frameworks.add_parser(
        "monai-bundle", help="a MONAI bundle (configs/inference.json or .yaml, configs/metadata.json, "
                             "models/model.pt): its inference pipeline translated, never evaluated; needs PyTorch "
                             "and MONAI (the 'import' extra)")
    bundle.add_argument("bundle", type=Path, metavar="BUNDLE", help="the bundle's folder")
    bundle.add_argument("--out", required=True, type=Path, metavar="MODEL.onnx",
                        help="the ONNX file to write; its sidecar MODEL.yaml is written beside it")
    bundle.set_defaults(handler=cmd_import_monai_bundle)


def _folds(text: str) -> tuple[str, ...]:
    folds = tuple(part.strip() for part in text.split(",") if part.strip())
    if not folds or not all(fold.isdigit() or fold == "all" for fold in folds):
        raise argparse.ArgumentTypeError(f"expected fold numbers separated by commas (0,1,2) or all, got {text!r}")
    return tuple(str(int(fold)) if fold.isdigit() else fold for fold in folds)


def cmd_import_nnunet(args: argparse.Namespace) -> int:
    from app.runs.imports.nnunet.parts import import_folders

    done = import_folders(args.folder, args.out, folds=args.folds, checkpoint=args.checkpoint)
    for gap in done.gaps:
        print(f"not yet exact: {_shown(gap)}", file=sys.stderr)
    folds = ", ".join(done.folds)
    print(f"wrote {_shown(done.model)} and {_shown(done.sidecar.name)} (fold{'s' if len(done.folds) > 1 else ''} "
          f"{folds}, {done.checkpoint}); seglens-cli info {_shown(done.model)} shows what was mapped")
    return EXIT_OK


def cmd_import_monai_bundle(args: argparse.Namespace) -> int:
    from app.runs.imports.monai.importer import import_monai_bundle

    done = import_monai_bundle(args.bundle, args.out)
    for gap in done.gaps:
        print(f"not yet exact: {_shown(gap)}", file=sys.stderr)
    print(f"wrote {_shown(done.model)} and {_shown(done.sidecar.name)} ({_shown(done.summary)}); "
          f"seglens-cli info {_shown(done.model)} shows what was mapped")
    return EXIT_OK
