"""seglens-cli: the headless pipeline. A thin layer over app.inference; never imports Qt.

Exit codes: 0 every input succeeded, 1 some inputs failed (the rest were written), 2 usage or model error.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from app import __version__

EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE = 0, 1, 2


def _shown(text: object) -> str:
    """What a terminal may be sent (app.errors.shown: control characters and stray bytes escaped)."""
    from app.errors import shown

    return shown(text)
DEFAULT_REPORT_NAME = "seglens_report.csv"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s: %(message)s")
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    from app.errors import SegLensError

    try:
        return args.handler(args)
    except SegLensError as exc:
        print(f"error: {_shown(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug must still end in one line; -v shows the traceback
        logging.getLogger("app.cli").debug("unexpected error", exc_info=True)
        print(f"error: unexpected {type(exc).__name__}: {_shown(' '.join(str(exc).split())[:300])} "
              "(run with -v for details)", file=sys.stderr)
        return EXIT_USAGE


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="seglens-cli", description="Run ONNX image models on images, headless.")
    parser.add_argument("--version", action="version", version=f"seglens {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log details (ONNX Runtime messages too)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    info = commands.add_parser("info", help="show what SegLens understands of a model (or what made an output PNG)")
    info.add_argument("model", type=Path, help="the .onnx file, or a PNG SegLens wrote: its provenance")
    _add_model_options(info)
    info.add_argument("--json", action="store_true", help="machine-readable output")
    info.add_argument("--no-session", action="store_true", help="do not open a session (spec only)")
    info.set_defaults(handler=cmd_info)

    run = commands.add_parser("run", help="run a model on image files and folders")
    run.add_argument("model", type=Path, help="the .onnx file")
    run.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="image files or folders (recursive)")
    run.add_argument("--out", required=True, type=Path, metavar="DIR", help="folder for masks and overlays")
    _add_model_options(run)
    run.add_argument("--save", default="mask", type=_save_kinds, metavar="KINDS",
                     help="what to write per image, comma-separated: mask, overlay, heatmap, scores; both "
                          "(mask,overlay) or none (default: mask)")
    run.add_argument("--threshold", type=_fraction, metavar="T",
                     help="binary models: foreground where probability > T (overrides output.threshold; "
                          "anomaly models: anomalous where the map >= T); "
                          "multi-class models: pixels whose winning probability is below T become background")
    run.add_argument("--report", type=Path, metavar="FILE.csv",
                     help=f"CSV report, one row per input (default: DIR/{DEFAULT_REPORT_NAME})")
    run.add_argument("--max-megapixels", type=_positive, metavar="N",
                     help="refuse images larger than N megapixels (default 250) instead of running out of memory")
    run.add_argument("--resume", action="store_true",
                     help="skip inputs an earlier run into the same --out finished (report row ok, outputs present)")
    run.add_argument("--batch", type=_positive, default=1, metavar="N",
                     help="run N same-sized images at once (models with a dynamic batch axis; default 1)")
    tiling = run.add_mutually_exclusive_group()
    tiling.add_argument("--tile", dest="tile", action="store_const", const=True,
                        help="cover each image with overlapping tiles at its native scale (input.resize: tile)")
    tiling.add_argument("--no-tile", dest="tile", action="store_const", const=False,
                        help="do not tile, whatever the sidecar says (fixed models: stretch)")
    run.add_argument("--reference", type=Path, metavar="DIR",
                     help="ground-truth masks (value = class index) matched by relative path and stem: IoU/Dice "
                          "columns in the report, a summary and seglens_metrics.csv")
    run.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    run.set_defaults(handler=cmd_run)

    compare = commands.add_parser("compare", help="model A vs model B: per-image agreement and disagreement pictures")
    compare.add_argument("model_a", type=Path, metavar="MODEL_A", help="the reference model (.onnx)")
    compare.add_argument("model_b", type=Path, metavar="MODEL_B", help="the model measured against A (.onnx)")
    compare.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="image files or folders (recursive)")
    compare.add_argument("--out", required=True, type=Path, metavar="DIR", help="folder for pictures and reports")
    compare.add_argument("--device", default="auto", type=_device, help="auto | cpu | cuda | cuda:N (default auto)")
    compare.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    compare.set_defaults(handler=cmd_compare)

    bench = commands.add_parser("bench", help="raw model speed vs the full pipeline, warm-up excluded")
    bench.add_argument("model", type=Path, help="the .onnx file")
    source = bench.add_mutually_exclusive_group()
    source.add_argument("--images", type=Path, metavar="DIR", help="benchmark on these images")
    source.add_argument("--size", type=_hw, metavar="HxW", help="generated images of this size (default 1080x1920)")
    _add_model_options(bench)
    bench.add_argument("--runs", type=_positive, default=50, help="inferences per measurement (default 50)")
    bench.add_argument("--save", default="mask", type=_save_kinds, metavar="KINDS",
                       help="outputs the pipeline writes (to a scratch folder): mask, overlay, both, none")
    bench.add_argument("--json", action="store_true", help="machine-readable output")
    bench.set_defaults(handler=cmd_bench)

    doctor = commands.add_parser("doctor", help="check the GPU setup for real and say what to fix")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    doctor.set_defaults(handler=cmd_doctor)
    return parser


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, metavar="SIDECAR", help="sidecar YAML (default: <model>.yaml)")
    parser.add_argument("--device", default="auto", type=_device, help="auto | cpu | cuda | cuda:N (default auto)")
    parser.add_argument("--runtime", action="append", default=[], metavar="KEY=VALUE",
                        help="ONNX Runtime option, repeatable: tensorrt=true, gpu_mem_limit_mb=4096, prefer_nhwc=true, "
                             "use_tf32=false, cudnn_conv_algo_search=EXHAUSTIVE, intra_op_threads=2, device_argmax=off")


def _runtime(args: argparse.Namespace) -> dict:
    from app.errors import SegLensError
    from app.inference.runtime import parse_runtime_arguments

    try:
        return parse_runtime_arguments(args.runtime)
    except ValueError as exc:
        raise SegLensError(str(exc)) from exc


def _tiled(spec, tile: bool | None):
    from app.errors import ModelError
    from app.inference.tiling import with_tiling

    try:
        return with_tiling(spec, tile)
    except ValueError as exc:
        raise ModelError(f"--tile: {exc}") from exc


def _device(text: str):
    from app.inference.session import DeviceRequest

    try:
        return DeviceRequest.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


def _hw(text: str) -> tuple[int, int]:
    parts = text.lower().replace("×", "x").split("x")
    if len(parts) == 2 and all(p.strip().isdigit() and 0 < int(p) <= 16384 for p in parts):
        return int(parts[0]), int(parts[1])
    raise argparse.ArgumentTypeError(f"expected HxW, e.g. 1080x1920, got {text!r}")


def _save_kinds(text: str) -> tuple[str, ...]:
    from app.runs.outputs import SAVE_KINDS

    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    if kinds == ("none",):
        return ()
    if kinds == ("both",):
        return ("mask", "overlay")
    unknown = [k for k in kinds if k not in SAVE_KINDS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(f"unknown kind {unknown[0] if unknown else text!r} "
                                         f"(expected {', '.join(SAVE_KINDS)}, both or none)")
    return kinds


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 < value < 1.0:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"must be a number between 0 and 1 (exclusive), got {text!r}")
    return value


# --- info --------------------------------------------------------------------------------------------

def cmd_info(args: argparse.Namespace) -> int:
    from app.inference.describe import spec_dict, spec_text
    from app.inference.session import open_session
    from app.inference.spec import load_spec
    from app.runs.provenance import png_provenance

    if args.model.suffix.lower() == ".png":
        print(_shown(json.dumps(png_provenance(args.model), indent=2, ensure_ascii=False)))
        return EXIT_OK
    spec = load_spec(args.model, args.config)
    session_info = None
    if not args.no_session:
        model = open_session(spec, args.device, runtime=_runtime(args), warm_up=False)
        session_info = model.warm_up(measure_warm=True)
    if args.json:
        print(json.dumps(spec_dict(spec, session_info), indent=2))
    else:
        print(_shown(spec_text(spec, session_info)))
    return EXIT_OK


# --- bench, doctor ------------------------------------------------------------------------------------

def cmd_bench(args: argparse.Namespace) -> int:
    import tempfile

    from app.inference.session import open_session
    from app.inference.spec import load_spec
    from app.inference.telemetry import gpu_memory
    from app.io.discover import discover
    from app.runs.bench import bench, format_report, raw_limit, synthetic_images

    spec = load_spec(args.model, args.config)
    device_index = args.device.device_id if args.device.kind == "cuda" else 0
    vram_before = gpu_memory(device_index)
    model = open_session(spec, args.device, runtime=_runtime(args))
    with tempfile.TemporaryDirectory(prefix="seglens-bench-images-") as scratch:
        inputs = discover([args.images]) if args.images else synthetic_images(Path(scratch), args.size or (1080, 1920))
        if not inputs:
            print(f"error: no images found in {_shown(args.images)}", file=sys.stderr)
            return EXIT_USAGE
        report = bench(model, inputs, runs=args.runs, save=args.save)
        speedup = None
        if model.info.on_gpu:  # the same raw loop on the CPU, for the GPU ÷ CPU figure
            cpu = open_session(spec, "cpu", runtime=_runtime(args))
            speedup = report.raw.images_per_s / max(raw_limit(cpu, inputs, max(5, args.runs // 5)).images_per_s,
                                                    1e-9)
    vram_after = gpu_memory(device_index)
    vram = {"gpu_mem_used_before_mb": vram_before and round(vram_before.used_mb),
            "gpu_mem_used_after_mb": vram_after and round(vram_after.used_mb),
            "gpu_mem_this_process_mb": vram_after and vram_after.process_mb}
    if args.json:
        print(json.dumps({**report.as_dict(), "gpu_over_cpu": speedup, **vram}, indent=2))
    else:
        print(_shown(format_report(report, speedup)))
        if vram_after:
            print(f"  GPU memory used: {vram['gpu_mem_used_before_mb']} MB before the session, "
                  f"{vram['gpu_mem_used_after_mb']} MB after the benchmark")
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    from app.inference import doctor

    facts = doctor.gather()
    verdict = doctor.decide(facts)
    print(json.dumps(doctor.as_json(facts, verdict), indent=2) if args.json else _shown(doctor.report(facts, verdict)))
    return EXIT_OK


# --- run ---------------------------------------------------------------------------------------------

def cmd_run(args: argparse.Namespace) -> int:
    started = time.time()  # temporaries older than this run are a killed run's; newer ones are nobody's to take
    from app.inference.session import open_session
    from app.inference.spec import load_spec
    from app.inference.tuning import with_threshold
    from app.io.discover import discover
    from app.runs.batch import run_inputs
    from app.runs.lock import OutputLock
    from app.runs.metrics_report import ReferenceScorer, reference_problem
    from app.runs.outputs import ReportWriter, finished_earlier
    from app.runs.provenance import RunIdentity, record_run, resume_problem
    from app.runs.safety import output_folder_problem

    if args.max_megapixels:
        os.environ["SEGLENS_MAX_MEGAPIXELS"] = str(args.max_megapixels)  # read by the decoding threads
    spec, min_confidence = with_threshold(_tiled(load_spec(args.model, args.config), args.tile), args.threshold)
    refused = reference_problem(args.reference, spec, resume=args.resume)
    if refused:
        print(f"error: --reference {_shown(refused)}", file=sys.stderr)
        return EXIT_USAGE
    inputs = discover(args.paths, exclude=[args.out, *([args.reference] if args.reference else [])])
    if not inputs:
        print("error: no images found in: " + ", ".join(_shown(p) for p in args.paths), file=sys.stderr)
        return EXIT_USAGE
    refused = output_folder_problem(args.out, inputs, inside_ok=True)
    if refused:
        print(f"error: --out {_shown(refused)}", file=sys.stderr)
        return EXIT_USAGE
    scorer = ReferenceScorer(args.reference, spec, inputs) if args.reference else None
    model = open_session(spec, args.device, runtime=_runtime(args))
    _announce_session(model.info, spec)
    report_path = args.report or args.out / DEFAULT_REPORT_NAME
    with OutputLock(args.out):  # a second run into the same folder is refused while this one writes
        _remove_stale_temporaries(args.out, started)
        # the spec as loaded (a device-side argmax changes the session's), --threshold and where it runs
        identity = RunIdentity.of(spec, threshold=args.threshold, min_confidence=min_confidence, session=model.info)
        identity = replace(identity, reference=str(args.reference)) if args.reference else identity
        stale = resume_problem(report_path, identity) if args.resume else None
        if stale:
            print(f"error: --resume into {_shown(args.out)}: {_shown(stale)}; run without --resume to redo every "
                  "input, or choose a new --out", file=sys.stderr)
            return EXIT_USAGE
        done = finished_earlier(report_path, model.spec, inputs, out_dir=args.out, save=args.save) \
            if args.resume else {}
        progress = _Progress(len(inputs), enabled=sys.stderr.isatty() and not args.no_progress)
        with ReportWriter(report_path, model.spec, extra_columns=scorer.columns if scorer else ()) as report:
            record_run(report_path, identity)
            summary = run_inputs(model, inputs, out_dir=args.out, save=args.save, report=report,
                                 progress=progress.update, batch_size=args.batch, done=done,
                                 min_confidence=min_confidence, png_texts=identity.png_texts(model.spec),
                                 reference=scorer, tile_progress=progress.tiles)
        progress.close()
    _print_summary(summary, model.info, args.out, report_path)
    if scorer:
        _print_metrics(scorer.summary, args.out)
    print(_shown(identity.summary_line(report_path)))
    return EXIT_OK if summary.failed == 0 else EXIT_SOME_FAILED


# --- compare -----------------------------------------------------------------------------------------

def cmd_compare(args: argparse.Namespace) -> int:
    from app.inference.session import open_session
    from app.inference.spec import load_spec
    from app.io.discover import discover
    from app.runs.compare import compare_inputs, compare_problem
    from app.runs.lock import OutputLock
    from app.runs.safety import output_folder_problem

    spec_a, spec_b = load_spec(args.model_a), load_spec(args.model_b)
    refused = compare_problem(spec_a, spec_b)
    inputs = discover(args.paths, exclude=[args.out]) if not refused else []
    if not refused and not inputs:
        refused = "no images found in: " + ", ".join(_shown(p) for p in args.paths)
    refused = refused or output_folder_problem(args.out, inputs, inside_ok=True)
    if refused:
        print(f"error: {_shown(refused)}", file=sys.stderr)
        return EXIT_USAGE
    models = [open_session(spec, args.device) for spec in (spec_a, spec_b)]
    for model, spec in zip(models, (spec_a, spec_b), strict=True):
        _announce_session(model.info, spec)
    progress = _Progress(len(inputs), enabled=sys.stderr.isatty() and not args.no_progress)
    with OutputLock(args.out):
        summary, metrics, report = compare_inputs(*models, inputs, out_dir=args.out, progress=progress.update)
    progress.close()
    print(f"{summary.total} inputs: {summary.ok} ok, {summary.failed} failed; B = {_shown(spec_b.path.name)} "
          f"measured against A = {_shown(spec_a.path.name)}; pictures in {_shown(args.out)}, report {_shown(report)}")
    _print_metrics(metrics, args.out)
    return EXIT_OK if summary.failed == 0 else EXIT_SOME_FAILED


def _print_metrics(metrics, out: Path) -> None:
    for line in metrics.lines():
        print(_shown(line))
    written = metrics.write(out)
    print("metrics: " + ", ".join(_shown(p) for p in written))


def _print_summary(summary, info, out: Path, report_path: Path) -> None:
    resumed = f" ({summary.resumed} done by an earlier run)" if summary.resumed else ""
    print(f"{summary.total} inputs: {summary.ok} ok{resumed}, {summary.failed} failed; provider "
          f"{info.provider_label}; outputs in {_shown(out)}, report {_shown(report_path)}")
    if summary.verdict_line():
        print(summary.verdict_line())


def _remove_stale_temporaries(out: Path, started: float) -> None:
    from app.io.files import remove_stale_temporaries

    removed = remove_stale_temporaries(out, older_than=started)
    if removed:
        print(f"note: removed {removed} unfinished temporary file(s) left in {_shown(out)} by an interrupted run",
              file=sys.stderr)


def _announce_session(info, spec) -> None:
    if info.fallback_reason and info.requested.startswith("cuda"):
        print(f"warning: CUDA was requested but {_shown(spec.path.name)} runs on the CPU: {info.fallback_reason}",
              file=sys.stderr)
    elif info.fallback_reason:
        print(f"note: running on the CPU ({info.fallback_reason})", file=sys.stderr)


class _Progress:
    """A one-line progress bar on stderr (terminals only); error lines are printed above it."""

    def __init__(self, total: int, *, enabled: bool) -> None:
        self.total, self.enabled = total, enabled
        self.started = time.perf_counter()

    def update(self, outcome, summary) -> None:
        if outcome.error:
            self._clear()
            print(f"error: {_shown(outcome.error)}", file=sys.stderr)
        elif getattr(outcome, "scored", None) is not None and outcome.scored.notice:
            self._clear()
            print(f"note: {_shown(outcome.scored.notice)}", file=sys.stderr)
        if not self.enabled:
            return
        done = summary.ok + summary.failed
        rate = done / max(time.perf_counter() - self.started, 1e-9)
        filled = int(30 * done / max(self.total, 1))
        bar = "#" * filled + "-" * (30 - filled)
        sys.stderr.write(f"\r[{bar}] {done}/{self.total}  {rate:.1f} img/s  {summary.failed} failed")
        sys.stderr.flush()

    def tiles(self, done: int, total: int) -> None:
        """A tiled image's progress, on the same line (the bar comes back when the image is done)."""
        if self.enabled:
            sys.stderr.write(f"\r\x1b[K  tiles {done}/{total}")
            sys.stderr.flush()

    def _clear(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\x1b[K")

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


if __name__ == "__main__":
    sys.exit(main())
