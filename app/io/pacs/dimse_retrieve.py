"""DIMSE transfers of app.io.pacs.dimse: a series retrieved by C-GET or by C-MOVE to a Storage SCP we run for the
retrieve's duration, and files sent by C-STORE.

A retrieve first asks the server (C-FIND at image level) which instances the series has, so it knows what must
arrive: fewer instances, a failed sub-operation, a stop, or a server going away is one PacsError line and the
cache's temporary folder is deleted, so nothing half-retrieved ever looks complete.

What arrives is checked against what was asked (app.io.pacs.dimse_arrivals): a dataset of another study, series
or instance is dropped and the series is then incomplete: one PacsError line, nothing kept. A retrieve
is bounded as a whole (dimse_common.retrieve_deadline) and by a cap on its answers (dimse_common.answer_cap). The
C-MOVE destination listens only on the address the node reaches us at and takes associations only from the
node's AE title, called by ours.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydicom.dataset import Dataset

from app.guard.net import DeadlineExceeded
from app.io.pacs.client import PacsError, Retrieved, pacs_error
from app.io.pacs.dimse_arrivals import ASKED, DICOM_UID, Receiver, uid_text
from app.io.pacs.dimse_common import DEADLINE_FACTOR, bounded, retrieve_deadline
from app.spelling import counted

if TYPE_CHECKING:
    from pynetdicom import AE
    from pynetdicom.association import Association
    from pynetdicom.events import Event

    from app.io.pacs.cache import SeriesCache
    from app.io.pacs.nodes import PacsNode


class DimseClient(Protocol):
    """What a transfer needs of app.io.pacs.dimse.DimseClient (named here, not imported: dimse imports this)."""

    node: PacsNode

    def application_entity(self) -> AE: ...

    def association(self, ae: AE, *, ext_neg: list[Any] | None = None,
                    handlers: list[Any] | None = None) -> AbstractContextManager[Association]: ...

    def check(self, status: Dataset, what: str, *, allow: Callable[[int], bool] | None = None) -> int: ...

    def no_answer(self, what: str) -> str: ...

    def find_instances(self, study_uid: str, series_uid: str) -> dict[str, str]: ...

    def local_address(self) -> str: ...

log = logging.getLogger(__name__)

# Every transfer syntax pydicom (with pylibjpeg) decodes: a C-GET takes instances as the server keeps them
TRANSFER_SYNTAXES = (
    "1.2.840.10008.1.2.1",  # Explicit VR Little Endian
    "1.2.840.10008.1.2",  # Implicit VR Little Endian
    "1.2.840.10008.1.2.5",  # RLE Lossless
    "1.2.840.10008.1.2.4.70",  # JPEG Lossless SV1
    "1.2.840.10008.1.2.4.57",  # JPEG Lossless
    "1.2.840.10008.1.2.4.50",  # JPEG Baseline
    "1.2.840.10008.1.2.4.51",  # JPEG Extended
    "1.2.840.10008.1.2.4.80",  # JPEG-LS Lossless
    "1.2.840.10008.1.2.4.81",  # JPEG-LS Near Lossless
    "1.2.840.10008.1.2.4.90",  # JPEG 2000 Lossless
    "1.2.840.10008.1.2.4.91",  # JPEG 2000
    "1.2.840.10008.1.2.1.99",  # Deflated Explicit VR Little Endian
    "1.2.840.10008.1.2.2",  # Explicit VR Big Endian (retired, still sent by old modalities)
)
_MAX_CONTEXTS = 127  # 128 per association, one of them the retrieve's own
_PENDING = (0xFF00, 0xFF01)
_STORED = (0x0000, 0xB000, 0xB006, 0xB007)  # success, or stored with a coercion/elements warning
_HINTS = {0xA801: "the server's AE table has no move destination {calling!r}"}


def retrieve_series(client: DimseClient, study_uid: str, series_uid: str, cache: SeriesCache, *,
                    progress: Callable[[int, int | None], None] | None = None,
                    should_stop: Callable[[], bool] | None = None) -> Retrieved:
    """One complete series into `cache` by C-GET, or by C-MOVE when the node has a store_port."""
    node = client.node
    expected = client.find_instances(study_uid, series_uid)
    if not expected:
        raise pacs_error(node, "the series is not on the server (C-FIND found no instances)")
    bad = next((c for c in expected.values() if c and not (len(c) <= 64 and DICOM_UID.fullmatch(c))), None)
    if bad is not None:  # pynetdicom would raise ValueError proposing a context for it
        raise pacs_error(node, "the server lists an instance whose SOP Class UID is not a DICOM UID "
                               f"({uid_text(bad)}); nothing retrieved")
    try:
        with cache.receiving(series_uid, expected=len(expected)) as folder:
            receiver = Receiver(folder, expected, asked=(study_uid, series_uid), node=node.name,
                                 what="C-MOVE" if node.store_port else "C-GET", progress=progress,
                                 should_stop=should_stop)
            if node.store_port:
                _move(client, study_uid, series_uid, receiver)
            else:
                _get(client, study_uid, series_uid, receiver)
            _check_received(client, receiver)
    except PacsError as e:
        if str(e).startswith(f"pacs {node.name}:"):
            raise  # its own cause kept
        raise pacs_error(node, str(e)) from e  # the cache's line ("partial retrieve: …"), named by the node
    record = cache.retrieved(series_uid)
    if record is None:  # evicted at once (a bound smaller than the series) or the cache is unwritable
        raise pacs_error(node, "the series was received but the cache could not keep it")
    log.debug("pacs %s: series retrieved (%d files, %d bytes)", node.name, record.files, record.bytes)
    return record


def _check_received(client: DimseClient, receiver: Receiver) -> None:
    node, total = client.node, len(receiver.expected)
    if receiver.dropped:
        keyword, got, want = receiver.dropped[0]
        kind = dict(ASKED)[keyword]
        raise pacs_error(node, f"{receiver.what}: {counted(len(receiver.dropped), 'dataset')} of another {kind} "
                               f"dropped ({keyword} {got}, not {want}); the series is incomplete, nothing kept")
    if receiver.flooded:
        raise pacs_error(node, _flood(receiver))
    if receiver.write_error is not None:
        problem = receiver.write_error.strerror or type(receiver.write_error).__name__
        raise pacs_error(node, f"cannot write the series into the cache ({problem}); nothing kept")
    if receiver.stopped:
        raise pacs_error(node, f"retrieve stopped after {len(receiver.received)} of {total} instances; nothing kept")
    if len(receiver.received) < total:
        raise pacs_error(node, f"partial retrieve: {len(receiver.received)} of {total} instances received "
                               "(fewer than C-FIND listed); nothing kept")


def _series_identifier(study_uid: str, series_uid: str) -> Dataset:
    ds = Dataset()
    ds.QueryRetrieveLevel = "SERIES"
    ds.StudyInstanceUID, ds.SeriesInstanceUID = study_uid, series_uid
    return ds


def _storage_contexts(classes: set[str]) -> list[tuple[str, list[str]]]:
    """One context per (SOP class, transfer syntax) so the server sends each file in its own syntax; one context
    per class with every syntax where that would pass the association's limit."""
    if len(classes) * len(TRANSFER_SYNTAXES) <= _MAX_CONTEXTS:
        return [(uid, [ts]) for uid in sorted(classes) for ts in TRANSFER_SYNTAXES]
    return [(uid, list(TRANSFER_SYNTAXES)) for uid in sorted(classes)[:_MAX_CONTEXTS]]


def _get(client: DimseClient, study_uid: str, series_uid: str, receiver: Receiver) -> None:
    from pynetdicom import build_role, evt

    from app.io.pacs.dimse_common import GET_MODEL as get_model

    classes = {c for c in receiver.expected.values() if c}
    ae = client.application_entity()
    ae.add_requested_context(get_model)
    for uid, syntaxes in _storage_contexts(classes):
        ae.add_requested_context(uid, syntaxes)
    roles = [build_role(uid, scp_role=True) for uid in sorted(classes)]
    with client.association(ae, ext_neg=roles, handlers=[(evt.EVT_C_STORE, receiver)]) as assoc:
        _follow(client, assoc.send_c_get(_series_identifier(study_uid, series_uid), get_model), receiver, assoc)


def _move(client: DimseClient, study_uid: str, series_uid: str, receiver: Receiver) -> None:
    from app.io.pacs.dimse_common import MOVE_MODEL as move_model

    node = client.node
    with _storage_scp(client, receiver):
        ae = client.application_entity()
        ae.add_requested_context(move_model)
        with client.association(ae) as assoc:
            answers = assoc.send_c_move(_series_identifier(study_uid, series_uid), node.calling_ae, move_model)
            _follow(client, answers, receiver, assoc)


@contextmanager
def _storage_scp(client: DimseClient, receiver: Receiver) -> Iterator[None]:
    """Our Storage SCP on node.store_port while the C-MOVE runs: listening only on the address the node reaches
    us at (client.local_address: loopback for a node on loopback), and taking only associations that the node's
    AE title (called_ae: the AE a PACS stores from) opens to our calling AE title; any other is rejected."""
    from pynetdicom import evt

    node = client.node
    ae = client.application_entity()
    ae.require_calling_aet = [node.called_ae]
    ae.require_called_aet = True  # called: our own calling AE title, as the C-MOVE names the destination
    for uid in sorted({c for c in receiver.expected.values() if c}):
        ae.add_supported_context(uid, list(TRANSFER_SYNTAXES))
    address = client.local_address()
    try:
        handlers: list[Any] = [(evt.EVT_C_STORE, receiver), (evt.EVT_CONN_OPEN, _no_delay_handler)]
        server = ae.start_server((address, node.store_port), block=False, evt_handlers=handlers,
                                 ssl_context=_server_ssl(client))
    except OSError as e:
        raise pacs_error(node, f"cannot listen on {address} port {node.store_port} for C-MOVE "
                               f"({e.strerror or e})") from e
    if server is None:  # block=False always returns the server; None is for a blocking one
        raise pacs_error(node, "the Storage SCP for C-MOVE did not start")
    try:
        yield
    finally:
        server.shutdown()


def _no_delay_handler(event: Event) -> None:
    from app.io.pacs.dimse_common import no_delay

    no_delay(event.assoc)


def _server_ssl(client: DimseClient) -> Any:
    # A TLS node sends C-MOVE sub-operations over TLS too, but our SCP would need a certificate of its own:
    # not configured, so C-MOVE over TLS is refused in one line rather than listening in the clear.
    if client.node.tls:
        raise pacs_error(client.node, "C-MOVE over TLS needs a certificate for our Storage SCP: use C-GET "
                                      "(store_port 0)")
    return None


def _follow(client: DimseClient, answers: Iterator[tuple[Dataset, Dataset | None]], receiver: Receiver,
            assoc: Association) -> None:
    """Read a C-GET/C-MOVE's responses to the final one, within the retrieve's deadline and cap on answers: a
    stop aborts the association; none (aborted, timed out, the server gone), a failed/partial final status, the
    deadline passed or too many answers is a PacsError (the association context aborts)."""
    node, total, what = client.node, len(receiver.expected), receiver.what
    deadline = retrieve_deadline(node.timeout_s, total, what)
    try:
        _responses(client, bounded(answers, assoc, deadline, node.timeout_s), receiver, assoc)
    except DeadlineExceeded as e:
        raise pacs_error(node, f"{e} ({DEADLINE_FACTOR} × the node's timeout and one per "
                               f"10 instances); association aborted, nothing kept") from e


def _flood(receiver: Receiver) -> str:
    return (f"{receiver.what}: more than {receiver.cap} answers for {len(receiver.expected)} instances (the server "
            "kept sending); association aborted, nothing kept")


def _responses(client: DimseClient, answers: Iterator[tuple[Dataset, Dataset | None]], receiver: Receiver,
               assoc: Association) -> None:
    node, total, what = client.node, len(receiver.expected), receiver.what
    pending = 0
    for status, _ in answers:
        if receiver.flooded:
            raise pacs_error(node, _flood(receiver))
        if receiver.stopped or (receiver.should_stop is not None and receiver.should_stop()):
            receiver.stopped = True
            assoc.abort()
            return
        if (not status or status.get("Status") is None) and not receiver.received:
            raise pacs_error(node, client.no_answer(what) + "; nothing kept")
        if not status or status.get("Status") is None:
            raise pacs_error(node, f"{what}: the server went away mid-retrieve after {len(receiver.received)} of "
                                   f"{total} instances; nothing kept")
        code = int(status.Status)
        if code in _PENDING:
            pending += 1
            if pending > receiver.cap:
                raise pacs_error(node, _flood(receiver))
            continue
        failed = int(status.get("NumberOfFailedSuboperations") or 0)
        if code == 0x0000 and not failed:
            return
        if receiver.stopped or receiver.write_error is not None or receiver.dropped:
            return  # said by _check_received
        if code == 0xB000 or (code == 0x0000 and failed):
            raise pacs_error(node, f"{what}: {failed} of {total} sub-operations failed; nothing kept")
        from app.io.pacs.dimse_common import describe_status

        hint = _HINTS.get(code, "").format(calling=node.calling_ae)
        raise pacs_error(node, f"{what} failed after {len(receiver.received)} of {total} instances: "
                               f"{describe_status(code, status)}" + (f" ({hint})" if hint else "") + "; nothing kept")
    raise pacs_error(node, f"{what}: no final response from the server; nothing kept")


def store_files(client: DimseClient, files: Sequence[Path], *,
                progress: Callable[[int, int], None] | None = None) -> int:
    """C-STORE every file (its own SOP class and transfer syntax proposed); the number stored. A refused file,
    an unreadable one or the server going away is one PacsError line."""
    node = client.node
    headers = [(Path(path), _header(client, Path(path))) for path in files]
    contexts = sorted({header for _, header in headers})
    if len(contexts) > _MAX_CONTEXTS + 1:
        raise pacs_error(node, f"C-STORE: {len(contexts)} kinds of file (SOP class and transfer syntax) in one "
                               "send; at most 128")
    ae = client.application_entity()
    for uid, syntax in contexts:
        ae.add_requested_context(uid, [syntax])
    stored = 0
    with client.association(ae) as assoc:
        accepted = {(cx.abstract_syntax, cx.transfer_syntax[0]) for cx in assoc.accepted_contexts}
        for done, (path, header) in enumerate(headers, 1):
            if header not in accepted:
                raise pacs_error(node, f"C-STORE: the server does not take {path.name}'s kind of file "
                                       f"(SOP class {header[0]}, transfer syntax {header[1]})")
            status = assoc.send_c_store(path)
            code = client.check(status, f"C-STORE of {path.name}", allow=lambda c: c in _STORED)
            stored += code in _STORED
            if progress is not None:
                progress(done, len(headers))
    return stored


def _header(client: DimseClient, path: Path) -> tuple[str, str]:
    """A file's (SOP class, transfer syntax), read without its pixels through the untrusted gate (a FIFO, a device
    or a giant is refused, never waited on); PacsError naming the file."""
    from pydicom import dcmread
    from pydicom.errors import InvalidDicomError

    from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted

    try:
        with open_untrusted(path, limit=INPUT_FILE_LIMIT) as handle:
            ds = dcmread(handle, stop_before_pixels=True)
        return str(ds.file_meta.MediaStorageSOPClassUID or ds.SOPClassUID), str(ds.file_meta.TransferSyntaxUID)
    except (OSError, InvalidDicomError, AttributeError, ValueError) as e:
        raise PacsError(f"{path}: not a DICOM file that can be sent ({type(e).__name__})") from e
