"""A real MQTT broker on loopback for the station tests: Debian's `mosquitto`, own config, own port.

`Mosquitto.launch(folder)` writes a configuration (one listener on 127.0.0.1 on a free port; anonymous, or with a
password file made by `mosquitto_passwd`, or TLS with a test CA) and starts `mosquitto -c <conf>`, ready when it
accepts connections; `.stop()` kills it (the broker gone of a test), `.start()` brings it back on the same port.
Outside CI a machine without mosquitto skips; in CI (`CI` set, as .ci/run does) it fails, so the MQTT tests cannot
silently stop running. The `mosquitto` fixture gives an anonymous broker, stopped at the test's end.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from waiting import until

from tests.io.pacs.orthanc import TlsFiles, free_port

INSTALL = "apt-get install mosquitto"


def executable(name: str) -> str:
    """`mosquitto` or `mosquitto_passwd` (Debian puts the broker in /usr/sbin); skips, or fails in CI, without."""
    found = shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}")
                                        if os.access(p, os.X_OK)), None)
    if found:
        return found
    message = f"{name} is not installed: {INSTALL}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI must test against a real MQTT broker)")
    pytest.skip(message)


@dataclass
class Mosquitto:
    """One running mosquitto; see the module docstring."""

    folder: Path
    port: int = field(default_factory=free_port)
    users: dict[str, str] = field(default_factory=dict)  # a password file when not empty (no anonymous then)
    tls: TlsFiles | None = None
    process: subprocess.Popen[bytes] | None = None

    @classmethod
    def launch(cls, folder: Path, *, users: dict[str, str] | None = None, tls: TlsFiles | None = None,
               port: int | None = None) -> Mosquitto:
        """Write the configuration into `folder` and start the broker (listening when this returns)."""
        folder.mkdir(parents=True, exist_ok=True)
        broker = cls(folder=folder, users=dict(users or {}), tls=tls, port=port or free_port())
        broker.write_config()
        broker.start()
        return broker

    def write_config(self) -> None:
        # persisted at once (a subscription, a retained or queued message each saves the database): a subscriber's
        # session outlives a kill, so what a sink publishes after the restart is queued for it, however soon
        lines = [f"listener {self.port} 127.0.0.1", "persistence true", f"persistence_location {self.folder}/",
                 "autosave_interval 1", "autosave_on_changes true", "log_dest stderr",
                 "log_type error", "log_type warning", "log_type notice"]
        if os.geteuid() == 0:
            lines.append("user root")  # started as root it would become `mosquitto`, who cannot write tmp_path
        if self.users:
            passwords = self.folder / "passwd"
            passwords.write_text("")
            for user, password in self.users.items():
                subprocess.run([executable("mosquitto_passwd"), "-b", str(passwords), user, password], check=True,
                               capture_output=True)
            lines += ["allow_anonymous false", f"password_file {passwords}"]
        else:
            lines.append("allow_anonymous true")
        if self.tls is not None:
            lines += [f"cafile {self.tls.ca}", f"certfile {self.tls.certificate}", f"keyfile {self.tls.key}"]
        (self.folder / "mosquitto.conf").write_text("\n".join(lines) + "\n")

    def start(self) -> None:
        """Start the broker on its port and wait until it accepts connections (10 s at most)."""
        log = (self.folder / "mosquitto.log").open("ab")
        self.process = subprocess.Popen([executable("mosquitto"), "-c", str(self.folder / "mosquitto.conf")],
                                        stdout=log, stderr=log)
        log.close()
        until(self._listening, what=f"mosquitto listening on port {self.port}", within_s=10, every_s=0.05)

    def _listening(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"mosquitto ended: {(self.folder / 'mosquitto.log').read_text()[-500:]}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
        except OSError:
            return False
        return True

    @property
    def database(self) -> Path:
        """Where the broker saves its sessions and retained messages."""
        return self.folder / "mosquitto.db"

    def stop(self) -> None:
        """Kill the broker (SIGKILL: gone, as a crash) and wait for it."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[Mosquitto]:
    """An anonymous broker on a free loopback port, killed at the test's end."""
    broker = Mosquitto.launch(tmp_path / "mosquitto")
    try:
        yield broker
    finally:
        broker.stop()


class Subscriber:
    """A paho subscriber that keeps every message's topic, JSON payload and retain flag, in arrival order."""

    def __init__(self, port: int, topic: str, *, username: str | None = None, password: str | None = None,
                 client_id: str = "", ca_file: Path | None = None) -> None:
        self.messages: list[tuple[str, dict[str, Any], bool]] = []
        self._subscribed = threading.Event()
        # a named client keeps its session (clean_session False): it gets what came while it was away
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=not client_id,
                                  protocol=mqtt.MQTTv311)
        self.client.reconnect_delay_set(min_delay=1, max_delay=1)
        if username is not None:
            self.client.username_pw_set(username, password)
        if ca_file is not None:
            self.client.tls_set(ca_certs=str(ca_file))
        self.client.on_connect = lambda c, u, f, rc, p: c.subscribe(topic, qos=1)
        self.client.on_subscribe = lambda c, u, mid, rcs, p: self._subscribed.set()
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        if not self._subscribed.wait(10):
            raise RuntimeError("the subscriber was not subscribed within 10 s")

    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        self.messages.append((message.topic, json.loads(message.payload), bool(message.retain)))

    def wait_for(self, count: int, *, timeout: float = 30.0) -> list[tuple[str, dict[str, Any], bool]]:
        """The messages once `count` have arrived; a failure if they have not after `timeout`."""
        return until(lambda: len(self.messages) >= count and list(self.messages),
                     what=f"{count} MQTT messages", within_s=timeout)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@contextmanager
def mjpeg_camera(frames: list[Any], *, gap_s: float, pauses: dict[int, float] | None = None,
                 hold_s: float = 30.0) -> Iterator[str]:
    """An IP camera on loopback: an MJPEG stream over HTTP (multipart/x-mixed-replace) of `frames` (BGR uint8),
    `gap_s` apart, waiting `pauses[i]` s before frame i, then silent with the connection kept open for `hold_s`
    (a camera that hangs, not one that hangs up). Yields the stream's URL; the server stops at the end."""
    import http.server

    import cv2

    stop = threading.Event()

    class Camera(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "multipart/x-mixed-replace; boundary=frame")
            self.end_headers()
            for number, frame in enumerate(frames):
                if pauses and number in pauses:
                    stop.wait(pauses[number])
                jpeg = cv2.imencode(".jpg", frame)[1].tobytes()
                self.wfile.write(b"--frame\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n%s\r\n"
                                 % (len(jpeg), jpeg))
                self.wfile.flush()
                time.sleep(gap_s)
            stop.wait(hold_s)

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Camera)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/line1.mjpg"
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
