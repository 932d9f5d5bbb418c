"""seglens-cli watch with no viewer: a source that stalls is seen on the line. A watched folder with a short
`--stall`, a real mosquitto broker and an asyncua client: the live line (on a terminal: a pty) says STALLED with how
long no part came, MQTT holds a retained alarm on `seglens/<station>/alarm` that an empty retained message clears
when a part comes, OPC UA's `Stalled` follows, and the summary counts the stalls and the longest."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
import yaml
from asyncua import Client, ua
from paho.mqtt.enums import CallbackAPIVersion
from waiting import until, until_async

from tests.io.pacs.orthanc import free_port
from tests.station_fixtures import mosquitto

__all__ = ["mosquitto"]  # the broker fixture, imported for the test below

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "resources" / "samples" / "anomaly"
WAIT_S = 120.0  # generous: a loaded 2-core machine; timing is never asserted
ALARM = "seglens/line-3/alarm"


@pytest.fixture
def demo(tmp_path):
    """The anomaly demo model with its verdict section (as tests/cli/test_cli_watch.py's)."""
    shutil.copy(REPO / "models" / "surface_anomaly.onnx", tmp_path / "surface_anomaly.onnx")
    sidecar = yaml.safe_load((REPO / "models" / "surface_anomaly.yaml").read_text())
    sidecar["output"].pop("image_threshold")
    sidecar["verdict"] = {"fail_if": [{"score_above": 0.88}], "review_if": [{"score_above": 0.56}]}
    (tmp_path / "surface_anomaly.yaml").write_text(yaml.safe_dump(sidecar, sort_keys=False))
    return tmp_path / "surface_anomaly.onnx"


class Terminal:
    """A pty for the station's stderr (its live line is drawn on a terminal only), read on a thread."""

    def __init__(self) -> None:
        self.main, self.side = pty.openpty()
        self.text = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.main, 4096)
            except OSError:  # the other side closed (EIO)
                return
            if not chunk:
                return
            self.text += chunk.decode("utf-8", "replace")

    def close(self) -> None:
        os.close(self.side)
        self._reader.join(timeout=10)
        os.close(self.main)


class RawSubscriber:
    """Every message on `topic` as (payload bytes, retained), in arrival order (an empty payload clears)."""

    def __init__(self, port: int, topic: str) -> None:
        self.messages: list[tuple[bytes, bool]] = []
        subscribed = threading.Event()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
        self.client.on_connect = lambda c, u, f, rc, p: c.subscribe(topic, qos=1)
        self.client.on_subscribe = lambda c, u, mid, rcs, p: subscribed.set()
        self.client.on_message = lambda c, u, m: self.messages.append((bytes(m.payload), bool(m.retain)))
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        assert subscribed.wait(10), "the subscriber was not subscribed within 10 s"

    def alarms(self) -> list[dict[str, Any] | None]:
        """Each message: the alarm's JSON, or None for a clearing (empty) one."""
        return [json.loads(payload) if payload else None for payload, _ in self.messages]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def run(coroutine: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, WAIT_S * 2))


async def _connected(url: str, process: subprocess.Popen[str]) -> Client | None:
    assert process.poll() is None, "the station exited"
    client = Client(url, timeout=5)
    try:
        await client.connect()
    except (OSError, asyncio.TimeoutError, ua.UaError):
        return None
    return client


class Changes:
    def __init__(self) -> None:
        self.stalled: list[bool] = []

    def datachange_notification(self, changed: Any, value: Any, data: Any) -> None:
        self.stalled.append(bool(value))


def _newest_is_alarm(seen: list[dict[str, Any] | None]) -> bool:
    return bool(seen) and seen[-1] is not None and seen[-1]["stalled"] is True


def _distinct(values: list[Any]) -> list[Any]:
    return [value for i, value in enumerate(values) if i == 0 or value != values[i - 1]]


def test_a_stalled_folder_is_on_the_live_line_mqtt_opcua_and_in_the_summary(demo, tmp_path, mosquitto):
    folder, out, url = tmp_path / "in", tmp_path / "out", f"opc.tcp://127.0.0.1:{free_port()}/seglens/"
    folder.mkdir()
    subscriber = RawSubscriber(mosquitto.port, ALARM)
    terminal = Terminal()
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "watch", str(demo), str(folder), "--out", str(out), "--device", "cpu",
         "--settle", "0.2", "--name", "line-3", "--stall", "1", "--mqtt", f"mqtt://127.0.0.1:{mosquitto.port}",
         "--opcua", url],
        cwd=REPO, stdout=subprocess.PIPE, stderr=terminal.side, text=True)

    def alarms(count: int) -> list[dict[str, Any] | None]:
        assert process.poll() is None, "the station exited"
        seen = subscriber.alarms()
        return seen if len(seen) >= count else []

    async def client_side() -> tuple[list[bool], list[dict[str, Any] | None]]:
        client = await until_async(lambda: _connected(url, process), what="the station's server up",
                                   within_s=WAIT_S, every_s=0.3)
        try:
            changes = Changes()
            subscription = await client.create_subscription(20, changes)
            await subscription.subscribe_data_change([client.get_node("ns=2;s=line-3.Stalled")])
            # no part for over 1 s since the start: stalled
            await until_async(lambda: changes.stalled and changes.stalled[-1], what="Stalled True", within_s=WAIT_S)
            await until_async(lambda: _newest_is_alarm(alarms(1)), what="the MQTT alarm", within_s=WAIT_S)
            until(lambda: re.search(r"STALLED — no part for \d+ s \(limit 1 s\)", terminal.text),
                  what="the live line's STALLED", within_s=WAIT_S)
            partial = folder / "part.png.tmp"  # a part comes: the alarm clears
            shutil.copyfile(SAMPLES / "anomaly_05_pits.png", partial)
            partial.rename(folder / "part.png")
            # then no part for 1 s more: stalled again
            await until_async(lambda: _distinct(changes.stalled)[-3:] == [True, False, True],
                              what="Stalled True, False after the part, True again", within_s=WAIT_S)
            return changes.stalled, await until_async(
                lambda: _newest_is_alarm(seen := alarms(3)) and None in seen[2:] and seen,
                what="the MQTT alarm cleared after the part, then again", within_s=WAIT_S)
        finally:
            await client.disconnect()

    try:
        stalled, messages = run(client_side())
    finally:
        process.send_signal(signal.SIGINT)
        stdout, _ = process.communicate(timeout=WAIT_S)
        terminal.close()
        subscriber.close()
    assert process.returncode == 130, (stdout, terminal.text)
    assert _distinct(stalled)[-3:] == [True, False, True]  # (False before, if the client came within 1 s)
    # a clearing (empty, retained) at the start, the alarm, cleared by the part, the alarm again
    assert _distinct([None if m is None else m["stalled"] for m in messages]) == [None, True, None, True]
    alarm = messages[-1]
    assert alarm is not None
    assert (alarm["station"], alarm["alarm"], alarm["limit_s"]) == ("line-3", "SOURCE STALLED", 1)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", alarm["since"])
    assert "watch line-3: stopped; 1 frame: 0 OK, 0 REVIEW, 1 NG, 0 ERROR; " in stdout
    found = re.search(r"; 0 dropped; 2 stalls, longest (\d+) s\n", stdout)
    assert found and int(found[1]) >= 1, stdout
    assert "Traceback" not in terminal.text
