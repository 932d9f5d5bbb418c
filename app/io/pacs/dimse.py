"""A PACS over DIMSE (pynetdicom): C-ECHO, C-FIND (Study Root, study and series level), C-GET or C-MOVE
(app.io.pacs.dimse_retrieve) and C-STORE, optionally over TLS.

Every failure is one PacsError line naming the node: a refused or timed-out connection, a rejected association
(the server's reason: a wrong called or calling AE title), an abort, a server going away, a failed status.
pynetdicom's own log lines stay at WARNING and above (it dumps datasets, patient names and all, at DEBUG).
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydicom.dataset import Dataset

from app.guard.net import DeadlineExceeded, is_loopback
from app.io.pacs.client import Retrieved, SeriesRecord, StudyQuery, StudyRecord, pacs_error
from app.io.pacs.dimse_common import (
    DEADLINE_FACTOR,
    FIND_MODEL,
    MAX_INSTANCES,
    MAX_MATCHES,
    VERIFICATION,
    bounded,
    describe_status,
    find_deadline,
    no_delay,
)
from app.io.pacs.nodes import PacsNode

if TYPE_CHECKING:
    from pynetdicom import AE
    from pynetdicom.association import Association

    from app.io.pacs.cache import SeriesCache

log = logging.getLogger(__name__)
_library_log = logging.getLogger("pynetdicom")
if _library_log.level == logging.NOTSET:  # a user's own setting wins
    _library_log.setLevel(logging.WARNING)


_STUDY_FIELDS = ("PatientID", "PatientName", "StudyDate", "StudyDescription", "ModalitiesInStudy",
                 "AccessionNumber", "NumberOfStudyRelatedSeries")
_SERIES_FIELDS = ("Modality", "SeriesDescription", "SeriesNumber", "NumberOfSeriesRelatedInstances")
_PENDING = (0xFF00, 0xFF01)


class DimseClient:
    """A PacsClient speaking DIMSE to one node (an association per operation)."""

    def __init__(self, node: PacsNode) -> None:
        self.node = node
        self._started = 0.0  # when the last association was opened (no_answer tells a timeout from an abort)

    # --- associations ---

    def application_entity(self) -> AE:
        """Our AE (calling AE title, the node's timeouts), no contexts yet."""
        from pynetdicom import AE

        ae = AE(ae_title=self.node.calling_ae)
        timeout = self.node.timeout_s
        ae.acse_timeout = ae.dimse_timeout = ae.network_timeout = ae.connection_timeout = timeout
        ae.maximum_pdu_size = 0  # no limit: fewer, larger PDUs for a series of many slices
        return ae

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context (the node's CA bundle, else the system's; certificates always verified)."""
        if not self.node.tls:
            return None
        try:
            return ssl.create_default_context(cafile=str(self.node.ca_bundle) if self.node.ca_bundle else None)
        except (OSError, ssl.SSLError) as e:
            raise pacs_error(self.node, f"cannot read the CA bundle {self.node.ca_bundle} ({type(e).__name__})") from e

    def reach(self) -> None:
        """Open (and close) a TCP connection, with the TLS handshake, to say in one line why a server cannot be
        reached (refused, timed out, unknown host, a certificate) before pynetdicom hides the reason in its log."""
        node, where = self.node, f"{self.node.host}:{self.node.port}"
        context = self.ssl_context()
        try:
            with socket.create_connection((node.host, node.port), timeout=node.timeout_s) as raw:
                if context is not None:
                    with context.wrap_socket(raw, server_hostname=node.host):
                        pass
        except ssl.SSLCertVerificationError as e:
            raise pacs_error(node, f"TLS certificate of {where} not trusted ({e.verify_message})") from e
        except ssl.SSLError as e:
            raise pacs_error(node, f"TLS handshake with {where} failed ({e.reason or type(e).__name__})") from e
        except TimeoutError as e:
            raise pacs_error(node, f"no answer from {where} within {node.timeout_s:g} s") from e
        except ConnectionRefusedError as e:
            raise pacs_error(node, f"connection to {where} refused (is the server running on that port?)") from e
        except socket.gaierror as e:
            raise pacs_error(node, f"unknown host {node.host!r}") from e
        except OSError as e:
            raise pacs_error(node, f"cannot connect to {where} ({e.strerror or type(e).__name__})") from e

    def local_address(self) -> str:
        """The address our C-MOVE destination listens on: the node's `store_host` setting, else this machine's
        address on the route to the node (loopback for a node on loopback): never every interface."""
        node = self.node
        if node.store_host:
            return node.store_host
        if is_loopback(node.host):
            return "::1" if ":" in node.host else "127.0.0.1"
        try:
            family = socket.getaddrinfo(node.host, node.port, type=socket.SOCK_DGRAM)[0][0]
            with socket.socket(family, socket.SOCK_DGRAM) as probe:
                probe.connect((node.host, node.port))  # UDP: the route is chosen, no packet is sent
                return str(probe.getsockname()[0])
        except OSError as e:
            raise pacs_error(node, f"cannot tell which address {node.host} reaches us at for C-MOVE "
                                   f"({e.strerror or type(e).__name__}); set store_host in its settings") from e

    @contextmanager
    def association(self, ae: AE, *, ext_neg: list[Any] | None = None,
                    handlers: list[Any] | None = None) -> Iterator[Association]:
        """An established association with the node, released (or aborted on an error) after."""
        self.reach()
        self._started = time.monotonic()
        context = self.ssl_context()
        tls = (context, self.node.host) if context is not None else None
        assoc = ae.associate(self.node.host, self.node.port, ae_title=self.node.called_ae, ext_neg=ext_neg,
                             tls_args=tls, evt_handlers=handlers)
        if not assoc.is_established:
            raise pacs_error(self.node, self._not_established(assoc))
        no_delay(assoc)
        try:
            yield assoc
        except BaseException:
            assoc.abort()
            raise
        if assoc.is_established:
            assoc.release()

    def _not_established(self, assoc: Association) -> str:
        answer = assoc.acceptor.primitive
        if assoc.is_rejected and answer is not None:
            reason = str(answer.reason_str)
            reason = reason[:1].lower() + reason[1:]  # "called AE title not recognised"
            if "called ae" in reason.lower():
                reason += f" ({self.node.called_ae!r} is not the server's AE title)"
            elif "calling ae" in reason.lower():
                reason += f" ({self.node.calling_ae!r} is not known to the server)"
            return f"association rejected: {reason}"
        if answer is not None and not assoc.accepted_contexts:
            return "association aborted: the server accepted none of the presentation contexts"
        timed_out = time.monotonic() - self._started >= 0.9 * self.node.timeout_s  # pynetdicom aborts then too
        if answer is None and (timed_out or not assoc.is_aborted):
            return f"no answer to the association request within {self.node.timeout_s:g} s"
        return "association aborted by the server (a DIMSE server on that port?)"

    # --- the PacsClient operations ---

    def echo(self) -> None:
        """C-ECHO: the node answers with status Success, or a PacsError."""
        ae = self.application_entity()
        ae.add_requested_context(VERIFICATION)
        with self.association(ae) as assoc:
            status = assoc.send_c_echo()
        self.check(status, "C-ECHO")

    def check(self, status: Dataset, what: str, *, allow: Callable[[int], bool] | None = None) -> int:
        """The status code of a response; PacsError for none (aborted, timed out) or a failure."""
        code = status.get("Status") if status else None
        if code is None:
            raise pacs_error(self.node, self.no_answer(what))
        code = int(code)
        if code == 0x0000 or (allow is not None and allow(code)):
            return code
        raise pacs_error(self.node, f"{what} failed: {describe_status(code, status)}")

    def no_answer(self, what: str) -> str:
        """Why `what` got no response: the node's timeout passed, or the server ended the association at once
        (what Orthanc and others do to a calling AE title missing from their AE table)."""
        if time.monotonic() - self._started >= 0.9 * self.node.timeout_s:
            return f"{what}: no answer within {self.node.timeout_s:g} s"
        return (f"{what}: the server ended the association without an answer (it went away, or its AE table "
                f"does not know our calling AE title {self.node.calling_ae!r})")

    def find(self, identifier: Dataset, *, cap: int = MAX_MATCHES, what: str = "") -> list[Dataset]:
        """C-FIND in the Study Root model; the matches. Bounded as a whole (dimse_common.find_deadline) and by
        `cap` matches: past the deadline it is one PacsError line; past the cap the association is aborted and
        the first `cap` are kept with one warning line when `what` names them ("studies", as a DICOMweb search
        says it), else (an image-level listing, which must be whole) it is one PacsError line."""
        ae = self.application_entity()
        ae.add_requested_context(FIND_MODEL)
        matches: list[Dataset] = []
        deadline = find_deadline(self.node.timeout_s)
        with self.association(ae) as assoc:
            answers = bounded(assoc.send_c_find(identifier, FIND_MODEL), assoc, deadline, self.node.timeout_s)
            try:
                for status, found in answers:
                    code = self.check(status, "C-FIND", allow=lambda c: c in _PENDING)
                    if code in _PENDING and found is not None:
                        if len(matches) >= cap:
                            return self._capped(assoc, matches, cap, what)
                        matches.append(found)
            except DeadlineExceeded as e:
                raise pacs_error(self.node, f"{e} ({DEADLINE_FACTOR} × the node's timeout); association "
                                            "aborted") from e
        return matches

    def _capped(self, assoc: Association, matches: list[Dataset], cap: int, what: str) -> list[Dataset]:
        assoc.abort()
        if not what:
            raise pacs_error(self.node, f"C-FIND: more than {cap} matches; association aborted")
        log.warning("pacs %s: more than %d %s match; the first %d kept (narrow the search)", self.node.name, cap,
                    what, cap)
        return matches

    def find_studies(self, query: StudyQuery) -> list[StudyRecord]:
        """C-FIND at study level; the studies matching `query`."""
        ds = _identifier("STUDY", (*_STUDY_FIELDS, "StudyInstanceUID"))
        ds.PatientID, ds.PatientName = query.patient_id, query.patient_name
        ds.StudyDate = "-".join(query.study_date) if query.study_date else ""
        ds.ModalitiesInStudy, ds.AccessionNumber, ds.StudyInstanceUID = query.modality, query.accession, query.study_uid
        return [_study_record(found) for found in self.find(ds, what="studies")]

    def find_series(self, study_uid: str) -> list[SeriesRecord]:
        """C-FIND at series level; the series of one study."""
        ds = _identifier("SERIES", (*_SERIES_FIELDS, "SeriesInstanceUID"))
        ds.StudyInstanceUID = study_uid
        records = [_series_record(found, study_uid) for found in self.find(ds, what="series")]
        return sorted(records, key=lambda r: (r.number is None, r.number or 0, r.series_uid))

    def find_instances(self, study_uid: str, series_uid: str) -> dict[str, str]:
        """C-FIND at image level: {SOPInstanceUID: SOPClassUID} of one series (what a retrieve must bring)."""
        ds = _identifier("IMAGE", ("SOPInstanceUID", "SOPClassUID"))
        ds.StudyInstanceUID, ds.SeriesInstanceUID = study_uid, series_uid
        found = self.find(ds, cap=MAX_INSTANCES)
        return {str(f.SOPInstanceUID): str(f.get("SOPClassUID", "")) for f in found if f.get("SOPInstanceUID")}

    def retrieve(self, study_uid: str, series_uid: str, cache: SeriesCache, *,
                 progress: Callable[[int, int | None], None] | None = None,
                 should_stop: Callable[[], bool] | None = None) -> Retrieved:
        """C-GET (node.store_port 0) or C-MOVE to our Storage SCP on node.store_port: one complete series into
        `cache`, or a PacsError and nothing in the cache that looks complete."""
        from app.io.pacs.dimse_retrieve import retrieve_series

        return retrieve_series(self, study_uid, series_uid, cache, progress=progress, should_stop=should_stop)

    def store(self, files: Sequence[Path], *, progress: Callable[[int, int], None] | None = None) -> int:
        """C-STORE `files` (each file's SOP class and transfer syntax proposed); the number stored."""
        from app.io.pacs.dimse_retrieve import store_files

        return store_files(self, files, progress=progress)






def _identifier(level: str, keywords: Sequence[str]) -> Dataset:
    ds = Dataset()
    ds.QueryRetrieveLevel = level
    for keyword in keywords:
        setattr(ds, keyword, "")
    return ds


def _text(ds: Dataset, keyword: str) -> str:
    value = ds.get(keyword, "")
    return "" if value is None else str(value)


def _int(ds: Dataset, keyword: str) -> int | None:
    try:
        value = ds.get(keyword)
        return None if value in (None, "") else int(value)
    except (TypeError, ValueError):
        return None


def _study_record(ds: Dataset) -> StudyRecord:
    modalities = ds.get("ModalitiesInStudy", "")
    values = [modalities] if isinstance(modalities, str) else list(modalities or [])
    return StudyRecord(
        study_uid=_text(ds, "StudyInstanceUID"), patient_id=_text(ds, "PatientID"),
        patient_name=_text(ds, "PatientName"), study_date=_text(ds, "StudyDate"),
        description=_text(ds, "StudyDescription"), modalities=tuple(str(v) for v in values if str(v)),
        accession=_text(ds, "AccessionNumber"), series_count=_int(ds, "NumberOfStudyRelatedSeries"),
    )


def _series_record(ds: Dataset, study_uid: str) -> SeriesRecord:
    return SeriesRecord(
        series_uid=_text(ds, "SeriesInstanceUID"), study_uid=_text(ds, "StudyInstanceUID") or study_uid,
        modality=_text(ds, "Modality"), description=_text(ds, "SeriesDescription"),
        number=_int(ds, "SeriesNumber"), instances=_int(ds, "NumberOfSeriesRelatedInstances"),
    )
