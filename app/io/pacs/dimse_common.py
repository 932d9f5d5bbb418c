"""What app.io.pacs.dimse and its transfers (dimse_retrieve) share: the SOP class UIDs and the socket tuning,
in a module of their own so the two import it and not each other."""

from __future__ import annotations

import contextlib
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydicom.dataset import Dataset
    from pynetdicom.association import Association

# The SOP classes (pynetdicom.sop_class makes its names at run time: mypy cannot see them)
VERIFICATION = "1.2.840.10008.1.1"
FIND_MODEL = "1.2.840.10008.5.1.4.1.2.2.1"  # Study Root Query/Retrieve Information Model - FIND
MOVE_MODEL = "1.2.840.10008.5.1.4.1.2.2.2"  # ... - MOVE
GET_MODEL = "1.2.840.10008.5.1.4.1.2.2.3"  # ... - GET

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
