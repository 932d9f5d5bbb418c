"""seglens-cli report: the HTML review report of a review folder, without the viewer (a QA lead's face over
app.runs.review.items, which the viewer's File ▸ Export review report shares)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli.options import EXIT_OK, EXIT_SOME_FAILED, resolved_model, runtime_options
from app.cli.options import shown as _shown
from app.spelling import counted


def add_report_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `report` on the subcommand parser."""
    from app.cli.options import add_model_options as _add_model_options
    from app.cli.options import fraction as _fraction

    report = commands.add_parser("report", help="the HTML review report of a review folder (<inputs>_review): every "
                                                "input through the model, beside its review")
    report.add_argument("review_folder", type=Path, metavar="REVIEW_FOLDER",
                        help="the review folder the viewer keeps beside the inputs (<inputs>_review)")
    report.add_argument("--model", required=True, type=Path, metavar="MODEL",
                        help="the .onnx file or a bundled model's name: the model whose results were reviewed")
    report.add_argument("--out", type=Path, metavar="FILE.html",
                        help="where to write the report (default: REVIEW_FOLDER/seglens_review_report.html)")
    report.add_argument("--inputs", type=Path, metavar="DIR",
                        help="the input folder (default: REVIEW_FOLDER's sibling without _review)")
    report.add_argument("--threshold", type=_fraction, metavar="T",
                        help="as for run: the threshold the results are drawn and judged with")
    report.add_argument("--anonymize", action="store_true",
                        help="no patient name or ID and no input folder or file name in the report: inputs go by "
                             "their pseudonyms (as run --anonymize names them)")
    _add_model_options(report)
    report.set_defaults(handler=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from app.inference.decide.tuning import with_threshold
    from app.inference.model.builder import load_spec
    from app.inference.runtime.session import open_session
    from app.runs.folder.volumes import pseudonym_key
    from app.runs.outputs.provenance import RunIdentity
    from app.runs.review.items import REPORT_NAME, Naming, folder_report, inputs_of

    review_dir = args.review_folder
    input_root = inputs_of(review_dir, args.inputs)
    spec, min_confidence = with_threshold(load_spec(resolved_model(args.model), args.config), args.threshold)
    naming = Naming(input_root, anonymize=args.anonymize, key=pseudonym_key() if args.anonymize else b"")
    model = open_session(spec, args.device, runtime=runtime_options(args))
    identity = RunIdentity.of(spec, threshold=args.threshold, min_confidence=min_confidence, session=model.info)
    out = args.out or review_dir / REPORT_NAME
    done = folder_report(model, review_dir, out, input_root=input_root, identity=identity, spec=model.spec,
                         min_confidence=min_confidence, naming=naming)
    print(f"review report {_shown(done.path)}: {counted(done.rows, 'input')}, {done.reviewed} reviewed, "
          f"{done.not_processed} not processed")
    if done.not_processed:
        print("note: the rows of inputs that were not processed say why", file=sys.stderr)
    return EXIT_OK if done.not_processed == 0 else EXIT_SOME_FAILED
