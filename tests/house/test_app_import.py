"""Importing `app` changes no global of the process: the entry points set what SegLens needs (issue 25)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO

_PROBE = ("import json, os, sys; before = (dict(os.environ), sys.dont_write_bytecode); import {module}; "
          "print(json.dumps([dict(os.environ) == before[0], sys.dont_write_bytecode == before[1]]))")


def _unchanged(module: str) -> list[bool]:
    env = {k: v for k, v in os.environ.items() if k != "OPENCV_LOG_LEVEL"} | {"PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", _PROBE.format(module=module)], cwd=REPO, env=env,
                          capture_output=True, text=True, check=True, timeout=60)
    return json.loads(done.stdout)


def test_importing_app_and_its_faces_sets_no_environment_variable_nor_sys_flag():
    assert _unchanged("app") == [True, True]
    assert _unchanged("app.cli") == [True, True]
    assert _unchanged("app.io.images") == [True, True]


def test_the_cli_entry_point_sets_opencvs_log_level_and_a_users_own_setting_wins():
    code = "import os; from app.cli import main; main([]); print(os.environ['OPENCV_LOG_LEVEL'])"  # help: exit 2
    env = {k: v for k, v in os.environ.items() if k != "OPENCV_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "ERROR"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env | {"OPENCV_LOG_LEVEL": "INFO"},
                          capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "INFO"
