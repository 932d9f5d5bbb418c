"""PACS over DICOMweb: QIDO-RS search, WADO-RS retrieve and STOW-RS store through `dicomweb-client`.

One requests Session per client carries the node's authentication (HTTP basic: the user name and the secret;
bearer: the secret as the token), its TLS trust (node.ca_bundle as requests' `verify`, never switched off) and its
timeout (node.timeout_s). Every failure is one PacsError line naming the node; requests' own text, which quotes the
URL (a QIDO-RS query holds the patient ID searched for), is not chained into it, so no traceback in a log shows it.
dicomweb-client and requests are imported when a client is made, never at start-up.
"""

from __future__ import annotations

import http.client
import logging
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.errors import one_line
from app.io.pacs.cache import instance_name
from app.io.pacs.client import PacsError, Retrieved, SeriesRecord, StudyQuery, StudyRecord, pacs_error
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
# WADO-RS asks for Explicit VR Little Endian (dicomweb-client's default): the server decompresses, every reader
# of the series can decode it, and a cut-off instance can be told by its pixel bytes.
_UNCOMPRESSED = ("1.2.840.10008.1.2", "1.2.840.10008.1.2.1", "1.2.840.10008.1.2.2")


class DicomWebClient:
    """A PacsClient for a DICOMweb node (node.kind == "dicomweb")."""

    def __init__(self, node: PacsNode, *, secret: str | None = None) -> None:
        """A client for `node`; `secret` is the password (basic) or token (bearer), else the keyring's."""
        self.node = node
        if node.auth != "none" and secret is None:
            secret = node_secret(node)
        if node.auth != "none" and not secret:
            raise pacs_error(node, f"no {_secret_word(node)} for {node.auth} auth (keyring or {SECRET_ENV})")
        self._session = _session(node, secret or "")
        self._web = self._client()

    def _client(self) -> DICOMwebClient:
        from dicomweb_client.api import DICOMwebClient

        try:
            web = DICOMwebClient(self.node.url, session=self._session, timeout=self.node.timeout_s)
        except ValueError as e:  # "Malformed URL", an unsupported scheme
            raise pacs_error(self.node, f"not a DICOMweb service root: {one_line(e, most=120)}") from e
        # One try per request: a retry with exponential back-off would hide a down server behind a long wait.
        web.set_http_retry_params(retry=False)
        return web

    def close(self) -> None:
        """Close the HTTP connections (the client is unusable after)."""
        self._session.close()

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
            answer = self._web.search_for_studies(fields=list(STUDY_FIELDS), search_filters=study_filters(query))
        studies = [s for s in (study_record(item) for item in items(answer)) if s.study_uid and wanted(s, query)]
        log.info("pacs %s: %d studies found", self.node.name, len(studies))
        return studies

    def find_series(self, study_uid: str) -> list[SeriesRecord]:
        """The series of one study (QIDO-RS /studies/{uid}/series)."""
        return self._series(study_uid, {})

    def _series(self, study_uid: str, filters: dict[str, Any]) -> list[SeriesRecord]:
        with self._failures("searching for series"):
            answer = self._web.search_for_series(study_uid, fields=list(SERIES_FIELDS), search_filters=filters)
        return [s for s in (series_record(item, study_uid) for item in items(answer)) if s.series_uid]

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
        end (fewer: a partial retrieve, PacsError). On any error or a stop nothing complete is left behind."""
        found = self._series(study_uid, {"SeriesInstanceUID": series_uid})
        if not found:
            raise pacs_error(self.node, f"series {series_uid} not found in study {study_uid}")
        expected = found[0].instances
        received, size = 0, 0

        def counted() -> str:
            of = f" of {expected}" if expected is not None else ""
            return f"{received}{of} instances received"

        def doing() -> str:
            return f"retrieving the series ({counted()})"

        if progress is not None:
            progress(0, expected)
        if should_stop is not None and should_stop():  # cancelled while the series was looked up
            raise pacs_error(self.node, f"retrieve stopped ({counted()})")
        try:
            with cache.receiving(series_uid, expected=expected) as folder, self._failures(doing):
                instances = self._web.iter_series(study_uid, series_uid)
                try:
                    for dataset in instances:
                        if truncated(dataset):
                            raise pacs_error(self.node, f"partial retrieve: an instance cut short ({counted()})")
                        size += _write_instance(dataset, folder)
                        received += 1
                        if progress is not None:
                            progress(received, expected)
                        if should_stop is not None and should_stop():
                            raise pacs_error(self.node, f"retrieve stopped ({counted()})")
                finally:
                    _close(instances)  # the HTTP response of a stopped or failed stream, not left to the collector
                if received == 0:
                    raise pacs_error(self.node, "no instances received for the series")
                if expected is not None and received < expected:
                    raise pacs_error(self.node, f"partial retrieve: {counted()}")
        except PacsError as e:  # the cache's own refusal (e.g. two instances with one SOPInstanceUID) named too
            if str(e).startswith(f"pacs {self.node.name}:"):
                raise
            raise pacs_error(self.node, str(e)) from e
        log.info("pacs %s: %d instances retrieved (%d bytes)", self.node.name, received, size)
        return cache.retrieved(series_uid) or Retrieved(series_uid, folder, received, size)

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
                answer: Mapping[str, Any] = self._web.store_instances(datasets).to_json_dict()
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


def _session(node: PacsNode, secret: str) -> requests.Session:
    """A Session with the node's auth and TLS trust. The environment may name a proxy for the node, nothing
    else: requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE override a session's `verify` (CURL_CA_BUNDLE=""
    even turns checking off) and ~/.netrc override its credentials."""
    import requests
    from requests.auth import HTTPBasicAuth

    if node.ca_bundle is not None and not node.ca_bundle.is_file():
        raise pacs_error(node, f"the CA bundle {node.ca_bundle} is not a file")
    session = requests.Session()
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


def request_problem(node: PacsNode, e: Exception, doing: str) -> str:
    """The problem in a requests exception, said in one line (without the URL it quotes)."""
    import requests

    where = f"{node.host}:{node.port}"
    if isinstance(e, requests.exceptions.SSLError):
        return tls_problem(node, e)
    if isinstance(e, requests.exceptions.HTTPError):
        return http_problem(node, e.response, doing)
    if isinstance(e, requests.exceptions.InvalidJSONError):  # a web page, say, where DICOM JSON belongs
        return not_dicomweb(node, doing, "not DICOM JSON")
    if isinstance(e, requests.exceptions.ConnectTimeout):
        return f"no connection to {where} within {node.timeout_s:g} s"
    if isinstance(e, requests.exceptions.Timeout):
        return f"no answer within {node.timeout_s:g} s while {doing}"
    if isinstance(e, requests.exceptions.ChunkedEncodingError):
        return f"the server went away while {doing}"
    if isinstance(e, requests.exceptions.ConnectionError):
        if _find(e, ConnectionRefusedError) is not None:
            return f"cannot connect to {where} (connection refused)"
        if _find(e, socket.gaierror) is not None:
            return f"cannot connect to {where} (host name not found)"
        if _find(e, (ConnectionResetError, http.client.RemoteDisconnected, http.client.IncompleteRead)) is not None:
            return f"the server went away while {doing}"
        return f"cannot connect to {where} ({type(_find(e, OSError) or e).__name__})"
    return f"{type(e).__name__} while {doing}"


def not_dicomweb(node: PacsNode, doing: str, what: str) -> str:
    """An answer that is not what a DICOMweb service sends, in one line."""
    return f"not a DICOMweb answer while {doing} ({what}): is {node.url} the DICOMweb service root?"


def tls_problem(node: PacsNode, e: Exception) -> str:
    """A certificate the CA bundle does not vouch for, or another TLS failure, in one line."""
    import ssl

    trust = f"CA bundle {node.ca_bundle}" if node.ca_bundle is not None else "the system's CA certificates"
    cause = _find(e, ssl.SSLCertVerificationError)
    if cause is not None:
        reason = str(getattr(cause, "verify_message", "") or "verify failed")
        return f"the server's certificate is not trusted ({trust}: {reason})"
    return f"TLS failed ({trust}): {one_line(_find(e, ssl.SSLError) or e, most=120)}"


def http_problem(node: PacsNode, response: requests.Response | None, doing: str) -> str:
    """An HTTP error status while `doing`, in one line."""
    if response is None:
        return f"HTTP error while {doing}"
    code, reason = response.status_code, response.reason or ""
    status = f"HTTP {code} {reason}".strip()
    if code == 401 and node.auth == "none":
        return f"the server asks for a login ({status}): give the node auth and a user"
    if code == 401:
        who = f"user {node.username!r} and its password" if node.auth == "basic" else "the token"
        return f"{who} not accepted ({status})"
    if code == 403:
        return f"access denied ({status}) while {doing}"
    if code == 404 and doing.startswith("retrieving"):  # the search just found it: gone from the server since
        return f"not found ({status}) while {doing}"
    if code == 404:
        return f"not found ({status}) while {doing}: is {node.url} the DICOMweb service root?"
    if code >= 500:
        return f"server error ({status}) while {doing}"
    return f"{status} while {doing}"


def _find(e: BaseException, kind: type[BaseException] | tuple[type[BaseException], ...]) -> BaseException | None:
    """The first `kind` among e's causes, contexts, arguments and urllib3's `reason` (how requests nests them)."""
    seen: set[int] = set()
    todo: list[object] = [e]
    while todo:
        item = todo.pop()
        if not isinstance(item, BaseException) or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, kind):
            return item
        todo.extend([item.__cause__, item.__context__, getattr(item, "reason", None), *item.args])
    return None


def _close(instances: object) -> None:
    close = getattr(instances, "close", None)
    if callable(close):
        close()


def _write_instance(dataset: Dataset, folder: Path) -> int:
    """One retrieved instance into the receiving folder, named by a hash of its SOPInstanceUID (never by
    patient); its bytes."""
    uid = str(dataset.get("SOPInstanceUID", "") or "")
    if not uid:
        raise ValueError("an instance without a SOPInstanceUID")
    path = folder / instance_name(uid)
    dataset.save_as(path, enforce_file_format=True)
    return path.stat().st_size


def truncated(dataset: Dataset) -> bool:
    """Whether an uncompressed instance holds fewer pixel bytes than its rows, columns, samples, bits and frames
    need. dicomweb-client hands on the last part of a multipart answer cut off by a server going away as if it
    were whole; counted, it could make a series look complete."""
    meta = getattr(dataset, "file_meta", None)
    if "PixelData" not in dataset or meta is None or meta.get("TransferSyntaxUID", "") not in _UNCOMPRESSED:
        return False
    try:
        frames = int(dataset.get("NumberOfFrames", 1) or 1)
        need = int(dataset.Rows) * int(dataset.Columns) * int(dataset.get("SamplesPerPixel", 1)) * frames
        need = need * int(dataset.BitsAllocated) // 8
    except (AttributeError, TypeError, ValueError):
        return False  # the reader of the series says what is wrong with it
    return len(dataset.PixelData) < need


def _read_instances(paths: Sequence[Path]) -> tuple[list[Dataset], list[str]]:
    """The batch's files read for sending, and one refusal reason per file that is not readable DICOM (the rest
    of the batch still goes)."""
    import pydicom
    from pydicom.errors import InvalidDicomError

    datasets: list[Dataset] = []
    unreadable: list[str] = []
    for path in paths:
        try:
            datasets.append(pydicom.dcmread(path))
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
