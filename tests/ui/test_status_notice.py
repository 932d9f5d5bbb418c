"""The status bar's messages: whole (elided to the room the permanent widgets leave, the full text as tooltip),
"Open folder" after Run on all, and Run on all for the folder's scores only (nothing written)."""

from __future__ import annotations

import numpy as np
from PIL import Image
from PySide6.QtCore import QObject, QUrl, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QApplication

TIMEOUT = 20_000


class Opened(QObject):
    """What QDesktopServices.openUrl was asked to open (Qt's own URL handler hook, instead of a file manager)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[QUrl] = []

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.urls.append(url)


def folder_of_images(root):
    root.mkdir(parents=True)
    for k in range(3):
        image = np.zeros((30, 40), np.uint8)
        image[:, 10 * k:] = 255
        Image.fromarray(image).save(root / f"part{k}.png")
    return root


def test_run_on_all_says_everything_and_offers_its_folder(qtbot, make_main_window, models, tmp_path):
    images = folder_of_images(tmp_path / "images")
    window = make_main_window(models("binary_logits"))
    window.resize(1280, 720)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([images])
    out = tmp_path / ("a rather long folder name for the exports of this inspection batch " * 2).strip() / "run 1"
    with qtbot.waitSignal(window.run_all_finished, timeout=TIMEOUT):
        window.run_all(out)
    QApplication.processEvents()
    status = window.status
    message = f"Run on all done: 3 ok, 0 failed — {out / 'seglens_report.csv'}"
    assert status.currentMessage() == message and status.notice.label.toolTip() == message
    shown = status.notice.label.text()
    assert shown != message and shown.startswith("Run on all done: 3 ok, 0 failed") and shown.endswith("…"), \
        shown  # elided at the end: what happened stays, the path's whole on hover
    notice_right = status.notice.mapTo(status, status.notice.rect().topRight()).x()
    permanent = [w for w in (status.provider, status.latency, status.gpu_memory, status.image_size, status.model)
                 if w.isVisible()]
    assert notice_right < min(w.mapTo(status, w.rect().topLeft()).x() for w in permanent)  # not under them
    assert status.notice.open_button.isVisible()
    assert status.notice.folder_url() == QUrl.fromLocalFile(str(out))
    opened = Opened()
    QDesktopServices.setUrlHandler("file", opened, "open")
    try:
        status.notice.open_button.click()
    finally:
        QDesktopServices.unsetUrlHandler("file")
    assert opened.urls == [QUrl.fromLocalFile(str(out))]


def test_run_on_all_for_the_scores_only_writes_nothing(qtbot, make_main_window, models, tmp_path):
    images = folder_of_images(tmp_path / "images")
    model = models("binary_logits")
    model.with_suffix(".yaml").write_text("classes: [background, defect]\n"
                                         "verdict:\n  fail_if:\n    - {class: defect, min_area_px: 700}\n")
    window = make_main_window(model)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([images])
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with qtbot.waitSignal(window.run_all_finished, timeout=TIMEOUT) as finished:
        window.run_all(None)
    assert finished.args[1] == "" and finished.args[0].ok == 3
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no report, no masks, no lock
    assert window.status.currentMessage() == "Run on all done: 3 ok, 0 failed — scores only, nothing written"
    assert not window.status.notice.open_button.isVisible()
    assert [window.files.status(p) for p in window.files.paths()] == ["done"] * 3
    assert window.panel.folder.counts_text().startswith("1 OK · 2 NG")


UID = "1.2.826.0.1.3680043.8.498.10247783126934459021651286930917464253"


def test_a_long_message_is_cut_at_the_end_between_words_never_inside_a_uid(qtbot):
    """The message keeps its start and loses whole words at its end (a UID cut in the middle, `1.2.826.0…4253`,
    read as another UID); hovering shows all of it."""
    from app.ui.widgets.notice import Notice

    notice = Notice()
    qtbot.addWidget(notice)
    notice.show()
    message = f"Retrieved series {UID} of study {UID[:-3]}999 from ORTHANC: 120 files"
    notice.show_message(message)
    metrics = notice.label.fontMetrics()
    for width in range(80, metrics.horizontalAdvance(message), 17):
        notice.label.resize(width, notice.label.height())
        shown = notice.label.text()
        assert shown.endswith("…") and metrics.horizontalAdvance(shown) <= width, (width, shown)
        kept = shown.removesuffix("…").rstrip()
        assert message.startswith(kept) and message[len(kept)] == " ", (width, shown)  # whole words only
        assert notice.label.toolTip() == message
    notice.label.resize(metrics.horizontalAdvance(message) + 10, notice.label.height())
    assert notice.label.text() == message
