"""`watch MODEL SOURCE --out DIR --mqtt URL --opcua ENDPOINT` and the STATION.yaml that says the same are one
station: the command line's flags are read by the station file's reader (app.runs.station.file), so both give equal
records, every sink's options included (app.runs.station.sinks.options)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.cli import build_parser
from app.cli.watch import _station_file
from app.runs.station.file import read_station_file
from app.runs.station.sinks.options import FolderSinkOptions, LogSinkOptions, MqttSinkOptions, OpcUaSinkOptions

STATION = """\
name: line-3
model: model.onnx
source: {watch: in, settle_s: 0.2, recursive: true}
out: out
stall_after_s: 9
anonymize: false
sinks:
  log: {}
  folder: {}
  mqtt: {url: 'mqtt://op:hunter2@broker:1884'}
  opcua: {endpoint: 'opc.tcp://127.0.0.1:4841/seglens/'}
"""


def test_a_station_file_and_the_same_flags_give_equal_records(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in").mkdir()
    (tmp_path / "STATION.yaml").write_text(STATION)
    args = build_parser().parse_args([
        "watch", "model.onnx", "in", "--out", "out", "--settle", "0.2", "--recursive", "--name", "line-3",
        "--stall", "9", "--no-anonymize", "--mqtt", "mqtt://op:hunter2@broker:1884",
        "--opcua", "opc.tcp://127.0.0.1:4841/seglens/"])
    from_flags, from_file = _station_file(args), read_station_file(tmp_path / "STATION.yaml")
    assert from_flags.path is None
    assert replace(from_flags, path=from_file.path) == from_file
    assert from_flags.sinks == (
        LogSinkOptions(), FolderSinkOptions(),
        MqttSinkOptions(host="broker", port=1884, username="op", password="hunter2"),
        OpcUaSinkOptions(endpoint="opc.tcp://127.0.0.1:4841/seglens/"))


def test_a_password_in_the_mqtt_url_is_kept_and_never_shown(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["watch", "model.onnx", "rtsp://cam/1", "--out", "out",
                                      "--mqtt", "mqtts://op:hunter2@broker"])
    station = _station_file(args)
    mqtt = station.sink_options(MqttSinkOptions)
    assert mqtt is not None and (mqtt.password, mqtt.tls, mqtt.port) == ("hunter2", True, 8883)
    assert "hunter2" not in repr(station)


@pytest.mark.parametrize(("sinks", "expected"), [
    # the file's own user (or its password_env) wins over the URL's user and password, both
    ("{mqtt: {url: 'mqtt://op:hunter2@broker', username: plc}}",
     lambda _: MqttSinkOptions(host="broker", username="plc")),
    ("{mqtt: {url: 'mqtt://op:hunter2@broker', password_env: MQTT_PW}}",
     lambda _: MqttSinkOptions(host="broker", password_env="MQTT_PW")),
    # TLS asked by the file: the port follows the scheme it implies unless the URL gives one
    ("{mqtt: {url: 'mqtt://broker', tls: true}}", lambda _: MqttSinkOptions(host="broker", port=8883, tls=True)),
    ("{mqtt: {url: 'mqtt://broker:1883', tls: {ca: ca.pem}, topic_prefix: plant, client_id: c-1}}",
     lambda base: MqttSinkOptions(host="broker", tls=True, prefix="plant", client_id="c-1", ca_file=base / "ca.pem")),
])
def test_the_mqtt_section_read_as_its_record(tmp_path, sinks, expected):
    path = tmp_path / "STATION.yaml"
    path.write_text(f"model: m.onnx\nsource: {{watch: in}}\nout: out\nsinks: {sinks}\n")
    assert read_station_file(path).sinks == (expected(tmp_path),)


def test_a_port_that_is_no_port_is_refused_when_the_file_is_read(tmp_path):
    # it was refused only once the model was loaded and the sinks opened
    from app.runs.station.file import StationFileError

    path = tmp_path / "STATION.yaml"
    path.write_text("model: m.onnx\nsource: {watch: in}\nout: out\nsinks: {mqtt: {url: 'mqtt://op:pw@broker:99999'}}\n")
    with pytest.raises(StationFileError) as caught:
        read_station_file(path)
    assert str(caught.value) == f"{path}: 'sinks.mqtt': MQTT URL 'broker:99999': Port out of range 0-65535"
