"""PACS over DICOMweb: QIDO-RS search, WADO-RS retrieve and STOW-RS store through `dicomweb-client`.

The HTTP sessions are app.guard.net's `guarded_session`: every request has a deadline for the whole answer (a
series that trickles or never ends included) and an answer-size cap, and a redirect to another host or scheme is
refused (a STOW-RS post of patient data, or the credentials, never follow it elsewhere). They carry the node's
authentication (HTTP basic: the user name and the secret; bearer: the secret as the token), its TLS trust
(node.ca_bundle as requests' `verify`, never switched off) and its timeout (node.timeout_s). A search or a check
is given node.timeout_s for its whole answer (at most QUERY_MAX_BYTES); a series retrieve or a store, whose body
is large, TRANSFER_DEADLINE_S in all (at most TRANSFER_MAX_BYTES), node.timeout_s bounding the connection and each
read; a search keeps at most MAX_MATCHES results. Every instance a retrieve receives is checked against
what was asked for (its study, its series, a SOPInstanceUID not seen before); anything else is dropped with one line
and the series is not complete. Every failure is one PacsError line naming the node; requests' own text, which
quotes the URL (a QIDO-RS query holds the patient ID searched for), is not chained into it, so no traceback in a
log shows it. dicomweb-client and requests are imported when a client is made, never at start-up.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.errors import one_line
from app.guard.net import NetRefused
from app.guard.net_session import guarded_session
from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted
from app.io.pacs.cache import dataset_bytes, write_instance
from app.io.pacs.client import PacsError, Retrieved, SeriesRecord, StudyQuery, StudyRecord, pacs_error
from app.io.pacs.dicomweb_arrivals import Arrivals, truncated
from app.io.pacs.dicomweb_errors import not_dicomweb, request_problem
from app.io.pacs.dicomweb_json import (
    SERIES_FIELDS,
    STUDY_FIELDS,
    is_stow_answer,
    items,
    series_record,
    stow_outcome,
    study_filters,
    study_record,
    wanted,
)
from app.io.pacs.nodes import SECRET_ENV, node_secret

if TYPE_CHECKING:
    import requests
    from dicomweb_client.api import DICOMwebClient
    from pydicom import Dataset

    from app.io.pacs.cache import SeriesCache
    from app.io.pacs.nodes import PacsNode

log = logging.getLogger(__name__)

# STOW-RS: a batch is one HTTP request held in memory by dicomweb-client; bounded by count and by bytes.
BATCH_FILES = 50
BATCH_BYTES = 64 * 2**20
QUERY_MAX_BYTES = 64 * 2**20  # a search's answer (its deadline: the node's timeout)
# One series' WADO-RS answer, or one STOW-RS batch and its answer: all of it within this, at most this many bytes.
TRANSFER_DEADLINE_S = 3600.0
TRANSFER_MAX_BYTES = 32 * 2**30
_DICOM_UID = re.compile(r"[0-9]+(\.[0-9]+)*", re.ASCII)  # PS3.5 9.1, at most 64 characters
MAX_MATCHES = 10_000  # studies of one search, series of one study: a larger answer is cut here, said in one line


class DicomWebClient:
    """A PacsClient for a DICOMweb node (node.kind == "dicomweb")."""

    def __init__(self, node: PacsNode, *, secret: str | None = None) -> None:
        """A client for `node`; `secret` is the password (basic) or token (bearer), else the keyring's."""
        self.node = node
        if node.auth != "none" and secret is None:
            secret = node_secret(node)
        if node.auth != "none" and not secret:
            raise pacs_error(node, f"no {_secret_word(node)} for {node.auth} auth (keyring or {SECRET_ENV})")
        self._session = _session(node, secret or "", deadline_s=node.timeout_s, max_bytes=QUERY_MAX_BYTES)
        self._transfer_session = _session(node, secret or "", deadline_s=TRANSFER_DEADLINE_S,
                                          max_bytes=TRANSFER_MAX_BYTES)
        self._web = self._client(self._session)
        self._transfer = self._client(self._transfer_session)

    def _client(self, session: requests.Session) -> DICOMwebClient:
        from dicomweb_client.api import DICOMwebClient

        try:
            web = DICOMwebClient(self.node.url, session=session, timeout=self.node.timeout_s)
        except ValueError as e:  # "Malformed URL", an unsupported scheme
            raise pacs_error(self.node, f"not a DICOMweb service root: {one_line(e, most=120)}") from e
        # One try per request: a retry with exponential back-off would hide a down server behind a long wait.
        web.set_http_retry_params(retry=False)
        return web

    def close(self) -> None:
        """Close the HTTP connections (the client is unusable after)."""
        self._session.close()
        self._transfer_session.close()

    def echo(self) -> None:
        """A cheap QIDO-RS study search (limit 1): the service answers, and the credentials are accepted."""
        with self._failures("checking the service"):
            answer = self._web.search_for_studies(limit=1, fields=["StudyInstanceUID"])
        if not isinstance(answer, list):
            raise pacs_error(self.node, f"the answer to a study search is not a list: is {self.node.url} the root?")
        log.info("pacs %s: DICOMweb answers", self.node.name)

    def find_studies(self, query: StudyQuery) -> list[StudyRecord]:
        """The studies matching `query` (QIDO-RS /studies)."""
        with self._failures("searching for studies"):
            answer = self._web.search_for_studies(fields=list(STUDY_FIELDS), search_filters=study_filters(query),
                                                  limit=MAX_MATCHES + 1)
        found = self._capped(items(answer), "studies")
        studies = [s for s in (study_record(item) for item in found) if s.study_uid and wanted(s, query)]
        log.info("pacs %s: %d studies found", self.node.name, len(studies))
        return studies

    def find_series(self, study_uid: str) -> list[SeriesRecord]:
        """The series of one study (QIDO-RS /studies/{uid}/series)."""
        return self._series(study_uid, {})

    def _series(self, study_uid: str, filters: dict[str, Any]) -> list[SeriesRecord]:
        with self._failures("searching for series"):
            answer = self._web.search_for_series(study_uid, fields=list(SERIES_FIELDS), search_filters=filters,
                                                 limit=MAX_MATCHES + 1)
        found = self._capped(items(answer), "series")
        return [s for s in (series_record(item, study_uid) for item in found) if s.series_uid]

    def _capped(self, found: list[Mapping[str, Any]], what: str) -> list[Mapping[str, Any]]:
        """At most MAX_MATCHES results of a search, one line when the server had more."""
        if len(found) > MAX_MATCHES:
            log.warning("pacs %s: more than %d %s match; the first %d kept (narrow the search)", self.node.name,
                        MAX_MATCHES, what, MAX_MATCHES)
        return found[:MAX_MATCHES]

    def retrieve(
        self,
        study_uid: str,
        series_uid: str,
        cache: SeriesCache,
        *,
        progress: Callable[[int, int | None], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> Retrieved:
        """One series into `cache` over WADO-RS, instance by instance; the count QIDO announced is checked at the
        end (fewer: a partial retrieve, PacsError). Each instance must be of the study and series asked for, with
        a SOPInstanceUID not received before: any other is dropped with one line and the series is not complete;
        more instances than announced stop the retrieve. On any error or a stop nothing complete is left behind."""
        for uid in (study_uid, series_uid):
            if len(uid) > 64 or not _DICOM_UID.fullmatch(uid):  # a server's `../../x`: never put in a URL
                raise pacs_error(self.node, f"{uid[:80]!r} is not a DICOM UID (digits and dots, at most 64): "
                                            "not retrieved")
        found = [s for s in self._series(study_uid, {"SeriesInstanceUID": series_uid}) if s.series_uid == series_uid]
        if not found:
            raise pacs_error(self.node, f"series {series_uid} not found in study {study_uid}")
        arrivals = Arrivals(self.node.name, study_uid, series_uid, found[0].instances)
        if progress is not None:
            progress(0, arrivals.expected)
        if should_stop is not None and should_stop():  # cancelled while the series was looked up
            raise pacs_error(self.node, f"retrieve stopped ({arrivals.counted()})")
        try:
            with cache.receiving(series_uid, expected=arrivals.expected) as folder, self._failures(arrivals.doing):
                self._receive(arrivals, folder, progress=progress, should_stop=should_stop)
        except PacsError as e:  # the cache's own refusal named too
            if str(e).startswith(f"pacs {self.node.name}:"):
                raise
            raise pacs_error(self.node, str(e)) from e
        except OSError as e:  # the cache's folder not writable, full, or removed under the retrieve
            problem = e.strerror or type(e).__name__
            raise pacs_error(self.node, f"cannot write the series into the cache ({problem}); nothing kept") from e
        record = cache.retrieved(series_uid)
        if record is None:  # evicted at once (a bound smaller than the series) or the cache is unwritable
            raise pacs_error(self.node, "the series was received but the cache could not keep it")
        log.info("pacs %s: %d instances retrieved (%d bytes)", self.node.name, record.files, record.bytes)
        return record

    def _receive(self, arrivals: Arrivals, folder: Path, *, progress: Callable[[int, int | None], None] | None,
                 should_stop: Callable[[], bool] | None) -> None:
        """The WADO-RS answer's instances into the receiving folder, each checked (`Arrivals`)."""
        instances = self._transfer.iter_series(arrivals.study_uid, arrivals.series_uid)
        try:
            for dataset in instances:
                if truncated(dataset):
                    raise pacs_error(self.node, f"partial retrieve: an instance cut short ({arrivals.counted()})")
                sop = arrivals.kept(dataset)
                if sop is not None:
                    arrivals.bytes += write_instance(folder, sop, dataset_bytes(dataset))
                    arrivals.received += 1
                    if progress is not None:
                        progress(arrivals.received, arrivals.expected)
                if arrivals.overflowing():
                    raise pacs_error(self.node, f"the server sent more instances than its search announced "
                                                f"({arrivals.expected}); nothing kept")
                if should_stop is not None and should_stop():
                    raise pacs_error(self.node, f"retrieve stopped ({arrivals.counted()})")
        finally:
            _close(instances)  # the HTTP response of a stopped or failed stream, not left to the collector
        problem = arrivals.incomplete()
        if problem:
            raise pacs_error(self.node, problem)

    def store(self, files: Sequence[Path], *, progress: Callable[[int, int], None] | None = None) -> int:
        """Send `files` over STOW-RS in batches; the number stored. Instances the server refuses are one PacsError
        after every batch was sent: "2 of 40 instances refused: cannot understand (0xC000)"."""
        stored, refused = 0, list[str]()
        for done, batch in _batches(files):
            datasets, unreadable = _read_instances(batch)
            ok, failed = self._store_batch(datasets) if datasets else (0, [])
            stored, refused = stored + ok, refused + unreadable + failed
            if progress is not None:
                progress(done, len(files))
        if refused:
            reasons = ", ".join(sorted(set(refused)))
            raise pacs_error(self.node, f"{len(refused)} of {len(files)} instances refused: {reasons}")
        log.info("pacs %s: %d instances stored", self.node.name, stored)
        return stored

    def _store_batch(self, datasets: list[Dataset]) -> tuple[int, list[str]]:
        import requests

        with self._failures("storing instances"):
            try:
                answer: Mapping[str, Any] = self._transfer.store_instances(datasets).to_json_dict()
            except requests.exceptions.HTTPError as e:
                answer = _stow_answer(e.response)  # 400/409: the per-instance failures are in the body
                if not answer:
                    raise
        return stow_outcome(answer, sent=len(datasets))

    @contextmanager
    def _failures(self, doing: str | Callable[[], str]) -> Iterator[None]:
        """Whatever requests, dicomweb-client or pydicom raise inside, as one PacsError line naming the node."""
        import requests
        from pydicom.errors import InvalidDicomError

        try:
            yield
        except PacsError:
            raise
        except NetRefused as e:  # the gate's own line: too slow in all, too large, redirected elsewhere
            what = doing() if callable(doing) else doing
            log.debug("pacs %s: %s (%s)", self.node.name, what, type(e).__name__)
            raise pacs_error(self.node, f"{e} while {what}") from None
        except requests.exceptions.RequestException as e:
            # not chained: requests' text quotes the URL, whose query may hold the patient ID searched for
            problem = request_problem(self.node, e, doing() if callable(doing) else doing)
            log.debug("pacs %s: %s (%s)", self.node.name, problem, type(e).__name__)
            raise pacs_error(self.node, problem) from None
        except (ValueError, KeyError, InvalidDicomError) as e:  # not multipart, not DICOM
            what = doing() if callable(doing) else doing
            raise pacs_error(self.node, not_dicomweb(self.node, what, type(e).__name__)) from e


def _secret_word(node: PacsNode) -> str:
    return "token" if node.auth == "bearer" else "password"


def _session(node: PacsNode, secret: str, *, deadline_s: float, max_bytes: int) -> requests.Session:
    """A guarded Session (app.guard.net: `deadline_s` and `max_bytes` per request, no redirect elsewhere) with the
    node's auth and TLS trust. The environment may name a proxy for the node, nothing else: requests lets
    REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE override a session's `verify` (CURL_CA_BUNDLE="" even turns checking off)
    and ~/.netrc override its credentials."""
    import requests
    from requests.auth import HTTPBasicAuth

    if node.ca_bundle is not None and not node.ca_bundle.is_file():
        raise pacs_error(node, f"the CA bundle {node.ca_bundle} is not a file")
    session = guarded_session(deadline_s=deadline_s, max_bytes=max_bytes, what=f"{node.host}:{node.port}")
    session.trust_env = False
    session.proxies.update(requests.utils.get_environ_proxies(node.url))
    session.verify = str(node.ca_bundle) if node.ca_bundle is not None else True
    session.auth = _RawWildcards(HTTPBasicAuth(node.username, secret) if node.auth == "basic" else None)
    if node.auth == "bearer":
        session.headers["Authorization"] = f"Bearer {secret}"
    return session


class _RawWildcards:
    """requests' auth hook, run once the URL is built: the QIDO-RS wildcards "*" and "?" back from the %2A and %3F
    dicomweb-client encodes them to (both are legal in a query as they are; Orthanc 1.10 decodes neither)."""

    def __init__(self, inner: Callable[[requests.PreparedRequest], requests.PreparedRequest] | None) -> None:
        self.inner = inner

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request = self.inner(request) if self.inner is not None else request
        base, mark, query = (request.url or "").partition("?")
        if mark:
            request.url = f"{base}?{query.replace('%2A', '*').replace('%3F', '?')}"
        return request


def _close(instances: object) -> None:
    close = getattr(instances, "close", None)
    if callable(close):
        close()


def _read_instances(paths: Sequence[Path]) -> tuple[list[Dataset], list[str]]:
    """The batch's files read for sending, and one refusal reason per file that is not readable DICOM (the rest
    of the batch still goes)."""
    import pydicom
    from pydicom.errors import InvalidDicomError

    datasets: list[Dataset] = []
    unreadable: list[str] = []
    for path in paths:
        try:  # a file the user named: regular only, bounded (a FIFO or /dev/zero among them never blocks)
            with open_untrusted(path, limit=INPUT_FILE_LIMIT) as handle:
                datasets.append(pydicom.dcmread(handle))
        except (OSError, InvalidDicomError, ValueError) as e:
            log.debug("not sent, not readable DICOM: %s (%s)", path, type(e).__name__)
            unreadable.append(f"{path.name} is not a readable DICOM file")
    return datasets, unreadable


def _batches(files: Sequence[Path]) -> Iterator[tuple[int, Sequence[Path]]]:
    """Consecutive batches of at most BATCH_FILES files and about BATCH_BYTES; with the count sent after each."""
    start, size = 0, 0
    for end, path in enumerate(files, start=1):
        size += path.stat().st_size if path.is_file() else 0
        if end - start >= BATCH_FILES or size >= BATCH_BYTES or end == len(files):
            yield end, files[start:end]
            start, size = end, 0


def _stow_answer(response: requests.Response | None) -> dict[str, Any]:
    """The STOW-RS response body of a 400/409 (Orthanc sends its JSON without a Content-Type), or {}."""
    try:
        answer = response.json() if response is not None and response.content else {}
    except ValueError:
        return {}
    return answer if isinstance(answer, dict) and is_stow_answer(answer) else {}
