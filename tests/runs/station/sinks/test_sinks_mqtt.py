"""The MQTT sink against a real broker on loopback (Debian's mosquitto, tests/station_fixtures.py): every verdict
once and in order, through a broker killed for 10 s, a wrong password and a full buffer; the retained last; the
retained stall alarm, cleared and sent again after a reconnect; the payload's time as the verdict log's."""

from __future__ import annotations

import json
import os
import re
import time
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from waiting import until

from app.errors import OutputError
from app.runs.station.sinks import Sink, StallAlarm, StallSink, StationVerdict
from app.runs.station.sinks.mqtt import MqttSink, payload_of, topic_part
from app.runs.station.sinks.mqtt_buffer import BUFFER_NAME, OutBuffer
from app.runs.station.sinks.options import MqttSinkOptions, mqtt_url_options
from tests.io.pacs.orthanc import free_port, make_tls
from tests.station_fixtures import Mosquitto, Subscriber, mosquitto

__all__ = ["mosquitto"]  # the fixture, imported for the tests below

TOPIC = "seglens/line-1/verdict"
LAST = "seglens/line-1/last"


def out_folder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def verdict(i: int) -> StationVerdict:
    return StationVerdict(station="line-1", frame_id=f"part-{i:04d}.png", time=1_764_600_000.0 + i,
                          verdict="NG" if i % 7 == 3 else "OK", score=i / 1000, reason="", latency_ms=float(i))


def deduped(messages: list[tuple[str, dict[str, Any], bool]]) -> list[int]:
    """The seqs a subscriber keeps, dropping one at or below the last seen (the payload's documented rule)."""
    kept: list[int] = []
    for _, payload, _ in messages:
        if not kept or payload["seq"] > kept[-1]:
            kept.append(payload["seq"])
    return kept


def test_every_verdict_arrives_once_in_order(tmp_path: Path, mosquitto: Mosquitto) -> None:
    subscriber = Subscriber(mosquitto.port, TOPIC)
    sink: Sink = MqttSink(tmp_path, MqttSinkOptions(host="127.0.0.1", port=mosquitto.port))
    try:
        for i in range(200):
            sink.publish(verdict(i))
        messages = subscriber.wait_for(200)
        assert [payload["frame_id"] for _, payload, _ in messages] == [f"part-{i:04d}.png" for i in range(200)]
        assert [payload["seq"] for _, payload, _ in messages] == list(range(1, 201))
        assert messages[3][1] == {"station": "line-1", "frame_id": "part-0003.png", "time": "2025-12-01T14:40:03.000Z",
                                  "verdict": "NG", "score": 0.003, "reason": "", "latency_ms": 3.0, "seq": 4}
        until(lambda: isinstance(sink, MqttSink) and sink.pending == 0, what="every verdict acknowledged")
        assert sink.problem is None
    finally:
        sink.close()
        subscriber.close()
    assert len(subscriber.messages) == 200  # none twice


def test_a_broker_killed_for_10_s_loses_nothing_and_keeps_the_order(tmp_path: Path, mosquitto: Mosquitto) -> None:
    subscriber = Subscriber(mosquitto.port, TOPIC, client_id="line-watcher")  # its session outlives the kill
    until(lambda: mosquitto.database.exists(), what="the broker's database saved")
    sink = MqttSink(out_folder(tmp_path / "out"),
                    MqttSinkOptions(host="127.0.0.1", port=mosquitto.port, reconnect_max_s=2))
    try:
        for i in range(50):
            sink.publish(verdict(i))
        assert len(subscriber.wait_for(50)) == 50
        mosquitto.stop()
        until(lambda: sink.problem is not None, what="the sink saying the broker is gone", within_s=10)
        for i in range(50, 100):  # the line goes on for 10 s while the broker is gone
            sink.publish(verdict(i))
            time.sleep(0.2)
        assert sink.problem is not None
        # the 50 taken while it is down, and those the broker had not acknowledged yet when it was killed
        assert re.fullmatch(rf"mqtt: cannot connect to 127\.0\.0\.1:{mosquitto.port}; (\d+) verdicts buffered",
                            sink.problem)
        assert sink.pending >= 50
        buffered = (tmp_path / "out" / BUFFER_NAME).read_text().splitlines()
        assert json.loads(buffered[-1])["payload"]["frame_id"] == "part-0099.png"  # on disk while it is down
        mosquitto.start()
        for i in range(100, 150):
            sink.publish(verdict(i))
        until(lambda: len(deduped(subscriber.messages)) == 150, what="150 verdicts delivered", within_s=40)
        messages = list(subscriber.messages)
        assert deduped(messages) == list(range(1, 151))  # none lost, in order (a redelivered one dropped)
        assert {payload["frame_id"] for _, payload, _ in messages} == {f"part-{i:04d}.png" for i in range(150)}
        until(lambda: sink.problem is None and sink.pending == 0, what="the problem cleared, every verdict acked")
    finally:
        sink.close()
        subscriber.close()


def test_the_retained_last_verdict_is_what_a_late_subscriber_gets(tmp_path: Path, mosquitto: Mosquitto) -> None:
    sink = MqttSink(tmp_path, MqttSinkOptions(host="127.0.0.1", port=mosquitto.port))
    try:
        for i in range(5):
            sink.publish(verdict(i))
        until(lambda: sink.pending == 0, what="every verdict acknowledged")
    finally:
        sink.close()
    late = Subscriber(mosquitto.port, LAST)
    try:
        messages = late.wait_for(1, timeout=10)
        assert [(topic, payload["frame_id"], payload["seq"], retained) for topic, payload, retained in messages] \
            == [(LAST, "part-0004.png", 5, True)]
    finally:
        late.close()


def test_a_wrong_password_is_one_line_and_nothing_is_lost(tmp_path: Path) -> None:
    broker = Mosquitto.launch(tmp_path / "broker", users={"station": "right-secret"})
    try:
        subscriber = Subscriber(broker.port, TOPIC, username="station", password="right-secret")
        sink = MqttSink(out_folder(tmp_path / "out"), MqttSinkOptions(
            host="127.0.0.1", port=broker.port, username="station", password="wrong-secret", reconnect_max_s=1))
        for i in range(10):
            sink.publish(verdict(i))
        until(lambda: sink.problem is not None and "refused" in sink.problem, what="the refusal said", within_s=10)
        assert sink.problem == f"mqtt: 127.0.0.1:{broker.port} refused the connection: Not authorized; " \
                               "10 verdicts buffered"
        assert "secret" not in sink.problem
        sink.close()  # bounded: it is not connected
        # the URL's user and password; an option given beside it wins (a station file's username)
        url = mqtt_url_options(f"mqtt://nobody:right-secret@127.0.0.1:{broker.port}")
        assert (url.username, url.password) == ("nobody", "right-secret")
        sink = MqttSink(tmp_path / "out", replace(url, username="station"))
        try:
            messages = subscriber.wait_for(10)
            assert [payload["seq"] for _, payload, _ in messages] == list(range(1, 11))  # the buffered, in order
            sink.publish(verdict(10))
            assert [payload["seq"] for _, payload, _ in subscriber.wait_for(11)][-1] == 11  # numbering goes on
        finally:
            sink.close()
            subscriber.close()
    finally:
        broker.stop()


def test_a_full_buffer_drops_the_oldest_and_counts_them(tmp_path: Path) -> None:
    port = free_port()  # no broker there yet
    sink = MqttSink(out_folder(tmp_path / "out"),
                    MqttSinkOptions(host="127.0.0.1", port=port, buffer_max_count=10, reconnect_max_s=1))
    for i in range(25):
        sink.publish(verdict(i))
    assert sink.dropped == 15 and sink.pending == 10
    assert sink.lost == 15  # as the other sinks count it: `watch` says `sinks lost 15 verdicts` (it said nothing)
    until(lambda: sink.problem is not None and "cannot connect" in sink.problem, what="no broker said", within_s=10)
    assert sink.problem == f"mqtt: cannot connect to 127.0.0.1:{port}; 10 verdicts buffered; " \
                           "buffer full: 15 oldest verdicts dropped"
    sink.close()
    broker = Mosquitto.launch(tmp_path / "broker", port=port)
    try:
        subscriber = Subscriber(port, TOPIC)
        sink = MqttSink(out_folder(tmp_path / "out"), MqttSinkOptions(host="127.0.0.1", port=port))
        try:
            messages = subscriber.wait_for(10)
            assert [payload["frame_id"] for _, payload, _ in messages] == [f"part-{i:04d}.png" for i in range(15, 25)]
            assert [payload["seq"] for _, payload, _ in messages] == list(range(16, 26))
        finally:
            sink.close()
            subscriber.close()
    finally:
        broker.stop()


def test_tls_with_the_right_ca_and_a_certificate_error_in_one_line(tmp_path: Path) -> None:
    tls = make_tls(tmp_path / "tls")
    other = make_tls(tmp_path / "other", ca_name="Another CA")
    broker = Mosquitto.launch(tmp_path / "broker", tls=tls)
    try:
        sink = MqttSink(out_folder(tmp_path / "wrong"),
                        MqttSinkOptions(host="127.0.0.1", port=broker.port, ca_file=other.ca, reconnect_max_s=1))
        sink.publish(verdict(0))
        until(lambda: sink.problem is not None and "TLS" in sink.problem, what="the TLS error said", within_s=10)
        # OpenSSL's words for it: "self-signed certificate in certificate chain" where the server sends its CA
        assert re.fullmatch(rf"mqtt: cannot connect to 127\.0\.0\.1:{broker.port} \(TLS: [^()]*certificate[^()]*\); "
                            "1 verdicts buffered", sink.problem), sink.problem
        sink.close()
        subscriber = Subscriber(broker.port, TOPIC, ca_file=tls.ca)
        sink = MqttSink(out_folder(tmp_path / "right"),
                        MqttSinkOptions(host="127.0.0.1", port=broker.port, ca_file=tls.ca))
        try:
            sink.publish(verdict(1))
            assert [payload["frame_id"] for _, payload, _ in subscriber.wait_for(1)] == ["part-0001.png"]
        finally:
            sink.close()
            subscriber.close()
    finally:
        broker.stop()


def test_a_refused_configuration_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(ValueError, match=r"^MQTT CA file missing\.pem: No such file or directory$"):
        MqttSink(tmp_path, MqttSinkOptions(host="127.0.0.1", ca_file=tmp_path / "missing.pem"))
    with pytest.raises(ValueError, match=r"^MQTT client certificate junk\.pem: "):
        MqttSink(tmp_path, MqttSinkOptions(host="127.0.0.1", tls=True, cert_file=tmp_path / "junk.pem"))
    with pytest.raises(ValueError, match=r"^MQTT URL 'broker:1883': expected mqtt://host\[:port\]"):
        mqtt_url_options("http://user:secret@broker:1883")
    with pytest.raises(OutputError, match="cannot open the MQTT buffer: No such file or directory$"):
        MqttSink(tmp_path / "gone", MqttSinkOptions(host="127.0.0.1"))
    assert not (tmp_path / BUFFER_NAME).exists()  # nothing opened for a refused one
    os.mkfifo(tmp_path / BUFFER_NAME)  # planted under its name: refused, not a hang
    with pytest.raises(OutputError, match=r"mqtt-buffer\.jsonl: cannot open the MQTT buffer: "):
        MqttSink(tmp_path, MqttSinkOptions(host="127.0.0.1"))


def test_a_station_name_is_one_topic_level() -> None:
    assert topic_part("line 1/cam#2+x\n") == "line 1_cam_2_x_"
    assert topic_part("") == "_"


def test_the_buffer_survives_a_torn_line_compacts_and_never_gives_a_seq_twice(tmp_path: Path) -> None:
    path = tmp_path / BUFFER_NAME
    buffer = OutBuffer(path, max_count=3, max_bytes=1024)
    for i in range(3):
        buffer.add({"frame_id": f"part-{i}"}, "line-1")
    first = buffer.next_unsent()
    assert first is not None and first.seq == 1
    buffer.ack(1)
    buffer.add({"frame_id": "part-3"}, "line-1")
    buffer.add({"frame_id": "part-4"}, "line-1")  # full: part-1 (the oldest waiting) dropped
    assert buffer.dropped == 1 and [e.seq for e in buffer.entries] == [3, 4, 5]
    buffer.close()
    with path.open("a") as file:
        file.write('{"seq": 6, "payl')  # killed in the middle of a line
    again = OutBuffer(path, max_count=3, max_bytes=1024)
    assert [(e.seq, json.loads(e.payload)["frame_id"]) for e in again.entries] == [
        (3, "part-2"), (4, "part-3"), (5, "part-4")]
    assert again.add({"frame_id": "part-5"}, "line-1").seq == 6  # the torn 6 was never taken
    for _ in range(3):
        entry = again.next_unsent()
        assert entry is not None
        again.ack(entry.seq)
    again.close()
    before = path.stat().st_size
    big = OutBuffer(path, max_count=10, max_bytes=1024)
    for i in range(2000):  # past its bound in bytes: compacted on the way, whatever the backlog
        entry = big.add({"frame_id": f"many-{i}"}, "line-1")
        assert big.next_unsent() == entry
        big.ack(entry.seq)
    big.close()
    assert path.stat().st_size < 2 * 1024 + 65536 + before
    assert OutBuffer(path, max_count=10, max_bytes=1024).add({}, "line-1").seq == 2007  # seq goes on (6 + 2000 taken)


def test_the_payload_is_json_even_for_odd_names_and_a_nan_score() -> None:
    odd = StationVerdict(station="line-1", frame_id="caf\udce9\n.png", time=1.5, verdict="ERROR", score=float("nan"),
                         reason="x", latency_ms=2.0)
    assert payload_of(odd) == {"station": "line-1", "frame_id": "caf\\xe9\n.png", "time": "1970-01-01T00:00:01.500Z",
                               "verdict": "ERROR", "score": None, "reason": "x", "latency_ms": 2.0}


@pytest.mark.parametrize("when", [1_764_600_000.0, 1_764_600_000.1234, 0.0005, 4_102_444_800.999])
def test_the_payload_time_is_the_verdict_log_time(when: float) -> None:
    # the payload said epoch seconds (1764600000.1234) where the log says 2025-12-01T14:40:00.123Z: a subscriber
    # matching a message to its log line compared two forms
    from app.runs.station.sinks.log import log_record

    stamped = replace(verdict(1), time=when)
    assert payload_of(stamped)["time"] == log_record(stamped)["time"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", str(payload_of(stamped)["time"]))


@pytest.mark.parametrize(("prefix", "why"), [("plant/#", "a wildcard"), ("x+y", "a wildcard"), ("a\x00b", "a NUL"),
                                             ("p" * 70_000, "too long")])
def test_a_topic_prefix_no_broker_takes_is_refused_in_one_line(tmp_path: Path, prefix: str, why: str) -> None:
    # it was taken: paho raised in the sender thread, which died, and every verdict after stayed in the buffer
    # with `problem` None
    with pytest.raises(ValueError, match=rf"^MQTT topic prefix .*: {why}"):
        MqttSink(tmp_path, MqttSinkOptions(host="127.0.0.1", prefix=prefix))
    assert not (tmp_path / BUFFER_NAME).exists()  # nothing opened for a refused one


def test_a_verdict_paho_refuses_is_dropped_and_said_and_the_next_still_go(tmp_path: Path,
                                                                         mosquitto: Mosquitto) -> None:
    # a station name too long for a topic (the library takes any): paho raised in the sender thread, which died
    # with a traceback; the later verdicts were never sent and nothing said so
    subscriber = Subscriber(mosquitto.port, "seglens/+/verdict")
    sink = MqttSink(tmp_path, MqttSinkOptions(host="127.0.0.1", port=mosquitto.port, close_s=10))
    try:
        sink.publish(verdict(1))
        sink.publish(StationVerdict(station="s" * 70_000, frame_id="long.png", time=1.0, verdict="OK", score=0.1,
                                    reason="", latency_ms=1.0))
        for i in (3, 4):
            sink.publish(verdict(i))
        got = subscriber.wait_for(3)
        assert [payload["seq"] for _, payload, _ in got] == [1, 3, 4]
        until(lambda: sink.pending == 0, what="every verdict acknowledged")
        assert sink.dropped == 1
        assert sink.problem == ("mqtt: a verdict the broker cannot take was dropped (Publish topic is too long.); "
                                "1 so far")
    finally:
        sink.close()
        subscriber.close()
    assert OutBuffer(tmp_path / BUFFER_NAME, max_count=10, max_bytes=1024).entries == deque()  # none left to resend


def test_a_verdict_whose_buffer_line_the_full_disk_refused_is_written_when_offered_again(
        tmp_path: Path, mosquitto: Mosquitto) -> None:
    # (issue 36) publish said nothing: the station journaled a verdict that was in memory only, and a restart lost
    # it; now publish says False, and the same verdict offered again once there is space writes its line (no second
    # message), so the next start sends it
    from tests.full_disk import full_disk

    with full_disk(tmp_path / "out") as disk:
        nobody = free_port()  # no broker yet: the verdict stays pending
        sink = MqttSink(disk.folder, MqttSinkOptions(host="127.0.0.1", port=nobody, close_s=0.5))
        try:
            assert sink.publish(verdict(1)) is False
            assert "cannot write its buffer" in (sink.problem or "")
            assert sink.publish(verdict(1)) is False  # still full
            disk.free()
            assert sink.publish(verdict(1)) is True
            assert sink.pending == 1  # one verdict, not two
        finally:
            sink.close()
        subscriber = Subscriber(mosquitto.port, TOPIC)
        again = MqttSink(disk.folder, MqttSinkOptions(host="127.0.0.1", port=mosquitto.port))
        try:
            messages = subscriber.wait_for(1)
            assert [payload["frame_id"] for _, payload, _ in messages] == ["part-0001.png"]
        finally:
            again.close()
            subscriber.close()


ALARM = "seglens/line-1/alarm"
MARKER = "test/marker"


def _stall(stalled: bool) -> StallAlarm:
    return StallAlarm(station="line-1", stalled=stalled, since=1_764_600_000.0, limit_s=30.0, time=1_764_600_031.5)


def _retained(port: int, topic: str) -> bytes | None:
    """What the broker keeps on `topic` now (None: nothing), as a subscriber that comes now is given it: the topic
    subscribed first, then MARKER (retained by the test), whose message comes after the topic's retained one."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    got: dict[str, bytes] = {}
    asked: list[str] = []

    def then_the_marker(c: mqtt.Client, *_args: Any) -> None:
        if not asked:
            asked.append(MARKER)
            c.subscribe(MARKER, qos=1)

    client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
    client.on_connect = lambda c, u, f, rc, p: c.subscribe(topic, qos=1)
    client.on_subscribe = then_the_marker
    client.on_message = lambda c, u, m: got.setdefault(m.topic, bytes(m.payload))
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        until(lambda: MARKER in got, what="the marker after the topic's retained message", within_s=10)
    finally:
        client.disconnect()
        client.loop_stop()
    return got.get(topic)


def test_the_stall_alarm_is_retained_cleared_by_an_empty_message_and_sent_again_after_a_reconnect(
        tmp_path: Path, mosquitto: Mosquitto) -> None:
    import paho.mqtt.publish as single

    single.single(MARKER, b"m", qos=1, retain=True, hostname="127.0.0.1", port=mosquitto.port)
    sink = MqttSink(out_folder(tmp_path / "out"), MqttSinkOptions(host="127.0.0.1", port=mosquitto.port,
                                                                  reconnect_max_s=1))
    try:
        assert isinstance(sink, StallSink)
        sink.stall(_stall(True))
        kept = until(lambda: _retained(mosquitto.port, ALARM), what="the retained alarm")
        assert json.loads(kept) == {"station": "line-1", "alarm": "SOURCE STALLED", "stalled": True,
                                    "since": "2025-12-01T14:40:00.000Z", "limit_s": 30.0,
                                    "time": "2025-12-01T14:40:31.500Z"}
        sink.stall(_stall(False))  # frames again: MQTT's clearing, an empty retained message
        until(lambda: _retained(mosquitto.port, ALARM) is None, what="the retained alarm cleared")
        sink.stall(_stall(True))
        until(lambda: _retained(mosquitto.port, ALARM), what="the retained alarm again")
        mosquitto.stop()  # a broker that comes back without what it kept
        until(lambda: sink.problem is not None, what="the sink saying the broker is gone", within_s=10)
        mosquitto.database.unlink(missing_ok=True)
        mosquitto.start()
        single.single(MARKER, b"m", qos=1, retain=True, hostname="127.0.0.1", port=mosquitto.port)
        kept = until(lambda: _retained(mosquitto.port, ALARM), what="the alarm sent again at the reconnect")
        assert json.loads(kept)["stalled"] is True
        assert sink.pending == 0 and sink.lost == 0  # state, not a verdict: nothing in the buffer
    finally:
        sink.close()


def test_the_payload_numbers_are_rounded_as_the_verdict_log_writes_them() -> None:
    # a subscriber read score 0.5712878704071045 and latency_ms 527.6217460632324 (a float32 score's noise)
    from app.runs.station.sinks.log import log_record

    precise = replace(verdict(1), score=0.5712878704071045, latency_ms=527.6217460632324)
    payload, line = payload_of(precise), log_record(precise)
    assert (payload["score"], payload["latency_ms"]) == (0.571288, 527.622)
    assert (line["score"], line["latency_ms"]) == (payload["score"], payload["latency_ms"])
