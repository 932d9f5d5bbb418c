"""seglens-cli watch: run a station (app.runs.station.run) until Ctrl+C, or until its source ends.

    seglens-cli watch STATION.yaml
    seglens-cli watch MODEL SOURCE --out DIR [--mqtt URL] [--opcua ENDPOINT] [--settle S] [--name NAME]
                      [--[no-]anonymize]

SOURCE: a folder (watched: each image put into it is judged once it is complete), a video file or a stream URL
(rtsp://…, http://…), or `camera:N`. The command line's station logs every verdict in DIR (verdicts.jsonl and
.csv) and keeps the pictures and NG/REVIEW copies there (app.runs.station.sinks.folder); `--mqtt` adds the MQTT sink,
`--opcua opc.tcp://127.0.0.1:4840/seglens/` an OPC UA server a PLC reads (app.runs.station.sinks.opcua; security none,
so a loopback endpoint: a station file gives the certificate, the key and a user for one the network reaches).

A station is judged by whether its verdicts reached the line, not by how many parts were NG, so the exit codes are:
  0    the source ended by itself (a video file played to its end) and every sink took every verdict
  1    a sink lost verdicts or is failing at the end, or a live source ended (the watched folder went away, a
       camera or stream stalled), or the output folder refused the journal (a full disk): the line was left
       without verdicts
  2    usage, a station file or a model error (nothing was judged)
  130  stopped by Ctrl+C (SIGINT), every sink having taken every verdict (143: SIGTERM)
The summary (counts per verdict, frames/s, latency p50/p95, dropped frames, the stalls and the longest, sink
problems) is printed in every case. On a terminal the live line says `STALLED — no part for 42 s (limit 30 s)`
while no frame has come for longer than `--stall` (the station's stall_after_s), and the MQTT and OPC UA sinks
carry the same alarm (`<prefix>/<station>/alarm`, retained; the `Stalled` variable).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from app.cli.options import EXIT_OK, EXIT_SOME_FAILED, runtime_options
from app.cli.options import shown as _shown
from app.errors import OutputError

if TYPE_CHECKING:
    from app.runs.station.file import StationFile
    from app.runs.station.run import Station
    from app.runs.station.stats import StationStats

EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143
_PROGRESS_EVERY_S = 0.1  # the progress line is redrawn at most this often


def add_watch_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `watch` on the subcommand parser."""
    from app.cli.options import add_model_options

    watch = commands.add_parser(
        "watch", help="station mode: judge every part as it comes (a watched folder, a video or stream, a camera), "
                      "OK / REVIEW / NG, to a log, the output folder, MQTT and OPC UA, until Ctrl+C")
    watch.add_argument("target", type=Path, metavar="STATION.yaml|MODEL",
                       help="a station file, or a model (.onnx or a bundled name) followed by SOURCE")
    watch.add_argument("source", nargs="?", metavar="SOURCE",
                       help="a folder to watch, a video file or stream URL, or camera:N (with MODEL)")
    watch.add_argument("--out", type=Path, metavar="DIR",
                       help="the output folder: journal, logs, pictures (with MODEL)")
    watch.add_argument("--mqtt", metavar="URL", help="also publish to this broker (mqtt://HOST:PORT; with MODEL)")
    watch.add_argument("--opcua", metavar="ENDPOINT",
                       help="also serve the last verdict, counters and a heartbeat over OPC UA at this loopback "
                            "endpoint (opc.tcp://127.0.0.1:4840/seglens/; with MODEL)")
    watch.add_argument("--settle", type=float, default=0.5, metavar="S",
                       help="a watched file written in place counts as complete after S s unchanged (default 0.5)")
    watch.add_argument("--recursive", action="store_true", help="watch the folder's sub-folders too")
    watch.add_argument("--stall", type=float, metavar="S",
                       help="no frame for S s is an alarm, and a camera or stream then ends (default 5 for those)")
    watch.add_argument("--name", default="station", help="the station's name (log field, MQTT topic part)")
    watch.add_argument("--anonymize", action=argparse.BooleanOptionalAction, default=None,
                       help="every file by its keyed pseudonym in the log, MQTT, OPC UA and the output folder's "
                            "names, a DICOM's copies de-identified (default: DICOM and NIfTI files only; "
                            "--no-anonymize: none)")
    add_model_options(watch)
    watch.add_argument("--no-progress", action="store_true", help="no progress line even on a terminal")
    watch.set_defaults(handler=cmd_watch)


def cmd_watch(args: argparse.Namespace) -> int:
    """Read or build the station, open it (the session warmed), run it with Ctrl+C as its stop, print the summary."""
    from app.cli.console import announce_session
    from app.runs.station.setup import open_station

    station_file = _station_file(args)
    progress = _ProgressLine(enabled=sys.stderr.isatty() and not args.no_progress,
                             stall_after_s=station_file.stall_after_s)
    station = open_station(station_file, runtime=runtime_options(args), progress=progress.show)
    announce_session(station.model.info, station.model.spec)
    signalled: list[int] = []
    previous = _on_signals(station, signalled)
    failed: str | None = None
    try:
        stats = station.run()
    except OutputError as exc:  # the output folder refused a write mid-run (the journal on a full disk)
        if station.stats().ended is None:
            raise  # at the start (the lock, the folder): nothing was judged, a usage error
        stats, failed = station.stats(), str(exc)
    finally:
        _restore(previous)
        progress.close()
    return _report(station, stats, station_file, signalled, failed=failed)


def _station_file(args: argparse.Namespace) -> StationFile:
    """The station of `watch STATION.yaml`, or the one the command line describes (`watch MODEL SOURCE …`)."""
    from app.runs.station.file import StationFileError, parse_station, read_station_file

    if args.source is None:
        if args.target.suffix.lower() not in (".yaml", ".yml"):
            raise StationFileError(f"{_shown(args.target)}: give a station file (.yaml), or MODEL SOURCE --out DIR")
        given = [flag for flag, value in (("--out", args.out), ("--mqtt", args.mqtt), ("--opcua", args.opcua),
                                          ("--config", args.config), ("--[no-]anonymize", args.anonymize))
                 if value is not None]
        if given:
            raise StationFileError(f"{', '.join(given)}: a station file says these itself (its out, sinks, sidecar)")
        return read_station_file(args.target)
    if args.out is None:
        raise StationFileError("watch MODEL SOURCE needs --out DIR (the journal, the logs and the pictures go there)")
    # the flags written as the station file they stand for, read by its one reader: the same records, checks and words
    sinks: dict[str, object] = {"log": {}, "folder": {}}
    if args.mqtt:
        sinks["mqtt"] = {"url": args.mqtt}
    if args.opcua:
        sinks["opcua"] = {"endpoint": args.opcua}
    values: dict[str, object] = {"name": args.name, "model": str(args.target), "device": str(args.device),
                                 "source": _source(args), "out": str(args.out.absolute()), "sinks": sinks}
    if args.config is not None:
        values["sidecar"] = str(args.config.absolute())
    if args.stall is not None:  # a camera triggered per part is quiet between parts for longer than 5 s
        values["stall_after_s"] = args.stall
    if args.anonymize is not None:
        values["anonymize"] = args.anonymize
    return parse_station(values, path=None, base=Path.cwd())


def _source(args: argparse.Namespace) -> dict[str, object]:
    """SOURCE as a station file's source: camera:N, a folder, else a video file or URL."""
    text: str = args.source
    if text.startswith("camera:"):
        index = text.removeprefix("camera:")
        return {"camera": int(index) if index.isdigit() else index}
    if Path(text).is_dir():
        return {"watch": str(Path(text).absolute()), "settle_s": args.settle, "recursive": args.recursive}
    return {"video": text if "://" in text else str(Path(text).absolute())}


def _on_signals(station: Station, signalled: list[int]) -> dict[int, Any]:
    """SIGINT and SIGTERM stop the station after the frame being judged (its sinks closed, the summary printed)."""

    def stop(number: int, _frame: FrameType | None) -> None:
        signalled.append(number)
        station.stop()

    previous: dict[int, Any] = {}
    for number in (signal.SIGINT, signal.SIGTERM):
        previous[number] = signal.signal(number, stop)
    return previous


def _restore(previous: dict[int, Any]) -> None:
    for number, handler in previous.items():
        signal.signal(number, handler)


def _report(station: Station, stats: StationStats, station_file: StationFile, signalled: list[int], *,
            failed: str | None = None) -> int:
    """Print the summary; the exit code (see the module's docstring)."""
    lost = stats.lost + sum(sink.lost for sink in station.sinks)
    how = _shown(failed) if failed else "stopped" if signalled else _shown(stats.ended or "stopped")
    print(f"watch {_shown(station.name)}: {how}; {stats.summary()}")
    for problem in stats.sink_problems:
        print(f"sink problem: {_shown(problem)}")
    if lost:
        print(f"sinks lost {lost} verdict{'s' if lost != 1 else ''}")
    print(f"verdicts and pictures in {_shown(station_file.out)}")
    if lost or stats.sink_problems or failed:
        return EXIT_SOME_FAILED
    if signalled:
        return EXIT_INTERRUPTED if signalled[0] == signal.SIGINT else EXIT_TERMINATED
    # a video file played to its end is a finished job; a live source or a watched folder that ends is a broken line
    source = station_file.source
    played_through = source.kind == "video" and "://" not in str(source.target) and "stall" not in (stats.ended or "")
    return EXIT_OK if played_through else EXIT_SOME_FAILED


class _ProgressLine:
    """One line on the terminal, redrawn in place: the live numbers, and a sink's or the source's alarm (a stalled
    source first: `STALLED — no part for 42 s (limit 30 s) | …`, redrawn while no part comes). Called from the
    station's thread after each frame and from its watcher while the source is stalled."""

    def __init__(self, *, enabled: bool, stall_after_s: float | None = None) -> None:
        self.enabled, self._stall_after_s = enabled, stall_after_s
        self._lock = threading.Lock()
        self._shown_at = 0.0
        self._width = 0

    def show(self, stats: StationStats) -> None:
        with self._lock:
            now = time.monotonic()
            if not self.enabled or now - self._shown_at < _PROGRESS_EVERY_S:
                return
            self._shown_at = now
            stalled = (f"STALLED — no part for {stats.since_frame_s:.0f} s{_limit(self._stall_after_s)} | "
                       if stats.stalled else "")
            alarm = f" | ALARM {stats.sink_problems[0]}" if stats.sink_problems else ""
            last = f" | last {stats.last.verdict}" if stats.last is not None else ""
            line = _shown(f"{stalled}{stats.summary()}{last}{alarm}")[:200]
            sys.stderr.write("\r" + line.ljust(self._width))
            sys.stderr.flush()
            self._width = len(line)

    def close(self) -> None:
        with self._lock:
            if self.enabled and self._width:
                sys.stderr.write("\r" + " " * self._width + "\r")
                sys.stderr.flush()
            self.enabled = False  # a last call from the station's watcher draws nothing after the summary


def _limit(stall_after_s: float | None) -> str:
    return "" if stall_after_s is None else f" (limit {stall_after_s:g} s)"
