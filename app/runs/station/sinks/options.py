"""What each sink of a station is asked to do: one frozen record per sink, read from a station file's `sinks:` (and
the command line's `watch` flags, which the same reader turns into the same records: app.runs.station.file) and
given whole to the sink's constructor.

These records import nothing of the sinks themselves, so a station file is read (and its mistakes said) in a build
without paho-mqtt or asyncua. A password is never in a station file: `password_env` names the variable that holds
it, read when the sink is opened (app.runs.station.setup); a password in an MQTT URL is kept but never shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar
from urllib.parse import unquote, urlsplit

from app.errors import one_line

__all__ = ["FolderSinkOptions", "LogSinkOptions", "MqttSinkOptions", "OpcUaSinkOptions", "SinkOptions",
           "mqtt_url_options"]

MQTT_PORT, MQTTS_PORT = 1883, 8883


@dataclass(frozen=True)
class LogSinkOptions:
    """The verdict log in the output folder (app.runs.station.sinks.log): files rotated past `max_bytes`, `keep`
    old ones; `jsonl` and `csv` say which files are written."""

    sink: ClassVar[str] = "log"
    max_bytes: int = 16 << 20
    keep: int = 5
    fsync: bool = False
    jsonl: bool = True
    csv: bool = True


@dataclass(frozen=True)
class FolderSinkOptions:
    """The output folder's pictures and copies (app.runs.station.sinks.folder): which pictures (`save`, of
    app.runs.outputs.images.SAVE_KINDS), and the retention limits (None: no limit)."""

    sink: ClassVar[str] = "folder"
    save: tuple[str, ...] = ("mask", "overlay")
    keep_files: int | None = None
    keep_bytes: int | None = None


@dataclass(frozen=True)
class MqttSinkOptions:
    """The MQTT broker and how verdicts reach it (app.runs.station.sinks.mqtt). `password`: the URL's, or the
    environment's once the sink is opened (never shown); `password_env`: the variable that holds it."""

    sink: ClassVar[str] = "mqtt"
    host: str
    port: int = MQTT_PORT
    tls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    password_env: str | None = None
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    prefix: str = "seglens"
    client_id: str = ""
    keepalive_s: int = 30
    reconnect_max_s: float = 30.0
    window: int = 20  # verdicts in flight at most
    buffer_max_count: int = 100_000
    buffer_max_bytes: int = 64 << 20
    fsync: bool = False
    close_s: float = 5.0

    @property
    def where(self) -> str:
        """`host:port`, as the sink's messages name the broker."""
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class OpcUaSinkOptions:
    """The OPC UA server a PLC reads (app.runs.station.sinks.opcua): where it listens, its security policies, the
    server's certificate and key, the client certificates let in, a user. `password`: the environment's once the
    sink is opened (never shown)."""

    sink: ClassVar[str] = "opcua"
    endpoint: str
    security: tuple[str, ...] = ("none",)
    certificate: Path | None = None
    private_key: Path | None = None
    trusted_clients: Path | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    password_env: str | None = None
    allow_insecure: bool = False
    retry_max_s: float = 30.0
    close_grace_s: float = 0.5
    close_s: float = 5.0


SinkOptions = LogSinkOptions | MqttSinkOptions | OpcUaSinkOptions | FolderSinkOptions


def mqtt_url_options(url: str, *, tls: bool = False) -> MqttSinkOptions:
    """The broker of `mqtt://[user[:password]@]host[:port]` (`mqtts://`, or `tls`: TLS, port 8883 unless given).
    ValueError naming the URL (never its password) when it is not one."""
    parts = urlsplit(url)
    shown_url = url.rsplit("@", 1)[-1]
    if parts.scheme not in ("mqtt", "mqtts") or not parts.hostname:
        raise ValueError(f"MQTT URL {shown_url!r}: expected mqtt://host[:port] or mqtts://host[:port]")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"MQTT URL {shown_url!r}: {one_line(exc)}") from exc
    secure = tls or parts.scheme == "mqtts"
    return MqttSinkOptions(host=parts.hostname, port=port or (MQTTS_PORT if secure else MQTT_PORT), tls=secure,
                           username=unquote(parts.username) if parts.username else None,
                           password=unquote(parts.password) if parts.password else None)
