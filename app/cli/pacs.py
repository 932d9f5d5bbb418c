"""seglens-cli pacs echo | find | get | send: a thin face over app.io.pacs (the clients, the cache) and
app.runs.pacs.run (which series a study's retrieve takes, sending and verifying). NODE is a node name from the
settings' `pacs:` section (app.io.pacs.nodes.default_settings_file) or a URL (dimse://AE@host:104,
dicomweb+https://host/dicom-web). Patient names are printed on the terminal's table only: never logged, never in
--json (made for scripts and their logs).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.options import EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE
from app.cli.options import shown as _shown
from app.cli.pacs_get import EXIT_TERMINATED, Terminated, get_one, is_dicom, sigterm_stops
from app.spelling import counted

if TYPE_CHECKING:
    from app.io.pacs.cache import SeriesCache
    from app.io.pacs.client import SeriesRecord, StudyRecord
    from app.io.pacs.nodes import PacsNode
    from app.runs.folder.plan import RunPlan
    from app.runs.pacs.run import PacsPlan

NODE_HELP = ("a node name from the settings' pacs: section ($SEGLENS_SETTINGS or the user settings.yaml), or a URL: "
             "dimse://CALLED_AE@host:104[?calling=AE] or dicomweb+https://host/dicom-web[?user=NAME]; the password "
             "or token from the keyring (service seglens-pacs) or the node's own $SEGLENS_PACS_SECRET_<NAME> "
             "($SEGLENS_PACS_SECRET: a URL's, or the one settings node with auth)")


def add_pacs_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `pacs` and its actions on the subcommand parser."""
    pacs = commands.add_parser("pacs", help="a PACS node: echo, find studies, get series, send files",
                               description=f"A PACS node is a name in the pacs: section of {settings_text()}, or a "
                                           "URL. `seglens-cli pacs nodes` lists them.")
    actions = pacs.add_subparsers(dest="pacs_action", metavar="ACTION", required=True)
    nodes = actions.add_parser("nodes", help="list the settings file's nodes, under its path")
    nodes.set_defaults(handler=cmd_nodes)
    echo = actions.add_parser("echo", help="check that the node answers (C-ECHO, or a DICOMweb query)")
    echo.add_argument("node", metavar="NODE", help=NODE_HELP)
    echo.set_defaults(handler=cmd_echo)

    find = actions.add_parser("find", help="the studies matching a search (a table; --json for scripts)")
    find.add_argument("node", metavar="NODE", help=NODE_HELP)
    find.add_argument("--patient-id", default="", metavar="ID", help="PatientID (wildcards * and ? as the PACS has)")
    find.add_argument("--patient-name", default="", metavar="NAME", help="PatientName, e.g. 'Doe^J*'")
    find.add_argument("--study-date", type=date_range, metavar="FROM-TO",
                      help="YYYYMMDD, YYYYMMDD-YYYYMMDD, YYYYMMDD- or -YYYYMMDD (inclusive)")
    find.add_argument("--modality", default="", metavar="MOD", help="a modality in the study (CT, MR, …)")
    find.add_argument("--accession", default="", metavar="NUMBER", help="AccessionNumber")
    find.add_argument("--series", action="store_true",
                      help="list each study's series too (number, modality, slices, description, UID)")
    find.add_argument("--json", action="store_true", help="machine-readable output (no patient names)")
    find.set_defaults(handler=cmd_find)

    get = actions.add_parser("get", help="retrieve a study's series into the cache and copy them into a folder")
    get.add_argument("node", metavar="NODE", help=NODE_HELP)
    get.add_argument("study", metavar="STUDY_UID", help="the StudyInstanceUID (seglens-cli pacs find)")
    get.add_argument("--series", action="append", default=[], metavar="UID",
                     help="only this SeriesInstanceUID (repeatable; default: every series of the study)")
    get.add_argument("--to", required=True, type=Path, metavar="DIR",
                     help="where the series go: DIR/<SeriesInstanceUID>/, one folder per series")
    get.add_argument("--no-progress", action="store_true", help="no progress line even on a terminal")
    get.set_defaults(handler=cmd_get)

    send = actions.add_parser("send", help="store DICOM files (and the DICOM files in folders) to the node")
    send.add_argument("node", metavar="NODE", help=NODE_HELP)
    send.add_argument("files", nargs="+", type=Path, metavar="FILE", help="DICOM files or folders (recursive)")
    send.add_argument("--no-progress", action="store_true", help="no progress line even on a terminal")
    send.set_defaults(handler=cmd_send)


def node_of(text: str) -> PacsNode:
    """NODE as a PacsNode: a name in the settings' pacs: section, else a URL (PacsError in one line; a name that is
    not there names the file the nodes are read from)."""
    from app.io.pacs.client import PacsError
    from app.io.pacs.nodes import default_settings_file, load_nodes, parse_node

    settings = default_settings_file()
    try:
        return parse_node(text, load_nodes(settings))
    except PacsError as exc:
        if "://" in text:
            raise
        raise PacsError(f"{exc} — nodes are read from {settings}") from None


def settings_text() -> str:
    """Where the nodes are read from, for --help: the file, and what chose it."""
    from app.io.pacs.nodes import SETTINGS_ENV, default_settings_file

    chosen = f"${SETTINGS_ENV}" if os.environ.get(SETTINGS_ENV) else f"the user settings; ${SETTINGS_ENV} names another"
    path, home = default_settings_file(), Path.home()
    shown = f"~/{path.relative_to(home).as_posix()}" if path.is_relative_to(home) else str(path)
    return f"{shown} ({chosen})"


def cmd_nodes(args: argparse.Namespace) -> int:
    """seglens-cli pacs nodes: the settings file's path, then one line per node (no secret: none is kept there)."""
    from app.io.pacs.nodes import default_settings_file, load_nodes

    settings = default_settings_file()
    if not os.path.lexists(settings):
        print(f"no PACS nodes: {settings} does not exist (add a pacs: section there, docs/clinical.md)")
        return EXIT_OK
    nodes = load_nodes(settings)
    if not nodes:
        print(f"no PACS nodes in {settings} (add a pacs: section there, docs/clinical.md)")
        return EXIT_OK
    print(f"PACS nodes in {settings}:")
    width = max(len(name) for name in nodes)
    for name, node in sorted(nodes.items()):
        print(f"  {_shown(name):<{width}}  {_kind(node)}{'  research' if node.research else ''}")
    return EXIT_OK


def date_range(text: str) -> tuple[str, str]:
    """--study-date as an inclusive (from, to) of YYYYMMDD strings, an open end empty."""
    start, dash, end = text.strip().partition("-")
    if not dash:
        end = start
    for part in (start, end):
        if part and not _is_date(part):
            raise argparse.ArgumentTypeError(f"expected YYYYMMDD or YYYYMMDD-YYYYMMDD, got {text!r}")
    if not start and not end:
        raise argparse.ArgumentTypeError(f"expected YYYYMMDD or YYYYMMDD-YYYYMMDD, got {text!r}")
    if start and end and start > end:
        raise argparse.ArgumentTypeError(f"the range {text!r} ends before it starts")
    return start, end


def _is_date(text: str) -> bool:
    try:
        return len(text) == 8 and text.isdigit() and bool(datetime.datetime.strptime(text, "%Y%m%d"))
    except ValueError:
        return False


# --- echo, find ---------------------------------------------------------------------------------------


def cmd_echo(args: argparse.Namespace) -> int:
    """seglens-cli pacs echo NODE."""
    from app.runs.pacs.run import client_of

    node = node_of(args.node)
    client_of(node).echo()
    print(f"{_shown(node.name)}: answers ({_kind(node)})")
    return EXIT_OK


def _kind(node: PacsNode) -> str:
    if node.kind == "dimse":
        return f"DIMSE, {node.calling_ae} → {node.called_ae}@{node.host}:{node.port}"
    return f"DICOMweb, {node.url}"


def cmd_find(args: argparse.Namespace) -> int:
    """seglens-cli pacs find NODE [search]: a table of studies (with --series their series), or --json."""
    from app.io.pacs.client import StudyQuery
    from app.runs.pacs.run import client_of

    client = client_of(node_of(args.node))
    query = StudyQuery(patient_id=args.patient_id, patient_name=args.patient_name, study_date=args.study_date,
                       modality=args.modality, accession=args.accession)
    studies = client.find_studies(query)
    series = {study.study_uid: client.find_series(study.study_uid) for study in studies} if args.series else {}
    if args.json:
        print(json.dumps([_study_json(study, series.get(study.study_uid)) for study in studies], indent=2))
    else:
        _print_table(studies, series, with_series=args.series)
    return EXIT_OK


def _study_json(study: StudyRecord, series: list[SeriesRecord] | None) -> dict[str, Any]:
    """A study for --json: every field but the patient's name."""
    entry: dict[str, Any] = {"study_uid": study.study_uid, "patient_id": study.patient_id,
                             "study_date": study.study_date, "description": study.description,
                             "modalities": list(study.modalities), "accession": study.accession,
                             "series_count": study.series_count}
    if series is not None:
        entry["series"] = [{"series_uid": s.series_uid, "number": s.number, "modality": s.modality,
                            "description": s.description, "instances": s.instances} for s in series]
    return entry


def _print_table(studies: Sequence[StudyRecord], series: dict[str, list[SeriesRecord]], *, with_series: bool) -> None:
    """The studies as aligned columns on stdout (the only place a patient's name is shown)."""
    if not studies:
        print("no studies found")
        return
    head = ("DATE", "PATIENT ID", "PATIENT NAME", "MODALITIES", "SERIES", "ACCESSION", "DESCRIPTION", "STUDY UID")
    rows = [(s.study_date, s.patient_id, s.patient_name, "/".join(s.modalities),
             "" if s.series_count is None else str(s.series_count), s.accession, s.description, s.study_uid)
            for s in studies]
    cells = [[_shown(cell) for cell in row] for row in (head, *rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    for n, row in enumerate(cells):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        if with_series and n > 0:
            _print_series(series.get(studies[n - 1].study_uid, []))


def _print_series(records: Sequence[SeriesRecord]) -> None:
    for s in records:
        number = "" if s.number is None else str(s.number)
        slices = "?" if s.instances is None else str(s.instances)
        unit = "slice" if s.instances == 1 else "slices"
        print(_shown(f"    series {number:>3}  {s.modality:<8} {slices:>5} {unit:<6}  {s.description}  {s.series_uid}"))


# --- get, send ----------------------------------------------------------------------------------------


class Line:
    """One progress line on stderr, rewritten in place (a terminal only); `close` ends it."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled, self._shown = enabled, False

    def say(self, text: str) -> None:
        """Replace the line with `text`."""
        if self.enabled:
            sys.stderr.write(f"\r\x1b[2K{text}")
            sys.stderr.flush()
            self._shown = True

    def retrieving(self, series: int, total: int, received: int, expected: int | None) -> None:
        """A retrieve's progress: series k of n, instances received of expected."""
        of = counted(expected, "instance") if expected is not None else "? instances"
        self.say(f"series {series + 1} of {total}: {received} of {of}")

    def close(self) -> None:
        """End the line (nothing when none was shown)."""
        if self._shown:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()
            self._shown = False


def cmd_get(args: argparse.Namespace) -> int:
    """seglens-cli pacs get NODE STUDY_UID [--series UID] --to DIR."""
    from app.io.pacs.cache import SeriesCache
    from app.io.pacs.client import PacsError
    from app.runs.pacs.run import client_of

    node = node_of(args.node)
    client = client_of(node)
    uids = list(dict.fromkeys(args.series)) or [s.series_uid for s in client.find_series(args.study)]
    if not uids:
        raise PacsError(f"pacs {node.name}: study {args.study} not found (no series)")
    cache, failed, done = SeriesCache(), 0, 0
    line = Line(enabled=sys.stderr.isatty() and not args.no_progress)
    try:
        with sigterm_stops():
            for n, uid in enumerate(uids):
                def told(got: int, total: int | None, n: int = n) -> None:
                    line.retrieving(n, len(uids), got, total)

                try:
                    target, copied, size = get_one(client, args.study, uid, cache, args.to, progress=told)
                except PacsError as exc:  # that series; an OutputError (--to not writable) ends the get
                    line.close()
                    print(f"error: {_shown(exc)}", file=sys.stderr)
                    failed += 1
                    continue
                done += 1
                line.close()
                print(f"series {_shown(uid)}: {counted(copied, 'file')}, {size / 2**20:.1f} MB → {_shown(target)}")
    except Terminated:
        line.close()
        print(f"stopped (SIGTERM): {done} of {len(uids)} series retrieved from {_shown(node.name)}; nothing half "
              "kept", file=sys.stderr)
        return EXIT_TERMINATED
    finally:
        line.close()
    print(f"{len(uids) - failed} of {len(uids)} series retrieved from {_shown(node.name)}")
    return EXIT_OK if failed == 0 else EXIT_SOME_FAILED


def cmd_send(args: argparse.Namespace) -> int:
    """seglens-cli pacs send NODE FILE...: the DICOM files (folders walked) stored to the node, none of them when
    one breaks the send rule (de-identified only to a research node, identified never to one)."""
    from app.io.pacs.client import PacsError
    from app.runs.pacs.run import client_of
    from app.runs.pacs.send import files_refusal

    node = node_of(args.node)
    files, refused = dicom_files(args.files)
    for line in refused:
        print(f"error: {_shown(line)}", file=sys.stderr)
    if not files:
        print("error: no DICOM files to send in: " + ", ".join(_shown(p) for p in args.files), file=sys.stderr)
        return EXIT_USAGE
    refusal = files_refusal(node, files)
    if refusal:
        raise PacsError(refusal)
    progress = Line(enabled=sys.stderr.isatty() and not args.no_progress)
    try:
        stored = client_of(node).store(files, progress=lambda done, total: progress.say(f"{done} of {total} sent"))
    finally:
        progress.close()
    print(f"{stored} of {counted(len(files), 'file')} stored to {_shown(node.name)}")
    return EXIT_OK if stored == len(files) and not refused else EXIT_SOME_FAILED


def dicom_files(paths: Sequence[Path]) -> tuple[list[Path], list[str]]:
    """(the DICOM files among `paths`, folders walked in name order, non-DICOM files there skipped; one line for
    each path named that is missing or not DICOM)."""
    files: list[Path] = []
    refused: list[str] = []
    for path in paths:
        if path.is_dir():
            files.extend(p for p in sorted(path.rglob("*")) if p.is_file() and is_dicom(p))
        elif not path.is_file():
            refused.append(f"{path}: no such file or folder")
        elif is_dicom(path):
            files.append(path)
        else:
            refused.append(f"{path}: not a DICOM file (no DICM preamble)")
    return list(dict.fromkeys(files)), refused


# --- run --from / --send ------------------------------------------------------------------------------


def add_run_pacs_options(run: argparse.ArgumentParser) -> None:
    """run's PACS options: --from NODE --study UID [--series UID] and --send NODE."""
    group = run.add_argument_group("PACS (seglens-cli pacs --help)")
    group.add_argument("--from", dest="source", metavar="NODE",
                       help="retrieve --study from this node into the cache and run on its image series (no PATH)")
    group.add_argument("--study", default="", metavar="UID", help="the StudyInstanceUID to retrieve (with --from)")
    group.add_argument("--series", default="", metavar="UID",
                       help="only this SeriesInstanceUID of the study (default: every image series)")
    group.add_argument("--send", metavar="NODE",
                       help="store what --export wrote (DICOM SEG, Secondary Capture, RTSTRUCT) to this node, then "
                            "verify by a query that finds them; with --anonymize only to a node marked research, "
                            "without it never to one")


def run_pacs_plan(args: argparse.Namespace) -> PacsPlan:
    """run's PACS options checked (app.runs.pacs.run.plan_pacs) before anything runs or connects."""
    from app.runs.folder.plan import PlanRefused, option_problem
    from app.runs.pacs.run import plan_pacs

    plan = plan_pacs(source=node_of(args.source) if args.source else None, study_uid=args.study,
                     series_uid=args.series, send=node_of(args.send) if args.send else None, paths=args.paths,
                     exports=args.export, anonymize=args.anonymize, ray=args.ray)
    refused = option_problem(resume=False, per_slice=False, exports=args.export, anonymize=args.anonymize)
    if refused and plan.source is not None:  # said before the retrieve, not after it
        raise PlanRefused(refused)
    return plan


_RUN_CACHES: list[SeriesCache] = []  # the caches of `run --from` in this process, their series pinned


def retrieved_paths(plan: PacsPlan, *, progress: bool, anonymize: bool = False) -> list[Path]:
    """The plan's series retrieved into the cache (app.runs.pacs.run.retrieve): their folders, each said (under
    --anonymize by its count alone: the source's UIDs are not printed beside the pseudonymous results)."""
    from app.io.pacs.cache import SeriesCache
    from app.runs.pacs.run import retrieve

    cache = SeriesCache()
    _RUN_CACHES.append(cache)  # its pins keep the run's series from any eviction or clear until the process ends
    line = Line(enabled=progress)
    try:
        got = retrieve(plan, cache=cache, progress=line.retrieving)
    finally:
        line.close()
    name = plan.source.name if plan.source is not None else ""
    for n, item in enumerate(got):
        series = f"{n + 1} of {len(got)}" if anonymize else _shown(item.series_uid)
        print(f"retrieved series {series} from {_shown(name)}: {counted(item.files, 'file')}, "
              f"{item.bytes / 2**20:.1f} MB", file=sys.stderr)
    return [item.folder for item in got]


def send_written(plan: PacsPlan, run_plan: RunPlan, *, progress: bool) -> bool:
    """--send: what --export wrote stored to the node and looked for by a query, the summary's line printed.
    True when every file was stored and every series found complete."""
    from app.runs.pacs.run import send_exports, written_exports

    assert run_plan.out is not None and plan.send is not None  # a run that writes and sends
    files = written_exports(run_plan.spec, run_plan.inputs, out=run_plan.out,
                            exports=run_plan.volumes.exports if run_plan.volumes else None, key=run_plan.key)
    line = Line(enabled=progress)
    try:
        sent = send_exports(plan.send, files, progress=lambda done, total: line.say(f"{done} of {total} sent"))
    finally:
        line.close()
    print(_shown(sent.line()))
    for series in sent.series:
        state = "not found" if series.found is None else f"{counted(series.found, 'instance')} found"
        print(_shown(f"  {series.modality} series {series.series_uid}: {series.files} stored, {state}"))
    return sent.complete and bool(files)
