"""`connect`: a PacsNode → its client (app.io.pacs.dimse.DimseClient or app.io.pacs.dicomweb.DicomWebClient),
apart from the records in app.io.pacs.client so the clients import those and this imports the clients (no circle).
The networking libraries load here, on the first connection, not at import."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.errors import need_extra
from app.io.pacs.client import pacs_error

if TYPE_CHECKING:
    from app.io.pacs.client import PacsClient
    from app.io.pacs.nodes import PacsNode


def connect(node: PacsNode, *, secret: str | None = None) -> PacsClient:
    """A client for `node`: DimseClient for "dimse", DicomWebClient for "dicomweb". `secret` is the password or
    token (dicomweb); the networking library is imported here, not before. A node whose secret would travel in
    clear text (app.io.pacs.nodes.credentials_refusal) is one PacsError line, before anything is sent; without the
    pacs extra, one MissingExtra line."""
    from app.io.pacs.nodes import credentials_refusal

    refusal = credentials_refusal(node)
    if refusal:
        raise pacs_error(node, refusal)
    if node.kind == "dimse":
        need_extra("pynetdicom", extra="pacs", feature="PACS")
        from app.io.pacs.dimse import DimseClient

        return DimseClient(node)
    if node.kind == "dicomweb":
        need_extra("dicomweb_client", extra="pacs", feature="PACS")
        from app.io.pacs.dicomweb import DicomWebClient

        return DicomWebClient(node, secret=secret)
    raise pacs_error(node, f"unknown kind {node.kind!r} (dimse or dicomweb)")
