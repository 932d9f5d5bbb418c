"""`--device remote --server URL`: run, bench, info and compare on a model served over the Open Inference Protocol
(app.inference.remote.session). The options, the session they open (through the one opener,
app.inference.remote.opener), and what is said about a session wherever it runs (its notes, where it runs, its
requests' latency).

MODEL names the model on the server (its stem: `nuclei`, `models/nuclei.onnx` → `nuclei`; --remote-model says
another name). The sidecar is --config, else the one beside MODEL where MODEL is a local file or a bundled name
(`nuclei` → the bundled nuclei.yaml). Secrets never go on the command line (a shell's history and `ps` keep it):
the token is read from the environment variable --token-env names (default SEGLENS_REMOTE_TOKEN), a basic-auth
password from --password-env's (default SEGLENS_REMOTE_PASSWORD).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.options import number_parser, shown

if TYPE_CHECKING:
    from app.inference.model.session import ModelSession
    from app.inference.remote.session import RemoteTarget

TOKEN_ENV, PASSWORD_ENV = "SEGLENS_REMOTE_TOKEN", "SEGLENS_REMOTE_PASSWORD"
_HINTS = {"auth": f"--token-env, default {TOKEN_ENV}; or --user with --password-env", "tls": "--ca-file PEM",
          "timeout": "--timeout S", "model": "--remote-model NAME"}


def add_remote_options(parser: argparse.ArgumentParser, *, model_name: bool = True) -> None:
    """The remote server's options (with --device remote); `model_name`: --remote-model and --model-version too."""
    group = parser.add_argument_group("remote inference (--device remote)")
    group.add_argument("--server", metavar="URL", help="the Open Inference Protocol server (Triton, KServe, "
                       "seglens-cli serve): grpc://HOST:8001, grpcs://… (TLS), http://HOST:8000 or https://…")
    if model_name:
        group.add_argument("--remote-model", metavar="NAME", help="the model's name on the server (default: MODEL's "
                                                                  "name, e.g. nuclei)")
        group.add_argument("--model-version", default="", metavar="V", help="the model's version (default: the "
                                                                            "server's)")
    group.add_argument("--token-env", metavar="VAR", help=f"environment variable holding a bearer token (default "
                                                          f"{TOKEN_ENV}, when set)")
    group.add_argument("--user", metavar="U", help="basic auth user (its password from --password-env)")
    group.add_argument("--password-env", metavar="VAR", help=f"environment variable holding the basic auth password "
                                                             f"(default {PASSWORD_ENV})")
    group.add_argument("--ca-file", type=Path, metavar="PEM", help="CA bundle that signed the server's certificate "
                                                                   "(https:// or grpcs://)")
    group.add_argument("--timeout", type=_seconds, default=30.0, metavar="S",
                       help="seconds a whole request may take — connecting, sending and every byte of the answer — "
                            "before it is given up and retried (default 30)")
    group.add_argument("--allow-insecure", action="store_true",
                       help="send the token or password over http:// or grpc:// to a host that is not this machine "
                            "(refused otherwise: anyone on the way reads it); a warning is logged each time")
    if model_name:  # run, info, bench: a folder run keeps this many requests going
        group.add_argument("--in-flight", type=_count, default=4, metavar="N",
                           help="requests a folder run keeps going at once (default 4; 1: one after another)")
    group.add_argument("--retries", type=_count, default=3, metavar="N",
                       help="retries with backoff when the server is unreachable, busy (503) or times out "
                            "(default 3; never for 401/403/404)")


def remote_requested(args: argparse.Namespace) -> bool:
    """--device remote was asked for; --server without it, or it without --server, a one-line error."""
    from app.errors import SegLensError

    remote = getattr(args, "device", None) is not None and args.device.kind == "remote"
    server = getattr(args, "server", None)
    if remote and not server:
        raise SegLensError("--device remote needs --server URL (grpc://HOST:8001, http://HOST:8000, …)")
    if server and not remote:
        raise SegLensError("--server is for --device remote (add --device remote, or leave --server out)")
    if remote and getattr(args, "ray", None):
        raise SegLensError("--ray and --device remote: the model runs on the server either way; choose one")
    return remote


def target_of(args: argparse.Namespace, model: Path, *, name: str | None = None) -> RemoteTarget:
    """The RemoteTarget of the options, for MODEL `model` (its stem the remote name unless `name` or
    --remote-model gives one); credentials from the environment."""
    from app.errors import SegLensError
    from app.inference.remote.session import RemoteTarget

    token = _secret(args.token_env, TOKEN_ENV, "--token-env")
    password = None
    if args.user is not None:
        password = _secret(args.password_env, PASSWORD_ENV, "--password-env")
        if password is None:
            var = args.password_env or PASSWORD_ENV
            raise SegLensError(f"--user needs a password in the environment variable {var} (--password-env names "
                               "another)")
        if token is not None:
            raise SegLensError(f"both a token ({args.token_env or TOKEN_ENV}) and --user are given: choose one")
    remote_name = name or getattr(args, "remote_model", None) or Path(model).stem
    return RemoteTarget(args.server, remote_name, getattr(args, "model_version", "") or "", token=token,
                        username=args.user, password=password, ca_file=args.ca_file, timeout_s=args.timeout,
                        retries=args.retries, allow_insecure=bool(getattr(args, "allow_insecure", False)))


def open_remote(args: argparse.Namespace, model: Path, *, sidecar: Path | None = None, warm_up: bool = True,
                name: str | None = None) -> ModelSession:
    """The remote session for MODEL `model`, through the one opener (app.inference.remote.opener): retries said on
    stderr, the session's notes said once."""
    from app.inference.remote.opener import open_model_session
    from app.inference.remote.session import RemoteError

    try:
        target = target_of(args, model, name=name)
    except RemoteError as exc:
        raise RemoteError(exc.message.replace("server URL ", "--server ", 1), kind=exc.kind) from exc
    if getattr(args, "runtime", None):
        print("note: --runtime is ignored with --device remote (ONNX Runtime runs on the server)", file=sys.stderr)
    try:
        session = open_model_session(target, sidecar=sidecar or _sidecar_beside(model), warm_up=warm_up,
                                     on_retry=_say_retry, in_flight=max(1, getattr(args, "in_flight", 1)))
    except RemoteError as exc:  # the line names no option; here the CLI's are said (error.hint)
        raise exc.with_hint(_HINTS.get(exc.kind)) from exc
    say_notes(session)
    return session


def say_notes(model: ModelSession) -> None:
    """What the session says of itself once opened (SessionInfo.notes), one `note:` line each on stderr."""
    for note in model.info.notes:
        print(f"note: {shown(note)}", file=sys.stderr)


def timing_line(model: ModelSession) -> str | None:
    """The latency split of a remote session's requests ('remote latency per request: …'), else None (a local
    session's time is its stage timings)."""
    line = model.timing_line()
    return f"remote {line}" if line else None


def where_line(model: ModelSession) -> str | None:
    """Where a server's session runs and how it is reached ('remote: host:port/model (…), over grpc (TLS)'), for
    `info --no-session`, whose session lines are not there to say it; None for a local session."""
    remote = model.info.remote
    return None if remote is None else f"{remote.label}, {remote.connection}"


def remote_facts(model: ModelSession, *, latency: bool = False) -> dict[str, object]:
    """A server's session in a command's JSON: {"remote": where and how it is reached, the last request's time}
    (and with `latency` its latency split, "remote_latency"); {} for a local session."""
    remote = model.info.remote
    if remote is None:
        return {}
    last = model.timings[-1] if model.timings else None
    facts: dict[str, object] = {"remote": {
        "host": remote.host, "model": remote.model, "version": remote.version, "platform": remote.platform,
        "server_device": remote.server_device, "server_fallback": remote.server_fallback,
        "protocol": remote.protocol, "tls": remote.tls, "label": remote.label,
        "last_timing_ms": None if last is None else {
            "network_queue": round(last.network_ms, 3),
            "server_compute": None if last.compute_ms is None else round(last.compute_ms, 3)}}}
    return {**facts, "remote_latency": timing_line(model)} if latency else facts


def _sidecar_beside(model: Path) -> Path | None:
    """The sidecar of MODEL when it is a local file or a bundled name, else none (the wire's metadata alone)."""
    from app.errors import ModelError
    from app.inference.describe.bundled import resolve_model
    from app.inference.model.sidecar import find_sidecar

    try:
        return find_sidecar(resolve_model(model))
    except ModelError:
        return None


def _secret(var: str | None, default: str, option: str) -> str | None:
    """The value of the environment variable `var` (default `default`, which may be unset); a named one unset is a
    one-line error. The value is never printed."""
    from app.errors import SegLensError

    value = os.environ.get(var or default)
    if var and not value:
        raise SegLensError(f"{option} {var}: that environment variable is not set")
    return value or None


def _say_retry(line: str) -> None:
    print(f"note: {shown(line)}", file=sys.stderr)


_seconds = number_parser(lambda v: 0.0 < v <= 3600.0, "seconds from 0 to 3600")


def _count(text: str) -> int:
    if not text.isdigit() or int(text) > 10:
        raise argparse.ArgumentTypeError(f"must be a whole number from 0 to 10, got {text!r}")
    return int(text)
