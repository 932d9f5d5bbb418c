"""A status message names a DICOM series as the file list does (its modality, study and series), never by the
SeriesInstanceUID its path ends in: at 1280 px a message starting with the UID showed only the cut UID and none of
what it said. Where only a path is known, the UID is shortened to its last digits; and a first word too wide for
the room is cut in its middle as a last resort, so that some of the message shows."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from app.io.discover import InputFile
from app.ui.widgets.file_list import FileList, short_name

UID = "1.2.826.0.1.3680043.8.498.2450617965819701885"
SERIES = f"/data/ct3d/{UID}"
LABEL = "CT · SegLens demo · Synthetic chest CT (60 slices)"


def series_input() -> InputFile:
    volume = SimpleNamespace(label=LABEL, kind="dicom", warnings=())
    return InputFile(Path(SERIES), Path("ct3d") / UID, volume=volume)  # type: ignore[arg-type]


def test_a_listed_series_is_named_by_its_label_and_a_picture_by_its_name(qtbot):
    files = FileList()
    qtbot.addWidget(files)
    files.set_inputs([series_input(), InputFile(Path("/data/photos/a.png"), Path("photos/a.png")),
                      InputFile(Path(f"/data/dicom/{UID}"), Path(UID))])  # a plain DICOM file named by a UID
    assert files.name_of(SERIES) == "CT · SegLens demo · Synthetic chest…"  # its first words: the message shows
    assert files.name_of("/data/photos/a.png") == "a.png"
    assert files.name_of(f"/data/dicom/{UID}") == UID
    assert files.name_of(f"/elsewhere/{UID}_2") == "…701885_2 (series)"  # not listed: the path alone


def test_a_short_label_is_whole(qtbot):
    files = FileList()
    qtbot.addWidget(files)
    item = series_input()
    item.volume.label = "NIfTI · ct3d_sample (60 slices)"
    files.set_inputs([item])
    assert files.name_of(SERIES) == "NIfTI · ct3d_sample (60 slices)"


def test_at_1280_px_the_status_bar_shows_the_message_after_the_series_name(qtbot):
    """The walkthrough's status bar: a 3D model's line about a series showed only the series (then its UID)."""
    from PySide6.QtWidgets import QMainWindow

    from app.ui.widgets.status import StatusBar

    files = FileList()
    qtbot.addWidget(files)
    files.set_inputs([series_input()])
    window = QMainWindow()
    qtbot.addWidget(window)
    status = StatusBar()
    window.setStatusBar(status)
    status.provider.setText("CPU (no NVIDIA GPU)")
    status.latency.setText("pre 53 · inference 3546 · post 25 ms")
    status.image_size.setText("172×172  L -300 W 1800")
    status.model.setText("CT lungs, bone & lesions 3D (demo, synthetic)")
    window.resize(1280, 680)
    with qtbot.waitExposed(window):
        window.show()  # the layout gives the permanent widgets their room as the window shows
    status.showMessage(f"{files.name_of(SERIES)}: 3D model over the whole volume, 108 patches in 18.4 s; slices, "
                       "threshold and heatmap from its result")
    right = status.notice.mapTo(status, status.notice.rect().topRight()).x()
    assert right < status.provider.mapTo(status, status.provider.rect().topLeft()).x()
    assert "3D model over" in status.notice.label.text(), status.notice.label.text()  # was: "…(60 slices): 3D …"


def test_a_series_path_alone_is_shortened_to_the_uids_last_digits():
    assert short_name(SERIES) == "…701885 (series)"
    assert short_name("/data/ct.nii.gz") == "ct.nii.gz"
    assert short_name("/data/part 12.5.png") == "part 12.5.png"


def test_a_first_word_too_wide_is_cut_in_its_middle_so_the_message_shows(qtbot):
    from app.ui.widgets.notice import Notice

    notice = Notice()
    qtbot.addWidget(notice)
    notice.show()
    message = f"{UID}: 3D model over the whole volume, 108 patches in 18.4 s"
    notice.show_message(message)
    metrics = notice.label.fontMetrics()
    width = metrics.horizontalAdvance(f"{UID}:") * 3 // 4  # the UID alone does not fit
    notice.label.resize(width, notice.label.height())
    shown = notice.label.text()
    assert "3D model" in shown and metrics.horizontalAdvance(shown) <= width, shown
    assert shown.startswith("1.2.826") and "…" in shown.split(" ")[0] and UID[-4:] in shown  # its ends kept
    assert notice.label.toolTip() == message


def test_a_label_is_never_cut_inside_its_brackets():
    """Its first words stop before an open bracket: "CT · CHEST · Second series…", never "… series (4…"."""
    from app.ui.widgets.file_list import first_words

    assert first_words("CT · CHEST · Second series (4 slices)", 36) == "CT · CHEST · Second series…"
    assert first_words("CT · CHEST · Axial 2.5 mm (120 slices)", 60) == "CT · CHEST · Axial 2.5 mm (120 slices)"
