"""A DICOMweb failure in one line naming what went wrong and what to check: requests' exceptions (a refused
connection, a timeout, a certificate, an HTTP status) told without the URL they quote, whose query may hold the
patient ID searched for."""

from __future__ import annotations

import http.client
import socket
from typing import TYPE_CHECKING

from app.errors import one_line

if TYPE_CHECKING:
    import requests

    from app.io.pacs.nodes import PacsNode


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
