"""Station mode (issue 29): latency to MQTT, frames/s against `bench`'s raw rate, and RSS over a soak.

    uv run python benchmarks/station_bench.py [--part latency,throughput,soak] [--files 100] [--frames 150]
        [--soak-s 120] [--soak-rate 4] [--model models/surface_anomaly.onnx]

Every figure is measured, none asserted (this is not a test). The model is the bundled anomaly demo
(surface_anomaly.onnx, 288×512) on generated 1920×1080 surface frames (benchmarks/bench_frames.py's generator, PNG
zlib 1; its bundled samples are 640×360), CPU provider. The broker is Debian's mosquitto on loopback, started as
the tests start it (tests/station_fixtures.py).

* latency: a station (watch folder → model → log + MQTT sinks) and a paho subscriber on its verdict topic. Files
  arrive one every `--gap` s, in turn renamed inside the folder from a temporary name (`part.png.tmp` → `part.png`,
  complete at the rename, taken at once), moved in from a folder outside (complete at the rename; the kernel reports
  a new file, so the source waits `--settle` s unchanged) and written in place in four pieces (complete at the last
  write; settles too). Latency = the
  subscriber's receipt − the moment the file became complete (the same clock), p50/p95 per arrival kind, divided
  by the model's own inference time (session.run on the same frames' tensors, `bench`'s raw limit) measured in
  the same run.
* throughput: the station on a generated video file (VideoSource, realtime=False: as fast as it is read) and on a
  folder of the same frames (already there at the start), log sink only, vs `bench`'s raw and pipeline rates on the
  same frames in the same run (app.runs.bench.pipeline, as `seglens-cli bench --runs N` without saving).
* soak: a station over a watch folder fed `--soak-rate` renamed-in files/s (the oldest inputs deleted, as a line's
  retention would) with the log (rotated at 1 MiB), MQTT and folder sinks (masks, keep 200 files), for `--soak-s`
  seconds; RSS (psutil, else /proc/self/status VmRSS) every 10 s: start, max, end and the least-squares slope in MB
  per hour after the first minute.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import paho.mqtt.client as mqtt  # noqa: E402

from app.inference.model.builder import load_spec  # noqa: E402
from app.inference.model.session import ModelSession  # noqa: E402
from app.inference.runtime.session import open_session  # noqa: E402
from app.io.discover import InputFile  # noqa: E402
from app.io.sources.video import VideoSource  # noqa: E402
from app.io.sources.watch import WatchSource  # noqa: E402
from app.runs.bench.pipeline import bench, raw_limit  # noqa: E402
from app.runs.station.run import OpenSource, Station  # noqa: E402
from app.runs.station.sinks import Sink  # noqa: E402
from app.runs.station.sinks.folder import FolderSink  # noqa: E402
from app.runs.station.sinks.log import LogSink  # noqa: E402
from app.runs.station.sinks.mqtt import sink_from_url  # noqa: E402
from app.runs.station.stats import StationStats  # noqa: E402
from benchmarks.bench_frames import write_frames  # noqa: E402
from tests.station_fixtures import Mosquitto, Subscriber  # noqa: E402

NAME = "bench"
RENAMED, MOVED, IN_PLACE = "renamed in the folder (.tmp → .png)", "moved in from outside", "written in place"
TOPIC = f"seglens/{NAME}/verdict"


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (as app.runs.bench.pipeline's p95)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def rss_mb() -> float:
    """Resident memory of this process in MB: psutil when installed, else /proc/self/status VmRSS."""
    try:
        import psutil

        return float(psutil.Process().memory_info().rss) / 2**20
    except ImportError:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    return float("nan")


class Receiver(Subscriber):
    """The tests' subscriber, also keeping when each frame id's verdict first arrived (time.time()); a QoS 1
    repeat does not move it."""

    def __init__(self, port: int) -> None:
        self.received: dict[str, float] = {}
        self.payloads: dict[str, dict[str, Any]] = {}
        super().__init__(port, TOPIC)

    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        now = time.time()
        body = json.loads(message.payload)
        self.received.setdefault(body["frame_id"], now)
        self.payloads.setdefault(body["frame_id"], body)
        super()._on_message(client, userdata, message)

    def wait_until(self, count: int, timeout: float) -> None:
        """Until `count` distinct frames' verdicts have arrived, or `timeout` passed."""
        deadline = time.monotonic() + timeout
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.05)


def open_model(path: Path) -> ModelSession:
    model = open_session(load_spec(path), "cpu")
    return model


def inference_ms(model: ModelSession, frames: list[Path], runs: int = 40) -> float:
    """The model's own time per image (session.run on prepared tensors, `bench`'s raw limit), median ms."""
    return raw_limit(model, [InputFile(p, Path(p.name)) for p in frames], runs).p50_ms


class Running:
    """A station run in a thread, with the time of each verdict; `stop_after` verdicts end it (a folder has no end)."""

    def __init__(self, model: ModelSession, out: Path, open_source: OpenSource, sinks: Callable[[], list[Sink]],
                 stop_after: int | None = None, **options: Any) -> None:
        self.times: list[float] = []
        self.stop_after = stop_after
        self.station = Station(name=NAME, model=model, open_source=open_source, out=out, open_sinks=sinks,
                               progress=self._progress, **options)
        self.stats: StationStats | None = None
        self.thread = threading.Thread(target=self._run, name="bench-station", daemon=True)
        self.thread.start()

    def _progress(self, _stats: StationStats) -> None:
        self.times.append(time.perf_counter())
        if self.stop_after is not None and len(self.times) >= self.stop_after:
            self.station.stop()

    def _run(self) -> None:
        self.stats = self.station.run()

    def fps(self) -> float:
        """Verdicts per second from the first verdict to the last (the warm-up and the source's start excluded)."""
        if len(self.times) < 2:
            return 0.0
        return (len(self.times) - 1) / (self.times[-1] - self.times[0])

    def join(self, timeout: float | None = None) -> None:
        self.thread.join(timeout)


def watch(folder: Path, out: Path, settle_s: float) -> OpenSource:
    return lambda done: WatchSource(folder, settle_s=settle_s, exclude=[out], already_done=done)


# --- 1. latency -----------------------------------------------------------------------------------------------

def part_latency(model: ModelSession, frames: list[Path], work: Path, *, files: int, gap_s: float,
                 settle_s: float) -> None:
    print(f"\n## latency: file complete → verdict received by an MQTT subscriber (load {load()})")
    broker = Mosquitto.launch(work / "broker")
    receiver = Receiver(broker.port)
    incoming, staging, out = work / "lat-in", work / "lat-stage", work / "lat-out"
    for folder in (incoming, staging, out):
        folder.mkdir()
    url = f"mqtt://127.0.0.1:{broker.port}"
    running = Running(model, out, watch(incoming, out, settle_s),
                      lambda: [LogSink(out), sink_from_url(out, url)])
    time.sleep(1.0)  # the station's source is watching
    complete: dict[str, tuple[str, float]] = {}
    blobs = [p.read_bytes() for p in frames]
    try:
        for k in range(3 * files):
            blob, name = blobs[k % len(blobs)], f"part_{k:04d}.png"
            if k % 3 == 0:  # a camera's writer: part.png.tmp in the folder, renamed: complete at the rename
                (incoming / f"{name}.tmp").write_bytes(blob)
                os.rename(incoming / f"{name}.tmp", incoming / name)
                complete[name] = (RENAMED, time.time())
            elif k % 3 == 1:  # written outside the watched tree, moved in: the kernel says "created"; it settles
                (staging / name).write_bytes(blob)
                os.rename(staging / name, incoming / name)
                complete[name] = (MOVED, time.time())
            else:  # written in place in four pieces, 20 ms apart: complete at the last write; it settles
                with open(incoming / name, "wb") as handle:
                    for piece in range(4):
                        handle.write(blob[piece * len(blob) // 4:(piece + 1) * len(blob) // 4])
                        handle.flush()
                        if piece < 3:
                            time.sleep(0.02)
                complete[name] = (IN_PLACE, time.time())
            time.sleep(gap_s)
        receiver.wait_until(len(complete), timeout=60)
    finally:
        running.station.stop()
        running.join(30)
        receiver.close()
        broker.stop()
    infer = inference_ms(model, frames)
    print(f"model inference (session.run, median of 40 on the same frames): {infer:.1f} ms; load {load()}")
    print(f"received {len(receiver.received)} of {len(complete)} verdicts")
    print("| arrival | files | p50 ms | p95 ms | p50 ÷ inference | p95 ÷ inference | station's own p50 (complete → "
          "verdict) |")
    print("|---|---|---|---|---|---|---|")
    for kind in (RENAMED, MOVED, IN_PLACE):
        lat = [(receiver.received[n] - t) * 1000 for n, (k, t) in complete.items() if k == kind
               and n in receiver.received]
        own = [float(receiver.payloads[n]["latency_ms"]) for n, (k, _t) in complete.items() if k == kind
               and n in receiver.payloads]
        if not lat:
            continue
        p50, p95 = statistics.median(lat), percentile(lat, 0.95)
        print(f"| {kind} | {len(lat)} | {p50:.1f} | {p95:.1f} | {p50 / infer:.1f}× | {p95 / infer:.1f}× | "
              f"{statistics.median(own):.1f} |")
    print(f"(moved in from outside and written in place wait the settle time, {settle_s * 1000:.0f} ms, by "
          f"design; one file every {gap_s} s)")


# --- 2. throughput ------------------------------------------------------------------------------------------------

def write_video(path: Path, frames: list[Path], count: int) -> Path:
    images = [cv2.imread(str(p)) for p in frames]
    height, width = images[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), 25.0, (width, height))
    for k in range(count):
        writer.write(images[k % len(images)])
    writer.release()
    return path


def part_throughput(model: ModelSession, frames: list[Path], work: Path, *, count: int,
                    niceness: Sequence[int] = ()) -> None:
    print(f"\n## frames/s: station vs bench (load {load()})")
    inputs = [InputFile(p, Path(p.name)) for p in frames]
    before = bench(model, inputs, runs=count, save=())
    video = write_video(work / "parts.mp4", frames, count)
    runs: list[tuple[str, Running]] = []
    for overlap in (False, True):
        out = work / f"video-out-{overlap}"
        out.mkdir()
        on_video = Running(model, out, lambda _done: VideoSource(video, realtime=False), lambda out=out: [LogSink(out)],
                           overlap=overlap)
        on_video.join()
        runs.append((f"station, video file (realtime=False), {_mode(overlap)}", on_video))
    spec = model.spec
    kinds: list[tuple[str, Callable[[Path], list[Sink]], dict[str, Any]]] = []
    for overlap in (False, True):
        kinds.append((f"folder of files, log sink, {_mode(overlap)}", lambda out: [LogSink(out)],
                      {"overlap": overlap}))
    for overlap in (False, True):
        kinds.append((f"folder of files, log + folder sink (mask + overlay PNGs), {_mode(overlap)}",
                      lambda out: [LogSink(out), FolderSink(out, spec)], {"overlap": overlap}))
    for nice in niceness:  # the helpers' niceness (the station's own, 0, by default)
        kinds.append((f"folder of files, log sink, overlapped, helpers at niceness {nice}",
                      lambda out: [LogSink(out)], {"overlap": True, "helper_niceness": nice}))
        kinds.append((f"folder of files, log + folder sink, overlapped, helpers at niceness {nice}",
                      lambda out: [LogSink(out), FolderSink(out, spec)], {"overlap": True, "helper_niceness": nice}))
    for k, (label, sinks, options) in enumerate(kinds):
        folder, out = work / f"tp-in-{k}", work / f"tp-out-{k}"
        folder.mkdir()
        out.mkdir()
        for n in range(count):
            shutil.copyfile(frames[n % len(frames)], folder / f"part_{n:04d}.png")
        run = Running(model, out, watch(folder, out, 0.5), lambda out=out, sinks=sinks: sinks(out),
                      stop_after=count, **options)
        run.join()
        runs.append((f"station, {label}", run))
    after = bench(model, inputs, runs=count, save=())
    raw = statistics.median([before.raw.images_per_s, after.raw.images_per_s])
    piped = statistics.median([before.pipeline.images_per_s, after.pipeline.images_per_s])
    print(f"{count} frames each; bench before/after: raw {before.raw.images_per_s:.2f}/{after.raw.images_per_s:.2f},"
          f" pipeline {before.pipeline.images_per_s:.2f}/{after.pipeline.images_per_s:.2f} images/s; load {load()}")
    print("| | frames/s | ÷ bench raw | ÷ bench pipeline | judged | dropped |")
    print("|---|---|---|---|---|---|")
    print(f"| bench raw (session.run) | {raw:.2f} | 1.00 | | | |")
    print(f"| bench pipeline (no save) | {piped:.2f} | {piped / raw:.2f} | 1.00 | | |")
    for label, run in runs:
        fps = run.fps()
        assert run.stats is not None
        print(f"| {label} | {fps:.2f} | {fps / raw:.2f} | {fps / piped:.2f} | {run.stats.frames} | "
              f"{run.stats.dropped} |")


def _mode(overlap: bool) -> str:
    return "overlapped" if overlap else "sequential (overlap=False)"


# --- 3. soak ----------------------------------------------------------------------------------------------------

def part_soak(model: ModelSession, frames: list[Path], work: Path, *, seconds: float, rate: float) -> None:
    print(f"\n## soak: {seconds:.0f} s over a watch folder fed {rate}/s (load {load()})", flush=True)
    broker = Mosquitto.launch(work / "soak-broker")
    incoming, staging, out = work / "soak-in", work / "soak-stage", work / "soak-out"
    for folder in (incoming, staging, out):
        folder.mkdir()
    url = f"mqtt://127.0.0.1:{broker.port}"
    spec = model.spec

    def sinks() -> list[Sink]:
        return [LogSink(out, max_bytes=1 << 20), sink_from_url(out, url),
                FolderSink(out, spec, save=("mask",), keep_files=200)]

    running = Running(model, out, watch(incoming, out, 0.5), sinks)
    stop = threading.Event()
    fed = [0]

    def feed() -> None:
        blobs = [p.read_bytes() for p in frames]
        recent: deque[Path] = deque()
        started = time.monotonic()
        while not stop.is_set():
            name = f"part_{fed[0]:06d}.png"
            (staging / name).write_bytes(blobs[fed[0] % len(blobs)])
            os.rename(staging / name, incoming / name)
            recent.append(incoming / name)
            fed[0] += 1
            if len(recent) > 100:  # the line's retention: the oldest input goes
                recent.popleft().unlink(missing_ok=True)
            stop.wait(max(0.0, started + fed[0] / rate - time.monotonic()))

    feeder = threading.Thread(target=feed, name="bench-feed", daemon=True)
    feeder.start()
    samples: list[tuple[float, float]] = []
    started = time.monotonic()
    try:
        while (now := time.monotonic() - started) < seconds:
            samples.append((now, rss_mb()))
            print(f"t={now:6.0f} s  RSS {samples[-1][1]:7.1f} MB  fed {fed[0]}  judged {len(running.times)}  "
                  f"load {load()}", flush=True)
            time.sleep(10.0)
        samples.append((time.monotonic() - started, rss_mb()))
    finally:
        stop.set()
        feeder.join(5)
        running.station.stop()
        running.join(30)
        broker.stop()
    late = [(t, m) for t, m in samples if t >= 60.0] or samples
    ts, ms = np.array([t for t, _ in late]), np.array([m for _, m in late])
    slope = float(np.polyfit(ts / 3600.0, ms, 1)[0]) if len(late) > 1 else float("nan")
    stats = running.stats
    print(f"RSS start {samples[0][1]:.1f} MB (t=0, the model open), at 60 s {late[0][1]:.1f}, max "
          f"{max(m for _, m in samples):.1f}, end {samples[-1][1]:.1f} MB; slope after the first minute "
          f"{slope:+.1f} MB/h; fed {fed[0]}, judged {len(running.times)}"
          + (f", {stats.summary()}" if stats else "") + f"; load {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", default="latency,throughput,soak")
    parser.add_argument("--model", type=Path, default=REPO / "models" / "surface_anomaly.onnx")
    parser.add_argument("--files", type=int, default=100, help="files per arrival kind, three kinds (latency)")
    parser.add_argument("--gap", type=float, default=0.25, help="seconds between two files (latency)")
    parser.add_argument("--settle", type=float, default=0.5, help="the watch source's settle time")
    parser.add_argument("--frames", type=int, default=150, help="frames per throughput run")
    parser.add_argument("--niceness", default="", help="helper niceness values to compare too, e.g. 0,10 "
                        "(throughput)")
    parser.add_argument("--soak-s", type=float, default=120.0)
    parser.add_argument("--soak-rate", type=float, default=4.0, help="files per second fed in the soak")
    args = parser.parse_args()
    parts = set(args.part.split(","))
    with tempfile.TemporaryDirectory(prefix="seglens-station-bench-") as scratch:
        work = Path(scratch)
        frames = write_frames(work / "frames", 8, "surface", "png")
        model = open_model(args.model)
        print(f"{args.model.name} on {model.info.provider_label}; 8 generated 1920×1080 surface frames (PNG); "
              f"load {load()}; RSS after opening {rss_mb():.1f} MB")
        if "latency" in parts:
            part_latency(model, frames, work, files=args.files, gap_s=args.gap, settle_s=args.settle)
        if "throughput" in parts:
            part_throughput(model, frames, work, count=args.frames,
                            niceness=[int(n) for n in args.niceness.split(",") if n])
        if "soak" in parts:
            part_soak(model, frames, work, seconds=args.soak_s, rate=args.soak_rate)


if __name__ == "__main__":
    main()
