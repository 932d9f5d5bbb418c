"""The station's JSONL + CSV verdict log: a line per verdict, readable while the sink is open, rotated by size."""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

from app.runs.station.sinks import Sink, StationVerdict
from app.runs.station.sinks.log import COLUMNS, LogSink
from app.runs.station.sinks.options import LogSinkOptions


def verdict(i: int, *, frame_id: str | None = None, verdict: str = "OK", reason: str = "") -> StationVerdict:
    return StationVerdict(station="line-1", frame_id=frame_id or f"part-{i:04d}.png", time=1_764_600_000.0 + i,
                          verdict=verdict, score=0.25 if verdict != "ERROR" else None, reason=reason,
                          latency_ms=12.5)


def jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def rows(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as file:
        return list(csv.reader(file))


def test_each_line_is_in_the_files_while_the_sink_is_open(tmp_path: Path) -> None:
    sink: Sink = LogSink(tmp_path)
    for i in range(3):
        sink.publish(verdict(i, verdict="NG" if i == 1 else "OK", reason="score > 0.5" if i == 1 else ""))
        # read back through a new open file: the line is there before close
        assert len(jsonl(tmp_path / "verdicts.jsonl")) == i + 1
        assert len(rows(tmp_path / "verdicts.csv")) == i + 2  # the header once, then a row per verdict
    lines = jsonl(tmp_path / "verdicts.jsonl")
    assert lines[1] == {"station": "line-1", "id": "part-0001.png", "time": "2025-12-01T14:40:01.000Z",
                        "verdict": "NG", "score": 0.25, "reason": "score > 0.5", "latency_ms": 12.5}
    table = rows(tmp_path / "verdicts.csv")
    assert table[0] == list(COLUMNS)
    assert table[2] == ["line-1", "part-0001.png", "2025-12-01T14:40:01.000Z", "NG", "0.25", "score > 0.5", "12.5"]
    assert sink.problem is None
    sink.close()


def test_reopened_the_header_is_not_written_twice_and_a_torn_line_is_ended(tmp_path: Path) -> None:
    sink = LogSink(tmp_path)
    sink.publish(verdict(0))
    sink.close()
    with (tmp_path / "verdicts.jsonl").open("a") as file:
        file.write('{"station": "line-1", "id": "torn')  # killed in the middle of a line
    sink = LogSink(tmp_path)
    sink.publish(verdict(1))
    sink.close()
    assert [r[1] for r in rows(tmp_path / "verdicts.csv")] == ["id", "part-0000.png", "part-0001.png"]
    text = (tmp_path / "verdicts.jsonl").read_text().splitlines()
    assert json.loads(text[-1])["id"] == "part-0001.png" and len(text) == 3


def test_rotated_by_size_keeping_n_each_csv_with_its_header(tmp_path: Path) -> None:
    sink = LogSink(tmp_path, LogSinkOptions(max_bytes=1024, keep=2))
    for i in range(60):
        sink.publish(verdict(i))
    sink.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["verdicts.1.csv", "verdicts.1.jsonl", "verdicts.2.csv", "verdicts.2.jsonl",
                     "verdicts.csv", "verdicts.jsonl"]
    ids: list[str] = []
    for name in ("verdicts.2.jsonl", "verdicts.1.jsonl", "verdicts.jsonl"):
        assert (tmp_path / name).stat().st_size <= 1024
        ids += [str(line["id"]) for line in jsonl(tmp_path / name)]
    assert ids == [f"part-{i:04d}.png" for i in range(60 - len(ids), 60)]  # the newest, in order, none twice
    assert len(ids) < 60  # the oldest file was dropped
    csv_ids: list[str] = []
    for name in ("verdicts.2.csv", "verdicts.1.csv", "verdicts.csv"):
        table = rows(tmp_path / name)
        assert table[0] == list(COLUMNS)  # each file starts with its header, once
        assert all(row[0] == "line-1" for row in table[1:])
        csv_ids += [row[1] for row in table[1:]]
    assert csv_ids == [f"part-{i:04d}.png" for i in range(60 - len(csv_ids), 60)]


def test_odd_names_are_escaped_and_read_back_one_line_each(tmp_path: Path) -> None:
    odd = ['a,b"c\nd.png', "caf\udce9.png", "=HYPERLINK(x).png", "tab\there\x1b[2J.png"]
    sink = LogSink(tmp_path)
    for i, name in enumerate(odd):
        sink.publish(verdict(i, frame_id=name, verdict="ERROR", reason=f"{name}: cannot decode"))
    sink.close()
    raw = (tmp_path / "verdicts.jsonl").read_bytes()
    raw.decode("utf-8")  # valid UTF-8 although a name's byte was not
    assert [line["id"] for line in jsonl(tmp_path / "verdicts.jsonl")] == [
        'a,b"c\nd.png', "caf\\xe9.png", "=HYPERLINK(x).png", "tab\there\x1b[2J.png"]
    assert jsonl(tmp_path / "verdicts.jsonl")[0]["score"] is None
    table = rows(tmp_path / "verdicts.csv")
    assert len((tmp_path / "verdicts.csv").read_text().splitlines()) == 5  # one physical line per verdict
    assert [r[1] for r in table[1:]] == ['a,b"c\\x0ad.png', "caf\\xe9.png", "'=HYPERLINK(x).png",
                                         "tab\\x09here\\x1b[2J.png"]
    assert table[1][4] == ""  # no score


def test_a_folder_gone_is_one_line_in_problem_and_the_station_goes_on(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    sink = LogSink(folder)
    sink.publish(verdict(0))
    shutil.rmtree(folder)
    sink.publish(verdict(1))  # does not raise
    sink.publish(verdict(2))
    assert sink.problem == "log: cannot write verdicts.csv: No such file or directory (2 verdicts not logged)"
    assert str(tmp_path) not in sink.problem  # paths only at DEBUG
    folder.mkdir()  # the share is back
    sink.publish(verdict(3))
    assert sink.problem is None and sink.lost == 2
    assert [line["id"] for line in jsonl(folder / "verdicts.jsonl")] == ["part-0003.png"]
    sink.close()


def test_a_full_disk_is_one_line_in_problem_and_a_verdict_offered_again_is_logged_late_once(tmp_path: Path) -> None:
    # (a link to /dev/full stood for the full disk: links planted under the log's name are refused now); issue 36:
    # the station offers a verdict a sink could not keep again: its line comes late, once, and it is not lost
    from tests.full_disk import full_disk

    with full_disk(tmp_path / "out") as disk:
        sink = LogSink(disk.folder)
        assert sink.publish(verdict(1)) is False
        assert sink.problem == "log: cannot write verdicts.csv: No space left on device (1 verdicts not logged)"
        assert sink.publish(verdict(1)) is False and sink.lost == 1  # offered again into the full disk
        disk.free()
        assert sink.publish(verdict(2)) is True  # space is back
        assert sink.publish(verdict(1)) is True and sink.lost == 0 and sink.problem is None  # offered again
        assert sink.publish(verdict(1)) is True  # (a station offers it no more; another publish is a new line)
        sink.close()
        assert [line["id"] for line in jsonl(disk.folder / "verdicts.jsonl")] == \
            ["part-0002.png", "part-0001.png", "part-0001.png"]
        assert [row[1] for row in rows(disk.folder / "verdicts.csv")[1:]] == \
            ["part-0002.png", "part-0001.png", "part-0001.png"]


def test_a_non_finite_score_is_null_not_a_crash(tmp_path: Path) -> None:
    sink = LogSink(tmp_path)
    sink.publish(StationVerdict(station="line-1", frame_id="p.png", time=1_764_600_000.0, verdict="NG",
                                score=float("nan"), reason="score is NaN", latency_ms=float("inf")))
    sink.close()
    line = jsonl(tmp_path / "verdicts.jsonl")[0]
    assert line["score"] is None and line["latency_ms"] is None
    assert rows(tmp_path / "verdicts.csv")[1][4:] == ["", "score is NaN", ""]
    assert sink.problem is None


def test_a_fifo_under_its_name_is_a_problem_not_a_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "verdicts.jsonl")
    sink = LogSink(tmp_path)
    sink.publish(verdict(0))
    assert sink.problem == "log: cannot write verdicts.jsonl: refused to write through something that is not a " \
                           "regular file planted under the name (1 verdicts not logged)"
    assert len(rows(tmp_path / "verdicts.csv")) == 2  # the other file still gets its line
    sink.close()


def test_a_huge_keep_costs_a_rotation_only_the_files_there_are(tmp_path: Path) -> None:
    # `keep: 1000000000` (the station file takes any whole number): each rotation built 10⁹ names and tried a
    # rename for each (with keep 10⁶: 17 s for 20 verdicts)
    sink = LogSink(tmp_path, LogSinkOptions(max_bytes=1024, keep=10**9, jsonl=False))
    for i in range(60):
        sink.publish(verdict(i))
    sink.close()
    files = sorted(tmp_path.glob("verdicts*.csv"), key=lambda p: -int(p.suffixes[0][1:]) if len(p.suffixes) > 1
                   else 0)
    assert len(files) == 4 and sink.problem is None  # 16 rows a file
    assert [row[1] for path in files for row in rows(path)[1:]] == [f"part-{i:04d}.png" for i in range(60)]
    assert all(rows(path)[0] == list(COLUMNS) for path in files)

