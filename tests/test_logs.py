"""The log file rotates by size (without logging.handlers, which costs start-up time) and keeps three old files."""

from __future__ import annotations

import logging

from app.logs import RotatingFile


def _logger(handler: logging.Handler) -> logging.Logger:
    logger = logging.getLogger(f"test-rotation-{id(handler)}")
    logger.propagate = False
    logger.addHandler(handler)
    return logger


def test_the_log_moves_aside_as_it_grows_and_keeps_three_old_files(tmp_path):
    path = tmp_path / "seglens.log"
    handler = RotatingFile(path, max_bytes=200, backups=3)
    logger = _logger(handler)
    for i in range(40):
        logger.warning("line %02d %s", i, "x" * 40)
    handler.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["seglens.log", "seglens.log.1", "seglens.log.2", "seglens.log.3"]
    assert "line 39" in path.read_text() or "line 39" in (tmp_path / "seglens.log.1").read_text()
    assert all(p.stat().st_size < 200 + 60 for p in tmp_path.iterdir())  # each holds about max_bytes
    assert "line 00" not in "".join(p.read_text() for p in tmp_path.iterdir())  # the oldest went


def test_a_large_log_left_by_an_earlier_run_is_moved_aside_at_start(tmp_path):
    path = tmp_path / "seglens.log"
    path.write_text("old run\n" * 100)
    handler = RotatingFile(path, max_bytes=500)
    _logger(handler).warning("new run")
    handler.close()
    assert path.read_text().strip().endswith("new run") and "old run" not in path.read_text()
    assert (tmp_path / "seglens.log.1").read_text().startswith("old run")


def test_input_paths_reach_the_log_file_only_at_debug(tmp_path):
    """Image paths often hold patient names: INFO and above name a file by a hash of its path."""
    from app.logs import file_ref, private

    path = tmp_path / "DOE^JANE 1961-02-03" / "ct_0001.dcm"
    handler = RotatingFile(tmp_path / "seglens.log")
    handler.setLevel(logging.INFO)
    logger = _logger(handler)
    logger.setLevel(logging.DEBUG)
    private(logger, logging.WARNING, path, f"{path}: damaged or truncated image")
    handler.close()
    text = (tmp_path / "seglens.log").read_text()
    assert "DOE^JANE" not in text and f"{file_ref(path)}: damaged or truncated image" in text
    assert file_ref(path) == file_ref(str(path)) != file_ref(tmp_path / "other.dcm")


def test_an_exception_reaches_the_log_without_its_message_above_debug(tmp_path):
    """An uncaught KeyError('/data/DOE^JANE/x.png') logged its path at CRITICAL."""
    from app.logs import log_exception

    handler = RotatingFile(tmp_path / "seglens.log")
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger = _logger(handler)
    logger.setLevel(logging.DEBUG)
    secret = "/data/DOE^JANE 1961-02-03/x.png"
    try:
        try:
            {}[secret]
        except KeyError as inner:
            raise RuntimeError(f"opening {secret} failed") from inner
    except RuntimeError as exc:
        log_exception(logger, logging.CRITICAL, "uncaught exception", exc)
    handler.close()
    text = (tmp_path / "seglens.log").read_text()
    assert "DOE^JANE" not in text
    assert "CRITICAL" in text and "uncaught exception: RuntimeError" in text
    assert "KeyError raised at:" in text and "test_logs.py" in text  # where it happened, for a bug report


def test_a_cli_run_logs_no_input_path_at_info(models, tmp_path, caplog):
    """A folder under a patient-named path through `seglens-cli run`: the log (INFO and above) names no file."""
    import numpy as np
    from conftest import stripes
    from PIL import Image

    from app.cli import main
    from tests.dicom_factory import write_series

    root = tmp_path / "DOE^JANE_PID-0042" / "ACC88123X"
    root.mkdir(parents=True)
    Image.fromarray(stripes()).save(root / "good.png")
    (root / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    Image.fromarray(np.zeros((4, 4), np.uint8)).save(root / "tiny.png")
    write_series(root / "ct", slices=3)
    caplog.set_level(logging.DEBUG)  # everything is captured; only INFO and above must name no file
    assert main(["run", str(models("rgb_classes")), str(root), "--out", str(tmp_path / "out"), "--device", "cpu",
                 "--no-progress"]) == 1
    formatter = logging.Formatter("%(levelname)s %(name)s %(message)s")
    text = "\n".join(formatter.format(r) for r in caplog.records if r.levelno >= logging.INFO)
    for secret in ("DOE^JANE", "ACC88123X", "good.png", "broken.png", str(tmp_path)):
        assert secret not in text, (secret, text)


# a literal backslash before `x41`, a C1 control, a byte that is not UTF-8, a doubled backslash, an ESC and a tab
_AWKWARD = ("DOE\\x41NNA", "DOE\x85JANE", "DOE\udce9JANE", "DOE\\\\JANE", "DOE\x1b[2JJANE", "DOE\tJANE")


def test_the_log_spells_a_path_as_the_terminal_and_the_report_do():
    """`private` finds a path in a message however app.errors spelt it (shown: the terminal's, spelt: a report
    cell's): the log and the faces spell with the one app.spelling (the log had its own copy, which drifted)."""
    from app import errors, logs

    assert logs.shown is errors.shown and logs.spelt is errors.spelt


def test_a_path_the_terminal_spelt_is_replaced_in_the_log(tmp_path):
    from app.errors import shown, spelt
    from app.logs import file_ref, private

    for name in _AWKWARD:
        path = tmp_path / name / "ct_0001.dcm"
        handler = RotatingFile(tmp_path / "seglens.log")
        handler.setLevel(logging.INFO)
        logger = _logger(handler)
        logger.setLevel(logging.DEBUG)
        private(logger, logging.WARNING, path, f"{shown(path)}: damaged; cell {spelt(str(path))}")
        handler.close()
        text = (tmp_path / "seglens.log").read_text(errors="surrogateescape")
        (tmp_path / "seglens.log").unlink()
        assert "DOE" not in text and f"{file_ref(path)}: damaged; cell {file_ref(path)}" in text, repr(name)
