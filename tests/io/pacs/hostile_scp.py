"""A hostile DIMSE server on loopback for the PACS tests: a real pynetdicom AE whose C-FIND, C-GET and C-MOVE
handlers lie in ways a broken or malicious PACS can (a dataset of another series under a listed SOP Instance UID,
pending answers that never end, a foreign AE title storing to our C-MOVE destination). No mocks: SegLens's client
talks to it over TCP as it talks to Orthanc.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, generate_uid

CT_IMAGE = "1.2.840.10008.5.1.4.1.1.2"
FIND_MODEL = "1.2.840.10008.5.1.4.1.2.2.1"
MOVE_MODEL = "1.2.840.10008.5.1.4.1.2.2.2"
GET_MODEL = "1.2.840.10008.5.1.4.1.2.2.3"
AE_TITLE = "HOSTILE"


def instance(study: str, series: str, sop: str) -> Dataset:
    """A small CT instance (no patient name: nothing of a patient is needed to lie about UIDs)."""
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.SOPClassUID, ds.SOPInstanceUID = CT_IMAGE, sop
    ds.StudyInstanceUID, ds.SeriesInstanceUID = study, series
    ds.PatientID, ds.Modality, ds.InstanceNumber = "HOSTILE-1", "CT", 1
    return ds


@dataclass
class Series:
    """The series the server lists: its UIDs and its instances' SOP Instance UIDs."""

    study: str = field(default_factory=generate_uid)
    series: str = field(default_factory=generate_uid)
    sops: list[str] = field(default_factory=lambda: [generate_uid() for _ in range(3)])

    def datasets(self) -> list[Dataset]:
        return [instance(self.study, self.series, sop) for sop in self.sops]


@dataclass
class Hostile:
    """What the server does, set by each test before it asks (the handlers read it on every request)."""

    listed: Series = field(default_factory=Series)
    sent: Callable[[Series], list[Dataset]] = lambda s: s.datasets()  # what a C-GET / C-MOVE sends
    endless_find: float | None = None  # seconds between pending C-FIND answers, for ever (None: answer normally)
    endless_retrieve: bool = False  # C-GET / C-MOVE: send the first instance again and again, for ever
    before_move: Callable[[str, int], None] | None = None  # called with our C-MOVE destination before storing
    listed_class: str = CT_IMAGE  # the SOP Class UID an image-level C-FIND lists
    finds: int = 0  # pending C-FIND answers sent (the test reads how far an endless one got)
    find_ended: threading.Event = field(default_factory=threading.Event)  # an endless C-FIND's answers stopped
    stop: threading.Event = field(default_factory=threading.Event)


class HostileScp:
    """The server: `.port`, `.behaviour` (a Hostile), `.destination` (where C-MOVE stores: host, port)."""

    def __init__(self) -> None:
        from pynetdicom import AE, evt

        self.behaviour = Hostile()
        self.destination: tuple[str, int] = ("127.0.0.1", 0)
        ae = AE(ae_title=AE_TITLE)
        ae.network_timeout = ae.acse_timeout = ae.dimse_timeout = 5
        for model in (FIND_MODEL, MOVE_MODEL, GET_MODEL):
            ae.add_supported_context(model)
        ae.add_supported_context(CT_IMAGE, ExplicitVRLittleEndian, scu_role=False, scp_role=True)
        ae.add_requested_context(CT_IMAGE, ExplicitVRLittleEndian)  # C-MOVE's sub-operations
        handlers = [(evt.EVT_C_FIND, self._find), (evt.EVT_C_GET, self._get), (evt.EVT_C_MOVE, self._move)]
        self.server = ae.start_server(("127.0.0.1", 0), block=False, evt_handlers=handlers)
        self.port = int(self.server.server_address[1])

    def close(self) -> None:
        self.behaviour.stop.set()
        self.server.shutdown()

    def _find(self, event: Any) -> Iterator[tuple[int, Dataset | None]]:
        asked, how = event.identifier, self.behaviour
        if how.endless_find is not None:
            try:
                while not how.stop.is_set():
                    found = Dataset()
                    found.QueryRetrieveLevel = asked.QueryRetrieveLevel
                    found.StudyInstanceUID = generate_uid()
                    found.SeriesInstanceUID = generate_uid()
                    how.finds += 1
                    yield 0xFF00, found
                    if how.endless_find:
                        time.sleep(how.endless_find)
            finally:  # pynetdicom let go of the answers: the association is gone
                how.find_ended.set()
            return
        for ds in how.listed.datasets():
            found = Dataset()
            found.QueryRetrieveLevel = asked.QueryRetrieveLevel
            found.StudyInstanceUID, found.SeriesInstanceUID = ds.StudyInstanceUID, ds.SeriesInstanceUID
            found.SOPInstanceUID, found.SOPClassUID = ds.SOPInstanceUID, how.listed_class
            yield 0xFF00, found
        yield 0x0000, None

    def _datasets(self) -> Iterator[tuple[int, Dataset]]:
        how = self.behaviour
        if how.endless_retrieve:
            first = how.listed.datasets()[0]
            while not how.stop.is_set():
                yield 0xFF00, first
            return
        for ds in how.sent(how.listed):
            yield 0xFF00, ds

    def _get(self, event: Any) -> Iterator[Any]:
        yield 65000 if self.behaviour.endless_retrieve else len(self.behaviour.sent(self.behaviour.listed))
        yield from self._datasets()

    def _move(self, event: Any) -> Iterator[Any]:
        host, port = self.destination
        if self.behaviour.before_move is not None:
            self.behaviour.before_move(host, port)
        yield host, port
        yield 65000 if self.behaviour.endless_retrieve else len(self.behaviour.sent(self.behaviour.listed))
        yield from self._datasets()


def store_as(title: str, host: str, port: int, called: str) -> str:
    """What happens when `title` asks to store one instance at host:port (called AE `called`): "rejected",
    "refused" (no connection), or "accepted"."""
    from pynetdicom import AE

    ae = AE(ae_title=title)
    ae.acse_timeout = ae.network_timeout = ae.connection_timeout = 5
    ae.add_requested_context(CT_IMAGE, ExplicitVRLittleEndian)
    assoc = ae.associate(host, port, ae_title=called)
    if assoc.is_rejected:
        return "rejected"
    if not assoc.is_established:
        return "refused"
    assoc.abort()
    return "accepted"
