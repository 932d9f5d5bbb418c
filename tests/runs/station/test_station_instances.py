"""A station on an instance model: its verdict message carries the objects per class. End to end: `seglens-cli watch`
on a station file whose verdict is a count rule, with the MQTT sink on a real mosquitto on loopback; the payload
has the counts and the verdict. The model (tests/yolo_models.py) answers a pit 0.9, a scratch 0.8 and a pit 0.6
on every picture; the OPC UA sink's `Counts` variable is checked on its tally."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
from waiting import until
from yolo_models import instance_model

from app.runs.station.sinks import StationVerdict
from app.runs.station.sinks.mqtt import payload_of
from app.runs.station.sinks.opcua_space import Tally
from tests.station_fixtures import Subscriber, mosquitto

__all__ = ["mosquitto"]  # the broker fixture

REPO = Path(__file__).resolve().parents[3]
WAIT_S = 120.0  # a loaded 2-core machine; timing is never asserted


def _logged(out: Path) -> list[dict]:
    path = out / "verdicts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_station_with_a_count_rule_publishes_the_counts_and_the_verdict_over_mqtt(tmp_path, mosquitto):
    instance_model(tmp_path / "best.onnx")
    (tmp_path / "in").mkdir()
    station = tmp_path / "STATION.yaml"
    station.write_text(
        "name: line-9\nmodel: best.onnx\ndevice: cpu\nsource: {watch: in, settle_s: 0.2}\nout: out\n"
        "verdict:\n  fail_if:\n    - {count_above: {pit: 1}, min_score: 0.5}\n"
        f"sinks: {{log: {{}}, mqtt: {{url: 'mqtt://127.0.0.1:{mosquitto.port}'}}}}\n", encoding="utf-8")
    subscriber = Subscriber(mosquitto.port, "seglens/line-9/verdict")
    process = subprocess.Popen([sys.executable, "-m", "app.cli", "watch", str(station)], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        until(lambda: (tmp_path / "out" / "station-journal.jsonl").exists() or process.poll() is not None,
              what="the station up", within_s=WAIT_S)
        picture = tmp_path / "part.png.tmp"
        picture.write_bytes(cv2.imencode(".png", np.full((320, 320, 3), 90, np.uint8))[1].tobytes())
        picture.rename(tmp_path / "in" / "part.png")
        messages = subscriber.wait_for(1, timeout=WAIT_S)
    finally:
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=WAIT_S)
        subscriber.close()
    assert process.returncode == 130, (stdout, stderr)
    _, payload, _ = messages[0]
    assert (payload["frame_id"], payload["verdict"], payload["reason"]) == ("part.png", "NG", "pit count 2 > 1")
    assert payload["counts"] == {"pit": 2, "scratch": 1, "stain": 0}  # every class, in the model's order
    assert list(payload["counts"]) == ["pit", "scratch", "stain"]
    assert payload["score"] == round(payload["score"], 6) and 0.89 < payload["score"] < 0.91  # the best object's
    assert [line["verdict"] for line in _logged(tmp_path / "out")] == ["NG"]


def test_a_verdict_without_counts_has_none_in_its_payload_and_opc_ua_says_them_as_json():
    plain = StationVerdict("line-9", "a.png", 0.0, "OK", 0.1, "", 3.0)
    counted = StationVerdict("line-9", "b.png", 0.0, "NG", 0.9, "pit count 2 > 1", 3.0,
                             counts=(("pit", 2), ("scratch", 0)))
    assert "counts" not in payload_of(plain)  # another model's payload is as it was
    assert payload_of(counted)["counts"] == {"pit": 2, "scratch": 0}
    tally = Tally()
    tally.take(counted)
    assert json.loads(tally.values["Counts"]) == {"pit": 2, "scratch": 0}
    tally.take(plain)
    assert tally.values["Counts"] == ""
