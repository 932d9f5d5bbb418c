"""seglens-cli calibrate: score an OK and an NG folder, choose the verdict's limits on one part, measure them on the
other, and (--write) put them into the sidecar; the maths is app.runs.calibrate.band's."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.options import EXIT_OK, EXIT_SOME_FAILED, number_parser, resolved_model, runtime_options
from app.cli.options import shown as _shown

if TYPE_CHECKING:
    from app.inference.model.spec import ModelSpec
    from app.runs.calibrate.band import Calibration


def add_calibrate_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `calibrate` on the subcommand parser."""
    from app.cli.options import add_model_options, fraction

    calibrate = commands.add_parser(
        "calibrate", help="choose the verdict's OK / REVIEW / NG limits from labelled OK and NG images, report the "
                          "rates they achieve on held-out images, and write them into the sidecar (--write)")
    calibrate.add_argument("model", type=Path, help="the .onnx file, or a bundled model's name (seglens-cli models)")
    calibrate.add_argument("--ok", required=True, type=Path, metavar="DIR", help="images of good parts")
    calibrate.add_argument("--ng", required=True, type=Path, metavar="DIR", help="images of defective parts")
    target = calibrate.add_mutually_exclusive_group()
    target.add_argument("--max-fnr", type=share, metavar="R",
                        help="at most this share of NG images passed as OK (default 0.01): the review limit")
    target.add_argument("--best-f1", action="store_true", help="one limit with the best F1 of NG, no REVIEW band")
    calibrate.add_argument("--max-fpr", type=share, metavar="R",
                           help="with --max-fnr: at most this share of OK images called NG (default: as --max-fnr): "
                                "the fail limit; the REVIEW band lies between the two")
    calibrate.add_argument("--split", type=fraction, default=0.5, metavar="F",
                           help="share of each folder the limits are chosen on; the rest measures them (default 0.5)")
    calibrate.add_argument("--seed", type=int, default=0, metavar="N", help="the split's random seed (default 0)")
    calibrate.add_argument("--write", action="store_true",
                           help="write the limits and their provenance into the sidecar's verdict section")
    calibrate.add_argument("--plot", type=Path, metavar="PNG", help="write the score histograms and ROC here")
    add_model_options(calibrate)
    calibrate.set_defaults(handler=cmd_calibrate)


share = number_parser(lambda v: 0.0 <= v < 1.0, "a share from 0 to below 1")  # --max-fnr/--max-fpr: 0 = none


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Score, split, choose, measure, print (app.runs.calibrate.band.calibrate); --write and --plot."""
    from app.inference.model.builder import load_spec
    from app.inference.runtime.session import open_session
    from app.runs.calibrate import band as cal

    target = cal.Target.chosen(max_fnr=args.max_fnr, max_fpr=args.max_fpr, best_f1=args.best_f1)
    spec = load_spec(resolved_model(args.model), args.config)
    cal.refuse_unscored(spec.output.kind, _shown(spec.path.name))  # before a session is opened for nothing
    if args.plot is not None and args.plot.suffix.lower() != ".png":
        raise cal.CalibrationRefused(f"--plot {_shown(args.plot)}: give a .png file")
    model = open_session(spec, args.device, runtime=runtime_options(args))
    result = cal.calibrate(model, args.ok, args.ng, target=target, fraction=args.split, seed=args.seed,
                           told=_error)
    for line in result.report() + result.notes():
        print(line)
    if args.write:
        _write(spec, result)
    else:
        print("not written: add --write to put these limits into the sidecar")
    if args.plot is not None:
        import numpy as np

        from app.runs.calibrate.plot import write_plot

        write_plot(args.plot, np.asarray(result.ok.scores), np.asarray(result.ng.scores), result.limits,
                   title=f"{spec.name}: image scores")
        print(f"plot: {_shown(args.plot)}")
    return EXIT_OK if not result.errors else EXIT_SOME_FAILED


def _error(line: str) -> None:
    print(_shown(line), file=sys.stderr)


def _write(spec: ModelSpec, result: Calibration) -> None:
    from app.runs.calibrate.sidecar import provenance, write_limits, written_line

    path = write_limits(spec, result.limits, provenance(result, spec.path))
    print(f"written: {_shown(written_line(path, result.limits))}")
