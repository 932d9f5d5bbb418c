"""Results ▸ Send to PACS…, off the GUI thread: the worker's PacsSend turned into the run's record and sent by the one
store-and-verify (app.runs.pacs.send: the exports written as a run writes them, stored, found again by a query),
its outcome turned back into the worker's PacsSent. Qt-free; app.ui.workers.pacs_worker gives it its thread.

A pseudonymised result is sent only to a research node: stored beside the identified study, it would look like a
second, unrelated patient; an identified one never to a research node (the one rule of every send)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from app.runs.pacs.send import send_refusal

if TYPE_CHECKING:
    from app.io.pacs.client import PacsClient
    from app.runs.pacs.send import VolumeResult
    from app.ui.state.pacs_messages import PacsSend, PacsSent

__all__ = ["send_refusal", "send_volume", "write_exports"]


def send_volume(request: PacsSend, client: PacsClient, *,
                progress: Callable[[int, int], None] | None = None) -> PacsSent:
    """Write, store and verify `request`'s exports; PacsError (one line) when the node refuses or is not there."""
    from app.runs.pacs.send import send_volume as send
    from app.ui.state.pacs_messages import PacsSent

    done = send(volume_result(request), client, progress=progress)
    return PacsSent(request.request_id, done.sent.stored, done.sent.found, done.line())


def write_exports(request: PacsSend, folder: Path) -> list[tuple[str, list[Path]]]:
    """Each asked export of the request's volume into `folder`, as a run writes it: [(kind, its files)]."""
    from app.runs.pacs.send import write_exports as write

    return write(volume_result(request), folder)


def volume_result(request: PacsSend) -> VolumeResult:
    """The run's record of what `request` asks to send."""
    from app.runs.pacs.send import VolumeResult

    return VolumeResult(volume=request.volume, labels=request.labels, classes=request.classes,
                        model_path=request.model_path, kinds=request.kinds, anonymize=request.anonymize,
                        opacity=request.opacity)
