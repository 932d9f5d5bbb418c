"""A remote model's sidecar given by URL (`--config https://host/model.yaml`): fetched once when the session opens,
then read exactly as a local sidecar (app.inference.model.sidecar's loader, its limits and messages) from a private
temporary copy that lives as long as the session (provenance hashes it).

Credentials go only where the server's own would: to the same host name as the server, and never in clear text
to a TLS server's host (an http:// sidecar beside a grpcs:// server gets none). The server's CA bundle is trusted
for that host only; another host is checked against the system's trust store. Redirects are not followed (a
redirect to another host would carry the Authorization header along): the final URL is asked for. A URL's query
(a pre-signed link's signature) and any user:password@ are never echoed. The fetch is app.guard.net's: a
deadline for the whole answer (a server trickling a byte a second cannot outlive the timeout), the loader's size
limit before (Content-Length) and while reading, credentials never in clear text to a host that is not this
machine unless `--allow-insecure`.
"""

from __future__ import annotations

import logging
import socket
import ssl
import tempfile
import urllib.error
import urllib.parse
from pathlib import Path, PurePosixPath

from app.errors import SidecarError, one_line
from app.guard.names import component, join_under
from app.guard.net import AnswerTooLarge, DeadlineExceeded, NetRefused, credentials_problem, fetch, shown_url
from app.guard.shared import atomic_write
from app.inference.model.sidecar import MAX_SIDECAR_BYTES
from app.inference.remote.transport import Wire

log = logging.getLogger(__name__)


def sidecar_url(value: str | Path | None) -> str | None:
    """The URL when `value` is one, else None. A Path made of a URL has lost a slash ('https:/host/m.yaml', as
    argparse's type=Path gives it): restored."""
    text = str(value) if value is not None else ""
    for scheme in ("https", "http"):
        if text.startswith(f"{scheme}://"):
            return text
        if text.startswith(f"{scheme}:/"):
            return f"{scheme}://{text[len(scheme) + 2:]}"
    return None


def fetch_sidecar(url: str, wire: Wire, folder: Path) -> Path:
    """The sidecar at `url` written into `folder` (under the URL's file name, so provenance names it); one
    SidecarError line for each failure: the URL refused, HTTP errors, TLS, too slow (a deadline for the whole
    fetch, app.guard.net), too large (declared or received), a redirect."""
    where = f"sidecar {shown_url(url)}"
    parts = urllib.parse.urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise SidecarError(f"{where}: credentials do not belong in the URL: the server's are used for its host")
    if not parts.hostname:
        raise SidecarError(f"{where}: no host")
    same_host = parts.hostname.lower() == (urllib.parse.urlsplit(f"//{wire.host}").hostname or "").lower()
    https = parts.scheme == "https"
    headers = {"Accept": "application/yaml, text/yaml, text/plain, */*"}
    credentials = wire.headers()
    if credentials and same_host and (https or not wire.tls):
        problem = credentials_problem(url, allow_insecure=wire.allow_insecure, setting="--allow-insecure")
        if problem:
            raise SidecarError(f"{where}: {problem}")
        headers.update({key.title(): value for key, value in credentials.items()})
    context = ssl.create_default_context(cafile=str(wire.ca_file) if same_host and wire.ca_file else None)
    log.debug("%s: fetching (credentials %s)", where, "sent" if "Authorization" in headers else "not sent")
    data = _read(url, headers, context, where, wire.timeout_s)
    name = PurePosixPath(urllib.parse.unquote(parts.path)).name
    target = join_under(folder, component(name) if name.endswith((".yaml", ".yml")) else "sidecar.yaml")
    atomic_write(target, data, private=True)  # the session's own private folder (fetched_folder: 0700)
    return target


def _read(url: str, headers: dict[str, str], context: ssl.SSLContext, where: str, timeout_s: float) -> bytes:
    """The sidecar's bytes through the gate: within `timeout_s` in all, at most MAX_SIDECAR_BYTES, no redirect."""
    too_large = f"{where}: sidecar too large (over {MAX_SIDECAR_BYTES >> 20} MiB; a sidecar is a short YAML file)"
    try:
        return fetch(url, deadline_s=timeout_s, max_bytes=MAX_SIDECAR_BYTES, headers=headers, context=context,
                     what=where)
    except AnswerTooLarge:
        raise SidecarError(too_large) from None
    except DeadlineExceeded:
        raise SidecarError(f"{where}: no whole answer within {timeout_s:g} s") from None
    except NetRefused as exc:
        raise SidecarError(one_line(exc, most=300)) from None
    except urllib.error.HTTPError as exc:
        raise SidecarError(f"{where}: {_http_problem(exc)}") from None
    except urllib.error.URLError as exc:
        raise SidecarError(f"{where}: {_connection_problem(exc.reason, timeout_s)}") from None
    except OSError as exc:  # a timeout or a connection reset mid-answer, and the like
        raise SidecarError(f"{where}: {_connection_problem(exc, timeout_s)}") from None


def _http_problem(exc: urllib.error.HTTPError) -> str:
    code = exc.code
    if 300 <= code < 400:
        return (f"HTTP {code}: redirected to {shown_url(exc.headers.get('Location') or '?')}; redirects are not "
                "followed (credentials would go along): give the final URL")
    words = {401: "not authorised: no token or a wrong one", 403: "forbidden", 404: "not found"}
    return f"HTTP {code} {words.get(code) or one_line(ValueError(str(exc.reason)), most=80)}"


def _connection_problem(reason: object, timeout_s: float) -> str:
    if isinstance(reason, ssl.SSLCertVerificationError):
        return (f"the TLS certificate is not trusted ({reason.verify_message or 'verify failed'}): trust the CA "
                "that signed it")
    if isinstance(reason, ssl.SSLError):
        return f"TLS failed ({one_line(reason, most=120)}): is it on https?"
    if isinstance(reason, TimeoutError):
        return f"no answer within {timeout_s:g} s"
    if isinstance(reason, ConnectionRefusedError):
        return "unreachable (connection refused)"
    if isinstance(reason, socket.gaierror):
        return f"unknown host ({one_line(reason, most=80)})"
    if isinstance(reason, BaseException):
        return f"cannot fetch it ({one_line(reason, most=120, typed=True)})"
    return f"cannot fetch it ({str(reason)[:120]})"


def loaded_as(error: SidecarError, copy: Path, url: str) -> SidecarError:
    """The loader's error about the fetched copy, naming the URL instead (the copy is nobody's to look at)."""
    return SidecarError(str(error).replace(str(copy), f"sidecar {shown_url(url)}"))


def fetched_folder() -> tempfile.TemporaryDirectory[str]:
    """A private folder for a session's fetched sidecar (removed when the session closes)."""
    return tempfile.TemporaryDirectory(prefix="seglens-remote-sidecar-")


def fetched_sidecar(sidecar: str | Path | None, wire: Wire
                    ) -> tuple[Path | None, str | None, tempfile.TemporaryDirectory[str] | None]:
    """(the sidecar's path to load, its URL when it was fetched, the folder holding the copy): a local sidecar as
    given (refused when not there), a URL fetched into a new private folder."""
    from app.inference.model.builder import given_sidecar

    url = sidecar_url(sidecar)
    if url is None:
        return (given_sidecar(sidecar) if sidecar is not None else None), None, None
    folder = fetched_folder()
    try:
        return fetch_sidecar(url, wire, Path(folder.name)), url, folder
    except BaseException:
        folder.cleanup()
        raise
