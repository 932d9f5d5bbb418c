"""File ▸ Open from PACS… and Results ▸ Send to PACS… (issue 27): the dialog, its controller and the PACS worker on
its own thread. Most tests drive them with a hand-written fake client (fast, no server); the last ones go through a
real Orthanc on loopback (tests/io/pacs/orthanc.py: skipped without Orthanc locally, failing when CI=true)."""

from __future__ import annotations

import dataclasses
import shutil
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import QMetaMethod

from app.io.pacs.cache import SeriesCache
from app.io.pacs.client import PacsError, Retrieved, SeriesRecord, StudyRecord
from app.ui.actions import pacs_controller
from app.ui.controllers.pacs import PacsController
from app.ui.state import pacs_messages
from app.ui.workers.pacs_worker import PacsWorker
from tests.dicom_factory import write_series

TIMEOUT = 20_000
SETTINGS = "pacs:\n  FAKE:\n    url: dimse://FAKE@127.0.0.1:11112\n  LAB:\n    url: dimse://LAB@127.0.0.1:11113\n" \
           "    research: true\n"


class FakeClient:
    """A PACS of one study with two CT series (written by tests/dicom_factory.py when retrieved)."""

    def __init__(self, node, root: Path, *, fail: str = "", gate: threading.Event | None = None,
                 derived: tuple[str, str] | None = None) -> None:
        """`derived`: (modality, source series UID) of a SEG or RTSTRUCT series 1.2.3.7 in the study too."""
        self.node, self.root, self.fail, self.gate, self.derived = node, root, fail, gate, derived
        self.stored: list[Path] = []
        self.series = [SeriesRecord("1.2.3.1", "1.2.3", "CT", "Axial 2.5 mm", 2, 4),
                       SeriesRecord("1.2.3.9", "1.2.3", "CT", "Scout", 1, 1)]
        if derived is not None:
            self.series.append(SeriesRecord("1.2.3.7", "1.2.3", derived[0], "Lungs (SegLens)", 3, 1))
        self.retrieved: list[str] = []
        self.server = root.parent / "server"  # a SEG made over the source series: both as the server holds them
        if derived is not None and derived[1] == "1.2.3.1" and not self.server.is_dir():
            write_series(self.server / "1.2.3.1", slices=4, series_uid="1.2.3.1", study_uid="1.2.3",
                         patient=("SYNTHETIC^QUINN", "SYN-0001"))
            _write_seg(self.server / "1.2.3.1", self.server / "1.2.3.7", derived[0])
        self.sent_series: dict[str, str] = {}
        self.instances: dict[str, int] = {}

    def echo(self) -> None:
        pass

    def find_studies(self, query):
        if self.fail:
            raise PacsError(self.fail)
        self.query = query
        return [StudyRecord("1.2.3", "SYN-0001", "SYNTHETIC^QUINN", "20240102", "CT chest", ("CT",), "ACC1", 2)]

    def find_series(self, study_uid):
        # each series sent, with the instances stored in it (a send is verified instance for instance)
        sent = [SeriesRecord(uid, study, "SEG", "", None, self.instances[uid])
                for uid, study in self.sent_series.items()]
        return [s for s in self.series if s.study_uid == study_uid] + [s for s in sent if s.study_uid == study_uid]

    def retrieve(self, study_uid, series_uid, cache, *, progress=None, should_stop=None):
        folder = self.root / series_uid
        self.retrieved.append(series_uid)
        if (self.server / series_uid).is_dir():
            shutil.copytree(self.server / series_uid, folder)
            return Retrieved(series_uid, folder, len(list(folder.iterdir())), 1)
        if self.derived is not None and series_uid == "1.2.3.7":
            _write_derived(folder, self.derived[0], study_uid=study_uid, series_uid=series_uid,
                           source_uid=self.derived[1])
            return Retrieved(series_uid, folder, 1, 1)
        if series_uid not in {s.series_uid for s in self.series}:
            raise PacsError(f"pacs {self.node.name}: series {series_uid}: the server has no such series")
        for k in range(4):
            if self.gate is not None:
                self.gate.wait(10)
            if should_stop is not None and should_stop():
                shutil.rmtree(folder, ignore_errors=True)  # the cache drops a half series
                raise PacsError(f"pacs {self.node.name}: retrieve stopped")
            if progress is not None:
                progress(k, 4)
        write_series(folder, slices=4, series_uid=series_uid, study_uid=study_uid,
                     patient=("SYNTHETIC^QUINN", "SYN-0001"))
        return Retrieved(series_uid, folder, 4, sum(p.stat().st_size for p in folder.iterdir()))

    def store(self, files, *, progress=None):
        import pydicom

        for path in files:
            header = pydicom.dcmread(path, stop_before_pixels=True)
            self.sent_series[str(header.SeriesInstanceUID)] = str(header.StudyInstanceUID)
            self.instances[str(header.SeriesInstanceUID)] = self.instances.get(str(header.SeriesInstanceUID), 0) + 1
            self.stored.append(Path(path))
        headers = [pydicom.dcmread(p, stop_before_pixels=True) for p in files]
        self.modalities = sorted({h.Modality for h in headers})
        self.patients = sorted({(str(h.PatientName), str(h.PatientID)) for h in headers})
        return len(files)


SEG_LABELS = {1: ((5, 15), (5, 20), 1), 2: ((10, 20), (8, 12), 2)}  # slice: (rows, columns, class)


def _write_seg(source: Path, folder: Path, modality: str) -> None:
    """SegLens's own DICOM SEG or RTSTRUCT (app/runs/exports) over the series in `source` (_seg_labels)."""
    from app.inference.model.spec import ClassInfo
    from app.io.discover import discover
    from app.runs.exports.seg import build_segmentation
    from app.runs.outputs.segments import Algorithm, segments_of

    [volume] = [item.volume for item in discover([source]) if item.volume is not None]
    folder.mkdir(parents=True)
    segments = segments_of([ClassInfo("background", None), ClassInfo("lung", (0, 200, 0)),
                            ClassInfo("bone", (0, 0, 255))])
    algorithm = Algorithm("ct_demo", "0" * 16, "0" * 64, "test")
    if modality == "RTSTRUCT":
        from app.runs.exports.rtstruct import write_rtstruct

        write_rtstruct(volume, _seg_labels(volume), segments, folder / "rtstruct.dcm", algorithm=algorithm)
        return
    seg = build_segmentation(volume, _seg_labels(volume), segments, algorithm=algorithm)
    seg.save_as(folder / "seg.dcm")


def _seg_labels(volume):
    import numpy as np

    labels = np.zeros((volume.depth, volume.rows, volume.columns), np.uint8)
    for k, ((r0, r1), (c0, c1), value) in SEG_LABELS.items():
        labels[k, r0:r1, c0:c1] = value
    labels[3, 4:24, 4:24] = 1  # a ring: an RTSTRUCT writes its hole as a contour of its own
    labels[3, 10:16, 11:17] = 0
    return labels


def _write_derived(folder: Path, modality: str, *, study_uid: str, series_uid: str, source_uid: str) -> None:
    """A SEG or RTSTRUCT header as SegLens's writers make one (app/runs/exports): its source series referenced."""
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    sop_class = {"SEG": "1.2.840.10008.5.1.4.1.1.66.4", "RTSTRUCT": "1.2.840.10008.5.1.4.1.1.481.3"}[modality]
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.MediaStorageSOPClassUID, ds.file_meta.TransferSyntaxUID = sop_class, ExplicitVRLittleEndian
    ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID = generate_uid()
    ds.SOPClassUID, ds.Modality = sop_class, modality
    ds.StudyInstanceUID, ds.SeriesInstanceUID = study_uid, series_uid
    ds.PatientName, ds.PatientID = "SYNTHETIC^QUINN", "SYN-0001"
    if modality == "SEG":
        ds.ReferencedSeriesSequence = [Dataset()]
        ds.ReferencedSeriesSequence[0].SeriesInstanceUID = source_uid
    else:
        series = Dataset()
        series.SeriesInstanceUID = source_uid
        study = Dataset()
        study.ReferencedSOPInstanceUID = study_uid
        study.RTReferencedSeriesSequence = [series]
        frame = Dataset()
        frame.RTReferencedStudySequence = [study]
        ds.ReferencedFrameOfReferenceSequence = [frame]
    folder.mkdir(parents=True, exist_ok=True)
    ds.save_as(folder / "derived.dcm", enforce_file_format=True)


@pytest.fixture
def pacs(make_main_window, tmp_path):
    """`pacs(model=None, fail="", gate=None)` → (window, controller, fake client): the window's PACS controller with
    a fake client behind its real worker and thread."""

    def make(model=None, *, fail: str = "", gate: threading.Event | None = None,
             derived: tuple[str, str] | None = None):
        settings = tmp_path / "settings.yaml"
        settings.write_text(SETTINGS)
        win = make_main_window(model, load=model is not None)
        clients: list[FakeClient] = []

        def connect(node, *, secret=None):
            clients.append(FakeClient(node, tmp_path / "cache", fail=fail, gate=gate, derived=derived))
            return clients[-1]

        controller = PacsController(win.state, files=win.files, status=win.status, worker=win.worker,
                                    open_paths=win.add_paths, recount=win.volumes.count,
                                    model_path=lambda: win.model_path, closing=win,
                                    pacs_worker=PacsWorker(connect=connect,
                                                           cache=lambda: SeriesCache(tmp_path / "pins")),
                                    settings_file=settings, reference=win.set_reference_folder, parent=win)
        assert pacs_controller(win) is controller  # the menus' actions find this one
        return win, controller, clients

    return make


def _search(qtbot, controller, node="FAKE"):
    dialog = controller.open_dialog()
    dialog.node.setCurrentText(node)
    dialog.patient_id.setText("SYN-0001")
    dialog.search_button.click()
    return dialog


def test_search_lists_studies_then_series_and_a_retrieved_series_opens_as_a_volume(qtbot, pacs):
    win, controller, clients = pacs()
    dialog = controller.open_dialog()
    assert [dialog.node.itemText(i) for i in range(dialog.node.count())] == ["FAKE", "LAB"]  # the settings' nodes
    dialog = _search(qtbot, controller)
    qtbot.waitUntil(lambda: dialog.series.rowCount() == 2, timeout=TIMEOUT)  # one study: chosen at once
    assert clients[0].query.patient_id == "SYN-0001"
    assert [dialog.studies.item(0, c).text() for c in range(dialog.studies.columnCount())] == \
           ["SYNTHETIC, QUINN", "SYN-0001", "2024-01-02", "CT chest", "CT", "ACC1", "2"]
    rows = [[dialog.series.item(r, c).text() for c in range(4)] for r in range(2)]
    assert rows == [["1", "Scout", "CT", "1"], ["2", "Axial 2.5 mm", "CT", "4"]]  # by series number
    dialog.series.selectRow(1)
    assert dialog.retrieve_button.isEnabled()
    dialog.retrieve_button.click()
    qtbot.waitUntil(lambda: len(win.files.inputs()) == 1, timeout=TIMEOUT)
    volume = win.files.volume(win.files.current_path())
    assert volume is not None and volume.depth == 4  # opened as a dropped folder opens: one volume of 4 slices
    assert dialog.message.text() == "1 series (4 files) retrieved and opened"
    assert not dialog.cancel_button.isEnabled() and dialog.retrieve_button.isEnabled()


def test_a_wrong_password_is_one_line_in_the_dialog_and_it_stays_usable(qtbot, pacs):
    line = "pacs FAKE: authentication failed (HTTP 401): wrong user name or password"
    _win, controller, _clients = pacs(fail=line)
    dialog = _search(qtbot, controller)
    qtbot.waitUntil(lambda: dialog.message.text() == line, timeout=TIMEOUT)
    assert "b00020" in dialog.message.styleSheet() and dialog.search_button.isEnabled()
    assert dialog.studies.rowCount() == 0


def test_a_node_that_is_neither_a_name_nor_a_url_is_one_line_and_nothing_is_asked(qtbot, pacs):
    _win, controller, clients = pacs()
    dialog = _search(qtbot, controller, node="orthanc.local")
    assert dialog.message.text().startswith("pacs node 'orthanc.local': not a node name (known nodes: FAKE, LAB)")
    assert clients == [] and dialog.search_button.isEnabled()


def test_cancel_stops_the_retrieve_and_opens_nothing(qtbot, pacs):
    gate = threading.Event()
    win, controller, _clients = pacs(gate=gate)
    dialog = _search(qtbot, controller)
    qtbot.waitUntil(lambda: dialog.series.rowCount() == 2, timeout=TIMEOUT)
    dialog.series.selectAll()
    dialog.retrieve_button.click()
    assert dialog.cancel_button.isEnabled() and not dialog.retrieve_button.isEnabled()
    dialog.cancel_button.click()  # the GUI thread is free while the worker waits on the server
    gate.set()
    qtbot.waitUntil(lambda: dialog.message.text() == "Cancelled", timeout=TIMEOUT)
    assert win.files.inputs() == [] and "b00020" not in dialog.message.styleSheet()


def _counted_volume(qtbot, win, folder):
    write_series(folder, slices=4, patient=("SYNTHETIC^QUINN", "SYN-0001"))
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([folder])
    qtbot.waitUntil(lambda: "all 4 slices" in win.panel.legend.volume_text(), timeout=TIMEOUT)


def test_send_stores_the_volumes_seg_and_finds_it_again(qtbot, pacs, ct_model, tmp_path):
    win, controller, clients = pacs(ct_model)
    _counted_volume(qtbot, win, tmp_path / "ct")
    dialog = controller.open_send_dialog()
    assert dialog is not None and dialog.kinds() == ("dicom-seg",)
    assert dialog.subject.text().endswith("SYNTHETIC, QUINN · SYN-0001 · 2026-01-01 · Axial 2.5 mm")
    dialog.node.setCurrentText("FAKE")
    dialog.boxes["sc"].setChecked(True)
    dialog.boxes["rtstruct"].setChecked(True)
    dialog.send_button.click()
    qtbot.waitUntil(lambda: dialog.message.text().startswith("Sent to FAKE"), timeout=TIMEOUT)
    assert dialog.message.text() == ("Sent to FAKE: DICOM SEG (1 file), Secondary Capture (4 files), RTSTRUCT "
                                     "(1 file); found again by a query (3 of 3 series)")
    assert clients[-1].modalities == ["OT", "RTSTRUCT", "SEG"] and len(clients[-1].stored) == 6
    assert clients[-1].patients == [("SYNTHETIC^QUINN", "SYN-0001")]  # identified: beside the identified study
    assert win.status.currentMessage() == dialog.message.text()


def test_a_de_identified_send_is_refused_unless_the_node_is_research(qtbot, pacs, ct_model, tmp_path):
    win, controller, clients = pacs(ct_model)
    _counted_volume(qtbot, win, tmp_path / "ct")
    dialog = controller.open_send_dialog()
    dialog.node.setCurrentText("FAKE")
    dialog.anonymize.setChecked(True)
    dialog.send_button.click()
    assert dialog.message.text().startswith("pacs FAKE: a de-identified (pseudonymised) result is sent only to a "
                                            "research node")
    assert clients == [] and dialog.send_button.isEnabled()


def test_a_de_identified_send_to_a_research_node_carries_no_patient_identity(qtbot, pacs, ct_model, tmp_path,
                                                                             monkeypatch):
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", "00" * 32)
    win, controller, clients = pacs(ct_model)
    _counted_volume(qtbot, win, tmp_path / "ct")
    dialog = controller.open_send_dialog()
    dialog.node.setCurrentText("LAB")
    dialog.anonymize.setChecked(True)
    dialog.send_button.click()
    qtbot.waitUntil(lambda: dialog.message.text().startswith(("Sent", "pacs", "de-")), timeout=TIMEOUT)
    assert dialog.message.text() == "Sent to LAB: DICOM SEG (1 file); found again by a query (1 of 1 series)"
    ((name, patient_id),) = clients[-1].patients
    assert "SYNTHETIC" not in name and "SYN-0001" not in patient_id and patient_id


def test_send_without_a_volume_says_why_in_the_status_bar(qtbot, pacs):
    win, controller, _clients = pacs()
    assert controller.open_send_dialog() is None
    assert win.status.currentMessage() == "Send to PACS: show a DICOM series first (the SEG references its slices)"


def _methods(cls, kind):
    meta = cls.staticMetaObject
    return {bytes(meta.method(i).name()).decode(): [bytes(t).decode() for t in meta.method(i).parameterTypes()]
            for i in range(meta.methodOffset(), meta.methodCount()) if meta.method(i).methodType() == kind}


def test_the_pacs_worker_and_its_controller_pass_one_frozen_record_per_signal():
    kinds = (QMetaMethod.MethodType.Signal, QMetaMethod.MethodType.Slot)
    signals = {**_methods(PacsWorker, kinds[0]), **_methods(PacsWorker, kinds[1]),
               **_methods(PacsController, kinds[0])}
    assert signals and {name: types for name, types in signals.items() if types != ["PyObject"]} == {}
    records = [getattr(pacs_messages, name) for name in dir(pacs_messages) if name.startswith("Pacs")]
    assert records and all(dataclasses.is_dataclass(r) and r.__dataclass_params__.frozen for r in records)
    assert "secret" not in repr(pacs_messages.PacsTarget(node=None, secret="hunter2")) and \
           "hunter2" not in repr(pacs_messages.PacsTarget(node=None, secret="hunter2"))


def test_the_menus_open_the_dialogs_made_on_first_use(qtbot, pacs):
    from tests.ui.test_main_window import menu_action

    win, controller, _clients = pacs()
    assert controller._dialog is None  # nothing built before the reader asks
    menu_action(win, "File", "Open from PACS…").trigger()
    assert controller._dialog is not None and controller._dialog.isVisible()
    menu_action(win, "Results", "Send to PACS…").trigger()
    assert win.status.currentMessage().startswith("Send to PACS: show a DICOM series first")


# -- against a real PACS: Orthanc on loopback ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def orthanc_server(tmp_path_factory):
    from tests.io.pacs.orthanc import Orthanc

    server = Orthanc.launch(tmp_path_factory.mktemp("orthanc"))  # skips locally without Orthanc; fails when CI=true
    try:
        yield server
    finally:
        server.stop(graceful=True)


@pytest.fixture
def real_pacs(orthanc_server, make_main_window, tmp_path, monkeypatch):
    """(window, controller, the server, its uploaded study's patient ID) with the window's real PACS worker, the
    node in the settings as both DICOMweb and DIMSE, and the series cache in the test's folder."""
    orthanc_server.start()
    orthanc_server.clear()
    uploaded = write_series(tmp_path / "upload", slices=5, rows=48, columns=48, description="Synthetic CT 2.5 mm",
                            patient=("SYNTHETIC^PHANTOM", "SYN-E2E-1"))
    orthanc_server.upload(uploaded)
    settings = tmp_path / "settings.yaml"
    web = orthanc_server.dicomweb_url.replace("http://", "dicomweb+http://")
    settings.write_text(f"pacs:\n  WEB:\n    url: \"{web}?auth=basic&user={orthanc_server.user}\"\n"
                        f"  DIMSE:\n    url: \"{orthanc_server.dimse_url}\"\n")
    monkeypatch.setenv("SEGLENS_PACS_SECRET", orthanc_server.password)

    def make(model=None):
        win = make_main_window(model, load=model is not None)
        controller = PacsController(win.state, files=win.files, status=win.status, worker=win.worker,
                                    open_paths=win.add_paths, recount=win.volumes.count,
                                    model_path=lambda: win.model_path, closing=win,
                                    pacs_worker=PacsWorker(cache=lambda: SeriesCache(tmp_path / "cache")),
                                    settings_file=settings, reference=win.set_reference_folder, parent=win)
        return win, controller

    return make


@pytest.mark.parametrize("node", ["WEB", "DIMSE"])
def test_search_retrieve_and_open_from_a_real_orthanc(qtbot, real_pacs, node):
    win, controller = real_pacs()
    dialog = controller.open_dialog()
    dialog.node.setCurrentText(node)
    dialog.patient_id.setText("SYN-E2E-1")
    dialog.search_button.click()
    qtbot.waitUntil(lambda: dialog.series.rowCount() == 1 or "b00020" in dialog.message.styleSheet(), timeout=TIMEOUT)
    assert dialog.series.rowCount() == 1, dialog.message.text()
    assert dialog.studies.item(0, 0).text() == "SYNTHETIC, PHANTOM"
    assert [dialog.series.item(0, c).text() for c in (1, 2, 3)] == ["Synthetic CT 2.5 mm", "CT", "5"]
    dialog.series.selectRow(0)
    dialog.retrieve_button.click()
    qtbot.waitUntil(lambda: not dialog.cancel_button.isEnabled(), timeout=TIMEOUT)
    assert dialog.message.text() == "1 series (5 files) retrieved and opened"
    volume = win.files.volume(win.files.current_path())
    assert volume is not None and (volume.depth, volume.rows, volume.columns) == (5, 48, 48)


def test_clear_local_cache_deletes_the_retrieved_series(qtbot, real_pacs, tmp_path):
    win, controller = real_pacs()
    dialog = controller.open_dialog()
    dialog.node.setCurrentText("DIMSE")
    dialog.patient_id.setText("SYN-E2E-1")
    dialog.search_button.click()
    qtbot.waitUntil(lambda: dialog.series.rowCount() == 1, timeout=TIMEOUT)
    dialog.series.selectRow(0)
    dialog.retrieve_button.click()
    qtbot.waitUntil(lambda: len(win.files.inputs()) == 1, timeout=TIMEOUT)
    held = [p for p in (tmp_path / "cache").rglob("*")
            if p.is_file() and p.suffix != ".json" and p.name != ".lock"]  # the cache's own lock stays
    assert len(held) >= 5
    dialog.clear_button.click()
    qtbot.waitUntil(lambda: dialog.message.text().startswith("Local cache cleared"), timeout=TIMEOUT)
    assert dialog.message.text() == "Local cache cleared: 1 series deleted from this computer"
    assert not any(p.exists() for p in held)


def test_a_wrong_password_against_a_real_orthanc_is_one_line(qtbot, real_pacs, monkeypatch):
    _win, controller = real_pacs()
    dialog = controller.open_dialog()
    dialog.node.setCurrentText("WEB")
    dialog.password.setText("not-the-password")
    dialog.search_button.click()
    qtbot.waitUntil(lambda: "b00020" in dialog.message.styleSheet(), timeout=TIMEOUT)
    line = dialog.message.text()
    assert line.startswith("pacs WEB: ") and "\n" not in line and "not-the-password" not in line, line
    assert dialog.studies.rowCount() == 0 and dialog.search_button.isEnabled()


def test_send_a_seg_to_a_real_orthanc_and_find_it_there(qtbot, real_pacs, orthanc_server, ct_model):
    win, controller = real_pacs(ct_model)
    dialog = controller.open_dialog()
    dialog.node.setCurrentText("WEB")
    dialog.patient_id.setText("SYN-E2E-1")
    dialog.search_button.click()
    qtbot.waitUntil(lambda: dialog.series.rowCount() == 1, timeout=TIMEOUT)
    dialog.series.selectRow(0)
    dialog.retrieve_button.click()
    qtbot.waitUntil(lambda: "all 5 slices" in win.panel.legend.volume_text(), timeout=TIMEOUT)
    send = controller.open_send_dialog()
    send.node.setCurrentText("WEB")
    send.boxes["sc"].setChecked(True)
    send.boxes["rtstruct"].setChecked(True)
    send.send_button.click()
    qtbot.waitUntil(lambda: send.message.text().startswith(("Sent", "pacs")), timeout=TIMEOUT)
    assert send.message.text() == ("Sent to WEB: DICOM SEG (1 file), Secondary Capture (5 files), RTSTRUCT (1 file); "
                                   "found again by a query (3 of 3 series)")
    studies = orthanc_server.request("GET", "/studies?expand")
    modalities = {s["MainDicomTags"].get("Modality") for study in studies
                  for s in (orthanc_server.request("GET", f"/series/{i}") for i in study["Series"])}
    assert modalities == {"CT", "SEG", "OT", "RTSTRUCT"}


@pytest.mark.parametrize("modality", ["SEG", "RTSTRUCT"])
@pytest.mark.parametrize("node", ["WEB", "DIMSE"])
def test_a_seg_or_rtstruct_retrieved_from_a_real_orthanc_opens_over_its_source(qtbot, real_pacs, orthanc_server,
                                                                               tmp_path, node, modality):
    """A SegLens SEG / RTSTRUCT stored beside its CT series on a real Orthanc: retrieving it alone (C-GET or WADO-RS)
    brings the CT series too, opens it, and the slices' reference is what the SEG holds."""
    import numpy as np
    from PIL import Image

    from app.runs.review.log import corrected_mask_path

    _write_seg(tmp_path / "upload", tmp_path / "derived", modality)
    orthanc_server.upload(sorted((tmp_path / "derived").iterdir()))
    win, controller = real_pacs()
    dialog = controller.open_dialog()
    dialog.node.setCurrentText(node)
    dialog.patient_id.setText("SYN-E2E-1")
    dialog.search_button.click()
    qtbot.waitUntil(lambda: dialog.series.rowCount() == 2, timeout=TIMEOUT)
    [row] = [r for r in range(2) if dialog.series.item(r, 2).text() == modality]
    dialog.series.selectRow(row)
    dialog.retrieve_button.click()
    qtbot.waitUntil(lambda: len(win.files.inputs()) == 1, timeout=TIMEOUT)
    qtbot.waitUntil(lambda: win.state.tuning.reference_root is not None, timeout=TIMEOUT)
    assert "opened over its source series 'Synthetic CT 2.5 mm', as the reference (" in dialog.message.text(), \
        dialog.message.text()
    path = win.files.current_path()
    volume = win.files.volume(path)
    _root, rel = win.files.root_and_rel(path)
    expected = _seg_labels(volume)
    for k in range(volume.depth):
        got = np.asarray(Image.open(corrected_mask_path(Path(win.state.tuning.reference_root), rel, k)))
        assert np.array_equal(got, expected[k]), k


def test_the_models_own_seg_retrieved_is_its_reference_iou_1(qtbot, real_pacs, orthanc_server, ct_model):
    """The viewer's result sent as a SEG, then that SEG retrieved alone: the series opens again with the SEG as its
    slices' reference, and the Decision panel measures the model against it (IoU 1 on a slice with lung)."""
    win, controller = real_pacs(ct_model)
    dialog = controller.open_dialog()
    dialog.node.setCurrentText("WEB")
    dialog.patient_id.setText("SYN-E2E-1")
    dialog.search_button.click()
    qtbot.waitUntil(lambda: dialog.series.rowCount() == 1, timeout=TIMEOUT)
    dialog.series.selectRow(0)
    dialog.retrieve_button.click()
    qtbot.waitUntil(lambda: "all 5 slices" in win.panel.legend.volume_text(), timeout=TIMEOUT)
    send = controller.open_send_dialog()
    send.node.setCurrentText("WEB")
    send.send_button.click()
    qtbot.waitUntil(lambda: send.message.text().startswith(("Sent", "pacs")), timeout=TIMEOUT)
    send.close()
    dialog.search_button.click()
    qtbot.waitUntil(lambda: dialog.series.rowCount() == 2, timeout=TIMEOUT)
    [row] = [r for r in range(2) if dialog.series.item(r, 2).text() == "SEG"]
    dialog.series.selectRow(row)
    dialog.retrieve_button.click()
    qtbot.waitUntil(lambda: win.state.tuning.reference_root is not None, timeout=TIMEOUT)
    assert dialog.message.text().endswith(", as the reference (Show ▸ Difference vs reference; IoU and Dice per "
                                          "slice)"), dialog.message.text()
    qtbot.waitUntil(lambda: "IoU" in win.panel.decision.comparison_text(), timeout=TIMEOUT)
    assert "IoU 1.000" in win.panel.decision.comparison_text(), win.panel.decision.comparison_text()


@pytest.mark.parametrize("scheme", ["dimse://NOBODY@127.0.0.1:{port}", "dicomweb+http://127.0.0.1:{port}/dicom-web"])
def test_a_node_nobody_listens_on_is_one_line_and_the_dialog_stays_usable(qtbot, pacs, scheme):
    from app.io.pacs.connect import connect
    from tests.io.pacs.orthanc import free_port

    win, _controller, _clients = pacs()
    controller = pacs_controller(win)
    controller.worker._connect = connect  # the real clients, against a closed port
    dialog = controller.open_dialog()
    url = scheme.format(port=free_port())
    dialog.node.setCurrentText(url)
    dialog.search_button.click()
    qtbot.waitUntil(lambda: "b00020" in dialog.message.styleSheet(), timeout=TIMEOUT)
    line = dialog.message.text()
    assert line.startswith(f"pacs {url}: ") and "\n" not in line and len(line) < 300, line
    assert dialog.search_button.isEnabled()


def test_closing_the_window_during_a_retrieve_stops_it_and_joins_the_pacs_thread(qtbot, pacs):
    gate = threading.Event()
    win, controller, _clients = pacs(gate=gate)
    dialog = _search(qtbot, controller)
    qtbot.waitUntil(lambda: dialog.series.rowCount() == 2, timeout=TIMEOUT)
    dialog.series.selectRow(1)
    dialog.retrieve_button.click()
    threading.Timer(0.2, gate.set).start()  # the server answers the next file after the window began to close
    win.close()
    assert not controller.pacs_thread.isRunning() and win.files.inputs() == []


def test_a_failure_is_logged_without_the_patient_the_search_named(qtbot, pacs, caplog):
    import logging

    caplog.set_level(logging.DEBUG)
    _win, controller, _clients = pacs(fail="")
    controller.worker._connect = lambda node, *, secret=None: (_ for _ in ()).throw(
        RuntimeError("401 Client Error for url: http://pacs/dicom-web/studies?PatientID=SYN-0001"))
    dialog = _search(qtbot, controller)
    qtbot.waitUntil(lambda: "b00020" in dialog.message.styleSheet(), timeout=TIMEOUT)
    assert dialog.message.text().startswith("RuntimeError: 401 Client Error")  # the reader sees what went wrong
    assert [r for r in caplog.records if "SYN-0001" in r.getMessage() or (r.exc_text or "").count("SYN-0001")] == []


def _retrieve_rows(qtbot, dialog, descriptions):
    qtbot.waitUntil(lambda: dialog.series.rowCount() >= 2, timeout=TIMEOUT)
    rows = [r for r in range(dialog.series.rowCount()) if dialog.series.item(r, 1).text() in descriptions]
    for row in rows:
        dialog.series.selectionModel().select(dialog.series.model().index(row, 0),
                                              dialog.series.selectionModel().SelectionFlag.Select
                                              | dialog.series.selectionModel().SelectionFlag.Rows)
    assert len(dialog.selected_series()) == len(descriptions)
    dialog.retrieve_button.click()
    qtbot.waitUntil(lambda: dialog.retrieve_button.isEnabled() and not dialog.progress.isVisible(), timeout=TIMEOUT)


@pytest.mark.parametrize("modality", ["SEG", "RTSTRUCT"])
def test_a_seg_or_rtstruct_retrieved_opens_its_source_series_too(qtbot, pacs, modality):
    """A SEG alone retrieved said "1 series (1 files) retrieved and opened" and nothing opened: the SEG lists no
    image. Its source series (ReferencedSeriesSequence; an RTSTRUCT's RTReferencedSeriesSequence) is retrieved and
    opened, and the line says what the SEG was opened over."""
    win, controller, clients = pacs(derived=(modality, "1.2.3.1"))
    dialog = _search(qtbot, controller)
    _retrieve_rows(qtbot, dialog, {"Lungs (SegLens)"})
    qtbot.waitUntil(lambda: len(win.files.inputs()) == 1, timeout=TIMEOUT)
    volume = win.files.volume(win.files.current_path())
    assert volume is not None and volume.depth == 4  # the source CT series
    assert clients[-1].retrieved == ["1.2.3.7", "1.2.3.1"]
    line = dialog.message.text()
    assert modality in line and "source series" in line and "Axial 2.5 mm" in line, line
    assert "\n" not in line


def test_a_seg_and_its_source_selected_together_retrieve_the_source_once(qtbot, pacs):
    win, controller, clients = pacs(derived=("SEG", "1.2.3.1"))
    dialog = _search(qtbot, controller)
    _retrieve_rows(qtbot, dialog, {"Lungs (SegLens)", "Axial 2.5 mm"})
    qtbot.waitUntil(lambda: len(win.files.inputs()) == 1, timeout=TIMEOUT)
    assert sorted(clients[-1].retrieved) == ["1.2.3.1", "1.2.3.7"]


def test_a_seg_whose_source_is_not_on_the_pacs_says_so_in_one_line(qtbot, pacs):
    win, controller, clients = pacs(derived=("SEG", "1.2.3.5"))
    dialog = _search(qtbot, controller)
    _retrieve_rows(qtbot, dialog, {"Lungs (SegLens)"})
    line = dialog.message.text()
    assert "SEG" in line and "1.2.3.5" in line and "not on FAKE" in line, line
    assert "retrieved and opened" not in line and "b00020" in dialog.message.styleSheet()
    assert win.files.inputs() == [] and clients[-1].retrieved == ["1.2.3.7"]
    assert win.state.tuning.reference_root is None


def test_the_reopened_dialog_marks_the_previous_search_rows_as_the_previous_searchs(qtbot, pacs):
    """Reopened, the dialog showed the last search's studies and series as if they were current."""
    _win, controller, _clients = pacs()
    dialog = _search(qtbot, controller)
    qtbot.waitUntil(lambda: dialog.series.rowCount() == 2, timeout=TIMEOUT)
    assert dialog.studies_title.text() == "Studies"
    dialog.close()
    assert controller.open_dialog() is dialog
    title = dialog.studies_title.text()
    assert "previous search" in title and "SYN-0001" in title and "FAKE" in title, title
    grey = dialog.studies.item(0, 0).foreground().color()
    assert grey == dialog.palette().color(dialog.palette().ColorGroup.Disabled, dialog.palette().ColorRole.Text)
    assert dialog.message.text() == "Search again to see what the PACS holds now"
    dialog.search_button.click()  # searched again: current rows
    qtbot.waitUntil(lambda: dialog.studies_title.text() == "Studies", timeout=TIMEOUT)
    qtbot.waitUntil(lambda: dialog.series.rowCount() == 2, timeout=TIMEOUT)
    assert dialog.studies.item(0, 0).foreground().style() == dialog.studies.item(0, 0).foreground().style().NoBrush


def test_the_reopened_dialog_says_search_again_once_and_its_title_never_widens_it(qtbot, pacs):
    """The title names the previous search, the line under the tables says to search again (it said both twice),
    and the title wraps instead of widening the dialog (1100 → 1134 px, more with a longer node URL)."""
    _win, controller, _clients = pacs()
    dialog = _search(qtbot, controller)
    qtbot.waitUntil(lambda: dialog.series.rowCount() == 2, timeout=TIMEOUT)
    dialog._searched = "every study on dicomweb+https://pacs.radiology.example-hospital.org:8443/dicom-web at 20:58"
    before = dialog.minimumSizeHint().width()
    dialog.close()
    assert controller.open_dialog() is dialog
    said = f"{dialog.studies_title.text()}\n{dialog.message.text()}"
    assert said.count("Search again") == 1 and said.count("previous search") == 1, said
    assert dialog.minimumSizeHint().width() <= before


def test_the_dialog_says_where_its_nodes_come_from(qtbot, pacs, tmp_path):
    _win, controller, _clients = pacs()
    dialog = controller.open_dialog()
    assert str(tmp_path / "settings.yaml") in dialog.nodes_file.text()


def test_the_dialog_without_nodes_says_which_file_to_add_them_to(qtbot, pacs, tmp_path):
    _win, controller, _clients = pacs()
    (tmp_path / "settings.yaml").unlink()
    dialog = controller.open_dialog()
    text = dialog.nodes_file.text()
    assert str(tmp_path / "settings.yaml") in text and "no nodes" in text.lower(), text


@pytest.mark.parametrize("modality", ["SEG", "RTSTRUCT"])
def test_a_seg_retrieved_is_the_reference_of_its_source_series_slices(qtbot, pacs, modality):
    """The SEG (or RTSTRUCT, its contours filled) read back (app.io.references.derived_labels) over the source
    series it references: each slice's reference is what it holds on that slice, a ring's hole included, so
    Difference vs reference and IoU / Dice compare the model with it."""
    import numpy as np
    from PIL import Image

    from app.runs.review.ground_truth import GroundTruth, References
    from app.runs.review.log import corrected_mask_path

    win, controller, _clients = pacs(derived=(modality, "1.2.3.1"))
    dialog = _search(qtbot, controller)
    _retrieve_rows(qtbot, dialog, {"Lungs (SegLens)"})
    qtbot.waitUntil(lambda: len(win.files.inputs()) == 1, timeout=TIMEOUT)
    assert ", as the reference (" in dialog.message.text(), dialog.message.text()
    path = win.files.current_path()
    volume = win.files.volume(path)
    root, rel = win.files.root_and_rel(path)
    reference = win.state.tuning.reference_root
    assert reference is not None
    expected = _seg_labels(volume)
    for k in range(volume.depth):
        assert np.array_equal(np.asarray(Image.open(corrected_mask_path(Path(reference), rel, k))), expected[k]), k
    spec = type("Spec", (), {"label_count": 3})()
    scored, labels = References().compare(path, expected[1], spec, GroundTruth(root, Path(reference)), frame=1)
    assert labels is not None and scored.metrics is not None and scored.metrics.iou == 1.0
    controller.shutdown()
    assert not Path(reference).exists()  # patient data: gone with the PACS thread
