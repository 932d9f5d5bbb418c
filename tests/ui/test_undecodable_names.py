"""A folder whose file names are not UTF-8 (Linux bytes such as b'\\xff.png'): it opens, its reviews survive a
reopen, the review report is written, and the log names no path at INFO."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.runs.review.log import REVIEW_FILE

TIMEOUT = 20_000
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="file names are bytes on Linux only")
NAME = os.fsdecode(b"caf\xe9.png")  # Latin-1 bytes: not UTF-8, so Python spells the byte \udce9


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "batch"
    root.mkdir()
    for name in (NAME, "plain.png"):
        Image.fromarray(np.full((24, 32), 200, np.uint8)).save(root / name)
    return root


def test_a_folder_with_an_undecodable_name_opens_and_keeps_its_review(qtbot, make_main_window, models, folder):
    model = models("binary_logits")
    window = make_main_window(model, settings="names.ini")
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([folder])
    paths = window.files.paths()
    odd = next(p for p in paths if os.path.basename(p) == NAME)
    window.reviewer.mark("rejected", odd)
    assert window.files.review(odd) == "rejected"
    log = (folder.parent / "batch_review" / REVIEW_FILE).read_bytes()
    log.decode("utf-8")  # the log stays UTF-8 text
    window.close()
    again = make_main_window(model, settings="names.ini")
    with qtbot.waitSignal(again.overlay_shown, timeout=TIMEOUT):
        again.add_paths([folder])
    assert again.files.review(odd) == "rejected"  # was lost: written as text that was not the name any more


def test_export_review_report_of_such_a_folder(qtbot, make_main_window, models, folder):
    window = make_main_window(models("binary_logits"), settings="names-report.ini")
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([folder])
    odd = next(p for p in window.files.paths() if os.path.basename(p) == NAME)
    window.reviewer.mark("rejected", odd)
    with qtbot.waitSignal(window.reporter.report_finished, timeout=TIMEOUT) as done:
        window.export_review_report()
    ok, path = done.args
    assert ok, path  # was: UnicodeEncodeError
    page = Path(path).read_text(encoding="utf-8")
    assert "caf\\xe9" in page and page.count("data:image/jpeg;base64,") == 2


PATIENT = "DOE^JANE_PID-0042"


@pytest.fixture
def patient_folder(tmp_path):
    """Inputs under a patient-named folder: a good image, one whose name is not UTF-8, a broken one."""
    root = tmp_path / PATIENT / "ACC88123X"
    root.mkdir(parents=True)
    for name in ("good.png", NAME):
        Image.fromarray(np.full((24, 32), 200, np.uint8)).save(root / name)
    (root / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    return root


@pytest.fixture
def log_at_info(tmp_path):
    """The viewer's log file handler at INFO on the root logger, as app.ui.app sets it up."""
    import logging

    from app.logs import _FORMAT, RotatingFile

    path = tmp_path / "logs" / "seglens.log"
    path.parent.mkdir()
    handler = RotatingFile(path)
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter(_FORMAT))
    root = logging.getLogger()
    old_level = root.level
    root.setLevel(logging.DEBUG)
    root.addHandler(handler)
    yield path
    root.removeHandler(handler)
    root.setLevel(old_level)
    handler.close()


def test_the_viewer_log_at_info_names_no_input_path(qtbot, make_main_window, models, patient_folder, log_at_info,
                                                      tmp_path):
    window = make_main_window(models("binary_logits"), settings="privacy.ini")
    with qtbot.waitSignal(window.image_failed, timeout=TIMEOUT):  # broken.png comes first
        window.add_paths([patient_folder])
    for path in window.files.paths():  # every image shown once, the broken one fails
        window.files.select_path(path)
        qtbot.waitUntil(lambda p=path: window.files.status(p) in ("done", "error"), timeout=TIMEOUT)
    good = next(p for p in window.files.paths() if p.endswith("good.png"))
    window.files.select_path(good)
    qtbot.waitUntil(lambda: window.state.shown is not None and str(window.state.shown.path) == good,
                    timeout=TIMEOUT)
    window.reviewer.mark("rejected", good)
    assert window.editor.start()
    window.editor.save()  # "corrected mask saved: …" named the image
    window.editor.stop()
    with qtbot.waitSignal(window.run_all_finished, timeout=60_000):
        window.run_all(tmp_path / "export")
    with qtbot.waitSignal(window.reporter.report_finished, timeout=TIMEOUT):
        window.export_review_report()
    window.close()
    text = log_at_info.read_text(encoding="utf-8")
    assert "INFO" in text  # the log was written
    for secret in (PATIENT, "ACC88123X", "good.png", "broken.png", "caf"):
        assert secret not in text, (secret, text)


def test_a_model_whose_path_is_not_utf8_loads(qtbot, make_main_window, models, folder, tmp_path):
    source = models("binary_logits")
    odd = tmp_path / os.fsdecode(b"mod\xe8le")
    odd.mkdir()
    model = odd / source.name
    model.write_bytes(source.read_bytes())
    window = make_main_window(model, settings="odd-model.ini")
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):  # was "file not found": the path lost its byte
        window.add_paths([folder])
    assert window.state.model is not None and str(window.state.model.spec.path) == str(model)


def test_recent_lists_and_the_last_model_keep_a_path_that_is_not_utf8(tmp_path):
    from PySide6.QtCore import QSettings

    from app.ui.recent import RecentList

    settings = QSettings(str(tmp_path / "recent.ini"), QSettings.Format.IniFormat)
    odd = str(tmp_path / NAME)
    recent = RecentList(settings, "recent/inputs")
    recent.add(odd)
    recent.add(tmp_path / "plain.png")
    again = RecentList(QSettings(str(tmp_path / "recent.ini"), QSettings.Format.IniFormat), "recent/inputs")
    assert again.items() == [str(tmp_path / "plain.png"), odd]  # the byte was dropped: a path that is not there


def test_the_last_model_is_remembered_whole_when_its_path_is_not_utf8(tmp_path):
    from types import SimpleNamespace

    from PySide6.QtCore import QSettings

    from app.ui import settings as window_settings

    store = QSettings(str(tmp_path / "model.ini"), QSettings.Format.IniFormat)
    odd = tmp_path / NAME.replace(".png", ".onnx")
    store.setValue("model", window_settings.setting_text(odd))
    assert window_settings.model(QSettings(str(tmp_path / "model.ini"), QSettings.Format.IniFormat)) == odd
    assert window_settings.model(SimpleNamespace(value=lambda *a: "/models/plain.onnx")) == Path("/models/plain.onnx")


def test_the_uncaught_exception_hook_logs_no_path_above_debug(qtbot, caplog, monkeypatch):
    """The viewer's KeyError on such a folder went to the log, path and all, at CRITICAL."""
    import logging

    from PySide6.QtCore import qInstallMessageHandler

    from app.ui import app as ui_app

    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # put back after the test
    ui_app._install_error_handlers(None)
    secret = "/data/DOE^JANE_PID-0042/caf.png"
    caplog.set_level(logging.DEBUG)
    try:
        {}[secret]
    except KeyError as exc:
        sys.excepthook(KeyError, exc, exc.__traceback__)
    finally:
        qInstallMessageHandler(None)  # Qt's own handler again for the tests after this one
    above = [r for r in caplog.records if r.levelno > logging.DEBUG]
    assert [r.levelname for r in above] == ["CRITICAL"] and "KeyError" in above[0].getMessage()
    assert all(secret not in r.getMessage() and not r.exc_info for r in above)
    assert any(secret in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)  # kept for DEBUG
