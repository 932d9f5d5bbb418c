"""seglens-cli: the headless face. A thin layer over app.io, app.inference, app.runs and app.serve; never imports Qt.

This module: the parser, info, models, bench and doctor; `run` and `compare` (folder runs) live in app/cli/run.py.
Every MODEL argument is a path or a bundled model's name (`surface_defects`), resolved inside the command so an
unknown one is the usual one-line `error: …` and exit 2.

Exit codes: 0 every input succeeded, 1 some inputs failed (the rest were written), 2 usage or model error.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app import __version__
from app.cli.options import (  # the commands' shared options and helpers, one way: app.cli → app.cli.options
    DEFAULT_REPORT_NAME,
    EXIT_OK,
    EXIT_USAGE,
    device_or_remote,
    number_parser,
    resolved_model,
)
from app.cli.options import add_model_options as _add_model_options
from app.cli.options import fraction as _fraction
from app.cli.options import runtime_options as _runtime
from app.cli.options import shown as _shown
from app.cli.remote_options import add_remote_options, open_remote, remote_requested
from app.spelling import counted

if TYPE_CHECKING:  # the heavy modules are imported by the commands that use them (--version answers without)
    from app.inference.model.session import ModelSession
    from app.inference.runtime.telemetry import GpuMemory


def main(argv: list[str] | None = None) -> int:
    from app.logs import quiet_libraries
    from app.paths import cache_own_bytecode

    cache_own_bytecode()
    quiet_libraries()  # OpenCV's, highdicom's, pydicom's and Pillow's chatter off the terminal: one line per problem
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s: %(message)s")
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    from app.cli.console import Terminal

    with Terminal() as args.terminal:  # a run under --anonymize redacts every line from here (app.cli.console)
        return _handled(args)


def _handled(args: argparse.Namespace) -> int:
    """The command's exit code; a SegLensError or a bug ends in one line."""
    from app.errors import SegLensError, one_line

    try:
        code: int = args.handler(args)  # each command's cmd_* returns its exit code
        return code
    except SegLensError as exc:
        print(f"error: {_shown(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug must still end in one line; -v shows the traceback
        logging.getLogger("app.cli").debug("unexpected error", exc_info=True)
        print(f"error: unexpected {_shown(one_line(exc, most=300, typed=True))} "
              "(run with -v for details)", file=sys.stderr)
        return EXIT_USAGE


def build_parser() -> argparse.ArgumentParser:
    from app.cli.run import cmd_compare, cmd_run  # here: the folder runs' modules load with their command

    parser = argparse.ArgumentParser(prog="seglens-cli", description="Run ONNX image models on images, headless.")
    parser.add_argument("--version", action="version", version=f"seglens {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log details (ONNX Runtime messages too)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    info = commands.add_parser("info", help="show what SegLens understands of a model (or what made an output PNG)")
    info.add_argument("model", type=Path, help="the .onnx file, a bundled model's name (seglens-cli models), or a "
                                                "PNG SegLens wrote: its provenance")
    _add_model_options(info, remote=True)
    add_remote_options(info)
    info.add_argument("--json", action="store_true", help="machine-readable output")
    info.add_argument("--no-session", action="store_true", help="do not open a session (spec only)")
    info.set_defaults(handler=cmd_info)

    run = commands.add_parser("run", help="run a model on image files and folders")
    run.add_argument("model", type=Path, help="the .onnx file, or a bundled model's name (seglens-cli models)")
    run.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                     help="image files or folders (recursive); none with --from")
    run.add_argument("--out", required=True, type=Path, metavar="DIR", help="folder for masks and overlays")
    _add_model_options(run, remote=True)
    add_remote_options(run)
    run.add_argument("--save", default="mask", type=_run_save_kinds, metavar="KINDS",
                     help="what to write per image, comma-separated: mask, overlay, heatmap, scores; both "
                          "(mask,overlay), or none (the report alone); an instance model's run also coco "
                          "(seglens_coco.json) and yolo (yolo/labels, yolo/data.yaml). default: mask")
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
                        help="cover each image with overlapping tiles at its native scale (input.resize: tile); "
                             "a 3D model: its sliding window over the volume (the default)")
    tiling.add_argument("--no-tile", dest="tile", action="store_const", const=False,
                        help="do not tile, whatever the sidecar says (fixed models: stretch); a 3D model: the "
                             "whole volume in one run (models dynamic along D×H×W only)")
    run.add_argument("--tta", action="store_true",
                     help="3D models: mirroring test-time augmentation over the sidecar's input.tta axes, else all "
                          "three (up to 8 passes per patch, averaged)")
    run.add_argument("--reference", type=Path, metavar="REF",
                     help="ground truth. A segmentation model: a folder of masks (value = class index) matched by "
                          "relative path and stem: IoU/Dice columns in the report, a summary and seglens_metrics.csv. "
                          "An instance model: a COCO instances JSON (images by file_name) or a YOLO dataset folder "
                          "(labels/, data.yaml): precision/recall at IoU 0.5 per image, mAP@0.5:0.95 in the "
                          "summary, the run record and seglens_metrics.csv")
    volumes = run.add_argument_group("volumes (DICOM series, multi-frame DICOM, NIfTI)")
    volumes.add_argument("--export", type=_export_kinds, metavar="KINDS",
                         help="what to write per volume, comma-separated: dicom-seg (DICOM SEG referencing the "
                              "series), nifti (uint8 label volume, the source's affine), sc (Secondary Capture series, "
                              "overlay burned in), rtstruct (RT Structure Set: a contoured ROI per class, for "
                              "planning systems), source (the source series de-identified, beside them: with "
                              "--anonymize only). default: nifti where the volume has a geometry; none: no "
                              "volume export")
    volumes.add_argument("--per-slice", action="store_true",
                         help="also a report row and the --save PNGs for every slice (DIR/<series>/slice_0001_…)")
    volumes.add_argument("--opacity", type=_fraction, default=0.5, metavar="A",
                         help="the overlay's opacity in Secondary Capture images (default 0.5)")
    volumes.add_argument("--anonymize", action="store_true",
                         help="de-identify every output (DICOM PS3.15 Basic Profile in SEG, SC, RTSTRUCT and the "
                              "source copy; keyed pseudonym for the patient; pseudonymous output folders and report "
                              "paths; a final check of each volume's files): docs/SECURITY.md")
    from app.paths import extra_command

    cluster = run.add_argument_group(f"Ray cluster ({extra_command('ray') or 'not in this build'})")
    cluster.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                         help="run on Ray: local (a Ray instance on this machine, the default), auto (the cluster "
                              "this machine belongs to), ray://HOST:10001 or HOST:PORT; --out must be a folder every "
                              "node can write")
    cluster.add_argument("--ray-actors", type=_positive, metavar="N",
                         help="actors, each with one warmed session (default: one per GPU, else CPUs / threads)")
    cluster.add_argument("--ray-gpus-per-actor", type=_gpu_share, metavar="G",
                         help="GPUs per actor, fractional allowed (0.5: two actors share a GPU; default 1)")
    from app.cli.pacs import add_run_pacs_options

    add_run_pacs_options(run)
    run.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    run.set_defaults(handler=cmd_run)

    compare = commands.add_parser("compare", help="model A vs model B: per-image agreement and disagreement pictures")
    compare.add_argument("model_a", type=Path, metavar="MODEL_A", help="the reference model (.onnx or a bundled name)")
    compare.add_argument("model_b", type=Path, metavar="MODEL_B",
                         help="the model measured against A (.onnx or a bundled name)")
    compare.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="image files or folders (recursive)")
    compare.add_argument("--out", required=True, type=Path, metavar="DIR", help="folder for pictures and reports")
    compare.add_argument("--device", default="auto", type=device_or_remote, help="auto | cpu | cuda | cuda:N | remote")
    add_remote_options(compare, model_name=False)  # both models on one server, by MODEL_A's and MODEL_B's names
    compare.add_argument("--anonymize", action="store_true",
                         help="rows, pictures and the summary name each input by its pseudonym (as run --anonymize "
                              "names them), error cells without its paths: no patient, folder or file name")
    compare.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    compare.set_defaults(handler=cmd_compare)

    from app.cli.report import add_report_command

    add_report_command(commands)

    from app.cli.pacs import add_pacs_command

    add_pacs_command(commands)

    from app.cli.prompt import add_prompt_command

    add_prompt_command(commands)

    from app.cli.calibrate import add_calibrate_command
    from app.cli.serve import add_serve_command
    from app.cli.watch import add_watch_command

    add_calibrate_command(commands)
    add_watch_command(commands)
    add_serve_command(commands)

    from app.cli.imports import add_import_command

    add_import_command(commands)

    models = commands.add_parser("models", help="list the bundled models (usable by name wherever MODEL is asked)")
    models.add_argument("--json", action="store_true", help="machine-readable output")
    from app.cli.models import cmd_models

    models.set_defaults(handler=cmd_models)

    bench = commands.add_parser("bench", help="latency (ms per image) and throughput (images/s) of the model alone "
                                              "and of the full pipeline, warm-up excluded")
    bench.add_argument("model", type=Path, help="the .onnx file, or a bundled model's name (seglens-cli models)")
    source = bench.add_mutually_exclusive_group()
    source.add_argument("--images", type=Path, metavar="DIR",
                        help="benchmark on these images (a 3D model: the pipeline on the first volume found there)")
    source.add_argument("--size", type=_hw, metavar="HxW", help="generated images of this size (default 1080x1920)")
    _add_model_options(bench, remote=True)
    add_remote_options(bench)
    bench.add_argument("--runs", type=_positive, default=50, help="inferences per measurement (default 50)")
    bench.add_argument("--save", default="mask", type=_save_kinds, metavar="KINDS",
                       help="outputs the pipeline writes (to a scratch folder): mask, overlay, both, none")
    bench.add_argument("--json", action="store_true", help="machine-readable output")
    bench.set_defaults(handler=cmd_bench)

    doctor = commands.add_parser("doctor", help="check the GPU setup for real and say what to fix")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    doctor.add_argument("--ray", metavar="ADDRESS", help="check every node of this Ray cluster (auto, ray://…)")
    doctor.set_defaults(handler=cmd_doctor)
    return parser


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


def _save_kinds(text: str, *, labels: bool = False) -> tuple[str, ...]:
    from app.runs.outputs.images import LABEL_KINDS, SAVE_KINDS

    known = (*SAVE_KINDS, *LABEL_KINDS) if labels else SAVE_KINDS
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    if kinds == ("none",):
        return ()
    if kinds == ("both",):
        return ("mask", "overlay")
    unknown = [k for k in kinds if k not in known]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(f"unknown kind {unknown[0] if unknown else text!r} "
                                         f"(expected {', '.join(known)}, both or none)")
    return kinds


def _run_save_kinds(text: str) -> tuple[str, ...]:
    """`run --save`: the per-image kinds and the run's label exports (coco, yolo)."""
    return _save_kinds(text, labels=True)


def _export_kinds(text: str) -> tuple[str, ...]:
    from app.runs.exports.formats import EXPORTS

    kinds = tuple(k.strip().lower() for k in text.split(",") if k.strip())
    if kinds == ("none",):
        return ()
    unknown = [k for k in kinds if k not in EXPORTS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(f"unknown export {unknown[0] if unknown else text!r} "
                                         f"(expected {', '.join(EXPORTS)} or none)")
    return tuple(dict.fromkeys(kinds))


_gpu_share = number_parser(lambda v: 0.0 < v <= 64.0, "a number of GPUs above 0 (e.g. 0.5 or 1)")


# --- info --------------------------------------------------------------------------------------------

def cmd_info(args: argparse.Namespace) -> int:
    from app.cli.remote_options import remote_facts, where_line
    from app.inference.describe.info import spec_dict, spec_text
    from app.inference.model.builder import load_spec
    from app.runs.outputs.provenance import png_provenance

    if args.model.suffix.lower() == ".png":
        print(_shown(json.dumps(png_provenance(args.model), indent=2, ensure_ascii=False)))
        return EXIT_OK
    from app.inference.prompt.spec import prompt_sidecar_of

    pair = prompt_sidecar_of(args.model)  # a prompt model's pair, by its sidecar or bundled name (app/cli/prompt.py)
    if pair is not None:
        from app.cli.prompt import cmd_prompt_info

        args.model = pair
        return cmd_prompt_info(args)
    if args.no_session and not remote_requested(args):  # a local file's spec needs no session (a server's does)
        spec = load_spec(resolved_model(args.model), args.config)
        print(json.dumps(spec_dict(spec, None), indent=2) if args.json else _shown(spec_text(spec, None)))
        return EXIT_OK
    model = _opened(args, warm_up=False)
    try:
        session_info = None if args.no_session else model.warm_up(measure_warm=True)
        if args.json:
            print(json.dumps({**spec_dict(model.spec, session_info), **remote_facts(model)}, indent=2))
        else:
            print(_shown(spec_text(model.spec, session_info)))
            if session_info is None and (where := where_line(model)):  # no session lines to say where it runs
                print(_shown(f"  {where}"))
    finally:
        model.close()
    return EXIT_OK


def _opened(args: argparse.Namespace, *, warm_up: bool = True) -> ModelSession:
    """MODEL's session as the options ask, through the one opener (app.inference.remote.opener): on --server's
    server with --device remote (its notes said), else the file's spec (with --config) here on --device."""
    from app.inference.model.builder import load_spec
    from app.inference.remote.opener import open_model_session

    if remote_requested(args):
        return open_remote(args, args.model, sidecar=args.config, warm_up=warm_up)
    spec = load_spec(resolved_model(args.model), args.config)
    return open_model_session(spec, device=args.device, runtime=_runtime(args), warm_up=warm_up)


# --- bench, doctor ------------------------------------------------------------------------------------

def cmd_bench(args: argparse.Namespace) -> int:
    """The raw session loop and the full pipeline on MODEL's session, wherever it runs: here (with the GPU ÷ CPU
    figure and this GPU's memory) or on a server (with the latency split into network+queue and server compute)."""
    from app.errors import SegLensError
    from app.inference.runtime.telemetry import gpu_memory

    device_index = args.device.device_id if args.device.kind == "cuda" else 0
    vram_before = gpu_memory(device_index)
    model = _opened(args)
    try:
        remote = model.info.remote
        if model.spec.is_3d and remote is not None:
            raise SegLensError(f"{remote.where}: bench over the wire times 2D models (run a 3D model's volume with "
                               "seglens-cli run --device remote)")
        if model.spec.is_3d:
            return _bench_volume_model(args, model)
        return _bench_images(args, model, device_index, vram_before)
    finally:
        model.close()


def _bench_images(args: argparse.Namespace, model: ModelSession, device_index: int, vram_before: GpuMemory | None
                  ) -> int:
    import tempfile

    from app.cli.remote_options import remote_facts, timing_line
    from app.inference.remote.opener import open_model_session
    from app.inference.runtime.telemetry import gpu_memory
    from app.io.discover import discover
    from app.runs.bench.pipeline import bench, format_report, image_inputs, raw_limit, synthetic_images

    spec = model.spec
    with tempfile.TemporaryDirectory(prefix="seglens-bench-images-") as scratch:
        inputs = discover([args.images]) if args.images else synthetic_images(Path(scratch), args.size or (1080, 1920))
        inputs, left_out = image_inputs(inputs)
        if left_out:
            print(f"note: {counted(left_out, 'NIfTI or multi-frame volume')} left out: bench times one picture at "
                  "a time (run --per-slice times a volume's slices)", file=sys.stderr)
        if not inputs:
            print(f"error: no images found in {_shown(args.images)}", file=sys.stderr)
            return EXIT_USAGE
        report = bench(model, inputs, runs=args.runs, save=args.save)
        speedup = None
        if model.info.on_gpu:  # the same raw loop on the CPU, for the GPU ÷ CPU figure
            cpu = open_model_session(spec, device="cpu", runtime=_runtime(args))
            speedup = report.raw.images_per_s / max(raw_limit(cpu, inputs, max(5, args.runs // 5)).images_per_s,
                                                    1e-9)
    here = model.info.remote is None  # this machine's GPU memory is the benchmark's only when the model runs here
    vram_after = gpu_memory(device_index) if here else None
    vram = {"gpu_mem_used_before_mb": vram_before and round(vram_before.used_mb),
            "gpu_mem_used_after_mb": vram_after and round(vram_after.used_mb),
            "gpu_mem_this_process_mb": vram_after and vram_after.process_mb} if here else {}
    if args.json:
        print(json.dumps({**report.as_dict(), "gpu_over_cpu": speedup, **vram, **remote_facts(model, latency=True)},
                         indent=2))
    else:
        print(_shown(format_report(report, speedup)))
        if vram_after:
            print(f"  GPU memory used: {vram['gpu_mem_used_before_mb']} MB before the session, "
                  f"{vram['gpu_mem_used_after_mb']} MB after the benchmark")
        if line := timing_line(model):
            print(_shown(f"  {line}"))
    return EXIT_OK


def _bench_volume_model(args: argparse.Namespace, model: ModelSession) -> int:
    """bench on a 3D model: the raw session.run time per patch, and a synthetic volume through the 3D pipeline."""
    from app.inference.remote.opener import open_model_session
    from app.runs.bench.volume3d import bench3d, format_report3d, raw_patches

    given = None
    if args.images:  # the pipeline on a real volume: the first one found (its raw patches stay synthetic)
        from app.io.discover import discover

        given = next((item.volume for item in discover([args.images]) if item.volume is not None), None)
        if given is None:
            print(f"error: no volume (a DICOM series or NIfTI) in {_shown(args.images)}: a 3D model is benched on "
                  "a volume", file=sys.stderr)
            return EXIT_USAGE
    report = bench3d(model, runs=args.runs, given=given)
    speedup = None
    if model.info.on_gpu:  # the same raw loop on the CPU, for the GPU ÷ CPU figure
        cpu = open_model_session(model.spec, device="cpu", runtime=_runtime(args))
        speedup = report.raw.images_per_s / max(raw_patches(cpu, max(5, args.runs // 5)).images_per_s, 1e-9)
    if args.json:
        print(json.dumps({**report.as_dict(), "gpu_over_cpu": speedup}, indent=2))
    else:
        print(_shown(format_report3d(report, speedup)))
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    if args.ray:
        from app.cli.cluster import doctor_on_cluster

        return doctor_on_cluster(args)
    from app.inference.runtime import doctor

    facts = doctor.gather()
    verdict = doctor.decide(facts)
    print(json.dumps(doctor.as_json(facts, verdict), indent=2) if args.json else _shown(doctor.report(facts, verdict)))
    return EXIT_OK
