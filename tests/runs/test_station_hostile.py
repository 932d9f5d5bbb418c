"""Station mode against a hostile user (issue 29's audit): what a station file, the disk or an input's name can do
to the station, and what must never reach its log, its MQTT payload or its messages (a password, an input's path)."""

from __future__ import annotations

import pytest

from app.runs.station_file import StationFileError, read_station_file

GOOD = "name: line-1\nmodel: surface_anomaly\nsource: {watch: incoming}\nout: out\n"


@pytest.mark.parametrize("url", ["mqtt://op:hunter2@broker/x", "mqtts://op:hunter2@broker:88 83",
                                 "http://op:hunter2@broker", "mqtt://op:hun/ter2@broker/x"])
def test_a_refused_mqtt_url_is_one_line_without_its_password(tmp_path, url):
    # the refusal echoed the URL whole: `got mqtt://op:hunter2@broker/x`
    path = tmp_path / "STATION.yaml"
    path.write_text(GOOD + f"sinks: {{mqtt: {{url: '{url}'}}}}\n")
    with pytest.raises(StationFileError) as caught:
        read_station_file(path)
    message = str(caught.value)
    assert "'sinks.mqtt.url' must be mqtt://HOST[:PORT] or mqtts://HOST[:PORT], got " in message
    assert "ter2" not in message and "op:" not in message and "://***@broker" in message
