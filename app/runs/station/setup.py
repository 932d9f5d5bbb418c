"""From a StationFile (app.runs.station.file) to a running Station: the spec with its limits, the warmed session,
the sinks, the source. The CLI's `watch` and the viewer's Station view both start stations through here.

The sources and the sinks that need an optional package (OpenCV's capture is always there; watchdog and paho-mqtt
come with the station extra, asyncua with opcua, harvesters with genicam) are imported only by the station that
uses them; one that is not installed is app.errors.need_extra's line naming its extra, not a traceback.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from app.errors import need_extra
from app.io.sources.capture import STALL_S
from app.runs.station.file import StationFile
from app.runs.station.privacy import StationPrivacy, station_privacy
from app.runs.station.run import Station, StationRefused
from app.runs.station.sinks.options import (
    FolderSinkOptions,
    LogSinkOptions,
    MqttSinkOptions,
    OpcUaSinkOptions,
    SinkOptions,
)

if TYPE_CHECKING:
    from app.inference.model.runtime_options import RuntimeOptions
    from app.inference.model.session import ModelSession
    from app.inference.model.spec import ModelSpec
    from app.io.sources import Source
    from app.io.sources.watch import AlreadyDone
    from app.runs.station.sinks import Sink, StationVerdict
    from app.runs.station.sinks.folder import Pictures
    from app.runs.station.stats import StationStats


def station_spec(station: StationFile) -> ModelSpec:
    """The model's spec under the station's sidecar, its `verdict:` (when given) in place of the sidecar's."""
    from app.inference.describe.bundled import resolve_model
    from app.inference.model.builder import load_spec

    return load_spec(resolve_model(station.model), station.sidecar, verdict=station.verdict)


def open_station(station: StationFile, *, model: ModelSession | None = None, runtime: RuntimeOptions | None = None,
                 progress: Callable[[StationStats], None] | None = None,
                 on_verdict: Callable[[StationVerdict, Pictures], None] | None = None,
                 stop: threading.Event | None = None) -> Station:
    """The station, its session opened and warmed (as `seglens-cli run` opens one) unless `model` is given. Its
    sinks are opened by `Station.run` once it holds the output folder's lock (an MQTT sink's buffer is in it)."""
    if model is None:
        from app.inference.runtime.session import open_session

        model = open_session(station_spec(station), station.device, runtime=runtime)
    opened, privacy = model, station_privacy(station.anonymize)  # the key read before anything runs
    return Station(name=station.name, model=model, open_source=source_opener(station), out=station.out,
                   open_sinks=lambda: make_sinks(station, opened, privacy=privacy), progress=progress,
                   on_verdict=on_verdict, stop=stop, stall_after_s=station.stall_after_s, privacy=privacy)


def make_sinks(station: StationFile, model: ModelSession, *, privacy: StationPrivacy | None = None) -> list[Sink]:
    """The station's sinks, in the file's order (a log in the output folder, MQTT, OPC UA, the output folder).
    One refused (a bad certificate, an unset password variable): those opened before it are closed, not leaked."""
    sinks: list[Sink] = []
    try:
        for options in station.sinks:
            sinks.append(_make_sink(station, model, options, privacy))
    except BaseException:
        for sink in sinks:
            sink.close()
        raise
    return sinks


def _make_sink(station: StationFile, model: ModelSession, options: SinkOptions,
               privacy: StationPrivacy | None) -> Sink:
    if isinstance(options, LogSinkOptions):
        from app.runs.station.sinks.log import LogSink

        return LogSink(station.out, options)
    if isinstance(options, FolderSinkOptions):
        from app.runs.station.sinks.folder import FolderSink

        return FolderSink(station.out, model.spec, options, privacy=privacy)
    if isinstance(options, MqttSinkOptions):
        need_extra("paho.mqtt", extra="station", feature="the MQTT sink")
        from app.runs.station.sinks.mqtt import MqttSink

        mqtt = replace(options, password=_password(station, "sinks.mqtt", options))
        # QoS 1, retained last, on-disk buffer (app.runs.station.sinks.mqtt)
        return _refused_as_key(station, "sinks.mqtt", lambda: MqttSink(station.out, mqtt))
    need_extra("asyncua", extra="opcua", feature="the OPC UA sink")
    from app.runs.station.sinks.opcua import OpcUaSink

    opcua = replace(options, password=_password(station, "sinks.opcua", options))
    # the last verdict, counters, heartbeat (app.runs.station.sinks.opcua)
    return _refused_as_key(station, "sinks.opcua", lambda: OpcUaSink(opcua, station=station.name))


def _password(station: StationFile, key: str, options: MqttSinkOptions | OpcUaSinkOptions) -> str | None:
    """The password of the environment variable the sink's `password_env` names (the URL's when it names none)."""
    variable = options.password_env
    if variable is None:
        return options.password
    if variable not in os.environ:
        raise StationRefused(f"{station.path or 'the station'}: '{key}.password_env' names {variable}, "
                             "which is not set in the environment")
    return os.environ[variable]


def _refused_as_key(station: StationFile, key: str, make: Callable[[], Sink]) -> Sink:
    """The sink `make` opens; its ValueError (a refused configuration) as one line naming the station's key."""
    try:
        return make()
    except ValueError as exc:
        raise StationRefused(f"{station.path or 'the station'}: '{key}': {exc}") from exc


def source_opener(station: StationFile) -> Callable[[AlreadyDone | None], Source]:
    """A function that opens the station's source once its journal is open (given the journal's `done`)."""
    spec = station.source

    def open_source(already_done: AlreadyDone | None) -> Source:
        # a camera triggered per part is quiet between parts: it ends stalled after the station's own stall_after_s
        stall_s = station.stall_after_s if station.stall_after_s is not None else STALL_S
        if spec.kind == "watch":
            need_extra("watchdog", extra="station", feature="a watch folder")
            from app.io.sources.watch import WatchSource

            return WatchSource(Path(str(spec.target)), settle_s=spec.settle_s, recursive=spec.recursive,
                               polling=spec.polling, exclude=[station.out], already_done=already_done)
        if spec.kind == "genicam":
            need_extra("harvesters", extra="genicam", feature="a GenICam camera")
            from app.io.sources.genicam import GenICamSource

            return GenICamSource(Path(str(spec.target)), device=spec.device, features=dict(spec.features),
                                 stall_s=stall_s)
        from app.io.sources.video import VideoSource

        return VideoSource(spec.target, realtime=spec.realtime, stall_s=stall_s)

    return open_source
