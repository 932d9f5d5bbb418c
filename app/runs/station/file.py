"""STATION.yaml: a saved station (its source, model, limits and sinks), read and checked key by key.

    name: line-3                      # the station's name: the MQTT topic's part, the log's field
    model: surface_anomaly            # a .onnx path (relative to this file) or a bundled model's name
    sidecar: line3.yaml               # optional: another sidecar than <model>.yaml
    verdict: {fail_if: [...], review_if: [...]}   # optional: the sidecar's verdict section, replaced
    device: auto                      # auto | cpu | cuda | cuda:N
    source: {watch: incoming/, settle_s: 0.5, recursive: false, polling: false}
        # or {video: part.mp4 | rtsp://…, realtime: true}, or {camera: 0}, or a GenICam camera through its
        # vendor's GenTL producer: {genicam: vendor.cti, device: 0 | SERIAL, features: {PixelFormat: Mono8}}
    out: station-out/                 # the output folder: journal, logs, pictures (one station per folder)
    stall_after_s: 30                 # optional: no frame for this long is an alarm (a camera/stream ends)
    anonymize: true                   # optional: every file's frame by its pseudonym (default: DICOM, NIfTI only;
                                      # false: none) — app.runs.station.privacy
    sinks:
      log: {max_bytes: 16000000, keep: 5, fsync: false, jsonl: true, csv: true}   # in out/ (app.runs.station.sinks.log)
      mqtt: {url: mqtts://host:8883, topic_prefix: seglens, username: u, password_env: MQTT_PASSWORD,
             tls: {ca: ca.pem, cert: c.pem, key: k.pem}, client_id: line-3}   # QoS 1 (app.runs.station.sinks.mqtt)
      folder: {save: [mask, overlay], keep_files: 5000, keep_bytes: 2000000000}
      opcua: {endpoint: 'opc.tcp://127.0.0.1:4840/seglens/', security: Basic256Sha256_SignAndEncrypt,
              certificate: server.der, private_key: server-key.pem, trusted_clients: plc-certs/, username: plc,
              password_env: OPCUA_PASSWORD, allow_insecure: false}   # an OPC UA server a PLC reads (sinks.opcua)

Paths are relative to the station file. Every key is checked: an unknown key, a wrong type or a bad value is one
line naming the file and the key (`STATION.yaml: 'source.settle_s' must be a number >= 0, got 'soon'`), as a
sidecar's are. A password is never in the file: `password_env` names the environment variable that holds it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from app.errors import SegLensError, shown
from app.guard.yaml_load import YAMLRefused, read_yaml
from app.inference.model.rules import VerdictRules
from app.runs.outputs.images import SAVE_KINDS
from app.runs.station.sinks.options import (
    FolderSinkOptions,
    LogSinkOptions,
    MqttSinkOptions,
    OpcUaSinkOptions,
    SinkOptions,
    mqtt_url_options,
)

MAX_BYTES = 1 << 20  # a station file is a short YAML file
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # an MQTT topic level and a file name part
_TOP = ("name", "model", "sidecar", "verdict", "device", "source", "out", "stall_after_s", "sinks", "anonymize")
_SOURCE = {"watch": ("settle_s", "recursive", "polling"), "video": ("realtime",), "camera": (),
           "genicam": ("device", "features")}
MAX_FEATURES = 64  # GenICam feature values set before acquisition: a few in practice
_MQTT = ("url", "topic_prefix", "username", "password_env", "tls", "client_id")
_TLS = ("ca", "cert", "key")
_OPCUA = ("endpoint", "security", "certificate", "private_key", "trusted_clients", "username", "password_env",
          "allow_insecure")
_OPCUA_POLICIES = ("none", "Basic256Sha256_Sign", "Basic256Sha256_SignAndEncrypt")
Options = TypeVar("Options", LogSinkOptions, MqttSinkOptions, OpcUaSinkOptions, FolderSinkOptions)


class StationFileError(SegLensError):
    """A station file cannot be read, or a key in it is wrong: the message names the file and the key."""


@dataclass(frozen=True)
class SourceSpec:
    """Where frames come from: kind "watch" (a folder), "video" (a file or URL), "camera" (an index) or "genicam"
    (the GenTL producer's path; `device` its camera's index or serial number, `features` set in order)."""

    kind: str
    target: str | Path | int
    settle_s: float = 0.5
    recursive: bool = False
    polling: bool = False
    realtime: bool = True
    device: int | str = 0
    features: tuple[tuple[str, str | int | float | bool], ...] = ()  # (GenICam feature, value), in order


@dataclass(frozen=True)
class StationFile:
    """A station file's contents, checked; paths made absolute against the file's folder. `sinks`: each sink's
    options as its record (app.runs.station.sinks.options), in the file's order, given whole to the sink."""

    path: Path | None
    name: str
    model: Path | str
    out: Path
    source: SourceSpec
    sidecar: Path | None = None
    verdict: VerdictRules | None = None  # in place of the sidecar's verdict section
    device: str = "auto"
    stall_after_s: float | None = None
    anonymize: bool | None = None  # True every file by its pseudonym, None DICOM and NIfTI only, False none
    sinks: tuple[SinkOptions, ...] = (LogSinkOptions(), FolderSinkOptions())

    def sink_options(self, kind: type[Options]) -> Options | None:
        """The options of the station's sink of that kind (`station.sink_options(FolderSinkOptions)`), or None."""
        return next((options for options in self.sinks if isinstance(options, kind)), None)


def read_station_file(path: Path) -> StationFile:
    """The station file at `path`, checked (StationFileError in one line otherwise). Read by the one YAML loader
    (app.guard.yaml_load): a FIFO or a device refused without waiting, its size capped, anchors and aliases (an
    alias bomb), deep nesting and duplicate keys refused at their line."""
    try:
        values = read_yaml(path, limit=MAX_BYTES, what="station file")
    except YAMLRefused as exc:
        raise StationFileError(str(exc)) from None
    except OSError as exc:
        raise StationFileError(f"{path}: cannot read the station file ({exc.strerror or exc})") from exc
    return parse_station(values, path=path, base=path.parent)


def parse_station(values: Any, *, path: Path | None, base: Path) -> StationFile:
    """A StationFile from the mapping `values` (a station file's, or one the CLI built from its arguments)."""
    check = _Checker(path)
    top = check.mapping("", values, _TOP)
    name = check.text("name", top.get("name", path.stem if path is not None else "station"))
    if not NAME.match(name):
        check.refuse("name", f"must be letters, digits, '_', '.' or '-' (a topic part), got {shown(name)}")
    for key in ("model", "source", "out"):
        if key not in top:
            check.refuse(key, "is missing")
    model = check.text("model", top["model"])
    sidecar = top.get("sidecar")
    verdict = top.get("verdict")
    stall = top.get("stall_after_s")
    anonymize = top.get("anonymize")
    return StationFile(
        path=path, name=name, model=_model(base, model), out=base / check.text("out", top["out"]),
        source=_source(check, top["source"], base), device=_device(check, top.get("device", "auto")),
        sidecar=None if sidecar is None else base / check.text("sidecar", sidecar),
        verdict=None if verdict is None else _verdict(check, verdict, path),
        stall_after_s=None if stall is None else check.number("stall_after_s", stall, positive=True),
        anonymize=None if anonymize is None else check.flag("anonymize", anonymize),
        sinks=_sinks(check, top.get("sinks", {"log": {}, "folder": {}}), base))


def _model(base: Path, text: str) -> Path | str:
    """A path relative to the station file when it names a file there, else the text (a bundled name)."""
    candidate = base / text
    return candidate if candidate.exists() or text.endswith(".onnx") or "/" in text else text


def _device(check: _Checker, raw: Any) -> str:
    from app.inference.runtime.session import DeviceRequest

    try:
        return str(DeviceRequest.parse(check.text("device", raw)))
    except ValueError:
        check.refuse("device", f"must be auto, cpu, cuda or cuda:N, got {_kind(raw)}")


def _verdict(check: _Checker, raw: Any, path: Path | None) -> VerdictRules:
    """The `verdict:` section, each rule list checked as a sidecar's (app.inference.model.sidecar.rules) in the
    sidecar's words; the class names are resolved when the model's spec is built."""
    from app.inference.model.sidecar import rules
    from app.inference.model.validators import KeyedValueError

    values = check.mapping("verdict", raw, ("fail_if", "review_if"))
    parsed: dict[str, tuple[dict[str, Any], ...]] = {}
    for key in values:
        try:
            parsed[key] = rules(values[key])
        except KeyedValueError as exc:  # a problem inside one rule: `verdict.fail_if[0].score_above`
            check.refuse(f"verdict.{key}{exc.subkey}", str(exc))
        except (ValueError, TypeError) as exc:
            check.refuse(f"verdict.{key}", str(exc))
    return VerdictRules(fail_if=parsed.get("fail_if"), review_if=parsed.get("review_if"),
                        source=str(path) if path is not None else "the station file")


def _source(check: _Checker, raw: Any, base: Path) -> SourceSpec:
    kinds = [kind for kind in _SOURCE if isinstance(raw, Mapping) and kind in raw]
    if len(kinds) != 1:
        check.refuse("source", "must name exactly one of watch: FOLDER, video: FILE|URL, camera: N, "
                               "genicam: PRODUCER.cti")
    kind = kinds[0]
    values = check.mapping("source", raw, (kind, *_SOURCE[kind]))
    if kind == "camera":
        return SourceSpec("camera", check.integer("source.camera", values["camera"], least=0))
    if kind == "genicam":
        return _genicam(check, values, base)
    if kind == "video":
        text = check.text("source.video", values["video"])
        target: str | Path = text if "://" in text else base / text
        return SourceSpec("video", target, realtime=check.flag("source.realtime", values.get("realtime", True)))
    return SourceSpec("watch", base / check.text("source.watch", values["watch"]),
                      settle_s=check.number("source.settle_s", values.get("settle_s", 0.5)),
                      recursive=check.flag("source.recursive", values.get("recursive", False)),
                      polling=check.flag("source.polling", values.get("polling", False)))


def _genicam(check: _Checker, values: Mapping[str, Any], base: Path) -> SourceSpec:
    """A GenICam camera: the producer's path, the camera (an index, or a serial number as text), its features."""
    device = values.get("device", 0)
    if isinstance(device, str):
        device = check.text("source.device", device)
    else:
        device = check.integer("source.device", device, least=0)
    return SourceSpec("genicam", base / check.text("source.genicam", values["genicam"]), device=device,
                      features=_features(check, values.get("features")))


def _features(check: _Checker, raw: Any) -> tuple[tuple[str, str | int | float | bool], ...]:
    """`source.features`: GenICam feature names and the values set in order (text, number or true/false)."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping) or len(raw) > MAX_FEATURES:
        check.refuse("source.features", f"must be a mapping of up to {MAX_FEATURES} GenICam features and their "
                                        f"values, got {_kind(raw)}")
    features: list[tuple[str, str | int | float | bool]] = []
    for name, value in raw.items():
        key = f"source.features.{shown(str(name))}"
        feature = check.text(key, name)
        finite = not isinstance(value, float) or math.isfinite(value)
        if not isinstance(value, str | int | float | bool) or not finite:
            check.refuse(key, f"must be a text, a number or true/false, got {_kind(value)}")
        features.append((feature, value))
    return tuple(features)


def _sinks(check: _Checker, raw: Any, base: Path) -> tuple[SinkOptions, ...]:
    """Each sink's options as its record, in the file's order."""
    sinks = check.mapping("sinks", raw, ("log", "mqtt", "folder", "opcua"))
    readers: dict[str, Callable[[_Checker, Any, Path], SinkOptions]] = {
        "log": _log, "mqtt": _mqtt, "folder": _folder, "opcua": _opcua}
    out = tuple(readers[name](check, sinks[name], base) for name in sinks)
    if not out:  # a station that judges every part and tells no one
        check.refuse("sinks", "names none: the verdicts would reach nobody (give log, mqtt, folder or opcua)")
    return out


def _log(check: _Checker, raw: Any, base: Path) -> LogSinkOptions:
    values = check.mapping("sinks.log", raw or {}, ("max_bytes", "keep", "fsync", "jsonl", "csv"))
    options = LogSinkOptions(
        max_bytes=check.integer("sinks.log.max_bytes", values.get("max_bytes", LogSinkOptions.max_bytes), least=1024),
        keep=check.integer("sinks.log.keep", values.get("keep", LogSinkOptions.keep), least=0),
        fsync=check.flag("sinks.log.fsync", values.get("fsync", False)),
        jsonl=check.flag("sinks.log.jsonl", values.get("jsonl", True)),
        csv=check.flag("sinks.log.csv", values.get("csv", True)))
    if not (options.jsonl or options.csv):
        check.refuse("sinks.log", "writes neither jsonl nor csv: give one of them")
    return options


def _mqtt(check: _Checker, raw: Any, base: Path) -> MqttSinkOptions:
    values = check.mapping("sinks.mqtt", raw, _MQTT)
    if "url" not in values:
        check.refuse("sinks.mqtt.url", "is missing (mqtt://HOST:PORT or mqtts://HOST:PORT)")
    url = check.text("sinks.mqtt.url", values["url"])
    if not re.match(r"^mqtts?://[^/\s]+$", url):
        hidden = re.sub(r"://.*@", "://***@", url)  # a password in the URL (a / in it too) never in a message
        check.refuse("sinks.mqtt.url", f"must be mqtt://HOST[:PORT] or mqtts://HOST[:PORT], got {shown(hidden)}")
    text = {key: check.text(f"sinks.mqtt.{key}", values[key])
            for key in ("topic_prefix", "username", "password_env", "client_id") if key in values}
    tls = values.get("tls")
    files: dict[str, Path] = {}
    if tls is not None and not isinstance(tls, bool):
        given = check.mapping("sinks.mqtt.tls", tls, _TLS)
        files = {key: base / check.text(f"sinks.mqtt.tls.{key}", given[key]) for key in _TLS if key in given}
    try:  # TLS asked by the file: the URL's scheme follows (mqtts:// and its port 8883 unless given)
        broker = mqtt_url_options(url, tls=bool(tls))
    except ValueError as exc:
        raise StationFileError(f"{check.where}'sinks.mqtt': {exc}") from None
    if "username" in text or "password_env" in text:  # the file's user wins over the URL's, password and all
        broker = replace(broker, username=None, password=None)
    return replace(broker, username=text.get("username", broker.username), password_env=text.get("password_env"),
                   prefix=text.get("topic_prefix", "seglens"), client_id=text.get("client_id", ""),
                   ca_file=files.get("ca"), cert_file=files.get("cert"), key_file=files.get("key"))


def _opcua(check: _Checker, raw: Any, base: Path) -> OpcUaSinkOptions:
    values = check.mapping("sinks.opcua", raw, _OPCUA)
    if "endpoint" not in values:
        check.refuse("sinks.opcua.endpoint", "is missing (opc.tcp://HOST:PORT/PATH)")
    endpoint = check.text("sinks.opcua.endpoint", values["endpoint"])
    if not re.match(r"^opc\.tcp://(\[[0-9A-Fa-f:.]+\]|[^/\s:\[\]]+)(:\d{1,5})?(/\S*)?$", endpoint):
        check.refuse("sinks.opcua.endpoint", f"must be opc.tcp://HOST[:PORT][/PATH], got {shown(endpoint)}")
    security = values.get("security", "none")
    policies = [security] if isinstance(security, str) else security
    if not isinstance(policies, list) or not policies or any(p not in _OPCUA_POLICIES for p in policies):
        check.refuse("sinks.opcua.security", f"must be one or a list of {', '.join(_OPCUA_POLICIES)}, got "
                     f"{_kind(security)}")
    paths = {key: base / check.text(f"sinks.opcua.{key}", values[key])
             for key in ("certificate", "private_key", "trusted_clients") if key in values}
    text = {key: check.text(f"sinks.opcua.{key}", values[key]) for key in ("username", "password_env")
            if key in values}
    return OpcUaSinkOptions(
        endpoint=endpoint, security=tuple(policies), certificate=paths.get("certificate"),
        private_key=paths.get("private_key"), trusted_clients=paths.get("trusted_clients"),
        username=text.get("username"), password_env=text.get("password_env"),
        allow_insecure=check.flag("sinks.opcua.allow_insecure", values.get("allow_insecure", False)))


def _folder(check: _Checker, raw: Any, base: Path) -> FolderSinkOptions:
    values = check.mapping("sinks.folder", raw or {}, ("save", "keep_files", "keep_bytes"))
    save = values.get("save", list(FolderSinkOptions.save))
    if not isinstance(save, list) or any(kind not in SAVE_KINDS for kind in save):
        check.refuse("sinks.folder.save", f"must be a list of {', '.join(SAVE_KINDS)}, got {shown(str(save))}")
    keep = {key: check.integer(f"sinks.folder.{key}", values[key], least=1)
            for key in ("keep_files", "keep_bytes") if key in values}
    return FolderSinkOptions(save=tuple(save), keep_files=keep.get("keep_files"), keep_bytes=keep.get("keep_bytes"))


class _Checker:
    """One-line refusals naming the file and the key."""

    def __init__(self, path: Path | None) -> None:
        self.where = f"{path}: " if path is not None else ""

    def refuse(self, key: str, problem: str) -> NoReturn:
        raise StationFileError(f"{self.where}'{key}' {problem}" if key else f"{self.where}{problem}")

    def mapping(self, key: str, raw: Any, known: tuple[str, ...]) -> Mapping[str, Any]:
        if not isinstance(raw, Mapping):
            self.refuse(key, f"must be a mapping of keys ({', '.join(known)}), got {_kind(raw)}")
        for name in raw:
            if name not in known:
                full = f"{key}.{name}" if key else str(name)
                raise StationFileError(f"{self.where}unknown key '{shown(full)}' (expected one of: "
                                       f"{', '.join(known)})")
        return raw

    def text(self, key: str, raw: Any) -> str:
        if not isinstance(raw, str) or not raw.strip():
            self.refuse(key, f"must be a non-empty text, got {_kind(raw)}")
        return str(raw)

    def flag(self, key: str, raw: Any) -> bool:
        if not isinstance(raw, bool):
            self.refuse(key, f"must be true or false, got {_kind(raw)}")
        return bool(raw)

    def number(self, key: str, raw: Any, *, positive: bool = False) -> float:
        ok = isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw)
        if not ok or raw < 0 or (positive and raw == 0):
            self.refuse(key, f"must be a number {'> 0' if positive else '>= 0'}, got {_kind(raw)}")
        return float(raw)

    def integer(self, key: str, raw: Any, *, least: int) -> int:
        if not isinstance(raw, int) or isinstance(raw, bool) or raw < least:
            self.refuse(key, f"must be a whole number >= {least}, got {_kind(raw)}")
        return int(raw)


def _kind(raw: Any) -> str:
    """What a wrong value is, shortly: `'soon'`, `3.5`, `a list`, `nothing`."""
    if raw is None:
        return "nothing"
    if isinstance(raw, str):
        return repr(shown(raw[:60]))
    if isinstance(raw, bool | int | float):
        return str(raw).lower() if isinstance(raw, bool) else repr(raw)
    return "a list" if isinstance(raw, list) else "a mapping" if isinstance(raw, Mapping) else type(raw).__name__
