"""A folder run whose inputs come from a PACS and whose DICOM exports go back to one: `seglens-cli run MODEL --from
NODE --study UID [--series UID] [--send NODE]`.

Three steps around the one seam (app.runs.folder.run.plan_run / run_folder): `plan_pacs` checks the PACS options
before anything runs (a pseudonymised result is never sent to a node not marked research); `retrieve` brings the
study's image series complete into the cache (app.io.pacs.cache) and hands their folders to plan_run as any folder;
`send_exports` stores what --export wrote (DICOM SEG, Secondary Capture, RTSTRUCT and, under --anonymize, the
de-identified source series they reference — never PNGs, CSVs or NIfTI) and verifies by a series-level query
that the server has every series written, instance for instance (app.runs.pacs.send, as the viewer's send does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.runs.folder.plan import PlanRefused

if TYPE_CHECKING:
    from app.inference.model.spec import ModelSpec
    from app.io.discover import InputFile
    from app.io.pacs.cache import SeriesCache
    from app.io.pacs.client import PacsClient, Retrieved, SeriesRecord
    from app.io.pacs.nodes import PacsNode
    from app.runs.pacs.send import Sent

# the exports a PACS stores; nifti, PNGs and the report stay local. `source` (--anonymize only): the de-identified
# source series the SEG, SC and RTSTRUCT reference, stored beside them so the node can show them on it
SENT_EXPORTS = ("dicom-seg", "sc", "rtstruct", "source")
# series a model does not run on: a study that was sent results before has them beside its images
NOT_IMAGES = frozenset({"SEG", "SR", "RTSTRUCT", "RTPLAN", "RTDOSE", "RTRECORD", "PR", "KO", "REG", "DOC", "OT"})


@dataclass(frozen=True)
class PacsPlan:
    """The PACS side of a run: where the inputs come from (`source`, `study_uid`, `series_uid` or every image
    series of the study) and where the exports go (`send`, None: nowhere)."""

    source: PacsNode | None = None
    study_uid: str = ""
    series_uid: str = ""
    send: PacsNode | None = None


def plan_pacs(*, source: PacsNode | None, study_uid: str, series_uid: str, send: PacsNode | None,
              paths: Sequence[Path], exports: Sequence[str] | None, anonymize: bool,
              ray: str | None = None) -> PacsPlan:
    """The PACS options checked before anything runs or connects (PlanRefused with the line seglens-cli prints).
    `ray`: --ray's address (a cluster's nodes cannot read this machine's cache; a local Ray instance can)."""
    from app.io.pacs.nodes import shared_secret_problem

    refused = (_source_problem(source, study_uid, series_uid, paths) or _send_problem(send, exports, anonymize)
               or shared_secret_problem(source, send))
    if not refused and source is not None and ray not in (None, "local"):
        refused = (f"--from with --ray {ray}: the study is retrieved into this machine's cache, which the cluster's "
                   "nodes cannot read; `seglens-cli pacs get` it to a folder every node can read and run on that")
    if refused:
        raise PlanRefused(refused)
    return PacsPlan(source=source, study_uid=study_uid, series_uid=series_uid, send=send)


def _source_problem(source: PacsNode | None, study_uid: str, series_uid: str, paths: Sequence[Path]) -> str | None:
    if source is None:
        if study_uid or series_uid:
            return "--study and --series name what to retrieve --from a PACS node: add --from NODE"
        return None if paths else "no inputs: give PATH... or --from NODE --study UID"
    if paths:
        return "--from NODE runs on the study it retrieves: give no PATH beside it"
    return None if study_uid else "--from NODE needs --study UID (the StudyInstanceUID; `seglens-cli pacs find`)"


def _send_problem(send: PacsNode | None, exports: Sequence[str] | None, anonymize: bool) -> str | None:
    if send is None:
        return None
    if not any(kind in SENT_EXPORTS for kind in exports or ()):
        return ("--send stores the DICOM files --export writes: add --export with dicom-seg, sc or rtstruct "
                "(nifti, PNGs and reports stay local)")
    from app.io.pacs.nodes import send_refusal

    refusal = send_refusal(send, deidentified=anonymize)
    if refusal:
        return f"--anonymize with --send {send.name}: {refusal}" if anonymize else \
            f"--send {send.name} without --anonymize: {refusal}"
    return None


def client_of(node: PacsNode) -> PacsClient:
    """A client of `node`, its password or token from the keyring (or its own environment variable:
    app.io.pacs.nodes.node_secret) where it has one."""
    from app.io.pacs.connect import connect
    from app.io.pacs.nodes import node_secret

    return connect(node, secret=node_secret(node) if node.auth != "none" else None)


def image_series(client: PacsClient, study_uid: str, series_uid: str = "") -> list[SeriesRecord]:
    """The series to run on: `series_uid` alone, else every image series of the study (not its SEG, SR,
    RTSTRUCT… series). PacsError when the study or the series is not on the server."""
    from app.io.pacs.client import PacsError

    found = client.find_series(study_uid)
    name = client.node.name
    if series_uid:
        chosen = [record for record in found if record.series_uid == series_uid]
        if not chosen:
            raise PacsError(f"pacs {name}: series {series_uid} not found in study {study_uid}")
        return chosen
    chosen = [record for record in found if record.modality.upper() not in NOT_IMAGES]
    if not chosen:
        raise PacsError(f"pacs {name}: study {study_uid} has no image series"
                        + ("" if found else " (no series at all: is the StudyInstanceUID right?)"))
    return chosen


def retrieve(plan: PacsPlan, *, cache: SeriesCache | None = None,
             progress: Callable[[int, int, int, int | None], None] | None = None,
             should_stop: Callable[[], bool] | None = None) -> list[Retrieved]:
    """The plan's series retrieved complete into the cache. Every series of the plan is pinned in `cache` before
    the first one arrives, for as long as `cache` is open (SeriesCache.close): the eviction after a later series
    never takes an earlier one the run still has to read, and no `clear` or eviction elsewhere does either.
    `progress(series_done, series_total, instances, instances_expected)`."""
    from app.io.pacs.cache import SeriesCache

    assert plan.source is not None  # a run --from a node
    cache = cache or SeriesCache()
    client = client_of(plan.source)
    series = image_series(client, plan.study_uid, plan.series_uid)
    for record in series:
        cache.hold(record.series_uid)
    retrieved = []
    for n, record in enumerate(series):
        def told(done: int, total: int | None, n: int = n) -> None:
            if progress is not None:
                progress(n, len(series), done, total)

        retrieved.append(client.retrieve(plan.study_uid, record.series_uid, cache, progress=told,
                                         should_stop=should_stop))
    return retrieved


# --- sending --------------------------------------------------------------------------------------------------


def written_exports(spec: ModelSpec, inputs: Sequence[InputFile], *, out: Path, exports: Sequence[str] | None,
                    key: bytes = b"") -> list[Path]:
    """The DICOM files --export wrote for the run's volumes (SEG, SC, RTSTRUCT), those that exist, in input order.
    The output stems are the writer's (app.runs.folder.batch: pseudonymous under --anonymize)."""
    from app.io.discover import output_stems
    from app.runs.exports.formats import EXPORTS
    from app.runs.folder.volumes import chosen_exports, export_paths, export_problem
    from app.runs.privacy.names import anonymized_stems

    stems = anonymized_stems(inputs, key) if key else output_stems(list(inputs))
    files: list[Path] = []
    for item, stem in zip(inputs, stems, strict=True):
        volume = item.volume
        if volume is None:
            continue
        kinds = [k for k in chosen_exports(spec, volume, exports)
                 if k in SENT_EXPORTS and k in EXPORTS and export_problem(k, volume) is None]
        for path in export_paths(kinds, out / stem):
            files.extend(sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else
                         [path] if path.is_file() else [])
    return files


def send_exports(node: PacsNode, files: Sequence[Path], *,
                 progress: Callable[[int, int], None] | None = None) -> Sent:
    """`files` stored to `node` and found there again (app.runs.pacs.send.store_and_verify). Nothing is sent when
    a file breaks the send rule (files_refusal: PacsError)."""
    from app.io.pacs.client import PacsError
    from app.runs.pacs.send import files_refusal, store_and_verify

    refusal = files_refusal(node, files)
    if refusal:
        raise PacsError(refusal)
    return store_and_verify(client_of(node), files, progress=progress)
