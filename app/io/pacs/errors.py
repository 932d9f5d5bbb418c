"""The PACS error: one line naming the node (the bottom of app.io.pacs: nodes, the cache and the clients raise it)."""

from __future__ import annotations

from typing import Protocol

from app.errors import SegLensError


class PacsError(SegLensError):
    """A PACS operation failed: one line naming the node, e.g.
    "pacs ORTHANC: association rejected: called AE title not recognised"."""


class _Named(Protocol):
    @property
    def name(self) -> str: ...


def pacs_error(node: _Named, problem: str) -> PacsError:
    """The one-line error for `problem` on `node` ("pacs NAME: problem")."""
    return PacsError(f"pacs {node.name}: {problem}")
