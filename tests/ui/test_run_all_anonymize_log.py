"""The viewer's log file during Run on all with De-identify (issue 24): highdicom logged `copy Patient-related
attributes from dataset "<source SOP UID>"` at INFO into it for every SEG and Secondary Capture, and a one-part
patient name reached the terminal in highdicom's person-name warning. The libraries are kept at WARNING and what
they warn is logged at DEBUG (app.logs.quiet_libraries); highdicom is never given the name (the pseudonym)."""

from __future__ import annotations

import logging

import pytest

from tests.dicom_factory import write_series

TIMEOUT = 20_000
pytest.importorskip("dicognito")


def test_run_on_all_de_identified_leaves_no_source_uid_or_name_in_the_log(qtbot, make_main_window, ct_model,
                                                                          tmp_path, monkeypatch, capfd):
    import pydicom

    from app.logs import setup_file_logging

    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", "0123456789abcdef0123")
    monkeypatch.setenv("SEGLENS_LOG_DIR", str(tmp_path / "logs"))
    paths = write_series(tmp_path / "in" / "SMITHSON_PID-77", slices=3, patient=("SMITHSON", "PID-77"))
    uids = [str(pydicom.dcmread(p).SOPInstanceUID) for p in paths]
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        log = setup_file_logging(logging.INFO)
        win = make_main_window(ct_model)
        with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
            win.add_paths([tmp_path / "in"])
        with qtbot.waitSignal(win.run_all_finished, timeout=TIMEOUT) as done:
            win.run_all(tmp_path / "out", volumes={"exports": ("dicom-seg", "sc"), "per_slice": False,
                                                    "opacity": 0.5, "anonymize": True})
        for handler in root.handlers:
            handler.flush()
        text = log.read_text(encoding="utf-8")
    finally:
        for handler in [h for h in root.handlers if h not in before]:
            root.removeHandler(handler)
            handler.close()
    assert done.args[0].ok == 1
    assert "run on all done: 1 ok" in text  # the log was written
    assert not [uid for uid in uids if uid in text], text
    assert "highdicom" not in text and "smithson" not in text.lower() and "pid-77" not in text.lower(), text
    said = capfd.readouterr()
    assert "smithson" not in (said.out + said.err).lower()
