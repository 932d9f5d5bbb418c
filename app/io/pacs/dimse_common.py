"""What app.io.pacs.dimse and its transfers (dimse_retrieve) share: the SOP class UIDs, the socket tuning and the
bounds of an operation, in a module of their own so the two import it and not each other.

A DIMSE server is someone else's program: it may answer a C-FIND with pending matches for ever, or a C-GET with
sub-operations that never end, each quickly enough to keep pynetdicom's per-message timeout happy. So every
C-FIND, C-GET and C-MOVE is bounded as a whole (app.guard.net.Deadline, from the node's timeout) and by a cap on
its answers; past either the association is aborted and the operation is one PacsError line."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING, TypeVar

from app.guard.net import Deadline

if TYPE_CHECKING:
    from pydicom.dataset import Dataset
    from pynetdicom.association import Association

# The SOP classes (pynetdicom.sop_class makes its names at run time: mypy cannot see them)
VERIFICATION = "1.2.840.10008.1.1"
FIND_MODEL = "1.2.840.10008.5.1.4.1.2.2.1"  # Study Root Query/Retrieve Information Model - FIND
MOVE_MODEL = "1.2.840.10008.5.1.4.1.2.2.2"  # ... - MOVE
GET_MODEL = "1.2.840.10008.5.1.4.1.2.2.3"  # ... - GET

DEADLINE_FACTOR = 10  # a whole C-FIND may take 10 × the node's timeout (5 minutes at the default 30 s)
RETRIEVE_PER_INSTANCES = 10  # a retrieve: that, plus one timeout per 10 instances of the series
MAX_MATCHES = 10_000  # studies or series one C-FIND may answer: more is a search to narrow (or no end)
MAX_INSTANCES = 100_000  # instances one series may list (an image-level C-FIND)

_T = TypeVar("_T")


def find_deadline(timeout_s: float) -> Deadline:
    """The deadline of one whole C-FIND on a node whose timeout (for one message) is `timeout_s`."""
    return Deadline(timeout_s * DEADLINE_FACTOR, "C-FIND")


def retrieve_deadline(timeout_s: float, instances: int, what: str) -> Deadline:
    """The deadline of one whole C-GET or C-MOVE of a series of `instances` (a large series may take longer)."""
    return Deadline(timeout_s * (DEADLINE_FACTOR + instances / RETRIEVE_PER_INSTANCES), what)


def answer_cap(instances: int) -> int:
    """How many responses (or stored datasets) a retrieve of `instances` may bring before it is cut: a server
    sends at most one pending response per sub-operation; twice that, and some, is no honest server."""
    return 2 * instances + 16


def bounded(answers: Iterator[_T], assoc: Association, deadline: Deadline, per_message: float) -> Iterator[_T]:
    """`answers` (pynetdicom's responses) while `deadline` holds: each wait for the next message lasts at most
    what is left (and at most `per_message`), and DeadlineExceeded is raised once it has passed, also for an
    answer that came (or a wait that ended) after it. The caller's association context aborts."""
    while True:
        deadline.check()
        assoc.dimse_timeout = deadline.timeout(per_message)
        try:
            item = next(answers)
        except StopIteration:
            return
        deadline.check()
        yield item


def no_delay(assoc: Association) -> None:
    """TCP_NODELAY on the association's socket: pynetdicom leaves Nagle's algorithm on, so a small PDU (a C-STORE
    response) may wait for the peer's delayed ACK. The server's side is its own configuration: Orthanc (DCMTK)
    with Nagle on takes ~47 ms per small instance of a C-GET (docs/PERFORMANCE.md, "PACS retrieve")."""
    raw = getattr(getattr(assoc.dul, "socket", None), "socket", None)
    if isinstance(raw, socket.socket):
        with contextlib.suppress(OSError):  # not TCP (a test's socket pair): nothing to tune
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def describe_status(code: int, status: Dataset | None = None) -> str:
    """`0xA700 (Out of Resources)` and the server's comment when it gave one."""
    from pynetdicom import status as statuses
    from pynetdicom.status import code_to_category

    name = ""
    for table in (statuses.QR_FIND_SERVICE_CLASS_STATUS, statuses.QR_GET_SERVICE_CLASS_STATUS,
                  statuses.STORAGE_SERVICE_CLASS_STATUS, statuses.GENERAL_STATUS):
        if code in table:
            name = table[code][1]
            break
    name = name or code_to_category(code)
    comment = str(status.get("ErrorComment", "")) if status is not None else ""
    return f"status 0x{code:04X} ({name.rstrip('.')})" + (f": {' '.join(comment.split())[:120]}" if comment else "")
