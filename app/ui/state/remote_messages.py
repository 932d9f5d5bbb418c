"""Typed frozen records of the viewer's remote device (Model ▸ Device ▸ Remote server…): between the dialog's
controller and its probe worker (Test connection, the keyring), and from the inference worker (a retry, a request's
split latency) to the status bar.

By app.ui.state.messages' rules: one frozen record per signal, Qt-free, the core's types named for the type checker
only. Secrets travel inside app.inference.remote.session.RemoteTarget (its token and password are never in a repr) or
in a field with repr=False here, and are never logged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.ui.state.messages import LoadRequest

if TYPE_CHECKING:
    from app.inference.model.session import RemoteInfo, SessionInfo
    from app.inference.remote.session import RemoteTarget
    from app.ui.state.messages import BarePicture

# a Triton / KServe v2 server's platform tokens (its model configuration's `platform`) in words
PLATFORMS = {"onnxruntime_onnx": "ONNX Runtime", "tensorrt_plan": "TensorRT", "pytorch_libtorch": "PyTorch (LibTorch)",
             "tensorflow_savedmodel": "TensorFlow SavedModel", "tensorflow_graphdef": "TensorFlow GraphDef",
             "openvino": "OpenVINO", "python": "Python backend", "ensemble": "ensemble"}
KEYRING_SERVICE = "seglens-remote"  # the OS keyring's service name; the account: keyring_account()
# the viewer's own opt-in to credentials in clear text (the CLI's is --allow-insecure), as its refusal names it
INSECURE_CHECKBOX = "Send credentials without TLS to this server"
INSECURE_SETTING = f"“{INSECURE_CHECKBOX}” in Model ▸ Device ▸ Remote server…"


@dataclass(frozen=True)
class RemoteLoad(LoadRequest):
    """A LoadRequest for the model on a server (Model ▸ Device ▸ Remote server…): its `model_path` names it
    ("remote host:port/model", as the session's spec.path), `device` is "remote"; the worker opens `target` with
    app.inference.remote.session.open_remote_session on its thread. Its secrets are never in a repr (RemoteTarget's)."""

    target: RemoteTarget | None = None
    sidecar: str = ""  # a local sidecar (YAML) over what the server's metadata says ("": none)


@dataclass(frozen=True)
class RemoteTest:
    """Test connection: open `target`'s session (metadata, one warm-up request) on the probe thread, then close."""

    request_id: int
    target: RemoteTarget


@dataclass(frozen=True)
class RemoteTested:
    """The answer: "ready: nuclei (ONNX Runtime, server: CPU)" (`ok`) or the one-line error."""

    request_id: int
    line: str
    ok: bool


@dataclass(frozen=True)
class SecretAsk:
    """Look up the remembered secret of `account` (keyring_account) in the OS keyring."""

    request_id: int
    account: str


@dataclass(frozen=True)
class SecretFound:
    """The keyring's answer: the secret ("" when none is kept) or, when the keyring cannot be used, `problem`."""

    request_id: int
    account: str
    secret: str = field(default="", repr=False)
    problem: str = ""


@dataclass(frozen=True)
class SecretKeep:
    """Keep `secret` for `account` in the OS keyring ("" : forget what is kept there)."""

    account: str
    secret: str = field(default="", repr=False)


@dataclass(frozen=True)
class RemoteRetrying:
    """The remote session waits before another try: the line to show until it answers ("… — retrying in 2 s
    (attempt 2 of 4)"); `picture`: the picture being tried, when it is one the reader asked to see (the canvas
    shows it, not the previous picture's result)."""

    line: str
    picture: BarePicture | None = None


@dataclass(frozen=True)
class RemoteLatency:
    """One picture's requests to the server: network+queue and server compute (None: the server does not say),
    summed over its requests (a tiled picture makes several), and the session's info as it now reads (the
    server's device is known from its first answer)."""

    network_ms: float
    compute_ms: float | None
    requests: int
    info: SessionInfo

    def text(self) -> str:
        """'network+queue 12 · server 4 ms' (the server's compute unknown: 'server n/a')."""
        compute = f"{self.compute_ms:.0f} ms" if self.compute_ms is not None else "n/a"
        return f"network+queue {self.network_ms:.0f} ms · server {compute}"


def keyring_account(*, host: str, username: str | None) -> str:
    """The keyring account a server's secret is kept under: 'host:port' for a token, 'user@host:port' for a
    password (the same server may be reached with either)."""
    return f"{username}@{host}" if username else host


# the viewer's own advice after a remote failure's line, by RemoteError.kind (the CLI adds its options' names, the
# error's `hint`, which mean nothing here)
ADVICE = {"auth": "check the token (or user and password) in Model ▸ Device ▸ Remote server…",
          "tls": "check the server's URL (https/grpcs) and the CA bundle in Model ▸ Device ▸ Remote server…",
          "model": "check the model's name and version in Model ▸ Device ▸ Remote server…",
          "unreachable": "check the server or use a local device (Model ▸ Device)",
          "timeout": "check the server or use a local device (Model ▸ Device)"}


def viewer_line(exc: BaseException) -> str:
    """The error's line as the viewer says it: a remote failure's with the viewer's own advice (ADVICE) where the
    CLI would name its options (a RemoteError's `hint`, left out); any other error's as it is."""
    hint = getattr(exc, "hint", None)
    line = str(exc).removesuffix(f" ({hint})") if isinstance(hint, str) and hint else str(exc)
    return f"{line}{advice(exc)}"


def advice(exc: BaseException) -> str:
    """' — check the token … in Model ▸ Device ▸ Remote server…' for a remote failure the reader can mend in the
    dialog, else ''."""
    from app.errors import SegLensError

    words = ADVICE.get(getattr(exc, "kind", "") or "") if isinstance(exc, SegLensError) else None
    return f" — {words}" if words else ""


def clear_text_server(url: str) -> str:
    """'host:port' of the server `url` names when credentials would reach it in clear text (http:// or grpc:// to
    a host that is not this machine: the dialog's opt-in applies), else '' (TLS, loopback, or not a server URL)."""
    from app.guard.net import is_loopback
    from app.inference.remote.session import RemoteError, RemoteTarget

    try:
        target = RemoteTarget(url, "m")  # no credentials: the URL's own checks only
    except RemoteError:
        return ""
    host = target.host.rsplit(":", 1)[0]
    return "" if target.tls or is_loopback(host) else target.host


def server_label(remote: RemoteInfo) -> str:
    """'remote: host:port/model (ONNX Runtime, server: CPU)': RemoteInfo.label with the device said to be the
    server's, so the badge is never read as this computer's CPU or GPU (the CLI's label stays as it is)."""
    about = server_about(remote)
    return f"remote: {remote.host}/{remote.model}" + (f" ({about})" if about else "")


def server_about(remote: RemoteInfo) -> str:
    """'ONNX Runtime, server: CPU': what the server says of the model, its platform in words (PLATFORMS; one not
    known there as the server says it), '' when it says nothing."""
    device = f"server: {remote.server_device}" if remote.server_device else ""
    return ", ".join(part for part in (PLATFORMS.get(remote.platform, remote.platform), device) if part)
