"""A feature whose extra is not installed refuses in one line naming the extra (app.errors.need_extra).

Each entry point runs `seglens-cli` in a subprocess whose import system says one distribution is not installed (a
meta-path finder that raises ModuleNotFoundError for its modules, as a Python without it would), and the command's
last line is the extra's, with a non-zero exit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO
from PIL import Image

from app.errors import MissingExtra, extra_line, need_extra

# Runs the CLI with the distributions named in argv[1] (comma-separated top-level packages) missing.
WITHOUT = """
import sys

BLOCKED = set(sys.argv[1].split(","))


class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
from app.cli import main

sys.exit(main(sys.argv[2:]))
"""


def cli_without(missing: str, args: list[str], tmp_path: Path) -> tuple[int, list[str]]:
    """`seglens-cli ARGS` where the packages `missing` are not installed: the exit code and stderr's lines."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {key: value for key, value in os.environ.items() if not key.startswith("SEGLENS_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), SEGLENS_SETTINGS=str(home / "none.yaml"))
    done = subprocess.run([sys.executable, "-c", WITHOUT, missing, *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)
    return done.returncode, done.stderr.strip().splitlines()


def line(feature: str, extra: str) -> str:
    return f'error: {feature} needs the \'{extra}\' extra: pip install "seglens[{extra}]"'


@pytest.mark.parametrize(("missing", "node"), [
    ("pynetdicom", "dimse://ORTHANC@127.0.0.1:9"),
    ("dicomweb_client", "dicomweb+http://127.0.0.1:9/dicom-web"),
])
def test_pacs_echo_without_the_pacs_extra_is_one_line_naming_it(tmp_path, missing, node):
    code, lines = cli_without(missing, ["pacs", "echo", node], tmp_path)
    assert code == 2
    assert lines == [line("PACS", "pacs")]


def test_a_password_from_the_keyring_without_the_pacs_extra_is_one_line_naming_it(tmp_path):
    node = "dicomweb+http://127.0.0.1:9/dicom-web?auth=basic&user=reader"
    code, lines = cli_without("keyring", ["pacs", "echo", node], tmp_path)
    assert code == 2
    assert len(lines) == 1
    assert lines[0].startswith(f"error: pacs {node}: a password kept in the OS keyring needs the 'pacs' extra: "
                               'pip install "seglens[pacs]"')
    assert lines[0].endswith("(or set SEGLENS_PACS_SECRET)")


@pytest.mark.parametrize("server", ["grpc://127.0.0.1:9", "http://127.0.0.1:9"])
def test_run_on_a_remote_server_without_the_remote_extra_is_one_line_naming_it(tmp_path, server):
    image = tmp_path / "cells.png"
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(image)
    code, lines = cli_without("tritonclient", ["run", "nuclei", str(image), "--out", str(tmp_path / "out"),
                                               "--device", "remote", "--server", server], tmp_path)
    assert code == 2
    assert lines[-1] == line("remote inference", "remote")
    assert not (tmp_path / "out" / "cells.png_mask.png").exists()


def test_run_on_ray_without_the_ray_extra_is_one_line_naming_it(tmp_path):
    image = tmp_path / "cells.png"
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(image)
    code, lines = cli_without("ray", ["run", "nuclei", str(image), "--out", str(tmp_path / "out"), "--ray"], tmp_path)
    assert code == 2
    assert lines[-1] == line("seglens-cli run --ray", "ray")


def test_serve_without_the_serve_extra_is_one_line_naming_it(tmp_path):
    code, lines = cli_without("kserve", ["serve", "nuclei"], tmp_path)
    assert code == 2
    assert lines == [line("seglens-cli serve", "serve")]


def _watch(tmp_path: Path, *extra: str) -> list[str]:
    folder = tmp_path / "in"
    folder.mkdir()
    return ["watch", "surface_anomaly", str(folder), "--out", str(tmp_path / "out"), "--device", "cpu",
            "--no-progress", *extra]


def test_watch_on_a_folder_without_the_station_extra_is_one_line_naming_it(tmp_path):
    code, lines = cli_without("watchdog", _watch(tmp_path), tmp_path)
    assert code == 2
    assert lines[-1] == line("a watch folder", "station")


def test_watch_with_mqtt_without_the_station_extra_is_one_line_naming_it(tmp_path):
    code, lines = cli_without("paho", _watch(tmp_path, "--mqtt", "mqtt://127.0.0.1:9"), tmp_path)
    assert code == 2
    assert lines[-1] == line("the MQTT sink", "station")


def test_watch_with_opcua_without_the_opcua_extra_is_one_line_naming_it(tmp_path):
    code, lines = cli_without("asyncua", _watch(tmp_path, "--opcua", "opc.tcp://127.0.0.1:9/seglens/"), tmp_path)
    assert code == 2
    assert lines[-1] == line("the OPC UA sink", "opcua")


# --- need_extra itself -------------------------------------------------------------------------------------------


def test_need_extra_is_silent_for_an_installed_package_and_names_the_extra_for_a_missing_one():
    need_extra("numpy", extra="core", feature="arrays")  # installed: nothing said
    with pytest.raises(MissingExtra) as caught:
        need_extra("seglens_no_such_package.sub", extra="pacs", feature="PACS")
    assert str(caught.value) == 'PACS needs the \'pacs\' extra: pip install "seglens[pacs]"'
    assert (caught.value.feature, caught.value.extra) == ("PACS", "pacs")


def test_need_extra_names_the_extra_for_a_package_blocked_in_sys_modules(monkeypatch):
    monkeypatch.setitem(sys.modules, "seglens_blocked", None)  # as `import seglens_blocked` would fail
    with pytest.raises(MissingExtra, match=r"^the MQTT sink needs the 'station' extra"):
        need_extra("seglens_blocked", extra="station", feature="the MQTT sink")


def test_a_frozen_build_says_it_does_not_ship_the_extra(monkeypatch):
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert extra_line(feature="a GenICam camera", extra="genicam") == (
        "a GenICam camera needs the 'genicam' extra, which this build does not ship")
