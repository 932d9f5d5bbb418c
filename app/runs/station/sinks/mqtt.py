"""The MQTT sink: each verdict to `<prefix>/<station>/verdict` (QoS 1) and the newest, retained, to
`<prefix>/<station>/last`, through a bounded on-disk buffer so nothing is lost while the broker is down.

Guarantees. Every verdict `publish` takes is written to the buffer (app.runs.station.sinks.mqtt_buffer) before `publish`
returns, and leaves it only when the broker has acknowledged it (PUBACK) or when it was dropped: as the oldest
waiting by a full buffer, or as one paho refuses (a topic too long: the ones after it must still go), counted and
said in `problem`. Verdicts are sent in the order taken, after a reconnect and after a restart too (the buffer is
read back first). QoS 1 is "at least once": a verdict in flight when the connection broke, or when the process died,
is sent again; the payload's `seq` (one more per verdict, never given twice by one output folder) lets a subscriber
drop what it has seen (keep the last seq per station; drop any seq at or below it).

Payload: StationVerdict.as_dict (station, frame_id, time, verdict, score, reason, latency_ms, and `counts`: an
instance model's objects per class, `{"pit": 2, "scratch": 0}`, absent for another model and for an ERROR) plus
`seq`, as UTF-8 JSON; the time in ISO-8601 UTC as the verdict log writes it (`2026-12-01T16:24:48.123Z`, the sinks' one
formatter), names spelt as the rest of SegLens spells them (app.spelling), a non-finite number null.
Topic: the station's name with `/`, `+`, `#` and control characters replaced by `_` (one topic level); a prefix
with a wildcard or a NUL, or over 1024 bytes, is refused when the sink is made.

The stall alarm (app.runs.station.sinks.StallSink): `<prefix>/<station>/alarm`, retained, QoS 1: while the source
is stalled `{"station", "alarm": "SOURCE STALLED", "stalled": true, "since": the last frame's time, "limit_s",
"time"}` (times as the verdicts'); an empty retained message when frames come again and when the station starts,
MQTT's way to clear a retained message (a subscriber that comes later gets none: no alarm). It is state, not a
verdict: not buffered, the newest wins, sent by the sender thread before the verdicts waiting, and again at each
(re)connect.

Threads: paho's network loop runs in its own thread (loop_start: reconnects with backoff, 1 s doubling to
`reconnect_max_s`); a sender thread hands the buffer's verdicts to paho, at most `window` in flight; `publish`
takes only a lock held for a buffer append, so it never waits for the network. `close` waits at most `close_s`
for the backlog, then leaves what is left in the buffer for the next start.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import ssl
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from app.errors import OutputError, one_line
from app.guard.untrusted import SMALL_FILE_LIMIT, untrusted_problem
from app.runs.station.sinks import StallAlarm, StationVerdict, iso_utc
from app.runs.station.sinks.log import ms_value, score_value
from app.runs.station.sinks.mqtt_buffer import BUFFER_NAME, OutBuffer, Pending
from app.runs.station.sinks.options import MqttSinkOptions
from app.spelling import spelt

log = logging.getLogger(__name__)

_MAX_UNWRITTEN = 1000  # verdicts remembered whose buffer line is still to be written (the station owes fewer)
_NOT_IN_TOPIC = re.compile(r"[/+#\x00-\x1f\x7f]")


def topic_part(station: str) -> str:
    """`station` as one MQTT topic level (no `/`, `+`, `#` or control character)."""
    return _NOT_IN_TOPIC.sub("_", spelt(station, controls=False)) or "_"


def alarm_payload(alarm: StallAlarm) -> bytes:
    """The alarm topic's payload: the stall as JSON, or empty (the retained alarm cleared) when not stalled."""
    if not alarm.stalled:
        return b""
    body = {"station": spelt(alarm.station, controls=False), "alarm": "SOURCE STALLED", "stalled": True,
            "since": iso_utc(alarm.since), "limit_s": alarm.limit_s, "time": iso_utc(alarm.time)}
    return json.dumps(body, ensure_ascii=False, allow_nan=False).encode()


def payload_of(verdict: StationVerdict) -> dict[str, object]:
    """The verdict's JSON payload (without its seq): names spelt, the time, the score and the latency as the log
    writes them, a non-finite number None."""
    body: dict[str, object] = {}
    for key, value in verdict.as_dict().items():
        if key == "counts" and value is None:  # not an instance model's verdict: the payload as it always was
            continue
        if key == "time":
            value = iso_utc(verdict.time)
        elif key == "score":
            value = score_value(verdict.score)
        elif key == "latency_ms":
            value = ms_value(verdict.latency_ms)
        elif isinstance(value, str):
            value = spelt(value, controls=False)
        elif isinstance(value, dict):  # counts: class names spelt as every other name
            value = {spelt(str(name), controls=False): count for name, count in value.items()}
        elif isinstance(value, float) and not math.isfinite(value):
            value = None
        body[key] = value
    return body


class MqttSink:
    """Verdicts to an MQTT broker (module docstring). `out`: the station's output folder (the buffer's)."""

    name = "mqtt"

    def __init__(self, out: Path, options: MqttSinkOptions) -> None:
        """`options`: the broker and how to reach it (the station file's `sinks.mqtt`, its password resolved)."""
        self._where = options.where
        self._prefix, self._window = _checked_prefix(options.prefix), max(1, options.window)
        self._close_s = options.close_s
        self._lock = threading.Condition()
        self._connected = False
        self._closing = False
        self._link_problem: str | None = None
        self._tls_error: str | None = None
        self._seq_of_mid: dict[int, int] = {}
        self._other_mids: set[int] = set()  # the retained `last` messages: acknowledged, nothing to forget
        self._early: set[int] = set()  # acknowledged before the sender recorded their mid
        self._refused = 0  # verdicts paho would not take (a topic too long): dropped, or they would block the rest
        self._refusal: str | None = None
        self._unwritten: dict[StationVerdict, int] = {}  # verdicts sent from memory, their line not on disk: seq
        self._alarm: tuple[str, bytes] | None = None  # the stall alarm's topic level and payload (None: none said)
        self._alarm_due = False  # to be sent (changed, or a new connection)
        self._client = self._make_client(options)
        if options.tls or options.ca_file or options.cert_file:
            self._client.tls_set_context(self._tls_context(options.ca_file, options.cert_file, options.key_file))
        try:  # after the TLS files' checks: nothing opened when the configuration is refused
            self._buffer = OutBuffer(out / BUFFER_NAME, max_count=options.buffer_max_count,
                                     max_bytes=options.buffer_max_bytes, fsync=options.fsync)
        except OSError as exc:  # the output folder missing or read-only: the station cannot start this sink
            raise OutputError(f"{out / BUFFER_NAME}: cannot open the MQTT buffer: {exc.strerror or exc}") from exc
        self._client.connect_async(options.host, options.port, keepalive=options.keepalive_s)
        self._client.loop_start()
        self._sender = threading.Thread(target=self._send_loop, name="mqtt-sink-sender", daemon=True)
        self._sender.start()

    def _make_client(self, options: MqttSinkOptions) -> mqtt.Client:
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=options.client_id, protocol=mqtt.MQTTv311)
        if options.username is not None:
            client.username_pw_set(options.username, options.password)
        client.reconnect_delay_set(min_delay=1, max_delay=max(1, math.ceil(options.reconnect_max_s)))
        client.max_inflight_messages_set(self._window + 4)  # ours plus the retained `last` ones
        client.on_connect = self._on_connect
        client.on_connect_fail = self._on_connect_fail
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        return client

    def _tls_context(self, ca_file: Path | None, cert_file: Path | None, key_file: Path | None) -> ssl.SSLContext:
        """A verifying TLS context; a bad CA or client certificate file raises ValueError naming it. Each file is
        checked through app.guard.untrusted before OpenSSL opens it: a FIFO would make it wait for ever, a device
        or a giant file read without end."""
        for path, what in ((ca_file, "MQTT CA file"), (cert_file, "MQTT client certificate"),
                           (key_file, "MQTT client key")):
            problem = None if path is None or not os.path.lexists(path) else \
                untrusted_problem(path, limit=SMALL_FILE_LIMIT)  # a missing one: OpenSSL's own line, as before
            if path is not None and problem is not None:
                raise ValueError(f"{what} {Path(str(path)).name}: {problem}")
        try:
            context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"MQTT CA file {Path(str(ca_file)).name}: {_ssl_line(exc)}") from exc
        try:
            if cert_file:
                context.load_cert_chain(str(cert_file), str(key_file) if key_file else None)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"MQTT client certificate {Path(str(cert_file)).name}: {_ssl_line(exc)}") from exc
        sink = self

        class _Recording(ssl.SSLSocket):  # keeps the handshake's error: paho reports a failed connect without it
            def do_handshake(self, block: bool = False) -> None:
                try:
                    super().do_handshake(block)
                except ssl.SSLError as exc:
                    sink._tls_error = getattr(exc, "verify_message", None) or exc.reason or one_line(exc)
                    raise

        context.sslsocket_class = _Recording
        return context

    def publish(self, verdict: StationVerdict) -> bool:
        """Buffer the verdict (on disk) for the sender; never waits for the network, never raises for it. False
        when its buffer line could not be written (a full disk): it is sent from memory all the same, and when
        the station offers the same verdict again its line is written then (not a second message)."""
        with self._lock:
            late = self._unwritten.pop(verdict, None)
            if late is not None:
                kept = self._buffer.write_late(late)
                if not kept:
                    self._unwritten[verdict] = late
                return kept
            try:
                entry = self._buffer.add(payload_of(verdict), topic_part(verdict.station))
            except ValueError as exc:  # not JSON (payload_of makes it so): counted as dropped
                self._buffer.dropped += 1
                log.warning("MQTT sink: a verdict dropped: %s", one_line(exc))
                return True
            finally:
                self._lock.notify_all()
            if self._buffer.last_written:
                return True
            self._unwritten[verdict] = entry.seq
            while len(self._unwritten) > _MAX_UNWRITTEN:  # verdicts the station no longer offers
                del self._unwritten[next(iter(self._unwritten))]
            return False

    def stall(self, alarm: StallAlarm) -> None:
        """The stall alarm's new state, for the sender to publish (retained) as soon as it is connected."""
        with self._lock:
            self._alarm = (topic_part(alarm.station), alarm_payload(alarm))
            self._alarm_due = True
            self._lock.notify_all()

    def close(self) -> None:
        """Wait at most `close_s` for the backlog to be acknowledged (and the alarm's newest state to be handed to
        paho, whose DISCONNECT follows it), then disconnect; what is left stays in the buffer for the next start."""
        deadline = time.monotonic() + self._close_s
        with self._lock:
            while ((self._buffer.entries or self._alarm_due) and self._connected
                   and time.monotonic() < deadline):
                self._lock.wait(max(0.0, deadline - time.monotonic()))
            self._closing = True
            self._lock.notify_all()
        self._sender.join(timeout=max(0.5, deadline - time.monotonic()))
        self._client.disconnect()
        self._client.loop_stop()
        with self._lock:
            if self._buffer.entries:
                log.warning("MQTT sink: %d verdicts left in its buffer for the next start",
                            len(self._buffer.entries))
            self._buffer.close()

    @property
    def problem(self) -> str | None:
        """One line while the broker cannot be reached (with the backlog), or since the buffer dropped verdicts."""
        with self._lock:
            parts = [] if self._link_problem is None else [
                f"{self._link_problem}; {len(self._buffer.entries)} verdicts buffered"]
            if self._buffer.disk_problem is not None:
                parts.append(f"{'' if parts else 'mqtt: '}{self._buffer.disk_problem}")
            if self._buffer.dropped > self._refused:
                full = self._buffer.dropped - self._refused
                parts.append(f"{'' if parts else 'mqtt: '}buffer full: {full} oldest verdicts dropped")
            if self._refused:
                parts.append(f"{'' if parts else 'mqtt: '}a verdict the broker cannot take was dropped "
                             f"({self._refusal}); {self._refused} so far")
            return "; ".join(parts) if parts else None

    @property
    def pending(self) -> int:
        """Verdicts taken but not yet acknowledged by the broker."""
        with self._lock:
            return len(self._buffer.entries)

    @property
    def lost(self) -> int:
        """Verdicts that will never reach the broker (dropped), as the other sinks count theirs (`watch`'s
        summary adds them up)."""
        return self.dropped

    @property
    def dropped(self) -> int:
        """Verdicts dropped because the buffer was full, or because paho refused them (since this sink started)."""
        with self._lock:
            return self._buffer.dropped

    def _send_loop(self) -> None:
        """Hand the buffer's verdicts to paho in order, at most `window` in flight, while connected."""
        while True:
            with self._lock:
                while not self._closing and not (self._connected and (self._alarm_due or self._buffer.sent < min(
                        len(self._buffer.entries), self._window))):
                    self._lock.wait(1.0)
                if self._closing:
                    return
                alarm, self._alarm_due = (self._alarm if self._alarm_due else None), False
                if alarm is not None:
                    self._lock.notify_all()  # a close waiting for it: handed to paho now, before the DISCONNECT
                entry = None if alarm is not None else self._buffer.next_unsent()
                newest = self._buffer.sent == len(self._buffer.entries)
            if alarm is not None:
                self._send_alarm(*alarm)
                continue
            if entry is None:
                continue
            try:
                self._send(entry, newest=newest)
            except Exception as exc:  # paho refused it: a dead sender would strand every later verdict
                self._refuse(entry, exc)

    def _send(self, entry: Pending, *, newest: bool) -> None:
        topic = f"{self._prefix}/{entry.station}"
        # outside the lock: paho takes its own, and calls _on_publish holding it
        info = self._client.publish(f"{topic}/verdict", entry.payload, qos=1)
        self._record(info.mid, entry.seq)
        if newest:  # the retained last verdict: once per burst is enough, the broker keeps the newest
            self._record(self._client.publish(f"{topic}/last", entry.payload, qos=1, retain=True).mid, None)

    def _send_alarm(self, station: str, payload: bytes) -> None:
        """The alarm's state, retained (outside the lock, as `_send`); one paho refuses is said, not sent again."""
        try:
            info = self._client.publish(f"{self._prefix}/{station}/alarm", payload, qos=1, retain=True)
        except Exception as exc:  # a topic too long: the verdicts' would be refused too, and said
            log.warning("MQTT sink: the stall alarm not sent: %s", one_line(exc, most=120))
            return
        self._record(info.mid, None)

    def _refuse(self, entry: Pending, exc: Exception) -> None:
        """A verdict paho will never send (its topic too long): dropped from the buffer, counted and said; the
        next ones go on."""
        with self._lock:
            self._buffer.discard(entry.seq)
            self._refused += 1
            self._refusal = one_line(exc, most=120)
            self._lock.notify_all()
        log.warning("MQTT sink: a verdict dropped: %s", self._refusal)

    def _record(self, mid: int, seq: int | None) -> None:
        with self._lock:
            if mid in self._early:
                self._early.discard(mid)
                if seq is not None:
                    self._buffer.ack(seq)
                    self._lock.notify_all()
            elif seq is None:
                self._other_mids.add(mid)
            else:
                self._seq_of_mid[mid] = seq

    def _on_publish(self, client: mqtt.Client, userdata: Any, mid: int, reason: Any, properties: Any) -> None:
        with self._lock:
            seq = self._seq_of_mid.pop(mid, None)
            if seq is not None:
                self._buffer.ack(seq)
                self._lock.notify_all()
            elif mid in self._other_mids:
                self._other_mids.discard(mid)
            else:
                self._early.add(mid)

    def _on_connect(self, client: mqtt.Client, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        with self._lock:
            if getattr(reason, "is_failure", False):
                self._connected = False
                self._link_problem = f"mqtt: {self._where} refused the connection: {reason}"
                log.warning("MQTT sink: %s", self._link_problem)
            else:
                self._connected, self._link_problem, self._tls_error = True, None, None
                self._alarm_due = self._alarm is not None  # a broker that lost it (restarted) has it again
                log.info("MQTT sink: connected to %s", self._where)
            self._lock.notify_all()

    def _on_connect_fail(self, client: mqtt.Client, userdata: Any) -> None:
        with self._lock:
            detail = f" (TLS: {self._tls_error})" if self._tls_error else ""
            self._link_problem = f"mqtt: cannot connect to {self._where}{detail}"

    def _on_disconnect(self, client: mqtt.Client, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        with self._lock:
            self._connected = False
            if not self._closing and self._link_problem is None:
                self._link_problem = f"mqtt: disconnected from {self._where} ({reason})"
            self._lock.notify_all()


def _checked_prefix(prefix: str) -> str:
    """`prefix` when a broker takes it as the topics' first levels, else ValueError in one line (a wildcard, a
    NUL, or too long: MQTT's topics are at most 65535 bytes, the station's level and `/verdict` to follow)."""
    why = ("a wildcard ('+' or '#') is no topic to publish to" if re.search(r"[+#]", prefix)
           else "a NUL character cannot be in a topic" if "\x00" in prefix
           else "too long for a topic (at most 1024 bytes)" if len(prefix.encode("utf-8", "surrogatepass")) > 1024
           else None)
    if why:
        raise ValueError(f"MQTT topic prefix {spelt(prefix[:40], controls=False)!r}: {why}")
    return prefix


def _ssl_line(exc: BaseException) -> str:
    """An OSError's words without its path (paths only at DEBUG), an SSLError's reason."""
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason)
    return (exc.strerror if isinstance(exc, OSError) else None) or one_line(exc)
