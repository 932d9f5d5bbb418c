"""The PACS dialog's counts agree in number: a one-image series retrieved is "1 series (1 file)"."""

from __future__ import annotations

from app.io.pacs.client import Retrieved
from tests.dicom_factory import write_series
from ui import test_pacs_dialog
from ui.test_pacs_dialog import TIMEOUT, _search, pacs  # noqa: F401 (pacs: the fixture)


def _one_image(self, study_uid, series_uid, cache, *, progress=None, should_stop=None):
    folder = self.root / series_uid
    write_series(folder, slices=1, series_uid=series_uid, study_uid=study_uid, patient=("SYNTHETIC^QUINN", "SYN-0001"))
    return Retrieved(series_uid, folder, 1, sum(p.stat().st_size for p in folder.iterdir()))


def test_a_one_file_series_retrieved_says_1_file(qtbot, pacs, monkeypatch):  # noqa: F811
    monkeypatch.setattr(test_pacs_dialog.FakeClient, "retrieve", _one_image)
    _win, controller, _clients = pacs()
    dialog = _search(qtbot, controller)
    qtbot.waitUntil(lambda: dialog.series.rowCount() == 2, timeout=TIMEOUT)
    assert [dialog.series.item(0, c).text() for c in range(4)] == ["1", "Scout", "CT", "1"]  # one image
    dialog.series.selectRow(0)
    dialog.retrieve_button.click()
    qtbot.waitUntil(lambda: dialog.message.text().endswith("retrieved and opened"), timeout=TIMEOUT)
    assert dialog.message.text() == "1 series (1 file) retrieved and opened"
