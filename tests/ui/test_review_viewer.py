"""Review in the window: A/R set the state and move to the next unreviewed image, the list shows and filters the
states, a saved correction marks the image corrected, the log is read again on reopen, another model's reviews
are not shown."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLineEdit, QPushButton

from app.runs.review.log import REVIEW_FILE, ReviewLog

TIMEOUT = 20_000


def type_note(window, text: str) -> None:
    """Type `text` into the review panel's note and press Enter."""
    note = window.panel.review.findChild(QLineEdit, "note")
    note.setText(text)
    note.editingFinished.emit()


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "batch"
    root.mkdir()
    for name in ("c1", "c2", "c3"):
        Image.fromarray(np.full((24, 32), 200, np.uint8)).save(root / f"{name}.png")
    return root


def open_folder(qtbot, window, root):
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([root])


def test_accept_reject_move_on_and_are_kept_for_the_next_session(qtbot, make_main_window, models, folder):
    model = models("binary_logits")
    window = make_main_window(model, settings="review.ini")
    open_folder(qtbot, window, folder)
    c1, c2, c3 = window.files.paths()
    window.reviewer.mark("accepted")
    assert window.files.review(c1) == "accepted" and window.files.current_path() == c2  # on to the next unreviewed
    assert window.files.item(0).text().endswith("✓")
    window.reviewer.mark("rejected")
    assert window.files.current_path() == c3
    type_note(window, "edge, <b>check</b>")
    window.files.set_filter("rejected")
    assert window.files.visible_paths() == [c2]
    window.files.set_filter("unreviewed")
    assert window.files.visible_paths() == [c3]
    window.files.set_filter("all")
    log = (folder.parent / "batch_review" / REVIEW_FILE).read_text(encoding="utf-8")
    assert "c1.png,accepted" in log and "c2.png,rejected" in log and "edge, <b>check</b>" in log
    window.close()
    again = make_main_window(model, settings="review.ini")
    open_folder(qtbot, again, folder)
    assert [again.files.review(p) for p in again.files.paths()] == ["accepted", "rejected", "unreviewed"]
    assert "result correct" in again.panel.review.state_text()  # c1 is shown first
    other = make_main_window(models("binary_logits", name="retrained"), settings="other.ini")
    open_folder(qtbot, other, folder)
    assert [other.files.review(p) for p in other.files.paths()] == ["unreviewed"] * 3  # another model's file
    assert isinstance(other.reviewer.log, ReviewLog) and other.reviewer.log.foreign >= 2


def test_a_saved_correction_marks_the_image_corrected(qtbot, make_main_window, models, folder):
    window = make_main_window(models("binary_logits"))
    open_folder(qtbot, window, folder)
    assert window.editor.start()
    window.panel.edit.set_radius(3)
    window.panel.edit.set_tool("eraser")  # the model found foreground everywhere: erase a spot
    window.viewer.edit_pressed.emit(5.0, 5.0, Qt.KeyboardModifier.NoModifier)
    window.viewer.edit_released.emit()
    window.editor.stop()  # unsaved changes are saved on the way out
    first = window.files.paths()[0]
    assert window.files.review(first) == "corrected"
    saved = np.asarray(Image.open(folder.parent / "batch_review" / "c1.png_mask.png"))
    assert saved[5, 5] == 0 and saved[5, 10] == 1 and (saved == 0).sum() == 29  # a disc of radius 3


def test_export_review_report_from_the_window(qtbot, make_main_window, models, folder):
    window = make_main_window(models("binary_logits"))
    open_folder(qtbot, window, folder)
    window.reviewer.mark("rejected")
    type_note(window, "<script>alert(1)</script>")
    (folder / "c3.png").write_bytes(b"broken now")  # a file that fails on the way gets its row, says why
    with qtbot.waitSignal(window.reporter.report_finished, timeout=TIMEOUT) as done:
        window.export_review_report()
    ok, path = done.args
    assert ok and path.endswith("batch_review/seglens_review_report.html")
    html = Path(path).read_text(encoding="utf-8")
    assert html.count("data:image/jpeg;base64,") == 2  # c1 and c2 drawn; c3 could not be read
    assert "rejected" in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>" not in html
    assert "not processed" in html and "c3.png" in html
    assert "http://" not in html and "https://" not in html


def test_a_review_that_cannot_be_written_says_so_in_one_line(qtbot, make_main_window, models, folder, monkeypatch):
    window = make_main_window(models("binary_logits"))
    open_folder(qtbot, window, folder)

    def refuse(*_args, **_kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr("app.runs.review.log.atomic_write", refuse)
    first = window.files.current_path()
    window.reviewer.mark("accepted")  # no traceback: the status bar says why, the list keeps the old state
    message = window.status.currentMessage()
    assert message.startswith("Review not saved:") and "No space left on device" in message and "\n" not in message
    assert window.files.review(first) == "unreviewed" and window.files.current_path() == first


def test_reviewing_the_bundled_samples_writes_into_the_user_data_folder(qtbot, make_main_window, models, tmp_path,
                                                                       monkeypatch):
    """It wrote resources/samples/anomaly_review/ into the install; the panel now says where the reviews go, and
    the buttons say what is judged: the model's result, not the part."""
    from app.paths import samples_dir

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    samples = samples_dir() / "anomaly"
    before = sorted(p.name for p in samples_dir().iterdir())
    window = make_main_window(models("rgb_classes"))
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([samples])
    window.reviewer.mark("accepted")
    assert sorted(p.name for p in samples_dir().iterdir()) == before  # nothing written into the install
    folder = window.reviewer.log.folder
    assert folder.parent == tmp_path / "data" / "SegLens" / "reviews" and (folder / REVIEW_FILE).is_file()
    where = window.panel.review.location_text()
    assert where.startswith("Saved in your user data folder, not beside the images")
    assert where.replace("\u200b", "").endswith(str(folder))
    assert window.panel.review.state_text() == "<b style='color:#8e8e93'>not reviewed</b>"  # on to the next one
    window.files.select_path(window.files.paths()[0])
    assert "result correct" in window.panel.review.state_text()
    buttons = [b.text() for b in window.panel.review.findChildren(QPushButton)]
    assert buttons == ["Result correct (A)", "Result wrong (R)", "Next unreviewed (U)"]
