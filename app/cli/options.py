"""What seglens-cli's commands share: exit codes, how a MODEL argument and the session's options are read, and
what a terminal may be sent. Below every command module (app.cli, run, cluster, report import it; it imports none
of them), so the cli package has no import circle."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from app.runs.folder.plan import DEFAULT_REPORT_NAME as DEFAULT_REPORT_NAME  # the folder run's own default

if TYPE_CHECKING:
    from app.inference.model.runtime_options import RuntimeOptions
    from app.inference.model.spec import ModelSpec
    from app.inference.runtime.session import DeviceRequest

EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE = 0, 1, 2


def shown(text: object) -> str:
    """What a terminal may be sent (app.errors.shown: control characters and stray bytes escaped)."""
    from app.errors import shown as escaped

    return escaped(text)


def resolved_model(text: Path) -> Path:
    """A MODEL argument as a file: an existing path, else a bundled model's name (app.inference.describe.bundled)."""
    from app.inference.describe.bundled import resolve_model

    return resolve_model(text)


def add_model_options(parser: argparse.ArgumentParser, *, remote: bool = False) -> None:
    """--config, --device and --runtime, as every command that opens a session takes them; `remote`: --device
    remote too (the server's options are app.cli.remote_options.add_remote_options')."""
    parser.add_argument("--config", type=Path, metavar="SIDECAR", help="sidecar YAML (default: <model>.yaml); with "
                        "--device remote also an http(s):// URL")
    if remote:
        parser.add_argument("--device", default="auto", type=device_or_remote,
                            help="auto | cpu | cuda | cuda:N | remote (with --server; default auto)")
    else:
        parser.add_argument("--device", default="auto", type=device, help="auto | cpu | cuda | cuda:N (default auto)")
    parser.add_argument("--runtime", action="append", default=[], metavar="KEY=VALUE",
                        help="ONNX Runtime option, repeatable: tensorrt=true, gpu_mem_limit_mb=4096, prefer_nhwc=true, "
                             "use_tf32=false, cudnn_conv_algo_search=EXHAUSTIVE, intra_op_threads=2, device_argmax=off")


def runtime_options(args: argparse.Namespace) -> RuntimeOptions:
    """The --runtime KEY=VALUE options (app.inference.model.runtime_options), a bad one a one-line error."""
    from app.errors import SegLensError
    from app.inference.model.runtime_options import parse_runtime_arguments

    try:
        return parse_runtime_arguments(args.runtime)
    except ValueError as exc:
        raise SegLensError(str(exc)) from exc


def tiled(spec: ModelSpec, tile: bool | None, *, tta: bool = False, batch: int = 1) -> ModelSpec:
    """`spec` with --tile / --no-tile applied, a model that cannot be tiled a one-line error. A 3D model: --tile
    is its sliding window, --no-tile the whole volume in one run, --tta mirroring and --batch patches per run
    (app.runs.folder.volume3d.with_volume_options); --tta on a 2D model a one-line error."""
    from app.errors import ModelError
    from app.inference.image.tiling import with_tiling

    if spec.is_3d:
        from app.runs.folder.volume3d import with_volume_options

        try:
            return with_volume_options(spec, tile=tile, tta=tta, batch=batch)
        except ValueError as exc:
            raise ModelError(str(exc)) from exc
    if tta:
        raise ModelError(f"--tta mirrors a 3D model's patches; {spec.path.name} is a 2D model")
    try:
        return with_tiling(spec, tile)
    except ValueError as exc:
        raise ModelError(f"--tile: {exc}") from exc


def device(text: str) -> DeviceRequest:
    """--device as a DeviceRequest (argparse says what is wrong with it)."""
    from app.inference.runtime.session import DeviceRequest

    try:
        return DeviceRequest.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def device_or_remote(text: str) -> DeviceRequest:
    """--device of the commands that may run on a server: also `remote` (app.cli.remote_options)."""
    from app.inference.runtime.session import DeviceRequest

    return DeviceRequest("remote") if text.strip().lower() == "remote" else device(text)


def number_parser(accepts: Callable[[float], bool], wanted: str) -> Callable[[str], float]:
    """An argparse `type` for a number that `accepts` takes (NaN never: every comparison with it fails), refused
    as "must be <wanted>, got '<text>'"."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not accepts(value):
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}")
        return value

    return parse


fraction = number_parser(lambda v: 0.0 < v < 1.0, "a number between 0 and 1 (exclusive)")  # --threshold, --opacity
