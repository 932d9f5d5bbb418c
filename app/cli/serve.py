"""seglens-cli serve: ONNX models over the Open Inference Protocol (KServe v2 / Triton), REST and gRPC, until Ctrl+C.

    seglens-cli serve MODEL… [--port 8000] [--grpc-port 8001 | --no-grpc] [--host 127.0.0.1]
                      [--token-env VAR | --token T] [--no-auth] [--tls-cert CERT.pem --tls-key KEY.pem]
                      [--device auto|cpu|cuda|cuda:N] [--runtime KEY=VALUE]

Each MODEL (a .onnx file or a bundled model's name) is served under its file's stem, one session each, opened
and warmed up as every SegLens command opens one. Auth: a bearer token, read from the environment variable
`--token-env` names (default SEGLENS_SERVE_TOKEN); when none is set the server stays open, which is allowed on a
loopback address only: any other host (0.0.0.0, a LAN address) without a token is refused unless `--no-auth`.
`--token T` works too, but a token on the command line is visible to every user of the machine (ps, /proc) and
lands in the shell's history: prefer the environment.

This module imports nothing of app.cli.options (which reaches the remote client): kserve and tritonclient.grpc
cannot share a process (pyproject's import-linter contract `serve-never-loads-the-client`).

Exit codes: 0 stopped without a signal, 2 usage, a model, a port or TLS problem (nothing served),
130 stopped by Ctrl+C (SIGINT), 143 by SIGTERM — both after the requests in flight finished (5 s at most). A
second signal during that stop ends the process at once (`stopped at once (a second SIGTERM): …`, no traceback),
with that signal's code.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from app.errors import SegLensError
from app.errors import shown as _shown

if TYPE_CHECKING:
    from app.inference.model.runtime_options import RuntimeOptions
    from app.inference.runtime.session import DeviceRequest
    from app.serve.model import OnnxModel
    from app.serve.server import ServeConfig

DEFAULT_TOKEN_ENV = "SEGLENS_SERVE_TOKEN"


def add_serve_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `serve` on the subcommand parser."""
    serve = commands.add_parser(
        "serve", help="serve ONNX models over the Open Inference Protocol (KServe v2 / Triton: REST and gRPC) "
                      "for `--device remote` clients, until Ctrl+C")
    serve.add_argument("models", nargs="+", type=Path, metavar="MODEL",
                       help="the .onnx files or bundled models' names; each served under its file's stem")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to bind (default 127.0.0.1; 0.0.0.0 or another non-loopback one needs a token)")
    serve.add_argument("--port", type=_port, default=8000, help="REST (HTTP) port (default 8000)")
    grpc = serve.add_mutually_exclusive_group()
    grpc.add_argument("--grpc-port", type=_port, metavar="PORT", help="gRPC port (default: --port + 1)")
    grpc.add_argument("--no-grpc", action="store_true", help="REST only")
    token = serve.add_mutually_exclusive_group()
    token.add_argument("--token-env", metavar="VAR",
                       help=f"environment variable holding the bearer token (default {DEFAULT_TOKEN_ENV})")
    token.add_argument("--token", metavar="T", help="the bearer token itself (visible in ps and the shell's "
                                                    "history: prefer --token-env)")
    serve.add_argument("--no-auth", action="store_true",
                       help="serve a non-loopback address with no token (refused otherwise)")
    serve.add_argument("--tls-cert", type=Path, metavar="CERT.pem",
                       help="serve HTTPS and gRPC over TLS (with --tls-key)")
    serve.add_argument("--tls-key", type=Path, metavar="KEY.pem", help="the certificate's private key (PEM)")
    serve.add_argument("--device", default="auto", type=_device, help="auto | cpu | cuda | cuda:N (default auto)")
    serve.add_argument("--runtime", action="append", default=[], metavar="KEY=VALUE",
                       help="ONNX Runtime option, repeatable (as for run): intra_op_threads=2, tensorrt=true, …")
    serve.set_defaults(handler=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    """Check the options, open and warm up every model, print what is served where, serve until a signal."""
    from app.inference.describe.bundled import resolve_model
    from app.serve.auth import check_exposure
    from app.serve.kserve import load_kserve
    from app.serve.server import check_tls, open_models, serve_forever

    config = _config(args)
    warning = check_exposure(config.host, config.auth, no_auth=args.no_auth, tls=config.tls)
    if config.tls_cert is not None and config.tls_key is not None:
        check_tls(config.tls_cert, config.tls_key)
    load_kserve()  # before the models: a missing extra is said at once
    models = open_models([resolve_model(m) for m in args.models], args.device, runtime=_runtime(args.runtime))
    if warning:
        print(warning, file=sys.stderr)
    if args.token:
        print("note: a token given by --token is visible to this machine's users (ps); prefer --token-env",
              file=sys.stderr)

    def ready() -> None:
        for line in startup_lines(models, config):
            print(_shown(line), flush=True)

    signum = serve_forever(models, config, on_ready=ready, on_second_signal=_end_now)
    print("stopped" + (f" ({_signal_name(signum)})" if signum else ""), file=sys.stderr)
    return 128 + signum if signum else 0


def _signal_name(signum: int) -> str:
    return "Ctrl+C" if signum == signal.SIGINT else "SIGTERM" if signum == signal.SIGTERM else f"signal {signum}"


def _end_now(signum: int) -> NoReturn:
    """A second signal while the first one's graceful stop waits for the requests in flight: one line, and the
    process ends here (nothing unwinds: uvicorn would log a traceback for each request it cancelled)."""
    sys.stdout.flush()
    print(f"stopped at once (a second {_signal_name(signum)}): the requests in flight were cut off", file=sys.stderr,
          flush=True)
    os._exit(128 + signum)


def startup_lines(models: list[OnnxModel], config: ServeConfig) -> list[str]:
    """'serving nuclei on http://127.0.0.1:8000 and grpc://127.0.0.1:8001, CPU (no NVIDIA GPU), token required',
    and a line per model whose GPU request fell back to the CPU, with the reason."""
    names = ", ".join(m.name for m in models)
    grpc = config.grpc_url()
    where = config.rest_url() + (f" and {grpc}" if grpc else "")
    devices = sorted({m.device_label for m in models})
    device_text = devices[0] if len(devices) == 1 else "; ".join(f"{m.name} on {m.device_label}" for m in models)
    auth = "token required" if config.auth.required else "no token (open)"
    lines = [f"serving {names} on {where}, {device_text}, {auth}"]
    for model in models:
        if model.info.fallback_warns:
            lines.append(f"note: {model.name}: {model.info.requested} was asked for, it runs on "
                         f"{model.device_label}: {model.info.fallback_reason}")
    return lines


def _config(args: argparse.Namespace) -> ServeConfig:
    from app.serve.auth import Auth
    from app.serve.server import ServeConfig

    if (args.tls_cert is None) != (args.tls_key is None):
        raise SegLensError("--tls-cert and --tls-key go together (the certificate and its private key)")
    grpc_port = None if args.no_grpc else (args.grpc_port if args.grpc_port is not None else args.port + 1)
    if grpc_port == args.port:
        raise SegLensError(f"--grpc-port {grpc_port} is the REST --port too: give them different ports")
    if grpc_port is not None and grpc_port > 65535:
        raise SegLensError(f"--port {args.port}: the gRPC port would be {grpc_port}: give --grpc-port")
    return ServeConfig(host=args.host, port=args.port, grpc_port=grpc_port, auth=Auth(_token(args)),
                       tls_cert=args.tls_cert, tls_key=args.tls_key)


def _token(args: argparse.Namespace) -> str | None:
    if args.token is not None:
        if not args.token.strip():
            raise SegLensError("--token is empty")
        return str(args.token).strip()
    name = args.token_env or DEFAULT_TOKEN_ENV
    value = os.environ.get(name, "").strip()
    if not value and args.token_env:  # named on purpose: an unset variable is a mistake, not an open server
        raise SegLensError(f"--token-env {name}: the environment variable is not set (or empty)")
    return value or None


def _device(text: str) -> DeviceRequest:
    from app.inference.runtime.session import DeviceRequest

    try:
        return DeviceRequest.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _runtime(pairs: list[str]) -> RuntimeOptions:
    from app.inference.model.runtime_options import parse_runtime_arguments

    try:
        return parse_runtime_arguments(pairs)
    except ValueError as exc:
        raise SegLensError(str(exc)) from exc


def _port(text: str) -> int:
    if text.isdigit() and 1 <= int(text) <= 65535:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected a port 1-65535, got {text!r}")

