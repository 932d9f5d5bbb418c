"""seglens-cli calibrate: score an OK and an NG folder, choose the verdict's limits on one part, measure them on the
other, and (--write) put them into the sidecar; the maths is app.runs.calibrate's."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.options import EXIT_OK, EXIT_SOME_FAILED, resolved_model, runtime_options
from app.cli.options import shown as _shown

if TYPE_CHECKING:
    from app.inference.spec import ModelSpec
    from app.runs.calibrate import FolderScores, Limits, Measured, Split


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
    target.add_argument("--max-fnr", type=fraction, metavar="R",
                        help="at most this share of NG images passed as OK (default 0.01): the review limit")
    target.add_argument("--best-f1", action="store_true", help="one limit with the best F1 of NG, no REVIEW band")
    calibrate.add_argument("--max-fpr", type=fraction, metavar="R",
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


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Score, split, choose, measure, print; --write and --plot."""
    from app.inference.session import open_session
    from app.inference.spec_builder import load_spec
    from app.runs import calibrate as cal

    if args.best_f1 and args.max_fpr is not None:
        raise cal.CalibrationRefused("--max-fpr goes with --max-fnr: --best-f1 chooses one limit, without a band")
    spec = load_spec(resolved_model(args.model), args.config)
    cal.refuse_unscored(spec.output.kind, _shown(spec.path.name))
    if args.plot is not None and args.plot.suffix.lower() != ".png":
        raise cal.CalibrationRefused(f"--plot {_shown(args.plot)}: give a .png file")
    model = open_session(spec, args.device, runtime=runtime_options(args))
    ok = cal.folder_scores(model, args.ok, flag="--ok", told=_error)
    ng = cal.folder_scores(model, args.ng, flag="--ng", told=_error)
    parts = cal.split(ok.scores, ng.scores, fraction=args.split, seed=args.seed)
    max_fnr = None if args.best_f1 else (args.max_fnr if args.max_fnr is not None else 0.01)
    max_fpr = None if args.best_f1 else (args.max_fpr if args.max_fpr is not None else max_fnr)
    limits = cal.pick_limits(parts.ok_pick, parts.ng_pick, max_fnr=max_fnr, max_fpr=max_fpr, best_f1=args.best_f1)
    measured = cal.measure(limits, parts.ok_test, parts.ng_test)
    target = {"best_f1": True} if args.best_f1 else {"max_fnr": max_fnr, "max_fpr": max_fpr}
    _print(spec.name, ok, ng, parts, limits, measured, target, args)
    for note in cal.wide_notes(parts) + _target_notes(max_fnr, len(parts.ng_pick)):
        print(note)
    if args.write:
        _write(spec, limits, measured, target, ok, ng, parts, args)
    else:
        print("not written: add --write to put these limits into the sidecar")
    if args.plot is not None:
        import numpy as np

        from app.runs.calibrate_plot import write_plot

        write_plot(args.plot, np.asarray(ok.scores), np.asarray(ng.scores), limits, title=f"{spec.name}: image scores")
        print(f"plot: {_shown(args.plot)}")
    return EXIT_OK if not ok.errors and not ng.errors else EXIT_SOME_FAILED


def _error(line: str) -> None:
    print(_shown(line), file=sys.stderr)


def _print(name: str, ok: FolderScores, ng: FolderScores, parts: Split, limits: Limits, measured: Measured,
           target: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"calibrate: {_shown(name)} on {len(ok.scores)} OK and {len(ng.scores)} NG images "
          f"(split {args.split:g}, seed {args.seed}: limits chosen on {len(parts.ok_pick)} OK + {len(parts.ng_pick)} "
          f"NG, measured on {len(parts.ok_test)} OK + {len(parts.ng_test)} NG)")
    aim = "best F1" if "best_f1" in target else f"FNR <= {_pct(target['max_fnr'])}, FPR <= {_pct(target['max_fpr'])}"
    band = f"review_if score_above {limits.review:.6g}, " if limits.review is not None else "no REVIEW band, "
    print(f"limits ({aim}): {band}fail_if score_above {limits.fail:.6g}")
    print("measured on the held-out images (exact 95 % Clopper-Pearson intervals):")
    print(f"  FNR     {measured.fnr.text()}  NG images passed as OK")
    print(f"  FPR     {measured.fpr.text()}  OK images called NG")
    print(f"  REVIEW  {measured.review.text()}  of all images")


def _target_notes(max_fnr: float | None, ng_count: int) -> list[str]:
    """Said when the target cannot be resolved on so few NG images: it then allows no miss at all."""
    if max_fnr is None or max_fnr * ng_count >= 1:
        return []
    return [f"note: FNR <= {_pct(max_fnr)} of {ng_count} NG image(s) allows no miss: the review limit lies below "
            f"the lowest NG score chosen on"]


def _write(spec: ModelSpec, limits: Limits, measured: Measured, target: dict[str, Any], ok: FolderScores,
           ng: FolderScores, parts: Split, args: argparse.Namespace) -> None:
    from app.runs.calibrate_sidecar import Provenance, sha256_of, write_limits

    provenance = Provenance(sha256_of(spec.path), len(ok.scores), len(ng.scores), dict(target), args.split,
                            args.seed, (len(parts.ok_pick), len(parts.ng_pick)), measured)
    path = write_limits(spec, limits, provenance)
    print(f"written: {_shown(path)} (verdict.fail_if{', verdict.review_if' if limits.review is not None else ''}, "
          "verdict.calibrated)")


def _pct(value: object) -> str:
    return f"{float(value) * 100:g} %" if isinstance(value, (int, float)) else str(value)
