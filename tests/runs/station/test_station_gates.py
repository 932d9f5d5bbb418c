"""A station's boundaries through the gates of issue 36 (app.guard): what the watched folder, a station file, its
sidecar and the output folder's other writers can plant, and a full disk under one sink.

Each test failed before its fix (said in its comment). Real files, FIFOs, /dev/zero, sparse files, a real tmpfs
(root only) and the bundled anomaly model; no mock of what is tested.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from waiting import until

from app.errors import OutputError
from app.runs.station.file import StationFileError, read_station_file
from app.runs.station.sinks import StationVerdict
from app.runs.station.sinks.options import FolderSinkOptions
from tests.full_disk import full_disk

REPO = Path(__file__).resolve().parents[3]
MODEL = REPO / "models" / "surface_anomaly.onnx"
SAMPLE = REPO / "resources" / "samples" / "anomaly" / "anomaly_05_pits.png"
WAIT_S = 90.0  # generous: a loaded 2-core machine; no timing is asserted
VICTIM = b"a file of someone else's, without a newline at its end"


def verdict(frame_id: str, state: str = "NG") -> StationVerdict:
    return StationVerdict(station="line-1", frame_id=frame_id, time=1.0, verdict=state, score=0.9, reason="",
                          latency_ms=1.0)


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)
    return victim


def _child(code: str, *, timeout: float = 120, headroom: int = 1 << 30) -> subprocess.CompletedProcess[str]:
    """`code` run in a fresh Python whose address space is capped at what it holds after its imports plus
    `headroom` (a file read whole fails there, not on the shared machine), killed after `timeout` s."""
    prelude = textwrap.dedent(f"""
        import resource, sys
        sys.path.insert(0, {str(REPO)!r})
        import numpy, cv2, onnx  # the big imports before the cap
        import app.runs.station.sinks.folder, app.runs.station.setup, app.inference.model.builder
        with open("/proc/self/status") as status:
            size = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (size + {headroom}, size + {headroom}))
    """)
    return subprocess.run([sys.executable, "-B", "-c", prelude + textwrap.dedent(code)], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


# -- 2: SegLens's own files in the output folder are never written through a planted link --------------------------

def test_a_journal_planted_as_a_symlink_is_refused_and_its_target_untouched(tmp_path):
    # the journal followed the link: it truncated the target's "torn" last line (the whole file here) and then
    # appended its records to it
    from app.runs.station.journal import JOURNAL_NAME, StationJournal

    victim = _victim(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / JOURNAL_NAME).symlink_to(victim)
    with pytest.raises(OutputError) as caught:
        StationJournal(out)
    assert str(caught.value) == (f"{out / JOURNAL_NAME}: cannot open the station journal (refused to write "
                                 "through a symbolic link planted under the name)")
    assert victim.read_bytes() == VICTIM


def test_the_verdict_log_never_writes_through_a_planted_link(tmp_path):
    # the log opened `verdicts.jsonl` with O_CREAT | O_APPEND and appended its lines to the link's target
    from app.runs.station.sinks.log import LogSink

    victim = _victim(tmp_path)
    (tmp_path / "verdicts.jsonl").symlink_to(victim)
    sink = LogSink(tmp_path)
    sink.publish(verdict("part.png"))
    sink.close()
    assert victim.read_bytes() == VICTIM
    assert sink.problem == ("log: cannot write verdicts.jsonl: refused to write through a symbolic link planted "
                            "under the name (1 verdicts not logged)")
    assert (tmp_path / "verdicts.csv").stat().st_mode & 0o777 == 0o600  # the ids of the parts: private


def test_the_mqtt_buffer_never_writes_through_a_planted_link(tmp_path):
    # the buffer read the target as its own and appended every verdict to it
    from app.guard.shared import PlantedLink
    from app.runs.station.sinks.mqtt_buffer import BUFFER_NAME, OutBuffer

    victim = _victim(tmp_path)
    (tmp_path / BUFFER_NAME).symlink_to(victim)
    with pytest.raises(PlantedLink):
        buffer = OutBuffer(tmp_path / BUFFER_NAME, max_count=10, max_bytes=4096)
        buffer.add({"verdict": "NG"}, "line-1")
    assert victim.read_bytes() == VICTIM
    (tmp_path / "other").mkdir()
    fresh = OutBuffer(tmp_path / "other" / BUFFER_NAME, max_count=10, max_bytes=4096)
    fresh.close()
    assert (tmp_path / "other" / BUFFER_NAME).stat().st_mode & 0o777 == 0o600  # the ids of the parts: private


def test_the_journal_is_private_and_compacts_over_a_planted_temporary_name(tmp_path):
    from app.io.sources import Frame
    from app.runs.station.journal import JOURNAL_NAME, StationJournal

    with StationJournal(tmp_path, max_entries=4) as journal:
        for n in range(12):
            journal.record(Frame("same.png", 0.0, path=tmp_path, size=n + 1, mtime_ns=1), "OK")
    assert (tmp_path / JOURNAL_NAME).stat().st_mode & 0o777 == 0o600
    assert len((tmp_path / JOURNAL_NAME).read_bytes().splitlines()) < 12  # compacted


# -- 1 and 3: the output folder's copies read through app.guard.untrusted -----------------------------------------

def test_a_copy_of_a_link_out_of_the_watched_folder_is_refused_in_one_line(tmp_path):
    # the folder sink read the link's target (the user's private file) and kept it in ng/
    from app.inference.model.builder import load_spec
    from app.runs.station.sinks.folder import FolderSink, Pictures

    watched, secret = tmp_path / "in", tmp_path / "private" / "secret.png"
    watched.mkdir()
    secret.parent.mkdir()
    shutil.copyfile(SAMPLE, secret)
    (watched / "evil.png").symlink_to(secret)
    (tmp_path / "out").mkdir()
    sink = FolderSink(tmp_path / "out", load_spec(MODEL), FolderSinkOptions(save=()))
    assert sink.publish_pictures(verdict("evil.png"), Pictures(watched / "evil.png", None, None, root=watched))
    assert not (tmp_path / "out" / "ng" / "evil.png").exists() and sink.problem is None
    assert (tmp_path / "out" / "ng" / "evil.png.not-copied.txt").read_text() == \
        "evil.png: not copied: leads outside the watched folder (a symbolic link)\n"


def test_the_copy_of_a_sparse_3_gib_part_is_never_read_whole(tmp_path):
    # an NG copy read the input whole (read_untrusted up to 4 GiB): a sparse 3 GiB file costs nothing to make and
    # 3 GiB of memory to copy (here: MemoryError under the child's cap, and no record of why there is no copy)
    watched = tmp_path / "in"
    watched.mkdir()
    (tmp_path / "out").mkdir()
    with open(watched / "big.png", "wb") as handle:
        handle.truncate(3 << 30)
    done = _child(f"""
        import json, resource
        from pathlib import Path
        from app.inference.model.builder import load_spec
        from app.runs.station.sinks import StationVerdict
        from app.runs.station.sinks.folder import FolderSink, Pictures
        from app.runs.station.sinks.options import FolderSinkOptions
        out, watched = Path({str(tmp_path / "out")!r}), Path({str(watched)!r})
        sink = FolderSink(out, load_spec({str(MODEL)!r}), FolderSinkOptions(save=()))
        verdict = StationVerdict("line-1", "big.png", 1.0, "NG", 0.9, "", 1.0)
        kept = sink.publish_pictures(verdict, Pictures(watched / "big.png", None, None))
        # the peak of this process's own memory: VmHWM (ru_maxrss carries over the forking parent's peak across exec,
        # which is the whole test run's, 2.4 GB in a full run)
        with open("/proc/self/status") as status:
            peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
        print(json.dumps({{"kept": kept, "problem": sink.problem, "rss_mb": peak // 1024}}))
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["kept"] is True and result["problem"] is None, result
    assert result["rss_mb"] < 1500, result
    ng = tmp_path / "out" / "ng"
    assert sorted(p.name for p in ng.iterdir()) == ["big.png.not-copied.txt"]
    assert (ng / "big.png.not-copied.txt").read_text() == \
        "big.png: not copied: too large (3.2 GB; the limit is 268.4 MB)\n"


# -- 4 and 5: the station file and its sidecar through the YAML and untrusted gates -------------------------------

def _station_yaml(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "STATION.yaml"
    path.write_text(f"name: line-1\nmodel: {MODEL}\nsource: {{watch: in}}\nout: out\n{extra}")
    return path


def test_an_alias_in_a_station_file_is_refused_in_one_line(tmp_path):
    # yaml.safe_load took anchors and aliases (a bomb of them is expanded by any walk of the value)
    path = tmp_path / "STATION.yaml"
    path.write_text(f"name: line-1\nmodel: &m {MODEL}\nsource: {{watch: *m}}\nout: out\n")
    with pytest.raises(StationFileError) as caught:
        read_station_file(path)
    assert str(caught.value) == f"{path}: YAML anchors/aliases are not allowed in a station file (line 2)"


def test_an_alias_bomb_in_a_station_file_is_refused_at_once(tmp_path):
    # before: the bomb in sinks.folder.save was expanded by the refusal's str() (minutes, then MemoryError)
    levels = ["&a [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"&{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]" for i in range(9)]
    path = tmp_path / "STATION.yaml"
    path.write_text("name: line-1\nmodel: m.onnx\nsource: {watch: in}\nout: out\n"
                    f"sinks: {{folder: {{save: [{', '.join(levels)}]}}}}\n")
    done = _child(f"""
        from pathlib import Path
        from app.runs.station.file import StationFileError, read_station_file
        try:
            read_station_file(Path({str(path)!r}))
        except StationFileError as exc:
            print(exc)
    """, timeout=60)
    assert done.stdout.strip() == f"{path}: YAML anchors/aliases are not allowed in a station file (line 5)", \
        done.stderr[-2000:]


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs are POSIX")
@pytest.mark.parametrize("kind", ["fifo", "zero", "bomb"])
def test_a_stations_sidecar_with_a_verdict_is_read_through_the_gates(tmp_path, kind):
    # with `verdict:` in the station file the sidecar was read by sidecar.read_text() and yaml.safe_load: a FIFO
    # waited for a writer for ever, /dev/zero filled memory, an alias bomb was expanded
    if kind == "fifo":
        sidecar = tmp_path / "line.yaml"
        os.mkfifo(sidecar)
        problem = f"{sidecar}: cannot read sidecar (not a regular file: a named pipe (FIFO))"
    elif kind == "zero":
        sidecar = Path("/dev/zero")
        problem = "/dev/zero: cannot read sidecar (not a regular file: a character device)"
    else:
        sidecar = tmp_path / "line.yaml"
        sidecar.write_text("a: &a [x, x]\nb: [*a, *a]\n")
        problem = f"{sidecar}: YAML anchors/aliases are not allowed in a sidecar (line 1)"
    path = _station_yaml(tmp_path, f"sidecar: {sidecar}\nverdict: {{fail_if: [{{score_above: 0.5}}]}}\n")
    done = _child(f"""
        from pathlib import Path
        from app.errors import SegLensError
        from app.runs.station.file import read_station_file
        from app.runs.station.setup import station_spec
        try:
            station_spec(read_station_file(Path({str(path)!r})))
        except SegLensError as exc:
            print(exc)
    """, timeout=60)
    assert done.stdout.strip() == problem, done.stderr[-2000:]


# -- 1 and 7: a station over a watched folder -----------------------------------------------------------------

@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """The bundled anomaly model with every part NG (score above 0): each judged part is copied into ng/."""
    from app.inference.runtime.session import open_session
    from app.runs.station.file import parse_station
    from app.runs.station.setup import station_spec

    folder = tmp_path_factory.mktemp("spec")
    values = {"name": "line-1", "model": str(MODEL), "device": "cpu", "source": {"watch": "in"}, "out": "out",
              "verdict": {"fail_if": [{"score_above": 0.0}]}}
    return open_session(station_spec(parse_station(values, path=None, base=folder)), "cpu")


class _Running:
    def __init__(self, model, watched: Path, out: Path) -> None:
        from app.io.sources.watch import WatchSource
        from app.runs.station.run import Station
        from app.runs.station.sinks.folder import FolderSink
        from app.runs.station.sinks.log import LogSink

        self.station = Station(
            name="line-1", model=model, out=out,
            open_source=lambda done: WatchSource(watched, settle_s=0.05, exclude=[out], already_done=done),
            open_sinks=lambda: [LogSink(out), FolderSink(out, model.spec, FolderSinkOptions(save=()))])
        self.thread = threading.Thread(target=self.station.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.station.stop()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive()


def _logged(out: Path) -> list[str]:
    path = out / "verdicts.jsonl"
    return [json.loads(line)["id"] for line in path.read_text().splitlines()] if path.exists() else []


def _journaled(out: Path) -> list[str]:
    from app.runs.station.journal import JOURNAL_NAME, read_journal

    return [entry.id for entry in read_journal(out / JOURNAL_NAME).entries]


def test_a_symlink_in_the_watched_folder_is_not_judged_nor_copied(tmp_path, model, caplog):
    # the link was followed: its target (a file outside the watched folder) was judged and copied into ng/
    watched, out, secret = tmp_path / "in", tmp_path / "out", tmp_path / "private" / "secret.png"
    watched.mkdir()
    secret.parent.mkdir()
    shutil.copyfile(SAMPLE, secret)
    (watched / "evil.png").symlink_to(secret)
    running = _Running(model, watched, out)
    try:
        _drop(watched, "good.png")
        # evil.png was refused at the start or on its event, before good.png came; a frame made of it would have
        # been logged before good.png's journal line (frames are journaled in order): no more waiting
        until(lambda: (out / "ng" / "good.png").exists() and _journaled(out) == ["good.png"], what="good.png judged",
              within_s=WAIT_S)
    finally:
        running.stop()
    assert _logged(out) == ["good.png"] and sorted(p.name for p in (out / "ng").iterdir()) == ["good.png"]
    lines = [r.getMessage() for r in caplog.records if "evil.png" in r.getMessage()]
    assert lines == ["watch folder: evil.png is not judged (not a regular file: a symbolic link)"], lines


def _count_offers(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a folder sink was given a frame's pictures (the first offer and each retry), counted as it
    happens: [count]."""
    from app.runs.station.sinks.folder import FolderSink

    offers, publish = [0], FolderSink.publish_pictures

    def counted(self: FolderSink, *args: object, **kwargs: object) -> bool:
        offers[0] += 1
        return publish(self, *args, **kwargs)

    monkeypatch.setattr(FolderSink, "publish_pictures", counted)
    return offers


def _drop(watched: Path, name: str) -> None:
    shutil.copyfile(SAMPLE, watched.parent / f"{name}.staged")
    os.rename(watched.parent / f"{name}.staged", watched / name)


def test_a_verdict_a_sink_could_not_keep_is_not_journaled_and_is_republished_when_space_returns(tmp_path, model,
                                                                                               monkeypatch):
    # the journal committed a.png although the folder sink's NG copy failed with ENOSPC (a real full tmpfs under
    # out/ng): after a restart it was never judged again, and its copy was never made
    import app.runs.station.run

    monkeypatch.setattr(app.runs.station.run, "RETRY_S", 0.3, raising=False)
    offers = _count_offers(monkeypatch)
    watched, out = tmp_path / "in", tmp_path / "out"
    watched.mkdir()
    with full_disk(out / "ng") as disk:
        running = _Running(model, watched, out)
        try:
            _drop(watched, "a.png")
            until(lambda: _logged(out) == ["a.png"], what="a.png logged", within_s=WAIT_S)
            until(lambda: running.station.sink_problems() != (), what="the folder sink's problem", within_s=WAIT_S)
            until(lambda: offers[0] >= 3, what="three offers into the full disk", within_s=WAIT_S)
            assert _journaled(out) == [] and not (disk.folder / "a.png").exists()
            assert "No space left on device" in running.station.sink_problems()[0]
            disk.free()  # space returns; no other part comes
            until(lambda: (disk.folder / "a.png").exists() and _journaled(out) == ["a.png"],
                  what="a.png kept, then journaled", within_s=WAIT_S)
            assert running.station.sink_problems() == ()
        finally:
            running.stop()
        assert (disk.folder / "a.png").read_bytes() == SAMPLE.read_bytes() and _logged(out) == ["a.png"]
        assert [(sink.name, sink.lost) for sink in running.station.sinks] == [("log", 0), ("folder", 0)]  # kept


def test_a_verdict_still_unkept_at_the_stop_is_judged_again_at_the_next_start(tmp_path, model):
    # (as above: it was journaled, so the next start never judged it)
    watched, out = tmp_path / "in", tmp_path / "out"
    watched.mkdir()
    with full_disk(out / "ng") as disk:
        running = _Running(model, watched, out)
        try:
            _drop(watched, "a.png")
            until(lambda: _logged(out) == ["a.png"], what="a.png logged", within_s=WAIT_S)
            until(lambda: running.station.sink_problems() != (), what="the folder sink's problem", within_s=WAIT_S)
        finally:
            running.stop()
        assert _journaled(out) == []
        disk.free()
        again = _Running(model, watched, out)
        try:
            until(lambda: _journaled(out) == ["a.png"], what="a.png judged again and journaled", within_s=WAIT_S)
        finally:
            again.stop()
        assert (disk.folder / "a.png").read_bytes() == SAMPLE.read_bytes() and _logged(out) == ["a.png", "a.png"]


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs are POSIX")
def test_an_mqtt_tls_file_that_is_a_fifo_is_refused_in_one_line_not_a_hang(tmp_path):
    # OpenSSL opened the CA file itself: a FIFO made the station's start wait for a writer for ever
    from app.runs.station.sinks.mqtt import MqttSink
    from app.runs.station.sinks.options import mqtt_url_options

    fifo = tmp_path / "ca.pem"
    os.mkfifo(fifo)
    outcome: list[str] = []

    def start() -> None:
        try:
            MqttSink(tmp_path, replace(mqtt_url_options("mqtts://127.0.0.1:1"), ca_file=fifo)).close()
            outcome.append("started")
        except ValueError as exc:
            outcome.append(str(exc))

    worker = threading.Thread(target=start, daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():  # let the hung open go: a writer comes and goes
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(5)
    assert outcome == ["MQTT CA file ca.pem: not a regular file: a named pipe (FIFO)"]


def test_a_dicom_kept_as_it_came_is_private_an_image_is_not(tmp_path):
    # an NG copy of an identified DICOM (anonymize off) was as readable as any picture (0644 under the usual umask)
    from app.inference.model.builder import load_spec
    from app.runs.station.sinks.folder import FolderSink, Pictures

    watched, out = tmp_path / "in", tmp_path / "out"
    watched.mkdir()
    out.mkdir()
    (watched / "scan").write_bytes(b"\0" * 128 + b"DICM" + b"\0" * 64)  # DICOM by its marker, whatever its name
    shutil.copyfile(SAMPLE, watched / "part.png")
    sink = FolderSink(out, load_spec(MODEL), FolderSinkOptions(save=()))
    old = os.umask(0o022)
    try:
        for name in ("scan", "part.png"):
            assert sink.publish_pictures(verdict(name), Pictures(watched / name, None, None, root=watched))
    finally:
        os.umask(old)
    assert (out / "ng" / "scan").read_bytes() == (watched / "scan").read_bytes()
    assert (out / "ng" / "scan").stat().st_mode & 0o777 == 0o600
    assert (out / "ng" / "part.png").stat().st_mode & 0o777 == 0o644


def test_a_file_swapped_for_a_link_after_the_source_looked_is_an_error_naming_no_folder(tmp_path, model):
    # the decoder followed the link (the watch source's look and the decode are apart in time)
    from app.io.sources import Frame
    from app.runs.station.frames import prepare_frame
    from app.runs.station.run import Station

    watched, secret = tmp_path / "in", tmp_path / "private" / "secret.png"
    watched.mkdir()
    secret.parent.mkdir()
    shutil.copyfile(SAMPLE, secret)
    (watched / "part.png").symlink_to(secret)
    frame = Frame("part.png", 0.0, path=watched / "part.png", size=1, mtime_ns=1, root=watched)
    ready = prepare_frame(model.spec, frame)
    assert ready.prepared is None and ready.pixels is None
    station = Station(name="line-1", model=model, open_source=lambda done: iter(()), out=tmp_path / "out")
    verdict, _ = station._judge(ready)
    assert (verdict.verdict, verdict.reason) == ("ERROR", "part.png: leads outside the watched folder (a symbolic "
                                                          "link)")


def test_a_part_swapped_for_a_link_right_after_its_check_is_never_decoded(tmp_path, model, monkeypatch):
    # failed before (audit finding 5): the part was checked under its root, then decoded by path with no root, so a
    # part swapped for a link in between was decoded from outside the watched folder. The attacker's swap is made
    # at the worst moment: right after any untrusted check of the part by the station (if one is made at all).
    import app.runs.station.frames as station_frames
    from app.guard import untrusted
    from app.io.sources import Frame

    watched, secret = tmp_path / "in", tmp_path / "private" / "other-patient.png"
    watched.mkdir()
    secret.parent.mkdir()
    shutil.copyfile(SAMPLE, secret)
    shutil.copyfile(SAMPLE, watched / "part.png")
    real_check = untrusted.untrusted_problem

    def check_then_swap(path, **kwargs):  # type: ignore[no-untyped-def]
        problem = real_check(path, **kwargs)
        (watched / "link.png").symlink_to(secret)
        os.replace(watched / "link.png", watched / "part.png")
        return problem

    frame = Frame("part.png", 0.0, path=watched / "part.png", size=1, mtime_ns=1, root=watched)
    if hasattr(station_frames, "untrusted_problem"):
        monkeypatch.setattr(station_frames, "untrusted_problem", check_then_swap)
    else:
        (watched / "link.png").symlink_to(secret)  # no separate check: the swap is made before the one open
        os.replace(watched / "link.png", watched / "part.png")
    ready = station_frames.prepare_frame(model.spec, frame)
    assert ready.pixels is None and ready.prepared is None, "the image outside the watched folder was decoded"
    assert station_frames.error_reason(frame, ready.error) in (
        "part.png: not a regular file: a symbolic link", "part.png: leads outside the watched folder (a symbolic link)")


def test_a_part_swapped_back_and_forth_for_a_link_is_never_decoded_from_outside(tmp_path, model):
    # the audit's race (finding 5), for two seconds: decoded from inside, or refused; never the outside pixels
    from app.io.sources import Frame
    from app.runs.station.frames import prepare_frame

    watched, outside = tmp_path / "in", tmp_path / "outside"
    watched.mkdir()
    outside.mkdir()
    inside_png, other = watched / ".inside.png", outside / "other-patient.png"
    _flat_png(inside_png, 10)
    _flat_png(other, 222)
    shutil.copyfile(inside_png, watched / "part.png")
    stop = threading.Event()

    def attacker() -> None:
        while not stop.is_set():
            (watched / ".l.png").symlink_to(other)
            os.replace(watched / ".l.png", watched / "part.png")
            shutil.copyfile(inside_png, watched / ".c.png")
            os.replace(watched / ".c.png", watched / "part.png")

    thread = threading.Thread(target=attacker, daemon=True)
    thread.start()
    seen: set[int] = set()
    frame = Frame("part.png", 0.0, path=watched / "part.png", size=1, mtime_ns=1, root=watched)
    try:
        ended = time.monotonic() + 2.0
        while time.monotonic() < ended:
            ready = prepare_frame(model.spec, frame)
            if ready.pixels is not None:
                seen.add(int(ready.pixels.flat[0]))
    finally:
        stop.set()
        thread.join(5)
    assert 222 not in seen


def _flat_png(path: Path, value: int) -> None:
    import numpy as np
    from PIL import Image

    Image.fromarray(np.full((64, 64), value, np.uint8)).save(path)
